//===- Training.cpp - what the training passes share ----------------------===//

#include "passes/Training.h"

namespace mlir::cleave {

StateOp getOrCreateState(func::FuncOp func, StringRef name, RankedTensorType type) {
  Block &body = func.front();
  Operation *lastValue = nullptr;
  bool lastScanDone = false;
  for (Operation &op : body) {
    if (auto state = dyn_cast<StateOp>(op)) {
      if (state.getName() == name) {
        if (state.getType() != type) {
          state.emitError("state '") << name << "' exists with type " << state.getType()
                                     << ", needed as " << type;
          return nullptr;
        }
        return state;
      }
    }
    // After the params and states the function starts with (states read
    // again after an update sit further down).
    if (!lastScanDone && isa<ParamOp, StateOp>(op))
      lastValue = &op;
    else if (!isa<ParamOp, StateOp, ConstantOp>(op))
      lastScanDone = true;
  }
  OpBuilder builder(func.getContext());
  if (lastValue)
    builder.setInsertionPointAfter(lastValue);
  else
    builder.setInsertionPointToStart(&body);
  Location loc = NameLoc::get(builder.getStringAttr(name), func.getLoc());
  return builder.create<StateOp>(loc, type, name);
}

StateOp reloadState(OpBuilder &builder, StateOp state) {
  auto again = cast<StateOp>(builder.clone(*state.getOperation()));
  return again;
}

Value getOrCreateStepCounter(func::FuncOp func) {
  auto type = RankedTensorType::get({}, IntegerType::get(func.getContext(), 64));
  StateOp state = getOrCreateState(func, kStepState, type);
  return state ? state.getResult() : Value();
}

bool isTrainable(ParamOp param) {
  auto type = llvm::cast<RankedTensorType>(param.getType());
  return !param.getBuffer() && !param->hasAttr("frozen") &&
         llvm::isa<FloatType>(type.getElementType());
}

bool markPhaseStart(Block &body, Operation *after, StringRef phase) {
  Operation *op = after ? after->getNextNode() : &body.front();
  for (; op && !op->hasTrait<OpTrait::IsTerminator>(); op = op->getNextNode())
    if (!isa<ParamOp, StateOp, ConstantOp>(op)) {
      op->setAttr(kPhaseAttr, StringAttr::get(op->getContext(), phase));
      return true;
    }
  return false;
}

Value floatScalar(OpBuilder &builder, Location loc, FloatType element, double value) {
  APFloat v(value);
  bool lost;
  v.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  auto type = RankedTensorType::get({}, element);
  return builder.create<ConstantOp>(loc, DenseElementsAttr::get(type, FloatAttr::get(element, v)));
}

std::vector<StringRef> phasesOf(Block &body) {
  std::vector<StringRef> phases;
  StringRef current = kForwardPhase;
  for (Operation &op : body) {
    if (auto mark = op.getAttrOfType<StringAttr>(kPhaseAttr))
      current = mark.getValue();
    phases.push_back(current);
  }
  return phases;
}

std::vector<PhaseSlot> phaseSlotsOf(Block &body, std::vector<size_t> &slotOfOp) {
  std::vector<PhaseSlot> slots{PhaseSlot{kForwardPhase}};
  slotOfOp.clear();
  bool marked = false, computed = false;
  for (Operation &op : body) {
    if (auto mark = op.getAttrOfType<StringAttr>(kPhaseAttr)) {
      PhaseSlot slot{mark.getValue()};
      if (auto chunk = op.getAttrOfType<IntegerAttr>(kPhaseChunkAttr))
        slot.chunk = chunk.getInt();
      if (auto microbatch = op.getAttrOfType<IntegerAttr>(kPhaseMicrobatchAttr))
        slot.microbatch = microbatch.getInt();
      // Ops before the first mark are forward: the first mark replaces
      // that phase when nothing was computed before it.
      if (!marked && !computed)
        slots.back() = slot;
      else
        slots.push_back(slot);
      marked = true;
    }
    computed |= !isa<ParamOp, StateOp, ConstantOp>(op);
    slotOfOp.push_back(slots.size() - 1);
  }
  return slots;
}

int64_t shardElements(int64_t numel, int64_t ranks) { return (numel + ranks - 1) / ranks; }

Value shardRows(OpBuilder &builder, Location loc, Value value, int64_t ranks) {
  auto type = cast<RankedTensorType>(value.getType());
  Type element = type.getElementType();
  int64_t numel = type.getNumElements(), k = shardElements(numel, ranks);
  auto rowsType = RankedTensorType::get({ranks, k}, element);
  if (numel == ranks * k)
    return type == rowsType ? value : builder.create<ReshapeOp>(loc, rowsType, value).getResult();
  auto flatType = RankedTensorType::get({numel}, element);
  Value flat =
      type == flatType ? value : builder.create<ReshapeOp>(loc, flatType, value).getResult();
  {
    auto padType = RankedTensorType::get({ranks * k - numel}, element);
    Value zero = floatScalar(builder, loc, cast<FloatType>(element), 0.0);
    Value pad = builder.create<BroadcastToOp>(loc, padType, zero);
    flat = builder.create<ConcatOp>(loc, ValueRange{flat, pad}, 0);
  }
  return builder.create<ReshapeOp>(loc, rowsType, flat);
}

DictionaryAttr shardAttr(MLIRContext *context, StringRef group, int64_t ranks,
                         ArrayRef<int64_t> shape) {
  Builder b(context);
  SmallVector<NamedAttribute> entries = {b.getNamedAttr("group", b.getStringAttr(group)),
                                         b.getNamedAttr("ranks", b.getI64IntegerAttr(ranks))};
  if (!shape.empty())
    entries.push_back(b.getNamedAttr("shape", b.getDenseI64ArrayAttr(shape)));
  return b.getDictionaryAttr(entries);
}

} // namespace mlir::cleave
