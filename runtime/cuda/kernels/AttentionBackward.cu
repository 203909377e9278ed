//===- AttentionBackward.cu - attention_backward on tensor cores ----------===//
//
// The bf16 attention_backward for head dims up to 128: FlashAttention-2's
// backward with its products on tensor cores (WMMA, bf16 inputs, fp32
// accumulators), in the same three passes and with the same scratch as the
// fp32 kernels (TrainingContractions.cu), never an Sq x Sk buffer:
//   1. a block per (head, 64 queries) recomputes q k^T tile by tile and
//      writes each row's log-sum-exp (base 2 here: the passes run exp2) and
//      delta = rowsum(g * y) into the scratch;
//   2. a block per (head, 64 keys) loops over the query tiles that see its
//      keys: S^T = k q^T, dP^T = v g^T, then P and dS = P (dP - delta), and
//      accumulates dV += P^T g and dK += dS^T q;
//   3. a block per (head, 64 queries) loops over its key tiles: S = q k^T,
//      dP = g v^T, dS, and accumulates dQ += dS k.
// Each warp owns 16 rows of its block's tile and its accumulators (16 x P
// fragments in registers), so a warp only waits for the others when a new
// tile is loaded. The streamed tiles are double-buffered: the next one is
// copied in (cp.async) while the warps work on the current one. P and dS are rounded to bf16 before they enter the
// tensor cores (as FlashAttention does); every sum is fp32, in a fixed
// order, with no atomics: the results are deterministic.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/kernels/AttentionTiles.cuh"

#include <cuda_pipeline.h>
#include <mma.h>

#include <limits>
#include <string>

namespace cleave::runtime::cuda {
namespace {

using namespace nvcuda;

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kRows = 64;              // queries or keys per tile
constexpr int kWarps = kRows / 16;     // a warp per 16 rows
constexpr int kBlockThreads = 32 * kWarps;

struct Geometry {
  int64_t heads, sq, sk, d, dv;
  int64_t offset; // sk - sq: query i sees keys j <= i + offset when causal
  bool causal;
  float scale, scaleLog2;
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// Shared memory of the three passes, in order: `operands` bf16 tiles of
/// kRows x P (q, g, k, v as the pass needs, the streamed ones twice), two
/// fp32 kRows x kRows score tiles (S and dP; after the last tile they stage
/// the accumulators), `probabilities` bf16 kRows x kRows tiles (P, dS), and
/// two buffers of the query rows' statistics (lse2, delta). Leading dims are padded against bank conflicts, multiples
/// of 8 (bf16) and 4 (f32) as WMMA requires; every region is a multiple
/// of 32 bytes, so every fragment pointer is 32-byte aligned.
template <int P> struct Layout {
  static constexpr int ld = P + 8;      // operand tiles (bf16)
  static constexpr int ldS = kRows + 4; // score tiles (f32)
  static constexpr int ldP = kRows + 8; // probability tiles (bf16)
  static constexpr int ldO = P + 4;     // accumulator staging (f32)
  static constexpr size_t operand = size_t(kRows) * ld;
  static constexpr size_t scores = 2 * size_t(kRows) * ldS;
  static_assert(size_t(kRows) * ldO <= scores, "the staged accumulators fit the score tiles");
  static constexpr size_t probability = size_t(kRows) * ldP;
  static constexpr size_t bytes(int operands, int probabilities) {
    return operands * operand * sizeof(bf16) + scores * sizeof(float) +
           probabilities * probability * sizeof(bf16) + 4 * kRows * sizeof(float);
  }
};

/// Carves the shared memory of Layout<P>.
template <int P> struct Smem {
  bf16 *operand[6];
  float *s, *dp;
  bf16 *prob[2];
  float *lse[2], *delta[2];
  __device__ Smem(unsigned char *base, int operands, int probabilities) {
    using L = Layout<P>;
    bf16 *b = reinterpret_cast<bf16 *>(base);
    for (int i = 0; i < 6; ++i)
      operand[i] = b + (i < operands ? i : 0) * L::operand;
    s = reinterpret_cast<float *>(b + operands * L::operand);
    dp = s + kRows * L::ldS;
    bf16 *pb = reinterpret_cast<bf16 *>(s + L::scores);
    prob[0] = pb;
    prob[1] = pb + (probabilities > 1 ? L::probability : 0);
    lse[0] = reinterpret_cast<float *>(pb + probabilities * L::probability);
    delta[0] = lse[0] + kRows;
    lse[1] = delta[0] + kRows;
    delta[1] = lse[1] + kRows;
  }
};

/// loadBf16Tile's copy started asynchronously where it can be (`vec`):
/// 16-byte cp.async copies, zeros stored; the caller commits and waits
/// (__pipeline_commit, __pipeline_wait_prior) before a __syncthreads.
template <int P>
__device__ __forceinline__ void loadBf16TileAsync(bf16 *dst, int ld, const bf16 *src, int valid,
                                                  int64_t cols, bool vec) {
  if (!vec) {
    loadBf16Tile<P>(dst, ld, src, kRows, valid, cols, false);
    return;
  }
  constexpr int per = P / 8;
  for (int idx = threadIdx.x; idx < kRows * per; idx += blockDim.x) {
    const int r = idx / per, c = (idx % per) * 8;
    bf16 *to = dst + r * ld + c;
    if (r < valid && c < cols)
      __pipeline_memcpy_async(to, src + r * cols + c, 16);
    else
      *reinterpret_cast<uint4 *>(to) = make_uint4(0, 0, 0, 0);
  }
}

/// The entries of a warp's 16 x 64 score tile that count, without 64-bit
/// arithmetic per entry: entry (r, c) is visible when r < rows, c < cols
/// and, causal, `sign` (c - r) <= reach (reach clamped: |c - r| < 64).
struct Visible {
  int rows, cols, reach, sign;
  __device__ __forceinline__ bool operator()(int r, int c) const {
    return r < rows && c < cols && sign * (c - r) <= reach;
  }
};

__device__ __forceinline__ int clampTo(int64_t v, int64_t lo, int64_t hi) {
  return static_cast<int>(std::min(hi, std::max(lo, v)));
}

/// The warp's 16 rows of a kRows x P operand tile as A fragments.
template <int P>
__device__ __forceinline__ void loadWarpRows(FragA (&frags)[P / 16], const bf16 *tile, int warp) {
#pragma unroll
  for (int kk = 0; kk < P / 16; ++kk)
    wmma::load_matrix_sync(frags[kk], tile + warp * 16 * Layout<P>::ld + kk * 16, Layout<P>::ld);
}

/// out[16 x 64] = A[16 x P] B^T where A's rows start at `a` and B's 64
/// rows at `b` (both row-major, leading dim ld): the warp's scores against
/// a whole tile. `aFrags` holds A's fragments when the caller hoisted them.
template <int P, bool kHoisted>
__device__ __forceinline__ void rowsTimesTileT(const FragA (&aFrags)[P / 16], const bf16 *a,
                                               const bf16 *b, int ld, float *out, int ldOut) {
#pragma unroll
  for (int n = 0; n < kRows / 16; ++n) {
    FragAcc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < P / 16; ++kk) {
      FragBCol bf;
      wmma::load_matrix_sync(bf, b + n * 16 * ld + kk * 16, ld);
      if constexpr (kHoisted) {
        wmma::mma_sync(acc, aFrags[kk], bf, acc);
      } else {
        FragA af;
        wmma::load_matrix_sync(af, a + kk * 16, ld);
        wmma::mma_sync(acc, af, bf, acc);
      }
    }
    wmma::store_matrix_sync(out + n * 16, acc, ldOut, wmma::mem_row_major);
  }
}

/// acc[16 x P] += A[16 x 64] B[64 x P], A the warp's probability rows
/// (leading dim ldA), B a whole operand tile (row-major, leading dim ld).
template <int P>
__device__ __forceinline__ void accumulateRowsTimesTile(FragAcc (&acc)[P / 16], const bf16 *a,
                                                        int ldA, const bf16 *b, int ld) {
  FragA af[kRows / 16];
#pragma unroll
  for (int kk = 0; kk < kRows / 16; ++kk)
    wmma::load_matrix_sync(af[kk], a + kk * 16, ldA);
#pragma unroll
  for (int n = 0; n < P / 16; ++n)
#pragma unroll
    for (int kk = 0; kk < kRows / 16; ++kk) {
      FragBRow bf;
      wmma::load_matrix_sync(bf, b + kk * 16 * ld + n * 16, ld);
      wmma::mma_sync(acc[n], af[kk], bf, acc[n]);
    }
}

/// Writes the warp's 16 x P accumulator rows, times `scale`, to
/// dst[r * cols + c] for r < valid, c < cols, through `stage` (16 rows of
/// Layout<P>::ldO floats that only this warp touches).
template <int P>
__device__ __forceinline__ void storeRows(const FragAcc (&acc)[P / 16], float *stage, bf16 *dst,
                                          int valid, int64_t cols, float scale) {
  constexpr int ldO = Layout<P>::ldO;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < P / 16; ++n)
    wmma::store_matrix_sync(stage + n * 16, acc[n], ldO, wmma::mem_row_major);
  __syncwarp();
  for (int r = 0; r < valid; ++r)
    for (int64_t c = lane; c < cols; c += 32)
      dst[r * cols + c] = __float2bfloat16_rn(scale * stage[r * ldO + c]);
  __syncwarp();
}

/// The keys query tile [q0, q0 + rows) sees: [0, end).
__device__ __forceinline__ int64_t keyEnd(const Geometry &a, int64_t q0, int64_t rows) {
  if (!a.causal)
    return a.sk;
  return std::min(a.sk, std::max<int64_t>(0, q0 + rows + a.offset));
}

/// P and dS (x and y) of one entry from its score, its dP and its query's
/// statistics (lse2 base 2, -inf for a row that sees no key: no gradient).
__device__ __forceinline__ float2 probability(const Geometry &a, bool visible, float score,
                                              float dp, float lse2, float delta) {
  visible = visible && lse2 != -INFINITY;
  const float p = visible ? exp2f(score * a.scaleLog2 - lse2) : 0.0f;
  return make_float2(p, visible ? p * (dp - delta) : 0.0f);
}

/// Pass 1: lse2 and delta of each query row. Two lanes per row, 32 keys
/// each, keep a running max and sum as the forward does.
template <int P>
__global__ void __launch_bounds__(kBlockThreads)
    rowStatsKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                   const bf16 *__restrict__ g, const bf16 *__restrict__ y,
                   float *__restrict__ lseOut, float *__restrict__ deltaOut, Geometry a,
                   int64_t queryTiles, bool vecQK) {
  using L = Layout<P>;
  extern __shared__ __align__(128) unsigned char smem[];
  Smem<P> m(smem, 3, 0);
  bf16 *qs = m.operand[0], *ks0 = m.operand[1], *ks1 = m.operand[2];
  const int64_t head = blockIdx.x / queryTiles, q0 = (blockIdx.x % queryTiles) * kRows;
  const int rows = static_cast<int>(std::min<int64_t>(kRows, a.sq - q0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bf16 *kh = k + head * a.sk * a.d;
  const int64_t end = keyEnd(a, q0, rows);
  loadBf16Tile<P>(qs, L::ld, q + (head * a.sq + q0) * a.d, kRows, rows, a.d, vecQK);
  if (end > 0)
    loadBf16TileAsync<P>(ks0, L::ld, kh, static_cast<int>(std::min<int64_t>(kRows, a.sk)), a.d,
                         vecQK);
  __pipeline_commit();
  __syncthreads();
  constexpr bool kHoist = P <= 64;
  FragA qf[P / 16];
  if constexpr (kHoist)
    loadWarpRows<P>(qf, qs, warp);

  const int row = warp * 16 + lane / 2, half = lane % 2;
  const int64_t query = q0 + row;
  float rowMax = -INFINITY, rowSum = 0.0f;
  int buf = 0;
  for (int64_t k0 = 0; k0 < end; k0 += kRows, buf ^= 1) {
    __pipeline_wait_prior(0);
    __syncthreads(); // the tile is in; every warp is done with the other buffer
    // (Selects, not an indexed array: that would live in local memory.)
    const bf16 *ks = buf ? ks1 : ks0;
    if (k0 + kRows < end)
      loadBf16TileAsync<P>(buf ? ks0 : ks1, L::ld, kh + (k0 + kRows) * a.d,
                           static_cast<int>(std::min<int64_t>(kRows, a.sk - k0 - kRows)), a.d,
                           vecQK);
    __pipeline_commit();
    rowsTimesTileT<P, kHoist>(qf, qs + warp * 16 * L::ld, ks, L::ld,
                              m.s + warp * 16 * L::ldS, L::ldS);
    __syncwarp();
    // The lane's keys k0 + half * 32 + [0, limit) are the ones it sees.
    const int64_t first = k0 + half * 32;
    int limit = row < rows ? clampTo(a.sk - first, 0, 32) : 0;
    if (a.causal)
      limit = std::min(limit, clampTo(query + a.offset - first + 1, 0, 32));
    float s[32];
    float tileMax = -INFINITY;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      s[c] = c < limit ? m.s[row * L::ldS + half * 32 + c] * a.scaleLog2 : -INFINITY;
      tileMax = fmaxf(tileMax, s[c]);
    }
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    const float newMax = fmaxf(rowMax, tileMax);
    float sum = 0.0f;
    if (newMax != -INFINITY) // both lanes of the row agree
#pragma unroll
      for (int c = 0; c < 32; ++c)
        sum += exp2f(s[c] - newMax);
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (newMax != -INFINITY) {
      rowSum = rowSum * exp2f(rowMax - newMax) + sum;
      rowMax = newMax;
    }
    __syncwarp(); // the scores are read before the next tile overwrites them
  }
  if (half == 0 && row < rows)
    lseOut[head * a.sq + query] = rowSum > 0.0f ? rowMax + log2f(rowSum) : -INFINITY;
  // delta: a warp per row, its lanes across the row.
  for (int r = warp * 16; r < warp * 16 + 16 && r < rows; ++r) {
    const int64_t at = (head * a.sq + q0 + r) * a.dv;
    float acc = 0.0f;
    for (int64_t c = lane; c < a.dv; c += 32)
      acc += __bfloat162float(g[at + c]) * __bfloat162float(y[at + c]);
    acc = warpReduce(acc, SumOp{});
    if (lane == 0)
      deltaOut[head * a.sq + q0 + r] = acc;
  }
}

/// Loads the statistics of query rows [q0, q0 + kRows) (past Sq: no key
/// seen) into shared memory.
__device__ __forceinline__ void loadStats(const Geometry &a, int64_t head, int64_t q0,
                                          const float *lseIn, const float *deltaIn, float *lse,
                                          float *delta) {
  if (threadIdx.x < kRows) {
    const int64_t query = q0 + threadIdx.x;
    const bool inside = query < a.sq;
    lse[threadIdx.x] = inside ? lseIn[head * a.sq + query] : -INFINITY;
    delta[threadIdx.x] = inside ? deltaIn[head * a.sq + query] : 0.0f;
  }
}

/// Pass 2: dK and dV of 64 keys. Warp w owns keys [16w, 16w + 16).
template <int P>
__global__ void __launch_bounds__(kBlockThreads)
    keyGradKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                  const bf16 *__restrict__ v, const bf16 *__restrict__ g,
                  const float *__restrict__ lseIn, const float *__restrict__ deltaIn,
                  bf16 *__restrict__ dk, bf16 *__restrict__ dv, Geometry a, int64_t keyTiles,
                  bool vecQK, bool vecV) {
  using L = Layout<P>;
  extern __shared__ __align__(128) unsigned char smem[];
  Smem<P> m(smem, 6, 2);
  bf16 *ks = m.operand[0], *vs = m.operand[1];
  bf16 *qs0 = m.operand[2], *qs1 = m.operand[3], *gs0 = m.operand[4], *gs1 = m.operand[5];
  bf16 *ps = m.prob[0], *dss = m.prob[1];
  // Under a causal mask the first key tiles are seen by the most queries:
  // they start first.
  const int64_t head = blockIdx.x / keyTiles, k0 = (blockIdx.x % keyTiles) * kRows;
  const int keys = static_cast<int>(std::min<int64_t>(kRows, a.sk - k0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The first query that sees key k0 (causal).
  const int64_t first = a.causal ? std::min(a.sq, std::max<int64_t>(0, k0 - a.offset)) : 0;
  const int64_t start = first / kRows * kRows;
  const bf16 *qh = q + head * a.sq * a.d, *gh = g + head * a.sq * a.dv;
  loadBf16Tile<P>(ks, L::ld, k + (head * a.sk + k0) * a.d, kRows, keys, a.d, vecQK);
  loadBf16Tile<P>(vs, L::ld, v + (head * a.sk + k0) * a.dv, kRows, keys, a.dv, vecV);
  if (start < a.sq) {
    const int rows = static_cast<int>(std::min<int64_t>(kRows, a.sq - start));
    loadBf16TileAsync<P>(qs0, L::ld, qh + start * a.d, rows, a.d, vecQK);
    loadBf16TileAsync<P>(gs0, L::ld, gh + start * a.dv, rows, a.dv, vecV);
    loadStats(a, head, start, lseIn, deltaIn, m.lse[0], m.delta[0]);
  }
  __pipeline_commit();
  __syncthreads();
  constexpr bool kHoist = P <= 64;
  FragA kf[P / 16], vf[P / 16];
  if constexpr (kHoist) {
    loadWarpRows<P>(kf, ks, warp);
    loadWarpRows<P>(vf, vs, warp);
  }
  FragAcc dkAcc[P / 16], dvAcc[P / 16];
#pragma unroll
  for (int n = 0; n < P / 16; ++n) {
    wmma::fill_fragment(dkAcc[n], 0.0f);
    wmma::fill_fragment(dvAcc[n], 0.0f);
  }
  float *sw = m.s + warp * 16 * L::ldS, *dpw = m.dp + warp * 16 * L::ldS;
  bf16 *pw = ps + warp * 16 * L::ldP, *dsw = dss + warp * 16 * L::ldP;
  int buf = 0;
  for (int64_t q0 = start; q0 < a.sq; q0 += kRows, buf ^= 1) {
    __pipeline_wait_prior(0);
    __syncthreads(); // the tiles are in; every warp is done with the other buffers
    // (Selects, not indexed arrays: those would live in local memory.)
    const bf16 *qs = buf ? qs1 : qs0, *gs = buf ? gs1 : gs0;
    const float *lse = buf ? m.lse[1] : m.lse[0], *delta = buf ? m.delta[1] : m.delta[0];
    const int64_t next = q0 + kRows;
    if (next < a.sq) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, a.sq - next));
      loadBf16TileAsync<P>(buf ? qs0 : qs1, L::ld, qh + next * a.d, rows, a.d, vecQK);
      loadBf16TileAsync<P>(buf ? gs0 : gs1, L::ld, gh + next * a.dv, rows, a.dv, vecV);
      loadStats(a, head, next, lseIn, deltaIn, buf ? m.lse[0] : m.lse[1],
                buf ? m.delta[0] : m.delta[1]);
    }
    __pipeline_commit();
    // S^T = k q^T and dP^T = v g^T for the warp's 16 keys.
    rowsTimesTileT<P, kHoist>(kf, ks + warp * 16 * L::ld, qs, L::ld, sw, L::ldS);
    rowsTimesTileT<P, kHoist>(vf, vs + warp * 16 * L::ld, gs, L::ld, dpw, L::ldS);
    __syncwarp();
    // Key k0 + 16 w + r sees query q0 + c when r - c <= offset - (k0 + 16 w - q0).
    const Visible visible{clampTo(keys - warp * 16, 0, 16),
                          static_cast<int>(std::min<int64_t>(kRows, a.sq - q0)),
                          a.causal ? clampTo(a.offset - (k0 + warp * 16 - q0), -128, 128) : 128,
                          -1};
    for (int idx = lane; idx < 16 * kRows; idx += 32) {
      const int r = idx / kRows, c = idx % kRows; // key r of the warp, query c
      const float2 pds = probability(a, visible(r, c), sw[r * L::ldS + c], dpw[r * L::ldS + c],
                                     lse[c], delta[c]);
      pw[r * L::ldP + c] = __float2bfloat16_rn(pds.x);
      dsw[r * L::ldP + c] = __float2bfloat16_rn(pds.y);
    }
    __syncwarp();
    accumulateRowsTimesTile<P>(dvAcc, pw, L::ldP, gs, L::ld);
    accumulateRowsTimesTile<P>(dkAcc, dsw, L::ldP, qs, L::ld);
  }
  __syncthreads(); // the staging area overlaps every warp's score rows
  float *stage = m.s + warp * 16 * L::ldO;
  const int valid = clampTo(keys - warp * 16, 0, 16);
  storeRows<P>(dkAcc, stage, dk + (head * a.sk + k0 + warp * 16) * a.d, valid, a.d, a.scale);
  storeRows<P>(dvAcc, stage, dv + (head * a.sk + k0 + warp * 16) * a.dv, valid, a.dv, 1.0f);
}

/// Pass 3: dQ of 64 queries. Warp w owns queries [16w, 16w + 16). The last
/// query tiles (the most keys under a causal mask) start first.
template <int P>
__global__ void __launch_bounds__(kBlockThreads)
    queryGradKernel(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                    const bf16 *__restrict__ v, const bf16 *__restrict__ g,
                    const float *__restrict__ lseIn, const float *__restrict__ deltaIn,
                    bf16 *__restrict__ dq, Geometry a, int64_t queryTiles, bool vecQK, bool vecV) {
  using L = Layout<P>;
  extern __shared__ __align__(128) unsigned char smem[];
  Smem<P> m(smem, 6, 1);
  bf16 *qs = m.operand[0], *gs = m.operand[1];
  bf16 *ks0 = m.operand[2], *ks1 = m.operand[3], *vs0 = m.operand[4], *vs1 = m.operand[5];
  bf16 *dss = m.prob[0];
  const int64_t head = blockIdx.x / queryTiles;
  const int64_t q0 = (queryTiles - 1 - blockIdx.x % queryTiles) * kRows;
  const int rows = static_cast<int>(std::min<int64_t>(kRows, a.sq - q0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bf16 *kh = k + head * a.sk * a.d, *vh = v + head * a.sk * a.dv;
  const int64_t end = keyEnd(a, q0, rows);
  loadBf16Tile<P>(qs, L::ld, q + (head * a.sq + q0) * a.d, kRows, rows, a.d, vecQK);
  loadBf16Tile<P>(gs, L::ld, g + (head * a.sq + q0) * a.dv, kRows, rows, a.dv, vecV);
  loadStats(a, head, q0, lseIn, deltaIn, m.lse[0], m.delta[0]);
  if (end > 0) {
    const int keys = static_cast<int>(std::min<int64_t>(kRows, a.sk));
    loadBf16TileAsync<P>(ks0, L::ld, kh, keys, a.d, vecQK);
    loadBf16TileAsync<P>(vs0, L::ld, vh, keys, a.dv, vecV);
  }
  __pipeline_commit();
  __syncthreads();
  constexpr bool kHoist = P <= 64;
  FragA qf[P / 16], gf[P / 16];
  if constexpr (kHoist) {
    loadWarpRows<P>(qf, qs, warp);
    loadWarpRows<P>(gf, gs, warp);
  }
  FragAcc dqAcc[P / 16];
#pragma unroll
  for (int n = 0; n < P / 16; ++n)
    wmma::fill_fragment(dqAcc[n], 0.0f);
  float *sw = m.s + warp * 16 * L::ldS, *dpw = m.dp + warp * 16 * L::ldS;
  bf16 *dsw = dss + warp * 16 * L::ldP;
  const float *lse = m.lse[0] + warp * 16, *delta = m.delta[0] + warp * 16;
  int buf = 0;
  for (int64_t k0 = 0; k0 < end; k0 += kRows, buf ^= 1) {
    __pipeline_wait_prior(0);
    __syncthreads(); // the tiles are in; every warp is done with the other buffers
    const bf16 *ks = buf ? ks1 : ks0, *vs = buf ? vs1 : vs0;
    const int64_t next = k0 + kRows;
    if (next < end) {
      const int keys = static_cast<int>(std::min<int64_t>(kRows, a.sk - next));
      loadBf16TileAsync<P>(buf ? ks0 : ks1, L::ld, kh + next * a.d, keys, a.d, vecQK);
      loadBf16TileAsync<P>(buf ? vs0 : vs1, L::ld, vh + next * a.dv, keys, a.dv, vecV);
    }
    __pipeline_commit();
    rowsTimesTileT<P, kHoist>(qf, qs + warp * 16 * L::ld, ks, L::ld, sw, L::ldS);
    rowsTimesTileT<P, kHoist>(gf, gs + warp * 16 * L::ld, vs, L::ld, dpw, L::ldS);
    __syncwarp();
    // Query q0 + 16 w + r sees key k0 + c when c - r <= offset - (k0 - q0 - 16 w).
    const Visible visible{clampTo(rows - warp * 16, 0, 16),
                          static_cast<int>(std::min<int64_t>(kRows, a.sk - k0)),
                          a.causal ? clampTo(a.offset - (k0 - q0 - warp * 16), -128, 128) : 128,
                          1};
    for (int idx = lane; idx < 16 * kRows; idx += 32) {
      const int r = idx / kRows, c = idx % kRows; // query r of the warp, key c
      const float2 pds = probability(a, visible(r, c), sw[r * L::ldS + c], dpw[r * L::ldS + c],
                                     lse[r], delta[r]);
      dsw[r * L::ldP + c] = __float2bfloat16_rn(pds.y);
    }
    __syncwarp();
    accumulateRowsTimesTile<P>(dqAcc, dsw, L::ldP, ks, L::ld);
  }
  __syncthreads(); // the staging area overlaps every warp's score rows
  float *stage = m.s + warp * 16 * L::ldO;
  const int valid = clampTo(rows - warp * 16, 0, 16);
  storeRows<P>(dqAcc, stage, dq + (head * a.sq + q0 + warp * 16) * a.d, valid, a.d, a.scale);
}

template <int P>
Status make(const KernelSignature &sig, DeviceContext &ctx, const Geometry &a, KernelFn *fn) {
  using L = Layout<P>;
  const size_t stats = L::bytes(3, 0), key = L::bytes(6, 2), query = L::bytes(6, 1);
  int optin = 0;
  CLEAVE_CUDA_TRY(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device));
  if (key > static_cast<size_t>(optin))
    return CLEAVE_ERROR(sig.kernel, ": head dims ", a.d, " and ", a.dv, " need ", key,
                        " bytes of shared memory per block, the GPU has ", optin);
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(rowStatsKernel<P>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(stats)));
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(keyGradKernel<P>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(key)));
  CLEAVE_CUDA_TRY(cudaFuncSetAttribute(queryGradKernel<P>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(query)));
  const int64_t queryTiles = (a.sq + kRows - 1) / kRows, keyTiles = (a.sk + kRows - 1) / kRows;
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (a.heads == 0)
      return {};
    const bf16 *g = static_cast<const bf16 *>(call.inputs[0]);
    const bf16 *q = static_cast<const bf16 *>(call.inputs[1]);
    const bf16 *k = static_cast<const bf16 *>(call.inputs[2]);
    const bf16 *v = static_cast<const bf16 *>(call.inputs[3]);
    const bf16 *y = static_cast<const bf16 *>(call.inputs[4]);
    const bool vecQK = a.d % 8 == 0 && aligned(q, 16) && aligned(k, 16);
    const bool vecV = a.dv % 8 == 0 && aligned(v, 16) && aligned(g, 16);
    // The scratch: heads * sq log-sum-exps (base 2 on this path), then as
    // many rowsums (attentionBackwardScratchBytes).
    float *lse = static_cast<float *>(call.scratch);
    float *delta = lse + a.heads * a.sq;
    if (queryTiles > 0) {
      const unsigned blocks = static_cast<unsigned>(a.heads * queryTiles);
      rowStatsKernel<P><<<blocks, kBlockThreads, stats, c->stream>>>(q, k, g, y, lse, delta, a,
                                                                 queryTiles, vecQK);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
      queryGradKernel<P><<<blocks, kBlockThreads, query, c->stream>>>(
          q, k, v, g, lse, delta, static_cast<bf16 *>(call.outputs[0]), a, queryTiles, vecQK,
          vecV);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    }
    if (keyTiles > 0) {
      keyGradKernel<P><<<static_cast<unsigned>(a.heads * keyTiles), kBlockThreads, key, c->stream>>>(
          q, k, v, g, lse, delta, static_cast<bf16 *>(call.outputs[1]),
          static_cast<bf16 *>(call.outputs[2]), a, keyTiles, vecQK, vecV);
      CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    }
    return {};
  };
  return {};
}

} // namespace

Status makeAttentionBackwardWmma(const KernelSignature &sig, DeviceContext &ctx,
                                 const AttentionParams &p, KernelFn *fn) {
  Geometry a;
  a.heads = p.heads;
  a.sq = p.queries;
  a.sk = p.keys;
  a.d = p.headDim;
  a.dv = p.valueDim;
  a.offset = p.keys - p.queries;
  a.causal = p.causal;
  a.scale = static_cast<float>(p.scale);
  a.scaleLog2 = a.scale * kLog2e;
  const int64_t tiles = (std::max(a.sq, a.sk) + kRows - 1) / kRows;
  if (a.heads * tiles > std::numeric_limits<int32_t>::max())
    return CLEAVE_ERROR(sig.kernel, ": ", a.heads, " heads of ", std::max(a.sq, a.sk),
                        " positions are more tiles than a grid holds");
  if (std::max(a.d, a.dv) <= 64)
    return make<64>(sig, ctx, a, fn);
  return make<128>(sig, ctx, a, fn);
}

} // namespace cleave::runtime::cuda
