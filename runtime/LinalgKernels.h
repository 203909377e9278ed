//===- LinalgKernels.h - One small matrix per call, in double ---*- C++ -*-===//
//
// The arithmetic of the linear algebra kernels (lu_factor,
// lu_pivots_to_permutation, cholesky, triangular_solve) on one matrix,
// shared by the CPU kernels and the CUDA ones (one thread per matrix). Each
// reads T (f32), computes in a caller-provided double scratch and writes T:
// PyTorch's CPU results come from LAPACK, and double keeps f32 results
// within a few ulps of them. The loops follow LAPACK's unblocked getf2 and
// potf2 and reference BLAS's trsm, so ties, zeros and non-finite values
// land where LAPACK puts them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CLEAVE_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_HOST_DEVICE
#endif

namespace cleave::runtime::linalg {

/// LU with partial pivoting of the row-major [m, n] `a` into `lu` (packed as
/// getrf: U on and above the diagonal, L's multipliers below), 1-based
/// `pivots` [min(m, n)]; `w` holds m * n doubles. The pivot of column j is
/// the first row at or below j with the largest |value| (BLAS's iamax).
/// Returns info: 0, or the 1-based column of the first zero pivot.
template <typename T>
CLEAVE_HOST_DEVICE int32_t luFactor(const T *a, T *lu, int32_t *pivots, int64_t m, int64_t n,
                                    double *w) {
  for (int64_t i = 0; i < m * n; ++i)
    w[i] = static_cast<double>(a[i]);
  int32_t info = 0;
  const int64_t k = m < n ? m : n;
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = j;
    double best = std::fabs(w[j * n + j]);
    for (int64_t i = j + 1; i < m; ++i) {
      double v = std::fabs(w[i * n + j]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    pivots[j] = static_cast<int32_t>(p + 1);
    if (w[p * n + j] != 0) {
      if (p != j)
        for (int64_t c = 0; c < n; ++c) {
          double t = w[j * n + c];
          w[j * n + c] = w[p * n + c];
          w[p * n + c] = t;
        }
      const double pivot = w[j * n + j];
      for (int64_t i = j + 1; i < m; ++i)
        w[i * n + j] /= pivot;
    } else if (info == 0) {
      info = static_cast<int32_t>(j + 1);
    }
    // The rank-1 update of the trailing block (getf2's ger).
    for (int64_t i = j + 1; i < m; ++i) {
      const double l = w[i * n + j];
      for (int64_t c = j + 1; c < n; ++c)
        w[i * n + c] -= l * w[j * n + c];
    }
  }
  for (int64_t i = 0; i < m * n; ++i)
    lu[i] = static_cast<T>(w[i]);
  return info;
}

/// The row permutation of 1-based `pivots` [k] over `rows` rows:
/// `permutation[r]` is the original row that ends at r. Returns the index of
/// the first pivot outside [1, rows], or -1 when all are valid (then the
/// permutation is complete).
template <typename P>
CLEAVE_HOST_DEVICE int64_t pivotsToPermutation(const P *pivots, int64_t *permutation, int64_t k,
                                               int64_t rows) {
  for (int64_t r = 0; r < rows; ++r)
    permutation[r] = r;
  for (int64_t j = 0; j < k; ++j) {
    int64_t p = static_cast<int64_t>(pivots[j]) - 1;
    if (p < 0 || p >= rows)
      return j;
    int64_t t = permutation[j];
    permutation[j] = permutation[p];
    permutation[p] = t;
  }
  return -1;
}

/// Cholesky of the [n, n] `a` reading its lower triangle (its upper one
/// with `upper`, as U^T U = A): `out` is L (U with `upper`), zero elsewhere;
/// `w` holds n * n doubles. Returns info: 0, or the 1-based order of the
/// first leading minor that is not positive definite (potf2 stops there; the
/// columns before it are factored, that diagonal holds the non-positive
/// value, the later columns are the input's).
template <typename T>
CLEAVE_HOST_DEVICE int32_t cholesky(const T *a, T *out, int64_t n, bool upper, double *w) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      w[i * n + j] = j > i ? 0.0 : static_cast<double>(upper ? a[j * n + i] : a[i * n + j]);
  int32_t info = 0;
  for (int64_t j = 0; j < n; ++j) {
    double d = w[j * n + j];
    for (int64_t c = 0; c < j; ++c)
      d -= w[j * n + c] * w[j * n + c];
    if (!(d > 0)) { // a NaN fails too, as potf2's check
      w[j * n + j] = d;
      info = static_cast<int32_t>(j + 1);
      break;
    }
    d = std::sqrt(d);
    w[j * n + j] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = w[i * n + j];
      for (int64_t c = 0; c < j; ++c)
        s -= w[i * n + c] * w[j * n + c];
      w[i * n + j] = s / d;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      out[i * n + j] = static_cast<T>(upper ? w[j * n + i] : w[i * n + j]);
  return info;
}

/// Solves op(A) X = B for the [n, n] triangular `a` and [n, k] `b` into
/// `x`, op(A) = A^T with `transpose`; only A's `upper` (else lower)
/// triangle is read, its diagonal taken as ones with `unit`. `w` holds
/// n * k doubles. Reference BLAS's trsm loops: a zero right-hand side skips
/// its division (no 0/0), a zero diagonal otherwise gives inf or NaN.
template <typename T>
CLEAVE_HOST_DEVICE void triangularSolve(const T *a, const T *b, T *x, int64_t n, int64_t k,
                                        bool upper, bool transpose, bool unit, double *w) {
  for (int64_t i = 0; i < n * k; ++i)
    w[i] = static_cast<double>(b[i]);
  auto A = [&](int64_t i, int64_t j) { return static_cast<double>(a[i * n + j]); };
  for (int64_t col = 0; col < k; ++col) {
    double *B = w + col; // B(i) = B[i * k]
    if (!transpose) {
      // Eliminate column by column from the far end of the triangle.
      for (int64_t s = 0; s < n; ++s) {
        const int64_t r = upper ? n - 1 - s : s;
        if (B[r * k] == 0)
          continue;
        if (!unit)
          B[r * k] /= A(r, r);
        // The rest of column r of the triangle: above r (upper), below it.
        const double v = B[r * k];
        const int64_t lo = upper ? 0 : r + 1, hi = upper ? r : n;
        for (int64_t i = lo; i < hi; ++i)
          B[i * k] -= v * A(i, r);
      }
    } else {
      // A^T's rows are A's columns: a dot product per unknown.
      for (int64_t s = 0; s < n; ++s) {
        const int64_t r = upper ? s : n - 1 - s;
        double t = B[r * k];
        const int64_t lo = upper ? 0 : r + 1, hi = upper ? r : n;
        for (int64_t i = lo; i < hi; ++i)
          t -= A(i, r) * B[i * k];
        if (!unit)
          t /= A(r, r);
        B[r * k] = t;
      }
    }
  }
  for (int64_t i = 0; i < n * k; ++i)
    x[i] = static_cast<T>(w[i]);
}

} // namespace cleave::runtime::linalg
