//===- ReduceGradients.cpp - data-parallel gradient averaging --------------===//
//
// Each data-parallel rank differentiates the loss of its share of the batch;
// the step's gradient is their mean. The reduction is IR like the rest of
// the step, so the memory plan, the cost model and the programs all see the
// buckets the runtime sends.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_REDUCEGRADIENTS
#include "passes/Passes.h.inc"

namespace {

struct ReduceGradientsPass : impl::ReduceGradientsBase<ReduceGradientsPass> {
  using ReduceGradientsBase::ReduceGradientsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || ranks <= 1)
      return;
    if (ranks < 1 || bucketBytes < 1) {
      func.emitError("cleave-reduce-gradients needs ranks >= 1 and bucket-bytes >= 1");
      return signalPassFailure();
    }
    Block &body = func.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    MLIRContext *context = func.getContext();
    Location loc = NameLoc::get(StringAttr::get(context, "data_parallel"), func.getLoc());

    // The gradients in the order backward finishes them.
    SmallVector<unsigned> gradients;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (func.getResultAttr(i, "cleave.gradient_of"))
        gradients.push_back(i);
    if (gradients.empty()) {
      func.emitError("no gradients to reduce: run -cleave-differentiate first");
      return signalPassFailure();
    }
    // Where gradient result i is final: the op that computes it.
    auto readyAt = [&](unsigned i) { return ret.getOperand(i).getDefiningOp(); };
    for (unsigned i : gradients) {
      auto type = dyn_cast<RankedTensorType>(ret.getOperand(i).getType());
      if (!type || !isa<FloatType>(type.getElementType()) || !readyAt(i)) {
        func.emitError("result ") << i << " (a gradient) is not a float tensor an op computes";
        return signalPassFailure();
      }
    }
    llvm::stable_sort(gradients, [&](unsigned a, unsigned b) {
      return readyAt(a)->isBeforeInBlock(readyAt(b));
    });

    // Buckets: consecutive gradients of one dtype up to bucketBytes.
    SmallVector<SmallVector<unsigned>> bucketList;
    int64_t filled = 0;
    Type bucketElement;
    for (unsigned i : gradients) {
      auto type = cast<RankedTensorType>(ret.getOperand(i).getType());
      int64_t elements = shard ? ranks * shardElements(type.getNumElements(), ranks)
                               : type.getNumElements();
      int64_t bytes = elements * ((type.getElementTypeBitWidth() + 7) / 8);
      if (bucketList.empty() || type.getElementType() != bucketElement ||
          filled + bytes > bucketBytes) {
        bucketList.emplace_back();
        filled = 0;
        bucketElement = type.getElementType();
      }
      bucketList.back().push_back(i);
      filled += bytes;
    }

    StringAttr groupAttr = StringAttr::get(context, group);
    double mean = 1.0 / static_cast<double>(ranks);
    llvm::DenseMap<Value, Value> reduced; // a value returned twice is reduced once
    for (ArrayRef<unsigned> bucket : bucketList) {
      Operation *last = readyAt(bucket.front());
      for (unsigned i : bucket)
        if (last->isBeforeInBlock(readyAt(i)))
          last = readyAt(i);
      OpBuilder b(context);
      b.setInsertionPointAfter(last);
      auto element = cast<FloatType>(
          cast<RankedTensorType>(ret.getOperand(bucket.front()).getType()).getElementType());
      SmallVector<Value> flats;
      SmallVector<unsigned> members;
      for (unsigned i : bucket) {
        Value g = ret.getOperand(i);
        if (reduced.count(g))
          continue;
        auto type = cast<RankedTensorType>(g.getType());
        auto flat = RankedTensorType::get({type.getNumElements()}, element);
        if (shard)
          flats.push_back(shardRows(b, loc, g, ranks));
        else
          flats.push_back(type == flat ? g : b.create<ReshapeOp>(loc, flat, g).getResult());
        members.push_back(i);
      }
      if (flats.empty())
        continue;
      // Sharded, the bucket is [ranks, K]: row r holds rank r's part of each
      // gradient, and the reduce_scatter leaves each rank its row.
      const int64_t along = shard ? 1 : 0;
      Value packed = flats.size() == 1 ? flats.front()
                                       : b.create<ConcatOp>(loc, flats, along).getResult();
      Value sum;
      if (shard) {
        auto packedType = cast<RankedTensorType>(packed.getType());
        auto rowType = RankedTensorType::get({1, packedType.getDimSize(1)}, element);
        sum = b.create<ReduceScatterOp>(loc, rowType, packed, groupAttr, b.getI64IntegerAttr(0),
                                        b.getI64IntegerAttr(1));
      } else {
        sum = b.create<AllReduceOp>(loc, packed.getType(), packed, groupAttr);
      }
      Value average = b.create<MulOp>(loc, sum, floatScalar(b, loc, element, mean));
      int64_t offset = 0;
      for (unsigned i : members) {
        Value g = ret.getOperand(i);
        auto type = cast<RankedTensorType>(g.getType());
        int64_t n = shard ? shardElements(type.getNumElements(), ranks) : type.getNumElements();
        auto want = shard ? RankedTensorType::get({n}, element) : type;
        Value piece = average;
        if (members.size() > 1)
          piece = b.create<SliceOp>(loc, average, along, offset, offset + n, 1);
        if (piece.getType() != want)
          piece = b.create<ReshapeOp>(loc, want, piece);
        reduced[g] = piece;
        offset += n;
      }
      ++buckets;
    }
    for (unsigned i : gradients) {
      ret.setOperand(i, reduced.at(ret.getOperand(i)));
      if (shard)
        func.setResultAttr(i, kShardAttr, shardAttr(context, group, ranks));
    }
    if (shard)
      func.setType(FunctionType::get(context, func.getArgumentTypes(), ret.getOperandTypes()));

    // The loss every rank reports: the mean over the ranks.
    if (ret.getNumOperands() > 0 && !func.getResultAttr(0, "cleave.gradient_of")) {
      Value loss = ret.getOperand(0);
      auto type = dyn_cast<RankedTensorType>(loss.getType());
      if (type && type.getRank() == 0 && isa<FloatType>(type.getElementType())) {
        // Right where it is computed: with microbatches, in every forward.
        OpBuilder b(ret);
        if (Operation *def = loss.getDefiningOp())
          b.setInsertionPointAfter(def);
        Value sum = b.create<AllReduceOp>(loc, type, loss, groupAttr);
        ret.setOperand(0, b.create<MulOp>(loc, sum,
                                          floatScalar(b, loc, cast<FloatType>(type.getElementType()),
                                                      mean)));
      }
    }
  }
};

} // namespace
} // namespace mlir::cleave
