//===- PipelineTraining.cpp - one unrolled training step per stage --------===//
//
// The differentiated step (@forward: the forward ops placed by the planner,
// the loss, the backward ops, which inherit their forward op's placement)
// becomes one function per pipeline stage that runs the stage's schedule
// slot by slot: the forward of a chunk on a microbatch, then later its
// backward, each a phase of its own. Unrolled, the step is straight-line
// IR again, so memory planning sees exactly which microbatches' activations
// the schedule keeps alive at once (what 1F1B saves over GPipe), and
// gradient accumulation is plain IR.
//
//===----------------------------------------------------------------------===//

#include "passes/PipelineTraining.h"
#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "passes/Layers.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>
#include <map>
#include <set>

namespace mlir::cleave {
#define GEN_PASS_DEF_PIPELINETRAINING
#include "passes/Passes.h.inc"

std::vector<std::vector<TrainingSlot>> trainingSlots(const std::string &kind, int64_t stages,
                                                     int64_t microbatches, int64_t virtualStages,
                                                     std::string *error) {
  std::vector<std::vector<TrainingSlot>> slots(stages);
  const int64_t M = microbatches;
  if (stages < 1 || M < 1 || virtualStages < 1) {
    *error = "a schedule needs at least one stage, microbatch and chunk per stage";
    return {};
  }
  if (kind == "gpipe" || ((kind == "1f1b" || kind == "interleaved") && virtualStages == 1)) {
    for (int64_t s = 0; s < stages; ++s) {
      int64_t warmup = kind == "gpipe" ? M : std::min(stages - s - 1, M);
      for (int64_t m = 0; m < warmup; ++m)
        slots[s].push_back({false, s, m});
      for (int64_t m = warmup; m < M; ++m) {
        slots[s].push_back({false, s, m});
        slots[s].push_back({true, s, m - warmup});
      }
      for (int64_t m = M - warmup; m < M; ++m)
        slots[s].push_back({true, s, m});
    }
    return slots;
  }
  if (kind != "interleaved") {
    *error = "unknown schedule '" + kind + "' (gpipe, 1f1b or interleaved)";
    return {};
  }
  if (M % stages != 0) {
    *error = "the interleaved schedule runs microbatches in groups of the " +
             std::to_string(stages) + " stages; " + std::to_string(M) +
             " microbatches are not a multiple";
    return {};
  }
  // Megatron-LM's order: the k-th forward of a stage runs local chunk
  // (k mod stages·v) / stages on microbatch (k / (stages·v))·stages + k mod
  // stages; backwards visit the chunks in reverse.
  const int64_t v = virtualStages, total = M * v, group = stages * v;
  for (int64_t s = 0; s < stages; ++s) {
    auto slot = [&](int64_t k, bool backward) {
      int64_t local = (k % group) / stages;
      if (backward)
        local = v - 1 - local;
      return TrainingSlot{backward, local * stages + s, (k / group) * stages + k % stages};
    };
    int64_t warmup = std::min((stages - s - 1) * 2 + (v - 1) * stages, total);
    for (int64_t k = 0; k < warmup; ++k)
      slots[s].push_back(slot(k, false));
    for (int64_t k = warmup; k < total; ++k) {
      slots[s].push_back(slot(k, false));
      slots[s].push_back(slot(k - warmup, true));
    }
    for (int64_t k = total - warmup; k < total; ++k)
      slots[s].push_back(slot(k, true));
  }
  return slots;
}

namespace {

struct PipelineTrainingPass : impl::PipelineTrainingBase<PipelineTrainingPass> {
  using PipelineTrainingBase::PipelineTrainingBase;

  // The step being split: each computing op's unit (chunk) and pass.
  func::FuncOp step;
  int64_t pp = 1, tp = 1, chunks = 1, M = 1;
  llvm::DenseMap<Operation *, int64_t> unitOf;
  llvm::DenseSet<Operation *> isBackward, tiedOps;
  std::vector<std::vector<Operation *>> forwardOps, backwardOps; // per unit

  // Values that cross units, with their tag: (value, receiving unit).
  std::map<std::pair<void *, int64_t>, int64_t> tags;
  int64_t nextTag = 0;
  /// Per unit, the values it receives (in forward or in backward) and the
  /// ones it sends with their receiver, in tag order.
  std::vector<std::vector<Value>> forwardImports, backwardImports;
  std::vector<std::vector<std::pair<Value, int64_t>>> forwardExports, backwardExports;

  int64_t stageOf(int64_t unit) const { return unit % pp; }
  bool isGlobal(Operation *op) const { return isa<ParamOp, ConstantOp, StateOp>(op); }
  bool forwardValue(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && !isGlobal(def) && !isBackward.contains(def);
  }

  int64_t tagOf(Value v, int64_t to) {
    auto key = std::make_pair(v.getAsOpaquePointer(), to);
    auto [it, added] = tags.try_emplace(key, nextTag);
    if (added)
      ++nextTag;
    return it->second;
  }

  LogicalResult classify() {
    Block &body = step.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    bool backward = false, interleaved = false;
    for (Operation &op : body)
      interleaved |= op.hasAttr("cleave.chunk");
    forwardOps.assign(chunks, {});
    backwardOps.assign(chunks, {});
    for (Operation &op : body) {
      if (&op == ret || isGlobal(&op))
        continue;
      if (auto mark = op.getAttrOfType<StringAttr>(kPhaseAttr))
        backward = mark.getValue() == kBackwardPhase;
      if (backward && op.hasAttr(kTiedGradientAttr)) {
        tiedOps.insert(&op);
        continue;
      }
      auto placed = op.getAttrOfType<IntegerAttr>(interleaved ? "cleave.chunk" : "cleave.stage");
      // Unplaced: the loss appended after planning, and its gradient.
      int64_t unit = placed ? placed.getInt() : chunks - 1;
      if (unit < 0 || unit >= chunks)
        return op.emitError() << "is placed on chunk " << unit << " of " << chunks;
      unitOf[&op] = unit;
      if (backward) {
        isBackward.insert(&op);
        backwardOps[unit].push_back(&op);
      } else {
        forwardOps[unit].push_back(&op);
      }
    }
    if (!backward)
      return step.emitError("has no backward phase: run -cleave-differentiate first");
    return success();
  }

  /// Which values cross units: a forward value read by another unit's
  /// forward or backward goes forward with the activations; a backward
  /// value read by another unit's backward goes back with the gradients.
  LogicalResult findCrossings() {
    forwardImports.assign(chunks, {});
    backwardImports.assign(chunks, {});
    forwardExports.assign(chunks, {});
    backwardExports.assign(chunks, {});
    std::set<std::pair<void *, int64_t>> seen;
    for (int64_t unit = 0; unit < chunks; ++unit)
      for (auto *list : {&forwardOps[unit], &backwardOps[unit]})
        for (Operation *op : *list)
          for (Value operand : op->getOperands()) {
            Operation *def = operand.getDefiningOp();
            if (!def || isGlobal(def))
              continue;
            if (tiedOps.contains(def))
              return op->emitError("reads a gradient summed across pipeline stages");
            int64_t from = unitOf.lookup(def);
            if (from == unit || !seen.insert({operand.getAsOpaquePointer(), unit}).second)
              continue;
            bool backwardValue = isBackward.contains(def);
            if (!backwardValue && from > unit)
              return op->emitError() << "reads a forward value of pipeline chunk " << from
                                     << ", which runs after its own chunk " << unit;
            if (backwardValue && from < unit)
              return op->emitError() << "reads a gradient of pipeline chunk " << from
                                     << ", whose backward runs after its own chunk " << unit;
            tagOf(operand, unit);
            (backwardValue ? backwardImports : forwardImports)[unit].push_back(operand);
            (backwardValue ? backwardExports : forwardExports)[from].push_back({operand, unit});
          }
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    step = module.lookupSymbol<func::FuncOp>("forward");
    if (!step || step.isExternal()) {
      module.emitError("cleave-pipeline-training needs a differentiated @forward function");
      return signalPassFailure();
    }
    // The planner's choices, on the module (or the function).
    auto planned = [&](StringRef name) {
      auto attr = module->getAttrOfType<DictionaryAttr>(name);
      return attr ? attr : step->getAttrOfType<DictionaryAttr>(name);
    };
    auto mesh = planned("cleave.mesh");
    auto schedule = planned("cleave.schedule");
    auto intOf = [](DictionaryAttr d, StringRef key, int64_t fallback) {
      auto a = d ? d.getAs<IntegerAttr>(key) : IntegerAttr();
      return a ? a.getInt() : fallback;
    };
    if (!mesh || !schedule) {
      step.emitError("has no cleave.mesh and cleave.schedule: plan the model first "
                     "(cleave-plan-parallelism)");
      return signalPassFailure();
    }
    pp = intOf(mesh, "pp", 1);
    tp = intOf(mesh, "tp", 1);
    int64_t virtualStages = intOf(schedule, "virtual_stages", 1);
    M = intOf(schedule, "microbatches", 1);
    chunks = pp * virtualStages;
    auto kindAttr = schedule.getAs<StringAttr>("kind");
    std::string error;
    auto slots = trainingSlots(kindAttr ? kindAttr.str() : "", pp, M, virtualStages, &error);
    if (slots.empty()) {
      step.emitError("cannot schedule the training step: ") << error;
      return signalPassFailure();
    }
    if (failed(classify()) || failed(findCrossings()))
      return signalPassFailure();

    OpBuilder b(module.getContext());
    b.setInsertionPoint(step);
    for (int64_t s = 0; s < pp; ++s)
      if (failed(buildStage(b, s, slots[s])))
        return signalPassFailure();
    step.erase();
  }

  LogicalResult buildStage(OpBuilder &outer, int64_t stage, const std::vector<TrainingSlot> &slots);
};

/// Records the first op a builder inserts: the op that marks a slot's phase.
struct FirstInserted : OpBuilder::Listener {
  Operation *first = nullptr;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (!first)
      first = op;
  }
};

LogicalResult PipelineTrainingPass::buildStage(OpBuilder &outer, int64_t stage,
                                               const std::vector<TrainingSlot> &slots) {
  MLIRContext *context = step.getContext();
  Location loc = step.getLoc();
  auto fn = outer.create<func::FuncOp>(loc, "train_stage" + std::to_string(stage),
                                       FunctionType::get(context, {}, {}));
  fn->setAttr("cleave.stage", outer.getI64IntegerAttr(stage));
  // A tp group's ranks get their copies from -cleave-specialize-ranks.
  if (tp == 1)
    fn->setAttr("cleave.tp", outer.getI64IntegerAttr(0));
  for (StringRef name : {"cleave.mesh", "cleave.schedule", "cleave.data_parallel"})
    if (Attribute a = step->getAttr(name))
      fn->setAttr(name, a);
  Block *entry = fn.addEntryBlock();
  // Weights and constants first (each cloned once), computing ops after.
  OpBuilder globals = OpBuilder::atBlockBegin(entry);
  FirstInserted listener;
  OpBuilder in = OpBuilder::atBlockEnd(entry, &listener);
  IRMapping globalMap;
  auto global = [&](Value v) -> Value {
    if (Value mapped = globalMap.lookupOrNull(v))
      return mapped;
    Operation *copy = globals.clone(*v.getDefiningOp());
    globals.setInsertionPointAfter(copy);
    globalMap.map(v.getDefiningOp()->getResults(), copy->getResults());
    return globalMap.lookup(v);
  };

  // The model's inputs, one argument per microbatch that reads them.
  std::map<std::pair<unsigned, int64_t>, Value> args;
  SmallVector<DictionaryAttr> argAttrs;
  auto argument = [&](BlockArgument original, int64_t chunk, int64_t m) -> Value {
    auto [it, added] = args.try_emplace({original.getArgNumber(), m});
    if (added) {
      it->second = entry->addArgument(original.getType(), original.getLoc());
      NamedAttrList attrs(step.getArgAttrDict(original.getArgNumber()));
      attrs.set(kPhaseChunkAttr, outer.getI64IntegerAttr(chunk));
      attrs.set(kPhaseMicrobatchAttr, outer.getI64IntegerAttr(m));
      argAttrs.push_back(attrs.getDictionary(context));
    }
    return it->second;
  };

  // Each (unit, microbatch)'s forward values (received ones included), its
  // recomputed forward values and its backward values.
  std::map<std::pair<int64_t, int64_t>, IRMapping> forwardMap, recomputed, backwardMap;
  auto forwardValueFor = [&](Value v, int64_t unit, int64_t m) -> FailureOr<Value> {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return argument(arg, unit, m);
    if (isGlobal(v.getDefiningOp()))
      return global(v);
    if (Value mapped = forwardMap[{unit, m}].lookupOrNull(v))
      return mapped;
    return failure();
  };
  // A forward value that backward reads: kept since forward, or, in a
  // recomputed region, computed again from the values the region reads. A
  // region is one layer's marked ops (as -cleave-mark-recompute counts
  // them): a value another layer computed is the region's checkpoint, kept,
  // so backward holds one layer's activations at a time, not the chunk's.
  llvm::DenseMap<Operation *, std::string> layerOfOp;
  auto layerOf = [&](Operation *op) -> StringRef {
    auto [it, added] = layerOfOp.try_emplace(op);
    if (added)
      it->second = layerOfScope(moduleScope(op->getLoc()));
    return it->second;
  };
  std::function<FailureOr<Value>(Value, int64_t, int64_t, std::optional<StringRef>)>
      keptOrRecomputed = [&](Value v, int64_t unit, int64_t m,
                             std::optional<StringRef> region) -> FailureOr<Value> {
    Operation *def = v.getDefiningOp();
    bool recompute = def && !isGlobal(def) && def->hasAttr("cleave.recompute") &&
                     unitOf.lookup(def) == unit && (!region || layerOf(def) == *region);
    // A layer's output that a later recomputed layer reads is that layer's
    // checkpoint, kept anyway: backward reads the kept copy too.
    if (recompute && !region)
      recompute = llvm::none_of(def->getUsers(), [&](Operation *user) {
        return user->hasAttr("cleave.recompute") && layerOf(user) != layerOf(def);
      });
    if (!recompute)
      return forwardValueFor(v, unit, m);
    IRMapping &again = recomputed[{unit, m}];
    if (Value mapped = again.lookupOrNull(v))
      return mapped;
    IRMapping operands;
    for (Value operand : def->getOperands()) {
      FailureOr<Value> local = keptOrRecomputed(operand, unit, m, layerOf(def));
      if (failed(local))
        return def->emitError("cannot recompute: an operand is not available in backward");
      operands.map(operand, *local);
    }
    Operation *copy = in.clone(*def, operands);
    copy->removeAttr(kPhaseAttr);
    again.map(def->getResults(), copy->getResults());
    return again.lookup(v);
  };

  // Per gradient result: the running sum of each unit's partial gradient
  // over the microbatches, on this stage.
  auto ret = cast<func::ReturnOp>(step.front().getTerminator());
  auto leavesOf = [&](Value g) {
    SmallVector<Value> leaves, work{g};
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (def && tiedOps.contains(def)) {
        for (Value operand : llvm::reverse(def->getOperands()))
          work.push_back(operand);
        continue;
      }
      leaves.push_back(v);
    }
    return leaves;
  };
  struct Gradient {
    unsigned result;
    std::map<int64_t, SmallVector<Value>> leavesOfUnit; // unit -> leaves
    std::map<int64_t, Value> sumOfUnit;                 // this stage's units
  };
  std::vector<Gradient> gradients;
  Value lossSum;
  const bool holdsLoss = stageOf(chunks - 1) == stage;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    if (!step.getResultAttr(i, "cleave.gradient_of"))
      continue;
    Gradient g{i, {}, {}};
    for (Value leaf : leavesOf(ret.getOperand(i))) {
      Operation *def = leaf.getDefiningOp();
      if (!def || !isBackward.contains(def))
        return step.emitError("gradient result ") << i << " is not computed by backward ops";
      g.leavesOfUnit[unitOf.lookup(def)].push_back(leaf);
    }
    if (llvm::any_of(g.leavesOfUnit, [&](auto &e) { return stageOf(e.first) == stage; }))
      gradients.push_back(std::move(g));
  }

  auto scale = [&](Value v, double factor) -> Value {
    if (factor == 1.0)
      return v;
    auto element = cast<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
    return in.create<MulOp>(v.getLoc(), v, floatScalar(in, v.getLoc(), element, factor));
  };
  auto tagAttr = [&](int64_t tag) { return in.getI64IntegerAttr(tag); };
  // Tags past the activations' and gradients': a partial gradient of a
  // tied weight sent from one unit to another stage.
  const int64_t tiedTagBase = nextTag;
  auto tiedTag = [&](unsigned result, int64_t unit) {
    return tagAttr(tiedTagBase + static_cast<int64_t>(result) * chunks + unit);
  };
  // Clones a slot's ops into `map`, each operand resolved by `local`.
  auto cloneSlot = [&](ArrayRef<Operation *> ops, IRMapping &map, int64_t unit, int64_t m,
                       llvm::function_ref<FailureOr<Value>(Value)> local) -> LogicalResult {
    for (Operation *op : ops) {
      IRMapping operands;
      for (Value operand : op->getOperands()) {
        FailureOr<Value> value = local(operand);
        if (failed(value))
          return op->emitError("internal error: an operand has no value in chunk ")
                 << unit << " microbatch " << m;
        operands.map(operand, *value);
      }
      Operation *copy = in.clone(*op, operands);
      copy->removeAttr(kPhaseAttr);
      map.map(op->getResults(), copy->getResults());
    }
    return success();
  };
  // A slot receives what its chunk imports first and sends what it exports
  // last, each value with its (value, receiving chunk) tag. Between two
  // chunks of this stage (interleaved) the value is already here: the
  // producing slot ran earlier in this step.
  auto receive = [&](ArrayRef<Value> imports, int64_t unit, int64_t m, IRMapping &map) {
    for (Value v : imports) {
      int64_t from = unitOf.lookup(v.getDefiningOp());
      if (stageOf(from) == stage) {
        map.map(v, (isBackward.contains(v.getDefiningOp()) ? backwardMap : forwardMap)[{from, m}]
                       .lookup(v));
        continue;
      }
      map.map(v, in.create<RecvOp>(v.getLoc(), v.getType(), in.getI64IntegerAttr(from),
                                   tagAttr(tagOf(v, unit))));
    }
  };
  auto send = [&](ArrayRef<std::pair<Value, int64_t>> exports, IRMapping &map) {
    for (auto [v, to] : exports)
      if (stageOf(to) != stage)
        in.create<SendOp>(v.getLoc(), map.lookup(v), in.getI64IntegerAttr(to),
                          tagAttr(tagOf(v, to)));
  };

  for (size_t n = 0; n < slots.size(); ++n) {
    const TrainingSlot &slot = slots[n];
    const int64_t unit = slot.chunk, m = slot.microbatch;
    listener.first = nullptr;
    if (!slot.backward) {
      IRMapping &map = forwardMap[{unit, m}];
      receive(forwardImports[unit], unit, m, map);
      if (failed(cloneSlot(forwardOps[unit], map, unit, m, [&](Value operand) {
            return forwardValueFor(operand, unit, m);
          })))
        return failure();
      send(forwardExports[unit], map);
      if (unit == chunks - 1) {
        // The step's loss: the mean over the microbatches.
        Value loss = map.lookup(ret.getOperand(0));
        lossSum = lossSum ? in.create<AddOp>(loss.getLoc(), lossSum, loss).getResult() : loss;
        if (m == M - 1)
          lossSum = scale(lossSum, 1.0 / static_cast<double>(M));
      }
    } else {
      IRMapping &map = backwardMap[{unit, m}];
      receive(backwardImports[unit], unit, m, map);
      if (failed(cloneSlot(backwardOps[unit], map, unit, m, [&](Value operand) -> FailureOr<Value> {
            Operation *def = operand.getDefiningOp();
            if (!def || !isBackward.contains(def))
              return keptOrRecomputed(operand, unit, m, std::nullopt);
            if (Value mapped = map.lookupOrNull(operand))
              return mapped;
            return failure();
          })))
        return failure();
      send(backwardExports[unit], map);
      // Gradient accumulation over the microbatches, then the mean; a
      // tied weight's partial goes to the other stages that hold it.
      for (Gradient &g : gradients) {
        auto it = g.leavesOfUnit.find(unit);
        if (it == g.leavesOfUnit.end())
          continue;
        Value partial;
        for (Value leaf : it->second)
          partial = partial ? in.create<AddOp>(leaf.getLoc(), partial, map.lookup(leaf)).getResult()
                            : map.lookup(leaf);
        Value &sum = g.sumOfUnit[unit];
        sum = sum ? in.create<AddOp>(partial.getLoc(), sum, partial).getResult() : partial;
        if (m != M - 1)
          continue;
        sum = scale(sum, 1.0 / static_cast<double>(M));
        std::set<int64_t> holders;
        for (auto &[u, leaves] : g.leavesOfUnit)
          holders.insert(stageOf(u));
        for (int64_t to : holders)
          if (to != stage)
            in.create<SendOp>(sum.getLoc(), sum, in.getI64IntegerAttr(to), tiedTag(g.result, unit));
      }
    }
    if (!listener.first)
      return step.emitError() << "stage " << stage << ": the " << (slot.backward ? "backward" : "forward")
                              << " of chunk " << unit << " has no ops to run";
    Operation *mark = listener.first;
    mark->setAttr(kPhaseAttr,
                  StringAttr::get(context, slot.backward ? kBackwardPhase : kForwardPhase));
    mark->setAttr(kPhaseChunkAttr, in.getI64IntegerAttr(unit));
    mark->setAttr(kPhaseMicrobatchAttr, in.getI64IntegerAttr(m));
  }

  // The step's results: the loss where it is computed, then each gradient
  // this stage holds: a tied weight's partials summed in chunk order, on
  // every stage that holds it alike.
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  if (holdsLoss) {
    results.push_back(lossSum);
    resultAttrs.push_back(step.getResultAttrDict(0) ? step.getResultAttrDict(0)
                                                    : DictionaryAttr::get(context));
  }
  for (Gradient &g : gradients) {
    Value total;
    for (auto &[unit, leaves] : g.leavesOfUnit) {
      Value part = g.sumOfUnit.count(unit) ? g.sumOfUnit[unit] : Value();
      if (!part) {
        Value whole = ret.getOperand(g.result);
        part = in.create<RecvOp>(whole.getLoc(), whole.getType(), in.getI64IntegerAttr(unit),
                                 tiedTag(g.result, unit));
      }
      total = total ? in.create<AddOp>(part.getLoc(), total, part).getResult() : part;
    }
    results.push_back(total);
    // A weight several stages hold counts once in a norm over the stages:
    // the other holders mark their copy of its gradient.
    NamedAttrList attrs(step.getResultAttrDict(g.result));
    int64_t firstHolder = chunks;
    for (auto &[unit, leaves] : g.leavesOfUnit)
      firstHolder = std::min(firstHolder, stageOf(unit));
    if (firstHolder != stage)
      attrs.set(kTiedCopyAttr, UnitAttr::get(context));
    resultAttrs.push_back(attrs.getDictionary(context));
  }
  in.create<func::ReturnOp>(loc, results);
  // What later passes need of the pipeline: the stages, and the first tag
  // no crossing above uses (clipping sums its norm across the stages).
  fn->setAttr(kPipelineAttr,
              outer.getDictionaryAttr(
                  {outer.getNamedAttr("stages", outer.getI64IntegerAttr(pp)),
                   outer.getNamedAttr("free_tag",
                                      outer.getI64IntegerAttr(
                                          tiedTagBase + static_cast<int64_t>(ret.getNumOperands()) *
                                                            chunks))}));
  // Weights and constants first: a slot's first receive may have come
  // before a weight was first cloned.
  Operation *firstComputing = nullptr;
  for (Operation &op : llvm::make_early_inc_range(*entry)) {
    if (!isGlobal(&op)) {
      if (!firstComputing)
        firstComputing = &op;
    } else if (firstComputing) {
      op.moveBefore(firstComputing);
    }
  }
  fn.setType(FunctionType::get(context, entry->getArgumentTypes(), ValueRange(results).getTypes()));
  for (auto [i, attrs] : llvm::enumerate(argAttrs))
    fn.setArgAttrs(i, attrs);
  fn.setAllResultAttrs(resultAttrs);
  return success();
}

} // namespace
} // namespace mlir::cleave
