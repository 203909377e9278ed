//===- TrainingMode.cpp - dropout and batch_norm as model.train() runs them ===//
//
// A traced model records whether it ran in train or eval mode in its ops'
// flags; a training step must compute what `model.train()` computes,
// whatever the trace says. Only two ops differ: dropout (random masks) and
// batch_norm (batch statistics, and an update of the running ones).
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_TRAININGMODE
#include "passes/Passes.h.inc"

namespace {

struct TrainingModePass : impl::TrainingModeBase<TrainingModePass> {
  using TrainingModeBase::TrainingModeBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (seed < 0) {
      func.emitError("cleave-training-mode: seed must be >= 0, got ") << seed;
      return signalPassFailure();
    }
    Block &body = func.front();
    OpBuilder builder(func.getContext());

    // Dropout: streams number the dropouts in program order, so a plan's
    // masks do not depend on how the passes visit them.
    int64_t stream = 0;
    for (DropoutOp dropout : llvm::make_early_inc_range(body.getOps<DropoutOp>())) {
      double p = dropout.getP().convertToDouble();
      if (p == 0) {
        dropout.getResult().replaceAllUsesWith(dropout.getInput());
        dropout.erase();
        continue;
      }
      Value step = getOrCreateStepCounter(func);
      if (!step)
        return signalPassFailure();
      builder.setInsertionPoint(dropout);
      Value masked = builder.create<DropoutTrainOp>(
          dropout.getLoc(), dropout.getType(), dropout.getInput(), step, Value(),
          dropout.getPAttr(), builder.getI64IntegerAttr(seed), builder.getI64IntegerAttr(stream++),
          IntegerAttr());
      dropout.getResult().replaceAllUsesWith(masked);
      dropout.erase();
      ++dropouts;
    }

    for (BatchNormOp norm : llvm::make_early_inc_range(body.getOps<BatchNormOp>())) {
      for (auto [value, name] : {std::pair{norm.getMean(), "running mean"},
                                 {norm.getVar(), "running variance"}})
        if (!isa_and_nonnull<ParamOp>(value.getDefiningOp())) {
          norm.emitError("batch_norm's ")
              << name << " is not a buffer of the model: training updates it in place";
          return signalPassFailure();
        }
      auto input = llvm::cast<RankedTensorType>(norm.getInput().getType());
      auto channels = RankedTensorType::get({input.getDimSize(1)}, input.getElementType());
      builder.setInsertionPoint(norm);
      auto train = builder.create<BatchNormTrainOp>(
          norm.getLoc(), TypeRange{input, channels, channels}, norm.getInput(), norm.getWeight(),
          norm.getBias(), norm.getEpsAttr());
      if (failed(verify(train)))
        return signalPassFailure();
      // The traced call's momentum (0.1 unless the model set another).
      auto momentum = norm->getAttrOfType<FloatAttr>("momentum");
      if (!momentum)
        momentum = builder.getF64FloatAttr(0.1);
      int64_t count = input.getNumElements() / std::max<int64_t>(1, input.getDimSize(1));
      builder.create<UpdateRunningStatsOp>(norm.getLoc(), norm.getMean(), norm.getVar(),
                                           train.getMean(), train.getVar(), momentum,
                                           builder.getI64IntegerAttr(count));
      norm.getResult().replaceAllUsesWith(train.getResult());
      norm.erase();
      ++batchNorms;
    }
  }
};

} // namespace
} // namespace mlir::cleave
