//===- HostStagedCommunicator.h - Device tensors over a host communicator -===//
//
// Moves device-memory tensors through a host communicator (MPI) by staging
// every transfer through host memory: device -> host, the host collective or
// message, host -> device. Slower than NCCL, but it needs neither a GPU per
// rank nor NCCL: GPU ranks that share one GPU (which NCCL refuses) can run a
// multi-device plan, which is how the one-GPU test machines check pp, tp and
// dp plans on the CUDA backend (`--gpu-comm mpi`).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H
#define CLEAVE_RUNTIME_COMM_HOSTSTAGEDCOMMUNICATOR_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include <cstdlib>
#include <memory>
#include <string>

namespace cleave::runtime {

class HostStagedCommunicator final : public Communicator {
public:
  /// Stages through `host` (not owned, must outlive this) with `device`'s
  /// copies.
  HostStagedCommunicator(Communicator &host, Backend &device, std::string name);
  /// Owns `host` (a group split off another staged communicator).
  HostStagedCommunicator(std::unique_ptr<Communicator> host, Backend &device, std::string name);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string &name() const override { return name_; }

  Status allReduce(const void *in, void *out, size_t count, DType dtype, ReduceOp op) override;
  Status allGather(const void *in, void *out, size_t count, DType dtype) override;
  Status reduceScatter(const void *in, void *out, size_t count, DType dtype,
                       ReduceOp op) override;
  Status allToAll(const void *in, void *out, size_t count, DType dtype) override;
  Status broadcast(void *buffer, size_t count, DType dtype, int root) override;
  Status barrier() override;
  Status send(const void *buffer, size_t count, DType dtype, int peer, int tag) override;
  Status recv(void *buffer, size_t count, DType dtype, int peer, int tag) override;
  Status isend(const void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override;
  Status irecv(void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override;
  Status split(int color, int key, const std::string &name,
               std::unique_ptr<Communicator> *group) override;
  [[noreturn]] void abortJob(int exitCode) override {
    host_->abortJob(exitCode);
    std::abort(); // not reached: abortJob does not return
  }

private:
  std::unique_ptr<Communicator> owned_;
  Communicator *host_;
  Backend &device_;
  std::string name_;
};

} // namespace cleave::runtime

#endif
