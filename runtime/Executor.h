//===- Executor.h - Runs one program of a plan on a backend ---------------===//
//
// Creating an executor validates every instruction against the backend's
// kernel contracts, then allocates exactly the plan's predicted memory (one
// arena, the weights and, for a training plan, the zeroed state region) and
// reads the weights. Nothing runs unless all of
// that succeeded.
//
// A spilled plan (docs/plan-format.md, "Spilling to host memory") also has
// a host pool: weights and states in plain host memory, outside the
// device's, which `prefetch` copies into the arena and `spill` copies back
// into on the backend's copy queue while the kernels go on. The executor
// orders them: before an instruction runs it waits for the copies in
// flight whose destination overlaps what it reads or writes, or whose
// source overlaps what it writes; a phase ends when every copy is done.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Plan.h"

#include <deque>
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace cleave::runtime {

/// What a spilled plan's copies cost, summed since the executor was created.
struct CopyStats {
  /// Bytes `prefetch` copied host to device, `spill` device to host.
  uint64_t prefetchBytes = 0, spillBytes = 0;
  uint64_t prefetches = 0, spills = 0;
  /// Seconds the copy queue was busy copying, and seconds the instructions
  /// (the compute thread) waited for copies to finish.
  double copySeconds = 0, stallSeconds = 0;

  /// 1 - stall / copy: the share of the copying hidden behind the kernels
  /// (1 when nothing was copied). The stall also counts the copy thread's
  /// wake-up, so it can exceed the copying itself: then nothing was hidden
  /// (0), and stallSeconds says by how much.
  double overlap() const {
    return copySeconds > 0 ? std::clamp(1 - stallSeconds / copySeconds, 0.0, 1.0) : 1;
  }
  CopyStats operator-(const CopyStats &before) const;
};

class Executor {
public:
  /// `dpIndex`: this rank's index in its dp group, which says the part it
  /// loads of a weight the program holds as a ZeRO part.
  static Status create(const ProgramSpec &program, Backend &backend,
                       std::unique_ptr<Executor> *out, int64_t dpIndex = 0);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Copies host data into the buffer bound to input `name`.
  Status setInput(const std::string &name, const void *data, size_t bytes);
  /// Runs the instructions of the first phase named `phase` in order.
  Status run(const std::string &phase = "forward");
  /// Runs phase `index` of the program (ProgramSpec::phases).
  Status runPhase(size_t index);
  /// Like setInput/getOutput, for the bindings of phase `index` only: a
  /// multi-device program binds each model input or output in the phases
  /// (chunks) that read or compute it.
  Status setPhaseInput(size_t index, const std::string &name, const void *data, size_t bytes);
  Status getPhaseOutput(size_t index, const std::string &name, void *data, size_t bytes) const;
  /// Copies the buffer bound to output `name` to host memory.
  Status getOutput(const std::string &name, void *data, size_t bytes) const;

  /// Checks that `inputs` holds exactly this program's inputs, with their
  /// shapes and dtypes, then copies each into its buffer.
  Status setInputs(const SafetensorsIndex &inputs);
  /// Writes every output, named as bound, to `path` (atomically).
  Status writeOutputs(const std::string &path) const;

  /// Bytes this executor allocated on the device (arena, device weights,
  /// device state).
  size_t allocatedBytes() const {
    return program_.arenaBytes + program_.weightRegionBytes + program_.stateBytes;
  }
  /// Bytes it allocated in host memory: the host pool (host weights, host
  /// state); 0 unless the plan spills.
  size_t hostBytes() const { return program_.hostBytes(); }
  /// The copies of the phases run so far.
  CopyStats copyStats() const;

  /// The persistent tensors of a training program: a weight by its name in
  /// the weights file, a state by its name, in either pool. Copies between
  /// the executor's memory and `data` of exactly the tensor's size
  /// (checkpoints, saved weights).
  Status readWeight(const std::string &name, void *data, size_t bytes) const;
  Status writeWeight(const std::string &name, const void *data, size_t bytes);
  Status readState(const std::string &name, void *data, size_t bytes) const;
  Status writeState(const std::string &name, const void *data, size_t bytes);
  /// Every state at once: `stateRegionBytes()` bytes, the state region
  /// (state_bytes) followed by the host state region (host_state_bytes),
  /// each laid out as the program places its states.
  size_t stateRegionBytes() const { return program_.stateBytes + program_.hostStateBytes; }
  Status readStateRegion(void *data) const;
  Status writeStateRegion(const void *data);
  const ProgramSpec &program() const { return program_; }

  /// Wall time of each instruction of the last run (of the phase it ran),
  /// when profiling is on.
  void setProfiling(bool on) { profiling_ = on; }
  const std::vector<double> &lastRunSeconds() const { return seconds_; }

private:
  static Status createImpl(const ProgramSpec &program, Backend &backend,
                           std::unique_ptr<Executor> *out, int64_t dpIndex);
  /// Where a buffer's bytes are, for ordering copies: the region and
  /// [begin, end) in it.
  enum class Region : uint8_t { Arena, Weights, State, HostWeights, HostState };
  struct Span {
    Region region;
    size_t begin, end;
  };
  static bool overlap(const Span &a, const Span &b) {
    return a.region == b.region && a.begin < b.end && b.begin < a.end;
  }
  enum class Copy : uint8_t { None, Prefetch, Spill };
  struct Prepared {
    const InstructionSpec *spec;
    KernelFn fn;
    KernelCall call;
    /// A prefetch or spill runs on the copy queue, not as a kernel.
    Copy copy = Copy::None;
    /// What the instruction reads or writes (inputs, outputs, scratch), and
    /// of those what it writes (outputs, scratch); empty spans left out.
    std::vector<Span> touches, writes;
  };
  struct InFlight {
    uint64_t ticket;
    Span source, destination;
  };

  Executor(const ProgramSpec &program, Backend &backend) : program_(program), backend_(backend) {}
  void *bufferData(int64_t id) const;
  Span bufferSpan(int64_t id) const;
  /// Runs the instructions of a phase; copies may still be in flight.
  Status runInstructions(size_t index);
  /// Waits for the copies in flight that `p` must not overlap.
  Status awaitCopiesBefore(const Prepared &p);
  /// Waits until copy `ticket` is done (and every one before it).
  Status awaitCopy(uint64_t ticket);
  const Binding *findBinding(const std::vector<Binding> &list, const std::string &name) const;
  Status copyIn(const std::vector<Binding> &bindings, const std::string &name, const void *data,
                size_t bytes);
  Status copyOut(const std::vector<Binding> &bindings, const std::string &name, void *data,
                 size_t bytes) const;
  /// The tensor's data, and whether it is in the host pool.
  Status persistent(bool state, const std::string &name, size_t bytes, void **ptr,
                    bool *host) const;

  struct FreeHost {
    void operator()(void *p) const;
  };

  const ProgramSpec &program_;
  Backend &backend_;
  void *arena_ = nullptr;
  void *weights_ = nullptr;
  void *state_ = nullptr;
  /// The host pool: plain host memory, not the backend's.
  std::unique_ptr<void, FreeHost> hostWeights_, hostState_;
  /// Set for a spilled plan: the backend's copy queue, the copies issued
  /// and not yet seen done (in ticket order), and their statistics.
  std::unique_ptr<CopyQueue> copies_;
  std::deque<InFlight> inFlight_;
  uint64_t lastTicket_ = 0;
  CopyStats stats_;
  std::vector<std::pair<std::string, std::vector<Prepared>>> phases_;
  bool profiling_ = false;
  std::vector<double> seconds_;
};

} // namespace cleave::runtime
