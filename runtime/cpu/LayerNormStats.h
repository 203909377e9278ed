//===- LayerNormStats.h - One row's layer_norm statistics -----------------===//
//
// layer_norm (Normalization.cpp) and layer_norm_backward (Training.cpp)
// must compute a row's mean and 1/std identically, so the backward
// differentiates exactly what the forward computed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>

namespace cleave::runtime::cpu {

/// The mean of x's d elements, then the biased variance around it (two
/// passes, as accurate as PyTorch's): *rstd = 1 / sqrt(var + eps). Always
/// inlined, so each CLEAVE_CLONES caller's version vectorizes it for its
/// own target.
[[gnu::always_inline]] inline void layerNormStats(const float *__restrict x, int64_t d,
                                                  float eps, float *mean, float *rstd) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < d; ++i)
    sum += x[i];
  const float m = sum / static_cast<float>(d);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < d; ++i) {
    float c = x[i] - m;
    sq += c * c;
  }
  *mean = m;
  *rstd = 1.0f / std::sqrt(sq / static_cast<float>(d) + eps);
}

} // namespace cleave::runtime::cpu
