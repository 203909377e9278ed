//===- NcclCommunicator.cpp - NCCL behind the Communicator interface ------===//

#include "runtime/cuda/NcclCommunicator.h"

#include <nccl.h>

#include <cstdlib>
#include <cstring>

namespace cleave::runtime::cuda {
namespace {

std::optional<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::I64:
    return ncclInt64;
  case DType::I32:
    return ncclInt32;
  case DType::I1:
    return ncclUint8;
  }
  return std::nullopt;
}

/// A request: the transfer's completion event on the communicator's stream.
class EventRequest final : public Request::Impl {
public:
  EventRequest(cudaEvent_t event, cudaStream_t compute) : event_(event), compute_(compute) {}
  ~EventRequest() override { cudaEventDestroy(event_); }
  Status wait() override { return cudaStatus(cudaStreamWaitEvent(compute_, event_, 0), "wait"); }

private:
  cudaEvent_t event_;
  cudaStream_t compute_;
};

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(Communicator &bootstrap, DeviceContext &ctx, std::string name)
      : bootstrap_(bootstrap), ctx_(ctx), name_(std::move(name)) {}

  ~NcclCommunicator() override {
    if (stream_)
      cudaStreamSynchronize(stream_);
    if (comm_)
      ncclCommDestroy(comm_);
    if (ready_)
      cudaEventDestroy(ready_);
    if (done_)
      cudaEventDestroy(done_);
    if (scratch_)
      cudaFree(scratch_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  /// Creates the stream and events; `comm` is an initialized communicator.
  Status adopt(ncclComm_t comm) {
    comm_ = comm;
    CLEAVE_RETURN_IF_ERROR(nccl(ncclCommCount(comm_, &size_), "ncclCommCount"));
    CLEAVE_RETURN_IF_ERROR(nccl(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank"));
    CLEAVE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CLEAVE_CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    CLEAVE_CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    CLEAVE_CUDA_TRY(cudaMalloc(&scratch_, sizeof(float)));
    return {};
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string &name() const override { return name_; }

  Status allReduce(const void *in, void *out, size_t count, DType dtype, ReduceOp op) override {
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("all_reduce", dtype, &type));
    return ordered("all_reduce",
                   [&] { return ncclAllReduce(in, out, count, type, ncclSum, comm_, stream_); });
  }

  Status allGather(const void *in, void *out, size_t count, DType dtype) override {
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("all_gather", dtype, &type));
    return ordered("all_gather",
                   [&] { return ncclAllGather(in, out, count, type, comm_, stream_); });
  }

  Status reduceScatter(const void *in, void *out, size_t count, DType dtype, ReduceOp op) override {
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("reduce_scatter", dtype, &type));
    return ordered("reduce_scatter", [&] {
      return ncclReduceScatter(in, out, count, type, ncclSum, comm_, stream_);
    });
  }

  Status allToAll(const void *in, void *out, size_t count, DType dtype) override {
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("all_to_all", dtype, &type));
    const size_t bytes = count * dtypeBytes(dtype);
    return ordered("all_to_all", [&] {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; p < size_ && r == ncclSuccess; ++p) {
        r = ncclSend(static_cast<const char *>(in) + p * bytes, count, type, p, comm_, stream_);
        if (r == ncclSuccess)
          r = ncclRecv(static_cast<char *>(out) + p * bytes, count, type, p, comm_, stream_);
      }
      ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }

  Status broadcast(void *buffer, size_t count, DType dtype, int root) override {
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("broadcast", dtype, &type));
    if (root < 0 || root >= size_)
      return CLEAVE_ERROR("broadcast on ", name_, ": root ", root, " is not a rank of ", size_);
    return ordered("broadcast", [&] {
      return ncclBroadcast(buffer, buffer, count, type, root, comm_, stream_);
    });
  }

  Status barrier() override {
    CLEAVE_RETURN_IF_ERROR(ordered("barrier", [&] {
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream_);
    }));
    return cudaStatus(cudaStreamSynchronize(stream_), "barrier");
  }

  Status send(const void *buffer, size_t count, DType dtype, int peer, int tag) override {
    CLEAVE_RETURN_IF_ERROR(checkPeer("send", peer, /*self=*/false));
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("send", dtype, &type));
    return ordered("send", [&] { return ncclSend(buffer, count, type, peer, comm_, stream_); });
  }

  Status recv(void *buffer, size_t count, DType dtype, int peer, int tag) override {
    CLEAVE_RETURN_IF_ERROR(checkPeer("recv", peer, /*self=*/false));
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("recv", dtype, &type));
    return ordered("recv", [&] { return ncclRecv(buffer, count, type, peer, comm_, stream_); });
  }

  Status isend(const void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override {
    CLEAVE_RETURN_IF_ERROR(checkPeer("isend", peer, /*self=*/true));
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("isend", dtype, &type));
    return unordered("isend", request,
                     [&] { return ncclSend(buffer, count, type, peer, comm_, stream_); });
  }

  Status irecv(void *buffer, size_t count, DType dtype, int peer, int tag,
               Request *request) override {
    CLEAVE_RETURN_IF_ERROR(checkPeer("irecv", peer, /*self=*/true));
    ncclDataType_t type = ncclFloat32;
    CLEAVE_RETURN_IF_ERROR(typeOf("irecv", dtype, &type));
    return unordered("irecv", request,
                     [&] { return ncclRecv(buffer, count, type, peer, comm_, stream_); });
  }

  Status split(int color, int key, const std::string &name,
               std::unique_ptr<Communicator> *group) override {
    std::string groupName = name.empty() ? name_ + "/" + std::to_string(color) : name;
    ncclComm_t sub = nullptr;
    CLEAVE_RETURN_IF_ERROR(
        nccl(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr),
             "ncclCommSplit"));
    if (color < 0) {
      group->reset();
      return {};
    }
    auto result = std::make_unique<NcclCommunicator>(bootstrap_, ctx_, groupName);
    CLEAVE_RETURN_IF_ERROR(result->adopt(sub));
    *group = std::move(result);
    return {};
  }

  [[noreturn]] void abortJob(int exitCode) override {
    // Peers blocked in a NCCL kernel would never return: abort the
    // communicator, then the job through MPI.
    ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_.abortJob(exitCode);
    std::abort(); // not reached: abortJob does not return
  }

private:
  Status nccl(ncclResult_t result, const char *what) const {
    if (result == ncclSuccess)
      return {};
    const char *detail = comm_ ? ncclGetLastError(comm_) : nullptr;
    return CLEAVE_ERROR(what, " on ", name_, " (rank ", rank_, " of ", size_,
                        "): ", ncclGetErrorString(result),
                        detail && *detail ? std::string(": ") + detail : std::string());
  }

  Status typeOf(const char *op, DType dtype, ncclDataType_t *type) const {
    std::optional<ncclDataType_t> t = ncclType(dtype);
    if (!t)
      return CLEAVE_ERROR(op, " on ", name_, ": NCCL has no type for ", dtypeName(dtype));
    *type = *t;
    return {};
  }

  Status checkPeer(const char *op, int peer, bool selfAllowed) const {
    if (peer < 0 || peer >= size_)
      return CLEAVE_ERROR(op, " on ", name_, ": peer ", peer, " is not a rank of ", size_);
    if (peer == rank_ && !selfAllowed)
      return CLEAVE_ERROR(op, " on ", name_, ": a blocking transfer to this rank itself ",
                          "would deadlock");
    return {};
  }

  /// The communicator's stream waits for the compute stream.
  Status afterCompute() {
    CLEAVE_CUDA_TRY(cudaEventRecord(ready_, ctx_.stream));
    CLEAVE_CUDA_TRY(cudaStreamWaitEvent(stream_, ready_, 0));
    return {};
  }

  /// A blocking operation: issued after the compute stream's work, and the
  /// compute stream's later work after it.
  template <typename Issue> Status ordered(const char *op, Issue issue) {
    CLEAVE_RETURN_IF_ERROR(afterCompute());
    CLEAVE_RETURN_IF_ERROR(nccl(issue(), op));
    CLEAVE_CUDA_TRY(cudaEventRecord(done_, stream_));
    CLEAVE_CUDA_TRY(cudaStreamWaitEvent(ctx_.stream, done_, 0));
    return {};
  }

  /// A non-blocking operation: its request orders the compute stream.
  template <typename Issue> Status unordered(const char *op, Request *request, Issue issue) {
    CLEAVE_RETURN_IF_ERROR(afterCompute());
    CLEAVE_RETURN_IF_ERROR(nccl(issue(), op));
    cudaEvent_t event;
    CLEAVE_CUDA_TRY(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cudaError_t recorded = cudaEventRecord(event, stream_);
    if (recorded != cudaSuccess) {
      cudaEventDestroy(event);
      return cudaStatus(recorded, op);
    }
    *request = Request(std::make_unique<EventRequest>(event, ctx_.stream));
    return {};
  }

  Communicator &bootstrap_;
  DeviceContext &ctx_;
  std::string name_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  void *scratch_ = nullptr;
};

} // namespace

Status createNcclCommunicator(Communicator &bootstrap, DeviceContext &ctx, const std::string &name,
                              std::unique_ptr<Communicator> *out) {
  CLEAVE_CUDA_TRY(cudaSetDevice(ctx.device));
  // The id travels as bytes over the MPI group this communicator mirrors.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (bootstrap.rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      return CLEAVE_ERROR("ncclGetUniqueId for ", name, ": ", ncclGetErrorString(r));
  }
  static_assert(sizeof(id) % sizeof(int32_t) == 0, "the NCCL id travels as i32");
  CLEAVE_RETURN_IF_ERROR(
      bootstrap.broadcast(&id, sizeof(id) / sizeof(int32_t), DType::I32, 0).prepend(name));
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank());
  if (r != ncclSuccess)
    return CLEAVE_ERROR("ncclCommInitRank for ", name, " (rank ", bootstrap.rank(), " of ",
                        bootstrap.size(), "): ", ncclGetErrorString(r));
  auto result = std::make_unique<NcclCommunicator>(bootstrap, ctx, name);
  CLEAVE_RETURN_IF_ERROR(result->adopt(comm));
  *out = std::move(result);
  return {};
}

} // namespace cleave::runtime::cuda
