//===- VecMath.h - Branch-free float transcendentals that vectorize -------===//
//
// glibc's expf/erff/tanhf are scalar calls that stop the compiler from
// vectorizing a loop. These inline versions are straight-line code (selects
// instead of branches) that GCC turns into SIMD, with errors of a few ulp:
// the accuracy of PyTorch's own vectorized (Sleef) functions. Special values
// follow C: exp(-inf) = 0, exp(+inf) = inf, NaN propagates.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>

namespace cleave::runtime::cpu::vmath {

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// e^x for x in [-87.33, 88.72] (no special values): ~1 ulp. NaN in gives
/// NaN out.
inline float expInRange(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  // n = round(x / ln2) without a call: add and subtract 1.5 * 2^23.
  const float kShift = 12582912.0f;
  float n = (x * kLog2e + kShift) - kShift;
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  // e^r on [-ln2/2, ln2/2] (Cephes expf polynomial).
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  // 2^n as 2^(n/2) * 2^(n - n/2): n is in [-126, 128], so both halves are
  // normal numbers and neither overflows the exponent field.
  // A NaN input makes n NaN, whose conversion to int is undefined: take 0
  // instead (p is NaN already, so the result is NaN either way).
  int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
  int32_t n1 = ni >> 1, n2 = ni - n1;
  return p * bitsToFloat(static_cast<uint32_t>(n1 + 127) << 23) *
         bitsToFloat(static_cast<uint32_t>(n2 + 127) << 23);
}

/// e^x, max error ~1 ulp over the normal range; underflows to 0 below
/// -87.33 (no denormal results) and overflows to inf above 88.72.
inline float exp(float x) {
  float xc = x < -87.33654f ? -87.33654f : x;
  xc = xc > 88.72283f ? 88.72283f : xc;
  float result = expInRange(xc);
  result = x < -87.33654f ? 0.0f : result;
  result = x > 88.72283f ? __builtin_inff() : result;
  return x != x ? x : result;
}

/// tanh(x): an odd polynomial for |x| < 0.625, 1 - 2 / (e^2|x| + 1) above
/// (Cephes tanhf); a few ulp.
inline float tanh(float x) {
  float ax = x < 0 ? -x : x;
  float z = x * x;
  float small = -5.70498872745e-3f;
  small = small * z + 2.06390887954e-2f;
  small = small * z - 5.37397155531e-2f;
  small = small * z + 1.33314422036e-1f;
  small = small * z - 3.33332819422e-1f;
  small = small * z * x + x;
  // tanh rounds to 1 above 9; a NaN stays NaN through every select.
  float e = expInRange(2.0f * (ax > 9.0f ? 9.0f : ax));
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = x < 0 ? -large : large;
  return ax < 0.625f ? small : large;
}

/// erf(x): a polynomial in x^2 for |x| <= 0.921875, 1 - e^(poly(|x|)) above
/// (after N. Juffa's erff); ~1-2 ulp.
inline float erf(float x) {
  float t = x < 0 ? -x : x;
  float s = x * x;
  // |x| <= 0.921875
  float small = -5.96761703e-4f;
  small = small * s + 4.99119423e-3f;
  small = small * s - 2.67681349e-2f;
  small = small * s + 1.12819925e-1f;
  small = small * s - 3.76125336e-1f;
  small = small * s + 1.28379166e-1f;
  small = small * x + x;
  // |x| > 0.921875; erf(x) rounds to 1 above ~3.92.
  float tc = t > 4.0f ? 4.0f : t;
  float sc = tc * tc;
  float r = -1.72853470e-5f * tc + 3.83197126e-4f;
  float u = -3.88396438e-3f * tc + 2.42546219e-2f;
  r = r * sc + u;
  r = r * tc - 1.06777877e-1f;
  r = r * tc - 6.34846687e-1f;
  r = r * tc - 1.28717512e-1f;
  r = r * tc - tc;
  // r is in [-17, -0.85]; a NaN stays NaN through every select.
  float large = 1.0f - expInRange(r);
  large = x < 0 ? -large : large;
  return t <= 0.921875f ? small : large;
}

/// 1 / (1 + e^-x), saturating to 0 and 1.
inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

} // namespace cleave::runtime::cpu::vmath
