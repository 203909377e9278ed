//===- CompileDriver.cpp - cleave's compile pipeline, as a library --------===//

#include "compiler/CompileDriver.h"
#include "dialects/cleave/CleaveDialect.h"
#include "runtime/Plan.h"
#include "runtime/PlanVerify.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace cleave {
namespace {

/// Reports a driver error as a diagnostic without a location (printed as
/// `cleave: error: MESSAGE` by the CLI).
mlir::InFlightDiagnostic error(mlir::MLIRContext &context) {
  return mlir::emitError(mlir::UnknownLoc::get(&context));
}

/// Runs the passes `add` puts in a fresh pass manager on `module`.
mlir::LogicalResult runPasses(mlir::ModuleOp module,
                              llvm::function_ref<void(mlir::PassManager &)> add) {
  mlir::PassManager pm(module.getContext());
  add(pm);
  return pm.run(module);
}

void progress(const CompileRequest &request, const char *phase) {
  if (request.progress)
    request.progress(phase);
}

std::string printIR(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  flags.elideLargeElementsAttrs(16);
  module.print(os, flags);
  return text;
}

/// The IR snapshot of each compile step in ir/, numbered in order.
struct Snapshots {
  std::vector<std::pair<std::string, std::string>> list;
  void add(const std::string &step, mlir::ModuleOp module) {
    list.push_back({std::to_string(list.size()) + "-" + step, printIR(module)});
  }
};

/// Imports `request.model`, at `batch` samples when set.
DriverStatus import(mlir::MLIRContext &context, const CompileRequest &request,
                    std::optional<int64_t> batch, LoadedModel &model) {
  ImportOptions options = request.import;
  if (batch)
    options.batchSize = batch;
  options.training = request.isTraining();
  ImportFailure kind = ImportFailure::BadInput;
  auto imported = importTorchScript(context, request.model, options, &kind);
  if (mlir::failed(imported))
    return DriverStatus::failure(static_cast<DriverError>(kind));
  model.module = std::move(imported->module);
  model.params = std::move(imported->params);
  model.meta = imported->meta;
  model.stateDict = std::move(imported->stateDict);
  // Composite aten ops become core ops before anything asks an op's cost,
  // sharding or gradient.
  if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
        mlir::cleave::addDecomposePipeline(pm);
      })))
    return DriverStatus::failure();
  return {};
}

/// Bytes of the weights a plan of `module` stores: its params at their IR
/// type (bf16 after --dtype bf16).
size_t paramBytes(mlir::ModuleOp module) {
  size_t bytes = 0;
  llvm::DenseSet<llvm::StringRef> seen;
  module.walk([&](mlir::cleave::ParamOp param) {
    if (seen.insert(param.getName()).second)
      bytes += mlir::cleave::tensorBytes(param.getType());
  });
  return bytes;
}

/// The preparation's access to the imported model's data: buffers read
/// through it (attention masks) and, for inference, batch norms folded into
/// new params kept in `model`.
void useModelData(mlir::cleave::PrepareOptions &prepare, const CompileRequest &request,
                  LoadedModel &model, bool training) {
  prepare.paramData = paramDataOf(model.params);
  prepare.foldBatchNorm = request.foldBatchNorm && !training;
  prepare.fuseConvEpilogue = request.fuseConvEpilogue && !training;
  prepare.addParam = paramSinkOf(model.params);
}

/// Imports and prepares the model for a partitioned plan, at `batch`
/// samples when set, and converts it to `request.dtype`; records the IR as
/// prepared and, for bf16, as converted.
DriverStatus importForPlan(mlir::MLIRContext &context, const CompileRequest &request,
                           std::optional<int64_t> batch, LoadedModel &model,
                           Snapshots &snapshots) {
  model = LoadedModel();
  if (DriverStatus s = import(context, request, batch, model); !s.ok())
    return s;
  mlir::cleave::PrepareOptions prepare;
  prepare.fuseAttention = request.fuseAttention;
  useModelData(prepare, request, model, request.isTraining());
  if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
        mlir::cleave::addPreparePipeline(pm, prepare);
      })))
    return DriverStatus::failure();
  snapshots = Snapshots();
  snapshots.add("imported", *model.module);
  if (request.dtype != "f32") {
    if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
          mlir::cleave::addPrecisionPipeline(pm, request.dtype);
        })))
      return DriverStatus::failure();
    snapshots.add(request.dtype, *model.module);
  }
  return {};
}

/// The preparation every compiled step starts from (clean-up, attention
/// fusion, the precision conversion and, for training, model.train()
/// semantics).
DriverStatus prepareModel(LoadedModel &model, const CompileRequest &request, bool training) {
  mlir::cleave::PrepareOptions prepare;
  prepare.fuseAttention = request.fuseAttention;
  useModelData(prepare, request, model, training);
  prepare.dtype = request.dtype;
  prepare.training = training;
  prepare.seed = request.seed;
  if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
        mlir::cleave::addPreparePipeline(pm, prepare);
      })))
    return DriverStatus::failure();
  return {};
}

/// One device: the preparation (with the precision conversion and, for
/// training, model.train() semantics), the training step's passes, memory
/// planning, emission.
DriverStatus compileForOneDevice(mlir::MLIRContext &context, const CompileRequest &request,
                                 CompileResult &result,
                                 const std::optional<PlanEmitOptions::DataParallel> &dataParallel =
                                     std::nullopt,
                                 std::optional<int64_t> batch = std::nullopt) {
  LoadedModel &model = result.model;
  if (DriverStatus s = import(context, request, batch, model); !s.ok())
    return s;
  if (model.meta) {
    error(context) << request.model
                   << ": the model was exported on the meta device and has no weight data; "
                      "compile needs real weights ('cleave import --summary' works on meta "
                      "models)";
    return DriverStatus::failure();
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = request.model;
  emitOptions.dataParallel = dataParallel;
  if (dataParallel)
    emitOptions.strategyJson = dataParallel->strategyJson;
  Snapshots snapshots;
  snapshots.add("imported", *model.module);
  // The steps of cleave-single-device-plan, run apart for their snapshots.
  if (DriverStatus s = prepareModel(model, request, request.isTraining()); !s.ok())
    return s;
  if (request.dtype != "f32")
    snapshots.add(request.dtype, *model.module);
  if (request.isTraining()) {
    mlir::cleave::TrainingOptions training = request.training;
    if (dataParallel) {
      // Batch norm's statistics are synchronized over the ranks
      // (-cleave-sync-batch-norm); the planner keeps them to one microbatch.
      training.dataParallel = dataParallel->ranks;
      training.microbatches = dataParallel->microbatches;
      training.zero = dataParallel->zero;
    }
    if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
          mlir::cleave::addTrainingPipeline(pm, training);
        })))
      return DriverStatus::failure();
    snapshots.add("training-step", *model.module);
    emitOptions.training = trainingEmitInfo(request.training, request.dtype, request.seed);
    for (const StateDictItem &item : model.stateDict)
      emitOptions.training->stateDict.push_back(StateDictEntry{item.name, item.param, &item.data});
  }
  if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
        pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createPlanMemory());
      })))
    return DriverStatus::failure();
  snapshots.add("memory-planned", *model.module);
  emitOptions.irSnapshots = snapshots.list;
  if (mlir::failed(emitSingleDevicePlan(*model.module, model.params, request.output,
                                        emitOptions)))
    return DriverStatus::failure();

  auto func = model.forward();
  result.arenaBytes = func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes").getInt();
  result.peakLiveBytes = func->getAttrOfType<mlir::IntegerAttr>("cleave.peak_live_bytes").getInt();
  result.weightBytes = paramBytes(*model.module);
  if (auto state = func->getAttrOfType<mlir::IntegerAttr>("cleave.state_bytes"))
    result.stateBytes = state.getInt();
  return {};
}

/// The manifest's `predicted` step of the chosen strategy: its step split
/// into compute, communication (tp and dp) and bubble, and the budget.
nlohmann::ordered_json predictedStep(const PlanResult &plan, double memoryBudget) {
  auto strategy = nlohmann::json::parse(plan.strategyJson);
  const auto &p = strategy["predicted"];
  double bubble = p["pipeline_seconds"].get<double>() * p["bubble_fraction"].get<double>();
  double communication = p["tp_comm_seconds"].get<double>() + p["dp_comm_seconds"].get<double>();
  double step = p["step_seconds"].get<double>();
  return nlohmann::ordered_json{
      {"step_seconds", step},
      {"compute_seconds", std::max(0.0, step - bubble - communication)},
      {"communication_seconds", communication},
      {"bubble_seconds", bubble},
      {"memory_budget_bytes", static_cast<int64_t>(memoryBudget)}};
}

/// What the manifest records of a partitioned plan: the chosen strategy,
/// the model's names and parameters, the predicted step.
PartitionInfo partitionInfo(const LoadedModel &model, const CompileRequest &request,
                            const PlanResult &plan) {
  const planner::Candidate &chosen = *plan.chosen;
  const auto &search = request.planner.search;
  auto func = model.forward();
  PartitionInfo info;
  info.pp = chosen.pp;
  info.tp = chosen.tp;
  info.dp = chosen.dp;
  info.schedule = cost::scheduleName(chosen.schedule);
  info.virtualStages = chosen.virtualStages;
  info.microbatches = chosen.microbatches;
  info.microbatchSize = chosen.microbatchSize;
  info.globalBatch = search.globalBatch;
  info.batchDim = request.planner.batchDim;
  info.withWeights = !model.meta;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto name = func.getArgAttrOfType<mlir::StringAttr>(i, "cleave.name"))
      info.inputNames.push_back(name.str());
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto name = func.getResultAttrOfType<mlir::StringAttr>(i, "cleave.name");
    info.outputNames.push_back(name ? name.str() : "output_" + std::to_string(i));
  }
  func.walk([&](mlir::cleave::ParamOp param) {
    auto type = llvm::cast<mlir::RankedTensorType>(param.getType());
    runtime::TensorDesc desc;
    desc.dtype = tensorDescOf(type).dtype; // as stored: bf16 after --dtype bf16
    desc.shape.assign(type.getShape().begin(), type.getShape().end());
    info.parameters.push_back({param.getName().str(), desc});
  });
  info.predicted = predictedStep(plan, search.memoryBudget);
  return info;
}

/// A training plan for the chosen mesh. Data parallelism runs: every rank
/// holds the whole step (the one-device program at one microbatch of its
/// share of the batch, gradients accumulated over its microbatches) and the
/// gradients are averaged over the ranks, with ZeRO's optimizer-state,
/// gradient and parameter sharding when chosen. (Pipelines, tensor splits
/// and recomputation: compilePartitionedTraining.)
DriverStatus compileDataParallelTraining(mlir::MLIRContext &context, const CompileRequest &request,
                                         const planner::Candidate &chosen, PlanResult plan,
                                         CompileResult &result) {
  const auto &search = request.planner.search;
  if (request.planner.batchDim != 0) {
    error(context) << "data-parallel training splits the batch in dim 0 of every input";
    return DriverStatus::failure().withUsage();
  }
  PlanEmitOptions::DataParallel dataParallel;
  dataParallel.ranks = chosen.dp;
  dataParallel.microbatches = chosen.microbatches;
  if (chosen.dp > 1)
    dataParallel.zero = std::string(cost::shardingLevelName(chosen.sharding));
  dataParallel.strategyJson = plan.strategyJson;
  dataParallel.predicted = predictedStep(plan, search.memoryBudget);
  // The layers the planner spills, by their parameters' names (the step is
  // imported again below).
  CompileRequest spilling = request;
  for (const planner::StagePlan &stage : chosen.stages)
    for (int l : stage.spilled)
      for (mlir::Operation *op : plan.planner.layers[l].params)
        if (auto param = llvm::cast<mlir::cleave::ParamOp>(op); !param.getBuffer())
          spilling.training.spillParameters.push_back(param.getName().str());
  for (const planner::StagePlan &stage : chosen.stages)
    for (int l : stage.activationsSpilled)
      spilling.training.spillActivationLayers.push_back(plan.planner.layers[l].name);
  CompileResult compiled;
  if (DriverStatus s = compileForOneDevice(context, spilling, compiled, dataParallel,
                                           chosen.microbatchSize);
      !s.ok())
    return s;
  compiled.plan = std::move(plan);
  result = std::move(compiled);
  progress(request, "training step, written");
  return {};
}

/// Plans `model` (imported at the chosen microbatch size) again with every
/// choice of `chosen` pinned in `request`, so the placement is the chosen
/// one on this IR.
DriverStatus planAgainPinned(mlir::MLIRContext &context, const LoadedModel &model,
                             CompileRequest &request, const cost::ClusterSpec &spec,
                             const planner::Candidate &chosen, PlanResult &plan) {
  auto &search = request.planner.search;
  search.tp = chosen.tp;
  search.pp = chosen.pp;
  search.dp = chosen.dp;
  search.microbatchSize = chosen.microbatchSize;
  search.virtualStages = chosen.virtualStages;
  if (search.training) {
    search.schedule = chosen.schedule;
    search.sharding = chosen.sharding;
  }
  DriverStatus s = planModel(model, request, spec, plan);
  if (s.error() == DriverError::NothingFits)
    error(context) << "the plan (" << chosen.label()
                   << ") no longer fits when planned again at its microbatch size";
  return s;
}

/// Emits the partitioned plan, checking on the directory before it appears
/// what `cleave verify` checks; records the transfers and collectives.
DriverStatus emitVerified(mlir::MLIRContext &context, LoadedModel &model,
                          const CompileRequest &request, PlanEmitOptions &emitOptions,
                          CompileResult &result) {
  runtime::VerifyResult verified;
  emitOptions.check = [&](const std::string &dir) -> mlir::LogicalResult {
    runtime::Plan written;
    if (runtime::Status s = runtime::loadPlan(dir, &written); !s.ok()) {
      error(context) << "the compiled plan does not load: " << s.message();
      return mlir::failure();
    }
    verified = runtime::verifyPlan(written);
    for (const std::string &e : verified.errors)
      error(context) << "the compiled plan fails verification: " << e;
    return mlir::success(verified.ok());
  };
  if (mlir::failed(emitPartitionedPlan(*model.module, model.params, request.output, emitOptions,
                                       result.partition)))
    return DriverStatus::failure();
  result.transfers = verified.transfers;
  result.collectives = verified.collectives;
  return {};
}

/// Whether the plan recomputes any layer's activations in backward.
bool recomputes(const planner::Candidate &chosen) {
  return llvm::any_of(chosen.stages,
                      [](const planner::StagePlan &stage) { return !stage.recomputed.empty(); });
}

/// A training plan with pipeline stages, tensor splits or recomputation
/// (which runs in the backward slots of a stage's step, one stage or many): the model
/// imported at the microbatch size and prepared for training, planned again
/// with every choice pinned (so the placement is the chosen one on this
/// IR), placed; with a tp group, its layout changes inserted and the shapes
/// made each rank's; differentiated, split into one unrolled step per stage
/// in the schedule's order (-cleave-pipeline-training), the gradients
/// averaged over each stage's dp group and the optimizer added to every
/// stage's step; with a tp group, each step written out per tp rank.
DriverStatus compilePartitionedTraining(mlir::MLIRContext &context,
                                        const CompileRequest &original,
                                        const cost::ClusterSpec &spec,
                                        const planner::Candidate &first, CompileResult &result) {
  CompileRequest request = original;
  auto refuse = [&](const std::string &what, const std::string &pin) {
    error(context) << "the plan for training (" << first.label() << ") " << what
                   << ", which cleave cannot run yet; " << pin;
    return DriverStatus::failure();
  };
  const std::string partitionedBy = first.pp > 1   ? "pipeline stages"
                                    : first.tp > 1 ? "tensor-parallel ranks"
                                                   : "recomputation";
  // The search leaves ZeRO-2 and 3 with stages or splits, and ZeRO-3 with
  // recomputation, out (SearchOptions::untrainedCombinations); this is the
  // backstop. Recomputation alone takes ZeRO-2 (the step's gradients
  // reduce-scattered once), not ZeRO-3's per-slot gathers.
  if (first.dp > 1 && first.sharding == cost::ShardingLevel::Parameters)
    return refuse("shards parameters over data-parallel ranks with " + partitionedBy,
                  "pin --zero gradients or --recompute none");
  // The gradients are a one-device plan's outputs; here each stage and tp
  // rank holds its own, and the manifest lists the model's outputs only.
  if (request.training.optimizer == "none")
    return refuse("returns the gradients as outputs (--optimizer none) with " + partitionedBy,
                  first.pp > 1 || first.tp > 1
                      ? "pin --pp 1 --tp 1 (one device or data parallelism) or choose an optimizer"
                      : "pin --recompute none or choose an optimizer");
  if (request.planner.batchDim != 0) {
    error(context) << "partitioned training splits the batch in dim 0 of every input";
    return DriverStatus::failure().withUsage();
  }
  LoadedModel &model = result.model;
  if (DriverStatus s = import(context, request, first.microbatchSize, model); !s.ok())
    return s;
  Snapshots snapshots;
  snapshots.add("imported", *model.module);
  if (DriverStatus s = prepareModel(model, request, /*training=*/true); !s.ok())
    return s;
  snapshots.add("prepared", *model.module);
  if (DriverStatus s = planAgainPinned(context, model, request, spec, first, *result.plan);
      !s.ok())
    return s;
  const planner::Candidate &chosen = *result.plan->chosen;
  result.partition = partitionInfo(model, request, *result.plan);
  annotateModel(model, *result.plan);
  snapshots.add("planned", *model.module);
  if (chosen.tp > 1) {
    // Each rank's forward at its own shapes: what is differentiated.
    if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
          pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createInsertCollectives());
        })))
      return DriverStatus::failure();
    snapshots.add("collectives", *model.module);
    if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
          pm.addPass(mlir::cleave::createLocalShapes());
        })))
      return DriverStatus::failure();
    snapshots.add("local-shapes", *model.module);
  }

  mlir::cleave::TrainingOptions training = request.training;
  training.pipelineStages = chosen.pp;
  training.tensorParallel = chosen.tp;
  training.partitioned = true;
  training.dataParallel = chosen.dp;
  training.microbatches = chosen.microbatches;
  training.zero = chosen.dp > 1 ? std::string(cost::shardingLevelName(chosen.sharding)) : "none";
  // A stage's update waits for the step's last backward slot anyway.
  training.earlyUpdates = false;
  if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
        mlir::cleave::addTrainingPipeline(pm, training);
      })))
    return DriverStatus::failure();
  snapshots.add("training-step", *model.module);
  if (chosen.tp > 1) {
    if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
          pm.addPass(mlir::cleave::createSpecializeRanks());
        })))
      return DriverStatus::failure();
    snapshots.add("ranks", *model.module);
  }
  // The step's inputs (the loss may have added `labels`) and its output.
  result.partition.inputNames.clear();
  for (auto func : model.module->getOps<mlir::func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto name = func.getArgAttrOfType<mlir::StringAttr>(i, "cleave.name");
          name && !llvm::is_contained(result.partition.inputNames, name.str()))
        result.partition.inputNames.push_back(name.str());
  result.partition.outputNames = {"loss"};
  if (mlir::failed(runPasses(*model.module, [](mlir::PassManager &pm) {
        pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createPlanMemory());
      })))
    return DriverStatus::failure();
  snapshots.add("memory-planned", *model.module);
  progress(request, "lowered");
  // What the largest stage allocates.
  for (auto func : model.module->getOps<mlir::func::FuncOp>()) {
    auto bytes = [&](llvm::StringRef name) -> int64_t {
      auto attr = func->getAttrOfType<mlir::IntegerAttr>(name);
      return attr ? attr.getInt() : 0;
    };
    size_t weights = 0;
    llvm::DenseSet<llvm::StringRef> seen;
    func.walk([&](mlir::cleave::ParamOp param) {
      if (seen.insert(param.getName()).second)
        weights += mlir::cleave::tensorBytes(param.getType());
    });
    int64_t arena = bytes("cleave.arena_bytes"), state = bytes("cleave.state_bytes");
    if (arena + state + static_cast<int64_t>(weights) >
        result.arenaBytes + result.stateBytes + static_cast<int64_t>(result.weightBytes)) {
      result.arenaBytes = arena;
      result.weightBytes = weights;
      result.stateBytes = state;
      result.peakLiveBytes = bytes("cleave.peak_live_bytes");
    }
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = request.model;
  emitOptions.strategyJson = result.plan->strategyJson;
  emitOptions.irSnapshots = snapshots.list;
  emitOptions.training = trainingEmitInfo(request.training, request.dtype, request.seed);
  for (const StateDictItem &item : model.stateDict)
    emitOptions.training->stateDict.push_back(StateDictEntry{item.name, item.param, &item.data});
  emitOptions.training->zero = training.zero;
  if (DriverStatus s = emitVerified(context, model, request, emitOptions, result); !s.ok())
    return s;
  progress(request, "training step, verified, written");
  return {};
}

/// A cluster: plan, import again at the microbatch size, lower the strategy
/// step by step (a snapshot after each), emit and verify.
DriverStatus compileForCluster(mlir::MLIRContext &context, const CompileRequest &original,
                               const cost::ClusterSpec &spec, CompileResult &result) {
  // The pins and ZeRO level change below as choices are fixed.
  CompileRequest request = original;
  auto &search = request.planner.search;
  // A plan to run: the search leaves out what the runtime does not train.
  search.untrainedCombinations = !(search.training && !request.forwardOnly);
  LoadedModel &model = result.model;
  Snapshots snapshots;
  if (DriverStatus s = importForPlan(context, request, std::nullopt, model, snapshots); !s.ok())
    return s;
  progress(request, "imported");
  result.plan.emplace();
  if (DriverStatus s = planModel(model, request, spec, *result.plan); !s.ok())
    return s;
  planner::Candidate chosen = *result.plan->chosen;
  if (chosen.sharding == cost::ShardingLevel::Parameters &&
      !(search.training && !request.forwardOnly)) {
    // Forward programs with parameters gathered per layer are not emitted
    // yet (training steps gather them: -cleave-shard-parameters).
    search.sharding = cost::ShardingLevel::Gradients;
    if (DriverStatus s = planModel(model, request, spec, *result.plan); !s.ok())
      return s;
    chosen = *result.plan->chosen;
  }
  progress(request, "planned");
  if (search.training && !request.forwardOnly &&
      (chosen.pp > 1 || chosen.tp > 1 || recomputes(chosen)))
    return compilePartitionedTraining(context, request, spec, chosen, result);
  if (search.training && !request.forwardOnly)
    return compileDataParallelTraining(context, request, chosen, *result.plan, result);

  // The programs run one microbatch: import again at that size and plan it
  // with every choice pinned, so the IR's shapes are the ones that run.
  if (chosen.microbatchSize != result.plan->planner.profile.tracedBatch) {
    if (request.planner.batchDim != 0) {
      error(context) << "compiling at another microbatch size than the traced batch needs "
                        "the batch in dim 0 of the inputs";
      return DriverStatus::failure().withUsage();
    }
    if (DriverStatus s =
            importForPlan(context, request, chosen.microbatchSize, model, snapshots);
        !s.ok())
      return s;
    if (DriverStatus s = planAgainPinned(context, model, request, spec, chosen, *result.plan);
        !s.ok())
      return s;
    chosen = *result.plan->chosen;
    progress(request, "re-imported");
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = request.model;
  emitOptions.strategyJson = result.plan->strategyJson;
  result.partition = partitionInfo(model, request, *result.plan);

  annotateModel(model, *result.plan);
  snapshots.add("planned", *model.module);
  struct Step {
    const char *name;
    std::function<void(mlir::PassManager &)> add;
  };
  std::vector<Step> steps = {
      {"collectives",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createInsertCollectives());
       }},
      {"stages", [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createOutlineStages()); }},
      {"local-shapes",
       [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createLocalShapes()); }},
      {"ranks", [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createSpecializeRanks()); }},
      {"recompute",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createMarkRecompute());
       }},
      {"memory-planned",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createPlanMemory());
       }},
  };
  for (const Step &step : steps) {
    if (mlir::failed(runPasses(*model.module, step.add))) {
      error(context) << "lowering failed at step " << snapshots.list.size() << "-" << step.name
                     << "; the IR before it is what " << request.output << "/ir/ would hold";
      return DriverStatus::failure();
    }
    snapshots.add(step.name, *model.module);
  }
  emitOptions.irSnapshots = snapshots.list;
  progress(request, "lowered");
  if (DriverStatus s = emitVerified(context, model, request, emitOptions, result); !s.ok())
    return s;
  progress(request, "verified, written");
  return {};
}

} // namespace

mlir::cleave::ParamDataLookup paramDataOf(const decltype(ImportedModel::params) &params) {
  return [&params](llvm::StringRef name) -> const void * {
    auto it = params.find(name.str());
    return it == params.end() ? nullptr : it->second.data;
  };
}

mlir::cleave::ParamDataSink paramSinkOf(decltype(ImportedModel::params) &params) {
  return [&params](llvm::StringRef name, llvm::ArrayRef<int64_t> shape, std::vector<float> data) {
    auto owned = std::make_shared<std::vector<float>>(std::move(data));
    ParamData entry;
    entry.shape.assign(shape.begin(), shape.end());
    entry.dtype = "f32";
    entry.data = owned->data();
    entry.bytes = owned->size() * sizeof(float);
    entry.owner = std::move(owned);
    params[name.str()] = std::move(entry);
  };
}

DriverStatus setUpCluster(mlir::MLIRContext &context, CompileRequest &request,
                          cost::ClusterSpec &spec) {
  auto &search = request.planner.search;
  runtime::Status status = cost::loadClusterSpec(request.cluster, spec, request.nodes);
  if (!status.ok()) {
    error(context) << status.message();
    return DriverStatus::failure();
  }
  if (std::string e = mlir::cleave::useDevices(spec, request.devices); !e.empty()) {
    error(context) << e;
    return DriverStatus::failure();
  }
  search.training = request.isTraining();
  search.devices = spec.deviceCount();
  search.memoryBudget =
      request.memory ? *request.memory : mlir::cleave::defaultMemoryBudget(spec.device);
  bool mixed = request.mixed.value_or(search.training);
  search.mixedPrecision = mixed && search.training;
  search.paramDType = mixed ? runtime::DType::BF16 : runtime::DType::F32;
  request.planner.computeDType = search.paramDType;
  return {};
}

DriverStatus loadModel(mlir::MLIRContext &context, const CompileRequest &request,
                       LoadedModel &model) {
  context.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  model = LoadedModel();
  mlir::cleave::PrepareOptions prepare;
  prepare.fuseAttention = request.fuseAttention;
  if (llvm::StringRef(request.model).ends_with(".mlir")) {
    if (request.import.batchSize || !request.import.inputShapes.empty()) {
      error(context) << "--batch and --input-shape need a TorchScript model: the shapes of "
                        "cleave IR are fixed";
      return DriverStatus::failure();
    }
    model.module = mlir::parseSourceFile<mlir::ModuleOp>(request.model, &context);
    if (!model.module)
      return DriverStatus::failure();
  } else {
    if (DriverStatus s = import(context, request, std::nullopt, model); !s.ok())
      return s;
    // The buffers' data stays in `model` while the preparation reads it.
    useModelData(prepare, request, model, request.isTraining());
  }
  if (mlir::failed(runPasses(*model.module, [&](mlir::PassManager &pm) {
        mlir::cleave::addPreparePipeline(pm, prepare);
      })))
    return DriverStatus::failure();
  if (!model.forward()) {
    error(context) << request.model << ": no function @forward";
    return DriverStatus::failure();
  }
  return {};
}

DriverStatus costModel(const LoadedModel &model, const cost::ClusterSpec &spec,
                       mlir::cleave::ModelEstimate &estimate) {
  auto result = mlir::cleave::estimateModel(model.forward(), spec.device);
  if (mlir::failed(result))
    return DriverStatus::failure();
  estimate = std::move(*result);
  return {};
}

DriverStatus planModel(const LoadedModel &model, const CompileRequest &request,
                       const cost::ClusterSpec &spec, PlanResult &plan) {
  plan = PlanResult();
  auto result = mlir::cleave::planModel(model.forward(), spec, request.planner);
  if (mlir::failed(result))
    return DriverStatus::failure();
  plan.planner = std::move(*result);
  if (plan.planner.search.best.empty())
    return DriverStatus::failure(DriverError::NothingFits);
  plan.chosen = plan.planner.search.best.front();
  plan.strategyJson = mlir::cleave::strategyJson(plan.planner, *plan.chosen, spec,
                                                 request.planner, request.model);
  return {};
}

void annotateModel(LoadedModel &model, const PlanResult &plan) {
  mlir::cleave::annotateStrategy(model.forward(), plan.planner, *plan.chosen);
}

DriverStatus compilePlan(mlir::MLIRContext &context, const CompileRequest &request,
                         const cost::ClusterSpec *cluster, CompileResult &result) {
  result = CompileResult();
  return cluster ? compileForCluster(context, request, *cluster, result)
                 : compileForOneDevice(context, request, result);
}

DriverStatus summarizeModel(mlir::ModuleOp module, unsigned depth) {
  mlir::cleave::PrintModelSummaryOptions options;
  options.depth = depth;
  if (mlir::failed(runPasses(module, [&](mlir::PassManager &pm) {
        pm.addPass(mlir::cleave::createPrintModelSummary(options));
      })))
    return DriverStatus::failure();
  return {};
}

DriverStatus lowerForOneDevice(mlir::ModuleOp module) {
  if (mlir::failed(runPasses(module, [](mlir::PassManager &pm) {
        mlir::cleave::addSingleDevicePlanPipeline(pm);
      })))
    return DriverStatus::failure();
  return {};
}

} // namespace cleave
