//===- FoldBatchNorm.cpp - fold inference batch norms into convolutions ---===//
//
// In eval mode a batch norm after a convolution is an affine map per output
// channel: y = (conv(x, W) + c - mean) * s + beta with s = gamma / sqrt(var +
// eps). So it equals one convolution with weight W * s (each output
// channel's filter scaled) and bias (c - mean) * s + beta. Small models run
// one batch norm per convolution (56 of shufflenet's 210 kernels), each a
// pass over an activation that the convolution just wrote; folding removes
// those kernels and their traffic.
//
// Folds when the convolution's result feeds only the batch norm and every
// tensor involved (the filter, the convolution's bias, the statistics and the
// batch norm's weight and bias) is f32 with data at compile time: a
// `cleave.constant`, or a `cleave.param` whose data the caller supplies. The
// folded weight and bias become new params (`<conv weight>.bn_folded`,
// `<conv>.bias.bn_folded`) handed to the caller's sink, so plans hold them
// as weights like any other; without a sink (`cleave-opt`) they become
// constants. Only inference programs fold: training updates the statistics
// and the weights the fold would bake in.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <optional>

#define DEBUG_TYPE "cleave-fold-batch-norm"

namespace mlir::cleave {
#define GEN_PASS_DEF_FOLDBATCHNORM
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// The f32 elements of `v` when they are known at compile time: a dense
/// constant, or a param whose data `lookup` has. Widened to double, so that
/// the fold rounds once.
std::optional<std::vector<double>> knownValues(Value v, const ParamDataLookup &lookup) {
  auto type = tensorType(v);
  if (!type.getElementType().isF32() || !type.hasStaticShape())
    return std::nullopt;
  std::vector<double> values;
  values.reserve(type.getNumElements());
  if (auto constant = v.getDefiningOp<ConstantOp>()) {
    auto dense = llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue());
    if (!dense)
      return std::nullopt;
    for (const APFloat &x : dense.getValues<APFloat>())
      values.push_back(x.convertToDouble());
    return values;
  }
  auto param = v.getDefiningOp<ParamOp>();
  const void *data = param && lookup ? lookup(param.getName()) : nullptr;
  if (!data)
    return std::nullopt;
  const float *f = static_cast<const float *>(data);
  values.assign(f, f + type.getNumElements());
  return values;
}

/// The bias's name for a convolution whose weight is `weightName` and that
/// has no bias of its own: `features.0.0.weight` -> `features.0.0.bias`.
std::string biasNameFor(llvm::StringRef weightName) {
  weightName.consume_back(".weight");
  return (weightName + ".bias").str();
}

/// The folded weight and bias of one convolution and the batch norm after it.
struct Fold {
  Conv2dOp conv;
  std::vector<float> weight, bias;
};

std::optional<Fold> matchFold(BatchNormOp norm, const ParamDataLookup &lookup) {
  auto conv = norm.getInput().getDefiningOp<Conv2dOp>();
  if (!conv) {
    LLVM_DEBUG(llvm::dbgs() << "not after a conv2d: " << norm << "\n");
    return std::nullopt;
  }
  if (!conv.getResult().hasOneUse()) {
    LLVM_DEBUG(llvm::dbgs() << "the conv2d's result has other users: " << norm << "\n");
    return std::nullopt;
  }
  auto weight = knownValues(conv.getWeight(), lookup);
  auto mean = knownValues(norm.getMean(), lookup);
  auto var = knownValues(norm.getVar(), lookup);
  if (!weight || !mean || !var) {
    LLVM_DEBUG(llvm::dbgs() << "filter or statistics unknown: " << norm << "\n");
    return std::nullopt;
  }
  auto known = [&](Value v) -> std::optional<std::vector<double>> {
    if (!v)
      return std::vector<double>();
    return knownValues(v, lookup);
  };
  auto convBias = known(conv.getBias());
  auto gamma = known(norm.getWeight());
  auto beta = known(norm.getBias());
  if (!convBias || !gamma || !beta) {
    LLVM_DEBUG(llvm::dbgs() << "a bias or the affine weights unknown: " << norm << "\n");
    return std::nullopt;
  }
  const int64_t filters = tensorType(conv.getWeight()).getDimSize(0);
  auto sized = [&](const std::vector<double> &v, bool optional) {
    return (optional && v.empty()) || static_cast<int64_t>(v.size()) == filters;
  };
  if (filters <= 0 || !sized(*mean, false) || !sized(*var, false) || !sized(*convBias, true) ||
      !sized(*gamma, true) || !sized(*beta, true))
    return std::nullopt;
  const double eps = norm.getEps().convertToDouble();
  const int64_t perFilter = static_cast<int64_t>(weight->size()) / filters;
  Fold fold{conv, std::vector<float>(weight->size()), std::vector<float>(filters)};
  for (int64_t f = 0; f < filters; ++f) {
    double scale = (gamma->empty() ? 1.0 : (*gamma)[f]) / std::sqrt((*var)[f] + eps);
    if (!std::isfinite(scale)) {
      LLVM_DEBUG(llvm::dbgs() << "channel " << f << "'s scale is not finite: " << norm << "\n");
      return std::nullopt;
    }
    for (int64_t i = 0; i < perFilter; ++i)
      fold.weight[f * perFilter + i] = static_cast<float>((*weight)[f * perFilter + i] * scale);
    double c = convBias->empty() ? 0.0 : (*convBias)[f];
    fold.bias[f] = static_cast<float>((c - (*mean)[f]) * scale + (beta->empty() ? 0.0 : (*beta)[f]));
  }
  return fold;
}

struct FoldBatchNormPass : impl::FoldBatchNormBase<FoldBatchNormPass> {
  FoldBatchNormPass() = default;
  FoldBatchNormPass(ParamDataLookup paramData, ParamDataSink addParam)
      : paramData(std::move(paramData)), addParam(std::move(addParam)) {}

  /// The folded tensor: a new param `name` (its data handed to the sink), or
  /// a constant when there is no sink.
  Value materialize(OpBuilder &b, Location loc, RankedTensorType type, std::vector<float> data,
                    const std::string &name) {
    if (!addParam) {
      auto attr = DenseElementsAttr::get(type, llvm::ArrayRef<float>(data));
      return b.create<ConstantOp>(loc, attr).getResult();
    }
    addParam(name, type.getShape(), std::move(data));
    return b.create<ParamOp>(loc, type, b.getStringAttr(name), UnitAttr()).getResult();
  }

  /// The names of the folded weight and bias: the filter's param name and
  /// the convolution's bias name (its own, or the filter's with `.bias`),
  /// each with `.bn_folded`; none when the model already has either.
  std::optional<std::pair<std::string, std::string>> foldedNames(Conv2dOp conv) const {
    auto filter = conv.getWeight().getDefiningOp<ParamOp>();
    std::string weight = filter ? filter.getName().str() : "conv2d.weight";
    auto ownBias = conv.getBias() ? conv.getBias().getDefiningOp<ParamOp>() : ParamOp();
    std::string bias = ownBias ? ownBias.getName().str() : biasNameFor(weight);
    weight += ".bn_folded";
    bias += ".bn_folded";
    if (paramData && (paramData(weight) || paramData(bias)))
      return std::nullopt;
    return std::make_pair(weight, bias);
  }

  void runOnOperation() override {
    SmallVector<BatchNormOp> norms;
    getOperation().walk([&](BatchNormOp op) { norms.push_back(op); });
    for (BatchNormOp norm : norms) {
      std::optional<Fold> fold = matchFold(norm, paramData);
      if (!fold)
        continue;
      Conv2dOp conv = fold->conv;
      auto names = foldedNames(conv);
      if (!names) {
        LLVM_DEBUG(llvm::dbgs() << "the folded names are taken: " << norm << "\n");
        continue;
      }
      OpBuilder b(conv);
      auto weightType = tensorType(conv.getWeight());
      auto biasType = RankedTensorType::get({weightType.getDimSize(0)}, weightType.getElementType());
      Value weight =
          materialize(b, conv.getLoc(), weightType, std::move(fold->weight), names->first);
      Value bias = materialize(b, conv.getLoc(), biasType, std::move(fold->bias), names->second);
      auto folded = b.create<Conv2dOp>(conv.getLoc(), conv.getResult().getType(), conv.getInput(),
                                       weight, bias, conv.getStrideAttr(), conv.getPaddingAttr(),
                                       conv.getDilationAttr(), conv.getGroupsAttr());
      norm.getResult().replaceAllUsesWith(folded.getResult());
      // The batch norm, the convolution, then the params and constants only
      // they read.
      llvm::SetVector<Operation *> producers;
      for (Operation *op : {norm.getOperation(), conv.getOperation()})
        for (Value v : op->getOperands())
          if (Operation *p = v.getDefiningOp(); p && llvm::isa<ParamOp, ConstantOp>(p))
            producers.insert(p);
      norm->erase();
      conv->erase();
      for (Operation *p : producers)
        if (p->use_empty())
          p->erase();
      ++numFolded;
    }
  }

  ParamDataLookup paramData;
  ParamDataSink addParam;
};

} // namespace

std::unique_ptr<Pass> createFoldBatchNorm(ParamDataLookup paramData, ParamDataSink addParam) {
  return std::make_unique<FoldBatchNormPass>(std::move(paramData), std::move(addParam));
}

} // namespace mlir::cleave
