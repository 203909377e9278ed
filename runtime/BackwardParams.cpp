//===- BackwardParams.cpp - Training kernels' parsing, shared by backends -===//

#include "runtime/BackwardParams.h"
#include "runtime/cpu/ConvScratch.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace cleave::runtime {
namespace {

Status requireRank(const KernelSignature &sig, const char *name, const TensorDesc &desc,
                   int64_t rank, const char *layout) {
  if (desc.rank() != rank)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " must be ", rank, "-D ", layout, ", got ",
                        describe(desc.shape, desc.dtype));
  return {};
}

/// The output (index `i`) must be `expected`.
Status requireOutput(const KernelSignature &sig, size_t i, const char *name,
                     const TensorDesc &expected, const std::string &how) {
  const TensorDesc &out = sig.outputs[i];
  if (out != expected)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " is ", describe(out.shape, out.dtype),
                        ", expected ", describe(expected.shape, expected.dtype), " (", how, ")");
  return {};
}

/// grad [N, C, OH, OW] and the result [N, C, H, W] (the forward input's
/// shape) with the window attributes; OH and OW must be what the forward
/// computes from H, W.
Status parseWindowBackward(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> dtypes, bool hasDilation, PoolParams *g) {
  const TensorDesc &grad = *sig.inputs[0];
  const TensorDesc &x = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "grad", grad, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", grad, "output", x));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "grad", grad, 4, "[N, C, OH, OW]"));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "output", x, 4, "[N, C, H, W]"));
  CLEAVE_RETURN_IF_ERROR(parsePoolWindow(sig, x, hasDilation, g));
  const Shape expected = {x.shape[0], x.shape[1], g->oh, g->ow};
  if (grad.shape != expected)
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(grad.shape, grad.dtype),
                        " is not the pooled shape of output ", describe(x.shape, x.dtype),
                        ", expected ", describe(expected, grad.dtype),
                        " (from the window attributes)");
  return {};
}

} // namespace

//===----------------------------------------------------------------------===//
// linear_backward_weight
//===----------------------------------------------------------------------===//

Status parseLinearBackwardWeight(const KernelSignature &sig, const char *backend,
                                 std::initializer_list<DType> dtypes,
                                 LinearBackwardWeightParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "input"));
  const TensorDesc &g = *sig.inputs[0], &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "grad", g, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", g, "input", x));
  if (g.rank() < 1 || g.rank() != x.rank() ||
      !std::equal(g.shape.begin(), g.shape.end() - 1, x.shape.begin()))
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(g.shape, g.dtype), " and input ",
                        describe(x.shape, x.dtype),
                        " must have the same rank (>= 1) and the same leading dims");
  const int64_t n = g.shape.back(), k = x.shape.back();
  CLEAVE_RETURN_IF_ERROR(
      requireOutput(sig, 0, "output", {g.dtype, {n, k}}, "[grad's last dim, input's last dim]"));
  out->rows = numElements(Shape(g.shape.begin(), g.shape.end() - 1));
  out->n = n;
  out->k = k;
  out->dtype = g.dtype;
  return {};
}

//===----------------------------------------------------------------------===//
// conv2d_backward_input, conv2d_backward_weight
//===----------------------------------------------------------------------===//

Status parseConv2dBackward(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> dtypes, bool forInput, Conv2dParams *out) {
  // `x` and `w` are the forward's input and weight shapes: for the input's
  // gradient the output is x and operand 1 the weight; for the weight's,
  // operand 1 is x and the output w.
  const char *other = forInput ? "weight" : "input";
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, other));
  const TensorDesc &grad = *sig.inputs[0], &known = *sig.inputs[1];
  const TensorDesc &result = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "grad", grad, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", grad, other, known));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", grad, "output", result));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "grad", grad, 4, "[N, F, OH, OW]"));
  CLEAVE_RETURN_IF_ERROR(
      requireRank(sig, other, known, 4, forInput ? "[F, C/groups, KH, KW]" : "[N, C, H, W]"));
  CLEAVE_RETURN_IF_ERROR(requireRank(
      sig, forInput ? "output (the input's gradient)" : "output (the weight's gradient)", result, 4,
      forInput ? "[N, C, H, W]" : "[F, C/groups, KH, KW]"));
  const TensorDesc &x = forInput ? result : known, &w = forInput ? known : result;
  Conv2dAttrs attrs;
  CLEAVE_RETURN_IF_ERROR(parseConv2dAttrs(sig, x, forInput ? "output" : "input", w,
                                          forInput ? "weight" : "output", &attrs));
  const std::vector<int64_t> &stride = attrs.stride, &padding = attrs.padding,
                             &dilation = attrs.dilation;
  const int64_t groups = attrs.groups;
  Conv2dParams p;
  p.batch = x.shape[0];
  p.channels = x.shape[1];
  p.height = x.shape[2];
  p.width = x.shape[3];
  p.filters = w.shape[0];
  p.groups = groups;
  p.kh = w.shape[2];
  p.kw = w.shape[3];
  p.sh = stride[0];
  p.sw = stride[1];
  p.ph = padding[0];
  p.pw = padding[1];
  p.dh = dilation[0];
  p.dw = dilation[1];
  CLEAVE_RETURN_IF_ERROR(conv2dOutputSize(sig, x, w, attrs, &p.oh, &p.ow));
  const Shape outShape = {x.shape[0], p.filters, p.oh, p.ow};
  if (grad.shape != outShape)
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(grad.shape, grad.dtype),
                        " is not the shape of the conv2d's output, expected ",
                        describe(outShape, grad.dtype), " (from input ", describe(x.shape, x.dtype),
                        ", weight ", describe(w.shape, w.dtype), " and the attributes)");
  const size_t needed = forInput
                            ? conv2dBackwardInputScratchBytes(x.shape, w.shape, outShape, groups,
                                                              stride, padding, dilation, x.dtype)
                            : conv2dBackwardWeightScratchBytes(x.shape, w.shape, outShape, groups,
                                                               stride, padding, dilation, x.dtype);
  if (sig.scratchBytes < needed)
    return CLEAVE_ERROR(sig.kernel, ": needs ", needed, " bytes of scratch for its column matrix (",
                        p.channels / groups * p.kh * p.kw, "x", p.oh * p.ow, " floats)",
                        conv2dUsesPrimitive(x.shape, w.shape, outShape, groups)
                            ? " or the channels-last copies of its gradient and input and the "
                              "weight in oneDNN's blocked format"
                            : "",
                        ", the plan reserves ", sig.scratchBytes);
  p.directGemm = conv2dIsDirectGemm(w.shape, stride, padding, dilation);
  *out = p;
  return {};
}

//===----------------------------------------------------------------------===//
// Pooling backward
//===----------------------------------------------------------------------===//

Status parseMaxPool2dBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, PoolParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "input"));
  const TensorDesc &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", *sig.inputs[0], "input", x));
  if (x != sig.outputs[0])
    return CLEAVE_ERROR(sig.kernel, ": output ",
                        describe(sig.outputs[0].shape, sig.outputs[0].dtype),
                        " must be the input's shape ", describe(x.shape, x.dtype));
  return parseWindowBackward(sig, backend, dtypes, /*hasDilation=*/true, out);
}

Status parseAvgPool2dBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, PoolParams *out,
                              bool *countIncludePad) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(parseWindowBackward(sig, backend, dtypes, /*hasDilation=*/false, out));
  *countIncludePad = true;
  return withKernel(sig, sig.attrs.getBool("count_include_pad", countIncludePad, true));
}

Status parseAdaptiveAvgPool2dBackward(const KernelSignature &sig, const char *backend,
                                      std::initializer_list<DType> dtypes,
                                      AdaptivePoolParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  const TensorDesc &grad = *sig.inputs[0];
  const TensorDesc &x = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "grad", grad, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", grad, "output", x));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "grad", grad, 4, "[N, C, OH, OW]"));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "output", x, 4, "[N, C, H, W]"));
  if (grad.shape[0] != x.shape[0] || grad.shape[1] != x.shape[1])
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(grad.shape, grad.dtype), " and output ",
                        describe(x.shape, x.dtype), " must have the same N and C");
  AdaptivePoolParams p;
  p.planes = x.shape[0] * x.shape[1];
  p.h = x.shape[2];
  p.w = x.shape[3];
  p.oh = grad.shape[2];
  p.ow = grad.shape[3];
  if (p.planes > 0 && p.oh * p.ow > 0 && (p.h == 0 || p.w == 0))
    return CLEAVE_ERROR(sig.kernel, ": cannot average an empty plane: output ",
                        describe(x.shape, x.dtype));
  *out = p;
  return {};
}

//===----------------------------------------------------------------------===//
// attention_backward
//===----------------------------------------------------------------------===//

Status parseAttentionBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, AttentionParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 5, 5, 3));
  const char *names[] = {"grad", "q", "k", "v", "output"};
  for (size_t i = 0; i < 5; ++i)
    CLEAVE_RETURN_IF_ERROR(requirePresent(sig, i, names[i]));
  const TensorDesc &g = *sig.inputs[0], &q = *sig.inputs[1], &k = *sig.inputs[2],
                   &v = *sig.inputs[3], &y = *sig.inputs[4];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "q", q, dtypes));
  for (size_t i = 0; i < 5; ++i)
    if (i != 1)
      CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "q", q, names[i], *sig.inputs[i]));
  for (size_t i = 0; i < 5; ++i)
    CLEAVE_RETURN_IF_ERROR(requireRank(sig, names[i], *sig.inputs[i], 4, "[B, H, S, D]"));
  if (k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] || k.shape[3] != q.shape[3] ||
      v.shape[0] != q.shape[0] || v.shape[1] != q.shape[1] || v.shape[2] != k.shape[2])
    return CLEAVE_ERROR(sig.kernel, ": q ", describe(q.shape, q.dtype), ", k ",
                        describe(k.shape, k.dtype), " and v ", describe(v.shape, v.dtype),
                        " must be [B, H, Sq, D], [B, H, Sk, D] and [B, H, Sk, Dv]");
  const Shape outShape = {q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  if (y.shape != outShape)
    return CLEAVE_ERROR(
        sig.kernel, ": output ", describe(y.shape, y.dtype),
        " must be the attention's output [B, H, Sq, Dv] = ", describe(outShape, y.dtype));
  if (g.shape != outShape)
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(g.shape, g.dtype),
                        " must be the output's shape ", describe(outShape, g.dtype));
  CLEAVE_RETURN_IF_ERROR(requireOutput(sig, 0, "grad_q", q, "q's shape"));
  CLEAVE_RETURN_IF_ERROR(requireOutput(sig, 1, "grad_k", k, "k's shape"));
  CLEAVE_RETURN_IF_ERROR(requireOutput(sig, 2, "grad_v", v, "v's shape"));
  AttentionParams p;
  CLEAVE_RETURN_IF_ERROR(readAttention(sig, q.shape, k.shape, v.shape, &p));
  const size_t needed = attentionBackwardScratchBytes(q.shape);
  if (sig.scratchBytes < needed)
    return CLEAVE_ERROR(sig.kernel, ": needs ", needed,
                        " bytes of scratch (the log-sum-exp and rowsum(g*y) of each query row), "
                        "the plan reserves ",
                        sig.scratchBytes);
  *out = p;
  return {};
}

//===----------------------------------------------------------------------===//
// embedding_backward
//===----------------------------------------------------------------------===//

Status parseEmbeddingBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, EmbeddingBackwardParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "indices"));
  const TensorDesc &g = *sig.inputs[0], &idx = *sig.inputs[1];
  const TensorDesc &dw = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "grad", g, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "indices", idx, {DType::I64, DType::I32}));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", g, "output", dw));
  CLEAVE_RETURN_IF_ERROR(requireRank(sig, "output", dw, 2, "[rows, dim]"));
  Shape expected = idx.shape;
  expected.push_back(dw.shape[1]);
  if (g.shape != expected)
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(g.shape, g.dtype), " must be ",
                        describe(expected, g.dtype),
                        " (the indices' shape plus the table's row size)");
  EmbeddingBackwardParams p;
  p.sharded = sig.attrs.has("row_offset");
  if (p.sharded)
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("row_offset", &p.offset)));
  p.hasPadding = sig.attrs.has("padding_idx");
  if (p.hasPadding)
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("padding_idx", &p.padding)));
  p.count = idx.numel();
  p.rows = dw.shape[0];
  p.dim = dw.shape[1];
  p.wide = idx.dtype == DType::I64;
  p.dtype = g.dtype;
  *out = p;
  return {};
}

//===----------------------------------------------------------------------===//
// slice_backward
//===----------------------------------------------------------------------===//

Status parseSliceBackward(const KernelSignature &sig, SliceParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  const TensorDesc &g = *sig.inputs[0], &x = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "grad", g, "output", x));
  SliceParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSliceRange(sig, x, "output ", &sp));
  Shape expected = x.shape;
  expected[sp.dim] = sp.count;
  if (g.shape != expected)
    return CLEAVE_ERROR(sig.kernel, ": grad ", describe(g.shape, g.dtype), " must be ",
                        describe(expected, g.dtype), " (the output with dim ", sp.dim, " sliced [",
                        sp.start, ":", sp.end, ":", sp.step, "])");
  *out = sp;
  return {};
}

} // namespace cleave::runtime
