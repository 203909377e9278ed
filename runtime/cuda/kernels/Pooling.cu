//===- Pooling.cu - max_pool2d, avg_pool2d, adaptive_avg_pool2d -----------===//
//
// NCHW, a thread per output element. Window bounds, ceil_mode and the
// avg_pool2d divisor are the CPU's (runtime/cpu/Pooling.cpp), which follow
// PyTorch: count_include_pad counts the padding but never ceil_mode's
// overhang. Sums in fp32.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <string>

namespace cleave::runtime::cuda {
namespace {

/// Splits flat output index `idx` into plane, row, column.
__device__ __forceinline__ void splitOutput(int64_t idx, int64_t oh, int64_t ow, int64_t *p,
                                            int64_t *oy, int64_t *ox) {
  *ox = idx % ow;
  const int64_t t = idx / ow;
  *oy = t % oh;
  *p = t / oh;
}

template <typename T>
__global__ void maxPoolKernel(const T *__restrict__ x, T *__restrict__ y, PoolParams g, int64_t n) {
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
__global__ void avgPoolKernel(const T *__restrict__ x, T *__restrict__ y, PoolParams g, int64_t n,
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
KernelFn makeMaxPool(const KernelSignature &sig, DeviceContext &ctx, const PoolParams &g) {
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
KernelFn makeAvgPool(const KernelSignature &sig, DeviceContext &ctx, const PoolParams &g,
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
  PoolParams g;
  CLEAVE_RETURN_IF_ERROR(parseMaxPool2d(sig, "cuda", {DType::F32, DType::BF16}, &g));
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeMaxPool<float>(sig, ctx, g);
  else
    *fn = makeMaxPool<bf16>(sig, ctx, g);
  return {};
}

Status buildAvgPool(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PoolParams g;
  bool countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(
      parseAvgPool2d(sig, "cuda", {DType::F32, DType::BF16}, &g, &countIncludePad));
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeAvgPool<float>(sig, ctx, g, countIncludePad);
  else
    *fn = makeAvgPool<bf16>(sig, ctx, g, countIncludePad);
  return {};
}

Status buildAdaptiveAvgPool(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  AdaptivePoolParams a;
  CLEAVE_RETURN_IF_ERROR(parseAdaptiveAvgPool2d(sig, "cuda", {DType::F32, DType::BF16}, &a));
  if (sig.inputs[0]->dtype == DType::F32)
    *fn = makeAdaptiveAvgPool<float>(sig, ctx, a.planes, a.h, a.w, a.oh, a.ow);
  else
    *fn = makeAdaptiveAvgPool<bf16>(sig, ctx, a.planes, a.h, a.w, a.oh, a.ow);
  return {};
}

} // namespace

void registerPoolingKernels(KernelTable &table) {
  table["max_pool2d"] = buildMaxPool;
  table["avg_pool2d"] = buildAvgPool;
  table["adaptive_avg_pool2d"] = buildAdaptiveAvgPool;
}

} // namespace cleave::runtime::cuda
