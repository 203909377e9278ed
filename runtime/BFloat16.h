//===- BFloat16.h - bf16 <-> f32 conversions ------------------------------===//
//
// bf16 is the upper half of an IEEE f32: the same sign and 8-bit exponent,
// 7 stored mantissa bits (8 with the implicit one). Widening is exact; narrowing
// rounds to nearest, ties to even, as PyTorch's `.to(torch.bfloat16)` does.
// NaN stays NaN (quiet, sign kept); infinities and values that round past the
// largest finite bf16 become infinities. The compiler (weights, constants), the
// CPU backend (widened kernels), the communicators (f32 sums) and the tests
// share these, so every path rounds identically. Header-only, no dependencies.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cleave::runtime {

/// The f32 a bf16 bit pattern holds (exact).
inline float bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

/// `value` rounded to the nearest bf16, ties to even.
inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, make it quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff rounds halfway cases up; the kept bit's value (lsb) makes
  // them round to even. Overflow carries into the exponent, which is right:
  // the largest finite values round up to infinity.
  uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

/// Widens `count` bf16 values to f32.
inline void bf16ToFloat(const uint16_t *in, float *out, size_t count) {
  for (size_t i = 0; i < count; ++i)
    out[i] = bf16ToFloat(in[i]);
}

/// Rounds `count` f32 values to bf16.
inline void floatToBf16(const float *in, uint16_t *out, size_t count) {
  for (size_t i = 0; i < count; ++i)
    out[i] = floatToBf16(in[i]);
}

} // namespace cleave::runtime
