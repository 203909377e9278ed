//===- Conv2dContract.h - What a conv2d instruction must satisfy ----------===//
//
// conv2d's checks are long (shapes, groups, attributes, the plan's scratch),
// and every backend must apply them alike: they parse the instruction into
// Conv2dParams once, here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/KernelContract.h"

#include <vector>

namespace cleave::runtime {

struct Conv2dParams {
  int64_t batch = 0, channels = 0, height = 0, width = 0; // input [N, C, H, W]
  int64_t filters = 0, groups = 1;                        // weight [F, C/groups, KH, KW]
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;
  bool hasBias = false;
  /// A 1x1, stride 1, unpadded convolution: a GEMM over the image as is.
  bool directGemm = false;
};

/// conv2d's attributes, as the forward and backward kernels read them.
struct Conv2dAttrs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 0;
};

/// Reads and checks stride, padding, dilation and groups, and that groups
/// divides the channels of `x` [N, C, H, W] and the filters of `w`
/// [F, C/groups, KH, KW] and gives w's channels per group; the messages call
/// them `xName` and `wName` (a backward kernel's result is one of them).
Status parseConv2dAttrs(const KernelSignature &sig, const TensorDesc &x, const char *xName,
                        const TensorDesc &w, const char *wName, Conv2dAttrs *out);

/// The output height and width of `x` convolved with `w` under `a`; an
/// error where the dilated kernel is larger than the padded input.
Status conv2dOutputSize(const KernelSignature &sig, const TensorDesc &x, const TensorDesc &w,
                        const Conv2dAttrs &a, int64_t *oh, int64_t *ow);

/// Validates a conv2d signature (dtypes among `dtypes`, named for
/// `backend`) and the scratch the plan reserved (conv2dScratchBytes: every
/// backend gets at least that).
Status parseConv2d(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, Conv2dParams *out);

/// What fused_conv2d does after the convolution and its bias: add a
/// residual of the output's shape, then clamp to [min, max] (either bound
/// optional; NaN passes through, as PyTorch's clamp and relu).
struct ConvEpilogue {
  bool residual = false;
  bool hasMin = false, hasMax = false;
  float min = 0.0f, max = 0.0f;
  bool clamps() const { return hasMin || hasMax; }
  bool any() const { return residual || clamps(); }
};

/// Validates a fused_conv2d signature: inputs input, weight, bias (or
/// absent), residual (or absent), the convolution as parseConv2d, the
/// residual of the output's shape and dtype, the bounds `min` <= `max`.
Status parseFusedConv2d(const KernelSignature &sig, const char *backend,
                        std::initializer_list<DType> dtypes, Conv2dParams *out,
                        ConvEpilogue *epilogue);

} // namespace cleave::runtime
