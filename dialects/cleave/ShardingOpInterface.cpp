//===- ShardingOpInterface.cpp - how cleave ops may be split across ranks -===//
//
// Each rule names the loops of an op as factors and says which dims of its
// operands and results each loop runs over (ShardingRule.h). A factor is
// Parallel unless splitting it needs a sum of partial results (Reduction) or
// cannot be done by the op's kernel run on a slice (NeedReplication). Rules
// are exact for the shapes at hand: factors carry sizes, so the planner can
// tell which splits divide evenly.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;
using namespace mlir::cleave;

namespace {

constexpr FactorKind kWhole = FactorKind::NeedReplication;

ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

/// The dims of a tensor of `shape` that broadcasts to `target`, whose dims
/// are `targetFactors`: dims align from the right, and a dim of size 1 under
/// a larger one has no factors (it is read whole by every rank).
TensorFactors broadcastFactors(ArrayRef<int64_t> shape, ArrayRef<int64_t> target,
                               const TensorFactors &targetFactors) {
  size_t offset = target.size() - shape.size();
  TensorFactors dims;
  for (auto [dim, size] : llvm::enumerate(shape)) {
    bool stretched = size == 1 && target[offset + dim] != 1;
    dims.push_back(stretched ? DimFactors() : targetFactors[offset + dim]);
  }
  return dims;
}

} // namespace

//===----------------------------------------------------------------------===//
// Rules shared by op families.
//===----------------------------------------------------------------------===//

ShardingRule mlir::cleave::getReplicatedShardingRule(Operation *op) {
  // A value that is not a ranked tensor counts as rank 0, so the rule keeps
  // one entry per operand and result.
  auto shapes = [](ValueRange values) {
    SmallVector<ArrayRef<int64_t>> shapes;
    for (Value value : values) {
      auto tensor = llvm::dyn_cast<RankedTensorType>(value.getType());
      shapes.push_back(tensor ? tensor.getShape() : ArrayRef<int64_t>());
    }
    return shapes;
  };
  return ShardingRule::replicated(shapes(op->getOperands()), shapes(op->getResults()));
}

ShardingRule mlir::cleave::getElementwiseShardingRule(Operation *op) {
  ShardingRule rule;
  ArrayRef<int64_t> result = shapeOf(op->getResult(0));
  TensorFactors resultFactors = rule.addFactors(result);
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastFactors(shapeOf(operand), result, resultFactors));
  rule.results.push_back(resultFactors);
  return rule;
}

ShardingRule mlir::cleave::getMapShardingRule(Operation *op, ArrayRef<int64_t> wholeDims) {
  ShardingRule rule = getElementwiseShardingRule(op);
  // The elementwise rule creates factor d for result dim d.
  for (int64_t dim : wholeDims)
    rule.factors[dim].kind = kWhole;
  return rule;
}

ShardingRule mlir::cleave::getReductionShardingRule(Operation *op, ArrayRef<int64_t> dims,
                                                    bool keepdim, FactorKind reducedKind) {
  ShardingRule rule;
  TensorFactors inputFactors = rule.addFactors(shapeOf(op->getOperand(0))), resultFactors;
  for (auto [dim, factors] : llvm::enumerate(inputFactors)) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(dim))) {
      resultFactors.push_back(factors);
      continue;
    }
    rule.factors[factors.front()].kind = reducedKind;
    if (keepdim)
      resultFactors.push_back({});
  }
  rule.operands.push_back(inputFactors);
  rule.results.push_back(resultFactors);
  return rule;
}

ShardingRule mlir::cleave::getIndexReductionShardingRule(Operation *op, int64_t dim,
                                                         bool keepdim) {
  ShardingRule rule = getReductionShardingRule(op, {dim}, keepdim, kWhole);
  rule.results.push_back(rule.results.front()); // the indices, laid out as the values
  return rule;
}

ShardingRule mlir::cleave::getValuesAndIndicesMapShardingRule(Operation *op, int64_t dim) {
  ShardingRule rule = getMapShardingRule(op, {dim});
  rule.results.push_back(rule.results.front()); // the indices, laid out as the values
  return rule;
}

namespace {

/// An op without operands: every dim of its value is free (a weight can be
/// laid out any way).
ShardingRule valueRule(Value result) {
  ShardingRule rule;
  rule.results.push_back(rule.addFactors(shapeOf(result)));
  return rule;
}

/// An NCHW window op: batch and channels split; every window reads a
/// neighbourhood of the spatial dims, so they stay whole on both sides.
ShardingRule windowRule(Operation *op) {
  ArrayRef<int64_t> input = shapeOf(op->getOperand(0)), result = shapeOf(op->getResult(0));
  ShardingRule rule;
  TensorFactors inputFactors = rule.addFactors(input.take_front(2));
  TensorFactors resultFactors = inputFactors;
  llvm::append_range(inputFactors, rule.addFactors(input.drop_front(2), kWhole));
  llvm::append_range(resultFactors, rule.addFactors(result.drop_front(2), kWhole));
  rule.operands.push_back(inputFactors);
  rule.results.push_back(resultFactors);
  return rule;
}

} // namespace

//===----------------------------------------------------------------------===//
// Values.
//===----------------------------------------------------------------------===//

ShardingRule ParamOp::getShardingRule() { return valueRule(getResult()); }
ShardingRule ConstantOp::getShardingRule() { return valueRule(getResult()); }

//===----------------------------------------------------------------------===//
// Elementwise ops outside the elementwise op classes.
//===----------------------------------------------------------------------===//

ShardingRule GeluOp::getShardingRule() { return getElementwiseShardingRule(*this); }
ShardingRule DropoutOp::getShardingRule() { return getElementwiseShardingRule(*this); }
ShardingRule CastOp::getShardingRule() { return getElementwiseShardingRule(*this); }
ShardingRule CompareOp::getShardingRule() { return getElementwiseShardingRule(*this); }
ShardingRule WhereOp::getShardingRule() { return getElementwiseShardingRule(*this); }

//===----------------------------------------------------------------------===//
// Contractions and layers.
//===----------------------------------------------------------------------===//

ShardingRule MatmulOp::getShardingRule() {
  // [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast.
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs()), result = shapeOf(getResult());
  ArrayRef<int64_t> batch = result.drop_back(2);
  ShardingRule rule;
  TensorFactors batchFactors = rule.addFactors(batch);
  int m = rule.addFactor(result[result.size() - 2]);
  int n = rule.addFactor(result.back());
  int k = rule.addFactor(lhs.back(), FactorKind::Reduction);
  TensorFactors lhsFactors = broadcastFactors(lhs.drop_back(2), batch, batchFactors);
  lhsFactors.append({{m}, {k}});
  TensorFactors rhsFactors = broadcastFactors(rhs.drop_back(2), batch, batchFactors);
  rhsFactors.append({{k}, {n}});
  TensorFactors resultFactors = batchFactors;
  resultFactors.append({{m}, {n}});
  rule.operands = {lhsFactors, rhsFactors};
  rule.results = {resultFactors};
  return rule;
}

ShardingRule LinearOp::getShardingRule() {
  // input [..., K], weight [N, K], bias [N] -> [..., N]: split N and the
  // weight is cut by rows (column parallel), split K and by columns, with a
  // sum after (row parallel).
  ArrayRef<int64_t> input = shapeOf(getInput());
  ShardingRule rule;
  TensorFactors inputFactors = rule.addFactors(input.drop_back());
  TensorFactors resultFactors = inputFactors;
  int n = rule.addFactor(shapeOf(getWeight()).front());
  int k = rule.addFactor(input.back(), FactorKind::Reduction);
  inputFactors.push_back({k});
  resultFactors.push_back({n});
  rule.operands = {inputFactors, TensorFactors{{n}, {k}}};
  if (getBias())
    rule.operands.push_back({{n}});
  rule.results = {resultFactors};
  return rule;
}

ShardingRule AttentionOp::getShardingRule() {
  // q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] -> [B, H, Sq, Dv].
  // Batches and heads are independent attentions: each rank runs its own.
  // The softmax spans the keys and the scores sum over D, neither of which
  // partial results could complete by a sum; queries stay whole too, as the
  // causal mask depends on each query's position in the whole sequence.
  ArrayRef<int64_t> q = shapeOf(getQ()), k = shapeOf(getK()), v = shapeOf(getV());
  ShardingRule rule;
  TensorFactors batchHeads = rule.addFactors(q.take_front(2));
  int queries = rule.addFactor(q[2], kWhole);
  int headDim = rule.addFactor(q[3], kWhole);
  int keys = rule.addFactor(k[2], kWhole);
  int valueDim = rule.addFactor(v[3], kWhole);
  auto with = [&](int seq, int dim) {
    TensorFactors factors = batchHeads;
    factors.append({{seq}, {dim}});
    return factors;
  };
  rule.operands = {with(queries, headDim), with(keys, headDim), with(keys, valueDim)};
  rule.results = {with(queries, valueDim)};
  return rule;
}

namespace {
/// Whether the op's result is a partial sum: its reduction loop is split.
bool isPartialResult(Operation *op) {
  auto layouts = op->getAttrOfType<ArrayAttr>("cleave.sharding");
  auto first = layouts && !layouts.empty() ? dyn_cast<StringAttr>(layouts[0]) : StringAttr();
  return first && first.getValue() == "partial";
}

/// A bias adds to every part of a partial sum: only the group's first rank
/// adds it, so the sum counts it once.
void keepBiasOnFirstRank(Operation *op, unsigned biasOperand, int64_t rank) {
  if (rank != 0 && op->getNumOperands() > biasOperand && isPartialResult(op))
    op->eraseOperand(biasOperand);
}
} // namespace

void LinearOp::specializeForRank(int64_t rank, int64_t) { keepBiasOnFirstRank(*this, 2, rank); }
void Conv2dOp::specializeForRank(int64_t rank, int64_t) { keepBiasOnFirstRank(*this, 2, rank); }

void EmbeddingOp::specializeForRank(int64_t rank, int64_t) {
  // A split vocabulary: this rank's table holds rows [rank * V, (rank + 1) * V).
  if (isPartialResult(*this))
    setRowOffset(rank * getWeight().getType().getDimSize(0));
}

void EmbeddingBackwardOp::specializeForRank(int64_t rank, int64_t) {
  // The gradient of a split vocabulary's table (laid out split(0) by
  // -cleave-differentiate): this rank's rows start at rank * V.
  auto layouts = (*this)->getAttrOfType<ArrayAttr>("cleave.sharding");
  auto first = layouts && !layouts.empty() ? dyn_cast<StringAttr>(layouts[0]) : StringAttr();
  if (first && first.getValue() == "split(0)")
    setRowOffset(rank * getResult().getType().getDimSize(0));
}

ShardingRule EmbeddingOp::getShardingRule() {
  // weight [V, D], indices [...] -> [..., D]. Split V and each rank looks up
  // the rows it holds, zeros for the others; a sum completes the result
  // (vocab-parallel embedding).
  ArrayRef<int64_t> table = shapeOf(getWeight());
  ShardingRule rule;
  TensorFactors indexFactors = rule.addFactors(shapeOf(getIndices()));
  TensorFactors resultFactors = indexFactors;
  int d = rule.addFactor(table[1]);
  int v = rule.addFactor(table[0], FactorKind::Reduction);
  resultFactors.push_back({d});
  rule.operands = {TensorFactors{{v}, {d}}, indexFactors};
  rule.results = {resultFactors};
  return rule;
}

ShardingRule LayerNormOp::getShardingRule() {
  // The statistics span the normalized dims; weight and bias are those dims
  // and broadcast against the input from the right.
  int64_t rank = getInput().getType().getRank();
  int64_t first = rank - static_cast<int64_t>(getNormalizedShape().size());
  return getMapShardingRule(*this, llvm::to_vector(llvm::seq(first, rank)));
}

ShardingRule BatchNormOp::getShardingRule() {
  // With running statistics this is a per-channel affine map: every dim
  // splits, and mean, var, weight and bias follow the channel dim.
  ShardingRule rule;
  TensorFactors inputFactors = rule.addFactors(shapeOf(getInput()));
  rule.operands.push_back(inputFactors);
  for (size_t i = 1; i < getNumOperands(); ++i)
    rule.operands.push_back({inputFactors[1]});
  rule.results.push_back(inputFactors);
  return rule;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling.
//===----------------------------------------------------------------------===//

namespace {
/// input [N, C, H, W], weight [O, C/groups, KH, KW], bias [O] -> [N, O, H', W'].
/// Input channels sum into each output when there is one group, unless
/// `wholeChannels` (a clamp after the sum needs it whole); with several
/// groups, an output reads only its group's channels, which a plain split of
/// C would not keep together, so C stays whole. The outputs are then groups x
/// (outputs per group), the groups major: only the minor factor splits, so
/// every rank holds part of every group's outputs and runs the same groups
/// (a depthwise conv, one output per group, stays whole). Windows overlap in
/// the spatial dims: those stay whole. A residual is laid out as the result.
template <typename Conv> ShardingRule convolutionRule(Conv op, bool wholeChannels) {
  ArrayRef<int64_t> input = shapeOf(op.getInput()), weight = shapeOf(op.getWeight()),
                    result = shapeOf(op.getResult());
  int64_t groups = op.getGroups();
  bool grouped = groups != 1;
  ShardingRule rule;
  int n = rule.addFactor(input[0]);
  int c = rule.addFactor(input[1], grouped || wholeChannels ? kWhole : FactorKind::Reduction);
  TensorFactors inputFactors = {{n}, {c}};
  llvm::append_range(inputFactors, rule.addFactors(input.drop_front(2), kWhole));
  DimFactors outputs;
  if (grouped)
    outputs.push_back(rule.addFactor(groups, kWhole));
  int o = rule.addFactor(weight[0] / groups);
  outputs.push_back(o);
  int depth = grouped ? rule.addFactor(weight[1], kWhole) : c;
  TensorFactors weightFactors = {outputs, {depth}};
  llvm::append_range(weightFactors, rule.addFactors(weight.drop_front(2), kWhole));
  TensorFactors resultFactors = {{n}, outputs};
  llvm::append_range(resultFactors, rule.addFactors(result.drop_front(2), kWhole));
  rule.operands = {inputFactors, weightFactors};
  if (op.getBias())
    rule.operands.push_back({outputs});
  rule.results = {resultFactors};
  return rule;
}
} // namespace

ShardingRule Conv2dOp::getShardingRule() { return convolutionRule(*this, false); }

ShardingRule FusedConv2dOp::getShardingRule() {
  ShardingRule rule = convolutionRule(*this, true);
  if (getResidual())
    rule.operands.push_back(rule.results[0]);
  return rule;
}

ShardingRule MaxPool2dOp::getShardingRule() { return windowRule(*this); }
ShardingRule AvgPool2dOp::getShardingRule() { return windowRule(*this); }
ShardingRule AdaptiveAvgPool2dOp::getShardingRule() { return windowRule(*this); }

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

ShardingRule ReshapeOp::getShardingRule() {
  // The common refinement of both shapes: walk them with the part of the
  // current dim on each side not yet made of factors; while one divides the
  // other, the smaller is a factor of both ([2, 8, 32] -> [2, 8, 4, 8] makes
  // 32 = 4 * 8). Where neither divides ([2, 3] -> [3, 2]), the dims up to
  // where both sides cover the same elements again stay whole, a factor per
  // dim and side. Size-1 dims have no factors.
  ArrayRef<int64_t> from = shapeOf(getInput()), to = shapeOf(getResult());
  if (llvm::is_contained(from, 0) || llvm::is_contained(to, 0))
    return getReplicatedShardingRule(*this); // no elements: nothing to split
  ShardingRule rule;
  TensorFactors fromFactors(from.size()), toFactors(to.size());
  size_t a = 0, b = 0;
  int64_t restA = from.empty() ? 1 : from[0], restB = to.empty() ? 1 : to[0];
  // Moves past used-up dims and dims of size 1.
  auto skip = [](ArrayRef<int64_t> shape, size_t &dim, int64_t &rest) {
    while (rest == 1 && ++dim < shape.size())
      rest = shape[dim];
  };
  // One NeedReplication factor for each dim of size > 1 in [first, last];
  // `firstRest` is what is left of dim `first`.
  auto keepWhole = [&](TensorFactors &factors, ArrayRef<int64_t> shape, size_t first, size_t last,
                       int64_t firstRest) {
    for (size_t dim = first; dim <= last; ++dim) {
      int64_t size = dim == first ? firstRest : shape[dim];
      if (size != 1)
        factors[dim].push_back(rule.addFactor(size, kWhole));
    }
  };
  skip(from, a, restA);
  skip(to, b, restB);
  while (a < from.size() && b < to.size()) {
    if (restA % restB == 0 || restB % restA == 0) {
      int64_t size = std::min(restA, restB);
      int factor = rule.addFactor(size);
      fromFactors[a].push_back(factor);
      toFactors[b].push_back(factor);
      restA /= size;
      restB /= size;
    } else {
      // Both sides hold the same number of elements from here on, so the
      // group ends before either shape does.
      size_t lastA = a, lastB = b;
      int64_t spanA = restA, spanB = restB;
      while (spanA != spanB) {
        if (spanA < spanB)
          spanA *= from[++lastA];
        else
          spanB *= to[++lastB];
      }
      keepWhole(fromFactors, from, a, lastA, restA);
      keepWhole(toFactors, to, b, lastB, restB);
      a = lastA;
      b = lastB;
      restA = restB = 1;
    }
    skip(from, a, restA);
    skip(to, b, restB);
  }
  rule.operands.push_back(fromFactors);
  rule.results.push_back(toFactors);
  return rule;
}

ShardingRule PermuteOp::getShardingRule() {
  ShardingRule rule;
  TensorFactors inputFactors = rule.addFactors(shapeOf(getInput())), resultFactors;
  for (int64_t dim : getDims())
    resultFactors.push_back(inputFactors[dim]);
  rule.operands.push_back(inputFactors);
  rule.results.push_back(resultFactors);
  return rule;
}

ShardingRule BroadcastToOp::getShardingRule() {
  // A stretched or added dim is a factor of the result only.
  return getElementwiseShardingRule(*this);
}

ShardingRule SliceOp::getShardingRule() {
  // A cut that is one whole block of equal blocks (q of a fused QKV output)
  // makes the cut dim [blocks, block]: split `block` and each rank keeps its
  // part of every block, so the slice is local. Any other cut stays whole.
  // `end - start == kept` holds only for unit steps (or one element).
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  int64_t cut = static_cast<int64_t>(getDim());
  int64_t whole = input[cut], kept = result[cut];
  int64_t start = static_cast<int64_t>(getStart()), end = static_cast<int64_t>(getEnd());
  bool oneBlock = kept > 1 && whole % kept == 0 && start % kept == 0 && end - start == kept;
  ShardingRule rule;
  TensorFactors inputFactors, resultFactors;
  for (int64_t dim = 0, rank = input.size(); dim < rank; ++dim) {
    if (dim != cut) {
      int factor = rule.addFactor(input[dim]);
      inputFactors.push_back({factor});
      resultFactors.push_back({factor});
    } else if (oneBlock) {
      DimFactors cutFactors;
      if (whole != kept)
        cutFactors.push_back(rule.addFactor(whole / kept, kWhole));
      int block = rule.addFactor(kept);
      cutFactors.push_back(block);
      inputFactors.push_back(cutFactors);
      resultFactors.push_back({block});
    } else {
      inputFactors.push_back({rule.addFactor(whole, kWhole)});
      resultFactors.push_back({rule.addFactor(kept, kWhole)});
    }
  }
  rule.operands.push_back(inputFactors);
  rule.results.push_back(resultFactors);
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  // The concat dim stays whole: where an element lands depends on every
  // operand's size along it.
  ArrayRef<int64_t> result = shapeOf(getResult());
  int64_t joined = static_cast<int64_t>(getDim());
  ShardingRule rule;
  SmallVector<TensorFactors> inputFactors(getInputs().size());
  TensorFactors resultFactors;
  for (int64_t dim = 0, rank = result.size(); dim < rank; ++dim) {
    if (dim != joined) {
      int factor = rule.addFactor(result[dim]);
      for (TensorFactors &factors : inputFactors)
        factors.push_back({factor});
      resultFactors.push_back({factor});
      continue;
    }
    for (auto [input, factors] : llvm::zip_equal(getInputs(), inputFactors))
      factors.push_back({rule.addFactor(shapeOf(input)[dim], kWhole)});
    resultFactors.push_back({rule.addFactor(result[dim], kWhole)});
  }
  rule.operands.append(inputFactors.begin(), inputFactors.end());
  rule.results.push_back(resultFactors);
  return rule;
}
