//===- PlannerFlags.cpp - the planner's flags, shared by plan and compile -===//

#include "cli/PlannerFlags.h"
#include "cli/Commands.h"
#include "cost/Format.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>

namespace cleave {

using cost::humanBytes;

/// "80GiB", "40 GB", "512MiB", "1e9": bytes.
std::optional<double> parseBytes(llvm::StringRef text) {
  text = text.trim();
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.' ||
          text[digits] == 'e' || text[digits] == 'E' || text[digits] == '+'))
    ++digits;
  double value;
  if (digits == 0 || text.take_front(digits).getAsDouble(value) || !std::isfinite(value) ||
      value <= 0)
    return std::nullopt;
  llvm::StringRef unit = text.drop_front(digits).trim();
  static const std::map<std::string, double> units = {
      {"", 1},      {"B", 1},     {"KB", 1e3},          {"MB", 1e6},
      {"GB", 1e9},  {"TB", 1e12}, {"KiB", 1024.0},      {"MiB", 1048576.0},
      {"GiB", 1073741824.0},      {"TiB", 1099511627776.0}};
  auto it = units.find(unit.str());
  if (it == units.end())
    return std::nullopt;
  return value * it->second;
}

std::string memoryLine(const cost::MemoryBreakdown &m) {
  std::string prefetched =
      m.prefetched > 0 ? ", prefetched " + humanBytes(m.prefetched) : std::string();
  std::string host = m.host > 0 ? " (host: " + humanBytes(m.host) + ")" : std::string();
  return llvm::formatv("parameters {0}, gradients {1}, optimizer {2}, activations {3}, comm "
                       "buffers {4}{5} = {6}{7}",
                       humanBytes(m.parameters), humanBytes(m.gradients),
                       humanBytes(m.optimizerState), humanBytes(m.activations),
                       humanBytes(m.commBuffers), prefetched, humanBytes(m.total()), host)
      .str();
}

std::pair<std::string, double> dominant(const cost::MemoryBreakdown &m) {
  std::pair<std::string, double> best = {"parameters", m.parameters};
  for (auto [name, bytes] : {std::pair<const char *, double>{"gradients", m.gradients},
                             {"optimizer state", m.optimizerState},
                             {"activations", m.activations},
                             {"communication buffers", m.commBuffers},
                             {"workspace", m.workspace}})
    if (bytes > best.second)
      best = {name, bytes};
  return best;
}


int parsePlannerArguments(int argc, char **argv, PlanCliOptions &o, const char *usage,
                          const std::function<int(int &, const std::string &)> &extra) {
  auto &search = o.planner.search;
  bool haveBatch = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    auto count = [&](const char *name, auto &out, int64_t min, int64_t max) {
      if (!parseCount(value, out, min, max)) {
        usageError(std::string(name) + " needs a whole number from " + std::to_string(min) +
                       " to " + std::to_string(max),
                   usage);
        return false;
      }
      return true;
    };
    auto pin = [&](const char *name, std::optional<int> &out) {
      int v;
      if (!count(name, v, 1, 1 << 20))
        return false;
      out = v;
      return true;
    };
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << usage;
      return 0;
    } else if (optionValue(argc, argv, i, "--cluster", &value)) {
      if (!value || !*value)
        return usageError("--cluster needs a spec file", usage);
      o.cluster = value;
    } else if (optionValue(argc, argv, i, "--devices", &value)) {
      if (!count("--devices", o.devices, 1, 1 << 24))
        return 1;
    } else if (optionValue(argc, argv, i, "--global-batch", &value)) {
      if (!count("--global-batch", search.globalBatch, 1, int64_t(1) << 40))
        return 1;
      haveBatch = true;
    } else if (optionValue(argc, argv, i, "--mode", &value)) {
      std::string mode = value ? value : "";
      if (mode != "train" && mode != "infer")
        return usageError("--mode must be train or infer", usage);
      o.mode = mode == "train" ? CompileMode::Train : CompileMode::Infer;
      o.modeGiven = true;
    } else if (optionValue(argc, argv, i, "--precision", &value)) {
      std::string p = value ? value : "";
      if (p != "mixed" && p != "fp32")
        return usageError("--precision must be mixed or fp32", usage);
      o.mixed = p == "mixed";
    } else if (optionValue(argc, argv, i, "--mem-per-device", &value)) {
      o.memory = value ? parseBytes(value) : std::nullopt;
      if (!o.memory)
        return usageError("--mem-per-device needs a size such as 80GiB, 40GB or a byte count",
                          usage);
    } else if (optionValue(argc, argv, i, "--objective", &value)) {
      std::string obj = value ? value : "";
      if (obj != "latency" && obj != "throughput")
        return usageError("--objective must be latency or throughput", usage);
      search.objective = obj == "latency" ? planner::Objective::Latency
                                          : planner::Objective::Throughput;
    } else if (optionValue(argc, argv, i, "--tp", &value)) {
      if (!pin("--tp", search.tp))
        return 1;
    } else if (optionValue(argc, argv, i, "--pp", &value)) {
      if (!pin("--pp", search.pp))
        return 1;
    } else if (optionValue(argc, argv, i, "--dp", &value)) {
      if (!pin("--dp", search.dp))
        return 1;
    } else if (optionValue(argc, argv, i, "--virtual-stages", &value)) {
      if (!pin("--virtual-stages", search.virtualStages))
        return 1;
    } else if (optionValue(argc, argv, i, "--microbatch", &value)) {
      int64_t mb;
      if (!count("--microbatch", mb, 1, int64_t(1) << 40))
        return 1;
      search.microbatchSize = mb;
    } else if (optionValue(argc, argv, i, "--schedule", &value)) {
      search.schedule = cost::parseSchedule(value ? value : "");
      if (!search.schedule)
        return usageError("--schedule must be gpipe, 1f1b or interleaved", usage);
    } else if (optionValue(argc, argv, i, "--zero", &value)) {
      search.sharding = cost::parseShardingLevel(value ? value : "");
      if (!search.sharding)
        return usageError("--zero must be none, optimizer, gradients or parameters", usage);
    } else if (optionValue(argc, argv, i, "--recompute", &value)) {
      std::string r = value ? value : "";
      if (r == "auto")
        search.recompute = planner::RecomputeMode::Auto;
      else if (r == "none")
        search.recompute = planner::RecomputeMode::None;
      else if (r == "full")
        search.recompute = planner::RecomputeMode::Full;
      else
        return usageError("--recompute must be auto, none or full", usage);
    } else if (optionValue(argc, argv, i, "--spill", &value)) {
      std::string r = value ? value : "";
      if (r == "auto")
        search.spill = planner::SpillMode::Auto;
      else if (r == "none")
        search.spill = planner::SpillMode::None;
      else if (r == "all")
        search.spill = planner::SpillMode::All;
      else
        return usageError("--spill must be auto, none or all", usage);
    } else if (optionValue(argc, argv, i, "--sequence-parallel", &value)) {
      std::string mode = value ? value : "";
      if (mode != "auto" && mode != "off")
        return usageError("--sequence-parallel must be auto or off", usage);
      o.planner.sequenceParallel = mode == "auto";
    } else if (optionValue(argc, argv, i, "--batch-dim", &value)) {
      if (!count("--batch-dim", o.planner.batchDim, 0, 64))
        return 1;
    } else if (optionValue(argc, argv, i, "--input-shape", &value)) {
      if (int status = addInputShape(value, o.import.inputShapes, usage); status >= 0)
        return status;
    } else if (optionValue(argc, argv, i, "--example-inputs", &value)) {
      if (int status = setExampleInputs(value, o.import.exampleInputs, usage); status >= 0)
        return status;
    } else if (arg == "--no-fuse-attention") {
      o.fuseAttention = false;
    } else if (arg == "--no-fold-batch-norm") {
      o.foldBatchNorm = false;
    } else if (arg == "--no-fuse-conv-epilogue") {
      o.fuseConvEpilogue = false;
    } else if (int status = extra(i, arg); status != kNotMine) {
      if (status >= 0)
        return status;
    } else if (int status = takeModelArgument(arg, o.model, usage); status >= 0) {
      return status;
    }
  }
  if (o.model.empty())
    return usageError("no model given", usage);
  if (o.cluster.empty())
    return usageError("no cluster spec given (--cluster SPEC.json)", usage);
  if (!haveBatch)
    return usageError("no global batch given (--global-batch B)", usage);
  if (o.isTraining() && search.objective != planner::Objective::StepTime)
    return usageError("--objective applies to --mode infer; training minimizes step time",
                      usage);
  if (!o.isTraining() && search.sharding)
    return usageError("--zero applies to --mode train: inference keeps no gradients or "
                      "optimizer state",
                      usage);
  if (!o.isTraining() && (search.schedule || search.virtualStages))
    return usageError("--schedule and --virtual-stages apply to --mode train: inference "
                      "pipelines forward passes only",
                      usage);
  if (search.virtualStages && *search.virtualStages > 1 && search.schedule &&
      *search.schedule != cost::Schedule::Interleaved)
    return usageError("--virtual-stages above 1 needs --schedule interleaved", usage);
  if (!o.isTraining() && search.spill == planner::SpillMode::All)
    return usageError("--spill all applies to --mode train: spilling keeps training state "
                      "(parameters, gradients, optimizer state) in host memory",
                      usage);
  if (!o.isTraining() && search.objective == planner::Objective::StepTime)
    search.objective = planner::Objective::Latency;
  return -1;
}


int reportNothingFits(const CompileRequest &options, const mlir::cleave::PlannerResult &plan) {
  const auto &search = options.planner.search;
  llvm::errs() << llvm::formatv("cleave: error: no plan for {0} fits in {1} per device\n",
                                options.model, humanBytes(search.memoryBudget));
  if (const auto &least = plan.search.leastMemory) {
    auto [category, bytes] = dominant(least->memory);
    llvm::errs() << llvm::formatv(
        "cleave: note: the least memory any candidate needs is {0} ({1}, stage {2}), {3} "
        "over the budget; the largest part is {4}: {5}\n",
        humanBytes(least->memory.total()), least->label(), least->worstStage,
        humanBytes(least->memory.total() - search.memoryBudget), category, humanBytes(bytes));
    llvm::errs() << "cleave: note: " << memoryLine(least->memory) << "\n";
  }
  llvm::errs() << "cleave: note: more devices, a larger --mem-per-device, or fewer pins "
                  "(--recompute, --zero, --tp, --pp, --spill) may make a plan fit\n";
  return 3;
}

} // namespace cleave
