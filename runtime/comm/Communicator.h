//===- Communicator.h - Collectives and messages between ranks --*- C++ -*-===//
//
// A Communicator connects one group of ranks: the world, a tp group, a dp
// group, or the two stages of a pipeline pair. The executor moves activations
// and gradients between devices only through this interface.
//
// MPI is the CPU implementation (comm/MpiCommunicator.h). A NCCL
// implementation for GPUs will sit behind this same interface, bootstrapped
// over the MPI world (its unique id sent with broadcast), with buffers in
// device memory; callers will not change.
//
// Contract: calls block unless named i*. Every rank of the group calls a
// collective in the same order with the same count and dtype. Buffers are
// host memory for MPI. Every call returns a Status; a failure names the
// operation, the group, this rank and the peer, and leaves the communicator
// usable when the implementation can tell it is (argument errors always do).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/DType.h"
#include "runtime/Status.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace cleave::runtime {

enum class ReduceOp : uint8_t { Sum };

const char *reduceOpName(ReduceOp op);

/// Whether a reduction can run on this dtype: sums on f32, bf16, i64 and i32.
/// Over MPI, bf16 sums accumulate in f32 and round once to bf16 (to nearest,
/// ties to even), whatever the order the ranks' values arrive in; NCCL sums
/// bf16 itself. f16 sums are not supported yet.
bool canReduce(ReduceOp op, DType dtype);

/// A pending isend or irecv. The buffer it was given must stay alive and
/// untouched until wait() returns. Move-only.
class Request {
public:
  /// What an implementation keeps for one pending transfer.
  class Impl {
  public:
    virtual ~Impl() = default;
    virtual Status wait() = 0;
  };

  Request() = default;
  explicit Request(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Request(Request &&) = default;
  Request &operator=(Request &&other);
  /// A request dropped while pending is waited for (its error is lost), so
  /// a forgotten wait() can never leave MPI writing into freed memory.
  ~Request();

  /// Blocks until the transfer completes. Waiting on an empty or already
  /// completed request returns ok.
  Status wait();
  bool pending() const { return impl_ != nullptr; }

private:
  std::unique_ptr<Impl> impl_;
};

/// Waits for every request, even after a failure; returns the first error.
Status waitAll(std::vector<Request> &requests);

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This rank's index in the group, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The group's name in errors: "world", "world/tp0", ...
  virtual const std::string &name() const = 0;

  /// out[i] = op over ranks of in[i], on every rank. `in` may equal `out`.
  virtual Status allReduce(const void *in, void *out, size_t count, DType dtype,
                           ReduceOp op) = 0;
  /// Each rank gives `count` elements; out holds size()*count elements, rank
  /// r's at offset r*count. In place when in == out + rank()*count.
  virtual Status allGather(const void *in, void *out, size_t count,
                           DType dtype) = 0;
  /// in holds size()*count elements; rank r gets in out the reduction over
  /// ranks of block r (count elements). in and out must not overlap.
  virtual Status reduceScatter(const void *in, void *out, size_t count,
                               DType dtype, ReduceOp op) = 0;
  /// in and out hold size()*count elements: block p of in goes to peer p,
  /// block p of out came from peer p. in and out must not overlap.
  virtual Status allToAll(const void *in, void *out, size_t count,
                          DType dtype) = 0;
  /// Copies `root`'s buffer into every other rank's buffer.
  virtual Status broadcast(void *buffer, size_t count, DType dtype,
                           int root) = 0;
  virtual Status barrier() = 0;

  /// Point to point between this rank and `peer` (a rank of this group).
  /// Messages with the same peer and tag arrive in the order they were
  /// sent; recv fails unless exactly `count` elements arrive. Blocking
  /// send/recv to this rank itself is refused (it would deadlock); use
  /// isend/irecv for that.
  virtual Status send(const void *buffer, size_t count, DType dtype, int peer,
                      int tag) = 0;
  virtual Status recv(void *buffer, size_t count, DType dtype, int peer,
                      int tag) = 0;
  virtual Status isend(const void *buffer, size_t count, DType dtype, int peer,
                       int tag, Request *request) = 0;
  virtual Status irecv(void *buffer, size_t count, DType dtype, int peer,
                       int tag, Request *request) = 0;

  /// Collective over this group: ranks with the same `color` form a new
  /// group, ordered by `key` (ties by rank here). A negative color joins no
  /// group and gets a null *group. `name` names the new group in errors;
  /// empty gives "<this name>/<color>".
  virtual Status split(int color, int key, const std::string &name,
                       std::unique_ptr<Communicator> *group) = 0;

  /// Ends every rank of the job with `exitCode`. For a rank that cannot go
  /// on: returning instead would leave its peers waiting in the next
  /// collective forever.
  [[noreturn]] virtual void abortJob(int exitCode) = 0;
};

} // namespace cleave::runtime
