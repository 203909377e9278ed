//===- Training.cpp - The training kernels of family A ---------------------===//
//
// assign, dropout_train, batch_norm_train, update_running_stats,
// batch_norm_backward, nll_loss, nll_loss_backward, softmax_backward,
// log_softmax_backward, layer_norm_backward, gelu_backward, silu_backward,
// relu_backward, adamw and sgd: the contracts of docs/plan-format.md ("Training kernels").
//
// Update kernels (assign, update_running_stats, adamw, sgd) get the
// persistent tensors they write as outputs, after any results, and read
// their old values there; their inputs are the operands they only read, an
// absent optional one left out (compiler/PlanEmitter.cpp).
//
// Hot loops are multi-versioned (CLEAVE_CLONES) and spread over the OpenMP
// pool; cross-row sums use fixed blocks, so results do not depend on the
// thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/Philox.h"
#include "runtime/TrainingParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/LayerNormStats.h"
#include "runtime/cpu/Registry.h"
#include "runtime/cpu/VecMath.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace cleave::runtime::cpu {
namespace {

//===----------------------------------------------------------------------===//
// assign: copies value into the persistent target (its output).
//===----------------------------------------------------------------------===//

Status buildAssign(const KernelSignature &sig, KernelFn *fn) {
  size_t size = 0;
  CLEAVE_RETURN_IF_ERROR(parseAssign(sig, &size));
  const int64_t bytes = static_cast<int64_t>(size);
  *fn = [bytes](const KernelCall &call) -> Status {
    const char *in = static_cast<const char *>(call.inputs[0]);
    char *out = static_cast<char *>(call.outputs[0]);
    parallelRange(bytes, 1, [&](int64_t begin, int64_t end) {
      std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin));
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// dropout_train: Philox-4x32-10 masks (runtime/Philox.h).
//===----------------------------------------------------------------------===//

/// Blocks of 4 elements drawn per batch: the words go to a buffer first so
/// that the masking loop vectorizes.
constexpr int64_t kDropoutBatch = 64;

CLEAVE_CLONES void dropoutBlocks(const philox::DropoutMask &mask, uint64_t firstBlock,
                                 int64_t blocks, uint32_t *__restrict words) {
  for (int64_t b = 0; b < blocks; ++b) {
    philox::Uint4 w = mask.words(firstBlock + static_cast<uint64_t>(b));
    words[4 * b] = w.x;
    words[4 * b + 1] = w.y;
    words[4 * b + 2] = w.z;
    words[4 * b + 3] = w.w;
  }
}

CLEAVE_CLONES void dropoutApply(const float *__restrict x, float *__restrict y,
                                const uint32_t *__restrict words, int64_t n, uint32_t threshold,
                                float scale) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = (words[i] >> 8) >= threshold ? x[i] * scale : 0.0f;
}

Status buildDropoutTrain(const KernelSignature &sig, KernelFn *fn) {
  DropoutParams d;
  CLEAVE_RETURN_IF_ERROR(parseDropoutTrain(sig, "cpu", {DType::F32}, &d));
  const int64_t n = d.n, perSample = d.perSample;
  const bool part = d.part;
  const double p = d.p;
  const uint64_t seed = d.seed;
  const uint32_t stream = d.stream;
  const float scale = d.scale;
  *fn = [n, p, seed, stream, scale, part, perSample](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const int64_t t = *static_cast<const int64_t *>(call.inputs[1]);
    const int64_t offset = part ? *static_cast<const int64_t *>(call.inputs[2]) : 0;
    if (offset < 0)
      return CLEAVE_ERROR("dropout_train: sample_offset ", offset, " is negative");
    const uint64_t base = static_cast<uint64_t>(offset) * static_cast<uint64_t>(perSample);
    float *y = static_cast<float *>(call.outputs[0]);
    const philox::DropoutMask mask(seed, stream, t, p);
    const int64_t batchElems = 4 * kDropoutBatch;
    const int64_t batches = (n + batchElems - 1) / batchElems;
    parallelRange(batches, 24 * batchElems, [&](int64_t begin, int64_t end) {
      // One block more: a part may start inside a block of 4.
      uint32_t words[4 * (kDropoutBatch + 1)];
      for (int64_t b = begin; b < end; ++b) {
        const int64_t first = b * batchElems;
        const int64_t count = std::min(batchElems, n - first);
        const uint64_t at = base + static_cast<uint64_t>(first);
        const int64_t skip = static_cast<int64_t>(at % 4);
        dropoutBlocks(mask, at / 4, (count + skip + 3) / 4, words);
        dropoutApply(x + first, y + first, words + skip, count, mask.threshold, scale);
      }
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// batch_norm_train, update_running_stats, batch_norm_backward. x is
// [N, C, ...]: N*C planes of `inner` elements, plane p of channel p % C.
// Per-plane partial sums (double) run in parallel over planes and are added
// per channel in plane order.
//===----------------------------------------------------------------------===//

CLEAVE_CLONES double sumSpan(const float *__restrict x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i)
    s += x[i];
  return s;
}

CLEAVE_CLONES double squaredDeviationSpan(const float *__restrict x, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    double c = static_cast<double>(x[i]) - mean;
    s += c * c;
  }
  return s;
}

CLEAVE_CLONES void scaleShiftSpan(const float *__restrict x, float *__restrict y, int64_t n,
                                  float a, float b) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * a + b;
}

/// Per channel, the sum over its planes of `partial[plane]`, in plane order.
void sumPlanes(const std::vector<double> &partial, const ChannelLayout &l,
               std::vector<double> *perChannel) {
  perChannel->assign(l.channels, 0.0);
  for (int64_t n = 0; n < l.batch; ++n)
    for (int64_t c = 0; c < l.channels; ++c)
      (*perChannel)[c] += partial[n * l.channels + c];
}

Status buildBatchNormTrain(const KernelSignature &sig, KernelFn *fn) {
  BatchNormTrainParams bn;
  CLEAVE_RETURN_IF_ERROR(parseBatchNormTrain(sig, "cpu", {DType::F32}, &bn));
  const ChannelLayout l = bn.layout;
  const float eps = bn.eps;
  *fn = [l, eps](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    const float *b = static_cast<const float *>(call.inputs[2]);
    float *y = static_cast<float *>(call.outputs[0]);
    float *meanOut = static_cast<float *>(call.outputs[1]);
    float *varOut = static_cast<float *>(call.outputs[2]);
    const int64_t planes = l.planes(), inner = l.inner, channels = l.channels;
    const double count = static_cast<double>(l.count());
    // Each plane's sum and its squared deviations from its own mean, read
    // twice while the plane is in cache (one pass over memory, not two);
    // the channel's variance adds the planes' (Chan et al.): the sum over
    // planes of m2 + inner·(plane mean − channel mean)².
    std::vector<double> sums(planes), m2s(planes), mean, var;
    parallelRange(planes, 2 * inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        sums[p] = sumSpan(x + p * inner, inner);
        m2s[p] = inner ? squaredDeviationSpan(x + p * inner, inner, sums[p] / inner) : 0.0;
      }
    });
    sumPlanes(sums, l, &mean);
    for (double &m : mean)
      m /= count;
    for (int64_t p = 0; p < planes; ++p) {
      const double d = inner ? sums[p] / inner - mean[p % channels] : 0.0;
      m2s[p] += static_cast<double>(inner) * d * d;
    }
    sumPlanes(m2s, l, &var);
    std::vector<float> scale(channels), shift(channels);
    for (int64_t c = 0; c < channels; ++c) {
      var[c] /= count;
      meanOut[c] = static_cast<float>(mean[c]);
      varOut[c] = static_cast<float>(var[c]);
      double a = (w ? static_cast<double>(w[c]) : 1.0) / std::sqrt(var[c] + eps);
      scale[c] = static_cast<float>(a);
      shift[c] = static_cast<float>((b ? static_cast<double>(b[c]) : 0.0) - mean[c] * a);
    }
    parallelRange(planes, inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        scaleShiftSpan(x + p * inner, y + p * inner, inner, scale[p % channels],
                       shift[p % channels]);
    });
    return {};
  };
  return {};
}

Status buildUpdateRunningStats(const KernelSignature &sig, KernelFn *fn) {
  RunningStatsParams rs;
  CLEAVE_RETURN_IF_ERROR(parseUpdateRunningStats(sig, "cpu", &rs));
  const int64_t channels = rs.channels;
  const double momentum = rs.momentum, unbias = rs.unbias;
  *fn = [channels, momentum, unbias](const KernelCall &call) -> Status {
    const float *mean = static_cast<const float *>(call.inputs[0]);
    const float *var = static_cast<const float *>(call.inputs[1]);
    float *rm = static_cast<float *>(call.outputs[0]);
    float *rv = static_cast<float *>(call.outputs[1]);
    parallelRange(channels, 8, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        rm[c] = static_cast<float>(momentum * mean[c] + (1 - momentum) * rm[c]);
        rv[c] = static_cast<float>(momentum * var[c] * unbias + (1 - momentum) * rv[c]);
      }
    });
    return {};
  };
  return {};
}

/// Σ g and Σ g·x̂ over one plane, x̂ = (x - mean)·rstd.
CLEAVE_CLONES void gradSumsSpan(const float *__restrict g, const float *__restrict x, int64_t n,
                                float mean, float rstd, double *sumG, double *sumGX) {
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < n; ++i) {
    float xhat = (x[i] - mean) * rstd;
    sg += g[i];
    sgx += static_cast<double>(g[i]) * xhat;
  }
  *sumG = sg;
  *sumGX = sgx;
}

/// dx = k·(g − mdb − x̂·mdw) over one plane.
CLEAVE_CLONES void batchNormDxSpan(const float *__restrict g, const float *__restrict x,
                                   float *__restrict dx, int64_t n, float mean, float rstd,
                                   float k, float mdb, float mdw) {
  for (int64_t i = 0; i < n; ++i) {
    float xhat = (x[i] - mean) * rstd;
    dx[i] = k * (g[i] - mdb - xhat * mdw);
  }
}

Status buildBatchNormBackward(const KernelSignature &sig, KernelFn *fn) {
  BatchNormBackwardParams bn;
  CLEAVE_RETURN_IF_ERROR(parseBatchNormBackward(sig, "cpu", {DType::F32}, &bn));
  const ChannelLayout l = bn.layout;
  const float eps = bn.eps;
  const bool hasWeight = bn.hasWeight;
  *fn = [l, eps, hasWeight](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    const float *mean = static_cast<const float *>(call.inputs[2]);
    const float *var = static_cast<const float *>(call.inputs[3]);
    const float *w = hasWeight ? static_cast<const float *>(call.inputs[4]) : nullptr;
    float *dx = static_cast<float *>(call.outputs[0]);
    float *dw = static_cast<float *>(call.outputs[1]);
    float *db = static_cast<float *>(call.outputs[2]);
    const int64_t planes = l.planes(), inner = l.inner, channels = l.channels;
    const double count = static_cast<double>(l.count());
    std::vector<float> rstd(channels);
    for (int64_t c = 0; c < channels; ++c)
      rstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + eps));
    std::vector<double> partialG(planes), partialGX(planes), sumG, sumGX;
    parallelRange(planes, 3 * inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        int64_t c = p % channels;
        gradSumsSpan(g + p * inner, x + p * inner, inner, mean[c], rstd[c], &partialG[p],
                     &partialGX[p]);
      }
    });
    sumPlanes(partialG, l, &sumG);
    sumPlanes(partialGX, l, &sumGX);
    std::vector<float> k(channels), mdb(channels), mdw(channels);
    for (int64_t c = 0; c < channels; ++c) {
      db[c] = static_cast<float>(sumG[c]);
      dw[c] = static_cast<float>(sumGX[c]);
      k[c] = (w ? w[c] : 1.0f) * rstd[c];
      mdb[c] = static_cast<float>(sumG[c] / count);
      mdw[c] = static_cast<float>(sumGX[c] / count);
    }
    parallelRange(planes, 3 * inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        int64_t c = p % channels;
        batchNormDxSpan(g + p * inner, x + p * inner, dx + p * inner, inner, mean[c], rstd[c],
                        k[c], mdb[c], mdw[c]);
      }
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// nll_loss and its backward: logp [N, C], target [N] (i64 or i32).
//===----------------------------------------------------------------------===//

int64_t targetAt(const void *target, bool wide, int64_t i) {
  return wide ? static_cast<const int64_t *>(target)[i]
              : static_cast<const int32_t *>(target)[i];
}

/// Checks every target; counts the rows not ignored.
Status countTargets(const NllParams &p, const void *target, int64_t *count) {
  int64_t n = 0;
  for (int64_t i = 0; i < p.rows; ++i) {
    int64_t t = targetAt(target, p.wideTarget, i);
    if (t == p.ignoreIndex)
      continue;
    if (t < 0 || t >= p.classes)
      return CLEAVE_ERROR("target ", t, " of row ", i, " is outside [0, ", p.classes,
                          ") and is not ignore_index ", p.ignoreIndex);
    ++n;
  }
  *count = n;
  return {};
}

Status buildNllLoss(const KernelSignature &sig, KernelFn *fn) {
  NllParams p;
  CLEAVE_RETURN_IF_ERROR(parseNllLoss(sig, "cpu", &p));
  std::string kernel = sig.kernel;
  *fn = [p, kernel](const KernelCall &call) -> Status {
    const float *logp = static_cast<const float *>(call.inputs[0]);
    const void *target = call.inputs[1];
    float *loss = static_cast<float *>(call.outputs[0]);
    double sum = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < p.rows; ++i) {
      int64_t t = targetAt(target, p.wideTarget, i);
      float l = 0.0f;
      if (t != p.ignoreIndex) {
        if (t < 0 || t >= p.classes)
          return CLEAVE_ERROR(kernel, ": target ", t, " of row ", i, " is outside [0, ",
                              p.classes, ") and is not ignore_index ", p.ignoreIndex);
        l = -logp[i * p.classes + t];
        ++count;
      }
      if (p.reduction == Reduction::None)
        loss[i] = l;
      else
        sum += l;
    }
    if (p.reduction == Reduction::Sum)
      *loss = static_cast<float>(sum);
    else if (p.reduction == Reduction::Mean)
      *loss = static_cast<float>(sum / static_cast<double>(count)); // 0/0: NaN
    return {};
  };
  return {};
}

Status buildNllLossBackward(const KernelSignature &sig, KernelFn *fn) {
  NllParams p;
  CLEAVE_RETURN_IF_ERROR(parseNllLossBackward(sig, "cpu", &p));
  std::string kernel = sig.kernel;
  *fn = [p, kernel](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const void *target = call.inputs[1];
    float *dx = static_cast<float *>(call.outputs[0]);
    int64_t count = 0;
    CLEAVE_RETURN_IF_ERROR(countTargets(p, target, &count).prepend(kernel));
    parallelRange(p.rows, p.classes, [&](int64_t begin, int64_t end) {
      std::memset(dx + begin * p.classes, 0,
                  static_cast<size_t>((end - begin) * p.classes) * sizeof(float));
    });
    float value = 0.0f;
    if (p.reduction == Reduction::Mean)
      value = -g[0] / static_cast<float>(count);
    else if (p.reduction == Reduction::Sum)
      value = -g[0];
    for (int64_t i = 0; i < p.rows; ++i) {
      int64_t t = targetAt(target, p.wideTarget, i);
      if (t == p.ignoreIndex)
        continue;
      dx[i * p.classes + t] = p.reduction == Reduction::None ? -g[i] : value;
    }
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// softmax_backward, log_softmax_backward along `dim`: [outer, d, inner].
//===----------------------------------------------------------------------===//

CLEAVE_CLONES void softmaxBackwardRow(const float *__restrict g, const float *__restrict y,
                                      float *__restrict dx, int64_t d, bool log) {
  float s = 0.0f;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i)
      s += g[i];
    for (int64_t i = 0; i < d; ++i)
      dx[i] = g[i] - vmath::exp(y[i]) * s;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i)
      s += g[i] * y[i];
    for (int64_t i = 0; i < d; ++i)
      dx[i] = y[i] * (g[i] - s);
  }
}

/// Along a dim that is not the last: `count` columns side by side, `d` rows
/// `stride` apart; `sum` is scratch of `count` floats.
CLEAVE_CLONES void softmaxBackwardColumns(const float *__restrict g, const float *__restrict y,
                                          float *__restrict dx, int64_t d, int64_t stride,
                                          int64_t count, bool log, float *__restrict sum) {
  for (int64_t j = 0; j < count; ++j)
    sum[j] = 0.0f;
  for (int64_t r = 0; r < d; ++r) {
    const float *gr = g + r * stride, *yr = y + r * stride;
    if (log)
      for (int64_t j = 0; j < count; ++j)
        sum[j] += gr[j];
    else
      for (int64_t j = 0; j < count; ++j)
        sum[j] += gr[j] * yr[j];
  }
  for (int64_t r = 0; r < d; ++r) {
    const float *gr = g + r * stride, *yr = y + r * stride;
    float *dr = dx + r * stride;
    if (log)
      for (int64_t j = 0; j < count; ++j)
        dr[j] = gr[j] - vmath::exp(yr[j]) * sum[j];
    else
      for (int64_t j = 0; j < count; ++j)
        dr[j] = yr[j] * (gr[j] - sum[j]);
  }
}

constexpr int64_t kColumnBlock = 256;

template <bool Log> Status buildSoftmaxBackward(const KernelSignature &sig, KernelFn *fn) {
  SoftmaxBackwardParams sp;
  CLEAVE_RETURN_IF_ERROR(parseSoftmaxBackward(sig, "cpu", {DType::F32}, &sp));
  const int64_t d = sp.d, outer = sp.outer, inner = sp.inner;
  if (inner == 1) {
    *fn = [outer, d](const KernelCall &call) -> Status {
      const float *g = static_cast<const float *>(call.inputs[0]);
      const float *y = static_cast<const float *>(call.inputs[1]);
      float *dx = static_cast<float *>(call.outputs[0]);
      parallelRange(outer, 4 * d, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          softmaxBackwardRow(g + r * d, y + r * d, dx + r * d, d, Log);
      });
      return {};
    };
    return {};
  }
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  *fn = [outer, d, inner, blocks](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *y = static_cast<const float *>(call.inputs[1]);
    float *dx = static_cast<float *>(call.outputs[0]);
    parallelRange(outer * blocks, 4 * d * std::min(inner, kColumnBlock),
                  [&](int64_t begin, int64_t end) {
                    float sum[kColumnBlock];
                    for (int64_t item = begin; item < end; ++item) {
                      int64_t o = item / blocks, j0 = (item % blocks) * kColumnBlock;
                      int64_t count = std::min(kColumnBlock, inner - j0);
                      int64_t base = o * d * inner + j0;
                      softmaxBackwardColumns(g + base, y + base, dx + base, d, inner, count, Log,
                                             sum);
                    }
                  });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// layer_norm_backward: rows of d, statistics recomputed as layer_norm does.
// dweight and dbias are summed per block of rows (double), then over blocks
// in order. The blocks depend on the row count only (at most
// kLayerNormBlocks of them), so the sums do not depend on the thread count
// and the partial sums stay within kLayerNormBlocks * 2 * d doubles.
//===----------------------------------------------------------------------===//

constexpr int64_t kLayerNormBlocks = 64;

/// One row: dx, and adds g·x̂ and g to the block's accumulators.
CLEAVE_CLONES void layerNormBackwardRow(const float *__restrict g, const float *__restrict x,
                                        const float *__restrict w, float *__restrict dx,
                                        int64_t d, float eps, double *__restrict accW,
                                        double *__restrict accB) {
  // The forward's statistics (Normalization.cpp, layerNormRow).
  float mean, rstd;
  layerNormStats(x, d, eps, &mean, &rstd);
  float sumG = 0.0f, sumGX = 0.0f;
  if (w) {
#pragma omp simd reduction(+ : sumG, sumGX)
    for (int64_t i = 0; i < d; ++i) {
      float xhat = (x[i] - mean) * rstd;
      float gh = g[i] * w[i];
      sumG += gh;
      sumGX += gh * xhat;
      accW[i] += static_cast<double>(g[i]) * xhat;
      accB[i] += g[i];
    }
  } else {
#pragma omp simd reduction(+ : sumG, sumGX)
    for (int64_t i = 0; i < d; ++i) {
      float xhat = (x[i] - mean) * rstd;
      sumG += g[i];
      sumGX += g[i] * xhat;
      accW[i] += static_cast<double>(g[i]) * xhat;
      accB[i] += g[i];
    }
  }
  const float meanG = sumG / static_cast<float>(d), meanGX = sumGX / static_cast<float>(d);
  if (w) {
    for (int64_t i = 0; i < d; ++i) {
      float xhat = (x[i] - mean) * rstd;
      dx[i] = rstd * (g[i] * w[i] - meanG - xhat * meanGX);
    }
  } else {
    for (int64_t i = 0; i < d; ++i) {
      float xhat = (x[i] - mean) * rstd;
      dx[i] = rstd * (g[i] - meanG - xhat * meanGX);
    }
  }
}

Status buildLayerNormBackward(const KernelSignature &sig, KernelFn *fn) {
  LayerNormBackwardParams ln;
  CLEAVE_RETURN_IF_ERROR(parseLayerNormBackward(sig, "cpu", {DType::F32}, &ln));
  const int64_t rows = ln.rows, d = ln.d;
  const float eps = ln.eps;
  const bool hasWeight = ln.hasWeight;
  *fn = [rows, d, eps, hasWeight](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    const float *w = hasWeight ? static_cast<const float *>(call.inputs[2]) : nullptr;
    float *dx = static_cast<float *>(call.outputs[0]);
    float *dw = static_cast<float *>(call.outputs[1]);
    float *db = static_cast<float *>(call.outputs[2]);
    const int64_t perBlock = std::max<int64_t>(1, (rows + kLayerNormBlocks - 1) / kLayerNormBlocks);
    const int64_t blocks = (rows + perBlock - 1) / perBlock;
    // Per block: d sums of g·x̂, then d sums of g.
    std::vector<double> acc(static_cast<size_t>(std::max<int64_t>(blocks, 1) * 2 * d), 0.0);
    parallelRange(blocks, 8 * d * perBlock, [&](int64_t begin, int64_t end) {
      for (int64_t blk = begin; blk < end; ++blk) {
        double *accW = acc.data() + blk * 2 * d, *accB = accW + d;
        int64_t r1 = std::min(rows, (blk + 1) * perBlock);
        for (int64_t r = blk * perBlock; r < r1; ++r)
          layerNormBackwardRow(g + r * d, x + r * d, w, dx + r * d, d, eps, accW, accB);
      }
    });
    parallelRange(d, 2 * blocks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double sw = 0, sb = 0;
        for (int64_t blk = 0; blk < blocks; ++blk) {
          sw += acc[blk * 2 * d + i];
          sb += acc[blk * 2 * d + d + i];
        }
        dw[i] = static_cast<float>(sw);
        db[i] = static_cast<float>(sb);
      }
    });
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// gelu_backward, silu_backward, relu_backward: elementwise, PyTorch's formulas.
//===----------------------------------------------------------------------===//

CLEAVE_CLONES void geluErfBackwardSpan(const float *__restrict g, const float *__restrict x,
                                       float *__restrict dx, int64_t n) {
  const float kAlpha = 0.70710678118654752440f;               // M_SQRT1_2
  const float kBeta = 1.12837916709551257390f * 0.70710678118654752440f * 0.5f; // M_2_SQRTPI·M_SQRT1_2/2
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float cdf = 0.5f * (1.0f + vmath::erf(v * kAlpha));
    float pdf = kBeta * vmath::exp(-0.5f * v * v);
    dx[i] = g[i] * (cdf + v * pdf);
  }
}

CLEAVE_CLONES void geluTanhBackwardSpan(const float *__restrict g, const float *__restrict x,
                                        float *__restrict dx, int64_t n) {
  const float kBeta = 1.41421356237309504880f * 1.12837916709551257390f * 0.5f; // √2·2/√π/2
  const float kKappa = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float xSq = v * v;
    float xCube = xSq * v;
    float inner = kBeta * (v + kKappa * xCube);
    float tanhInner = vmath::tanh(inner);
    float left = 0.5f * v;
    float right = 1.0f + tanhInner;
    float leftDerivative = 0.5f * right;
    float rightDerivative = 1.0f - tanhInner * tanhInner;
    float innerDerivative = kBeta * (1.0f + 3.0f * kKappa * xSq);
    dx[i] = g[i] * (leftDerivative + left * rightDerivative * innerDerivative);
  }
}

CLEAVE_CLONES void siluBackwardSpan(const float *__restrict g, const float *__restrict x,
                                    float *__restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    float s = 1.0f / (1.0f + vmath::exp(-v));
    dx[i] = g[i] * s * (1.0f + v * (1.0f - s));
  }
}

// Where the output is not positive (NaN included) the gradient is 0, as
// threshold_backward: a select, not g * (y > 0), which would turn an infinite
// gradient into NaN.
CLEAVE_CLONES void reluBackwardSpan(const float *__restrict g, const float *__restrict y,
                                    float *__restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gv = g[i];
    dx[i] = y[i] > 0.0f ? gv : 0.0f;
  }
}

using BackwardSpan = void (*)(const float *, const float *, float *, int64_t);

/// `cost`: parallelRange's work per element.
KernelFn activationBackward(int64_t n, BackwardSpan span, int64_t cost = 12) {
  return [n, span, cost](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    float *dx = static_cast<float *>(call.outputs[0]);
    parallelRange(n, cost, [&](int64_t begin, int64_t end) {
      span(g + begin, x + begin, dx + begin, end - begin);
    });
    return {};
  };
}

Status buildGeluBackward(const KernelSignature &sig, KernelFn *fn) {
  ActivationBackwardParams a;
  CLEAVE_RETURN_IF_ERROR(parseGeluBackward(sig, "cpu", {DType::F32}, &a));
  *fn = activationBackward(a.n, a.tanh ? geluTanhBackwardSpan : geluErfBackwardSpan);
  return {};
}

Status buildSiluBackward(const KernelSignature &sig, KernelFn *fn) {
  ActivationBackwardParams a;
  CLEAVE_RETURN_IF_ERROR(parseSiluBackward(sig, "cpu", {DType::F32}, &a));
  *fn = activationBackward(a.n, siluBackwardSpan);
  return {};
}

Status buildReluBackward(const KernelSignature &sig, KernelFn *fn) {
  ActivationBackwardParams a;
  CLEAVE_RETURN_IF_ERROR(parseReluBackward(sig, "cpu", {DType::F32}, &a));
  *fn = activationBackward(a.n, reluBackwardSpan, 1);
  return {};
}

//===----------------------------------------------------------------------===//
// Optimizer updates: adamw, sgd. Inputs grad, step, grad_scale? (absent:
// left out); outputs the persistent tensors they update. The float
// operations follow torch.optim's single-tensor implementations in order,
// each scalar rounded to f32 where PyTorch's tensor ops round it.
//===----------------------------------------------------------------------===//

Status readStep(const std::string &kernel, const KernelCall &call, int64_t *t) {
  *t = *static_cast<const int64_t *>(call.inputs[1]);
  return *t < 1 ? stepError(kernel, *t) : Status();
}

float gradScale(bool hasScale, const KernelCall &call) {
  return hasScale ? *static_cast<const float *>(call.inputs[2]) : 1.0f;
}

CLEAVE_CLONES void adamwSpan(float *__restrict p, float *__restrict m, float *__restrict v,
                             const float *__restrict grad, int64_t n, AdamWScalars s) {
  for (int64_t i = 0; i < n; ++i)
    adamwElement(p[i], m[i], v[i], grad[i], s);
}

Status buildAdamW(const KernelSignature &sig, KernelFn *fn) {
  AdamWParams a;
  CLEAVE_RETURN_IF_ERROR(parseAdamW(sig, "cpu", &a));
  const std::string kernel = sig.kernel;
  *fn = [a, kernel](const KernelCall &call) -> Status {
    int64_t t = 0;
    CLEAVE_RETURN_IF_ERROR(readStep(kernel, call, &t));
    const AdamWScalars s = adamwScalars(a, t, gradScale(a.hasScale, call));
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *p = static_cast<float *>(call.outputs[0]);
    float *m = static_cast<float *>(call.outputs[1]);
    float *v = static_cast<float *>(call.outputs[2]);
    parallelRange(a.n, 8, [&](int64_t begin, int64_t end) {
      adamwSpan(p + begin, m + begin, v + begin, grad + begin, end - begin, s);
    });
    return {};
  };
  return {};
}

CLEAVE_CLONES void sgdSpan(float *__restrict p, float *__restrict buf,
                           const float *__restrict grad, int64_t n, SgdScalars s) {
  if (buf)
    for (int64_t i = 0; i < n; ++i)
      sgdElement(p[i], buf + i, grad[i], s);
  else
    for (int64_t i = 0; i < n; ++i)
      sgdElement(p[i], nullptr, grad[i], s);
}

Status buildSgd(const KernelSignature &sig, KernelFn *fn) {
  SgdParams a;
  CLEAVE_RETURN_IF_ERROR(parseSgd(sig, "cpu", &a));
  const std::string kernel = sig.kernel;
  *fn = [a, kernel](const KernelCall &call) -> Status {
    int64_t t = 0;
    CLEAVE_RETURN_IF_ERROR(readStep(kernel, call, &t));
    const SgdScalars s = sgdScalars(a, t, gradScale(a.hasScale, call));
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *p = static_cast<float *>(call.outputs[0]);
    float *buf = a.hasBuffer ? static_cast<float *>(call.outputs[1]) : nullptr;
    parallelRange(a.n, 4, [&](int64_t begin, int64_t end) {
      sgdSpan(p + begin, buf ? buf + begin : nullptr, grad + begin, end - begin, s);
    });
    return {};
  };
  return {};
}

} // namespace

void registerTrainingKernels(KernelTable &table) {
  // assign copies bytes of any dtype (i64 counters, bf16 or f32 tensors).
  table["assign"] = {buildAssign, /*takesBf16=*/true};
  table["dropout_train"] = buildDropoutTrain;
  table["batch_norm_train"] = buildBatchNormTrain;
  table["batch_norm_backward"] = buildBatchNormBackward;
  table["nll_loss"] = buildNllLoss;
  table["nll_loss_backward"] = buildNllLossBackward;
  table["softmax_backward"] = buildSoftmaxBackward<false>;
  table["log_softmax_backward"] = buildSoftmaxBackward<true>;
  table["layer_norm_backward"] = buildLayerNormBackward;
  table["gelu_backward"] = buildGeluBackward;
  table["silu_backward"] = buildSiluBackward;
  table["relu_backward"] = buildReluBackward;
  // Updates read the old values of their outputs, which the bf16 widening
  // does not stage: they see bf16 themselves and reject it (f32 only).
  table["update_running_stats"] = {buildUpdateRunningStats, /*takesBf16=*/true};
  table["adamw"] = {buildAdamW, /*takesBf16=*/true};
  table["sgd"] = {buildSgd, /*takesBf16=*/true};
}

} // namespace cleave::runtime::cpu
