//===- DataMovement.cu - reshape, permute, broadcast_to, slice, concat, embedding -===//
//
// Data movement looks at bits only, so every dtype works by element size.
// permute, broadcast_to, slice and concat are one strided copy each (per
// input for concat): output and input offsets from coalesced dims, the
// element widened to up to 16 bytes when the innermost run allows it.
//
// embedding gathers rows of a [rows, dim] table. With `row_offset` the table
// is a vocabulary shard and indices outside it give zero rows; a whole table
// records an index outside it in ctx.deviceError (the backend reports it at
// synchronize) and writes a zero row there.
//
// gather runs one thread per result element. scatter runs one thread per
// line of the index (the entries that differ only in the scattered dim):
// lines own disjoint output elements, and a thread applies its line's
// entries in index order, so results are deterministic and the same as the
// CPU's (the last write wins), with no atomics. Out-of-range indices are
// recorded in ctx.deviceError and skipped.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <array>
#include <limits>
#include <type_traits>
#include <string>

namespace cleave::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Strided copies: out[outBase + sum i_d * outStride_d] =
// in[inBase + sum i_d * inStride_d] over dims (outermost first).
//===----------------------------------------------------------------------===//

struct StridedCopy {
  size_t elem = 1;
  std::vector<int64_t> dims;
  /// [out, in] strides per dim, in elements.
  std::vector<std::array<int64_t, 2>> strides;
  int64_t outBase = 0, inBase = 0;
  int64_t count = 0;
};

/// Drops size-1 dims and merges a dim into the previous one when both
/// operands step through them as one.
StridedCopy makeStridedCopy(size_t elem, const std::vector<int64_t> &dims,
                            const std::vector<std::array<int64_t, 2>> &strides, int64_t outBase,
                            int64_t inBase) {
  StridedCopy copy;
  copy.elem = elem;
  copy.outBase = outBase;
  copy.inBase = inBase;
  copy.count = numElements(dims);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1)
      continue;
    if (!copy.dims.empty() && copy.strides.back()[0] == strides[d][0] * dims[d] &&
        copy.strides.back()[1] == strides[d][1] * dims[d]) {
      copy.dims.back() *= dims[d];
      copy.strides.back() = strides[d];
      continue;
    }
    copy.dims.push_back(dims[d]);
    copy.strides.push_back(strides[d]);
  }
  if (copy.dims.empty()) {
    copy.dims.push_back(1);
    copy.strides.push_back({1, 1});
  }
  return copy;
}

Status checkCopyRank(const KernelSignature &sig, const StridedCopy &copy) {
  if (copy.dims.size() > static_cast<size_t>(kMaxLayoutRank))
    return CLEAVE_ERROR(sig.kernel, ": the cuda backend handles at most ", kMaxLayoutRank,
                        " non-contiguous dims, got ", copy.dims.size());
  return {};
}

template <typename T, typename I>
__global__ void stridedCopyKernel(const T *__restrict__ in, T *__restrict__ out,
                                  DeviceLayout layout, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    I off[2];
    layoutOffsets<2>(layout, static_cast<I>(i), off);
    out[off[0]] = in[off[1]];
  }
}

template <int W>
void launchCopyAs(DeviceContext *c, const DeviceLayout &layout, int64_t n, const char *in,
                  char *out) {
  using T = typename BitsOf<W>::type;
  if (fits32(layout, n))
    stridedCopyKernel<T, int32_t><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        reinterpret_cast<const T *>(in), reinterpret_cast<T *>(out), layout, n);
  else
    stridedCopyKernel<T, int64_t><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        reinterpret_cast<const T *>(in), reinterpret_cast<T *>(out), layout, n);
}

/// Enqueues `copy` from `in` to `out` (base pointers of whole tensors).
Status runStridedCopy(DeviceContext *c, const std::string &name, const StridedCopy &copy,
                      const void *inBase, void *outBase) {
  if (copy.count == 0)
    return {};
  const char *in = static_cast<const char *>(inBase) + copy.inBase * copy.elem;
  char *out = static_cast<char *>(outBase) + copy.outBase * copy.elem;
  const size_t rank = copy.dims.size();
  // The widest access (in bytes) that the innermost run, every stride and
  // both pointers allow.
  size_t width = copy.elem;
  for (size_t w : {size_t(16), size_t(8), size_t(4), size_t(2)}) {
    if (w <= copy.elem || w % copy.elem != 0)
      continue;
    const int64_t k = static_cast<int64_t>(w / copy.elem);
    bool ok = copy.strides.back()[0] == 1 && copy.strides.back()[1] == 1 &&
              copy.dims.back() % k == 0 && aligned(in, w) && aligned(out, w);
    for (size_t d = 0; ok && d + 1 < rank; ++d)
      ok = copy.strides[d][0] % k == 0 && copy.strides[d][1] % k == 0;
    if (ok) {
      width = w;
      break;
    }
  }
  const int64_t k = static_cast<int64_t>(width / copy.elem);
  DeviceLayout layout;
  layout.rank = static_cast<int>(rank);
  for (size_t d = 0; d < rank; ++d) {
    layout.dims[d] = d + 1 == rank ? copy.dims[d] / k : copy.dims[d];
    layout.strides[d][0] = d + 1 == rank ? copy.strides[d][0] : copy.strides[d][0] / k;
    layout.strides[d][1] = d + 1 == rank ? copy.strides[d][1] : copy.strides[d][1] / k;
  }
  const int64_t n = copy.count / k;
  switch (width) {
  case 1:
    launchCopyAs<1>(c, layout, n, in, out);
    break;
  case 2:
    launchCopyAs<2>(c, layout, n, in, out);
    break;
  case 4:
    launchCopyAs<4>(c, layout, n, in, out);
    break;
  case 8:
    launchCopyAs<8>(c, layout, n, in, out);
    break;
  default:
    launchCopyAs<16>(c, layout, n, in, out);
    break;
  }
  return launchStatus(name);
}

KernelFn makeCopyFn(DeviceContext &ctx, const std::string &name, StridedCopy copy) {
  DeviceContext *c = &ctx;
  return [c, name, copy](const KernelCall &call) -> Status {
    return runStridedCopy(c, name, copy, call.inputs[0], call.outputs[0]);
  };
}

//===----------------------------------------------------------------------===//
// reshape: outputs never alias inputs, so a device-to-device copy.
//===----------------------------------------------------------------------===//

Status buildReshape(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkReshape(sig));
  const TensorDesc &x = *sig.inputs[0];
  const size_t bytes = x.bytes();
  DeviceContext *c = &ctx;
  *fn = [c, bytes](const KernelCall &call) -> Status {
    if (bytes == 0 || call.outputs[0] == call.inputs[0])
      return {};
    return cudaStatus(cudaMemcpyAsync(call.outputs[0], call.inputs[0], bytes,
                                      cudaMemcpyDeviceToDevice, c->stream),
                      "cudaMemcpyAsync");
  };
  return {};
}

//===----------------------------------------------------------------------===//
// permute
//===----------------------------------------------------------------------===//

Status buildPermute(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PermuteParams pp;
  CLEAVE_RETURN_IF_ERROR(parsePermute(sig, &pp));
  const TensorDesc &x = *sig.inputs[0];
  const std::vector<int64_t> &dims = pp.dims;
  const Shape &outShape = pp.outShape;
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape);
  const std::vector<int64_t> outStrides = contiguousStrides(outShape);
  std::vector<std::array<int64_t, 2>> strides;
  for (size_t i = 0; i < dims.size(); ++i)
    strides.push_back({outStrides[i], inStrides[dims[i]]});
  StridedCopy copy = makeStridedCopy(dtypeBytes(x.dtype), outShape, strides, 0, 0);
  CLEAVE_RETURN_IF_ERROR(checkCopyRank(sig, copy));
  *fn = makeCopyFn(ctx, sig.kernel, std::move(copy));
  return {};
}

//===----------------------------------------------------------------------===//
// broadcast_to
//===----------------------------------------------------------------------===//

Status buildBroadcastTo(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkBroadcastTo(sig));
  const TensorDesc &x = *sig.inputs[0], &y = sig.outputs[0];
  BroadcastLayout layout = makeBroadcastLayout(y.shape, {x.shape});
  const std::vector<int64_t> outStrides = contiguousStrides(layout.dims);
  std::vector<std::array<int64_t, 2>> strides;
  for (size_t d = 0; d < layout.dims.size(); ++d)
    strides.push_back({outStrides[d], layout.strides[d][0]});
  StridedCopy copy = makeStridedCopy(dtypeBytes(x.dtype), layout.dims, strides, 0, 0);
  copy.count = y.numel();
  CLEAVE_RETURN_IF_ERROR(checkCopyRank(sig, copy));
  *fn = makeCopyFn(ctx, sig.kernel, std::move(copy));
  return {};
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

Status buildSlice(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  SliceParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSlice(sig, &sp));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t start = sp.start, step = sp.step, size = sp.size, count = sp.count;
  const int64_t outer = sp.outer, inner = sp.inner;
  StridedCopy copy = makeStridedCopy(
      dtypeBytes(x.dtype), {outer, count, inner},
      {{{count * inner, size * inner}}, {{inner, step * inner}}, {{1, 1}}}, 0, start * inner);
  CLEAVE_RETURN_IF_ERROR(checkCopyRank(sig, copy));
  *fn = makeCopyFn(ctx, sig.kernel, std::move(copy));
  return {};
}

//===----------------------------------------------------------------------===//
// concat: one strided copy per input into its place in the output.
//===----------------------------------------------------------------------===//

Status buildConcat(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ConcatParams cp;
  CLEAVE_RETURN_IF_ERROR(parseConcat(sig, &cp));
  const TensorDesc &first = *sig.inputs[0];
  const int64_t dim = cp.dim, outer = cp.outer, inner = cp.inner;
  const int64_t total = cp.outShape[dim] * inner;
  std::vector<StridedCopy> copies;
  int64_t offset = 0;
  for (const auto &t : sig.inputs) {
    const int64_t run = t->shape[dim] * inner;
    copies.push_back(makeStridedCopy(dtypeBytes(first.dtype), {outer, run},
                                     {{{total, run}}, {{1, 1}}}, offset, 0));
    CLEAVE_RETURN_IF_ERROR(checkCopyRank(sig, copies.back()));
    offset += run;
  }
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  *fn = [c, name, copies](const KernelCall &call) -> Status {
    for (size_t i = 0; i < copies.size(); ++i)
      CLEAVE_RETURN_IF_ERROR(runStridedCopy(c, name, copies[i], call.inputs[i], call.outputs[0]));
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

/// One block row per index position (grid-stride), threads across the row
/// in vectors of V elements.
template <typename T, int V, typename Index>
__global__ void embeddingKernel(const T *__restrict__ table, const Index *__restrict__ indices,
                                T *__restrict__ out, int64_t count, int64_t rows, int64_t dim,
                                bool sharded, int64_t offset, DeviceError *error) {
  using Row = Vec<T, V>;
  const int64_t vectors = dim / V;
  for (int64_t pos = blockIdx.x; pos < count; pos += gridDim.x) {
    const int64_t index = static_cast<int64_t>(indices[pos]);
    const int64_t row = index - offset;
    const bool inside = row >= 0 && row < rows;
    if (!sharded && !inside && threadIdx.x == 0)
      reportDeviceError(error, DeviceError::EmbeddingIndexOutOfRange, index, pos, rows);
    Row *dst = reinterpret_cast<Row *>(out + pos * dim);
    if (inside) {
      const Row *src = reinterpret_cast<const Row *>(table + row * dim);
      for (int64_t j = threadIdx.x; j < vectors; j += blockDim.x)
        dst[j] = src[j];
    } else {
      Row zero;
#pragma unroll
      for (int k = 0; k < V; ++k)
        zero.v[k] = store<T>(0.0f);
      for (int64_t j = threadIdx.x; j < vectors; j += blockDim.x)
        dst[j] = zero;
    }
  }
}

template <typename T, typename Index>
void launchEmbedding(DeviceContext *c, const T *table, const Index *indices, T *out, int64_t count,
                     int64_t rows, int64_t dim, bool sharded, int64_t offset) {
  constexpr int V = 16 / sizeof(T);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(count, int64_t(1) << 20));
  const bool vec = dim % V == 0 && aligned(table, 16) && aligned(out, 16);
  const int64_t vectors = vec ? dim / V : dim;
  const int threads =
      static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, (vectors + 31) / 32 * 32)));
  if (vec)
    embeddingKernel<T, V><<<grid, threads, 0, c->stream>>>(table, indices, out, count, rows, dim,
                                                           sharded, offset, c->deviceError);
  else
    embeddingKernel<T, 1><<<grid, threads, 0, c->stream>>>(table, indices, out, count, rows, dim,
                                                           sharded, offset, c->deviceError);
}

template <typename T>
KernelFn makeEmbedding(const KernelSignature &sig, DeviceContext &ctx, bool wide, int64_t count,
                       int64_t rows, int64_t dim, bool sharded, int64_t offset) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    if (count == 0)
      return {};
    const T *table = static_cast<const T *>(call.inputs[0]);
    T *out = static_cast<T *>(call.outputs[0]);
    if (wide)
      launchEmbedding(c, table, static_cast<const int64_t *>(call.inputs[1]), out, count, rows, dim,
                      sharded, offset);
    else
      launchEmbedding(c, table, static_cast<const int32_t *>(call.inputs[1]), out, count, rows, dim,
                      sharded, offset);
    return launchStatus(name);
  };
}

Status buildEmbedding(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  EmbeddingParams ep;
  CLEAVE_RETURN_IF_ERROR(parseEmbedding(sig, "cuda", {DType::F32, DType::BF16}, &ep));
  const TensorDesc &w = *sig.inputs[0];
  const int64_t count = ep.count, rows = ep.rows, offset = ep.offset;
  const bool sharded = ep.sharded, wide = ep.wide;
  const int64_t dim = ep.dim;
  if (w.dtype == DType::F32)
    *fn = makeEmbedding<float>(sig, ctx, wide, count, rows, dim, sharded, offset);
  else
    *fn = makeEmbedding<bf16>(sig, ctx, wide, count, rows, dim, sharded, offset);
  return {};
}

//===----------------------------------------------------------------------===//
// gather, scatter
//===----------------------------------------------------------------------===//

template <typename T, typename Index>
__global__ void gatherKernel(const T *__restrict__ x, const Index *__restrict__ index,
                             T *__restrict__ y, IndexAlongDim p, int64_t n, DeviceError *error) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    // The input offset of result element i: its own coordinates, the index
    // in place of dim.
    int64_t rest = i, in = 0, inStride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t c = rest % p.indexShape[d];
      rest /= p.indexShape[d];
      if (d == p.dim) {
        c = static_cast<int64_t>(index[i]);
        if (c < 0 || c >= p.size) {
          reportDeviceError(error, DeviceError::GatherIndexOutOfRange, c, i, p.size);
          inside = false;
        }
      }
      in += c * inStride;
      inStride *= p.inputShape[d];
    }
    if (inside)
      y[i] = x[in];
  }
}

template <int W>
KernelFn makeGather(const KernelSignature &sig, DeviceContext &ctx, const IndexAlongDim &p) {
  using T = typename BitsOf<W>::type;
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t n = p.lines * p.k;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    if (p.wide)
      gatherKernel<<<gridFor(*c, n), kThreads, 0, c->stream>>>(
          x, static_cast<const int64_t *>(call.inputs[1]), y, p, n, c->deviceError);
    else
      gatherKernel<<<gridFor(*c, n), kThreads, 0, c->stream>>>(
          x, static_cast<const int32_t *>(call.inputs[1]), y, p, n, c->deviceError);
    return launchStatus(name);
  };
}

Status buildGather(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  IndexAlongDim p;
  CLEAVE_RETURN_IF_ERROR(parseGather(
      sig, "cuda", {DType::F32, DType::BF16, DType::F16, DType::I64, DType::I32, DType::I1}, &p));
  switch (dtypeBytes(sig.inputs[0]->dtype)) {
  case 1:
    *fn = makeGather<1>(sig, ctx, p);
    break;
  case 2:
    *fn = makeGather<2>(sig, ctx, p);
    break;
  case 4:
    *fn = makeGather<4>(sig, ctx, p);
    break;
  default:
    *fn = makeGather<8>(sig, ctx, p);
    break;
  }
  return {};
}

/// scatter's combination on the device, as the CPU's Combine: bools add as
/// `or` and multiply as `and`; float maxima and minima propagate NaN.
template <typename T> struct DeviceCombine {
  static constexpr bool kBool = std::is_same_v<T, uint8_t>;
  static constexpr bool kFloat = std::is_same_v<T, float>;
  __device__ static T apply(ScatterReduceKind kind, T a, T v) {
    switch (kind) {
    case ScatterReduceKind::None:
      return v;
    case ScatterReduceKind::Sum:
    case ScatterReduceKind::Mean:
      if constexpr (kBool)
        return static_cast<T>(a || v);
      else
        return a + v;
    case ScatterReduceKind::Prod:
      if constexpr (kBool)
        return static_cast<T>(a && v);
      else
        return a * v;
    case ScatterReduceKind::Amax:
      if (a != a || v != v)
        return a != a ? a : v;
      return v > a ? v : a;
    case ScatterReduceKind::Amin:
      if (a != a || v != v)
        return a != a ? a : v;
      return v < a ? v : a;
    }
    return v;
  }
  __device__ static T identity(ScatterReduceKind kind) {
    switch (kind) {
    case ScatterReduceKind::Prod:
      return T(1);
    case ScatterReduceKind::Amax:
      if constexpr (kFloat)
        return -INFINITY;
      else if constexpr (kBool)
        return T(0);
      else
        return std::numeric_limits<T>::lowest();
    case ScatterReduceKind::Amin:
      if constexpr (kFloat)
        return INFINITY;
      else if constexpr (kBool)
        return T(1);
      else
        return std::numeric_limits<T>::max();
    default:
      return T(0);
    }
  }
  __device__ static T mean(T sum, int64_t count) {
    if constexpr (kFloat) {
      return sum / static_cast<T>(count);
    } else {
      T n = static_cast<T>(count), q = sum / n;
      if (sum % n != 0 && sum < 0)
        --q;
      return q;
    }
  }
};

/// One thread per line. `mean` counts each position's entries by scanning
/// the line (k^2 per line: scatter_reduce's mean is rare and its lines short).
template <typename T, typename Index>
__global__ void scatterKernel(const Index *__restrict__ index, const T *__restrict__ src,
                              T *__restrict__ y, IndexAlongDim p, ScatterReduceKind kind,
                              bool includeSelf, DeviceError *error) {
  using C = DeviceCombine<T>;
  for (int64_t line = globalThread(); line < p.lines; line += globalThreads()) {
    int64_t start, in;
    p.lineStart(line, &start, &in);
    bool inside = true;
    for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride) {
      const int64_t pos = static_cast<int64_t>(index[at]);
      if (pos < 0 || pos >= p.size) {
        reportDeviceError(error, DeviceError::ScatterIndexOutOfRange, pos, at, p.size);
        inside = false;
      }
    }
    if (!inside)
      continue;
    if (kind != ScatterReduceKind::None && !includeSelf)
      for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride)
        y[in + static_cast<int64_t>(index[at]) * p.inputStride] = C::identity(kind);
    for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride) {
      T &dst = y[in + static_cast<int64_t>(index[at]) * p.inputStride];
      dst = C::apply(kind, dst, src[at]);
    }
    if (kind != ScatterReduceKind::Mean)
      continue;
    for (int64_t j = 0, at = start; j < p.k; ++j, at += p.indexStride) {
      const Index pos = index[at];
      bool first = true;
      int64_t count = includeSelf ? 1 : 0;
      for (int64_t i = 0, other = start; i < p.k; ++i, other += p.indexStride) {
        if (index[other] != pos)
          continue;
        first &= i >= j;
        ++count;
      }
      if (first) {
        T &dst = y[in + static_cast<int64_t>(pos) * p.inputStride];
        dst = C::mean(dst, count);
      }
    }
  }
}

template <typename T>
KernelFn makeScatter(const KernelSignature &sig, DeviceContext &ctx, const IndexAlongDim &p,
                     ScatterReduceKind kind, bool includeSelf, size_t bytes) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    T *y = static_cast<T *>(call.outputs[0]);
    if (call.inputs[0] != y && bytes > 0)
      CLEAVE_CUDA_TRY(cudaMemcpyAsync(y, call.inputs[0], bytes, cudaMemcpyDeviceToDevice,
                                      c->stream));
    if (p.lines == 0 || p.k == 0)
      return {};
    const T *src = static_cast<const T *>(call.inputs[2]);
    if (p.wide)
      scatterKernel<<<gridFor(*c, p.lines), kThreads, 0, c->stream>>>(
          static_cast<const int64_t *>(call.inputs[1]), src, y, p, kind, includeSelf,
          c->deviceError);
    else
      scatterKernel<<<gridFor(*c, p.lines), kThreads, 0, c->stream>>>(
          static_cast<const int32_t *>(call.inputs[1]), src, y, p, kind, includeSelf,
          c->deviceError);
    return launchStatus(name);
  };
}

Status buildScatter(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  IndexAlongDim p;
  ScatterReduceKind kind;
  bool includeSelf = true;
  CLEAVE_RETURN_IF_ERROR(parseScatter(sig, "cuda",
                                      {DType::F32, DType::I64, DType::I32, DType::I1}, &p, &kind,
                                      &includeSelf));
  const TensorDesc &x = *sig.inputs[0];
  const size_t bytes = x.bytes();
  switch (x.dtype) {
  case DType::F32:
    *fn = makeScatter<float>(sig, ctx, p, kind, includeSelf, bytes);
    break;
  case DType::I64:
    *fn = makeScatter<int64_t>(sig, ctx, p, kind, includeSelf, bytes);
    break;
  case DType::I32:
    *fn = makeScatter<int32_t>(sig, ctx, p, kind, includeSelf, bytes);
    break;
  default:
    *fn = makeScatter<uint8_t>(sig, ctx, p, kind, includeSelf, bytes);
    break;
  }
  return {};
}

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["reshape"] = buildReshape;
  table["permute"] = buildPermute;
  table["broadcast_to"] = buildBroadcastTo;
  table["slice"] = buildSlice;
  table["concat"] = buildConcat;
  table["embedding"] = buildEmbedding;
  table["gather"] = buildGather;
  table["scatter"] = buildScatter;
}

} // namespace cleave::runtime::cuda
