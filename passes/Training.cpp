//===- Training.cpp - what the training passes share ----------------------===//

#include "passes/Training.h"

namespace mlir::cleave {

StateOp getOrCreateState(func::FuncOp func, StringRef name, RankedTensorType type) {
  Block &body = func.front();
  Operation *lastValue = nullptr;
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
    if (isa<ParamOp, StateOp>(op))
      lastValue = &op;
  }
  OpBuilder builder(func.getContext());
  if (lastValue)
    builder.setInsertionPointAfter(lastValue);
  else
    builder.setInsertionPointToStart(&body);
  Location loc = NameLoc::get(builder.getStringAttr(name), func.getLoc());
  return builder.create<StateOp>(loc, type, name);
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

} // namespace mlir::cleave
