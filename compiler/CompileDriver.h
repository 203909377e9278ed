//===- CompileDriver.h - cleave's compile pipeline, as a library -*- C++ -*-===//
//
// One API for what `cleave compile`, `plan` and `cost` do with a model:
// load it (import or parse, then the preparation every analysis sees), cost
// it on a device, plan it for a cluster, and compile it into a plan
// directory, on one device (inference or a training step) or partitioned
// over a cluster. The commands in cli/ parse arguments into a
// CompileRequest, call these functions and print what they return; the
// order of the passes lives here only.
//
// Errors are reported as diagnostics on the MLIRContext, as the importer and
// the plan emitter report theirs (the CLI prints them as `cleave: error:`
// lines); a DriverStatus says which kind of failure it was.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_COMPILEDRIVER_H
#define CLEAVE_COMPILER_COMPILEDRIVER_H

#include "compiler/Importer.h"
#include "compiler/PlanEmitter.h"
#include "cost/ClusterSpec.h"
#include "passes/CostModel.h"
#include "passes/Passes.h"
#include "passes/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave {

/// The kinds of failure; each value is cleave's exit status for it.
enum class DriverError {
  None = 0,
  BadInput = 1,    ///< bad request, spec or model, a failed pass, a plan that fails verification
  Unsupported = 2, ///< the model uses ops or control flow cleave cannot import
  NothingFits = 3, ///< no plan fits in the memory budget
};

/// The outcome of a driver call. The error itself has been reported as a
/// diagnostic; this says which kind it was.
class DriverStatus {
public:
  DriverStatus() = default;
  static DriverStatus failure(DriverError error = DriverError::BadInput) {
    DriverStatus s;
    s.error_ = error;
    return s;
  }
  /// Marks a failure as a request that cannot be compiled as asked: a
  /// command shows its usage after the error.
  DriverStatus &withUsage() {
    usage_ = true;
    return *this;
  }
  bool ok() const { return error_ == DriverError::None; }
  DriverError error() const { return error_; }
  bool showUsage() const { return usage_; }
  /// The process exit status for this outcome (0 when ok).
  int exitCode() const { return static_cast<int>(error_); }

private:
  DriverError error_ = DriverError::None;
  bool usage_ = false;
};

enum class CompileMode {
  Infer, ///< the forward pass
  Train, ///< one training step: forward, loss, backward, optimizer
};

/// Everything a compile, plan or cost run is asked to do.
struct CompileRequest {
  /// TorchScript (.pt, with weights or meta) or, for plan and cost, cleave
  /// IR (.mlir).
  std::string model;
  /// Input shapes and batch size overriding the export's.
  ImportOptions import;
  /// The float type programs compute in: f32 or bf16.
  std::string dtype = "f32";
  /// Form cleave.attention in the preparation (--no-fuse-attention: false).
  bool fuseAttention = true;
  /// Inference: fold batch norms into the convolutions before them in the
  /// preparation (--no-fold-batch-norm: false).
  bool foldBatchNorm = true;
  /// Inference: fuse each convolution's residual add and relu into it in
  /// the preparation (--no-fuse-conv-epilogue: false).
  bool fuseConvEpilogue = true;

  /// Train: on one device, a training step (the training pipeline,
  /// passes/Pipelines addTrainingPipeline); with a cluster, the planner
  /// plans a training schedule (setUpCluster sets planner.search.training)
  /// and the plan holds the training step of every rank.
  CompileMode mode = CompileMode::Infer;
  /// With a cluster and Train: emit only the forward passes of the planned
  /// training schedule, in its order (what `cleave compile --cluster` does
  /// without --mode), instead of the training step.
  bool forwardOnly = false;
  /// Loss, optimizer and schedule of a one-device training step.
  mlir::cleave::TrainingOptions training;
  /// The dropout masks' seed, for training.
  int64_t seed = 0;

  /// The cluster spec (JSON file); empty: one device.
  std::string cluster;
  /// Devices to plan for (0: the spec's), or nodes to cost for (0: the spec's).
  int devices = 0, nodes = 0;
  /// Memory budget per device in bytes (default: the spec's minus its reserve).
  std::optional<double> memory;
  /// Mixed precision (bf16 compute); default: in training.
  std::optional<bool> mixed;
  /// The planner's search options, pins and batch dim.
  mlir::cleave::PlannerOptions planner;

  /// The plan directory compilePlan writes.
  std::string output;
  /// Called after each finished phase of compilePlan ("imported",
  /// "planned", "re-imported", "lowered", "verified, written").
  std::function<void(const char *phase)> progress;

  bool isTraining() const { return mode == CompileMode::Train; }
};

/// A model's module, imported from TorchScript (with its parameter data) or
/// parsed from cleave IR.
struct LoadedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The imported parameters' data (empty for .mlir).
  decltype(ImportedModel::params) params;
  /// Parameters have no data (a meta-device export).
  bool meta = false;
  /// The model's state_dict, in its order (empty for .mlir).
  decltype(ImportedModel::stateDict) stateDict;

  mlir::func::FuncOp forward() const {
    mlir::ModuleOp m = module.get();
    return m ? m.lookupSymbol<mlir::func::FuncOp>("forward") : nullptr;
  }
};

/// The data of an imported model's params by name, for the preparation
/// (a causal mask held in a buffer); valid while `params` lives.
mlir::cleave::ParamDataLookup paramDataOf(const decltype(ImportedModel::params) &params);
inline mlir::cleave::ParamDataLookup paramDataOf(const ImportedModel &model) {
  return paramDataOf(model.params);
}

/// Adds the params the preparation derives (folded batch norms) to
/// `params`, which then own their data; valid while `params` lives.
mlir::cleave::ParamDataSink paramSinkOf(decltype(ImportedModel::params) &params);

/// Loads the cluster spec `request.cluster` (with `request.nodes` nodes when
/// set), sizes it to `request.devices`, and sets up the planner's search:
/// devices, memory budget, mode and dtypes.
DriverStatus setUpCluster(mlir::MLIRContext &context, CompileRequest &request,
                          cost::ClusterSpec &spec);

/// Imports `request.model` (or parses it, .mlir) and prepares it
/// (addPreparePipeline: folding, attention fusion), the @forward that
/// `cleave cost` and `cleave plan` analyze.
DriverStatus loadModel(mlir::MLIRContext &context, const CompileRequest &request,
                       LoadedModel &model);

/// The cost model's estimate of a loaded model on one device of `spec`.
DriverStatus costModel(const LoadedModel &model, const cost::ClusterSpec &spec,
                       mlir::cleave::ModelEstimate &estimate);

/// A planner run and its choice.
struct PlanResult {
  mlir::cleave::PlannerResult planner;
  /// planner.search.best.front(); unset when nothing fits.
  std::optional<planner::Candidate> chosen;
  /// The strategy JSON of `chosen`.
  std::string strategyJson;
};

/// Plans a loaded model for the cluster set up by setUpCluster. Fails with
/// NothingFits, `plan.planner` filled, when no candidate fits the budget.
DriverStatus planModel(const LoadedModel &model, const CompileRequest &request,
                       const cost::ClusterSpec &spec, PlanResult &plan);

/// Writes the chosen strategy into the model's IR as attributes (what
/// lowering reads, and `cleave plan --emit-ir` prints).
void annotateModel(LoadedModel &model, const PlanResult &plan);

/// What compilePlan wrote.
struct CompileResult {
  /// The module as emitted (memory-planned), and its parameters.
  LoadedModel model;
  // One device:
  int64_t arenaBytes = 0, peakLiveBytes = 0;
  /// The weights as stored (bf16 after --dtype bf16), and a training step's
  /// optimizer state.
  size_t weightBytes = 0;
  int64_t stateBytes = 0;
  // Partitioned:
  /// The last planner run; with NothingFits, what the report needs.
  std::optional<PlanResult> plan;
  PartitionInfo partition;
  /// What verification counted in the written plan.
  int transfers = 0, collectives = 0;
};

/// Compiles `request.model` into the plan directory `request.output`.
/// Without `cluster` (nullptr): one device, the forward pass or, in
/// training mode, a training step. With `cluster` (set up by setUpCluster):
/// plans the model, imports it again at the chosen microbatch size when
/// that differs, lowers the strategy (collectives, stages, per-rank shapes
/// and programs, recomputation, memory plans), and verifies the plan
/// before it appears.
DriverStatus compilePlan(mlir::MLIRContext &context, const CompileRequest &request,
                         const cost::ClusterSpec *cluster, CompileResult &result);

/// Prints the model summary pass's report of `module` (cleave import
/// --summary), `depth` levels of modules deep.
DriverStatus summarizeModel(mlir::ModuleOp module, unsigned depth);

/// Prepares and memory-plans an imported or parsed module for one device
/// with the default options (the cleave-single-device-plan pipeline), ready
/// for emitSingleDevicePlan.
DriverStatus lowerForOneDevice(mlir::ModuleOp module);

} // namespace cleave

#endif // CLEAVE_COMPILER_COMPILEDRIVER_H
