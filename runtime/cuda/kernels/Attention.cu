//===- Attention.cu - Fused attention with an online softmax --------------===//
//
// out[b, h, i] = sum_j softmax_j(scale * q_i . k_j) v_j over the keys j that
// query i sees: all of them, or with `causal` those with
// j <= i + (Sk - Sq) (the queries are the last Sq positions of Sk). The
// Sq x Sk scores are never stored: key tiles stream through shared memory
// while each query row keeps a running max and sum in fp32 and rescales its
// accumulated output (FlashAttention's online softmax). Key tiles wholly
// above the causal diagonal are never loaded.
//
// bf16 with head dims up to 256 runs q.k^T and p.v on tensor cores (WMMA,
// bf16 inputs, fp32 accumulators): 64 queries per block, 16 per warp, 64
// keys per tile. f32, and bf16 with larger head dims, run a SIMT kernel: a
// warp per query row, 32 keys per step.
//
// A query row that sees no key at all (causal with Sk < Sq) is all zeros,
// as the kernel contract says (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/AttentionTiles.cuh"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <mma.h>

#include <cmath>
#include <string>

namespace cleave::runtime::cuda {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

struct AttentionShape {
  int64_t heads; // B * H
  int64_t sq, sk, d, dv;
  bool causal;
  float scaleLog2; // scale * log2(e): the softmax runs in base 2
};

/// The last key query i sees (Sk - 1 without a mask).
__device__ __forceinline__ int64_t lastKey(const AttentionShape &a, int64_t i) {
  return a.causal ? std::min<int64_t>(a.sk - 1, i + (a.sk - a.sq)) : a.sk - 1;
}

//===----------------------------------------------------------------------===//
// Tensor-core kernel (bf16): P is the head dim padded to 64, 128 or 256.
//===----------------------------------------------------------------------===//

constexpr int kBM = 64; // queries per block
constexpr int kBN = 64; // keys per tile
constexpr int kAttentionWarps = kBM / 16;

template <int P> struct TileLayout {
  // Leading dims padded against bank conflicts; multiples of 8 (bf16) and
  // 4 (f32) as WMMA requires, keeping every fragment 32-byte aligned.
  static constexpr int ldQ = P + 8, ldS = kBN + 4, ldP = kBN + 8, ldO = P + 4;
  static constexpr size_t q = size_t(kBM) * ldQ, k = size_t(kBN) * ldQ, v = size_t(kBN) * ldQ;
  static constexpr size_t bytes = (q + k + v) * sizeof(bf16) + size_t(kBM) * ldS * sizeof(float) +
                                  size_t(kBM) * ldP * sizeof(bf16) +
                                  size_t(kBM) * ldO * sizeof(float) + 2 * kBM * sizeof(float);
};

template <int P>
__global__ void __launch_bounds__(32 * kAttentionWarps)
    attentionWmmaKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                        const bf16 *__restrict__ v, bf16 *__restrict__ out, AttentionShape a,
                        int64_t queryTiles, bool vecQK, bool vecV) {
  using namespace nvcuda;
  using L = TileLayout<P>;
  extern __shared__ __align__(128) unsigned char smem[];
  bf16 *qs = reinterpret_cast<bf16 *>(smem);
  bf16 *ks = qs + L::q;
  bf16 *vs = ks + L::k;
  float *ss = reinterpret_cast<float *>(vs + L::v);
  bf16 *ps = reinterpret_cast<bf16 *>(ss + kBM * L::ldS);
  float *os = reinterpret_cast<float *>(ps + kBM * L::ldP);
  float *rowMax = os + kBM * L::ldO;
  float *rowSum = rowMax + kBM;

  // The heaviest (last, under a causal mask) query tiles start first.
  const int64_t head = blockIdx.x / queryTiles;
  const int64_t q0 = (queryTiles - 1 - blockIdx.x % queryTiles) * kBM;
  const int validQ = static_cast<int>(std::min<int64_t>(kBM, a.sq - q0));
  const bf16 *qb = q + (head * a.sq + q0) * a.d;
  const bf16 *kb = k + head * a.sk * a.d;
  const bf16 *vb = v + head * a.sk * a.dv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  loadBf16Tile<P>(qs, L::ldQ, qb, kBM, validQ, a.d, vecQK);
  for (int i = threadIdx.x; i < kBM * L::ldO; i += blockDim.x)
    os[i] = 0.0f;
  for (int i = threadIdx.x; i < kBM; i += blockDim.x) {
    rowMax[i] = -INFINITY;
    rowSum[i] = 0.0f;
  }
  // Keys past the last one the block's last query sees are never loaded.
  const int64_t keyEnd = lastKey(a, q0 + validQ - 1) + 1;
  const int64_t tiles = keyEnd > 0 ? (keyEnd + kBN - 1) / kBN : 0;

  constexpr bool kHoistQ = P <= 128;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[kHoistQ ? P / 16 : 1];
  __syncthreads();
  if constexpr (kHoistQ)
#pragma unroll
    for (int kk = 0; kk < P / 16; ++kk)
      wmma::load_matrix_sync(qf[kk], qs + warp * 16 * L::ldQ + kk * 16, L::ldQ);

  const int row = warp * 16 + lane / 2, half = lane % 2;
  const int64_t last = lastKey(a, q0 + row);
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t k0 = t * kBN;
    const int validK = static_cast<int>(std::min<int64_t>(kBN, a.sk - k0));
    __syncthreads(); // every warp is done with the previous tile
    loadBf16Tile<P>(ks, L::ldQ, kb + k0 * a.d, kBN, validK, a.d, vecQK);
    loadBf16Tile<P>(vs, L::ldQ, vb + k0 * a.dv, kBN, validK, a.dv, vecV);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows.
#pragma unroll
    for (int n = 0; n < kBN / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < P / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kf;
        wmma::load_matrix_sync(kf, ks + n * 16 * L::ldQ + kk * 16, L::ldQ);
        if constexpr (kHoistQ) {
          wmma::mma_sync(acc, qf[kk], kf, acc);
        } else {
          wmma::load_matrix_sync(qf[0], qs + warp * 16 * L::ldQ + kk * 16, L::ldQ);
          wmma::mma_sync(acc, qf[0], kf, acc);
        }
      }
      wmma::store_matrix_sync(ss + warp * 16 * L::ldS + n * 16, acc, L::ldS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, 32 columns each.
    float s[32];
    float tileMax = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const int col = half * 32 + c;
      const bool valid = k0 + col <= last; // last < Sk
      s[c] = valid ? ss[row * L::ldS + col] * a.scaleLog2 : -INFINITY;
      tileMax = fmaxf(tileMax, s[c]);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    const float oldMax = rowMax[row], oldSum = rowSum[row];
    const float newMax = fmaxf(oldMax, tileMax);
    // A row with no key yet stays at zero (never exp(-inf - -inf)).
    const float base = newMax == -INFINITY ? 0.0f : newMax;
    const float correction = exp2f(oldMax - base);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float p = exp2f(s[c] - base);
      sum += p;
      ps[row * L::ldP + half * 32 + c] = __float2bfloat16_rn(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    __syncwarp();
    if (half == 0) {
      rowMax[row] = newMax;
      rowSum[row] = oldSum * correction + sum;
    }
    for (int c = half * (P / 2); c < (half + 1) * (P / 2); ++c)
      os[row * L::ldO + c] *= correction;
    __syncwarp();

    // O += P V for the warp's 16 rows.
    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf[kBN / 16];
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
      wmma::load_matrix_sync(pf[kk], ps + warp * 16 * L::ldP + kk * 16, L::ldP);
#pragma unroll 4
    for (int n = 0; n < P / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      float *o = os + warp * 16 * L::ldO + n * 16;
      wmma::load_matrix_sync(acc, o, L::ldO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vf;
        wmma::load_matrix_sync(vf, vs + kk * 16 * L::ldQ + n * 16, L::ldQ);
        wmma::mma_sync(acc, pf[kk], vf, acc);
      }
      wmma::store_matrix_sync(o, acc, L::ldO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  // Each warp writes its own rows.
  __syncwarp();
  bf16 *ob = out + (head * a.sq + q0) * a.dv;
  for (int r = warp * 16; r < warp * 16 + 16; ++r) {
    if (r >= validQ)
      break;
    // A row that sees no key is zeros; one that sees only -inf scores
    // (a zero sum) is NaN, as softmax and the CPU give.
    const float inv = lastKey(a, q0 + r) >= 0 ? 1.0f / rowSum[r] : 0.0f;
    for (int64_t c = lane; c < a.dv; c += 32)
      ob[r * a.dv + c] = __float2bfloat16_rn(os[r * L::ldO + c] * inv);
  }
}

//===----------------------------------------------------------------------===//
// SIMT kernel (f32, and bf16 beyond the tensor-core head dims): a warp per
// query row. The row's q and output accumulator live in shared memory.
//===----------------------------------------------------------------------===//

constexpr int kSimtWarps = 4;

template <typename T>
__global__ void __launch_bounds__(32 * kSimtWarps)
    attentionSimtKernel(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v,
                        T *__restrict__ out, AttentionShape a, int64_t queryGroups) {
  extern __shared__ __align__(16) float simtSmem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float *qs = simtSmem + warp * (a.d + a.dv);
  float *os = qs + a.d;
  const int64_t head = blockIdx.x / queryGroups;
  const int64_t i = (queryGroups - 1 - blockIdx.x % queryGroups) * kSimtWarps + warp;
  if (i >= a.sq)
    return; // no block-wide synchronization below
  const T *qr = q + (head * a.sq + i) * a.d;
  const T *kb = k + head * a.sk * a.d;
  const T *vb = v + head * a.sk * a.dv;
  for (int64_t c = lane; c < a.d; c += 32)
    qs[c] = load(qr[c]);
  for (int64_t c = lane; c < a.dv; c += 32)
    os[c] = 0.0f;
  __syncwarp();
  const int64_t keyEnd = lastKey(a, i) + 1;
  float rowMax = -INFINITY, rowSum = 0.0f;
  for (int64_t k0 = 0; k0 < keyEnd; k0 += 32) {
    const int count = static_cast<int>(std::min<int64_t>(32, keyEnd - k0));
    // Lane j ends with the score of key k0 + j.
    float mine = -INFINITY;
    for (int j = 0; j < count; ++j) {
      const T *kr = kb + (k0 + j) * a.d;
      float partial = 0.0f;
      for (int64_t c = lane; c < a.d; c += 32)
        partial += qs[c] * static_cast<float>(load(kr[c]));
      partial = warpReduce(partial, SumOp{});
      if (lane == j)
        mine = partial * a.scaleLog2;
    }
    const float newMax = fmaxf(rowMax, warpReduce(mine, MaxOp{}));
    const float base = newMax == -INFINITY ? 0.0f : newMax;
    const float correction = exp2f(rowMax - base);
    const float p = exp2f(mine - base);
    rowSum = rowSum * correction + warpReduce(p, SumOp{});
    rowMax = newMax;
    // Every lane runs every step: the shuffles need the whole warp.
    for (int64_t c0 = 0; c0 < a.dv; c0 += 32) {
      const int64_t c = c0 + lane;
      const bool inside = c < a.dv;
      float acc = inside ? os[c] * correction : 0.0f;
      for (int j = 0; j < count; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        if (inside)
          acc += pj * static_cast<float>(load(vb[(k0 + j) * a.dv + c]));
      }
      if (inside)
        os[c] = acc;
    }
  }
  // No key seen: zeros; only -inf scores (a zero sum): NaN, as the CPU.
  const float inv = keyEnd > 0 ? 1.0f / rowSum : 0.0f;
  T *orow = out + (head * a.sq + i) * a.dv;
  for (int64_t c = lane; c < a.dv; c += 32)
    orow[c] = store<T>(os[c] * inv);
}

//===----------------------------------------------------------------------===//
// Builder.
//===----------------------------------------------------------------------===//

Status maxSharedMemory(DeviceContext &ctx, size_t *bytes) {
  int value = 0;
  CLEAVE_CUDA_TRY(
      cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device));
  *bytes = static_cast<size_t>(value);
  return {};
}

template <int P>
Status makeWmma(const KernelSignature &sig, DeviceContext &ctx, const AttentionShape &a,
                KernelFn *fn) {
  constexpr size_t bytes = TileLayout<P>::bytes;
  size_t limit = 0;
  CLEAVE_RETURN_IF_ERROR(maxSharedMemory(ctx, &limit));
  if (bytes > limit)
    return CLEAVE_ERROR(sig.kernel, ": needs ", bytes,
                        " bytes of shared memory per block, the GPU ", "has ", limit);
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(attentionWmmaKernel<P>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t queryTiles = (a.sq + kBM - 1) / kBM;
  *fn = [=](const KernelCall &call) -> Status {
    if (a.heads == 0 || a.sq == 0 || a.dv == 0)
      return {};
    const bf16 *q = static_cast<const bf16 *>(call.inputs[0]);
    const bf16 *k = static_cast<const bf16 *>(call.inputs[1]);
    const bf16 *v = static_cast<const bf16 *>(call.inputs[2]);
    const bool vecQK = a.d % 8 == 0 && aligned(q, 16) && aligned(k, 16);
    const bool vecV = a.dv % 8 == 0 && aligned(v, 16);
    attentionWmmaKernel<P>
        <<<static_cast<unsigned>(a.heads * queryTiles), 32 * kAttentionWarps, bytes, c->stream>>>(
            q, k, v, static_cast<bf16 *>(call.outputs[0]), a, queryTiles, vecQK, vecV);
    return launchStatus(name);
  };
  return {};
}

template <typename T>
Status makeSimt(const KernelSignature &sig, DeviceContext &ctx, const AttentionShape &a,
                KernelFn *fn) {
  const size_t bytes = size_t(kSimtWarps) * (a.d + a.dv) * sizeof(float);
  size_t limit = 0;
  CLEAVE_RETURN_IF_ERROR(maxSharedMemory(ctx, &limit));
  if (bytes > limit)
    return CLEAVE_ERROR(sig.kernel, ": head dims ", a.d, " and ", a.dv,
                        " need more shared memory than the GPU has (", bytes, " > ", limit,
                        " bytes)");
  if (bytes > 48 * 1024)
    CLEAVE_CUDA_TRY(cudaFuncSetAttribute(attentionSimtKernel<T>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t groups = (a.sq + kSimtWarps - 1) / kSimtWarps;
  *fn = [=](const KernelCall &call) -> Status {
    if (a.heads == 0 || a.sq == 0 || a.dv == 0)
      return {};
    attentionSimtKernel<T>
        <<<static_cast<unsigned>(a.heads * groups), 32 * kSimtWarps, bytes, c->stream>>>(
            static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
            static_cast<const T *>(call.inputs[2]), static_cast<T *>(call.outputs[0]), a, groups);
    return launchStatus(name);
  };
  return {};
}

Status buildAttention(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  AttentionParams p;
  CLEAVE_RETURN_IF_ERROR(parseAttention(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const DType dtype = sig.inputs[0]->dtype;
  AttentionShape a;
  a.heads = p.heads;
  a.sq = p.queries;
  a.sk = p.keys;
  a.d = p.headDim;
  a.dv = p.valueDim;
  a.causal = p.causal;
  a.scaleLog2 = static_cast<float>(p.scale) * kLog2e;
  const int64_t widest = std::max(a.d, a.dv);
  if (dtype == DType::BF16 && widest <= 256) {
    if (widest <= 64)
      return makeWmma<64>(sig, ctx, a, fn);
    if (widest <= 128)
      return makeWmma<128>(sig, ctx, a, fn);
    return makeWmma<256>(sig, ctx, a, fn);
  }
  if (dtype == DType::BF16)
    return makeSimt<bf16>(sig, ctx, a, fn);
  return makeSimt<float>(sig, ctx, a, fn);
}

} // namespace

void registerAttentionKernels(KernelTable &table) { table["attention"] = buildAttention; }

} // namespace cleave::runtime::cuda
