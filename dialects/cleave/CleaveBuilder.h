//===- CleaveBuilder.h - building cleave ops in rules ------------*- C++ -*-===//
//
// A small builder for the rules that write cleave ops: gradient rules
// (GradientOps.cpp) and decompositions (Decompositions.cpp). Every op gets
// one location; ops that infer their result type are built without one.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEBUILDER_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEBUILDER_H

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <numeric>

namespace mlir::cleave {

inline RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
inline bool isFloat(Value v) { return llvm::isa<FloatType>(typeOf(v).getElementType()); }

/// Builds cleave ops at one place with one location.
struct CleaveBuilder {
  OpBuilder &b;
  Location loc;

  /// `value` as an element of `elementType` (rounded to a float type, truncated to an
  /// integer one, non-zero for i1).
  Attribute element(double value, Type elementType) {
    if (auto floatType = llvm::dyn_cast<FloatType>(elementType)) {
      APFloat v(value);
      bool lost;
      v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      return FloatAttr::get(floatType, v);
    }
    if (elementType.isInteger(1))
      return b.getBoolAttr(value != 0);
    return IntegerAttr::get(elementType, static_cast<int64_t>(value));
  }
  /// A constant of `type` holding `value` everywhere.
  Value splat(double value, RankedTensorType type) {
    return b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, element(value, type.getElementType())));
  }
  /// A 0-d constant of `elementType` (broadcasts against any shape).
  Value scalar(double value, Type elementType) {
    return splat(value, RankedTensorType::get({}, elementType));
  }
  Value scalarLike(double value, Value like) { return scalar(value, typeOf(like).getElementType()); }

  template <typename Op, typename... Args> Value make(Args &&...args) {
    return b.create<Op>(loc, std::forward<Args>(args)...).getResult();
  }
  Value add(Value x, Value y) { return make<AddOp>(x, y); }
  Value sub(Value x, Value y) { return make<SubOp>(x, y); }
  Value mul(Value x, Value y) { return make<MulOp>(x, y); }
  Value div(Value x, Value y) { return make<DivOp>(x, y); }
  Value neg(Value x) { return make<NegOp>(x); }
  Value compare(ComparePredicate p, Value x, Value y) {
    return make<CompareOp>(ComparePredicateAttr::get(b.getContext(), p), x, y);
  }
  Value where(Value c, Value x, Value y) { return make<WhereOp>(c, x, y); }
  Value maximum(Value x, Value y) { return make<MaximumOp>(x, y); }
  Value minimum(Value x, Value y) { return make<MinimumOp>(x, y); }
  Value logicalAnd(Value x, Value y) { return make<AndOp>(x, y); }
  Value logicalOr(Value x, Value y) { return make<OrOp>(x, y); }
  Value logicalNot(Value x) { return make<NotOp>(x); }
  /// `x` converted to `elementType` (itself when it has that type).
  Value cast(Value x, Type elementType) {
    if (typeOf(x).getElementType() == elementType)
      return x;
    return make<CastOp>(RankedTensorType::get(typeOf(x).getShape(), elementType), x);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    if (typeOf(x).getShape() == shape)
      return x;
    return make<ReshapeOp>(RankedTensorType::get(shape, typeOf(x).getElementType()), x);
  }
  Value reduceSum(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return make<ReduceSumOp>(x, b.getDenseI64ArrayAttr(dims), b.getBoolAttr(keepdim));
  }
  Value reduceMean(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return make<ReduceMeanOp>(x, b.getDenseI64ArrayAttr(dims), b.getBoolAttr(keepdim));
  }
  Value reduceMax(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    return make<ReduceMaxOp>(x, b.getDenseI64ArrayAttr(dims), b.getBoolAttr(keepdim));
  }
  Value permute(Value x, ArrayRef<int64_t> dims) {
    return make<PermuteOp>(x, b.getDenseI64ArrayAttr(dims));
  }
  /// Swaps the last two dims.
  Value transpose(Value x) {
    int64_t rank = typeOf(x).getRank();
    SmallVector<int64_t> dims(rank);
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[rank - 1], dims[rank - 2]);
    return permute(x, dims);
  }
  Value broadcastTo(Value x, RankedTensorType to) {
    if (typeOf(x).getShape() == to.getShape())
      return x;
    return make<BroadcastToOp>(RankedTensorType::get(to.getShape(), typeOf(x).getElementType()),
                               x);
  }

  /// The gradient of a value broadcast to `g`'s shape: `g` summed over the
  /// dims broadcasting added or stretched, in the value's shape.
  Value sumToShape(Value g, Value like) {
    RankedTensorType gType = typeOf(g), target = typeOf(like);
    if (gType.getShape() == target.getShape())
      return g;
    int64_t lead = gType.getRank() - target.getRank();
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < lead; ++d)
      dims.push_back(d);
    for (int64_t d = 0; d < target.getRank(); ++d)
      if (target.getDimSize(d) == 1 && gType.getDimSize(lead + d) != 1)
        dims.push_back(lead + d);
    Value summed = dims.empty() ? g : reduceSum(g, dims, /*keepdim=*/true);
    return reshape(summed, target.getShape());
  }

  /// A reduction's result gradient in the input's rank: size 1 at `dims`.
  Value keepDims(Value g, RankedTensorType input, ArrayRef<int64_t> dims) {
    SmallVector<int64_t> shape(input.getShape());
    for (int64_t d : dims)
      shape[d] = 1;
    return reshape(g, shape);
  }
};

} // namespace mlir::cleave

#endif // CLEAVE_DIALECTS_CLEAVE_CLEAVEBUILDER_H
