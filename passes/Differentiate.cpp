//===- Differentiate.cpp - reverse-mode gradients of the loss -------------===//
//
// The forward pass is one straight-line block, so reverse mode is a single
// backward walk: each op that a gradient reaches builds its operands'
// gradients from its results' (GradientOpInterface), and a value read by
// several ops sums their contributions. The backward ops are appended in
// that order, which is the order a backward pass runs in: the memory planner
// then keeps each forward value exactly until its last backward reader.
//
// A tensor-parallel step (after -cleave-local-shapes) is differentiated as
// each rank's program: every rule runs on the rank's part. Every rank of
// the tp group computes the same loss, so a gradient has its value's layout
// (the layout changes' rules keep it so), with one exception: an op split
// along a factor an operand lacks (a column-parallel linear's input) gives
// that whole operand only this rank's share of its gradient, a partial sum.
// The shares of a value are summed over the group (one all-reduce per value,
// after adding them up locally) before the gradient is used: the
// input-gradient all-reduce of a column split, and of a whole weight read by
// split ops (a layer norm's under sequence parallelism).
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "passes/TensorParallel.h"
#include "passes/Training.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "passes/Passes.h.inc"

namespace {

bool isFloat(Value v) {
  return llvm::isa<FloatType>(llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

/// A constant of `type` whose every element is one: the loss's own gradient.
Value ones(OpBuilder &b, Location loc, RankedTensorType type) {
  auto element = llvm::cast<FloatType>(type.getElementType());
  APFloat one(1.0);
  bool lost;
  one.convert(element.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, FloatAttr::get(element, one)));
}

/// The gradient of a value from its users' contributions, in the order they
/// arrived: their sum, or, when they are the gradients of slices that tile
/// one dim (q, k and v split off one projection), their concatenation: no
/// zero-filled tensors to add.
Value combine(OpBuilder &builder, Location loc, ArrayRef<Value> parts) {
  if (parts.size() == 1)
    return parts.front();
  SmallVector<SliceBackwardOp> slices;
  for (Value part : parts) {
    auto slice = part.getDefiningOp<SliceBackwardOp>();
    if (!slice || slice.getStep() != 1 ||
        (!slices.empty() && slice.getDim() != slices.front().getDim())) {
      slices.clear();
      break;
    }
    slices.push_back(slice);
  }
  if (!slices.empty()) {
    llvm::sort(slices, [](SliceBackwardOp a, SliceBackwardOp b) { return a.getStart() < b.getStart(); });
    int64_t dim = static_cast<int64_t>(slices.front().getDim());
    int64_t size = llvm::cast<RankedTensorType>(parts.front().getType()).getDimSize(dim);
    uint64_t next = 0;
    for (SliceBackwardOp slice : slices) {
      if (slice.getStart() != next)
        break;
      next = slice.getEnd();
    }
    if (next == static_cast<uint64_t>(size)) {
      SmallVector<Value> pieces;
      for (SliceBackwardOp slice : slices)
        pieces.push_back(slice.getGrad());
      return builder.create<ConcatOp>(loc, pieces, dim);
    }
  }
  Value sum = parts.front();
  for (Value part : parts.drop_front())
    sum = builder.create<AddOp>(loc, sum, part);
  return sum;
}

/// The tp degree of a per-rank tensor-parallel program, else 1.
int64_t tensorParallelDegree(func::FuncOp func) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module || !module->hasAttr("cleave.local_shapes"))
    return 1;
  auto mesh = module->getAttrOfType<DictionaryAttr>("cleave.mesh");
  auto tp = mesh ? mesh.getAs<IntegerAttr>("tp") : IntegerAttr();
  return tp ? tp.getInt() : 1;
}

struct DifferentiatePass : impl::DifferentiateBase<DifferentiatePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!llvm::hasSingleElement(func.getBody())) {
      func.emitError("cleave-differentiate needs a function of one block");
      return signalPassFailure();
    }
    Block &body = func.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1) {
      func.emitError("cleave-differentiate needs a function that returns one value, the loss "
                     "(run -cleave-append-loss first); it returns ")
          << ret.getNumOperands();
      return signalPassFailure();
    }
    Value loss = ret.getOperand(0);
    auto lossType = llvm::cast<RankedTensorType>(loss.getType());
    if (!isFloat(loss) || lossType.getNumElements() != 1) {
      func.emitError("the loss must be one floating-point value, got ") << lossType;
      return signalPassFailure();
    }

    // The values a gradient can reach: those computed from a trainable
    // parameter. Everything else (inputs, buffers, masks) gets none.
    llvm::DenseSet<Value> varying;
    SmallVector<ParamOp> trainable;
    SmallVector<Operation *> forward;
    for (Operation &op : body) {
      if (&op == ret)
        break;
      forward.push_back(&op);
      if (auto param = dyn_cast<ParamOp>(op)) {
        if (isTrainable(param)) {
          varying.insert(param);
          trainable.push_back(param);
        }
        continue;
      }
      if (llvm::any_of(op.getOperands(), [&](Value v) { return varying.contains(v); }))
        for (Value result : op.getResults())
          if (isFloat(result))
            varying.insert(result);
    }
    if (trainable.empty()) {
      func.emitError("the model has no trainable parameters");
      return signalPassFailure();
    }
    if (!varying.contains(loss)) {
      func.emitError("the loss does not depend on any trainable parameter");
      return signalPassFailure();
    }

    OpBuilder builder(ret);
    Operation *lastForward = ret->getPrevNode();
    const int64_t tp = tensorParallelDegree(func);
    // Each value's gradient contributions, summed when its definition is
    // reached: every user comes after it, so all have arrived by then.
    // Under tensor parallelism some are this rank's partial sums.
    struct Contribution {
      Value gradient;
      bool partial; // this rank's share of a whole value's gradient
    };
    llvm::DenseMap<Value, SmallVector<Contribution, 2>> contributions;
    contributions[loss].push_back({ones(builder, loss.getLoc(), lossType), false});
    auto gradientOf = [&](Value value, Location loc) -> Value {
      auto it = contributions.find(value);
      if (it == contributions.end())
        return Value();
      SmallVector<Value, 2> whole, partial;
      for (const Contribution &part : it->second)
        (part.partial ? partial : whole).push_back(part.gradient);
      contributions.erase(it);
      if (!partial.empty()) {
        Value sum = combine(builder, loc, partial);
        whole.push_back(builder.create<AllReduceOp>(loc, sum.getType(), sum,
                                                    builder.getStringAttr("tp")));
      }
      return combine(builder, loc, whole);
    };
    // The backward ops built for `op` (since `before`) inherit its
    // placement: the pipeline runs them on the stage (chunk) that ran it.
    auto inheritPlacement = [&](Operation *op, Operation *before) {
      for (Operation *b = before->getNextNode(); b && b != ret; b = b->getNextNode())
        for (StringRef name : kPlacementAttrs)
          if (Attribute a = op->getAttr(name); a && !b->hasAttr(name))
            b->setAttr(name, a);
    };
    for (Operation *op : llvm::reverse(forward)) {
      if (isa<ParamOp, StateOp, ConstantOp>(op))
        continue;
      Operation *before = ret->getPrevNode();
      auto placed = llvm::make_scope_exit([&] { inheritPlacement(op, before); });
      SmallVector<Value> resultGradients;
      bool reached = false;
      for (Value result : op->getResults()) {
        resultGradients.push_back(gradientOf(result, op->getLoc()));
        reached |= static_cast<bool>(resultGradients.back());
      }
      if (!reached ||
          llvm::none_of(op->getOperands(), [&](Value v) { return varying.contains(v); }))
        continue;
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule) {
        (void)noGradientRule(op);
        return signalPassFailure();
      }
      SmallVector<Value> operandGradients(op->getNumOperands());
      if (failed(rule.buildGradients(builder, resultGradients, operandGradients)))
        return signalPassFailure();
      // Split along a parallel factor (a result is split), the op gives
      // its whole operands partial gradients.
      bool parallelSplit = false;
      if (tp > 1 && !op->hasTrait<trait::LayoutChange>())
        for (Value result : op->getResults()) {
          FailureOr<TensorSharding> layout = annotatedLayout(result);
          if (failed(layout))
            return signalPassFailure();
          parallelSplit |= layout->kind == TensorSharding::Sharded;
        }
      for (auto [operand, gradient] : llvm::zip(op->getOperands(), operandGradients)) {
        if (!gradient || !varying.contains(operand))
          continue;
        if (gradient.getType() != operand.getType()) {
          op->emitError("internal error: the gradient rule of ")
              << op->getName() << " gives " << gradient.getType() << " for an operand of type "
              << operand.getType();
          return signalPassFailure();
        }
        bool partial = false;
        if (tp > 1) {
          FailureOr<TensorSharding> layout = annotatedLayout(operand);
          if (failed(layout))
            return signalPassFailure();
          if (parallelSplit && layout->kind == TensorSharding::Replicated)
            partial = true;
          // A split gradient's op says how it is laid out (an embedding
          // table's gradient needs its rank's rows when specialized).
          Operation *def = gradient.getDefiningOp();
          if (layout->kind == TensorSharding::Sharded && def && def->getNumResults() == 1 &&
              !def->hasAttr("cleave.sharding") && before->isBeforeInBlock(def))
            def->setAttr("cleave.sharding", builder.getArrayAttr({builder.getStringAttr(
                                                layout->str())}));
        }
        contributions[operand].push_back({gradient, partial});
      }
    }

    // The loss, then one gradient per trainable parameter it depends on.
    MLIRContext *context = func.getContext();
    SmallVector<Value> results{loss};
    SmallVector<DictionaryAttr> resultAttrs{func.getResultAttrDict(0)};
    auto placementOf = [](Value v) {
      Operation *def = v.getDefiningOp();
      SmallVector<Attribute> placement;
      for (StringRef name : kPlacementAttrs)
        placement.push_back(def ? def->getAttr(name) : Attribute());
      return placement;
    };
    for (ParamOp param : trainable) {
      // A weight read in several placements (tied): its gradient sums
      // partial gradients that the pipeline sums across stages.
      bool tied = false;
      SmallVector<Attribute> placement;
      if (auto it = contributions.find(param); it != contributions.end()) {
        placement = placementOf(it->second.front().gradient);
        for (const Contribution &part : it->second)
          tied |= placementOf(part.gradient) != placement;
      }
      Operation *before = ret->getPrevNode();
      Value gradient = gradientOf(param, param.getLoc());
      if (!gradient)
        continue;
      for (Operation *b = before->getNextNode(); b && b != ret; b = b->getNextNode()) {
        if (tied) {
          b->setAttr(kTiedGradientAttr, UnitAttr::get(func.getContext()));
          continue;
        }
        for (auto [name, a] : llvm::zip(kPlacementAttrs, placement))
          if (a)
            b->setAttr(name, a);
      }
      results.push_back(gradient);
      resultAttrs.push_back(DictionaryAttr::get(
          context, {NamedAttribute(StringAttr::get(context, "cleave.name"),
                                   StringAttr::get(context, "grad." + param.getName().str())),
                    NamedAttribute(StringAttr::get(context, "cleave.gradient_of"),
                                   param.getNameAttr())}));
    }
    if (!resultAttrs[0])
      resultAttrs[0] = DictionaryAttr::get(context);
    ret->setOperands(results);
    func.setType(FunctionType::get(context, func.getArgumentTypes(), ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);

    // Rules may build gradients nothing needs (an operand's that no
    // parameter depends on): erase them, last first, so chains go too.
    for (Operation *op = ret->getPrevNode(); op && op != lastForward;) {
      Operation *previous = op->getPrevNode();
      if (op->use_empty() && isMemoryEffectFree(op))
        op->erase();
      else
        ++backwardOps;
      op = previous;
    }
    markPhaseStart(body, lastForward, kBackwardPhase);
  }
};

} // namespace
} // namespace mlir::cleave
