//===- KernelParams.h - Instruction parsing shared by every backend -------===//
//
// The CPU and CUDA builders of an op must accept the same instructions and
// reject the rest with the same words (the conformance suite runs on both).
// So each op's checks and attribute parsing live here once, as in
// Conv2dContract.h: a backend passes its name (for dtype messages) and the
// dtypes it has kernels for, and gets the op's parameters back; what stays in
// the backend is how it computes.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/KernelContract.h"

#include <utility>
#include <vector>

namespace cleave::runtime {

//===----------------------------------------------------------------------===//
// Pooling (max_pool2d, avg_pool2d, adaptive_avg_pool2d), NCHW.
//===----------------------------------------------------------------------===//

/// A pooling window over N*C planes. Plain data: the CUDA kernels take it by
/// value.
struct PoolParams {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/// The window attributes of a pooling over the 4-D [N, C, H, W] tensor `x`
/// (kernel, stride, padding, ceil_mode, and dilation when `hasDilation`,
/// else 1), checked, and the pooled size OH, OW they give: every field of
/// *out. The forward poolings and their backward kernels read them alike.
Status parsePoolWindow(const KernelSignature &sig, const TensorDesc &x, bool hasDilation,
                       PoolParams *out);

/// max_pool2d: kernel, stride, padding, dilation, ceil_mode.
Status parseMaxPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out);

/// avg_pool2d: kernel, stride, padding, ceil_mode (no dilation) and
/// count_include_pad.
Status parseAvgPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out, bool *countIncludePad);

struct AdaptivePoolParams {
  int64_t planes, h, w, oh, ow;
};

/// adaptive_avg_pool2d: output_size; no plane may be empty.
Status parseAdaptiveAvgPool2d(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, AdaptivePoolParams *out);

//===----------------------------------------------------------------------===//
// Reductions (reduce_sum, reduce_mean, reduce_max, reduce_prod, the index
// reductions) and scans (cumsum, cumprod).
//===----------------------------------------------------------------------===//

/// A run of adjacent input dims that are all reduced or all kept, size-1
/// dims dropped: [kept, reduced] is a row reduction, [reduced, kept] a column
/// one.
struct ReduceGroup {
  int64_t size;
  bool reduced;
};

struct ReduceParams {
  std::vector<int64_t> dims;
  bool keepdim = false;
  std::vector<bool> reduced; // per input dim
  int64_t outCount = 0, reducedCount = 1;
  std::vector<ReduceGroup> groups;
};

/// dims (each once, in range) and keepdim; `needsElements` rejects an empty
/// reduction with a non-empty output (reduce_max has no identity).
Status parseReduction(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, bool needsElements, ReduceParams *out);

/// reduce_max_index / reduce_min_index along `dim`: the input viewed as
/// [outer, size, inner]; outputs the values (the input's dtype) and i64
/// indices, of the input's shape without `dim` (size 1 with keepdim). The
/// dim must hold an element.
struct IndexReduceParams {
  int64_t dim = 0, outer = 0, size = 0, inner = 0;
  bool keepdim = false;
};
Status parseIndexReduction(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> dtypes, IndexReduceParams *out);

/// cumsum / cumprod along `dim` (from the end with `reverse`): the input
/// viewed as [outer, size, inner], the output the input's shape and dtype.
struct ScanParams {
  int64_t outer = 0, size = 0, inner = 0;
  bool reverse = false;
};
Status parseScan(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes, ScanParams *out);

/// sort / cummax / cummin along `dim`: the input viewed as [outer, size,
/// inner]; outputs the values (the input's shape and dtype) and i64 indices
/// of the same shape. `reverse` holds sort's `descending`.
Status parseValuesAndIndicesScan(const KernelSignature &sig, const char *backend,
                                 std::initializer_list<DType> dtypes, ScanParams *out);

//===----------------------------------------------------------------------===//
// Linear algebra on batches of small matrices (lu_factor,
// lu_pivots_to_permutation, cholesky, triangular_solve): the leading dims
// are a batch, each matrix is row-major and contiguous.
//===----------------------------------------------------------------------===//

/// lu_factor: `batch` [m, n] matrices; outputs lu (the input's shape and
/// dtype), pivots [batch..., min(m, n)] i32 and info [batch...] i32.
struct LuFactorParams {
  int64_t batch = 0, m = 0, n = 0;
};
Status parseLuFactor(const KernelSignature &sig, const char *backend,
                     std::initializer_list<DType> dtypes, LuFactorParams *out);

/// lu_pivots_to_permutation: `batch` rows of `k` 1-based pivots (i32 or
/// i64) to `batch` rows of `rows` i64 row indices.
struct PivotsParams {
  int64_t batch = 0, k = 0, rows = 0;
  DType pivotType = DType::I32;
};
Status parsePivotsToPermutation(const KernelSignature &sig, const char *backend,
                                PivotsParams *out);

/// cholesky: `batch` [n, n] matrices; outputs the factor (input's shape and
/// dtype) and info [batch...] i32.
struct CholeskyParams {
  int64_t batch = 0, n = 0;
  bool upper = false;
};
Status parseCholesky(const KernelSignature &sig, const char *backend,
                     std::initializer_list<DType> dtypes, CholeskyParams *out);

/// triangular_solve: a [..., n, n] and b [..., n, k] with broadcast batch
/// dims; for each of the result's `batch` matrices, the matrix index of a
/// and of b it reads (aIndex[i], bIndex[i]).
struct TriangularSolveParams {
  int64_t batch = 0, n = 0, k = 0;
  bool upper = false, transpose = false, unitriangular = false;
  std::vector<int64_t> aIndex, bIndex;
};
Status parseTriangularSolve(const KernelSignature &sig, const char *backend,
                            std::initializer_list<DType> dtypes, TriangularSolveParams *out);

//===----------------------------------------------------------------------===//
// Normalization (layer_norm, batch_norm, softmax, log_softmax).
//===----------------------------------------------------------------------===//

/// layer_norm over the trailing normalized_shape: `rows` rows of `d`.
struct LayerNormParams {
  int64_t rows = 0, d = 0;
  float eps = 0;
};
Status parseLayerNorm(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, LayerNormParams *out);

/// batch_norm (inference) over [N, C, ...]: `planes` = N*C planes of `inner`.
struct BatchNormParams {
  int64_t channels = 0, inner = 0, planes = 0;
  float eps = 0;
};
Status parseBatchNorm(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, BatchNormParams *out);

/// softmax / log_softmax along `dim`: [outer, d, inner].
struct SoftmaxParams {
  int64_t outer = 0, d = 0, inner = 0;
};
Status parseSoftmax(const KernelSignature &sig, const char *backend,
                    std::initializer_list<DType> dtypes, SoftmaxParams *out);

//===----------------------------------------------------------------------===//
// Contractions (matmul, linear).
//===----------------------------------------------------------------------===//

/// matmul [..., m, k] x [..., k, n] with numpy-broadcast batch dims.
struct MatmulParams {
  int64_t m = 0, k = 0, n = 0;
  Shape aBatch, bBatch, batch; // lhs's, rhs's and the output's batch dims
  int64_t batches = 0;         // numElements(batch)
};
Status parseMatmul(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, MatmulParams *out);

/// Per output batch, the element offsets of its lhs and rhs matrices: how a
/// partially broadcast matmul (2x1 by 1x3 batches) runs one GEMM per batch.
std::vector<std::pair<int64_t, int64_t>> matmulBatchOffsets(const MatmulParams &p);

/// linear: input [..., k] times the transpose of weight [n, k], optional
/// bias [n]; `m` rows.
struct LinearParams {
  int64_t m = 0, k = 0, n = 0;
  bool hasBias = false;
};
Status parseLinear(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, LinearParams *out);

//===----------------------------------------------------------------------===//
// Data movement (permute, broadcast_to, slice, concat). These copy elements
// of any dtype, so they take no dtype list.
//===----------------------------------------------------------------------===//

/// reshape: same dtype and element count.
Status checkReshape(const KernelSignature &sig);

/// permute: `dims` is a permutation of the input's dims.
struct PermuteParams {
  std::vector<int64_t> dims;
  Shape outShape;
};
Status parsePermute(const KernelSignature &sig, PermuteParams *out);

/// broadcast_to: the output is the input broadcast, same dtype.
Status checkBroadcastTo(const KernelSignature &sig);

/// slice [start:end:step] of dim `dim` (of `size`): the input viewed as
/// [outer, size, inner], `count` elements taken.
struct SliceParams {
  int64_t dim = 0, start = 0, end = 0, step = 1;
  int64_t size = 0, count = 0, outer = 0, inner = 0;
};
Status parseSlice(const KernelSignature &sig, SliceParams *out);

/// slice's attributes checked against `x` (the input; slice_backward's
/// result), whose name `xName` ("" or "output ") the messages put before
/// its shape: every field of *out.
Status parseSliceRange(const KernelSignature &sig, const TensorDesc &x, const char *xName,
                       SliceParams *out);

/// concat along `dim`: every input viewed as [outer, its dim, inner].
struct ConcatParams {
  int64_t dim = 0, outer = 0, inner = 0;
  Shape outShape;
};
Status parseConcat(const KernelSignature &sig, ConcatParams *out);

/// embedding: a 2-D table [rows, dim] of `dtypes` looked up by i64/i32
/// indices; a shard of a vocabulary split over ranks has a row_offset.
struct EmbeddingParams {
  int64_t count = 0, rows = 0, dim = 0;
  bool wide = false; // i64 indices
  bool sharded = false;
  int64_t offset = 0;
};
Status parseEmbedding(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, EmbeddingParams *out);

//===----------------------------------------------------------------------===//
// Indexing along one dim (gather, scatter).
//===----------------------------------------------------------------------===//

#if defined(__CUDACC__)
#define CLEAVE_HOST_DEVICE __host__ __device__
#else
#define CLEAVE_HOST_DEVICE
#endif

/// A float -> integer cast: truncates toward zero; NaN and values outside
/// the integer's range give its minimum (x86's "integer indefinite", what
/// PyTorch's CPU casts give). C++ leaves these undefined and CUDA's
/// conversions give 0 for NaN and saturate, so every backend says it here.
template <typename Int, typename Float> CLEAVE_HOST_DEVICE inline Int truncateToInteger(Float v) {
  constexpr Float lowest = -static_cast<Float>(1ull << (sizeof(Int) * 8 - 1)); // exact
  if (!(v >= lowest && v < -lowest))
    return static_cast<Int>(1ull << (sizeof(Int) * 8 - 1)); // the minimum, two's complement
  return static_cast<Int>(v);
}

constexpr int kMaxIndexRank = 8;

/// An index tensor of the input's rank that picks positions along `dim`.
/// Its positions group into `lines`: the index entries that differ only in
/// `dim` (`k` of them, `indexStride` apart). Every other dim of an entry is
/// its own, so two lines never touch the same input (or output) element.
/// Plain data: the CUDA kernels take it by value. A 0-d input is one of
/// size [1].
struct IndexAlongDim {
  int rank = 1, dim = 0;
  int64_t indexShape[kMaxIndexRank] = {};
  int64_t inputShape[kMaxIndexRank] = {};
  int64_t size = 0;         // the input's size along dim
  int64_t k = 0;            // index entries per line
  int64_t lines = 0;        // numel(index) / k
  int64_t indexStride = 1;  // between entries of a line, in the index
  int64_t inputStride = 1;  // between positions along dim, in the input
  bool wide = false;        // i64 (not i32) indices

  /// The offsets of a line's first entry in the index and of its position 0
  /// along dim in the input.
  CLEAVE_HOST_DEVICE void lineStart(int64_t line, int64_t *index, int64_t *input) const {
    int64_t rest = line, idx = 0, in = 0, idxStride = 1, inStride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (d != dim) {
        int64_t c = rest % indexShape[d];
        rest /= indexShape[d];
        idx += c * idxStride;
        in += c * inStride;
      }
      idxStride *= indexShape[d];
      inStride *= inputShape[d];
    }
    *index = idx;
    *input = in;
  }
};

/// gather(input, index) {dim}: input of `dtypes`, index i64/i32 of its rank,
/// no larger outside dim; the output has the index's shape.
Status parseGather(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, IndexAlongDim *out);

/// How scatter combines (cleave.scatter's `reduce`).
enum class ScatterReduceKind { None, Sum, Prod, Mean, Amax, Amin };

/// scatter(input, index, src) {dim, reduce, include_self}: src of the
/// index's shape and the input's dtype; the output is the input's type.
Status parseScatter(const KernelSignature &sig, const char *backend,
                    std::initializer_list<DType> dtypes, IndexAlongDim *out,
                    ScatterReduceKind *reduce, bool *includeSelf);

//===----------------------------------------------------------------------===//
// Elementwise (unary, binary, where, cast, tril/triu).
//===----------------------------------------------------------------------===//

/// A one-input op whose output is the input's shape and dtype.
Status checkUnary(const KernelSignature &sig, const char *backend,
                  std::initializer_list<DType> dtypes);

/// A two-operand broadcasting op of one of `dtypes`, its result `resultType`
/// (the operands' when nullopt); returns the broadcast layout.
Status parseBinary(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, std::optional<DType> resultType,
                   BroadcastLayout *layout);

/// where(condition, on_true, on_false), on_true of `dtypes`; returns the
/// broadcast layout of the three operands.
Status parseWhere(const KernelSignature &sig, const char *backend,
                  std::initializer_list<DType> dtypes, BroadcastLayout *layout);

/// cast between any two of `dtypes`, same shape.
Status checkCast(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes);

/// tril / triu over the last two dims [rows, cols], any dtype.
struct TriangleParams {
  int64_t rows = 0, cols = 0, diagonal = 0;
};
Status parseTriangle(const KernelSignature &sig, TriangleParams *out);

//===----------------------------------------------------------------------===//
// attention (docs/plan-format.md)
//===----------------------------------------------------------------------===//

/// q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] -> [B, H, Sq, Dv].
struct AttentionParams {
  int64_t heads = 0; // B * H
  int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  bool causal = false;
  /// 1/sqrt(D) (PyTorch's default) when the plan gives none.
  double scale = 1.0;
};
Status parseAttention(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, AttentionParams *out);
/// The sizes of q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] (already
/// checked) and the `causal` and `scale` attributes: what the attention
/// forward and its backward both read.
Status readAttention(const KernelSignature &sig, const Shape &q, const Shape &k, const Shape &v,
                     AttentionParams *out);

} // namespace cleave::runtime
