//===- CompileCommand.cpp - cleave compile --------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/PlannerFlags.h"
#include "cli/TrainingFlags.h"
#include "compiler/CompileDriver.h"
#include "cost/Format.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>

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
Without --mode, the planner plans a training schedule and the plan holds its
forward passes in the schedule's order (for 'cleave run' and inspection).
With --mode train, the plan holds a training step that every data-parallel
rank runs on its share of the batch, in the planned microbatches (gradients
accumulated), the gradients averaged in fused buckets, with ZeRO when chosen;
with pipeline stages, one step per stage that runs the schedule's forward and
backward slots (GPipe, 1F1B or interleaved), recomputation as planned; with
tensor splits, one step per stage and tp index, each rank's part
differentiated. A meta-device model
gives a plan without weights, for inspection.
Inputs keep the names of the model's forward arguments; outputs are output_0,
output_1, ... PLAN_DIR appears complete or not at all; an earlier plan there
is replaced.

planner options (with --cluster): --devices N, --global-batch B (required),
  --mode train|infer, --precision mixed|fp32 (must agree with --dtype: mixed
  with bf16, fp32 with f32; by default it follows --dtype), --mem-per-device SIZE,
  --objective latency|throughput, --tp N, --pp N, --dp N, --microbatch N,
  --schedule gpipe|1f1b|interleaved, --virtual-stages V,
  --zero none|optimizer|gradients|parameters, --recompute auto|none|full,
  --sequence-parallel auto|off, --batch-dim 0
  (see 'cleave plan --help')

training (docs/training.md):
  --mode train|infer               train: one training step (forward, loss,
                                   backward, optimizer) for `cleave train`;
                                   infer (default): the forward pass;
                                   with --cluster and no --mode: the
                                   forward passes of a planned training
                                   schedule, in its order
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
  --example-inputs IN.safetensors  the inputs' shapes and dtypes from a file of
                                   example inputs (by name; by position for a
                                   model traced through *args); --input-shape
                                   overrides it
  --dtype f32|bf16                 the float type programs compute in and weights are
                                   stored in (default f32). bf16: kernels accumulate in
                                   f32, round each result to bf16; float inputs and
                                   outputs stay f32 at the plan's boundary
  -o PLAN_DIR                      the plan directory to write (required)
  --no-fuse-attention              keep attention unfused (matmul, softmax,
                                   matmul) instead of forming cleave.attention,
                                   to compare memory and time
  --no-fold-batch-norm             keep inference batch norms as kernels of
                                   their own instead of folding them into the
                                   convolutions before them, to compare
  --no-fuse-conv-epilogue          keep each convolution's residual add and relu
                                   as kernels of their own instead of fusing
                                   them into it, to compare
  --timing                         print wall time and peak memory to stderr
  -h, --help                       show this help

exit status: 0 success, 1 bad arguments, unreadable model, a model without
weight data (single device) or a plan that fails verification, 2 the model
uses ops or control flow cleave cannot import, 3 no plan fits in the memory
budget.
)";

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

int runPartitionedCompile(int argc, char **argv) {
  PlanCliOptions o;
  std::string output, dtype = "f32";
  bool timing = false;
  TrainingFlags training;
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
    } else if (int taken = parseTrainingFlag(argc, argv, i, training, kCompileUsage);
               taken != kNotMine) {
      return taken;
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
  o.dtype = dtype;
  o.output = output;
  // Without --mode the plan holds the forward passes of a training
  // schedule (the planner's default mode); --mode train compiles the step.
  o.forwardOnly = o.isTraining() && !o.modeGiven;
  if (search.sharding == cost::ShardingLevel::Parameters && (!o.isTraining() || o.forwardOnly))
    return usageError("--zero parameters (ZeRO-3) is emitted for training steps (--mode "
                      "train): forward programs hold whole parameters per tp part",
                      kCompileUsage);
  if ((!o.isTraining() || o.forwardOnly) && !training.firstFlag.empty())
    return usageError(training.firstFlag + " applies to --mode train", kCompileUsage);
  if (o.isTraining() && !o.forwardOnly) {
    if (int status = checkTrainingFlags(training, kCompileUsage); status >= 0)
      return status;
    o.training = training.options;
    o.seed = training.seed;
  }

  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  cost::ClusterSpec spec;
  if (DriverStatus s = setUpCluster(context, o, spec); !s.ok())
    return s.exitCode();

  auto start = std::chrono::steady_clock::now();
  o.progress = [&](const char *phase) { progress(phase, start); };
  CompileResult result;
  if (DriverStatus s = compilePlan(context, o, &spec, result); !s.ok()) {
    if (s.showUsage())
      llvm::errs() << "\n" << kCompileUsage;
    if (s.error() == DriverError::NothingFits)
      return reportNothingFits(o, result.plan->planner);
    return s.exitCode();
  }
  if (o.isTraining() && !o.forwardOnly &&
      (result.plan->chosen->pp > 1 || result.plan->chosen->tp > 1)) {
    const planner::Candidate &chosen = *result.plan->chosen;
    std::string mesh;
    if (chosen.pp > 1)
      mesh = std::to_string(chosen.pp) + " pipeline stages (" +
             std::string(cost::scheduleName(chosen.schedule)) +
             (chosen.virtualStages > 1
                  ? ", " + std::to_string(chosen.virtualStages) + " chunks per stage"
                  : std::string()) +
             ") x ";
    if (chosen.tp > 1)
      mesh += std::to_string(chosen.tp) + " tensor-parallel ranks x ";
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: {1}{2} data-parallel rank(s){3}, "
        "training step ({4}, loss {5}) on {6} microbatch(es) of {7} samples per rank; largest "
        "stage: arena {8:f2} MiB, weights {9:f2} MiB, state {10:f2} MiB; verified: {11} "
        "transfers, {12} collectives\n",
        output, mesh, chosen.dp,
        chosen.dp > 1 && chosen.sharding != cost::ShardingLevel::None
            ? " with ZeRO (" + std::string(cost::shardingLevelName(chosen.sharding)) + ")"
            : std::string(),
        o.training.optimizer, o.training.loss, chosen.microbatches, chosen.microbatchSize,
        result.arenaBytes / 1048576.0, result.weightBytes / 1048576.0,
        result.stateBytes / 1048576.0, result.transfers, result.collectives);
    if (timing)
      printTiming("compile", secondsSince(start));
    return 0;
  }
  if (o.isTraining() && !o.forwardOnly) {
    const planner::Candidate &chosen = *result.plan->chosen;
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: {1} data-parallel rank(s){9}, training step ({2}, loss {3}) on {4} "
        "microbatch(es) of {5} samples per rank, arena {6:f2} MiB, weights {7:f2} MiB, state "
        "{8:f2} MiB per rank{10}\n",
        output, chosen.dp, o.training.optimizer, o.training.loss, chosen.microbatches,
        chosen.microbatchSize, result.arenaBytes / 1048576.0, result.weightBytes / 1048576.0,
        result.stateBytes / 1048576.0,
        chosen.dp > 1 && chosen.sharding != cost::ShardingLevel::None
            ? " with ZeRO (" + std::string(cost::shardingLevelName(chosen.sharding)) + ")"
            : std::string(),
        chosen.spilledLayers > 0
            ? llvm::formatv("; {0} layer(s) spilled to host memory (their parameters, gradient "
                            "copies and optimizer state; `cleave plan` says why)",
                            chosen.spilledLayers)
                  .str()
            : std::string());
    if (timing)
      printTiming("compile", secondsSince(start));
    return 0;
  }
  const PartitionInfo &info = result.partition;
  llvm::outs() << llvm::formatv(
      "cleave: wrote {0}: {1} ranks (pp {2} x tp {3} x dp {4}), {5} programs, {7} "
      "microbatches of {8} per data-parallel rank{9}; verified: {10} transfers, {11} "
      "collectives\n",
      output, info.pp * info.tp * info.dp, info.pp, info.tp, info.dp, info.pp * info.tp,
      info.dp, info.microbatches, info.microbatchSize,
      info.withWeights ? "" : "; no weights (meta model)", result.transfers,
      result.collectives);
  if (timing)
    printTiming("compile", secondsSince(start));
  return 0;
}

} // namespace

int runCompile(int argc, char **argv) {
  if (isJobCommand(argc, argv))
    return runJobCompile(argc, argv);
  for (int i = 0; i < argc; ++i)
    if (llvm::StringRef(argv[i]).starts_with("--cluster"))
      return runPartitionedCompile(argc, argv);
  std::string model, output, dtype = "f32";
  ImportOptions options;
  bool timing = false, train = false, fuseAttention = true, foldBatchNorm = true,
       fuseConvEpilogue = true;
  TrainingFlags training;
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
    } else if (optionValue(argc, argv, i, "--example-inputs", &value)) {
      if (int status = setExampleInputs(value, options.exampleInputs, kCompileUsage);
          status >= 0)
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
      fuseAttention = false;
    } else if (arg == "--no-fold-batch-norm") {
      foldBatchNorm = false;
    } else if (arg == "--no-fuse-conv-epilogue") {
      fuseConvEpilogue = false;
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

  CompileRequest request;
  request.model = model;
  request.import = options;
  request.dtype = dtype;
  request.fuseAttention = fuseAttention;
  request.foldBatchNorm = foldBatchNorm;
  request.fuseConvEpilogue = fuseConvEpilogue;
  request.mode = train ? CompileMode::Train : CompileMode::Infer;
  request.training = training.options;
  request.seed = training.seed;
  request.output = output;

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  CompileResult result;
  if (DriverStatus s = compilePlan(context, request, /*cluster=*/nullptr, result); !s.ok())
    return s.exitCode();
  if (train) {
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: 1 device, training step ({1}, loss {2}), arena {3:f2} MiB (peak "
        "live {4:f2} MiB), weights {5:f2} MiB, optimizer state {6:f2} MiB\n",
        output, training.options.optimizer, training.options.loss,
        result.arenaBytes / 1048576.0, result.peakLiveBytes / 1048576.0,
        result.weightBytes / 1048576.0, result.stateBytes / 1048576.0);
  } else {
    llvm::outs() << llvm::formatv(
        "cleave: wrote {0}: 1 device, arena {1:f2} MiB (peak live {2:f2} MiB), "
        "parameters {3:f2} MiB\n",
        output, result.arenaBytes / 1048576.0, result.peakLiveBytes / 1048576.0,
        result.weightBytes / 1048576.0);
  }
  if (timing)
    printTiming("compile", secondsSince(start));
  return 0;
}

} // namespace cleave
