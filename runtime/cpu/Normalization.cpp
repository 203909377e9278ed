//===- Normalization.cpp - layer_norm, batch_norm, softmax, log_softmax ---===//
//
// Row kernels (one normalized row per call) are multi-versioned
// (CLEAVE_CLONES in Common.h); rows are spread over OpenMP threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/LayerNormStats.h"
#include "runtime/cpu/Registry.h"
#include "runtime/cpu/VecMath.h"

#include <cmath>
#include <limits>


namespace cleave::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// Normalizes one row of d elements: mean, then the biased variance around
/// it (two passes, as accurate as PyTorch's), then the affine map.
CLEAVE_CLONES void layerNormRow(const float *__restrict x, float *__restrict y, int64_t d,
                                const float *__restrict w, const float *__restrict b,
                                float eps) {
  float mean, rstd;
  layerNormStats(x, d, eps, &mean, &rstd);
  if (w && b) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = (x[i] - mean) * rstd * w[i] + b[i];
  } else if (w) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = (x[i] - mean) * rstd * w[i];
  } else if (b) {
    for (int64_t i = 0; i < d; ++i)
      y[i] = (x[i] - mean) * rstd + b[i];
  } else {
    for (int64_t i = 0; i < d; ++i)
      y[i] = (x[i] - mean) * rstd;
  }
}

Status buildLayerNorm(const KernelSignature &sig, KernelFn *fn) {
  LayerNormParams p;
  CLEAVE_RETURN_IF_ERROR(parseLayerNorm(sig, "cpu", {DType::F32}, &p));
  const int64_t rows = p.rows, d = p.d;
  const float eps = p.eps;
  *fn = [rows, d, eps](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    const float *b = static_cast<const float *>(call.inputs[2]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(rows, 4 * d, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        layerNormRow(x + r * d, y + r * d, d, w, b, eps);
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// batch_norm (inference): y = x * scale[c] + shift[c] with
// scale = weight / sqrt(var + eps), shift = bias - mean * scale, as PyTorch's
// CPU kernel computes it.
//===----------------------------------------------------------------------===//

CLEAVE_CLONES void scaleShift(const float *__restrict x, float *__restrict y, int64_t n, float s,
                              float t) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * s + t;
}

Status buildBatchNorm(const KernelSignature &sig, KernelFn *fn) {
  BatchNormParams p;
  CLEAVE_RETURN_IF_ERROR(parseBatchNorm(sig, "cpu", {DType::F32}, &p));
  const int64_t channels = p.channels, inner = p.inner, planes = p.planes;
  const float eps = p.eps;
  *fn = [channels, inner, planes, eps](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *mean = static_cast<const float *>(call.inputs[1]);
    const float *var = static_cast<const float *>(call.inputs[2]);
    const float *w = static_cast<const float *>(call.inputs[3]);
    const float *b = static_cast<const float *>(call.inputs[4]);
    float *y = static_cast<float *>(call.outputs[0]);
    std::vector<float> scale(channels), shift(channels);
    for (int64_t c = 0; c < channels; ++c) {
      float s = 1.0f / std::sqrt(var[c] + eps);
      if (w)
        s *= w[c];
      scale[c] = s;
      shift[c] = (b ? b[c] : 0.0f) - mean[c] * s;
    }
    parallelRange(planes, inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float s = scale[p % channels], t = shift[p % channels];
        scaleShift(x + p * inner, y + p * inner, inner, s, t);
      }
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// softmax / log_softmax along one dim, numerically stable.
//===----------------------------------------------------------------------===//

CLEAVE_CLONES void softmaxRow(const float *__restrict x, float *__restrict y, int64_t d,
                              bool log) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < d; ++i)
    mx = x[i] > mx ? x[i] : mx;
  // A NaN anywhere makes the row NaN, as in PyTorch.
  float sum = 0.0f;
  if (log) {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; ++i)
      sum += vmath::exp(x[i] - mx);
    const float lse = mx + std::log(sum);
    for (int64_t i = 0; i < d; ++i)
      y[i] = x[i] - lse;
  } else {
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < d; ++i) {
      float e = vmath::exp(x[i] - mx);
      y[i] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < d; ++i)
      y[i] *= inv;
  }
}

/// Softmax along a dim that is not the last: `count` columns side by side,
/// `d` rows apart by `stride` elements, reduced elementwise across rows.
/// `mx` and `sum` are scratch of `count` floats.
CLEAVE_CLONES void softmaxColumns(const float *__restrict x, float *__restrict y, int64_t d,
                                  int64_t stride, int64_t count, bool log, float *__restrict mx,
                                  float *__restrict sum) {
  for (int64_t j = 0; j < count; ++j) {
    mx[j] = -std::numeric_limits<float>::infinity();
    sum[j] = 0.0f;
  }
  for (int64_t r = 0; r < d; ++r) {
    const float *xr = x + r * stride;
    for (int64_t j = 0; j < count; ++j)
      mx[j] = xr[j] > mx[j] ? xr[j] : mx[j];
  }
  for (int64_t r = 0; r < d; ++r) {
    const float *xr = x + r * stride;
    float *yr = y + r * stride;
    if (log) {
      for (int64_t j = 0; j < count; ++j)
        sum[j] += vmath::exp(xr[j] - mx[j]);
    } else {
      for (int64_t j = 0; j < count; ++j) {
        float e = vmath::exp(xr[j] - mx[j]);
        yr[j] = e;
        sum[j] += e;
      }
    }
  }
  if (log) {
    for (int64_t j = 0; j < count; ++j)
      sum[j] = mx[j] + std::log(sum[j]);
    for (int64_t r = 0; r < d; ++r) {
      const float *xr = x + r * stride;
      float *yr = y + r * stride;
      for (int64_t j = 0; j < count; ++j)
        yr[j] = xr[j] - sum[j];
    }
  } else {
    for (int64_t j = 0; j < count; ++j)
      sum[j] = 1.0f / sum[j];
    for (int64_t r = 0; r < d; ++r) {
      float *yr = y + r * stride;
      for (int64_t j = 0; j < count; ++j)
        yr[j] *= sum[j];
    }
  }
}

/// Columns per work item of a softmax along a non-last dim.
constexpr int64_t kSoftmaxBlock = 256;

template <bool Log> Status buildSoftmax(const KernelSignature &sig, KernelFn *fn) {
  SoftmaxParams p;
  CLEAVE_RETURN_IF_ERROR(parseSoftmax(sig, "cpu", {DType::F32}, &p));
  const int64_t outer = p.outer, d = p.d, inner = p.inner;
  if (inner == 1) {
    *fn = [outer, d](const KernelCall &call) -> Status {
      const float *x = static_cast<const float *>(call.inputs[0]);
      float *y = static_cast<float *>(call.outputs[0]);
      parallelRange(outer, 8 * d, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          softmaxRow(x + r * d, y + r * d, d, Log);
      });
      return {};
    };
    return {};
  }
  const int64_t blocks = (inner + kSoftmaxBlock - 1) / kSoftmaxBlock;
  *fn = [outer, d, inner, blocks](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    float *y = static_cast<float *>(call.outputs[0]);
    parallelRange(outer * blocks, 8 * d * std::min(inner, kSoftmaxBlock), [&](int64_t begin, int64_t end) {
      float mx[kSoftmaxBlock], sum[kSoftmaxBlock];
      for (int64_t item = begin; item < end; ++item) {
        int64_t o = item / blocks, j0 = (item % blocks) * kSoftmaxBlock;
        int64_t count = std::min(kSoftmaxBlock, inner - j0);
        int64_t base = o * d * inner + j0;
        softmaxColumns(x + base, y + base, d, inner, count, Log, mx, sum);
      }
    });
    return {};
  };
  return {};
}

} // namespace

void registerNormalizationKernels(KernelTable &table) {
  table["layer_norm"] = buildLayerNorm;
  table["batch_norm"] = buildBatchNorm;
  table["softmax"] = buildSoftmax<false>;
  table["log_softmax"] = buildSoftmax<true>;
}

} // namespace cleave::runtime::cpu
