//===- AccumulateGradients.cpp - gradients summed over microbatches --------===//
//
// A step of M microbatches runs forward and backward M times and the
// optimizer once. The sum over microbatches lives in state (it outlives a
// phase run); the optimizer phase reads the last microbatch's running sum,
// an arena value its backward left there, so no value is read after the
// assign that overwrites it.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct AccumulateGradientsPass : impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  using AccumulateGradientsBase::AccumulateGradientsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || microbatches == 1)
      return;
    if (microbatches < 1) {
      func.emitError("cleave-accumulate-gradients needs microbatches >= 1");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.front().getTerminator());
    MLIRContext *context = func.getContext();

    struct Accumulated {
      unsigned result;
      StateOp accumulator;
      Value sum;
    };
    SmallVector<Accumulated> accumulated;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      auto of = func.getResultAttrOfType<StringAttr>(i, "cleave.gradient_of");
      if (!of)
        continue;
      Value gradient = ret.getOperand(i);
      auto type = dyn_cast<RankedTensorType>(gradient.getType());
      Operation *def = gradient.getDefiningOp();
      if (!type || !isa<FloatType>(type.getElementType()) || !def) {
        func.emitError("result ") << i << " (a gradient) is not a float tensor an op computes";
        return signalPassFailure();
      }
      StateOp accumulator =
          getOrCreateState(func, ("gradient_accumulator." + of.getValue()).str(), type);
      if (!accumulator)
        return signalPassFailure();
      OpBuilder b(context);
      b.setInsertionPointAfter(def);
      Location loc = NameLoc::get(StringAttr::get(context, "gradient_accumulation"),
                                  gradient.getLoc());
      Value sum = b.create<AddOp>(loc, accumulator, gradient);
      b.create<AssignOp>(loc, accumulator, sum);
      accumulated.push_back({i, accumulator, sum});
    }
    if (accumulated.empty()) {
      func.emitError("no gradients to accumulate: run -cleave-differentiate first");
      return signalPassFailure();
    }

    // The optimizer phase: the mean over the microbatches, and the
    // accumulators zeroed for the next step.
    OpBuilder b(ret);
    Location loc = NameLoc::get(StringAttr::get(context, "gradient_accumulation"), func.getLoc());
    Operation *first = nullptr;
    for (Accumulated &a : accumulated) {
      auto type = cast<RankedTensorType>(a.sum.getType());
      auto element = cast<FloatType>(type.getElementType());
      Value mean = b.create<MulOp>(loc, a.sum,
                                   floatScalar(b, loc, element,
                                               1.0 / static_cast<double>(microbatches)));
      if (!first)
        first = mean.getDefiningOp();
      ret.setOperand(a.result, mean);
    }
    for (Accumulated &a : accumulated) {
      auto type = cast<RankedTensorType>(a.sum.getType());
      Value zero = floatScalar(b, loc, cast<FloatType>(type.getElementType()), 0.0);
      b.create<AssignOp>(loc, a.accumulator, b.create<BroadcastToOp>(loc, type, zero));
    }
    first->setAttr(kPhaseAttr, StringAttr::get(context, kOptimizerPhase));
  }
};

} // namespace
} // namespace mlir::cleave
