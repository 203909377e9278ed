//===- Conv2dContract.cpp - conv2d's checks, shared by every backend ------===//

#include "runtime/Conv2dContract.h"
#include "runtime/cpu/ConvScratch.h"

#include <cmath>

namespace cleave::runtime {

Status parseConv2dAttrs(const KernelSignature &sig, const TensorDesc &x, const char *xName,
                        const TensorDesc &w, const char *wName, Conv2dAttrs *out) {
  std::vector<int64_t> &stride = out->stride, &padding = out->padding, &dilation = out->dilation;
  int64_t &groups = out->groups;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("stride", &stride)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("padding", &padding)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dilation", &dilation)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("groups", &groups)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "stride", stride, 1));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "padding", padding, 0));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "dilation", dilation, 1));
  if (groups < 1)
    return CLEAVE_ERROR(sig.kernel, ": groups must be >= 1, got ", groups);
  const int64_t channels = x.shape[1], filters = w.shape[0];
  if (channels % groups != 0)
    return CLEAVE_ERROR(sig.kernel, ": ", xName, " ", describe(x.shape, x.dtype), " has ",
                        channels, " channels, not divisible by groups = ", groups);
  if (channels / groups != w.shape[1])
    return CLEAVE_ERROR(sig.kernel, ": ", wName, " ", describe(w.shape, w.dtype), " needs ",
                        w.shape[1], " input channels per group, ", xName, " ",
                        describe(x.shape, x.dtype), " has ", channels / groups,
                        " (groups = ", groups, ")");
  if (filters % groups != 0)
    return CLEAVE_ERROR(sig.kernel, ": ", wName, " ", describe(w.shape, w.dtype), " has ",
                        filters, " filters, not divisible by groups = ", groups);
  return {};
}

Status conv2dOutputSize(const KernelSignature &sig, const TensorDesc &x, const TensorDesc &w,
                        const Conv2dAttrs &a, int64_t *oh, int64_t *ow) {
  const int64_t kh = w.shape[2], kw = w.shape[3];
  const int64_t spanH = x.shape[2] + 2 * a.padding[0] - a.dilation[0] * (kh - 1) - 1;
  const int64_t spanW = x.shape[3] + 2 * a.padding[1] - a.dilation[1] * (kw - 1) - 1;
  if (spanH < 0 || spanW < 0)
    return CLEAVE_ERROR(sig.kernel, ": kernel ", kh, "x", kw, " (dilation ",
                        formatList(a.dilation), ") is larger than the padded input ",
                        describe(x.shape, x.dtype));
  *oh = spanH / a.stride[0] + 1;
  *ow = spanW / a.stride[1] + 1;
  return {};
}

Status parseConv2d(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, Conv2dParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "weight"));
  const TensorDesc &x = *sig.inputs[0], &w = *sig.inputs[1];
  Conv2dParams g;
  g.hasBias = sig.inputs.size() == 3 && sig.inputs[2].has_value();
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "input", x, "weight", w));
  if (x.rank() != 4 || w.rank() != 4)
    return CLEAVE_ERROR(sig.kernel,
                        ": needs a 4-D input [N, C, H, W] and a 4-D weight "
                        "[F, C/groups, KH, KW], got ",
                        describe(x.shape, x.dtype), " and ", describe(w.shape, w.dtype));
  Conv2dAttrs attrs;
  CLEAVE_RETURN_IF_ERROR(parseConv2dAttrs(sig, x, "input", w, "weight", &attrs));
  const std::vector<int64_t> &stride = attrs.stride, &padding = attrs.padding,
                             &dilation = attrs.dilation;
  const int64_t groups = attrs.groups;
  const int64_t batch = x.shape[0], channels = x.shape[1];
  const int64_t filters = w.shape[0];
  if (g.hasBias) {
    const TensorDesc &bias = *sig.inputs[2];
    CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "weight", w, "bias", bias));
    if (bias.shape != Shape{filters})
      return CLEAVE_ERROR(sig.kernel, ": bias ", describe(bias.shape, bias.dtype), " must be [",
                          filters, "], one per filter");
  }
  g.batch = batch;
  g.channels = channels;
  g.filters = filters;
  g.groups = groups;
  g.height = x.shape[2];
  g.width = x.shape[3];
  g.kh = w.shape[2];
  g.kw = w.shape[3];
  g.sh = stride[0];
  g.sw = stride[1];
  g.ph = padding[0];
  g.pw = padding[1];
  g.dh = dilation[0];
  g.dw = dilation[1];
  CLEAVE_RETURN_IF_ERROR(conv2dOutputSize(sig, x, w, attrs, &g.oh, &g.ow));
  Shape outShape = {batch, filters, g.oh, g.ow};
  CLEAVE_RETURN_IF_ERROR(
      checkOutput(sig, {x.dtype, outShape}, "from the input, weight and attributes"));
  const size_t needed =
      conv2dScratchBytes(x.shape, w.shape, outShape, groups, stride, padding, dilation, x.dtype);
  if (sig.scratchBytes < needed)
    return CLEAVE_ERROR(sig.kernel, ": needs ", needed, " bytes of scratch for its im2col matrix (",
                        channels / groups * g.kh * g.kw, "x", g.oh * g.ow, " floats)",
                        conv2dUsesPrimitive(x.shape, w.shape, outShape, groups)
                            ? " or the channels-last copies of its input and output and its "
                              "weight in oneDNN's blocked format"
                            : "",
                        ", the plan reserves ", sig.scratchBytes);
  g.directGemm = conv2dIsDirectGemm(w.shape, stride, padding, dilation);
  *out = g;
  return {};
}

Status parseFusedConv2d(const KernelSignature &sig, const char *backend,
                        std::initializer_list<DType> dtypes, Conv2dParams *out,
                        ConvEpilogue *epilogue) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 4));
  // The convolution's own checks, on its first three inputs.
  KernelSignature conv = sig;
  if (conv.inputs.size() > 3)
    conv.inputs.resize(3);
  if (conv.inputs.size() == 3 && !conv.inputs[2])
    conv.inputs.resize(2);
  CLEAVE_RETURN_IF_ERROR(parseConv2d(conv, backend, dtypes, out));
  ConvEpilogue e;
  if (sig.inputs.size() == 4 && sig.inputs[3]) {
    const TensorDesc &r = *sig.inputs[3];
    const TensorDesc &y = sig.outputs[0];
    if (r.shape != y.shape || r.dtype != y.dtype)
      return CLEAVE_ERROR(sig.kernel, ": residual ", describe(r.shape, r.dtype),
                          " must match the output ", describe(y.shape, y.dtype));
    e.residual = true;
  }
  double bound = 0;
  if (sig.attrs.has("min")) {
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getFloat("min", &bound)));
    e.hasMin = true;
    e.min = static_cast<float>(bound);
  }
  if (sig.attrs.has("max")) {
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getFloat("max", &bound)));
    e.hasMax = true;
    e.max = static_cast<float>(bound);
  }
  if (std::isnan(e.min) || std::isnan(e.max) || (e.hasMin && e.hasMax && e.min > e.max))
    return CLEAVE_ERROR(sig.kernel, ": clamp bounds [", e.min, ", ", e.max,
                        "] are not an interval");
  *epilogue = e;
  return {};
}

} // namespace cleave::runtime
