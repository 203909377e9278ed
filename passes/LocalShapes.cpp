//===- LocalShapes.cpp - per-rank shapes of a tensor-parallel program -----===//
//
// Until here the IR has the model's (global) shapes and says in
// `cleave.sharding` how each value is laid out over the tp group. This pass
// gives every value the shape one rank holds: a dim split n ways holds 1/n.
// The op verifiers then check the per-rank program: a column-parallel
// linear's weight rows must match its result's columns, a gather's result
// must be n times its operand, and so on.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/TensorParallel.h"

#include "mlir/IR/Verifier.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_LOCALSHAPES
#include "passes/Passes.h.inc"

namespace {

struct LocalShapesPass : impl::LocalShapesBase<LocalShapesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<DictionaryAttr>("cleave.mesh");
    auto tpAttr = mesh ? mesh.getAs<IntegerAttr>("tp") : IntegerAttr();
    if (!tpAttr) {
      module.emitError("has no cleave.mesh with a tp degree: plan the model first "
                       "(cleave-plan-parallelism)");
      return signalPassFailure();
    }
    int64_t tp = tpAttr.getInt();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(localize(func, tp)))
        return signalPassFailure();
    module->setAttr("cleave.local_shapes", UnitAttr::get(module.getContext()));
    if (failed(verify(module)))
      return signalPassFailure();
  }

  LogicalResult localize(func::FuncOp func, int64_t tp) {
    if (func.isExternal())
      return success();
    for (Operation &op : func.getBody().front()) {
      // Ranges a slice takes along a split dim shrink with the dim.
      if (auto slice = dyn_cast<SliceOp>(op)) {
        FailureOr<TensorSharding> in = annotatedLayout(slice.getInput());
        if (failed(in))
          return failure();
        if (in->kind == TensorSharding::Sharded && in->dim == slice.getDim() && tp > 1) {
          // The input's type is already the rank's (its definition came
          // first): the layout's blocks are blocks of the whole dim.
          int64_t size = slice.getInput().getType().getDimSize(in->dim) * tp;
          int64_t block = size / in->blocks;
          if (slice.getStep() != 1 || slice.getStart() % block || slice.getEnd() % block ||
              block % tp)
            return slice.emitError() << "takes [" << slice.getStart() << ", " << slice.getEnd()
                                     << ") of dim " << in->dim << ", which is laid out as "
                                     << in->str() << " over " << tp
                                     << " ranks: not whole blocks of the layout";
          slice.setStart(slice.getStart() / tp);
          slice.setEnd(slice.getEnd() / tp);
        }
      }
      for (OpResult result : op.getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type)
          continue;
        FailureOr<TensorSharding> layout = annotatedLayout(result);
        if (failed(layout))
          return failure();
        if (layout->kind != TensorSharding::Sharded)
          continue;
        SmallVector<int64_t> shape(type.getShape());
        int64_t dim = layout->dim;
        if (dim < 0 || dim >= type.getRank() || shape[dim] % (tp * layout->blocks))
          return op.emitError() << "result " << result.getResultNumber() << " of type " << type
                                << " cannot be laid out as " << layout->str() << " over " << tp
                                << " ranks";
        shape[dim] /= tp;
        result.setType(RankedTensorType::get(shape, type.getElementType()));
      }
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setFunctionType(FunctionType::get(func.getContext(), func.getArgumentTypes(),
                                           ret.getOperandTypes()));
    return success();
  }
};

} // namespace
} // namespace mlir::cleave
