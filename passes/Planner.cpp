//===- Planner.cpp - Parallelization planner over a model's layers --------===//

#include "passes/Planner.h"
#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <nlohmann/json.hpp>

#include <chrono>

namespace mlir::cleave {

using ::cleave::planner::Candidate;
using ::cleave::planner::StagePlan;

namespace {

/// The size of the batch dim shared by the model's inputs.
FailureOr<int64_t> tracedBatch(func::FuncOp func, int batchDim) {
  std::optional<int64_t> batch;
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || tensor.getRank() <= batchDim)
      continue;
    int64_t size = tensor.getDimSize(batchDim);
    if (batch && *batch != size)
      return emitError(func.getLoc())
             << "inputs disagree on the batch size along dim " << batchDim << ": " << *batch
             << " and " << size << " (input " << i << "); pass --batch-dim to name the batch dim";
    batch = size;
  }
  if (!batch || *batch < 1)
    return emitError(func.getLoc()) << "no input of @" << func.getName() << " has a dim "
                                    << batchDim << " to scale as the batch";
  return *batch;
}

} // namespace

std::string useDevices(::cleave::cost::ClusterSpec &spec, int devices) {
  if (devices > 0 && devices < spec.devicesPerNode) {
    spec.devicesPerNode = devices;
    spec.nodes = 1;
  } else if (devices > 0) {
    if (devices % spec.devicesPerNode != 0)
      return "--devices " + std::to_string(devices) + " is not a whole number of " +
             std::to_string(spec.devicesPerNode) + "-device nodes of " + spec.name;
    spec.nodes = devices / spec.devicesPerNode;
  }
  // A plan's devices compute at once, so those on one node share it (memory
  // channels, caches, clocks). Applied once: the device's figures now hold it.
  spec.device = ::cleave::cost::deviceSharingNode(spec, spec.devicesPerNode);
  spec.contention = {};
  return "";
}

double defaultMemoryBudget(const ::cleave::cost::DeviceSpec &device) {
  return double(device.memoryBytes - device.memoryReserveBytes);
}

FailureOr<PlannerResult> planModel(func::FuncOp func, const ::cleave::cost::ClusterSpec &cluster,
                                   const PlannerOptions &options) {
  PlannerResult plan;
  FailureOr<int64_t> batch = tracedBatch(func, options.batchDim);
  if (failed(batch))
    return failure();
  auto start = std::chrono::steady_clock::now();
  plan.layers = discoverLayers(func);
  plan.profile.tracedBatch = *batch;

  // Pipeline stages take contiguous runs of layers, so data must flow from
  // earlier layers to later ones.
  llvm::DenseMap<Operation *, size_t> layerOfOp;
  for (auto [l, layer] : llvm::enumerate(plan.layers))
    for (Operation *op : layer.ops)
      layerOfOp[op] = l;
  for (auto [l, layer] : llvm::enumerate(plan.layers))
    for (Operation *op : layer.ops)
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (auto it = layerOfOp.find(def); it != layerOfOp.end() && it->second > l)
            return op->emitError() << "layer '" << layer.name << "' reads a result of layer '"
                                   << plan.layers[it->second].name
                                   << "', which starts later in the program: the planner "
                                      "needs layers whose data flows in program order";

  // Layer kinds, numbered densely; the first layer of each kind is solved.
  std::map<unsigned, int> dense;
  std::vector<unsigned> representative;
  std::map<std::string, int> layerIndex;
  for (auto [l, layer] : llvm::enumerate(plan.layers)) {
    auto [it, inserted] = dense.try_emplace(layer.kind, int(representative.size()));
    if (inserted)
      representative.push_back(unsigned(l));
    plan.profile.layerKind.push_back(it->second);
    plan.profile.layerNames.push_back(layer.name);
    layerIndex[layer.name] = int(l);
  }
  // Weights several layer kinds read (tied embeddings): each gets one
  // layout, chosen by solving those layers under each candidate layout.
  std::map<unsigned, int> kindCount;
  for (const Layer &layer : plan.layers)
    ++kindCount[layer.kind];
  llvm::MapVector<Value, llvm::SmallVector<unsigned>> tied;
  for (unsigned l : representative)
    for (Operation *op : plan.layers[l].ops)
      for (Value operand : op->getOperands())
        if (auto param = operand.getDefiningOp<ParamOp>()) {
          auto &users = tied[operand];
          if (!llvm::is_contained(users, l))
            users.push_back(l);
        }
  TensorParallelOptions tpOptions;
  tpOptions.training = options.search.training;
  tpOptions.computeDType = options.computeDType;
  tpOptions.reduceScatter = options.sequenceParallel;
  for (int tp : ::cleave::planner::tpCandidates(cluster, options.search)) {
    tpOptions.tp = tp;
    tpOptions.weightLayouts.clear();
    for (auto &[weight, users] : tied) {
      if (users.size() < 2 || tp == 1)
        continue;
      auto type = cast<RankedTensorType>(weight.getType());
      std::optional<TensorSharding> best;
      double bestCost = 0;
      for (int d = -1; d < type.getRank(); ++d) {
        if (d >= 0 && type.getDimSize(d) % tp != 0)
          continue;
        TensorSharding layout = d < 0 ? TensorSharding() : TensorSharding::sharded(d);
        TensorParallelOptions trial = tpOptions;
        trial.weightLayouts[weight] = layout;
        double cost = 0;
        for (unsigned l : users)
          cost += splitLayer(plan.layers[l], cluster, trial).objective *
                  kindCount[plan.layers[l].kind];
        if (!best || cost < bestCost) {
          best = layout;
          bestCost = cost;
        }
      }
      tpOptions.weightLayouts[weight] = *best;
    }
    std::vector<::cleave::planner::LayerSplitCost> &costs = plan.profile.costs[tp];
    for (unsigned l : representative) {
      LayerSplit split = splitLayer(plan.layers[l], cluster, tpOptions);
      costs.push_back(split.cost);
      plan.splits[tp][plan.layers[l].kind] = std::move(split);
    }
  }
  // Weights a layer reads but another layer owns (tied embeddings).
  plan.profile.borrowed.resize(plan.layers.size());
  for (auto [l, layer] : llvm::enumerate(plan.layers)) {
    llvm::DenseSet<Operation *> own(layer.params.begin(), layer.params.end());
    llvm::DenseSet<Operation *> seen;
    for (Operation *op : layer.ops)
      for (Value operand : op->getOperands()) {
        auto param = operand.getDefiningOp<ParamOp>();
        if (!param || own.contains(param) || param.getBuffer() || !seen.insert(param).second)
          continue;
        auto owner = layerIndex.find(layerOfParam(param.getName()));
        if (owner == layerIndex.end())
          continue;
        plan.profile.borrowed[l].push_back(
            {owner->second, double(cast<RankedTensorType>(param.getType()).getNumElements())});
      }
  }
  plan.splitSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  ::cleave::planner::SearchOptions search = options.search;
  Operation *batchStatistics = nullptr;
  func.walk([&](Operation *op) {
    if (!batchStatistics && op->hasTrait<trait::BatchStatistics>())
      batchStatistics = op;
  });
  search.batchStatistics = batchStatistics != nullptr;
  std::string error;
  if (!::cleave::planner::searchPlan(plan.profile, cluster, search, plan.search, error)) {
    InFlightDiagnostic diagnostic = emitError(func.getLoc())
                                    << "no parallelization to consider: " << error;
    // Only where batch norm's whole-batch rule is what left nothing.
    if (batchStatistics && search.training && llvm::StringRef(error).contains("batch norm"))
      diagnostic.attachNote(batchStatistics->getLoc())
          << "the first batch norm, which keeps a replica's batch whole";
    return diagnostic;
  }
  return plan;
}

namespace {

/// Which stage (device along the pipeline) and chunk each layer is on, and
/// whether it recomputes.
struct Placement {
  std::vector<int> stage, chunk;
  std::vector<bool> recompute;
};

Placement placementOf(const Candidate &candidate, size_t layers) {
  Placement p;
  p.stage.assign(layers, 0);
  p.chunk.assign(layers, 0);
  p.recompute.assign(layers, false);
  for (auto [s, stage] : llvm::enumerate(candidate.stages)) {
    for (auto [j, chunk] : llvm::enumerate(stage.chunks))
      for (int l = chunk.first; l < chunk.second; ++l) {
        p.stage[l] = int(s);
        p.chunk[l] = int(j * candidate.pp + s);
      }
    for (int l : stage.recomputed)
      p.recompute[l] = true;
  }
  return p;
}

/// The layout split assigned to a layer's i-th op or param, through the
/// first layer of its kind.
const LayerSplit &splitOf(const PlannerResult &plan, const Candidate &c, const Layer &layer) {
  return plan.splits.at(c.tp).at(layer.kind);
}

} // namespace

void annotateStrategy(func::FuncOp func, const PlannerResult &plan, const Candidate &c) {
  MLIRContext *ctx = func.getContext();
  Builder b(ctx);
  auto module = func->getParentOfType<ModuleOp>();
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  Operation *top = module ? module.getOperation() : func.getOperation();
  top->setAttr("cleave.mesh", b.getDictionaryAttr({b.getNamedAttr("tp", i64(c.tp)),
                                                   b.getNamedAttr("pp", i64(c.pp)),
                                                   b.getNamedAttr("dp", i64(c.dp))}));
  top->setAttr("cleave.schedule",
               b.getDictionaryAttr(
                   {b.getNamedAttr("kind", b.getStringAttr(::cleave::cost::scheduleName(c.schedule))),
                    b.getNamedAttr("microbatch_size", i64(c.microbatchSize)),
                    b.getNamedAttr("microbatches", i64(c.microbatches)),
                    b.getNamedAttr("virtual_stages", i64(c.virtualStages))}));
  top->setAttr("cleave.data_parallel",
               b.getDictionaryAttr({b.getNamedAttr(
                   "sharding", b.getStringAttr(::cleave::cost::shardingLevelName(c.sharding)))}));

  Placement place = placementOf(c, plan.layers.size());
  llvm::DenseMap<Operation *, llvm::SmallVector<int64_t>> weightStages;
  auto layoutAttr = [&](const LayerSplit &split, Value rep) {
    auto it = split.layout.find(rep);
    TensorSharding s = it == split.layout.end() ? TensorSharding() : it->second;
    return b.getStringAttr(s.str());
  };
  for (auto [l, layer] : llvm::enumerate(plan.layers)) {
    const LayerSplit &split = splitOf(plan, c, layer);
    const Layer &rep = plan.layers[layer.kind];
    for (auto [i, op] : llvm::enumerate(layer.ops)) {
      op->setAttr("cleave.stage", i64(place.stage[l]));
      if (c.virtualStages > 1)
        op->setAttr("cleave.chunk", i64(place.chunk[l]));
      if (place.recompute[l])
        op->setAttr("cleave.recompute", b.getUnitAttr());
      else
        op->removeAttr("cleave.recompute");
      SmallVector<Attribute> results;
      for (Value result : rep.ops[i]->getResults())
        results.push_back(layoutAttr(split, result));
      op->setAttr("cleave.sharding", b.getArrayAttr(results));
      SmallVector<Attribute> operands;
      for (const TensorSharding &need : split.operandLayout[i])
        operands.push_back(b.getStringAttr(need.str()));
      op->setAttr("cleave.operand_sharding", b.getArrayAttr(operands));
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp(); def && isa<ParamOp, ConstantOp>(def)) {
          auto &stages = weightStages[def];
          if (!llvm::is_contained(stages, place.stage[l]))
            stages.push_back(place.stage[l]);
        }
    }
    for (auto [j, param] : llvm::enumerate(layer.params))
      if (j < rep.params.size())
        param->setAttr("cleave.sharding",
                       b.getArrayAttr({layoutAttr(split, rep.params[j]->getResult(0))}));
  }
  for (auto &[op, stages] : weightStages) {
    llvm::sort(stages);
    op->setAttr("cleave.stages", b.getDenseI64ArrayAttr(stages));
  }
}

namespace {

nlohmann::json memoryJson(const ::cleave::cost::MemoryBreakdown &m) {
  return nlohmann::json::parse(::cleave::cost::memoryBreakdownJson(m));
}

std::string opText(Operation *op) {
  std::string scope = moduleScope(op->getLoc());
  return op->getName().getStringRef().str() + " @ " + (scope.empty() ? "(root)" : scope);
}

} // namespace

std::string strategyJson(const PlannerResult &plan, const Candidate &c,
                         const ::cleave::cost::ClusterSpec &cluster, const PlannerOptions &options,
                         const std::string &model) {
  const auto &search = options.search;
  nlohmann::json j;
  j["format"] = "cleave-strategy";
  j["version"] = 1;
  j["model"] = model;
  j["cluster"] = cluster.name;
  j["devices"] = search.devices;
  j["global_batch"] = search.globalBatch;
  j["mode"] = search.training ? "train" : "infer";
  j["precision"] = search.paramDType == ::cleave::runtime::DType::BF16 ? "mixed" : "fp32";
  j["memory_budget_bytes"] = search.memoryBudget;
  j["traced_batch"] = plan.profile.tracedBatch;
  j["batch_dim"] = options.batchDim;
  j["sequence_parallel"] = options.sequenceParallel ? "auto" : "off";
  j["mesh"] = {{"tp", c.tp}, {"pp", c.pp}, {"dp", c.dp}};
  j["schedule"] = {{"kind", ::cleave::cost::scheduleName(c.schedule)},
                   {"virtual_stages", c.virtualStages},
                   {"microbatch_size", c.microbatchSize},
                   {"microbatches", c.microbatches}};
  j["data_parallel"] = {{"sharding", ::cleave::cost::shardingLevelName(c.sharding)}};
  Placement place = placementOf(c, plan.layers.size());
  nlohmann::json stages = nlohmann::json::array();
  for (auto [s, stage] : llvm::enumerate(c.stages)) {
    nlohmann::json layers = nlohmann::json::array(), chunks = nlohmann::json::array(),
                   recompute = nlohmann::json::array();
    for (auto [begin, end] : stage.chunks) {
      chunks.push_back({plan.layers[begin].name, plan.layers[end - 1].name});
      for (int l = begin; l < end; ++l)
        layers.push_back(plan.layers[l].name);
    }
    for (int l : stage.recomputed)
      recompute.push_back(plan.layers[l].name);
    nlohmann::json spilled = nlohmann::json::array(), spilledActivations = nlohmann::json::array();
    for (int l : stage.spilled)
      spilled.push_back(plan.layers[l].name);
    for (int l : stage.activationsSpilled)
      spilledActivations.push_back(plan.layers[l].name);
    stages.push_back({{"stage", s},
                      {"chunks", chunks},
                      {"layers", layers},
                      {"recompute", recompute},
                      {"spilled", spilled},
                      {"spilled_activations", spilledActivations},
                      {"parameters", stage.parameters},
                      {"per_microbatch_seconds",
                       {{"forward", stage.forwardSeconds},
                        {"backward", stage.backwardSeconds},
                        {"recompute", stage.recomputeSeconds},
                        {"tp_comm", stage.tpCommSeconds},
                        {"p2p", stage.p2pSeconds},
                        {"spill", stage.spillSeconds}}},
                      {"memory", memoryJson(stage.memory)}});
  }
  j["stages"] = stages;

  // One entry per layer kind present: how its ops split and what it sends.
  nlohmann::json kinds = nlohmann::json::array();
  const auto &splits = plan.splits.at(c.tp);
  for (const auto &[kind, split] : splits) {
    const Layer &rep = plan.layers[kind];
    int count = 0;
    for (const Layer &layer : plan.layers)
      count += layer.kind == kind;
    nlohmann::json ops = nlohmann::json::array();
    for (auto [i, op] : llvm::enumerate(rep.ops)) {
      nlohmann::json results = nlohmann::json::array();
      for (Value r : op->getResults()) {
        auto it = split.layout.find(r);
        results.push_back(it == split.layout.end() ? "replicated" : it->second.str());
      }
      nlohmann::json operands = nlohmann::json::array();
      for (const TensorSharding &need : split.operandLayout[i])
        operands.push_back(need.str());
      nlohmann::json entry = {{"op", opText(op)}, {"operands", operands}, {"results", results}};
      for (Value operand : op->getOperands())
        if (auto param = operand.getDefiningOp<ParamOp>()) {
          auto it = split.layout.find(operand);
          entry["weights"][param.getName().str()] =
              it == split.layout.end() ? "replicated" : it->second.str();
        }
      ops.push_back(entry);
    }
    nlohmann::json collectives = nlohmann::json::array();
    for (const TpCollective &coll : split.collectives)
      collectives.push_back({{"collective", ::cleave::cost::collectiveName(coll.collective)},
                             {"pass", coll.backward ? "backward" : "forward"},
                             {"before", coll.before ? opText(coll.before) : "layer output"},
                             {"bytes", coll.bytes}});
    kinds.push_back({{"kind", rep.name},
                     {"layers", count},
                     {"split_ops", split.cost.splitOps},
                     {"kernel_ops", split.cost.kernelOps},
                     {"ops", ops},
                     {"collectives", collectives}});
  }
  j["tensor_parallel"] = kinds;
  j["predicted"] = {{"step_seconds", c.stepSeconds},
                    {"pipeline_seconds", c.pipelineSeconds},
                    {"bubble_fraction", c.bubbleFraction},
                    {"tp_comm_seconds", c.tpCommSeconds},
                    {"dp_comm_seconds", c.dpCommSeconds},
                    {"optimizer_seconds", c.optimizerSeconds},
                    {"spill_seconds", c.spillSeconds},
                    {"worst_stage", c.worstStage},
                    {"memory", memoryJson(c.memory)}};
  if (const auto &e = cluster.predictionError; e.known())
    j["predicted"]["expected_error"] = {{"mean_abs_error", e.meanAbs},
                                        {"mean_signed_error", e.meanSigned},
                                        {"runs", e.runs},
                                        {"source", e.source}};
  j["search"] = {{"candidates_considered", plan.search.candidatesConsidered},
                 {"candidates_evaluated", plan.search.candidatesEvaluated},
                 {"layer_split_seconds", plan.splitSeconds},
                 {"search_seconds", plan.search.searchSeconds}};
  return j.dump(2) + "\n";
}

} // namespace mlir::cleave
