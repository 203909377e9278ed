//===- CompileCommand.cpp - cleave compile --------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/LoadModel.h"
#include "cli/PlannerFlags.h"
#include "cli/TrainingFlags.h"
#include "compiler/Importer.h"
#include "compiler/PlanEmitter.h"
#include "cost/Format.h"
#include "passes/Passes.h"
#include "passes/Planner.h"
#include "runtime/Plan.h"
#include "runtime/PlanVerify.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <functional>

#include <nlohmann/json.hpp>

namespace cleave {
namespace {

constexpr const char *kCompileUsage = R"(usage: cleave compile MODEL.pt -o PLAN_DIR [options]
       cleave compile MODEL.pt --cluster SPEC.json --global-batch B -o PLAN_DIR [planner options]

Compiles a TorchScript model into a plan directory (docs/plan-format.md):
manifest.json, programs/, weights/ and ir/. Without --cluster the plan runs on
one CPU device. With --cluster, cleave plans the model for the cluster (as
'cleave plan' does, with the same options and pins), lowers the strategy
(collectives, pipeline stages, per-rank shapes, one program per stage and tp
index, memory plans), writes one program and one weight shard per (stage, tp
index), the strategy, and the IR after each step, and verifies the plan.
Plans hold forward passes: for inference, or the forward order of a training
schedule. A meta-device model gives a plan without weights, for inspection.
Inputs keep the names of the model's forward arguments; outputs are output_0,
output_1, ... PLAN_DIR appears complete or not at all; an earlier plan there
is replaced.

planner options (with --cluster): --devices N, --global-batch B (required),
  --mode train|infer, --precision mixed|fp32 (must agree with --dtype: mixed
  with bf16, fp32 with f32; by default it follows --dtype), --mem-per-device SIZE,
  --objective latency|throughput, --tp N, --pp N, --dp N, --microbatch N,
  --schedule gpipe|1f1b|interleaved, --virtual-stages V,
  --zero none|optimizer|gradients, --recompute auto|none|full,
  --sequence-parallel auto|off, --batch-dim 0
  (see 'cleave plan --help')

training (one device; docs/training.md):
  --mode train|infer               train: one training step (forward, loss,
                                   backward, optimizer) for `cleave train`;
                                   infer (default): the forward pass
  --loss model|cross_entropy|mse   model (default): forward returns the loss;
                                   cross_entropy: forward returns logits [..., C]
                                   and the plan takes `labels` (i64, [...]);
                                   mse: `labels` of the output's shape
  --optimizer adamw|sgd|none       default adamw; none: the plan returns the
                                   loss and grad.<parameter> for each parameter
  --lr X, --weight-decay X         defaults as torch: AdamW 1e-3 and 1e-2; SGD
                                   needs --lr, weight decay 0
  --betas B1,B2, --eps X           AdamW (0.9,0.999 and 1e-8)
  --momentum X, --dampening X, --nesterov   SGD (0, 0, off)
  --clip-grad-norm X               scale the gradients to a global L2 norm <= X
  --lr-schedule constant|linear|cosine, --warmup-steps N, --decay-steps N
                                   the learning rate of step t is lr * λ(t-1),
                                   linear warmup over N steps, decay to 0 at
                                   --decay-steps (needed by linear and cosine)
  --seed N                         seed of the dropout masks (default 0)
  --dtype bf16 with --mode train   bf16 compute, f32 master weights, gradients
                                   and optimizer state

options:
  --input-shape NAME=DIMS[:DTYPE]  shape of forward input NAME, e.g. idx=2x64:i64
                                   (repeat per input; overrides the export's shapes)
  --dtype f32|bf16                 the float type programs compute in and weights are
                                   stored in (default f32). bf16: kernels accumulate in
                                   f32, round each result to bf16; float inputs and
                                   outputs stay f32 at the plan's boundary
  -o PLAN_DIR                      the plan directory to write (required)
  --no-fuse-attention              keep attention unfused (matmul, softmax,
                                   matmul) instead of forming cleave.attention,
                                   to compare memory and time
  --timing                         print wall time and peak memory to stderr
  -h, --help                       show this help

exit status: 0 success, 1 bad arguments, unreadable model, a model without
weight data (single device) or a plan that fails verification, 2 the model
uses ops or control flow cleave cannot import, 3 no plan fits in the memory
budget.
)";

std::string printIR(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  flags.elideLargeElementsAttrs(16);
  module.print(os, flags);
  return text;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// One line per finished phase on stderr, so a long compile shows where it is.
void progress(const char *phase, std::chrono::steady_clock::time_point start) {
  llvm::errs() << llvm::formatv("cleave: {0,-16} {1}\n", phase,
                                cost::humanSeconds(secondsSince(start)));
}

/// `--dtype VALUE`: f32 or bf16. Returns -1, or the exit status after a
/// usage error.
int parseDType(const char *value, std::string &dtype, const char *usage) {
  std::string d = value ? value : "";
  if (d != "f32" && d != "bf16")
    return usageError("--dtype must be f32 or bf16" +
                          (d.empty() ? std::string() : ", got '" + d + "'") +
                          (d == "f16" ? " (the CPU backend has no f16 kernels yet)" : ""),
                      usage);
  dtype = d;
  return -1;
}

/// The IR snapshot of each compile step in ir/, numbered in order.
struct Snapshots {
  std::vector<std::pair<std::string, std::string>> list;
  void add(const std::string &step, mlir::ModuleOp module) {
    list.push_back({std::to_string(list.size()) + "-" + step, printIR(module)});
  }
};

/// Imports and prepares the model, at `batch` samples when set, and converts
/// it to `dtype`; records the IR as prepared and, for bf16, as converted.
mlir::FailureOr<ImportedModel> importForPlan(mlir::MLIRContext &context, const std::string &model,
                                             ImportOptions options, std::optional<int64_t> batch,
                                             bool fuseAttention, const std::string &dtype,
                                             Snapshots &snapshots, int &exitCode) {
  options.batchSize = batch;
  ImportFailure kind = ImportFailure::BadInput;
  auto imported = importTorchScript(context, model, options, &kind);
  if (mlir::failed(imported)) {
    exitCode = static_cast<int>(kind);
    return mlir::failure();
  }
  mlir::cleave::PrepareOptions prepare;
  prepare.fuseAttention = fuseAttention;
  prepare.paramData = paramDataOf(*imported);
  mlir::PassManager pm(&context);
  mlir::cleave::addPreparePipeline(pm, prepare);
  if (mlir::failed(pm.run(*imported->module)))
    return mlir::failure();
  snapshots = Snapshots();
  snapshots.add("imported", *imported->module);
  if (dtype != "f32") {
    mlir::PassManager convert(&context);
    mlir::cleave::addPrecisionPipeline(convert, dtype);
    if (mlir::failed(convert.run(*imported->module)))
      return mlir::failure();
    snapshots.add(dtype, *imported->module);
  }
  return imported;
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

int runPartitionedCompile(int argc, char **argv) {
  PlanCliOptions o;
  std::string output, dtype = "f32";
  bool timing = false;
  int status = parsePlannerArguments(argc, argv, o, kCompileUsage,
                                     [&](int &i, const std::string &arg) -> int {
    const char *value = nullptr;
    if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kCompileUsage);
      output = value;
    } else if (optionValue(argc, argv, i, "--dtype", &value)) {
      return parseDType(value, dtype, kCompileUsage);
    } else if (arg == "--timing") {
      timing = true;
    } else if (TrainingFlags ignored;
               parseTrainingFlag(argc, argv, i, ignored, kCompileUsage) != kNotMine) {
      return usageError(arg + ": training steps are compiled for one device so far; drop "
                              "--cluster to train on one device (--cluster --mode train plans "
                              "the forward order of a training schedule)",
                        kCompileUsage);
    } else {
      return kNotMine;
    }
    return -1;
  });
  if (status >= 0)
    return status;
  if (output.empty())
    return usageError("no plan directory given (-o PLAN_DIR)", kCompileUsage);
  while (output.size() > 1 && output.back() == '/')
    output.pop_back();
  if (llvm::StringRef(o.model).ends_with(".mlir"))
    return usageError("compile needs a TorchScript model: a plan's programs are compiled at "
                      "the microbatch size, so the model is imported again at that size",
                      kCompileUsage);
  auto &search = o.planner.search;
  // The planner costs what the programs compute: bf16 programs are its
  // mixed precision (bf16 compute; fp32 master weights and moments when
  // training), f32 programs its fp32.
  if (o.mixed && *o.mixed != (dtype == "bf16"))
    return usageError(*o.mixed ? "--precision mixed plans bf16 compute, but the programs compute "
                                 "in f32: add --dtype bf16"
                               : "--precision fp32 plans fp32 compute, but --dtype bf16 compiles "
                                 "bf16 programs: drop one of them",
                      kCompileUsage);
  o.mixed = dtype == "bf16";
  if (search.sharding == cost::ShardingLevel::Parameters)
    return usageError("--zero parameters is not emitted yet: plans hold forward passes with "
                      "whole parameters per tp part",
                      kCompileUsage);
  cost::ClusterSpec spec;
  if (int s = setUpSearch(o, spec); s >= 0)
    return s;

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  int exitCode = 1;
  Snapshots snapshots;
  auto imported = importForPlan(context, o.model, o.import, std::nullopt, o.fuseAttention, dtype,
                                snapshots, exitCode);
  if (mlir::failed(imported))
    return exitCode;
  progress("imported", start);
  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  auto plan = mlir::cleave::planModel(func, spec, o.planner);
  if (mlir::failed(plan))
    return 1;
  if (plan->search.best.empty())
    return reportNothingFits(o, *plan);
  planner::Candidate chosen = plan->search.best.front();
  if (chosen.sharding == cost::ShardingLevel::Parameters) {
    // Forward programs with parameters gathered per layer are not emitted yet.
    search.sharding = cost::ShardingLevel::Gradients;
    plan = mlir::cleave::planModel(func, spec, o.planner);
    if (mlir::failed(plan))
      return 1;
    if (plan->search.best.empty())
      return reportNothingFits(o, *plan);
    chosen = plan->search.best.front();
  }
  progress("planned", start);

  // The programs run one microbatch: import again at that size and plan it
  // with every choice pinned, so the IR's shapes are the ones that run.
  if (chosen.microbatchSize != plan->profile.tracedBatch) {
    if (o.planner.batchDim != 0)
      return usageError("compiling at another microbatch size than the traced batch needs "
                        "the batch in dim 0 of the inputs",
                        kCompileUsage);
    imported = importForPlan(context, o.model, o.import, chosen.microbatchSize, o.fuseAttention,
                             dtype, snapshots, exitCode);
    if (mlir::failed(imported))
      return exitCode;
    func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
    search.tp = chosen.tp;
    search.pp = chosen.pp;
    search.dp = chosen.dp;
    search.microbatchSize = chosen.microbatchSize;
    search.virtualStages = chosen.virtualStages;
    if (search.training) {
      search.schedule = chosen.schedule;
      search.sharding = chosen.sharding;
    }
    plan = mlir::cleave::planModel(func, spec, o.planner);
    if (mlir::failed(plan))
      return 1;
    if (plan->search.best.empty()) {
      llvm::errs() << "cleave: error: the plan (" << chosen.label()
                   << ") no longer fits when planned again at its microbatch size\n";
      return reportNothingFits(o, *plan);
    }
    chosen = plan->search.best.front();
    progress("re-imported", start);
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = o.model;
  emitOptions.strategyJson = mlir::cleave::strategyJson(*plan, chosen, spec, o.planner, o.model);

  PartitionInfo info;
  info.pp = chosen.pp;
  info.tp = chosen.tp;
  info.dp = chosen.dp;
  info.schedule = cost::scheduleName(chosen.schedule);
  info.virtualStages = chosen.virtualStages;
  info.microbatches = chosen.microbatches;
  info.microbatchSize = chosen.microbatchSize;
  info.globalBatch = search.globalBatch;
  info.batchDim = o.planner.batchDim;
  info.withWeights = !imported->meta;
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
  {
    auto strategy = nlohmann::json::parse(emitOptions.strategyJson);
    const auto &p = strategy["predicted"];
    double bubble = p["pipeline_seconds"].get<double>() * p["bubble_fraction"].get<double>();
    double communication = p["tp_comm_seconds"].get<double>() + p["dp_comm_seconds"].get<double>();
    double step = p["step_seconds"].get<double>();
    info.predicted = nlohmann::ordered_json{
        {"step_seconds", step},
        {"compute_seconds", std::max(0.0, step - bubble - communication)},
        {"communication_seconds", communication},
        {"bubble_seconds", bubble},
        {"memory_budget_bytes", static_cast<int64_t>(search.memoryBudget)}};
  }

  mlir::cleave::annotateStrategy(func, *plan, chosen);
  snapshots.add("planned", *imported->module);
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
    mlir::PassManager pm(&context);
    step.add(pm);
    if (mlir::failed(pm.run(*imported->module))) {
      llvm::errs() << "cleave: error: lowering failed at step " << snapshots.list.size() << "-"
                   << step.name << "; the IR before it is what " << output << "/ir/ would hold\n";
      return 1;
    }
    snapshots.add(step.name, *imported->module);
  }
  emitOptions.irSnapshots = snapshots.list;
  progress("lowered", start);
  // What `cleave verify` checks, on the directory before it appears.
  runtime::VerifyResult verified;
  emitOptions.check = [&](const std::string &dir) -> mlir::LogicalResult {
    runtime::Plan written;
    if (runtime::Status s = runtime::loadPlan(dir, &written); !s.ok()) {
      llvm::errs() << "cleave: error: the compiled plan does not load: " << s.message() << "\n";
      return mlir::failure();
    }
    verified = runtime::verifyPlan(written);
    for (const std::string &error : verified.errors)
      llvm::errs() << "cleave: error: the compiled plan fails verification: " << error << "\n";
    return mlir::success(verified.ok());
  };
  if (mlir::failed(emitPartitionedPlan(*imported->module, imported->params, output, emitOptions,
                                       info)))
    return 1;
  progress("verified, written", start);
  llvm::outs() << llvm::formatv(
      "cleave: wrote {0}: {1} ranks (pp {2} x tp {3} x dp {4}), {5} programs, {7} "
      "microbatches of {8} per data-parallel rank{9}; verified: {10} transfers, {11} "
      "collectives\n",
      output, info.pp * info.tp * info.dp, info.pp, info.tp, info.dp, info.pp * info.tp,
      info.dp, info.microbatches, info.microbatchSize,
      info.withWeights ? "" : "; no weights (meta model)", verified.transfers,
      verified.collectives);
  if (timing)
    printTiming("compile", secondsSince(start));
  return 0;
}

} // namespace

int runCompile(int argc, char **argv) {
  for (int i = 0; i < argc; ++i)
    if (llvm::StringRef(argv[i]).starts_with("--cluster"))
      return runPartitionedCompile(argc, argv);
  std::string model, output, dtype = "f32";
  ImportOptions options;
  bool timing = false, train = false;
  TrainingFlags training;
  mlir::cleave::PrepareOptions prepare;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (int status = parseTrainingFlag(argc, argv, i, training, kCompileUsage);
        status != kNotMine) {
      if (status >= 0)
        return status;
      continue;
    }
    if (optionValue(argc, argv, i, "--mode", &value)) {
      std::string mode = value ? value : "";
      if (mode != "train" && mode != "infer")
        return usageError("--mode must be train or infer", kCompileUsage);
      train = mode == "train";
    } else if (arg == "-h" || arg == "--help") {
      llvm::outs() << kCompileUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--input-shape", &value)) {
      if (int status = addInputShape(value, options.inputShapes, kCompileUsage); status >= 0)
        return status;
    } else if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kCompileUsage);
      output = value;
    } else if (optionValue(argc, argv, i, "--dtype", &value)) {
      if (int status = parseDType(value, dtype, kCompileUsage); status >= 0)
        return status;
    } else if (arg == "--timing") {
      timing = true;
    } else if (arg == "--no-fuse-attention") {
      prepare.fuseAttention = false;
    } else if (int status = takeModelArgument(arg, model, kCompileUsage); status >= 0) {
      return status;
    }
  }
  if (model.empty())
    return usageError("no model given", kCompileUsage);
  if (output.empty())
    return usageError("no plan directory given (-o PLAN_DIR)", kCompileUsage);
  while (output.size() > 1 && output.back() == '/')
    output.pop_back();
  if (!train && !training.firstFlag.empty())
    return usageError(training.firstFlag + " applies to --mode train", kCompileUsage);
  if (train)
    if (int status = checkTrainingFlags(training, kCompileUsage); status >= 0)
      return status;

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  ImportFailure failureKind = ImportFailure::BadInput;
  options.training = train;
  auto imported = importTorchScript(context, model, options, &failureKind);
  if (mlir::failed(imported))
    return static_cast<int>(failureKind);
  if (imported->meta) {
    llvm::errs() << "cleave: error: " << model
                 << ": the model was exported on the meta device and has no weight data; "
                    "compile needs real weights ('cleave import --summary' works on meta models)\n";
    return 1;
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = model;
  Snapshots snapshots;
  snapshots.add("imported", *imported->module);
  // The steps of cleave-single-device-plan, run apart for their snapshots.
  prepare.paramData = paramDataOf(*imported);
  prepare.dtype = dtype;
  prepare.training = train;
  prepare.seed = training.seed;
  mlir::PassManager pm(&context);
  mlir::cleave::addPreparePipeline(pm, prepare);
  if (mlir::failed(pm.run(*imported->module)))
    return 1;
  if (dtype != "f32")
    snapshots.add(dtype, *imported->module);
  if (train) {
    mlir::PassManager step(&context);
    mlir::cleave::addTrainingPipeline(step, training.options);
    if (mlir::failed(step.run(*imported->module)))
      return 1;
    snapshots.add("training-step", *imported->module);
    emitOptions.training = trainingEmitInfo(training.options, dtype, training.seed);
    emitOptions.training->stateDict = stateDictEntries(*imported);
  }
  mlir::PassManager memory(&context);
  memory.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createPlanMemory());
  if (mlir::failed(memory.run(*imported->module)))
    return 1;
  snapshots.add("memory-planned", *imported->module);
  emitOptions.irSnapshots = snapshots.list;
  if (mlir::failed(emitSingleDevicePlan(*imported->module, imported->params, output,
                                        emitOptions)))
    return 1;

  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  int64_t arena = func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes").getInt();
  int64_t peak = func->getAttrOfType<mlir::IntegerAttr>("cleave.peak_live_bytes").getInt();
  size_t weights = paramBytes(*imported->module);
  if (train) {
    auto state = func->getAttrOfType<mlir::IntegerAttr>("cleave.state_bytes");
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: 1 device, training step ({1}, loss {2}), arena {3:f2} MiB (peak "
        "live {4:f2} MiB), weights {5:f2} MiB, optimizer state {6:f2} MiB\n",
        output, training.options.optimizer, training.options.loss, arena / 1048576.0,
        peak / 1048576.0, weights / 1048576.0, (state ? state.getInt() : 0) / 1048576.0);
  } else {
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: 1 device, arena {1:f2} MiB (peak live {2:f2} MiB), "
        "parameters {3:f2} MiB\n",
        output, arena / 1048576.0, peak / 1048576.0, weights / 1048576.0);
  }
  if (timing)
    printTiming("compile",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

} // namespace cleave
