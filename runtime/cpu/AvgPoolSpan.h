//===- AvgPoolSpan.h - avg_pool2d's window along one axis -----------------===//
//
// avg_pool2d (Pooling.cpp) and avg_pool2d_backward (TrainingContractions.cpp)
// must clip each window and pick its divisor alike, as PyTorch does.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cstdint>

namespace cleave::runtime::cpu {

/// Along one axis (input `size`, kernel `k`, stride, padding `pad`), the
/// window of output `o`: the input positions [*begin, *end) it sums, and,
/// returned, its extent clipped to the padded input (so ceil_mode's overhang
/// never counts), the factor of count_include_pad's divisor.
inline int64_t avgPoolSpan(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size,
                           int64_t *begin, int64_t *end) {
  int64_t b = o * stride - pad;
  int64_t e = std::min(b + k, size + pad);
  const int64_t padded = e - b;
  *begin = std::max<int64_t>(b, 0);
  *end = std::min(e, size);
  return padded;
}

} // namespace cleave::runtime::cpu
