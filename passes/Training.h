//===- Training.h - what the training passes share ------------*- C++ -*-===//
//
// The training state and the phases of a training step, as the passes that
// build the step (-cleave-training-mode, -cleave-differentiate,
// -cleave-add-optimizer), memory planning and plan emission agree on them
// (docs/training.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_TRAINING_H
#define CLEAVE_PASSES_TRAINING_H

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {

/// The step counter: an i64 scalar state, the number of optimizer steps
/// taken. Dropout masks and learning-rate schedules read it.
inline constexpr llvm::StringLiteral kStepState = "step";

/// The attribute that marks the first op of a phase; every later op belongs
/// to it until the next mark. Ops before any mark are "forward".
inline constexpr llvm::StringLiteral kPhaseAttr = "cleave.phase";
inline constexpr llvm::StringLiteral kForwardPhase = "forward";
inline constexpr llvm::StringLiteral kBackwardPhase = "backward";
inline constexpr llvm::StringLiteral kOptimizerPhase = "optimizer";

/// The `cleave.state` named `name` of `func`, created zero-initialized with
/// `type` after the function's params and states when it does not exist.
/// Emits an error and returns null when it exists with another type.
StateOp getOrCreateState(func::FuncOp func, StringRef name, RankedTensorType type);

/// The step counter of `func` (created when absent).
Value getOrCreateStepCounter(func::FuncOp func);

/// A parameter that training updates: neither a buffer nor frozen, and
/// floating point.
bool isTrainable(ParamOp param);

/// Marks the first op after `after` (or the block's first op when null)
/// that computes something (not a param, state or constant) as the start of
/// `phase`. Returns false when there is none.
bool markPhaseStart(Block &body, Operation *after, StringRef phase);

/// A rank-0 `cleave.constant` holding `value` in the float type `element`
/// (a scale such as 1/ranks or 1/microbatches).
Value floatScalar(OpBuilder &builder, Location loc, FloatType element, double value);

/// The phase of every op of `body`, in order (docs/training.md).
std::vector<StringRef> phasesOf(Block &body);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_TRAINING_H
