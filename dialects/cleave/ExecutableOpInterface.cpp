//===- ExecutableOpInterface.cpp - how cleave ops execute in a plan -------===//

#include "dialects/cleave/CleaveDialect.h"
#include "runtime/cpu/ConvScratch.h"

using namespace mlir;
using namespace mlir::cleave;

#include "dialects/cleave/CleaveInterfaces.cpp.inc"

SmallVector<NamedAttribute> mlir::cleave::getDefaultKernelAttributes(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : op->getAttrs()) {
    StringRef name = attr.getName().getValue();
    if (name == "operandSegmentSizes" || name.contains('.'))
      continue;
    attrs.push_back(attr);
  }
  return attrs;
}

namespace {
/// The default attributes with one enum attribute replaced by its spelling.
SmallVector<NamedAttribute> withEnumSpelled(Operation *op, StringRef name, StringRef spelling) {
  SmallVector<NamedAttribute> attrs = getDefaultKernelAttributes(op);
  llvm::erase_if(attrs, [&](NamedAttribute a) { return a.getName() == name; });
  attrs.push_back(NamedAttribute(StringAttr::get(op->getContext(), name),
                                 StringAttr::get(op->getContext(), spelling)));
  return attrs;
}

::cleave::runtime::Shape shapeOf(Value v) {
  auto dims = llvm::cast<RankedTensorType>(v.getType()).getShape();
  return ::cleave::runtime::Shape(dims.begin(), dims.end());
}
} // namespace

SmallVector<NamedAttribute> CompareOp::getKernelAttributes() {
  return withEnumSpelled(*this, "predicate", stringifyComparePredicate(getPredicate()));
}

SmallVector<NamedAttribute> GeluOp::getKernelAttributes() {
  return withEnumSpelled(*this, "approximation", stringifyGeluApproximation(getApproximation()));
}

SmallVector<NamedAttribute> ScatterOp::getKernelAttributes() {
  return withEnumSpelled(*this, "reduce", stringifyScatterReduce(getReduce()));
}

/// Inference: dropout is the identity, its result the input's buffer.
std::optional<unsigned> DropoutOp::getViewedOperand() { return 0; }

std::optional<unsigned> ReshapeOp::getViewedOperand() {
  // Tensors are dense and row-major, so a reshape never moves an element.
  return 0;
}

namespace {
/// The CPU kernel's im2col matrix or oneDNN's copies (ConvScratch.h); the
/// runtime checks the same formula.
template <typename Conv> int64_t convScratchBytes(Conv op) {
  Type elementType = op.getInput().getType().getElementType();
  return static_cast<int64_t>(::cleave::runtime::conv2dScratchBytes(
      shapeOf(op.getInput()), shapeOf(op.getWeight()), shapeOf(op.getResult()), op.getGroups(),
      op.getStride().vec(), op.getPadding().vec(), op.getDilation().vec(),
      elementType.isBF16()  ? ::cleave::runtime::DType::BF16
      : elementType.isF16() ? ::cleave::runtime::DType::F16
                            : ::cleave::runtime::DType::F32));
}
} // namespace

int64_t Conv2dOp::getScratchBytes() { return convScratchBytes(*this); }
int64_t FusedConv2dOp::getScratchBytes() { return convScratchBytes(*this); }
