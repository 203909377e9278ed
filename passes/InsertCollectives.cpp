//===- InsertCollectives.cpp - layout changes as explicit collectives -----===//

#include "passes/Passes.h"
#include "passes/TensorParallel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_INSERTCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

struct InsertCollectivesPass : impl::InsertCollectivesBase<InsertCollectivesPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        for (OpOperand &use : ret->getOpOperands())
          if (failed(require(use, TensorSharding::replicated())))
            return signalPassFailure();
        continue;
      }
      auto needs = op->getAttrOfType<ArrayAttr>("cleave.operand_sharding");
      if (!needs)
        continue;
      if (needs.size() != op->getNumOperands()) {
        op->emitError() << "cleave.operand_sharding has " << needs.size() << " layouts for "
                        << op->getNumOperands() << " operands";
        return signalPassFailure();
      }
      for (auto [use, attr] : llvm::zip(op->getOpOperands(), needs)) {
        auto text = dyn_cast<StringAttr>(attr);
        std::optional<TensorSharding> need =
            text ? TensorSharding::parse(text.getValue()) : std::nullopt;
        if (!need || need->kind == TensorSharding::Partial) {
          op->emitError() << "operand " << use.getOperandNumber()
                          << ": not a layout an op can need: " << attr;
          return signalPassFailure();
        }
        if (failed(require(use, *need)))
          return signalPassFailure();
      }
    }
  }

  /// The layout `value` has: a change made here, else what the planner wrote.
  FailureOr<TensorSharding> layoutOf(Value value) {
    if (auto it = converted.find(value); it != converted.end())
      return it->second;
    return annotatedLayout(value);
  }

  /// Makes `use` read its value in layout `need`, inserting the change
  /// before the reader (or reusing one made for an earlier reader).
  LogicalResult require(OpOperand &use, TensorSharding need) {
    Value value = use.get();
    if (!isa<RankedTensorType>(value.getType()))
      return success();
    FailureOr<TensorSharding> have = layoutOf(value);
    if (failed(have))
      return failure();
    if (*have == need)
      return success();
    auto key = std::make_pair(value.getAsOpaquePointer(), need.str());
    if (auto it = changes.find(key); it != changes.end()) {
      use.set(it->second);
      return success();
    }
    Operation *reader = use.getOwner();
    OpBuilder b(reader);
    Location loc = reader->getLoc();
    StringAttr group = b.getStringAttr("tp");
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    Type type = value.getType(); // global shapes: a layout change keeps the type
    Value changed;
    using K = TensorSharding::Kind;
    if (have->kind == K::Partial && need.kind == K::Replicated)
      changed = b.create<AllReduceOp>(loc, type, value, group);
    else if (have->kind == K::Partial)
      changed = b.create<ReduceScatterOp>(loc, type, value, group, i64(need.dim), i64(need.blocks));
    else if (need.kind == K::Replicated)
      changed = b.create<AllGatherOp>(loc, type, value, group, i64(have->dim), i64(have->blocks));
    else if (have->kind == K::Replicated)
      changed = b.create<ShardOp>(loc, type, value, group, i64(need.dim), i64(need.blocks));
    else
      changed = b.create<AllToAllOp>(loc, type, value, group, i64(have->dim), i64(have->blocks),
                                     i64(need.dim), i64(need.blocks));
    Operation *op = changed.getDefiningOp();
    op->setAttr("cleave.sharding", b.getArrayAttr({b.getStringAttr(need.str())}));
    // The change runs in its reader's pipeline unit; before the function's
    // return, in the unit that computes the value.
    Operation *unit = reader->hasAttr("cleave.stage") ? reader : value.getDefiningOp();
    for (const char *attr : {"cleave.stage", "cleave.chunk"})
      if (Attribute a = unit ? unit->getAttr(attr) : Attribute())
        op->setAttr(attr, a);
    // Recomputing the reader redoes the change it needed.
    if (reader->hasAttr("cleave.recompute"))
      op->setAttr("cleave.recompute", b.getUnitAttr());
    if (failed(mlir::verify(op)))
      return failure();
    converted[changed] = need;
    changes[key] = changed;
    use.set(changed);
    return success();
  }

  llvm::DenseMap<Value, TensorSharding> converted;
  std::map<std::pair<void *, std::string>, Value> changes;
};

} // namespace
} // namespace mlir::cleave
