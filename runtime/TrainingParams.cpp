//===- TrainingParams.cpp - The training kernels' contracts, family A -----===//
//
// Every message starts with the kernel name and names the operand.
//
//===----------------------------------------------------------------------===//

#include "runtime/TrainingParams.h"

#include "runtime/KernelContract.h"
#include "runtime/Philox.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace cleave::runtime {
namespace {

Status checkF32(const KernelSignature &sig, const char *backend, const char *name,
                const TensorDesc &desc) {
  return checkDType(sig, backend, name, desc, {DType::F32});
}

/// `desc` (operand `name`) must be exactly `dtype` with `shape`.
Status checkDesc(const KernelSignature &sig, const char *backend, const char *name,
                 const TensorDesc &desc, DType dtype, const Shape &shape,
                 const char *how = nullptr) {
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, name, desc, {dtype}));
  if (desc.shape != shape)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " is ", describe(desc.shape, desc.dtype),
                        ", expected ", describe(shape, dtype), how ? " (" : "", how ? how : "",
                        how ? ")" : "");
  return {};
}

/// The i64 scalar step counter at input `index`.
Status checkStep(const KernelSignature &sig, const char *backend, size_t index) {
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, index, "step"));
  return checkDesc(sig, backend, "step", *sig.inputs[index], DType::I64, {},
                   "the i64 step counter");
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

Status readNllAttrs(const KernelSignature &sig, NllParams *p) {
  std::string name;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("reduction", &name, "mean")));
  if (name == "mean")
    p->reduction = Reduction::Mean;
  else if (name == "sum")
    p->reduction = Reduction::Sum;
  else if (name == "none")
    p->reduction = Reduction::None;
  else
    return CLEAVE_ERROR(sig.kernel, ": reduction must be mean, sum or none, got '", name, "'");
  return withKernel(sig, sig.attrs.getInt("ignore_index", &p->ignoreIndex, -100));
}

Status checkTarget(const KernelSignature &sig, const char *backend, const TensorDesc &target,
                   NllParams *p) {
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "target", target, {DType::I64, DType::I32}));
  if (target.shape != Shape{p->rows})
    return CLEAVE_ERROR(sig.kernel, ": target is ", describe(target.shape, target.dtype),
                        ", expected [", p->rows, "] (one class index per row)");
  p->wideTarget = target.dtype == DType::I64;
  return {};
}

Shape lossShape(const NllParams &p) {
  return p.reduction == Reduction::None ? Shape{p.rows} : Shape{};
}

Status checkChannelInput(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, const char *name,
                         const TensorDesc &x, ChannelLayout *layout) {
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, name, x, floats));
  if (x.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " must be [N, C, ...], got ",
                        describe(x.shape, x.dtype));
  layout->batch = x.shape[0];
  layout->channels = x.shape[1];
  layout->inner = numElements(Shape(x.shape.begin() + 2, x.shape.end()));
  return {};
}

/// `operand` names the second input: the activation's input, or its output
/// for relu's gradient.
Status parseActivationBackward(const KernelSignature &sig, const char *backend,
                               std::initializer_list<DType> floats, ActivationBackwardParams *out,
                               const std::string &operand = "input") {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, operand.c_str()));
  const TensorDesc &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, operand.c_str(), x, floats));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad", *sig.inputs[0], x.dtype, x.shape,
                                   ("the " + operand + "'s shape").c_str()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, ("same as the " + operand).c_str()));
  out->n = x.numel();
  out->dtype = x.dtype;
  return {};
}

Status readSchedule(const KernelSignature &sig, LrSchedule *out) {
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

/// grad [param's shape], step, grad_scale? as inputs; `outputs` of the
/// gradient's shape (f32). Sets whether grad_scale is present.
Status checkUpdate(const KernelSignature &sig, const char *backend,
                   const std::vector<const char *> &outputs, bool *hasScale) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, outputs.size()));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  const TensorDesc &param = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, backend, outputs[0], param));
  for (size_t i = 1; i < outputs.size(); ++i)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, outputs[i], sig.outputs[i], DType::F32,
                                     param.shape, "the param's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad", *sig.inputs[0], DType::F32, param.shape,
                                   "the param's shape"));
  CLEAVE_RETURN_IF_ERROR(checkStep(sig, backend, 1));
  *hasScale = sig.inputs.size() == 3 && sig.inputs[2];
  if (*hasScale)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad_scale", *sig.inputs[2], DType::F32, {},
                                     "the f32 clipping scale"));
  return {};
}

} // namespace

Status parseAssign(const KernelSignature &sig, size_t *bytes) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "value"));
  const TensorDesc &value = *sig.inputs[0], &target = sig.outputs[0];
  if (value != target)
    return CLEAVE_ERROR(sig.kernel, ": value ", describe(value.shape, value.dtype),
                        " does not match the target ", describe(target.shape, target.dtype),
                        " (same dtype and shape)");
  *bytes = target.bytes();
  return {};
}

Status parseDropoutTrain(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, DropoutParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, floats));
  CLEAVE_RETURN_IF_ERROR(checkStep(sig, backend, 1));
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
  out->n = x.numel();
  out->dtype = x.dtype;
  // A part of the step's batch (input 2: its first sample; `samples`: how
  // many it holds): element i is element offset·(n / samples) + i of the
  // whole batch's tensor, whose mask it draws.
  out->part = sig.inputs.size() == 3;
  int64_t samples = 0;
  if (out->part) {
    CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "sample_offset"));
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "sample_offset", *sig.inputs[2], DType::I64,
                                     {}, "the i64 first sample"));
    CLEAVE_RETURN_IF_ERROR(getInt(sig, "samples", &samples));
    if (samples < 1 || x.rank() == 0 || x.shape[0] % samples)
      return CLEAVE_ERROR(sig.kernel, ": dim 0 of the input is not the rows of ", samples,
                          " samples");
  } else if (sig.attrs.has("samples")) {
    return CLEAVE_ERROR(sig.kernel, ": 'samples' needs the sample_offset input");
  }
  out->perSample = out->part ? out->n / samples : 0;
  out->p = p;
  out->seed = static_cast<uint64_t>(seed);
  out->stream = static_cast<uint32_t>(stream);
  out->scale = philox::dropoutScale(p);
  return {};
}

Status parseBatchNormTrain(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> floats, BatchNormTrainParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  ChannelLayout &l = out->layout;
  out->dtype = x.dtype;
  CLEAVE_RETURN_IF_ERROR(checkChannelInput(sig, backend, floats, "input", x, &l));
  const Shape channelShape = {l.channels};
  if (sig.inputs[1])
    CLEAVE_RETURN_IF_ERROR(
        checkDesc(sig, backend, "weight", *sig.inputs[1], x.dtype, channelShape));
  if (sig.inputs[2])
    CLEAVE_RETURN_IF_ERROR(
        checkDesc(sig, backend, "bias", *sig.inputs[2], x.dtype, channelShape));
  if (l.count() < 2)
    return CLEAVE_ERROR(sig.kernel, ": needs more than one value per channel, got ",
                        describe(x.shape, x.dtype));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 0 (y)", sig.outputs[0], x.dtype,
                                   x.shape, "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 1 (mean)", sig.outputs[1], x.dtype,
                                   channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 2 (var)", sig.outputs[2], x.dtype,
                                   channelShape));
  return readEps(sig, &out->eps);
}

Status parseUpdateRunningStats(const KernelSignature &sig, const char *backend,
                               RunningStatsParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "mean"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "var"));
  const TensorDesc &mean = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, backend, "mean", mean));
  if (mean.rank() != 1)
    return CLEAVE_ERROR(sig.kernel, ": mean must be 1-D [C], got ",
                        describe(mean.shape, mean.dtype));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "var", *sig.inputs[1], DType::F32, mean.shape,
                                   "the mean's"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "running_mean", sig.outputs[0], DType::F32,
                                   mean.shape, "the mean's"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "running_var", sig.outputs[1], DType::F32,
                                   mean.shape, "the mean's"));
  int64_t count = 0;
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "momentum", &out->momentum));
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "count", &count));
  if (!(out->momentum >= 0 && out->momentum <= 1))
    return CLEAVE_ERROR(sig.kernel, ": momentum must be in [0, 1], got ", out->momentum);
  if (count < 2)
    return CLEAVE_ERROR(sig.kernel, ": count must be > 1 (the unbiased variance needs two "
                        "values per channel), got ", count);
  out->channels = mean.numel();
  out->unbias = static_cast<double>(count) / static_cast<double>(count - 1);
  return {};
}

Status parseBatchNormBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> floats, BatchNormBackwardParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 4, 5, 3));
  const char *names[] = {"grad", "input", "mean", "var"};
  for (size_t i = 0; i < 4; ++i)
    CLEAVE_RETURN_IF_ERROR(requirePresent(sig, i, names[i]));
  const TensorDesc &x = *sig.inputs[1];
  ChannelLayout &l = out->layout;
  out->dtype = x.dtype;
  CLEAVE_RETURN_IF_ERROR(checkChannelInput(sig, backend, floats, "input", x, &l));
  const Shape channelShape = {l.channels};
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad", *sig.inputs[0], x.dtype, x.shape,
                                   "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(
      checkDesc(sig, backend, "mean", *sig.inputs[2], x.dtype, channelShape));
  CLEAVE_RETURN_IF_ERROR(
      checkDesc(sig, backend, "var", *sig.inputs[3], x.dtype, channelShape));
  out->hasWeight = sig.inputs.size() == 5 && sig.inputs[4];
  if (out->hasWeight)
    CLEAVE_RETURN_IF_ERROR(
        checkDesc(sig, backend, "weight", *sig.inputs[4], x.dtype, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 0 (grad_input)", sig.outputs[0],
                                   x.dtype, x.shape, "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 1 (grad_weight)", sig.outputs[1],
                                   x.dtype, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 2 (grad_bias)", sig.outputs[2],
                                   x.dtype, channelShape));
  return readEps(sig, &out->eps);
}

Status parseNllLoss(const KernelSignature &sig, const char *backend, NllParams *p) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "target"));
  const TensorDesc &logp = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, backend, "input", logp));
  if (logp.rank() != 2)
    return CLEAVE_ERROR(sig.kernel, ": input (log-probabilities) must be [N, C], got ",
                        describe(logp.shape, logp.dtype));
  p->rows = logp.shape[0];
  p->classes = logp.shape[1];
  CLEAVE_RETURN_IF_ERROR(checkTarget(sig, backend, *sig.inputs[1], p));
  CLEAVE_RETURN_IF_ERROR(readNllAttrs(sig, p));
  return checkOutput(sig, TensorDesc{DType::F32, lossShape(*p)},
                     p->reduction == Reduction::None ? "reduction none: [N]" : "a scalar");
}

Status parseNllLossBackward(const KernelSignature &sig, const char *backend, NllParams *p) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "target"));
  const TensorDesc &out = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkF32(sig, backend, "output", out));
  if (out.rank() != 2)
    return CLEAVE_ERROR(sig.kernel, ": output (the input's gradient) must be [N, C], got ",
                        describe(out.shape, out.dtype));
  p->rows = out.shape[0];
  p->classes = out.shape[1];
  CLEAVE_RETURN_IF_ERROR(checkTarget(sig, backend, *sig.inputs[1], p));
  CLEAVE_RETURN_IF_ERROR(readNllAttrs(sig, p));
  return checkDesc(sig, backend, "grad", *sig.inputs[0], DType::F32, lossShape(*p),
                   p->reduction == Reduction::None ? "the loss of reduction none"
                                                   : "the scalar loss");
}

Status parseSoftmaxBackward(const KernelSignature &sig, const char *backend,
                            std::initializer_list<DType> floats, SoftmaxBackwardParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "output"));
  const TensorDesc &y = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "output (the forward's result)", y, floats));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad", *sig.inputs[0], y.dtype, y.shape,
                                   "the forward result's shape"));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(sig, "dim", &dim));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, y.rank()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, y, "same as the forward's result"));
  out->d = y.shape[dim];
  out->dtype = y.dtype;
  out->outer = numElements(Shape(y.shape.begin(), y.shape.begin() + dim));
  out->inner = numElements(Shape(y.shape.begin() + dim + 1, y.shape.end()));
  return {};
}

Status parseLayerNormBackward(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> floats, LayerNormBackwardParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "grad"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "input"));
  const TensorDesc &x = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, floats));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "grad", *sig.inputs[0], x.dtype, x.shape,
                                   "the input's shape"));
  std::vector<int64_t> normalized;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("normalized_shape", &normalized)));
  if (normalized.empty() || normalized.size() > x.shape.size() ||
      !std::equal(normalized.begin(), normalized.end(), x.shape.end() - normalized.size()))
    return CLEAVE_ERROR(sig.kernel, ": normalized_shape ", formatList(normalized),
                        " must be the trailing dims of the input ", describe(x.shape, x.dtype));
  const Shape affine(normalized.begin(), normalized.end());
  out->hasWeight = sig.inputs.size() == 3 && sig.inputs[2];
  if (out->hasWeight)
    CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "weight", *sig.inputs[2], x.dtype, affine,
                                     "normalized_shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 0 (grad_input)", sig.outputs[0],
                                   x.dtype, x.shape, "the input's shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 1 (grad_weight)", sig.outputs[1],
                                   x.dtype, affine, "normalized_shape"));
  CLEAVE_RETURN_IF_ERROR(checkDesc(sig, backend, "output 2 (grad_bias)", sig.outputs[2],
                                   x.dtype, affine, "normalized_shape"));
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &out->eps));
  out->d = numElements(affine);
  out->dtype = x.dtype;
  out->rows = out->d ? x.numel() / out->d : 0;
  return {};
}

Status parseGeluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out) {
  std::string approximation;
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getString("approximation", &approximation, "none")));
  if (approximation != "none" && approximation != "tanh")
    return CLEAVE_ERROR(sig.kernel, ": approximation '", approximation,
                        "' is neither 'none' nor 'tanh'");
  out->tanh = approximation == "tanh";
  return parseActivationBackward(sig, backend, floats, out);
}

Status parseSiluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out) {
  return parseActivationBackward(sig, backend, floats, out);
}

Status parseReluBackward(const KernelSignature &sig, const char *backend,
                         std::initializer_list<DType> floats, ActivationBackwardParams *out) {
  return parseActivationBackward(sig, backend, floats, out, "output");
}

Status parseAdamW(const KernelSignature &sig, const char *backend, AdamWParams *out) {
  CLEAVE_RETURN_IF_ERROR(
      checkUpdate(sig, backend, {"param", "exp_avg", "exp_avg_sq"}, &out->hasScale));
  CLEAVE_RETURN_IF_ERROR(readSchedule(sig, &out->schedule));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "beta1", &out->beta1));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "beta2", &out->beta2));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "eps", &out->eps));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "weight_decay", &out->weightDecay));
  const double beta1 = out->beta1, beta2 = out->beta2;
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return CLEAVE_ERROR(sig.kernel, ": beta1 and beta2 must be in [0, 1), got ", beta1, ", ",
                        beta2);
  if (!(out->eps >= 0) || !(out->weightDecay >= 0))
    return CLEAVE_ERROR(sig.kernel, ": eps and weight_decay must be >= 0, got ", out->eps, ", ",
                        out->weightDecay);
  out->n = sig.outputs[0].numel();
  return {};
}

Status parseSgd(const KernelSignature &sig, const char *backend, SgdParams *out) {
  // One output (param) or two (param, momentum_buffer); which one momentum
  // says.
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3, sig.outputs.size() == 2 ? 2 : 1));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "momentum", &out->momentum));
  const double momentum = out->momentum;
  out->hasBuffer = momentum != 0;
  if (!out->hasBuffer && sig.outputs.size() == 2)
    return CLEAVE_ERROR(sig.kernel, ": has a momentum_buffer output but momentum is 0; the "
                        "buffer is present exactly when momentum != 0");
  if (out->hasBuffer && sig.outputs.size() == 1)
    return CLEAVE_ERROR(sig.kernel, ": momentum ", momentum, " needs a momentum_buffer output "
                        "after param (2 outputs), got 1");
  if (out->hasBuffer)
    CLEAVE_RETURN_IF_ERROR(checkUpdate(sig, backend, {"param", "momentum_buffer"}, &out->hasScale));
  else
    CLEAVE_RETURN_IF_ERROR(checkUpdate(sig, backend, {"param"}, &out->hasScale));
  CLEAVE_RETURN_IF_ERROR(readSchedule(sig, &out->schedule));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "dampening", &out->dampening));
  CLEAVE_RETURN_IF_ERROR(getFloat(sig, "weight_decay", &out->weightDecay));
  if (!sig.attrs.has("nesterov"))
    return CLEAVE_ERROR(sig.kernel, ": missing attribute 'nesterov'");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("nesterov", &out->nesterov, false)));
  if (!(momentum >= 0) || !(out->dampening >= 0) || !(out->weightDecay >= 0))
    return CLEAVE_ERROR(sig.kernel, ": momentum, dampening and weight_decay must be >= 0, got ",
                        momentum, ", ", out->dampening, ", ", out->weightDecay);
  if (out->nesterov && (momentum <= 0 || out->dampening != 0))
    return CLEAVE_ERROR(sig.kernel, ": nesterov momentum requires a momentum and zero dampening");
  out->n = sig.outputs[0].numel();
  return {};
}

Status stepError(const std::string &kernel, int64_t t) {
  return CLEAVE_ERROR(kernel, ": step t = ", t,
                      " is < 1; the optimizer phase increments step before the updates");
}

} // namespace cleave::runtime
