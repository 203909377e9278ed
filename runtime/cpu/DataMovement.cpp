//===- DataMovement.cpp - reshape, permute, broadcast_to, slice, concat, gather, scatter ===//
//
// These kernels move elements without looking at them, so they work on every
// dtype (bf16 and f16 included) by element size. Contiguous runs are
// memcpy'd; permute transposes in cache-sized tiles when the innermost dim
// moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace cleave::runtime::cpu {
namespace {

/// memcpy split across threads for large buffers.
void parallelCopy(void *dst, const void *src, size_t bytes) {
  constexpr int64_t kBlock = 1 << 16;
  const int64_t blocks = static_cast<int64_t>((bytes + kBlock - 1) / kBlock);
  parallelRange(blocks, kBlock / 4, [&](int64_t b, int64_t e) {
    size_t begin = static_cast<size_t>(b) * kBlock;
    size_t end = std::min(bytes, static_cast<size_t>(e) * kBlock);
    std::memcpy(static_cast<char *>(dst) + begin, static_cast<const char *>(src) + begin,
                end - begin);
  });
}

/// Calls fn<T>() with the unsigned integer type of `bytes` bytes.
template <typename Fn> auto withElementType(size_t bytes, const Fn &fn) {
  switch (bytes) {
  case 1:
    return fn(uint8_t{});
  case 2:
    return fn(uint16_t{});
  case 4:
    return fn(uint32_t{});
  default:
    return fn(uint64_t{});
  }
}

//===----------------------------------------------------------------------===//
// reshape: the output may share the input's memory.
//===----------------------------------------------------------------------===//

Status buildReshape(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkReshape(sig));
  const TensorDesc &x = *sig.inputs[0];
  const size_t bytes = x.bytes();
  *fn = [bytes](const KernelCall &call) -> Status {
    if (call.outputs[0] != call.inputs[0])
      parallelCopy(call.outputs[0], call.inputs[0], bytes);
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// permute
//===----------------------------------------------------------------------===//

/// Copies one tile: out[a * outStride + b] = in[a + b * inStride].
template <typename T>
void transposeTile(const T *in, T *out, int64_t rowsA, int64_t colsB, int64_t inStride,
                   int64_t outStride) {
  for (int64_t a = 0; a < rowsA; ++a)
    for (int64_t b = 0; b < colsB; ++b)
      out[a * outStride + b] = in[a + b * inStride];
}

/// Permute over coalesced output dims `sizes` (outermost first), each with
/// its stride in the input.
template <typename T>
KernelFn makePermute(std::vector<int64_t> sizes, std::vector<int64_t> inStrides) {
  const int64_t rank = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> outStrides = contiguousStrides(sizes);
  int64_t total = numElements(sizes);
  if (rank == 0 || (rank == 1 && inStrides[0] == 1)) {
    return [total](const KernelCall &call) -> Status {
      parallelCopy(call.outputs[0], call.inputs[0], sizeof(T) * total);
      return {};
    };
  }
  if (inStrides.back() == 1) {
    // The innermost output dim is contiguous in the input: copy rows.
    const int64_t inner = sizes.back();
    const int64_t rows = total / inner;
    return [=](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      parallelRange(rows, inner, [&](int64_t b, int64_t e) {
        std::vector<int64_t> index(rank - 1);
        int64_t off = 0, rest = b;
        for (int64_t d = rank - 2; d >= 0; --d) {
          index[d] = rest % sizes[d];
          rest /= sizes[d];
          off += index[d] * inStrides[d];
        }
        for (int64_t r = b; r < e; ++r) {
          std::memcpy(y + r * inner, x + off, sizeof(T) * inner);
          for (int64_t d = rank - 2; d >= 0; --d) {
            off += inStrides[d];
            if (++index[d] < sizes[d])
              break;
            off -= index[d] * inStrides[d];
            index[d] = 0;
          }
        }
      });
      return {};
    };
  }
  // Transpose: dim `a` is contiguous in the input, the last dim `b` in the
  // output. Tiles of a x b, looped over the remaining dims.
  int64_t a = 0;
  for (int64_t d = 0; d < rank; ++d)
    if (inStrides[d] == 1)
      a = d;
  const int64_t last = rank - 1;
  std::vector<int64_t> otherSizes, otherIn, otherOut;
  for (int64_t d = 0; d < last; ++d)
    if (d != a) {
      otherSizes.push_back(sizes[d]);
      otherIn.push_back(inStrides[d]);
      otherOut.push_back(outStrides[d]);
    }
  const int64_t others = numElements(otherSizes);
  constexpr int64_t kTile = 32;
  const int64_t sizeA = sizes[a], sizeB = sizes[last];
  const int64_t tilesA = (sizeA + kTile - 1) / kTile, tilesB = (sizeB + kTile - 1) / kTile;
  const int64_t inStrideB = inStrides[last], outStrideA = outStrides[a];
  const int64_t no = static_cast<int64_t>(otherSizes.size());
  return [=](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    parallelRange(others * tilesA, kTile * sizeB, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t o = item / tilesA, ta = item % tilesA;
        int64_t inOff = 0, outOff = 0, rest = o;
        for (int64_t d = no - 1; d >= 0; --d) {
          int64_t i = rest % otherSizes[d];
          rest /= otherSizes[d];
          inOff += i * otherIn[d];
          outOff += i * otherOut[d];
        }
        const int64_t a0 = ta * kTile, na = std::min(kTile, sizeA - a0);
        for (int64_t tb = 0; tb < tilesB; ++tb) {
          const int64_t b0 = tb * kTile, nb = std::min(kTile, sizeB - b0);
          transposeTile(x + inOff + a0 + b0 * inStrideB, y + outOff + a0 * outStrideA + b0, na,
                        nb, inStrideB, outStrideA);
        }
      }
    });
    return {};
  };
}

Status buildPermute(const KernelSignature &sig, KernelFn *fn) {
  PermuteParams pp;
  CLEAVE_RETURN_IF_ERROR(parsePermute(sig, &pp));
  const TensorDesc &x = *sig.inputs[0];
  const std::vector<int64_t> &dims = pp.dims;
  // Coalesce: drop size-1 dims and merge output dims that are adjacent in
  // the input too.
  std::vector<int64_t> inStrides = contiguousStrides(x.shape);
  std::vector<int64_t> sizes, strides;
  for (int64_t d : dims) {
    if (x.shape[d] == 1)
      continue;
    if (!sizes.empty() && strides.back() == inStrides[d] * x.shape[d]) {
      sizes.back() *= x.shape[d];
      strides.back() = inStrides[d];
      continue;
    }
    sizes.push_back(x.shape[d]);
    strides.push_back(inStrides[d]);
  }
  if (x.numel() == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  *fn = withElementType(dtypeBytes(x.dtype), [&](auto t) {
    return makePermute<decltype(t)>(sizes, strides);
  });
  return {};
}

//===----------------------------------------------------------------------===//
// broadcast_to
//===----------------------------------------------------------------------===//

Status buildBroadcastTo(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkBroadcastTo(sig));
  const TensorDesc &x = *sig.inputs[0], &y = sig.outputs[0];
  BroadcastLayout layout = makeBroadcastLayout(y.shape, {x.shape});
  *fn = withElementType(dtypeBytes(x.dtype), [&](auto t) -> KernelFn {
    using T = decltype(t);
    return [layout](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      const bool contiguous = layout.innerStride(0) != 0;
      forEachSpan(layout, [&](const std::array<int64_t, kMaxOperands> &off, int64_t pos,
                              int64_t len) {
        if (contiguous) {
          std::memcpy(y + pos, x + off[0], sizeof(T) * len);
        } else {
          const T v = x[off[0]];
          T *out = y + pos;
          for (int64_t i = 0; i < len; ++i)
            out[i] = v;
        }
      });
      return {};
    };
  });
  return {};
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

Status buildSlice(const KernelSignature &sig, KernelFn *fn) {
  SliceParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSlice(sig, &sp));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t start = sp.start, step = sp.step, size = sp.size, count = sp.count;
  const int64_t outer = sp.outer, inner = sp.inner;
  const size_t elem = dtypeBytes(x.dtype);
  if (outer * count * inner == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  if (step == 1) {
    // One contiguous run per outer index.
    const size_t run = count * inner * elem, srcStride = size * inner * elem;
    const size_t offset = start * inner * elem;
    *fn = [outer, run, srcStride, offset](const KernelCall &call) -> Status {
      const char *x = static_cast<const char *>(call.inputs[0]);
      char *y = static_cast<char *>(call.outputs[0]);
      if (outer == 1) {
        parallelCopy(y, x + offset, run);
        return {};
      }
      parallelRange(outer, static_cast<int64_t>(run / 4), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          std::memcpy(y + o * run, x + o * srcStride + offset, run);
      });
      return {};
    };
    return {};
  }
  *fn = withElementType(elem, [&](auto t) -> KernelFn {
    using T = decltype(t);
    return [outer, count, inner, size, start, step](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      parallelRange(outer * count, inner, [&](int64_t b, int64_t e) {
        for (int64_t item = b; item < e; ++item) {
          int64_t o = item / count, k = item % count;
          const T *src = x + (o * size + start + k * step) * inner;
          T *dst = y + item * inner;
          if (inner == 1)
            *dst = *src;
          else
            std::memcpy(dst, src, sizeof(T) * inner);
        }
      });
      return {};
    };
  });
  return {};
}

//===----------------------------------------------------------------------===//
// concat
//===----------------------------------------------------------------------===//

Status buildConcat(const KernelSignature &sig, KernelFn *fn) {
  ConcatParams cp;
  CLEAVE_RETURN_IF_ERROR(parseConcat(sig, &cp));
  const TensorDesc &first = *sig.inputs[0];
  const int64_t dim = cp.dim, outer = cp.outer, inner = cp.inner;
  const size_t elem = dtypeBytes(first.dtype);
  // Per input: its run of bytes per outer index and where it lands in the
  // output's run.
  std::vector<size_t> runs, offsets;
  size_t total = 0;
  for (const auto &t : sig.inputs) {
    runs.push_back(t->shape[dim] * inner * elem);
    offsets.push_back(total);
    total += runs.back();
  }
  *fn = [outer, runs, offsets, total](const KernelCall &call) -> Status {
    char *y = static_cast<char *>(call.outputs[0]);
    const size_t n = runs.size();
    if (outer == 1) {
      for (size_t i = 0; i < n; ++i)
        parallelCopy(y + offsets[i], call.inputs[i], runs[i]);
      return {};
    }
    parallelRange(outer, static_cast<int64_t>(total / 4), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        for (size_t i = 0; i < n; ++i)
          std::memcpy(y + o * total + offsets[i],
                      static_cast<const char *>(call.inputs[i]) + o * runs[i], runs[i]);
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// gather and scatter: along one dim, by line (IndexAlongDim).
//===----------------------------------------------------------------------===//

/// Checks every index before anything is written, so that a bad one is an
/// error naming the kernel, its value and position, never a wild access.
template <typename Index>
Status checkIndices(const char *kernel, const Index *index, int64_t count, int64_t size,
                    int dim) {
  for (int64_t i = 0; i < count; ++i)
    if (index[i] < 0 || index[i] >= size)
      return CLEAVE_ERROR(kernel, ": index ", static_cast<int64_t>(index[i]), " at position ", i,
                          " is out of range for dim ", dim, " of size ", size);
  return {};
}

template <typename T, typename Index>
Status gatherLines(const IndexAlongDim &p, const T *x, const Index *index, T *y,
                   const std::string &kernel) {
  CLEAVE_RETURN_IF_ERROR(
      checkIndices(kernel.c_str(), index, p.lines * p.k, p.size, p.dim));
  parallelRange(p.lines, p.k, [&](int64_t b, int64_t e) {
    for (int64_t line = b; line < e; ++line) {
      int64_t at, in;
      p.lineStart(line, &at, &in);
      for (int64_t j = 0; j < p.k; ++j, at += p.indexStride)
        y[at] = x[in + static_cast<int64_t>(index[at]) * p.inputStride];
    }
  });
  return {};
}

/// Elements move as bytes, so every dtype takes one path.
Status buildGather(const KernelSignature &sig, KernelFn *fn) {
  IndexAlongDim p;
  CLEAVE_RETURN_IF_ERROR(parseGather(sig, "cpu",
                                     {DType::F32, DType::BF16, DType::F16, DType::I64,
                                      DType::I32, DType::I1},
                                     &p));
  const size_t elem = dtypeBytes(sig.inputs[0]->dtype);
  std::string kernel = sig.kernel;
  *fn = [p, elem, kernel](const KernelCall &call) -> Status {
    return withElementType(elem, [&](auto tag) -> Status {
      using T = decltype(tag);
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      if (p.wide)
        return gatherLines(p, x, static_cast<const int64_t *>(call.inputs[1]), y, kernel);
      return gatherLines(p, x, static_cast<const int32_t *>(call.inputs[1]), y, kernel);
    });
  };
  return {};
}

/// How one scattered value combines with the element it lands on. Bools
/// add as `or` and multiply as `and` (PyTorch's bool arithmetic); float
/// maxima and minima propagate NaN, as scatter_reduce's CPU kernel.
template <typename T> struct Combine {
  static T apply(ScatterReduceKind kind, T a, T v) {
    switch (kind) {
    case ScatterReduceKind::None:
      return v;
    case ScatterReduceKind::Sum:
    case ScatterReduceKind::Mean:
      if constexpr (std::is_same_v<T, Bool>)
        return static_cast<Bool>(a || v);
      else
        return a + v;
    case ScatterReduceKind::Prod:
      if constexpr (std::is_same_v<T, Bool>)
        return static_cast<Bool>(a && v);
      else
        return a * v;
    case ScatterReduceKind::Amax:
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(v) || std::isnan(a))
          return std::isnan(a) ? a : v;
      return v > a ? v : a;
    case ScatterReduceKind::Amin:
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(v) || std::isnan(a))
          return std::isnan(a) ? a : v;
      return v < a ? v : a;
    }
    return v;
  }
  /// The start of an element that receives values without include_self:
  /// combining it with the first value gives that value.
  static T identity(ScatterReduceKind kind) {
    switch (kind) {
    case ScatterReduceKind::Prod:
      return T(1);
    case ScatterReduceKind::Amax:
      if constexpr (std::is_floating_point_v<T>)
        return -std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::lowest();
    case ScatterReduceKind::Amin:
      if constexpr (std::is_floating_point_v<T>)
        return std::numeric_limits<T>::infinity();
      else
        return std::numeric_limits<T>::max();
    default:
      return T(0);
    }
  }
  /// sum / count; integers round toward -inf, as PyTorch's floor division.
  static T mean(T sum, int64_t count) {
    if constexpr (std::is_floating_point_v<T>) {
      return sum / static_cast<T>(count);
    } else {
      T n = static_cast<T>(count), q = sum / n;
      if (sum % n != 0 && sum < 0)
        --q;
      return q;
    }
  }
};

/// Lines own disjoint output elements, so they run in parallel; within a
/// line the entries apply in index order (the last write wins for `none`,
/// as PyTorch's CPU kernel).
template <typename T, typename Index>
Status scatterLines(const IndexAlongDim &p, ScatterReduceKind kind, bool includeSelf, const T *x,
                    const Index *index, const T *src, T *y, int64_t numel,
                    const std::string &kernel) {
  CLEAVE_RETURN_IF_ERROR(checkIndices(kernel.c_str(), index, p.lines * p.k, p.size, p.dim));
  if (y != x)
    parallelCopy(y, x, sizeof(T) * numel);
  const bool fresh = kind != ScatterReduceKind::None && !includeSelf;
  const bool mean = kind == ScatterReduceKind::Mean;
  parallelRange(p.lines, p.k, [&](int64_t b, int64_t e) {
    std::vector<int64_t> count(mean ? p.size : 0);
    for (int64_t line = b; line < e; ++line) {
      int64_t start, in;
      p.lineStart(line, &start, &in);
      if (fresh)
        for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride)
          y[in + static_cast<int64_t>(index[at]) * p.inputStride] = Combine<T>::identity(kind);
      for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride) {
        const int64_t pos = static_cast<int64_t>(index[at]);
        T &dst = y[in + pos * p.inputStride];
        dst = Combine<T>::apply(kind, dst, src[at]);
        if (mean)
          ++count[pos];
      }
      if (!mean)
        continue;
      for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride) {
        const int64_t pos = static_cast<int64_t>(index[at]);
        if (count[pos] == 0)
          continue; // divided already
        T &dst = y[in + pos * p.inputStride];
        dst = Combine<T>::mean(dst, count[pos] + (includeSelf ? 1 : 0));
        count[pos] = 0;
      }
    }
  });
  return {};
}

template <typename T>
KernelFn makeScatter(const IndexAlongDim &p, ScatterReduceKind kind, bool includeSelf,
                     int64_t numel, std::string kernel) {
  return [=](const KernelCall &call) -> Status {
    const T *x = static_cast<const T *>(call.inputs[0]);
    const T *src = static_cast<const T *>(call.inputs[2]);
    T *y = static_cast<T *>(call.outputs[0]);
    if (p.wide)
      return scatterLines(p, kind, includeSelf, x, static_cast<const int64_t *>(call.inputs[1]),
                          src, y, numel, kernel);
    return scatterLines(p, kind, includeSelf, x, static_cast<const int32_t *>(call.inputs[1]),
                        src, y, numel, kernel);
  };
}

Status buildScatter(const KernelSignature &sig, KernelFn *fn) {
  IndexAlongDim p;
  ScatterReduceKind kind;
  bool includeSelf = true;
  CLEAVE_RETURN_IF_ERROR(parseScatter(sig, "cpu", {DType::F32, DType::I64, DType::I32, DType::I1},
                                      &p, &kind, &includeSelf));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t numel = x.numel();
  switch (x.dtype) {
  case DType::F32:
    *fn = makeScatter<float>(p, kind, includeSelf, numel, sig.kernel);
    break;
  case DType::I64:
    *fn = makeScatter<int64_t>(p, kind, includeSelf, numel, sig.kernel);
    break;
  case DType::I32:
    *fn = makeScatter<int32_t>(p, kind, includeSelf, numel, sig.kernel);
    break;
  default:
    *fn = makeScatter<Bool>(p, kind, includeSelf, numel, sig.kernel);
    break;
  }
  return {};
}

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["reshape"] = {buildReshape, /*takesBf16=*/true};
  table["permute"] = {buildPermute, /*takesBf16=*/true};
  table["broadcast_to"] = {buildBroadcastTo, /*takesBf16=*/true};
  table["slice"] = {buildSlice, /*takesBf16=*/true};
  table["concat"] = {buildConcat, /*takesBf16=*/true};
  table["gather"] = {buildGather, /*takesBf16=*/true};
  // Reductions compute: bf16 scatters run widened to f32.
  table["scatter"] = buildScatter;
}

} // namespace cleave::runtime::cpu
