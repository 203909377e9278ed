//===- CleaveOps.td - cleave ops ----------------------------*- tablegen -*-===//
//
// Ops cover the forward computation of MLPs, GPT/BERT/ViT/LLaMA transformers
// and ResNet-style CNNs. Dims in attributes are non-negative (the importer
// normalizes PyTorch's negative dims).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_OPS_TD
#define CLEAVE_OPS_TD

include "dialects/cleave/CleaveBase.td"

//===----------------------------------------------------------------------===//
// Values: parameters and constants.
//===----------------------------------------------------------------------===//

def Cleave_ParamOp : Cleave_Op<"param", [Pure], [], ["getCost"], ["getShardingRule"]> {
  let summary = "a named parameter or buffer of the model";
  let description = [{
    Produces the model parameter or buffer stored under `name`, its module path
    (`blocks.3.attn.qkv.weight`). The data is not in the IR: it travels beside
    it and is absent for models exported on the meta device. `buffer` marks
    tensors that are not trained (running statistics, masks). A tensor shared
    by several modules (tied weights) is one param under its first name.

    Example:

    ```mlir
    %w = cleave.param "blocks.0.mlp.fc.weight" : tensor<512x128xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, UnitAttr:$buffer);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Cleave_ConstantOp : Cleave_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>], [], ["getCost"],
    ["getShardingRule"]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose elements are known at compile time: folded shape
    arithmetic, scalars of elementwise ops (as 0-d tensors) and small constant
    tensors of the model.

    Example:

    ```mlir
    %c = cleave.constant dense<0.5> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

def Cleave_NegOp : Cleave_UnaryElementwiseOp<"neg", Cleave_Tensor, "-x", 1,
                                              ["getSavedForBackward"]>;
def Cleave_AbsOp : Cleave_UnaryElementwiseOp<"abs", Cleave_Tensor, "|x|">;
def Cleave_ReluOp : Cleave_UnaryElementwiseOp<"relu", Cleave_Tensor, "max(x, 0)">;
def Cleave_SiluOp : Cleave_UnaryElementwiseOp<"silu", Cleave_FloatTensor, "x * sigmoid(x)", 13>;
def Cleave_SigmoidOp : Cleave_UnaryElementwiseOp<"sigmoid", Cleave_FloatTensor,
                                                "1 / (1 + exp(-x))", 12>;
def Cleave_TanhOp : Cleave_UnaryElementwiseOp<"tanh", Cleave_FloatTensor, "tanh(x)", 12>;
def Cleave_ExpOp : Cleave_UnaryElementwiseOp<"exp", Cleave_FloatTensor, "exp(x)", 10>;
def Cleave_LogOp : Cleave_UnaryElementwiseOp<"log", Cleave_FloatTensor, "log(x)", 10>;
def Cleave_SqrtOp : Cleave_UnaryElementwiseOp<"sqrt", Cleave_FloatTensor, "sqrt(x)", 4>;
def Cleave_RsqrtOp : Cleave_UnaryElementwiseOp<"rsqrt", Cleave_FloatTensor, "1 / sqrt(x)", 4>;
def Cleave_SinOp : Cleave_UnaryElementwiseOp<"sin", Cleave_FloatTensor, "sin(x)", 12>;
def Cleave_CosOp : Cleave_UnaryElementwiseOp<"cos", Cleave_FloatTensor, "cos(x)", 12>;
def Cleave_ErfOp : Cleave_UnaryElementwiseOp<"erf", Cleave_FloatTensor, "erf(x)", 14>;
// Rounding maps integers to themselves; round takes halfway cases to even (as
// torch.round). sign of NaN is 0 and of a bool the bool (as torch.sign). These
// have a zero gradient (as PyTorch's), so nothing is kept for backward.
def Cleave_FloorOp : Cleave_UnaryElementwiseOp<"floor", Cleave_NumericTensor, "floor(x)", 1,
                                                ["getSavedForBackward"]>;
def Cleave_CeilOp : Cleave_UnaryElementwiseOp<"ceil", Cleave_NumericTensor, "ceil(x)", 1,
                                               ["getSavedForBackward"]>;
def Cleave_RoundOp : Cleave_UnaryElementwiseOp<"round", Cleave_NumericTensor,
                                                "round_half_even(x)", 1,
                                                ["getSavedForBackward"]>;
def Cleave_TruncOp : Cleave_UnaryElementwiseOp<"trunc", Cleave_NumericTensor, "trunc(x)", 1,
                                                ["getSavedForBackward"]>;
def Cleave_SignOp : Cleave_UnaryElementwiseOp<"sign", Cleave_Tensor,
                                               "(x > 0) - (x < 0)", 2,
                                               ["getSavedForBackward"]>;
def Cleave_Log1pOp : Cleave_UnaryElementwiseOp<"log1p", Cleave_FloatTensor, "log(1 + x)", 12>;
def Cleave_Expm1Op : Cleave_UnaryElementwiseOp<"expm1", Cleave_FloatTensor, "exp(x) - 1", 12>;
def Cleave_TanOp : Cleave_UnaryElementwiseOp<"tan", Cleave_FloatTensor, "tan(x)", 16>;
def Cleave_AsinOp : Cleave_UnaryElementwiseOp<"asin", Cleave_FloatTensor, "asin(x)", 14>;
def Cleave_AcosOp : Cleave_UnaryElementwiseOp<"acos", Cleave_FloatTensor, "acos(x)", 14>;
def Cleave_AtanOp : Cleave_UnaryElementwiseOp<"atan", Cleave_FloatTensor, "atan(x)", 14>;
def Cleave_SinhOp : Cleave_UnaryElementwiseOp<"sinh", Cleave_FloatTensor, "sinh(x)", 12>;
def Cleave_CoshOp : Cleave_UnaryElementwiseOp<"cosh", Cleave_FloatTensor, "cosh(x)", 12>;
def Cleave_AsinhOp : Cleave_UnaryElementwiseOp<"asinh", Cleave_FloatTensor, "asinh(x)", 14>;
def Cleave_AcoshOp : Cleave_UnaryElementwiseOp<"acosh", Cleave_FloatTensor, "acosh(x)", 14>;
def Cleave_AtanhOp : Cleave_UnaryElementwiseOp<"atanh", Cleave_FloatTensor, "atanh(x)", 12>;
def Cleave_ReciprocalOp : Cleave_UnaryElementwiseOp<"reciprocal", Cleave_FloatTensor, "1 / x">;
// Bitwise not: `~x` on integers, the logical not on bools.
def Cleave_NotOp : Cleave_UnaryElementwiseOp<"not", Cleave_BitsTensor, "~x (!x on bools)">;

def Cleave_DropoutOp : Cleave_Op<"dropout", [Pure, Elementwise, SameOperandsAndResultType],
    ["getViewedOperand"], ["getCost", "getTrainingCost", "getSavedForBackward"],
    ["getShardingRule"], Cleave_HasGradient> {
  let summary = "dropout: the identity in a plan's forward, costed for training";
  let description = [{
    In training, zeroes each element with probability `p` and scales the
    others by 1 / (1 - p), as `torch.nn.Dropout`; its backward applies the
    same mask. Plans run inference, where it is the identity: the result is a
    view of the input and no kernel runs. It stays in the IR so the planner
    costs training as it will run (a read, a write and a one-byte mask per
    element forward, the mask kept for backward).

    Example:

    ```mlir
    %y = cleave.dropout %x {p = 1.000000e-01 : f64} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, F64Attr:$p);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Cleave_GeluOp : Cleave_Op<"gelu", [Pure, Elementwise, SameOperandsAndResultType], ["getKernelAttributes"],
    ["getFlopsPerElement"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "elementwise GELU";
  let description = [{
    Computes `x * Phi(x)`, with the exact Gaussian CDF (`approximation = none`)
    or its tanh approximation (`approximation = tanh`), as `torch.nn.GELU`.

    Example:

    ```mlir
    %y = cleave.gelu %x {approximation = #cleave<gelu_approximation tanh>} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input,
      DefaultValuedAttr<Cleave_GeluApproximationAttr,
                        "::mlir::cleave::GeluApproximation::none">:$approximation);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Cleave_AddOp : Cleave_BinaryElementwiseOp<"add", "x + y", Cleave_Tensor, [Commutative],
                                              ["getSavedForBackward"]>;
def Cleave_SubOp : Cleave_BinaryElementwiseOp<"sub", "x - y", Cleave_Tensor, [],
                                              ["getSavedForBackward"]>;
def Cleave_MulOp : Cleave_BinaryElementwiseOp<"mul", "x * y", Cleave_Tensor, [Commutative]>;
def Cleave_DivOp : Cleave_BinaryElementwiseOp<"div", "x / y">;
// On integers, exact (wrapping) by repeated squaring; a negative exponent
// gives PyTorch's integer result (1 for a base of 1, ±1 for -1, else 0).
def Cleave_PowOp : Cleave_BinaryElementwiseOp<"pow", "x ^ y", Cleave_NumericTensor>;
def Cleave_MaximumOp : Cleave_BinaryElementwiseOp<"maximum", "max(x, y)", Cleave_Tensor, [Commutative]>;
def Cleave_MinimumOp : Cleave_BinaryElementwiseOp<"minimum", "min(x, y)", Cleave_Tensor, [Commutative]>;
// Bitwise on integers, logical on bools (the same thing for one bit).
def Cleave_AndOp : Cleave_BinaryElementwiseOp<"and", "x & y", Cleave_BitsTensor, [Commutative]>;
def Cleave_OrOp : Cleave_BinaryElementwiseOp<"or", "x | y", Cleave_BitsTensor, [Commutative]>;
def Cleave_XorOp : Cleave_BinaryElementwiseOp<"xor", "x ^ y", Cleave_BitsTensor, [Commutative]>;
// Shifts of integers, as PyTorch's: a count outside [0, bits) shifts every bit
// out (0 to the left; 0 or -1, by the sign, to the right).
def Cleave_ShiftLeftOp : Cleave_BinaryElementwiseOp<"shift_left", "x << y", Cleave_IntegerTensor>;
def Cleave_ShiftRightOp : Cleave_BinaryElementwiseOp<"shift_right", "x >> y (arithmetic)",
                                                     Cleave_IntegerTensor>;

def Cleave_CompareOp : Cleave_Op<"compare", [Pure, InferTypeOpAdaptor], ["getKernelAttributes"], [],
    ["getShardingRule"]> {
  let summary = "elementwise comparison with broadcasting";
  let description = [{
    Compares `lhs` and `rhs` with `predicate` for every element of the
    broadcast shape and yields an i1 tensor. Causal masks are built from it
    (`mask == 0`).

    Example:

    ```mlir
    %m = cleave.compare eq, %x, %y : tensor<8x8xf32>, tensor<f32> -> tensor<8x8xi1>
    ```
  }];
  let arguments = (ins Cleave_ComparePredicateAttr:$predicate,
                       Cleave_Tensor:$lhs, Cleave_Tensor:$rhs);
  let results = (outs Cleave_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Cleave_WhereOp : Cleave_Op<"where", [Pure, InferTypeOpAdaptor], [], ["getSavedForBackward"],
    ["getShardingRule"], Cleave_HasGradient> {
  let summary = "select elementwise between two tensors";
  let description = [{
    Yields `on_true` where `condition` holds and `on_false` elsewhere; the
    three operands broadcast together. `masked_fill` becomes a `where`.

    Example:

    ```mlir
    %y = cleave.where %m, %ninf, %x : tensor<8x8xi1>, tensor<f32>, tensor<2x8x8xf32> -> tensor<2x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_BoolTensor:$condition, Cleave_Tensor:$on_true,
                       Cleave_Tensor:$on_false);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($on_true) `,` type($on_false) `->` type($result)
  }];
}

def Cleave_CastOp : Cleave_Op<"cast", [Pure, Elementwise], [],
    ["getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "convert the element type";
  let description = [{
    Converts every element to the result's element type, as `Tensor.to(dtype)`:
    floats to integers truncate toward zero, anything to i1 tests for non-zero.

    Example:

    ```mlir
    %y = cleave.cast %x : tensor<2x8xi64> to tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_TrilOp : Cleave_TriangleOp<"tril", "lower">;
def Cleave_TriuOp : Cleave_TriangleOp<"triu", "upper">;

//===----------------------------------------------------------------------===//
// Contractions and layers.
//===----------------------------------------------------------------------===//

def Cleave_MatmulOp : Cleave_Op<"matmul", [Pure, InferTypeOpAdaptor], [], ["getCost"],
    ["getShardingRule"], Cleave_HasGradient> {
  let summary = "batched matrix product with broadcast batch dims";
  let description = [{
    Multiplies the last two dims: `[..., M, K] x [..., K, N] -> [..., M, N]`.
    Leading (batch) dims broadcast as in `torch.matmul`. Both operands have
    rank >= 2 and one element type (`bmm`, `mm` and 2-D+ `matmul` map here).

    Example:

    ```mlir
    %s = cleave.matmul %q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$lhs, Cleave_Tensor:$rhs);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def Cleave_LinearOp : Cleave_Op<"linear", [Pure, InferTypeOpAdaptor], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule", "specializeForRank"], Cleave_HasGradient> {
  let summary = "affine map with a PyTorch-layout weight";
  let description = [{
    Computes `input @ weight^T + bias` as `torch.nn.functional.linear`:
    `input [..., K]`, `weight [N, K]`, optional `bias [N]` give `[..., N]`.
    Keeping the weight's `[out, in]` layout lets tensor parallelism split it by
    rows or columns.

    Example:

    ```mlir
    %y = cleave.linear %x, %w, %b : tensor<2x8x128xf32>, tensor<512x128xf32>, tensor<512xf32> -> tensor<2x8x512xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$weight,
                       Optional<Cleave_FloatTensor>:$bias);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
}

def Cleave_EmbeddingOp : Cleave_Op<"embedding", [Pure, InferTypeOpAdaptor], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule", "specializeForRank"], Cleave_HasGradient> {
  let summary = "gather rows of a table by index";
  let description = [{
    Looks up `weight [V, D]` at integer `indices [...]`, giving `[..., D]`, as
    `torch.nn.functional.embedding`. Indices outside `[0, V)` are a runtime
    error.

    With `row_offset`, the table is a shard: rows `[row_offset,
    row_offset + V)` of a larger one (a vocabulary split over a tp group).
    Indices outside its rows give zero rows, so the group's sum is the
    lookup. `padding_idx` (PyTorch's) only matters in training: that row
    gets no gradient.

    Example:

    ```mlir
    %e = cleave.embedding %table, %ids : tensor<512x128xf32>, tensor<2x8xi64> -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$weight, Cleave_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$row_offset,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $weight `,` $indices attr-dict `:` type($weight) `,` type($indices) `->` type($result)
  }];
}

def Cleave_LayerNormOp : Cleave_Op<"layer_norm",
    [Pure, AttrSizedOperandSegments, AllTypesMatch<["input", "result"]>], [],
    ["getCost"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "layer normalization over the trailing dims";
  let description = [{
    Normalizes `input` over its trailing dims given by `normalized_shape` to
    zero mean and unit variance (biased variance, `eps` added), then applies
    the optional elementwise `weight` and `bias` of that shape.

    Example:

    ```mlir
    %y = cleave.layer_norm %x weight %w bias %b {normalized_shape = array<i64: 128>, eps = 1.0e-05 : f64}
        : (tensor<2x8x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input,
                       Optional<Cleave_FloatTensor>:$weight,
                       Optional<Cleave_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// In training the op's result depends on every sample of the batch: cutting
// the batch into microbatches changes it (the planner keeps one microbatch
// per replica; data-parallel ranks synchronize the statistics).
def Cleave_BatchStatistics : NativeOpTrait<"BatchStatistics"> {
  let cppNamespace = "::mlir::cleave::trait";
}

def Cleave_BatchNormOp : Cleave_Op<"batch_norm",
    [Pure, AttrSizedOperandSegments, AllTypesMatch<["input", "result"]>,
     Cleave_BatchStatistics], [],
    ["getFlopsPerElement"], ["getShardingRule"]> {
  let summary = "batch normalization with running statistics (inference form)";
  let description = [{
    Normalizes channel dim 1 of `input [N, C, ...]` with the running `mean` and
    `var` (`[C]`), then applies the optional `weight` and `bias`:
    `(x - mean) / sqrt(var + eps) * weight + bias`. This is
    `torch.nn.BatchNorm2d` in eval mode.

    Example:

    ```mlir
    %y = cleave.batch_norm %x, %mean, %var weight %w bias %b {eps = 1.0e-05 : f64}
        : (tensor<1x64x8x8xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$mean,
                       Cleave_FloatTensor:$var,
                       Optional<Cleave_FloatTensor>:$weight,
                       Optional<Cleave_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $mean `,` $var (`weight` $weight^)? (`bias` $bias^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// The kernel contract (name `attention`, attributes `causal` and `scale`) is
// shared by the CPU and CUDA backends: docs/plan-format.md.
def Cleave_AttentionOp : Cleave_Op<"attention", [Pure], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "fused scaled dot-product attention, optionally causal";
  let description = [{
    Computes `softmax(scale * q k^T + mask) v` per batch and head, with
    `q [B, H, Sq, D]`, `k [B, H, Sk, D]` and `v [B, H, Sk, Dv]` of one float
    type, giving `[B, H, Sq, Dv]`. With `causal`, query `i` attends to keys
    `j <= i + (Sk - Sq)`: the bottom-right aligned lower triangle, which is
    PyTorch's `tril` mask when `Sq == Sk`; a causal attention needs
    `Sk >= Sq` so that every query sees a key. Without it every query sees
    every key. The `Sq x Sk` scores are never stored: the result is the only
    buffer (`-cleave-fuse-attention` forms this op from the unfused pattern).

    Example:

    ```mlir
    %y = cleave.attention %q, %k, %v {causal = true, scale = 0.125 : f64}
        : tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32> -> tensor<2x4x8x64xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$q, Cleave_FloatTensor:$k, Cleave_FloatTensor:$v,
                       BoolAttr:$causal, F64Attr:$scale);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v attr-dict `:` type($q) `,` type($k) `,` type($v) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_SoftmaxOp : Cleave_NormalizeAlongDimOp<"softmax", "exp(x) / sum(exp(x))">;
def Cleave_LogSoftmaxOp : Cleave_NormalizeAlongDimOp<"log_softmax", "x - log(sum(exp(x)))">;

def Cleave_ReduceSumOp : Cleave_ReductionOp<"reduce_sum", "a sum">;
// Reduction factors combine partial results by a sum (ShardingRule.h). Means
// of parts would each divide by the part's count, and partial maxima would
// need a max all-reduce, so their reduced dims stay whole.
def Cleave_ReduceMeanOp : Cleave_ReductionOp<"reduce_mean", "the arithmetic mean",
                                             "NeedReplication">;
def Cleave_ReduceMaxOp : Cleave_ReductionOp<"reduce_max", "the maximum", "NeedReplication">;
// Partial products would need a product all-reduce: reduced dims stay whole.
def Cleave_ReduceProdOp : Cleave_ReductionOp<"reduce_prod", "the product", "NeedReplication">;
// max.dim / min.dim, argmax / argmin.
def Cleave_ReduceMaxIndexOp : Cleave_IndexReductionOp<"reduce_max_index", "maximum">;
def Cleave_ReduceMinIndexOp : Cleave_IndexReductionOp<"reduce_min_index", "minimum">;
def Cleave_CumsumOp : Cleave_ScanOp<"cumsum", "sum">;
def Cleave_CumprodOp : Cleave_ScanOp<"cumprod", "product">;

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW).
//===----------------------------------------------------------------------===//

def Cleave_Conv2dOp : Cleave_Op<"conv2d", [Pure, InferTypeOpAdaptor], ["getScratchBytes"],
    ["getCost", "getSavedForBackward"], ["getShardingRule", "specializeForRank"], Cleave_HasGradient> {
  let summary = "2-D convolution in NCHW layout";
  let description = [{
    Convolves `input [N, C, H, W]` with `weight [F, C / groups, KH, KW]` and
    adds the optional `bias [F]`, as `torch.nn.functional.conv2d`. `stride`,
    `padding` and `dilation` hold (height, width).

    Example:

    ```mlir
    %y = cleave.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 3, 3>,
        dilation = array<i64: 1, 1>, groups = 1 : i64}
        : tensor<1x3x32x32xf32>, tensor<64x3x7x7xf32> -> tensor<1x64x16x16xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$weight,
                       Optional<Cleave_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
}

def Cleave_MaxPool2dOp : Cleave_Op<"max_pool2d", [Pure, InferTypeOpAdaptor], [], ["getCost"],
    ["getShardingRule"], Cleave_HasGradient> {
  let summary = "2-D max pooling in NCHW layout";
  let description = [{
    Takes the maximum over `kernel` windows of the spatial dims, as
    `torch.nn.functional.max_pool2d`; padding counts as -infinity.

    Example:

    ```mlir
    %y = cleave.max_pool2d %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>,
        padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, ceil_mode = false}
        : tensor<1x64x16x16xf32> -> tensor<1x64x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Cleave_AvgPool2dOp : Cleave_Op<"avg_pool2d", [Pure, InferTypeOpAdaptor], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "2-D average pooling in NCHW layout";
  let description = [{
    Averages over `kernel` windows of the spatial dims, as
    `torch.nn.functional.avg_pool2d`; `count_include_pad` says whether padded
    elements count in the divisor.

    Example:

    ```mlir
    %y = cleave.avg_pool2d %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true}
        : tensor<1x64x8x8xf32> -> tensor<1x64x4x4xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                       DefaultValuedAttr<BoolAttr, "true">:$count_include_pad);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Cleave_AdaptiveAvgPool2dOp : Cleave_Op<"adaptive_avg_pool2d",
    [Pure, InferTypeOpAdaptor], [], ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "2-D average pooling to a fixed output size";
  let description = [{
    Averages `input [N, C, H, W]` into `output_size` (height, width) bins whose
    bounds follow `torch.nn.functional.adaptive_avg_pool2d`.

    Example:

    ```mlir
    %y = cleave.adaptive_avg_pool2d %x {output_size = array<i64: 1, 1>}
        : tensor<1x512x7x7xf32> -> tensor<1x512x1x1xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, DenseI64ArrayAttr:$output_size);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

def Cleave_ReshapeOp : Cleave_Op<"reshape", [Pure], ["getViewedOperand"],
    ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "reinterpret the shape, keeping the element order";
  let description = [{
    Gives the elements of `input` in row-major order the result's shape; the
    element count and type stay. `view`, `reshape`, `flatten`, `squeeze` and
    `unsqueeze` map here.

    Example:

    ```mlir
    %y = cleave.reshape %x : tensor<2x8x128xf32> to tensor<2x8x4x32xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_PermuteOp : Cleave_Op<"permute", [Pure, InferTypeOpAdaptor], [],
    ["getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "reorder dims";
  let description = [{
    Result dim `i` is input dim `dims[i]`, as `Tensor.permute`; `transpose`
    and `t` map here.

    Example:

    ```mlir
    %y = cleave.permute %x {dims = array<i64: 0, 2, 1, 3>} : tensor<2x8x4x32xf32> -> tensor<2x4x8x32xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def Cleave_BroadcastToOp : Cleave_Op<"broadcast_to", [Pure], [],
    ["getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "stretch size-1 dims and add leading dims";
  let description = [{
    Broadcasts `input` to the result shape as `Tensor.expand`: the trailing
    dims align, input dims of size 1 stretch, and new leading dims may be added.

    Example:

    ```mlir
    %y = cleave.broadcast_to %cls : tensor<1x1x64xf32> to tensor<4x1x64xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Cleave_SliceOp : Cleave_Op<"slice", [Pure, InferTypeOpAdaptor], [],
    ["getCost", "getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "take a strided range of one dim";
  let description = [{
    Keeps indices `start, start + step, ...` below `end` of dim `dim`, with
    `0 <= start <= end <= size` and `step >= 1`. `select`, `narrow`, `split`
    and `chunk` map to slices (and reshapes).

    Example:

    ```mlir
    %y = cleave.slice %x {dim = 2 : i64, start = 0 : i64, end = 128 : i64, step = 1 : i64}
        : tensor<2x8x384xf32> -> tensor<2x8x128xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end, DefaultValuedAttr<I64Attr, "1">:$step);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Cleave_ConcatOp : Cleave_Op<"concat", [Pure, InferTypeOpAdaptor], [],
    ["getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "join tensors along one dim";
  let description = [{
    Concatenates `inputs` along `dim`; all other dims and the element type
    agree, as `torch.cat`.

    Example:

    ```mlir
    %y = cleave.concat %a, %b {dim = 1 : i64} : (tensor<4x1x64xf32>, tensor<4x16x64xf32>) -> tensor<4x17x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Cleave_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
}

// Indexing: torch.gather and torch.scatter(_reduce) along one dim. The
// index operand holds positions along `dim`; the other dims of an element
// are its own. Indices outside [0, size of dim) are a runtime error naming
// the op (PyTorch's gather and scatter do not wrap negative ones either).
def Cleave_GatherOp : Cleave_Op<"gather", [Pure], [],
    ["getCost", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "gather elements along one dim by index";
  let description = [{
    `result[p] = input[p with dim d replaced by index[p]]` for every position
    `p` of `index`, as `torch.gather`: the result has the index's shape and
    the input's element type; the index has the input's rank and is no
    larger than the input outside `dim`.

    Example:

    ```mlir
    %y = cleave.gather %x, %i {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x3xi64> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Cleave_IndexTensor:$index, I64Attr:$dim);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $index attr-dict `:` type($input) `,` type($index) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Cleave_ScatterOp : Cleave_Op<"scatter", [Pure, AllTypesMatch<["input", "result"]>],
    ["getKernelAttributes"], ["getCost", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "scatter elements along one dim by index, overwriting or reducing";
  let description = [{
    Starts from `input` and, for every position `p` of `index` in row-major
    order, combines `src[p]` into `result[p with dim d replaced by
    index[p]]`, as `torch.scatter` (`reduce = none`: the last write wins)
    and `torch.scatter_reduce` (`sum`, `prod`, `mean`, `amax`, `amin`).
    Without `include_self`, an element that receives values starts from
    them alone (scatter_reduce's include_self=False). `mean` of integers
    divides with floor rounding, as PyTorch. `src` has the index's shape.

    Example:

    ```mlir
    %y = cleave.scatter %x, %i, %s {dim = 0 : i64, reduce = #cleave<scatter_reduce sum>}
        : tensor<5x4xf32>, tensor<3x4xi64>, tensor<3x4xf32> -> tensor<5x4xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Cleave_IndexTensor:$index, Cleave_Tensor:$src,
                       I64Attr:$dim,
                       DefaultValuedAttr<Cleave_ScatterReduceAttr,
                                         "::mlir::cleave::ScatterReduce::none">:$reduce,
                       DefaultValuedAttr<BoolAttr, "true">:$include_self);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $index `,` $src attr-dict `:` type($input) `,` type($index) `,` type($src)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layout changes across a group of ranks (lowering of a planned strategy).
// Inserted at global shapes, where an op changes how its tensor is laid out
// over the group (docs/planner.md's layouts) but not its type; after
// -cleave-local-shapes the types are per rank, so a gather's result is
// larger than its operand.
//===----------------------------------------------------------------------===//

def Cleave_LayoutChange : NativeOpTrait<"LayoutChange"> {
  let cppNamespace = "::mlir::cleave::trait";
}

class Cleave_LayoutChangeOp<string mnemonic, dag layoutArgs,
                            list<string> gradientOverrides = []>
    : Cleave_Op<mnemonic, [Cleave_LayoutChange], [], ["getCost", "getSavedForBackward"], [],
                gradientOverrides> {
  let arguments = !con((ins Cleave_Tensor:$input, StrAttr:$group), layoutArgs);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_AllReduceOp : Cleave_LayoutChangeOp<"all_reduce", (ins), Cleave_HasGradient> {
  let summary = "sum partial values over a group: partial -> replicated";
  let description = [{
    Every rank of `group` ("tp" or "dp") holds a partial sum of the tensor;
    afterwards each holds the sum.

    ```mlir
    %y = cleave.all_reduce %x {group = "tp"} : tensor<2x8x32xf32> -> tensor<2x8x32xf32>
    ```
  }];
}

def Cleave_AllGatherOp : Cleave_LayoutChangeOp<"all_gather",
    (ins I64Attr:$dim, I64Attr:$blocks), Cleave_HasGradient> {
  let summary = "gather the parts of a split tensor: split(dim, blocks) -> replicated";
  let description = [{
    Each rank of `group` holds its part of each of `blocks` equal blocks of
    `dim`; afterwards each holds the whole tensor.

    ```mlir
    %y = cleave.all_gather %x {group = "tp", dim = 2 : i64, blocks = 1 : i64} : tensor<2x8x16xf32> -> tensor<2x8x32xf32>
    ```
  }];
}

def Cleave_ReduceScatterOp : Cleave_LayoutChangeOp<"reduce_scatter",
    (ins I64Attr:$dim, I64Attr:$blocks), Cleave_HasGradient> {
  let summary = "sum partial values and keep one part: partial -> split(dim, blocks)";
  let description = [{
    Every rank of `group` holds a partial sum; afterwards each holds its part
    (of each of `blocks` blocks of `dim`) of the sum.

    ```mlir
    %y = cleave.reduce_scatter %x {group = "tp", dim = 1 : i64, blocks = 1 : i64} : tensor<2x8x32xf32> -> tensor<2x4x32xf32>
    ```
  }];
}

def Cleave_AllToAllOp : Cleave_LayoutChangeOp<"all_to_all",
    (ins I64Attr:$from_dim, I64Attr:$from_blocks, I64Attr:$to_dim, I64Attr:$to_blocks),
    Cleave_HasGradient> {
  let summary = "trade parts: split(from_dim) -> split(to_dim)";
  let description = [{
    Each rank of `group` holds its part along `from_dim`; afterwards each
    holds its part along `to_dim`, every rank having sent the others what
    they now own.

    ```mlir
    %y = cleave.all_to_all %x {group = "tp", from_dim = 1 : i64, from_blocks = 1 : i64, to_dim = 2 : i64, to_blocks = 1 : i64} : tensor<2x4x32xf32> -> tensor<2x8x16xf32>
    ```
  }];
}

def Cleave_ShardOp : Cleave_LayoutChangeOp<"shard", (ins I64Attr:$dim, I64Attr:$blocks),
                                            Cleave_HasGradient> {
  let summary = "keep this rank's part: replicated -> split(dim, blocks)";
  let description = [{
    Every rank of `group` holds the whole tensor; afterwards each keeps its
    part. No communication: a local slice.

    ```mlir
    %y = cleave.shard %x {group = "tp", dim = 2 : i64, blocks = 3 : i64} : tensor<2x8x96xf32> -> tensor<2x8x48xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Pipeline stage boundaries (after stage outlining).
//===----------------------------------------------------------------------===//

def Cleave_SendOp : Cleave_Op<"send", [], [], ["getCost", "getSavedForBackward"]> {
  let summary = "send a tensor to another pipeline stage";
  let description = [{
    Sends `input` to the stage function numbered `peer` (the model chunk, a
    pipeline stage unless the schedule interleaves chunks), which receives it
    with the `cleave.recv` of the same `tag`.

    ```mlir
    cleave.send %x {peer = 1 : i64, tag = 0 : i64} : tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Cleave_RecvOp : Cleave_Op<"recv", [], [], ["getCost", "getSavedForBackward"]> {
  let summary = "receive a tensor from another pipeline stage";
  let description = [{
    Receives the tensor the stage function numbered `peer` sends with the
    same `tag`.

    ```mlir
    %x = cleave.recv {peer = 0 : i64, tag = 0 : i64} : tensor<2x8x32xf32>
    ```
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

include "dialects/cleave/CleaveTrainingOps.td"
include "dialects/cleave/CleaveCompositeOps.td"

#endif // CLEAVE_OPS_TD
