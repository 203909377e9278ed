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

// Special functions (runtime/SpecialMath.h holds their one implementation, in
// double on the CPU and float on CUDA). Edge values are PyTorch's: lgamma is
// +inf at the poles, erfinv +-inf at +-1, the Bessel Y and K functions -inf /
// +inf at 0 and NaN below it. Ops whose derivative PyTorch does not define
// say so in their gradient rule (GradientOps.cpp).
def Cleave_LgammaOp : Cleave_UnaryElementwiseOp<"lgamma", Cleave_FloatTensor, "log|Gamma(x)|", 40>;
def Cleave_ErfinvOp : Cleave_UnaryElementwiseOp<"erfinv", Cleave_FloatTensor, "erf^-1(x)", 60>;
def Cleave_I0Op : Cleave_UnaryElementwiseOp<"i0", Cleave_FloatTensor, "I_0(x)", 60>;
def Cleave_I0eOp : Cleave_UnaryElementwiseOp<"i0e", Cleave_FloatTensor, "exp(-|x|) I_0(x)", 60>;
def Cleave_I1Op : Cleave_UnaryElementwiseOp<"i1", Cleave_FloatTensor, "I_1(x)", 60>;
def Cleave_I1eOp : Cleave_UnaryElementwiseOp<"i1e", Cleave_FloatTensor, "exp(-|x|) I_1(x)", 60>;
def Cleave_NdtriOp : Cleave_UnaryElementwiseOp<"ndtri", Cleave_FloatTensor,
                                                "the inverse of the standard normal CDF", 60>;
def Cleave_ErfcxOp : Cleave_UnaryElementwiseOp<"erfcx", Cleave_FloatTensor, "exp(x^2) erfc(x)", 30>;
def Cleave_BesselJ0Op : Cleave_UnaryElementwiseOp<"bessel_j0", Cleave_FloatTensor, "J_0(x)", 60>;
def Cleave_BesselJ1Op : Cleave_UnaryElementwiseOp<"bessel_j1", Cleave_FloatTensor, "J_1(x)", 60>;
def Cleave_BesselY0Op : Cleave_UnaryElementwiseOp<"bessel_y0", Cleave_FloatTensor, "Y_0(x)", 60>;
def Cleave_BesselY1Op : Cleave_UnaryElementwiseOp<"bessel_y1", Cleave_FloatTensor, "Y_1(x)", 60>;
def Cleave_ModifiedBesselK0Op : Cleave_UnaryElementwiseOp<"modified_bessel_k0", Cleave_FloatTensor,
                                                           "K_0(x)", 200>;
def Cleave_ModifiedBesselK1Op : Cleave_UnaryElementwiseOp<"modified_bessel_k1", Cleave_FloatTensor,
                                                           "K_1(x)", 200>;
def Cleave_ScaledModifiedBesselK0Op
    : Cleave_UnaryElementwiseOp<"scaled_modified_bessel_k0", Cleave_FloatTensor, "exp(x) K_0(x)", 200>;
def Cleave_ScaledModifiedBesselK1Op
    : Cleave_UnaryElementwiseOp<"scaled_modified_bessel_k1", Cleave_FloatTensor, "exp(x) K_1(x)", 200>;
def Cleave_AiryAiOp : Cleave_UnaryElementwiseOp<"airy_ai", Cleave_FloatTensor, "Ai(x)", 60>;

def Cleave_PolygammaOp : Cleave_Op<"polygamma", [Pure, Elementwise, SameOperandsAndResultType], [],
    ["getFlopsPerElement"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "elementwise polygamma of order n";
  let description = [{
    Computes the n-th derivative of digamma (n = 0: digamma itself), as
    `torch.polygamma(n, x)`: n >= 2 through the Hurwitz zeta function,
    (-1)^(n+1) n! zeta(n + 1, x).

    Example:

    ```mlir
    %y = cleave.polygamma %x {n = 1 : i64} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$n);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDefinition =
      Cleave_ShardingRuleIs<"::mlir::cleave::getElementwiseShardingRule(*this)">.definition
      # "int64_t $cppClass::getFlopsPerElement() { return 60; }";
}

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
// Binary special functions of float operands (the importer promotes
// integers). Their one implementation is in runtime/SpecialMath.h.
def Cleave_ZetaOp : Cleave_BinaryElementwiseOp<"zeta", "the Hurwitz zeta sum_k (k + y)^-x",
                                               Cleave_FloatTensor>;
def Cleave_IgammaOp : Cleave_BinaryElementwiseOp<"igamma", "P(x, y), the regularized lower incomplete gamma",
                                                 Cleave_FloatTensor>;
def Cleave_IgammacOp : Cleave_BinaryElementwiseOp<"igammac", "Q(x, y), the regularized upper incomplete gamma",
                                                  Cleave_FloatTensor>;
// The next float after x toward y (floats only: PyTorch refuses integers).
def Cleave_NextafterOp : Cleave_BinaryElementwiseOp<"nextafter", "the next float after x toward y",
                                                    Cleave_FloatTensor>;
// Integers only (i64, i32), on magnitudes: gcd(0, 0) = 0, lcm(x, 0) = 0.
def Cleave_GcdOp : Cleave_BinaryElementwiseOp<"gcd", "gcd(|x|, |y|)", Cleave_IndexTensor,
                                              [Commutative]>;
def Cleave_LcmOp : Cleave_BinaryElementwiseOp<"lcm", "|x / gcd(x, y) * y|", Cleave_IndexTensor,
                                              [Commutative]>;
def Cleave_FrexpOp : Cleave_Op<"frexp", [Pure, Elementwise, InferTypeOpAdaptor], [], [],
    ["getShardingRule"], Cleave_HasGradient> {
  let summary = "elementwise split into mantissa and exponent";
  let description = [{
    Splits every element into `mantissa` (the input's type, |m| in [0.5, 1)
    or 0) and `exponent` (i32) with x = mantissa * 2^exponent, as
    `torch.frexp`; infinities and NaN keep their value with exponent 0.

    Example:

    ```mlir
    %m, %e = cleave.frexp %x : tensor<8xf32> -> tensor<8xf32>, tensor<8xi32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$mantissa, StaticShapeTensorOf<[I32]>:$exponent);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($mantissa) `,` type($exponent)
  }];
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location>,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      auto type = ::llvm::cast<::mlir::RankedTensorType>(adaptor.getInput().getType());
      types.push_back(type);
      types.push_back(::mlir::RankedTensorType::get(type.getShape(),
                                                    ::mlir::IntegerType::get(context, 32)));
      return ::mlir::success();
    }
    ::mlir::cleave::ShardingRule $cppClass::getShardingRule() {
      // The elementwise rule, its result factors shared by both results.
      ::mlir::cleave::ShardingRule rule = ::mlir::cleave::getElementwiseShardingRule(*this);
      rule.results.push_back(rule.results.front());
      return rule;
    }
  }];
}
def Cleave_OrthogonalPolynomialOp : Cleave_Op<"orthogonal_polynomial", [Pure, InferTypeOpAdaptor], [],
    [], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "an orthogonal polynomial family p_n(x) with broadcasting";
  let description = [{
    Computes `p_n(x)` of the family `family` (chebyshev_t/u/v/w,
    shifted_chebyshev_t/u/v/w, hermite_h, hermite_he, laguerre_l, legendre_p)
    for every element of the broadcast of `x` (lhs) and the degree `n` (rhs),
    as `torch.special.<family>_polynomial_<kind>`: the degree truncates to an
    integer and a negative degree gives 0.

    Example:

    ```mlir
    %p = cleave.orthogonal_polynomial %x, %n {family = "hermite_h"} : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$lhs, Cleave_FloatTensor:$rhs, StrAttr:$family);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferBroadcastType(
          loc, {adaptor.getLhs().getType(), adaptor.getRhs().getType()},
          /*shapeOnly=*/{}, /*elementType=*/nullptr, types);
    }
  }] # Cleave_ShardingRuleIs<"::mlir::cleave::getElementwiseShardingRule(*this)">.definition;
}

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
    ["getCost"], ["getShardingRule"]> {
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
def Cleave_CummaxOp : Cleave_IndexScanOp<"cummax", "maximum", ">=">;
def Cleave_CumminOp : Cleave_IndexScanOp<"cummin", "minimum", "<=">;

// A running log-sum-exp: its own scan so that values hundreds apart stay
// exact (a global max shift would underflow the small prefixes to -inf).
def Cleave_LogcumsumexpOp : Cleave_Op<"logcumsumexp", [Pure, SameOperandsAndResultType], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "inclusive log(sum(exp)) along one dim";
  let description = [{
    Element `i` along `dim` is `log(exp(x_0) + ... + exp(x_i))` (of `i..n-1`
    with `reverse`), as `torch.logcumsumexp`: each step adds one element with
    `max + log1p(exp(min - max))`, in double, so no prefix underflows; a -inf
    element adds nothing, equal infinities stay infinite and NaN propagates.

    Example:

    ```mlir
    %y = cleave.logcumsumexp %x {dim = 1 : i64, reverse = false} : tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyScan(*this, getDim());
    }
  }] # Cleave_ShardingRuleIs<
      "::mlir::cleave::getMapShardingRule(*this, {static_cast<int64_t>(getDim())})">.definition;
}

// Sorting: a stable sort along one dim with the permutation it applied.
def Cleave_SortOp : Cleave_Op<"sort", [Pure, InferTypeOpAdaptor], [],
    ["getCost", "getSavedForBackward"], ["getShardingRule"], Cleave_HasGradient> {
  let summary = "stable sort along one dim, with the indices";
  let description = [{
    Sorts every slice of `input` along `dim`, ascending (descending with
    `descending`), as `torch.sort(stable=True)`: `values` has the input's
    type, `indices` (i64) the position along `dim` each value came from.
    Equal elements keep their order in both directions, and NaN is greater
    than every number (last ascending, first descending), as PyTorch.

    Example:

    ```mlir
    %v, %i = cleave.sort %x {dim = 1 : i64, descending = true} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$descending);
  let results = (outs Cleave_Tensor:$values, Cleave_I64Tensor:$indices);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location>,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferValuesAndIndicesTypes(adaptor.getInput().getType(), types);
    }
    ::mlir::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyScan(*this, getDim());
    }
    ::mlir::cleave::ShardingRule $cppClass::getShardingRule() {
      return ::mlir::cleave::getValuesAndIndicesMapShardingRule(*this, getDim());
    }
  }];
}

//===----------------------------------------------------------------------===//
// Dense linear algebra on batches of small matrices: the last two dims are
// the matrix, the leading dims a batch. The kernels factor one matrix per
// thread and compute in double (PyTorch's CPU results come from LAPACK).
// Gradient rules follow PyTorch's (lu_factor's for square matrices only).
// Sharding: the defaults (replicated).
//===----------------------------------------------------------------------===//

def Cleave_LuFactorOp : Cleave_Op<"lu_factor", [Pure], [],
    ["getCost", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "LU factorization with partial pivoting (LAPACK getrf)";
  let description = [{
    Factors each [m, n] matrix of `input` as `P L U`, packed as LAPACK's
    getrf packs it: `lu` holds U on and above the diagonal and L's
    multipliers (unit diagonal implied) below it. `pivots` [..., min(m, n)]
    are 1-based i32 row swaps, applied in order: at step j, row j swaps with
    row `pivots[j] - 1`, the first row holding the largest |value| of
    column j at or below the diagonal. `info` [...] (i32) is 0, or the
    1-based index of the first exactly zero diagonal element of U (the
    factorization still completes, as getrf), as `torch.linalg.lu_factor_ex`.
    Its gradient, for square matrices, is PyTorch's lu_factor_ex_backward:
    `P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H` with gL and gU the
    packed gradient's strict lower and upper parts.

    Example:

    ```mlir
    %lu, %piv, %info = cleave.lu_factor %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input);
  let results = (outs Cleave_FloatTensor:$lu, Cleave_I32Tensor:$pivots, Cleave_I32Tensor:$info);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($lu) `,` type($pivots) `,` type($info)
  }];
  let hasVerifier = 1;
}

def Cleave_LuPivotsToPermutationOp : Cleave_Op<"lu_pivots_to_permutation", [Pure], [],
    ["getCost", "getSavedForBackward"]> {
  let summary = "the row permutation that getrf's pivots describe";
  let description = [{
    Applies the 1-based row swaps `pivots` [..., k] (as `lu_factor` writes
    them) in order to the rows `0..rows-1`: `permutation[..., r]` (i64) is
    the original row that ends up at row r, so `P^T A = A[permutation]` and
    `P[i, j] = (permutation[j] == i)`. A pivot outside [1, rows] is a
    runtime error.

    Example:

    ```mlir
    %perm = cleave.lu_pivots_to_permutation %piv {rows = 3 : i64} : tensor<2x3xi32> -> tensor<2x3xi64>
    ```
  }];
  let arguments = (ins Cleave_IndexTensor:$pivots, I64Attr:$rows);
  let results = (outs Cleave_I64Tensor:$permutation);
  let assemblyFormat = "$pivots attr-dict `:` type($pivots) `->` type($permutation)";
  let hasVerifier = 1;
}

def Cleave_CholeskyOp : Cleave_Op<"cholesky", [Pure], [],
    ["getCost", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "Cholesky factorization (LAPACK potrf)";
  let description = [{
    Factors each symmetric positive-definite [n, n] matrix of `input` as
    `L L^T` (reading its lower triangle) or, with `upper`, `U^T U` (reading
    its upper triangle). `result` is L (U with `upper`), zero on the other
    side. `info` [...] (i32) is 0, or the 1-based order of the first leading
    minor that is not positive definite, as `torch.linalg.cholesky_ex`;
    then only the columns before it are factored. Its gradient is PyTorch's
    cholesky_backward (Murray 2016): `Φ(Lᴴ gL)` symmetrized, then solved
    with Lᴴ on the left and L on the right, all on core ops.

    Example:

    ```mlir
    %l, %info = cleave.cholesky %a {upper = false} : tensor<4x4xf32> -> tensor<4x4xf32>, tensor<i32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, DefaultValuedAttr<BoolAttr, "false">:$upper);
  let results = (outs Cleave_FloatTensor:$result, Cleave_I32Tensor:$info);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result) `,` type($info)";
  let hasVerifier = 1;
}

def Cleave_TriangularSolveOp : Cleave_Op<"triangular_solve", [Pure], [],
    ["getCost", "getSavedForBackward"], [], Cleave_HasGradient> {
  let summary = "solve A X = B with A triangular (BLAS trsm, left side)";
  let description = [{
    Solves `A X = B` (`A^T X = B` with `transpose`) for each [n, n]
    triangular `a` and [n, k] `b`, their batch dims broadcast. Only `a`'s
    upper (with `upper`) or lower triangle is read; with `unitriangular` its
    diagonal is taken as ones. A zero on the diagonal gives infinities or
    NaN, as BLAS's trsm (no check). Right-side solves are this op on
    transposes. Its gradient follows PyTorch's
    linalg_solve_triangular_backward: B's is the solve with op(A)^T, A's is
    -gB X^T (-X gB^T when transposed) kept on A's triangle (without the
    diagonal when unitriangular).

    Example:

    ```mlir
    %x = cleave.triangular_solve %a, %b {upper = true, transpose = false, unitriangular = false}
        : tensor<2x3x3xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$a, Cleave_FloatTensor:$b,
                       DefaultValuedAttr<BoolAttr, "false">:$upper,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose,
                       DefaultValuedAttr<BoolAttr, "false">:$unitriangular);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $a `,` $b attr-dict `:` type($a) `,` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
}

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

def Cleave_FusedConv2dOp : Cleave_Op<"fused_conv2d",
    [Pure, AttrSizedOperandSegments, InferTypeOpAdaptor],
    ["getScratchBytes"], ["getCost"], ["getShardingRule"]> {
  let summary = "conv2d with its residual add and clamp in one kernel (inference)";
  let description = [{
    `clamp(conv2d(input, weight, bias) + residual, min, max)`: a `cleave.conv2d`
    whose result is added to the optional `residual` (of the result's type)
    and then clamped to the optional bounds (`min = 0`: a relu; `min = 0,
    max = 6`: a relu6). The kernel applies the add and the clamp while the
    output is in cache instead of reading it twice more.
    `-cleave-fuse-conv-epilogue` forms it in inference plans; it has no
    gradient, and its input channels never split over a tp group (the clamp
    needs whole sums).

    Example:

    ```mlir
    %y = cleave.fused_conv2d %x, %w residual %r {stride = array<i64: 1, 1>,
        padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64,
        min = 0.0 : f64}
        : (tensor<1x64x8x8xf32>, tensor<64x64x1x1xf32>, tensor<1x64x8x8xf32>) -> tensor<1x64x8x8xf32>
    ```
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$weight,
                       Optional<Cleave_FloatTensor>:$bias,
                       Optional<Cleave_FloatTensor>:$residual,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups,
                       OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
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
    ["getCost", "getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"],
    Cleave_HasGradient> {
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
