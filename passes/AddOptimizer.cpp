//===- AddOptimizer.cpp - the optimizer phase of a training step ----------===//
//
// Turns the gradients -cleave-differentiate returns into in-place updates of
// the parameters, as `torch.optim.AdamW` / `SGD` (and
// `clip_grad_norm_`) would apply them after `loss.backward()`. The step
// counter is training state too, so a checkpoint of the persistent tensors
// holds everything a resumed run needs.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/TensorParallel.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <numeric>

namespace mlir::cleave {
#define GEN_PASS_DEF_ADDOPTIMIZER
#include "passes/Passes.h.inc"

namespace {

struct AddOptimizerPass : impl::AddOptimizerBase<AddOptimizerPass> {
  using AddOptimizerBase::AddOptimizerBase;

  /// The options as torch checks them; the defaults as torch has them.
  LogicalResult checkOptions(func::FuncOp func) {
    auto fail = [&](const Twine &message) {
      return func.emitError("cleave-add-optimizer: ") << message;
    };
    if (optimizer != "adamw" && optimizer != "sgd")
      return fail("optimizer must be adamw or sgd, got '" + optimizer + "'");
    if (lr < 0) {
      if (optimizer == "sgd")
        return fail("sgd has no default learning rate (torch.optim.SGD requires lr): give one");
      lr = 1e-3;
    }
    if (weightDecay < 0)
      weightDecay = optimizer == "adamw" ? 1e-2 : 0.0;
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
      return fail("betas must be in [0, 1)");
    if (!(eps >= 0) || !(momentum >= 0) || !(dampening >= 0) || !(clipGradNorm >= 0))
      return fail("eps, momentum, dampening and clip-grad-norm must be >= 0");
    if (nesterov && (momentum <= 0 || dampening != 0))
      return fail("nesterov momentum requires a momentum and zero dampening");
    if (optimizer == "adamw" && (momentum != 0 || dampening != 0 || nesterov))
      return fail("momentum, dampening and nesterov are SGD's options, not AdamW's");
    if (lrSchedule != "constant" && lrSchedule != "linear" && lrSchedule != "cosine")
      return fail("lr-schedule must be constant, linear or cosine, got '" + lrSchedule + "'");
    if (warmupSteps < 0 || decaySteps < 0)
      return fail("warmup-steps and decay-steps must be >= 0");
    if (lrSchedule != "constant" && decaySteps == 0)
      return fail("a " + lrSchedule + " schedule needs decay-steps: the step where it reaches 0");
    return success();
  }

  /// A parameter whose updated part goes back into it.
  struct PartGather {
    ParamOp param;
    StateOp part;
    StringAttr group;
    int64_t ranks;
  };

  /// The updated parts back into their parameters, at the end of the step,
  /// packed in update order into all_gathers of at most gatherBytes: each
  /// rank's parts side by side ([K]), gathered ([ranks, K]: row r rank r's),
  /// each parameter's columns cut out, its padding dropped.
  void gatherParts(func::ReturnOp ret, ArrayRef<PartGather> gathers) {
    OpBuilder b(ret);
    MLIRContext *context = ret.getContext();
    auto partType = [](PartGather g) { return cast<RankedTensorType>(g.part.getType()); };
    size_t first = 0;
    while (first < gathers.size()) {
      // A bucket: consecutive parts of one element type and group.
      PartGather head = gathers[first];
      Type element = partType(head).getElementType();
      int64_t elementBytes = (partType(head).getElementTypeBitWidth() + 7) / 8;
      int64_t bytes = 0;
      size_t end = first;
      while (end < gathers.size()) {
        PartGather g = gathers[end];
        int64_t more = g.ranks * partType(g).getNumElements() * elementBytes;
        if (end > first && (partType(g).getElementType() != element || g.group != head.group ||
                            g.ranks != head.ranks || bytes + more > gatherBytes))
          break;
        bytes += more;
        ++end;
      }
      ArrayRef<PartGather> bucket = gathers.slice(first, end - first);
      first = end;

      Location loc = NameLoc::get(StringAttr::get(context, "optimizer"), ret.getLoc());
      SmallVector<Value> parts;
      for (PartGather g : bucket)
        parts.push_back(reloadState(b, g.part)); // the updated contents
      Value packed = parts.size() == 1 ? parts.front()
                                       : b.create<ConcatOp>(loc, parts, 0).getResult();
      int64_t width = cast<RankedTensorType>(packed.getType()).getDimSize(0);
      int64_t ranks = head.ranks;
      Value all = b.create<AllGatherOp>(loc, RankedTensorType::get({ranks * width}, element),
                                        packed, head.group, b.getI64IntegerAttr(0),
                                        b.getI64IntegerAttr(1));
      Value rows = b.create<ReshapeOp>(loc, RankedTensorType::get({ranks, width}, element), all);
      int64_t offset = 0;
      for (PartGather g : bucket) {
        auto paramType = cast<RankedTensorType>(g.param.getType());
        int64_t k = partType(g).getNumElements(), numel = paramType.getNumElements();
        Value mine = rows;
        if (bucket.size() > 1)
          mine = b.create<SliceOp>(loc, rows, 1, offset, offset + k, 1);
        offset += k;
        Value whole = mine;
        if (ranks * k != numel) {
          whole = b.create<ReshapeOp>(loc, RankedTensorType::get({ranks * k}, element), whole);
          whole = b.create<SliceOp>(loc, whole, 0, 0, numel, 1);
        }
        if (whole.getType() != paramType)
          whole = b.create<ReshapeOp>(loc, paramType, whole);
        b.create<AssignOp>(loc, g.param, whole);
      }
    }
  }

  /// A sharded gradient is the flat part shardRows gives a rank.
  static LogicalResult checkShard(func::FuncOp func, ParamOp param, Value gradient,
                                  DictionaryAttr shard) {
    auto type = cast<RankedTensorType>(param.getType());
    auto gradientType = dyn_cast<RankedTensorType>(gradient.getType());
    if (!shard)
      return success();
    auto group = shard.getAs<StringAttr>("group");
    auto ranks = shard.getAs<IntegerAttr>("ranks");
    if (!group || !ranks || ranks.getInt() < 1)
      return func.emitError("the gradient of '")
             << param.getName() << "' has a malformed " << kShardAttr << " " << shard;
    // A parameter held as parts (ZeRO-3) is its own part's type.
    int64_t k = param->hasAttr(kShardAttr) ? type.getNumElements()
                                           : shardElements(type.getNumElements(), ranks.getInt());
    if (!gradientType || gradientType != RankedTensorType::get({k}, type.getElementType()))
      return func.emitError("the gradient of '")
             << param.getName() << "' is sharded over " << ranks.getInt() << " ranks, so it is "
             << RankedTensorType::get({k}, type.getElementType()) << ", not "
             << gradient.getType();
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (failed(checkOptions(func)))
      return signalPassFailure();
    MLIRContext *context = func.getContext();
    Block &body = func.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    llvm::StringMap<ParamOp> params;
    for (ParamOp param : body.getOps<ParamOp>())
      params[param.getName()] = param;
    // Gradient results name their parameter; the others stay results. A
    // sharded gradient (ZeRO) is this rank's part of the parameter's.
    struct Update {
      ParamOp param;
      Value gradient;
      DictionaryAttr shard; // {group, ranks}, or null
      bool inNorm = true;   // false: a tied weight's copy an earlier stage counts
    };
    SmallVector<Update> updates;
    SmallVector<Value> kept;
    SmallVector<DictionaryAttr> keptAttrs;
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto of = func.getResultAttrOfType<StringAttr>(i, "cleave.gradient_of");
      if (!of) {
        kept.push_back(value);
        DictionaryAttr attrs = func.getResultAttrDict(i);
        keptAttrs.push_back(attrs ? attrs : DictionaryAttr::get(context));
        continue;
      }
      auto it = params.find(of.getValue());
      if (it == params.end()) {
        func.emitError("result ") << i << " is the gradient of '" << of.getValue()
                                  << "', which is no parameter of the function";
        return signalPassFailure();
      }
      auto shard = func.getResultAttrOfType<DictionaryAttr>(i, kShardAttr);
      if (failed(checkShard(func, it->second, value, shard)))
        return signalPassFailure();
      updates.push_back({it->second, value, shard, !func.getResultAttr(i, kTiedCopyAttr)});
    }
    // clip_grad_norm_ over a pipeline: each stage's sum of squares goes to
    // every other stage, and every stage adds them in stage order, so all
    // get the same norm (the stage's step records the stages and a free tag).
    auto pipeline = func->getAttrOfType<DictionaryAttr>(kPipelineAttr);
    auto sumOverStages = [&](OpBuilder &b, Location loc, Value total) -> Value {
      if (!pipeline)
        return total;
      int64_t stages = pipeline.getAs<IntegerAttr>("stages").getInt();
      int64_t tag = pipeline.getAs<IntegerAttr>("free_tag").getInt();
      int64_t stage = func->getAttrOfType<IntegerAttr>("cleave.stage").getInt();
      for (int64_t t = 0; t < stages; ++t)
        if (t != stage)
          b.create<SendOp>(loc, total, b.getI64IntegerAttr(t), b.getI64IntegerAttr(tag + stage));
      Value sum;
      for (int64_t t = 0; t < stages; ++t) {
        Value part = t == stage ? total
                                : b.create<RecvOp>(loc, total.getType(), b.getI64IntegerAttr(t),
                                                   b.getI64IntegerAttr(tag + t))
                                      .getResult();
        sum = sum ? b.create<AddOp>(loc, sum, part).getResult() : part;
      }
      return sum;
    };
    // A pipeline stage may hold no trained weight (only the loss, say):
    // its step has nothing to update.
    if (updates.empty() && func->hasAttr("cleave.stage")) {
      // It still adds its (zero) share to a norm over the stages.
      if (clipGradNorm > 0 && pipeline) {
        OpBuilder b(ret);
        Location loc = NameLoc::get(StringAttr::get(context, "optimizer"), func.getLoc());
        Operation *before = ret->getPrevNode();
        auto type = RankedTensorType::get({}, b.getF32Type());
        Value zero = b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
        (void)sumOverStages(b, loc, zero);
        markPhaseStart(func.front(), before, kOptimizerPhase);
      }
      return;
    }
    if (updates.empty()) {
      func.emitError("no gradients to apply: run -cleave-differentiate first");
      return signalPassFailure();
    }

    Value step = getOrCreateStepCounter(func);
    if (!step)
      return signalPassFailure();
    Operation *lastBackward = ret->getPrevNode();
    OpBuilder b(ret);
    Location loc = NameLoc::get(StringAttr::get(context, "optimizer"), func.getLoc());
    auto f32Scalar = [&](double v) -> Value {
      auto type = RankedTensorType::get({}, b.getF32Type());
      return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, b.getF32FloatAttr(v)));
    };

    // clip_grad_norm_: the global L2 norm over every gradient. The squares
    // of sharded gradients are summed over their group first (the padding
    // is zero): ZeRO parts over the dp group, then the parts of weights
    // split over a tp group over that group (whole ones count once).
    Value scale;
    if (clipGradNorm > 0) {
      Value totals[2], shardedTotals[2]; // [tp split]
      StringAttr shardGroup;
      for (auto [param, gradient, shard, inNorm] : updates) {
        if (!inNorm)
          continue;
        auto type = llvm::cast<RankedTensorType>(gradient.getType());
        if (!type.getElementType().isF32()) {
          param.emitError("clipping needs f32 gradients, '") << param.getName() << "' has "
                                                            << type;
          return signalPassFailure();
        }
        SmallVector<int64_t> dims(type.getRank());
        std::iota(dims.begin(), dims.end(), 0);
        Value squares = b.create<MulOp>(loc, gradient, gradient);
        Value sum = dims.empty() ? squares
                                 : b.create<ReduceSumOp>(loc, squares, b.getDenseI64ArrayAttr(dims),
                                                         b.getBoolAttr(false))
                                       .getResult();
        FailureOr<TensorSharding> layout = annotatedLayout(param.getResult());
        if (failed(layout))
          return signalPassFailure();
        bool split = layout->kind == TensorSharding::Sharded;
        Value &into = shard ? shardedTotals[split] : totals[split];
        into = into ? b.create<AddOp>(loc, into, sum).getResult() : sum;
        if (shard)
          shardGroup = shard.getAs<StringAttr>("group");
      }
      auto add = [&](Value x, Value y) {
        return x && y ? b.create<AddOp>(loc, x, y).getResult() : x ? x : y;
      };
      for (int split : {0, 1})
        if (shardedTotals[split])
          totals[split] = add(totals[split],
                              b.create<AllReduceOp>(loc, shardedTotals[split].getType(),
                                                    shardedTotals[split], shardGroup));
      if (totals[1])
        totals[1] = b.create<AllReduceOp>(loc, totals[1].getType(), totals[1],
                                          b.getStringAttr("tp"));
      Value total = add(totals[0], totals[1]);
      if (!total)
        total = f32Scalar(0); // only tied copies here: the other stages count them
      total = sumOverStages(b, loc, total);
      Value norm = b.create<SqrtOp>(loc, total);
      Value coefficient = b.create<DivOp>(loc, f32Scalar(clipGradNorm),
                                          b.create<AddOp>(loc, norm, f32Scalar(1e-6)));
      scale = b.create<MinimumOp>(loc, coefficient, f32Scalar(1.0));
    }

    // Early updates: each one goes right after the later of its gradient's
    // definition and the parameter's last reader (the return aside).
    bool early = earlyUpdates && !scale;
    llvm::DenseMap<Operation *, Operation *> placeAfter; // param -> op
    Operation *firstPlace = nullptr;
    if (early) {
      for (auto [param, gradient, shard, inNorm] : updates) {
        Operation *last = gradient.getDefiningOp();
        for (Operation *user : param->getUsers())
          if (user != ret && (!last || last->isBeforeInBlock(user)))
            last = user;
        if (!last)
          last = param;
        placeAfter[param] = last;
        if (!firstPlace || last->isBeforeInBlock(firstPlace))
          firstPlace = last;
      }
    }

    // step + 1 before the updates read it (the first update is step 1); the
    // counter itself is written back last, after every reader of the old
    // value (dropout masks in backward).
    auto stepType = llvm::cast<RankedTensorType>(step.getType());
    if (early)
      b.setInsertionPointAfter(firstPlace);
    Value one = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(stepType, IntegerAttr::get(stepType.getElementType(), 1)));
    Value next = b.create<AddOp>(loc, step, one);
    b.setInsertionPoint(ret);
    Operation *writeBack = b.create<AssignOp>(loc, step, next);

    SmallVector<PartGather> gathers;
    StringAttr schedule = b.getStringAttr(lrSchedule);
    IntegerAttr warmup = b.getI64IntegerAttr(warmupSteps), decay = b.getI64IntegerAttr(decaySteps);
    for (auto [param, gradient, shard, inNorm] : updates) {
      auto type = llvm::cast<RankedTensorType>(param.getType());
      std::string name = param.getName().str();
      Location at = NameLoc::get(StringAttr::get(context, "optimizer"), param.getLoc());
      if (early) {
        Operation *after = placeAfter[param];
        // `next` is defined after the first place; a place before it moves down.
        if (after->isBeforeInBlock(next.getDefiningOp()))
          after = next.getDefiningOp();
        b.setInsertionPointAfter(after);
      } else {
        b.setInsertionPoint(ret);
      }
      // ZeRO: the update runs on this rank's part of the parameter, copied
      // into a state each step (the optimizer updates persistent tensors in
      // place); the parts go back into the parameters at the end of the step.
      Value target = param;
      StringAttr group;
      int64_t ranks = 1;
      DictionaryAttr stateShard;
      bool gatherBack = false;
      if (shard && param->hasAttr(kShardAttr)) {
        // ZeRO-3: the parameter is the rank's part; its readers gather it.
        stateShard = param->getAttrOfType<DictionaryAttr>(kShardAttr);
      } else if (shard) {
        gatherBack = true;
        group = shard.getAs<StringAttr>("group");
        ranks = shard.getAs<IntegerAttr>("ranks").getInt();
        auto partType = cast<RankedTensorType>(gradient.getType());
        stateShard = shardAttr(context, group, ranks, type.getShape());
        StateOp part = getOrCreateState(func, "zero.param_shard." + name, partType);
        if (!part)
          return signalPassFailure();
        // The part also names its parameter (the plan lists what trains).
        SmallVector<NamedAttribute> entries(stateShard.getValue());
        entries.push_back(b.getNamedAttr("param", param.getNameAttr()));
        part->setAttr(kShardAttr, b.getDictionaryAttr(entries));
        Value rows = shardRows(b, at, param, ranks);
        Value mine = b.create<ShardOp>(at, RankedTensorType::get({1, partType.getDimSize(0)},
                                                                 partType.getElementType()),
                                       rows, group, b.getI64IntegerAttr(0), b.getI64IntegerAttr(1));
        b.create<AssignOp>(at, part, b.create<ReshapeOp>(at, partType, mine));
        target = reloadState(b, part);
        type = partType;
      }
      auto state = [&](const std::string &stateName) {
        StateOp made = getOrCreateState(func, stateName, type);
        if (made && stateShard)
          made->setAttr(kShardAttr, stateShard);
        // A tp rank's part of a split weight has its part of the state: the
        // plan names it so (a checkpoint assembles the parts).
        FailureOr<TensorSharding> layout = annotatedLayout(param.getResult());
        if (made && succeeded(layout) && layout->kind == TensorSharding::Sharded)
          made->setAttr(kTpLayoutAttr, b.getStringAttr(layout->str()));
        return made;
      };
      if (optimizer == "adamw") {
        StateOp expAvg = state("optimizer.exp_avg." + name);
        StateOp expAvgSq = state("optimizer.exp_avg_sq." + name);
        if (!expAvg || !expAvgSq)
          return signalPassFailure();
        b.create<AdamWOp>(at, target, gradient, expAvg, expAvgSq, next, scale,
                          b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
                          b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps),
                          b.getF64FloatAttr(weightDecay), schedule, warmup, decay);
      } else {
        Value buffer;
        if (momentum != 0) {
          StateOp made = state("optimizer.momentum_buffer." + name);
          if (!made)
            return signalPassFailure();
          buffer = made;
        }
        b.create<SgdOp>(at, target, gradient, buffer, next, scale, b.getF64FloatAttr(lr),
                        b.getF64FloatAttr(momentum), b.getF64FloatAttr(dampening),
                        b.getBoolAttr(nesterov), b.getF64FloatAttr(weightDecay), schedule, warmup,
                        decay);
      }
      if (gatherBack)
        gathers.push_back({param, cast<StateOp>(target.getDefiningOp()), group, ranks});
    }
    gatherParts(ret, gathers);

    ret->setOperands(kept);
    func.setType(FunctionType::get(context, func.getArgumentTypes(), ValueRange(kept).getTypes()));
    func.setAllResultAttrs(keptAttrs);
    if (early)
      writeBack->setAttr(kPhaseAttr, StringAttr::get(context, kOptimizerPhase));
    else
      markPhaseStart(body, lastBackward, kOptimizerPhase);
  }
};

} // namespace
} // namespace mlir::cleave
