//===- ShapeInference.cpp - result types of cleave ops --------------------===//

#include "dialects/cleave/ShapeInference.h"

#include "mlir/IR/Operation.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;

namespace mlir::cleave {

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes) {
  size_t rank = 0;
  for (auto shape : shapes)
    rank = std::max(rank, shape.size());
  llvm::SmallVector<int64_t> result(rank, 1);
  for (auto shape : shapes) {
    size_t offset = rank - shape.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t &dim = result[offset + i];
      if (shape[i] == dim || shape[i] == 1)
        continue;
      if (dim != 1)
        return std::nullopt;
      dim = shape[i];
    }
  }
  return result;
}

LogicalResult inferBroadcastType(std::optional<Location> loc,
                                 ArrayRef<Type> values, ArrayRef<Type> shapeOnly,
                                 Type elementType,
                                 SmallVectorImpl<Type> &results) {
  llvm::SmallVector<llvm::ArrayRef<int64_t>> shapes;
  Type common;
  for (Type type : llvm::concat<const Type>(values, shapeOnly)) {
    auto tensor = llvm::dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return emitOptionalError(loc, "expected ranked tensor operands");
    shapes.push_back(tensor.getShape());
  }
  for (Type type : values) {
    Type et = llvm::cast<RankedTensorType>(type).getElementType();
    if (common && common != et)
      return emitOptionalError(loc, "operands have different element types (",
                               common, " and ", et,
                               "); a cleave.cast must promote them first");
    common = et;
  }
  auto shape = broadcastShapes(shapes);
  if (!shape) {
    std::string types;
    llvm::raw_string_ostream os(types);
    llvm::interleaveComma(llvm::concat<const Type>(values, shapeOnly), os);
    return emitOptionalError(loc, "operand shapes do not broadcast: ", types);
  }
  results.push_back(
      RankedTensorType::get(*shape, elementType ? elementType : common));
  return success();
}

LogicalResult inferReductionType(std::optional<Location> loc, Type input,
                                 ArrayRef<int64_t> dims, bool keepdim,
                                 SmallVectorImpl<Type> &results) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(input);
  if (!tensor)
    return emitOptionalError(loc, "expected a ranked tensor");
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= tensor.getRank())
      return emitOptionalError(loc, "reduction dim ", dim,
                               " is out of range for rank ", tensor.getRank());
    if (!reduced.insert(dim).second)
      return emitOptionalError(loc, "reduction dim ", dim, " appears twice");
  }
  llvm::SmallVector<int64_t> shape;
  for (int64_t i = 0; i < tensor.getRank(); ++i) {
    if (!reduced.contains(i))
      shape.push_back(tensor.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, tensor.getElementType()));
  return success();
}

LogicalResult inferIndexReductionTypes(std::optional<Location> loc, Type input, int64_t dim,
                                       bool keepdim, SmallVectorImpl<Type> &results) {
  if (failed(inferReductionType(loc, input, {dim}, keepdim, results)))
    return failure();
  auto values = llvm::cast<RankedTensorType>(results.back());
  results.push_back(
      RankedTensorType::get(values.getShape(), IntegerType::get(input.getContext(), 64)));
  return success();
}

LogicalResult inferValuesAndIndicesTypes(Type input, SmallVectorImpl<Type> &results) {
  auto type = llvm::cast<RankedTensorType>(input);
  results.push_back(type);
  results.push_back(RankedTensorType::get(type.getShape(), IntegerType::get(input.getContext(), 64)));
  return success();
}

LogicalResult inferLossType(std::optional<Location> loc, Type input, Type target,
                            StringRef reduction, SmallVectorImpl<Type> &results) {
  if (failed(inferBroadcastType(loc, {input, target}, /*shapeOnly=*/{}, /*elementType=*/nullptr,
                                results)))
    return failure();
  if (reduction != "none")
    results.back() =
        RankedTensorType::get({}, llvm::cast<RankedTensorType>(results.back()).getElementType());
  return success();
}

LogicalResult verifyLoss(Operation *op, StringRef reduction) {
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    return op->emitOpError() << "reduction '" << reduction << "' is not none, mean or sum";
  return success();
}

} // namespace mlir::cleave
