//===- CleaveCompositeOps.td - composite ops ----------------*- tablegen -*-===//
//
// Composite ops: aten ops with their own semantics that cleave does not give
// kernels. The importer builds one per aten op, 1:1, and `-cleave-decompose`
// rewrites each into core ops (Decompositions.cpp) right after import, so
// kernels, costs, sharding and gradient rules exist for the core set only.
// Adding such an op is its entry here, its importer converter and its
// `decompose` (docs/ops.md lists the table).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPOSITE_OPS_TD
#define CLEAVE_COMPOSITE_OPS_TD

// A composite op carries DecomposableOpInterface and none of the interfaces
// of core ops: a pass that needs a cost or a kernel never sees one.
class Cleave_CompositeOp<string mnemonic, list<Trait> traits = []>
    : Op<Cleave_Dialect, mnemonic, !listconcat([Pure,
         DeclareOpInterfaceMethods<Cleave_DecomposableOpInterface>], traits)>;

// One operand, the result of its type; `attrs` are the op's parameters.
class Cleave_CompositeMapOp<string mnemonic, string formula,
                            Type type = Cleave_FloatTensor, dag attrs = (ins)>
    : Cleave_CompositeOp<mnemonic, [SameOperandsAndResultType]> {
  let summary = "elementwise " # mnemonic # " (composite)";
  let description = "Computes `" # formula # "` for every element, as "
      # "`torch." # mnemonic # "`.";
  let arguments = !con((ins type:$input), attrs);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// One operand; an i1 tensor of its shape that says which elements pass a test.
class Cleave_CompositeTestOp<string mnemonic, string formula>
    : Cleave_CompositeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "elementwise test " # mnemonic # " (composite)";
  let description = "True where `" # formula # "`, as `torch." # mnemonic # "`.";
  let arguments = (ins Cleave_Tensor:$input);
  let results = (outs Cleave_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *context, std::optional<::mlir::Location>,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      auto input = ::llvm::cast<::mlir::RankedTensorType>(adaptor.getInput().getType());
      types.push_back(::mlir::RankedTensorType::get(input.getShape(),
                                                    ::mlir::IntegerType::get(context, 1)));
      return ::mlir::success();
    }
  }];
}

// Operands that broadcast together, one element type (the importer promotes).
class Cleave_CompositeBroadcastOp<string mnemonic, string formula, dag operands,
                                  Type type = Cleave_Tensor, dag attrs = (ins)>
    : Cleave_CompositeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "elementwise " # mnemonic # " with broadcasting (composite)";
  let description = "Computes `" # formula # "` for every element of the "
      # "broadcast shape, as `torch." # mnemonic # "`.";
  let arguments = !con(operands, attrs);
  let results = (outs type:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      ::llvm::SmallVector<::mlir::Type> operandTypes;
      for (::mlir::Value v : adaptor.getOperands())
        operandTypes.push_back(v.getType());
      return ::mlir::cleave::inferBroadcastType(loc, operandTypes, /*shapeOnly=*/{},
                                                /*elementType=*/nullptr, types);
    }
  }];
}

class Cleave_CompositeBinaryOp<string mnemonic, string formula,
                               Type type = Cleave_Tensor>
    : Cleave_CompositeBroadcastOp<mnemonic, formula,
                                  (ins type:$lhs, type:$rhs), type>;

// A reduction over `dims` (kept as size 1 with `keepdim`).
class Cleave_CompositeReductionOp<string mnemonic, string formula,
                                  Type type = Cleave_FloatTensor, dag attrs = (ins)>
    : Cleave_CompositeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = mnemonic # " over dims (composite)";
  let description = "Reduces `input` over `dims` to `" # formula # "`, as `torch."
      # mnemonic # "`. With `keepdim` the reduced dims stay as size 1.";
  let arguments = !con((ins type:$input, DenseI64ArrayAttr:$dims,
                            DefaultValuedAttr<BoolAttr, "false">:$keepdim), attrs);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferReductionType(
          loc, adaptor.getInput().getType(), adaptor.getDims(),
          adaptor.getKeepdim(), types);
    }
  }];
}

// The same with two results of the reduced shape (a statistic and the mean,
// or the minimum and the maximum).
class Cleave_CompositeReductionPairOp<string mnemonic, string formula,
                                      Type type = Cleave_FloatTensor, dag attrs = (ins)>
    : Cleave_CompositeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = mnemonic # " over dims (composite)";
  let description = "Reduces `input` over `dims` to `" # formula # "`, as `torch."
      # mnemonic # "`. With `keepdim` the reduced dims stay as size 1.";
  let arguments = !con((ins type:$input, DenseI64ArrayAttr:$dims,
                            DefaultValuedAttr<BoolAttr, "false">:$keepdim), attrs);
  let results = (outs type:$first, type:$second);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($first) `,` type($second)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      if (::mlir::failed(::mlir::cleave::inferReductionType(
              loc, adaptor.getInput().getType(), adaptor.getDims(),
              adaptor.getKeepdim(), types)))
        return ::mlir::failure();
      types.push_back(types.front());
      return ::mlir::success();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise maps.
//===----------------------------------------------------------------------===//

def Cleave_SquareOp : Cleave_CompositeMapOp<"square", "x * x", Cleave_Tensor>;
def Cleave_Exp2Op : Cleave_CompositeMapOp<"exp2", "2 ^ x">;
def Cleave_Log2Op : Cleave_CompositeMapOp<"log2", "log(x) / log(2)">;
def Cleave_Log10Op : Cleave_CompositeMapOp<"log10", "log(x) / log(10)">;
def Cleave_ErfcOp : Cleave_CompositeMapOp<"erfc", "1 - erf(x)">;
def Cleave_SincOp : Cleave_CompositeMapOp<"sinc", "sin(pi x) / (pi x), 1 at 0">;
def Cleave_Rad2degOp : Cleave_CompositeMapOp<"rad2deg", "x * 180 / pi">;
def Cleave_Deg2radOp : Cleave_CompositeMapOp<"deg2rad", "x * pi / 180">;
// Special functions written with the special-function core ops (erfcx,
// lgamma) and plain math.
def Cleave_NdtrOp : Cleave_CompositeMapOp<"ndtr",
    "the standard normal CDF, erfc(|x|/sqrt 2)/2 = erfcx(z) exp(-z^2)/2 reflected for x >= 0">;
def Cleave_LogNdtrOp : Cleave_CompositeMapOp<"log_ndtr",
    "log of the standard normal CDF: log(erfcx(z)/2) - z^2 below 0, log1p(-ndtr(-x)) above">;
def Cleave_EntrOp : Cleave_CompositeMapOp<"entr", "-x log(x); 0 at 0, -inf below 0, NaN stays NaN">;
def Cleave_MvlgammaOp : Cleave_CompositeMapOp<"mvlgamma",
    "sum_(i < p) lgamma(x - i/2) + p (p - 1)/4 log(pi)", Cleave_FloatTensor, (ins I64Attr:$p)>;
def Cleave_SphericalBesselJ0Op : Cleave_CompositeMapOp<"spherical_bessel_j0", "sin(x) / x, 1 at 0">;
def Cleave_HardsigmoidOp : Cleave_CompositeMapOp<"hardsigmoid", "min(max(x + 3, 0), 6) / 6">;
def Cleave_HardswishOp : Cleave_CompositeMapOp<"hardswish", "x * min(max(x + 3, 0), 6) / 6">;
def Cleave_LogitOp : Cleave_CompositeMapOp<"logit", "log(z / (1 - z)), z = x clamped to [eps, 1 - eps] when eps is given",
    Cleave_FloatTensor, (ins OptionalAttr<F64Attr>:$eps)>;
def Cleave_LeakyReluOp : Cleave_CompositeMapOp<"leaky_relu", "x > 0 ? x : x * negative_slope",
    Cleave_FloatTensor, (ins F64Attr:$negative_slope)>;
def Cleave_HardtanhOp : Cleave_CompositeMapOp<"hardtanh", "min(max(x, min_val), max_val)",
    Cleave_Tensor, (ins F64Attr:$min_val, F64Attr:$max_val)>;
def Cleave_SoftshrinkOp : Cleave_CompositeMapOp<"softshrink",
    "x > lambd ? x - lambd : x < -lambd ? x + lambd : 0", Cleave_FloatTensor,
    (ins F64Attr:$lambd)>;
def Cleave_HardshrinkOp : Cleave_CompositeMapOp<"hardshrink", "|x| > lambd ? x : 0",
    Cleave_FloatTensor, (ins F64Attr:$lambd)>;
def Cleave_ThresholdOp : Cleave_CompositeMapOp<"threshold", "x > threshold ? x : value",
    Cleave_Tensor, (ins F64Attr:$threshold, F64Attr:$value)>;
def Cleave_FracOp : Cleave_CompositeMapOp<"frac", "x - trunc(x)">;
def Cleave_LogSigmoidOp : Cleave_CompositeMapOp<"log_sigmoid", "min(x, 0) - log1p(exp(-|x|))">;
def Cleave_SoftplusOp : Cleave_CompositeMapOp<"softplus",
    "x * beta > threshold ? x : log1p(exp(x * beta)) / beta", Cleave_FloatTensor,
    (ins F64Attr:$beta, F64Attr:$threshold)>;
def Cleave_MishOp : Cleave_CompositeMapOp<"mish", "x * tanh(log1p(exp(x)))">;
def Cleave_EluOp : Cleave_CompositeMapOp<"elu",
    "x <= 0 ? expm1(x * input_scale) * alpha * scale : x * scale (selu and celu are elus)",
    Cleave_FloatTensor, (ins F64Attr:$alpha, F64Attr:$scale, F64Attr:$input_scale)>;
def Cleave_NanToNumOp : Cleave_CompositeMapOp<"nan_to_num",
    "NaN, +inf and -inf replaced by nan, posinf and neginf", Cleave_FloatTensor,
    (ins F64Attr:$nan, F64Attr:$posinf, F64Attr:$neginf)>;

//===----------------------------------------------------------------------===//
// Tests.
//===----------------------------------------------------------------------===//

def Cleave_IsnanOp : Cleave_CompositeTestOp<"isnan", "x != x">;
def Cleave_IsinfOp : Cleave_CompositeTestOp<"isinf", "|x| == inf">;
def Cleave_IsposinfOp : Cleave_CompositeTestOp<"isposinf", "x == +inf">;
def Cleave_IsneginfOp : Cleave_CompositeTestOp<"isneginf", "x == -inf">;
def Cleave_IsfiniteOp : Cleave_CompositeTestOp<"isfinite", "|x| < inf">;

//===----------------------------------------------------------------------===//
// Elementwise with broadcasting.
//===----------------------------------------------------------------------===//

def Cleave_XlogyOp : Cleave_CompositeBinaryOp<"xlogy", "x == 0 ? 0 : x * log(y) (NaN y stays NaN)",
                                             Cleave_FloatTensor>;
def Cleave_HypotOp : Cleave_CompositeBinaryOp<"hypot", "sqrt(x * x + y * y)", Cleave_FloatTensor>;
def Cleave_CopysignOp : Cleave_CompositeBinaryOp<"copysign", "|x| with the sign bit of y",
                                                Cleave_FloatTensor>;
def Cleave_HeavisideOp : Cleave_CompositeBinaryOp<"heaviside", "x == 0 ? y : x > 0">;
def Cleave_FmaxOp : Cleave_CompositeBinaryOp<"fmax", "max(x, y), ignoring a NaN operand">;
def Cleave_FminOp : Cleave_CompositeBinaryOp<"fmin", "min(x, y), ignoring a NaN operand">;
def Cleave_Xlog1pyOp : Cleave_CompositeBinaryOp<"xlog1py", "x == 0 ? 0 : x * log1p(y) (NaN y stays NaN)",
                                                 Cleave_FloatTensor>;
def Cleave_LogaddexpOp : Cleave_CompositeBinaryOp<"logaddexp", "log(exp(x) + exp(y))",
                                                 Cleave_FloatTensor>;
def Cleave_Logaddexp2Op : Cleave_CompositeBinaryOp<"logaddexp2", "log2(2^x + 2^y)",
                                                  Cleave_FloatTensor>;
def Cleave_Atan2Op : Cleave_CompositeBinaryOp<"atan2", "the angle of the point (x = rhs, y = lhs)",
                                             Cleave_FloatTensor>;
def Cleave_FmodOp : Cleave_CompositeBinaryOp<"fmod", "x - trunc(x / y) * y, the sign of x">;
def Cleave_RemainderOp : Cleave_CompositeBinaryOp<"remainder",
    "x - floor(x / y) * y, the sign of y (Python's %)">;
def Cleave_FloorDivideOp : Cleave_CompositeBinaryOp<"floor_divide", "floor(x / y)">;
def Cleave_LerpOp : Cleave_CompositeBroadcastOp<"lerp",
    "start + weight * (end - start), computed from the nearer end",
    (ins Cleave_FloatTensor:$start, Cleave_FloatTensor:$end, Cleave_FloatTensor:$weight),
    Cleave_FloatTensor>;
def Cleave_AddcmulOp : Cleave_CompositeBroadcastOp<"addcmul", "input + value * t1 * t2",
    (ins Cleave_Tensor:$input, Cleave_Tensor:$t1, Cleave_Tensor:$t2), Cleave_Tensor,
    (ins F64Attr:$value)>;
def Cleave_AddcdivOp : Cleave_CompositeBroadcastOp<"addcdiv", "input + value * t1 / t2",
    (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$t1, Cleave_FloatTensor:$t2),
    Cleave_FloatTensor, (ins F64Attr:$value)>;

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

def Cleave_VarOp : Cleave_CompositeReductionOp<"var",
    "sum((x - mean)^2) / (n - correction)", Cleave_FloatTensor, (ins F64Attr:$correction)>;
def Cleave_StdOp : Cleave_CompositeReductionOp<"std", "sqrt(var)", Cleave_FloatTensor,
    (ins F64Attr:$correction)>;
def Cleave_VarMeanOp : Cleave_CompositeReductionPairOp<"var_mean", "(var, mean)",
    Cleave_FloatTensor, (ins F64Attr:$correction)>;
def Cleave_StdMeanOp : Cleave_CompositeReductionPairOp<"std_mean", "(std, mean)",
    Cleave_FloatTensor, (ins F64Attr:$correction)>;
def Cleave_LogsumexpOp : Cleave_CompositeReductionOp<"logsumexp", "log(sum(exp(x)))">;
def Cleave_NormOp : Cleave_CompositeReductionOp<"norm",
    "sum(|x|^p)^(1/p); max |x| for p = inf, min |x| for -inf, the count of non-zeros for 0",
    Cleave_FloatTensor, (ins F64Attr:$p)>;
def Cleave_AminOp : Cleave_CompositeReductionOp<"amin", "min(x)", Cleave_Tensor>;
def Cleave_AminmaxOp : Cleave_CompositeReductionPairOp<"aminmax", "(min(x), max(x))",
                                                      Cleave_Tensor>;
def Cleave_NansumOp : Cleave_CompositeReductionOp<"nansum", "sum(x), NaN counted as 0",
                                                  Cleave_Tensor>;
def Cleave_NanmeanOp : Cleave_CompositeReductionOp<"nanmean", "the mean of the non-NaN elements">;

//===----------------------------------------------------------------------===//
// Order statistics: written on cleave.sort (and a pairwise count for mode).
//===----------------------------------------------------------------------===//

// A statistic of each slice along `dim` with the index of the element that
// holds it, reduced as an index reduction (size 1 with `keepdim`).
class Cleave_CompositeSelectionOp<string mnemonic, string summaryText, string text,
                                  dag attrs = (ins)>
    : Cleave_CompositeOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = summaryText # " along one dim, with its index (composite)";
  let description = text;
  let arguments = !con((ins Cleave_Tensor:$input, I64Attr:$dim,
                            DefaultValuedAttr<BoolAttr, "false">:$keepdim), attrs);
  let results = (outs Cleave_Tensor:$values, Cleave_I64Tensor:$indices);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferIndexReductionTypes(
          loc, adaptor.getInput().getType(), adaptor.getDim(), adaptor.getKeepdim(), types);
    }
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyIndexReduction(*this, getDim());
    }
  }];
}

def Cleave_MedianOp : Cleave_CompositeSelectionOp<"median", "the lower median", [{
    The lower median of each slice along `dim` (element `(n - 1) / 2` of the
    sorted slice) and its index, as `torch.median(x, dim)`: a slice holding a
    NaN has the median NaN, at its first NaN. With `ignore_nan`
    (`torch.nanmedian`) NaNs are left out: the element `(c - 1) / 2` of the c
    numbers, NaN only when the slice is all NaN. Ties are indexed as a stable
    sort orders them.
  }], (ins DefaultValuedAttr<BoolAttr, "false">:$ignore_nan)>;

def Cleave_ModeOp : Cleave_CompositeSelectionOp<"mode", "the most frequent value", [{
    The value that occurs most often in each slice along `dim`, the smallest
    among equally frequent ones, and the index of its last occurrence, as
    `torch.mode`. A NaN equals nothing, so it is never the mode of a slice
    that holds a number. Counted pairwise (an n x n comparison per slice),
    which suits the short slices mode is used on.
  }]>;

def Cleave_QuantileOp : Cleave_CompositeOp<"quantile", [InferTypeOpAdaptor]> {
  let summary = "quantiles along one dim (composite)";
  let description = [{
    The `q`-quantiles (a 0-d `q`, or one per element of a 1-D `q`, stacked
    first) of each slice along `dim`, as `torch.quantile`: the element at
    rank `q (n - 1)` of the sorted slice, `interpolation` (`linear`, `lower`,
    `higher`, `nearest`, `midpoint`) saying how a fractional rank reads its
    two neighbours. A slice holding a NaN has the quantile NaN; with
    `ignore_nan` (`torch.nanquantile`) the rank counts the numbers only.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$q, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim,
                       DefaultValuedAttr<StrAttr, "\"linear\"">:$interpolation,
                       DefaultValuedAttr<BoolAttr, "false">:$ignore_nan);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $q attr-dict `:` type($input) `,` type($q) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      if (::mlir::failed(::mlir::cleave::inferReductionType(
              loc, adaptor.getInput().getType(), {static_cast<int64_t>(adaptor.getDim())},
              adaptor.getKeepdim(), types)))
        return ::mlir::failure();
      auto reduced = ::llvm::cast<::mlir::RankedTensorType>(types.back());
      auto q = ::llvm::cast<::mlir::RankedTensorType>(adaptor.getQ().getType());
      ::llvm::SmallVector<int64_t> shape(q.getShape());
      ::llvm::append_range(shape, reduced.getShape());
      types.back() = ::mlir::RankedTensorType::get(shape, reduced.getElementType());
      return ::mlir::success();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Activations with a parameter tensor or a split.
//===----------------------------------------------------------------------===//

def Cleave_PreluOp : Cleave_CompositeOp<"prelu", [AllTypesMatch<["input", "result"]>]> {
  let summary = "parametric ReLU (composite)";
  let description = [{
    `x >= 0 ? x : weight * x` with one weight per channel (dim 1 of the
    input) or one for all, as `torch.nn.functional.prelu`.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$weight);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def Cleave_GluOp : Cleave_CompositeOp<"glu"> {
  let summary = "gated linear unit (composite)";
  let description = [{
    Splits `input` in two halves `a`, `b` along `dim` and yields
    `a * sigmoid(b)`, as `torch.nn.functional.glu`.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing: written as cleave.gather and cleave.scatter (and views).
//===----------------------------------------------------------------------===//

def Cleave_IndexSelectOp : Cleave_CompositeOp<"index_select"> {
  let summary = "select slices along a dim by a 1-D index (composite)";
  let description = [{
    `result` is `input` with dim `dim` replaced by the `index` entries, as
    `torch.index_select`: indices outside [0, size) are a runtime error
    (no wrapping, as PyTorch). A gather of the index broadcast to the result.

    ```mlir
    %y = cleave.index_select %x, %i {dim = 1 : i64} : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Cleave_IndexTensor:$index, I64Attr:$dim);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input `,` $index attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_TakeOp : Cleave_CompositeOp<"take"> {
  let summary = "elements of the flattened input by index (composite)";
  let description = [{
    `result[p] = flatten(input)[index[p]]`, negative indices counting from
    the end, as `torch.take`; the result has the index's shape.

    ```mlir
    %y = cleave.take %x, %i : (tensor<4x8xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Cleave_IndexTensor:$index);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input `,` $index attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Cleave_FlipOp : Cleave_CompositeOp<"flip", [SameOperandsAndResultType]> {
  let summary = "reverse the order along dims (composite)";
  let description = [{
    Reverses `input` along each of `dims`, as `torch.flip`: one gather per
    dim with a constant reversed index.

    ```mlir
    %y = cleave.flip %x {dims = array<i64: 0, 1>} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Cleave_RollOp : Cleave_CompositeOp<"roll", [SameOperandsAndResultType]> {
  let summary = "rotate elements along dims (composite)";
  let description = [{
    Shifts `input` by `shifts[i]` along `dims[i]`, elements leaving one end
    entering at the other, as `torch.roll` with dims: two slices and a
    concat per dim.

    ```mlir
    %y = cleave.roll %x {shifts = array<i64: 2>, dims = array<i64: 1>} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$shifts,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Cleave_IndexOp : Cleave_CompositeOp<"index"> {
  let summary = "advanced indexing by integer tensors (composite)";
  let description = [{
    PyTorch's `input[..., i0, ..., i1, ...]` (`aten::index`): `indices[k]`
    indexes input dim `dims[k]` (increasing); the index tensors broadcast
    together to a shape B, negative entries count from the end. The result
    is B in place of the indexed dims when those are adjacent, else B
    followed by the other dims. The importer turns constant bool masks into
    such indices. A gather over the indexed dims flattened into one.

    ```mlir
    %y = cleave.index %x[%i, %j] {dims = array<i64: 0, 2>} : (tensor<4x5x6xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3x5xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Variadic<Cleave_IndexTensor>:$indices,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_IndexPutOp : Cleave_CompositeOp<"index_put", [AllTypesMatch<["input", "result"]>]> {
  let summary = "write values at advanced-indexing positions (composite)";
  let description = [{
    `input[indices] = values` (`aten::index_put`), the positions as
    `cleave.index` picks them; `values` broadcasts to that selection and has
    the input's element type. With `accumulate` repeated positions add up,
    without it the last write wins (PyTorch's CPU order). A scatter over the
    indexed dims flattened into one.

    ```mlir
    %y = cleave.index_put %x[%i], %v {dims = array<i64: 0>, accumulate = false} : (tensor<4x5xf32>, tensor<2xi64>, tensor<f32>) -> tensor<4x5xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, Variadic<Cleave_IndexTensor>:$indices,
                       Cleave_Tensor:$values, DenseI64ArrayAttr:$dims, BoolAttr:$accumulate);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` `,` $values attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Padding, normalization and resampling.
//===----------------------------------------------------------------------===//

def Cleave_PadOp : Cleave_CompositeOp<"pad"> {
  let summary = "pad or crop the trailing dims (composite)";
  let description = [{
    `torch.nn.functional.pad`: `pads` lists (before, after) pairs from the
    last dim backwards; a negative entry crops. `mode` is `constant` (with
    `value`), `reflect` (mirror without repeating the edge), `replicate`
    (repeat the edge) or `circular` (wrap around). Slices and a concat per
    padded dim.

    ```mlir
    %y = cleave.pad %x {pads = array<i64: 1, 2>, mode = "reflect", value = 0.0 : f64} : tensor<2x5xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$pads, StrAttr:$mode,
                       F64Attr:$value);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Cleave_Conv3dOp : Cleave_CompositeOp<"conv3d", [InferTypeOpAdaptor]> {
  let summary = "3-D convolution in NCDHW layout (composite)";
  let description = [{
    Convolves `input [N, C, D, H, W]` with `weight [F, C / groups, KD, KH, KW]`
    and adds the optional `bias [F]`, as `torch.nn.functional.conv3d`.
    `stride`, `padding` and `dilation` hold (depth, height, width). Written
    as one `conv2d`: the frames each output frame reads (t·s - p + k·d for
    each depth offset k) stacked into the channels, the output frames into
    the batch, and the weight's depth moved beside its input channels.

    ```mlir
    %y = cleave.conv3d %x, %w {stride = array<i64: 1, 2, 2>, padding = array<i64: 1, 3, 3>,
        dilation = array<i64: 1, 1, 1>, groups = 1 : i64}
        : tensor<1x3x8x32x32xf32>, tensor<64x3x3x7x7xf32> -> tensor<1x64x8x16x16xf32>
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

def Cleave_GroupNormOp : Cleave_CompositeOp<"group_norm",
    [AttrSizedOperandSegments, AllTypesMatch<["input", "result"]>]> {
  let summary = "group normalization (composite)";
  let description = [{
    `torch.nn.functional.group_norm`: the channels (dim 1) of each sample fall
    into `num_groups` groups, each normalized over its channels and spatial
    positions (biased variance, `eps` added), then the optional per-channel
    `weight` and `bias` apply. Instance norm is the case of one group per
    channel.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, Optional<Cleave_FloatTensor>:$weight,
                       Optional<Cleave_FloatTensor>:$bias, I64Attr:$num_groups, F64Attr:$eps);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Cleave_InterpolateOp : Cleave_CompositeOp<"interpolate"> {
  let summary = "resample the spatial dims (composite)";
  let description = [{
    `torch.nn.functional.interpolate` over the dims after the first two:
    `mode` is `nearest`, `nearest_exact`, `linear` (linear, bilinear and
    trilinear are this, per dim) or `cubic` (bicubic, A = -0.75);
    `align_corners` and `scales` (one per spatial dim, 0 where none was
    given) pick the source positions as PyTorch's kernels do. Each spatial
    dim becomes a matmul with a constant [in, out] matrix of interpolation
    weights, so the gradient is the matmul's.
  }];
  let arguments = (ins Cleave_FloatTensor:$input, StrAttr:$mode, BoolAttr:$align_corners,
                       DenseF64ArrayAttr:$scales);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses: the per-element loss, then `reduction` (none, mean or sum).
//===----------------------------------------------------------------------===//

// `input` and `target` broadcast together; the result is their broadcast
// shape with reduction none, a 0-d tensor otherwise. Optional `weight` (and
// `pos_weight` where the loss has one) scale the per-element losses.
class Cleave_CompositeLossOp<string mnemonic, string formula, dag attrs = (ins),
                             dag weights = (ins)>
    : Cleave_CompositeOp<mnemonic, !if(!lt(!size(weights), 2), [InferTypeOpAdaptor],
                                       [InferTypeOpAdaptor, AttrSizedOperandSegments])> {
  let summary = mnemonic # " (composite)";
  let description = "The per-element loss `" # formula # "`, reduced by `reduction` "
      # "(none, mean or sum), as `torch.nn.functional." # mnemonic # "`.";
  let arguments = !con((ins Cleave_FloatTensor:$input, Cleave_FloatTensor:$target),
                       weights, attrs, (ins StrAttr:$reduction));
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferLossType(loc, adaptor.getInput().getType(),
                                           adaptor.getTarget().getType(),
                                           adaptor.getReduction(), types);
    }
    ::llvm::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyLoss(*this, getReduction());
    }
  }];
}

def Cleave_L1LossOp : Cleave_CompositeLossOp<"l1_loss", "|x - y|">;
def Cleave_SmoothL1LossOp : Cleave_CompositeLossOp<"smooth_l1_loss",
    "z < beta ? 0.5 z^2 / beta : z - 0.5 beta, z = |x - y|", (ins F64Attr:$beta)>;
def Cleave_HuberLossOp : Cleave_CompositeLossOp<"huber_loss",
    "z < delta ? 0.5 z^2 : delta (z - 0.5 delta), z = |x - y|", (ins F64Attr:$delta)>;
def Cleave_SoftMarginLossOp : Cleave_CompositeLossOp<"soft_margin_loss", "log1p(exp(-x y))">;
def Cleave_KlDivOp : Cleave_CompositeLossOp<"kl_div",
    "log_target ? exp(y) (y - x) : xlogy(y, y) - y x", (ins BoolAttr:$log_target)>;
def Cleave_BinaryCrossEntropyOp : Cleave_CompositeLossOp<"binary_cross_entropy",
    "-w (y max(log x, -100) + (1 - y) max(log1p(-x), -100))", (ins),
    (ins Optional<Cleave_FloatTensor>:$weight)>;
def Cleave_BinaryCrossEntropyWithLogitsOp : Cleave_CompositeLossOp<
    "binary_cross_entropy_with_logits",
    "w ((1 - y) x + (1 + (p - 1) y) (log(exp(-m) + exp(-x - m)) + m)), m = max(-x, 0)", (ins),
    (ins Optional<Cleave_FloatTensor>:$weight, Optional<Cleave_FloatTensor>:$pos_weight)>;

#endif // CLEAVE_COMPOSITE_OPS_TD
