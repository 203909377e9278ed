//===- PlanEmitter.h - write a plan directory -----------------------------===//
//
// The last compiler step: a memory-planned function becomes a plan directory
// the runtime loads (docs/plan-format.md). The directory appears complete or
// not at all: it is written under a temporary name and renamed into place.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_COMPILER_PLANEMITTER_H
#define CLEAVE_COMPILER_PLANEMITTER_H

#include "compiler/Importer.h"
#include "passes/Passes.h"

#include "runtime/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// One entry of the model's state_dict, as a training plan records it
/// (docs/plan-format.md, `training.state_dict`).
struct StateDictEntry {
  std::string name;
  /// The weight that holds the tensor (tied entries name the same one).
  std::string tensor;
  /// Or, for a tensor the program never reads, its data: the plan keeps it
  /// so that saved weights are the whole state_dict.
  const ParamData *data = nullptr;
};

/// What a training plan's manifest records beyond its program.
struct TrainingEmitInfo {
  std::string loss = "model"; ///< model, cross_entropy or mse
  bool labels = false;        ///< the loss appended a `labels` input
  std::string dtype = "f32";
  int64_t seed = 0;
  /// `kind` and the hyper-parameters, as the manifest's training.optimizer.
  nlohmann::ordered_json optimizer;
  /// In the model's order; empty: every param under its own name.
  std::vector<StateDictEntry> stateDict;
  /// ZeRO over the dp group (a pipelined plan's; a data-parallel plan's is
  /// PlanEmitOptions::DataParallel::zero).
  std::string zero = "none";
};

/// The manifest's training section for a step compiled with `options`
/// (the optimizer's defaults resolved, as the update ops hold them).
TrainingEmitInfo trainingEmitInfo(const mlir::cleave::TrainingOptions &options,
                                  const std::string &dtype, int64_t seed);

struct PlanEmitOptions {
  /// The model file the plan was compiled from, recorded in the manifest.
  std::string modelSource;
  /// IR snapshots written to ir/<name>.mlir, for people reading the plan.
  std::vector<std::pair<std::string, std::string>> irSnapshots;
  /// The planner's strategy JSON, written to strategy.json when set.
  std::string strategyJson;
  /// Runs on the finished directory (its temporary path) before it is moved
  /// into place; a failure leaves nothing behind.
  std::function<mlir::LogicalResult(const std::string &dir)> check;
  /// Set for a training plan (format version 2).
  std::optional<TrainingEmitInfo> training;
  /// Set for a data-parallel training plan: `ranks` replicas of the one
  /// program, each training on 1/ranks of the batch, and the planner's
  /// predictions (manifest JSON) for the manifest.
  struct DataParallel {
    int64_t ranks = 1;
    /// Microbatches each rank runs forward and backward on per step, its
    /// gradients accumulated (the program is compiled for one of them).
    int64_t microbatches = 1;
    /// ZeRO: "none", "optimizer", "gradients" or "parameters"
    /// (TrainingOptions::zero).
    std::string zero = "none";
    nlohmann::ordered_json predicted = nlohmann::ordered_json::object();
    /// The planner's strategy, written to strategy.json (what `cleave
    /// inspect --trace` lays the predicted timeline out from).
    std::string strategyJson;
  };
  std::optional<DataParallel> dataParallel;
};

/// The plan's description (dtype, shape) of a ranked tensor type of cleave.
runtime::TensorDesc tensorDescOf(mlir::Type type);

/// What a partitioned plan's manifest records beyond its programs.
struct PartitionInfo {
  int64_t pp = 1, tp = 1, dp = 1;
  std::string schedule = "gpipe"; ///< gpipe, 1f1b or interleaved
  int64_t virtualStages = 1, microbatches = 1, microbatchSize = 1, globalBatch = 1;
  int batchDim = 0;
  /// The model's input and output names in `forward` order.
  std::vector<std::string> inputNames, outputNames;
  /// Every parameter at its full shape.
  std::vector<std::pair<std::string, runtime::TensorDesc>> parameters;
  /// The planner's predictions (step, compute, communication and bubble
  /// seconds, budget), as manifest JSON.
  nlohmann::ordered_json predicted;
  bool withWeights = true; ///< false for meta models: no weight files
};

/// One entry of a stage's schedule.
struct ScheduleSlot {
  std::string phase; ///< "forward"
  int64_t chunk = 0, microbatch = 0;
};

/// The order each stage runs its forward passes: GPipe and 1F1B run
/// microbatches in order; interleaved runs groups of `stages` microbatches
/// through every chunk of the stage, chunk k*stages + s on stage s.
std::vector<std::vector<ScheduleSlot>> forwardSlots(const std::string &kind, int64_t stages,
                                                    int64_t microbatches, int64_t virtualStages);

/// Writes the plan of `module`, whose functions are one per (stage, tp
/// index, chunk) after cleave-specialize-ranks and cleave-plan-memory, to
/// `dir` (docs/plan-format.md, "Multi-device plans"). Weights are cut from
/// `params` into each program's parts.
mlir::LogicalResult emitPartitionedPlan(mlir::ModuleOp module,
                                        const decltype(ImportedModel::params) &params,
                                        const std::string &dir, const PlanEmitOptions &options,
                                        const PartitionInfo &info);

/// Writes the single-device plan of `module`, whose @forward has been through
/// `cleave-plan-memory`, to `dir`, taking weight data from `params`. An
/// existing plan directory at `dir` is replaced; any other existing file or
/// non-empty directory is an error. Errors are reported as diagnostics.
mlir::LogicalResult emitSingleDevicePlan(mlir::ModuleOp module,
                                         const decltype(ImportedModel::params) &params,
                                         const std::string &dir,
                                         const PlanEmitOptions &options);

} // namespace cleave

#endif // CLEAVE_COMPILER_PLANEMITTER_H
