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
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <array>
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

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["reshape"] = buildReshape;
  table["permute"] = buildPermute;
  table["broadcast_to"] = buildBroadcastTo;
  table["slice"] = buildSlice;
  table["concat"] = buildConcat;
  table["embedding"] = buildEmbedding;
}

} // namespace cleave::runtime::cuda
