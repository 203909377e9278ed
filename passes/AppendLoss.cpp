//===- AppendLoss.cpp - the loss a training step minimizes ----------------===//
//
// Training differentiates one scalar. A model either computes it itself
// (`forward(x, labels)` returning `F.cross_entropy(...)`) or returns
// predictions, and the loss is appended here with a `labels` input, as a
// training loop in PyTorch would compute it.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <numeric>

namespace mlir::cleave {
#define GEN_PASS_DEF_APPENDLOSS
#include "passes/Passes.h.inc"

namespace {

std::string describe(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

struct AppendLossPass : impl::AppendLossBase<AppendLossPass> {
  using AppendLossBase::AppendLossBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (loss != "model" && loss != "cross_entropy" && loss != "mse") {
      func.emitError("cleave-append-loss: loss must be model, cross_entropy or mse, got '")
          << loss << "'";
      return signalPassFailure();
    }
    Block &body = func.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() != 1) {
      func.emitError("training needs forward to return one tensor (a scalar loss, or the "
                     "predictions a --loss is computed from); it returns ")
          << ret.getNumOperands();
      return signalPassFailure();
    }
    Value output = ret.getOperand(0);
    auto type = llvm::cast<RankedTensorType>(output.getType());
    MLIRContext *context = func.getContext();
    if (!llvm::isa<FloatType>(type.getElementType())) {
      func.emitError("the model's output is ") << type << ": a loss needs floating point";
      return signalPassFailure();
    }

    Value lossValue;
    if (loss == "model") {
      if (type.getNumElements() != 1) {
        func.emitError("--loss model needs forward to return the loss, one scalar; it returns ")
            << describe(type) << ": use --loss cross_entropy or --loss mse";
        return signalPassFailure();
      }
      lossValue = output;
    } else {
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (auto name = func.getArgAttrOfType<StringAttr>(i, "cleave.name"))
          if (name.getValue() == "labels") {
            func.emitError("the model already has an input named 'labels'; --loss ")
                << loss << " appends one: rename the model's argument or use --loss model";
            return signalPassFailure();
          }
      if (loss == "cross_entropy" && type.getRank() < 1) {
        func.emitError("--loss cross_entropy needs logits [..., C]; the model returns a scalar");
        return signalPassFailure();
      }
      Type labelsType =
          loss == "mse"
              ? Type(type)
              : Type(RankedTensorType::get(type.getShape().drop_back(), IntegerType::get(context, 64)));
      Location argLoc = NameLoc::get(StringAttr::get(context, "labels"), func.getLoc());
      unsigned index = func.getNumArguments();
      func.insertArgument(index, labelsType,
                          DictionaryAttr::get(context, {NamedAttribute(
                                                           StringAttr::get(context, "cleave.name"),
                                                           StringAttr::get(context, "labels"))}),
                          argLoc);
      Value labels = func.getArgument(index);

      OpBuilder b(ret);
      Location loc = NameLoc::get(StringAttr::get(context, "loss"), func.getLoc());
      if (loss == "cross_entropy") {
        // F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1)): the
        // log-softmax in f32 even when the model computes in bf16.
        int64_t classes = type.getShape().back();
        int64_t rows = type.getNumElements() / std::max<int64_t>(1, classes);
        Value logits = output;
        if (!type.getElementType().isF32())
          logits = b.create<CastOp>(loc, type.clone(b.getF32Type()), logits);
        auto flatType = RankedTensorType::get({rows, classes}, b.getF32Type());
        if (type.getShape() != flatType.getShape())
          logits = b.create<ReshapeOp>(loc, flatType, logits);
        Value logp = b.create<LogSoftmaxOp>(loc, logits, b.getI64IntegerAttr(1));
        Value target = labels;
        auto targetType = RankedTensorType::get({rows}, IntegerType::get(context, 64));
        if (llvm::cast<RankedTensorType>(labels.getType()).getShape() != targetType.getShape())
          target = b.create<ReshapeOp>(loc, targetType, labels);
        lossValue = b.create<NllLossOp>(loc, RankedTensorType::get({}, b.getF32Type()), logp,
                                        target, b.getStringAttr("mean"),
                                        IntegerAttr::get(IntegerType::get(context, 64, IntegerType::Signed), -100));
      } else {
        // F.mse_loss(output, labels): the mean of the squared differences.
        Value diff = b.create<SubOp>(loc, output, labels);
        Value squared = b.create<MulOp>(loc, diff, diff);
        SmallVector<int64_t> dims(type.getRank());
        std::iota(dims.begin(), dims.end(), 0);
        lossValue = b.create<ReduceMeanOp>(loc, squared, b.getDenseI64ArrayAttr(dims),
                                           b.getBoolAttr(false));
      }
    }
    ret->setOperands(lossValue);
    func.setType(FunctionType::get(context, func.getArgumentTypes(), {lossValue.getType()}));
    func.removeResAttrsAttr();
    func.setResultAttr(0, "cleave.name", StringAttr::get(context, "loss"));
  }
};

} // namespace
} // namespace mlir::cleave
