//===- Float16.h - f16 <-> f32 conversions --------------------------------===//
//
// IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 stored mantissa
// bits. Widening is exact (subnormals included); narrowing rounds to nearest,
// ties to even, as PyTorch's `.half()`: values past the largest finite f16
// (65504) that do not round back to it become infinities, values below the
// smallest subnormal round to (signed) zero, and NaN stays a quiet NaN with
// its sign. Header-only, no dependencies, as BFloat16.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace cleave::runtime {

/// The f32 an f16 bit pattern holds (exact).
inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) { // zero or subnormal: mantissa · 2^-24, exact in f32
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 31 ? sign | 0x7f800000u | (mantissa << 13)
                                 : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// `value` rounded to the nearest f16, ties to even.
inline uint16_t floatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN: quiet, top mantissa bits kept
    return sign | 0x7e00u | static_cast<uint16_t>((magnitude >> 13) & 0x3ffu);
  if (magnitude >= 0x477ff000u) // rounds past 65504 (or is infinite)
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) { // below 2^-14: a subnormal (or zero)
    float scaled = std::fabs(value) * 16777216.0f; // in units of 2^-24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled)); // 1024 is 2^-14 itself
  }
  uint32_t half = ((magnitude >> 23) - 112) << 10 | ((magnitude >> 13) & 0x3ffu);
  uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // a carry into the exponent is the right rounding
  return sign | static_cast<uint16_t>(half);
}

} // namespace cleave::runtime
