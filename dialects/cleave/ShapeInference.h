//===- ShapeInference.h - result types of cleave ops ------------*- C++ -*-===//
//
// Shape rules shared by the ops' type inference and by the importer, which
// must predict the same shapes before it builds an op (for example to insert
// casts for type promotion). Each function reports a located error and fails
// when the operands do not fit the rule.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_SHAPEINFERENCE_H
#define CLEAVE_DIALECTS_CLEAVE_SHAPEINFERENCE_H

#include "runtime/WindowShape.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace mlir::cleave {

/// Broadcasts `shapes` as PyTorch does (trailing dims align, size 1 stretches).
/// Returns std::nullopt when two dims differ and neither is 1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

/// Result type of an elementwise op: the broadcast shape of `values` and
/// `shapeOnly` (a `where` condition), with the element type shared by
/// `values`, or `elementType` when given (comparisons yield i1).
llvm::LogicalResult inferBroadcastType(std::optional<Location> loc,
                                       llvm::ArrayRef<Type> values,
                                       llvm::ArrayRef<Type> shapeOnly,
                                       Type elementType,
                                       llvm::SmallVectorImpl<Type> &results);

/// Result type of reducing `input` over `dims`.
llvm::LogicalResult inferReductionType(std::optional<Location> loc, Type input,
                                       llvm::ArrayRef<int64_t> dims,
                                       bool keepdim,
                                       llvm::SmallVectorImpl<Type> &results);

/// Result types of reducing `input` along `dim` with its index: the
/// reduction's type, then the same shape in i64.
llvm::LogicalResult inferIndexReductionTypes(std::optional<Location> loc, Type input,
                                             int64_t dim, bool keepdim,
                                             llvm::SmallVectorImpl<Type> &results);

/// Result types of a map that also says where each value came from (sort,
/// cummax): the input's type, then its shape in i64.
llvm::LogicalResult inferValuesAndIndicesTypes(Type input, llvm::SmallVectorImpl<Type> &results);

/// Result type of a loss of `input` against `target`: their broadcast shape
/// with reduction "none", a 0-d tensor with "mean" or "sum".
llvm::LogicalResult inferLossType(std::optional<Location> loc, Type input, Type target,
                                  llvm::StringRef reduction,
                                  llvm::SmallVectorImpl<Type> &results);
/// Result type of an `nd`-d convolution (conv2d, conv3d) in NC... layout:
/// input [N, C, ...], weight [F, C / groups, k...], optional bias [F].
llvm::LogicalResult inferConvolutionType(std::optional<Location> loc, int64_t nd, Value input,
                                         Value weight, Value bias,
                                         llvm::ArrayRef<int64_t> stride,
                                         llvm::ArrayRef<int64_t> padding,
                                         llvm::ArrayRef<int64_t> dilation, int64_t groups,
                                         llvm::SmallVectorImpl<Type> &types);
/// Checks a loss's `reduction` names none, mean or sum.
llvm::LogicalResult verifyLoss(Operation *op, llvm::StringRef reduction);

/// Output size of one spatial dim of a convolution or pooling window, shared
/// with the runtime's kernel checks.
using ::cleave::runtime::windowOutputSize;

} // namespace mlir::cleave

#endif // CLEAVE_DIALECTS_CLEAVE_SHAPEINFERENCE_H
