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

  explicit Runs(Block &body) {
    std::vector<size_t> slotOfOp;
    phaseSlotsOf(body, slotOfOp);
    std::string layer;
    size_t index = 0;
    for (Operation &op : body) {
      size_t s = slotOfOp[index++];
      if (isa<ParamOp, StateOp, ConstantOp>(op) || op.hasTrait<OpTrait::IsTerminator>())
        continue;
      std::string here = layerOfScope(moduleScope(op.getLoc()));
      if (firstOp.empty() || slot.back() != s || here != layer) {
        firstOp.push_back(&op);
        slot.push_back(s);
        layer = here;
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
};

/// The update op (adamw, sgd) that steps `param`, if any.
Operation *updateOf(ParamOp param) {
  for (Operation *user : param->getUsers())
    if (isa<AdamWOp, SgdOp>(user) && user->getOperand(0) == param.getResult())
      return user;
  return nullptr;
}

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
    if (spilled.empty())
      return;

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
        Operation *point = runs.prefetchPoint(run);
        OpBuilder builder(point);
        auto prefetch = builder.create<PrefetchOp>(param.getLoc(), param.getResult());
        // The prefetch now opens the phase (slot) its point opened.
        for (StringRef mark : {kPhaseAttr, kPhaseChunkAttr, kPhaseMicrobatchAttr})
          if (Attribute value = point->getAttr(mark)) {
            prefetch->setAttr(mark, value);
            point->removeAttr(mark);
          }
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
  }
};

} // namespace
} // namespace mlir::cleave
