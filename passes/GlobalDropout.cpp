//===- GlobalDropout.cpp - one device's dropout masks on every mesh -------===//
//
// A dropout's mask is a function of the element's index; on one device the
// index runs over the whole batch. A rank or microbatch holding samples
// [o, o + n) indexes from o's first element instead, given the offset at run
// time (the trainer sets the `sample_offset` state), so that data
// parallelism, microbatches and pipelines drop exactly what one device drops.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_GLOBALDROPOUT
#include "passes/Passes.h.inc"

namespace {

struct GlobalDropoutPass : impl::GlobalDropoutBase<GlobalDropoutPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<DropoutTrainOp> dropouts;
    func.walk([&](DropoutTrainOp op) {
      if (!op.getSampleOffset())
        dropouts.push_back(op);
    });
    if (dropouts.empty())
      return;
    // The microbatch: dim 0 of every input (training requires it).
    int64_t samples = 0;
    for (Type type : func.getArgumentTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(type); tensor && tensor.getRank() > 0) {
        samples = tensor.getDimSize(0);
        break;
      }
    if (samples <= 0) {
      dropouts.front().emitError("dropout over a split batch needs the step's inputs, which "
                                 "hold the samples in dim 0; the function has none");
      return signalPassFailure();
    }
    auto scalar = RankedTensorType::get({}, IntegerType::get(func.getContext(), 64));
    StateOp state = getOrCreateState(func, kSampleOffsetState, scalar);
    if (!state)
      return signalPassFailure();
    OpBuilder builder(func.getContext());
    for (DropoutTrainOp op : dropouts) {
      auto input = cast<RankedTensorType>(op.getInput().getType());
      if (input.getRank() == 0 || input.getDimSize(0) % samples) {
        op.emitError("dropout on ")
            << input << ": its dim 0 is not the rows of the microbatch's " << samples
            << " samples, so a rank or microbatch cannot draw one device's mask for its part "
               "(a batch-first layout can)";
        return signalPassFailure();
      }
      op.getSampleOffsetMutable().assign(state.getResult());
      op.setSamplesAttr(builder.getI64IntegerAttr(samples));
    }
  }
};

} // namespace
} // namespace mlir::cleave
