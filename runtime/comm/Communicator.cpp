//===- Communicator.cpp - Requests and reduction support ------------------===//

#include "runtime/comm/Communicator.h"

namespace cleave::runtime {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  }
  return "?";
}

bool canReduce(ReduceOp op, DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::I64 || dtype == DType::I32;
}

Request &Request::operator=(Request &&other) {
  if (this != &other) {
    (void)wait();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Request::~Request() { (void)wait(); }

Status Request::wait() {
  if (!impl_)
    return Status();
  Status status = impl_->wait();
  impl_.reset();
  return status;
}

Status waitAll(std::vector<Request> &requests) {
  Status first;
  for (Request &request : requests) {
    Status status = request.wait();
    if (first.ok() && !status.ok())
      first = status;
  }
  return first;
}

} // namespace cleave::runtime
