//===- Executor.h - Runs one program of a plan on a backend ---------------===//
//
// Creating an executor validates every instruction against the backend's
// kernel contracts, then allocates exactly the plan's predicted memory (one
// arena, the weights and, for a training plan, the zeroed state region) and
// reads the weights. Nothing runs unless all of
// that succeeded.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Plan.h"

#include <memory>
#include <string>
#include <vector>

namespace cleave::runtime {

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

  /// Bytes this executor allocated on the device (arena, weights, state).
  size_t allocatedBytes() const {
    return program_.arenaBytes + program_.weightRegionBytes + program_.stateBytes;
  }

  /// The persistent tensors of a training program: a weight by its name in
  /// the weights file, a state by its name. Copies between the device and
  /// host memory of exactly the tensor's size (checkpoints, saved weights).
  Status readWeight(const std::string &name, void *data, size_t bytes) const;
  Status writeWeight(const std::string &name, const void *data, size_t bytes);
  Status readState(const std::string &name, void *data, size_t bytes) const;
  Status writeState(const std::string &name, const void *data, size_t bytes);
  /// The whole state region (its layout is the program's), for checkpoints.
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
  struct Prepared {
    const InstructionSpec *spec;
    KernelFn fn;
    KernelCall call;
  };

  Executor(const ProgramSpec &program, Backend &backend) : program_(program), backend_(backend) {}
  void *bufferData(int64_t id) const;
  const Binding *findBinding(const std::vector<Binding> &list, const std::string &name) const;
  Status copyIn(const std::vector<Binding> &bindings, const std::string &name, const void *data,
                size_t bytes);
  Status copyOut(const std::vector<Binding> &bindings, const std::string &name, void *data,
                 size_t bytes) const;
  Status persistent(bool state, const std::string &name, size_t bytes, void **ptr) const;

  const ProgramSpec &program_;
  Backend &backend_;
  void *arena_ = nullptr;
  void *weights_ = nullptr;
  void *state_ = nullptr;
  std::vector<std::pair<std::string, std::vector<Prepared>>> phases_;
  bool profiling_ = false;
  std::vector<double> seconds_;
};

} // namespace cleave::runtime
