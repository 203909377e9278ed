//===- TrainingParams.h - The training kernels' contracts, family A --------===//
//
// Load-time checks and parsed parameters of assign, dropout_train,
// batch_norm_train, update_running_stats, batch_norm_backward, nll_loss,
// nll_loss_backward, softmax_backward, log_softmax_backward,
// layer_norm_backward, gelu_backward, silu_backward, relu_backward, adamw and sgd
// (docs/plan-format.md, "Training kernels"). The CPU and CUDA builders both
// parse through here, so they accept the same plans and name the same
// problems; `backend` ("cpu", "cuda") only words dtype errors, and `floats`
// says which float dtypes a backend's kernel takes (every float operand of
// the instruction then has the same one): the CPU's are written for f32 and
// see bf16 widened by the backend; the GPU's read bf16 themselves (mixed
// precision plans compute their backward in bf16).
//
// Update kernels (assign, update_running_stats, adamw, sgd) get the
// persistent tensors they write as outputs, after any results, and read
// their old values there; their inputs are the operands they only read, an
// absent optional one left out (compiler/PlanEmitter.cpp).
//
// The structs are plain data: CUDA kernels take them by value, and the
// learning-rate schedule evaluates on the device too (the step counter
// lives in device memory there).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>

#if defined(__CUDACC__)
#define CLEAVE_TRAIN_HD __host__ __device__ __forceinline__
#else
#define CLEAVE_TRAIN_HD inline
#endif

namespace cleave::runtime {

/// assign: copies `bytes` of value into the persistent target.
Status parseAssign(const KernelSignature &sig, size_t *bytes);

/// dropout_train over `n` elements. A part of the step's batch (`part`:
/// input 2 holds its first sample) draws the whole batch's mask at element
/// offset·perSample + i.
struct DropoutParams {
  int64_t n = 0;
  double p = 0;
  uint64_t seed = 0;
  uint32_t stream = 0;
  bool part = false;
  int64_t perSample = 0;
  float scale = 1;
  DType dtype = DType::F32; // of every float operand
};
Status parseDropoutTrain(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, DropoutParams *out);

/// x is [N, C, ...]: N*C planes of `inner` elements, plane p of channel
/// p % C.
struct ChannelLayout {
  int64_t batch = 0, channels = 0, inner = 0;
  CLEAVE_TRAIN_HD int64_t planes() const { return batch * channels; }
  CLEAVE_TRAIN_HD int64_t count() const { return batch * inner; } // values per channel
};

/// batch_norm_train: input, weight?, bias? -> y, mean, var (biased).
struct BatchNormTrainParams {
  ChannelLayout layout;
  float eps = 0;
  DType dtype = DType::F32; // of every float operand
};
Status parseBatchNormTrain(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> floats, BatchNormTrainParams *out);

/// update_running_stats: mean, var -> running_mean, running_var (updated in
/// place); the unbiased variance is var·count/(count-1).
struct RunningStatsParams {
  int64_t channels = 0;
  double momentum = 0, unbias = 1;
};
Status parseUpdateRunningStats(const KernelSignature &sig, const char *backend,
                               RunningStatsParams *out);

/// batch_norm_backward: grad, input, mean, var, weight? -> grad_input,
/// grad_weight, grad_bias.
struct BatchNormBackwardParams {
  ChannelLayout layout;
  float eps = 0;
  bool hasWeight = false;
  DType dtype = DType::F32; // of every float operand
};
Status parseBatchNormBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> floats, BatchNormBackwardParams *out);

/// A loss's reduction.
enum class Reduction { Mean, Sum, None };

/// nll_loss (logp [N, C], target [N] -> loss) and nll_loss_backward (grad,
/// target -> the gradient of logp [N, C]).
struct NllParams {
  int64_t rows = 0, classes = 0;
  bool wideTarget = false; // i64, else i32
  Reduction reduction = Reduction::Mean;
  int64_t ignoreIndex = -100;
};
Status parseNllLoss(const KernelSignature &sig, const char *backend, NllParams *out);
Status parseNllLossBackward(const KernelSignature &sig, const char *backend, NllParams *out);

/// softmax_backward and log_softmax_backward along `dim`: grad and the
/// forward's output viewed as [outer, d, inner].
struct SoftmaxBackwardParams {
  int64_t outer = 0, d = 0, inner = 0;
  DType dtype = DType::F32; // of every float operand
};
Status parseSoftmaxBackward(const KernelSignature &sig, const char *backend,
                            std::initializer_list<DType> floats, SoftmaxBackwardParams *out);

/// layer_norm_backward over the trailing normalized_shape: grad, input,
/// weight? -> grad_input, grad_weight, grad_bias; `rows` rows of `d`.
struct LayerNormBackwardParams {
  int64_t rows = 0, d = 0;
  float eps = 0;
  bool hasWeight = false;
  DType dtype = DType::F32; // of every float operand
};
Status parseLayerNormBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> floats, LayerNormBackwardParams *out);

/// gelu_backward and silu_backward: grad, input -> grad_input;
/// relu_backward: grad, output -> grad_input. `n` elements; `tanh` is gelu's
/// approximation "tanh" (else the erf form).
struct ActivationBackwardParams {
  int64_t n = 0;
  bool tanh = false;
  DType dtype = DType::F32; // of every float operand
};
Status parseGeluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out);
Status parseSiluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out);
Status parseReluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out);

//===----------------------------------------------------------------------===//
// Optimizer updates: adamw, sgd. Inputs grad, step, grad_scale? (absent:
// left out); outputs the persistent tensors they update.
//===----------------------------------------------------------------------===//

enum class ScheduleKind { Constant, Linear, Cosine };

struct LrSchedule {
  double lr = 0;
  ScheduleKind kind = ScheduleKind::Constant;
  int64_t warmup = 0, decay = 0;

  /// lr · λ(t − 1) (docs/training.md).
  CLEAVE_TRAIN_HD double at(int64_t t) const {
    const double s = static_cast<double>(t - 1), w = static_cast<double>(warmup);
    if (s < w)
      return lr * (s / w);
    const double span = fmax(1.0, static_cast<double>(decay - warmup));
    switch (kind) {
    case ScheduleKind::Constant:
      return lr;
    case ScheduleKind::Linear:
      return lr * fmax(0.0, (static_cast<double>(decay) - s) / span);
    case ScheduleKind::Cosine:
      return lr * fmax(0.0, 0.5 * (1.0 + cos(3.14159265358979323846 * fmin(1.0, (s - w) / span))));
    }
    return lr;
  }
};

struct AdamWParams {
  int64_t n = 0;
  bool hasScale = false;
  LrSchedule schedule;
  double beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
};
Status parseAdamW(const KernelSignature &sig, const char *backend, AdamWParams *out);

/// One step's f32 scalars of adamw, each rounded where torch.optim's
/// single-tensor implementation rounds it. Host and device compute them
/// alike from the step t >= 1.
struct AdamWScalars {
  float scale, decay, weight, oneMinusWeight, beta2, oneMinusBeta2, bc2Sqrt, eps, negStepSize;
  bool smallWeight;
};
CLEAVE_TRAIN_HD AdamWScalars adamwScalars(const AdamWParams &p, int64_t t, float scale) {
  const double lr = p.schedule.at(t);
  const double bc1 = 1 - pow(p.beta1, static_cast<double>(t));
  const double bc2 = 1 - pow(p.beta2, static_cast<double>(t));
  AdamWScalars s;
  s.scale = scale;
  s.decay = static_cast<float>(1 - lr * p.weightDecay);
  s.weight = static_cast<float>(1 - p.beta1);
  s.oneMinusWeight = 1.0f - s.weight;
  s.smallWeight = fabsf(s.weight) < 0.5f;
  s.beta2 = static_cast<float>(p.beta2);
  s.oneMinusBeta2 = static_cast<float>(1 - p.beta2);
  s.bc2Sqrt = static_cast<float>(sqrt(bc2));
  s.eps = static_cast<float>(p.eps);
  s.negStepSize = static_cast<float>(-(lr / bc1));
  return s;
}

/// One element of adamw: exp_avg.lerp_(grad, 1 - beta1) as at::lerp,
/// exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2), denom =
/// exp_avg_sq.sqrt() / sqrt(bc2) + eps, param.addcdiv_(m, denom,
/// -step_size), after param.mul_(1 - lr·weight_decay).
CLEAVE_TRAIN_HD void adamwElement(float &p, float &m, float &v, float grad,
                                  const AdamWScalars &s) {
  const float g = grad * s.scale;
  float param = p * s.decay;
  float mi = m;
  mi = s.smallWeight ? mi + s.weight * (g - mi) : g - (g - mi) * s.oneMinusWeight;
  float vi = v * s.beta2;
  vi = vi + s.oneMinusBeta2 * g * g;
  const float denom = sqrtf(vi) / s.bc2Sqrt + s.eps;
  param = param + s.negStepSize * mi / denom;
  p = param;
  m = mi;
  v = vi;
}

/// sgd: param, and momentum_buffer exactly when momentum != 0.
struct SgdParams {
  int64_t n = 0;
  bool hasScale = false, hasBuffer = false, nesterov = false;
  LrSchedule schedule;
  double momentum = 0, dampening = 0, weightDecay = 0;
};
Status parseSgd(const KernelSignature &sig, const char *backend, SgdParams *out);

struct SgdScalars {
  float scale, weightDecay, momentum, oneMinusDampening, negLr;
  bool decay, first, nesterov;
};
CLEAVE_TRAIN_HD SgdScalars sgdScalars(const SgdParams &p, int64_t t, float scale) {
  SgdScalars s;
  s.scale = scale;
  s.decay = p.weightDecay != 0;
  s.weightDecay = static_cast<float>(p.weightDecay);
  s.momentum = static_cast<float>(p.momentum);
  s.oneMinusDampening = static_cast<float>(1 - p.dampening);
  s.negLr = static_cast<float>(-p.schedule.at(t));
  s.first = t == 1;
  s.nesterov = p.nesterov;
  return s;
}

/// One element of sgd: grad.add(param, alpha=weight_decay), the momentum
/// buffer (`buf`, null without momentum), param.add_(grad, alpha=-lr).
CLEAVE_TRAIN_HD void sgdElement(float &p, float *buf, float grad, const SgdScalars &s) {
  float d = grad * s.scale;
  if (s.decay)
    d = d + s.weightDecay * p;
  if (buf) {
    float b = s.first ? d : *buf * s.momentum + s.oneMinusDampening * d;
    *buf = b;
    d = s.nesterov ? d + s.momentum * b : b;
  }
  p = p + s.negLr * d;
}

/// "adamw: step t = 0 is < 1; ...": the updates' check of the step
/// counter, where the backend can read it.
Status stepError(const std::string &kernel, int64_t t);

} // namespace cleave::runtime
