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

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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

/// v when v > m or v is NaN (NaN propagates, as PyTorch), else m. Selected
/// by bits, not by a branch: the scalar tails of short runs (a 14-wide row)
/// would otherwise mispredict on every other element of random data.
inline float maxOrNan(float v, float m) {
  uint32_t vb, mb;
  std::memcpy(&vb, &v, sizeof vb);
  std::memcpy(&mb, &m, sizeof mb);
  const uint32_t take = 0u - static_cast<uint32_t>((v > m) | (v != v));
  const uint32_t r = (vb & take) | (mb & ~take);
  float out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

/// out[i] = max(out[i], src[i * stride]) for i < n, NaN-propagating.
inline void maxInto(float *__restrict out, const float *__restrict src, int64_t n,
                    int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = maxOrNan(src[i], out[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = maxOrNan(src[i * stride], out[i]);
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

/// One plane of a stride-1 max_pool2d whose output rows are as wide as the
/// input's (a "same" pool: 2 * padding = dilation * (kernel - 1), as
/// GoogLeNet's 3x3/1 branch pools), in two passes over the whole plane: the
/// max along each row into `rows` (h x w), then down the columns. Rows line
/// up, so each tap is one long run over the plane instead of a short run per
/// output row; the columns where a tap would cross into the next row are
/// redone tap by tap. Each output folds its window row by row, column by
/// column, as the direct loop does, so the result (NaN, signed zero) is the
/// same bits.
CLEAVE_CLONES void maxPoolSamePlane(const PoolParams &g, const int64_t *oxBegin,
                                    const int64_t *oxEnd, int64_t edgeLeft, int64_t edgeRight,
                                    const float *__restrict plane, float *__restrict rows,
                                    float *__restrict out) {
  const int64_t n = g.h * g.w;
  for (int64_t i = 0; i < n; ++i)
    rows[i] = -std::numeric_limits<float>::infinity();
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    const int64_t off = kx * g.dw - g.pw;
    const int64_t begin = std::max<int64_t>(0, -off), end = n - std::max<int64_t>(0, off);
    for (int64_t i = begin; i < end; ++i)
      rows[i] = maxOrNan(plane[i + off], rows[i]);
  }
  // Columns some tap of which lies outside the row: their runs above read
  // the neighbouring row.
  for (int64_t y = 0; y < g.h; ++y) {
    const float *in = plane + y * g.w;
    float *r = rows + y * g.w;
    auto redo = [&](int64_t ox) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t kx = 0; kx < g.kw; ++kx)
        if (ox >= oxBegin[kx] && ox < oxEnd[kx])
          m = maxOrNan(in[ox + kx * g.dw - g.pw], m);
      r[ox] = m;
    };
    for (int64_t ox = 0; ox < std::min(edgeLeft, g.ow); ++ox)
      redo(ox);
    for (int64_t ox = std::max(edgeLeft, g.ow - edgeRight); ox < g.ow; ++ox)
      redo(ox);
  }
  const int64_t outputs = g.oh * g.ow;
  for (int64_t i = 0; i < outputs; ++i)
    out[i] = -std::numeric_limits<float>::infinity();
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    // Output rows whose tap ky lies inside the input: one run of them.
    const int64_t off = ky * g.dh - g.ph;
    const int64_t oyBegin = std::clamp<int64_t>(-off, 0, g.oh);
    const int64_t oyEnd = std::clamp<int64_t>(g.h - off, oyBegin, g.oh);
    const int64_t shift = off * g.w; // output row oy reads row oy + off
    for (int64_t i = oyBegin * g.ow; i < oyEnd * g.ow; ++i)
      out[i] = maxOrNan(rows[i + shift], out[i]);
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
  if (g.sh == 1 && g.sw == 1 && g.ow == g.w) {
    // Columns at either side that not every tap reaches.
    int64_t edgeLeft = 0, edgeRight = 0;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      edgeLeft = std::max(edgeLeft, oxBegin[kx]);
      edgeRight = std::max(edgeRight, g.ow - oxEnd[kx]);
    }
    *fn = [g, oxBegin, oxEnd, edgeLeft, edgeRight](const KernelCall &call) -> Status {
      const float *x = static_cast<const float *>(call.inputs[0]);
      float *y = static_cast<float *>(call.outputs[0]);
      parallelRange(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t b, int64_t e) {
        // One plane's row maxima, per thread (an input plane's size).
        thread_local std::vector<float> rows;
        rows.resize(static_cast<size_t>(g.h * g.w));
        for (int64_t p = b; p < e; ++p)
          maxPoolSamePlane(g, oxBegin.data(), oxEnd.data(), edgeLeft, edgeRight,
                           x + p * g.h * g.w, rows.data(), y + p * g.oh * g.ow);
      });
      return {};
    };
    return {};
  }
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
