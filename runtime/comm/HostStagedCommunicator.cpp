//===- HostStagedCommunicator.cpp - Device tensors over a host communicator ===//

#include "runtime/comm/HostStagedCommunicator.h"

#include <vector>

namespace cleave::runtime {

namespace {

/// Host bytes for `count` elements of `dtype`.
std::vector<char> hostBuffer(size_t count, DType dtype) {
  return std::vector<char>(count * dtypeBytes(dtype));
}

/// An irecv's host buffer: the message lands there, and wait() copies it to
/// the device buffer it was meant for.
class StagedReceive final : public Request::Impl {
public:
  StagedReceive(Backend &device, void *target, std::vector<char> staging)
      : device_(device), target_(target), staging_(std::move(staging)) {}
  Request inner;
  char *data() { return staging_.data(); }
  Status wait() override {
    CLEAVE_RETURN_IF_ERROR(inner.wait());
    return device_.copyToDevice(target_, staging_.data(), staging_.size());
  }

private:
  Backend &device_;
  void *target_;
  std::vector<char> staging_;
};

/// An isend's host copy, kept alive until the message has left.
class StagedSend final : public Request::Impl {
public:
  explicit StagedSend(std::vector<char> staging) : staging_(std::move(staging)) {}
  Request inner;
  char *data() { return staging_.data(); }
  Status wait() override { return inner.wait(); }

private:
  std::vector<char> staging_;
};

} // namespace

HostStagedCommunicator::HostStagedCommunicator(Communicator &host, Backend &device,
                                               std::string name)
    : host_(&host), device_(device), name_(std::move(name)) {}

HostStagedCommunicator::HostStagedCommunicator(std::unique_ptr<Communicator> host,
                                               Backend &device, std::string name)
    : owned_(std::move(host)), host_(owned_.get()), device_(device), name_(std::move(name)) {}

Status HostStagedCommunicator::allReduce(const void *in, void *out, size_t count, DType dtype,
                                         ReduceOp op) {
  std::vector<char> a = hostBuffer(count, dtype), b = hostBuffer(count, dtype);
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), in, a.size()));
  CLEAVE_RETURN_IF_ERROR(host_->allReduce(a.data(), b.data(), count, dtype, op));
  return device_.copyToDevice(out, b.data(), b.size());
}

Status HostStagedCommunicator::allGather(const void *in, void *out, size_t count, DType dtype) {
  std::vector<char> a = hostBuffer(count, dtype), b = hostBuffer(count * size(), dtype);
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), in, a.size()));
  CLEAVE_RETURN_IF_ERROR(host_->allGather(a.data(), b.data(), count, dtype));
  return device_.copyToDevice(out, b.data(), b.size());
}

Status HostStagedCommunicator::reduceScatter(const void *in, void *out, size_t count,
                                             DType dtype, ReduceOp op) {
  std::vector<char> a = hostBuffer(count * size(), dtype), b = hostBuffer(count, dtype);
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), in, a.size()));
  CLEAVE_RETURN_IF_ERROR(host_->reduceScatter(a.data(), b.data(), count, dtype, op));
  return device_.copyToDevice(out, b.data(), b.size());
}

Status HostStagedCommunicator::allToAll(const void *in, void *out, size_t count, DType dtype) {
  std::vector<char> a = hostBuffer(count * size(), dtype), b = hostBuffer(count * size(), dtype);
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), in, a.size()));
  CLEAVE_RETURN_IF_ERROR(host_->allToAll(a.data(), b.data(), count, dtype));
  return device_.copyToDevice(out, b.data(), b.size());
}

Status HostStagedCommunicator::broadcast(void *buffer, size_t count, DType dtype, int root) {
  std::vector<char> a = hostBuffer(count, dtype);
  if (rank() == root)
    CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), buffer, a.size()));
  CLEAVE_RETURN_IF_ERROR(host_->broadcast(a.data(), count, dtype, root));
  return rank() == root ? Status() : device_.copyToDevice(buffer, a.data(), a.size());
}

Status HostStagedCommunicator::barrier() {
  // Work queued on the device before the barrier is done when it returns.
  CLEAVE_RETURN_IF_ERROR(device_.synchronize());
  return host_->barrier();
}

Status HostStagedCommunicator::send(const void *buffer, size_t count, DType dtype, int peer,
                                    int tag) {
  std::vector<char> a = hostBuffer(count, dtype);
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(a.data(), buffer, a.size()));
  return host_->send(a.data(), count, dtype, peer, tag);
}

Status HostStagedCommunicator::recv(void *buffer, size_t count, DType dtype, int peer, int tag) {
  std::vector<char> a = hostBuffer(count, dtype);
  CLEAVE_RETURN_IF_ERROR(host_->recv(a.data(), count, dtype, peer, tag));
  return device_.copyToDevice(buffer, a.data(), a.size());
}

Status HostStagedCommunicator::isend(const void *buffer, size_t count, DType dtype, int peer,
                                     int tag, Request *request) {
  auto staged = std::make_unique<StagedSend>(hostBuffer(count, dtype));
  CLEAVE_RETURN_IF_ERROR(device_.copyToHost(staged->data(), buffer,
                                            count * dtypeBytes(dtype)));
  CLEAVE_RETURN_IF_ERROR(host_->isend(staged->data(), count, dtype, peer, tag, &staged->inner));
  *request = Request(std::move(staged));
  return {};
}

Status HostStagedCommunicator::irecv(void *buffer, size_t count, DType dtype, int peer, int tag,
                                     Request *request) {
  auto staged = std::make_unique<StagedReceive>(device_, buffer, hostBuffer(count, dtype));
  CLEAVE_RETURN_IF_ERROR(host_->irecv(staged->data(), count, dtype, peer, tag, &staged->inner));
  *request = Request(std::move(staged));
  return {};
}

Status HostStagedCommunicator::split(int color, int key, const std::string &name,
                                     std::unique_ptr<Communicator> *group) {
  std::unique_ptr<Communicator> hostGroup;
  CLEAVE_RETURN_IF_ERROR(host_->split(color, key, name, &hostGroup));
  if (!hostGroup) {
    group->reset();
    return {};
  }
  std::string groupName = hostGroup->name();
  *group = std::make_unique<HostStagedCommunicator>(std::move(hostGroup), device_, groupName);
  return {};
}

} // namespace cleave::runtime
