//===- Pooling.cu - max_pool2d, avg_pool2d, adaptive_avg_pool2d -----------===//
//
// NCHW, a thread per output element. Window bounds, ceil_mode and the
// avg_pool2d divisor are the CPU's (runtime/cpu/Pooling.cpp), which follow
// PyTorch: count_include_pad counts the padding but never ceil_mode's
// overhang. Sums in fp32.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <string>

namespace cleave::runtime::cuda {
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
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "input", x, {DType::F32, DType::BF16}));
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

/// Splits flat output index `idx` into plane, row, column.
__device__ __forceinline__ void splitOutput(int64_t idx, int64_t oh, int64_t ow, int64_t *p,
                                            int64_t *oy, int64_t *ox) {
  *ox = idx % ow;
  const int64_t t = idx / ow;
  *oy = t % oh;
  *p = t / oh;
}

template <typename T>
__global__ void maxPoolKernel(const T *__restrict__ x, T *__restrict__ y, PoolGeometry g,
                              int64_t n) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, oy, ox;
    splitOutput(idx, g.oh, g.ow, &p, &oy, &ox);
    const T *plane = x + p * g.h * g.w;
    const int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
    float m = -INFINITY;
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = y0 + ky * g.dh;
      if (iy < 0 || iy >= g.h)
        continue;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t ix = x0 + kx * g.dw;
        if (ix < 0 || ix >= g.w)
          continue;
        const float v = load(plane[iy * g.w + ix]);
        m = (v > m || v != v) ? v : m; // NaN propagates, as PyTorch
      }
    }
    y[idx] = store<T>(m);
  }
}

template <typename T>
__global__ void avgPoolKernel(const T *__restrict__ x, T *__restrict__ y, PoolGeometry g, int64_t n,
                              bool countIncludePad) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, oy, ox;
    splitOutput(idx, g.oh, g.ow, &p, &oy, &ox);
    const T *plane = x + p * g.h * g.w;
    // The window clipped to the padded input gives the count_include_pad
    // divisor, then clipped to the input the summed elements.
    int64_t y0 = oy * g.sh - g.ph, x0 = ox * g.sw - g.pw;
    int64_t y1 = std::min(y0 + g.kh, g.h + g.ph), x1 = std::min(x0 + g.kw, g.w + g.pw);
    const int64_t poolSize = (y1 - y0) * (x1 - x0);
    y0 = std::max(y0, int64_t(0));
    x0 = std::max(x0, int64_t(0));
    y1 = std::min(y1, g.h);
    x1 = std::min(x1, g.w);
    float sum = 0.0f;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix)
        sum += load(plane[iy * g.w + ix]);
    const int64_t divisor = countIncludePad ? poolSize : (y1 - y0) * (x1 - x0);
    y[idx] = store<T>(sum / static_cast<float>(divisor));
  }
}

template <typename T>
__global__ void adaptiveAvgPoolKernel(const T *__restrict__ x, T *__restrict__ y, int64_t h,
                                      int64_t w, int64_t oh, int64_t ow, int64_t n) {
  for (int64_t idx = globalThread(); idx < n; idx += globalThreads()) {
    int64_t p, oy, ox;
    splitOutput(idx, oh, ow, &p, &oy, &ox);
    const T *plane = x + p * h * w;
    // Bin i of n over size s: [floor(i * s / n), ceil((i + 1) * s / n)).
    const int64_t y0 = (oy * h) / oh, y1 = ((oy + 1) * h + oh - 1) / oh;
    const int64_t x0 = (ox * w) / ow, x1 = ((ox + 1) * w + ow - 1) / ow;
    float sum = 0.0f;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix)
        sum += load(plane[iy * w + ix]);
    y[idx] = store<T>(sum / static_cast<float>((y1 - y0) * (x1 - x0)));
  }
}

/// A block per plane: global average pooling (ResNet's head).
template <typename T>
__global__ void globalAvgPoolKernel(const T *__restrict__ x, T *__restrict__ y, int64_t planes,
                                    int64_t hw) {
  __shared__ float shared[32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x)
      sum += load(x[p * hw + i]);
    sum = blockReduce(sum, SumOp{}, shared);
    if (threadIdx.x == 0)
      y[p] = store<T>(sum / static_cast<float>(hw));
  }
}

template <typename T>
KernelFn makeMaxPool(const KernelSignature &sig, DeviceContext &ctx, const PoolGeometry &g) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t n = g.planes * g.oh * g.ow;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    maxPoolKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), g, n);
    return launchStatus(name);
  };
}

template <typename T>
KernelFn makeAvgPool(const KernelSignature &sig, DeviceContext &ctx, const PoolGeometry &g,
                     bool countIncludePad) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t n = g.planes * g.oh * g.ow;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    avgPoolKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), g, n,
        countIncludePad);
    return launchStatus(name);
  };
}

template <typename T>
KernelFn makeAdaptiveAvgPool(const KernelSignature &sig, DeviceContext &ctx, int64_t planes,
                             int64_t h, int64_t w, int64_t oh, int64_t ow) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t n = planes * oh * ow;
  return [=](const KernelCall &call) -> Status {
    if (n == 0)
      return {};
    const T *x = static_cast<const T *>(call.inputs[0]);
    T *y = static_cast<T *>(call.outputs[0]);
    if (oh == 1 && ow == 1)
      globalAvgPoolKernel<T><<<gridForItems(planes), kThreads, 0, c->stream>>>(x, y, planes, h * w);
    else
      adaptiveAvgPoolKernel<T><<<gridFor(*c, n), kThreads, 0, c->stream>>>(x, y, h, w, oh, ow, n);
    return launchStatus(name);
  };
}

Status buildMaxPool(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PoolGeometry g;
  bool ceilMode = false;
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, true, &ceilMode, &g));
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeMaxPool<float>(sig, ctx, g);
  else
    *fn = makeMaxPool<bf16>(sig, ctx, g);
  return {};
}

Status buildAvgPool(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PoolGeometry g;
  bool ceilMode = false, countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, false, &ceilMode, &g));
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getBool("count_include_pad", &countIncludePad, true)));
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeAvgPool<float>(sig, ctx, g, countIncludePad);
  else
    *fn = makeAvgPool<bf16>(sig, ctx, g, countIncludePad);
  return {};
}

Status buildAdaptiveAvgPool(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "input", x, {DType::F32, DType::BF16}));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  std::vector<int64_t> size;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("output_size", &size)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "output_size", size, 1));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], size[0], size[1]}},
                                     "the input's N and C with output_size"));
  const int64_t planes = x.shape[0] * x.shape[1], h = x.shape[2], w = x.shape[3];
  if (planes > 0 && (h == 0 || w == 0))
    return CLEAVE_ERROR(sig.kernel, ": cannot average an empty plane: input ",
                        describe(x.shape, x.dtype));
  if (x.dtype == DType::F32)
    *fn = makeAdaptiveAvgPool<float>(sig, ctx, planes, h, w, size[0], size[1]);
  else
    *fn = makeAdaptiveAvgPool<bf16>(sig, ctx, planes, h, w, size[0], size[1]);
  return {};
}

} // namespace

void registerPoolingKernels(KernelTable &table) {
  table["max_pool2d"] = buildMaxPool;
  table["avg_pool2d"] = buildAvgPool;
  table["adaptive_avg_pool2d"] = buildAdaptiveAvgPool;
}

} // namespace cleave::runtime::cuda
