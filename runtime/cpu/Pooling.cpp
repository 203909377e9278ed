//===- Pooling.cpp - max_pool2d, avg_pool2d, adaptive_avg_pool2d ----------===//
//
// NCHW; the N*C planes are spread over threads. Window bounds, ceil_mode and
// the avg_pool2d divisor follow PyTorch's CPU kernels exactly.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/AvgPoolSpan.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <limits>

namespace cleave::runtime::cpu {
namespace {

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
inline void maxInto(float *__restrict out, const float *__restrict src, int64_t n,
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

/// out[i] += src[i * stride] for i < n.
inline void addInto(float *__restrict out, const float *__restrict src, int64_t n,
                    int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] += src[i * stride];
  }
}

/// For each kernel column kx, the output columns whose tap lies inside the
/// input: [(*begin)[kx], (*end)[kx]).
void tapColumns(const PoolParams &g, std::vector<int64_t> *begin, std::vector<int64_t> *end) {
  begin->assign(g.kw, 0);
  end->assign(g.kw, 0);
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    const int64_t off = kx * g.dw - g.pw; // input column of output column 0
    int64_t b = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    int64_t e = g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw;
    (*begin)[kx] = std::min(b, g.ow);
    (*end)[kx] = std::clamp(e, (*begin)[kx], g.ow);
  }
}

/// One plane of max_pool2d, row by row: each valid tap (ky, kx) updates a
/// run of outputs. A whole plane per (multi-versioned) call, so the short
/// runs of small planes inline rather than pay a call each.
CLEAVE_CLONES void maxPoolPlane(const PoolParams &g, const int64_t *oxBegin,
                                const int64_t *oxEnd, const float *__restrict plane,
                                float *__restrict out) {
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

/// One plane of avg_pool2d, as maxPoolPlane: each valid tap (iy, kx) adds
/// into a run of outputs, so every output still sums its window in (row,
/// column) order as PyTorch's loop does. `width[ox]` is column ox's factor
/// of the divisor.
CLEAVE_CLONES void avgPoolPlane(const PoolParams &g, bool countIncludePad,
                                const int64_t *oxBegin, const int64_t *oxEnd,
                                const int64_t *width, const float *__restrict plane,
                                float *__restrict out) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    float *o = out + oy * g.ow;
    for (int64_t ox = 0; ox < g.ow; ++ox)
      o[ox] = 0.0f;
    int64_t y0, y1;
    const int64_t padH = avgPoolSpan(oy, g.sh, g.ph, g.kh, g.h, &y0, &y1);
    for (int64_t iy = y0; iy < y1; ++iy) {
      const float *row = plane + iy * g.w;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const int64_t b0 = oxBegin[kx], n = oxEnd[kx] - b0;
        if (n > 0)
          addInto(o + b0, row + b0 * g.sw + kx - g.pw, n, g.sw);
      }
    }
    const int64_t rows = countIncludePad ? padH : y1 - y0;
    for (int64_t ox = 0; ox < g.ow; ++ox)
      o[ox] = o[ox] / static_cast<float>(rows * width[ox]);
  }
}

Status buildMaxPool(const KernelSignature &sig, KernelFn *fn) {
  PoolParams g;
  CLEAVE_RETURN_IF_ERROR(parseMaxPool2d(sig, "cpu", {DType::F32}, &g));
  std::vector<int64_t> oxBegin, oxEnd;
  tapColumns(g, &oxBegin, &oxEnd);
  *fn = [g, oxBegin, oxEnd](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p)
        maxPoolPlane(g, oxBegin.data(), oxEnd.data(), x + p * g.h * g.w, y + p * g.oh * g.ow);
    });
    return {};
  };
  return {};
}

Status buildAvgPool(const KernelSignature &sig, KernelFn *fn) {
  PoolParams g;
  bool countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(parseAvgPool2d(sig, "cpu", {DType::F32}, &g, &countIncludePad));
  // The divisor's factor of column ox: its window's width clipped to the
  // padded input, or to the input.
  std::vector<int64_t> oxBegin, oxEnd, padW(g.ow), validW(g.ow);
  tapColumns(g, &oxBegin, &oxEnd);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    int64_t x0, x1;
    padW[ox] = avgPoolSpan(ox, g.sw, g.pw, g.kw, g.w, &x0, &x1);
    validW[ox] = x1 - x0;
  }
  *fn = [g, countIncludePad, oxBegin, oxEnd, padW, validW](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p)
        avgPoolPlane(g, countIncludePad, oxBegin.data(), oxEnd.data(),
                     (countIncludePad ? padW : validW).data(), x + p * g.h * g.w,
                     y + p * g.oh * g.ow);
    });
    return {};
  };
  return {};
}

Status buildAdaptiveAvgPool(const KernelSignature &sig, KernelFn *fn) {
  AdaptivePoolParams a;
  CLEAVE_RETURN_IF_ERROR(parseAdaptiveAvgPool2d(sig, "cpu", {DType::F32}, &a));
  const int64_t planes = a.planes, h = a.h, w = a.w, oh = a.oh, ow = a.ow;
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
