#include "runtime/Tensor.h"

namespace cleave::runtime {

std::string describe(const Shape &shape, DType dtype) {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + dtypeName(dtype);
}

} // namespace cleave::runtime
