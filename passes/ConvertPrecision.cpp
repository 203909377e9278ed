//===- ConvertPrecision.cpp - compute in bf16 -----------------------------===//
//
// Every f32 tensor of a function becomes bf16 (or f16), except at the
// function's boundary: inputs are cast on the way in and results on the way
// out, so a plan's users keep f32 files. Ops need no precision knowledge of
// their own: operands and results of one float type change together, so
// type inference and verifiers accept the rewritten ops. The one op that
// holds float data in the IR, `cleave.constant`, has its values rounded.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-convert-precision"

namespace mlir::cleave {
#define GEN_PASS_DEF_CONVERTPRECISION
#include "passes/Passes.h.inc"

namespace {

/// `type` with its element type replaced when it is f32; other types as
/// they are.
Type narrowed(Type type, FloatType narrow) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return tensor.clone(narrow);
}

/// The f32 elements of a constant rounded to `narrow` (to nearest, ties to
/// even; NaN stays NaN), or a null attribute when they are not dense.
ElementsAttr roundConstant(ElementsAttr value, FloatType narrow) {
  auto dense = dyn_cast<DenseFPElementsAttr>(value);
  if (!dense)
    return nullptr;
  const llvm::fltSemantics &semantics = narrow.getFloatSemantics();
  return dense.mapValues(narrow, [&](const APFloat &v) {
    APFloat rounded = v;
    bool losesInfo = false;
    rounded.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
    return rounded.bitcastToAPInt();
  });
}

/// Whether `use` is an operand an update writes in place (it keeps the f32
/// master copy).
bool isUpdatedOperand(OpOperand &use) {
  auto executable = dyn_cast<ExecutableOpInterface>(use.getOwner());
  return executable && llvm::is_contained(executable.getUpdatedOperands(),
                                          use.getOperandNumber());
}

/// With master weights, every f32 param and state is read through one cast
/// to `narrow`, placed before its first compute reader (so the narrow copy
/// lives no longer than its readers need it); updates keep writing the f32
/// tensor, and the narrow values they read are cast back to f32.
LogicalResult castMasterWeights(Block &body, FloatType narrow) {
  OpBuilder builder(narrow.getContext());
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isa<ParamOp, StateOp>(op))
      continue;
    Value master = op.getResult(0);
    Type type = narrowed(master.getType(), narrow);
    if (type == master.getType())
      continue;
    Operation *first = nullptr;
    for (OpOperand &use : master.getUses())
      if (!isUpdatedOperand(use) && (!first || use.getOwner()->isBeforeInBlock(first)))
        first = use.getOwner();
    if (!first)
      continue;
    builder.setInsertionPoint(first);
    Value cast = builder.create<CastOp>(op.getLoc(), type, master);
    master.replaceUsesWithIf(cast, [&](OpOperand &use) {
      return use.getOwner() != cast.getDefiningOp() && !isUpdatedOperand(use);
    });
  }
  for (Operation &op : body) {
    auto executable = dyn_cast<ExecutableOpInterface>(&op);
    if (!executable || executable.getUpdatedOperands().empty())
      continue;
    for (OpOperand &operand : op.getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (isUpdatedOperand(operand) || !type || type.getElementType() != narrow)
        continue;
      builder.setInsertionPoint(&op);
      operand.set(builder.create<CastOp>(op.getLoc(), type.clone(builder.getF32Type()),
                                         operand.get()));
    }
  }
  return success();
}

struct ConvertPrecisionPass : impl::ConvertPrecisionBase<ConvertPrecisionPass> {
  using ConvertPrecisionBase::ConvertPrecisionBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    MLIRContext *context = func.getContext();
    FloatType narrow;
    if (dtype == "bf16")
      narrow = FloatType::getBF16(context);
    else if (dtype == "f16")
      narrow = FloatType::getF16(context);
    else {
      func.emitError("cleave-convert-precision: dtype must be bf16 or f16, got '") << dtype << "'";
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    OpBuilder builder(context);

    // Ops first: the boundary casts added below must keep their f32 side.
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        Type type = narrowed(constant.getType(), narrow);
        if (type == constant.getType())
          continue;
        ElementsAttr value = roundConstant(constant.getValue(), narrow);
        if (!value) {
          constant.emitError("cannot convert a constant without dense f32 data to ") << narrow;
          return signalPassFailure();
        }
        constant.setValueAttr(value);
        constant->getResult(0).setType(type);
        continue;
      }
      // Master weights: persistent tensors keep f32; readers get a cast below.
      if (masterWeights && isa<ParamOp, StateOp>(op))
        continue;
      for (Value result : op.getResults())
        result.setType(narrowed(result.getType(), narrow));
    }

    if (masterWeights && failed(castMasterWeights(body, narrow)))
      return signalPassFailure();

    // Inputs: one cast per f32 argument, before its first user. The return
    // keeps reading the argument itself, so an input returned unchanged
    // stays exact.
    for (BlockArgument arg : body.getArguments()) {
      Type type = narrowed(arg.getType(), narrow);
      if (type == arg.getType())
        continue;
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!user->hasTrait<OpTrait::IsTerminator>() && (!first || user->isBeforeInBlock(first)))
          first = user;
      if (!first)
        continue;
      builder.setInsertionPoint(first);
      Value cast = builder.create<CastOp>(first->getLoc(), type, arg);
      arg.replaceUsesWithIf(cast, [&](OpOperand &use) {
        return use.getOwner() != cast.getDefiningOp() &&
               !use.getOwner()->hasTrait<OpTrait::IsTerminator>();
      });
    }

    // Results: what the function returns as f32 is cast back, once per value.
    Operation *terminator = body.getTerminator();
    builder.setInsertionPoint(terminator);
    llvm::DenseMap<Value, Value> widened;
    for (OpOperand &operand : terminator->getOpOperands()) {
      Type want = func.getResultTypes()[operand.getOperandNumber()];
      Value value = operand.get();
      if (value.getType() == want)
        continue;
      Value &cast = widened[value];
      if (!cast) {
        Location loc =
            value.getDefiningOp() ? value.getDefiningOp()->getLoc() : terminator->getLoc();
        cast = builder.create<CastOp>(loc, want, value);
      }
      operand.set(cast);
    }
    // A cast between what are now the same types converts nothing: the
    // model's own casts to bf16, and its casts back to f32 inside.
    for (CastOp cast : llvm::make_early_inc_range(body.getOps<CastOp>()))
      if (cast.getInput().getType() == cast.getType()) {
        cast.getResult().replaceAllUsesWith(cast.getInput());
        cast.erase();
      }
    LLVM_DEBUG(llvm::dbgs() << "cleave-convert-precision: " << func.getName() << " computes in "
                            << narrow << "\n");
  }
};

} // namespace
} // namespace mlir::cleave
