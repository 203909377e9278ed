//===- ShardParameters.cpp - ZeRO-3: parameters held as parts -------------===//
//
// With the gradients already reduce-scattered into each rank's flat part
// (-cleave-reduce-gradients{shard=true}), the parameters follow: a rank
// keeps only its part of each, and every phase that reads a parameter
// gathers it whole just before, so the whole tensor is an arena value the
// memory planner frees after its last reader in that phase.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SHARDPARAMETERS
#include "passes/Passes.h.inc"

namespace {

struct ShardParametersPass : impl::ShardParametersBase<ShardParametersPass> {
  using ShardParametersBase::ShardParametersBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || ranks <= 1)
      return;
    MLIRContext *context = func.getContext();
    Block &body = func.front();

    // The parameters whose gradients are parts, and the group they are over.
    llvm::StringMap<StringAttr> shardedGradient;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto of = func.getResultAttrOfType<StringAttr>(i, "cleave.gradient_of");
      auto shard = func.getResultAttrOfType<DictionaryAttr>(i, kShardAttr);
      if (!of || !shard)
        continue;
      auto group = shard.getAs<StringAttr>("group");
      auto n = shard.getAs<IntegerAttr>("ranks");
      if (!group || !n || n.getInt() != ranks) {
        func.emitError("the gradient of '")
            << of.getValue() << "' is sharded as " << shard << ", not over "
            << static_cast<int64_t>(ranks)
            << " ranks: run -cleave-reduce-gradients with the same ranks";
        return signalPassFailure();
      }
      shardedGradient[of.getValue()] = group;
    }
    if (shardedGradient.empty()) {
      func.emitError("no sharded gradients: run -cleave-reduce-gradients{shard=true} first");
      return signalPassFailure();
    }

    llvm::DenseMap<Operation *, StringRef> phaseOf;
    std::vector<StringRef> phases = phasesOf(body);
    for (auto [op, phase] : llvm::zip(body, phases))
      phaseOf[&op] = phase;

    SmallVector<ParamOp> params(body.getOps<ParamOp>());
    for (ParamOp param : params) {
      auto it = shardedGradient.find(param.getName());
      if (it == shardedGradient.end() || !isTrainable(param))
        continue;
      StringAttr group = it->second;
      auto type = cast<RankedTensorType>(param.getType());
      int64_t numel = type.getNumElements(), k = shardElements(numel, ranks);
      auto partType = RankedTensorType::get({k}, type.getElementType());

      OpBuilder b(param);
      auto part = cast<ParamOp>(b.clone(*param.getOperation()));
      part.getResult().setType(partType);
      part->setAttr(kShardAttr, shardAttr(context, group, ranks, type.getShape()));
      ++sharded;

      // Readers by phase, in block order.
      llvm::MapVector<StringRef, SmallVector<OpOperand *>> readers;
      for (OpOperand &use : param->getUses())
        readers[phaseOf.lookup(use.getOwner())].push_back(&use);
      for (auto &[phase, uses] : readers) {
        Operation *first = uses.front()->getOwner();
        for (OpOperand *use : uses)
          if (use->getOwner()->isBeforeInBlock(first))
            first = use->getOwner();
        b.setInsertionPoint(first);
        Location loc = NameLoc::get(StringAttr::get(context, "zero"), param.getLoc());
        auto gather =
            b.create<AllGatherOp>(loc, RankedTensorType::get({ranks * k}, type.getElementType()),
                                  part, group, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1));
        ++gathers;
        // A reader that opens its phase hands the mark to the gather.
        if (Attribute mark = first->getAttr(kPhaseAttr)) {
          first->removeAttr(kPhaseAttr);
          gather->setAttr(kPhaseAttr, mark);
        }
        Value whole = gather;
        if (ranks * k != numel)
          whole = b.create<SliceOp>(loc, whole, 0, 0, numel, 1);
        if (whole.getType() != type)
          whole = b.create<ReshapeOp>(loc, type, whole);
        for (OpOperand *use : uses)
          use->set(whole);
      }
      param.erase();
    }
  }
};

} // namespace
} // namespace mlir::cleave
