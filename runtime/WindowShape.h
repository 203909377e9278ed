//===- WindowShape.h - Output size of a convolution or pooling window -----===//
//
// The compiler's shape inference and the runtime's kernel checks must agree
// on it, so both include this header. Header-only, no dependencies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace cleave::runtime {

/// Output size of one spatial dim of a convolution or pooling window, as
/// PyTorch computes it: with ceil_mode the last window must start inside the
/// input or the left padding.
inline int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                                int64_t dilation, bool ceilMode) {
  int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padding)
    --out;
  return out;
}

} // namespace cleave::runtime
