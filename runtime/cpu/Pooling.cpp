//===- Pooling.cpp - max_pool2d, avg_pool2d, adaptive_avg_pool2d ----------===//
//
// NCHW; the N*C planes are spread over threads. Window bounds, ceil_mode and
// the avg_pool2d divisor follow PyTorch's CPU kernels exactly.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <limits>

namespace cleave::runtime::cpu {
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

struct PoolGeometry {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

/// Reads and checks the window attributes of a pooling op and computes its
/// output shape. `hasDilation` is false for avg_pool2d (dilation 1).
Status parsePool(const KernelSignature &sig, bool hasDilation, bool *ceilMode, PoolGeometry *g) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "input", x, {DType::F32}));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  std::vector<int64_t> kernel, stride, padding, dilation = {1, 1};
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("kernel", &kernel)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("stride", &stride)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("padding", &padding)));
  if (hasDilation)
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dilation", &dilation)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("ceil_mode", ceilMode, false)));
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
  g->oh = windowOutputSize(g->h, g->kh, g->sh, g->ph, g->dh, *ceilMode);
  g->ow = windowOutputSize(g->w, g->kw, g->sw, g->pw, g->dw, *ceilMode);
  if (g->oh < 1 || g->ow < 1)
    return CLEAVE_ERROR(sig.kernel, ": kernel ", formatList(kernel), " (dilation ",
                        formatList(dilation), ") is larger than the padded input ",
                        describe(x.shape, x.dtype));
  return checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], g->oh, g->ow}},
                     "from the input and the window attributes");
}

/// Taps k in [0, kernel) whose position start + k * dilation lies in
/// [0, size): [*begin, *end).
void validTaps(int64_t start, int64_t kernel, int64_t dilation, int64_t size, int64_t *begin,
               int64_t *end) {
  int64_t b = start >= 0 ? 0 : (-start + dilation - 1) / dilation;
  int64_t e = start >= size ? 0 : (size - 1 - start) / dilation + 1;
  *begin = std::min(b, kernel);
  *end = std::clamp(e, *begin, kernel);
}

/// out[i] = max(out[i], src[i * stride]) for i < n, NaN-propagating.
CLEAVE_CLONES void maxInto(float *__restrict out, const float *__restrict src, int64_t n,
                           int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) {
      float v = src[i], m = out[i];
      out[i] = ((v > m) | (v != v)) ? v : m;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      float v = src[i * stride], m = out[i];
      out[i] = ((v > m) | (v != v)) ? v : m; // NaN propagates, as PyTorch
    }
  }
}

Status buildMaxPool(const KernelSignature &sig, KernelFn *fn) {
  PoolGeometry g;
  bool ceilMode = false;
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, true, &ceilMode, &g));
  // For each kernel column kx, the output columns whose tap lies inside the
  // input: [oxBegin[kx], oxEnd[kx]).
  std::vector<int64_t> oxBegin(g.kw), oxEnd(g.kw);
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    const int64_t off = kx * g.dw - g.pw; // input column of output column 0
    int64_t b = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    int64_t e = g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw;
    oxBegin[kx] = std::min(b, g.ow);
    oxEnd[kx] = std::clamp(e, oxBegin[kx], g.ow);
  }
  *fn = [g, oxBegin, oxEnd](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float *plane = x + p * g.h * g.w;
        float *out = y + p * g.oh * g.ow;
        // Row by row: each valid tap (ky, kx) updates a run of outputs.
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          float *o = out + oy * g.ow;
          for (int64_t ox = 0; ox < g.ow; ++ox)
            o[ox] = -std::numeric_limits<float>::infinity();
          const int64_t y0 = oy * g.sh - g.ph;
          int64_t kyBegin, kyEnd;
          validTaps(y0, g.kh, g.dh, g.h, &kyBegin, &kyEnd);
          for (int64_t ky = kyBegin; ky < kyEnd; ++ky) {
            const float *row = plane + (y0 + ky * g.dh) * g.w;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t b0 = oxBegin[kx], n = oxEnd[kx] - b0;
              if (n > 0)
                maxInto(o + b0, row + b0 * g.sw + kx * g.dw - g.pw, n, g.sw);
            }
          }
        }
      }
    });
    return {};
  };
  return {};
}

Status buildAvgPool(const KernelSignature &sig, KernelFn *fn) {
  PoolGeometry g;
  bool ceilMode = false, countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, false, &ceilMode, &g));
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getBool("count_include_pad", &countIncludePad, true)));
  *fn = [g, countIncludePad](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float *plane = x + p * g.h * g.w;
        float *out = y + p * g.oh * g.ow;
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          // PyTorch: the window is clipped to the padded input for the
          // count_include_pad divisor (so ceil_mode's overhang never counts),
          // then to the input for the sum.
          int64_t y0 = oy * g.sh - g.ph;
          int64_t y1 = std::min(y0 + g.kh, g.h + g.ph);
          const int64_t padH = y1 - y0;
          y0 = std::max<int64_t>(y0, 0);
          y1 = std::min(y1, g.h);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t x0 = ox * g.sw - g.pw;
            int64_t x1 = std::min(x0 + g.kw, g.w + g.pw);
            const int64_t poolSize = padH * (x1 - x0);
            x0 = std::max<int64_t>(x0, 0);
            x1 = std::min(x1, g.w);
            float sum = 0.0f;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix)
                sum += plane[iy * g.w + ix];
            const int64_t divisor = countIncludePad ? poolSize : (y1 - y0) * (x1 - x0);
            out[oy * g.ow + ox] = sum / static_cast<float>(divisor);
          }
        }
      }
    });
    return {};
  };
  return {};
}

Status buildAdaptiveAvgPool(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "input", x, {DType::F32}));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  std::vector<int64_t> size;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("output_size", &size)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "output_size", size, 1));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], size[0], size[1]}},
                                     "the input's N and C with output_size"));
  const int64_t planes = x.shape[0] * x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t oh = size[0], ow = size[1];
  if (planes > 0 && (h == 0 || w == 0))
    return CLEAVE_ERROR(sig.kernel, ": cannot average an empty plane: input ",
                        describe(x.shape, x.dtype));
  if (oh == 1 && ow == 1) {
    // Global average pooling (ResNet's head): one mean per plane.
    const int64_t hw = h * w;
    *fn = [planes, hw](const KernelCall &call) -> Status {
      const float *x = static_cast<const float *>(call.inputs[0]);
      float *y = static_cast<float *>(call.outputs[0]);
      parallelRange(planes, hw, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const float *plane = x + p * hw;
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < hw; ++i)
            sum += plane[i];
          y[p] = sum / static_cast<float>(hw);
        }
      });
      return {};
    };
    return {};
  }
  *fn = [planes, h, w, oh, ow](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    // Bin i of n over size s: [floor(i * s / n), ceil((i + 1) * s / n)).
    auto start = [](int64_t i, int64_t n, int64_t s) { return (i * s) / n; };
    auto end = [](int64_t i, int64_t n, int64_t s) { return ((i + 1) * s + n - 1) / n; };
    parallelRange(planes, std::max(h * w, oh * ow), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float *plane = x + p * h * w;
        float *out = y + p * oh * ow;
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t y0 = start(oy, oh, h), y1 = end(oy, oh, h);
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t x0 = start(ox, ow, w), x1 = end(ox, ow, w);
            float sum = 0.0f;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix)
                sum += plane[iy * w + ix];
            out[oy * ow + ox] = sum / static_cast<float>((y1 - y0) * (x1 - x0));
          }
        }
      }
    });
    return {};
  };
  return {};
}

} // namespace

void registerPoolingKernels(KernelTable &table) {
  table["max_pool2d"] = buildMaxPool;
  table["avg_pool2d"] = buildAvgPool;
  table["adaptive_avg_pool2d"] = buildAdaptiveAvgPool;
}

} // namespace cleave::runtime::cpu
