//===- CommKernels.h - The kernels that move tensors between ranks -*- C++
//-*-===//
//
// A multi-device program's collectives (all_reduce, all_gather,
// reduce_scatter, all_to_all on its tp or dp group) and pipeline transfers
// (send, recv to the same tp and dp index of another stage) run through a
// Communicator. CommBackend adds these kernels to a compute backend (the CPU
// one now), so the Executor runs a partitioned program like any other.
//
// Sends are buffered: a send copies its tensor aside and returns, so a stage
// goes on to its next microbatch while the transfer is in flight; the next
// send of the same instruction waits for the previous one (backpressure of
// one microbatch). Receives block: the time a stage waits there is its
// pipeline bubble. Buffers live in the compute backend's memory, so the
// same kernels run over MPI on CPU ranks and over NCCL on GPU ranks (where
// "block" means ordered on the GPU's stream, see cuda/NcclCommunicator.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Kernel.h"
#include "runtime/Plan.h"
#include "runtime/comm/Communicator.h"

#include <memory>

namespace cleave::runtime {

/// The groups one rank talks in.
struct RankComms {
  Communicator *world = nullptr; // pipeline transfers, by world rank
  Communicator *tp = nullptr;    // ordered by tp index
  Communicator *dp = nullptr;    // ordered by dp index
};

class CommBackend : public Backend {
public:
  /// Kernels for `rank` of `plan`; `compute` runs everything else and owns
  /// the memory. Both must outlive this backend.
  CommBackend(Backend &compute, const Plan &plan, int64_t rank, RankComms comms);
  ~CommBackend() override;

  const char *name() const override { return compute_.name(); }
  bool hasKernel(std::string_view kernel) const override;
  std::vector<std::string> kernelNames() const override;
  Status prepareKernel(const KernelSignature &signature, KernelFn *fn) override;

  Status allocate(size_t bytes, void **out) override { return compute_.allocate(bytes, out); }
  void deallocate(void *ptr) override { compute_.deallocate(ptr); }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return compute_.copyToDevice(dst, src, bytes);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return compute_.copyToHost(dst, src, bytes);
  }
  Status copyOnDevice(void *dst, const void *src, size_t bytes) override {
    return compute_.copyOnDevice(dst, src, bytes);
  }
  Status copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                  size_t rows) override {
    return compute_.copyRows(dst, dstPitch, src, srcPitch, width, rows);
  }
  Status synchronize() override { return compute_.synchronize(); }
  bool sharesHostMemory() const override { return compute_.sharesHostMemory(); }
  size_t workspaceBytes() const override { return compute_.workspaceBytes(); }
  Status createCopyQueue(std::unique_ptr<CopyQueue> *out) override {
    return compute_.createCopyQueue(out);
  }

  /// Waits until every buffered send has left this rank.
  Status finishSends();
  /// Bytes the comm kernels hold in the compute backend's memory besides the
  /// plan's arena: send staging and the rearrangement buffers of blocked
  /// layouts.
  size_t heldBytes() const;

  struct State;

private:
  Backend &compute_;
  std::unique_ptr<State> state_;
};

/// The rearrangements the layout changes need, exposed for tests. A tensor
/// of `shape` whose dim `dim` is laid out as `blocks` blocks of `parts`
/// parts each; part `part` of every block is a tensor of the same shape
/// with that dim divided by `parts`.
void extractPart(const void *whole, const Shape &shape, int64_t dim, int64_t blocks, int64_t parts,
                 int64_t part, size_t elementBytes, void *out);
/// The inverse: writes `in` into part `part` of every block of `whole`.
void insertPart(const void *in, const Shape &shape, int64_t dim, int64_t blocks, int64_t parts,
                int64_t part, size_t elementBytes, void *whole);

} // namespace cleave::runtime
