//===- CostOpInterface.cpp - what cleave ops cost, forward and backward ---===//
//
// FLOPs count multiply and add as two; bytes are what a kernel must read and
// write at least (every operand once, every result once). Backward costs are
// the op's own gradient kernels, so a model's backward/forward ratio comes
// out of its ops (2x for GEMMs, near 1x for maps), never from a global factor.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::cleave;
using ::cleave::cost::GemmShape;
using ::cleave::cost::OpClass;
using ::cleave::cost::OpCost;
using ::cleave::cost::PassCost;

int64_t mlir::cleave::tensorBytes(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  // i1 is stored as one byte per element, as PyTorch's bool.
  return tensor.getNumElements() * std::max<int64_t>(1, bits / 8);
}

bool mlir::cleave::isWeight(Value value) {
  Operation *def = value.getDefiningOp();
  return def && isa<ParamOp, ConstantOp>(def);
}

namespace {

double bytesOf(Value v) { return static_cast<double>(tensorBytes(v.getType())); }

double elementsOf(Value v) {
  return static_cast<double>(llvm::cast<RankedTensorType>(v.getType()).getNumElements());
}

bool isFloat(Value v) {
  return llvm::isa<FloatType>(llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

double sumBytes(ValueRange values) {
  double total = 0;
  for (Value v : values)
    total += bytesOf(v);
  return total;
}

/// Bytes the backward reads from forward: all saved values (`activations`
/// false) or only those that are not weights (what training keeps).
double savedBytesOf(Operation *op, bool activations) {
  SmallVector<Value> saved;
  if (auto cost = dyn_cast<CostOpInterface>(op))
    cost.getSavedForBackward(saved);
  double total = 0;
  for (Value v : saved)
    if (!activations || !isWeight(v))
      total += bytesOf(v);
  return total;
}

/// A map over `elements` outputs: `flops` each forward; its backward reads the
/// result's gradient plus the saved values and writes one gradient per float
/// operand, at `backwardFlops` per element.
OpCost mapCost(Operation *op, OpClass opClass, double forwardFlops, double backwardFlops) {
  OpCost cost;
  cost.opClass = opClass;
  cost.forward = {forwardFlops, sumBytes(op->getOperands()), sumBytes(op->getResults()), 1};
  cost.savedBytes = savedBytesOf(op, /*activations=*/true);
  SmallVector<Value> gradients;
  for (Value operand : op->getOperands())
    if (isFloat(operand))
      gradients.push_back(operand);
  bool differentiable =
      op->getNumResults() == 1 && isFloat(op->getResult(0)) && !gradients.empty();
  if (differentiable)
    cost.backward = {backwardFlops,
                     bytesOf(op->getResult(0)) + savedBytesOf(op, /*activations=*/false),
                     sumBytes(gradients), 1};
  return cost;
}

/// A product of `batch` matrices [m, k] x [k, n]: 2mnk FLOPs forward; the
/// backward is two products of the same size (each operand's gradient).
OpCost gemmCost(Operation *op, OpClass opClass, GemmShape shape,
                ArrayRef<Value> gradientOperands) {
  double flops = 2.0 * shape.batch * shape.m * shape.n * shape.k;
  OpCost cost;
  cost.opClass = opClass;
  cost.gemm = shape;
  cost.forward = {flops, sumBytes(op->getOperands()), sumBytes(op->getResults()), 1};
  cost.savedBytes = savedBytesOf(op, /*activations=*/true);
  double gradientBytes = 0;
  for (Value v : gradientOperands)
    gradientBytes += bytesOf(v);
  cost.backward = {flops * gradientOperands.size(),
                   bytesOf(op->getResult(0)) + savedBytesOf(op, /*activations=*/false),
                   gradientBytes,
                   static_cast<int>(gradientOperands.size())};
  return cost;
}

OpCost noCost() {
  OpCost cost;
  cost.forward.kernels = 0;
  return cost;
}

} // namespace

void mlir::cleave::getDefaultSavedForBackward(Operation *op, SmallVectorImpl<Value> &saved) {
  if (op->getNumResults() != 1 || !isFloat(op->getResult(0)))
    return; // not differentiable: no backward
  for (Value operand : op->getOperands())
    if (isFloat(operand))
      saved.push_back(operand);
}

OpCost mlir::cleave::getElementwiseCost(Operation *op) {
  double elements = op->getNumResults() == 1 ? elementsOf(op->getResult(0)) : 0;
  int64_t perElement = cast<CostOpInterface>(op).getFlopsPerElement();
  // The derivative costs about what the map does, plus the chain-rule product.
  return mapCost(op, OpClass::Elementwise, elements * perElement,
                 elements * (perElement + 1));
}

//===----------------------------------------------------------------------===//
// Values and views: no kernel.
//===----------------------------------------------------------------------===//

OpCost ParamOp::getCost() { return noCost(); }
OpCost ConstantOp::getCost() { return noCost(); }
// Dropout runs no kernel in a plan (inference); in training it reads the
// input and writes the result and a one-byte mask, and its backward reads
// the gradient and the mask and writes the input's gradient.
OpCost DropoutOp::getCost() { return noCost(); }
void DropoutOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost DropoutOp::getTrainingCost() {
  double elements = elementsOf(getResult());
  double bytes = bytesOf(getResult());
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  cost.forward = {2 * elements, bytes, bytes + elements, 1};
  cost.backward = {elements, bytes + elements, bytes, 1};
  cost.savedBytes = elements; // the mask
  return cost;
}
// Layout changes: their time is communication, which cost/Collectives
// predicts from the group; no local kernel is counted here.
OpCost AllReduceOp::getCost() { return noCost(); }
OpCost AllGatherOp::getCost() { return noCost(); }
OpCost ReduceScatterOp::getCost() { return noCost(); }
OpCost AllToAllOp::getCost() { return noCost(); }
OpCost ShardOp::getCost() { return noCost(); }
void AllReduceOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void AllGatherOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void ReduceScatterOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void AllToAllOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void ShardOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
// Stage boundaries: communication, costed by cost/Collectives (send/recv).
OpCost SendOp::getCost() { return noCost(); }
OpCost RecvOp::getCost() { return noCost(); }
void SendOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void RecvOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost ReshapeOp::getCost() { return noCost(); }
void ReshapeOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

//===----------------------------------------------------------------------===//
// Elementwise maps whose gradient needs nothing from forward, or less.
//===----------------------------------------------------------------------===//

void NegOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
// Piecewise constant: the gradient is zero whatever the input.
void FloorOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void CeilOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void RoundOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void TruncOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void SignOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void AddOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void SubOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

int64_t GeluOp::getFlopsPerElement() {
  // 0.5x(1 + erf(x/sqrt 2)) or the tanh form: a transcendental plus a few ops.
  return 18;
}

void WhereOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  // Routing the gradient needs only the condition.
  saved.push_back(getCondition());
}

int64_t CastOp::getFlopsPerElement() { return 0; }
void CastOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

OpCost BatchNormOp::getCost() {
  // A per-channel scale and shift once mean/var/weight/bias are folded (2
  // FLOPs per element), at the `normalization` class's measured rate: it
  // walks channel dim 1, so its runs are one plane long (49 elements at
  // 7x7), slower than a flat map of the same bytes.
  OpCost cost = getElementwiseCost(*this);
  double elements = elementsOf(getResult());
  cost.opClass = OpClass::Normalization;
  cost.forward.flops = 2 * elements;
  cost.backward.flops = 3 * elements;
  return cost;
}

// Masks: a select per element; the gradient is the same mask.
int64_t TrilOp::getFlopsPerElement() { return 0; }
int64_t TriuOp::getFlopsPerElement() { return 0; }
void TrilOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void TriuOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

// Data movement: copies, no arithmetic; their gradients are the inverse
// movement (or a sum, for broadcast_to), which needs no saved values.
int64_t PermuteOp::getFlopsPerElement() { return 0; }
OpCost PermuteOp::getCost() {
  // A permute that keeps the innermost dim copies contiguous runs, as a map
  // does; one that moves it (NCHW <-> NHWC, a matrix transpose) reads or
  // writes with a stride and runs at the `layout` class's measured rate.
  // Size-1 dims do not count: moving them moves no data.
  OpCost cost = getElementwiseCost(*this);
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  ArrayRef<int64_t> dims = getDims();
  auto innermost = [&](auto dimOf) -> int64_t {
    for (int64_t i = static_cast<int64_t>(dims.size()) - 1; i >= 0; --i)
      if (shape[dimOf(i)] != 1)
        return dimOf(i);
    return -1;
  };
  int64_t inputInnermost = innermost([](int64_t i) { return i; });
  int64_t resultInnermost = innermost([&](int64_t i) { return dims[i]; });
  if (inputInnermost != resultInnermost)
    cost.opClass = OpClass::Layout;
  return cost;
}
void PermuteOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
int64_t BroadcastToOp::getFlopsPerElement() { return 0; }
void BroadcastToOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
int64_t SliceOp::getFlopsPerElement() { return 0; }
OpCost SliceOp::getCost() {
  // Reads only the elements it keeps.
  OpCost cost = getElementwiseCost(*this);
  cost.forward.bytesRead = bytesOf(getResult());
  return cost;
}
void SliceOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
int64_t ConcatOp::getFlopsPerElement() { return 0; }
void ConcatOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

//===----------------------------------------------------------------------===//
// Contractions.
//===----------------------------------------------------------------------===//

OpCost MatmulOp::getCost() {
  auto result = getResult().getType();
  auto lhs = getLhs().getType();
  int64_t rank = result.getRank();
  GemmShape shape;
  shape.m = result.getDimSize(rank - 2);
  shape.n = result.getDimSize(rank - 1);
  shape.k = lhs.getDimSize(lhs.getRank() - 1);
  shape.batch = result.getNumElements() / std::max<int64_t>(1, shape.m * shape.n);
  SmallVector<Value> gradients;
  for (Value v : {getLhs(), getRhs()})
    if (isFloat(v))
      gradients.push_back(v);
  return gemmCost(*this, OpClass::Gemm, shape, gradients);
}

OpCost LinearOp::getCost() {
  auto input = getInput().getType();
  GemmShape shape;
  shape.k = input.getDimSize(input.getRank() - 1);
  shape.n = getWeight().getType().getDimSize(0);
  shape.m = input.getNumElements() / std::max<int64_t>(1, shape.k);
  OpCost cost = gemmCost(*this, OpClass::Gemm, shape, {getInput(), getWeight()});
  if (getBias()) {
    // Bias add forward; its gradient is the column sum of the result's gradient.
    double elements = static_cast<double>(shape.m) * shape.n;
    cost.forward.flops += elements;
    cost.backward.flops += elements;
    cost.backward.bytesWritten += bytesOf(getBias());
    cost.backward.kernels += 1;
  }
  return cost;
}

void LinearOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  // dX needs the weight, dW the input; the bias gradient needs neither.
  saved.append({getInput(), getWeight()});
}

void Conv2dOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append({getInput(), getWeight()});
}

namespace {
/// As an implicit GEMM per group: [N*OH*OW, IC/g*KH*KW] x [IC/g*KH*KW, OC/g].
template <typename Conv> OpCost convolutionCost(Conv op) {
  auto result = op.getResult().getType();
  auto weight = op.getWeight().getType();
  int64_t groups = op.getGroups();
  GemmShape shape;
  shape.batch = groups;
  shape.m = result.getDimSize(0) * result.getDimSize(2) * result.getDimSize(3);
  shape.n = weight.getDimSize(0) / groups;
  shape.k = weight.getDimSize(1) * weight.getDimSize(2) * weight.getDimSize(3);
  OpCost cost = gemmCost(op, groups > 1 ? OpClass::GroupedConvolution : OpClass::Convolution,
                         shape, {op.getInput(), op.getWeight()});
  if (op.getBias()) {
    double elements = elementsOf(op.getResult());
    cost.forward.flops += elements;
    cost.backward.flops += elements;
    cost.backward.bytesWritten += bytesOf(op.getBias());
  }
  return cost;
}
} // namespace

OpCost Conv2dOp::getCost() { return convolutionCost(*this); }

OpCost FusedConv2dOp::getCost() {
  // The convolution's, plus an add and a clamp per output element; the
  // residual is read once, the output never re-read.
  OpCost cost = convolutionCost(*this);
  double elements = elementsOf(getResult());
  if (Value residual = getResidual()) {
    cost.forward.flops += elements;
    cost.forward.bytesRead += bytesOf(residual);
  }
  if (getMin() || getMax())
    cost.forward.flops += elements;
  return cost;
}

OpCost EmbeddingOp::getCost() {
  // A gather: no arithmetic, reads the rows it returns. Its backward adds
  // each row's gradient into the table's gradient (a scatter-add).
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  double rows = bytesOf(getResult());
  cost.forward = {0, rows + bytesOf(getIndices()), rows, 1};
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true);
  cost.backward = {elementsOf(getResult()), rows + bytesOf(getIndices()), rows, 1};
  return cost;
}

void EmbeddingOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getIndices());
}

OpCost GatherOp::getCost() {
  // Reads one input element and one index per result element; the backward
  // scatter-adds the result's gradient into a zeroed input gradient.
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  double moved = bytesOf(getResult()) + bytesOf(getIndex());
  cost.forward = {0, moved, bytesOf(getResult()), 1};
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true);
  if (isFloat(getInput()))
    cost.backward = {elementsOf(getResult()), moved, bytesOf(getInput()), 2};
  return cost;
}

void GatherOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  if (isFloat(getInput()))
    saved.push_back(getIndex());
}

OpCost ScatterOp::getCost() {
  // Copies the input, then reads the index and src and updates one element
  // per index (one operation when reducing). The backward gathers src's
  // gradient and masks (or passes) the input's.
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  double updates = elementsOf(getIndex());
  double flops = getReduce() == ScatterReduce::none ? 0 : updates;
  cost.forward = {flops, sumBytes(getOperands()), bytesOf(getResult()), 1};
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true);
  if (isFloat(getInput()))
    cost.backward = {0, bytesOf(getResult()) + bytesOf(getIndex()),
                     bytesOf(getInput()) + bytesOf(getSrc()), 2};
  return cost;
}

void ScatterOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  if (isFloat(getInput()))
    saved.push_back(getIndex());
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations.
//===----------------------------------------------------------------------===//

OpCost LayerNormOp::getCost() {
  // Mean, variance, normalize, scale and shift: ~8 FLOPs per element; the
  // backward recomputes the statistics' gradients and those of weight/bias.
  double elements = elementsOf(getInput());
  OpCost cost = mapCost(*this, OpClass::Reduction, 8 * elements, 14 * elements);
  cost.backward.kernels = (getWeight() || getBias()) ? 2 : 1;
  return cost;
}

template <typename Reduction> static OpCost reductionCost(Reduction op) {
  // One pass over the input; the backward broadcasts the result's gradient
  // back over it (and, for a max, compares against the saved extremum).
  double elements = elementsOf(op.getInput());
  return mapCost(op, OpClass::Reduction, elements, elements);
}
OpCost ReduceSumOp::getCost() { return reductionCost(*this); }
OpCost ReduceMeanOp::getCost() { return reductionCost(*this); }
OpCost ReduceMaxOp::getCost() { return reductionCost(*this); }
void ReduceSumOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void ReduceMeanOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
void ReduceMaxOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getInput());
  saved.push_back(getResult());
}
// The product's backward: result / input where the slice has no zero, the
// product of the other elements at a slice's only zero (a count of zeros, a
// product of the non-zeros, compares and selects): ~8 per element.
OpCost ReduceProdOp::getCost() {
  double elements = elementsOf(getInput());
  return mapCost(*this, OpClass::Reduction, elements, 8 * elements);
}
void ReduceProdOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getInput());
  saved.push_back(getResult());
}

template <typename IndexReduction> static OpCost indexReductionCost(IndexReduction op) {
  // One compare per element forward, writing values and indices; the
  // backward places each value's gradient at its saved index (a compare
  // against the index and a select per input element). Two results, so
  // mapCost leaves the backward out: it is set here for floats.
  double elements = elementsOf(op.getInput());
  OpCost cost = mapCost(op, OpClass::Reduction, elements, 2 * elements);
  if (isFloat(op.getInput()))
    cost.backward = {2 * elements,
                     bytesOf(op.getValues()) + savedBytesOf(op, /*activations=*/false),
                     bytesOf(op.getInput()), 1};
  return cost;
}
OpCost ReduceMaxIndexOp::getCost() { return indexReductionCost(*this); }
OpCost ReduceMinIndexOp::getCost() { return indexReductionCost(*this); }
void ReduceMaxIndexOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getIndices());
}
void ReduceMinIndexOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getIndices());
}

// cumsum: one add per element each way (its backward is the reversed
// cumsum of the gradient, nothing saved). cumprod: one multiply forward;
// the backward reverse-cumsums grad * result / input before a slice's first
// zero and rebuilds the products after it (~12 ops per element), from the
// saved input and result.
OpCost CumsumOp::getCost() {
  double elements = elementsOf(getInput());
  return mapCost(*this, OpClass::Reduction, elements, elements);
}
void CumsumOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost CumprodOp::getCost() {
  double elements = elementsOf(getInput());
  return mapCost(*this, OpClass::Reduction, elements, 12 * elements);
}
void CumprodOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getInput());
  saved.push_back(getResult());
}

// Linear algebra on batches of small matrices: getrf's ~2/3 n^3 (m n^2 -
// n^3/3 for [m, n]), potrf's n^3/3, trsm's n^2 per right-hand side. The
// factorizations have no gradient rules yet, so no backward.
static OpCost factorizationCost(Operation *op, double flops) {
  OpCost cost = mapCost(op, OpClass::Reduction, flops, 0);
  cost.backward = {};
  cost.savedBytes = 0;
  return cost;
}
static double matrixCount(RankedTensorType type) {
  double count = 1;
  for (int64_t d : type.getShape().drop_back(2))
    count *= d;
  return count;
}
OpCost LuFactorOp::getCost() {
  auto type = llvm::cast<RankedTensorType>(getInput().getType());
  double m = type.getShape().end()[-2], n = type.getShape().back(), k = std::min(m, n);
  double flops = matrixCount(type) * (m * n * k - (m + n) * k * k / 2 + k * k * k / 3) * 2;
  OpCost cost = factorizationCost(*this, flops);
  // The backward (square matrices): two products, two solves and the
  // permutation's product, ~5 n^3 per matrix, from the saved factors.
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true);
  cost.backward = {matrixCount(type) * 5 * m * n * k, 2 * bytesOf(getLu()), bytesOf(getInput()),
                   8};
  return cost;
}
void LuFactorOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getLu());
  saved.push_back(getPivots());
}
OpCost LuPivotsToPermutationOp::getCost() {
  return factorizationCost(*this, elementsOf(getPermutation()));
}
void LuPivotsToPermutationOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
// The backward: a product, two triangular solves with n right-hand sides
// and a few maps (~3 n^3 per matrix), from the saved factor.
OpCost CholeskyOp::getCost() {
  auto type = llvm::cast<RankedTensorType>(getInput().getType());
  double n = type.getShape().back(), flops = matrixCount(type) * n * n * n / 3;
  OpCost cost = factorizationCost(*this, flops);
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true);
  cost.backward = {9 * flops, 2 * bytesOf(getResult()), bytesOf(getInput()), 6};
  return cost;
}
void CholeskyOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getResult());
}
// The backward: one more solve and an [n, k] x [k, n] product per matrix.
OpCost TriangularSolveOp::getCost() {
  auto type = llvm::cast<RankedTensorType>(getResult().getType());
  double n = type.getShape().end()[-2];
  double flops = elementsOf(getResult()) * n;
  return mapCost(*this, OpClass::Reduction, flops, 3 * flops);
}
void TriangularSolveOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getA());
  saved.push_back(getResult());
}

/// A map along `dim` with values and indices (sort, cummax, cummin):
/// `perElement` compares per element forward; the backward scatters each
/// value's gradient to its saved index (one write per element). Two
/// results, so mapCost leaves the backward out: it is set here for floats.
template <typename ValuesAndIndices>
static OpCost valuesAndIndicesCost(ValuesAndIndices op, double perElement) {
  double elements = elementsOf(op.getInput());
  OpCost cost = mapCost(op, OpClass::Reduction, perElement * elements, elements);
  if (isFloat(op.getInput()))
    cost.backward = {elements, bytesOf(op.getValues()) + savedBytesOf(op, /*activations=*/false),
                     bytesOf(op.getInput()), 1};
  return cost;
}
// A comparison sort: about log2(n) compares per element of a slice of n.
OpCost SortOp::getCost() {
  double n = std::max<int64_t>(getInput().getType().getDimSize(getDim()), 2);
  return valuesAndIndicesCost(*this, std::log2(n));
}
void SortOp::getSavedForBackward(SmallVectorImpl<Value> &saved) { saved.push_back(getIndices()); }
OpCost CummaxOp::getCost() { return valuesAndIndicesCost(*this, 1); }
OpCost CumminOp::getCost() { return valuesAndIndicesCost(*this, 1); }
void CummaxOp::getSavedForBackward(SmallVectorImpl<Value> &saved) { saved.push_back(getIndices()); }
void CumminOp::getSavedForBackward(SmallVectorImpl<Value> &saved) { saved.push_back(getIndices()); }
// logcumsumexp: a max, an exp and a log1p per element (~25); the backward
// runs two reversed logcumsumexps of log|grad| - result and their exps
// (~70), from the saved input and result.
OpCost LogcumsumexpOp::getCost() {
  double elements = elementsOf(getInput());
  return mapCost(*this, OpClass::Reduction, 25 * elements, 70 * elements);
}
void LogcumsumexpOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getInput());
  saved.push_back(getResult());
}

template <typename Normalize> static OpCost normalizeCost(Normalize op) {
  // max, subtract, exp (~10), sum, divide; the backward y * (dy - sum(dy * y))
  // (or dy - exp(y) * sum(dy) for log_softmax) reads only the saved result.
  double elements = elementsOf(op.getInput());
  return mapCost(op, OpClass::Reduction, 14 * elements, 4 * elements);
}
OpCost SoftmaxOp::getCost() { return normalizeCost(*this); }
OpCost LogSoftmaxOp::getCost() { return normalizeCost(*this); }
void SoftmaxOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getResult());
}
void LogSoftmaxOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getResult());
}

//===----------------------------------------------------------------------===//
// Pooling: each output reads a window of the input.
//===----------------------------------------------------------------------===//

template <typename Pool>
static OpCost windowCost(Pool op, int64_t windowElements, OpClass opClass) {
  double outputs = elementsOf(op.getResult());
  return mapCost(op, opClass, outputs * windowElements, outputs * windowElements);
}

// Windowed pools run at their own measured rate (the `pooling` class): their
// strided, overlapping windows are far from a reduction's streaming read.
OpCost MaxPool2dOp::getCost() {
  auto kernel = getKernel();
  return windowCost(*this, kernel[0] * kernel[1], OpClass::Pooling);
}

OpCost AvgPool2dOp::getCost() {
  auto kernel = getKernel();
  return windowCost(*this, kernel[0] * kernel[1], OpClass::Pooling);
}
void AvgPool2dOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

OpCost AdaptiveAvgPool2dOp::getCost() {
  // Bins cover the input about once.
  auto input = getInput().getType();
  int64_t bins = std::max<int64_t>(1, elementsOf(getResult()));
  int64_t window = std::max<int64_t>(1, input.getNumElements() / bins);
  return windowCost(*this, window, OpClass::Reduction);
}
void AdaptiveAvgPool2dOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

//===----------------------------------------------------------------------===//
// Fused attention.
//===----------------------------------------------------------------------===//

namespace {
/// The (query, key) pairs one head scores: every pair, or under the causal
/// mask the keys j <= i + (keys - queries) of each query i.
double attentionPairs(int64_t queries, int64_t keys, bool causal) {
  if (!causal)
    return static_cast<double>(queries) * keys;
  double pairs = 0;
  for (int64_t i = 0; i < queries; ++i)
    pairs += static_cast<double>(std::clamp<int64_t>(i + keys - queries + 1, 0, keys));
  return pairs;
}

/// FLOPs per scored pair of the softmax, counted as the unfused softmax is
/// (max, subtract, exp, sum, divide).
constexpr double kSoftmaxFlopsPerScore = 14;
} // namespace

OpCost AttentionOp::getCost() {
  // Per pair: q.k (2D), the softmax, p*v (2Dv). A causal mask skips the
  // pairs it hides, about half of them. The kernel reads q, k and v and
  // writes the result; the scores never reach memory.
  auto q = getQ().getType();
  int64_t d = q.getDimSize(3), dv = getV().getType().getDimSize(3);
  double heads = static_cast<double>(q.getDimSize(0)) * q.getDimSize(1);
  double pairs =
      heads * attentionPairs(q.getDimSize(2), getK().getType().getDimSize(2), getCausal());
  double statsBytes = heads * q.getDimSize(2) * sizeof(float); // one log-sum-exp per query
  OpCost cost;
  cost.opClass = OpClass::Attention;
  cost.forward = {pairs * (2.0 * d + 2.0 * dv + kSoftmaxFlopsPerScore),
                  sumBytes(getOperation()->getOperands()), bytesOf(getResult()), 1};
  // The FlashAttention backward recomputes scores and probabilities from q,
  // k and the saved log-sum-exp, then forms dV = P^T dO, dP = dO V^T,
  // dS = P (dP - rowsum(dO O)), dQ = dS K and dK = dS^T Q: five products
  // per pair against the forward's two, in two kernels (rowsum, then the rest).
  cost.backward = {pairs * (6.0 * d + 4.0 * dv + kSoftmaxFlopsPerScore + 3),
                   sumBytes(getOperation()->getOperands()) + 2 * bytesOf(getResult()) + statsBytes,
                   sumBytes(getOperation()->getOperands()), 2};
  cost.savedBytes = savedBytesOf(*this, /*activations=*/true) + statsBytes;
  return cost;
}

void AttentionOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  // q, k, v and the output (for rowsum(dO O)); the log-sum-exp per query is
  // no IR value and is counted in the cost's savedBytes.
  saved.append({getQ(), getK(), getV(), getResult()});
}

//===----------------------------------------------------------------------===//
// Training ops (CleaveTrainingOps.td). Their `backward` stays empty: nothing
// differentiates a backward op or an update.
//===----------------------------------------------------------------------===//

OpCost StateOp::getCost() { return noCost(); }

namespace {
/// An in-place update: `flopsPerElement` per element of the first operand,
/// reading every operand and writing the updated ones.
OpCost updateCost(Operation *op, double flopsPerElement) {
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  double written = 0;
  for (unsigned index : cast<ExecutableOpInterface>(op).getUpdatedOperands())
    written += bytesOf(op->getOperand(index));
  cost.forward = {flopsPerElement * elementsOf(op->getOperand(0)), sumBytes(op->getOperands()),
                  written, 1};
  return cost;
}
} // namespace

OpCost AssignOp::getCost() { return updateCost(*this, 0); }
void AssignOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
// Copies over the host link, the bytes being what moves. They appear only
// after planning (-cleave-spill-to-host): the planner costs spilling with
// the link itself (passes/PlanSearch.cpp), not op by op.
OpCost PrefetchOp::getCost() {
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  cost.forward = {0, bytesOf(getSource()), bytesOf(getResult()), 1};
  return cost;
}
void PrefetchOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost SpillOp::getCost() { return updateCost(*this, 0); }
void SpillOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost UpdateRunningStatsOp::getCost() { return updateCost(*this, 6); }
void UpdateRunningStatsOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
// Decay, two moment updates, a square root, a division and the step.
OpCost AdamWOp::getCost() { return updateCost(*this, 12); }
void AdamWOp::getSavedForBackward(SmallVectorImpl<Value> &) {}
OpCost SgdOp::getCost() { return updateCost(*this, getMomentumBuffer() ? 5 : 2); }
void SgdOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

OpCost DropoutTrainOp::getCost() {
  // Philox draws four words in ~40 integer operations; a compare and a
  // multiply per element. Backward is the same op on the gradient.
  double elements = elementsOf(getResult());
  OpCost cost;
  cost.opClass = OpClass::Elementwise;
  cost.forward = {12 * elements, bytesOf(getInput()), bytesOf(getResult()), 1};
  cost.backward = cost.forward;
  return cost;
}
// The mask is recomputed from the step counter, never stored.
void DropoutTrainOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

int64_t BatchNormTrainOp::getFlopsPerElement() {
  // Two passes of statistics, then a scale and shift.
  return 6;
}
void BatchNormTrainOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append({getInput(), getMean(), getVar()});
}

OpCost NllLossOp::getCost() {
  // A gather of one log-probability per row; its backward scatters them.
  OpCost cost;
  cost.opClass = OpClass::Reduction;
  double rows = elementsOf(getTarget());
  cost.forward = {rows, bytesOf(getTarget()) + rows * 4, bytesOf(getResult()), 1};
  cost.backward = {rows, bytesOf(getTarget()), bytesOf(getInput()), 1};
  return cost;
}
void NllLossOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getTarget());
}

OpCost AttentionBackwardOp::getCost() {
  // The forward op's backward cost (see AttentionOp::getCost).
  auto q = getQ().getType();
  int64_t d = q.getDimSize(3), dv = getV().getType().getDimSize(3);
  double heads = static_cast<double>(q.getDimSize(0)) * q.getDimSize(1);
  double pairs =
      heads * attentionPairs(q.getDimSize(2), getK().getType().getDimSize(2), getCausal());
  OpCost cost;
  cost.opClass = OpClass::Attention;
  cost.forward = {pairs * (6.0 * d + 4.0 * dv + kSoftmaxFlopsPerScore + 3),
                  sumBytes(getOperation()->getOperands()),
                  sumBytes(getOperation()->getResults()), 2};
  return cost;
}

namespace {
/// A conv2d's backward GEMM: the forward product's size, as an implicit GEMM
/// per group.
OpCost convBackwardCost(Operation *op, RankedTensorType output, RankedTensorType weight,
                        int64_t groups) {
  GemmShape shape;
  shape.batch = groups;
  shape.m = output.getDimSize(0) * output.getDimSize(2) * output.getDimSize(3);
  shape.n = weight.getDimSize(0) / groups;
  shape.k = weight.getDimSize(1) * weight.getDimSize(2) * weight.getDimSize(3);
  OpCost cost;
  cost.opClass = groups > 1 ? OpClass::GroupedConvolution : OpClass::Convolution;
  cost.gemm = shape;
  cost.forward = {2.0 * shape.batch * shape.m * shape.n * shape.k, sumBytes(op->getOperands()),
                  sumBytes(op->getResults()), 1};
  return cost;
}
} // namespace

OpCost Conv2dBackwardInputOp::getCost() {
  return convBackwardCost(*this, getGrad().getType(), getWeight().getType(),
                          static_cast<int64_t>(getGroups()));
}
OpCost Conv2dBackwardWeightOp::getCost() {
  return convBackwardCost(*this, getGrad().getType(), getResult().getType(),
                          static_cast<int64_t>(getGroups()));
}

OpCost LinearBackwardWeightOp::getCost() {
  // [N, M] x [M, K]: the leading positions are the contraction.
  auto grad = getGrad().getType();
  GemmShape shape;
  shape.m = grad.getShape().back();
  shape.n = getInput().getType().getShape().back();
  shape.k = grad.getNumElements() / std::max<int64_t>(1, shape.m);
  OpCost cost;
  cost.opClass = OpClass::Gemm;
  cost.gemm = shape;
  cost.forward = {2.0 * shape.m * shape.n * shape.k, sumBytes(getOperation()->getOperands()),
                  bytesOf(getResult()), 1};
  return cost;
}

int64_t GeluBackwardOp::getFlopsPerElement() { return 24; }
int64_t SiluBackwardOp::getFlopsPerElement() { return 16; }
int64_t ReluBackwardOp::getFlopsPerElement() { return 1; }
int64_t SliceBackwardOp::getFlopsPerElement() { return 0; }
