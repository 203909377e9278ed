//===- CleaveDialect.h - the cleave dialect ---------------------*- C++ -*-===//
//
// Include this to use the cleave dialect: it brings the dialect, its enums,
// attributes and ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/cleave/CleaveDialect.h.inc"
#include "dialects/cleave/CleaveEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/cleave/CleaveAttrs.h.inc"

#include "dialects/cleave/ShapeInference.h"
#include "dialects/cleave/ShardingRule.h"
#include "cost/OpCost.h"

namespace mlir::cleave {
/// Where a `cleave.param` or `cleave.state` lives: absent on the device;
/// "host" in host memory, read through `cleave.prefetch` and written by
/// `cleave.spill` or by optimizer updates that run on the host
/// (-cleave-spill-to-host, docs/training.md "Spilling").
inline constexpr llvm::StringLiteral kPoolAttr = "cleave.pool";
inline constexpr llvm::StringLiteral kHostPool = "host";

/// The op's own attributes, for its kernel: everything but operand segment
/// sizes and discardable (dotted) annotations.
llvm::SmallVector<NamedAttribute> getDefaultKernelAttributes(Operation *op);

/// The GradientOpInterface default: an error naming the op, which has no
/// gradient rule (GradientOps.cpp).
LogicalResult noGradientRule(Operation *op);

/// Backward of a differentiable elementwise map reads its float operands.
void getDefaultSavedForBackward(Operation *op, llvm::SmallVectorImpl<Value> &saved);
/// Cost of an elementwise map: `getFlopsPerElement` per result element; its
/// backward computes each float operand's gradient from the result's and the
/// saved values.
::cleave::cost::OpCost getElementwiseCost(Operation *op);
/// Bytes of a ranked tensor type as stored: i1 takes one byte per element.
int64_t tensorBytes(Type type);
/// Defined by a param or a constant: it lives in the weights, not among the
/// activations.
bool isWeight(Value value);

// Sharding rules shared by op families (ShardingOpInterface.cpp). Operands
// and results are ranked tensors; the elementwise rules expect one result.

/// Every operand and result dim replicated: the interface's default.
ShardingRule getReplicatedShardingRule(Operation *op);
/// Elementwise with numpy broadcasting: one Parallel factor per result dim;
/// operand dims align from the right, and an operand dim of size 1 under a
/// larger result dim has no factors.
ShardingRule getElementwiseShardingRule(Operation *op);
/// The elementwise rule with the factors of result dims `wholeDims`
/// NeedReplication: softmax's dim, a triangle's matrix, layer_norm's
/// normalized dims.
ShardingRule getMapShardingRule(Operation *op, llvm::ArrayRef<int64_t> wholeDims);
/// Reduction of operand 0 over `dims` into result 0: reduced dims are factors
/// of `reducedKind`, absent from the result (or a factorless size-1 dim with
/// `keepdim`); kept dims are Parallel.
ShardingRule getReductionShardingRule(Operation *op, llvm::ArrayRef<int64_t> dims,
                                      bool keepdim, FactorKind reducedKind);
/// An index reduction along `dim` (reduce_max_index): the reduced dim is
/// NeedReplication (partial extrema would need a max all-reduce that also
/// moves indices), kept dims are Parallel in both results.
ShardingRule getIndexReductionShardingRule(Operation *op, int64_t dim, bool keepdim);
/// A map along `dim` with two results, values and indices (sort, cummax):
/// `dim` NeedReplication (a slice is sorted or scanned whole), the other
/// dims Parallel in both results.
ShardingRule getValuesAndIndicesMapShardingRule(Operation *op, int64_t dim);
/// Verifiers shared by op classes (CleaveOps.cpp): an index reduction's dim
/// holds at least one element; a scan's dim is in range.
LogicalResult verifyIndexReduction(Operation *op, int64_t dim);
LogicalResult verifyScan(Operation *op, int64_t dim);

/// The shape `input[indices]` has (aten::index): index tensor k of shape
/// `indexShapes[k]` indexes input dim `dims[k]` (increasing); nullopt, with
/// `why` set, when the indices do not broadcast or the dims are bad.
std::optional<llvm::SmallVector<int64_t>>
advancedIndexShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> dims,
                   llvm::ArrayRef<llvm::SmallVector<int64_t>> indexShapes, std::string &why);

namespace trait {
/// An op that only changes how its tensor is laid out over a group of ranks
/// (all_reduce, all_gather, reduce_scatter, all_to_all, shard): whole,
/// split or partial on every rank before and after. Its gradient is the
/// change back, which its gradient rule builds.
template <typename ConcreteType>
class LayoutChange : public ::mlir::OpTrait::TraitBase<ConcreteType, LayoutChange> {};

/// An op whose training-mode result depends on the whole batch (batch norm's
/// statistics), so the batch of a replica cannot be cut into microbatches.
/// The eval form carries it too: training turns it into the training form.
template <typename ConcreteType>
class BatchStatistics : public ::mlir::OpTrait::TraitBase<ConcreteType, BatchStatistics> {};
} // namespace trait
} // namespace mlir::cleave
#include "dialects/cleave/CleaveInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/cleave/CleaveOps.h.inc"

#endif // CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
