//===- Tensor.h - Shapes and typed views of buffers -----------------------===//
#pragma once

#include "runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

using Shape = std::vector<int64_t>;

inline int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// "2x64xf32", as the IR prints tensor types.
std::string describe(const Shape &shape, DType dtype);

/// What a kernel knows about an operand before any data exists: its element
/// type and shape. Row-major and dense, always.
struct TensorDesc {
  DType dtype = DType::F32;
  Shape shape;

  int64_t numel() const { return numElements(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeBytes(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool operator==(const TensorDesc &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorDesc &o) const { return !(*this == o); }
};

/// A described tensor with its data.
struct TensorRef {
  TensorDesc desc;
  void *data = nullptr;

  template <typename T> T *as() const { return static_cast<T *>(data); }
};

} // namespace cleave::runtime
