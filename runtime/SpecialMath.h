//===- SpecialMath.h - The math of the special-function kernels ---*- C++ -*-===//
//
// One implementation of every special function that cleave has a kernel for
// (lgamma, polygamma, erfinv, the Bessel family, Airy Ai, the orthogonal
// polynomials, Hurwitz zeta, the incomplete gamma functions), written as
// inline templates that both the CPU kernels (runtime/cpu/Special.cpp, T =
// double) and the CUDA kernels (runtime/cuda/kernels/Special.cu, T = float)
// include, so that the two backends cannot drift. The edge values (poles,
// negative integers, infinities, NaN, a negative polynomial degree) are
// PyTorch 1.13's.
//
// The numerics are series, continued fractions, recurrences, a trapezoid
// rule and asymptotic expansions; the C++17 special math functions of
// libstdc++ serve only as references in the unit tests (CUDA has none).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define CLEAVE_HD __host__ __device__ inline
#else
#define CLEAVE_HD inline
#endif

namespace cleave::runtime::special {

constexpr double kPi = 3.14159265358979323846;

template <typename I> struct UnsignedOf;
template <> struct UnsignedOf<int64_t> { using type = uint64_t; };
template <> struct UnsignedOf<int32_t> { using type = uint32_t; };
constexpr double kEulerGamma = 0.57721566490153286061;

template <typename T> CLEAVE_HD T nanValue() { return T(NAN); }
template <typename T> CLEAVE_HD T infValue() { return T(INFINITY); }
/// The unit roundoff of T: where a sum stops changing.
template <typename T> CLEAVE_HD T epsilonOf() {
  return sizeof(T) == 8 ? T(1.1102230246251565e-16) : T(5.9604645e-08);
}
template <typename T> CLEAVE_HD bool isNan(T x) { return x != x; }
template <typename T> CLEAVE_HD bool isInf(T x) { return x == infValue<T>() || x == -infValue<T>(); }

//===----------------------------------------------------------------------===//
// Gamma family.
//===----------------------------------------------------------------------===//

/// log|Gamma(x)|; +inf at the poles (0 and the negative integers).
template <typename T> CLEAVE_HD T lgamma(T x) { return ::lgamma(x); }

/// digamma for x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10,
/// then the asymptotic series in 1/x^2 (Bernoulli numbers).
template <typename T> CLEAVE_HD T digammaPositive(T x) {
  if (x == infValue<T>())
    return x;
  T acc = 0;
  while (x < T(10)) {
    acc -= T(1) / x;
    x += T(1);
  }
  const T z = T(1) / (x * x);
  const T tail =
      z * (T(1.0 / 12) -
           z * (T(1.0 / 120) -
                z * (T(1.0 / 252) -
                     z * (T(1.0 / 240) - z * (T(1.0 / 132) - z * (T(691.0 / 32760) - z / T(12)))))));
  return acc + ::log(x) - T(0.5) / x - tail;
}

/// psi(x): -inf at +0 and +inf at -0 (the sign of the pole's side), NaN at the
/// negative integers, the reflection psi(x) = psi(1 - x) - pi / tan(pi x)
/// below zero.
template <typename T> CLEAVE_HD T digamma(T x) {
  if (isNan(x))
    return x;
  if (x == T(0))
    return ::copysign(infValue<T>(), -x);
  if (x < T(0)) {
    if (x == ::floor(x))
      return nanValue<T>();
    const T frac = x - ::trunc(x); // tan has period pi: keep the argument small
    return digammaPositive(T(1) - x) - T(kPi) / ::tan(T(kPi) * frac);
  }
  return digammaPositive(x);
}

/// trigamma (polygamma of order 1) for x >= 0.5.
template <typename T> CLEAVE_HD T trigammaPositive(T x) {
  if (x == infValue<T>())
    return T(0);
  T acc = 0;
  while (x < T(10)) {
    acc += T(1) / (x * x);
    x += T(1);
  }
  const T z = T(1) / (x * x);
  const T tail =
      z * (T(1.0 / 6) -
           z * (T(1.0 / 30) -
                z * (T(1.0 / 42) -
                     z * (T(1.0 / 30) - z * (T(5.0 / 66) - z * (T(691.0 / 2730) - z * T(7.0 / 6)))))));
  return acc + T(1) / x + T(0.5) * z + tail / x;
}

/// trigamma: the reflection psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) below
/// 1/2 (+inf at 0).
template <typename T> CLEAVE_HD T trigamma(T x) {
  if (isNan(x))
    return x;
  if (x < T(0.5)) {
    const T s = ::sin(T(kPi) * (x - ::floor(x)));
    return T(kPi * kPi) / (s * s) - trigammaPositive(T(1) - x);
  }
  return trigammaPositive(x);
}

/// The Hurwitz zeta function sum_k (k + q)^-s: a direct sum up to q + k >= 9
/// (and at least 9 terms), then the Euler-Maclaurin tail with the Bernoulli
/// numbers B_2j / (2j)!. +inf at s = 1 and at q a non-positive integer, NaN
/// for s < 1 and for q < 0 with s not an integer (q^-s is not real).
template <typename T> CLEAVE_HD T zeta(T s, T q) {
  if (isNan(s) || isNan(q))
    return nanValue<T>();
  if (s == T(1))
    return infValue<T>();
  if (s < T(1))
    return nanValue<T>();
  if (q <= T(0)) {
    if (q == ::floor(q))
      return infValue<T>();
    if (s != ::floor(s))
      return nanValue<T>();
  }
  if (q < T(-1e6)) // the direct sum would not end (q + 1 == q in floats)
    return nanValue<T>();
  const T eps = epsilonOf<T>();
  T sum = ::pow(q, -s), a = q, term = 0;
  for (int k = 0; k < 9 || a <= T(9); ++k) {
    a += T(1);
    term = ::pow(a, -s);
    sum += term;
    if (::fabs(term) < eps * ::fabs(sum))
      return sum;
  }
  // Tail from a: a^(1-s)/(s-1) - a^-s/2 (the last term is counted once) +
  // sum_j B_2j/(2j)! s(s+1)...(s+2j-2) a^(-s-2j+1).
  sum += term * a / (s - T(1)) - T(0.5) * term;
  const double bernoulli[12] = {1.0 / 12,
                                -1.0 / 720,
                                1.0 / 30240,
                                -1.0 / 1209600,
                                1.0 / 47900160,
                                -1.0 / 1.8924375803183791606e9,
                                1.0 / 7.47242496e10,
                                -1.0 / 2.950130727918164224e12,
                                1.0 / 1.1646782814350067249e14,
                                -1.0 / 4.5979787224074726105e15,
                                1.0 / 1.8152105401943546773e17,
                                -1.0 / 7.1661652561756670113e18};
  T factor = s * term / a; // s a^(-s-1)
  for (int j = 0; j < 12; ++j) {
    const T t = T(bernoulli[j]) * factor;
    sum += t;
    if (::fabs(t) < eps * ::fabs(sum))
      break;
    factor *= (s + T(2 * j + 1)) * (s + T(2 * j + 2)) / (a * a);
  }
  return sum;
}

/// polygamma(n, x): digamma for n = 0, trigamma for 1, else
/// (-1)^(n+1) n! zeta(n + 1, x).
template <typename T> CLEAVE_HD T polygamma(int64_t n, T x) {
  if (n == 0)
    return digamma(x);
  if (n == 1)
    return trigamma(x);
  T factorial = 1;
  for (int64_t k = 2; k <= n; ++k)
    factorial *= T(k);
  return (n % 2 == 1 ? factorial : -factorial) * zeta(T(n + 1), x);
}

//===----------------------------------------------------------------------===//
// Error function family.
//===----------------------------------------------------------------------===//

/// Winitzki's closed form of erfinv from log(1 - x^2) (relative error 2e-3),
/// the start of the Newton steps below.
template <typename T> CLEAVE_HD T erfinvGuess(T logOneMinusXSquared) {
  const T a = T(0.147);
  const T t = T(2.0 / kPi) / a + T(0.5) * logOneMinusXSquared;
  return ::sqrt(::sqrt(t * t - logOneMinusXSquared / a) - t);
}

/// The y >= 0 with erfc(y) = q, for q in (0, 1]: Newton's method on
/// log erfc(y) = log q, accurate in the far tail.
template <typename T> CLEAVE_HD T erfcinvUpper(T q) {
  if (q == T(0))
    return infValue<T>();
  T y = erfinvGuess(::log(q) + ::log(T(2) - q));
  const T logQ = ::log(q);
  for (int i = 0; i < 6; ++i) {
    const T e = ::erfc(y);
    if (!(e > T(0)))
      break;
    // d/dy log erfc(y) = -2/sqrt(pi) exp(-y^2) / erfc(y).
    const T step = (::log(e) - logQ) / (T(-1.1283791670955126) * ::exp(-y * y) / e);
    y -= step;
    if (::fabs(step) <= epsilonOf<T>() * ::fabs(y))
      break;
  }
  return y;
}

/// erfinv: Newton on erf near 0, through erfc beyond |x| = 1/2; +-inf at +-1,
/// NaN outside [-1, 1].
template <typename T> CLEAVE_HD T erfinv(T x) {
  if (isNan(x) || x < T(-1) || x > T(1))
    return nanValue<T>();
  const T ax = ::fabs(x);
  if (ax > T(0.5))
    return ::copysign(erfcinvUpper(T(1) - ax), x);
  if (x == T(0))
    return x;
  T y = ::copysign(erfinvGuess(::log1p(-x * x)), x);
  for (int i = 0; i < 4; ++i) {
    const T step = (::erf(y) - x) / (T(1.1283791670955126) * ::exp(-y * y));
    y -= step;
    if (::fabs(step) <= epsilonOf<T>() * ::fabs(y))
      break;
  }
  return y;
}

/// The inverse of the normal CDF: -sqrt(2) erfcinv(2p), through the tail on
/// either side; -inf at 0, +inf at 1, NaN outside [0, 1].
template <typename T> CLEAVE_HD T ndtri(T p) {
  if (isNan(p) || p < T(0) || p > T(1))
    return nanValue<T>();
  if (p < T(0.5))
    return -T(1.4142135623730951) * erfcinvUpper(T(2) * p);
  return T(1.4142135623730951) * erfcinvUpper(T(2) * (T(1) - p));
}

/// exp(x^2) erfc(x): directly while erfc(x) is representable, the asymptotic
/// series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k beyond, and
/// 2 exp(x^2) - erfcx(-x) for x < 0 (+inf for x -> -inf).
template <typename T> CLEAVE_HD T erfcx(T x) {
  if (isNan(x))
    return x;
  if (x < T(0)) {
    if (x < T(-26.7))
      return infValue<T>();
    return T(2) * ::exp(x * x) - erfcx(-x);
  }
  if (x < T(9))
    return ::exp(x * x) * ::erfc(x);
  if (x == infValue<T>())
    return T(0);
  const T w = T(1) / (T(2) * x * x);
  T term = 1, sum = 1;
  for (int k = 1; k < 16; ++k) {
    term *= -T(2 * k - 1) * w;
    sum += term;
  }
  return sum / (x * T(1.7724538509055160));
}

//===----------------------------------------------------------------------===//
// Bessel family.
//===----------------------------------------------------------------------===//

/// sum_k (x^2/4)^k / (k! (k + nu)!) (x/2)^nu: I_nu(x), nu = 0 or 1. Every
/// term is positive: no cancellation.
template <typename T> CLEAVE_HD T besselISeries(int nu, T x) {
  const T q = T(0.25) * x * x;
  T term = nu == 0 ? T(1) : T(0.5) * x, sum = term;
  for (int k = 1; k < 500; ++k) {
    term *= q / (T(k) * T(k + nu));
    sum += term;
    if (term <= epsilonOf<T>() * sum)
      break;
  }
  return sum;
}

/// The asymptotic series of I_nu(x) e^-x sqrt(2 pi x) (x > 0 large):
/// sum_k (-1)^k prod_j (4nu^2 - (2j-1)^2) / (k! (8x)^k); with `alternate`
/// false, that of K_nu(x) e^x sqrt(2x/pi) (the same without the signs).
template <typename T> CLEAVE_HD T besselAsymptotic(int nu, T x, bool alternate) {
  const T mu = T(4 * nu * nu);
  T term = 1, sum = 1;
  for (int k = 1; k < 40; ++k) {
    const T next = term * (mu - T((2 * k - 1) * (2 * k - 1))) / (T(k) * T(8) * x);
    term = alternate ? -next : next;
    sum += term;
    if (::fabs(term) <= epsilonOf<T>() * ::fabs(sum))
      break;
  }
  return sum;
}

/// Where the I series gives way to the asymptotic series.
constexpr double kBesselILarge = 30;

/// exp(-|x|) I_nu(|x|), nu = 0 or 1.
template <typename T> CLEAVE_HD T besselIScaledAbs(int nu, T ax) {
  if (ax == infValue<T>())
    return T(0);
  if (ax <= T(kBesselILarge))
    return ::exp(-ax) * besselISeries(nu, ax);
  return besselAsymptotic(nu, ax, /*alternate=*/true) / ::sqrt(T(2 * kPi) * ax);
}

/// I_nu(|x|): e^|x| split in two halves so that it overflows only when the
/// result does.
template <typename T> CLEAVE_HD T besselIAbs(int nu, T ax) {
  if (ax == infValue<T>())
    return ax;
  if (ax <= T(kBesselILarge))
    return besselISeries(nu, ax);
  const T half = ::exp(T(0.5) * ax);
  return besselIScaledAbs(nu, ax) * half * half;
}

// I_0 and I_1 of +-inf are NaN, as PyTorch's (the scaled ones 0).
template <typename T> CLEAVE_HD T i0(T x) {
  return isNan(x) || isInf(x) ? nanValue<T>() : besselIAbs(0, ::fabs(x));
}
template <typename T> CLEAVE_HD T i0e(T x) { return isNan(x) ? x : besselIScaledAbs(0, ::fabs(x)); }
template <typename T> CLEAVE_HD T i1(T x) {
  return isNan(x) || isInf(x) ? nanValue<T>() : ::copysign(besselIAbs(1, ::fabs(x)), x);
}
template <typename T> CLEAVE_HD T i1e(T x) {
  return isNan(x) ? x : ::copysign(besselIScaledAbs(1, ::fabs(x)), x);
}

/// e^x K_nu(x) for x > 0: the trapezoid rule on
/// int_0^inf exp(nu t - x (cosh t - 1)) dt (doubly exponentially decaying,
/// analytic in a strip: the rule converges geometrically in 1/h) up to x = 20,
/// the asymptotic series beyond.
template <typename T> CLEAVE_HD T besselKScaled(int nu, T x) {
  if (x > T(20))
    return besselAsymptotic(nu, x, /*alternate=*/false) * ::sqrt(T(kPi / 2) / x);
  const T h = T(0.1);
  T sum = T(0.5); // the t = 0 end: cosh(0) = 1
  for (int k = 1; k < 4000; ++k) {
    const T t = h * T(k);
    const T e = -x * (::cosh(t) - T(1));
    const T v = T(0.5) * (::exp(T(nu) * t + e) + ::exp(-T(nu) * t + e));
    sum += v;
    if (v <= epsilonOf<T>() * sum)
      break;
  }
  return h * sum;
}

/// K_nu and e^x K_nu: +inf at 0, NaN below 0, 0 at +inf.
template <typename T> CLEAVE_HD T besselK(int nu, T x, bool scaled) {
  if (isNan(x) || x < T(0))
    return nanValue<T>();
  if (x == T(0))
    return infValue<T>();
  if (x == infValue<T>())
    return T(0);
  const T k = besselKScaled(nu, x);
  if (scaled)
    return k;
  const T half = ::exp(T(-0.5) * x);
  return k * half * half;
}

/// Where the J/Y power series give way to Hankel's asymptotic expansion: the
/// series loses about x/ln(10) digits to cancellation, the expansion's error
/// is about e^-2x.
template <typename T> CLEAVE_HD T besselJYLarge() { return sizeof(T) == 8 ? T(12) : T(8); }

/// Hankel's expansion for x > 0: J_nu and Y_nu from P cos(chi) - Q sin(chi)
/// and P sin(chi) + Q cos(chi), chi = x - (nu/2 + 1/4) pi.
template <typename T> CLEAVE_HD void besselJYAsymptotic(int nu, T x, T *j, T *y) {
  const T mu = T(4 * nu * nu);
  T p = 1, q = 0, term = 1, previous = infValue<T>();
  for (int k = 1; k < 60; ++k) {
    term *= (mu - T((2 * k - 1) * (2 * k - 1))) / (T(k) * T(8) * x);
    if (::fabs(term) > previous) // the expansion starts to diverge
      break;
    previous = ::fabs(term);
    const T signed_ = (k / 2) % 2 == 0 ? term : -term; // (-1)^floor(k/2)
    if (k % 2 == 1)
      q += signed_;
    else
      p += signed_;
    if (::fabs(term) <= epsilonOf<T>())
      break;
  }
  const T chi = x - T(kPi) * (T(0.5) * T(nu) + T(0.25));
  const T scale = ::sqrt(T(2 / kPi) / x);
  const T c = ::cos(chi), s = ::sin(chi);
  *j = scale * (p * c - q * s);
  *y = scale * (p * s + q * c);
}

/// J_0 and J_1 for x >= 0 by the power series.
template <typename T> CLEAVE_HD T besselJSeries(int nu, T x) {
  const T q = T(-0.25) * x * x;
  T term = nu == 0 ? T(1) : T(0.5) * x, sum = term;
  for (int k = 1; k < 200; ++k) {
    term *= q / (T(k) * T(k + nu));
    sum += term;
    if (::fabs(term) <= epsilonOf<T>() * ::fabs(sum))
      break;
  }
  return sum;
}

template <typename T> CLEAVE_HD T besselJ(int nu, T x) {
  if (isNan(x) || isInf(x)) // NaN at +-inf, as PyTorch's
    return nanValue<T>();
  const T ax = ::fabs(x);
  T j;
  if (ax <= besselJYLarge<T>()) {
    j = besselJSeries(nu, ax);
  } else {
    T y;
    besselJYAsymptotic(nu, ax, &j, &y);
  }
  return nu == 1 && x < T(0) ? -j : j; // J_0 is even, J_1 odd
}

/// Y_0 and Y_1: -inf at 0, NaN below 0 and at +inf.
template <typename T> CLEAVE_HD T besselY(int nu, T x) {
  if (isNan(x) || x < T(0))
    return nanValue<T>();
  if (x == T(0))
    return -infValue<T>();
  if (x == infValue<T>()) // as PyTorch's
    return nanValue<T>();
  if (x > besselJYLarge<T>()) {
    T j, y;
    besselJYAsymptotic(nu, x, &j, &y);
    return y;
  }
  const T logHalf = ::log(T(0.5) * x);
  const T q = T(-0.25) * x * x;
  if (nu == 0) {
    // (2/pi) [(ln(x/2) + gamma) J0(x) - sum_k>=1 H_k (-x^2/4)^k / (k!)^2].
    T term = 1, harmonic = 0, sum = 0;
    for (int k = 1; k < 200; ++k) {
      term *= q / (T(k) * T(k));
      harmonic += T(1) / T(k);
      sum += harmonic * term;
      if (::fabs(harmonic * term) <= epsilonOf<T>() * ::fabs(sum))
        break;
    }
    return T(2 / kPi) * ((logHalf + T(kEulerGamma)) * besselJSeries(0, x) - sum);
  }
  // (2/pi) ln(x/2) J1(x) - 2/(pi x)
  //   - (1/pi) sum_k>=0 (psi(k+1) + psi(k+2)) (-x^2/4)^k (x/2) / (k! (k+1)!),
  // psi(k+1) = H_k - gamma.
  T term = T(0.5) * x, harmonic = 0;
  T sum = (T(1) - T(2 * kEulerGamma)) * term; // k = 0: psi(1) + psi(2) = 1 - 2 gamma
  for (int k = 1; k < 200; ++k) {
    term *= q / (T(k) * T(k + 1));
    harmonic += T(1) / T(k);
    const T t = (T(2) * harmonic + T(1) / T(k + 1) - T(2 * kEulerGamma)) * term;
    sum += t;
    if (::fabs(t) <= epsilonOf<T>() * ::fabs(sum))
      break;
  }
  return T(2 / kPi) * logHalf * besselJSeries(1, x) - T(2 / kPi) / x - T(1 / kPi) * sum;
}

/// Airy Ai: its Maclaurin series c1 f(x) - c2 g(x) for |x| <= 5, the
/// asymptotic expansions in zeta = 2/3 |x|^(3/2) beyond (exponential decay
/// for x > 0, oscillation for x < 0). NaN at +-inf, as PyTorch.
template <typename T> CLEAVE_HD T airyAi(T x) {
  if (isNan(x) || isInf(x))
    return nanValue<T>();
  const T c1 = T(0.355028053887817239), c2 = T(0.258819403792806798);
  const T eps = epsilonOf<T>();
  if (::fabs(x) <= T(5)) {
    const T x3 = x * x * x;
    T f = 1, g = x, tf = 1, tg = x;
    for (int k = 1; k < 200; ++k) {
      tf *= x3 / (T(3 * k) * T(3 * k - 1));
      tg *= x3 / (T(3 * k + 1) * T(3 * k));
      f += tf;
      g += tg;
      if (::fabs(tf) <= eps * ::fabs(f) && ::fabs(tg) <= eps * ::fabs(g))
        break;
    }
    return c1 * f - c2 * g;
  }
  const T ax = ::fabs(x);
  const T z = T(2.0 / 3) * ax * ::sqrt(ax);
  // u_k = (6k-5)(6k-3)(6k-1) / (216 k (2k-1)) u_(k-1); terms u_k / z^k.
  T u = 1, even = 1, odd = 0, alternating = 1, previous = infValue<T>();
  for (int k = 1; k < 60; ++k) {
    u *= T((6 * k - 5) * (6 * k - 3) * (6 * k - 1)) / (T(216 * k) * T(2 * k - 1) * z);
    if (::fabs(u) > previous)
      break;
    previous = ::fabs(u);
    const T signedTerm = k % 2 == 1 ? -u : u; // (-1)^k u_k / z^k
    alternating += signedTerm;
    // For x < 0: even terms (-1)^(k/2) u_2k, odd terms (-1)^((k-1)/2) u_(2k+1).
    if (k % 2 == 0)
      even += (k / 2) % 2 == 0 ? u : -u;
    else
      odd += ((k - 1) / 2) % 2 == 0 ? u : -u;
    if (::fabs(u) <= eps)
      break;
  }
  const T root = ::sqrt(::sqrt(ax)); // |x|^(1/4)
  if (x > T(0))
    return ::exp(-z) / (T(2 * 1.7724538509055160) * root) * alternating;
  const T phase = z + T(kPi / 4);
  return (::sin(phase) * even - ::cos(phase) * odd) / (T(1.7724538509055160) * root);
}

//===----------------------------------------------------------------------===//
// Incomplete gamma functions.
//===----------------------------------------------------------------------===//

/// x^a e^-x / Gamma(a), in logs.
template <typename T> CLEAVE_HD T gammaPrefactor(T a, T x) {
  return ::exp(a * ::log(x) - x - ::lgamma(a));
}

/// P(a, x) by its series for x < a + 1: x^a e^-x / Gamma(a+1) sum x^k / (a+1)...(a+k).
template <typename T> CLEAVE_HD T igammaSeries(T a, T x) {
  T term = 1, sum = 1, denominator = a;
  for (int k = 0; k < 2000; ++k) {
    denominator += T(1);
    term *= x / denominator;
    sum += term;
    if (term <= epsilonOf<T>() * sum)
      break;
  }
  return sum * gammaPrefactor(a, x) / a;
}

/// Q(a, x) by Legendre's continued fraction (modified Lentz) for x >= a + 1.
template <typename T> CLEAVE_HD T igammacFraction(T a, T x) {
  const T tiny = sizeof(T) == 8 ? T(1e-300) : T(1e-30);
  T b = x + T(1) - a, c = T(1) / tiny, d = T(1) / b, h = d;
  for (int i = 1; i < 2000; ++i) {
    const T an = -T(i) * (T(i) - a);
    b += T(2);
    d = an * d + b;
    if (::fabs(d) < tiny)
      d = tiny;
    c = b + an / c;
    if (::fabs(c) < tiny)
      c = tiny;
    d = T(1) / d;
    const T delta = d * c;
    h *= delta;
    if (::fabs(delta - T(1)) <= epsilonOf<T>())
      break;
  }
  return gammaPrefactor(a, x) * h;
}

/// The regularized lower (upper = false) or upper incomplete gamma function,
/// with PyTorch's edge values.
template <typename T> CLEAVE_HD T incompleteGamma(T a, T x, bool upper) {
  if (isNan(a) || isNan(x) || x < T(0) || a < T(0))
    return nanValue<T>();
  if (a == T(0))
    return x > T(0) ? T(upper ? 0 : 1) : nanValue<T>();
  if (x == T(0))
    return T(upper ? 1 : 0);
  if (isInf(a))
    return isInf(x) ? nanValue<T>() : T(upper ? 1 : 0);
  if (isInf(x))
    return T(upper ? 0 : 1);
  if (x < a + T(1)) {
    const T p = igammaSeries(a, x);
    return upper ? T(1) - p : p;
  }
  const T q = igammacFraction(a, x);
  return upper ? q : T(1) - q;
}

//===----------------------------------------------------------------------===//
// Orthogonal polynomials p_n(x): n is truncated to an integer, n < 0 gives 0
// (as PyTorch); three-term recurrences, and for the Chebyshev kinds with
// |x| < 1 and n > 6 the trigonometric forms.
//===----------------------------------------------------------------------===//

constexpr int64_t kMaxRecurrenceDegree = 10000000;

enum class Polynomial {
  ChebyshevT, ChebyshevU, ChebyshevV, ChebyshevW,
  ShiftedChebyshevT, ShiftedChebyshevU, ShiftedChebyshevV, ShiftedChebyshevW,
  HermiteH, HermiteHe, LaguerreL, LegendreP
};

/// The Chebyshev polynomials of the four kinds at x, by the recurrence
/// p_(k+1) = 2x p_k - p_(k-1) from p_0 = 1 and p_1 = x, 2x, 2x - 1, 2x + 1.
template <typename T> CLEAVE_HD T chebyshev(int kind, int64_t n, T x) {
  if (n == 0)
    return T(1);
  if (::fabs(x) == T(1)) {
    // The closed forms at the ends, where the recurrence would run n steps.
    const T odd = n % 2 == 0 ? T(1) : T(-1), twoNPlusOne = T(2) * T(n) + T(1);
    switch (kind) {
    case 0:
      return x > T(0) ? T(1) : odd;
    case 1:
      return x > T(0) ? T(n) + T(1) : odd * (T(n) + T(1));
    case 2:
      return x > T(0) ? T(1) : odd * twoNPlusOne;
    default:
      return x > T(0) ? twoNPlusOne : odd;
    }
  }
  if (::fabs(x) < T(1) && n > 6) {
    const T theta = ::acos(x);
    const T nn = T(n);
    switch (kind) {
    case 0:
      return ::cos(nn * theta);
    case 1: {
      const T s = ::sin(theta);
      if (s != T(0))
        return ::sin((nn + T(1)) * theta) / s;
      break;
    }
    case 2: {
      const T c = ::cos(T(0.5) * theta);
      if (c != T(0))
        return ::cos((nn + T(0.5)) * theta) / c;
      break;
    }
    default: {
      const T s = ::sin(T(0.5) * theta);
      if (s != T(0))
        return ::sin((nn + T(0.5)) * theta) / s;
      break;
    }
    }
  }
  T p = 1;
  T q = kind == 0 ? x : kind == 1 ? x + x : kind == 2 ? x + x - T(1) : x + x + T(1);
  for (int64_t k = 1; k < n; ++k) {
    const T r = (x + x) * q - p;
    p = q;
    q = r;
    if (isNan(q))
      break;
  }
  return q;
}

template <typename T> CLEAVE_HD T polynomial(Polynomial which, T x, T degree) {
  // PyTorch casts the degree to int64 (toward zero: -0.5 is degree 0); NaN and
  // degrees beyond int64 cast to INT64_MIN on x86, a negative degree.
  if (isNan(degree) || degree <= T(-1) || degree >= T(9.2e18))
    return T(0);
  if (isNan(x))
    return x;
  const int64_t n = static_cast<int64_t>(degree);
  // Beyond this degree the recurrences of bounded values (|x| <= 1) would run
  // for minutes: the result is NaN instead (PyTorch iterates n times).
  const bool chebyshevKind = static_cast<int>(which) < 8;
  if (n > kMaxRecurrenceDegree && !(chebyshevKind && ::fabs(
        static_cast<int>(which) < 4 ? x : x + x - T(1)) <= T(1)))
    return nanValue<T>();
  switch (which) {
  case Polynomial::ChebyshevT:
  case Polynomial::ChebyshevU:
  case Polynomial::ChebyshevV:
  case Polynomial::ChebyshevW:
    return chebyshev(static_cast<int>(which), n, x);
  case Polynomial::ShiftedChebyshevT:
  case Polynomial::ShiftedChebyshevU:
  case Polynomial::ShiftedChebyshevV:
  case Polynomial::ShiftedChebyshevW:
    return chebyshev(static_cast<int>(which) - 4, n, x + x - T(1));
  case Polynomial::HermiteH:
  case Polynomial::HermiteHe: {
    // H: p_(k+1) = 2x p_k - 2k p_(k-1); He: p_(k+1) = x p_k - k p_(k-1).
    const bool physicists = which == Polynomial::HermiteH;
    const T y = physicists ? x + x : x;
    T p = 1, q = y;
    if (n == 0)
      return p;
    for (int64_t k = 1; k < n; ++k) {
      const T r = y * q - (physicists ? T(2 * k) : T(k)) * p;
      p = q;
      q = r;
      if (isInf(q) || isNan(q))
        break;
    }
    return q;
  }
  case Polynomial::LaguerreL: {
    // (k+1) L_(k+1) = (2k + 1 - x) L_k - k L_(k-1).
    if (n == 0 || x == T(0))
      return T(1);
    T p = 1, q = T(1) - x;
    for (int64_t k = 1; k < n; ++k) {
      const T r = ((T(2 * k + 1) - x) * q - T(k) * p) / T(k + 1);
      p = q;
      q = r;
      if (isInf(q) || isNan(q))
        break;
    }
    return q;
  }
  default: {
    // Legendre: (k+1) P_(k+1) = (2k + 1) x P_k - k P_(k-1).
    if (n == 0)
      return T(1);
    T p = 1, q = x;
    for (int64_t k = 1; k < n; ++k) {
      const T r = (T(2 * k + 1) * x * q - T(k) * p) / T(k + 1);
      p = q;
      q = r;
      if (isInf(q) || isNan(q))
        break;
    }
    return q;
  }
  }
}

/// The kernel attribute spelling of each polynomial family.
inline bool parsePolynomial(const char *name, Polynomial *out) {
  static const char *const names[] = {
      "chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w",
      "shifted_chebyshev_t", "shifted_chebyshev_u", "shifted_chebyshev_v", "shifted_chebyshev_w",
      "hermite_h", "hermite_he", "laguerre_l", "legendre_p"};
  for (int i = 0; i < 12; ++i) {
    const char *a = names[i], *b = name;
    while (*a && *a == *b) {
      ++a;
      ++b;
    }
    if (*a == 0 && *b == 0) {
      *out = static_cast<Polynomial>(i);
      return true;
    }
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Integer functions: gcd and lcm on magnitudes computed unsigned (|INT_MIN|
// wraps back to INT_MIN, as PyTorch's two's-complement abs).
//===----------------------------------------------------------------------===//

template <typename I> CLEAVE_HD I gcd(I a, I b) {
  using U = typename UnsignedOf<I>::type;
  U x = a < 0 ? U(0) - U(a) : U(a), y = b < 0 ? U(0) - U(b) : U(b);
  while (x != 0) {
    const U t = y % x;
    y = x;
    x = t;
  }
  return static_cast<I>(y);
}

/// |a / gcd(a, b) * b|, 0 when either is 0; wraps on overflow.
template <typename I> CLEAVE_HD I lcm(I a, I b) {
  using U = typename UnsignedOf<I>::type;
  const I g = gcd(a, b);
  if (g == 0)
    return 0;
  const U x = a < 0 ? U(0) - U(a) : U(a), y = b < 0 ? U(0) - U(b) : U(b);
  return static_cast<I>(x / U(g) * y);
}

//===----------------------------------------------------------------------===//
// The unary and binary functions that are kernels, by kernel name. Each entry
// is X(kernel name, expression of x (and y)).
//===----------------------------------------------------------------------===//

#define CLEAVE_SPECIAL_UNARY_FUNCTIONS(X)                                                     \
  X(lgamma, ::cleave::runtime::special::lgamma(x))                                            \
  X(erfinv, ::cleave::runtime::special::erfinv(x))                                            \
  X(i0, ::cleave::runtime::special::i0(x))                                                    \
  X(i0e, ::cleave::runtime::special::i0e(x))                                                  \
  X(i1, ::cleave::runtime::special::i1(x))                                                    \
  X(i1e, ::cleave::runtime::special::i1e(x))                                                  \
  X(ndtri, ::cleave::runtime::special::ndtri(x))                                              \
  X(erfcx, ::cleave::runtime::special::erfcx(x))                                              \
  X(bessel_j0, ::cleave::runtime::special::besselJ(0, x))                                     \
  X(bessel_j1, ::cleave::runtime::special::besselJ(1, x))                                     \
  X(bessel_y0, ::cleave::runtime::special::besselY(0, x))                                     \
  X(bessel_y1, ::cleave::runtime::special::besselY(1, x))                                     \
  X(modified_bessel_k0, ::cleave::runtime::special::besselK(0, x, false))                     \
  X(modified_bessel_k1, ::cleave::runtime::special::besselK(1, x, false))                     \
  X(scaled_modified_bessel_k0, ::cleave::runtime::special::besselK(0, x, true))               \
  X(scaled_modified_bessel_k1, ::cleave::runtime::special::besselK(1, x, true))               \
  X(airy_ai, ::cleave::runtime::special::airyAi(x))

#define CLEAVE_SPECIAL_BINARY_FUNCTIONS(X)                                                    \
  X(zeta, ::cleave::runtime::special::zeta(x, y))                                             \
  X(igamma, ::cleave::runtime::special::incompleteGamma(x, y, false))                         \
  X(igammac, ::cleave::runtime::special::incompleteGamma(x, y, true))

} // namespace cleave::runtime::special
