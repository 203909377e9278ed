//===- SpillToHost.cpp - parameters and optimizer state in host memory ----===//
//
// Model spilling (Hydra) with the optimizer on the host (ZeRO-Offload): a
// spilled parameter, its gradient's host copy and its optimizer state live
// in host memory; the device holds a parameter only while the layer that
// reads it runs (one layer ahead, for the copy to overlap), and a gradient
// only until it is copied out. docs/training.md, "Spilling".
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "passes/Layers.h"
#include "passes/Passes.h"
#include "passes/Training.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_SPILLTOHOST
#include "passes/Passes.h.inc"

namespace {

/// Runs of consecutive ops of one phase slot and one layer: a layer's forward,
/// its backward, a tied weight's second reader. A spilled parameter is
/// prefetched once per run that reads it, at the start of the run before.
struct Runs {
  llvm::DenseMap<Operation *, int64_t> runOf;
  std::vector<Operation *> firstOp; // per run
  std::vector<size_t> slot;         // per run: its phase slot
  std::vector<StringRef> phase;     // per run: its phase's name
  std::vector<std::string> layer;   // per run: its layer

  explicit Runs(Block &body) {
    std::vector<size_t> slotOfOp;
    std::vector<PhaseSlot> slots = phaseSlotsOf(body, slotOfOp);
    size_t index = 0;
    for (Operation &op : body) {
      size_t s = slotOfOp[index++];
      if (isa<ParamOp, StateOp, ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      std::string here = layerOfScope(moduleScope(op.getLoc()));
      if (firstOp.empty() || slot.back() != s || here != layer.back()) {
        firstOp.push_back(&op);
        slot.push_back(s);
        phase.push_back(slots[s].name);
        layer.push_back(here);
      }
      runOf[&op] = int64_t(firstOp.size()) - 1;
    }
  }

  /// Where a prefetch for the readers in run `run` goes: the start of the
  /// run before it in the same phase slot, else its own start.
  Operation *prefetchPoint(int64_t run) const {
    if (run > 0 && slot[run - 1] == slot[run])
      return firstOp[run - 1];
    return firstOp[run];
  }

  /// A prefetch of `source` for the readers in run `run`; it takes over
  /// the phase (slot) mark of the op it is placed before.
  PrefetchOp prefetch(int64_t run, Value source, Location loc) const {
    Operation *point = prefetchPoint(run);
    OpBuilder builder(point);
    if (auto state = source.getDefiningOp<StateOp>())
      source = reloadState(builder, state); // read again after its spill
    auto prefetch = builder.create<PrefetchOp>(loc, source);
    for (StringRef mark : {kPhaseAttr, kPhaseChunkAttr, kPhaseMicrobatchAttr})
      if (Attribute value = point->getAttr(mark)) {
        prefetch->setAttr(mark, value);
        point->removeAttr(mark);
      }
    return prefetch;
  }
};

/// The update op (adamw, sgd) that steps `param`, if any.
Operation *updateOf(ParamOp param) {
  for (Operation *user : param->getUsers())
    if (isa<AdamWOp, SgdOp>(user) && user->getOperand(0) == param.getResult())
      return user;
  return nullptr;
}

/// Smaller saved values stay on the device: a copy's latency costs more
/// than their bytes save.
constexpr int64_t kMinSpilledActivationBytes = 4096;

struct SpillToHostPass : impl::SpillToHostBase<SpillToHostPass> {
  using SpillToHostBase::SpillToHostBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Block &body = func.front();
    MLIRContext *context = &getContext();
    auto host = StringAttr::get(context, kHostPool);

    llvm::StringSet<> wanted;
    for (const std::string &name : parameters)
      wanted.insert(name);
    std::vector<ParamOp> spilled;
    for (ParamOp param : body.getOps<ParamOp>()) {
      bool marked = param->hasAttr("cleave.spill") || wanted.contains(param.getName()) ||
                    (all && !param.getBuffer());
      if (!marked)
        continue;
      if (param.getBuffer()) {
        param.emitError("buffer '") << param.getName()
                                    << "' cannot be spilled: only parameters move to the host";
        return signalPassFailure();
      }
      wanted.erase(param.getName());
      spilled.push_back(param);
    }
    for (const auto &missing : wanted) {
      func.emitError("no parameter '") << missing.getKey() << "' to spill";
      return signalPassFailure();
    }
    Runs runs(body);
    llvm::StringSet<> hostStates;
    for (ParamOp param : spilled) {
      param->setAttr(kPoolAttr, host);
      param->removeAttr("cleave.spill");
      Operation *update = updateOf(param);

      // Readers on the device, by run; the update reads the host copy.
      std::map<int64_t, SmallVector<OpOperand *>> readers;
      for (OpOperand &use : param->getUses()) {
        Operation *user = use.getOwner();
        if (user == update)
          continue;
        if (isa<func::ReturnOp>(user)) {
          user->emitError("returns parameter '")
              << param.getName() << "', which is spilled: returned tensors stay on the device";
          return signalPassFailure();
        }
        auto run = runs.runOf.find(user);
        if (run == runs.runOf.end()) {
          user->emitError("reads spilled parameter '") << param.getName() << "' outside any phase";
          return signalPassFailure();
        }
        readers[run->second].push_back(&use);
      }
      for (auto &[run, uses] : readers) {
        PrefetchOp prefetch = runs.prefetch(run, param.getResult(), param.getLoc());
        ++prefetches;
        for (OpOperand *use : uses)
          use->set(prefetch.getResult());
      }
      if (!update)
        continue;

      // The gradient leaves the device as soon as it is final; the update
      // reads the host copy.
      Value grad = update->getOperand(1);
      Operation *def = grad.getDefiningOp();
      if (!def || isa<ParamOp, StateOp>(def)) {
        update->emitError("cannot spill '")
            << param.getName()
            << "': its gradient is persistent (accumulated over microbatches), which spilling "
               "does not support yet";
        return signalPassFailure();
      }
      auto gradType = cast<RankedTensorType>(grad.getType());
      StateOp hostGrad = getOrCreateState(func, ("host_gradient." + param.getName()).str(), gradType);
      if (!hostGrad)
        return signalPassFailure();
      hostGrad->setAttr(kPoolAttr, host);
      hostStates.insert(hostGrad.getName());
      OpBuilder builder(context);
      builder.setInsertionPointAfter(def);
      builder.create<SpillOp>(update->getLoc(), hostGrad.getResult(), grad);
      ++gradientsSpilled;
      // Every later reader (clipping's norm, the update) reads the host copy.
      Operation *firstReader = nullptr;
      SmallVector<OpOperand *> later;
      for (OpOperand &use : grad.getUses()) {
        Operation *user = use.getOwner();
        if (isa<SpillOp>(user))
          continue;
        if (isa<func::ReturnOp>(user))
          continue;
        later.push_back(&use);
        if (!firstReader || user->isBeforeInBlock(firstReader))
          firstReader = user;
      }
      if (firstReader) {
        builder.setInsertionPoint(firstReader);
        StateOp reread = reloadState(builder, hostGrad);
        for (OpOperand *use : later)
          use->set(reread.getResult());
      }
      // The optimizer's state of a spilled parameter stays on the host.
      for (unsigned index : cast<ExecutableOpInterface>(update).getUpdatedOperands())
        if (auto state = update->getOperand(index).getDefiningOp<StateOp>())
          hostStates.insert(state.getName());
    }
    for (StateOp state : body.getOps<StateOp>())
      if (hostStates.contains(state.getName()))
        state->setAttr(kPoolAttr, host);
    parametersSpilled += spilled.size();
    if (failed(spillActivations(func, runs)))
      return signalPassFailure();
  }

  /// The saved activations of the layers named in `activationLayers`: each
  /// forward value their backward reads (what their ops saved for backward)
  /// leaves the device right after forward computes it, into `cleave.state
  /// "host_activation.<layer>.<n>"`, and comes back a run ahead of each
  /// backward run that reads it.
  LogicalResult spillActivations(func::FuncOp func, Runs &runs) {
    llvm::StringSet<> layers;
    for (const std::string &name : activationLayers)
      layers.insert(name);
    if (layers.empty())
      return success();
    auto host = StringAttr::get(func.getContext(), kHostPool);
    auto phaseOf = [&](Operation *op) -> StringRef {
      auto run = op ? runs.runOf.find(op) : runs.runOf.end();
      return run == runs.runOf.end() ? StringRef() : runs.phase[run->second];
    };
    // The values, in program order of their readers, with the layer that
    // reads them first.
    SmallVector<std::pair<Value, std::string>> saved;
    llvm::DenseSet<Value> seen;
    for (Operation &op : func.front()) {
      auto run = runs.runOf.find(&op);
      if (run == runs.runOf.end() || runs.phase[run->second] != kBackwardPhase ||
          !layers.contains(runs.layer[run->second]))
        continue;
      for (Value operand : op.getOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.getType());
        Operation *def = operand.getDefiningOp();
        if (!type || tensorBytes(type) < kMinSpilledActivationBytes || phaseOf(def) != kForwardPhase)
          continue;
        if (seen.insert(operand).second)
          saved.push_back({operand, runs.layer[run->second]});
      }
    }
    llvm::StringMap<int64_t> counter;
    for (auto &[value, layer] : saved) {
      // Backward's readers, by run; a returned value stays on the device.
      std::map<int64_t, SmallVector<OpOperand *>> readers;
      bool returned = false;
      for (OpOperand &use : value.getUses()) {
        returned |= isa<func::ReturnOp>(use.getOwner());
        auto run = runs.runOf.find(use.getOwner());
        if (run != runs.runOf.end() && runs.phase[run->second] == kBackwardPhase)
          readers[run->second].push_back(&use);
      }
      if (returned)
        continue;
      auto type = cast<RankedTensorType>(value.getType());
      std::string name = "host_activation." + layer + "." + std::to_string(counter[layer]++);
      StateOp state = getOrCreateState(func, name, type);
      if (!state)
        return failure();
      state->setAttr(kPoolAttr, host);
      Operation *def = value.getDefiningOp();
      OpBuilder builder(def->getContext());
      builder.setInsertionPointAfter(def);
      builder.create<SpillOp>(def->getLoc(), state.getResult(), value);
      for (auto &[run, uses] : readers) {
        PrefetchOp prefetch = runs.prefetch(run, state.getResult(), def->getLoc());
        for (OpOperand *use : uses)
          use->set(prefetch.getResult());
        ++prefetches;
      }
      ++activationsSpilled;
    }
    return success();
  }
};

} // namespace
} // namespace mlir::cleave
