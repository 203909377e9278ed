//===- PlanCommand.cpp - cleave plan --------------------------------------===//
//
// Chooses how to parallelize a model on a cluster (passes/Planner.h) and
// prints the plan: mesh, stages, schedule, ZeRO level, recomputation, how
// each layer kind splits across its tp group, and the predicted step time
// and memory; optionally the runners-up and why they lost.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/PlannerFlags.h"
#include "compiler/CompileDriver.h"
#include "cost/ClusterSpec.h"
#include "cost/Format.h"
#include "dialects/cleave/Locations.h"
#include "passes/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

namespace cleave {
namespace {

using cost::humanBytes;
using cost::humanSeconds;
using planner::Candidate;

constexpr const char *kPlanUsage = R"(usage: cleave plan MODEL --cluster SPEC.json --global-batch B [options]

Chooses tensor-parallel splits, pipeline stages, data parallelism with ZeRO
sharding, recomputation, microbatches and the pipeline schedule for MODEL on
the devices of a cluster spec, minimizing predicted step time under a memory
budget per device, and prints the plan. MODEL is a TorchScript file (.pt, with
weights or exported on the meta device) or cleave IR (.mlir).

options:
  --cluster SPEC.json       the cluster spec (examples/clusters/) (required)
  --devices N               devices to use (default: the spec's); the node
                            count follows from the spec's devices per node
  --global-batch B          samples per training step or inference batch (required)
  --mode train|infer        training (AdamW) or inference (default train)
  --precision mixed|fp32    mixed: bf16 compute, fp32 master weights and moments
                            (default for train); fp32: everything in f32
  --mem-per-device SIZE     memory budget per device, e.g. 80GiB, 40GB or bytes
                            (default: the spec's memory minus its reserve)
  --objective latency|throughput
                            inference only: time of one batch (default), or
                            batches per second in steady state
  --tp N, --pp N, --dp N    pin the tensor-, pipeline- or data-parallel degree
  --microbatch N            pin the microbatch size
  --schedule gpipe|1f1b|interleaved
  --virtual-stages V        pin the model chunks per device (interleaved)
  --zero none|optimizer|gradients|parameters
                            pin what data parallelism shards (ZeRO 0-3)
  --recompute auto|none|full
                            which layers recompute activations (default auto:
                            as few as the budget needs)
  --spill auto|none|all     train layers whose parameters, gradients and
                            optimizer state live in host memory, copied in a
                            layer ahead of use (default auto: only where a
                            candidate does not fit otherwise; needs the spec's
                            host_link)
  --sequence-parallel auto|off
                            auto (default): a tp split may reduce-scatter a
                            partial sum and run what follows on a part of it
                            (Megatron-LM's sequence parallelism) when predicted
                            faster; off: partial sums are all-reduced
  --batch-dim D             the inputs' batch dim (default 0)
  --input-shape NAME=DIMS[:DTYPE]
                            shape of forward input NAME (repeatable)
  --example-inputs IN.safetensors
                            the inputs' shapes from a file of example inputs
  --no-fuse-attention       keep attention unfused (matmul, softmax, matmul),
                            to compare with the fused cleave.attention
  --no-fold-batch-norm      keep inference batch norms apart from the
                            convolutions before them, to compare
  --no-fuse-conv-epilogue   keep convolutions' residual adds and relus apart
                            from them, to compare
  --top K                   list the K fastest plans within budget
  --explain                 say why the runners-up lost
  --splits                  print every op of each layer kind with its split
  --json                    print the strategy JSON instead of text
  --strategy FILE.json      also write the strategy JSON to FILE
  --emit-ir FILE.mlir       write the IR annotated with the strategy
  -h, --help                show this help

exit status: 0 a plan was found; 1 bad arguments, spec or model; 2 the model
uses ops cleave cannot import; 3 no plan fits in the memory budget.
)";

int layerCount(const std::vector<std::pair<int, int>> &chunks) {
  int n = 0;
  for (auto [begin, end] : chunks)
    n += end - begin;
  return n;
}

std::string layerRange(const mlir::cleave::PlannerResult &plan,
                       const std::vector<std::pair<int, int>> &chunks) {
  std::string out;
  for (auto [begin, end] : chunks) {
    if (!out.empty())
      out += ", ";
    out += plan.layers[begin].name;
    if (end - begin > 1)
      out += " .. " + plan.layers[end - 1].name;
    out += " (" + std::to_string(end - begin) + ")";
  }
  return out;
}

void printPlan(const PlanCliOptions &options, const cost::ClusterSpec &spec,
               const mlir::cleave::PlannerResult &plan, const Candidate &c) {
  auto &os = llvm::outs();
  const auto &search = options.planner.search;
  std::set<unsigned> kinds;
  for (const auto &layer : plan.layers)
    kinds.insert(layer.kind);
  os << llvm::formatv("model {0}: {1} layers of {2} kinds, traced batch {3} (dim {4} of the "
                      "inputs)\n",
                      options.model, plan.layers.size(), kinds.size(), plan.profile.tracedBatch,
                      options.planner.batchDim);
  os << llvm::formatv("cluster {0}: {1} devices ({2} per node) of {3}, budget {4} per device\n",
                      spec.name, search.devices, spec.devicesPerNode, spec.device.name,
                      humanBytes(search.memoryBudget));
  os << llvm::formatv("{0}, global batch {1}, {2}\n\n",
                      search.training ? "training (AdamW)" : "inference", search.globalBatch,
                      search.paramDType == runtime::DType::BF16 ? "mixed precision (bf16 compute)"
                                                                 : "fp32");

  os << "plan: " << c.label() << "\n";
  os << llvm::formatv("  predicted {0} {1}: pipeline {2} (bubble {3:f1}%), tp comm {4}, dp comm "
                      "{5}, optimizer {6}\n",
                      search.training ? "step" : "batch", humanSeconds(c.stepSeconds),
                      humanSeconds(c.pipelineSeconds), 100 * c.bubbleFraction,
                      humanSeconds(c.tpCommSeconds), humanSeconds(c.dpCommSeconds),
                      humanSeconds(c.optimizerSeconds));
  os << llvm::formatv("  memory of stage {0}, the fullest: {1}\n\n", c.worstStage,
                      memoryLine(c.memory));

  os << llvm::formatv("{0,-6} {1,-40} {2,10} {3,10} {4,10} {5,10} {6,10} {7,10}\n", "stage",
                      "layers", "recompute", "fwd/mb", "bwd/mb", "tp comm", "p2p", "memory");
  for (auto [s, stage] : llvm::enumerate(c.stages))
    os << llvm::formatv("{0,-6} {1,-40} {2,10} {3,10} {4,10} {5,10} {6,10} {7,10}\n", s,
                        layerRange(plan, stage.chunks), stage.recomputed.size(),
                        humanSeconds(stage.forwardSeconds), humanSeconds(stage.backwardSeconds),
                        humanSeconds(stage.tpCommSeconds), humanSeconds(stage.p2pSeconds),
                        humanBytes(stage.memory.total()));
  for (auto [s, stage] : llvm::enumerate(c.stages)) {
    if (stage.spilled.empty() && stage.activationsSpilled.empty())
      continue;
    std::string names, activations;
    for (int l : stage.spilled)
      names += (names.empty() ? "" : ", ") + plan.layers[l].name;
    for (int l : stage.activationsSpilled)
      activations += (activations.empty() ? "" : ", ") + plan.layers[l].name;
    // What the stage would hold with everything on the device: the host's
    // share back, the prefetch buffers gone.
    double resident = stage.memory.total() - stage.memory.prefetched + stage.memory.host;
    os << llvm::formatv(
        "\nspilled to host memory on stage {0}: the parameters of {1} of {2} layers ({3}){10}\n"
        "  why: with everything on the device the stage needs {4}, {5} over the budget; "
        "spilled, the host holds {6} (parameters, gradient copies, optimizer state, activations) "
        "and the device {7} of copies: the layer computing, the one prefetched, a gradient or "
        "activation on its way out\n"
        "  cost: copies not hidden behind compute {8} per microbatch; the spilled layers' "
        "optimizer on the host {9} per step\n",
        s, stage.spilled.size(), layerCount(stage.chunks), names, humanBytes(resident),
        humanBytes(std::max(0.0, resident - search.memoryBudget)), humanBytes(stage.memory.host),
        humanBytes(stage.memory.prefetched), humanSeconds(stage.spillSeconds),
        humanSeconds(stage.hostOptimizerSeconds),
        activations.empty() ? std::string()
                            : "; the saved activations of " +
                                  std::to_string(stage.activationsSpilled.size()) + " (" +
                                  activations + ")");
  }

  if (c.tp > 1) {
    os << llvm::formatv("\ntensor parallel, tp={0}:\n", c.tp);
    for (const auto &[kind, split] : plan.splits.at(c.tp)) {
      int count = 0;
      for (const auto &layer : plan.layers)
        count += layer.kind == kind;
      std::map<std::string, int> forward, backward;
      for (const auto &coll : split.collectives)
        ++(coll.backward ? backward : forward)[std::string(
            cost::collectiveName(coll.collective))];
      auto list = [](const std::map<std::string, int> &m) {
        std::string out;
        for (const auto &[name, n] : m)
          out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + name;
        return out.empty() ? std::string("none") : out;
      };
      os << llvm::formatv("  {0} (x{1}): {2} of {3} kernel ops split; forward {4}; backward {5}\n",
                          plan.layers[kind].name, count, split.cost.splitOps,
                          split.cost.kernelOps, list(forward),
                          search.training ? list(backward) : "-");
      if (!options.splits)
        continue;
      for (mlir::Operation *op : plan.layers[kind].ops) {
        std::string results;
        for (mlir::Value r : op->getResults()) {
          auto it = split.layout.find(r);
          results += it == split.layout.end() ? "replicated" : it->second.str();
        }
        std::string weights;
        for (mlir::Value operand : op->getOperands())
          if (auto param = operand.getDefiningOp<mlir::cleave::ParamOp>()) {
            auto it = split.layout.find(operand);
            weights += " " + param.getName().str() + ":" +
                       (it == split.layout.end() ? "replicated" : it->second.str());
          }
        std::string scope = mlir::cleave::moduleScope(op->getLoc());
        os << llvm::formatv("    {0,-20} {1,-24} -> {2}{3}\n", op->getName().getStringRef(),
                            scope.empty() ? "(root)" : scope, results, weights);
      }
    }
  }
}

void printTop(const mlir::cleave::PlannerResult &plan, bool explain,
              const cost::PredictionError &expected) {
  auto &os = llvm::outs();
  const auto &best = plan.search.best;
  os << llvm::formatv("\n{0,-4} {1,-58} {2,10} {3,8} {4,10} {5,10} {6,10}\n", "rank", "plan",
                      "time", "bubble", "tp comm", "dp comm", "memory");
  for (auto [i, c] : llvm::enumerate(best))
    os << llvm::formatv("{0,-4} {1,-58} {2,10} {3,7:f1}% {4,10} {5,10} {6,10}\n", i + 1,
                        c.label(), humanSeconds(c.objective), 100 * c.bubbleFraction,
                        humanSeconds(c.tpCommSeconds), humanSeconds(c.dpCommSeconds),
                        humanBytes(c.memory.total()));
  if (!explain || best.empty())
    return;
  const Candidate &first = best.front();
  // Plans closer than the validated error cannot be told apart: the model's
  // error on plans like them is as large as the difference.
  if (expected.known())
    os << llvm::formatv("\nexpected error of each prediction: +/-{0:f1}% (mean |error| over {1} "
                        "validated runs; mean signed {2}{3:f1}%, {4}; {5})\n",
                        100 * expected.meanAbs, expected.runs, expected.meanSigned < 0 ? "" : "+",
                        100 * expected.meanSigned,
                        expected.meanSigned < 0 ? "predictions short" : "predictions long",
                        expected.source);
  else
    os << "\nexpected error of each prediction: not validated for this cluster spec (no "
          "prediction_error): differences below the measured errors in docs/cost-model.md "
          "may not be real\n";
  os << "\nwhy the others lost:\n";
  for (size_t i = 1; i < best.size(); ++i) {
    const Candidate &c = best[i];
    std::string reasons;
    auto add = [&](const std::string &r) { reasons += (reasons.empty() ? "" : "; ") + r; };
    double slower = c.objective / first.objective - 1;
    if (c.bubbleFraction > first.bubbleFraction + 0.005)
      add(llvm::formatv("bubble {0:f1}% vs {1:f1}%", 100 * c.bubbleFraction,
                        100 * first.bubbleFraction));
    if (c.tpCommSeconds > first.tpCommSeconds * 1.01 + 1e-6)
      add("tp comm " + humanSeconds(c.tpCommSeconds) + " vs " + humanSeconds(first.tpCommSeconds));
    if (c.dpCommSeconds > first.dpCommSeconds * 1.01 + 1e-6)
      add("dp comm " + humanSeconds(c.dpCommSeconds) + " vs " + humanSeconds(first.dpCommSeconds));
    if (c.optimizerSeconds > first.optimizerSeconds * 1.01 + 1e-6)
      add("optimizer step " + humanSeconds(c.optimizerSeconds) + " vs " +
          humanSeconds(first.optimizerSeconds));
    double recompute = 0, firstRecompute = 0;
    for (const auto &s : c.stages)
      recompute = std::max(recompute, s.recomputeSeconds * c.microbatches);
    for (const auto &s : first.stages)
      firstRecompute = std::max(firstRecompute, s.recomputeSeconds * first.microbatches);
    if (recompute > firstRecompute * 1.01 + 1e-6)
      add("recomputation " + humanSeconds(recompute) + " vs " + humanSeconds(firstRecompute));
    if (c.spillSeconds > first.spillSeconds * 1.01 + 1e-6)
      add("spilling's exposed copies " + humanSeconds(c.spillSeconds) + " vs " +
          humanSeconds(first.spillSeconds));
    if (reasons.empty() && c.microbatchSize != first.microbatchSize)
      add(llvm::formatv("microbatch {0} vs {1}: kernel launches and collective latency are "
                        "paid per microbatch",
                        c.microbatchSize, first.microbatchSize));
    if (reasons.empty())
      add(c.objective == first.objective ? "as fast, but needs more memory"
                                         : "slower compute per microbatch");
    if (expected.known() && slower <= expected.meanAbs)
      reasons = llvm::formatv("indistinguishable from the best within the expected error "
                              "(+/-{0:f1}%); ",
                              100 * expected.meanAbs)
                    .str() +
                reasons;
    os << llvm::formatv("  {0}: {1:f1}% slower: {2}\n", c.label(), 100 * slower, reasons);
  }
  for (const Candidate &c : plan.search.bestPerMesh) {
    if (c.tp == first.tp && c.pp == first.pp)
      continue;
    std::string reasons;
    auto add = [&](const std::string &r) { reasons += (reasons.empty() ? "" : "; ") + r; };
    add(llvm::formatv("bubble {0:f1}%", 100 * c.bubbleFraction));
    add("tp comm " + humanSeconds(c.tpCommSeconds));
    add("dp comm " + humanSeconds(c.dpCommSeconds));
    double slower = c.objective / first.objective - 1;
    if (expected.known() && slower <= expected.meanAbs)
      add(llvm::formatv("indistinguishable from the best within the expected error (+/-{0:f1}%)",
                        100 * expected.meanAbs));
    os << llvm::formatv("  best with tp={0} pp={1}: {2}, {3:f1}% slower: {4}\n", c.tp, c.pp,
                        c.label(), 100 * slower, reasons);
  }
  for (const auto &[mesh, bound] : plan.search.prunedMeshBound)
    os << llvm::formatv("  tp={0} pp={1}: at least {2} even perfectly balanced, not evaluated\n",
                        mesh.first, mesh.second, humanSeconds(bound));
  for (const Candidate &c : plan.search.overBudget) {
    auto [category, bytes] = dominant(c.memory);
    os << llvm::formatv("  {0}: over budget, needs at least {1} on stage {2} ({3} {4})\n",
                        c.label(), humanBytes(c.memory.total()), c.worstStage, category,
                        humanBytes(bytes));
  }
  if (plan.search.candidatesEvaluated < plan.search.candidatesConsidered)
    os << llvm::formatv("  {0} more candidates were not evaluated: even perfectly balanced and "
                        "without recomputation they are slower than the plans above\n",
                        plan.search.candidatesConsidered - plan.search.candidatesEvaluated);
}

/// `cleave plan`'s own flags; the planner's are parsed by PlannerFlags.
int parseArguments(int argc, char **argv, PlanCliOptions &o) {
  bool haveTop = false;
  int status = parsePlannerArguments(argc, argv, o, kPlanUsage,
                                     [&](int &i, const std::string &arg) -> int {
    const char *value = nullptr;
    if (optionValue(argc, argv, i, "--top", &value)) {
      if (!parseCount(value, o.planner.search.top, 1, 1000))
        return usageError("--top needs a whole number from 1 to 1000", kPlanUsage);
      haveTop = true;
    } else if (optionValue(argc, argv, i, "--strategy", &value)) {
      if (!value || !*value)
        return usageError("--strategy needs a file", kPlanUsage);
      o.strategyPath = value;
    } else if (optionValue(argc, argv, i, "--emit-ir", &value)) {
      if (!value || !*value)
        return usageError("--emit-ir needs a file", kPlanUsage);
      o.irPath = value;
    } else if (arg == "--explain") {
      o.explain = true;
    } else if (arg == "--splits") {
      o.splits = true;
    } else if (arg == "--json") {
      o.json = true;
    } else {
      return kNotMine;
    }
    return -1;
  });
  if (status >= 0)
    return status;
  if (o.explain && !haveTop)
    o.planner.search.top = 5; // runners-up to explain
  return -1;
}

} // namespace

int runPlan(int argc, char **argv) {
  if (isJobCommand(argc, argv))
    return runJobPlan(argc, argv);
  PlanCliOptions options;
  if (int status = parseArguments(argc, argv, options); status >= 0)
    return status;
  auto &search = options.planner.search;

  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  cost::ClusterSpec spec;
  if (DriverStatus s = setUpCluster(context, options, spec); !s.ok())
    return s.exitCode();
  LoadedModel model;
  if (DriverStatus s = loadModel(context, options, model); !s.ok())
    return s.exitCode();
  PlanResult result;
  if (DriverStatus s = planModel(model, options, spec, result); !s.ok())
    return s.error() == DriverError::NothingFits ? reportNothingFits(options, result.planner)
                                                 : s.exitCode();
  const mlir::cleave::PlannerResult &plan = result.planner;
  const Candidate &chosen = *result.chosen;
  const std::string &json = result.strategyJson;
  if (!options.strategyPath.empty() &&
      !writeAtomically(options.strategyPath, [&](llvm::raw_ostream &os) { os << json; }))
    return 1;
  if (!options.irPath.empty()) {
    annotateModel(model, result);
    // With locations: module scopes are how layers are found again when the
    // annotated IR is planned or lowered.
    mlir::OpPrintingFlags flags;
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    if (!writeAtomically(options.irPath,
                         [&](llvm::raw_ostream &os) { model.module->print(os, flags); }))
      return 1;
  }
  if (options.json) {
    llvm::outs() << json;
    return 0;
  }
  printPlan(options, spec, plan, chosen);
  if (search.top > 1 || options.explain)
    printTop(plan, options.explain, spec.predictionError);
  llvm::outs() << llvm::formatv("\nsearched {0} candidates, evaluated {1}, in {2} (layer splits "
                                "{3})\n",
                                plan.search.candidatesConsidered,
                                plan.search.candidatesEvaluated,
                                humanSeconds(plan.search.searchSeconds),
                                humanSeconds(plan.splitSeconds));
  return 0;
}

} // namespace cleave
