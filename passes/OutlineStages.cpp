//===- OutlineStages.cpp - one function per pipeline stage ----------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace mlir::cleave {
#define GEN_PASS_DEF_OUTLINESTAGES
#include "passes/Passes.h.inc"

namespace {

struct OutlineStagesPass : impl::OutlineStagesBase<OutlineStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("cleave-outline-stages needs a @forward function");
      return signalPassFailure();
    }
    Block &body = forward.getBody().front();
    bool interleaved = false;
    for (Operation &op : body)
      interleaved |= op.hasAttr("cleave.chunk");

    // The unit (stage, or chunk when interleaved) of every computing op.
    std::map<int64_t, SmallVector<Operation *>> units;
    llvm::DenseMap<Operation *, int64_t> unitOf;
    std::map<int64_t, int64_t> stageOfUnit;
    for (Operation &op : body) {
      if (isa<func::ReturnOp, ParamOp, ConstantOp>(op))
        continue;
      auto stage = op.getAttrOfType<IntegerAttr>("cleave.stage");
      auto chunk = op.getAttrOfType<IntegerAttr>("cleave.chunk");
      if (!stage || (interleaved && !chunk)) {
        op.emitError() << "has no cleave." << (stage ? "chunk" : "stage")
                       << ": plan the model first (cleave-plan-parallelism)";
        return signalPassFailure();
      }
      int64_t unit = interleaved ? chunk.getInt() : stage.getInt();
      units[unit].push_back(&op);
      unitOf[&op] = unit;
      stageOfUnit[unit] = stage.getInt();
    }

    OpBuilder b(module.getContext());
    b.setInsertionPoint(forward);
    auto returnOp = cast<func::ReturnOp>(body.getTerminator());
    int64_t nextTag = 0;
    // (value, receiving unit) -> tag, so each crossing is sent once per reader.
    std::map<std::pair<void *, int64_t>, int64_t> tags;
    std::map<int64_t, SmallVector<std::pair<Value, int64_t>>> sends; // unit -> (value, to)
    for (auto &[unit, ops] : units)
      for (Operation *op : ops)
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          auto it = def ? unitOf.find(def) : unitOf.end();
          if (it == unitOf.end() || it->second == unit)
            continue;
          if (it->second > unit) {
            op->emitError() << "reads a value of pipeline unit " << it->second
                            << ", which runs after its own unit " << unit;
            return signalPassFailure();
          }
          auto key = std::make_pair(operand.getAsOpaquePointer(), unit);
          if (tags.try_emplace(key, nextTag).second) {
            sends[it->second].push_back({operand, unit});
            ++nextTag;
          }
        }

    for (auto &[unit, ops] : units) {
      // Inputs: the model's arguments this unit reads, in argument order.
      SmallVector<BlockArgument> args;
      for (BlockArgument arg : forward.getArguments())
        if (llvm::any_of(arg.getUsers(), [&, u = unit](Operation *user) {
              auto it = unitOf.find(user);
              return it != unitOf.end() && it->second == u;
            }))
          args.push_back(arg);
      // Outputs: the model's results this unit computes.
      SmallVector<unsigned> outputs;
      for (OpOperand &result : returnOp->getOpOperands()) {
        Operation *def = result.get().getDefiningOp();
        if (def && unitOf.lookup(def) == unit && unitOf.count(def))
          outputs.push_back(result.getOperandNumber());
      }
      SmallVector<Type> argTypes, resultTypes;
      for (BlockArgument arg : args)
        argTypes.push_back(arg.getType());
      for (unsigned i : outputs)
        resultTypes.push_back(returnOp.getOperand(i).getType());
      std::string name = interleaved ? "forward_chunk" + std::to_string(unit)
                                     : "forward_stage" + std::to_string(unit);
      auto fn = b.create<func::FuncOp>(forward.getLoc(), name,
                                       b.getFunctionType(argTypes, resultTypes));
      fn->setAttr("cleave.stage", b.getI64IntegerAttr(stageOfUnit[unit]));
      if (interleaved)
        fn->setAttr("cleave.chunk", b.getI64IntegerAttr(unit));
      for (auto [i, arg] : llvm::enumerate(args))
        if (Attribute n = forward.getArgAttr(arg.getArgNumber(), "cleave.name"))
          fn.setArgAttr(i, "cleave.name", n);
      for (auto [i, output] : llvm::enumerate(outputs))
        if (Attribute n = forward.getResultAttr(output, "cleave.name"))
          fn.setResultAttr(i, "cleave.name", n);

      Block *entry = fn.addEntryBlock();
      OpBuilder in = OpBuilder::atBlockEnd(entry);
      IRMapping map;
      for (auto [arg, local] : llvm::zip(args, entry->getArguments()))
        map.map(arg, local);
      auto localValue = [&](Value v, Location loc) -> Value {
        if (Value mapped = map.lookupOrNull(v))
          return mapped;
        Operation *def = v.getDefiningOp();
        if (def && isa<ParamOp, ConstantOp>(def)) {
          // Weights: each stage holds the ones it reads.
          Operation *copy = in.clone(*def);
          map.map(v, copy->getResult(0));
          return copy->getResult(0);
        }
        auto it = unitOf.find(def);
        int64_t tag = tags.at(std::make_pair(v.getAsOpaquePointer(), unit));
        Value received = in.create<RecvOp>(loc, v.getType(), in.getI64IntegerAttr(it->second),
                                           in.getI64IntegerAttr(tag));
        // The received value keeps the layout it was sent in.
        if (auto layouts = def->getAttrOfType<ArrayAttr>("cleave.sharding"))
          received.getDefiningOp()->setAttr(
              "cleave.sharding",
              in.getArrayAttr({layouts[cast<OpResult>(v).getResultNumber()]}));
        map.map(v, received);
        return received;
      };
      for (Operation *op : ops) {
        for (Value operand : op->getOperands())
          localValue(operand, op->getLoc());
        Operation *copy = in.clone(*op, map);
        (void)copy;
      }
      for (auto [value, to] : sends[unit])
        in.create<SendOp>(value.getLoc(), map.lookup(value), in.getI64IntegerAttr(to),
                          in.getI64IntegerAttr(tags.at(std::make_pair(
                              value.getAsOpaquePointer(), to))));
      SmallVector<Value> results;
      for (unsigned i : outputs)
        results.push_back(map.lookup(returnOp.getOperand(i)));
      in.create<func::ReturnOp>(returnOp.getLoc(), results);
    }
    forward.erase();
  }
};

} // namespace
} // namespace mlir::cleave
