//===- Training.cpp - The training kernels of family A ---------------------===//
//
// assign, dropout_train, batch_norm_train, update_running_stats,
// batch_norm_backward, nll_loss, nll_loss_backward, softmax_backward,
// log_softmax_backward, layer_norm_backward, gelu_backward, silu_backward,
// adamw and sgd: the contracts of docs/plan-format.md ("Training kernels").
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
// Validation helpers. Every message starts with the kernel name and names the
// operand.
//===----------------------------------------------------------------------===//

Status checkF32(const KernelSignature &sig, const char *name, const TensorDesc &desc) {
  return checkDType(sig, name, desc, {DType::F32});
}

/// `desc` (operand `name`) must be exactly `dtype` with `shape`.
Status checkDesc(const KernelSignature &sig, const char *name, const TensorDesc &desc,
                 DType dtype, const Shape &shape, const char *how = nullptr) {
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, name, desc, {dtype}));
  if (desc.shape != shape)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " is ", describe(desc.shape, desc.dtype),
                        ", expected ", describe(shape, dtype), how ? " (" : "", how ? how : "",
                        how ? ")" : "");
  return {};
}

/// The i64 scalar step counter at input `index`.
Status checkStep(const KernelSignature &sig, size_t index) {
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, index, "step"));
  return checkDesc(sig, "step", *sig.inputs[index], DType::I64, {}, "the i64 step counter");
}

Status getFloat(const KernelSignature &sig, const char *name, double *out) {
  return withKernel(sig, sig.attrs.getFloat(name, out));
}

Status getInt(const KernelSignature &sig, const char *name, int64_t *out) {
  return withKernel(sig, sig.attrs.getInt(name, out));
}

Status readEps(const KernelSignature &sig, float *eps) {
  double value = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "eps", &value));
  if (!(value >= 0))
    return CLEAVE_ERROR(sig.kernel, ": eps must be >= 0, got ", value);
  *eps = static_cast<float>(value);
  return {};
}

/// A loss's reduction and ignore_index (nll_loss and its backward).
enum class Reduction { Mean, Sum, None };

Status readNllAttrs(const KernelSignature &sig, Reduction *reduction, int64_t *ignoreIndex) {
  std::string name;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("reduction", &name, "mean")));
  if (name == "mean")
    *reduction = Reduction::Mean;
  else if (name == "sum")
    *reduction = Reduction::Sum;
  else if (name == "none")
    *reduction = Reduction::None;
  else
    return CLEAVE_ERROR(sig.kernel, ": reduction must be mean, sum or none, got '", name, "'");
  return withKernel(sig, sig.attrs.getInt("ignore_index", ignoreIndex, -100));
}

//===----------------------------------------------------------------------===//
// assign: copies value into the persistent target (its output).
//===----------------------------------------------------------------------===//

Status buildAssign(const KernelSignature &sig, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "value"));
  const TensorDesc &value = *sig.inputs[0], &target = sig.outputs[0];
  if (value != target)
    return CLEAVE_ERROR(sig.kernel, ": value ", describe(value.shape, value.dtype),
                        " does not match the target ", describe(target.shape, target.dtype),
                        " (same dtype and shape)");
  const int64_t bytes = static_cast<int64_t>(target.bytes());
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "input", x));
  CLEAVE_RETURN_IF_ERROR(checkStep(sig, 1));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  double p = 0;
  int64_t seed = 0, stream = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "p", &p));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "seed", &seed));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "stream", &stream));
  if (!(p > 0 && p < 1))
    return CLEAVE_ERROR(sig.kernel, ": p must be in (0, 1), got ", p);
  if (seed < 0)
    return CLEAVE_ERROR(sig.kernel, ": seed must be >= 0, got ", seed);
  if (stream < 0 || stream > int64_t(UINT32_MAX))
    return CLEAVE_ERROR(sig.kernel, ": stream must be in [0, 2^32), got ", stream);
  const int64_t n = x.numel();
  // A part of the step's batch (input 2: its first sample; `samples`: how
  // many it holds): element i is element offset·(n / samples) + i of the
  // whole batch's tensor, whose mask it draws.
  const bool part = sig.inputs.size() == 3;
  int64_t samples = 0;
  if (part) {
    CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "sample_offset"));
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "sample_offset", *sig.inputs[2], DType::I64, {},
                                     "the i64 first sample"));
    CLEAVE_RETURN_IF_ERROR(getInt(sig, "samples", &samples));
    if (samples < 1 || x.rank() == 0 || x.shape[0] % samples)
      return CLEAVE_ERROR(sig.kernel, ": dim 0 of the input is not the rows of ", samples,
                          " samples");
  } else if (sig.attrs.has("samples")) {
    return CLEAVE_ERROR(sig.kernel, ": 'samples' needs the sample_offset input");
  }
  const int64_t perSample = part ? n / samples : 0;
  const float scale = philox::dropoutScale(p);
  *fn = [n, p, seed, stream, scale, part, perSample](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const int64_t t = *static_cast<const int64_t *>(call.inputs[1]);
    const int64_t offset = part ? *static_cast<const int64_t *>(call.inputs[2]) : 0;
    if (offset < 0)
      return CLEAVE_ERROR("dropout_train: sample_offset ", offset, " is negative");
    const uint64_t base = static_cast<uint64_t>(offset) * static_cast<uint64_t>(perSample);
    float *y = static_cast<float *>(call.outputs[0]);
    const philox::DropoutMask mask(static_cast<uint64_t>(seed), static_cast<uint32_t>(stream), t,
                                   p);
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

struct ChannelLayout {
  int64_t batch = 0, channels = 0, inner = 0;
  int64_t planes() const { return batch * channels; }
  int64_t count() const { return batch * inner; } // values per channel
};

Status checkChannelInput(const KernelSignature &sig, const char *name, const TensorDesc &x,
                         ChannelLayout *layout) {
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, name, x));
  if (x.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " must be [N, C, ...], got ",
                        describe(x.shape, x.dtype));
  layout->batch = x.shape[0];
  layout->channels = x.shape[1];
  layout->inner = numElements(Shape(x.shape.begin() + 2, x.shape.end()));
  return {};
}

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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  ChannelLayout l;
  CLEAVE_RETURN_IF_ERROR(checkChannelInput(sig, "input", x, &l));
  const Shape channelShape = {l.channels};
  if (sig.inputs[1])
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "weight", *sig.inputs[1], DType::F32, channelShape));
  if (sig.inputs[2])
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "bias", *sig.inputs[2], DType::F32, channelShape));
  if (l.count() < 2)
    return CLEAVE_ERROR(sig.kernel, ": needs more than one value per channel, got ",
                        describe(x.shape, x.dtype));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 0 (y)", sig.outputs[0], DType::F32, x.shape,
                                   "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 1 (mean)", sig.outputs[1], DType::F32,
                                   channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 2 (var)", sig.outputs[2], DType::F32,
                                   channelShape));
  float eps = 0;
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &eps));
  *fn = [l, eps](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    const float *b = static_cast<const float *>(call.inputs[2]);
    float *y = static_cast<float *>(call.outputs[0]);
    float *meanOut = static_cast<float *>(call.outputs[1]);
    float *varOut = static_cast<float *>(call.outputs[2]);
    const int64_t planes = l.planes(), inner = l.inner, channels = l.channels;
    const double count = static_cast<double>(l.count());
    std::vector<double> partial(planes), mean, var;
    parallelRange(planes, inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        partial[p] = sumSpan(x + p * inner, inner);
    });
    sumPlanes(partial, l, &mean);
    for (double &m : mean)
      m /= count;
    parallelRange(planes, 2 * inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p)
        partial[p] = squaredDeviationSpan(x + p * inner, inner, mean[p % channels]);
    });
    sumPlanes(partial, l, &var);
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "mean"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "var"));
  const TensorDesc &mean = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "mean", mean));
  if (mean.rank() != 1)
    return CLEAVE_ERROR(sig.kernel, ": mean must be 1-D [C], got ",
                        describe(mean.shape, mean.dtype));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "var", *sig.inputs[1], DType::F32, mean.shape,
                                   "the mean's"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "running_mean", sig.outputs[0], DType::F32, mean.shape,
                                   "the mean's"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "running_var", sig.outputs[1], DType::F32, mean.shape,
                                   "the mean's"));
  double momentum = 0;
  int64_t count = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "momentum", &momentum));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "count", &count));
  if (!(momentum >= 0 && momentum <= 1))
    return CLEAVE_ERROR(sig.kernel, ": momentum must be in [0, 1], got ", momentum);
  if (count < 2)
    return CLEAVE_ERROR(sig.kernel, ": count must be > 1 (the unbiased variance needs two "
                        "values per channel), got ", count);
  const int64_t channels = mean.numel();
  const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 4, 5, 3));
  const char *names[] = {"grad", "input", "mean", "var"};
  for (size_t i = 0; i < 4; ++i)
    CLEAVE_RETURN_IF_ERROR(requirePresent(sig, i, names[i]));
  const TensorDesc &x = *sig.inputs[1];
  ChannelLayout l;
  CLEAVE_RETURN_IF_ERROR(checkChannelInput(sig, "input", x, &l));
  const Shape channelShape = {l.channels};
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, x.shape,
                                   "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "mean", *sig.inputs[2], DType::F32, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "var", *sig.inputs[3], DType::F32, channelShape));
  const bool hasWeight = sig.inputs.size() == 5 && sig.inputs[4];
  if (hasWeight)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "weight", *sig.inputs[4], DType::F32, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 0 (grad_input)", sig.outputs[0], DType::F32,
                                   x.shape, "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 1 (grad_weight)", sig.outputs[1], DType::F32,
                                   channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 2 (grad_bias)", sig.outputs[2], DType::F32,
                                   channelShape));
  float eps = 0;
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &eps));
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

struct NllParams {
  int64_t rows = 0, classes = 0;
  bool wideTarget = false;
  Reduction reduction = Reduction::Mean;
  int64_t ignoreIndex = -100;
};

Status checkTarget(const KernelSignature &sig, const TensorDesc &target, int64_t rows,
                   NllParams *p) {
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "target", target, {DType::I64, DType::I32}));
  if (target.shape != Shape{rows})
    return CLEAVE_ERROR(sig.kernel, ": target is ", describe(target.shape, target.dtype),
                        ", expected [", rows, "] (one class index per row)");
  p->wideTarget = target.dtype == DType::I64;
  return {};
}

Shape lossShape(const NllParams &p) {
  return p.reduction == Reduction::None ? Shape{p.rows} : Shape{};
}

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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "target"));
  const TensorDesc &logp = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "input", logp));
  if (logp.rank() != 2)
    return CLEAVE_ERROR(sig.kernel, ": input (log-probabilities) must be [N, C], got ",
                        describe(logp.shape, logp.dtype));
  NllParams p;
  p.rows = logp.shape[0];
  p.classes = logp.shape[1];
  CLEAVE_RETURN_IF_ERROR(checkTarget(sig, *sig.inputs[1], p.rows, &p));
  CLEAVE_RETURN_IF_ERROR(readNllAttrs(sig, &p.reduction, &p.ignoreIndex));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, TensorDesc{DType::F32, lossShape(p)},
                                     p.reduction == Reduction::None ? "reduction none: [N]"
                                                                    : "a scalar"));
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "target"));
  const TensorDesc &out = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "output", out));
  if (out.rank() != 2)
    return CLEAVE_ERROR(sig.kernel, ": output (the input's gradient) must be [N, C], got ",
                        describe(out.shape, out.dtype));
  NllParams p;
  p.rows = out.shape[0];
  p.classes = out.shape[1];
  CLEAVE_RETURN_IF_ERROR(checkTarget(sig, *sig.inputs[1], p.rows, &p));
  CLEAVE_RETURN_IF_ERROR(readNllAttrs(sig, &p.reduction, &p.ignoreIndex));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, lossShape(p),
                                   p.reduction == Reduction::None ? "the loss of reduction none"
                                                                  : "the scalar loss"));
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "output"));
  const TensorDesc &y = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "output (the forward's result)", y));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, y.shape,
                                   "the forward result's shape"));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "dim", &dim));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, y.rank()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, y, "same as the forward's result"));
  const int64_t d = y.shape[dim];
  const int64_t outer = numElements(Shape(y.shape.begin(), y.shape.begin() + dim));
  const int64_t inner = numElements(Shape(y.shape.begin() + dim + 1, y.shape.end()));
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
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "input"));
  const TensorDesc &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "input", x));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, x.shape,
                                   "the input's shape"));
  std::vector<int64_t> normalized;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("normalized_shape", &normalized)));
  if (normalized.empty() || normalized.size() > x.shape.size() ||
      !std::equal(normalized.begin(), normalized.end(), x.shape.end() - normalized.size()))
    return CLEAVE_ERROR(sig.kernel, ": normalized_shape ", formatList(normalized),
                        " must be the trailing dims of the input ", describe(x.shape, x.dtype));
  const Shape affine(normalized.begin(), normalized.end());
  const bool hasWeight = sig.inputs.size() == 3 && sig.inputs[2];
  if (hasWeight)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "weight", *sig.inputs[2], DType::F32, affine,
                                     "normalized_shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 0 (grad_input)", sig.outputs[0], DType::F32,
                                   x.shape, "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 1 (grad_weight)", sig.outputs[1], DType::F32,
                                   affine, "normalized_shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "output 2 (grad_bias)", sig.outputs[2], DType::F32,
                                   affine, "normalized_shape"));
  float eps = 0;
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &eps));
  const int64_t d = numElements(affine);
  const int64_t rows = d ? x.numel() / d : 0;
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
// gelu_backward, silu_backward: elementwise, PyTorch's formulas.
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

using BackwardSpan = void (*)(const float *, const float *, float *, int64_t);

Status buildActivationBackward(const KernelSignature &sig, BackwardSpan span, KernelFn *fn) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "input"));
  const TensorDesc &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, "input", x));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, x.shape,
                                   "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  const int64_t n = x.numel();
  *fn = [n, span](const KernelCall &call) -> Status {
    const float *g = static_cast<const float *>(call.inputs[0]);
    const float *x = static_cast<const float *>(call.inputs[1]);
    float *dx = static_cast<float *>(call.outputs[0]);
    parallelRange(n, 12, [&](int64_t begin, int64_t end) {
      span(g + begin, x + begin, dx + begin, end - begin);
    });
    return {};
  };
  return {};
}

Status buildGeluBackward(const KernelSignature &sig, KernelFn *fn) {
  std::string approximation;
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getString("approximation", &approximation, "none")));
  BackwardSpan span = nullptr;
  if (approximation == "none")
    span = geluErfBackwardSpan;
  else if (approximation == "tanh")
    span = geluTanhBackwardSpan;
  else
    return CLEAVE_ERROR(sig.kernel, ": approximation '", approximation,
                        "' is neither 'none' nor 'tanh'");
  return buildActivationBackward(sig, span, fn);
}

Status buildSiluBackward(const KernelSignature &sig, KernelFn *fn) {
  return buildActivationBackward(sig, siluBackwardSpan, fn);
}

//===----------------------------------------------------------------------===//
// Optimizer updates: adamw, sgd. Inputs grad, step, grad_scale? (absent:
// left out); outputs the persistent tensors they update. The float
// operations follow torch.optim's single-tensor implementations in order,
// each scalar rounded to f32 where PyTorch's tensor ops round it.
//===----------------------------------------------------------------------===//

enum class ScheduleKind { Constant, Linear, Cosine };

struct Schedule {
  double lr = 0;
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup = 0, decay = 0;

  /// lr · λ(t − 1) (docs/training.md).
  double at(int64_t t) const {
    const double s = static_cast<double>(t - 1), w = static_cast<double>(warmup);
    if (s < w)
      return lr * (s / w);
    const double span = std::max(1.0, static_cast<double>(decay - warmup));
    switch (kind) {
    case ScheduleKind::Constant: return lr;
    case ScheduleKind::Linear:
      return lr * std::max(0.0, (static_cast<double>(decay) - s) / span);
    case ScheduleKind::Cosine:
      return lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, (s - w) / span))));
    }
    return lr;
  }
};

Status readSchedule(const KernelSignature &sig, Schedule *out) {
  std::string kind;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "lr", &out->lr));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("schedule", &kind)));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "warmup_steps", &out->warmup));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "decay_steps", &out->decay));
  if (kind == "constant")
    out->kind = ScheduleKind::Constant;
  else if (kind == "linear")
    out->kind = ScheduleKind::Linear;
  else if (kind == "cosine")
    out->kind = ScheduleKind::Cosine;
  else
    return CLEAVE_ERROR(sig.kernel, ": schedule must be constant, linear or cosine, got '", kind,
                        "'");
  if (out->warmup < 0 || out->decay < 0)
    return CLEAVE_ERROR(sig.kernel, ": warmup_steps and decay_steps must be >= 0, got ",
                        out->warmup, " and ", out->decay);
  if (out->kind != ScheduleKind::Constant && out->decay == 0)
    return CLEAVE_ERROR(sig.kernel, ": a ", kind, " schedule needs decay_steps > 0");
  if (!(out->lr >= 0))
    return CLEAVE_ERROR(sig.kernel, ": lr must be >= 0, got ", out->lr);
  return {};
}

/// grad [param's shape], step, grad_scale? as inputs; `params` outputs of
/// the gradient's shape (f32). Returns whether grad_scale is present.
Status checkUpdate(const KernelSignature &sig, const std::vector<const char *> &outputs,
                   bool *hasScale) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, outputs.size()));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  const TensorDesc &param = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, outputs[0], param));
  for (size_t i = 1; i < outputs.size(); ++i)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, outputs[i], sig.outputs[i], DType::F32, param.shape,
                                     "the param's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad", *sig.inputs[0], DType::F32, param.shape,
                                   "the param's shape"));
  CLEAVE_RETURN_IF_ERROR(checkStep(sig, 1));
  *hasScale = sig.inputs.size() == 3 && sig.inputs[2];
  if (*hasScale)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, "grad_scale", *sig.inputs[2], DType::F32, {},
                                     "the f32 clipping scale"));
  return {};
}

Status readStep(const std::string &kernel, const KernelCall &call, int64_t *t) {
  *t = *static_cast<const int64_t *>(call.inputs[1]);
  if (*t < 1)
    return CLEAVE_ERROR(kernel, ": step t = ", *t,
                        " is < 1; the optimizer phase increments step before the updates");
  return {};
}

struct AdamWScalars {
  float scale, decay, weight, oneMinusWeight, beta2, oneMinusBeta2, bc2Sqrt, eps, negStepSize;
  bool smallWeight;
};

CLEAVE_CLONES void adamwSpan(float *__restrict p, float *__restrict m, float *__restrict v,
                             const float *__restrict grad, int64_t n, AdamWScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.scale;
    float param = p[i] * s.decay;
    // exp_avg.lerp_(grad, 1 - beta1), as at::lerp.
    float mi = m[i];
    mi = s.smallWeight ? mi + s.weight * (g - mi) : g - (g - mi) * s.oneMinusWeight;
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2).
    float vi = v[i] * s.beta2;
    vi = vi + s.oneMinusBeta2 * g * g;
    // denom = exp_avg_sq.sqrt() / sqrt(bc2) + eps; param.addcdiv_(m, denom, -step_size).
    const float denom = std::sqrt(vi) / s.bc2Sqrt + s.eps;
    param = param + s.negStepSize * mi / denom;
    p[i] = param;
    m[i] = mi;
    v[i] = vi;
  }
}

Status buildAdamW(const KernelSignature &sig, KernelFn *fn) {
  bool hasScale = false;
  CLEAVE_RETURN_IF_ERROR(checkUpdate(sig, {"param", "exp_avg", "exp_avg_sq"}, &hasScale));
  Schedule schedule;
  CLEAVE_RETURN_IF_ERROR(readSchedule(sig, &schedule));
  double beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "beta1", &beta1));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "beta2", &beta2));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "eps", &eps));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "weight_decay", &weightDecay));
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return CLEAVE_ERROR(sig.kernel, ": beta1 and beta2 must be in [0, 1), got ", beta1, ", ",
                        beta2);
  if (!(eps >= 0) || !(weightDecay >= 0))
    return CLEAVE_ERROR(sig.kernel, ": eps and weight_decay must be >= 0, got ", eps, ", ",
                        weightDecay);
  const int64_t n = sig.outputs[0].numel();
  const std::string kernel = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    int64_t t = 0;
    CLEAVE_RETURN_IF_ERROR(readStep(kernel, call, &t));
    const double lr = schedule.at(t);
    const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
    const double weight = 1 - beta1;
    AdamWScalars s;
    s.scale = hasScale ? *static_cast<const float *>(call.inputs[2]) : 1.0f;
    s.decay = static_cast<float>(1 - lr * weightDecay);
    s.weight = static_cast<float>(weight);
    s.oneMinusWeight = 1.0f - s.weight;
    s.smallWeight = std::fabs(s.weight) < 0.5f;
    s.beta2 = static_cast<float>(beta2);
    s.oneMinusBeta2 = static_cast<float>(1 - beta2);
    s.bc2Sqrt = static_cast<float>(std::sqrt(bc2));
    s.eps = static_cast<float>(eps);
    s.negStepSize = static_cast<float>(-(lr / bc1));
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *p = static_cast<float *>(call.outputs[0]);
    float *m = static_cast<float *>(call.outputs[1]);
    float *v = static_cast<float *>(call.outputs[2]);
    parallelRange(n, 8, [&](int64_t begin, int64_t end) {
      adamwSpan(p + begin, m + begin, v + begin, grad + begin, end - begin, s);
    });
    return {};
  };
  return {};
}

struct SgdScalars {
  float scale, weightDecay, momentum, oneMinusDampening, negLr;
  bool decay, first, nesterov;
};

CLEAVE_CLONES void sgdSpan(float *__restrict p, float *__restrict buf,
                           const float *__restrict grad, int64_t n, SgdScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float d = grad[i] * s.scale;
    if (s.decay)
      d = d + s.weightDecay * p[i]; // grad.add(param, alpha=weight_decay)
    if (buf) {
      float b = s.first ? d : buf[i] * s.momentum + s.oneMinusDampening * d;
      buf[i] = b;
      d = s.nesterov ? d + s.momentum * b : b;
    }
    p[i] = p[i] + s.negLr * d; // param.add_(grad, alpha=-lr)
  }
}

Status buildSgd(const KernelSignature &sig, KernelFn *fn) {
  // One output (param) or two (param, momentum_buffer); which one momentum
  // says.
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, sig.outputs.size() == 2 ? 2 : 1));
  double momentum = 0, dampening = 0, weightDecay = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "momentum", &momentum));
  const bool hasBuffer = momentum != 0;
  bool hasScale = false;
  if (!hasBuffer && sig.outputs.size() == 2)
    return CLEAVE_ERROR(sig.kernel, ": has a momentum_buffer output but momentum is 0; the "
                        "buffer is present exactly when momentum != 0");
  if (hasBuffer && sig.outputs.size() == 1)
    return CLEAVE_ERROR(sig.kernel, ": momentum ", momentum, " needs a momentum_buffer output "
                        "after param (2 outputs), got 1");
  if (hasBuffer)
    CLEAVE_RETURN_IF_ERROR(checkUpdate(sig, {"param", "momentum_buffer"}, &hasScale));
  else
    CLEAVE_RETURN_IF_ERROR(checkUpdate(sig, {"param"}, &hasScale));
  Schedule schedule;
  CLEAVE_RETURN_IF_ERROR(readSchedule(sig, &schedule));
  bool nesterov = false;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "dampening", &dampening));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "weight_decay", &weightDecay));
  if (!sig.attrs.has("nesterov"))
    return CLEAVE_ERROR(sig.kernel, ": missing attribute 'nesterov'");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("nesterov", &nesterov, false)));
  if (!(momentum >= 0) || !(dampening >= 0) || !(weightDecay >= 0))
    return CLEAVE_ERROR(sig.kernel, ": momentum, dampening and weight_decay must be >= 0, got ",
                        momentum, ", ", dampening, ", ", weightDecay);
  if (nesterov && (momentum <= 0 || dampening != 0))
    return CLEAVE_ERROR(sig.kernel, ": nesterov momentum requires a momentum and zero dampening");
  const int64_t n = sig.outputs[0].numel();
  const std::string kernel = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    int64_t t = 0;
    CLEAVE_RETURN_IF_ERROR(readStep(kernel, call, &t));
    const double lr = schedule.at(t);
    SgdScalars s;
    s.scale = hasScale ? *static_cast<const float *>(call.inputs[2]) : 1.0f;
    s.decay = weightDecay != 0;
    s.weightDecay = static_cast<float>(weightDecay);
    s.momentum = static_cast<float>(momentum);
    s.oneMinusDampening = static_cast<float>(1 - dampening);
    s.negLr = static_cast<float>(-lr);
    s.first = t == 1;
    s.nesterov = nesterov;
    const float *grad = static_cast<const float *>(call.inputs[0]);
    float *p = static_cast<float *>(call.outputs[0]);
    float *buf = hasBuffer ? static_cast<float *>(call.outputs[1]) : nullptr;
    parallelRange(n, 4, [&](int64_t begin, int64_t end) {
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
  // Updates read the old values of their outputs, which the bf16 widening
  // does not stage: they see bf16 themselves and reject it (f32 only).
  table["update_running_stats"] = {buildUpdateRunningStats, /*takesBf16=*/true};
  table["adamw"] = {buildAdamW, /*takesBf16=*/true};
  table["sgd"] = {buildSgd, /*takesBf16=*/true};
}

} // namespace cleave::runtime::cpu
