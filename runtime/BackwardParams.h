//===- BackwardParams.h - Training kernels' parsing, shared by backends ---===//
//
// The load-time checks of the gradients of the contractions, poolings,
// attention, embedding and slice (docs/plan-format.md, "Training kernels"),
// once for every backend as KernelParams.h does for the forward ops: a
// builder passes its backend's name (for dtype messages) and the dtypes it
// has kernels for, and gets plain parameters back. Every float operand of
// an instruction has the same dtype, one of `dtypes`: the CPU's kernels are
// written for f32 and see bf16 widened by the backend; the GPU's read bf16
// themselves (mixed precision plans compute their backward in bf16) and
// accumulate in fp32. The scratch contracts do not depend on the dtype.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Conv2dContract.h"
#include "runtime/KernelParams.h"

namespace cleave::runtime {

/// linear_backward_weight(grad [..., n], input [..., k]) -> [n, k]: the sum
/// over the `rows` leading positions of grad^T input.
struct LinearBackwardWeightParams {
  int64_t rows = 0, n = 0, k = 0;
  DType dtype = DType::F32; // of grad, input and the output
};
Status parseLinearBackwardWeight(const KernelSignature &sig, const char *backend,
                                 std::initializer_list<DType> dtypes,
                                 LinearBackwardWeightParams *out);

/// conv2d_backward_input(grad, weight) -> the input's gradient, and
/// conv2d_backward_weight(grad, input) -> the weight's gradient (`forInput`
/// picks which): the forward's geometry in *out (hasBias false), with the
/// scratch the plan reserved checked against the CPU's column matrix
/// (conv2dBackward*ScratchBytes). Both overwrite their output.
Status parseConv2dBackward(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> dtypes, bool forInput, Conv2dParams *out);

/// max_pool2d_backward(grad [N, C, OH, OW], input [N, C, H, W]) -> [N, C,
/// H, W]: the forward's window (kernel, stride, padding, dilation,
/// ceil_mode); grad must be its pooled shape.
Status parseMaxPool2dBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, PoolParams *out);

/// avg_pool2d_backward(grad) -> [N, C, H, W]: the window without dilation
/// and count_include_pad (default true).
Status parseAvgPool2dBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, PoolParams *out,
                              bool *countIncludePad);

/// adaptive_avg_pool2d_backward(grad [N, C, OH, OW]) -> [N, C, H, W]; no
/// plane may be empty when there is something to spread.
Status parseAdaptiveAvgPool2dBackward(const KernelSignature &sig, const char *backend,
                                      std::initializer_list<DType> dtypes, AdaptivePoolParams *out);

/// attention_backward(grad, q, k, v, output) -> grad_q, grad_k, grad_v:
/// attention's shapes and attributes (causal, scale); the scratch holds two
/// f32 per query row (attentionBackwardScratchBytes): the log-sum-exp of
/// its scaled scores, then rowsum(grad * output), heads * queries of each.
Status parseAttentionBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, AttentionParams *out);

/// embedding_backward(grad [indices..., dim], indices) -> [rows, dim]: the
/// sum of grad's rows into the table rows they looked up, padding_idx
/// skipped; with row_offset the table is a vocabulary shard and indices
/// outside it belong to other ranks.
struct EmbeddingBackwardParams {
  int64_t count = 0, rows = 0, dim = 0;
  bool wide = false; // i64 indices
  bool sharded = false;
  int64_t offset = 0;
  bool hasPadding = false;
  int64_t padding = 0;
  DType dtype = DType::F32; // of grad and the output
};
Status parseEmbeddingBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, EmbeddingBackwardParams *out);

/// slice_backward(grad) -> the sliced tensor's shape, grad in place of the
/// slice and zeros elsewhere; any dtype.
Status parseSliceBackward(const KernelSignature &sig, SliceParams *out);

} // namespace cleave::runtime
