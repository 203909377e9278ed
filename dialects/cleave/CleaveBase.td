//===- CleaveBase.td - cleave dialect, types and op classes -*- tablegen -*-===//
//
// The dialect definition, the tensor type constraints and the op classes that
// every cleave op derives from. Ops themselves live in CleaveOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_BASE_TD
#define CLEAVE_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialects/cleave/CleaveInterfaces.td"

def Cleave_Dialect : Dialect {
  let name = "cleave";
  let cppNamespace = "::mlir::cleave";
  let summary = "Tensor computations of deep-learning models, ready to be partitioned";
  let description = [{
    The `cleave` dialect holds the forward computation of an imported model on
    statically shaped builtin tensors. Parameters are named values
    (`cleave.param`) keyed by their module path; their data lives outside the
    IR. Each op carries a `NameLoc` with its module scope around the
    TorchScript source location, which later passes use to group layers.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

//===----------------------------------------------------------------------===//
// Type constraints. Traced models are static: every tensor is ranked and has
// static dims.
//===----------------------------------------------------------------------===//

def Cleave_ElementType : AnyTypeOf<[F32, BF16, F16, I64, I32, I1]>;
def Cleave_FloatElementType : AnyTypeOf<[F32, BF16, F16]>;
def Cleave_IndexElementType : AnyTypeOf<[I64, I32]>;

def Cleave_Tensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32, I1]>;
def Cleave_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def Cleave_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
// Floats and integers, not bool: PyTorch refuses to round a bool tensor.
def Cleave_NumericTensor : StaticShapeTensorOf<[F32, BF16, F16, I64, I32]>;
def Cleave_BoolTensor : StaticShapeTensorOf<[I1]>;
// Integers and bools: the bitwise ops (logical ones on bools), as PyTorch's.
def Cleave_BitsTensor : StaticShapeTensorOf<[I64, I32, I1]>;
def Cleave_IntegerTensor : StaticShapeTensorOf<[I64, I32]>;
def Cleave_I64Tensor : StaticShapeTensorOf<[I64]>;
def Cleave_I32Tensor : StaticShapeTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Enums.
//===----------------------------------------------------------------------===//

def Cleave_CompareEQ : I32EnumAttrCase<"eq", 0>;
def Cleave_CompareNE : I32EnumAttrCase<"ne", 1>;
def Cleave_CompareLT : I32EnumAttrCase<"lt", 2>;
def Cleave_CompareLE : I32EnumAttrCase<"le", 3>;
def Cleave_CompareGT : I32EnumAttrCase<"gt", 4>;
def Cleave_CompareGE : I32EnumAttrCase<"ge", 5>;
def Cleave_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison", [Cleave_CompareEQ, Cleave_CompareNE,
    Cleave_CompareLT, Cleave_CompareLE, Cleave_CompareGT, Cleave_CompareGE]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::cleave";
}
def Cleave_ComparePredicateAttr
    : EnumAttr<Cleave_Dialect, Cleave_ComparePredicate, "predicate">;

def Cleave_GeluNone : I32EnumAttrCase<"none", 0>;
def Cleave_GeluTanh : I32EnumAttrCase<"tanh", 1>;
def Cleave_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [Cleave_GeluNone, Cleave_GeluTanh]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::cleave";
}
def Cleave_GeluApproximationAttr
    : EnumAttr<Cleave_Dialect, Cleave_GeluApproximation, "gelu_approximation">;

// How cleave.scatter combines a scattered value with the element it lands
// on: `none` overwrites (torch.scatter), the others are scatter_reduce's
// (torch.scatter_add is `sum`, scatter's reduce="multiply" is `prod`).
def Cleave_ScatterNone : I32EnumAttrCase<"none", 0>;
def Cleave_ScatterSum : I32EnumAttrCase<"sum", 1>;
def Cleave_ScatterProd : I32EnumAttrCase<"prod", 2>;
def Cleave_ScatterMean : I32EnumAttrCase<"mean", 3>;
def Cleave_ScatterAmax : I32EnumAttrCase<"amax", 4>;
def Cleave_ScatterAmin : I32EnumAttrCase<"amin", 5>;
def Cleave_ScatterReduce : I32EnumAttr<"ScatterReduce",
    "how scatter combines values that land on one element",
    [Cleave_ScatterNone, Cleave_ScatterSum, Cleave_ScatterProd, Cleave_ScatterMean,
     Cleave_ScatterAmax, Cleave_ScatterAmin]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::cleave";
}
def Cleave_ScatterReduceAttr
    : EnumAttr<Cleave_Dialect, Cleave_ScatterReduce, "scatter_reduce">;

//===----------------------------------------------------------------------===//
// Op classes.
//===----------------------------------------------------------------------===//

// Every op states how it executes, what it costs, how it may be sharded and
// how it is differentiated; `executableOverrides`, `costOverrides`,
// `shardingOverrides` and `gradientOverrides` name the interface methods it
// defines itself instead of the defaults (GradientOps.cpp holds the rules).
class Cleave_Op<string mnemonic, list<Trait> traits = [],
                list<string> executableOverrides = [],
                list<string> costOverrides = [],
                list<string> shardingOverrides = [],
                list<string> gradientOverrides = []>
    : Op<Cleave_Dialect, mnemonic, !listconcat(traits,
         [DeclareOpInterfaceMethods<Cleave_ExecutableOpInterface,
                                    executableOverrides>,
          DeclareOpInterfaceMethods<Cleave_CostOpInterface, costOverrides>,
          DeclareOpInterfaceMethods<Cleave_ShardingOpInterface,
                                    shardingOverrides>,
          DeclareOpInterfaceMethods<Cleave_GradientOpInterface,
                                    gradientOverrides>])>;

// Differentiable ops define `buildGradients` (GradientOps.cpp).
defvar Cleave_HasGradient = ["buildGradients"];

// The definition of `getShardingRule` for an op class whose rule is one call
// of a shared rule builder (ShardingOpInterface.cpp); goes in
// `extraClassDefinition` with `shardingOverrides = ["getShardingRule"]`.
class Cleave_ShardingRuleIs<string builderCall> {
  string definition = "\n::mlir::cleave::ShardingRule $cppClass::getShardingRule() {\n"
      # "  return " # builderCall # ";\n}\n";
}

// Elementwise op of one operand: result type equals the operand type. Adding
// an activation is one line in CleaveOps.td. `flops` is the arithmetic per
// element of its vectorized kernel (1 for simple maps).
class Cleave_UnaryElementwiseOp<string mnemonic, Type operandType,
                                string formula, int flops = 1,
                                list<string> costOverrides = []>
    : Cleave_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultType], [],
                !listconcat(costOverrides,
                            !if(!eq(flops, 1), [], ["getFlopsPerElement"])),
                ["getShardingRule"], Cleave_HasGradient> {
  let summary = "elementwise " # mnemonic;
  let description = "Computes `" # formula # "` for every element. The result "
      # "has the operand's type.\n\nExample:\n\n```mlir\n%y = cleave." # mnemonic
      # " %x : tensor<2x8xf32>\n```";
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let extraClassDefinition =
      Cleave_ShardingRuleIs<"::mlir::cleave::getElementwiseShardingRule(*this)">.definition
      # !if(!eq(flops, 1), "",
            "int64_t $cppClass::getFlopsPerElement() { return " # flops # "; }");
}

// Elementwise op of two operands with numpy/PyTorch broadcasting. The operands
// share one element type (the importer inserts casts for type promotion); the
// result shape is the broadcast of the operand shapes.
class Cleave_BinaryElementwiseOp<string mnemonic, string formula,
                                 Type operandType = Cleave_Tensor,
                                 list<Trait> traits = [],
                                 list<string> costOverrides = []>
    : Cleave_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor], traits), [],
                costOverrides, ["getShardingRule"], Cleave_HasGradient> {
  let summary = "elementwise " # mnemonic # " with broadcasting";
  let description = "Computes `" # formula # "` for every element of the "
      # "broadcast shape. Both operands have the same element type; shapes "
      # "broadcast as in PyTorch (trailing dims align, dims of size 1 stretch)."
      # "\n\nExample:\n\n```mlir\n%z = cleave." # mnemonic # " %x, %y : "
      # "tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>\n```";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
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

// Reduction over a set of dims, keeping them as size 1 when `keepdim` is set.
// `reducedFactorKind` is the FactorKind of the reduced dims in its sharding
// rule: Reduction when partial results combine by a sum.
class Cleave_ReductionOp<string mnemonic, string formula,
                         string reducedFactorKind = "Reduction">
    : Cleave_Op<mnemonic, [Pure, InferTypeOpAdaptor], [],
                ["getCost", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = mnemonic # " over dims";
  let description = "Reduces `input` over `dims` with " # formula # ". With "
      # "`keepdim` the reduced dims stay as size 1.\n\nExample:\n\n```mlir\n"
      # "%m = cleave." # mnemonic # " %x {dims = array<i64: 1>, keepdim = true} : "
      # "tensor<2x8xf32> -> tensor<2x1xf32>\n```";
  let arguments = (ins Cleave_Tensor:$input, DenseI64ArrayAttr:$dims,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types) {
      return ::mlir::cleave::inferReductionType(
          loc, adaptor.getInput().getType(), adaptor.getDims(),
          adaptor.getKeepdim(), types);
    }
  }] # Cleave_ShardingRuleIs<"::mlir::cleave::getReductionShardingRule(*this, "
      # "getDims(), getKeepdim(), ::mlir::cleave::FactorKind::"
      # reducedFactorKind # ")">.definition;
}

// Reduction along one dim that also says where the extremum is: `values`
// as a reduction over `dim`, `indices` (i64) the position along `dim` of the
// first element equal to it. NaN counts as the extremum (the first NaN wins),
// as PyTorch's max/min with a dim. The dim must not be empty.
class Cleave_IndexReductionOp<string mnemonic, string extremum>
    : Cleave_Op<mnemonic, [Pure, InferTypeOpAdaptor], [],
                ["getCost", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = "the " # extremum # " along one dim and its index";
  let description = "Reduces `input` along `dim` to its " # extremum # " "
      # "(`values`, the input's element type) and the index of the first "
      # "element holding it (`indices`, i64); ties take the first index, and a "
      # "NaN is the " # extremum # " (its first occurrence). With `keepdim` the "
      # "reduced dim stays as size 1.\n\nExample:\n\n```mlir\n%v, %i = cleave."
      # mnemonic # " %x {dim = 1 : i64, keepdim = false} : tensor<2x8xf32> -> "
      # "tensor<2xf32>, tensor<2xi64>\n```";
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim);
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
          loc, adaptor.getInput().getType(), adaptor.getDim(), adaptor.getKeepdim(),
          types);
    }
    ::mlir::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyIndexReduction(*this, getDim());
    }
    ::mlir::cleave::ShardingRule $cppClass::getShardingRule() {
      return ::mlir::cleave::getIndexReductionShardingRule(*this, getDim(), getKeepdim());
    }
  }];
}

// Inclusive scan along one dim (from the end with `reverse`); the result has
// the input's type. The importer casts integers to i64 first, as PyTorch.
class Cleave_ScanOp<string mnemonic, string formula>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType], [],
                ["getCost", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = "inclusive " # formula # " along one dim";
  let description = "Element `i` along `dim` is the " # formula # " of elements "
      # "`0..i` (of `i..n-1` with `reverse`), as `torch." # mnemonic # "`; "
      # "floats accumulate in order, in double (as PyTorch's CPU kernels).\n\nExample:\n\n```mlir\n"
      # "%y = cleave." # mnemonic # " %x {dim = 1 : i64, reverse = false} : tensor<2x8xf32>\n```";
  let arguments = (ins Cleave_NumericTensor:$input, I64Attr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Cleave_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  // The scanned dim stays whole; the others split freely.
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return ::mlir::cleave::verifyScan(*this, getDim());
    }
  }] # Cleave_ShardingRuleIs<
      "::mlir::cleave::getMapShardingRule(*this, {static_cast<int64_t>(getDim())})">.definition;
}

// Inclusive running extremum along one dim with the index it was found at:
// `values` the input's type, `indices` (i64) the position along `dim` of the
// element holding it. Ties take the later index (an element replaces the
// extremum when `replaces`), a NaN replaces anything and stays, as PyTorch's
// CPU cummax / cummin.
class Cleave_IndexScanOp<string mnemonic, string extremum, string replaces>
    : Cleave_Op<mnemonic, [Pure, InferTypeOpAdaptor], [],
                ["getCost", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = "running " # extremum # " along one dim and its index";
  let description = "Element `i` along `dim` is the " # extremum # " of elements "
      # "`0..i` (`values`) and the index of the element it came from (`indices`, "
      # "i64), as `torch." # mnemonic # "`: element `x` replaces the running value "
      # "`m` when `x " # replaces # " m` or `x` is NaN, so ties take the last index "
      # "and a NaN propagates.\n\nExample:\n\n```mlir\n%v, %i = cleave." # mnemonic
      # " %x {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xi64>\n```";
  let arguments = (ins Cleave_Tensor:$input, I64Attr:$dim);
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

// Softmax-like normalization along one dim; the result has the input's type.
class Cleave_NormalizeAlongDimOp<string mnemonic, string formula>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType], [],
                ["getCost", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = mnemonic # " along one dim";
  let description = "Computes `" # formula # "` along `dim`.\n\nExample:\n\n"
      # "```mlir\n%p = cleave." # mnemonic # " %x {dim = 1 : i64} : tensor<2x8xf32>\n```";
  let arguments = (ins Cleave_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Cleave_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  // The normalized dim stays whole; the others split freely.
  let extraClassDefinition = Cleave_ShardingRuleIs<
      "::mlir::cleave::getMapShardingRule(*this, {static_cast<int64_t>(getDim())})">.definition;
}

// Keeps the lower or upper triangle of the last two dims and zeroes the rest.
class Cleave_TriangleOp<string mnemonic, string kept>
    : Cleave_Op<mnemonic, [Pure, SameOperandsAndResultType], [],
                ["getFlopsPerElement", "getSavedForBackward"], ["getShardingRule"],
                Cleave_HasGradient> {
  let summary = "keep the " # kept # " triangle of the last two dims";
  let description = "Zeroes every element outside the " # kept # " triangle of "
      # "the last two dims; `diagonal` shifts the boundary as in PyTorch.\n\n"
      # "Example:\n\n```mlir\n%m = cleave." # mnemonic # " %x {diagonal = 0 : i64} : "
      # "tensor<8x8xf32>\n```";
  let arguments = (ins Cleave_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$diagonal);
  let results = (outs Cleave_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
  // Which elements are zeroed depends on both matrix indices: the matrix
  // stays whole, the leading dims split freely.
  let extraClassDefinition = Cleave_ShardingRuleIs<
      "::mlir::cleave::getMapShardingRule(*this, "
      # "{getType().getRank() - 2, getType().getRank() - 1})">.definition;
}

#endif // CLEAVE_BASE_TD
