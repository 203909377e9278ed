//===- Attention.cpp - fused scaled dot-product attention -----------------===//
//
// `attention`: out = softmax(scale * q k^T, masked) v per (batch, head), with
// q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] and out [B, H, Sq, Dv]
// (contract: docs/plan-format.md). The scores are never stored whole: each
// task takes a block of queries and walks the keys block by block with an
// online softmax (a running maximum and sum per query, the partial output
// rescaled when the maximum grows), so a thread holds O(block) floats
// whatever the sequence length. With `causal`, query i sees keys
// j <= i + (Sk - Sq), and key blocks wholly past a query block's last
// visible key are skipped: about half the work of the dense product.
//
// Tasks (batch, head, query block) run in parallel with dynamic scheduling,
// since causal blocks near the end of the sequence carry more keys. No GEMM
// library is called inside the region (Common.h); the block products are
// plain loops over a transposed key block, vectorized by the compiler.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"
#include "runtime/cpu/VecMath.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cleave::runtime::cpu {
namespace {

constexpr int64_t kQueryBlock = 32;
constexpr int64_t kKeyBlock = 64;

struct AttentionShape {
  int64_t heads = 0; // batch * heads
  int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  bool causal = false;
  float scale = 1.0f;
};

/// One thread's blocks: q rows scaled, a key block transposed, the scores,
/// the running output and statistics of each query row.
struct Workspace {
  std::vector<float> q, kT, scores, acc, rowMax, rowSum;
  explicit Workspace(const AttentionShape &s)
      : q(kQueryBlock * s.headDim), kT(s.headDim * kKeyBlock), scores(kQueryBlock * kKeyBlock),
        acc(kQueryBlock * s.valueDim), rowMax(kQueryBlock), rowSum(kQueryBlock) {}
};

/// Eight floats as one value (GCC vector extension): the compiler keeps it
/// in a register of each clone's ISA, so the block loops below vectorize
/// along keys and value columns as written.
typedef float Vec8 __attribute__((vector_size(32)));
constexpr int64_t kVec = 8;
static_assert(kKeyBlock % (2 * kVec) == 0, "key blocks are whole pairs of vectors");

// The helpers are inlined into the clones, so the vector ABI of a non-AVX
// caller (GCC's -Wpsabi note) never applies.
#pragma GCC diagnostic ignored "-Wpsabi"
inline Vec8 load(const float *p) {
  Vec8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float *p, Vec8 v) { std::memcpy(p, &v, sizeof v); }

/// scores[i][j] = sum_d q[i][d] * kT[d][j] for rows < rows and columns <
/// cols rounded up to 16 (rows of kKeyBlock floats; the extra columns hold
/// junk nobody reads): 4 rows by 16 keys accumulate in registers over d.
CLEAVE_CLONES
void blockScores(const float *q, const float *kT, float *scores, int64_t rows, int64_t cols,
                 int64_t headDim) {
  for (int64_t j = 0; j < cols; j += 2 * kVec) {
    int64_t i = 0;
    for (; i + 4 <= rows; i += 4) {
      Vec8 acc[4][2] = {};
      for (int64_t d = 0; d < headDim; ++d) {
        const Vec8 k0 = load(kT + d * kKeyBlock + j), k1 = load(kT + d * kKeyBlock + j + kVec);
        for (int r = 0; r < 4; ++r) {
          const float a = q[(i + r) * headDim + d];
          acc[r][0] += a * k0;
          acc[r][1] += a * k1;
        }
      }
      for (int r = 0; r < 4; ++r) {
        store(scores + (i + r) * kKeyBlock + j, acc[r][0]);
        store(scores + (i + r) * kKeyBlock + j + kVec, acc[r][1]);
      }
    }
    for (; i < rows; ++i) {
      Vec8 acc0 = {}, acc1 = {};
      for (int64_t d = 0; d < headDim; ++d) {
        const float a = q[i * headDim + d];
        acc0 += a * load(kT + d * kKeyBlock + j);
        acc1 += a * load(kT + d * kKeyBlock + j + kVec);
      }
      store(scores + i * kKeyBlock + j, acc0);
      store(scores + i * kKeyBlock + j + kVec, acc1);
    }
  }
}

/// Folds one key block into a query row's online softmax: the
/// probabilities of its `cols` scores against the new running maximum, the
/// rescaled sum, and acc = acc * correction + sum_j p_j v_j.
CLEAVE_CLONES
void accumulateRow(float *s, int64_t cols, const float *v, int64_t valueDim, float &rowMax,
                   float &rowSum, float *acc) {
  const float minusInf = -std::numeric_limits<float>::infinity();
  const int64_t whole = cols / kVec * kVec;
  Vec8 lanes = {minusInf, minusInf, minusInf, minusInf, minusInf, minusInf, minusInf, minusInf};
  for (int64_t j = 0; j < whole; j += kVec) {
    const Vec8 x = load(s + j);
    lanes = x > lanes ? x : lanes;
  }
  float blockMax = minusInf;
  for (int64_t l = 0; l < kVec; ++l)
    blockMax = lanes[l] > blockMax ? lanes[l] : blockMax;
  for (int64_t j = whole; j < cols; ++j)
    blockMax = s[j] > blockMax ? s[j] : blockMax;
  const float newMax = blockMax > rowMax ? blockMax : rowMax;
  // Every score so far is -inf: nothing to add (and exp(-inf - -inf)
  // would be NaN). A row that stays so ends as 0 / 0 = NaN, as softmax does.
  if (newMax == minusInf)
    return;
  const float correction = vmath::exp(rowMax - newMax); // 0 on the first block
  for (int64_t j = 0; j < cols; ++j)
    s[j] = vmath::exp(s[j] - newMax);
  Vec8 sums = {};
  for (int64_t j = 0; j < whole; j += kVec)
    sums += load(s + j);
  float sum = 0.0f;
  for (int64_t l = 0; l < kVec; ++l)
    sum += sums[l];
  for (int64_t j = whole; j < cols; ++j)
    sum += s[j];
  rowSum = rowSum * correction + sum;
  rowMax = newMax;
  int64_t c = 0;
  for (; c + kVec <= valueDim; c += kVec) {
    Vec8 a = load(acc + c) * correction;
    for (int64_t j = 0; j < cols; ++j)
      a += s[j] * load(v + j * valueDim + c);
    store(acc + c, a);
  }
  for (; c < valueDim; ++c) {
    float a = acc[c] * correction;
    for (int64_t j = 0; j < cols; ++j)
      a += s[j] * v[j * valueDim + c];
    acc[c] = a;
  }
}

/// Queries [first, first + rows) of one (batch, head).
void attendBlock(const AttentionShape &s, const float *q, const float *k, const float *v,
                 float *out, int64_t first, int64_t rows, Workspace &w) {
  const int64_t d = s.headDim, dv = s.valueDim;
  // Query i sees keys j <= i + offset.
  const int64_t offset = s.keys - s.queries;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < d; ++c)
      w.q[i * d + c] = q[(first + i) * d + c] * s.scale;
  std::fill(w.acc.begin(), w.acc.begin() + rows * dv, 0.0f);
  std::fill(w.rowMax.begin(), w.rowMax.end(), -std::numeric_limits<float>::infinity());
  std::fill(w.rowSum.begin(), w.rowSum.end(), 0.0f);
  const int64_t keyEnd =
      s.causal ? std::clamp<int64_t>(first + rows + offset, 0, s.keys) : s.keys;
  for (int64_t key = 0; key < keyEnd; key += kKeyBlock) {
    const int64_t cols = std::min(kKeyBlock, keyEnd - key);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t c = 0; c < d; ++c)
        w.kT[c * kKeyBlock + j] = k[(key + j) * d + c];
    blockScores(w.q.data(), w.kT.data(), w.scores.data(), rows, cols, d);
    for (int64_t i = 0; i < rows; ++i) {
      float *scores = w.scores.data() + i * kKeyBlock;
      int64_t visible = cols;
      if (s.causal) // keys past the diagonal are hidden: only a prefix of the block counts
        visible = std::clamp<int64_t>(first + i + offset + 1 - key, 0, cols);
      if (visible == 0)
        continue;
      accumulateRow(scores, visible, v + key * dv, dv, w.rowMax[i], w.rowSum[i],
                    w.acc.data() + i * dv);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float *o = out + (first + i) * dv;
    const float *a = w.acc.data() + i * dv;
    // A row that sees no key (no keys, or causal with Sk < Sq) is zeros, as
    // on every backend; one whose every score is -inf is NaN, as softmax
    // gives.
    const bool seesNoKey = s.keys == 0 || (s.causal && first + i + offset < 0);
    const float inverse = seesNoKey ? 0.0f
                          : w.rowSum[i] == 0.0f ? std::numeric_limits<float>::quiet_NaN()
                                                : 1.0f / w.rowSum[i];
    for (int64_t c = 0; c < dv; ++c)
      o[c] = seesNoKey ? 0.0f : a[c] * inverse;
  }
}

void attention(const AttentionShape &s, const float *q, const float *k, const float *v,
               float *out) {
  const int64_t blocks = (s.queries + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = s.heads * blocks;
  if (tasks == 0)
    return;
  const double work = static_cast<double>(s.heads) * s.queries * s.keys * (s.headDim + s.valueDim);
  int threads = 1;
  if (work >= kParallelGrain && tasks > 1 && !omp_in_parallel())
    threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), tasks));
#pragma omp parallel num_threads(threads)
  {
    Workspace w(s);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      // Causal blocks late in the sequence are the longest: start with them.
      const int64_t reversed = tasks - 1 - task;
      const int64_t head = reversed % s.heads, block = reversed / s.heads;
      const int64_t first = block * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, s.queries - first);
      attendBlock(s, q + head * s.queries * s.headDim, k + head * s.keys * s.headDim,
                  v + head * s.keys * s.valueDim, out + head * s.queries * s.valueDim, first, rows,
                  w);
    }
  }
}

Status buildAttention(const KernelSignature &sig, KernelFn *fn) {
  AttentionParams p;
  CLEAVE_RETURN_IF_ERROR(parseAttention(sig, "cpu", {DType::F32}, &p));
  AttentionShape s;
  s.causal = p.causal;
  s.scale = static_cast<float>(p.scale);
  s.heads = p.heads;
  s.queries = p.queries;
  s.keys = p.keys;
  s.headDim = p.headDim;
  s.valueDim = p.valueDim;
  *fn = [s](const KernelCall &call) -> Status {
    attention(s, static_cast<const float *>(call.inputs[0]),
              static_cast<const float *>(call.inputs[1]),
              static_cast<const float *>(call.inputs[2]), static_cast<float *>(call.outputs[0]));
    return {};
  };
  return {};
}

} // namespace

void registerAttentionKernels(KernelTable &table) { table["attention"] = buildAttention; }

} // namespace cleave::runtime::cpu
