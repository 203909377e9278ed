//===- InspectCommand.cpp - cleave inspect --------------------------------===//
//
// What a plan is, for people: mesh and schedule, each stage's layers and
// programs, memory per rank against the budget, the predicted step time; as
// text, JSON, a Graphviz graph of the stages and the tensors crossing them, a
// Chrome trace of the predicted timeline, or the differences from another
// plan. Reads the manifest (runtime loadPlan) and, when present, the
// planner's strategy.json; single-device plans have no strategy and inspect
// from the manifest alone. A spilled plan adds what each program keeps in
// host memory and copies; a job plan directory (job.json) is described as
// its predicted joint schedule. Both come from runtime/Inspect.h.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "runtime/Inspect.h"
#include "runtime/Plan.h"
#include "runtime/JsonFile.h"

#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace cleave {
namespace {

namespace rt = cleave::runtime;
using Json = nlohmann::json;

constexpr const char *kInspectUsage = R"(usage: cleave inspect PLAN_DIR [options]
       cleave inspect JOBDIR [--json] [--trace FILE]

Describes a plan: mesh and schedule; each stage's layers and programs; memory
per program (its dp ranks share it) by the planner's categories and as the plan
allocates it (arena and weights), against the memory budget; the predicted step
time split into compute, communication and bubble. Reads PLAN_DIR/manifest.json
and, when present, PLAN_DIR/strategy.json (the planner's output); single-device
plans have no strategy and are described from the manifest alone. A spilled
training plan also shows, per program, the device regions against the budget,
the host pool, the spilled parameters by layer and each phase's prefetches and
spills.

A job plan directory (JOBDIR/job.json, from cleave compile --job) is described
as its predicted joint schedule: each model's steps, step time, devices and
memory (resident or spilled), each round's slices and length, each device's
models and busy time, the predicted makespan; --trace writes that schedule.

options:
  --json            print the same facts as one JSON object
  --dot FILE        write a Graphviz graph: a cluster per stage listing its layers,
                    an edge per tensor sent between chunks (tag, shape, scope)
  --trace FILE      write the predicted timeline as Chrome trace events (one
                    process per rank; needs strategy.json's per-stage times);
                    for a job, one process per device, an event per slice
  --diff OTHER_DIR  print what differs from plan OTHER_DIR (mesh, schedule,
                    stages, memory, predicted times) and the predicted effect
  -h, --help        show this help

exit status: 0 success, 1 bad arguments or a plan, strategy or job.json that
cannot be read.
)";

/// Memory categories of the planner's stage memory (docs/planner.md).
constexpr const char *kCategories[] = {"parameters",  "gradients",    "optimizer_state",
                                       "activations", "comm_buffers", "workspace"};

struct StageFacts {
  int64_t stage = 0;
  std::vector<std::string> layers;
  /// Per chunk of the stage (global chunk number -> its layers).
  std::map<int64_t, std::vector<std::string>> chunkLayers;
  std::vector<std::string> programs;
  std::vector<int64_t> ranks;
  /// The planner's memory by category and its time per microbatch, when
  /// strategy.json exists.
  std::map<std::string, int64_t> plannedMemory; // bytes
  std::map<std::string, double> seconds;        // forward, backward, recompute, tp_comm, p2p
};

struct ProgramFacts {
  std::string name;
  int64_t stage = 0, tp = 0;
  std::vector<int64_t> ranks;
  int64_t arenaBytes = 0, weightBytes = 0, stateBytes = 0;
  int64_t total() const { return arenaBytes + weightBytes + stateBytes; }
};

/// A tensor one chunk sends another.
struct Transfer {
  int64_t tag = 0, fromStage = 0, fromChunk = 0, toStage = 0, toChunk = 0;
  rt::TensorDesc desc;
  std::string scope;
};

struct Predicted {
  double step = 0, compute = 0, communication = 0, bubble = 0;
  std::string source; // "manifest" or "strategy"
};

/// Everything inspect says about one plan.
struct Facts {
  std::string dir;
  rt::Plan plan;
  bool hasStrategy = false;
  std::vector<StageFacts> stages;
  std::vector<ProgramFacts> programs;
  std::optional<int64_t> budget; // bytes per device
  std::optional<Predicted> predicted;
  /// A training step's optimizer update and data-parallel gradient
  /// reduction, per step (strategy.json predicted; 0 when absent).
  double optimizerSeconds = 0, dpCommSeconds = 0;
  std::vector<Transfer> transfers;
  /// What each program (facts.programs' order) keeps in host memory and
  /// copies, when some program spills (runtime/Inspect.h); the manifest's
  /// predicted host pool by category.
  std::vector<rt::ProgramSpill> spills;
  std::vector<std::pair<std::string, int64_t>> hostByCategory;
  bool spilled() const { return !spills.empty(); }

  int64_t largestProgramBytes() const {
    int64_t most = 0;
    for (const ProgramFacts &p : programs)
      most = std::max(most, p.total());
    return most;
  }
};

int fail(const std::string &message) {
  llvm::errs() << "cleave: error: " << message << "\n";
  return 1;
}

//===--------------------------------------------------------------------===//
// Formatting.
//===--------------------------------------------------------------------===//

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double sign = bytes < 0 ? -1 : 1;
  bytes = std::fabs(bytes);
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? llvm::formatv("{0} B", static_cast<int64_t>(sign * bytes)).str()
                : llvm::formatv("{0:f1} {1}", sign * bytes, units[u]).str();
}

std::string formatSeconds(double seconds) {
  double a = std::fabs(seconds);
  if (a >= 1)
    return llvm::formatv("{0:f3} s", seconds).str();
  if (a >= 1e-3)
    return llvm::formatv("{0:f3} ms", seconds * 1e3).str();
  return llvm::formatv("{0:f1} us", seconds * 1e6).str();
}

std::string signedText(const std::string &text, double value) {
  return (value >= 0 ? "+" : "") + text;
}

/// "0-3" for a run of ranks, else "0, 2".
std::string formatRanks(const std::vector<int64_t> &ranks) {
  bool run = ranks.size() > 2;
  for (size_t i = 1; i < ranks.size(); ++i)
    run &= ranks[i] == ranks[i - 1] + 1;
  if (run)
    return std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
  std::string text;
  for (int64_t r : ranks)
    text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

/// "fc1, relu" or "tok_emb .. head (10)": long layer lists by their ends.
std::string formatLayers(const std::vector<std::string> &layers) {
  if (layers.empty())
    return "(no layers)";
  if (layers.size() > 2)
    return layers.front() + " .. " + layers.back() + " (" + std::to_string(layers.size()) + ")";
  return layers.size() == 1 ? layers[0] : layers[0] + ", " + layers[1];
}

/// A stage's layers; per chunk when it runs several (interleaved).
std::string stageLayersText(const StageFacts &stage) {
  if (stage.chunkLayers.size() < 2)
    return formatLayers(stage.layers);
  std::string text;
  for (const auto &[chunk, layers] : stage.chunkLayers)
    text += (text.empty() ? "" : ", ") + ("chunk " + std::to_string(chunk) + " (") +
            formatLayers(layers) + ")";
  return text;
}

std::string formatList(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &s : items)
    text += (text.empty() ? "" : ", ") + s;
  return text;
}

//===--------------------------------------------------------------------===//
// Gathering the facts.
//===--------------------------------------------------------------------===//

/// The module scope of a buffer named "SCOPE: kernel" ("" at the root).
std::string scopeOfBufferName(const std::string &name) {
  size_t colon = name.find(": ");
  return colon == std::string::npos ? "" : name.substr(0, colon);
}

/// The planner's layer of a scope: cut after its first numeric component
/// (docs/planner.md, "Layer discovery").
std::string layerOfScope(const std::string &scope) {
  if (scope.empty())
    return "(root)";
  std::string layer;
  std::stringstream parts(scope);
  for (std::string part; std::getline(parts, part, '.');) {
    layer += (layer.empty() ? "" : ".") + part;
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit))
      break;
  }
  return layer;
}

/// Layers of one phase, in order, from the scopes of its instructions'
/// outputs: what a plan without strategy.json says of its layers.
std::vector<std::string> layersOfPhase(const rt::ProgramSpec &program, const rt::Phase &phase) {
  std::vector<std::string> layers;
  for (const rt::InstructionSpec &inst : phase.instructions) {
    if (inst.outputs.empty())
      continue;
    std::string layer = layerOfScope(scopeOfBufferName(program.buffers[inst.outputs[0]].name));
    if (std::find(layers.begin(), layers.end(), layer) == layers.end())
      layers.push_back(layer);
  }
  return layers;
}

/// A JSON value of strategy.json, with its path for errors.
struct StrategyNode {
  const Json &json;
  std::string path;
  StrategyNode operator[](const std::string &key) const {
    static const Json null;
    return {json.is_object() && json.contains(key) ? json[key] : null,
            path.empty() ? key : path + "." + key};
  }
  StrategyNode operator[](size_t i) const {
    static const Json null;
    return {json.is_array() && i < json.size() ? json[i] : null,
            path + "[" + std::to_string(i) + "]"};
  }
};

std::string strategyError(const Facts &facts, const StrategyNode &node, const char *what) {
  return facts.dir + "/strategy.json: " + (node.path.empty() ? "top level" : node.path) +
         ": expected " + what;
}

bool getNumber(const Facts &facts, const StrategyNode &node, double *out, std::string *error) {
  if (!node.json.is_number()) {
    *error = strategyError(facts, node, "a number");
    return false;
  }
  *out = node.json.get<double>();
  return true;
}

/// Reads strategy.json, if the plan has one, into the stages' layers,
/// memory and times, the budget and (if the manifest has none) the
/// predicted step.
bool readStrategy(Facts &facts, std::string *error) {
  std::string path = facts.dir + "/strategy.json";
  std::ifstream in(path);
  if (!in)
    return true; // single-device plans have none
  std::stringstream text;
  text << in.rdbuf();
  Json json;
  if (rt::Status parsed = rt::parseJson(text.str(), path, &json); !parsed.ok()) {
    *error = parsed.message();
    return false;
  }
  if (!json.is_object()) {
    *error = path + ": expected a JSON object";
    return false;
  }
  StrategyNode top{json, ""};
  if (!json.contains("format") || json["format"] != "cleave-strategy") {
    *error = path + ": format is not 'cleave-strategy'";
    return false;
  }
  facts.hasStrategy = true;
  for (auto [key, out] : {std::pair{"optimizer_seconds", &facts.optimizerSeconds},
                          {"dp_comm_seconds", &facts.dpCommSeconds}})
    if (json.contains("predicted") && json["predicted"].is_object() &&
        json["predicted"].contains(key) && json["predicted"][key].is_number())
      *out = json["predicted"][key].get<double>();
  StrategyNode stages = top["stages"];
  if (!stages.json.is_array()) {
    *error = strategyError(facts, stages, "a list");
    return false;
  }
  if (static_cast<int64_t>(stages.json.size()) != facts.plan.pp) {
    *error = path + ": stages: " + std::to_string(stages.json.size()) + " entr" +
             (stages.json.size() == 1 ? "y" : "ies") + ", the plan's mesh has pp " +
             std::to_string(facts.plan.pp);
    return false;
  }
  for (size_t s = 0; s < stages.json.size(); ++s) {
    StrategyNode stage = stages[s];
    StageFacts &stageFacts = facts.stages[s];
    StrategyNode layers = stage["layers"];
    if (!layers.json.is_array()) {
      *error = strategyError(facts, layers, "a list of layer names");
      return false;
    }
    stageFacts.layers.clear();
    for (const Json &l : layers.json)
      if (l.is_string())
        stageFacts.layers.push_back(l.get<std::string>());
    // Chunks as [first, last] layer names, in the stage's chunk order.
    StrategyNode chunks = stage["chunks"];
    if (chunks.json.is_array() && !chunks.json.empty()) {
      stageFacts.chunkLayers.clear();
      size_t next = 0;
      for (size_t k = 0; k < chunks.json.size(); ++k) {
        int64_t chunk = static_cast<int64_t>(s + k * facts.plan.pp);
        StrategyNode last = chunks[k][1];
        std::vector<std::string> &mine = stageFacts.chunkLayers[chunk];
        while (next < stageFacts.layers.size()) {
          mine.push_back(stageFacts.layers[next++]);
          if (last.json.is_string() && mine.back() == last.json.get<std::string>())
            break;
        }
      }
    }
    for (const char *category : kCategories) {
      double v = 0;
      if (!getNumber(facts, stage["memory"][category], &v, error))
        return false;
      stageFacts.plannedMemory[category] = std::llround(v);
    }
    double total = 0;
    if (!getNumber(facts, stage["memory"]["total"], &total, error))
      return false;
    stageFacts.plannedMemory["total"] = std::llround(total);
    for (const char *key : {"forward", "backward", "recompute", "tp_comm", "p2p"}) {
      double v = 0;
      if (!getNumber(facts, stage["per_microbatch_seconds"][key], &v, error))
        return false;
      stageFacts.seconds[key] = v;
    }
  }
  if (!facts.budget && top["memory_budget_bytes"].json.is_number())
    facts.budget = std::llround(top["memory_budget_bytes"].json.get<double>());
  if (!facts.predicted) {
    // The manifest has no split: derive it from the planner's figures.
    StrategyNode p = top["predicted"];
    double step = 0, pipeline = 0, bubbleFraction = 0, tp = 0, dp = 0;
    if (!getNumber(facts, p["step_seconds"], &step, error) ||
        !getNumber(facts, p["pipeline_seconds"], &pipeline, error) ||
        !getNumber(facts, p["bubble_fraction"], &bubbleFraction, error) ||
        !getNumber(facts, p["tp_comm_seconds"], &tp, error) ||
        !getNumber(facts, p["dp_comm_seconds"], &dp, error))
      return false;
    Predicted predicted;
    predicted.step = step;
    predicted.bubble = pipeline * bubbleFraction;
    predicted.communication = tp + dp;
    predicted.compute = std::max(0.0, step - predicted.bubble - predicted.communication);
    predicted.source = "strategy";
    facts.predicted = predicted;
  }
  return true;
}

bool gatherFacts(const std::string &dir, Facts &facts, std::string *error) {
  facts.dir = dir;
  if (rt::Status s = rt::loadPlan(dir, &facts.plan); !s.ok()) {
    *error = s.prepend(dir).message();
    return false;
  }
  const rt::Plan &plan = facts.plan;
  facts.stages.resize(plan.pp);
  for (int64_t s = 0; s < plan.pp; ++s)
    facts.stages[s].stage = s;
  for (const auto &[name, program] : plan.programs) {
    ProgramFacts p{name,
                   program.stage,
                   program.tp,
                   {},
                   static_cast<int64_t>(program.arenaBytes),
                   static_cast<int64_t>(program.weightBytes),
                   static_cast<int64_t>(program.stateBytes)};
    for (const rt::DeviceSpec &d : plan.devices)
      if (d.program == name)
        p.ranks.push_back(d.rank);
    facts.programs.push_back(p);
    facts.stages[program.stage].programs.push_back(name);
  }
  std::sort(facts.programs.begin(), facts.programs.end(),
            [](const ProgramFacts &a, const ProgramFacts &b) {
              return std::tie(a.stage, a.tp) < std::tie(b.stage, b.tp);
            });
  for (const rt::DeviceSpec &d : plan.devices)
    facts.stages[d.stage].ranks.push_back(d.rank);

  // Layers and transfers from the tp index 0 programs: the others run the
  // same layers on their parts and send their parts under the same tags.
  std::set<int64_t> tags;
  for (const auto &[name, program] : plan.programs) {
    if (program.tp != 0)
      continue;
    StageFacts &stage = facts.stages[program.stage];
    for (const rt::Phase &phase : program.phases) {
      std::vector<std::string> layers = layersOfPhase(program, phase);
      for (const std::string &l : layers) {
        stage.chunkLayers[phase.chunk].push_back(l);
        stage.layers.push_back(l);
      }
      for (const rt::InstructionSpec &inst : phase.instructions) {
        if (inst.kernel != "send" || inst.inputs.empty() || !inst.inputs[0])
          continue;
        Transfer t;
        (void)inst.attrs.getInt("tag", &t.tag);
        (void)inst.attrs.getInt("peer_stage", &t.toStage);
        (void)inst.attrs.getInt("peer_chunk", &t.toChunk);
        if (!tags.insert(t.tag).second)
          continue;
        t.fromStage = program.stage;
        t.fromChunk = phase.chunk;
        const rt::BufferSpec &buffer = program.buffers[*inst.inputs[0]];
        t.desc = buffer.desc;
        t.scope = scopeOfBufferName(buffer.name);
        if (t.scope.empty())
          t.scope = buffer.name; // a model input passed on, or a root value
        facts.transfers.push_back(t);
      }
    }
  }
  std::sort(facts.transfers.begin(), facts.transfers.end(),
            [](const Transfer &a, const Transfer &b) { return a.tag < b.tag; });

  // Spilling: said only of plans that spill, so others read as before.
  std::vector<rt::ProgramSpill> spills;
  for (const ProgramFacts &p : facts.programs)
    spills.push_back(rt::describeSpill(plan.programs.at(p.name)));
  if (std::any_of(spills.begin(), spills.end(),
                  [](const rt::ProgramSpill &s) { return s.spilled(); })) {
    facts.spills = std::move(spills);
    if (rt::Status s = rt::readHostByCategory(dir, &facts.hostByCategory); !s.ok()) {
      *error = s.message();
      return false;
    }
  }

  const rt::PredictedCost &pc = plan.predicted;
  if (pc.memoryBudgetBytes)
    facts.budget = *pc.memoryBudgetBytes;
  if (pc.stepSeconds) {
    facts.predicted =
        Predicted{*pc.stepSeconds, pc.computeSeconds.value_or(0),
                  pc.communicationSeconds.value_or(0), pc.bubbleSeconds.value_or(0), "manifest"};
  }
  return readStrategy(facts, error);
}

//===--------------------------------------------------------------------===//
// Text and JSON.
//===--------------------------------------------------------------------===//

std::string meshText(const rt::Plan &plan) {
  return llvm::formatv("pp {0} x tp {1} x dp {2}", plan.pp, plan.tp, plan.dp).str();
}

std::string scheduleText(const rt::Plan &plan) {
  std::string text = plan.schedule;
  if (!plan.pipelineSchedule.empty()) // a pipelined training step's slot order
    text += " (" + plan.pipelineSchedule + ")";
  if (plan.virtualStages > 1)
    text += " (" + std::to_string(plan.virtualStages) + " virtual stages)";
  text += ", " + std::to_string(plan.microbatches) + " microbatch" +
          (plan.microbatches == 1 ? "" : "es");
  if (plan.hasBatch)
    text += llvm::formatv(" of {0} per dp rank (global batch {1})", plan.microbatchSize,
                          plan.globalBatch)
                .str();
  return text;
}

std::string predictedText(const Predicted &p) {
  auto share = [&](double v) {
    return llvm::formatv("{0:f1}%", p.step > 0 ? 100 * v / p.step : 0.0).str();
  };
  return "predicted step " + formatSeconds(p.step) + ": compute " + formatSeconds(p.compute) +
         " (" + share(p.compute) + "), communication " + formatSeconds(p.communication) + " (" +
         share(p.communication) + "), bubble " + formatSeconds(p.bubble) + " (" + share(p.bubble) +
         ")" + (p.source == "strategy" ? " [from strategy.json]" : "");
}

void printTrainingMemory(const Facts &facts, llvm::raw_ostream &os);
void printSpill(const Facts &facts, llvm::raw_ostream &os);

void printText(const Facts &facts, llvm::raw_ostream &os) {
  const rt::Plan &plan = facts.plan;
  os << "plan " << facts.dir << ": " << plan.modelSource << ", " << plan.devices.size() << " rank"
     << (plan.devices.size() == 1 ? "" : "s") << " (" << meshText(plan) << ")"
     << (plan.hasWeights ? "" : ", no weights (inspection only)") << "\n";
  os << "schedule: " << scheduleText(plan) << "\n";
  for (const StageFacts &s : facts.stages) {
    os << "stage " << s.stage << ": " << stageLayersText(s) << "; program"
       << (s.programs.size() == 1 ? " " : "s ") << formatList(s.programs) << "; rank"
       << (s.ranks.size() == 1 ? " " : "s ") << formatRanks(s.ranks) << "\n";
  }
  // One row per program (its dp ranks share it): the planner's categories
  // and total, then what the plan allocates; each total against the budget.
  os << "memory per rank" << (facts.budget ? " (budget " + formatBytes(*facts.budget) + ")" : "")
     << ":\n";
  auto ofBudget = [&](double bytes) {
    return llvm::formatv("{0:f1}%", *facts.budget > 0 ? 100.0 * bytes / *facts.budget : 0.0).str();
  };
  os << llvm::formatv("  {0,-12} {1,-8}", "program", "ranks");
  if (facts.hasStrategy) {
    os << llvm::formatv(" {0,10} {1,10} {2,10} {3,11} {4,10} {5,10} {6,10}", "parameters",
                        "gradients", "optimizer", "activations", "comm", "workspace", "planned");
    if (facts.budget)
      os << llvm::formatv(" {0,7}", "budget");
    os << " |";
  }
  bool training = facts.plan.training.has_value();
  os << llvm::formatv(" {0,10} {1,10}", "arena", "weights");
  if (training)
    os << llvm::formatv(" {0,10}", "state");
  os << llvm::formatv(" {0,10}", "allocated");
  if (facts.budget)
    os << llvm::formatv(" {0,7}", "budget");
  os << "\n";
  for (const ProgramFacts &p : facts.programs) {
    os << llvm::formatv("  {0,-12} {1,-8}", p.name, formatRanks(p.ranks));
    if (facts.hasStrategy) {
      const auto &m = facts.stages[p.stage].plannedMemory;
      for (const char *category : kCategories)
        os << llvm::formatv(category == std::string("activations") ? " {0,11}" : " {0,10}",
                            formatBytes(m.at(category)));
      os << llvm::formatv(" {0,10}", formatBytes(m.at("total")));
      if (facts.budget)
        os << llvm::formatv(" {0,7}", ofBudget(m.at("total")));
      os << " |";
    }
    os << llvm::formatv(" {0,10} {1,10}", formatBytes(p.arenaBytes), formatBytes(p.weightBytes));
    if (training)
      os << llvm::formatv(" {0,10}", formatBytes(p.stateBytes));
    os << llvm::formatv(" {0,10}", formatBytes(p.total()));
    if (facts.budget)
      os << llvm::formatv(" {0,7}", ofBudget(p.total()));
    os << "\n";
  }
  if (training)
    printTrainingMemory(facts, os);
  if (facts.spilled())
    printSpill(facts, os);
  if (facts.predicted)
    os << predictedText(*facts.predicted) << "\n";
  else
    os << "predicted step: not recorded (a single-device plan)\n";
}

/// A training step's predicted memory by category next to the regions the
/// plan allocates: the categories add up to the allocation.
void printTrainingMemory(const Facts &facts, llvm::raw_ostream &os) {
  const rt::Plan &plan = facts.plan;
  const rt::TrainingSpec &t = *plan.training;
  os << "training: loss " << t.loss << ", optimizer " << t.optimizer.kind
     << (t.zero == "none" ? "" : " (ZeRO " + t.zero + ": state and updates sharded over dp)")
     << ", batch "
     << t.batchSize << ", " << t.dtype << ", " << t.parameters.size()
     << " trainable parameters\n";
  if (plan.predicted.byCategory.empty() || facts.programs.empty())
    return;
  // The manifest's categories are the largest program's (a pipeline's or a
  // tp group's programs differ): its regions are beside them.
  const ProgramFacts &p = *std::max_element(
      facts.programs.begin(), facts.programs.end(),
      [](const ProgramFacts &a, const ProgramFacts &b) { return a.total() < b.total(); });
  std::map<std::string, int64_t> c(plan.predicted.byCategory.begin(),
                                   plan.predicted.byCategory.end());
  int64_t sum = 0;
  for (const auto &[name, bytes] : c)
    sum += bytes;
  os << "predicted memory by category        | allocated";
  if (facts.programs.size() > 1)
    os << " (" << p.name << ", the largest program)";
  os << "\n";
  auto row = [&](const std::string &left, int64_t a, const std::string &right, int64_t b) {
    os << llvm::formatv("  {0,-16} {1,10}        | {2,-8} {3,10}\n", left, formatBytes(a),
                        right, right.empty() ? std::string() : formatBytes(b));
  };
  auto get = [&](const char *k) { return c.count(k) ? c.at(k) : 0; };
  row("parameters", get("parameters"), "weights", p.weightBytes);
  row("buffers", get("buffers"), "", 0);
  row("optimizer_state", get("optimizer_state"), "state", p.stateBytes);
  row("activations", get("activations"), "arena", p.arenaBytes);
  row("gradients", get("gradients"), "", 0);
  row("temporaries", get("temporaries"), "", 0);
  row("arena_unused", get("arena_unused"), "", 0);
  row("total", sum, "total", p.total());
}

/// "fc1.weight, fc1.bias" or "12 parameters": a layer's spilled parameters.
std::string parametersText(const std::vector<std::string> &names) {
  if (names.size() > 4)
    return std::to_string(names.size()) + " parameters";
  return formatList(names);
}

/// "forward", or "forward chunk 1 mb 0" where a program has phases per
/// chunk or microbatch.
std::string phaseText(const rt::PhaseCopies &c, bool chunks) {
  std::string text = c.name;
  if (chunks)
    text += " chunk " + std::to_string(c.chunk);
  if (c.microbatch)
    text += " mb " + std::to_string(*c.microbatch);
  return text;
}

/// A spilled plan: per program what stays on the device (against the
/// budget) and what lives in the host pool, the spilled parameters by
/// layer, and the copies each phase issues.
void printSpill(const Facts &facts, llvm::raw_ostream &os) {
  os << "spilled to host memory"
     << (facts.budget ? " (device budget " + formatBytes(*facts.budget) + ")" : "") << ":\n";
  for (const rt::ProgramSpill &s : facts.spills) {
    os << "  program " << s.program << ": device " << formatBytes(s.deviceBytes());
    if (facts.budget && *facts.budget > 0)
      os << llvm::formatv(" ({0:f1}% of the budget)",
                          100.0 * static_cast<double>(s.deviceBytes()) / *facts.budget);
    os << " = arena " << formatBytes(s.arenaBytes) << " + weights " << formatBytes(s.weightBytes)
       << " + state " << formatBytes(s.stateBytes) << "; host " << formatBytes(s.hostBytes())
       << " = weights " << formatBytes(s.hostWeightBytes) << " + state "
       << formatBytes(s.hostStateBytes) << "\n";
    if (!s.parameters.empty()) {
      size_t bytes = 0;
      for (const rt::SpilledParameter &p : s.parameters)
        bytes += p.bytes;
      os << "    spilled parameters: " << s.parameters.size() << " in " << s.layers.size()
         << " layer" << (s.layers.size() == 1 ? "" : "s") << ", " << formatBytes(bytes) << "\n";
      size_t width = 5;
      for (const rt::SpilledLayer &l : s.layers)
        width = std::max(width, l.layer.size());
      for (const rt::SpilledLayer &l : s.layers)
        os << "      " << l.layer << std::string(width - l.layer.size(), ' ')
           << llvm::formatv(" {0,10}  host state {1,10}  ", formatBytes(l.parameterBytes),
                            formatBytes(l.hostStateBytes))
           << parametersText(l.parameters) << "\n";
    }
    bool chunks = false;
    for (const rt::PhaseCopies &c : s.phases)
      chunks |= c.chunk != s.phases.front().chunk;
    os << "    copies per phase:";
    for (const rt::PhaseCopies &c : s.phases) {
      os << " " << phaseText(c, chunks) << " " << c.prefetches << " prefetch"
         << (c.prefetches == 1 ? "" : "es");
      if (c.prefetches)
        os << " (" << formatBytes(c.prefetchBytes) << ")";
      os << ", " << c.spills << " spill" << (c.spills == 1 ? "" : "s");
      if (c.spills)
        os << " (" << formatBytes(c.spillBytes) << ")";
      os << (&c == &s.phases.back() ? "" : ";");
    }
    os << "\n";
  }
  if (!facts.hostByCategory.empty()) {
    os << "  predicted host pool by category:";
    std::string list;
    for (const auto &[category, bytes] : facts.hostByCategory)
      if (category != "total")
        list += (list.empty() ? " " : ", ") + category + " " + formatBytes(bytes);
    for (const auto &[category, bytes] : facts.hostByCategory)
      if (category == "total")
        list += " (total " + formatBytes(bytes) + ")";
    os << list << "\n";
  }
}

/// The plan-level `spill`: the programs' host pools and copies summed,
/// their spilled parameters and layers together (each with its program).
Json planSpillJson(const Facts &facts) {
  Json byCategory = Json::object();
  for (const auto &[category, bytes] : facts.hostByCategory)
    byCategory[category] = bytes;
  int64_t host = 0, prefetches = 0, spills = 0;
  Json parameters = Json::array(), layers = Json::array();
  for (const rt::ProgramSpill &s : facts.spills) {
    host += static_cast<int64_t>(s.hostBytes());
    prefetches += s.prefetches;
    spills += s.spills;
    Json j = rt::spillJson(s);
    for (Json &p : j["spilled_parameters"]) {
      p["program"] = s.program;
      parameters.push_back(p);
    }
    for (Json &l : j["spilled_layers"]) {
      l["program"] = s.program;
      layers.push_back(l);
    }
  }
  return {{"host_bytes", host},
          {"host_by_category", byCategory},
          {"memory_budget_bytes", facts.budget ? Json(*facts.budget) : Json()},
          {"spilled_parameters", parameters},
          {"spilled_layers", layers},
          {"prefetches", prefetches},
          {"spills", spills}};
}

Json toJson(const Facts &facts) {
  const rt::Plan &plan = facts.plan;
  Json j;
  j["plan"] = facts.dir;
  j["model"] = plan.modelSource;
  j["weights"] = plan.hasWeights;
  j["ranks"] = plan.devices.size();
  j["mesh"] = {{"pp", plan.pp}, {"tp", plan.tp}, {"dp", plan.dp}};
  j["schedule"] = {{"kind", plan.schedule},
                   {"microbatches", plan.microbatches},
                   {"virtual_stages", plan.virtualStages}};
  if (plan.hasBatch) {
    j["schedule"]["microbatch_size"] = plan.microbatchSize;
    j["schedule"]["global_batch"] = plan.globalBatch;
  }
  j["stages"] = Json::array();
  for (const StageFacts &s : facts.stages) {
    Json chunks = Json::array();
    for (const auto &[chunk, layers] : s.chunkLayers)
      chunks.push_back({{"chunk", chunk}, {"layers", layers}});
    Json stage = {{"stage", s.stage},
                  {"layers", s.layers},
                  {"chunks", chunks},
                  {"programs", s.programs},
                  {"ranks", s.ranks}};
    if (facts.hasStrategy) {
      stage["planned_memory"] = s.plannedMemory;
      stage["per_microbatch_seconds"] = s.seconds;
    }
    j["stages"].push_back(stage);
  }
  j["programs"] = Json::array();
  for (const ProgramFacts &p : facts.programs) {
    Json program = {{"name", p.name},
                    {"stage", p.stage},
                    {"tp", p.tp},
                    {"ranks", p.ranks},
                    {"arena_bytes", p.arenaBytes},
                    {"weight_bytes", p.weightBytes},
                    {"allocated_bytes", p.total()}};
    if (facts.plan.training)
      program["state_bytes"] = p.stateBytes;
    if (facts.hasStrategy)
      program["planned_memory"] = facts.stages[p.stage].plannedMemory;
    if (facts.budget && *facts.budget > 0)
      program["budget_fraction"] = static_cast<double>(p.total()) / *facts.budget;
    if (facts.spilled())
      program["spill"] = rt::spillJson(facts.spills[j["programs"].size()]);
    j["programs"].push_back(program);
  }
  j["memory_budget_bytes"] = facts.budget ? Json(*facts.budget) : Json();
  if (facts.spilled())
    j["spill"] = planSpillJson(facts);
  if (plan.training) {
    const rt::TrainingSpec &t = *plan.training;
    Json byCategory = Json::object();
    for (const auto &[name, bytes] : plan.predicted.byCategory)
      byCategory[name] = bytes;
    j["training"] = {{"loss", t.loss},
                     {"optimizer", t.optimizer.kind},
                     {"zero", t.zero},
                     {"batch_size", t.batchSize},
                     {"dtype", t.dtype},
                     {"parameters", t.parameters.size()},
                     {"predicted_memory_by_category", byCategory},
                     {"predicted_total_bytes", plan.predicted.totalBytes
                                                   ? Json(*plan.predicted.totalBytes)
                                                   : Json()}};
  }
  if (facts.predicted)
    j["predicted"] = {{"step_seconds", facts.predicted->step},
                      {"compute_seconds", facts.predicted->compute},
                      {"communication_seconds", facts.predicted->communication},
                      {"bubble_seconds", facts.predicted->bubble},
                      {"source", facts.predicted->source}};
  else
    j["predicted"] = nullptr;
  j["transfers"] = Json::array();
  for (const Transfer &t : facts.transfers)
    j["transfers"].push_back({{"tag", t.tag},
                              {"from_stage", t.fromStage},
                              {"from_chunk", t.fromChunk},
                              {"to_stage", t.toStage},
                              {"to_chunk", t.toChunk},
                              {"shape", t.desc.shape},
                              {"dtype", rt::dtypeName(t.desc.dtype)},
                              {"scope", t.scope}});
  return j;
}

//===--------------------------------------------------------------------===//
// Graphviz.
//===--------------------------------------------------------------------===//

std::string dotQuote(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out + "\"";
}

void writeDot(const Facts &facts, llvm::raw_ostream &os) {
  os << "digraph plan {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const StageFacts &s : facts.stages) {
    os << "  subgraph cluster_stage" << s.stage << " {\n    label="
       << dotQuote("stage " + std::to_string(s.stage) + " (ranks " + formatRanks(s.ranks) + "; " +
                   formatList(s.programs) + ")")
       << ";\n";
    for (const auto &[chunk, layers] : s.chunkLayers) {
      std::string label = "chunk " + std::to_string(chunk);
      for (const std::string &l : layers)
        label += "\n" + l;
      os << "    chunk" << chunk << " [label=" << dotQuote(label) << "];\n";
    }
    os << "  }\n";
  }
  for (const Transfer &t : facts.transfers)
    os << "  chunk" << t.fromChunk << " -> chunk" << t.toChunk << " [label="
       << dotQuote("tag " + std::to_string(t.tag) + ": " +
                   rt::describe(t.desc.shape, t.desc.dtype) + " (" + t.scope + ")")
       << "];\n";
  os << "}\n";
}

//===--------------------------------------------------------------------===//
// The predicted timeline.
//===--------------------------------------------------------------------===//

/// Simulates the schedule with the planner's per-stage times: a slot
/// takes its stage's time per microbatch over the virtual stages (forward:
/// forward + its share of tp communication; backward: backward +
/// recompute + the rest), and starts when its stage is free and the slot
/// producing its input (previous chunk's forward, next chunk's backward, or
/// the last forward) ended, plus the producing stage's p2p time.
bool writeTrace(const Facts &facts, llvm::raw_ostream &os, std::string *error) {
  const rt::Plan &plan = facts.plan;
  if (!facts.hasStrategy) {
    *error = facts.dir + "/strategy.json: cannot open: --trace needs the planner's per-stage "
                         "times (single-device plans have none)";
    return false;
  }
  bool training = false;
  for (const auto &slots : plan.stageSlots)
    for (const rt::ScheduleSlot &slot : slots)
      training |= slot.phase == "backward";
  double v = static_cast<double>(plan.virtualStages);
  auto duration = [&](int64_t stage, const std::string &phase) {
    // A training step's update (with the gradients' data-parallel
    // reduction, which the program runs before it) happens once per step.
    if (phase == "optimizer")
      return facts.optimizerSeconds + facts.dpCommSeconds;
    const auto &sec = facts.stages[stage].seconds;
    double tpShare = training ? sec.at("tp_comm") / 2 : sec.at("tp_comm");
    double work =
        phase == "backward" ? sec.at("backward") + sec.at("recompute") : sec.at("forward");
    return (work + tpShare) / v;
  };
  int64_t lastChunk = plan.chunks() - 1;
  // The slot whose output a slot needs, if any: (phase, chunk).
  auto producer =
      [&](const rt::ScheduleSlot &slot) -> std::optional<std::pair<std::string, int64_t>> {
    if (slot.phase == "forward")
      return slot.chunk > 0 ? std::optional(std::pair{std::string("forward"), slot.chunk - 1})
                            : std::nullopt;
    if (slot.phase == "backward")
      return slot.chunk < lastChunk ? std::pair{std::string("backward"), slot.chunk + 1}
                                    : std::pair{std::string("forward"), lastChunk};
    return std::nullopt;
  };
  std::map<std::tuple<std::string, int64_t, int64_t>, double> endOf; // (phase, chunk, mb)
  std::vector<size_t> next(plan.pp, 0);
  std::vector<double> free(plan.pp, 0.0);
  struct Event {
    int64_t stage;
    rt::ScheduleSlot slot;
    double start, dur;
  };
  std::vector<Event> events;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < plan.pp; ++s) {
      while (next[s] < plan.stageSlots[s].size()) {
        const rt::ScheduleSlot &slot = plan.stageSlots[s][next[s]];
        double start = free[s];
        if (auto dep = producer(slot)) {
          auto it = endOf.find({dep->first, dep->second, slot.microbatch});
          if (it == endOf.end())
            break; // its input is not produced yet
          int64_t from = plan.stageOfChunk(dep->second);
          start = std::max(start, it->second + facts.stages[from].seconds.at("p2p") / v);
        }
        double dur = duration(s, slot.phase);
        events.push_back({s, slot, start, dur});
        endOf[{slot.phase, slot.chunk, slot.microbatch}] = start + dur;
        free[s] = start + dur;
        ++next[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < plan.pp; ++s)
    if (next[s] < plan.stageSlots[s].size()) {
      const rt::ScheduleSlot &slot = plan.stageSlots[s][next[s]];
      *error = facts.dir + "/manifest.json: schedule.stages[" + std::to_string(s) + "].slots[" +
               std::to_string(next[s]) + "]: " + slot.phase + " chunk " +
               std::to_string(slot.chunk) + " microbatch " + std::to_string(slot.microbatch) +
               " waits for an input the schedule never produces before it";
      return false;
    }

  // To the nanosecond: sums of seconds leave noise in the last digits.
  auto microseconds = [](double seconds) { return std::round(seconds * 1e9) / 1e3; };
  Json trace = Json::array();
  for (const rt::DeviceSpec &d : plan.devices) {
    trace.push_back({{"ph", "M"},
                     {"name", "process_name"},
                     {"pid", d.rank},
                     {"tid", 0},
                     {"args",
                      {{"name", llvm::formatv("rank {0} (stage {1}, tp {2}, dp {3})", d.rank,
                                              d.stage, d.tp, d.dp)
                                    .str()}}}});
    trace.push_back({{"ph", "M"},
                     {"name", "process_sort_index"},
                     {"pid", d.rank},
                     {"tid", 0},
                     {"args", {{"sort_index", d.rank}}}});
    trace.push_back({{"ph", "M"},
                     {"name", "thread_name"},
                     {"pid", d.rank},
                     {"tid", 0},
                     {"args", {{"name", "schedule"}}}});
  }
  for (const Event &e : events)
    for (const rt::DeviceSpec &d : plan.devices) {
      if (d.stage != e.stage)
        continue;
      std::string name = rt::slotName(e.slot);
      trace.push_back(
          {{"ph", "X"},
           {"name", name},
           {"cat", e.slot.phase},
           {"pid", d.rank},
           {"tid", 0},
           {"ts", microseconds(e.start)},
           {"dur", microseconds(e.dur)},
           {"args",
            {{"stage", e.stage}, {"chunk", e.slot.chunk}, {"microbatch", e.slot.microbatch}}}});
    }
  double end = 0;
  for (double f : free)
    end = std::max(end, f);
  // One event per line: small files that still read well.
  Json other = {{"plan", facts.dir}, {"pipeline_seconds", microseconds(end) / 1e6}};
  os << "{\"displayTimeUnit\": \"ms\", \"otherData\": " << other.dump()
     << ",\n \"traceEvents\": [\n";
  for (size_t i = 0; i < trace.size(); ++i)
    os << "  " << trace[i].dump() << (i + 1 < trace.size() ? ",\n" : "\n");
  os << "]}\n";
  return true;
}

//===--------------------------------------------------------------------===//
// Differences between two plans.
//===--------------------------------------------------------------------===//

struct Difference {
  std::string what, before, after;
  std::string delta; // "+1.2 KiB" where the two are amounts
};

std::vector<Difference> differences(const Facts &a, const Facts &b) {
  std::vector<Difference> out;
  auto add = [&](const std::string &what, const std::string &x, const std::string &y,
                 const std::string &delta = "") {
    if (x != y)
      out.push_back({what, x, y, delta});
  };
  add("mesh", meshText(a.plan), meshText(b.plan));
  add("schedule", a.plan.schedule, b.plan.schedule);
  add("virtual stages", std::to_string(a.plan.virtualStages), std::to_string(b.plan.virtualStages));
  auto micro = [](const rt::Plan &p) {
    return std::to_string(p.microbatches) +
           (p.hasBatch ? " of " + std::to_string(p.microbatchSize) : "");
  };
  add("microbatches", micro(a.plan), micro(b.plan));
  add("global batch", a.plan.hasBatch ? std::to_string(a.plan.globalBatch) : "-",
      b.plan.hasBatch ? std::to_string(b.plan.globalBatch) : "-");
  size_t stages = std::max(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < stages; ++s)
    add("stage " + std::to_string(s) + " layers",
        s < a.stages.size() ? stageLayersText(a.stages[s]) : "(none)",
        s < b.stages.size() ? stageLayersText(b.stages[s]) : "(none)");
  std::map<std::string, std::pair<const ProgramFacts *, const ProgramFacts *>> programs;
  for (const ProgramFacts &p : a.programs)
    programs[p.name].first = &p;
  for (const ProgramFacts &p : b.programs)
    programs[p.name].second = &p;
  for (const auto &[name, pair] : programs) {
    auto text = [](const ProgramFacts *p) {
      return p ? formatBytes(p->total()) + " (arena " + formatBytes(p->arenaBytes) + ", weights " +
                     formatBytes(p->weightBytes) + ")"
               : std::string("(none)");
    };
    std::string delta;
    if (pair.first && pair.second) {
      int64_t bytes = pair.second->total() - pair.first->total();
      delta = signedText(formatBytes(bytes), bytes);
    }
    add("program " + name + " memory", text(pair.first), text(pair.second), delta);
  }
  for (auto [what, field] : {std::pair{"predicted step", &Predicted::step},
                             {"predicted compute", &Predicted::compute},
                             {"predicted communication", &Predicted::communication},
                             {"predicted bubble", &Predicted::bubble}}) {
    auto seconds = [&](const std::optional<Predicted> &p) {
      return p ? formatSeconds((*p).*field) : std::string("-");
    };
    std::string delta;
    if (a.predicted && b.predicted) {
      double d = (*b.predicted).*field - (*a.predicted).*field;
      delta = signedText(formatSeconds(d), d);
    }
    add(what, seconds(a.predicted), seconds(b.predicted), delta);
  }
  return out;
}

/// The predicted effect of going from `a` to `b`: step time and the
/// memory of the fullest rank.
Json effect(const Facts &a, const Facts &b) {
  Json e;
  if (a.predicted && b.predicted) {
    e["step_seconds_delta"] = b.predicted->step - a.predicted->step;
    e["step_ratio"] = a.predicted->step > 0 ? Json(b.predicted->step / a.predicted->step) : Json();
  }
  e["largest_rank_bytes"] = {a.largestProgramBytes(), b.largestProgramBytes()};
  e["memory_bytes_delta"] = b.largestProgramBytes() - a.largestProgramBytes();
  return e;
}

void printDiff(const Facts &a, const Facts &b, llvm::raw_ostream &os) {
  std::vector<Difference> diffs = differences(a, b);
  os << "plan " << a.dir << " -> " << b.dir << ":\n";
  if (diffs.empty())
    os << "  no differences\n";
  for (const Difference &d : diffs)
    os << "  " << d.what << ": " << d.before << " -> " << d.after
       << (d.delta.empty() ? "" : " (" + d.delta + ")") << "\n";
  os << "effect:";
  if (a.predicted && b.predicted) {
    double delta = b.predicted->step - a.predicted->step;
    os << " step time " << signedText(formatSeconds(delta), delta);
    if (a.predicted->step > 0)
      os << llvm::formatv(" ({0:f2}x)", b.predicted->step / a.predicted->step);
    os << ";";
  } else {
    os << " step time not predicted for " << (a.predicted ? b.dir : a.dir) << ";";
  }
  int64_t delta = b.largestProgramBytes() - a.largestProgramBytes();
  os << " largest rank memory " << signedText(formatBytes(delta), delta) << " ("
     << formatBytes(a.largestProgramBytes()) << " -> " << formatBytes(b.largestProgramBytes())
     << ")\n";
}

Json diffJson(const Facts &a, const Facts &b) {
  Json list = Json::array();
  for (const Difference &d : differences(a, b))
    list.push_back({{"what", d.what},
                    {"before", d.before},
                    {"after", d.after},
                    {"delta", d.delta.empty() ? Json() : Json(d.delta)}});
  return {{"plan", a.dir}, {"other", b.dir}, {"differences", list}, {"effect", effect(a, b)}};
}

//===--------------------------------------------------------------------===//
// Job plan directories.
//===--------------------------------------------------------------------===//

std::string optionalSeconds(const std::optional<double> &seconds) {
  return seconds ? formatSeconds(*seconds) : std::string("-");
}

/// "device 250.0 KiB of 384.0 KiB, host 300.0 KiB: spilled (blocks.0 .. blocks.3 (4))"
std::string modelMemoryText(const rt::JobModelFacts &m) {
  std::string text = "device " + formatBytes(static_cast<double>(m.memory.deviceBytes()));
  if (m.budgetBytes)
    text += " of " + formatBytes(static_cast<double>(*m.budgetBytes));
  if (!m.spilled())
    return text + ": resident";
  std::vector<std::string> layers;
  for (const rt::SpilledLayer &l : m.memory.layers)
    layers.push_back(l.layer);
  return text + ", host " + formatBytes(static_cast<double>(m.memory.hostBytes())) +
         ": spilled (" + (layers.empty() ? std::string("host states only") : formatLayers(layers)) +
         ")";
}

void printJob(const rt::JobFacts &facts, llvm::raw_ostream &os) {
  const rt::JobPlan &job = facts.job;
  os << "job " << job.dir << ": " << job.models.size() << " model"
     << (job.models.size() == 1 ? "" : "s") << " on " << job.devices << " device"
     << (job.devices == 1 ? "" : "s") << ", " << job.rounds.size() << " round"
     << (job.rounds.size() == 1 ? "" : "s") << " (planned slices of " << job.sliceSteps
     << " step" << (job.sliceSteps == 1 ? "" : "s") << ")\n";

  os << "models:\n";
  size_t width = 5;
  for (const rt::JobModel &m : job.models)
    width = std::max(width, m.name.size());
  os << "  " << "model" << std::string(width - 5, ' ')
     << llvm::formatv(" {0,6} {1,10} {2,10}  {3,-8} {4}\n", "steps", "step", "all steps",
                      "devices", "memory");
  for (size_t i = 0; i < job.models.size(); ++i) {
    const rt::JobModel &m = job.models[i];
    const rt::JobModelFacts &f = facts.models[i];
    std::optional<double> all;
    if (f.stepSeconds)
      all = *f.stepSeconds * static_cast<double>(m.steps);
    os << "  " << m.name << std::string(width - m.name.size(), ' ')
       << llvm::formatv(" {0,6} {1,10} {2,10}  {3,-8} {4}\n", m.steps,
                        optionalSeconds(f.stepSeconds), optionalSeconds(all),
                        formatRanks(f.devices), modelMemoryText(f));
  }

  os << "rounds (predicted: a slice takes its steps x its model's step time, a round its "
        "longest slice):\n";
  for (size_t r = 0; r < facts.rounds.size(); ++r) {
    const rt::JobRoundFacts &round = facts.rounds[r];
    os << llvm::formatv("  round {0,-3} at {1,10}  {2,10}:", r,
                        optionalSeconds(round.startSeconds), optionalSeconds(round.seconds));
    if (round.slices.empty())
      os << " (empty: a barrier)";
    for (const rt::JobSliceFacts &s : round.slices)
      os << "  d" << s.slice.device << " " << job.models[s.slice.model].name << " ["
         << s.slice.firstStep << ".." << s.slice.lastStep << "] " << optionalSeconds(s.seconds)
         << (&s == &round.slices.back() ? "" : ";");
    os << "\n";
  }

  os << "devices:\n";
  for (const rt::JobDeviceFacts &d : facts.devices) {
    os << "  device " << d.device << ": " << d.slices << " slice" << (d.slices == 1 ? "" : "s");
    if (d.busySeconds) {
      os << ", busy " << formatSeconds(*d.busySeconds);
      if (facts.roundsSeconds && *facts.roundsSeconds > 0)
        os << llvm::formatv(" of {0} ({1:f1}%)", formatSeconds(*facts.roundsSeconds),
                            100.0 * *d.busySeconds / *facts.roundsSeconds);
    }
    if (!d.models.empty())
      os << "; at most " << formatBytes(static_cast<double>(d.peakDeviceBytes))
         << " on the device, " << formatBytes(static_cast<double>(d.peakHostBytes))
         << " in host memory";
    os << "\n";
    for (size_t m : d.models)
      os << "    " << job.models[m].name << ": " << modelMemoryText(facts.models[m]) << "\n";
  }

  os << "predicted makespan " << optionalSeconds(facts.makespanSeconds) << " (job.json; the rounds "
     << "end to end: " << optionalSeconds(facts.roundsSeconds) << "); the models one after "
     << "another on all " << job.devices << " device" << (job.devices == 1 ? "" : "s") << ": "
     << optionalSeconds(facts.sequentialSeconds);
  if (facts.makespanSeconds && facts.sequentialSeconds && *facts.makespanSeconds > 0)
    os << llvm::formatv(" ({0:f2}x the joint schedule)",
                        *facts.sequentialSeconds / *facts.makespanSeconds);
  os << "\n";
}

/// `cleave inspect JOBDIR`: the joint schedule, text or JSON, and the trace.
int inspectJobDir(const std::string &dir, bool json, const std::string &tracePath) {
  rt::JobFacts facts;
  if (rt::Status s = rt::inspectJob(dir, &facts); !s.ok())
    return fail(s.message());
  Json events;
  if (!tracePath.empty())
    if (rt::Status s = rt::jobTrace(facts, &events); !s.ok())
      return fail(s.message());
  if (json)
    llvm::outs() << rt::jobJson(facts).dump(2) << "\n";
  else
    printJob(facts, llvm::outs());
  if (tracePath.empty())
    return 0;
  Json other = {{"job", dir},
                {"makespan_seconds", facts.roundsSeconds ? Json(*facts.roundsSeconds) : Json()}};
  // One event per line, as the plans' traces.
  bool written = writeAtomically(tracePath, [&](llvm::raw_ostream &os) {
    os << "{\"displayTimeUnit\": \"ms\", \"otherData\": " << other.dump()
       << ",\n \"traceEvents\": [\n";
    for (size_t i = 0; i < events.size(); ++i)
      os << "  " << events[i].dump() << (i + 1 < events.size() ? ",\n" : "\n");
    os << "]}\n";
  });
  return written ? 0 : 1;
}

} // namespace

int runInspect(int argc, char **argv) {
  std::string planDir, dotPath, tracePath, otherDir;
  bool json = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kInspectUsage;
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (optionValue(argc, argv, i, "--dot", &value)) {
      if (!value)
        return usageError("--dot needs a file", kInspectUsage);
      dotPath = value;
    } else if (optionValue(argc, argv, i, "--trace", &value)) {
      if (!value)
        return usageError("--trace needs a file", kInspectUsage);
      tracePath = value;
    } else if (optionValue(argc, argv, i, "--diff", &value)) {
      if (!value)
        return usageError("--diff needs another plan directory", kInspectUsage);
      otherDir = value;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kInspectUsage);
    } else if (planDir.empty()) {
      planDir = arg;
    } else {
      return usageError("more than one plan given ('" + planDir + "', '" + arg + "')",
                        kInspectUsage);
    }
  }
  if (planDir.empty())
    return usageError("no plan directory given", kInspectUsage);
  if (rt::isJobPlanDir(planDir)) {
    if (!dotPath.empty() || !otherDir.empty())
      return usageError(std::string(dotPath.empty() ? "--diff" : "--dot") +
                            " describes a plan, not a job plan directory ('" + planDir + "')",
                        kInspectUsage);
    return inspectJobDir(planDir, json, tracePath);
  }

  Facts facts;
  std::string error;
  if (!gatherFacts(planDir, facts, &error))
    return fail(error);
  // The trace may fail (no strategy): find out before printing anything.
  std::string trace;
  llvm::raw_string_ostream traceStream(trace);
  if (!tracePath.empty() && !writeTrace(facts, traceStream, &error))
    return fail(error);
  if (!otherDir.empty()) {
    Facts other;
    if (!gatherFacts(otherDir, other, &error))
      return fail(error);
    if (json)
      llvm::outs() << diffJson(facts, other).dump(2) << "\n";
    else
      printDiff(facts, other, llvm::outs());
  } else if (json) {
    llvm::outs() << toJson(facts).dump(2) << "\n";
  } else {
    printText(facts, llvm::outs());
  }
  if (!dotPath.empty() &&
      !writeAtomically(dotPath, [&](llvm::raw_ostream &os) { writeDot(facts, os); }))
    return 1;
  if (!tracePath.empty() &&
      !writeAtomically(tracePath, [&](llvm::raw_ostream &out) { out << traceStream.str(); }))
    return 1;
  return 0;
}

} // namespace cleave
