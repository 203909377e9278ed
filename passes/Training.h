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

/// The first of the step's samples the microbatch being run holds: an i64
/// scalar state the trainer sets before each microbatch's phases, read by
/// dropouts that draw one device's masks (-cleave-global-dropout).
inline constexpr llvm::StringLiteral kSampleOffsetState = "sample_offset";

/// The attribute that marks the first op of a phase; every later op belongs
/// to it until the next mark. Ops before any mark are "forward".
inline constexpr llvm::StringLiteral kPhaseAttr = "cleave.phase";
inline constexpr llvm::StringLiteral kForwardPhase = "forward";
inline constexpr llvm::StringLiteral kBackwardPhase = "backward";
inline constexpr llvm::StringLiteral kOptimizerPhase = "optimizer";

/// In a pipeline stage's step (-cleave-pipeline-training) a phase is one
/// slot of the schedule: its mark also names the model chunk and the
/// microbatch it runs.
inline constexpr llvm::StringLiteral kPhaseChunkAttr = "cleave.phase_chunk";
inline constexpr llvm::StringLiteral kPhaseMicrobatchAttr = "cleave.phase_microbatch";

/// Where the planner put a forward op (its pipeline stage and, when
/// interleaved, its chunk); the backward ops built from it inherit them.
inline constexpr llvm::StringLiteral kPlacementAttrs[] = {"cleave.stage", "cleave.chunk"};
/// Marks the ops that sum a parameter's gradient contributions from
/// several placements (a weight tied across stages): the pipeline sums
/// these partial gradients across the stages that hold the weight.
inline constexpr llvm::StringLiteral kTiedGradientAttr = "cleave.tied_gradient";
/// On a pipeline stage's gradient result: a copy of a tied weight's
/// gradient that an earlier stage also holds (a norm counts it once).
inline constexpr llvm::StringLiteral kTiedCopyAttr = "cleave.tied_copy";
/// On an optimizer state of a weight a tp group splits: the weight's
/// `cleave.sharding` (its layout over the group), so the plan names each
/// rank's part of the state as it names the weight's.
inline constexpr llvm::StringLiteral kTpLayoutAttr = "cleave.tp_layout";
/// On a pipeline stage's step: {stages, free_tag}, the number of stages and
/// the first send/recv tag the pipeline's crossings leave free.
inline constexpr llvm::StringLiteral kPipelineAttr = "cleave.pipeline";

/// The `cleave.state` named `name` of `func`, created zero-initialized with
/// `type` after the function's params and states when it does not exist.
/// Emits an error and returns null when it exists with another type.
StateOp getOrCreateState(func::FuncOp func, StringRef name, RankedTensorType type);

/// `state` read again at the builder's point: an op that updates a
/// persistent tensor in place is the last reader of the value it updates,
/// so what follows an update reads the new contents through a new value
/// (memory planning gives every `cleave.state` of one name one region).
StateOp reloadState(OpBuilder &builder, StateOp state);

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

/// ZeRO's parts of a tensor over `ranks` data-parallel ranks: the tensor
/// flattened and zero-padded to ranks * k elements, k = ceil(numel / ranks);
/// rank r holds elements [r*k, (r+1)*k). Sharded gradient results, and the
/// states that hold such parts, carry `cleave.shard = {group, ranks}` (the
/// states also `shape`, the whole tensor's, and the copy of a parameter's
/// part `param`, its name).
inline constexpr llvm::StringLiteral kShardAttr = "cleave.shard";
int64_t shardElements(int64_t numel, int64_t ranks);
/// `value` flattened, zero-padded and viewed as [ranks, k]: row r is rank
/// r's part.
Value shardRows(OpBuilder &builder, Location loc, Value value, int64_t ranks);
/// {group, ranks} (and `shape`, the whole tensor's, when given).
DictionaryAttr shardAttr(MLIRContext *context, StringRef group, int64_t ranks,
                         ArrayRef<int64_t> shape = {});

/// The phase of every op of `body`, in order (docs/training.md).
std::vector<StringRef> phasesOf(Block &body);

/// One phase of a step: its name and, in a pipeline stage's step, the
/// chunk and microbatch of its slot (-1 otherwise).
struct PhaseSlot {
  StringRef name;
  int64_t chunk = -1, microbatch = -1;
};
/// The phases of `body` in order, and the index of each op's phase.
std::vector<PhaseSlot> phaseSlotsOf(Block &body, std::vector<size_t> &slotOfOp);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_TRAINING_H
