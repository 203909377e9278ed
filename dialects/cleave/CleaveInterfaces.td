//===- CleaveInterfaces.td - what passes ask of cleave ops -*- tablegen -*-===//
//
// Knowledge that passes need about each op lives here, on the ops, with
// defaults that fit most of them; an op overrides only what differs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_INTERFACES_TD
#define CLEAVE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Cleave_ExecutableOpInterface : OpInterface<"ExecutableOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    How an op executes in a plan: whether its result is a view of an operand's
    buffer (no kernel, no new memory), how much arena scratch its kernel needs,
    and which attributes its kernel reads. Memory planning and plan emission
    ask these questions; they never switch on op names.
  }];
  let methods = [
    InterfaceMethod<[{
        Index of the operand whose buffer the result reuses unchanged (same
        bytes, another shape), or std::nullopt when the op computes a new
        buffer.
      }], "std::optional<unsigned>", "getViewedOperand", (ins), [{}],
      [{ return std::nullopt; }]>,
    InterfaceMethod<[{
        Bytes of arena scratch the CPU kernel needs while it runs.
      }], "int64_t", "getScratchBytes", (ins), [{}], [{ return 0; }]>,
    InterfaceMethod<[{
        The attributes the kernel reads, enums spelled as strings.
      }], "::llvm::SmallVector<::mlir::NamedAttribute>", "getKernelAttributes",
      (ins), [{}],
      [{ return ::mlir::cleave::getDefaultKernelAttributes($_op); }]>,
    InterfaceMethod<[{
        Indices of the operands the kernel writes in place: persistent tensors
        (parameters, buffers, training state) that a training step updates.
        Such an op has no results and is the last reader of the values it
        overwrites; a plan lists these operands among the instruction's
        outputs.
      }], "::llvm::SmallVector<unsigned>", "getUpdatedOperands", (ins), [{}],
      [{ return {}; }]>,
  ];
}

def Cleave_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    What an op costs on a device, forward and backward: its op class (which
    efficiency of the cluster spec applies), FLOPs, bytes read and written,
    kernel launches, and which of its operands or results its backward needs
    (the activations training keeps). The defaults describe an elementwise
    map; ops that differ override `getCost`, `getFlopsPerElement` or
    `getSavedForBackward`. The cost model and the planner read only this.
  }];
  let methods = [
    InterfaceMethod<[{
        FLOPs per result element of an elementwise op; transcendental maps
        count the arithmetic of their vectorized approximation.
      }], "int64_t", "getFlopsPerElement", (ins), [{}], [{ return 1; }]>,
    InterfaceMethod<[{
        Appends the values the backward of this op reads: operands or
        results. Parameters among them are not activations; the analysis
        drops them.
      }], "void", "getSavedForBackward",
      (ins "::llvm::SmallVectorImpl<::mlir::Value> &":$saved), [{}],
      [{ ::mlir::cleave::getDefaultSavedForBackward($_op, saved); }]>,
    InterfaceMethod<[{
        The op's forward and backward cost.
      }], "::cleave::cost::OpCost", "getCost", (ins), [{}],
      [{ return ::mlir::cleave::getElementwiseCost($_op); }]>,
    InterfaceMethod<[{
        The cost while training, for ops that compute more in training than
        a plan's forward does (dropout is the identity in inference). Its
        `savedBytes` may include state that is no IR value (a dropout mask).
      }], "::cleave::cost::OpCost", "getTrainingCost", (ins), [{}],
      [{ return $_op.getCost(); }]>,
  ];
}

def Cleave_ShardingOpInterface : OpInterface<"ShardingOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    How an op may be split across the ranks of a mesh axis, as a factor-based
    sharding rule (ShardingRule.h): each dim of each operand and result is a
    product of factors, and each factor is Parallel, Reduction (partial sums
    that need an all-reduce) or NeedReplication (cannot be split). The
    planner derives tensor parallelism from these rules alone: a factor split
    in one op's result is followed into its users' operands. The default
    replicates every dim, which is always correct: the op runs whole on every
    rank. Ops that can be split override `getShardingRule`.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's sharding rule: one factor list per operand and per result, in
        operand and result order.
      }], "::mlir::cleave::ShardingRule", "getShardingRule", (ins), [{}],
      [{ return ::mlir::cleave::getReplicatedShardingRule($_op); }]>,
    InterfaceMethod<[{
        Adjusts the op, at per-rank shapes, to tp index `rank` of a group of
        `ranks`, its results laid out as its `cleave.sharding` says. Ops
        whose split loop needs to know which part a rank holds (an
        embedding's first row; a bias to add once after a partial sum)
        override this; the default needs nothing.
      }], "void", "specializeForRank", (ins "int64_t":$rank, "int64_t":$ranks), [{}],
      [{ return; }]>,
  ];
}

def Cleave_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    The op's vector-Jacobian product, written as cleave ops: given the
    gradients of the loss with respect to its results, the gradients with
    respect to its operands. `-cleave-differentiate` asks only this; it never
    switches on op names. Ops whose backward is one kernel build their
    backward op (`cleave.layer_norm_backward`); the others compose existing
    ops. The default reports that the op has no gradient rule.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operands' gradients at `builder`'s insertion point, with
        the op's location. `resultGradients[i]` is the gradient of result `i`,
        or null when no gradient reaches it. `operandGradients` comes sized
        to the operands, all null; set an entry to that operand's gradient
        (of the operand's type), or leave it null when the operand gets none
        (integer operands, masks, a constant exponent). Gradients of operands
        that nothing needs may still be built: the pass erases unused ones.
      }], "::llvm::LogicalResult", "buildGradients",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGradients,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGradients), [{}],
      [{ return ::mlir::cleave::noGradientRule($_op); }]>,
  ];
}

def Cleave_DecomposableOpInterface : OpInterface<"DecomposableOpInterface"> {
  let cppNamespace = "::mlir::cleave";
  let description = [{
    A composite op: an aten op with its own semantics that cleave writes as
    core ops (Decompositions.cpp) instead of giving it kernels, costs,
    sharding and gradient rules. `-cleave-decompose` rewrites every one of
    them right after import, so no later pass sees one; only core ops carry
    the other interfaces.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the op's results as core (or other composite) ops at
        `builder`'s insertion point, with the op's location, one value per
        result of the result's type.
      }], "::llvm::LogicalResult", "decompose",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$results)>,
  ];
}

#endif // CLEAVE_INTERFACES_TD
