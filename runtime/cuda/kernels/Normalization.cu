//===- Normalization.cu - layer_norm, batch_norm, softmax, log_softmax ----===//
//
// Rows of up to 1024 elements are one warp each, held in registers (one
// read, one write, vector accesses when rows are 16-byte aligned); longer
// rows are one block each, re-reading the row from global memory (L2).
// Statistics accumulate in fp32. layer_norm takes the variance around the
// mean in a second pass, as the CPU; softmax along a dim that is not the
// last walks columns, one thread each.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <cmath>
#include <string>

namespace cleave::runtime::cuda {
namespace {

/// Rows up to this many elements take the warp-per-row kernels.
constexpr int64_t kWarpRowLimit = 1024;
constexpr int kWarpsPerBlock = 4;
constexpr int kRowBlockThreads = 512;

//===----------------------------------------------------------------------===//
// A row in registers: lane l holds vectors l, l + 32, ... of V elements.
//===----------------------------------------------------------------------===//

template <typename T, int V, int Items>
__device__ __forceinline__ void loadRow(const T *row, int64_t d, float (&v)[Items][V], float fill) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int64_t base = (static_cast<int64_t>(j) * 32 + lane) * V;
    if (V > 1 && base + V <= d) {
      const Vec<T, V> r = *reinterpret_cast<const Vec<T, V> *>(row + base);
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[j][k] = load(r.v[k]);
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[j][k] = base + k < d ? static_cast<float>(load(row[base + k])) : fill;
    }
  }
}

template <typename T, int V, int Items>
__device__ __forceinline__ void storeRow(T *row, int64_t d, const float (&v)[Items][V]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < Items; ++j) {
    const int64_t base = (static_cast<int64_t>(j) * 32 + lane) * V;
    if (V > 1 && base + V <= d) {
      Vec<T, V> r;
#pragma unroll
      for (int k = 0; k < V; ++k)
        r.v[k] = store<T>(v[j][k]);
      *reinterpret_cast<Vec<T, V> *>(row + base) = r;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (base + k < d)
          row[base + k] = store<T>(v[j][k]);
    }
  }
}

/// Calls launch(V, Items) with the instantiation for rows of d elements:
/// V-element vectors when rows are 16-byte aligned, and enough Items per lane.
template <typename T, typename Launch> void dispatchRow(int64_t d, bool vector, Launch launch) {
  constexpr int VW = 16 / sizeof(T);
  const int v = vector && d % VW == 0 ? VW : 1;
  const int64_t perLane = (d + 32 * v - 1) / (32 * v);
  // Items * V <= 32 floats per lane.
  if (v == VW) {
    if (perLane <= 1)
      launch(std::integral_constant<int, VW>{}, std::integral_constant<int, 1>{});
    else if (perLane <= 2)
      launch(std::integral_constant<int, VW>{}, std::integral_constant<int, 2>{});
    else
      launch(std::integral_constant<int, VW>{}, std::integral_constant<int, 32 / VW>{});
  } else {
    if (perLane <= 4)
      launch(std::integral_constant<int, 1>{}, std::integral_constant<int, 4>{});
    else if (perLane <= 8)
      launch(std::integral_constant<int, 1>{}, std::integral_constant<int, 8>{});
    else if (perLane <= 16)
      launch(std::integral_constant<int, 1>{}, std::integral_constant<int, 16>{});
    else
      launch(std::integral_constant<int, 1>{}, std::integral_constant<int, 32>{});
  }
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

template <typename T, int V, int Items>
__global__ void layerNormWarpKernel(const T *__restrict__ x, const T *__restrict__ w,
                                    const T *__restrict__ b, T *__restrict__ y, int64_t rows,
                                    int64_t d, float eps) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += warps) {
    float v[Items][V];
    loadRow<T, V, Items>(x + r * d, d, v, 0.0f);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k)
        sum += v[j][k];
    const float mean = warpReduce(sum, SumOp{}) / static_cast<float>(d);
    const int lane = threadIdx.x % 32;
    float sq = 0.0f;
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float c = v[j][k] - mean;
        if ((static_cast<int64_t>(j) * 32 + lane) * V + k < d)
          sq += c * c;
      }
    const float rstd = 1.0f / sqrtf(warpReduce(sq, SumOp{}) / static_cast<float>(d) + eps);
    float wv[Items][V], bv[Items][V];
    if (w)
      loadRow<T, V, Items>(w, d, wv, 1.0f);
    if (b)
      loadRow<T, V, Items>(b, d, bv, 0.0f);
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float o = (v[j][k] - mean) * rstd;
        if (w)
          o *= wv[j][k];
        if (b)
          o += bv[j][k];
        v[j][k] = o;
      }
    storeRow<T, V, Items>(y + r * d, d, v);
  }
}

template <typename T>
__global__ void layerNormBlockKernel(const T *__restrict__ x, const T *__restrict__ w,
                                     const T *__restrict__ b, T *__restrict__ y, int64_t rows,
                                     int64_t d, float eps) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * d;
    T *yr = y + r * d;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      sum += load(xr[i]);
    const float mean = blockReduce(sum, SumOp{}, shared) / static_cast<float>(d);
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float c = load(xr[i]) - mean;
      sq += c * c;
    }
    const float rstd = 1.0f / sqrtf(blockReduce(sq, SumOp{}, shared) / static_cast<float>(d) + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      float o = (load(xr[i]) - mean) * rstd;
      if (w)
        o *= load(w[i]);
      if (b)
        o += load(b[i]);
      yr[i] = store<T>(o);
    }
  }
}

template <typename T>
KernelFn makeLayerNorm(const KernelSignature &sig, DeviceContext &ctx, int64_t rows, int64_t d,
                       float eps) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    if (rows == 0 || d == 0)
      return {};
    const T *x = static_cast<const T *>(call.inputs[0]);
    const T *w = static_cast<const T *>(call.inputs[1]);
    const T *b = static_cast<const T *>(call.inputs[2]);
    T *y = static_cast<T *>(call.outputs[0]);
    if (d > kWarpRowLimit) {
      layerNormBlockKernel<T>
          <<<gridForItems(rows), kRowBlockThreads, 0, c->stream>>>(x, w, b, y, rows, d, eps);
      return launchStatus(name);
    }
    const bool vector = aligned(x, 16) && aligned(y, 16) && (!w || aligned(w, 16)) &&
                        (!b || aligned(b, 16)) && (d * sizeof(T)) % 16 == 0;
    const unsigned grid = gridForItems((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    dispatchRow<T>(d, vector, [&](auto v, auto items) {
      layerNormWarpKernel<T, decltype(v)::value, decltype(items)::value>
          <<<grid, 32 * kWarpsPerBlock, 0, c->stream>>>(x, w, b, y, rows, d, eps);
    });
    return launchStatus(name);
  };
}

Status buildLayerNorm(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  LayerNormParams p;
  CLEAVE_RETURN_IF_ERROR(parseLayerNorm(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t rows = p.rows, d = p.d;
  const float eps = p.eps;
  if (x.dtype == DType::F32)
    *fn = makeLayerNorm<float>(sig, ctx, rows, d, eps);
  else
    *fn = makeLayerNorm<bf16>(sig, ctx, rows, d, eps);
  return {};
}

//===----------------------------------------------------------------------===//
// batch_norm (inference): y = x * scale[c] + shift[c], scale = weight /
// sqrt(var + eps), shift = bias - mean * scale, as the CPU.
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void batchNormKernel(const T *__restrict__ x, const T *__restrict__ mean,
                                const T *__restrict__ var, const T *__restrict__ w,
                                const T *__restrict__ b, T *__restrict__ y, int64_t n,
                                int64_t channels, int64_t inner, float eps) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    const int64_t c = (i / inner) % channels;
    float s = 1.0f / sqrtf(load(var[c]) + eps);
    if (w)
      s *= load(w[c]);
    const float t = (b ? load(b[c]) : 0.0f) - load(mean[c]) * s;
    y[i] = store<T>(load(x[i]) * s + t);
  }
}

template <typename T>
KernelFn makeBatchNorm(const KernelSignature &sig, DeviceContext &ctx, int64_t n, int64_t channels,
                       int64_t inner, float eps) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    batchNormKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<const T *>(call.inputs[2]), static_cast<const T *>(call.inputs[3]),
        static_cast<const T *>(call.inputs[4]), static_cast<T *>(call.outputs[0]), n, channels,
        inner, eps);
    return launchStatus(name);
  };
}

Status buildBatchNorm(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BatchNormParams p;
  CLEAVE_RETURN_IF_ERROR(parseBatchNorm(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t channels = p.channels, inner = p.inner;
  const float eps = p.eps;
  const int64_t n = x.numel();
  if (x.dtype == DType::F32)
    *fn = makeBatchNorm<float>(sig, ctx, n, channels, inner, eps);
  else
    *fn = makeBatchNorm<bf16>(sig, ctx, n, channels, inner, eps);
  return {};
}

//===----------------------------------------------------------------------===//
// softmax / log_softmax along one dim, numerically stable. The max skips
// NaN, whose exponential then makes the row NaN, as on the CPU.
//===----------------------------------------------------------------------===//

template <typename T, bool Log, int V, int Items>
__global__ void softmaxWarpKernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows,
                                  int64_t d) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += warps) {
    float v[Items][V];
    loadRow<T, V, Items>(x + r * d, d, v, ninf);
    float mx = ninf;
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k)
        mx = MaxOp{}(mx, v[j][k]);
    mx = warpReduce(mx, MaxOp{});
    const int lane = threadIdx.x % 32;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const bool inside = (static_cast<int64_t>(j) * 32 + lane) * V + k < d;
        const float e = inside ? expf(v[j][k] - mx) : 0.0f;
        sum += e;
        if (!Log)
          v[j][k] = e;
      }
    sum = warpReduce(sum, SumOp{});
    const float shift = Log ? mx + logf(sum) : 0.0f, inv = 1.0f / sum;
#pragma unroll
    for (int j = 0; j < Items; ++j)
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[j][k] = Log ? v[j][k] - shift : v[j][k] * inv;
    storeRow<T, V, Items>(y + r * d, d, v);
  }
}

template <typename T, bool Log>
__global__ void softmaxBlockKernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows,
                                   int64_t d) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * d;
    T *yr = y + r * d;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      mx = MaxOp{}(mx, load(xr[i]));
    mx = blockReduce(mx, MaxOp{}, shared);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      sum += expf(load(xr[i]) - mx);
    sum = blockReduce(sum, SumOp{}, shared);
    const float shift = mx + logf(sum), inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float v = load(xr[i]);
      yr[i] = store<T>(Log ? v - shift : expf(v - mx) * inv);
    }
  }
}

/// Softmax along a dim that is not the last: one thread per column
/// (outer, j), d elements `inner` apart.
template <typename T, bool Log>
__global__ void softmaxColumnsKernel(const T *__restrict__ x, T *__restrict__ y, int64_t columns,
                                     int64_t d, int64_t inner) {
  for (int64_t t = globalThread(); t < columns; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const T *xc = x + o * d * inner + j;
    T *yc = y + o * d * inner + j;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < d; ++r)
      mx = MaxOp{}(mx, load(xc[r * inner]));
    float sum = 0.0f;
    for (int64_t r = 0; r < d; ++r)
      sum += expf(load(xc[r * inner]) - mx);
    const float shift = mx + logf(sum), inv = 1.0f / sum;
    for (int64_t r = 0; r < d; ++r) {
      const float v = load(xc[r * inner]);
      yc[r * inner] = store<T>(Log ? v - shift : expf(v - mx) * inv);
    }
  }
}

template <typename T, bool Log>
KernelFn makeSoftmax(const KernelSignature &sig, DeviceContext &ctx, int64_t outer, int64_t d,
                     int64_t inner) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  return [=](const KernelCall &call) -> Status {
    if (outer == 0 || d == 0 || inner == 0)
      return {};
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    if (inner != 1) {
      const int64_t columns = outer * inner;
      softmaxColumnsKernel<T, Log>
          <<<gridFor(*c, columns), kThreads, 0, c->stream>>>(x, y, columns, d, inner);
    } else if (d > kWarpRowLimit) {
      softmaxBlockKernel<T, Log>
          <<<gridForItems(outer), kRowBlockThreads, 0, c->stream>>>(x, y, outer, d);
    } else {
      const bool vector = aligned(x, 16) && aligned(y, 16) && (d * sizeof(T)) % 16 == 0;
      const unsigned grid = gridForItems((outer + kWarpsPerBlock - 1) / kWarpsPerBlock);
      dispatchRow<T>(d, vector, [&](auto v, auto items) {
        softmaxWarpKernel<T, Log, decltype(v)::value, decltype(items)::value>
            <<<grid, 32 * kWarpsPerBlock, 0, c->stream>>>(x, y, outer, d);
      });
    }
    return launchStatus(name);
  };
}

template <bool Log>
Status buildSoftmax(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  SoftmaxParams p;
  CLEAVE_RETURN_IF_ERROR(parseSoftmax(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t outer = p.outer, d = p.d, inner = p.inner;
  if (x.dtype == DType::F32)
    *fn = makeSoftmax<float, Log>(sig, ctx, outer, d, inner);
  else
    *fn = makeSoftmax<bf16, Log>(sig, ctx, outer, d, inner);
  return {};
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  table["layer_norm"] = buildLayerNorm;
  table["batch_norm"] = buildBatchNorm;
  table["softmax"] = buildSoftmax<false>;
  table["log_softmax"] = buildSoftmax<true>;
}

} // namespace cleave::runtime::cuda
