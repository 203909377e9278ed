//===- SyncBatchNorm.cpp - batch statistics over the data-parallel ranks ---===//
//
// One device normalizes with the statistics of the whole batch; data-parallel
// ranks each hold a share of it. Written as reductions, one all_reduce per
// statistic and elementwise ops, the synchronized forward is plain IR and
// its backward comes from differentiation like any other op's.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SYNCBATCHNORM
#include "passes/Passes.h.inc"

namespace {

/// The ops written in place of a batch norm run where it ran: its pipeline
/// placement, and its recomputation mark except on the all_reduces, whose
/// small statistics backward keeps rather than reduces again.
struct InheritPlacement : OpBuilder::Listener {
  Operation *from;
  explicit InheritPlacement(Operation *from) : from(from) {}
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    for (StringRef name : kPlacementAttrs)
      if (Attribute a = from->getAttr(name))
        op->setAttr(name, a);
    if (Attribute a = from->getAttr("cleave.recompute"); a && !isa<AllReduceOp>(op))
      op->setAttr("cleave.recompute", a);
  }
};

struct SyncBatchNormPass : impl::SyncBatchNormBase<SyncBatchNormPass> {
  using SyncBatchNormBase::SyncBatchNormBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || ranks <= 1)
      return;
    SmallVector<BatchNormTrainOp> norms;
    func.walk([&](BatchNormTrainOp op) { norms.push_back(op); });
    for (BatchNormTrainOp op : norms)
      if (failed(synchronize(op)))
        return signalPassFailure();
  }

  LogicalResult synchronize(BatchNormTrainOp op) {
    auto type = cast<RankedTensorType>(op.getInput().getType());
    if (!type.getElementType().isF32())
      return op.emitOpError("a batch norm synchronized over data-parallel ranks needs f32, not ")
             << type.getElementType();
    OpBuilder b(op);
    InheritPlacement placement(op);
    b.setListener(&placement);
    Location loc = op.getLoc();
    MLIRContext *context = op.getContext();
    StringAttr groupAttr = StringAttr::get(context, group);
    int64_t channels = type.getDimSize(1);
    SmallVector<int64_t> dims{0};
    int64_t count = type.getDimSize(0);
    for (int64_t d = 2; d < type.getRank(); ++d) {
      dims.push_back(d);
      count *= type.getDimSize(d);
    }
    const int64_t globalCount = count * ranks;
    auto scalar = [&](double v) { return floatScalar(b, loc, b.getF32Type(), v); };
    // The per-channel statistic of `x` summed over the whole batch,
    // divided by its count: [1, C, 1, ...].
    auto globalMean = [&](Value x) -> Value {
      Value sum = b.create<ReduceSumOp>(loc, x, b.getDenseI64ArrayAttr(dims), b.getBoolAttr(true));
      Value total = b.create<AllReduceOp>(loc, sum.getType(), sum, groupAttr);
      return b.create<MulOp>(loc, total, scalar(1.0 / static_cast<double>(globalCount)));
    };
    SmallVector<int64_t> channelShape(type.getRank(), 1);
    channelShape[1] = channels;
    auto perChannel = RankedTensorType::get(channelShape, type.getElementType());
    auto flat = RankedTensorType::get({channels}, type.getElementType());

    Value x = op.getInput();
    Value mean = globalMean(x);
    Value centered = b.create<SubOp>(loc, x, mean);
    Value var = globalMean(b.create<MulOp>(loc, centered, centered));
    Value inverse = b.create<RsqrtOp>(
        loc, b.create<AddOp>(loc, var, scalar(op.getEps().convertToDouble())));
    Value y = b.create<MulOp>(loc, centered, inverse);
    if (Value weight = op.getWeight())
      y = b.create<MulOp>(loc, y, b.create<ReshapeOp>(loc, perChannel, weight));
    if (Value bias = op.getBias())
      y = b.create<AddOp>(loc, y, b.create<ReshapeOp>(loc, perChannel, bias));
    Value meanFlat = b.create<ReshapeOp>(loc, flat, mean);
    Value varFlat = b.create<ReshapeOp>(loc, flat, var);

    // The running statistics' unbiased correction counts the whole batch.
    llvm::SmallPtrSet<Operation *, 2> updates;
    for (Value stat : {op.getMean(), op.getVar()})
      for (Operation *user : stat.getUsers())
        if (isa<UpdateRunningStatsOp>(user))
          updates.insert(user);
    for (Operation *user : updates) {
      auto update = cast<UpdateRunningStatsOp>(user);
      update.setCount(static_cast<uint64_t>(update.getCount()) * ranks);
    }
    op.getResult().replaceAllUsesWith(y);
    op.getMean().replaceAllUsesWith(meanFlat);
    op.getVar().replaceAllUsesWith(varFlat);
    op.erase();
    return success();
  }
};

} // namespace
} // namespace mlir::cleave
