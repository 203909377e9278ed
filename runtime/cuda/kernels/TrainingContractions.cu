//===- TrainingContractions.cu - Backward kernels of the contractions -----===//
//
// The gradients of the poolings, attention, embedding and slice on the GPU,
// as the CPU's (runtime/cpu/TrainingContractions.cpp); the ones that are a
// library call (linear, conv2d) are in ContractionBackward.cpp. The checks
// are the CPU's (runtime/BackwardParams.h). Every kernel overwrites its
// outputs and is deterministic: no atomics, every sum in a fixed order.
// The float kernels take f32 or bf16 (every float operand the same, as a
// mixed precision plan's backward hands them): bf16 loads widen to fp32,
// everything is computed and accumulated in fp32 (shared memory and the
// scratch included) and each result is rounded to bf16 once when stored.
//
//   max_pool2d_backward, avg_pool2d_backward, adaptive_avg_pool2d_backward
//     a thread per input element gathers from the windows that cover it, in
//     the order the CPU scatters (output rows, then columns). max_pool2d's
//     windows recompute their argmax (PyTorch's: the first in-bounds tap,
//     then `v > max || isnan(v)` in scan order) rather than store it.
//   attention_backward
//     bf16 with head dims up to 128 runs on tensor cores (AttentionBackward.cu);
//     f32 and wider bf16 heads: FlashAttention-2's backward in 32 x 32 tiles
//     in shared memory, fp32,
//     never an Sq x Sk buffer: a first kernel writes each query row's
//     log-sum-exp and rowsum(g * y) into the instruction's scratch (the
//     CPU's contract); then a block per (head, key tile) loops over the
//     query tiles that see it and accumulates dK and dV, and a block per
//     (head, query tile) loops over its key tiles and accumulates dQ. Both
//     recompute P = exp(scale q k^T - lse) and dS = P (g v^T - delta) tile
//     by tile, so dQ needs no atomics.
//   embedding_backward
//     deterministic, and bit for bit the CPU's: the positions are sorted by
//     the table row they hit (a stable radix sort of (row, position), CUB,
//     in the backend's shared workspace), then each table row sums its
//     positions' gradient rows in position order, as the CPU. Indices of
//     other shards and padding_idx sort past the last row and are dropped;
//     on a whole table an index outside it is a device error.
//   slice_backward
//     any dtype (bits only): a thread per element of the result, the grad's
//     element or zero; runs of rows move as up to 16 bytes.
//
//===----------------------------------------------------------------------===//

#include "runtime/BackwardParams.h"
#include "runtime/cuda/kernels/AttentionTiles.cuh"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <cub/device/device_radix_sort.cuh>

#include <limits>
#include <string>

namespace cleave::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Pooling backward: a thread per input element.
//===----------------------------------------------------------------------===//

/// Splits flat input index `idx` into plane, row, column.
__device__ __forceinline__ void splitInput(int64_t idx, int64_t h, int64_t w, int64_t *p,
                                           int64_t *iy, int64_t *ix) {
  *ix = idx % w;
  const int64_t t = idx / w;
  *iy = t % h;
  *p = t / h;
}

/// The first window index o (stride s, padding p, dilated extent `extent`)
/// whose window may cover input position i, and the last: o * s - p <= i
/// and o * s - p + extent > i, clamped to [0, n).
__device__ __forceinline__ void coveringWindows(int64_t i, int64_t s, int64_t p, int64_t extent,
                                                int64_t n, int64_t *first, int64_t *last) {
  const int64_t lo = i + p - extent + 1; // o * s >= lo
  *first = lo <= 0 ? 0 : (lo + s - 1) / s;
  *last = std::min(n - 1, (i + p) / s);
}

template <typename T>
__global__ void maxPoolBackwardKernel(const T *__restrict__ grad, const T *__restrict__ x,
                                      T *__restrict__ dx, PoolParams g, int64_t n) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, iy, ix;
    splitInput(idx, g.h, g.w, &p, &iy, &ix);
    const T *plane = x + p * g.h * g.w;
    const T *gp = grad + p * g.oh * g.ow;
    const int64_t self = iy * g.w + ix;
    int64_t oy0, oy1, ox0, ox1;
    coveringWindows(iy, g.sh, g.ph, (g.kh - 1) * g.dh + 1, g.oh, &oy0, &oy1);
    coveringWindows(ix, g.sw, g.pw, (g.kw - 1) * g.dw + 1, g.ow, &ox0, &ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      const int64_t y0 = oy * g.sh - g.ph;
      if ((iy - y0) % g.dh != 0)
        continue; // between the dilated taps
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t x0 = ox * g.sw - g.pw;
        if ((ix - x0) % g.dw != 0)
          continue;
        // The window's argmax, as the forward and the CPU pick it.
        int64_t best = -1;
        float m = -INFINITY;
        for (int64_t ky = 0; ky < g.kh; ++ky) {
          const int64_t yy = y0 + ky * g.dh;
          if (yy < 0 || yy >= g.h)
            continue;
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            const int64_t xx = x0 + kx * g.dw;
            if (xx < 0 || xx >= g.w)
              continue;
            const float v = load(plane[yy * g.w + xx]);
            if (best < 0 || v > m || v != v) {
              m = v;
              best = yy * g.w + xx;
            }
          }
        }
        if (best == self)
          sum += load(gp[oy * g.ow + ox]);
      }
    }
    dx[idx] = store<T>(sum);
  }
}

/// avgPoolSpan (runtime/cpu/AvgPoolSpan.h) on the device: output o's span
/// [*lo, *hi) of the input, and its length counting the padding (but not
/// ceil_mode's overhang).
__device__ __forceinline__ int64_t avgSpan(int64_t o, int64_t s, int64_t p, int64_t k, int64_t size,
                                           int64_t *lo, int64_t *hi) {
  int64_t start = o * s - p;
  int64_t end = std::min(start + k, size + p);
  const int64_t padded = end - start;
  *lo = std::max<int64_t>(start, 0);
  *hi = std::min(end, size);
  return padded;
}

template <typename T>
__global__ void avgPoolBackwardKernel(const T *__restrict__ grad, T *__restrict__ dx, PoolParams g,
                                      int64_t n, bool countIncludePad) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, iy, ix;
    splitInput(idx, g.h, g.w, &p, &iy, &ix);
    const T *gp = grad + p * g.oh * g.ow;
    int64_t oy0, oy1, ox0, ox1;
    coveringWindows(iy, g.sh, g.ph, g.kh, g.oh, &oy0, &oy1);
    coveringWindows(ix, g.sw, g.pw, g.kw, g.ow, &ox0, &ox1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      int64_t y0, y1;
      const int64_t padH = avgSpan(oy, g.sh, g.ph, g.kh, g.h, &y0, &y1);
      if (iy < y0 || iy >= y1)
        continue;
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        int64_t x0, x1;
        const int64_t padW = avgSpan(ox, g.sw, g.pw, g.kw, g.w, &x0, &x1);
        if (ix < x0 || ix >= x1)
          continue;
        const int64_t divisor = countIncludePad ? padH * padW : (y1 - y0) * (x1 - x0);
        sum += load(gp[oy * g.ow + ox]) / static_cast<float>(divisor);
      }
    }
    dx[idx] = store<T>(sum);
  }
}

/// Bin o of n over size s: [floor(o * s / n), ceil((o + 1) * s / n)).
__device__ __forceinline__ int64_t binStart(int64_t o, int64_t n, int64_t s) { return (o * s) / n; }
__device__ __forceinline__ int64_t binEnd(int64_t o, int64_t n, int64_t s) {
  return ((o + 1) * s + n - 1) / n;
}

template <typename T>
__global__ void adaptiveAvgPoolBackwardKernel(const T *__restrict__ grad, T *__restrict__ dx,
                                              int64_t h, int64_t w, int64_t oh, int64_t ow,
                                              int64_t n) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, iy, ix;
    splitInput(idx, h, w, &p, &iy, &ix);
    const T *gp = grad + p * oh * ow;
    // The bins that hold iy: floor(iy * oh / h) up to ceil((iy + 1) * oh / h)
    // - 1; each is checked, so the bounds only need to enclose them.
    const int64_t oy0 = (iy * oh) / h, oy1 = std::min(oh - 1, ((iy + 1) * oh + h - 1) / h - 1);
    const int64_t ox0 = (ix * ow) / w, ox1 = std::min(ow - 1, ((ix + 1) * ow + w - 1) / w - 1);
    float sum = 0.0f;
    for (int64_t oy = oy0; oy <= oy1; ++oy) {
      const int64_t y0 = binStart(oy, oh, h), y1 = binEnd(oy, oh, h);
      if (iy < y0 || iy >= y1)
        continue;
      for (int64_t ox = ox0; ox <= ox1; ++ox) {
        const int64_t x0 = binStart(ox, ow, w), x1 = binEnd(ox, ow, w);
        if (ix < x0 || ix >= x1)
          continue;
        // PyTorch divides by the bin's height, then its width.
        sum += load(gp[oy * ow + ox]) / static_cast<float>(y1 - y0) / static_cast<float>(x1 - x0);
      }
    }
    dx[idx] = store<T>(sum);
  }
}

template <typename T>
KernelFn makeMaxPoolBackward(const KernelSignature &sig, DeviceContext &ctx, const PoolParams &g) {
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  const int64_t n = g.planes * g.h * g.w;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    maxPoolBackwardKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<T *>(call.outputs[0]), g, n);
    return launchStatus(name);
  };
}

Status buildMaxPoolBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PoolParams g;
  CLEAVE_RETURN_IF_ERROR(parseMaxPool2dBackward(sig, "cuda", {DType::F32, DType::BF16}, &g));
  *fn = sig.inputs[0]->dtype == DType::BF16 ? makeMaxPoolBackward<bf16>(sig, ctx, g)
                                            : makeMaxPoolBackward<float>(sig, ctx, g);
  return {};
}

template <typename T>
KernelFn makeAvgPoolBackward(const KernelSignature &sig, DeviceContext &ctx, const PoolParams &g,
                             bool countIncludePad) {
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  const int64_t n = g.planes * g.h * g.w;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    avgPoolBackwardKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), g, n,
        countIncludePad);
    return launchStatus(name);
  };
}

Status buildAvgPoolBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PoolParams g;
  bool countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(
      parseAvgPool2dBackward(sig, "cuda", {DType::F32, DType::BF16}, &g, &countIncludePad));
  *fn = sig.inputs[0]->dtype == DType::BF16
            ? makeAvgPoolBackward<bf16>(sig, ctx, g, countIncludePad)
            : makeAvgPoolBackward<float>(sig, ctx, g, countIncludePad);
  return {};
}

template <typename T>
KernelFn makeAdaptiveAvgPoolBackward(const KernelSignature &sig, DeviceContext &ctx,
                                     const AdaptivePoolParams &a) {
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  const int64_t n = a.planes * a.h * a.w;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    adaptiveAvgPoolBackwardKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), a.h, a.w, a.oh,
        a.ow, n);
    return launchStatus(name);
  };
}

Status buildAdaptiveAvgPoolBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  AdaptivePoolParams a;
  CLEAVE_RETURN_IF_ERROR(
      parseAdaptiveAvgPool2dBackward(sig, "cuda", {DType::F32, DType::BF16}, &a));
  *fn = sig.inputs[0]->dtype == DType::BF16 ? makeAdaptiveAvgPoolBackward<bf16>(sig, ctx, a)
                                            : makeAdaptiveAvgPoolBackward<float>(sig, ctx, a);
  return {};
}

//===----------------------------------------------------------------------===//
// attention_backward
//===----------------------------------------------------------------------===//

constexpr int kTile = 32;          // queries and keys per tile
constexpr int kTileThreads = 256;  // 16 x 16 threads, 2 x 2 tile entries each
constexpr int kLdTile = kTile + 1; // leading dim of the P and dS tiles

struct AttentionBackwardShape {
  int64_t heads, sq, sk, d, dv;
  int64_t offset; // sk - sq: query i sees keys j <= i + offset when causal
  bool causal;
  float scale;
};

/// The keys query tile [q0, q0 + rows) sees: [0, end).
__device__ __forceinline__ int64_t keyEndFor(const AttentionBackwardShape &a, int64_t q0,
                                             int64_t rows) {
  if (!a.causal)
    return a.sk;
  return std::min(a.sk, std::max<int64_t>(0, q0 + rows + a.offset));
}

/// dst[r * ld + c] = src[r * cols + c] (widened to fp32) for r < valid,
/// zero for the other rows of the tile.
template <typename T>
__device__ __forceinline__ void loadTile(float *dst, int64_t ld, const T *__restrict__ src,
                                         int64_t valid, int64_t cols) {
  for (int64_t idx = threadIdx.x; idx < kTile * cols; idx += blockDim.x) {
    const int64_t r = idx / cols, c = idx - r * cols;
    dst[r * ld + c] = r < valid ? static_cast<float>(load(src[r * cols + c])) : 0.0f;
  }
}

/// The P and dS tiles of queries [q0, q0 + 32) against keys [k0, k0 + 32)
/// from the tiles in shared memory (rows past the tensors are zeros):
/// P = exp(scale q.k - lse) where the query sees the key (else 0), and
/// dS = P (g.v - delta). Each thread computes entries (r, c) for r in
/// {tr, tr + 16}, c in {tc, tc + 16}.
__device__ __forceinline__ void probabilityTiles(const AttentionBackwardShape &a, const float *qs,
                                                 const float *gs, const float *ks, const float *vs,
                                                 const float *lse, const float *delta, int64_t q0,
                                                 int64_t k0, float *ps, float *dss) {
  const int64_t ldq = a.d + 1, ldv = a.dv + 1;
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  float s[2][2] = {}, dp[2][2] = {};
  for (int64_t e = 0; e < a.d; ++e) {
    const float q0v = qs[tr * ldq + e], q1v = qs[(tr + 16) * ldq + e];
    const float k0v = ks[tc * ldq + e], k1v = ks[(tc + 16) * ldq + e];
    s[0][0] += q0v * k0v;
    s[0][1] += q0v * k1v;
    s[1][0] += q1v * k0v;
    s[1][1] += q1v * k1v;
  }
  for (int64_t e = 0; e < a.dv; ++e) {
    const float g0 = gs[tr * ldv + e], g1 = gs[(tr + 16) * ldv + e];
    const float v0 = vs[tc * ldv + e], v1 = vs[(tc + 16) * ldv + e];
    dp[0][0] += g0 * v0;
    dp[0][1] += g0 * v1;
    dp[1][0] += g1 * v0;
    dp[1][1] += g1 * v1;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = tr + 16 * i, c = tc + 16 * j;
      const int64_t query = q0 + r, key = k0 + c;
      const float l = lse[r];
      // A row that sees no key (lse -inf) has no gradient.
      const bool visible =
          query < a.sq && key < a.sk && (!a.causal || key <= query + a.offset) && l != -INFINITY;
      const float p = visible ? expf(a.scale * s[i][j] - l) : 0.0f;
      ps[r * kLdTile + c] = p;
      dss[r * kLdTile + c] = visible ? p * (dp[i][j] - delta[r]) : 0.0f;
    }
}

/// Pass 1, a block per (head, query tile): lse = log-sum-exp of the visible
/// scaled scores (-inf for a row that sees no key) and delta = rowsum(g * y)
/// of each query row, into the scratch (fp32 whatever T). Warp w keeps rows
/// [4w, 4w + 4).
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionRowStatsKernel(const T *__restrict__ q, const T *__restrict__ k,
                            const T *__restrict__ g, const T *__restrict__ y,
                            float *__restrict__ lseOut, float *__restrict__ deltaOut,
                            AttentionBackwardShape a, int64_t queryTiles) {
  extern __shared__ __align__(16) float smem[];
  const int64_t ld = a.d + 1;
  float *qs = smem, *ks = qs + kTile * ld, *ss = ks + kTile * ld;
  const int64_t head = blockIdx.x / queryTiles, q0 = (blockIdx.x % queryTiles) * kTile;
  const int64_t rows = std::min<int64_t>(kTile, a.sq - q0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T *kh = k + head * a.sk * a.d;
  loadTile(qs, ld, q + (head * a.sq + q0) * a.d, rows, a.d);
  float rowMax[4], rowSum[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    rowMax[i] = -INFINITY;
    rowSum[i] = 0.0f;
  }
  const int64_t keyEnd = keyEndFor(a, q0, rows);
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
    __syncthreads(); // the previous tile's scores are read
    loadTile(ks, ld, kh + k0 * a.d, std::min<int64_t>(kTile, a.sk - k0), a.d);
    __syncthreads();
    float s[2][2] = {};
    for (int64_t e = 0; e < a.d; ++e) {
      const float q0v = qs[tr * ld + e], q1v = qs[(tr + 16) * ld + e];
      const float k0v = ks[tc * ld + e], k1v = ks[(tc + 16) * ld + e];
      s[0][0] += q0v * k0v;
      s[0][1] += q0v * k1v;
      s[1][0] += q1v * k0v;
      s[1][1] += q1v * k1v;
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int r = tr + 16 * i, c = tc + 16 * j;
        const int64_t query = q0 + r, key = k0 + c;
        const bool visible = query < a.sq && key < a.sk && (!a.causal || key <= query + a.offset);
        ss[r * kLdTile + c] = visible ? a.scale * s[i][j] : -INFINITY;
      }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float v = ss[(warp * 4 + i) * kLdTile + lane];
      const float newMax = fmaxf(rowMax[i], warpReduce(v, MaxOp{}));
      if (newMax == -INFINITY)
        continue; // nothing visible yet (the same in every lane)
      const float sum = warpReduce(expf(v - newMax), SumOp{});
      rowSum[i] = rowSum[i] * expf(rowMax[i] - newMax) + sum;
      rowMax[i] = newMax;
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = warp * 4 + i;
    if (r >= rows)
      break;
    const int64_t row = head * a.sq + q0 + r;
    const T *gr = g + row * a.dv, *yr = y + row * a.dv;
    float acc = 0.0f;
    for (int64_t c = lane; c < a.dv; c += 32)
      acc += static_cast<float>(load(gr[c])) * static_cast<float>(load(yr[c]));
    acc = warpReduce(acc, SumOp{});
    if (lane == 0) {
      lseOut[row] = rowSum[i] > 0.0f ? rowMax[i] + logf(rowSum[i]) : -INFINITY;
      deltaOut[row] = acc;
    }
  }
}

/// Pass 2, a block per (head, key tile): dV = sum P^T g and dK = scale *
/// sum dS^T q over the query tiles that see the keys.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionKeyGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                           const T *__restrict__ v, const T *__restrict__ g,
                           const float *__restrict__ lseIn, const float *__restrict__ deltaIn,
                           T *__restrict__ dk, T *__restrict__ dv, AttentionBackwardShape a,
                           int64_t keyTiles) {
  extern __shared__ __align__(16) float smem[];
  const int64_t ldq = a.d + 1, ldv = a.dv + 1;
  float *ks = smem, *vs = ks + kTile * ldq, *qs = vs + kTile * ldv, *gs = qs + kTile * ldq;
  float *ps = gs + kTile * ldv, *dss = ps + kTile * kLdTile;
  float *dkAcc = dss + kTile * kLdTile, *dvAcc = dkAcc + kTile * a.d;
  float *lse = dvAcc + kTile * a.dv, *delta = lse + kTile;
  const int64_t head = blockIdx.x / keyTiles, k0 = (blockIdx.x % keyTiles) * kTile;
  const int64_t keys = std::min<int64_t>(kTile, a.sk - k0);
  loadTile(ks, ldq, k + (head * a.sk + k0) * a.d, keys, a.d);
  loadTile(vs, ldv, v + (head * a.sk + k0) * a.dv, keys, a.dv);
  // Each thread owns the same accumulator entries throughout.
  for (int64_t i = threadIdx.x; i < kTile * a.d; i += blockDim.x)
    dkAcc[i] = 0.0f;
  for (int64_t i = threadIdx.x; i < kTile * a.dv; i += blockDim.x)
    dvAcc[i] = 0.0f;
  // The first query that sees key k0 (causal).
  const int64_t first = a.causal ? std::min(a.sq, std::max<int64_t>(0, k0 - a.offset)) : 0;
  for (int64_t q0 = first / kTile * kTile; q0 < a.sq; q0 += kTile) {
    const int64_t rows = std::min<int64_t>(kTile, a.sq - q0);
    __syncthreads(); // the previous query tile is used up
    loadTile(qs, ldq, q + (head * a.sq + q0) * a.d, rows, a.d);
    loadTile(gs, ldv, g + (head * a.sq + q0) * a.dv, rows, a.dv);
    if (threadIdx.x < kTile) {
      const bool inside = threadIdx.x < rows;
      lse[threadIdx.x] = inside ? lseIn[head * a.sq + q0 + threadIdx.x] : -INFINITY;
      delta[threadIdx.x] = inside ? deltaIn[head * a.sq + q0 + threadIdx.x] : 0.0f;
    }
    __syncthreads();
    probabilityTiles(a, qs, gs, ks, vs, lse, delta, q0, k0, ps, dss);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < kTile * a.dv; i += blockDim.x) {
      const int64_t c = i / a.dv, e = i - c * a.dv;
      float acc = dvAcc[i];
      for (int r = 0; r < kTile; ++r)
        acc += ps[r * kLdTile + c] * gs[r * ldv + e];
      dvAcc[i] = acc;
    }
    for (int64_t i = threadIdx.x; i < kTile * a.d; i += blockDim.x) {
      const int64_t c = i / a.d, e = i - c * a.d;
      float acc = dkAcc[i];
      for (int r = 0; r < kTile; ++r)
        acc += dss[r * kLdTile + c] * qs[r * ldq + e];
      dkAcc[i] = acc;
    }
  }
  for (int64_t i = threadIdx.x; i < keys * a.d; i += blockDim.x)
    dk[(head * a.sk + k0) * a.d + i] = store<T>(a.scale * dkAcc[i]);
  for (int64_t i = threadIdx.x; i < keys * a.dv; i += blockDim.x)
    dv[(head * a.sk + k0) * a.dv + i] = store<T>(dvAcc[i]);
}

/// Pass 3, a block per (head, query tile): dQ = scale * sum dS k over the
/// key tiles the queries see. The last query tiles (the most keys under a
/// causal mask) start first.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    attentionQueryGradKernel(const T *__restrict__ q, const T *__restrict__ k,
                             const T *__restrict__ v, const T *__restrict__ g,
                             const float *__restrict__ lseIn, const float *__restrict__ deltaIn,
                             T *__restrict__ dq, AttentionBackwardShape a, int64_t queryTiles) {
  extern __shared__ __align__(16) float smem[];
  const int64_t ldq = a.d + 1, ldv = a.dv + 1;
  float *qs = smem, *gs = qs + kTile * ldq, *ks = gs + kTile * ldv, *vs = ks + kTile * ldq;
  float *ps = vs + kTile * ldv, *dss = ps + kTile * kLdTile;
  float *dqAcc = dss + kTile * kLdTile, *lse = dqAcc + kTile * a.d, *delta = lse + kTile;
  const int64_t head = blockIdx.x / queryTiles;
  const int64_t q0 = (queryTiles - 1 - blockIdx.x % queryTiles) * kTile;
  const int64_t rows = std::min<int64_t>(kTile, a.sq - q0);
  loadTile(qs, ldq, q + (head * a.sq + q0) * a.d, rows, a.d);
  loadTile(gs, ldv, g + (head * a.sq + q0) * a.dv, rows, a.dv);
  if (threadIdx.x < kTile) {
    const bool inside = threadIdx.x < rows;
    lse[threadIdx.x] = inside ? lseIn[head * a.sq + q0 + threadIdx.x] : -INFINITY;
    delta[threadIdx.x] = inside ? deltaIn[head * a.sq + q0 + threadIdx.x] : 0.0f;
  }
  for (int64_t i = threadIdx.x; i < kTile * a.d; i += blockDim.x)
    dqAcc[i] = 0.0f;
  const int64_t keyEnd = keyEndFor(a, q0, rows);
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
    const int64_t keys = std::min<int64_t>(kTile, a.sk - k0);
    __syncthreads(); // the previous key tile is used up
    loadTile(ks, ldq, k + (head * a.sk + k0) * a.d, keys, a.d);
    loadTile(vs, ldv, v + (head * a.sk + k0) * a.dv, keys, a.dv);
    __syncthreads();
    probabilityTiles(a, qs, gs, ks, vs, lse, delta, q0, k0, ps, dss);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < kTile * a.d; i += blockDim.x) {
      const int64_t r = i / a.d, e = i - r * a.d;
      float acc = dqAcc[i];
      for (int c = 0; c < kTile; ++c)
        acc += dss[r * kLdTile + c] * ks[c * ldq + e];
      dqAcc[i] = acc;
    }
  }
  for (int64_t i = threadIdx.x; i < rows * a.d; i += blockDim.x)
    dq[(head * a.sq + q0) * a.d + i] = store<T>(a.scale * dqAcc[i]);
}

/// Shared memory per block of the three kernels, in bytes (fp32 tiles
/// whatever the operands' dtype).
struct AttentionBackwardSmem {
  size_t stats = 0, key = 0, query = 0;
};

/// Opts T's kernels in to their shared memory and returns the call.
template <typename T>
Status makeAttentionBackward(const KernelSignature &sig, DeviceContext &ctx,
                             const AttentionBackwardShape &a, const AttentionBackwardSmem &smem,
                             int64_t queryTiles, int64_t keyTiles, KernelFn *fn) {
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(attentionRowStatsKernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem.stats)));
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(attentionKeyGradKernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem.key)));
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(attentionQueryGradKernel<T>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem.query)));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (a.heads == 0)
      return {};
    const T *g = static_cast<const T *>(call.inputs[0]);
    const T *q = static_cast<const T *>(call.inputs[1]);
    const T *k = static_cast<const T *>(call.inputs[2]);
    const T *v = static_cast<const T *>(call.inputs[3]);
    const T *y = static_cast<const T *>(call.inputs[4]);
    // The scratch is f32 for every T: heads * sq log-sum-exps, then as many
    // rowsums, attentionBackwardScratchBytes(q) = heads * sq * 8 bytes.
    float *lse = static_cast<float *>(call.scratch);
    float *delta = lse + a.heads * a.sq;
    if (queryTiles > 0) {
      attentionRowStatsKernel<T><<<static_cast<unsigned>(a.heads * queryTiles), kTileThreads,
                                   smem.stats, c->stream>>>(q, k, g, y, lse, delta, a, queryTiles);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
      attentionQueryGradKernel<T><<<static_cast<unsigned>(a.heads * queryTiles), kTileThreads,
                                    smem.query, c->stream>>>(
          q, k, v, g, lse, delta, static_cast<T *>(call.outputs[0]), a, queryTiles);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    }
    if (keyTiles > 0) {
      attentionKeyGradKernel<T><<<static_cast<unsigned>(a.heads * keyTiles), kTileThreads,
                                  smem.key, c->stream>>>(q, k, v, g, lse, delta,
                                                         static_cast<T *>(call.outputs[1]),
                                                         static_cast<T *>(call.outputs[2]), a,
                                                         keyTiles);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    }
    return {};
  };
  return {};
}

Status buildAttentionBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  AttentionParams p;
  CLEAVE_RETURN_IF_ERROR(parseAttentionBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  // bf16 heads up to 128 wide run on tensor cores (AttentionBackward.cu).
  if (sig.inputs[1]->dtype == DType::BF16 &&
      std::max(p.headDim, p.valueDim) <= kAttentionBackwardWmmaMaxDim)
    return makeAttentionBackwardWmma(sig, ctx, p, fn);
  AttentionBackwardShape a;
  a.heads = p.heads;
  a.sq = p.queries;
  a.sk = p.keys;
  a.d = p.headDim;
  a.dv = p.valueDim;
  a.offset = p.keys - p.queries;
  a.causal = p.causal;
  a.scale = static_cast<float>(p.scale);
  const int64_t queryTiles = (a.sq + kTile - 1) / kTile, keyTiles = (a.sk + kTile - 1) / kTile;
  if (a.heads * std::max(queryTiles, keyTiles) > std::numeric_limits<int32_t>::max())
    return CLEAVE_ERROR(sig.kernel, ": ", a.heads, " heads of ", std::max(a.sq, a.sk),
                        " positions are more tiles than a grid holds");
  // Shared memory per block, in floats: the tiles of q, g (Dv), k, v, P,
  // dS, the accumulators and the row statistics. bf16 operands are widened
  // as they are loaded, so the sizes are the f32 kernel's.
  const int64_t tiles = kTile * (2 * (a.d + 1) + 2 * (a.dv + 1)) + 2 * kTile * kLdTile;
  AttentionBackwardSmem smem;
  smem.stats = sizeof(float) * (2 * kTile * (a.d + 1) + kTile * kLdTile);
  smem.key = sizeof(float) * (tiles + kTile * (a.d + a.dv) + 2 * kTile);
  smem.query = sizeof(float) * (tiles + kTile * a.d + 2 * kTile);
  int optin = 0;
  CLEAVE_CUDA_TRY(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device));
  if (smem.key > static_cast<size_t>(optin))
    return CLEAVE_ERROR(sig.kernel, ": head dims ", a.d, " and ", a.dv, " need ", smem.key,
                        " bytes of shared memory per block, the GPU has ", optin);
  if (sig.inputs[1]->dtype == DType::BF16)
    return makeAttentionBackward<bf16>(sig, ctx, a, smem, queryTiles, keyTiles, fn);
  return makeAttentionBackward<float>(sig, ctx, a, smem, queryTiles, keyTiles, fn);
}

//===----------------------------------------------------------------------===//
// embedding_backward
//===----------------------------------------------------------------------===//

/// The sort keys: each position's table row, or `rows` (past every row)
/// for padding_idx and for other shards' indices; values are positions.
template <typename Index>
__global__ void embeddingKeysKernel(const Index *__restrict__ indices, uint32_t *__restrict__ keys,
                                    int32_t *__restrict__ positions, EmbeddingBackwardParams p,
                                    DeviceError *error) {
  for (int64_t i = globalThread(); i < p.count; i += globalThreads()) {
    const int64_t index = static_cast<int64_t>(indices[i]);
    const int64_t row = index - p.offset;
    const bool inside = row >= 0 && row < p.rows;
    if (!p.sharded && !inside)
      reportDeviceError(error, DeviceError::EmbeddingBackwardIndexOutOfRange, index, i, p.rows);
    const bool skip = !inside || (p.hasPadding && index == p.padding);
    keys[i] = static_cast<uint32_t>(skip ? p.rows : row);
    positions[i] = static_cast<int32_t>(i);
  }
}

/// The first i in [0, n) with keys[i] >= key (keys sorted).
__device__ __forceinline__ int64_t lowerBound(const uint32_t *keys, int64_t n, int64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<int64_t>(keys[mid]) < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// A block per (table row, chunk of blockDim columns): the row's positions
/// are a run of the sorted keys, summed in position order in fp32 and
/// rounded to T once (bf16: the CPU's widened kernel, bit for bit).
template <typename T>
__global__ void embeddingSumKernel(const T *__restrict__ grad, const uint32_t *__restrict__ keys,
                                   const int32_t *__restrict__ positions, T *__restrict__ dw,
                                   int64_t count, int64_t rows, int64_t dim, int64_t chunks) {
  for (int64_t item = blockIdx.x; item < rows * chunks; item += gridDim.x) {
    const int64_t row = item / chunks;
    const int64_t col = (item - row * chunks) * blockDim.x + threadIdx.x;
    if (col >= dim)
      continue;
    const int64_t begin = lowerBound(keys, count, row), end = lowerBound(keys, count, row + 1);
    float sum = 0.0f;
    for (int64_t i = begin; i < end; ++i)
      sum += static_cast<float>(load(grad[static_cast<int64_t>(positions[i]) * dim + col]));
    dw[row * dim + col] = store<T>(sum);
  }
}

/// Byte offsets of the four arrays of `count` 32-bit words and CUB's temporary
/// storage in the shared workspace, each 256-byte aligned.
struct EmbeddingWorkspace {
  size_t keysIn = 0, keysOut = 0, valuesIn = 0, valuesOut = 0, temp = 0, tempBytes = 0, total = 0;
};

Status buildEmbeddingBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  EmbeddingBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseEmbeddingBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  if (p.count >= std::numeric_limits<int32_t>::max() ||
      p.rows >= std::numeric_limits<int32_t>::max())
    return CLEAVE_ERROR(sig.kernel,
                        ": the cuda backend handles fewer than 2^31 - 1 indices and "
                        "table rows, got ",
                        p.count, " indices and ", p.rows, " rows");
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  const size_t outBytes = sig.outputs[0].bytes();
  if (outBytes == 0 && p.count == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  // Sort keys in [0, rows]: only the bits that can be set.
  int endBit = 1;
  while (endBit < 31 && (int64_t(1) << endBit) <= p.rows)
    ++endBit;
  EmbeddingWorkspace w;
  auto align = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t array = align(sizeof(int32_t) * static_cast<size_t>(p.count));
  w.keysOut = w.keysIn + array;
  w.valuesIn = w.keysOut + array;
  w.valuesOut = w.valuesIn + array;
  w.temp = w.valuesOut + array;
  if (p.count > 0)
    CLEAVE_CUDA_TRY(cub::DeviceRadixSort::SortPairs(
        nullptr, w.tempBytes, static_cast<const uint32_t *>(nullptr),
        static_cast<uint32_t *>(nullptr), static_cast<const int32_t *>(nullptr),
        static_cast<int32_t *>(nullptr), static_cast<int>(p.count), 0, endBit, ctx.stream));
  w.total = w.temp + align(w.tempBytes);
  if (p.count > 0) {
    void *unused = nullptr;
    CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(w.total, &unused));
  }
  const int threads =
      static_cast<int>(std::min<int64_t>(kThreads, std::max<int64_t>(32, (p.dim + 31) / 32 * 32)));
  const int64_t chunks = (p.dim + threads - 1) / threads;
  *fn = [=](const KernelCall &call) -> Status {
    void *dw = call.outputs[0];
    if (p.count == 0) { // nothing to add: zeros (all-zero bits in f32 and bf16)
      if (outBytes > 0)
        CLEAVE_CUDA_TRY(cudaMemsetAsync(dw, 0, outBytes, c->stream));
      return {};
    }
    char *base = static_cast<char *>(c->workspace);
    uint32_t *keysIn = reinterpret_cast<uint32_t *>(base + w.keysIn);
    uint32_t *keysOut = reinterpret_cast<uint32_t *>(base + w.keysOut);
    int32_t *valuesIn = reinterpret_cast<int32_t *>(base + w.valuesIn);
    int32_t *valuesOut = reinterpret_cast<int32_t *>(base + w.valuesOut);
    if (p.wide)
      embeddingKeysKernel<<<gridFor(*c, p.count), kThreads, 0, c->stream>>>(
          static_cast<const int64_t *>(call.inputs[1]), keysIn, valuesIn, p, c->deviceError);
    else
      embeddingKeysKernel<<<gridFor(*c, p.count), kThreads, 0, c->stream>>>(
          static_cast<const int32_t *>(call.inputs[1]), keysIn, valuesIn, p, c->deviceError);
    CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    size_t tempBytes = w.tempBytes;
    CLEAVE_CUDA_TRY(cub::DeviceRadixSort::SortPairs(
        base + w.temp, tempBytes, static_cast<const uint32_t *>(keysIn), keysOut,
        static_cast<const int32_t *>(valuesIn), valuesOut, static_cast<int>(p.count), 0, endBit,
        c->stream));
    if (p.rows == 0 || p.dim == 0)
      return {};
    if (p.dtype == DType::BF16)
      embeddingSumKernel<bf16><<<gridForItems(p.rows * chunks), threads, 0, c->stream>>>(
          static_cast<const bf16 *>(call.inputs[0]), keysOut, valuesOut, static_cast<bf16 *>(dw),
          p.count, p.rows, p.dim, chunks);
    else
      embeddingSumKernel<float><<<gridForItems(p.rows * chunks), threads, 0, c->stream>>>(
          static_cast<const float *>(call.inputs[0]), keysOut, valuesOut, static_cast<float *>(dw),
          p.count, p.rows, p.dim, chunks);
    return launchStatus(name);
  };
  return {};
}

//===----------------------------------------------------------------------===//
// slice_backward
//===----------------------------------------------------------------------===//

/// Units of U bytes: the result is [outer, size, inner] units, the grad
/// [outer, count, inner]; result row s holds grad row (s - start) / step
/// when it is one of the slice's, zeros otherwise.
template <typename U>
__global__ void sliceBackwardKernel(const U *__restrict__ grad, U *__restrict__ out, int64_t size,
                                    int64_t inner, int64_t start, int64_t step, int64_t count,
                                    int64_t n) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    const int64_t i = idx % inner, t = idx / inner;
    const int64_t s = t % size, o = t / size;
    const int64_t rel = s - start;
    U value{};
    if (rel >= 0 && rel % step == 0 && rel / step < count)
      value = grad[(o * count + rel / step) * inner + i];
    out[idx] = value;
  }
}

Status buildSliceBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  SliceParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSliceBackward(sig, &sp));
  const size_t rowBytes = static_cast<size_t>(sp.inner) * dtypeBytes(sig.outputs[0].dtype);
  const int64_t rows = sp.outer * sp.size;
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (rows == 0 || rowBytes == 0)
      return {};
    const void *grad = call.inputs[0];
    void *out = call.outputs[0];
    // The widest unit that divides a row and both pointers' alignment.
    size_t unit = 1;
    for (size_t u : {size_t(16), size_t(8), size_t(4), size_t(2)})
      if (rowBytes % u == 0 && aligned(grad, u) && aligned(out, u)) {
        unit = u;
        break;
      }
    const int64_t inner = static_cast<int64_t>(rowBytes / unit), n = rows * inner;
    auto launch = [&](auto zero) {
      using U = decltype(zero);
      sliceBackwardKernel<U><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
          static_cast<const U *>(grad), static_cast<U *>(out), sp.size, inner, sp.start, sp.step,
          sp.count, n);
    };
    switch (unit) {
    case 16:
      launch(uint4{});
      break;
    case 8:
      launch(uint64_t{});
      break;
    case 4:
      launch(uint32_t{});
      break;
    case 2:
      launch(uint16_t{});
      break;
    default:
      launch(uint8_t{});
      break;
    }
    return launchStatus(name);
  };
  return {};
}

} // namespace

void registerTrainingContractionKernels(KernelTable &table) {
  registerContractionBackwardKernels(table);
  table["max_pool2d_backward"] = buildMaxPoolBackward;
  table["avg_pool2d_backward"] = buildAvgPoolBackward;
  table["adaptive_avg_pool2d_backward"] = buildAdaptiveAvgPoolBackward;
  table["attention_backward"] = buildAttentionBackward;
  table["embedding_backward"] = buildEmbeddingBackward;
  table["slice_backward"] = buildSliceBackward;
}

} // namespace cleave::runtime::cuda
