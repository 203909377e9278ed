//===- NcclCommunicator.h - Collectives and transfers between GPUs --------===//
//
// The Communicator interface (runtime/comm/Communicator.h) over NCCL, with
// buffers in the device memory of one CUDA backend. One NCCL communicator per
// group (world for pipeline pairs, each tp and dp group), bootstrapped over
// the MPI group it mirrors: its rank 0 creates the unique id and broadcasts
// it.
//
// Ordering instead of blocking: each communicator issues its work on its own
// stream. An operation first makes that stream wait for the compute stream
// (an event), so it sees every kernel issued before it; a blocking call then
// makes the compute stream wait for the operation, so kernels issued after
// it see its result. The host never waits, except in barrier(). An isend or
// irecv returns a Request whose wait() orders the compute stream after the
// transfer; a buffered send therefore overlaps the next microbatch's
// compute. Operations of one communicator run in issue order on its stream,
// as NCCL requires.
//
// Unlike MPI: NCCL has no tags, so transfers between two ranks match in the
// order they are issued, whatever the tag; a size mismatch is not detected;
// bf16 sums round at each reduction step (MPI here sums in f32 and rounds
// once); and since a receive holds its stream until the matching send
// arrives, two ranks that each receive before they send to the other wait
// forever. Forward pipelines (recv from the previous stage, send to the
// next) never do; whether every interleaved schedule avoids it is not
// checked yet.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/cuda/DeviceContext.h"

#include <memory>

namespace cleave::runtime::cuda {

Status createNcclCommunicator(Communicator &bootstrap, DeviceContext &ctx, const std::string &name,
                              std::unique_ptr<Communicator> *out);

} // namespace cleave::runtime::cuda
