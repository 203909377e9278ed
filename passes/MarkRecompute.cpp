//===- MarkRecompute.cpp - the regions backward will run again ------------===//
//
// The planner marks the ops of each layer it recomputes with
// `cleave.recompute`. A recomputation region is what a backward pass runs a
// second time instead of keeping its activations: a maximal run of
// consecutive marked ops of one layer. Its checkpoints are the values it
// reads from outside (kept through backward); the values it computes and
// nobody outside reads are what recomputation saves.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "passes/Layers.h"
#include "passes/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_MARKRECOMPUTE
#include "passes/Passes.h.inc"

namespace {

/// Weights live in the plan's weight file for the whole run: never
/// checkpoints, never recomputed.
bool isWeight(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<ParamOp, ConstantOp>(def);
}

int64_t storedBytes(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (auto exec = dyn_cast<ExecutableOpInterface>(def); exec && exec.getViewedOperand())
      return 0; // a view shares its operand's buffer
  return tensorBytes(v.getType());
}

struct MarkRecomputePass : impl::MarkRecomputeBase<MarkRecomputePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Builder b(func.getContext());
    std::vector<std::vector<Operation *>> regions;
    std::vector<std::string> layers;
    std::string open; // the layer of the run being built, "" when none
    for (Operation &op : func.getBody().front()) {
      if (isa<ParamOp, ConstantOp>(op))
        continue; // weights neither end nor join a run
      op.removeAttr("cleave.recompute_region");
      if (!op.hasAttr("cleave.recompute")) {
        open.clear();
        continue;
      }
      std::string layer = layerOfScope(moduleScope(op.getLoc()));
      if (open.empty() || layer != open) {
        regions.emplace_back();
        layers.push_back(layer);
        open = layer;
      }
      regions.back().push_back(&op);
    }

    SmallVector<Attribute> summaries;
    for (auto [id, ops] : llvm::enumerate(regions)) {
      llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
      llvm::SetVector<Value> checkpoints;
      int64_t recomputedBytes = 0;
      for (Operation *op : ops) {
        op->setAttr("cleave.recompute_region", b.getI64IntegerAttr(id));
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if (!isWeight(operand) && (!def || !inside.contains(def)))
            checkpoints.insert(operand);
        }
        for (Value result : op->getResults()) {
          bool readOutside = llvm::any_of(result.getUsers(),
                                          [&](Operation *user) { return !inside.contains(user); });
          if (!readOutside)
            recomputedBytes += storedBytes(result);
        }
      }
      int64_t checkpointBytes = 0;
      for (Value v : checkpoints)
        checkpointBytes += storedBytes(v);
      summaries.push_back(b.getDictionaryAttr({
          b.getNamedAttr("layer", b.getStringAttr(layers[id])),
          b.getNamedAttr("ops", b.getI64IntegerAttr(ops.size())),
          b.getNamedAttr("checkpoints", b.getI64IntegerAttr(checkpoints.size())),
          b.getNamedAttr("checkpoint_bytes", b.getI64IntegerAttr(checkpointBytes)),
          b.getNamedAttr("recomputed_bytes", b.getI64IntegerAttr(recomputedBytes)),
      }));
    }
    if (summaries.empty())
      func->removeAttr("cleave.recompute_regions");
    else
      func->setAttr("cleave.recompute_regions", b.getArrayAttr(summaries));
  }
};

} // namespace
} // namespace mlir::cleave
