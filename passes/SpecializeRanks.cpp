//===- SpecializeRanks.cpp - one function per (stage, tp index) -----------===//
//
// After -cleave-local-shapes every rank of a tp group runs the same program
// up to which part it holds. This pass writes each function out once per tp
// index, `@forward_stage1_tp0`, ..., and makes the part explicit there: a
// `cleave.shard` becomes the slices of its rank's part, and ops whose split
// loop needs the rank (ShardingOpInterface::specializeForRank) adjust
// themselves. Ranks that differ only in their data-parallel index share the
// result: these functions are the plan's programs.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SPECIALIZERANKS
#include "passes/Passes.h.inc"

namespace {

/// Replaces `shard` by the slices of part `rank` of each of its blocks.
void lowerShard(ShardOp shard, int64_t rank) {
  OpBuilder b(shard);
  auto in = shard.getInput().getType();
  int64_t dim = shard.getDim(), blocks = shard.getBlocks();
  int64_t block = in.getDimSize(dim) / blocks;
  int64_t part = shard.getType().getDimSize(dim) / blocks;
  SmallVector<Value> pieces;
  for (int64_t k = 0; k < blocks; ++k) {
    int64_t start = k * block + rank * part;
    pieces.push_back(b.create<SliceOp>(shard.getLoc(), shard.getInput(), dim, start,
                                       start + part, 1));
  }
  Value local = pieces.size() == 1 ? pieces.front()
                                   : b.create<ConcatOp>(shard.getLoc(), pieces, dim).getResult();
  local.getDefiningOp()->setAttrs(shard->getDiscardableAttrDictionary());
  shard.replaceAllUsesWith(local);
  shard.erase();
}

struct SpecializeRanksPass : impl::SpecializeRanksBase<SpecializeRanksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module->hasAttr("cleave.local_shapes")) {
      module.emitError("has global shapes: run cleave-local-shapes first");
      return signalPassFailure();
    }
    auto mesh = module->getAttrOfType<DictionaryAttr>("cleave.mesh");
    int64_t tp = mesh.getAs<IntegerAttr>("tp").getInt();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !func->hasAttr("cleave.tp"))
        funcs.push_back(func);
    OpBuilder b(module.getContext());
    for (func::FuncOp func : funcs) {
      b.setInsertionPoint(func);
      for (int64_t rank = 0; rank < tp; ++rank) {
        auto copy = cast<func::FuncOp>(b.clone(*func));
        copy.setSymName((func.getSymName() + "_tp" + Twine(rank)).str());
        copy->setAttr("cleave.tp", b.getI64IntegerAttr(rank));
        SmallVector<Operation *> ops;
        for (Operation &op : copy.getBody().front())
          ops.push_back(&op);
        for (Operation *op : ops) {
          // A dp group's part (ZeRO's) is the runtime's to cut.
          if (auto shard = dyn_cast<ShardOp>(op); shard && shard.getGroup() == "tp")
            lowerShard(shard, rank);
          else if (auto sharded = dyn_cast<ShardingOpInterface>(op))
            sharded.specializeForRank(rank, tp);
        }
      }
      func.erase();
    }
    if (failed(verify(module)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::cleave
