//===- TrainingOps.cpp - verifiers and execution of training ops ----------===//
//
// The ops of CleaveTrainingOps.td: what they accept, which operands the
// updates write, the scratch their kernels need and the attributes they
// read. Their costs are in CostOpInterface.cpp, their gradients in
// GradientOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "runtime/cpu/ConvScratch.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

RankedTensorType tensorType(Value value) { return llvm::cast<RankedTensorType>(value.getType()); }

::cleave::runtime::Shape shapeOf(Value v) {
  auto dims = tensorType(v).getShape();
  return ::cleave::runtime::Shape(dims.begin(), dims.end());
}

/// A parameter, buffer or training state: what an update may write.
bool isPersistent(Value value) {
  Operation *def = value.getDefiningOp();
  return def && isa<ParamOp, StateOp>(def);
}

LogicalResult requirePersistent(Operation *op, Value value, StringRef name) {
  if (!isPersistent(value))
    return op->emitOpError() << "updates " << name
                             << " in place, so it must be a cleave.param or cleave.state";
  return success();
}

LogicalResult requireType(Operation *op, Value value, StringRef name, Type expected) {
  if (value.getType() != expected)
    return op->emitOpError() << name << " has type " << value.getType() << ", expected "
                             << expected;
  return success();
}

LogicalResult requireShape(Operation *op, Value value, StringRef name,
                           ArrayRef<int64_t> shape) {
  if (tensorType(value).getShape() != shape)
    return op->emitOpError() << name << " has type " << value.getType() << ", expected shape ["
                             << shape << "]";
  return success();
}

/// The learning-rate schedules the update kernels implement.
LogicalResult verifySchedule(Operation *op, StringRef schedule, int64_t warmup, int64_t decay,
                             double lr) {
  if (schedule != "constant" && schedule != "linear" && schedule != "cosine")
    return op->emitOpError("schedule must be constant, linear or cosine, got '")
           << schedule << "'";
  if (warmup < 0 || decay < 0)
    return op->emitOpError("warmup_steps and decay_steps must be >= 0");
  if (schedule != "constant" && decay == 0)
    return op->emitOpError("a ") << schedule << " schedule needs decay_steps > 0";
  if (!(lr >= 0))
    return op->emitOpError("lr must be >= 0");
  return success();
}

LogicalResult verifyReduction(Operation *op, StringRef reduction) {
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return op->emitOpError("reduction must be mean, sum or none, got '") << reduction << "'";
  return success();
}

LogicalResult verifyPair(Operation *op, StringRef name, ArrayRef<int64_t> pair, int64_t min) {
  if (pair.size() != 2 || pair[0] < min || pair[1] < min)
    return op->emitOpError() << name << " must have 2 entries (height, width) >= " << min;
  return success();
}

LogicalResult verify4d(Operation *op, Value value, StringRef name) {
  if (tensorType(value).getRank() != 4)
    return op->emitOpError() << name << " must be 4-D (NCHW), got " << value.getType();
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// State and updates.
//===----------------------------------------------------------------------===//

LogicalResult StateOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty state name");
  return success();
}

SmallVector<unsigned> AssignOp::getUpdatedOperands() { return {0}; }
LogicalResult AssignOp::verify() { return requirePersistent(*this, getTarget(), "target"); }

/// A param or state the plan keeps in host memory.
LogicalResult requireHostPool(Operation *op, Value value, StringRef name) {
  Operation *def = value.getDefiningOp();
  auto pool = def ? def->getAttrOfType<StringAttr>(kPoolAttr) : StringAttr();
  if (!isPersistent(value) || !pool || pool.getValue() != kHostPool)
    return op->emitOpError() << name << " must be a cleave.param or cleave.state with "
                             << kPoolAttr << " = \"" << kHostPool << "\"";
  return success();
}

LogicalResult PrefetchOp::verify() { return requireHostPool(*this, getSource(), "source"); }

SmallVector<unsigned> SpillOp::getUpdatedOperands() { return {0}; }
LogicalResult SpillOp::verify() {
  if (failed(requireHostPool(*this, getTarget(), "target")))
    return failure();
  if (isPersistent(getValue()))
    return emitOpError("value must be a device buffer, not a persistent tensor");
  return success();
}

SmallVector<unsigned> UpdateRunningStatsOp::getUpdatedOperands() { return {0, 1}; }
LogicalResult UpdateRunningStatsOp::verify() {
  Type type = getRunningMean().getType();
  if (tensorType(getRunningMean()).getRank() != 1)
    return emitOpError("running statistics must be 1-D [C], got ") << type;
  if (failed(requirePersistent(*this, getRunningMean(), "running_mean")) ||
      failed(requirePersistent(*this, getRunningVar(), "running_var")) ||
      failed(requireType(*this, getRunningVar(), "running_var", type)) ||
      failed(requireType(*this, getMean(), "mean", type)) ||
      failed(requireType(*this, getVar(), "var", type)))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1))
    return emitOpError("momentum must be in [0, 1], got ") << momentum;
  if (static_cast<int64_t>(getCount()) < 2)
    return emitOpError("count must be > 1: the unbiased variance needs two values per channel");
  return success();
}

SmallVector<unsigned> AdamWOp::getUpdatedOperands() { return {0, 2, 3}; }
LogicalResult AdamWOp::verify() {
  Type type = getParam().getType();
  if (failed(requirePersistent(*this, getParam(), "param")) ||
      failed(requirePersistent(*this, getExpAvg(), "exp_avg")) ||
      failed(requirePersistent(*this, getExpAvgSq(), "exp_avg_sq")) ||
      failed(requireType(*this, getGrad(), "grad", type)) ||
      failed(requireType(*this, getExpAvg(), "exp_avg", type)) ||
      failed(requireType(*this, getExpAvgSq(), "exp_avg_sq", type)))
    return failure();
  double beta1 = getBeta1().convertToDouble(), beta2 = getBeta2().convertToDouble();
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return emitOpError("betas must be in [0, 1), got ") << beta1 << ", " << beta2;
  if (!(getEps().convertToDouble() >= 0) || !(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("eps and weight_decay must be >= 0");
  return verifySchedule(*this, getSchedule(), static_cast<int64_t>(getWarmupSteps()),
                        static_cast<int64_t>(getDecaySteps()), getLr().convertToDouble());
}

SmallVector<unsigned> SgdOp::getUpdatedOperands() {
  if (getMomentumBuffer())
    return {0, 2};
  return {0};
}
LogicalResult SgdOp::verify() {
  Type type = getParam().getType();
  if (failed(requirePersistent(*this, getParam(), "param")) ||
      failed(requireType(*this, getGrad(), "grad", type)))
    return failure();
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0) || !(getDampening().convertToDouble() >= 0) ||
      !(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("momentum, dampening and weight_decay must be >= 0");
  if ((momentum != 0) != static_cast<bool>(getMomentumBuffer()))
    return emitOpError("has a momentum buffer exactly when momentum != 0");
  if (Value buffer = getMomentumBuffer())
    if (failed(requirePersistent(*this, buffer, "momentum_buffer")) ||
        failed(requireType(*this, buffer, "momentum_buffer", type)))
      return failure();
  if (getNesterov() && (momentum <= 0 || getDampening().convertToDouble() != 0))
    return emitOpError("nesterov momentum requires a momentum and zero dampening");
  return verifySchedule(*this, getSchedule(), static_cast<int64_t>(getWarmupSteps()),
                        static_cast<int64_t>(getDecaySteps()), getLr().convertToDouble());
}

//===----------------------------------------------------------------------===//
// Training forms of forward ops.
//===----------------------------------------------------------------------===//

LogicalResult DropoutTrainOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0 && p < 1))
    return emitOpError("p must be in (0, 1), got ") << p;
  if (static_cast<bool>(getSampleOffset()) != getSamples().has_value())
    return emitOpError("sample_offset and samples come together");
  if (auto samples = getSamples()) {
    auto input = tensorType(getInput());
    if (*samples < 1 || input.getRank() == 0 || input.getDimSize(0) % *samples)
      return emitOpError("dim 0 of ") << input << " is not the rows of " << *samples
                                      << " samples";
  }
  return success();
}

LogicalResult BatchNormTrainOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 2)
    return emitOpError("input must be [N, C, ...], got ") << input;
  auto channels = RankedTensorType::get({input.getDimSize(1)}, input.getElementType());
  for (auto [value, name] : {std::pair{getWeight(), "weight"}, {getBias(), "bias"},
                             {getMean(), "mean"}, {getVar(), "var"}})
    if (value && failed(requireType(*this, value, name, channels)))
      return failure();
  if (input.getNumElements() / std::max<int64_t>(1, input.getDimSize(1)) < 2)
    return emitOpError("needs more than one value per channel, got ") << input;
  return success();
}

//===----------------------------------------------------------------------===//
// Losses.
//===----------------------------------------------------------------------===//

/// nll_loss and its backward: input [N, C], target [N], the loss [] or [N].
static LogicalResult verifyNll(Operation *op, RankedTensorType logits, Value target,
                               Value loss, StringRef reduction) {
  if (failed(verifyReduction(op, reduction)))
    return failure();
  if (logits.getRank() != 2)
    return op->emitOpError("log-probabilities must be [N, C], got ") << logits;
  int64_t rows = logits.getDimSize(0);
  if (failed(requireShape(op, target, "target", {rows})))
    return failure();
  SmallVector<int64_t> lossShape;
  if (reduction == "none")
    lossShape.push_back(rows);
  auto lossType = RankedTensorType::get(lossShape, logits.getElementType());
  return requireType(op, loss, "the loss", lossType);
}

LogicalResult NllLossOp::verify() {
  return verifyNll(*this, tensorType(getInput()), getTarget(), getResult(), getReduction());
}

LogicalResult NllLossBackwardOp::verify() {
  return verifyNll(*this, tensorType(getResult()), getTarget(), getGrad(), getReduction());
}

//===----------------------------------------------------------------------===//
// Backward ops.
//===----------------------------------------------------------------------===//

template <typename Op> static LogicalResult verifyNormalizeBackward(Op op) {
  int64_t rank = tensorType(op.getOutput()).getRank();
  if (static_cast<int64_t>(op.getDim()) >= rank)
    return op.emitOpError() << "dim " << op.getDim() << " is out of range for rank " << rank;
  return success();
}
LogicalResult SoftmaxBackwardOp::verify() { return verifyNormalizeBackward(*this); }
LogicalResult LogSoftmaxBackwardOp::verify() { return verifyNormalizeBackward(*this); }

LogicalResult LayerNormBackwardOp::verify() {
  auto input = tensorType(getInput());
  ArrayRef<int64_t> normalized = getNormalizedShape();
  if (normalized.empty() || normalized.size() > size_t(input.getRank()) ||
      input.getShape().take_back(normalized.size()) != normalized)
    return emitOpError("normalized_shape [")
           << normalized << "] must be the trailing dims of " << input;
  auto affine = RankedTensorType::get(normalized, input.getElementType());
  if (failed(requireType(*this, getGrad(), "grad", input)) ||
      failed(requireType(*this, getGradInput(), "grad_input", input)) ||
      failed(requireType(*this, getGradWeight(), "grad_weight", affine)) ||
      failed(requireType(*this, getGradBias(), "grad_bias", affine)))
    return failure();
  if (Value weight = getWeight())
    return requireType(*this, weight, "weight", affine);
  return success();
}

LogicalResult BatchNormBackwardOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 2)
    return emitOpError("input must be [N, C, ...], got ") << input;
  auto channels = RankedTensorType::get({input.getDimSize(1)}, input.getElementType());
  if (failed(requireType(*this, getGrad(), "grad", input)) ||
      failed(requireType(*this, getGradInput(), "grad_input", input)) ||
      failed(requireType(*this, getMean(), "mean", channels)) ||
      failed(requireType(*this, getVar(), "var", channels)) ||
      failed(requireType(*this, getGradWeight(), "grad_weight", channels)) ||
      failed(requireType(*this, getGradBias(), "grad_bias", channels)))
    return failure();
  if (Value weight = getWeight())
    return requireType(*this, weight, "weight", channels);
  return success();
}

LogicalResult AttentionBackwardOp::verify() {
  for (auto [value, name] : {std::pair{getGrad(), "grad"}, {getQ(), "q"}, {getK(), "k"},
                             {getV(), "v"}, {getOutput(), "output"}})
    if (tensorType(value).getRank() != 4)
      return emitOpError() << name << " must be [B, H, S, D], got " << value.getType();
  if (failed(requireType(*this, getGrad(), "grad", getOutput().getType())) ||
      failed(requireType(*this, getGradQ(), "grad_q", getQ().getType())) ||
      failed(requireType(*this, getGradK(), "grad_k", getK().getType())) ||
      failed(requireType(*this, getGradV(), "grad_v", getV().getType())))
    return failure();
  return success();
}

int64_t AttentionBackwardOp::getScratchBytes() {
  return static_cast<int64_t>(::cleave::runtime::attentionBackwardScratchBytes(shapeOf(getQ())));
}

LogicalResult EmbeddingBackwardOp::verify() {
  auto result = tensorType(getResult());
  if (result.getRank() != 2)
    return emitOpError("the table's gradient must be 2-D [rows, dim], got ") << result;
  SmallVector<int64_t> shape(tensorType(getIndices()).getShape());
  shape.push_back(result.getDimSize(1));
  return requireShape(*this, getGrad(), "grad", shape);
}

/// Shapes of a conv2d's input, weight and output from a backward op: the
/// gradient is the output's; `known` is the forward operand the op reads and
/// the result the other one.
static LogicalResult verifyConvBackward(Operation *op, Value grad, Value known, Value result,
                                        ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                        ArrayRef<int64_t> dilation, int64_t groups) {
  if (failed(verify4d(op, grad, "grad")) || failed(verify4d(op, known, "operand")) ||
      failed(verify4d(op, result, "result")) || failed(verifyPair(op, "stride", stride, 1)) ||
      failed(verifyPair(op, "padding", padding, 0)) ||
      failed(verifyPair(op, "dilation", dilation, 1)))
    return failure();
  if (groups < 1)
    return op->emitOpError("groups must be >= 1");
  return success();
}

LogicalResult Conv2dBackwardInputOp::verify() {
  if (failed(verifyConvBackward(*this, getGrad(), getWeight(), getResult(), getStride(),
                                getPadding(), getDilation(), static_cast<int64_t>(getGroups()))))
    return failure();
  auto input = tensorType(getResult()), weight = tensorType(getWeight());
  auto grad = tensorType(getGrad());
  int64_t groups = static_cast<int64_t>(getGroups());
  if (input.getDimSize(1) != weight.getDimSize(1) * groups ||
      grad.getDimSize(1) != weight.getDimSize(0) || grad.getDimSize(0) != input.getDimSize(0))
    return emitOpError("shapes do not form a conv2d: input ")
           << input << ", weight " << weight << ", output " << grad;
  return success();
}

LogicalResult Conv2dBackwardWeightOp::verify() {
  if (failed(verifyConvBackward(*this, getGrad(), getInput(), getResult(), getStride(),
                                getPadding(), getDilation(), static_cast<int64_t>(getGroups()))))
    return failure();
  auto input = tensorType(getInput()), weight = tensorType(getResult());
  auto grad = tensorType(getGrad());
  int64_t groups = static_cast<int64_t>(getGroups());
  if (input.getDimSize(1) != weight.getDimSize(1) * groups ||
      grad.getDimSize(1) != weight.getDimSize(0) || grad.getDimSize(0) != input.getDimSize(0))
    return emitOpError("shapes do not form a conv2d: input ")
           << input << ", weight " << weight << ", output " << grad;
  return success();
}

namespace {
::cleave::runtime::DType computeDType(Value v) {
  Type et = tensorType(v).getElementType();
  return et.isBF16()   ? ::cleave::runtime::DType::BF16
         : et.isF16() ? ::cleave::runtime::DType::F16
                       : ::cleave::runtime::DType::F32;
}
} // namespace

int64_t Conv2dBackwardInputOp::getScratchBytes() {
  return static_cast<int64_t>(::cleave::runtime::conv2dBackwardInputScratchBytes(
      shapeOf(getResult()), shapeOf(getWeight()), shapeOf(getGrad()),
      static_cast<int64_t>(getGroups()), getStride().vec(), getPadding().vec(),
      getDilation().vec(), computeDType(getGrad())));
}

int64_t Conv2dBackwardWeightOp::getScratchBytes() {
  return static_cast<int64_t>(::cleave::runtime::conv2dBackwardWeightScratchBytes(
      shapeOf(getInput()), shapeOf(getResult()), shapeOf(getGrad()),
      static_cast<int64_t>(getGroups()), getStride().vec(), getPadding().vec(),
      getDilation().vec(), computeDType(getGrad())));
}

LogicalResult MaxPool2dBackwardOp::verify() {
  if (failed(verify4d(*this, getGrad(), "grad")) || failed(verify4d(*this, getInput(), "input")) ||
      failed(requireType(*this, getResult(), "result", getInput().getType())) ||
      failed(verifyPair(*this, "kernel", getKernel(), 1)) ||
      failed(verifyPair(*this, "stride", getStride(), 1)) ||
      failed(verifyPair(*this, "padding", getPadding(), 0)) ||
      failed(verifyPair(*this, "dilation", getDilation(), 1)))
    return failure();
  return success();
}

LogicalResult AvgPool2dBackwardOp::verify() {
  if (failed(verify4d(*this, getGrad(), "grad")) || failed(verify4d(*this, getResult(), "result")) ||
      failed(verifyPair(*this, "kernel", getKernel(), 1)) ||
      failed(verifyPair(*this, "stride", getStride(), 1)) ||
      failed(verifyPair(*this, "padding", getPadding(), 0)))
    return failure();
  return success();
}

LogicalResult AdaptiveAvgPool2dBackwardOp::verify() {
  if (failed(verify4d(*this, getGrad(), "grad")) || failed(verify4d(*this, getResult(), "result")))
    return failure();
  return success();
}

LogicalResult GeluBackwardOp::verify() { return success(); }
LogicalResult SiluBackwardOp::verify() { return success(); }
LogicalResult ReluBackwardOp::verify() { return success(); }

SmallVector<NamedAttribute> GeluBackwardOp::getKernelAttributes() {
  SmallVector<NamedAttribute> attrs = getDefaultKernelAttributes(*this);
  llvm::erase_if(attrs, [](NamedAttribute a) { return a.getName() == "approximation"; });
  attrs.push_back(NamedAttribute(StringAttr::get(getContext(), "approximation"),
                                 StringAttr::get(getContext(),
                                                 stringifyGeluApproximation(getApproximation()))));
  return attrs;
}

LogicalResult LinearBackwardWeightOp::verify() {
  auto grad = tensorType(getGrad()), input = tensorType(getInput());
  if (grad.getRank() < 1 || grad.getRank() != input.getRank() ||
      grad.getShape().drop_back() != input.getShape().drop_back())
    return emitOpError("grad ") << grad << " and input " << input
                                << " must share their leading dims";
  return requireShape(*this, getResult(), "result",
                      {grad.getShape().back(), input.getShape().back()});
}

LogicalResult SliceBackwardOp::verify() {
  auto grad = tensorType(getGrad()), result = tensorType(getResult());
  int64_t dim = static_cast<int64_t>(getDim()), start = static_cast<int64_t>(getStart());
  int64_t end = static_cast<int64_t>(getEnd()), step = static_cast<int64_t>(getStep());
  if (grad.getRank() != result.getRank() || dim >= result.getRank())
    return emitOpError("dim ") << dim << " and ranks of " << grad << ", " << result
                               << " do not match";
  if (step < 1 || start > end || end > result.getDimSize(dim))
    return emitOpError("needs 0 <= start <= end <= ") << result.getDimSize(dim)
                                                      << " and step >= 1";
  SmallVector<int64_t> shape(result.getShape());
  shape[dim] = (end - start + step - 1) / step;
  if (grad.getElementType() != result.getElementType())
    return emitOpError("changes the element type");
  return requireShape(*this, getGrad(), "grad", shape);
}
