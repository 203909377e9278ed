//===- TrainingContractions.cpp - Backward kernels of the contractions ----===//
//
// The gradients of linear, conv2d, the poolings, attention, embedding and
// slice (docs/plan-format.md, "Training kernels"). GEMMs go to oneDNN's
// dnnl_sgemm, as the forward kernels (Contractions.cpp):
//   linear_backward_weight  one GEMM, g^T x, no transposed copies;
//   conv2d_backward_input   oneDNN's backward-data primitive where the
//                           forward runs its primitive (ConvPrimitive.h);
//                           else per (image, group) W^T g into the column
//                           matrix (the scratch), then col2im adds the
//                           columns into the input's gradient;
//   conv2d_backward_weight  oneDNN's backward-weights primitive likewise;
//                           else per (image, group) im2col of the input
//                           (the scratch), then dW += g col^T;
//   attention_backward      FlashAttention-2's backward: the log-sum-exp and
//                           rowsum(g*y) of each query row in the scratch,
//                           then the scores recomputed tile by tile, each
//                           tile's five products as single-threaded GEMMs
//                           inside the parallel region.
// The poolings, embedding and slice are loops over planes, columns or outer
// indices on the OpenMP pool; every sum runs in a fixed order, so results do
// not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/BackwardParams.h"
#include "runtime/cpu/AvgPoolSpan.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/ConvPrimitive.h"
#include "runtime/cpu/ConvScratch.h"
#include "runtime/cpu/Im2col.h"
#include "runtime/cpu/Registry.h"
#include "runtime/cpu/VecMath.h"

#include <dnnl.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cleave::runtime::cpu {
namespace {

/// C[M,N] = alpha * op(A) * op(B) + beta * C, row-major with leading
/// dimensions; called from one thread (inside a parallel region it runs
/// single-threaded).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
          int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (beta == 0.0f)
      for (int64_t i = 0; i < m; ++i)
        std::memset(c + i * ldc, 0, sizeof(float) * n);
    else if (beta != 1.0f)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          c[i * ldc + j] *= beta;
    return;
  }
  dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// Zeroes n floats over threads.
void parallelZero(float *p, int64_t n) {
  parallelRange(n, 1, [&](int64_t b, int64_t e) { std::memset(p + b, 0, sizeof(float) * (e - b)); });
}

//===----------------------------------------------------------------------===//
// linear_backward_weight
//===----------------------------------------------------------------------===//

Status buildLinearBackwardWeight(const KernelSignature &sig, KernelFn *fn) {
  LinearBackwardWeightParams lp;
  CLEAVE_RETURN_IF_ERROR(parseLinearBackwardWeight(sig, "cpu", {DType::F32}, &lp));
  const int64_t rows = lp.rows, n = lp.n, k = lp.k;
  *fn = [rows, n, k](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    float *dw = static_cast<float *>(call.outputs[0]);
    if (rows == 0) {
      parallelZero(dw, n * k);
      return {};
    }
    // dw[n, k] = sum_m g[m, n] x[m, k]: A = g^T (g is [rows, n]).
    gemm(true, false, n, k, rows, 1.0f, g, n, x, k, 0.0f, dw, k);
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// conv2d_backward_input, conv2d_backward_weight
//===----------------------------------------------------------------------===//

struct ConvBackward {
  Conv2dParams params;
  ConvGeometry g;
  int64_t batch = 0, groups = 1, filtersPerGroup = 0;
  bool direct = false;
};

/// Validates a conv2d backward instruction (runtime/BackwardParams.h) and
/// lays it out as the im2col geometry of one group.
Status parseConvBackward(const KernelSignature &sig, bool forInput, ConvBackward *out) {
  Conv2dParams p;
  CLEAVE_RETURN_IF_ERROR(parseConv2dBackward(sig, "cpu", {DType::F32}, forInput, &p));
  out->params = p;
  ConvGeometry g;
  g.channels = p.channels / p.groups;
  g.height = p.height;
  g.width = p.width;
  g.kh = p.kh;
  g.kw = p.kw;
  g.sh = p.sh;
  g.sw = p.sw;
  g.ph = p.ph;
  g.pw = p.pw;
  g.dh = p.dh;
  g.dw = p.dw;
  g.oh = p.oh;
  g.ow = p.ow;
  out->g = g;
  out->batch = p.batch;
  out->groups = p.groups;
  out->filtersPerGroup = p.filters / p.groups;
  out->direct = p.directGemm;
  return {};
}

/// The adjoint of im2col: image = sum over the column matrix's rows of
/// their elements put back under their taps (the image is overwritten).
/// Channels run in parallel: each one's taps are its own rows.
CLEAVE_CLONES void addColumnRun(float *__restrict dst, const float *__restrict src, int64_t n,
                                int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i)
      dst[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i)
      dst[i * stride] += src[i];
  }
}

void col2im(const ConvGeometry &g, const float *col, float *image) {
  const int64_t ohw = g.oh * g.ow, hw = g.height * g.width;
  std::vector<int64_t> oxBegin(g.kw), oxEnd(g.kw);
  for (int64_t j = 0; j < g.kw; ++j)
    validColumns(g, j, &oxBegin[j], &oxEnd[j]);
  parallelRange(g.channels, g.kh * g.kw * ohw, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      float *plane = image + c * hw;
      std::memset(plane, 0, sizeof(float) * hw);
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const float *src = col + ((c * g.kh + i) * g.kw + j) * ohw;
          const int64_t off = j * g.dw - g.pw, b = oxBegin[j], n = oxEnd[j] - b;
          if (n <= 0)
            continue;
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            const int64_t iy = oy * g.sh - g.ph + i * g.dh;
            if (iy < 0 || iy >= g.height)
              continue;
            addColumnRun(plane + iy * g.width + off + b * g.sw, src + oy * g.ow + b, n, g.sw);
          }
        }
    }
  });
}

bool useGroupTasks(const ConvBackward &p, int64_t tasks) {
  return runGroupsAsTasks(p.g, p.groups, p.filtersPerGroup, tasks);
}

/// oneDNN's primitive where the forward would run it (conv2dUsesPrimitive);
/// `*fn` stays empty otherwise.
Status buildPrimitiveBackward(const KernelSignature &sig, const ConvBackward &p, ConvPass pass,
                              KernelFn *fn) {
  const Conv2dParams &q = p.params;
  if (q.batch * q.filters == 0 ||
      !conv2dUsesPrimitive({q.batch, q.channels, q.height, q.width},
                           {q.filters, q.channels / q.groups, q.kh, q.kw},
                           {q.batch, q.filters, q.oh, q.ow}, q.groups))
    return {};
  return buildTrainingConv(sig, q, pass, fn);
}

Status buildConv2dBackwardInput(const KernelSignature &sig, KernelFn *fn) {
  ConvBackward p;
  CLEAVE_RETURN_IF_ERROR(parseConvBackward(sig, /*forInput=*/true, &p));
  CLEAVE_RETURN_IF_ERROR(buildPrimitiveBackward(sig, p, ConvPass::BackwardInput, fn));
  if (*fn)
    return {};
  *fn = [p](const KernelCall &call) -> Status {
    const ConvGeometry &g = p.g;
    const float *grad = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    float *dx = static_cast<float *>(call.outputs[0]);
    const int64_t hw = g.height * g.width, ohw = g.oh * g.ow;
    const int64_t depth = g.channels * g.kh * g.kw, fg = p.filtersPerGroup;
    // One (image, group): cols[depth, ohw] = W_g^T [depth, fg] * g [fg, ohw],
    // then col2im (the direct case writes the image's gradient at once).
    auto task = [&](int64_t n, int64_t grp, float *col) {
      const float *gy = grad + (n * p.groups + grp) * fg * ohw;
      const float *wg = w + grp * fg * depth;
      float *image = dx + (n * p.groups + grp) * g.channels * hw;
      if (p.direct) {
        gemm(true, false, depth, ohw, fg, 1.0f, wg, depth, gy, ohw, 0.0f, image, ohw);
        return;
      }
      gemm(true, false, depth, ohw, fg, 1.0f, wg, depth, gy, ohw, 0.0f, col, ohw);
      col2im(g, col, image);
    };
    const int64_t tasks = p.batch * p.groups;
    if (useGroupTasks(p, tasks)) {
#pragma omp parallel
      {
        std::vector<float> col(p.direct ? 0 : depth * ohw);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t)
          task(t / p.groups, t % p.groups, col.data());
      }
      return {};
    }
    float *col = static_cast<float *>(call.scratch);
    for (int64_t t = 0; t < tasks; ++t)
      task(t / p.groups, t % p.groups, col);
    return {};
  };
  return {};
}

Status buildConv2dBackwardWeight(const KernelSignature &sig, KernelFn *fn) {
  ConvBackward p;
  CLEAVE_RETURN_IF_ERROR(parseConvBackward(sig, /*forInput=*/false, &p));
  CLEAVE_RETURN_IF_ERROR(buildPrimitiveBackward(sig, p, ConvPass::BackwardWeight, fn));
  if (*fn)
    return {};
  *fn = [p](const KernelCall &call) -> Status {
    const ConvGeometry &g = p.g;
    const float *grad = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    float *dw = static_cast<float *>(call.outputs[0]);
    const int64_t hw = g.height * g.width, ohw = g.oh * g.ow;
    const int64_t depth = g.channels * g.kh * g.kw, fg = p.filtersPerGroup;
    if (p.batch == 0) {
      parallelZero(dw, p.groups * fg * depth);
      return {};
    }
    // dW_g[fg, depth] (+)= g [fg, ohw] * cols^T, images in order.
    auto step = [&](int64_t n, int64_t grp, float *col) {
      const float *gy = grad + (n * p.groups + grp) * fg * ohw;
      const float *image = x + (n * p.groups + grp) * g.channels * hw;
      const float *b = image;
      if (!p.direct) {
        im2col(g, image, col);
        b = col;
      }
      gemm(false, true, fg, depth, ohw, 1.0f, gy, ohw, b, ohw, n == 0 ? 0.0f : 1.0f,
           dw + grp * fg * depth, depth);
    };
    // Each group's sum over the images stays in one task: same order, same
    // result, whichever path runs.
    if (useGroupTasks(p, p.groups)) {
#pragma omp parallel
      {
        std::vector<float> col(p.direct ? 0 : depth * ohw);
#pragma omp for schedule(static)
        for (int64_t grp = 0; grp < p.groups; ++grp)
          for (int64_t n = 0; n < p.batch; ++n)
            step(n, grp, col.data());
      }
      return {};
    }
    float *col = static_cast<float *>(call.scratch);
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t grp = 0; grp < p.groups; ++grp)
        step(n, grp, col);
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// Pooling backward
//===----------------------------------------------------------------------===//

/// One kernel tap over a run of n outputs: where src[i * stride] beats the
/// output's maximum (or is NaN, as PyTorch's `val > max || isnan(val)`),
/// it becomes the maximum and its index first + i * stride the argmax.
/// Branch-free, so it vectorizes along the outputs.
CLEAVE_CLONES void argmaxInto(float *__restrict best, int32_t *__restrict index,
                              const float *__restrict src, int64_t n, int64_t stride,
                              int32_t first) {
  const int32_t step = static_cast<int32_t>(stride);
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = src[i];
      const bool take = (v > best[i]) | (v != v);
      best[i] = take ? v : best[i];
      index[i] = take ? first + static_cast<int32_t>(i) : index[i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      const float v = src[i * stride];
      const bool take = (v > best[i]) | (v != v);
      best[i] = take ? v : best[i];
      index[i] = take ? first + static_cast<int32_t>(i) * step : index[i];
    }
  }
}

Status buildMaxPoolBackward(const KernelSignature &sig, KernelFn *fn) {
  PoolParams g;
  CLEAVE_RETURN_IF_ERROR(parseMaxPool2dBackward(sig, "cpu", {DType::F32}, &g));
  const TensorDesc &x = *sig.inputs[1];
  if (g.h * g.w > std::numeric_limits<int32_t>::max())
    return CLEAVE_ERROR(sig.kernel, ": planes of more than 2^31 elements are not supported: ",
                        describe(x.shape, x.dtype));
  // For each kernel column kx, the output columns whose tap lies inside the
  // input: [oxBegin[kx], oxEnd[kx]); and each output column's first
  // in-bounds input column (PyTorch's argmax when every value is -inf).
  std::vector<int64_t> oxBegin(g.kw), oxEnd(g.kw), firstColumn(g.ow);
  for (int64_t kx = 0; kx < g.kw; ++kx) {
    const int64_t off = kx * g.dw - g.pw;
    int64_t b = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
    int64_t e = g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw;
    oxBegin[kx] = std::min(b, g.ow);
    oxEnd[kx] = std::clamp(e, oxBegin[kx], g.ow);
  }
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    int64_t x0 = ox * g.sw - g.pw;
    while (x0 < 0)
      x0 += g.dw;
    firstColumn[ox] = x0;
  }
  *fn = [g, oxBegin, oxEnd, firstColumn](const KernelCall &call) -> Status {
    const float *grad = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    float *dx = static_cast<float *>(call.outputs[0]);
    const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
    parallelRange(g.planes, ohw * g.kh * g.kw + hw, [&](int64_t b, int64_t e) {
      std::vector<float> best(g.ow);
      std::vector<int32_t> index(g.ow);
      for (int64_t p = b; p < e; ++p) {
        const float *plane = x + p * hw;
        const float *gp = grad + p * ohw;
        float *dp = dx + p * hw;
        std::memset(dp, 0, sizeof(float) * hw);
        // Row by row: the taps in PyTorch's scan order (ky, then kx), each
        // over the run of outputs it lies under.
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          const int64_t y0 = oy * g.sh - g.ph;
          int64_t kyBegin = y0 >= 0 ? 0 : (-y0 + g.dh - 1) / g.dh;
          int64_t kyEnd = y0 >= g.h ? 0 : (g.h - 1 - y0) / g.dh + 1;
          kyBegin = std::min(kyBegin, g.kh);
          kyEnd = std::clamp(kyEnd, kyBegin, g.kh);
          if (kyBegin == kyEnd)
            continue; // no window row inside the input (cannot happen with PyTorch's sizes)
          const int64_t firstRow = y0 + kyBegin * g.dh;
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            best[ox] = -std::numeric_limits<float>::infinity();
            index[ox] = static_cast<int32_t>(firstRow * g.w + firstColumn[ox]);
          }
          for (int64_t ky = kyBegin; ky < kyEnd; ++ky) {
            const int64_t iy = y0 + ky * g.dh;
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const int64_t b0 = oxBegin[kx], n = oxEnd[kx] - b0;
              if (n <= 0)
                continue;
              const int64_t col = b0 * g.sw + kx * g.dw - g.pw;
              argmaxInto(best.data() + b0, index.data() + b0, plane + iy * g.w + col, n, g.sw,
                         static_cast<int32_t>(iy * g.w + col));
            }
          }
          const float *go = gp + oy * g.ow;
          for (int64_t ox = 0; ox < g.ow; ++ox)
            dp[index[ox]] += go[ox];
        }
      }
    });
    return {};
  };
  return {};
}

Status buildAvgPoolBackward(const KernelSignature &sig, KernelFn *fn) {
  PoolParams g;
  bool countIncludePad = true;
  CLEAVE_RETURN_IF_ERROR(parseAvgPool2dBackward(sig, "cpu", {DType::F32}, &g, &countIncludePad));
  *fn = [g, countIncludePad](const KernelCall &call) -> Status {
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *dx = static_cast<float *>(call.outputs[0]);
    const int64_t hw = g.h * g.w, ohw = g.oh * g.ow;
    parallelRange(g.planes, ohw * g.kh * g.kw + hw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float *gp = grad + p * ohw;
        float *dp = dx + p * hw;
        std::memset(dp, 0, sizeof(float) * hw);
        for (int64_t oy = 0; oy < g.oh; ++oy) {
          int64_t y0, y1;
          const int64_t padH = avgPoolSpan(oy, g.sh, g.ph, g.kh, g.h, &y0, &y1);
          for (int64_t ox = 0; ox < g.ow; ++ox) {
            int64_t x0, x1;
            const int64_t poolSize = padH * avgPoolSpan(ox, g.sw, g.pw, g.kw, g.w, &x0, &x1);
            const int64_t divisor = countIncludePad ? poolSize : (y1 - y0) * (x1 - x0);
            if (y0 >= y1 || x0 >= x1)
              continue;
            const float delta = gp[oy * g.ow + ox] / static_cast<float>(divisor);
            for (int64_t iy = y0; iy < y1; ++iy) {
              float *row = dp + iy * g.w;
              for (int64_t ix = x0; ix < x1; ++ix)
                row[ix] += delta;
            }
          }
        }
      }
    });
    return {};
  };
  return {};
}

Status buildAdaptiveAvgPoolBackward(const KernelSignature &sig, KernelFn *fn) {
  AdaptivePoolParams a;
  CLEAVE_RETURN_IF_ERROR(parseAdaptiveAvgPool2dBackward(sig, "cpu", {DType::F32}, &a));
  const int64_t planes = a.planes, h = a.h, w = a.w, oh = a.oh, ow = a.ow;
  *fn = [planes, h, w, oh, ow](const KernelCall &call) -> Status {
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *dx = static_cast<float *>(call.outputs[0]);
    const int64_t hw = h * w, ohw = oh * ow;
    // Bin i of n over size s: [floor(i * s / n), ceil((i + 1) * s / n)).
    auto start = [](int64_t i, int64_t n, int64_t s) { return (i * s) / n; };
    auto end = [](int64_t i, int64_t n, int64_t s) { return ((i + 1) * s + n - 1) / n; };
    if (oh == 1 && ow == 1) { // global average pooling
      parallelRange(planes, hw, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const float delta = grad[p] / static_cast<float>(h) / static_cast<float>(w);
          float *dp = dx + p * hw;
          for (int64_t i = 0; i < hw; ++i)
            dp[i] = delta;
        }
      });
      return {};
    }
    parallelRange(planes, std::max(hw, ohw) + hw, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float *gp = grad + p * ohw;
        float *dp = dx + p * hw;
        std::memset(dp, 0, sizeof(float) * hw);
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t y0 = start(oy, oh, h), y1 = end(oy, oh, h);
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t x0 = start(ox, ow, w), x1 = end(ox, ow, w);
            // PyTorch divides by the bin's height, then its width.
            const float delta = gp[oy * ow + ox] / static_cast<float>(y1 - y0) /
                                static_cast<float>(x1 - x0);
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix)
                dp[iy * w + ix] += delta;
          }
        }
      }
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// attention_backward
//===----------------------------------------------------------------------===//

constexpr int64_t kQueryTile = 64;
constexpr int64_t kKeyTile = 64;

struct AttentionBackward {
  int64_t heads = 0, queries = 0, keys = 0, headDim = 0, valueDim = 0;
  bool causal = false;
  float scale = 1.0f;
};

/// One thread's tiles: the probabilities P and dS of a query tile against a
/// key tile, and the running statistics of the first pass.
struct TileWorkspace {
  std::vector<float> p, ds, rowMax, rowSum;
  TileWorkspace()
      : p(kQueryTile * kKeyTile), ds(kQueryTile * kKeyTile), rowMax(kQueryTile),
        rowSum(kQueryTile) {}
};

CLEAVE_CLONES float rowMax(const float *s, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j)
    m = s[j] > m ? s[j] : m;
  return m;
}

/// sum_j exp(s[j] - max), in 8 lanes so that it vectorizes.
CLEAVE_CLONES float rowExpSum(const float *s, int64_t n, float max) {
  float lanes[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l)
      lanes[l] += vmath::exp(s[j + l] - max);
  float sum = 0.0f;
  for (; j < n; ++j)
    sum += vmath::exp(s[j] - max);
  for (int l = 0; l < 8; ++l)
    sum += lanes[l];
  return sum;
}

/// Pass 1 for queries [first, first + rows) of one head: lse = log-sum-exp
/// of the visible scaled scores (-inf for a row that sees no key) and
/// delta = rowsum(g * y).
void attentionRowStats(const AttentionBackward &s, const float *q, const float *k,
                       const float *g, const float *y, float *lse, float *delta, int64_t first,
                       int64_t rows, TileWorkspace &w) {
  const float minusInf = -std::numeric_limits<float>::infinity();
  const int64_t d = s.headDim, dv = s.valueDim, offset = s.keys - s.queries;
  std::fill(w.rowMax.begin(), w.rowMax.end(), minusInf);
  std::fill(w.rowSum.begin(), w.rowSum.end(), 0.0f);
  const int64_t keyEnd =
      s.causal ? std::clamp<int64_t>(first + rows + offset, 0, s.keys) : s.keys;
  for (int64_t key = 0; key < keyEnd; key += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, keyEnd - key);
    gemm(false, true, rows, cols, d, s.scale, q + first * d, d, k + key * d, d, 0.0f, w.p.data(),
         kKeyTile);
    for (int64_t i = 0; i < rows; ++i) {
      const float *sc = w.p.data() + i * kKeyTile;
      int64_t visible = cols;
      if (s.causal)
        visible = std::clamp<int64_t>(first + i + offset + 1 - key, 0, cols);
      if (visible == 0)
        continue;
      const float newMax = std::max(rowMax(sc, visible), w.rowMax[i]);
      if (newMax == minusInf)
        continue;
      w.rowSum[i] = w.rowSum[i] * std::exp(w.rowMax[i] - newMax) + rowExpSum(sc, visible, newMax);
      w.rowMax[i] = newMax;
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    // A row that sees no key has y = 0 whatever q, k, v: lse = -inf marks it.
    lse[first + i] = w.rowSum[i] > 0.0f ? w.rowMax[i] + std::log(w.rowSum[i]) : minusInf;
    const float *gr = g + (first + i) * dv, *yr = y + (first + i) * dv;
    float acc = 0.0f;
    for (int64_t c = 0; c < dv; ++c)
      acc += gr[c] * yr[c];
    delta[first + i] = acc;
  }
}

/// p = exp(p - lse) and ds = p * (ds - delta) over the first `visible`
/// columns, zero over the rest up to `cols`.
CLEAVE_CLONES void probabilitiesRow(float *__restrict p, float *__restrict ds, int64_t visible,
                                    int64_t cols, float lse, float delta) {
  for (int64_t j = 0; j < visible; ++j) {
    const float pj = vmath::exp(p[j] - lse);
    p[j] = pj;
    ds[j] = pj * (ds[j] - delta);
  }
  for (int64_t j = visible; j < cols; ++j) {
    p[j] = 0.0f;
    ds[j] = 0.0f;
  }
}

/// One tile: queries [q0, q0 + rows) against keys [k0, k0 + cols) of one
/// head. Recomputes P = exp(scale q k^T - lse), dS = P (g v^T - delta), and
/// adds dV += P^T g, dK += scale dS^T q (when `keySide`) and
/// dQ += scale dS k (when `querySide`).
void attentionTile(const AttentionBackward &s, const float *q, const float *k, const float *v,
                   const float *g, const float *lse, const float *delta, float *dq, float *dk,
                   float *dv, int64_t q0, int64_t rows, int64_t k0, int64_t cols, bool keySide,
                   bool querySide, TileWorkspace &w) {
  const int64_t d = s.headDim, dvDim = s.valueDim, offset = s.keys - s.queries;
  float *p = w.p.data(), *ds = w.ds.data();
  gemm(false, true, rows, cols, d, s.scale, q + q0 * d, d, k + k0 * d, d, 0.0f, p, kKeyTile);
  gemm(false, true, rows, cols, dvDim, 1.0f, g + q0 * dvDim, dvDim, v + k0 * dvDim, dvDim, 0.0f,
       ds, kKeyTile);
  for (int64_t i = 0; i < rows; ++i) {
    float *pr = p + i * kKeyTile, *dr = ds + i * kKeyTile;
    const float l = lse[q0 + i], dl = delta[q0 + i];
    int64_t visible = cols;
    if (s.causal)
      visible = std::clamp<int64_t>(q0 + i + offset + 1 - k0, 0, cols);
    if (l == -std::numeric_limits<float>::infinity())
      visible = 0;
    probabilitiesRow(pr, dr, visible, cols, l, dl);
  }
  if (keySide) {
    gemm(true, false, cols, dvDim, rows, 1.0f, p, kKeyTile, g + q0 * dvDim, dvDim, 1.0f,
         dv + k0 * dvDim, dvDim);
    gemm(true, false, cols, d, rows, s.scale, ds, kKeyTile, q + q0 * d, d, 1.0f, dk + k0 * d, d);
  }
  if (querySide)
    gemm(false, false, rows, d, cols, s.scale, ds, kKeyTile, k + k0 * d, d, 1.0f, dq + q0 * d, d);
}

void attentionBackward(const AttentionBackward &s, const float *q, const float *k,
                       const float *v, const float *g, const float *y, float *dq, float *dk,
                       float *dv, float *scratch) {
  const int64_t d = s.headDim, dvDim = s.valueDim;
  const int64_t qStride = s.queries * d, kStride = s.keys * d;
  const int64_t vStride = s.keys * dvDim, gStride = s.queries * dvDim;
  float *lseAll = scratch, *deltaAll = scratch + s.heads * s.queries;
  const int64_t queryTiles = (s.queries + kQueryTile - 1) / kQueryTile;
  const int64_t keyTiles = (s.keys + kKeyTile - 1) / kKeyTile;
  const int64_t offset = s.keys - s.queries;
  const int maxThreads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double work =
      static_cast<double>(s.heads) * s.queries * std::max<int64_t>(s.keys, 1) * (d + dvDim);
  auto threadsFor = [&](int64_t tasks) {
    return work >= kParallelGrain ? static_cast<int>(std::min<int64_t>(maxThreads, tasks)) : 1;
  };
  // The last key a query tile sees, + 1 (causal: tiles past it are skipped).
  auto keyEnd = [&](int64_t q0, int64_t rows) {
    return s.causal ? std::clamp<int64_t>(q0 + rows + offset, 0, s.keys) : s.keys;
  };
  // The first query that sees key k0 (causal).
  auto queryBegin = [&](int64_t k0) {
    return s.causal ? std::clamp<int64_t>(k0 - offset, 0, s.queries) : int64_t(0);
  };

  // Pass 1: row statistics, over (head, query tile).
  {
    const int64_t tasks = s.heads * queryTiles;
#pragma omp parallel num_threads(threadsFor(tasks))
    {
      TileWorkspace w;
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t head = task / queryTiles, first = (task % queryTiles) * kQueryTile;
        attentionRowStats(s, q + head * qStride, k + head * kStride, g + head * gStride,
                          y + head * gStride, lseAll + head * s.queries,
                          deltaAll + head * s.queries, first,
                          std::min(kQueryTile, s.queries - first), w);
      }
    }
  }

  // With enough heads for every thread, one task owns a head: each tile is
  // computed once and adds into dq, dk and dv. Otherwise dk and dv are
  // computed over (head, key tile) tasks and dq over (head, query tile)
  // tasks, each tile's scores recomputed once more.
  const bool perHead = s.heads >= 2 * maxThreads || s.heads % maxThreads == 0;
  if (perHead) {
#pragma omp parallel num_threads(threadsFor(s.heads))
    {
      TileWorkspace w;
#pragma omp for schedule(dynamic, 1)
      for (int64_t head = 0; head < s.heads; ++head) {
        float *dqh = dq + head * qStride, *dkh = dk + head * kStride, *dvh = dv + head * vStride;
        std::memset(dqh, 0, sizeof(float) * qStride);
        std::memset(dkh, 0, sizeof(float) * kStride);
        std::memset(dvh, 0, sizeof(float) * vStride);
        for (int64_t qt = 0; qt < queryTiles; ++qt) {
          const int64_t q0 = qt * kQueryTile, rows = std::min(kQueryTile, s.queries - q0);
          const int64_t end = keyEnd(q0, rows);
          for (int64_t k0 = 0; k0 < end; k0 += kKeyTile)
            attentionTile(s, q + head * qStride, k + head * kStride, v + head * vStride,
                          g + head * gStride, lseAll + head * s.queries,
                          deltaAll + head * s.queries, dqh, dkh, dvh, q0, rows, k0,
                          std::min(kKeyTile, end - k0), true, true, w);
        }
      }
    }
    return;
  }
  {
    const int64_t tasks = s.heads * keyTiles;
#pragma omp parallel num_threads(threadsFor(tasks))
    {
      TileWorkspace w;
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        const int64_t head = task / keyTiles, k0 = (task % keyTiles) * kKeyTile;
        const int64_t cols = std::min(kKeyTile, s.keys - k0);
        float *dkh = dk + head * kStride, *dvh = dv + head * vStride;
        std::memset(dkh + k0 * d, 0, sizeof(float) * cols * d);
        std::memset(dvh + k0 * dvDim, 0, sizeof(float) * cols * dvDim);
        for (int64_t q0 = queryBegin(k0) / kQueryTile * kQueryTile; q0 < s.queries;
             q0 += kQueryTile)
          attentionTile(s, q + head * qStride, k + head * kStride, v + head * vStride,
                        g + head * gStride, lseAll + head * s.queries,
                        deltaAll + head * s.queries, nullptr, dkh, dvh, q0,
                        std::min(kQueryTile, s.queries - q0), k0, cols, true, false, w);
      }
    }
  }
  {
    const int64_t tasks = s.heads * queryTiles;
#pragma omp parallel num_threads(threadsFor(tasks))
    {
      TileWorkspace w;
#pragma omp for schedule(dynamic, 1)
      for (int64_t task = 0; task < tasks; ++task) {
        // Causal tiles late in the sequence see the most keys: start there.
        const int64_t reversed = tasks - 1 - task;
        const int64_t head = reversed % s.heads, q0 = (reversed / s.heads) * kQueryTile;
        const int64_t rows = std::min(kQueryTile, s.queries - q0);
        float *dqh = dq + head * qStride;
        std::memset(dqh + q0 * d, 0, sizeof(float) * rows * d);
        const int64_t end = keyEnd(q0, rows);
        for (int64_t k0 = 0; k0 < end; k0 += kKeyTile)
          attentionTile(s, q + head * qStride, k + head * kStride, v + head * vStride,
                        g + head * gStride, lseAll + head * s.queries,
                        deltaAll + head * s.queries, dqh, nullptr, nullptr, q0, rows, k0,
                        std::min(kKeyTile, end - k0), false, true, w);
      }
    }
  }
}

Status buildAttentionBackward(const KernelSignature &sig, KernelFn *fn) {
  AttentionParams ap;
  CLEAVE_RETURN_IF_ERROR(parseAttentionBackward(sig, "cpu", {DType::F32}, &ap));
  AttentionBackward s;
  s.causal = ap.causal;
  s.scale = static_cast<float>(ap.scale);
  s.heads = ap.heads;
  s.queries = ap.queries;
  s.keys = ap.keys;
  s.headDim = ap.headDim;
  s.valueDim = ap.valueDim;
  *fn = [s](const KernelCall &call) -> Status {
    attentionBackward(s, static_cast<const float *>(call.inputs[1]),
                      static_cast<const float *>(call.inputs[2]),
                      static_cast<const float *>(call.inputs[3]),
                      static_cast<const float *>(call.inputs[0]),
                      static_cast<const float *>(call.inputs[4]),
                      static_cast<float *>(call.outputs[0]), static_cast<float *>(call.outputs[1]),
                      static_cast<float *>(call.outputs[2]), static_cast<float *>(call.scratch));
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// embedding_backward
//===----------------------------------------------------------------------===//

/// dweight = 0, then dweight[idx - offset] += g[pos] in position order for
/// every index inside the table but padding_idx. Threads split the columns,
/// so each element's sum keeps the positions' order.
template <typename Index>
Status embeddingBackward(const float *g, const Index *indices, float *dw, int64_t count,
                         int64_t rows, int64_t dim, bool sharded, int64_t offset, bool hasPadding,
                         int64_t padding) {
  if (!sharded)
    for (int64_t i = 0; i < count; ++i)
      if (indices[i] < 0 || indices[i] >= rows)
        return CLEAVE_ERROR("embedding_backward: index ", static_cast<int64_t>(indices[i]),
                            " at position ", i, " is out of range for a table of ", rows,
                            " rows");
  parallelZero(dw, rows * dim);
  constexpr int64_t kColumnBlock = 16; // one cache line of floats
  const int64_t blocks = (dim + kColumnBlock - 1) / kColumnBlock;
  parallelRange(blocks, count * kColumnBlock, [&](int64_t b, int64_t e) {
    const int64_t c0 = b * kColumnBlock, c1 = std::min(dim, e * kColumnBlock);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t index = static_cast<int64_t>(indices[i]);
      if (hasPadding && index == padding)
        continue;
      const int64_t row = index - offset;
      if (row < 0 || row >= rows)
        continue;
      float *dst = dw + row * dim;
      const float *src = g + i * dim;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  });
  return {};
}

Status buildEmbeddingBackward(const KernelSignature &sig, KernelFn *fn) {
  EmbeddingBackwardParams ep;
  CLEAVE_RETURN_IF_ERROR(parseEmbeddingBackward(sig, "cpu", {DType::F32}, &ep));
  const int64_t count = ep.count, rows = ep.rows, dim = ep.dim, offset = ep.offset;
  const int64_t padding = ep.padding;
  const bool sharded = ep.sharded, hasPadding = ep.hasPadding, wide = ep.wide;
  *fn = [=](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    float *out = static_cast<float *>(call.outputs[0]);
    if (wide)
      return embeddingBackward(g, static_cast<const int64_t *>(call.inputs[1]), out, count, rows,
                               dim, sharded, offset, hasPadding, padding);
    return embeddingBackward(g, static_cast<const int32_t *>(call.inputs[1]), out, count, rows,
                             dim, sharded, offset, hasPadding, padding);
  };
  return {};
}

//===----------------------------------------------------------------------===//
// slice_backward
//===----------------------------------------------------------------------===//

/// Any dtype: elements are copied as bytes into a zeroed result.
Status buildSliceBackward(const KernelSignature &sig, KernelFn *fn) {
  SliceParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSliceBackward(sig, &sp));
  const TensorDesc &x = sig.outputs[0];
  const int64_t start = sp.start, step = sp.step;
  const int64_t size = sp.size, count = sp.count, outer = sp.outer, inner = sp.inner;
  const size_t elem = dtypeBytes(x.dtype);
  *fn = [=](const KernelCall &call) -> Status {
    const char *src = static_cast<const char *>(call.inputs[0]);
    char *dst = static_cast<char *>(call.outputs[0]);
    const size_t rowBytes = inner * elem;
    const int64_t units = std::max<int64_t>(static_cast<int64_t>(rowBytes / 4), 1);
    parallelRange(outer, size * units, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        char *out = dst + o * size * rowBytes;
        const char *in = src + o * count * rowBytes;
        if (step == 1) {
          std::memset(out, 0, start * rowBytes);
          std::memcpy(out + start * rowBytes, in, count * rowBytes);
          std::memset(out + (start + count) * rowBytes, 0, (size - start - count) * rowBytes);
          continue;
        }
        std::memset(out, 0, size * rowBytes);
        for (int64_t s = 0; s < count; ++s)
          std::memcpy(out + (start + s * step) * rowBytes, in + s * rowBytes, rowBytes);
      }
    });
    return {};
  };
  return {};
}

} // namespace

void registerTrainingContractionKernels(KernelTable &table) {
  table["linear_backward_weight"] = buildLinearBackwardWeight;
  table["conv2d_backward_input"] = buildConv2dBackwardInput;
  table["conv2d_backward_weight"] = buildConv2dBackwardWeight;
  table["max_pool2d_backward"] = buildMaxPoolBackward;
  table["avg_pool2d_backward"] = buildAvgPoolBackward;
  table["adaptive_avg_pool2d_backward"] = buildAdaptiveAvgPoolBackward;
  table["attention_backward"] = buildAttentionBackward;
  table["embedding_backward"] = buildEmbeddingBackward;
  table["slice_backward"] = {buildSliceBackward, /*takesBf16=*/true};
}

} // namespace cleave::runtime::cpu
