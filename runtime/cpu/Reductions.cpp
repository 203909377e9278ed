//===- Reductions.cpp - reductions, index reductions and scans ------------===//
//
// The input dims are coalesced into alternating kept / reduced groups. The
// common shapes get contiguous loops: [kept, reduced] reduces rows,
// [kept, reduced, kept] reduces columns (vectorized across the inner kept
// dim); anything else walks the reduced elements of each output.
//
// Floats accumulate in float (vectorized partial sums), integers in int64.
// An empty `dims` list reduces nothing: the output is the input, as the
// dialect's type inference says.
//
// reduce_max_index / reduce_min_index and the scans (cumsum, cumprod) work
// on the input viewed as [outer, size, inner]: a row at a time when inner is
// 1, else a row of `inner` columns per step (contiguous reads). Scans of
// floats accumulate in double, as PyTorch's CPU kernels.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <limits>
#include <type_traits>

namespace cleave::runtime::cpu {
namespace {

enum class Reduce { Sum, Mean, Max, Prod };

template <typename T> using Acc = std::conditional_t<std::is_floating_point_v<T>, float, int64_t>;

/// Integer sums and products wrap around, as PyTorch's do: computed on the
/// unsigned type, where wrapping is defined (signed overflow is undefined).
template <typename A> A wrapAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) +
                          static_cast<std::make_unsigned_t<A>>(b));
  else
    return a + b;
}
template <typename A> A wrapMul(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) *
                          static_cast<std::make_unsigned_t<A>>(b));
  else
    return a * b;
}

/// Writes `count` ones of `dtype` (the product of nothing).
void fillOnes(void *out, int64_t count, DType dtype) {
  switch (dtype) {
  case DType::F32:
    std::fill_n(static_cast<float *>(out), count, 1.0f);
    break;
  case DType::I64:
    std::fill_n(static_cast<int64_t *>(out), count, int64_t(1));
    break;
  default:
    std::fill_n(static_cast<int32_t *>(out), count, int32_t(1));
    break;
  }
}

template <Reduce K, typename T> Acc<T> identity() {
  if constexpr (K == Reduce::Max)
    return std::is_floating_point_v<T> ? -std::numeric_limits<float>::infinity()
                                       : static_cast<Acc<T>>(std::numeric_limits<T>::lowest());
  else if constexpr (K == Reduce::Prod)
    return Acc<T>(1);
  else
    return Acc<T>(0);
}

template <Reduce K, typename T> Acc<T> combine(Acc<T> acc, T v) {
  if constexpr (K == Reduce::Max) {
    if constexpr (std::is_floating_point_v<T>)
      return ((v > acc) | (v != v)) ? v : acc; // NaN propagates
    else
      return v > acc ? v : acc;
  } else if constexpr (K == Reduce::Prod) {
    return wrapMul(acc, static_cast<Acc<T>>(v));
  } else {
    return wrapAdd(acc, static_cast<Acc<T>>(v));
  }
}

template <Reduce K, typename T> T finish(Acc<T> acc, int64_t count) {
  if constexpr (K == Reduce::Mean)
    return static_cast<T>(acc / static_cast<Acc<T>>(count));
  else
    return static_cast<T>(acc);
}

/// Reduces n contiguous elements.
template <Reduce K, typename T> Acc<T> reduceContiguous(const T *x, int64_t n) {
  if constexpr (K == Reduce::Max && std::is_floating_point_v<T>) {
    float m = -std::numeric_limits<float>::infinity();
    int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t i = 0; i < n; ++i) {
      m = x[i] > m ? x[i] : m;
      nan |= x[i] != x[i];
    }
    return nan ? std::numeric_limits<float>::quiet_NaN() : m;
  } else if constexpr (K == Reduce::Max) {
    Acc<T> m = identity<K, T>();
#pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i)
      m = x[i] > m ? x[i] : m;
    return m;
  } else if constexpr (std::is_integral_v<Acc<T>>) {
    // Unsigned, so that a product or sum that wraps is defined.
    uint64_t a = K == Reduce::Prod ? 1 : 0;
    if constexpr (K == Reduce::Prod) {
#pragma omp simd reduction(* : a)
      for (int64_t i = 0; i < n; ++i)
        a *= static_cast<uint64_t>(static_cast<int64_t>(x[i]));
    } else {
#pragma omp simd reduction(+ : a)
      for (int64_t i = 0; i < n; ++i)
        a += static_cast<uint64_t>(static_cast<int64_t>(x[i]));
    }
    return static_cast<Acc<T>>(a);
  } else if constexpr (K == Reduce::Prod) {
    Acc<T> p = 1;
#pragma omp simd reduction(* : p)
    for (int64_t i = 0; i < n; ++i)
      p *= x[i];
    return p;
  } else {
    Acc<T> s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i)
      s += x[i];
    return s;
  }
}

/// out[j] = reduce over r < rows of x[r * stride + j], for j < count.
template <Reduce K, typename T>
void reduceColumns(const T *x, int64_t rows, int64_t stride, int64_t count, T *out) {
  constexpr int64_t kBlock = 256;
  Acc<T> acc[kBlock];
  for (int64_t j0 = 0; j0 < count; j0 += kBlock) {
    const int64_t len = std::min(kBlock, count - j0);
    for (int64_t j = 0; j < len; ++j)
      acc[j] = identity<K, T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * stride + j0;
      for (int64_t j = 0; j < len; ++j)
        acc[j] = combine<K, T>(acc[j], xr[j]);
    }
    for (int64_t j = 0; j < len; ++j)
      out[j0 + j] = finish<K, T>(acc[j], rows);
  }
}

/// Output columns per work item of a column reduction.
constexpr int64_t kColumnBlock = 1024;

template <Reduce K, typename T>
KernelFn makeReduction(const std::vector<ReduceGroup> &groups, int64_t outCount,
                       int64_t reducedCount, const Shape &inShape,
                       const std::vector<bool> &reducedDims) {
  // [kept?, reduced]: rows.
  if (groups.size() <= 2 && !groups.empty() && groups.back().reduced) {
    const int64_t r = groups.back().size;
    const int64_t outer = groups.size() == 2 ? groups[0].size : 1;
    return [outer, r](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      parallelRange(outer, r, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          y[o] = finish<K, T>(reduceContiguous<K, T>(x + o * r, r), r);
      });
      return {};
    };
  }
  // [kept?, reduced, kept]: columns.
  if ((groups.size() == 2 && groups[0].reduced) || (groups.size() == 3 && groups[1].reduced)) {
    const int64_t outer = groups.size() == 3 ? groups[0].size : 1;
    const int64_t r = groups[groups.size() - 2].size, inner = groups.back().size;
    const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
    return [outer, r, inner, blocks](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      parallelRange(outer * blocks, r * std::min(inner, kColumnBlock), [&](int64_t b, int64_t e) {
        for (int64_t item = b; item < e; ++item) {
          int64_t o = item / blocks, j0 = (item % blocks) * kColumnBlock;
          reduceColumns<K, T>(x + o * r * inner + j0, r, inner, std::min(kColumnBlock, inner - j0),
                              y + o * inner + j0);
        }
      });
      return {};
    };
  }
  // Nothing reduced (only size-1 dims, or no dims): a copy.
  bool anyReduced = false;
  for (const ReduceGroup &g : groups)
    anyReduced |= g.reduced;
  if (!anyReduced) {
    return [outCount](const KernelCall &call) -> Status {
      std::memcpy(call.outputs[0], call.inputs[0], sizeof(T) * outCount);
      return {};
    };
  }
  // General: the kept dims index the output, the reduced dims are walked
  // with an odometer for each output element.
  std::vector<int64_t> strides = contiguousStrides(inShape);
  std::vector<int64_t> keptSizes, keptStrides, redSizes, redStrides;
  for (size_t d = 0; d < inShape.size(); ++d) {
    if (inShape[d] == 1)
      continue;
    (reducedDims[d] ? redSizes : keptSizes).push_back(inShape[d]);
    (reducedDims[d] ? redStrides : keptStrides).push_back(strides[d]);
  }
  return [=](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    const int64_t nk = static_cast<int64_t>(keptSizes.size());
    const int64_t nr = static_cast<int64_t>(redSizes.size());
    parallelRange(outCount, reducedCount, [&](int64_t b, int64_t e) {
      std::vector<int64_t> index(nr);
      for (int64_t o = b; o < e; ++o) {
        int64_t base = 0, rest = o;
        for (int64_t d = nk - 1; d >= 0; --d) {
          base += (rest % keptSizes[d]) * keptStrides[d];
          rest /= keptSizes[d];
        }
        std::fill(index.begin(), index.end(), 0);
        Acc<T> acc = identity<K, T>();
        int64_t off = base;
        for (int64_t i = 0; i < reducedCount; ++i) {
          acc = combine<K, T>(acc, x[off]);
          for (int64_t d = nr - 1; d >= 0; --d) {
            off += redStrides[d];
            if (++index[d] < redSizes[d])
              break;
            off -= index[d] * redStrides[d];
            index[d] = 0;
          }
        }
        y[o] = finish<K, T>(acc, reducedCount);
      }
    });
    return {};
  };
}

template <Reduce K> Status buildReduction(const KernelSignature &sig, KernelFn *fn) {
  ReduceParams r;
  CLEAVE_RETURN_IF_ERROR(parseReduction(
      sig, "cpu",
      K == Reduce::Mean ? std::initializer_list<DType>{DType::F32}
                        : std::initializer_list<DType>{DType::F32, DType::I64, DType::I32},
      K == Reduce::Max, &r));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t outCount = r.outCount, reducedCount = r.reducedCount;
  const std::vector<ReduceGroup> &groups = r.groups;
  const std::vector<bool> &reduced = r.reduced;
  if (outCount == 0 || x.numel() == 0) {
    // Nothing to read: sums are 0, means 0/0, products 1.
    float meanValue = std::numeric_limits<float>::quiet_NaN();
    *fn = [outCount, meanValue, dtype = x.dtype](const KernelCall &call) -> Status {
      if (K == Reduce::Mean && dtype == DType::F32) {
        float *y = static_cast<float *>(call.outputs[0]);
        for (int64_t i = 0; i < outCount; ++i)
          y[i] = meanValue;
      } else if (K == Reduce::Prod) {
        fillOnes(call.outputs[0], outCount, dtype);
      } else {
        std::memset(call.outputs[0], 0, outCount * dtypeBytes(dtype));
      }
      return {};
    };
    return {};
  }
  switch (x.dtype) {
  case DType::F32:
    *fn = makeReduction<K, float>(groups, outCount, reducedCount, x.shape, reduced);
    return {};
  case DType::I64:
    if constexpr (K != Reduce::Mean) {
      *fn = makeReduction<K, int64_t>(groups, outCount, reducedCount, x.shape, reduced);
      return {};
    }
    break;
  case DType::I32:
    if constexpr (K != Reduce::Mean) {
      *fn = makeReduction<K, int32_t>(groups, outCount, reducedCount, x.shape, reduced);
      return {};
    }
    break;
  default:
    break;
  }
  return noKernelFor(sig.kernel, x.dtype);
}

//===----------------------------------------------------------------------===//
// Index reductions.
//===----------------------------------------------------------------------===//

/// Whether `v` replaces `best` as the maximum (or minimum): strictly beyond
/// it, so ties keep the first index; a NaN replaces any number and no NaN
/// replaces a NaN, so the first NaN wins (PyTorch's max/min with a dim).
template <bool Max, typename T> inline bool replaces(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v)
      return best == best;
  }
  return Max ? v > best : v < best;
}

template <bool Max, typename T> KernelFn makeIndexReduction(const IndexReduceParams &p) {
  return [p](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *values = static_cast<T *>(call.outputs[0]);
    int64_t *indices = static_cast<int64_t *>(call.outputs[1]);
    const int64_t size = p.size, inner = p.inner;
    parallelRange(p.outer, size * inner, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T *row = x + o * size * inner;
        T *v = values + o * inner;
        int64_t *idx = indices + o * inner;
        if (inner == 1) {
          T best = row[0];
          int64_t at = 0;
          for (int64_t i = 1; i < size; ++i)
            if (replaces<Max>(row[i], best)) {
              best = row[i];
              at = i;
            }
          *v = best;
          *idx = at;
          continue;
        }
        // Columns: the first row seeds every column, later rows challenge it.
        std::memcpy(v, row, sizeof(T) * inner);
        std::fill(idx, idx + inner, int64_t(0));
        for (int64_t i = 1; i < size; ++i) {
          const T *r = row + i * inner;
          for (int64_t j = 0; j < inner; ++j)
            if (replaces<Max>(r[j], v[j])) {
              v[j] = r[j];
              idx[j] = i;
            }
        }
      }
    });
    return {};
  };
}

template <bool Max> Status buildIndexReduction(const KernelSignature &sig, KernelFn *fn) {
  IndexReduceParams p;
  CLEAVE_RETURN_IF_ERROR(parseIndexReduction(
      sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1}, &p));
  if (p.outer * p.inner == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeIndexReduction<Max, float>(p);
    return {};
  case DType::I64:
    *fn = makeIndexReduction<Max, int64_t>(p);
    return {};
  case DType::I32:
    *fn = makeIndexReduction<Max, int32_t>(p);
    return {};
  case DType::I1:
    *fn = makeIndexReduction<Max, Bool>(p);
    return {};
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

//===----------------------------------------------------------------------===//
// Scans.
//===----------------------------------------------------------------------===//

enum class Scan { Sum, Prod };

template <typename T> using ScanAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <Scan K, typename T> inline ScanAcc<T> step(ScanAcc<T> acc, T v) {
  if constexpr (K == Scan::Sum)
    return wrapAdd(acc, static_cast<ScanAcc<T>>(v));
  else
    return wrapMul(acc, static_cast<ScanAcc<T>>(v));
}

template <Scan K, typename T> KernelFn makeScan(const ScanParams &p) {
  return [p](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    const int64_t size = p.size, inner = p.inner;
    const ScanAcc<T> identity = K == Scan::Sum ? 0 : 1;
    // Element i of the scan order is at row `first + i * dir`.
    const int64_t first = p.reverse ? size - 1 : 0, dir = p.reverse ? -1 : 1;
    parallelRange(p.outer, size * inner, [&](int64_t b, int64_t e) {
      std::vector<ScanAcc<T>> acc(inner);
      for (int64_t o = b; o < e; ++o) {
        const T *xo = x + o * size * inner;
        T *yo = y + o * size * inner;
        std::fill(acc.begin(), acc.end(), identity);
        for (int64_t i = 0, r = first; i < size; ++i, r += dir) {
          const T *xr = xo + r * inner;
          T *yr = yo + r * inner;
          for (int64_t j = 0; j < inner; ++j) {
            acc[j] = step<K, T>(acc[j], xr[j]);
            yr[j] = static_cast<T>(acc[j]);
          }
        }
      }
    });
    return {};
  };
}

template <Scan K> Status buildScan(const KernelSignature &sig, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseScan(sig, "cpu", {DType::F32, DType::I64, DType::I32}, &p));
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeScan<K, float>(p);
    return {};
  case DType::I64:
    *fn = makeScan<K, int64_t>(p);
    return {};
  case DType::I32:
    *fn = makeScan<K, int32_t>(p);
    return {};
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

//===----------------------------------------------------------------------===//
// Sorting and scans with indices.
//===----------------------------------------------------------------------===//

template <typename T> inline bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

/// PyTorch's sort order: NaN after every number (before it descending).
template <typename T> inline bool sortsBefore(T a, T b, bool descending) {
  if (descending)
    return (isNan(a) && !isNan(b)) || a > b;
  return (!isNan(a) && isNan(b)) || a < b;
}

/// Sorts each [size] slice of [outer, size, inner] with std::stable_sort on
/// (value, index) pairs, so equal elements keep their order either way.
template <typename T> KernelFn makeSort(const ScanParams &p) {
  return [p](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *values = static_cast<T *>(call.outputs[0]);
    int64_t *indices = static_cast<int64_t *>(call.outputs[1]);
    const int64_t size = p.size, inner = p.inner;
    const bool descending = p.reverse;
    parallelRange(p.outer * inner, size * 8, [&](int64_t b, int64_t e) {
      std::vector<std::pair<T, int64_t>> slice(size);
      for (int64_t t = b; t < e; ++t) {
        const int64_t base = (t / inner) * size * inner + t % inner;
        for (int64_t i = 0; i < size; ++i)
          slice[i] = {x[base + i * inner], i};
        std::stable_sort(slice.begin(), slice.end(), [descending](const auto &l, const auto &r) {
          return sortsBefore(l.first, r.first, descending);
        });
        for (int64_t i = 0; i < size; ++i) {
          values[base + i * inner] = slice[i].first;
          indices[base + i * inner] = slice[i].second;
        }
      }
    });
    return {};
  };
}

/// Running maximum (minimum) with the index it came from: an element
/// replaces the running value when >= (<=) it, so ties take the later index;
/// a NaN replaces anything, and only a NaN replaces a NaN (PyTorch's CPU
/// cummax / cummin).
template <bool Max, typename T> inline bool replacesRunning(T v, T best) {
  if (isNan(v))
    return true;
  return Max ? v >= best : v <= best;
}

template <bool Max, typename T> KernelFn makeIndexScan(const ScanParams &p) {
  return [p](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *values = static_cast<T *>(call.outputs[0]);
    int64_t *indices = static_cast<int64_t *>(call.outputs[1]);
    const int64_t size = p.size, inner = p.inner;
    parallelRange(p.outer * inner, size, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t base = (t / inner) * size * inner + t % inner;
        T best{};
        int64_t at = 0;
        for (int64_t i = 0; i < size; ++i) {
          const T v = x[base + i * inner];
          if (i == 0 || replacesRunning<Max>(v, best)) {
            best = v;
            at = i;
          }
          values[base + i * inner] = best;
          indices[base + i * inner] = at;
        }
      }
    });
    return {};
  };
}

template <bool Max> Status buildIndexScan(const KernelSignature &sig, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseValuesAndIndicesScan(
      sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1}, &p));
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeIndexScan<Max, float>(p);
    return {};
  case DType::I64:
    *fn = makeIndexScan<Max, int64_t>(p);
    return {};
  case DType::I32:
    *fn = makeIndexScan<Max, int32_t>(p);
    return {};
  case DType::I1:
    *fn = makeIndexScan<Max, Bool>(p);
    return {};
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

Status buildSort(const KernelSignature &sig, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseValuesAndIndicesScan(
      sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1}, &p));
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    *fn = makeSort<float>(p);
    return {};
  case DType::I64:
    *fn = makeSort<int64_t>(p);
    return {};
  case DType::I32:
    *fn = makeSort<int32_t>(p);
    return {};
  case DType::I1:
    *fn = makeSort<Bool>(p);
    return {};
  default:
    return noKernelFor(sig.kernel, sig.inputs[0]->dtype);
  }
}

/// log(exp(a) + exp(b)) without overflow: max + log1p(exp(min - max)); two
/// equal infinities (or -inf and anything) need no log1p, and NaN propagates
/// (PyTorch's _log_add_exp_helper).
inline double logAddExp(double a, double b) {
  if (a != a || b != b)
    return std::numeric_limits<double>::quiet_NaN();
  const double lo = std::min(a, b), hi = std::max(a, b);
  if (lo == hi && std::isinf(lo))
    return hi;
  if (lo == -std::numeric_limits<double>::infinity())
    return hi;
  return hi + std::log1p(std::exp(lo - hi));
}

KernelFn makeLogcumsumexp(const ScanParams &p) {
  return [p](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    const int64_t size = p.size, inner = p.inner;
    const int64_t first = p.reverse ? size - 1 : 0, dir = p.reverse ? -1 : 1;
    parallelRange(p.outer * inner, size * 20, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t base = (t / inner) * size * inner + t % inner;
        double acc = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0, r = first; i < size; ++i, r += dir) {
          acc = logAddExp(acc, static_cast<double>(x[base + r * inner]));
          y[base + r * inner] = static_cast<float>(acc);
        }
      }
    });
    return {};
  };
}

Status buildLogcumsumexp(const KernelSignature &sig, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseScan(sig, "cpu", {DType::F32}, &p));
  *fn = makeLogcumsumexp(p);
  return {};
}

} // namespace

void registerReductionKernels(KernelTable &table) {
  table["reduce_sum"] = buildReduction<Reduce::Sum>;
  table["reduce_mean"] = buildReduction<Reduce::Mean>;
  table["reduce_max"] = buildReduction<Reduce::Max>;
  table["reduce_prod"] = buildReduction<Reduce::Prod>;
  table["reduce_max_index"] = buildIndexReduction<true>;
  table["reduce_min_index"] = buildIndexReduction<false>;
  table["cumsum"] = buildScan<Scan::Sum>;
  table["cumprod"] = buildScan<Scan::Prod>;
  table["cummax"] = buildIndexScan<true>;
  table["cummin"] = buildIndexScan<false>;
  table["logcumsumexp"] = buildLogcumsumexp;
  table["sort"] = buildSort;
}

} // namespace cleave::runtime::cpu
