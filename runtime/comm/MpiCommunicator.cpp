//===- MpiCommunicator.cpp - Communicators over MPI -----------------------===//
//
// Each call checks its arguments first (peer, tag, count, dtype), so the
// common mistakes get a message in the user's words without reaching MPI;
// what MPI itself rejects comes back with MPI's error string.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include "runtime/BFloat16.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>

namespace cleave::runtime {
namespace {

using detail::concat;

std::string mpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return concat("MPI error ", code);
  return std::string(text, length);
}

bool mpiFinalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

void finalizeMpi() {
  if (!mpiFinalized())
    MPI_Finalize();
}

Status startMpi() {
  if (mpiFinalized())
    return CLEAVE_ERROR("MPI was already finalized in this process and "
                        "cannot start again");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      return CLEAVE_ERROR("starting MPI (MPI_Init_thread) failed: ",
                          mpiErrorString(rc));
    std::atexit(finalizeMpi);
  }
  // MPI's default handler aborts the whole job on any error.
  int rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS)
    return CLEAVE_ERROR("setting MPI errors to return failed: ",
                        mpiErrorString(rc));
  return Status();
}

/// Reductions only see f32/i64/i32; the 16-bit floats and i1 only move, so
/// their MPI type just has to have the right size.
MPI_Datatype mpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::BF16:
  case DType::F16:
    return MPI_UINT16_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I1:
    return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return MPI_SUM;
  }
  return MPI_OP_NULL;
}

/// The operation a failure is reported against: "send to peer 3", with the
/// group appended by MpiCommunicator::describe.
struct Call {
  const char *op;
  const char *toward = nullptr; // "to" or "from" the peer, if there is one
  int peer = -1;
  const char *role = "peer"; // or "root"
};

class MpiRequest final : public Request::Impl {
public:
  /// `expectedCount` < 0 for a send (nothing to check on arrival).
  MpiRequest(std::string context, MPI_Datatype type, long long expectedCount)
      : context_(std::move(context)), type_(type),
        expectedCount_(expectedCount) {}

  MPI_Request request = MPI_REQUEST_NULL;

  Status wait() override {
    if (mpiFinalized())
      return CLEAVE_ERROR(context_, ": MPI was finalized before the wait");
    MPI_Status status;
    int rc = MPI_Wait(&request, &status);
    if (rc != MPI_SUCCESS)
      return CLEAVE_ERROR(context_, ": ", mpiErrorString(rc));
    if (expectedCount_ < 0)
      return Status();
    int received = 0;
    MPI_Get_count(&status, type_, &received);
    if (received != expectedCount_)
      return CLEAVE_ERROR(context_, ": expected ", expectedCount_,
                          " elements, received ", received);
    return Status();
  }

private:
  std::string context_;
  MPI_Datatype type_;
  long long expectedCount_;
};

class MpiCommunicator final : public Communicator {
public:
  /// Takes ownership of `comm` (freed with the communicator).
  static Status create(MPI_Comm comm, std::string name,
                       std::unique_ptr<Communicator> *out) {
    std::unique_ptr<MpiCommunicator> c(
        new MpiCommunicator(comm, std::move(name)));
    Call call{"creating the communicator"};
    CLEAVE_RETURN_IF_ERROR(
        c->check(call, MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)));
    CLEAVE_RETURN_IF_ERROR(c->check(call, MPI_Comm_rank(comm, &c->rank_)));
    CLEAVE_RETURN_IF_ERROR(c->check(call, MPI_Comm_size(comm, &c->size_)));
    int *tagUpperBound = nullptr;
    int found = 0;
    CLEAVE_RETURN_IF_ERROR(c->check(
        call, MPI_Comm_get_attr(comm, MPI_TAG_UB, &tagUpperBound, &found)));
    if (found && tagUpperBound)
      c->tagUpperBound_ = *tagUpperBound;
    *out = std::move(c);
    return Status();
  }

  ~MpiCommunicator() override {
    // Communicators held until static destruction outlive MPI_Finalize.
    if (comm_ != MPI_COMM_NULL && !mpiFinalized())
      MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }

  Status allReduce(const void *in, void *out, size_t count, DType dtype,
                   ReduceOp op) override {
    Call call{"all-reduce"};
    CLEAVE_RETURN_IF_ERROR(checkReduce(call, dtype, op));
    CLEAVE_RETURN_IF_ERROR(checkBuffers(call, in, out, count));
    if (dtype == DType::BF16) {
      // MPI has no bf16 sum: sum the widened values, round once.
      float *wide = widened(wideIn_, in, count);
      CLEAVE_RETURN_IF_ERROR(
          check(call, MPI_Allreduce(MPI_IN_PLACE, wide, int(count), MPI_FLOAT, mpiOp(op), comm_)));
      floatToBf16(wide, static_cast<uint16_t *>(out), count);
      return Status();
    }
    const void *send = in == out ? MPI_IN_PLACE : in;
    return check(call, MPI_Allreduce(send, out, int(count), mpiType(dtype),
                                     mpiOp(op), comm_));
  }

  Status allGather(const void *in, void *out, size_t count,
                   DType dtype) override {
    Call call{"all-gather"};
    CLEAVE_RETURN_IF_ERROR(checkBuffers(call, in, out, count));
    const char *ownBlock =
        static_cast<const char *>(out) + rank_ * count * dtypeBytes(dtype);
    const void *send = in == ownBlock ? MPI_IN_PLACE : in;
    MPI_Datatype type = mpiType(dtype);
    return check(call, MPI_Allgather(send, int(count), type, out, int(count),
                                     type, comm_));
  }

  Status reduceScatter(const void *in, void *out, size_t count, DType dtype,
                       ReduceOp op) override {
    Call call{"reduce-scatter"};
    CLEAVE_RETURN_IF_ERROR(checkReduce(call, dtype, op));
    CLEAVE_RETURN_IF_ERROR(checkBuffers(call, in, out, count));
    if (dtype == DType::BF16) {
      // As allReduce: f32 sums, rounded once.
      float *wide = widened(wideIn_, in, count * size_);
      wideOut_.resize(count);
      CLEAVE_RETURN_IF_ERROR(check(call, MPI_Reduce_scatter_block(wide, wideOut_.data(), int(count),
                                                                  MPI_FLOAT, mpiOp(op), comm_)));
      floatToBf16(wideOut_.data(), static_cast<uint16_t *>(out), count);
      return Status();
    }
    return check(call,
                 MPI_Reduce_scatter_block(in, out, int(count), mpiType(dtype),
                                          mpiOp(op), comm_));
  }

  Status allToAll(const void *in, void *out, size_t count,
                  DType dtype) override {
    Call call{"all-to-all"};
    CLEAVE_RETURN_IF_ERROR(checkBuffers(call, in, out, count));
    MPI_Datatype type = mpiType(dtype);
    return check(
        call, MPI_Alltoall(in, int(count), type, out, int(count), type, comm_));
  }

  Status broadcast(void *buffer, size_t count, DType dtype, int root) override {
    Call call{"broadcast", "from", root, "root"};
    CLEAVE_RETURN_IF_ERROR(checkPeer(call, root));
    CLEAVE_RETURN_IF_ERROR(checkBuffers(call, buffer, buffer, count));
    return check(call,
                 MPI_Bcast(buffer, int(count), mpiType(dtype), root, comm_));
  }

  Status barrier() override {
    return check(Call{"barrier"}, MPI_Barrier(comm_));
  }

  Status send(const void *buffer, size_t count, DType dtype, int peer,
              int tag) override {
    Call call{"send", "to", peer};
    CLEAVE_RETURN_IF_ERROR(checkPointToPoint(call, buffer, count, tag, true));
    return check(
        call, MPI_Send(buffer, int(count), mpiType(dtype), peer, tag, comm_));
  }

  Status recv(void *buffer, size_t count, DType dtype, int peer,
              int tag) override {
    Call call{"recv", "from", peer};
    CLEAVE_RETURN_IF_ERROR(checkPointToPoint(call, buffer, count, tag, true));
    MPI_Status status;
    MPI_Datatype type = mpiType(dtype);
    CLEAVE_RETURN_IF_ERROR(check(
        call, MPI_Recv(buffer, int(count), type, peer, tag, comm_, &status)));
    int received = 0;
    MPI_Get_count(&status, type, &received);
    if (size_t(received) != count)
      return CLEAVE_ERROR(describe(call), ": expected ", count,
                          " elements, received ", received);
    return Status();
  }

  Status isend(const void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override {
    Call call{"isend", "to", peer};
    CLEAVE_RETURN_IF_ERROR(checkPointToPoint(call, buffer, count, tag, false));
    MPI_Datatype type = mpiType(dtype);
    auto pending = std::make_unique<MpiRequest>(describe(call), type, -1);
    CLEAVE_RETURN_IF_ERROR(
        check(call, MPI_Isend(buffer, int(count), type, peer, tag, comm_,
                              &pending->request)));
    *request = Request(std::move(pending));
    return Status();
  }

  Status irecv(void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override {
    Call call{"irecv", "from", peer};
    CLEAVE_RETURN_IF_ERROR(checkPointToPoint(call, buffer, count, tag, false));
    MPI_Datatype type = mpiType(dtype);
    auto pending =
        std::make_unique<MpiRequest>(describe(call), type, (long long)count);
    CLEAVE_RETURN_IF_ERROR(
        check(call, MPI_Irecv(buffer, int(count), type, peer, tag, comm_,
                              &pending->request)));
    *request = Request(std::move(pending));
    return Status();
  }

  Status split(int color, int key, const std::string &name,
               std::unique_ptr<Communicator> *group) override {
    Call call{"split"};
    MPI_Comm comm = MPI_COMM_NULL;
    CLEAVE_RETURN_IF_ERROR(
        check(call, MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color,
                                   key, &comm)));
    group->reset();
    if (comm == MPI_COMM_NULL)
      return Status();
    return create(comm, name.empty() ? concat(name_, "/", color) : name, group);
  }

  [[noreturn]] void abortJob(int exitCode) override {
    MPI_Abort(comm_, exitCode);
    std::_Exit(exitCode); // MPI_Abort should not return
  }

private:
  MpiCommunicator(MPI_Comm comm, std::string name)
      : comm_(comm), name_(std::move(name)) {}

  /// "send to peer 3 on group 'world' (rank 0 of 2)"
  std::string describe(const Call &call) const {
    std::string what = call.op;
    if (call.toward)
      what = concat(what, " ", call.toward, " ", call.role, " ", call.peer);
    return concat(what, " on group '", name_, "' (rank ", rank_, " of ", size_,
                  ")");
  }

  Status check(const Call &call, int rc) const {
    if (rc == MPI_SUCCESS)
      return Status();
    return CLEAVE_ERROR(describe(call), ": ", mpiErrorString(rc));
  }

  Status checkPeer(const Call &call, int peer) const {
    if (peer < 0 || peer >= size_)
      return CLEAVE_ERROR(describe(call), ": ", call.role, " ", peer,
                          " is not in the group (ranks 0..", size_ - 1, ")");
    return Status();
  }

  /// MPI counts are ints; larger buffers would need chunking.
  Status checkBuffers(const Call &call, const void *in, const void *out,
                      size_t count) const {
    if (count > size_t(INT_MAX))
      return CLEAVE_ERROR(describe(call), ": ", count,
                          " elements exceed MPI's limit of ", INT_MAX,
                          " per call (not supported yet)");
    if (count > 0 && (!in || !out))
      return CLEAVE_ERROR(describe(call), ": null buffer for ", count,
                          " elements");
    return Status();
  }

  Status checkReduce(const Call &call, DType dtype, ReduceOp op) const {
    if (!canReduce(op, dtype))
      return CLEAVE_ERROR(describe(call), ": ", reduceOpName(op), " of ", dtypeName(dtype),
                          " is not supported yet (f32, bf16, i64 and i32 are)");
    return Status();
  }

  Status checkPointToPoint(const Call &call, const void *buffer, size_t count,
                           int tag, bool blocking) const {
    CLEAVE_RETURN_IF_ERROR(checkPeer(call, call.peer));
    if (blocking && call.peer == rank_)
      return CLEAVE_ERROR(describe(call),
                          ": a blocking send or recv with this rank itself "
                          "would deadlock; use isend/irecv");
    if (tag < 0 || tag > tagUpperBound_)
      return CLEAVE_ERROR(describe(call), ": tag ", tag, " is outside 0..",
                          tagUpperBound_);
    return checkBuffers(call, buffer, buffer, count);
  }

  /// `count` bf16 values of `in` widened into `buffer`.
  static float *widened(std::vector<float> &buffer, const void *in, size_t count) {
    buffer.resize(count);
    bf16ToFloat(static_cast<const uint16_t *>(in), buffer.data(), count);
    return buffer.data();
  }

  MPI_Comm comm_;
  /// f32 copies for bf16 sums (collectives of one group never overlap).
  std::vector<float> wideIn_, wideOut_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int tagUpperBound_ = 32767; // the least MPI guarantees
};

} // namespace

Status initMpi() {
  // A function-local static runs startMpi exactly once, even across threads.
  static const Status started = startMpi();
  return started;
}

Status createMpiWorld(std::unique_ptr<Communicator> *world) {
  CLEAVE_RETURN_IF_ERROR(initMpi());
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS)
    return CLEAVE_ERROR("creating the world communicator (MPI_Comm_dup) "
                        "failed: ",
                        mpiErrorString(rc));
  return MpiCommunicator::create(comm, "world", world);
}

} // namespace cleave::runtime
