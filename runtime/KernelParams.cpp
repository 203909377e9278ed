//===- KernelParams.cpp - Instruction parsing shared by every backend -----===//

#include "runtime/KernelParams.h"

namespace cleave::runtime {

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

/// PyTorch's pooling_output_shape: with ceil_mode the last window must start
/// inside the input or the left padding.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation, bool ceilMode) {
  int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= in + padding)
    --out;
  return out;
}

/// Reads and checks the window attributes of a pooling op and computes its
/// output shape. `hasDilation` is false for avg_pool2d (dilation 1).
Status parsePool(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes, bool hasDilation, PoolParams *g) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  std::vector<int64_t> kernel, stride, padding, dilation = {1, 1};
  bool ceilMode = false;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("kernel", &kernel)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("stride", &stride)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("padding", &padding)));
  if (hasDilation)
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dilation", &dilation)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("ceil_mode", &ceilMode, false)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "kernel", kernel, 1));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "stride", stride, 1));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "padding", padding, 0));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "dilation", dilation, 1));
  for (int i = 0; i < 2; ++i)
    if (2 * padding[i] > kernel[i])
      return CLEAVE_ERROR(sig.kernel, ": padding ", formatList(padding),
                          " must be at most half the kernel ", formatList(kernel));
  g->planes = x.shape[0] * x.shape[1];
  g->h = x.shape[2];
  g->w = x.shape[3];
  g->kh = kernel[0];
  g->kw = kernel[1];
  g->sh = stride[0];
  g->sw = stride[1];
  g->ph = padding[0];
  g->pw = padding[1];
  g->dh = dilation[0];
  g->dw = dilation[1];
  g->oh = windowOutputSize(g->h, g->kh, g->sh, g->ph, g->dh, ceilMode);
  g->ow = windowOutputSize(g->w, g->kw, g->sw, g->pw, g->dw, ceilMode);
  if (g->oh < 1 || g->ow < 1)
    return CLEAVE_ERROR(sig.kernel, ": kernel ", formatList(kernel), " (dilation ",
                        formatList(dilation), ") is larger than the padded input ",
                        describe(x.shape, x.dtype));
  return checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], g->oh, g->ow}},
                     "from the input and the window attributes");
}

} // namespace

Status parseMaxPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out) {
  return parsePool(sig, backend, dtypes, /*hasDilation=*/true, out);
}

Status parseAvgPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out, bool *countIncludePad) {
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, backend, dtypes, /*hasDilation=*/false, out));
  return withKernel(sig, sig.attrs.getBool("count_include_pad", countIncludePad, true));
}

Status parseAdaptiveAvgPool2d(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, AdaptivePoolParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  std::vector<int64_t> size;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("output_size", &size)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "output_size", size, 1));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], size[0], size[1]}},
                                     "the input's N and C with output_size"));
  out->planes = x.shape[0] * x.shape[1];
  out->h = x.shape[2];
  out->w = x.shape[3];
  out->oh = size[0];
  out->ow = size[1];
  if (out->planes > 0 && (out->h == 0 || out->w == 0))
    return CLEAVE_ERROR(sig.kernel, ": cannot average an empty plane: input ",
                        describe(x.shape, x.dtype));
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

Status parseReduction(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, bool needsElements, ReduceParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  std::vector<int64_t> &dims = out->dims;
  bool &keepdim = out->keepdim;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dims", &dims)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("keepdim", &keepdim, false)));
  std::vector<bool> &reduced = out->reduced;
  reduced.assign(x.shape.size(), false);
  for (int64_t d : dims) {
    CLEAVE_RETURN_IF_ERROR(checkDim(sig, "reduction dim", d, x.rank()));
    if (reduced[d])
      return CLEAVE_ERROR(sig.kernel, ": reduction dim ", d, " appears twice in ",
                          formatList(dims));
    reduced[d] = true;
  }
  Shape outShape;
  int64_t reducedCount = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d])
      outShape.push_back(x.shape[d]);
    else {
      reducedCount *= x.shape[d];
      if (keepdim)
        outShape.push_back(1);
    }
  }
  CLEAVE_RETURN_IF_ERROR(
      checkOutput(sig, {x.dtype, outShape},
                  "input reduced over " + formatList(dims) + (keepdim ? " keeping dims" : "")));
  const int64_t outCount = numElements(outShape);
  if (needsElements && reducedCount == 0 && outCount > 0)
    return CLEAVE_ERROR(sig.kernel, ": cannot take the maximum over zero elements (input ",
                        describe(x.shape, x.dtype), ", dims ", formatList(dims), ")");
  out->outCount = outCount;
  out->reducedCount = reducedCount;
  out->groups.clear();
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] == 1)
      continue;
    if (!out->groups.empty() && out->groups.back().reduced == reduced[d])
      out->groups.back().size *= x.shape[d];
    else
      out->groups.push_back({x.shape[d], reduced[d]});
  }
  return {};
}

} // namespace cleave::runtime
