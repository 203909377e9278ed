//===- CompileCommand.cpp - cleave compile --------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/LoadModel.h"
#include "cli/PlannerFlags.h"
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
  --mode train|infer, --precision mixed|fp32, --mem-per-device SIZE,
  --objective latency|throughput, --tp N, --pp N, --dp N, --microbatch N,
  --schedule gpipe|1f1b|interleaved, --virtual-stages V,
  --zero none|optimizer|gradients, --recompute auto|none|full, --batch-dim 0
  (see 'cleave plan --help')

options:
  --input-shape NAME=DIMS[:DTYPE]  shape of forward input NAME, e.g. idx=2x64:i64
                                   (repeat per input; overrides the export's shapes)
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

/// Imports and prepares the model, at `batch` samples when set.
mlir::FailureOr<ImportedModel> importForPlan(mlir::MLIRContext &context, const std::string &model,
                                             ImportOptions options, std::optional<int64_t> batch,
                                             bool fuseAttention, int &exitCode) {
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
  return imported;
}

int runPartitionedCompile(int argc, char **argv) {
  PlanCliOptions o;
  std::string output;
  bool timing = false;
  int status = parsePlannerArguments(argc, argv, o, kCompileUsage,
                                     [&](int &i, const std::string &arg) -> int {
    const char *value = nullptr;
    if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kCompileUsage);
      output = value;
    } else if (arg == "--timing") {
      timing = true;
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
  auto imported =
      importForPlan(context, o.model, o.import, std::nullopt, o.fuseAttention, exitCode);
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
    imported =
        importForPlan(context, o.model, o.import, chosen.microbatchSize, o.fuseAttention, exitCode);
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
  emitOptions.irSnapshots.push_back({"0-imported", printIR(*imported->module)});

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
    desc.dtype = *runtime::parseDType(imported->params.lookup(param.getName().str()).dtype);
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
  emitOptions.irSnapshots.push_back({"1-planned", printIR(*imported->module)});
  struct Step {
    const char *name;
    std::function<void(mlir::PassManager &)> add;
  };
  std::vector<Step> steps = {
      {"2-collectives",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createInsertCollectives());
       }},
      {"3-stages", [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createOutlineStages()); }},
      {"4-local-shapes",
       [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createLocalShapes()); }},
      {"5-ranks", [](mlir::PassManager &pm) { pm.addPass(mlir::cleave::createSpecializeRanks()); }},
      {"6-recompute",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createMarkRecompute());
       }},
      {"7-memory-planned",
       [](mlir::PassManager &pm) {
         pm.addNestedPass<mlir::func::FuncOp>(mlir::cleave::createPlanMemory());
       }},
  };
  for (const Step &step : steps) {
    mlir::PassManager pm(&context);
    step.add(pm);
    if (mlir::failed(pm.run(*imported->module))) {
      llvm::errs() << "cleave: error: lowering failed at step " << step.name
                   << "; the IR before it is what " << output << "/ir/ would hold\n";
      return 1;
    }
    emitOptions.irSnapshots.push_back({step.name, printIR(*imported->module)});
  }
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
  std::string model, output;
  ImportOptions options;
  bool timing = false;
  mlir::cleave::PrepareOptions prepare;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kCompileUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--input-shape", &value)) {
      if (int status = addInputShape(value, options.inputShapes, kCompileUsage); status >= 0)
        return status;
    } else if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kCompileUsage);
      output = value;
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

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  ImportFailure failureKind = ImportFailure::BadInput;
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
  emitOptions.irSnapshots.push_back({"0-imported", printIR(*imported->module)});
  prepare.paramData = paramDataOf(*imported);
  mlir::PassManager pm(&context);
  mlir::cleave::addSingleDevicePlanPipeline(pm, prepare);
  if (mlir::failed(pm.run(*imported->module)))
    return 1;
  emitOptions.irSnapshots.push_back({"1-memory-planned", printIR(*imported->module)});
  if (mlir::failed(emitSingleDevicePlan(*imported->module, imported->params, output,
                                        emitOptions)))
    return 1;

  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  int64_t arena = func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes").getInt();
  int64_t peak = func->getAttrOfType<mlir::IntegerAttr>("cleave.peak_live_bytes").getInt();
  size_t weights = 0;
  for (auto &entry : imported->params)
    weights += entry.second.bytes;
  llvm::outs() << llvm::formatv(
      "cleave: wrote {0}: 1 device, arena {1:f2} MiB (peak live {2:f2} MiB), "
      "parameters {3:f2} MiB\n",
      output, arena / 1048576.0, peak / 1048576.0, weights / 1048576.0);
  if (timing)
    printTiming("compile",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

} // namespace cleave
