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

#endif // CLEAVE_COMPOSITE_OPS_TD
