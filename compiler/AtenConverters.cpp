//===- AtenConverters.cpp - aten ops to cleave ops ------------------------===//
//
// One converter per TorchScript op kind, registered by name. Converters read
// their operands through the Importer's helpers (which report errors at the
// node's location) and build cleave ops; PyTorch's conventions (negative
// dims, -1 sizes, Python-number operands, type promotion) end here.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "dialects/cleave/ShapeInference.h"

#include <ATen/Functions.h>

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
namespace jit = torch::jit;

namespace cleave::importer {
namespace {

using Inputs = ArrayRef<Val>;
using Result = FailureOr<std::vector<Val>>;

Result one(FailureOr<Value> value) {
  if (failed(value))
    return failure();
  return std::vector<Val>{Val::ofTensor(*value)};
}

RankedTensorType typeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// Normalizes a PyTorch dim (negative counts from the end) for `rank`.
FailureOr<int64_t> normDim(Importer &imp, int64_t dim, int64_t rank) {
  // PyTorch wraps dims of a 0-d tensor as if it had one (0 and -1 name it).
  int64_t wrap = std::max<int64_t>(rank, 1);
  int64_t d = dim < 0 ? dim + wrap : dim;
  if (d < 0 || d >= wrap) {
    imp.error() << "dim " << dim << " is out of range for rank " << rank;
    return failure();
  }
  return d;
}

FailureOr<int64_t> dimArg(Importer &imp, const Val &val, int64_t rank) {
  auto dim = imp.integer(val);
  if (failed(dim))
    return failure();
  return normDim(imp, *dim, rank);
}

/// The dtype argument of a node, looked up by its schema name, when present
/// and not None.
FailureOr<std::optional<Type>> dtypeArg(Importer &imp, jit::Node *node, Inputs in,
                                        const char *name = "dtype") {
  auto index = node->schema().argumentIndexWithName(name);
  if (!index || imp.isNone(in[*index]))
    return std::optional<Type>();
  auto code = imp.integer(in[*index]);
  if (failed(code))
    return failure();
  auto type = imp.elementType(static_cast<c10::ScalarType>(*code));
  if (failed(type))
    return failure();
  return std::optional<Type>(*type);
}

/// A spatial size list of an N-d op: one entry for every dim, or `nd`
/// entries; empty takes `ifEmpty` (a stride defaults to the kernel).
FailureOr<SmallVector<int64_t>> spatialArg(Importer &imp, const Val &val, int64_t nd,
                                           std::optional<SmallVector<int64_t>> ifEmpty = {}) {
  auto values = imp.intList(val);
  if (failed(values))
    return failure();
  if (values->empty() && ifEmpty)
    return *ifEmpty;
  if (values->size() == 1)
    return SmallVector<int64_t>(nd, (*values)[0]);
  if (int64_t(values->size()) != nd) {
    imp.error() << "expected 1 or " << nd << " spatial sizes, got " << values->size();
    return failure();
  }
  return SmallVector<int64_t>(values->begin(), values->end());
}

/// Pads PyTorch's one-entry spatial lists (`kernel_size=3`) to (h, w).
FailureOr<SmallVector<int64_t>> pairArg(Importer &imp, const Val &val,
                                        std::optional<SmallVector<int64_t>> ifEmpty = {}) {
  return spatialArg(imp, val, 2, std::move(ifEmpty));
}

/// Resolves a PyTorch size list with at most one -1 against `numel`.
FailureOr<SmallVector<int64_t>> resolveShape(Importer &imp, std::vector<int64_t> shape,
                                             int64_t numel) {
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = i;
    } else if (shape[i] < 0) {
      imp.error() << "invalid size " << shape[i] << " in view/reshape";
      return failure();
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0 && known > 0 && numel % known == 0)
    shape[inferred] = numel / known;
  int64_t total = 1;
  for (int64_t dim : shape)
    total *= dim;
  if (total != numel) {
    imp.error() << "cannot view " << numel << " elements as ["
                << llvm::make_range(shape.begin(), shape.end()) << "]";
    return failure();
  }
  return SmallVector<int64_t>(shape.begin(), shape.end());
}

FailureOr<Value> slice(Importer &imp, Value input, int64_t dim, int64_t start,
                       int64_t end, int64_t step = 1) {
  auto type = typeOf(input);
  if (start == 0 && end == type.getDimSize(dim) && step == 1)
    return input;
  return imp.create<mlir::cleave::SliceOp>(input, dim, start, end, step);
}

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

template <typename OpTy>
Converter unary(bool needsFloat) {
  return [needsFloat](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, needsFloat);
    if (failed(values))
      return failure();
    return one(imp.create<OpTy>((*values)[0]));
  };
}

/// floor/ceil/trunc/round(self): an integer tensor rounds to itself in its
/// own dtype, as PyTorch; a bool tensor is refused, as PyTorch refuses it.
FailureOr<Value> roundingOperand(Importer &imp, jit::Node *node, const Val &val) {
  auto values = imp.promote({val});
  if (failed(values))
    return failure();
  Value x = (*values)[0];
  if (typeOf(x).getElementType().isInteger(1)) {
    imp.error() << node->kind().toQualString() << " of a bool tensor (PyTorch refuses it too)";
    return failure();
  }
  return x;
}

template <typename OpTy>
Converter rounding() {
  return [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = roundingOperand(imp, node, in[0]);
    if (failed(x))
      return failure();
    return one(imp.create<OpTy>(*x));
  };
}

/// round(self, decimals=d): as PyTorch's kernel, round(x * 10^d) / 10^d, or
/// round(x / 10^-d) * 10^-d for negative d, with 10^|d| in the tensor's dtype.
Result roundDecimals(Importer &imp, jit::Node *node, Inputs in) {
  auto x = roundingOperand(imp, node, in[0]);
  if (failed(x))
    return failure();
  int64_t decimals = 0;
  if (in.size() > 1) {
    auto d = imp.integer(in[1]);
    if (failed(d))
      return failure();
    decimals = *d;
  }
  if (decimals == 0)
    return one(imp.create<mlir::cleave::RoundOp>(*x));
  Type et = typeOf(*x).getElementType();
  if (!llvm::isa<FloatType>(et)) {
    imp.error() << "round with decimals of an integer tensor (PyTorch refuses it too)";
    return failure();
  }
  Value scale = imp.splat(std::pow(10.0, static_cast<double>(std::abs(decimals))), et);
  auto scaled = decimals > 0 ? imp.create<mlir::cleave::MulOp>(*x, scale)
                             : imp.create<mlir::cleave::DivOp>(*x, scale);
  if (failed(scaled))
    return failure();
  auto rounded = imp.create<mlir::cleave::RoundOp>(*scaled);
  if (failed(rounded))
    return failure();
  return one(decimals > 0 ? imp.create<mlir::cleave::DivOp>(*rounded, scale)
                          : imp.create<mlir::cleave::MulOp>(*rounded, scale));
}

/// div(self, other, rounding_mode): 'trunc' and 'floor' keep integer
/// dtypes (PyTorch's rule); floats round the true quotient.
Result roundedDivision(Importer &imp, Inputs in) {
  if (!in[2].isConstant() || !in[2].constant.isString()) {
    imp.error() << "expected the rounding mode as a string";
    return failure();
  }
  const std::string &mode = in[2].constant.toStringRef();
  if (mode != "trunc" && mode != "floor") {
    imp.error() << "unknown rounding mode '" << mode << "' (expected 'trunc' or 'floor')";
    return failure();
  }
  auto values = imp.promote({in[0], in[1]});
  if (failed(values))
    return failure();
  Value x = (*values)[0], y = (*values)[1];
  if (mode == "floor")
    return one(imp.create<mlir::cleave::FloorDivideOp>(x, y));
  auto quotient = imp.create<mlir::cleave::DivOp>(x, y); // integer division truncates
  if (failed(quotient) || !llvm::isa<FloatType>(typeOf(x).getElementType()))
    return one(quotient);
  return one(imp.create<mlir::cleave::TruncOp>(*quotient));
}

template <typename OpTy>
Converter binary(bool trueDivision = false) {
  return [trueDivision](Importer &imp, jit::Node *node, Inputs in) -> Result {
    if (trueDivision && in.size() > 2 && !imp.isNone(in[2]))
      return roundedDivision(imp, in);
    auto values = imp.promote({in[0], in[1]}, trueDivision);
    if (failed(values))
      return failure();
    return one(imp.create<OpTy>((*values)[0], (*values)[1]));
  };
}

/// logical_and / logical_or: any dtypes, each operand tested for non-zero.
template <typename OpTy>
Result logical(Importer &imp, jit::Node *, Inputs in) {
  auto a = imp.tensor(in[0]), b = imp.tensor(in[1]);
  if (failed(a) || failed(b))
    return failure();
  Type i1 = imp.builder.getI1Type();
  return one(imp.create<OpTy>(imp.cast(*a, i1), imp.cast(*b, i1)));
}

/// add/sub(self, other, alpha): self +- alpha * other. `reversed` is rsub.
template <typename OpTy>
Converter addSub(bool reversed = false) {
  return [reversed](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1]});
    if (failed(values))
      return failure();
    Value lhs = (*values)[0], rhs = (*values)[1];
    if (reversed)
      std::swap(lhs, rhs);
    if (in.size() > 2) {
      auto alpha = imp.real(in[2]);
      if (failed(alpha))
        return failure();
      Type et = typeOf(rhs).getElementType();
      if (*alpha != 1.0) {
        auto scaled = imp.create<mlir::cleave::MulOp>(rhs, imp.splat(*alpha, et));
        if (failed(scaled))
          return failure();
        rhs = *scaled;
      }
    }
    return one(imp.create<OpTy>(lhs, rhs));
  };
}

Converter compare(mlir::cleave::ComparePredicate predicate) {
  return [predicate](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1]});
    if (failed(values))
      return failure();
    return one(imp.create<mlir::cleave::CompareOp>(predicate, (*values)[0],
                                                     (*values)[1]));
  };
}

Result where(Importer &imp, const Val &condition, const Val &onTrue, const Val &onFalse) {
  auto cond = imp.tensor(condition);
  if (failed(cond))
    return failure();
  auto values = imp.promote({onTrue, onFalse});
  if (failed(values))
    return failure();
  Value c = imp.cast(*cond, imp.builder.getI1Type());
  return one(imp.create<mlir::cleave::WhereOp>(c, (*values)[0], (*values)[1]));
}

Result gelu(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0]}, true);
  if (failed(values))
    return failure();
  auto approximation = mlir::cleave::GeluApproximation::none;
  if (in.size() > 1) {
    if (!in[1].isConstant() || !in[1].constant.isString()) {
      imp.error() << "expected the approximation as a string";
      return failure();
    }
    const std::string &name = in[1].constant.toStringRef();
    if (name == "tanh") {
      approximation = mlir::cleave::GeluApproximation::tanh;
    } else if (name != "none") {
      imp.error() << "unknown gelu approximation '" << name << "'";
      return failure();
    }
  }
  return one(imp.create<mlir::cleave::GeluOp>((*values)[0], approximation));
}

/// x bounded below (`lower`) or above by a number or a tensor, promoted
/// together: clamp_min, clamp_max and clamp's tensor bounds.
FailureOr<Value> clampBound(Importer &imp, Value x, const Val &bound, bool lower) {
  auto values = imp.promote({Val::ofTensor(x), bound});
  if (failed(values))
    return failure();
  return lower ? imp.create<mlir::cleave::MaximumOp>((*values)[0], (*values)[1])
               : imp.create<mlir::cleave::MinimumOp>((*values)[0], (*values)[1]);
}

Result clamp(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0]});
  if (failed(values))
    return failure();
  Value x = (*values)[0];
  Type et = typeOf(x).getElementType();
  for (int i : {1, 2}) {
    if (imp.isNone(in[i]))
      continue;
    if (in[i].isTensor() || (in[i].isConstant() && in[i].constant.isTensor())) { // clamp.Tensor
      auto clamped = clampBound(imp, x, in[i], /*lower=*/i == 1);
      if (failed(clamped))
        return failure();
      x = *clamped;
      continue;
    }
    auto bound = imp.real(in[i]);
    if (failed(bound))
      return failure();
    Value b = imp.splat(*bound, et);
    auto clamped = i == 1 ? imp.create<mlir::cleave::MaximumOp>(x, b)
                          : imp.create<mlir::cleave::MinimumOp>(x, b);
    if (failed(clamped))
      return failure();
    x = *clamped;
  }
  return one(x);
}

Result castTo(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Type target = typeOf(*x).getElementType();
  if (auto other = node->schema().argumentIndexWithName("other")) {
    auto value = imp.tensor(in[*other]);
    if (failed(value))
      return failure();
    target = typeOf(*value).getElementType();
  } else {
    auto dtype = dtypeArg(imp, node, in);
    if (failed(dtype))
      return failure();
    if (*dtype)
      target = **dtype;
  }
  return one(imp.cast(*x, target));
}

Result identity(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  return one(*x);
}

/// dropout(input, p, train): the identity in the plan, kept as cleave.dropout
/// (when it drops anything, on a float tensor) so training is costed with it.
Result dropout(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto p = imp.real(in[1]);
  if (failed(p))
    return failure();
  if (!(*p > 0.0 && *p < 1.0) || !llvm::isa<FloatType>(typeOf(*x).getElementType()))
    return one(*x);
  return one(imp.create<mlir::cleave::DropoutOp>(*x, imp.builder.getF64FloatAttr(*p)));
}

/// fill(self, value): self's shape and dtype, every element `value` (a
/// number, or a 0-d tensor). Its in-place form rebinds self, and through a
/// view its base (TorchImporter.cpp).
Result fillOp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  if (in[1].isTensor()) {
    Value v = in[1].tensor;
    if (typeOf(v).getRank() != 0) {
      imp.error() << "fill with a " << typeOf(v) << " value: it must be 0-d";
      return failure();
    }
    Value all = imp.splat(1.0, imp.builder.getI1Type(), type.getShape());
    return one(imp.create<mlir::cleave::WhereOp>(all, imp.cast(v, type.getElementType()), *x));
  }
  auto value = imp.real(in[1]);
  if (failed(value))
    return failure();
  return one(imp.splat(*value, type.getElementType(), type.getShape()));
}

/// copy(self, src, non_blocking): src broadcast to self's shape, in self's
/// dtype (`x[a:b] = t` traces as slice and copy_).
Result copyOp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto src = failed(x) ? FailureOr<Value>(failure()) : imp.tensor(in[1]);
  if (failed(src))
    return failure();
  auto type = typeOf(*x);
  Value all = imp.splat(1.0, imp.builder.getI1Type(), type.getShape());
  return one(imp.create<mlir::cleave::WhereOp>(all, imp.cast(*src, type.getElementType()), *x));
}

/// zeros_like / ones_like / full_like(self, [fill_value,] dtype, ...).
Converter fillLike(std::optional<double> fill) {
  return [fill](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    double value = fill.value_or(0);
    if (!fill) {
      auto given = imp.real(in[1]);
      if (failed(given))
        return failure();
      value = *given;
    }
    auto dtype = dtypeArg(imp, node, in);
    if (failed(dtype))
      return failure();
    Type et = dtype->value_or(typeOf(*x).getElementType());
    return one(imp.splat(value, et, typeOf(*x).getShape()));
  };
}

/// new_zeros / new_ones / new_full(self, size, [fill_value,] dtype, ...).
Converter fillNew(std::optional<double> fill) {
  return [fill](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto size = imp.intList(in[1]);
    if (failed(x) || failed(size))
      return failure();
    double value = fill.value_or(0);
    if (!fill) {
      auto given = imp.real(in[2]);
      if (failed(given))
        return failure();
      value = *given;
    }
    auto dtype = dtypeArg(imp, node, in);
    if (failed(dtype))
      return failure();
    return one(imp.splat(value, dtype->value_or(typeOf(*x).getElementType()), *size));
  };
}

//===----------------------------------------------------------------------===//
// Contractions and layers.
//===----------------------------------------------------------------------===//

/// torch.matmul: 1-D operands gain a dim that the result drops again.
Result matmul(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1]});
  if (failed(values))
    return failure();
  Value lhs = (*values)[0], rhs = (*values)[1];
  int64_t lhsRank = typeOf(lhs).getRank(), rhsRank = typeOf(rhs).getRank();
  if (lhsRank == 0 || rhsRank == 0) {
    imp.error() << "matmul of a 0-d tensor";
    return failure();
  }
  if (lhsRank == 1)
    lhs = imp.reshape(lhs, {1, typeOf(lhs).getDimSize(0)});
  if (rhsRank == 1)
    rhs = imp.reshape(rhs, {typeOf(rhs).getDimSize(0), 1});
  auto product = imp.create<mlir::cleave::MatmulOp>(lhs, rhs);
  if (failed(product))
    return failure();
  SmallVector<int64_t> shape(typeOf(*product).getShape());
  if (rhsRank == 1)
    shape.erase(shape.end() - 1);
  if (lhsRank == 1)
    shape.erase(shape.end() - (rhsRank == 1 ? 1 : 2));
  return one(imp.reshape(*product, shape));
}

/// addmm(self, mat1, mat2, beta, alpha) = beta * self + alpha * mat1 @ mat2.
Result addmm(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1], in[2]});
  auto beta = imp.real(in[3]), alpha = imp.real(in[4]);
  if (failed(values) || failed(beta) || failed(alpha))
    return failure();
  auto product = imp.create<mlir::cleave::MatmulOp>((*values)[1], (*values)[2]);
  if (failed(product))
    return failure();
  Type et = typeOf(*product).getElementType();
  if (*alpha != 1.0)
    product = imp.create<mlir::cleave::MulOp>(*product, imp.splat(*alpha, et));
  if (failed(product) || *beta == 0.0)
    return one(product);
  FailureOr<Value> bias = (*values)[0];
  if (*beta != 1.0)
    bias = imp.create<mlir::cleave::MulOp>(*bias, imp.splat(*beta, et));
  if (failed(bias))
    return failure();
  return one(imp.create<mlir::cleave::AddOp>(*product, *bias));
}

FailureOr<Value> optionalTensor(Importer &imp, const Val &val) {
  if (imp.isNone(val))
    return Value();
  return imp.tensor(val);
}

Result linear(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]), w = imp.tensor(in[1]);
  auto bias = optionalTensor(imp, in[2]);
  if (failed(x) || failed(w) || failed(bias))
    return failure();
  // Integers (cleave.linear takes floats): x · wᵀ + b, an integer matmul.
  auto xt = typeOf(*x), wt = typeOf(*w);
  if (!llvm::isa<FloatType>(xt.getElementType())) {
    if (wt.getElementType() != xt.getElementType() || wt.getRank() != 2 || xt.getRank() < 1 ||
        xt.getShape().back() != wt.getDimSize(1)) {
      imp.error() << "linear: input " << xt << " does not fit weight " << wt;
      return failure();
    }
    Value lhs = xt.getRank() == 1 ? imp.reshape(*x, {1, xt.getDimSize(0)}) : *x;
    auto rhs = imp.create<mlir::cleave::PermuteOp>(*w, imp.builder.getDenseI64ArrayAttr({1, 0}));
    if (failed(rhs))
      return failure();
    auto product = imp.create<mlir::cleave::MatmulOp>(lhs, *rhs);
    if (failed(product))
      return failure();
    Value y = xt.getRank() == 1 ? imp.reshape(*product, {wt.getDimSize(0)}) : *product;
    if (!*bias)
      return one(y);
    return one(imp.create<mlir::cleave::AddOp>(y, imp.cast(*bias, xt.getElementType())));
  }
  return one(imp.create<mlir::cleave::LinearOp>(*x, *w, *bias));
}

/// embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse).
/// `F.embedding` passes a negative padding_idx as -1 (none) after making a
/// given one positive; the padding row gets no gradient in training.
Result embedding(Importer &imp, jit::Node *, Inputs in) {
  auto w = imp.tensor(in[0]), ids = imp.tensor(in[1]);
  if (failed(w) || failed(ids))
    return failure();
  mlir::IntegerAttr padding;
  if (in.size() > 2 && !imp.isNone(in[2])) {
    auto index = imp.integer(in[2]);
    if (failed(index))
      return failure();
    int64_t rows = typeOf(*w).getDimSize(0);
    if (*index >= rows) {
      imp.error() << "padding_idx " << *index << " is outside the table's " << rows << " rows";
      return failure();
    }
    if (*index >= 0)
      padding = imp.builder.getI64IntegerAttr(*index);
  }
  for (auto [i, what] : {std::pair{3, "scale_grad_by_freq=True"}, {4, "sparse=True"}}) {
    if (int64_t(in.size()) <= i || imp.isNone(in[i]))
      continue;
    auto flag = imp.boolean(in[i]);
    if (failed(flag))
      return failure();
    if (*flag) {
      imp.error() << "embedding with " << what
                  << " is not supported (cleave's embedding gradient is dense and unscaled)";
      return failure();
    }
  }
  return one(imp.create<mlir::cleave::EmbeddingOp>(*w, *ids, /*row_offset=*/mlir::IntegerAttr(),
                                                   padding));
}

Result layerNorm(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto shape = imp.intList(in[1]);
  auto weight = optionalTensor(imp, in[2]), bias = optionalTensor(imp, in[3]);
  auto eps = imp.real(in[4]);
  if (failed(x) || failed(shape) || failed(weight) || failed(bias) || failed(eps))
    return failure();
  return one(imp.create<mlir::cleave::LayerNormOp>(*x, *weight, *bias, imp.builder.getDenseI64ArrayAttr(*shape),
      imp.builder.getF64FloatAttr(*eps)));
}

Result batchNorm(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto weight = optionalTensor(imp, in[1]), bias = optionalTensor(imp, in[2]);
  auto eps = imp.real(in[7]);
  auto train = imp.boolean(in[5]);
  if (failed(x) || failed(weight) || failed(bias) || failed(eps) || failed(train))
    return failure();
  // A call with training=True outside a training import normalizes with the
  // batch's statistics, as PyTorch (the mean and biased variance over every
  // dim but the channels), unless its running statistics are the model's
  // buffers: a module traced in train mode and compiled for inference keeps
  // its eval semantics (docs/importer.md). The running-statistics update is
  // a side effect a plan does not keep.
  auto isBuffer = [&](const Val &v) {
    if (imp.isNone(v))
      return false;
    auto t = imp.tensor(v);
    return succeeded(t) && llvm::isa_and_nonnull<mlir::cleave::ParamOp>(t->getDefiningOp());
  };
  if (*train && !imp.training && !isBuffer(in[3]) && !isBuffer(in[4])) {
    auto type = typeOf(*x);
    if (type.getNumElements() == 0) // nothing to normalize (PyTorch takes any empty input)
      return one(*x);
    if (type.getRank() < 2 || !llvm::isa<FloatType>(type.getElementType())) {
      imp.error() << "batch_norm expects a float [N, C, ...] input, got " << type;
      return failure();
    }
    SmallVector<int64_t> dims{0};
    for (int64_t d = 2; d < type.getRank(); ++d)
      dims.push_back(d);
    auto &b = imp.builder;
    auto mean = imp.create<mlir::cleave::ReduceMeanOp>(*x, b.getDenseI64ArrayAttr(dims), true);
    if (failed(mean))
      return failure();
    auto centered = imp.create<mlir::cleave::SubOp>(*x, *mean);
    if (failed(centered))
      return failure();
    auto squared = imp.create<mlir::cleave::MulOp>(*centered, *centered);
    if (failed(squared))
      return failure();
    auto var = imp.create<mlir::cleave::ReduceMeanOp>(*squared, b.getDenseI64ArrayAttr(dims),
                                                      false);
    if (failed(var))
      return failure();
    int64_t channels = type.getDimSize(1);
    return one(imp.create<mlir::cleave::BatchNormOp>(*x, imp.reshape(*mean, {channels}), *var,
                                                     *weight, *bias, b.getF64FloatAttr(*eps)));
  }
  // Eval semantics: normalize with the running statistics (a training
  // import turns them into batch statistics, -cleave-training-mode).
  if (imp.isNone(in[3]) || imp.isNone(in[4])) {
    imp.error() << "batch_norm without running statistics cannot run in eval mode";
    return failure();
  }
  auto mean = imp.tensor(in[3]), var = imp.tensor(in[4]);
  auto momentum = imp.real(in[6]);
  if (failed(mean) || failed(var) || failed(momentum))
    return failure();
  // momentum=None makes PyTorch's running statistics a cumulative average
  // (factor 1 / num_batches_tracked). A scripted module still says so; a
  // traced one recorded the factor of the traced step as a number.
  bool cumulative = imp.currentModule && imp.currentModule->hasattr("momentum") &&
                    imp.currentModule->attr("momentum").isNone();
  if (cumulative && imp.training) {
    imp.error() << "batch norm with momentum=None (a cumulative average of the batch "
                   "statistics) cannot be trained; give the module a momentum";
    return failure();
  }
  auto norm = imp.create<mlir::cleave::BatchNormOp>(*x, *mean, *var, *weight, *bias,
                                                     imp.builder.getF64FloatAttr(*eps));
  if (failed(norm))
    return failure();
  // The running statistics' update factor, for -cleave-training-mode.
  if (!cumulative)
    norm->getDefiningOp()->setAttr("momentum", imp.builder.getF64FloatAttr(*momentum));
  return one(norm);
}

template <typename OpTy>
Converter normalizeAlongDim() {
  return [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
    auto dtype = dtypeArg(imp, node, in);
    if (failed(dim) || failed(dtype))
      return failure();
    Value input = *dtype ? imp.cast(*x, **dtype) : *x;
    if (!llvm::isa<FloatType>(typeOf(input).getElementType()))
      input = imp.cast(input, imp.builder.getF32Type());
    return one(imp.create<OpTy>(input, *dim));
  };
}

/// The dims and keepdim of a reduction, by the schema's argument names:
/// `dim` an int, a list or None (None or [] reduce every dim).
struct ReduceArgs {
  SmallVector<int64_t> dims;
  bool keepdim = false;
};

FailureOr<ReduceArgs> reduceArgs(Importer &imp, jit::Node *node, Inputs in, int64_t rank,
                                 const char *dimName = "dim") {
  ReduceArgs args;
  auto dimIndex = node->schema().argumentIndexWithName(dimName);
  if (dimIndex && !imp.isNone(in[*dimIndex])) {
    auto given = imp.intList(in[*dimIndex]);
    if (failed(given))
      return failure();
    for (int64_t d : *given) {
      auto dim = normDim(imp, d, rank);
      if (failed(dim))
        return failure();
      args.dims.push_back(*dim);
    }
  }
  if (auto keepIndex = node->schema().argumentIndexWithName("keepdim")) {
    auto keep = imp.boolean(in[*keepIndex]);
    if (failed(keep))
      return failure();
    args.keepdim = *keep;
  }
  if (args.dims.empty())
    for (int64_t d = 0; d < rank; ++d)
      args.dims.push_back(d);
  if (rank == 0) // dim 0 (or -1) of a 0-d tensor: nothing to reduce, the result stays 0-d
    args.dims.clear();
  return args;
}

/// mean/sum/amax: (self, dims, keepdim[, dtype]) or (self[, dtype]) for all dims.
template <typename OpTy>
Converter reduction(bool mean) {
  return [mean](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto args = reduceArgs(imp, node, in, typeOf(*x).getRank());
    if (failed(args))
      return failure();
    SmallVector<int64_t> dims = args->dims;
    bool keepdim = args->keepdim;
    auto dtype = dtypeArg(imp, node, in);
    if (failed(dtype))
      return failure();
    Value input = *dtype ? imp.cast(*x, **dtype) : *x;
    Type et = typeOf(input).getElementType();
    if (mean && !llvm::isa<FloatType>(et)) {
      imp.error() << "mean of an integer tensor (PyTorch rejects it too)";
      return failure();
    }
    constexpr bool isMax = std::is_same_v<OpTy, mlir::cleave::ReduceMaxOp>;
    // Bools reduce on i64: a sum of bools counts; a max of bools, or a sum
    // asked for as bool (dtype=torch.bool), is an any(): non-zero, back to i1.
    bool boolResult = et.isInteger(1) && (isMax || dtype->has_value());
    if (!mean && et.isInteger(1))
      input = imp.cast(input, imp.builder.getI64Type());
    auto reduced = imp.create<OpTy>(input, imp.builder.getDenseI64ArrayAttr(dims), keepdim);
    if (boolResult && succeeded(reduced))
      return one(imp.cast(*reduced, et));
    return one(reduced);
  };
}

/// The extremum of `x` along `dim` and its index (reduce_max_index when
/// `max`). A 0-d input is viewed as one element (PyTorch's dim 0 of a 0-d
/// tensor), and its results stay 0-d. Refuses an empty dim, as PyTorch.
FailureOr<std::pair<Value, Value>> extremumWithIndex(Importer &imp, Value x, int64_t dim,
                                                     bool keepdim, bool max) {
  auto type = typeOf(x);
  bool scalar = type.getRank() == 0;
  if (scalar)
    x = imp.reshape(x, {1});
  if (typeOf(x).getDimSize(dim) == 0) {
    imp.error() << "cannot take the " << (max ? "maximum" : "minimum") << " over the empty dim "
                << dim << " of " << type << " (PyTorch refuses it too)";
    return failure();
  }
  SmallVector<Type> types;
  if (failed(mlir::cleave::inferIndexReductionTypes(imp.loc(), x.getType(), dim, keepdim, types)))
    return failure();
  auto dimAttr = imp.builder.getI64IntegerAttr(dim);
  auto keepAttr = imp.builder.getBoolAttr(keepdim);
  Operation *op =
      max ? imp.builder.create<mlir::cleave::ReduceMaxIndexOp>(imp.loc(), types[0], types[1], x,
                                                               dimAttr, keepAttr)
                .getOperation()
          : imp.builder.create<mlir::cleave::ReduceMinIndexOp>(imp.loc(), types[0], types[1], x,
                                                               dimAttr, keepAttr)
                .getOperation();
  if (failed(mlir::verify(op))) {
    op->erase();
    imp.error() << "cannot reduce " << type << " along dim " << dim;
    return failure();
  }
  Value values = op->getResult(0), indices = op->getResult(1);
  if (scalar)
    return std::make_pair(imp.reshape(values, {}), imp.reshape(indices, {}));
  return std::make_pair(values, indices);
}

/// argmax / argmin(self, dim=None, keepdim=False): without a dim, the index
/// into the flattened tensor (keepdim keeps every dim as size 1).
Converter argExtremum(bool max) {
  return [max](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto keepdim = imp.boolean(in[2]);
    if (failed(x) || failed(keepdim))
      return failure();
    int64_t rank = typeOf(*x).getRank();
    if (imp.isNone(in[1])) {
      Value flat = imp.reshape(*x, {typeOf(*x).getNumElements()});
      auto reduced = extremumWithIndex(imp, flat, 0, /*keepdim=*/false, max);
      if (failed(reduced))
        return failure();
      SmallVector<int64_t> kept(*keepdim ? rank : 0, 1);
      return one(imp.reshape(reduced->second, kept));
    }
    auto dim = dimArg(imp, in[1], rank);
    if (failed(dim))
      return failure();
    auto reduced = extremumWithIndex(imp, *x, *dim, *keepdim, max);
    if (failed(reduced))
      return failure();
    return one(reduced->second);
  };
}

/// maximum / minimum (and max.other / min.other): for bools these are
/// `or` / `and`, which is what PyTorch computes on them (the maximum kernels
/// take numbers only).
Result elementwiseExtremum(Importer &imp, Inputs in, bool max) {
  auto values = imp.promote({in[0], in[1]});
  if (failed(values))
    return failure();
  Value a = (*values)[0], b = (*values)[1];
  if (typeOf(a).getElementType().isInteger(1))
    return max ? one(imp.create<mlir::cleave::OrOp>(a, b))
               : one(imp.create<mlir::cleave::AndOp>(a, b));
  return max ? one(imp.create<mlir::cleave::MaximumOp>(a, b))
             : one(imp.create<mlir::cleave::MinimumOp>(a, b));
}

/// max / min: (self) the whole tensor's extremum, 0-d; (self, dim, keepdim)
/// the values and indices along dim; (self, other) the elementwise maximum.
Converter extremum(bool max) {
  return [max](Importer &imp, jit::Node *node, Inputs in) -> Result {
    const auto &schema = node->schema();
    if (schema.argumentIndexWithName("other"))
      return elementwiseExtremum(imp, in, max);
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    int64_t rank = typeOf(*x).getRank();
    if (auto dimIndex = schema.argumentIndexWithName("dim")) {
      auto dim = dimArg(imp, in[*dimIndex], rank);
      auto keepIndex = schema.argumentIndexWithName("keepdim");
      auto keepdim = keepIndex ? imp.boolean(in[*keepIndex]) : FailureOr<bool>(false);
      if (failed(dim) || failed(keepdim))
        return failure();
      auto reduced = extremumWithIndex(imp, *x, *dim, *keepdim, max);
      if (failed(reduced))
        return failure();
      return std::vector<Val>{Val::ofTensor(reduced->first), Val::ofTensor(reduced->second)};
    }
    // The whole tensor: the extremum of the flattened elements, 0-d. Its
    // gradient is shared among ties (PyTorch's evenly_distribute_backward),
    // which reduce_max's rule gives; reduce_max takes no bools, so they go
    // through the index reduction (no gradient to share).
    if (typeOf(*x).getNumElements() == 0) {
      imp.error() << "cannot take the " << (max ? "maximum" : "minimum") << " of the empty "
                  << typeOf(*x) << " (PyTorch refuses it too)";
      return failure();
    }
    Value flat = imp.reshape(*x, {typeOf(*x).getNumElements()});
    if (typeOf(*x).getElementType().isInteger(1)) {
      auto reduced = extremumWithIndex(imp, flat, 0, /*keepdim=*/false, max);
      if (failed(reduced))
        return failure();
      return one(reduced->first);
    }
    auto dims = imp.builder.getDenseI64ArrayAttr({0});
    if (max)
      return one(imp.create<mlir::cleave::ReduceMaxOp>(flat, dims, false));
    return one(imp.create<mlir::cleave::AminOp>(flat, dims, false));
  };
}

/// The input of cumsum / cumprod / prod: cast to `dtype` when given, else
/// integers and bools to i64 (PyTorch accumulates them in int64).
FailureOr<Value> accumulatedInput(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto dtype = dtypeArg(imp, node, in);
  if (failed(x) || failed(dtype))
    return failure();
  if (*dtype)
    return imp.cast(*x, **dtype);
  if (!llvm::isa<FloatType>(typeOf(*x).getElementType()))
    return imp.cast(*x, imp.builder.getI64Type());
  return *x;
}

/// cumsum / cumprod(self, dim, dtype=None); dim 0 of a 0-d tensor is the
/// tensor itself.
template <typename OpTy> Converter scan() {
  return [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = accumulatedInput(imp, node, in);
    if (failed(x))
      return failure();
    auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
    if (failed(dim))
      return failure();
    if (typeOf(*x).getRank() == 0)
      return one(*x);
    if (typeOf(*x).getElementType().isInteger(1)) {
      imp.error() << "a scan of bools needs a numeric dtype";
      return failure();
    }
    return one(imp.create<OpTy>(*x, *dim, false));
  };
}

/// prod(self, dtype=None) over every dim, 0-d; prod.dim_int(self, dim,
/// keepdim=False, dtype=None) over one.
Result prod(Importer &imp, jit::Node *node, Inputs in) {
  auto x = accumulatedInput(imp, node, in);
  if (failed(x))
    return failure();
  if (typeOf(*x).getElementType().isInteger(1)) {
    imp.error() << "a product of bools needs a numeric dtype";
    return failure();
  }
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> dims;
  bool keepdim = false;
  const auto &schema = node->schema();
  if (auto dimIndex = schema.argumentIndexWithName("dim")) {
    auto dim = dimArg(imp, in[*dimIndex], rank);
    auto keep = imp.boolean(in[*schema.argumentIndexWithName("keepdim")]);
    if (failed(dim) || failed(keep))
      return failure();
    keepdim = *keep;
    if (rank > 0)
      dims.push_back(*dim);
  } else {
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d);
  }
  return one(imp.create<mlir::cleave::ReduceProdOp>(*x, imp.builder.getDenseI64ArrayAttr(dims),
                                                    keepdim));
}

//===----------------------------------------------------------------------===//
// Convolution and pooling.
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Windows of 2-D ops as a constant-index gather (im2col), for what the
// float-only kernels (conv2d, avg_pool2d) do not take: integer tensors,
// exact in integer arithmetic, and avg_pool2d's divisor_override.
//===----------------------------------------------------------------------===//

/// A constant i64 tensor of `values` (1-D, or `shape`).
FailureOr<Value> i64Constant(Importer &imp, ArrayRef<int64_t> values,
                             ArrayRef<int64_t> shape = {}) {
  SmallVector<int64_t> dims(shape.begin(), shape.end());
  if (dims.empty())
    dims.push_back(values.size());
  auto type = RankedTensorType::get(dims, imp.builder.getI64Type());
  Value constant = imp.builder.create<mlir::cleave::ConstantOp>(
      imp.loc(), DenseElementsAttr::get(type, values));
  return constant;
}

/// The windows of one spatial dim: for each output position, the input
/// positions of its slots in order, -1 for a slot in the padding. Every
/// output has the same number of slots.
using DimWindows = std::vector<std::vector<int64_t>>;

/// PyTorch's pooling output size: floor or ceil of the window count, a last
/// window that starts in the right padding dropped.
int64_t pooledSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (span + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  return out;
}

/// A sliding window's slots: o·s - p + i·d for i < k.
DimWindows slidingWindows(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  DimWindows windows(std::max<int64_t>(0, pooledSize(in, k, s, p, d, ceil)));
  for (size_t o = 0; o < windows.size(); ++o)
    for (int64_t i = 0; i < k; ++i) {
      int64_t at = int64_t(o) * s - p + i * d;
      windows[o].push_back(at >= 0 && at < in ? at : -1);
    }
  return windows;
}

/// An adaptive pool's windows: [floor(o·in / out), ceil((o + 1)·in / out)),
/// padded with -1 to the longest.
DimWindows adaptiveWindows(int64_t in, int64_t out) {
  DimWindows windows(out);
  size_t longest = 0;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    for (int64_t i = start; i < end; ++i)
      windows[o].push_back(i);
    longest = std::max(longest, windows[o].size());
  }
  for (auto &w : windows)
    w.resize(longest, -1);
  return windows;
}

/// The windows of the trailing spatial dims of an [N, C, d1, ...] input.
struct Windows {
  Value values;                ///< [N, C, slots, outputs], slots and outputs row-major
  SmallVector<int64_t> outShape; ///< the output's spatial sizes
  /// Per (slot, output), the flat input position it read (-1: padding).
  std::vector<int64_t> positions;
  /// The same, as gathered (padding slots replaced by their fill).
  std::vector<int64_t> gathered;
};

/// Gathers every window of `x` ([N, C, spatial...], one DimWindows per
/// spatial dim) with one constant-index gather of the flattened spatial dims.
/// A padding slot reads a zero appended to the input (`fillWithFirst` false:
/// sums, convolutions) or repeats its window's first real element (true:
/// maxima, which it cannot change; PyTorch's first maximum stays first).
FailureOr<Windows> gatherWindows(Importer &imp, Value x, ArrayRef<DimWindows> dims,
                                 bool fillWithFirst) {
  auto type = typeOf(x);
  int64_t nd = dims.size();
  if (type.getRank() != nd + 2) {
    imp.error() << "expected an [N, C] input with " << nd << " spatial dims, got " << type;
    return failure();
  }
  int64_t n = type.getDimSize(0), c = type.getDimSize(1), spatial = 1;
  Windows out;
  int64_t outputs = 1, slots = 1;
  for (int64_t i = 0; i < nd; ++i) {
    spatial *= type.getDimSize(2 + i);
    if (dims[i].empty()) {
      imp.error() << "the window does not fit spatial dim " << i << " of " << type
                  << " with its padding";
      return failure();
    }
    out.outShape.push_back(dims[i].size());
    outputs *= dims[i].size();
    slots *= dims[i].front().size();
  }
  // Slot and output counters, row-major.
  std::vector<int64_t> gatherAt(slots * outputs);
  out.positions.assign(slots * outputs, -1);
  for (int64_t o = 0; o < outputs; ++o) {
    int64_t first = -1;
    for (int64_t k = 0; k < slots; ++k) {
      int64_t flat = 0, restO = o, restK = k;
      bool inside = true;
      for (int64_t i = nd - 1, strideIn = 1; i >= 0; --i) {
        int64_t oi = restO % dims[i].size(), ki = restK % dims[i].front().size();
        restO /= dims[i].size(), restK /= dims[i].front().size();
        int64_t at = dims[i][oi][ki];
        inside &= at >= 0;
        flat += at * strideIn;
        strideIn *= type.getDimSize(2 + i);
      }
      if (inside) {
        out.positions[k * outputs + o] = flat;
        if (first < 0)
          first = flat;
      }
    }
    if (fillWithFirst && first < 0) {
      imp.error() << "a window lies wholly in the padding";
      return failure();
    }
    for (int64_t k = 0; k < slots; ++k) {
      int64_t at = out.positions[k * outputs + o];
      gatherAt[k * outputs + o] = at >= 0 ? at : fillWithFirst ? first : spatial;
    }
  }
  Type et = type.getElementType();
  Value source = imp.reshape(x, {n, c, spatial});
  if (!fillWithFirst) {
    auto padded = imp.create<mlir::cleave::ConcatOp>(
        ValueRange{source, imp.splat(0, et, {n, c, 1})}, int64_t(2));
    if (failed(padded))
      return failure();
    source = *padded;
  }
  auto index = i64Constant(imp, gatherAt);
  if (failed(index))
    return failure();
  out.gathered = std::move(gatherAt);
  auto gathered = imp.create<mlir::cleave::IndexSelectOp>(
      RankedTensorType::get({n, c, slots * outputs}, et), source, *index, int64_t(2));
  if (failed(gathered))
    return failure();
  out.values = imp.reshape(*gathered, {n, c, slots, outputs});
  return out;
}

/// `x` with a batch dim of 1 when it has `nd + 1` dims (an unbatched input);
/// `unbatched` says so.
FailureOr<Value> batched(Importer &imp, Value x, int64_t nd, bool &unbatched) {
  auto type = typeOf(x);
  unbatched = type.getRank() == nd + 1;
  if (type.getRank() != nd + 2 && !unbatched) {
    imp.error() << "expected an [N, C] or [C] input with " << nd << " spatial dims, got "
                << type;
    return failure();
  }
  if (!unbatched)
    return x;
  SmallVector<int64_t> shape{1};
  shape.append(type.getShape().begin(), type.getShape().end());
  return imp.reshape(x, shape);
}

/// The [N, C, outputs] result of a windowed op in its [N, C, spatial...] (or
/// unbatched [C, spatial...]) shape.
Value unflattenWindows(Importer &imp, Value y, const Windows &windows, bool unbatched) {
  SmallVector<int64_t> shape;
  if (!unbatched)
    shape.push_back(typeOf(y).getDimSize(0));
  shape.push_back(typeOf(y).getDimSize(1));
  shape.append(windows.outShape.begin(), windows.outShape.end());
  return imp.reshape(y, shape);
}

/// An integer conv2d or conv3d: the windows [N, G, OH·OW, C/G·kh·kw] times
/// the weight [G, C/G·kh·kw, O/G], an integer matmul (exact, wrapping as
/// PyTorch's).
FailureOr<Value> integerConv2d(Importer &imp, Value x, Value w, Value bias,
                               ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                               ArrayRef<int64_t> dilation, int64_t groups) {
  auto xt = typeOf(x), wt = typeOf(w);
  Type et = xt.getElementType();
  if (wt.getElementType() != et) {
    imp.error() << "input " << xt << " and weight " << wt << " have different element types";
    return failure();
  }
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), o = wt.getDimSize(0);
  if (groups < 1 || c % groups || o % groups || wt.getDimSize(1) * groups != c) {
    imp.error() << "weight " << wt << " does not fit input " << xt << " with groups=" << groups;
    return failure();
  }
  // 2-D or 3-D by the weight's rank.
  int64_t nd = wt.getRank() - 2, taps = 1, spots = 1;
  std::vector<DimWindows> dims;
  for (int64_t i = 0; i < nd; ++i) {
    dims.push_back(slidingWindows(xt.getDimSize(2 + i), wt.getDimSize(2 + i), stride[i],
                                  padding[i], dilation[i], false));
    taps *= wt.getDimSize(2 + i);
  }
  auto windows = gatherWindows(imp, x, dims, /*fillWithFirst=*/false);
  if (failed(windows))
    return failure();
  int64_t cg = c / groups, og = o / groups;
  for (int64_t size : windows->outShape)
    spots *= size;
  auto &b = imp.builder;
  Value cols = imp.reshape(windows->values, {n, groups, cg, taps, spots});
  auto moved = imp.create<mlir::cleave::PermuteOp>(cols, b.getDenseI64ArrayAttr({0, 1, 4, 2, 3}));
  if (failed(moved))
    return failure();
  Value lhs = imp.reshape(*moved, {n, groups, spots, cg * taps});
  auto rhs = imp.create<mlir::cleave::PermuteOp>(imp.reshape(w, {groups, og, cg * taps}),
                                                 b.getDenseI64ArrayAttr({0, 2, 1}));
  if (failed(rhs))
    return failure();
  auto product = imp.create<mlir::cleave::MatmulOp>(lhs, *rhs);
  if (failed(product))
    return failure();
  auto back = imp.create<mlir::cleave::PermuteOp>(*product, b.getDenseI64ArrayAttr({0, 1, 3, 2}));
  if (failed(back))
    return failure();
  SmallVector<int64_t> shape{n, o};
  shape.append(windows->outShape.begin(), windows->outShape.end());
  Value y = imp.reshape(*back, shape);
  if (!bias)
    return y;
  SmallVector<int64_t> biasShape(nd + 1, 1);
  biasShape[0] = o;
  return imp.create<mlir::cleave::AddOp>(y, imp.reshape(imp.cast(bias, et), biasShape));
}

/// avg_poolNd through its windows: the window sums divided by PyTorch's
/// divisor: divisor_override, or the window clipped to the padded input
/// (count_include_pad) or to the input. Integer inputs divide truncating,
/// as PyTorch's integer kernels.
FailureOr<Value> avgPoolNd(Importer &imp, Value x, int64_t nd, ArrayRef<int64_t> kernel,
                           ArrayRef<int64_t> stride, ArrayRef<int64_t> padding, bool ceil,
                           bool countPad, std::optional<int64_t> divisorOverride) {
  bool unbatched;
  auto input = batched(imp, x, nd, unbatched);
  if (failed(input))
    return failure();
  auto type = typeOf(*input);
  std::vector<DimWindows> dims;
  std::vector<std::vector<int64_t>> divisors(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t in = type.getDimSize(2 + i), k = kernel[i], s = stride[i], p = padding[i];
    if (k < 1 || s < 1 || p < 0 || 2 * p > k) {
      imp.error() << "avg_pool: kernel and stride must be positive and padding at most half "
                     "the kernel, got kernel "
                  << k << ", stride " << s << ", padding " << p;
      return failure();
    }
    dims.push_back(slidingWindows(in, k, s, p, 1, ceil));
    for (size_t o = 0; o < dims.back().size(); ++o) {
      int64_t start = int64_t(o) * s - p, end = std::min(start + k, in + p);
      int64_t withPad = end - start;
      int64_t inside = std::min(end, in) - std::max<int64_t>(start, 0);
      divisors[i].push_back(countPad ? withPad : inside);
    }
  }
  auto windows = gatherWindows(imp, *input, dims, /*fillWithFirst=*/false);
  if (failed(windows))
    return failure();
  auto &b = imp.builder;
  auto sums = imp.create<mlir::cleave::ReduceSumOp>(windows->values, b.getDenseI64ArrayAttr({2}),
                                                    false);
  if (failed(sums))
    return failure();
  // The divisor of each output: the product of its dims' (a box).
  std::vector<int64_t> divisor{1};
  for (int64_t i = 0; i < nd; ++i) {
    std::vector<int64_t> next;
    for (int64_t d : divisor)
      for (int64_t e : divisors[i])
        next.push_back(divisorOverride ? *divisorOverride : d * e);
    divisor = std::move(next);
  }
  Type et = type.getElementType();
  auto constant = i64Constant(imp, divisor);
  if (failed(constant))
    return failure();
  auto quotient = imp.create<mlir::cleave::DivOp>(*sums, imp.cast(*constant, et));
  if (failed(quotient))
    return failure();
  return unflattenWindows(imp, *quotient, *windows, unbatched);
}


/// conv2d / conv3d(input, weight, bias, stride, padding, dilation, groups),
/// padding a list or 'same' / 'valid'. 2-D with cleave.conv2d, 3-D with the
/// composite cleave.conv3d.
Result conv(Importer &imp, Inputs in, const Val &groupsVal) {
  auto x = imp.tensor(in[0]), w = imp.tensor(in[1]);
  if (failed(x) || failed(w))
    return failure();
  int64_t nd = typeOf(*w).getRank() - 2;
  if (nd != 2 && nd != 3) {
    imp.error() << "only 1-, 2- and 3-D convolutions are supported, weight is " << typeOf(*w);
    return failure();
  }
  auto bias = optionalTensor(imp, in[2]);
  auto stride = spatialArg(imp, in[3], nd);
  auto dilation = spatialArg(imp, in[5], nd);
  auto groups = imp.integer(groupsVal);
  if (failed(bias) || failed(stride) || failed(dilation) || failed(groups))
    return failure();
  SmallVector<int64_t> padding;
  if (in[4].isConstant() && in[4].constant.isString()) {
    // padding='same' (stride 1) pads (k - 1) * dilation in all, the odd one
    // after, as PyTorch; 'valid' pads nothing.
    const std::string &mode = in[4].constant.toStringRef();
    SmallVector<int64_t> extra(nd, 0);
    bool uneven = false;
    for (int64_t i = 0; i < nd; ++i) {
      int64_t total = mode == "same" ? (*dilation)[i] * (typeOf(*w).getDimSize(2 + i) - 1) : 0;
      padding.push_back(total / 2);
      extra[i] = total - 2 * (total / 2);
      uneven |= extra[i] != 0;
    }
    if (uneven) {
      auto xt = typeOf(*x);
      SmallVector<int64_t> pads, shape(xt.getShape());
      for (int64_t i = nd - 1; i >= 0; --i) {
        pads.append({0, extra[i]});
        shape[xt.getRank() - nd + i] += extra[i];
      }
      auto padded = imp.create<mlir::cleave::PadOp>(
          xt.clone(shape), *x, imp.builder.getDenseI64ArrayAttr(pads),
          imp.builder.getStringAttr("constant"), imp.builder.getF64FloatAttr(0.0));
      if (failed(padded))
        return failure();
      x = *padded;
    }
  } else {
    auto given = spatialArg(imp, in[4], nd);
    if (failed(given))
      return failure();
    padding = *given;
  }
  if (nd == 3) {
    auto xt = typeOf(*x);
    if (xt.getRank() != 5 && xt.getRank() != 4) {
      imp.error() << "expected a [N, C, D, H, W] or [C, D, H, W] input, got " << xt;
      return failure();
    }
    Value input = xt.getRank() == 5 ? *x : imp.reshape(*x, [&] {
      SmallVector<int64_t> shape{1};
      shape.append(xt.getShape().begin(), xt.getShape().end());
      return shape;
    }());
    auto &b = imp.builder;
    auto y = llvm::isa<FloatType>(xt.getElementType())
                 ? imp.create<mlir::cleave::Conv3dOp>(input, *w, *bias,
                                                      b.getDenseI64ArrayAttr(*stride),
                                                      b.getDenseI64ArrayAttr(padding),
                                                      b.getDenseI64ArrayAttr(*dilation), *groups)
                 : integerConv2d(imp, input, *w, *bias, *stride, padding, *dilation, *groups);
    if (failed(y) || xt.getRank() == 5)
      return one(y);
    return one(imp.reshape(*y, typeOf(*y).getShape().drop_front()));
  }
  // Integers: windows gathered and multiplied (cleave.conv2d takes floats).
  if (!llvm::isa<FloatType>(typeOf(*x).getElementType())) {
    auto xt = typeOf(*x);
    if (xt.getRank() != 3 && xt.getRank() != 4) {
      imp.error() << "expected a [N, C, H, W] or [C, H, W] input, got " << xt;
      return failure();
    }
    Value input = xt.getRank() == 4 ? *x : imp.reshape(*x, {1, xt.getDimSize(0),
                                                            xt.getDimSize(1), xt.getDimSize(2)});
    auto y = integerConv2d(imp, input, *w, *bias, *stride, padding, *dilation, *groups);
    if (failed(y) || xt.getRank() == 4)
      return one(y);
    return one(imp.reshape(*y, typeOf(*y).getShape().drop_front()));
  }
  auto &b = imp.builder;
  return one(imp.create<mlir::cleave::Conv2dOp>(*x, *w, *bias,
                                        b.getDenseI64ArrayAttr(*stride),
                                        b.getDenseI64ArrayAttr(padding),
                                        b.getDenseI64ArrayAttr(*dilation), *groups));
}

Result conv2d(Importer &imp, jit::Node *, Inputs in) { return conv(imp, in, in[6]); }

/// A transposed convolution as an ordinary one: the input with stride - 1
/// zeros inserted between its elements and padded by d·(k - 1) - p on each
/// side (plus output_padding after; a negative padding crops), convolved at
/// stride 1 and the same dilation with the weight flipped in space and its
/// in/out channels swapped per group. The zero insertion and padding are one
/// constant-index gather (positions outside the input read an appended zero).
/// 2-D or 3-D by the weight's rank: weight [C_in, C_out / g, k...].
Result transposedConv(Importer &imp, Value x, Value w, Value bias, ArrayRef<int64_t> stride,
                      ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                      ArrayRef<int64_t> outputPadding, int64_t groups) {
  auto xt = typeOf(x), wt = typeOf(w);
  int64_t nd = wt.getRank() - 2;
  if ((nd != 2 && nd != 3) || (xt.getRank() != nd + 2 && xt.getRank() != nd + 1)) {
    imp.error() << "expected a [N, C, spatial...] or [C, spatial...] input and a [C_in, "
                   "C_out / groups, k...] weight with 2 or 3 spatial dims, got "
                << xt << " and " << wt;
    return failure();
  }
  if (int64_t(stride.size()) != nd || int64_t(padding.size()) != nd ||
      int64_t(dilation.size()) != nd || int64_t(outputPadding.size()) != nd) {
    imp.error() << "transposed convolution: expected " << nd << " sizes per spatial list";
    return failure();
  }
  bool unbatched = xt.getRank() == nd + 1;
  if (unbatched) {
    SmallVector<int64_t> shape{1};
    shape.append(xt.getShape().begin(), xt.getShape().end());
    x = imp.reshape(x, shape);
  }
  xt = typeOf(x);
  int64_t n = xt.getDimSize(0), cin = xt.getDimSize(1);
  if (groups < 1 || cin % groups || wt.getDimSize(0) != cin) {
    imp.error() << "weight " << wt << " does not fit input " << xt << " with groups=" << groups;
    return failure();
  }
  for (int64_t i = 0; i < nd; ++i)
    if (stride[i] < 1 || dilation[i] < 1 || padding[i] < 0 || outputPadding[i] < 0 ||
        (outputPadding[i] >= stride[i] && outputPadding[i] >= dilation[i])) {
      imp.error() << "transposed convolution: stride and dilation must be positive, padding "
                     "non-negative, and output_padding smaller than stride or dilation";
      return failure();
    }
  int64_t cg = cin / groups, og = wt.getDimSize(1), taps = 1, inner = 1, outer = 1;
  SmallVector<int64_t> lo(nd), size(nd), in(nd), kernel(nd);
  for (int64_t i = 0; i < nd; ++i) {
    in[i] = xt.getDimSize(2 + i);
    kernel[i] = wt.getDimSize(2 + i);
    lo[i] = dilation[i] * (kernel[i] - 1) - padding[i];
    size[i] = (in[i] - 1) * stride[i] + 1 + 2 * lo[i] + outputPadding[i];
    if (size[i] - dilation[i] * (kernel[i] - 1) < 1) {
      imp.error() << "transposed convolution: the output would be empty";
      return failure();
    }
    taps *= kernel[i];
    inner *= in[i];
    outer *= size[i];
  }
  // The zero-inserted, padded input: each output position's flat input
  // position, or `inner` (the appended zero).
  std::vector<int64_t> positions;
  positions.reserve(outer);
  for (int64_t flat = 0; flat < outer; ++flat) {
    int64_t rest = flat, at = 0, scale = 1;
    bool inside = true;
    for (int64_t i = nd - 1; i >= 0; --i) {
      int64_t q = rest % size[i] - lo[i];
      rest /= size[i];
      inside &= q >= 0 && q % stride[i] == 0 && q / stride[i] < in[i];
      at += (inside ? q / stride[i] : 0) * scale;
      scale *= in[i];
    }
    positions.push_back(inside ? at : inner);
  }
  Type et = xt.getElementType();
  auto &bld = imp.builder;
  auto padded = imp.create<mlir::cleave::ConcatOp>(
      ValueRange{imp.reshape(x, {n, cin, inner}), imp.splat(0, et, {n, cin, 1})}, int64_t(2));
  auto index = i64Constant(imp, positions);
  if (failed(padded) || failed(index))
    return failure();
  auto spread = imp.create<mlir::cleave::IndexSelectOp>(
      RankedTensorType::get({n, cin, outer}, et), *padded, *index, int64_t(2));
  if (failed(spread))
    return failure();
  SmallVector<int64_t> inputShape{n, cin};
  inputShape.append(size.begin(), size.end());
  Value input = imp.reshape(*spread, inputShape);
  // The weight: [g, C_in / g, C_out / g, taps] reversed in space, then
  // [g, C_out / g, C_in / g, ...] -> [C_out, C_in / g, k...].
  std::vector<int64_t> reversed(taps);
  for (int64_t i = 0; i < taps; ++i)
    reversed[i] = taps - 1 - i;
  auto flipIndex = i64Constant(imp, reversed);
  if (failed(flipIndex))
    return failure();
  auto flipped = imp.create<mlir::cleave::IndexSelectOp>(
      RankedTensorType::get({groups, cg, og, taps}, wt.getElementType()),
      imp.reshape(w, {groups, cg, og, taps}), *flipIndex, int64_t(3));
  if (failed(flipped))
    return failure();
  auto swapped = imp.create<mlir::cleave::PermuteOp>(*flipped,
                                                     bld.getDenseI64ArrayAttr({0, 2, 1, 3}));
  if (failed(swapped))
    return failure();
  SmallVector<int64_t> weightShape{groups * og, cg};
  weightShape.append(kernel.begin(), kernel.end());
  Value weight = imp.reshape(*swapped, weightShape);
  SmallVector<int64_t> ones(nd, 1), zeros(nd, 0);
  FailureOr<Value> y;
  if (nd == 3 && llvm::isa<FloatType>(et))
    y = imp.create<mlir::cleave::Conv3dOp>(input, weight, bias, bld.getDenseI64ArrayAttr(ones),
                                           bld.getDenseI64ArrayAttr(zeros),
                                           bld.getDenseI64ArrayAttr(dilation), groups);
  else if (llvm::isa<FloatType>(et))
    y = imp.create<mlir::cleave::Conv2dOp>(input, weight, bias, bld.getDenseI64ArrayAttr(ones),
                                           bld.getDenseI64ArrayAttr(zeros),
                                           bld.getDenseI64ArrayAttr(dilation), groups);
  else
    y = integerConv2d(imp, input, weight, bias, ones, zeros, dilation, groups);
  if (failed(y) || !unbatched)
    return one(y);
  return one(imp.reshape(*y, typeOf(*y).getShape().drop_front()));
}

/// aten::_convolution(input, weight, bias, stride, padding, dilation,
///                    transposed, output_padding, groups, ...), as traced.
Result convolution(Importer &imp, jit::Node *, Inputs in) {
  auto transposed = imp.boolean(in[6]);
  if (failed(transposed))
    return failure();
  if (!*transposed)
    return conv(imp, in, in[8]);
  auto x = imp.tensor(in[0]), w = imp.tensor(in[1]);
  auto bias = optionalTensor(imp, in[2]);
  auto groups = imp.integer(in[8]);
  if (failed(x) || failed(w) || failed(bias) || failed(groups))
    return failure();
  int64_t nd = typeOf(*w).getRank() - 2;
  auto stride = spatialArg(imp, in[3], nd), padding = spatialArg(imp, in[4], nd),
       dilation = spatialArg(imp, in[5], nd), outputPadding = spatialArg(imp, in[7], nd);
  if (failed(stride) || failed(padding) || failed(dilation) || failed(outputPadding))
    return failure();
  return transposedConv(imp, *x, *w, *bias, *stride, *padding, *dilation, *outputPadding,
                        *groups);
}

Result maxPool2d(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto kernel = pairArg(imp, in[1]);
  if (failed(x) || failed(kernel))
    return failure();
  auto stride = pairArg(imp, in[2], *kernel);
  auto padding = pairArg(imp, in[3]), dilation = pairArg(imp, in[4]);
  auto ceil = imp.boolean(in[5]);
  if (failed(stride) || failed(padding) || failed(dilation) || failed(ceil))
    return failure();
  auto &b = imp.builder;
  return one(imp.create<mlir::cleave::MaxPool2dOp>(*x, b.getDenseI64ArrayAttr(*kernel), b.getDenseI64ArrayAttr(*stride),
      b.getDenseI64ArrayAttr(*padding), b.getDenseI64ArrayAttr(*dilation), *ceil));
}

Result avgPool2d(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto kernel = pairArg(imp, in[1]);
  if (failed(x) || failed(kernel))
    return failure();
  auto stride = pairArg(imp, in[2], *kernel);
  auto padding = pairArg(imp, in[3]);
  auto ceil = imp.boolean(in[4]), countPad = imp.boolean(in[5]);
  if (failed(stride) || failed(padding) || failed(ceil) || failed(countPad))
    return failure();
  std::optional<int64_t> divisor;
  if (in.size() > 6 && !imp.isNone(in[6])) {
    auto given = imp.integer(in[6]);
    if (failed(given))
      return failure();
    if (*given == 0) {
      imp.error() << "divisor_override must be non-zero";
      return failure();
    }
    divisor = *given;
  }
  // Integers (cleave.avg_pool2d takes floats) and divisor_override: window
  // sums over a constant-index gather.
  if (divisor || !llvm::isa<FloatType>(typeOf(*x).getElementType()))
    return one(avgPoolNd(imp, *x, 2, *kernel, *stride, *padding, *ceil, *countPad, divisor));
  auto &b = imp.builder;
  return one(imp.create<mlir::cleave::AvgPool2dOp>(*x, b.getDenseI64ArrayAttr(*kernel),
                                           b.getDenseI64ArrayAttr(*stride),
                                           b.getDenseI64ArrayAttr(*padding), *ceil,
                                           *countPad));
}

Result adaptiveAvgPool2d(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = pairArg(imp, in[1]);
  if (failed(x) || failed(size))
    return failure();
  // An unbatched [C, H, W] input pools as a batch of one.
  auto type = typeOf(*x);
  bool unbatched = type.getRank() == 3;
  Value input = unbatched ? imp.reshape(*x, {1, type.getDimSize(0), type.getDimSize(1),
                                             type.getDimSize(2)})
                          : *x;
  auto pooled = imp.create<mlir::cleave::AdaptiveAvgPool2dOp>(
      input, imp.builder.getDenseI64ArrayAttr(*size));
  if (failed(pooled) || !unbatched)
    return one(pooled);
  return one(imp.reshape(*pooled, typeOf(*pooled).getShape().drop_front()));
}

/// 1-D convolutions and pools as their 2-D forms over a height of 1:
/// [N, C, L] becomes [N, C, 1, L] (an unbatched [C, L] gains N = 1 too), the
/// weight [O, C/g, K] becomes [O, C/g, 1, K], spatial lists (k) become (1, k)
/// and paddings (0, p); the result drops the height again. `spatial` and
/// `paddings` are argument indices; `extra` arguments (None) fill the 2-D
/// form's tail.
Converter as2d(Converter form2d, std::vector<int> spatial, std::vector<int> paddings,
               bool reshapeWeight, int extra = 0) {
  return [=](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto type = typeOf(*x);
    bool unbatched = type.getRank() == 2;
    if (type.getRank() != 3 && !unbatched) {
      imp.error() << "expected a [N, C, L] or [C, L] input, got " << type;
      return failure();
    }
    int64_t n = unbatched ? 1 : type.getDimSize(0);
    std::vector<Val> args(in.begin(), in.end());
    args[0] = Val::ofTensor(imp.reshape(*x, {n, type.getDimSize(type.getRank() - 2), 1,
                                            type.getDimSize(type.getRank() - 1)}));
    if (reshapeWeight) {
      auto w = imp.tensor(in[1]);
      if (failed(w))
        return failure();
      auto wt = typeOf(*w);
      if (wt.getRank() != 3) {
        imp.error() << "expected a [out, in / groups, k] weight, got " << wt;
        return failure();
      }
      args[1] = Val::ofTensor(
          imp.reshape(*w, {wt.getDimSize(0), wt.getDimSize(1), 1, wt.getDimSize(2)}));
    }
    auto widen = [&](int i, int64_t height) -> LogicalResult {
      if (in[i].isConstant() && in[i].constant.isString())
        return success(); // padding='same' / 'valid'
      auto values = imp.intList(in[i]);
      if (failed(values))
        return failure();
      if (values->size() > 1) {
        imp.error() << "expected one size for a 1-D op, got " << values->size();
        return failure();
      }
      std::vector<int64_t> wide;
      if (!values->empty())
        wide = {height, (*values)[0]};
      args[i] = Val::ofConstant(c10::IValue(wide));
      return success();
    };
    for (int i : spatial)
      if (failed(widen(i, 1)))
        return failure();
    for (int i : paddings)
      if (failed(widen(i, 0)))
        return failure();
    for (int i = 0; i < extra; ++i)
      args.push_back(Val::ofConstant(c10::IValue()));
    auto result = form2d(imp, node, args);
    if (failed(result))
      return failure();
    Value y = result->front().tensor;
    auto yt = typeOf(y);
    SmallVector<int64_t> shape;
    if (!unbatched)
      shape.push_back(yt.getDimSize(0));
    shape.append({yt.getDimSize(1), yt.getDimSize(3)});
    return one(imp.reshape(y, shape));
  };
}

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

Result view(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = imp.intList(in[1]);
  if (failed(x) || failed(size))
    return failure();
  auto shape = resolveShape(imp, *size, typeOf(*x).getNumElements());
  if (failed(shape))
    return failure();
  return one(imp.reshape(*x, *shape));
}

Result viewAs(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]), other = imp.tensor(in[1]);
  if (failed(x) || failed(other))
    return failure();
  if (typeOf(*x).getNumElements() != typeOf(*other).getNumElements()) {
    imp.error() << "cannot view " << typeOf(*x) << " as " << typeOf(*other);
    return failure();
  }
  return one(imp.reshape(*x, typeOf(*other).getShape()));
}

Result flatten(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  int64_t rank = type.getRank();
  auto start = dimArg(imp, in[1], rank), end = dimArg(imp, in[2], rank);
  if (failed(start) || failed(end))
    return failure();
  if (rank == 0)
    return one(imp.reshape(*x, {1}));
  SmallVector<int64_t> shape(type.getShape().take_front(*start));
  int64_t merged = 1;
  for (int64_t d = *start; d <= *end; ++d)
    merged *= type.getDimSize(d);
  shape.push_back(merged);
  llvm::append_range(shape, type.getShape().drop_front(*end + 1));
  return one(imp.reshape(*x, shape));
}

Result unsqueeze(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank() + 1);
  if (failed(dim))
    return failure();
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + *dim, 1);
  return one(imp.reshape(*x, shape));
}

Result squeeze(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  std::optional<int64_t> only;
  if (in.size() > 1) {
    auto dim = dimArg(imp, in[1], type.getRank());
    if (failed(dim))
      return failure();
    only = *dim;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.getDimSize(d) != 1 || (only && *only != d))
      shape.push_back(type.getDimSize(d));
  return one(imp.reshape(*x, shape));
}

Result permuteTo(Importer &imp, Value x, ArrayRef<int64_t> dims) {
  return one(imp.create<mlir::cleave::PermuteOp>(x,
                                                   imp.builder.getDenseI64ArrayAttr(dims)));
}

Result permute(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto given = imp.intList(in[1]);
  if (failed(x) || failed(given))
    return failure();
  SmallVector<int64_t> dims;
  for (int64_t d : *given) {
    auto dim = normDim(imp, d, typeOf(*x).getRank());
    if (failed(dim))
      return failure();
    dims.push_back(*dim);
  }
  return permuteTo(imp, *x, dims);
}

Result transpose(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (in.size() == 1) { // aten::t
    if (rank < 2)
      return one(*x);
    std::swap(dims[0], dims[1]);
    return permuteTo(imp, *x, dims);
  }
  auto a = dimArg(imp, in[1], rank), b = dimArg(imp, in[2], rank);
  if (failed(a) || failed(b))
    return failure();
  std::swap(dims[*a], dims[*b]);
  return permuteTo(imp, *x, dims);
}

Result broadcastTo(Importer &imp, Value x, ArrayRef<int64_t> shape) {
  auto type = typeOf(x);
  if (type.getShape() == shape)
    return one(x);
  return one(imp.create<mlir::cleave::BroadcastToOp>(type.clone(shape), x));
}

Result expand(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = imp.intList(in[1]);
  if (failed(x) || failed(size))
    return failure();
  auto type = typeOf(*x);
  SmallVector<int64_t> shape(size->begin(), size->end());
  int64_t offset = int64_t(shape.size()) - type.getRank();
  if (offset < 0) {
    imp.error() << "expand to fewer dims than " << type;
    return failure();
  }
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    if (shape[i] != -1)
      continue;
    if (i < offset) {
      imp.error() << "expand: -1 is not allowed for a new leading dim";
      return failure();
    }
    shape[i] = type.getDimSize(i - offset);
  }
  auto fits = mlir::cleave::broadcastShapes({type.getShape(), shape});
  if (!fits || ArrayRef<int64_t>(*fits) != ArrayRef<int64_t>(shape)) {
    imp.error() << "cannot expand " << type << " to [" << shape << "]";
    return failure();
  }
  return broadcastTo(imp, *x, shape);
}

Result expandAs(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]), other = imp.tensor(in[1]);
  if (failed(x) || failed(other))
    return failure();
  return broadcastTo(imp, *x, typeOf(*other).getShape());
}

/// aten::slice(self, dim, start, end, step) with Python's clamping.
Result sliceOp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank());
  auto step = imp.integer(in[4]);
  if (failed(dim) || failed(step))
    return failure();
  if (*step < 1) {
    imp.error() << "slice step must be positive, got " << *step;
    return failure();
  }
  int64_t size = type.getDimSize(*dim);
  auto bound = [&](const Val &val, int64_t fallback) -> FailureOr<int64_t> {
    if (imp.isNone(val))
      return fallback;
    auto value = imp.integer(val);
    if (failed(value))
      return failure();
    int64_t v = *value < 0 ? *value + size : *value;
    return std::clamp<int64_t>(v, 0, size);
  };
  auto start = bound(in[2], 0), end = bound(in[3], size);
  if (failed(start) || failed(end))
    return failure();
  return one(slice(imp, *x, *dim, *start, std::max(*start, *end), *step));
}

FailureOr<Value> select(Importer &imp, Value x, int64_t dim, int64_t index) {
  auto type = typeOf(x);
  int64_t size = type.getDimSize(dim);
  int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size) {
    imp.error() << "index " << index << " is out of range for dim " << dim << " of size "
                << size;
    return failure();
  }
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + dim);
  auto row = slice(imp, x, dim, i, i + 1);
  if (failed(row))
    return failure();
  return imp.reshape(*row, shape);
}

Result selectOp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  auto index = imp.integer(in[2]);
  if (failed(dim) || failed(index))
    return failure();
  auto value = select(imp, *x, *dim, *index);
  if (failed(value))
    return failure();
  return one(*value);
}

Result narrow(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  auto start = imp.integer(in[2]), length = imp.integer(in[3]);
  if (failed(dim) || failed(start) || failed(length))
    return failure();
  int64_t size = typeOf(*x).getDimSize(*dim);
  int64_t s = *start < 0 ? *start + size : *start;
  if (s < 0 || *length < 0 || s + *length > size) {
    imp.error() << "narrow(" << *start << ", " << *length << ") is outside a dim of "
                << size;
    return failure();
  }
  return one(slice(imp, *x, *dim, s, s + *length));
}

/// Splits `x` along `dim` into pieces of `sizes`; the result is one list.
Result splitInto(Importer &imp, Value x, int64_t dim, ArrayRef<int64_t> sizes) {
  std::vector<Val> pieces;
  int64_t start = 0;
  int64_t total = 0;
  for (int64_t size : sizes)
    total += size;
  if (total != typeOf(x).getDimSize(dim) || llvm::any_of(sizes, [](int64_t s) { return s < 0; })) {
    imp.error() << "split sizes add up to " << total << ", but the dim has "
                << typeOf(x).getDimSize(dim);
    return failure();
  }
  for (int64_t size : sizes) {
    auto piece = slice(imp, x, dim, start, start + size);
    if (failed(piece))
      return failure();
    pieces.push_back(Val::ofTensor(*piece));
    start += size;
  }
  return std::vector<Val>{Val::ofList(std::move(pieces))};
}

/// split(self, split_size_or_sizes, dim) and split_with_sizes.
Result split(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[2], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  int64_t size = typeOf(*x).getDimSize(*dim);
  SmallVector<int64_t> sizes;
  if (in[1].isConstant() && in[1].constant.isInt()) {
    int64_t piece = in[1].constant.toInt();
    if (piece < 1) {
      imp.error() << "split size must be positive, got " << piece;
      return failure();
    }
    for (int64_t start = 0; start < size; start += piece)
      sizes.push_back(std::min(piece, size - start));
  } else {
    auto given = imp.intList(in[1]);
    if (failed(given))
      return failure();
    sizes.assign(given->begin(), given->end());
  }
  return splitInto(imp, *x, *dim, sizes);
}

Result chunk(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto chunks = imp.integer(in[1]);
  if (failed(x) || failed(chunks))
    return failure();
  auto dim = dimArg(imp, in[2], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  if (*chunks < 1) {
    imp.error() << "chunk count must be positive";
    return failure();
  }
  int64_t size = typeOf(*x).getDimSize(*dim);
  int64_t piece = std::max<int64_t>(1, (size + *chunks - 1) / *chunks);
  SmallVector<int64_t> sizes;
  for (int64_t start = 0; start < size; start += piece)
    sizes.push_back(std::min(piece, size - start));
  return splitInto(imp, *x, *dim, sizes);
}

Result unbind(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  std::vector<Val> pieces;
  for (int64_t i = 0; i < typeOf(*x).getDimSize(*dim); ++i) {
    auto piece = select(imp, *x, *dim, i);
    if (failed(piece))
      return failure();
    pieces.push_back(Val::ofTensor(*piece));
  }
  return std::vector<Val>{Val::ofList(std::move(pieces))};
}

/// cat / stack(tensors, dim): operands promote to one dtype first.
Converter concat(bool stack) {
  return [stack](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto items = imp.list(in[0]);
    if (failed(items))
      return failure();
    if (items->empty()) {
      imp.error() << "needs at least one tensor";
      return failure();
    }
    auto values = imp.promote(*items);
    if (failed(values))
      return failure();
    // torch.cat skips 1-D empty tensors whatever the others' shapes (a state
    // initialised to torch.empty(0) and grown by concatenation).
    if (!stack && values->size() > 1) {
      auto isLegacyEmpty = [](Value v) {
        return typeOf(v).getRank() == 1 && typeOf(v).getDimSize(0) == 0;
      };
      SmallVector<Value> kept;
      for (Value v : *values)
        if (!isLegacyEmpty(v))
          kept.push_back(v);
      if (!kept.empty() && kept.size() < values->size())
        values->assign(kept.begin(), kept.end());
    }
    int64_t rank = typeOf(values->front()).getRank() + (stack ? 1 : 0);
    auto dim = dimArg(imp, in[1], rank);
    if (failed(dim))
      return failure();
    if (stack) {
      for (Value &value : *values) {
        SmallVector<int64_t> shape(typeOf(value).getShape());
        shape.insert(shape.begin() + *dim, 1);
        value = imp.reshape(value, shape);
      }
    }
    if (values->size() == 1)
      return one(values->front());
    return one(imp.create<mlir::cleave::ConcatOp>(*values, *dim));
  };
}

template <typename OpTy>
Converter triangle() {
  return [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto diagonal = imp.integer(in[1]);
    if (failed(x) || failed(diagonal))
      return failure();
    if (typeOf(*x).getRank() < 2) {
      imp.error() << "needs a tensor of rank >= 2";
      return failure();
    }
    return one(imp.create<OpTy>(*x, *diagonal));
  };
}

Result maskedFill(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  // The fill value takes the tensor's dtype, as PyTorch does.
  Type et = typeOf(*x).getElementType();
  Value fill;
  if (in[2].isTensor()) {
    fill = imp.cast(in[2].tensor, et);
  } else {
    auto value = imp.real(in[2]);
    if (failed(value))
      return failure();
    fill = imp.splat(*value, et);
  }
  return where(imp, in[1], Val::ofTensor(fill), Val::ofTensor(*x));
}

/// List concatenation (`aten::add.t`) when a list holds imported tensors.
Result addOrConcatLists(Importer &imp, jit::Node *node, Inputs in) {
  if (in[0].kind == Val::Kind::List ||
      (in[0].isConstant() && in[0].constant.isList())) {
    auto lhs = imp.list(in[0]), rhs = imp.list(in[1]);
    if (failed(lhs) || failed(rhs))
      return failure();
    std::vector<Val> items = *lhs;
    items.insert(items.end(), rhs->begin(), rhs->end());
    return std::vector<Val>{Val::ofList(std::move(items))};
  }
  return addSub<mlir::cleave::AddOp>()(imp, node, in);
}

//===----------------------------------------------------------------------===//
// Losses, decomposed into log_softmax, nll_loss and elementwise ops: the
// training passes differentiate those.
//===----------------------------------------------------------------------===//

/// PyTorch's reduction enum (at::Reduction): 0 none, 1 mean, 2 sum.
FailureOr<StringRef> reductionArg(Importer &imp, const Val &val) {
  auto code = imp.integer(val);
  if (failed(code))
    return failure();
  switch (*code) {
  case 0: return StringRef("none");
  case 1: return StringRef("mean");
  case 2: return StringRef("sum");
  }
  imp.error() << "unknown reduction " << *code << " (expected 0 none, 1 mean or 2 sum)";
  return failure();
}

/// The mean or the sum of every element of `losses`, or `losses` itself.
FailureOr<Value> reduceLoss(Importer &imp, Value losses, StringRef reduction) {
  int64_t rank = typeOf(losses).getRank();
  if (reduction == "none" || rank == 0)
    return losses;
  auto dims = imp.builder.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, rank)));
  if (reduction == "mean")
    return imp.create<mlir::cleave::ReduceMeanOp>(losses, dims, false);
  return imp.create<mlir::cleave::ReduceSumOp>(losses, dims, false);
}

LogicalResult rejectClassWeights(Importer &imp, const Val &weight) {
  if (imp.isNone(weight))
    return success();
  imp.error() << "class weights are not supported (weight must be None)";
  return failure();
}

/// The class-index loss inputs as cleave.nll_loss takes them: scores
/// `[N, C, d1, ...]` (class dim 1; `[C]` unbatched) become `[N·d1·..., C]`
/// with the class dim last, targets `[N, d1, ...]` become `[N·d1·...]`.
struct FlatClasses {
  Value scores, target;
  SmallVector<int64_t> targetShape; ///< what reduction=none gives back
};

FailureOr<FlatClasses> flattenClasses(Importer &imp, Value scores, Value target) {
  auto type = typeOf(scores), targetType = typeOf(target);
  int64_t rank = type.getRank();
  if (rank < 1 || !llvm::isa<FloatType>(type.getElementType())) {
    imp.error() << "expects float scores [N, C, ...] or [C], got " << type;
    return failure();
  }
  SmallVector<int64_t> expected(type.getShape());
  expected.erase(expected.begin() + (rank == 1 ? 0 : 1));
  if (targetType.getShape() != ArrayRef<int64_t>(expected)) {
    imp.error() << "target " << targetType << " does not fit scores " << type
                << ": class indices need the scores' shape without the class dim";
    return failure();
  }
  if (!llvm::isa<IntegerType>(targetType.getElementType()) ||
      targetType.getElementType().isInteger(1)) {
    imp.error() << "class-index targets must be integers, got " << targetType;
    return failure();
  }
  FlatClasses flat;
  flat.targetShape = expected;
  int64_t classes = type.getDimSize(rank == 1 ? 0 : 1);
  int64_t rows = type.getNumElements() / std::max<int64_t>(1, classes);
  if (rank > 2) {
    SmallVector<int64_t> order{0};
    for (int64_t d = 2; d < rank; ++d)
      order.push_back(d);
    order.push_back(1);
    auto moved = imp.create<mlir::cleave::PermuteOp>(scores,
                                                     imp.builder.getDenseI64ArrayAttr(order));
    if (failed(moved))
      return failure();
    scores = *moved;
  }
  flat.scores = imp.reshape(scores, {rows, classes});
  Value index = target;
  if (!targetType.getElementType().isInteger(64) && !targetType.getElementType().isInteger(32))
    index = imp.cast(index, imp.builder.getI64Type());
  flat.target = imp.reshape(index, {rows});
  return flat;
}

/// cleave.nll_loss of flattened log-probabilities; reduction=none gives the
/// losses the target's shape back.
FailureOr<Value> nllOf(Importer &imp, const FlatClasses &flat, StringRef reduction,
                       int64_t ignoreIndex) {
  auto logp = typeOf(flat.scores);
  SmallVector<int64_t> shape;
  if (reduction == "none")
    shape.push_back(logp.getDimSize(0));
  auto &b = imp.builder;
  auto loss = imp.create<mlir::cleave::NllLossOp>(
      RankedTensorType::get(shape, logp.getElementType()), flat.scores, flat.target,
      b.getStringAttr(reduction), b.getIntegerAttr(b.getIntegerType(64, /*isSigned=*/true),
                                                   ignoreIndex));
  if (failed(loss) || reduction != "none")
    return loss;
  return imp.reshape(*loss, flat.targetShape);
}

/// nll_loss with class weights, as PyTorch: each row's loss scaled by the
/// weight of its target class (0 for an ignored row), and `mean` divides by
/// the sum of those weights instead of the row count.
FailureOr<Value> weightedNllOf(Importer &imp, const FlatClasses &flat, Value weight,
                               StringRef reduction, int64_t ignoreIndex) {
  auto logp = typeOf(flat.scores);
  Type et = logp.getElementType();
  int64_t rows = logp.getDimSize(0), classes = logp.getDimSize(1);
  if (typeOf(weight).getShape() != ArrayRef<int64_t>{classes}) {
    imp.error() << "class weights " << typeOf(weight) << " must have one entry per class ("
                << classes << ")";
    return failure();
  }
  auto &b = imp.builder;
  auto losses = imp.create<mlir::cleave::NllLossOp>(
      RankedTensorType::get({rows}, et), flat.scores, flat.target, b.getStringAttr("none"),
      b.getIntegerAttr(b.getIntegerType(64, /*isSigned=*/true), ignoreIndex));
  Type it = typeOf(flat.target).getElementType();
  auto ignored = imp.create<mlir::cleave::CompareOp>(mlir::cleave::ComparePredicate::eq,
                                                     flat.target, imp.splat(ignoreIndex, it));
  if (failed(losses) || failed(ignored))
    return failure();
  // Ignored rows read class 0's weight and drop it.
  auto safe = imp.create<mlir::cleave::WhereOp>(*ignored, imp.splat(0, it), flat.target);
  if (failed(safe))
    return failure();
  auto picked = imp.create<mlir::cleave::IndexSelectOp>(RankedTensorType::get({rows}, et),
                                                       imp.cast(weight, et), *safe, int64_t(0));
  if (failed(picked))
    return failure();
  auto rowWeights = imp.create<mlir::cleave::WhereOp>(*ignored, imp.splat(0, et), *picked);
  if (failed(rowWeights))
    return failure();
  auto weighted = imp.create<mlir::cleave::MulOp>(*losses, *rowWeights);
  if (failed(weighted))
    return failure();
  if (reduction == "none")
    return imp.reshape(*weighted, flat.targetShape);
  auto all = b.getDenseI64ArrayAttr({0});
  auto total = imp.create<mlir::cleave::ReduceSumOp>(*weighted, all, false);
  if (failed(total) || reduction == "sum")
    return total;
  auto norm = imp.create<mlir::cleave::ReduceSumOp>(*rowWeights, all, false);
  if (failed(norm))
    return failure();
  return imp.create<mlir::cleave::DivOp>(*total, *norm);
}

/// nll_loss / nll_loss_nd / nll_loss2d(self, target, weight, reduction, ignore_index).
Result nllLoss(Importer &imp, jit::Node *, Inputs in) {
  auto logp = imp.tensor(in[0]), target = imp.tensor(in[1]);
  auto reduction = reductionArg(imp, in[3]);
  auto ignore = imp.integer(in[4]);
  auto weight = optionalTensor(imp, in[2]);
  if (failed(logp) || failed(target) || failed(reduction) || failed(ignore) || failed(weight))
    return failure();
  auto flat = flattenClasses(imp, *logp, *target);
  if (failed(flat))
    return failure();
  if (*weight)
    return one(weightedNllOf(imp, *flat, *weight, *reduction, *ignore));
  return one(nllOf(imp, *flat, *reduction, *ignore));
}

/// cross_entropy_loss(self, target, weight, reduction, ignore_index,
/// label_smoothing): log_softmax over the classes, then nll_loss for class
/// indices or -Σ target·logp for class probabilities; label smoothing as
/// PyTorch's cross_entropy_loss_label_smoothing (LossNLL.cpp).
Result crossEntropyLoss(Importer &imp, jit::Node *, Inputs in) {
  auto scores = imp.tensor(in[0]), target = imp.tensor(in[1]);
  auto reduction = reductionArg(imp, in[3]);
  auto ignore = imp.integer(in[4]);
  auto smoothing = imp.real(in[5]);
  if (failed(scores) || failed(target) || failed(reduction) || failed(ignore) ||
      failed(smoothing) || failed(rejectClassWeights(imp, in[2])))
    return failure();
  if (!(*smoothing >= 0.0 && *smoothing <= 1.0)) {
    imp.error() << "label_smoothing must be in [0, 1], got " << *smoothing;
    return failure();
  }
  auto type = typeOf(*scores);
  if (type.getRank() < 1 || !llvm::isa<FloatType>(type.getElementType())) {
    imp.error() << "expects float scores [N, C, ...] or [C], got " << type;
    return failure();
  }
  Type et = type.getElementType();
  int64_t classDim = type.getRank() == 1 ? 0 : 1;
  int64_t classes = type.getDimSize(classDim);
  double eps = *smoothing;

  // Class probabilities: a float target of the scores' shape.
  if (llvm::isa<FloatType>(typeOf(*target).getElementType())) {
    if (typeOf(*target).getShape() != type.getShape()) {
      imp.error() << "probability target " << typeOf(*target) << " must have the scores' shape "
                  << type;
      return failure();
    }
    auto logp = imp.create<mlir::cleave::LogSoftmaxOp>(*scores, classDim);
    if (failed(logp))
      return failure();
    Value p = imp.cast(*target, et);
    if (eps > 0) {
      auto scaled = imp.create<mlir::cleave::MulOp>(p, imp.splat(1.0 - eps, et));
      if (failed(scaled))
        return failure();
      auto shifted = imp.create<mlir::cleave::AddOp>(*scaled, imp.splat(eps / classes, et));
      if (failed(shifted))
        return failure();
      p = *shifted;
    }
    auto product = imp.create<mlir::cleave::MulOp>(*logp, p);
    if (failed(product))
      return failure();
    auto summed = imp.create<mlir::cleave::ReduceSumOp>(
        *product, imp.builder.getDenseI64ArrayAttr({classDim}), false);
    if (failed(summed))
      return failure();
    auto losses = imp.create<mlir::cleave::NegOp>(*summed);
    if (failed(losses))
      return failure();
    return one(reduceLoss(imp, *losses, *reduction));
  }

  auto flat = flattenClasses(imp, *scores, *target);
  if (failed(flat))
    return failure();
  auto logp = imp.create<mlir::cleave::LogSoftmaxOp>(flat->scores, 1);
  if (failed(logp))
    return failure();
  flat->scores = *logp;
  auto nll = nllOf(imp, *flat, *reduction, *ignore);
  if (failed(nll) || eps == 0)
    return one(nll);

  // Label smoothing: (1 - eps)·nll + eps/C · smooth, smooth_i = -Σ_c logp[i, c],
  // zero on ignored rows; mean divides by the rows not ignored.
  auto &b = imp.builder;
  auto total = imp.create<mlir::cleave::ReduceSumOp>(*logp, b.getDenseI64ArrayAttr({1}), false);
  if (failed(total))
    return failure();
  auto smooth = imp.create<mlir::cleave::NegOp>(*total);
  if (failed(smooth))
    return failure();
  Type targetType = typeOf(flat->target).getElementType();
  auto kept = imp.create<mlir::cleave::CompareOp>(mlir::cleave::ComparePredicate::ne,
                                                  flat->target, imp.splat(*ignore, targetType));
  if (failed(kept))
    return failure();
  auto masked = imp.create<mlir::cleave::WhereOp>(*kept, *smooth, imp.splat(0.0, et));
  if (failed(masked))
    return failure();
  FailureOr<Value> smoothLoss = *masked;
  if (*reduction == "none") {
    smoothLoss = imp.reshape(*masked, flat->targetShape);
  } else {
    smoothLoss = imp.create<mlir::cleave::ReduceSumOp>(*masked, b.getDenseI64ArrayAttr({0}),
                                                       false);
    if (succeeded(smoothLoss) && *reduction == "mean") {
      auto count = imp.create<mlir::cleave::ReduceSumOp>(imp.cast(*kept, et),
                                                         b.getDenseI64ArrayAttr({0}), false);
      if (failed(count))
        return failure();
      smoothLoss = imp.create<mlir::cleave::DivOp>(*smoothLoss, *count);
    }
  }
  if (failed(smoothLoss))
    return failure();
  auto lhs = imp.create<mlir::cleave::MulOp>(*nll, imp.splat(1.0 - eps, et));
  auto rhs = imp.create<mlir::cleave::MulOp>(*smoothLoss, imp.splat(eps / classes, et));
  if (failed(lhs) || failed(rhs))
    return failure();
  return one(imp.create<mlir::cleave::AddOp>(*lhs, *rhs));
}

/// mse_loss(self, target, reduction) = reduce((self - target)²).
Result mseLoss(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1]});
  auto reduction = reductionArg(imp, in[2]);
  if (failed(values) || failed(reduction))
    return failure();
  if (!llvm::isa<FloatType>(typeOf((*values)[0]).getElementType())) {
    imp.error() << "mse_loss of integer tensors (PyTorch rejects it too)";
    return failure();
  }
  auto diff = imp.create<mlir::cleave::SubOp>((*values)[0], (*values)[1]);
  if (failed(diff))
    return failure();
  auto squared = imp.create<mlir::cleave::MulOp>(*diff, *diff);
  if (failed(squared))
    return failure();
  return one(reduceLoss(imp, *squared, *reduction));
}

/// broadcast_tensors(tensors): every tensor expanded to their common shape.
Result broadcastTensors(Importer &imp, jit::Node *, Inputs in) {
  auto items = imp.list(in[0]);
  if (failed(items))
    return failure();
  std::vector<Value> values;
  SmallVector<ArrayRef<int64_t>> shapes;
  for (const Val &item : *items) {
    auto value = imp.tensor(item);
    if (failed(value))
      return failure();
    values.push_back(*value);
  }
  for (Value value : values)
    shapes.push_back(typeOf(value).getShape());
  auto shape = mlir::cleave::broadcastShapes(shapes);
  if (!shape) {
    imp.error() << "shapes do not broadcast";
    return failure();
  }
  std::vector<Val> results;
  for (Value value : values) {
    auto expanded = broadcastTo(imp, value, *shape);
    if (failed(expanded))
      return failure();
    results.push_back(expanded->front());
  }
  return std::vector<Val>{Val::ofList(std::move(results))};
}

//===----------------------------------------------------------------------===//
// Composite ops: one cleave op per aten op, rewritten into core ops by
// -cleave-decompose. Converters here only read arguments and promote types.
//===----------------------------------------------------------------------===//

/// A composite of one float operand and no parameters (log2, hardswish).
template <typename OpTy>
Converter floatMap() {
  return unary<OpTy>(/*needsFloat=*/true);
}

/// The f64 attribute of argument `name`, `fallback` when absent or None.
FailureOr<FloatAttr> realAttr(Importer &imp, jit::Node *node, Inputs in, const char *name,
                              double fallback) {
  auto index = node->schema().argumentIndexWithName(name);
  double value = fallback;
  if (index && !imp.isNone(in[*index])) {
    auto given = imp.real(in[*index]);
    if (failed(given))
      return failure();
    value = *given;
  }
  return imp.builder.getF64FloatAttr(value);
}

/// leaky_relu / hardtanh / softshrink / hardshrink / threshold: one operand
/// and the f64 parameters named in `params` (with their defaults).
template <typename OpTy>
Converter parameterizedMap(bool needsFloat,
                           std::vector<std::pair<const char *, double>> params) {
  return [needsFloat, params](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, needsFloat);
    if (failed(values))
      return failure();
    SmallVector<Attribute> attrs;
    for (auto [name, fallback] : params) {
      auto attr = realAttr(imp, node, in, name, fallback);
      if (failed(attr))
        return failure();
      attrs.push_back(*attr);
    }
    if constexpr (std::is_same_v<OpTy, mlir::cleave::HardtanhOp> ||
                  std::is_same_v<OpTy, mlir::cleave::ThresholdOp>)
      return one(imp.create<OpTy>((*values)[0], llvm::cast<FloatAttr>(attrs[0]),
                                  llvm::cast<FloatAttr>(attrs[1])));
    else
      return one(imp.create<OpTy>((*values)[0], llvm::cast<FloatAttr>(attrs[0])));
  };
}

/// relu6(x) = hardtanh(x, 0, 6).
Result relu6(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0]});
  if (failed(values))
    return failure();
  return one(imp.create<mlir::cleave::HardtanhOp>((*values)[0], imp.builder.getF64FloatAttr(0),
                                                  imp.builder.getF64FloatAttr(6)));
}

/// nan_to_num(x, nan, posinf, neginf): by default 0 and the largest
/// finite values of the dtype.
Result nanToNum(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  if (!llvm::isa<FloatType>(typeOf(*x).getElementType()))
    return one(*x); // integers hold no NaN or infinity: PyTorch returns them as they are
  auto values = imp.promote({in[0]});
  if (failed(values))
    return failure();
  auto type = llvm::cast<FloatType>(typeOf((*values)[0]).getElementType());
  double largest = APFloat::getLargest(type.getFloatSemantics()).convertToDouble();
  auto nan = realAttr(imp, node, in, "nan", 0.0);
  auto posinf = realAttr(imp, node, in, "posinf", largest);
  auto neginf = realAttr(imp, node, in, "neginf", -largest);
  if (failed(nan) || failed(posinf) || failed(neginf))
    return failure();
  return one(imp.create<mlir::cleave::NanToNumOp>((*values)[0], *nan, *posinf, *neginf));
}

Result logit(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
  if (failed(values))
    return failure();
  FloatAttr eps;
  if (in.size() > 1 && !imp.isNone(in[1])) {
    auto given = imp.real(in[1]);
    if (failed(given))
      return failure();
    eps = imp.builder.getF64FloatAttr(*given);
  }
  return one(imp.create<mlir::cleave::LogitOp>((*values)[0], eps));
}

/// isnan / isinf / ...: the tensor as it is (integers pass no test).
template <typename OpTy>
Converter test() {
  return [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    return one(imp.create<OpTy>(*x));
  };
}

/// Broadcasting composites of `arity` promoted operands (scalars included).
template <typename OpTy, int Arity>
Converter broadcastComposite(bool needsFloat) {
  return [needsFloat](Importer &imp, jit::Node *, Inputs in) -> Result {
    std::vector<Val> operands(in.begin(), in.begin() + Arity);
    auto values = imp.promote(operands, needsFloat);
    if (failed(values))
      return failure();
    if constexpr (Arity == 2)
      return one(imp.create<OpTy>((*values)[0], (*values)[1]));
    else
      return one(imp.create<OpTy>((*values)[0], (*values)[1], (*values)[2]));
  };
}

/// addcmul / addcdiv(self, tensor1, tensor2, value).
template <typename OpTy>
Converter addcOp(bool needsFloat) {
  return [needsFloat](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1], in[2]}, needsFloat);
    auto value = realAttr(imp, node, in, "value", 1.0);
    if (failed(values) || failed(value))
      return failure();
    return one(imp.create<OpTy>((*values)[0], (*values)[1], (*values)[2], *value));
  };
}

/// The reduction's input: cast to the `dtype` argument when given, promoted
/// to float when `needsFloat`.
FailureOr<Value> reductionInput(Importer &imp, jit::Node *node, Inputs in, bool needsFloat) {
  auto x = imp.tensor(in[0]);
  auto dtype = dtypeArg(imp, node, in);
  if (failed(x) || failed(dtype))
    return failure();
  Value input = *dtype ? imp.cast(*x, **dtype) : *x;
  if (needsFloat && !llvm::isa<FloatType>(typeOf(input).getElementType()))
    input = imp.cast(input, imp.builder.getF32Type());
  return input;
}

/// var / std / var_mean / std_mean: `unbiased` (bool) or `correction`
/// (None meaning 1).
template <typename OpTy>
Converter varianceOf() {
  return [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = reductionInput(imp, node, in, /*needsFloat=*/true);
    if (failed(x))
      return failure();
    auto args = reduceArgs(imp, node, in, typeOf(*x).getRank());
    if (failed(args))
      return failure();
    double correction = 1;
    const auto &schema = node->schema();
    if (auto i = schema.argumentIndexWithName("unbiased")) {
      auto unbiased = imp.boolean(in[*i]);
      if (failed(unbiased))
        return failure();
      correction = *unbiased ? 1 : 0;
    } else if (auto i = schema.argumentIndexWithName("correction");
               i && !imp.isNone(in[*i])) {
      auto given = imp.real(in[*i]);
      if (failed(given))
        return failure();
      correction = *given;
    }
    auto dims = imp.builder.getDenseI64ArrayAttr(args->dims);
    auto attr = imp.builder.getF64FloatAttr(correction);
    if constexpr (OpTy::template hasTrait<OpTrait::NResults<2>::Impl>()) {
      OpTy op = imp.builder.create<OpTy>(imp.loc(), *x, dims,
                                         imp.builder.getBoolAttr(args->keepdim), attr);
      return std::vector<Val>{Val::ofTensor(op.getFirst()), Val::ofTensor(op.getSecond())};
    } else {
      return one(imp.create<OpTy>(*x, dims, imp.builder.getBoolAttr(args->keepdim), attr));
    }
  };
}

/// logsumexp / amin / nansum / nanmean / aminmax over dims.
template <typename OpTy>
Converter compositeReduction(bool needsFloat) {
  return [needsFloat](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = reductionInput(imp, node, in, needsFloat);
    if (failed(x))
      return failure();
    auto args = reduceArgs(imp, node, in, typeOf(*x).getRank());
    if (failed(args))
      return failure();
    auto dims = imp.builder.getDenseI64ArrayAttr(args->dims);
    if constexpr (OpTy::template hasTrait<OpTrait::NResults<2>::Impl>()) {
      OpTy op = imp.builder.create<OpTy>(imp.loc(), *x, dims,
                                         imp.builder.getBoolAttr(args->keepdim));
      return std::vector<Val>{Val::ofTensor(op.getFirst()), Val::ofTensor(op.getSecond())};
    } else {
      return one(imp.create<OpTy>(*x, dims, args->keepdim));
    }
  };
}

/// norm / linalg_vector_norm / frobenius_norm: the order is `p` or `ord`
/// (None meaning 2).
Result norm(Importer &imp, jit::Node *node, Inputs in) {
  auto x = reductionInput(imp, node, in, /*needsFloat=*/true);
  if (failed(x))
    return failure();
  auto args = reduceArgs(imp, node, in, typeOf(*x).getRank());
  if (failed(args))
    return failure();
  double p = 2;
  for (const char *name : {"p", "ord"})
    if (auto i = node->schema().argumentIndexWithName(name); i && !imp.isNone(in[*i])) {
      auto given = imp.real(in[*i]);
      if (failed(given))
        return failure();
      p = *given;
    }
  return one(imp.create<mlir::cleave::NormOp>(*x, imp.builder.getDenseI64ArrayAttr(args->dims),
                                              imp.builder.getBoolAttr(args->keepdim),
                                              imp.builder.getF64FloatAttr(p)));
}

Result prelu(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1]}, /*integerToFloat=*/true);
  if (failed(values))
    return failure();
  return one(imp.create<mlir::cleave::PreluOp>((*values)[0], (*values)[1]));
}

Result glu(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  auto type = typeOf(*x);
  if (type.getDimSize(*dim) % 2 != 0) {
    imp.error() << "glu halves dim " << *dim << ", of odd size " << type.getDimSize(*dim);
    return failure();
  }
  SmallVector<int64_t> shape(type.getShape());
  shape[*dim] /= 2;
  return one(imp.create<mlir::cleave::GluOp>(type.clone(shape), *x, *dim));
}

//===----------------------------------------------------------------------===//
// Other spellings of core ops: views, clamps and products.
//===----------------------------------------------------------------------===//

/// mT / mH / adjoint: the last two dims swapped (real tensors: no conjugate).
Result matrixTranspose(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (rank == 0) // as PyTorch: a 0-d tensor is its own transpose
    return one(*x);
  if (rank < 2) {
    imp.error() << "needs a tensor of at least 2 dims, got rank " << rank;
    return failure();
  }
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(dims[rank - 1], dims[rank - 2]);
  return permuteTo(imp, *x, dims);
}

/// movedim / moveaxis(self, source, destination), ints or lists.
Result movedim(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto source = imp.intList(in[1]), destination = imp.intList(in[2]);
  if (failed(x) || failed(source) || failed(destination))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (source->size() != destination->size()) {
    imp.error() << "source and destination name " << source->size() << " and "
                << destination->size() << " dims";
    return failure();
  }
  SmallVector<int64_t> order(rank, -1);
  SmallVector<bool> moved(rank, false);
  for (auto [s, d] : llvm::zip(*source, *destination)) {
    auto from = normDim(imp, s, rank), to = normDim(imp, d, rank);
    if (failed(from) || failed(to))
      return failure();
    if (order[*to] != -1 || moved[*from]) {
      imp.error() << "repeated dim in movedim";
      return failure();
    }
    order[*to] = *from;
    moved[*from] = true;
  }
  int64_t next = 0;
  for (int64_t &slot : order) {
    if (slot != -1)
      continue;
    while (moved[next])
      ++next;
    slot = next++;
  }
  return permuteTo(imp, *x, order);
}

/// ravel: the tensor flattened.
Result ravel(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  return one(imp.reshape(*x, {typeOf(*x).getNumElements()}));
}

/// unflatten(self, dim, sizes): one dim split into `sizes` (one may be -1).
Result unflatten(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto sizes = imp.intList(in[2]);
  if (failed(x) || failed(sizes))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank());
  if (failed(dim))
    return failure();
  auto split = resolveShape(imp, *sizes, type.getDimSize(*dim));
  if (failed(split))
    return failure();
  SmallVector<int64_t> shape(type.getShape().take_front(*dim));
  shape.append(split->begin(), split->end());
  shape.append(type.getShape().begin() + *dim + 1, type.getShape().end());
  return one(imp.reshape(*x, shape));
}

/// repeat(self, repeats) / tile(self, dims): each dim of size s repeated r
/// times is [r, s] broadcast from [1, s] and flattened.
Converter repeat(bool tile) {
  return [tile](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto repeats = imp.intList(in[1]);
    if (failed(x) || failed(repeats))
      return failure();
    auto type = typeOf(*x);
    std::vector<int64_t> reps = *repeats;
    int64_t rank = type.getRank();
    if (static_cast<int64_t>(reps.size()) < rank) {
      if (!tile) {
        imp.error() << "repeat needs at least " << rank << " repeats, got " << reps.size();
        return failure();
      }
      reps.insert(reps.begin(), rank - reps.size(), 1); // tile pads the repeats with 1s
    }
    for (int64_t r : reps)
      if (r < 0) {
        imp.error() << "negative repeat " << r;
        return failure();
      }
    // The shape padded with leading 1s to the repeats' length.
    SmallVector<int64_t> shape(reps.size() - rank, 1);
    shape.append(type.getShape().begin(), type.getShape().end());
    SmallVector<int64_t> split, broadcast, result;
    for (auto [r, size] : llvm::zip(reps, shape)) {
      split.append({1, size});
      broadcast.append({r, size});
      result.push_back(r * size);
    }
    Value v = imp.reshape(*x, split);
    auto expanded = broadcastTo(imp, v, broadcast);
    if (failed(expanded))
      return failure();
    return one(imp.reshape(expanded->front().tensor, result));
  };
}

/// pixel_shuffle(self, r): [.., C r², H, W] -> [.., C, H r, W r]; the
/// unshuffle is the inverse. A reshape, a permute and a reshape.
Converter pixelShuffle(bool unshuffle) {
  return [unshuffle](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto factor = imp.integer(in[1]);
    if (failed(x) || failed(factor))
      return failure();
    auto type = typeOf(*x);
    int64_t rank = type.getRank(), r = *factor;
    if (rank < 3 || r <= 0) {
      imp.error() << "expected a [..., C, H, W] input and a positive factor";
      return failure();
    }
    SmallVector<int64_t> lead(type.getShape().begin(), type.getShape().end() - 3);
    int64_t c = type.getDimSize(rank - 3), h = type.getDimSize(rank - 2),
            w = type.getDimSize(rank - 1);
    int64_t l = lead.size();
    SmallVector<int64_t> split = lead, order, result = lead;
    for (int64_t d = 0; d < l; ++d)
      order.push_back(d);
    if (!unshuffle) {
      if (c % (r * r)) {
        imp.error() << "channels " << c << " are not divisible by " << r * r;
        return failure();
      }
      split.append({c / (r * r), r, r, h, w});     // [.., C, r1, r2, H, W]
      order.append({l, l + 3, l + 1, l + 4, l + 2}); // [.., C, H, r1, W, r2]
      result.append({c / (r * r), h * r, w * r});
    } else {
      if (h % r || w % r) {
        imp.error() << "height " << h << " and width " << w << " are not divisible by " << r;
        return failure();
      }
      split.append({c, h / r, r, w / r, r});         // [.., C, H, r1, W, r2]
      order.append({l, l + 2, l + 4, l + 1, l + 3}); // [.., C, r1, r2, H, W]
      result.append({c * r * r, h / r, w / r});
    }
    auto permuted = permuteTo(imp, imp.reshape(*x, split), order);
    if (failed(permuted))
      return failure();
    return one(imp.reshape(permuted->front().tensor, result));
  };
}

/// clamp_min / clamp_max: one bound, a number or a tensor.
Converter clampOneSide(bool lower) {
  return [lower](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    return one(clampBound(imp, *x, in[1], lower));
  };
}

/// beta * self + alpha * product, self ignored when beta is 0 (PyTorch's
/// rule: its NaNs do not propagate).
Result scaledSum(Importer &imp, Value self, Value product, const Val &betaVal,
                 const Val &alphaVal) {
  auto beta = imp.real(betaVal), alpha = imp.real(alphaVal);
  if (failed(beta) || failed(alpha))
    return failure();
  Type et = typeOf(product).getElementType();
  FailureOr<Value> scaled = product;
  if (*alpha != 1.0)
    scaled = imp.create<mlir::cleave::MulOp>(product, imp.splat(*alpha, et));
  if (failed(scaled) || *beta == 0.0) {
    if (succeeded(scaled) && typeOf(*scaled).getShape() != typeOf(self).getShape() &&
        mlir::cleave::broadcastShapes({typeOf(self).getShape(), typeOf(*scaled).getShape()}))
      return broadcastTo(imp, *scaled,
                         *mlir::cleave::broadcastShapes({typeOf(self).getShape(),
                                                         typeOf(*scaled).getShape()}));
    return one(scaled);
  }
  FailureOr<Value> bias = self;
  if (*beta != 1.0)
    bias = imp.create<mlir::cleave::MulOp>(self, imp.splat(*beta, et));
  if (failed(bias))
    return failure();
  return one(imp.create<mlir::cleave::AddOp>(*bias, *scaled));
}

/// a[:, None] * b[None, :].
FailureOr<Value> outerProduct(Importer &imp, Value a, Value b) {
  if (typeOf(a).getRank() != 1 || typeOf(b).getRank() != 1) {
    imp.error() << "outer product of tensors of ranks " << typeOf(a).getRank() << " and "
                << typeOf(b).getRank() << ", not 1";
    return failure();
  }
  return imp.create<mlir::cleave::MulOp>(imp.reshape(a, {typeOf(a).getDimSize(0), 1}),
                                         imp.reshape(b, {1, typeOf(b).getDimSize(0)}));
}

Result outer(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1]});
  if (failed(values))
    return failure();
  return one(outerProduct(imp, (*values)[0], (*values)[1]));
}

/// inner(a, b): sums over the last dim of both; result a.shape[:-1] + b.shape[:-1].
Result inner(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0], in[1]});
  if (failed(values))
    return failure();
  Value a = (*values)[0], b = (*values)[1];
  auto at = typeOf(a), bt = typeOf(b);
  if (at.getRank() == 0 || bt.getRank() == 0)
    return one(imp.create<mlir::cleave::MulOp>(a, b));
  int64_t k = at.getShape().back();
  if (bt.getShape().back() != k) {
    imp.error() << "last dims differ: " << k << " and " << bt.getShape().back();
    return failure();
  }
  Value lhs = imp.reshape(a, {at.getNumElements() / std::max<int64_t>(k, 1), k});
  Value rhs = imp.reshape(b, {bt.getNumElements() / std::max<int64_t>(k, 1), k});
  auto transposed = imp.create<mlir::cleave::PermuteOp>(rhs, imp.builder.getDenseI64ArrayAttr({1, 0}));
  if (failed(transposed))
    return failure();
  auto product = imp.create<mlir::cleave::MatmulOp>(lhs, *transposed);
  if (failed(product))
    return failure();
  SmallVector<int64_t> shape(at.getShape().drop_back());
  shape.append(bt.getShape().begin(), bt.getShape().end() - 1);
  return one(imp.reshape(*product, shape));
}

/// addmv(self, mat, vec, beta, alpha) / addr(self, vec1, vec2, beta, alpha) /
/// baddbmm(self, batch1, batch2, beta, alpha) / addbmm (the batch summed).
enum class AddProduct { Mv, Outer, Bmm, SummedBmm };

Converter addProduct(AddProduct kind) {
  return [kind](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1], in[2]});
    if (failed(values))
      return failure();
    Value self = (*values)[0], a = (*values)[1], b = (*values)[2];
    FailureOr<Value> product;
    switch (kind) {
    case AddProduct::Mv: {
      auto r = matmul(imp, node, {Val::ofTensor(a), Val::ofTensor(b)});
      if (failed(r))
        return failure();
      product = r->front().tensor;
      break;
    }
    case AddProduct::Outer:
      product = outerProduct(imp, a, b);
      break;
    case AddProduct::Bmm:
      product = imp.create<mlir::cleave::MatmulOp>(a, b);
      break;
    case AddProduct::SummedBmm:
      product = imp.create<mlir::cleave::MatmulOp>(a, b);
      if (succeeded(product))
        product = imp.create<mlir::cleave::ReduceSumOp>(
            *product, imp.builder.getDenseI64ArrayAttr({0}), false);
      break;
    }
    if (failed(product))
      return failure();
    return scaledSum(imp, self, *product, in[3], in[4]);
  };
}

//===----------------------------------------------------------------------===//
// Indexing: core gather/scatter and the composites written with them.
//===----------------------------------------------------------------------===//

namespace c = mlir::cleave;

/// An index operand as a tensor of i64 (PyTorch's index dtype) or i32.
FailureOr<Value> indexTensor(Importer &imp, const Val &val, const char *what = "index") {
  auto index = imp.tensor(val);
  if (failed(index))
    return failure();
  Type et = typeOf(*index).getElementType();
  if (!et.isInteger(64) && !et.isInteger(32)) {
    imp.error() << what << " must be an integer tensor, got " << typeOf(*index);
    return failure();
  }
  return *index;
}

/// A scatter's source: a tensor cast to the input's dtype and sliced to the
/// index's shape (PyTorch reads only that corner), or a number splat to it.
FailureOr<Value> scatterSource(Importer &imp, const Val &val, Value input, Value index) {
  Type et = typeOf(input).getElementType();
  ArrayRef<int64_t> shape = typeOf(index).getShape();
  if (!val.isTensor() && !(val.isConstant() && val.constant.isTensor())) {
    auto value = imp.real(val);
    if (failed(value))
      return failure();
    return imp.splat(*value, et, shape);
  }
  auto src = imp.tensor(val);
  if (failed(src))
    return failure();
  if (typeOf(*src).getRank() == 0 && !shape.empty()) { // a 0-d value tensor
    Value v = imp.cast(*src, et);
    return imp.create<c::BroadcastToOp>(RankedTensorType::get(shape, et), v);
  }
  if (typeOf(*src).getRank() != static_cast<int64_t>(shape.size())) {
    imp.error() << "src " << typeOf(*src) << " must have the index's rank " << shape.size();
    return failure();
  }
  Value v = imp.cast(*src, et);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (typeOf(v).getDimSize(d) < shape[d]) {
      imp.error() << "src " << typeOf(*src) << " is smaller than the index "
                  << typeOf(index) << " in dim " << d;
      return failure();
    }
    auto sliced = slice(imp, v, d, 0, shape[d]);
    if (failed(sliced))
      return failure();
    v = *sliced;
  }
  return v;
}

Result scatterWith(Importer &imp, Value input, int64_t dim, Value index, Value src,
                   c::ScatterReduce reduce, bool includeSelf = true) {
  auto attr = c::ScatterReduceAttr::get(imp.builder.getContext(), reduce);
  return one(imp.create<c::ScatterOp>(input, index, src,
                                      imp.builder.getI64IntegerAttr(dim), attr,
                                      imp.builder.getBoolAttr(includeSelf)));
}

/// gather(self, dim, index, sparse_grad).
Result gather(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
  if (failed(index))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  auto type = RankedTensorType::get(typeOf(*index).getShape(), typeOf(*x).getElementType());
  int64_t xRank = typeOf(*x).getRank(), iRank = typeOf(*index).getRank();
  if (xRank != iRank && xRank <= 1 && iRank <= 1) {
    // PyTorch takes a 0-d input or index as 1-D here.
    Value flatX = imp.reshape(*x, {typeOf(*x).getNumElements()});
    Value flatI = imp.reshape(*index, {typeOf(*index).getNumElements()});
    auto g = imp.create<c::GatherOp>(typeOf(flatX).clone(typeOf(flatI).getShape()), flatX, flatI,
                                     imp.builder.getI64IntegerAttr(0));
    if (failed(g))
      return failure();
    return one(imp.reshape(*g, type.getShape()));
  }
  return one(imp.create<c::GatherOp>(type, *x, *index, imp.builder.getI64IntegerAttr(*dim)));
}

/// scatter(self, dim, index, src | value [, reduce]), scatter_add and
/// scatter_reduce(self, dim, index, src, reduce, include_self).
Converter scatter(std::optional<c::ScatterReduce> fixed) {
  return [fixed](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
    if (failed(index))
      return failure();
    auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
    if (failed(dim))
      return failure();
    auto src = scatterSource(imp, in[3], *x, *index);
    if (failed(src))
      return failure();
    c::ScatterReduce reduce = fixed.value_or(c::ScatterReduce::none);
    bool includeSelf = true;
    if (!fixed && in.size() > 4 && !imp.isNone(in[4])) {
      if (!in[4].isConstant() || !in[4].constant.isString()) {
        imp.error() << "reduce must be a constant string";
        return failure();
      }
      std::string kind = in[4].constant.toStringRef();
      bool twoStep = node->kind().toQualString() == std::string("aten::scatter_reduce");
      std::optional<c::ScatterReduce> parsed;
      if (!twoStep && kind == "add")
        parsed = c::ScatterReduce::sum;
      else if (!twoStep && kind == "multiply")
        parsed = c::ScatterReduce::prod;
      else if (twoStep && kind != "none")
        parsed = c::symbolizeScatterReduce(kind);
      if (!parsed) {
        imp.error() << "unknown reduce '" << kind << "'"
                    << (twoStep ? " (sum, prod, mean, amax, amin)" : " (add, multiply)");
        return failure();
      }
      reduce = *parsed;
      if (twoStep && in.size() > 5) {
        auto include = imp.boolean(in[5]);
        if (failed(include))
          return failure();
        includeSelf = *include;
      }
    }
    if (reduce == c::ScatterReduce::mean && typeOf(*x).getElementType().isInteger(1)) {
      imp.error() << "mean of a bool tensor is not supported (PyTorch refuses it)";
      return failure();
    }
    return scatterWith(imp, *x, *dim, *index, *src, reduce, includeSelf);
  };
}

/// A 1-D (or 0-d) index of index_add/copy/fill as a scatter index along
/// `dim` of `shape`.
FailureOr<Value> alongDim(Importer &imp, Value index, int64_t dim, ArrayRef<int64_t> shape) {
  if (typeOf(index).getRank() > 1) {
    imp.error() << "index " << typeOf(index) << " must be 0-d or 1-D";
    return failure();
  }
  SmallVector<int64_t> along(shape.size(), 1);
  if (!shape.empty())
    along[dim] = typeOf(index).getNumElements();
  Value reshaped = imp.reshape(index, along);
  if (typeOf(reshaped).getShape() == shape)
    return reshaped;
  return imp.create<c::BroadcastToOp>(
      RankedTensorType::get(shape, typeOf(index).getElementType()), reshaped);
}

/// index_add(self, dim, index, source, alpha), index_copy(self, dim, index,
/// source): the source's slices scattered (added or written) along dim.
Converter indexAlongDimUpdate(c::ScatterReduce reduce) {
  return [reduce](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
    auto source = failed(index) ? FailureOr<Value>(failure()) : imp.tensor(in[3]);
    if (failed(source))
      return failure();
    auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
    if (failed(dim))
      return failure();
    Type et = typeOf(*x).getElementType();
    Value src = imp.cast(*source, et);
    if (typeOf(src).getRank() != typeOf(*x).getRank()) {
      if (typeOf(src).getNumElements() != typeOf(*x).getNumElements() || typeOf(*x).getRank() > 1) {
        imp.error() << "source " << typeOf(*source) << " must have the input's rank";
        return failure();
      }
      src = imp.reshape(src, typeOf(*x).getShape()); // 0-d and 1-element 1-D mix
    }
    if (in.size() > 4 && reduce == c::ScatterReduce::sum) {
      auto alpha = imp.real(in[4]);
      if (failed(alpha))
        return failure();
      if (*alpha != 1.0) {
        auto scaled = imp.create<c::MulOp>(src, imp.splat(*alpha, et));
        if (failed(scaled))
          return failure();
        src = *scaled;
      }
    }
    auto scatterIndex = alongDim(imp, *index, *dim, typeOf(src).getShape());
    if (failed(scatterIndex))
      return failure();
    return scatterWith(imp, *x, *dim, *scatterIndex, src, reduce);
  };
}

/// index_fill(self, dim, index, value): negative indices count from the
/// end (PyTorch's index_fill wraps them).
Result indexFill(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
  if (failed(index))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank());
  if (failed(dim))
    return failure();
  int64_t size = type.getRank() == 0 ? 1 : type.getDimSize(*dim);
  Type it = typeOf(*index).getElementType();
  auto negative = imp.create<c::CompareOp>(
      c::ComparePredicateAttr::get(imp.builder.getContext(), c::ComparePredicate::lt), *index,
      imp.splat(0, it));
  auto shifted = imp.create<c::AddOp>(*index, imp.splat(size, it));
  if (failed(negative) || failed(shifted))
    return failure();
  auto wrapped = imp.create<c::WhereOp>(*negative, *shifted, *index);
  if (failed(wrapped))
    return failure();
  SmallVector<int64_t> shape(type.getShape());
  if (!shape.empty())
    shape[*dim] = typeOf(*index).getNumElements();
  auto scatterIndex = alongDim(imp, *wrapped, *dim, shape);
  if (failed(scatterIndex))
    return failure();
  auto src = scatterSource(imp, in[3], *x, *scatterIndex);
  if (failed(src))
    return failure();
  return scatterWith(imp, *x, *dim, *scatterIndex, *src, c::ScatterReduce::none);
}

Result indexSelect(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
  if (failed(index))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank());
  if (failed(dim))
    return failure();
  SmallVector<int64_t> shape(type.getShape());
  if (!shape.empty())
    shape[*dim] = typeOf(*index).getNumElements();
  return one(imp.create<c::IndexSelectOp>(type.clone(shape), *x, *index, *dim));
}

Result take(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[1]);
  if (failed(index))
    return failure();
  auto type = RankedTensorType::get(typeOf(*index).getShape(), typeOf(*x).getElementType());
  return one(imp.create<c::TakeOp>(type, *x, *index));
}

/// take_along_dim(self, indices, dim): self and indices broadcast outside
/// dim, then a gather; without dim, both flattened.
Result takeAlongDim(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[1]);
  if (failed(index))
    return failure();
  Value input = *x, idx = *index;
  int64_t dim = 0;
  if (in.size() < 3 || imp.isNone(in[2])) {
    input = imp.reshape(input, {typeOf(input).getNumElements()});
    idx = imp.reshape(idx, {typeOf(idx).getNumElements()});
  } else {
    if (typeOf(input).getRank() != typeOf(idx).getRank()) {
      imp.error() << "input " << typeOf(input) << " and indices " << typeOf(idx)
                  << " must have the same number of dims";
      return failure();
    }
    auto d = dimArg(imp, in[2], typeOf(input).getRank());
    if (failed(d))
      return failure();
    dim = *d;
    if (typeOf(input).getRank() > 0) {
      SmallVector<int64_t> a(typeOf(input).getShape()), b(typeOf(idx).getShape());
      a[dim] = b[dim];
      auto indexShape = c::broadcastShapes({ArrayRef<int64_t>(a), ArrayRef<int64_t>(b)});
      b[dim] = typeOf(input).getDimSize(dim);
      a[dim] = b[dim];
      auto inputShape = c::broadcastShapes({ArrayRef<int64_t>(b), typeOf(input).getShape()});
      if (!indexShape || !inputShape) {
        imp.error() << "input " << typeOf(input) << " and indices " << typeOf(idx)
                    << " do not broadcast outside dim " << dim;
        return failure();
      }
      if (ArrayRef<int64_t>(*inputShape) != typeOf(input).getShape()) {
        auto e = imp.create<c::BroadcastToOp>(typeOf(input).clone(*inputShape), input);
        if (failed(e))
          return failure();
        input = *e;
      }
      if (ArrayRef<int64_t>(*indexShape) != typeOf(idx).getShape()) {
        auto e = imp.create<c::BroadcastToOp>(typeOf(idx).clone(*indexShape), idx);
        if (failed(e))
          return failure();
        idx = *e;
      }
    }
  }
  auto type = RankedTensorType::get(typeOf(idx).getShape(), typeOf(input).getElementType());
  return one(imp.create<c::GatherOp>(type, input, idx, imp.builder.getI64IntegerAttr(dim)));
}

/// Index tensors of aten::index / index_put and the input dim each indexes.
struct AdvancedIndices {
  SmallVector<Value> indices;
  SmallVector<int64_t> dims;
};

/// Reads PyTorch's list of optional index tensors: None skips a dim; an
/// integer tensor indexes one; a bool (or uint8) mask of k dims indexes k,
/// by its true positions. Only a constant mask can be read at compile time:
/// a mask computed at run time gives a result whose shape depends on tensor
/// values, which a static plan cannot hold.
FailureOr<AdvancedIndices> advancedIndices(Importer &imp, const Val &list, Value input) {
  auto items = imp.list(list);
  if (failed(items))
    return failure();
  AdvancedIndices out;
  int64_t rank = typeOf(input).getRank(), dim = 0;
  for (const Val &item : *items) {
    if (imp.isNone(item)) {
      ++dim;
      continue;
    }
    bool constant = item.isConstant() && item.constant.isTensor();
    bool mask = false;
    if (constant) {
      auto st = item.constant.toTensor().scalar_type();
      mask = st == c10::ScalarType::Bool || st == c10::ScalarType::Byte;
    } else if (item.isTensor()) {
      mask = typeOf(item.tensor).getElementType().isInteger(1);
    }
    if (mask && !constant) {
      imp.error() << "shape depends on tensor values: a bool mask index computed at run time "
                     "selects a data-dependent number of elements";
      return failure();
    }
    if (mask) {
      at::Tensor m = item.constant.toTensor();
      int64_t k = m.dim();
      if (k == 0 || dim + k > rank) {
        imp.error() << "a bool index of " << k << " dims does not fit input dims from " << dim
                    << " of " << typeOf(input);
        return failure();
      }
      for (int64_t j = 0; j < k; ++j)
        if (m.size(j) != typeOf(input).getDimSize(dim + j)) {
          imp.error() << "the bool index's size " << m.size(j) << " in its dim " << j
                      << " does not match the input's " << typeOf(input).getDimSize(dim + j);
          return failure();
        }
      at::Tensor positions = m.to(c10::ScalarType::Bool).nonzero(); // [n, k]
      for (int64_t j = 0; j < k; ++j) {
        auto index = imp.constantTensor(positions.select(1, j).contiguous());
        if (failed(index))
          return failure();
        out.indices.push_back(*index);
        out.dims.push_back(dim + j);
      }
      dim += k;
      continue;
    }
    auto index = indexTensor(imp, item, "an index");
    if (failed(index))
      return failure();
    if (dim >= rank) {
      imp.error() << "too many indices for a tensor of rank " << rank;
      return failure();
    }
    out.indices.push_back(*index);
    out.dims.push_back(dim++);
  }
  return out;
}

FailureOr<RankedTensorType> selectionType(Importer &imp, Value input, const AdvancedIndices &ai) {
  SmallVector<SmallVector<int64_t>> shapes;
  for (Value index : ai.indices)
    shapes.emplace_back(typeOf(index).getShape());
  std::string why;
  auto shape = c::advancedIndexShape(typeOf(input).getShape(), ai.dims, shapes, why);
  if (!shape) {
    imp.error() << why;
    return failure();
  }
  return typeOf(input).clone(*shape);
}

/// aten::index(self, indices).
Result advancedIndex(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto ai = advancedIndices(imp, in[1], *x);
  if (failed(ai))
    return failure();
  if (ai->indices.empty())
    return one(*x);
  auto type = selectionType(imp, *x, *ai);
  if (failed(type))
    return failure();
  return one(imp.create<c::IndexOp>(*type, *x, ai->indices, ai->dims));
}

Result putAt(Importer &imp, Value x, const AdvancedIndices &ai, Value values, bool accumulate) {
  if (ai.indices.empty()) {
    imp.error() << "needs at least one index tensor";
    return failure();
  }
  Value v = imp.cast(values, typeOf(x).getElementType());
  return one(imp.create<c::IndexPutOp>(x, ai.indices, v, ai.dims, accumulate));
}

/// x[mask] = v (or += v) for one bool mask over the leading dims computed at
/// run time, when v is one value per selected row: a `where`, whose shape
/// does not depend on how many elements the mask selects. Nullopt when the
/// index list is not of that form.
std::optional<Result> indexPutRuntimeMask(Importer &imp, Value x, const Val &list,
                                          const Val &valuesVal, bool accumulate) {
  auto items = imp.list(list);
  if (failed(items) || items->size() != 1 || !(*items)[0].isTensor())
    return std::nullopt;
  Value mask = (*items)[0].tensor;
  auto mt = typeOf(mask), xt = typeOf(x);
  if (!mt.getElementType().isInteger(1) || mt.getRank() == 0 || mt.getRank() > xt.getRank() ||
      mt.getShape() != xt.getShape().take_front(mt.getRank()))
    return std::nullopt;
  auto values = imp.tensor(valuesVal);
  if (failed(values))
    return Result(failure());
  // The values broadcast against [n, rest...]; n is unknown, so they must
  // not depend on it: their dim for n (if any) is 1.
  auto vt = typeOf(*values);
  ArrayRef<int64_t> rest = xt.getShape().drop_front(mt.getRank());
  if (vt.getRank() > static_cast<int64_t>(rest.size()) + 1 ||
      (vt.getRank() == static_cast<int64_t>(rest.size()) + 1 && vt.getDimSize(0) != 1))
    return std::nullopt;
  SmallVector<int64_t> vshape(vt.getShape().begin(), vt.getShape().end());
  if (vt.getRank() == static_cast<int64_t>(rest.size()) + 1)
    vshape.erase(vshape.begin());
  auto bshape = c::broadcastShapes({ArrayRef<int64_t>(vshape), rest});
  if (!bshape || ArrayRef<int64_t>(*bshape) != rest)
    return std::nullopt;
  SmallVector<int64_t> aligned(xt.getRank() - vshape.size(), 1);
  aligned.append(vshape);
  Value v = imp.reshape(imp.cast(*values, xt.getElementType()), aligned);
  SmallVector<int64_t> maskShape(mt.getShape());
  maskShape.append(rest.size(), 1);
  Value m = imp.reshape(mask, maskShape);
  if (accumulate) {
    auto added = imp.create<c::WhereOp>(m, v, imp.splat(0, xt.getElementType()));
    if (failed(added))
      return Result(failure());
    if (xt.getElementType().isInteger(1))
      return one(imp.create<c::OrOp>(x, *added));
    return one(imp.create<c::AddOp>(x, *added));
  }
  return one(imp.create<c::WhereOp>(m, v, x));
}

/// index_put(self, indices, values, accumulate).
Result indexPut(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  {
    bool accumulate = false;
    if (in.size() > 3) {
      auto a = imp.boolean(in[3]);
      if (failed(a))
        return failure();
      accumulate = *a;
    }
    if (auto r = indexPutRuntimeMask(imp, *x, in[1], in[2], accumulate))
      return *r;
  }
  auto ai = advancedIndices(imp, in[1], *x);
  auto values = failed(ai) ? FailureOr<Value>(failure()) : imp.tensor(in[2]);
  if (failed(values))
    return failure();
  bool accumulate = false;
  if (in.size() > 3) {
    auto a = imp.boolean(in[3]);
    if (failed(a))
      return failure();
    accumulate = *a;
  }
  return putAt(imp, *x, *ai, *values, accumulate);
}

/// A constant mask broadcast to `shape`, as index tensors over every dim;
/// failure (with the data-dependence reason) for a mask computed at run time.
FailureOr<AdvancedIndices> constantMask(Importer &imp, const Val &mask, ArrayRef<int64_t> shape,
                                        const char *why) {
  if (!(mask.isConstant() && mask.constant.isTensor())) {
    imp.error() << why;
    return failure();
  }
  at::Tensor m = mask.constant.toTensor().to(c10::ScalarType::Bool);
  std::vector<int64_t> sizes(shape.begin(), shape.end());
  at::Tensor positions = m.expand(sizes).nonzero(); // [n, rank]
  AdvancedIndices out;
  for (int64_t j = 0; j < static_cast<int64_t>(shape.size()); ++j) {
    auto index = imp.constantTensor(positions.select(1, j).contiguous());
    if (failed(index))
      return failure();
    out.indices.push_back(*index);
    out.dims.push_back(j);
  }
  return out;
}

/// masked_select(self, mask): self[mask] over their broadcast shape.
Result maskedSelect(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  ArrayRef<int64_t> maskShape;
  at::Tensor constMask;
  if (in[1].isConstant() && in[1].constant.isTensor()) {
    constMask = in[1].constant.toTensor();
    maskShape = ArrayRef<int64_t>(constMask.sizes().data(), constMask.sizes().size());
  }
  auto shape = c::broadcastShapes({typeOf(*x).getShape(), maskShape});
  if (!shape) {
    imp.error() << "the mask does not broadcast with " << typeOf(*x);
    return failure();
  }
  auto ai = constantMask(imp, in[1], *shape,
                         "shape depends on tensor values: a mask computed at run time selects a "
                         "data-dependent number of elements");
  if (failed(ai))
    return failure();
  Value input = *x;
  if (typeOf(input).getShape() != ArrayRef<int64_t>(*shape)) {
    auto e = imp.create<c::BroadcastToOp>(typeOf(input).clone(*shape), input);
    if (failed(e))
      return failure();
    input = *e;
  }
  if (shape->empty()) { // 0-d: one element or none
    int64_t n = constMask.item<bool>() ? 1 : 0;
    if (n == 1)
      return one(imp.reshape(input, {1}));
    imp.error() << "selects no element of a 0-d tensor (an empty result)";
    return failure();
  }
  auto type = selectionType(imp, input, *ai);
  if (failed(type))
    return failure();
  return one(imp.create<c::IndexOp>(*type, input, ai->indices, ai->dims));
}

/// masked_scatter(self, mask, source): the true positions of mask (in
/// row-major order) get source's leading elements.
Result maskedScatter(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto source = failed(x) ? FailureOr<Value>(failure()) : imp.tensor(in[2]);
  if (failed(source))
    return failure();
  auto ai = constantMask(imp, in[1], typeOf(*x).getShape(),
                         "needs a constant mask: with a mask computed at run time, which source "
                         "element lands where depends on tensor values");
  if (failed(ai))
    return failure();
  if (typeOf(*x).getRank() == 0) {
    imp.error() << "a 0-d input is not supported";
    return failure();
  }
  int64_t n = typeOf(ai->indices.front()).getNumElements();
  int64_t available = typeOf(*source).getNumElements();
  if (available < n) {
    imp.error() << "source has " << available << " elements for " << n << " masked positions";
    return failure();
  }
  Value flat = imp.reshape(*source, {available});
  auto values = slice(imp, flat, 0, 0, n);
  if (failed(values))
    return failure();
  if (n == 0)
    return one(*x);
  return putAt(imp, *x, *ai, *values, /*accumulate=*/false);
}

FailureOr<SmallVector<int64_t>> dimListArg(Importer &imp, const Val &val, int64_t rank) {
  auto dims = imp.intList(val);
  if (failed(dims))
    return failure();
  SmallVector<int64_t> out;
  for (int64_t d : *dims) {
    auto n = normDim(imp, d, rank);
    if (failed(n))
      return failure();
    out.push_back(*n);
  }
  return out;
}

Result flipDims(Importer &imp, Value x, ArrayRef<int64_t> dims) {
  if (typeOf(x).getRank() == 0)
    return one(x);
  return one(imp.create<c::FlipOp>(x, imp.builder.getDenseI64ArrayAttr(dims)));
}

/// flip(self, dims).
Result flip(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dims = dimListArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dims))
    return failure();
  return flipDims(imp, *x, *dims);
}

/// fliplr (dim 1, rank >= 2) and flipud (dim 0, rank >= 1).
Converter flipFixed(int64_t dim) {
  return [dim](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    if (typeOf(*x).getRank() <= dim) {
      imp.error() << "needs a tensor of at least " << dim + 1 << " dims, got "
                  << typeOf(*x);
      return failure();
    }
    return flipDims(imp, *x, {dim});
  };
}

/// roll(self, shifts, dims): without dims, the flattened tensor rolls.
Result roll(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto shifts = imp.intList(in[1]);
  if (failed(shifts))
    return failure();
  auto type = typeOf(*x);
  auto dims = dimListArg(imp, in[2], type.getRank());
  if (failed(dims))
    return failure();
  SmallVector<int64_t> s(shifts->begin(), shifts->end());
  if (dims->empty()) {
    if (s.size() != 1) {
      imp.error() << "without dims takes one shift, got " << s.size();
      return failure();
    }
    Value flat = imp.reshape(*x, {type.getNumElements()});
    auto rolled = imp.create<c::RollOp>(flat, imp.builder.getDenseI64ArrayAttr(s),
                                        imp.builder.getDenseI64ArrayAttr({0}));
    if (failed(rolled))
      return failure();
    return one(imp.reshape(*rolled, type.getShape()));
  }
  return one(imp.create<c::RollOp>(*x, imp.builder.getDenseI64ArrayAttr(s),
                                   imp.builder.getDenseI64ArrayAttr(*dims)));
}

/// rot90(self, k, dims): flips and a transpose, as PyTorch writes it.
Result rot90(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto k = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[1]);
  if (failed(k))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  auto dims = dimListArg(imp, in[2], rank);
  if (failed(dims))
    return failure();
  if (rank < 2 || dims->size() != 2 || (*dims)[0] == (*dims)[1]) {
    imp.error() << "needs two different dims of a tensor of rank >= 2";
    return failure();
  }
  int64_t a = (*dims)[0], b = (*dims)[1], turns = ((*k % 4) + 4) % 4;
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[a], swap[b]);
  if (turns == 0)
    return one(*x);
  if (turns == 2)
    return flipDims(imp, *x, {a, b});
  auto flipped = flipDims(imp, *x, {turns == 1 ? b : a});
  if (failed(flipped))
    return failure();
  return permuteTo(imp, (*flipped)[0].tensor, swap);
}

/// pad(self, pad, mode, value) / constant_pad_nd(self, pad, value) /
/// reflection_padNd / replication_padNd(self, padding): `fixedMode` for the
/// latter ones.
Converter pad(std::optional<std::string> fixedMode) {
  return [fixedMode](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto pads = imp.intList(in[1]);
    if (failed(x) || failed(pads))
      return failure();
    std::string mode = fixedMode.value_or("constant");
    if (auto i = node->schema().argumentIndexWithName("mode")) {
      if (!in[*i].isConstant() || !in[*i].constant.isString()) {
        imp.error() << "expected the padding mode as a string";
        return failure();
      }
      mode = in[*i].constant.toStringRef();
    }
    auto value = realAttr(imp, node, in, "value", 0.0);
    if (failed(value))
      return failure();
    auto type = typeOf(*x);
    if (pads->size() % 2 || static_cast<int64_t>(pads->size() / 2) > type.getRank()) {
      imp.error() << pads->size() << " pad sizes for a tensor of rank " << type.getRank();
      return failure();
    }
    SmallVector<int64_t> shape(type.getShape());
    for (size_t i = 0; i < pads->size() / 2; ++i)
      shape[type.getRank() - 1 - i] += (*pads)[2 * i] + (*pads)[2 * i + 1];
    return one(imp.create<mlir::cleave::PadOp>(
        type.clone(shape), *x, imp.builder.getDenseI64ArrayAttr(*pads),
        imp.builder.getStringAttr(mode), *value));
  };
}

/// group_norm(input, num_groups, weight, bias, eps, cudnn_enabled).
Result groupNorm(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto groups = imp.integer(in[1]);
  auto weight = optionalTensor(imp, in[2]), bias = optionalTensor(imp, in[3]);
  auto eps = imp.real(in[4]);
  if (failed(x) || failed(groups) || failed(weight) || failed(bias) || failed(eps))
    return failure();
  return one(imp.create<mlir::cleave::GroupNormOp>(*x, *weight, *bias,
                                                   imp.builder.getI64IntegerAttr(*groups),
                                                   imp.builder.getF64FloatAttr(*eps)));
}

/// instance_norm(input, weight, bias, running_mean, running_var,
/// use_input_stats, momentum, eps, cudnn_enabled): with the input's
/// statistics, a group norm of one group per channel.
Result instanceNorm(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto weight = optionalTensor(imp, in[1]), bias = optionalTensor(imp, in[2]);
  auto useInputStats = imp.boolean(in[5]);
  auto eps = imp.real(in[7]);
  if (failed(x) || failed(weight) || failed(bias) || failed(useInputStats) || failed(eps))
    return failure();
  if (!*useInputStats) {
    imp.error() << "instance_norm with running statistics (use_input_stats=False) is not "
                   "supported";
    return failure();
  }
  if (typeOf(*x).getRank() < 3) {
    imp.error() << "instance_norm needs an [N, C, ...] input, got " << typeOf(*x);
    return failure();
  }
  return one(imp.create<mlir::cleave::GroupNormOp>(
      *x, *weight, *bias, imp.builder.getI64IntegerAttr(typeOf(*x).getDimSize(1)),
      imp.builder.getF64FloatAttr(*eps)));
}

/// upsample_{nearest,linear,bilinear,bicubic,trilinear}Nd (.vec and the
/// forms with per-dim scales), _upsample_nearest_exactNd: the output size
/// is given, or the input's times the scale factors (then the kernel reads
/// the factors too).
Converter upsample(std::string mode) {
  return [mode](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto type = typeOf(*x);
    int64_t spatial = type.getRank() - 2;
    if (spatial < 1) {
      imp.error() << "expected an [N, C, ...] input, got " << type;
      return failure();
    }
    const auto &schema = node->schema();
    std::vector<double> factors;
    if (auto i = schema.argumentIndexWithName("scale_factors"); i && !imp.isNone(in[*i])) {
      auto given = imp.list(in[*i]);
      if (failed(given))
        return failure();
      for (const Val &v : *given) {
        auto f = imp.real(v);
        if (failed(f))
          return failure();
        factors.push_back(*f);
      }
    }
    for (const char *name : {"scales_d", "scales_h", "scales_w", "scales"})
      if (auto i = schema.argumentIndexWithName(name)) {
        double f = 0;
        if (!imp.isNone(in[*i])) {
          auto given = imp.real(in[*i]);
          if (failed(given))
            return failure();
          f = *given;
        }
        factors.push_back(f);
      }
    SmallVector<int64_t> shape(type.getShape());
    std::vector<double> scales(spatial, 0.0);
    auto sizeIndex = schema.argumentIndexWithName("output_size");
    if (sizeIndex && !imp.isNone(in[*sizeIndex])) {
      auto sizes = imp.intList(in[*sizeIndex]);
      if (failed(sizes))
        return failure();
      if (static_cast<int64_t>(sizes->size()) != spatial) {
        imp.error() << "output_size names " << sizes->size() << " dims, the input has "
                    << spatial << " spatial dims";
        return failure();
      }
      for (int64_t d = 0; d < spatial; ++d)
        shape[2 + d] = (*sizes)[d];
      if (static_cast<int64_t>(factors.size()) == spatial)
        scales = factors; // the non-vec forms: a size and the scales it came from
    } else {
      if (static_cast<int64_t>(factors.size()) != spatial) {
        imp.error() << "needs an output size or one scale factor per spatial dim";
        return failure();
      }
      for (int64_t d = 0; d < spatial; ++d)
        shape[2 + d] = static_cast<int64_t>(static_cast<double>(type.getDimSize(2 + d)) * factors[d]);
      scales = factors;
    }
    bool alignCorners = false;
    if (auto i = schema.argumentIndexWithName("align_corners"); i && !imp.isNone(in[*i])) {
      auto given = imp.boolean(in[*i]);
      if (failed(given))
        return failure();
      alignCorners = *given;
    }
    Value input = *x;
    if (!llvm::isa<FloatType>(type.getElementType())) {
      imp.error() << "interpolation of a " << type.getElementType() << " tensor is not supported";
      return failure();
    }
    return one(imp.create<mlir::cleave::InterpolateOp>(
        type.clone(shape), input, imp.builder.getStringAttr(mode),
        imp.builder.getBoolAttr(alignCorners), imp.builder.getDenseF64ArrayAttr(scales)));
  };
}

/// l1 / smooth_l1 / huber / soft_margin / kl_div / binary_cross_entropy(_with_logits):
/// input and target promoted to float, the schema's parameters as attributes
/// (`params`: name, default), `weights`: optional weight operands by name.
template <typename OpTy>
Converter loss(std::vector<std::pair<const char *, double>> params,
               std::vector<const char *> weights = {}, const char *flag = nullptr) {
  return [=](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1]}, /*integerToFloat=*/true);
    if (failed(values))
      return failure();
    const auto &schema = node->schema();
    auto reductionIndex = schema.argumentIndexWithName("reduction");
    auto reduction = reductionIndex ? reductionArg(imp, in[*reductionIndex])
                                    : FailureOr<StringRef>(StringRef("mean"));
    if (failed(reduction))
      return failure();
    Type et = typeOf((*values)[0]).getElementType();
    OperationState state(imp.loc(), OpTy::getOperationName());
    state.addOperands({(*values)[0], (*values)[1]});
    SmallVector<int32_t> segments = {1, 1};
    for (const char *name : weights) {
      auto i = schema.argumentIndexWithName(name);
      if (!i || imp.isNone(in[*i])) {
        segments.push_back(0);
        continue;
      }
      auto w = imp.tensor(in[*i]);
      if (failed(w))
        return failure();
      state.addOperands(imp.cast(*w, et));
      segments.push_back(1);
    }
    if (weights.size() > 1) // AttrSizedOperandSegments: ops with several optional weights
      state.addAttribute("operandSegmentSizes", imp.builder.getDenseI32ArrayAttr(segments));
    for (auto [name, fallback] : params) {
      auto attr = realAttr(imp, node, in, name, fallback);
      if (failed(attr))
        return failure();
      state.addAttribute(name, *attr);
    }
    if (flag) {
      bool value = false;
      if (auto i = schema.argumentIndexWithName(flag)) {
        auto given = imp.boolean(in[*i]);
        if (failed(given))
          return failure();
        value = *given;
      }
      state.addAttribute(flag, imp.builder.getBoolAttr(value));
    }
    state.addAttribute("reduction", imp.builder.getStringAttr(*reduction));
    SmallVector<Type> types;
    if (failed(mlir::cleave::inferLossType(imp.loc(), (*values)[0].getType(),
                                           (*values)[1].getType(), *reduction, types))) {
      imp.hadError = true;
      return failure();
    }
    state.addTypes(types);
    Operation *op = imp.builder.create(state);
    if (failed(mlir::verify(op))) {
      op->erase();
      imp.hadError = true;
      return failure();
    }
    return one(op->getResult(0));
  };
}

/// broadcast_to(self, size): expand without -1 entries.
Result broadcastToOp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = imp.intList(in[1]);
  if (failed(x) || failed(size))
    return failure();
  auto type = typeOf(*x);
  SmallVector<int64_t> shape(size->begin(), size->end());
  int64_t lead = static_cast<int64_t>(shape.size()) - type.getRank();
  if (lead < 0) {
    imp.error() << "cannot broadcast " << type << " to fewer dims";
    return failure();
  }
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (shape[lead + d] == -1)
      shape[lead + d] = type.getDimSize(d);
  auto broadcastable = mlir::cleave::broadcastShapes({type.getShape(), shape});
  if (!broadcastable || ArrayRef<int64_t>(*broadcastable) != ArrayRef<int64_t>(shape)) {
    imp.error() << type << " does not broadcast to [" << llvm::make_range(shape.begin(), shape.end())
                << "]";
    return failure();
  }
  return broadcastTo(imp, imp.reshape(*x, [&] {
    SmallVector<int64_t> padded(lead, 1);
    padded.append(type.getShape().begin(), type.getShape().end());
    return padded;
  }()), shape);
}

/// meshgrid(tensors, indexing): 1-D (or 0-d) tensors broadcast to the grid
/// of their sizes; "ij" keeps their order, "xy" swaps the first two dims.
Result meshgrid(Importer &imp, jit::Node *node, Inputs in) {
  auto items = imp.list(in[0]);
  if (failed(items))
    return failure();
  std::string indexing = "ij";
  if (in.size() > 1 && in[1].isConstant() && in[1].constant.isString())
    indexing = in[1].constant.toStringRef();
  if (indexing != "ij" && indexing != "xy") {
    imp.error() << "unknown indexing '" << indexing << "' (expected 'ij' or 'xy')";
    return failure();
  }
  std::vector<Value> values;
  SmallVector<int64_t> sizes;
  for (const Val &item : *items) {
    auto t = imp.tensor(item);
    if (failed(t))
      return failure();
    if (typeOf(*t).getRank() > 1) {
      imp.error() << "meshgrid takes 1-D tensors, got " << typeOf(*t);
      return failure();
    }
    values.push_back(*t);
    sizes.push_back(typeOf(*t).getNumElements());
  }
  bool swap = indexing == "xy" && values.size() >= 2;
  SmallVector<int64_t> grid = sizes;
  if (swap)
    std::swap(grid[0], grid[1]);
  std::vector<Val> results;
  for (size_t i = 0; i < values.size(); ++i) {
    size_t at = swap && i < 2 ? 1 - i : i; // the grid dim tensor i runs along
    SmallVector<int64_t> shape(grid.size(), 1);
    shape[at] = sizes[i];
    auto expanded = broadcastTo(imp, imp.reshape(values[i], shape), grid);
    if (failed(expanded))
      return failure();
    results.push_back(expanded->front());
  }
  return std::vector<Val>{Val::ofList(std::move(results))};
}

/// atleast_1d/2d/3d: leading (and for 3-D, trailing) size-1 dims, as
/// PyTorch places them; a list of tensors gives a list.
Converter atLeast(int64_t rank) {
  return [rank](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto expand = [&](Value x) {
      auto shape = llvm::to_vector(typeOf(x).getShape());
      if (static_cast<int64_t>(shape.size()) >= rank)
        return x;
      if (rank == 3 && shape.size() == 2) // [a, b] -> [a, b, 1]
        shape.push_back(1);
      else if (rank == 3 && shape.size() == 1) // [a] -> [1, a, 1]
        shape = {1, shape[0], 1};
      else
        shape.insert(shape.begin(), rank - shape.size(), 1);
      return imp.reshape(x, shape);
    };
    if (in[0].kind == Val::Kind::List) {
      std::vector<Val> results;
      for (const Val &item : in[0].items) {
        auto t = imp.tensor(item);
        if (failed(t))
          return failure();
        results.push_back(Val::ofTensor(expand(*t)));
      }
      return std::vector<Val>{Val::ofList(std::move(results))};
    }
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    return one(expand(*x));
  };
}

/// hstack / vstack / dstack / column_stack: cat after atleast_Nd along the
/// dim numpy names (hstack: dim 0 of 1-D tensors, else 1).
Converter stackAlong(int kind) {
  return [kind](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto items = imp.list(in[0]);
    if (failed(items))
      return failure();
    std::vector<Val> parts;
    bool all1d = true;
    for (const Val &item : *items) {
      auto t = imp.tensor(item);
      if (failed(t))
        return failure();
      Value v = *t;
      auto shape = llvm::to_vector(typeOf(v).getShape());
      all1d &= shape.size() <= 1;
      if (kind == 1 && shape.size() < 2) // vstack: atleast_2d
        v = imp.reshape(v, shape.empty() ? SmallVector<int64_t>{1, 1}
                                         : SmallVector<int64_t>{1, shape[0]});
      if (kind == 2 && shape.size() < 3) // dstack: atleast_3d
        v = imp.reshape(v, shape.empty()       ? SmallVector<int64_t>{1, 1, 1}
                           : shape.size() == 1 ? SmallVector<int64_t>{1, shape[0], 1}
                                               : SmallVector<int64_t>{shape[0], shape[1], 1});
      if (kind == 3 && shape.size() < 2) // column_stack: 1-D and 0-d become columns
        v = imp.reshape(v, {shape.empty() ? 1 : shape[0], 1});
      if (kind == 0 && shape.empty())
        v = imp.reshape(v, {1});
      parts.push_back(Val::ofTensor(v));
    }
    int64_t dim = kind == 0 ? (all1d ? 0 : 1) : kind == 1 ? 0 : kind == 2 ? 2 : 1;
    return concat(false)(imp, node, {Val::ofList(std::move(parts)), Val::ofConstant(dim)});
  };
}

/// diagonal(self, offset, dim1, dim2) / diag (of a matrix) / trace: the two
/// dims moved last and flattened, then an index_select of the diagonal's
/// flat positions.
FailureOr<Value> diagonalOf(Importer &imp, Value x, int64_t offset, int64_t d1, int64_t d2) {
  auto type = typeOf(x);
  int64_t rank = type.getRank(), n = type.getDimSize(d1), m = type.getDimSize(d2);
  SmallVector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d)
    if (d != d1 && d != d2)
      order.push_back(d);
  order.append({d1, d2});
  auto moved = permuteTo(imp, x, order);
  if (failed(moved))
    return failure();
  SmallVector<int64_t> flat;
  for (int64_t d : ArrayRef<int64_t>(order).drop_back(2))
    flat.push_back(type.getDimSize(d));
  flat.push_back(n * m);
  Value flattened = imp.reshape(moved->front().tensor, flat);
  std::vector<int64_t> positions;
  for (int64_t i = std::max<int64_t>(0, -offset); i < n && i + offset < m; ++i)
    positions.push_back(i * m + i + offset);
  int64_t k = positions.size();
  auto indexType = RankedTensorType::get({k}, imp.builder.getI64Type());
  Value index = imp.builder.create<mlir::cleave::ConstantOp>(
      imp.loc(), DenseElementsAttr::get(indexType, ArrayRef<int64_t>(positions)));
  SmallVector<int64_t> shape(flat.begin(), flat.end() - 1);
  shape.push_back(k);
  return imp.create<mlir::cleave::IndexSelectOp>(typeOf(flattened).clone(shape), flattened, index,
                                                 static_cast<int64_t>(flat.size() - 1));
}

Result diagonal(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto offset = imp.integer(in[1]);
  if (failed(x) || failed(offset))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  auto d1 = dimArg(imp, in[2], rank), d2 = dimArg(imp, in[3], rank);
  if (failed(d1) || failed(d2))
    return failure();
  if (*d1 == *d2 || rank < 2) {
    imp.error() << "diagonal needs two different dims of a tensor of rank >= 2";
    return failure();
  }
  return one(diagonalOf(imp, *x, *offset, *d1, *d2));
}

/// diag(self, diagonal): a matrix's diagonal, or the square matrix with a
/// vector on it (x padded to the row length, broadcast over the rows and
/// kept where a constant mask marks the diagonal).
Result diag(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto offset = imp.integer(in[1]);
  if (failed(x) || failed(offset))
    return failure();
  auto type = typeOf(*x);
  if (type.getRank() == 2)
    return one(diagonalOf(imp, *x, *offset, 0, 1));
  if (type.getRank() != 1) {
    imp.error() << "diag takes a vector or a matrix, got " << type;
    return failure();
  }
  int64_t n = type.getDimSize(0), k = *offset, size = n + std::abs(k);
  SmallVector<int64_t> pads = k >= 0 ? SmallVector<int64_t>{k, 0} : SmallVector<int64_t>{0, -k};
  auto padded = imp.create<mlir::cleave::PadOp>(
      type.clone({size}), *x, imp.builder.getDenseI64ArrayAttr(pads),
      imp.builder.getStringAttr("constant"), imp.builder.getF64FloatAttr(0.0));
  if (failed(padded))
    return failure();
  auto rows = broadcastTo(imp, imp.reshape(*padded, {1, size}), {size, size});
  if (failed(rows))
    return failure();
  SmallVector<bool> mask(size * size, false);
  for (int64_t i = 0; i < size; ++i)
    if (i + k >= 0 && i + k < size)
      mask[i * size + i + k] = true;
  auto maskType = RankedTensorType::get({size, size}, imp.builder.getI1Type());
  Value maskValue = imp.builder.create<mlir::cleave::ConstantOp>(
      imp.loc(), DenseElementsAttr::get(maskType, ArrayRef<bool>(mask)));
  return one(imp.create<mlir::cleave::WhereOp>(maskValue, rows->front().tensor,
                                               imp.splat(0.0, type.getElementType())));
}

//===----------------------------------------------------------------------===//
// N-d pools through gathered windows (pools with no kernel of their own).
//===----------------------------------------------------------------------===//


/// The maximum of each window and, as PyTorch's indices, the flat position
/// (over the input's spatial dims) of its first maximum.
Result maxOfWindows(Importer &imp, Value x, int64_t nd, ArrayRef<DimWindows> dims) {
  bool unbatched;
  auto input = batched(imp, x, nd, unbatched);
  if (failed(input))
    return failure();
  auto windows = gatherWindows(imp, *input, dims, /*fillWithFirst=*/true);
  if (failed(windows))
    return failure();
  auto wt = typeOf(windows->values);
  int64_t n = wt.getDimSize(0), c = wt.getDimSize(1), slots = wt.getDimSize(2),
          outputs = wt.getDimSize(3);
  auto best = extremumWithIndex(imp, windows->values, 2, /*keepdim=*/true, /*max=*/true);
  if (failed(best))
    return failure();
  // The slot of each maximum -> its input position: a gather from the
  // [slots, outputs] position table broadcast over N and C.
  auto table = i64Constant(imp, windows->gathered, {slots, outputs});
  if (failed(table))
    return failure();
  auto spread = imp.create<mlir::cleave::BroadcastToOp>(
      RankedTensorType::get({n, c, slots, outputs}, imp.builder.getI64Type()), *table);
  if (failed(spread))
    return failure();
  auto index = imp.create<mlir::cleave::GatherOp>(
      RankedTensorType::get({n, c, 1, outputs}, imp.builder.getI64Type()), *spread,
      imp.cast(best->second, imp.builder.getI64Type()), imp.builder.getI64IntegerAttr(2));
  if (failed(index))
    return failure();
  Value values = unflattenWindows(imp, imp.reshape(best->first, {n, c, outputs}), *windows,
                                  unbatched);
  Value indices = unflattenWindows(imp, imp.reshape(*index, {n, c, outputs}), *windows,
                                   unbatched);
  return std::vector<Val>{Val::ofTensor(values), Val::ofTensor(indices)};
}

/// max_poolNd(_with_indices)(self, kernel_size, stride, padding, dilation,
/// ceil_mode): padding counts as -inf, as PyTorch's.
Converter maxPoolNd(int64_t nd, bool withIndices) {
  return [=](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto kernel = spatialArg(imp, in[1], nd);
    if (failed(x) || failed(kernel))
      return failure();
    auto stride = spatialArg(imp, in[2], nd, *kernel);
    auto padding = spatialArg(imp, in[3], nd), dilation = spatialArg(imp, in[4], nd);
    auto ceil = imp.boolean(in[5]);
    if (failed(stride) || failed(padding) || failed(dilation) || failed(ceil))
      return failure();
    auto type = typeOf(*x);
    std::vector<DimWindows> dims;
    for (int64_t i = 0; i < nd; ++i) {
      int64_t k = (*kernel)[i], s = (*stride)[i], p = (*padding)[i], d = (*dilation)[i];
      if (k < 1 || s < 1 || d < 1 || p < 0 || 2 * p > k) {
        imp.error() << "max_pool: kernel, stride and dilation must be positive and padding at "
                       "most half the kernel";
        return failure();
      }
      dims.push_back(slidingWindows(type.getDimSize(type.getRank() - nd + i), k, s, p, d, *ceil));
    }
    auto result = maxOfWindows(imp, *x, nd, dims);
    if (failed(result) || withIndices)
      return result;
    return std::vector<Val>{result->front()};
  };
}

/// adaptive_{avg,max}_poolNd(self, output_size): PyTorch's adaptive windows.
Converter adaptivePoolNd(int64_t nd, bool max) {
  return [=](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto size = spatialArg(imp, in[1], nd);
    if (failed(x) || failed(size))
      return failure();
    auto type = typeOf(*x);
    if (type.getRank() < nd + 1) {
      imp.error() << "expected an input with " << nd << " spatial dims, got " << type;
      return failure();
    }
    std::vector<DimWindows> dims;
    std::vector<std::vector<int64_t>> counts(nd);
    for (int64_t i = 0; i < nd; ++i) {
      int64_t inSize = type.getDimSize(type.getRank() - nd + i), outSize = (*size)[i];
      if (outSize < 1 || inSize < 1) {
        imp.error() << "adaptive pool: output size " << outSize << " of an input of size "
                    << inSize << " (both must be positive)";
        return failure();
      }
      dims.push_back(adaptiveWindows(inSize, outSize));
      for (const auto &w : dims.back())
        counts[i].push_back(llvm::count_if(w, [](int64_t at) { return at >= 0; }));
    }
    if (max)
      return maxOfWindows(imp, *x, nd, dims);
    bool unbatched;
    auto input = batched(imp, *x, nd, unbatched);
    if (failed(input))
      return failure();
    auto windows = gatherWindows(imp, *input, dims, /*fillWithFirst=*/false);
    if (failed(windows))
      return failure();
    auto sums = imp.create<mlir::cleave::ReduceSumOp>(
        windows->values, imp.builder.getDenseI64ArrayAttr({2}), false);
    if (failed(sums))
      return failure();
    std::vector<int64_t> divisor{1};
    for (int64_t i = 0; i < nd; ++i) {
      std::vector<int64_t> next;
      for (int64_t d : divisor)
        for (int64_t e : counts[i])
          next.push_back(d * e);
      divisor = std::move(next);
    }
    auto constant = i64Constant(imp, divisor);
    if (failed(constant))
      return failure();
    auto mean = imp.create<mlir::cleave::DivOp>(*sums, imp.cast(*constant, type.getElementType()));
    if (failed(mean))
      return failure();
    return one(unflattenWindows(imp, *mean, *windows, unbatched));
  };
}

/// avg_pool3d(self, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override).
Result avgPool3d(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto kernel = spatialArg(imp, in[1], 3);
  if (failed(x) || failed(kernel))
    return failure();
  auto stride = spatialArg(imp, in[2], 3, *kernel);
  auto padding = spatialArg(imp, in[3], 3);
  auto ceil = imp.boolean(in[4]), countPad = imp.boolean(in[5]);
  if (failed(stride) || failed(padding) || failed(ceil) || failed(countPad))
    return failure();
  std::optional<int64_t> divisor;
  if (!imp.isNone(in[6])) {
    auto given = imp.integer(in[6]);
    if (failed(given))
      return failure();
    if (*given == 0) {
      imp.error() << "divisor_override must be non-zero";
      return failure();
    }
    divisor = *given;
  }
  return one(avgPoolNd(imp, *x, 3, *kernel, *stride, *padding, *ceil, *countPad, divisor));
}

/// max_unpool2d(self, indices, output_size) and max_unpool3d(self, indices,
/// output_size, stride, padding): each value scattered, at its index, into
/// zeros of the output's spatial size (flattened).
Converter maxUnpoolNd(int64_t nd) {
  return [=](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]), indices = imp.tensor(in[1]);
    auto size = spatialArg(imp, in[2], nd);
    if (failed(x) || failed(indices) || failed(size))
      return failure();
    auto type = typeOf(*x);
    if (typeOf(*indices).getShape() != type.getShape()) {
      imp.error() << "indices " << typeOf(*indices) << " must have the input's shape " << type;
      return failure();
    }
    bool unbatched;
    auto input = batched(imp, *x, nd, unbatched);
    if (failed(input))
      return failure();
    auto bt = typeOf(*input);
    int64_t n = bt.getDimSize(0), c = bt.getDimSize(1), spatial = 1, outSpatial = 1;
    for (int64_t i = 0; i < nd; ++i) {
      spatial *= bt.getDimSize(2 + i);
      outSpatial *= (*size)[i];
    }
    Type et = type.getElementType();
    Value flatIndex = imp.reshape(imp.cast(*indices, imp.builder.getI64Type()), {n, c, spatial});
    auto scattered = imp.create<mlir::cleave::ScatterOp>(
        imp.splat(0, et, {n, c, outSpatial}), flatIndex, imp.reshape(*input, {n, c, spatial}),
        imp.builder.getI64IntegerAttr(2),
        mlir::cleave::ScatterReduceAttr::get(imp.builder.getContext(),
                                             mlir::cleave::ScatterReduce::none),
        imp.builder.getBoolAttr(true));
    if (failed(scattered))
      return failure();
    SmallVector<int64_t> shape;
    if (!unbatched)
      shape.push_back(n);
    shape.push_back(c);
    shape.append(size->begin(), size->end());
    return one(imp.reshape(*scattered, shape));
  };
}


/// trace: the sum of a matrix's diagonal.
Result trace(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  if (typeOf(*x).getRank() != 2) {
    imp.error() << "trace of a tensor of rank " << typeOf(*x).getRank() << ", not a matrix";
    return failure();
  }
  auto d = diagonalOf(imp, *x, 0, 0, 1);
  if (failed(d))
    return failure();
  Value input = *d;
  if (typeOf(input).getElementType().isInteger(1) || typeOf(input).getElementType().isInteger(32))
    input = imp.cast(input, imp.builder.getI64Type()); // PyTorch sums small integers in i64
  return one(imp.create<mlir::cleave::ReduceSumOp>(input, imp.builder.getDenseI64ArrayAttr({0}),
                                                   false));
}

//===----------------------------------------------------------------------===//
// Shapes and strides: transposes, splits, writes into views, strided views
// and undefined-valued fills, as core ops with indices known at import.
//===----------------------------------------------------------------------===//

/// A constant 1-D i64 tensor of `values`.
Value constantIndex(Importer &imp, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                    imp.builder.getI64Type());
  return imp.builder.create<c::ConstantOp>(imp.loc(), DenseElementsAttr::get(type, values));
}

/// The elements of `x` at row-major `positions` of its flattened form, in
/// `shape` (whose element count is the number of positions).
FailureOr<Value> gatherFlat(Importer &imp, Value x, ArrayRef<int64_t> positions,
                            ArrayRef<int64_t> shape) {
  Type et = typeOf(x).getElementType();
  if (positions.empty())
    return imp.splat(0, et, shape);
  Value flat = imp.reshape(x, {typeOf(x).getNumElements()});
  auto type = RankedTensorType::get({static_cast<int64_t>(positions.size())}, et);
  auto gathered = imp.create<c::GatherOp>(type, flat, constantIndex(imp, positions),
                                          imp.builder.getI64IntegerAttr(0));
  if (failed(gathered))
    return failure();
  return imp.reshape(*gathered, shape);
}

/// `x` with the elements of `src` (row-major, cast to x's dtype) written at
/// row-major `positions` of its flattened form; the last write wins.
FailureOr<Value> scatterFlat(Importer &imp, Value x, ArrayRef<int64_t> positions, Value src) {
  auto type = typeOf(x);
  if (positions.empty())
    return x;
  int64_t m = positions.size();
  Value flat = imp.reshape(x, {type.getNumElements()});
  Value values = imp.reshape(imp.cast(src, type.getElementType()), {m});
  auto written = scatterWith(imp, flat, 0, constantIndex(imp, positions), values,
                             c::ScatterReduce::none);
  if (failed(written))
    return failure();
  return imp.reshape(written->front().tensor, type.getShape());
}

/// numpy_T (`x.T`): every dim reversed.
Result numpyT(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (rank < 2)
    return one(*x);
  SmallVector<int64_t> dims;
  for (int64_t d = rank - 1; d >= 0; --d)
    dims.push_back(d);
  return permuteTo(imp, *x, dims);
}

/// matrix_H (`x.H`): the conjugate transpose of a matrix (or a 0-d tensor
/// itself); cleave's tensors are real, so the transpose.
Result matrixH(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  if (rank == 0)
    return one(*x);
  if (rank != 2) {
    imp.error() << "x.H needs a matrix or a 0-d tensor, got " << typeOf(*x);
    return failure();
  }
  return permuteTo(imp, *x, {1, 0});
}

/// sum_to_size(self, size): PyTorch's sum_to: summed over the leading dims
/// and the dims where `size` is 1 (kept), then viewed as `size`; an empty
/// size sums everything. Sums of bools count in i64, as sum's.
Result sumToSize(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = failed(x) ? FailureOr<std::vector<int64_t>>(failure()) : imp.intList(in[1]);
  if (failed(size))
    return failure();
  auto type = typeOf(*x);
  ArrayRef<int64_t> target(*size);
  auto fits = c::broadcastShapes({target, type.getShape()});
  if (static_cast<int64_t>(target.size()) > type.getRank() || !fits ||
      ArrayRef<int64_t>(*fits) != type.getShape()) {
    imp.error() << "size [" << target << "] is not expandable to " << type;
    return failure();
  }
  int64_t lead = type.getRank() - static_cast<int64_t>(target.size());
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead || target.empty() || (target[d - lead] == 1 && type.getDimSize(d) != 1))
      dims.push_back(d);
  if (dims.empty() && !target.empty())
    return one(*x);
  Value input = *x;
  if (type.getElementType().isInteger(1) || type.getElementType().isInteger(32))
    input = imp.cast(input, imp.builder.getI64Type());
  if (dims.empty()) // the sum of a 0-d tensor is itself
    return one(input);
  auto summed = imp.create<c::ReduceSumOp>(input, imp.builder.getDenseI64ArrayAttr(dims),
                                           imp.builder.getBoolAttr(true));
  if (failed(summed))
    return failure();
  return one(imp.reshape(*summed, target));
}

/// zero_(self): zeros of self's shape and dtype (the in-place form rebinds
/// self to them).
Result zero(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  return one(imp.splat(0, typeOf(*x).getElementType(), typeOf(*x).getShape()));
}

/// The pieces of `x` along `dim` between split points, as tensor_split's
/// indices: each piece is x[previous:point] with Python's slice clamping.
Result splitAtIndices(Importer &imp, Value x, int64_t dim, ArrayRef<int64_t> points) {
  int64_t size = typeOf(x).getDimSize(dim);
  auto clampIndex = [&](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
  };
  std::vector<Val> pieces;
  int64_t start = 0;
  SmallVector<int64_t> ends(points);
  ends.push_back(size);
  for (int64_t end : ends) {
    int64_t s = clampIndex(start), e = std::max(s, clampIndex(end));
    auto piece = slice(imp, x, dim, s, e);
    if (failed(piece))
      return failure();
    pieces.push_back(Val::ofTensor(*piece));
    start = end;
  }
  return std::vector<Val>{Val::ofList(std::move(pieces))};
}

/// tensor_split(self, sections | indices | tensor_indices_or_sections, dim)
/// and hsplit / vsplit / dsplit(self, sections | indices), whose dim is
/// fixed (`fixedDim`; hsplit of a 1-D tensor splits dim 0) and whose
/// sections must divide the dim. Split points in a tensor must be a
/// constant: computed at run time they would make the pieces' shapes
/// depend on tensor values.
Converter tensorSplit(std::optional<int64_t> fixedDim) {
  return [fixedDim](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    int64_t rank = typeOf(*x).getRank();
    int64_t dim = 0;
    if (fixedDim) {
      int64_t need = *fixedDim == 1 ? 1 : *fixedDim == 0 ? 2 : 3; // hsplit, vsplit, dsplit
      if (rank < need) {
        imp.error() << "needs a tensor of at least " << need << " dims, got " << typeOf(*x);
        return failure();
      }
      dim = *fixedDim == 1 && rank == 1 ? 0 : *fixedDim;
    } else {
      if (rank == 0) {
        imp.error() << "cannot split a 0-d tensor";
        return failure();
      }
      auto d = dimArg(imp, in[2], rank);
      if (failed(d))
        return failure();
      dim = *d;
    }
    const Val &how = in[1];
    std::optional<int64_t> sections;
    std::vector<int64_t> points;
    if (how.isTensor()) {
      imp.error() << "the split points come from a tensor computed at run time: the pieces' "
                     "shapes would depend on its values, which a static plan cannot hold";
      return failure();
    }
    if (how.isConstant() && how.constant.isTensor()) {
      at::Tensor t = how.constant.toTensor();
      if (t.dim() > 1 || at::isFloatingType(t.scalar_type()) ||
          t.scalar_type() == c10::ScalarType::Bool) {
        imp.error() << "split points must be a 0-d or 1-D integer tensor";
        return failure();
      }
      t = t.to(c10::ScalarType::Long).contiguous();
      if (t.dim() == 0)
        sections = t.item<int64_t>();
      else
        points.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    } else if (how.isConstant() && how.constant.isInt()) {
      sections = how.constant.toInt();
    } else {
      auto given = imp.intList(how);
      if (failed(given))
        return failure();
      points = *given;
    }
    if (!sections)
      return splitAtIndices(imp, *x, dim, points);
    int64_t size = typeOf(*x).getDimSize(dim);
    if (*sections < 1) {
      imp.error() << "the number of sections must be positive, got " << *sections;
      return failure();
    }
    if (fixedDim && size % *sections != 0) {
      imp.error() << "dim " << dim << " of size " << size << " does not divide into "
                  << *sections << " sections";
      return failure();
    }
    // The first size % n pieces hold one element more.
    int64_t base = size / *sections, extra = size % *sections, at = 0;
    for (int64_t i = 0; i + 1 < *sections; ++i) {
      at += base + (i < extra ? 1 : 0);
      points.push_back(at);
    }
    return splitAtIndices(imp, *x, dim, points);
  };
}

/// `x` with [start, end) of `dim` replaced by `piece` (of that extent):
/// slices around it and a concat.
FailureOr<Value> replaceRange(Importer &imp, Value x, int64_t dim, int64_t start, int64_t end,
                              Value piece) {
  int64_t size = typeOf(x).getDimSize(dim);
  SmallVector<Value> parts;
  if (start > 0) {
    auto before = slice(imp, x, dim, 0, start);
    if (failed(before))
      return failure();
    parts.push_back(*before);
  }
  if (typeOf(piece).getDimSize(dim) > 0)
    parts.push_back(piece);
  if (end < size) {
    auto after = slice(imp, x, dim, end, size);
    if (failed(after))
      return failure();
    parts.push_back(*after);
  }
  if (parts.empty())
    return x;
  if (parts.size() == 1)
    return parts.front();
  return imp.create<c::ConcatOp>(parts, dim);
}

/// The source of a *_scatter op, cast to the input's dtype, when it has the
/// shape of the view it replaces.
FailureOr<Value> viewSource(Importer &imp, const Val &val, Value x, ArrayRef<int64_t> shape) {
  auto src = imp.tensor(val);
  if (failed(src))
    return failure();
  if (typeOf(*src).getShape() != shape) {
    imp.error() << "src " << typeOf(*src) << " must have the shape of the view it replaces, ["
                << shape << "]";
    return failure();
  }
  return imp.cast(*src, typeOf(x).getElementType());
}

/// select_scatter(self, src, dim, index): self with x.select(dim, index)
/// replaced by src.
Result selectScatter(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  if (type.getRank() == 0) {
    imp.error() << "select_scatter of a 0-d tensor";
    return failure();
  }
  auto dim = dimArg(imp, in[2], type.getRank());
  auto index = imp.integer(in[3]);
  if (failed(dim) || failed(index))
    return failure();
  int64_t size = type.getDimSize(*dim), i = *index < 0 ? *index + size : *index;
  if (i < 0 || i >= size) {
    imp.error() << "index " << *index << " is out of range for dim " << *dim << " of size "
                << size;
    return failure();
  }
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + *dim);
  auto src = viewSource(imp, in[1], *x, shape);
  if (failed(src))
    return failure();
  shape.insert(shape.begin() + *dim, 1);
  return one(replaceRange(imp, *x, *dim, i, i + 1, imp.reshape(*src, shape)));
}

/// slice_scatter(self, src, dim, start, end, step): self with
/// x[start:end:step] along dim replaced by src; a concat for step 1, a
/// scatter of constant positions otherwise.
Result sliceScatter(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  if (type.getRank() == 0) {
    imp.error() << "slice_scatter of a 0-d tensor";
    return failure();
  }
  auto dim = dimArg(imp, in[2], type.getRank());
  auto step = failed(dim) ? FailureOr<int64_t>(failure()) : imp.integer(in[5]);
  if (failed(step))
    return failure();
  if (*step < 1) {
    imp.error() << "slice step must be positive, got " << *step;
    return failure();
  }
  int64_t size = type.getDimSize(*dim);
  auto bound = [&](const Val &val, int64_t fallback) -> FailureOr<int64_t> {
    if (imp.isNone(val))
      return fallback;
    auto value = imp.integer(val);
    if (failed(value))
      return failure();
    return std::clamp<int64_t>(*value < 0 ? *value + size : *value, 0, size);
  };
  auto start = bound(in[3], 0), end = bound(in[4], size);
  if (failed(start) || failed(end))
    return failure();
  int64_t s = *start, e = std::max(s, *end);
  int64_t count = (e - s + *step - 1) / *step;
  SmallVector<int64_t> shape(type.getShape());
  shape[*dim] = count;
  auto src = viewSource(imp, in[1], *x, shape);
  if (failed(src))
    return failure();
  if (*step == 1)
    return one(replaceRange(imp, *x, *dim, s, e, *src));
  if (count == 0)
    return one(*x);
  SmallVector<int64_t> positions;
  for (int64_t k = 0; k < count; ++k)
    positions.push_back(s + k * *step);
  auto index = alongDim(imp, constantIndex(imp, positions), *dim, shape);
  if (failed(index))
    return failure();
  return scatterWith(imp, *x, *dim, *index, *src, c::ScatterReduce::none);
}

/// The row-major positions, in the [n, m] matrix of dims (d1, d2), of the
/// diagonal `offset` (above the main one when positive), and its length.
SmallVector<int64_t> diagonalPositions(int64_t n, int64_t m, int64_t offset) {
  SmallVector<int64_t> positions;
  for (int64_t i = std::max<int64_t>(0, -offset); i < n && i + offset < m; ++i)
    positions.push_back(i * m + i + offset);
  return positions;
}

/// `src` ([batch..., k], cast to x's dtype) written on the diagonal `offset`
/// of dims (d1, d2) of `x`, whose other dims are `batch` in order: the two
/// dims moved last and flattened, a scatter of the diagonal's positions,
/// and back.
FailureOr<Value> writeDiagonal(Importer &imp, Value x, Value src, int64_t offset, int64_t d1,
                               int64_t d2) {
  auto type = typeOf(x);
  int64_t rank = type.getRank(), n = type.getDimSize(d1), m = type.getDimSize(d2);
  SmallVector<int64_t> order, inverse(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != d1 && d != d2)
      order.push_back(d);
  order.append({d1, d2});
  for (int64_t i = 0; i < rank; ++i)
    inverse[order[i]] = i;
  SmallVector<int64_t> batch;
  for (int64_t d : ArrayRef<int64_t>(order).drop_back(2))
    batch.push_back(type.getDimSize(d));
  SmallVector<int64_t> positions = diagonalPositions(n, m, offset);
  SmallVector<int64_t> srcShape(batch);
  srcShape.push_back(positions.size());
  if (typeOf(src).getShape() != ArrayRef<int64_t>(srcShape)) {
    imp.error() << "src " << typeOf(src) << " must have the diagonal's shape [" << srcShape
                << "]";
    return failure();
  }
  if (positions.empty())
    return x;
  bool moved = false;
  for (int64_t i = 0; i < rank; ++i)
    moved |= order[i] != i;
  Value y = x;
  if (moved) {
    auto permuted = permuteTo(imp, x, order);
    if (failed(permuted))
      return failure();
    y = permuted->front().tensor;
  }
  SmallVector<int64_t> flat(batch);
  flat.push_back(n * m);
  Value flattened = imp.reshape(y, flat);
  auto index = alongDim(imp, constantIndex(imp, positions), flat.size() - 1, srcShape);
  if (failed(index))
    return failure();
  auto written = scatterWith(imp, flattened, flat.size() - 1, *index,
                             imp.cast(src, type.getElementType()), c::ScatterReduce::none);
  if (failed(written))
    return failure();
  SmallVector<int64_t> movedShape(batch);
  movedShape.append({n, m});
  Value back = imp.reshape(written->front().tensor, movedShape);
  if (!moved)
    return back;
  auto restored = permuteTo(imp, back, inverse);
  if (failed(restored))
    return failure();
  return restored->front().tensor;
}

/// diagonal_scatter(self, src, offset, dim1, dim2).
Result diagonalScatter(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto src = failed(x) ? FailureOr<Value>(failure()) : imp.tensor(in[1]);
  auto offset = failed(src) ? FailureOr<int64_t>(failure()) : imp.integer(in[2]);
  if (failed(offset))
    return failure();
  int64_t rank = typeOf(*x).getRank();
  auto d1 = dimArg(imp, in[3], rank), d2 = dimArg(imp, in[4], rank);
  if (failed(d1) || failed(d2))
    return failure();
  if (*d1 == *d2 || rank < 2) {
    imp.error() << "diagonal_scatter needs two different dims of a tensor of rank >= 2";
    return failure();
  }
  return one(writeDiagonal(imp, *x, *src, *offset, *d1, *d2));
}

/// The tensor whose diagonal `offset` of dims (d1, d2) holds x's last dim
/// (`diag_embed`): zeros of x's dtype with x written on that diagonal.
FailureOr<Value> embedDiagonal(Importer &imp, Value x, int64_t offset, int64_t d1, int64_t d2) {
  auto type = typeOf(x);
  int64_t rank = type.getRank() + 1, n = type.getDimSize(type.getRank() - 1);
  int64_t size = n + std::abs(offset);
  SmallVector<int64_t> shape;
  for (int64_t d = 0, next = 0; d < rank; ++d)
    shape.push_back(d == d1 || d == d2 ? size : type.getDimSize(next++));
  Value zeros = imp.splat(0, type.getElementType(), shape);
  return writeDiagonal(imp, zeros, x, offset, d1, d2);
}

/// diag_embed(self, offset, dim1, dim2).
Result diagEmbed(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto offset = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[1]);
  if (failed(offset))
    return failure();
  int64_t rank = typeOf(*x).getRank() + 1;
  if (rank < 2) {
    imp.error() << "diag_embed needs a tensor of at least 1 dim";
    return failure();
  }
  auto d1 = dimArg(imp, in[2], rank), d2 = dimArg(imp, in[3], rank);
  if (failed(d1) || failed(d2))
    return failure();
  if (*d1 == *d2) {
    imp.error() << "diag_embed needs two different dims";
    return failure();
  }
  return one(embedDiagonal(imp, *x, *offset, *d1, *d2));
}

/// diagflat(self, offset): the flattened tensor on a diagonal of a matrix.
Result diagflat(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto offset = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[1]);
  if (failed(offset))
    return failure();
  Value flat = imp.reshape(*x, {typeOf(*x).getNumElements()});
  return one(embedDiagonal(imp, flat, *offset, 0, 1));
}

/// The positions `offset + Σ i_d · stride_d` over the index space `size`,
/// row-major; failure (reported) when one falls outside [0, numel).
FailureOr<SmallVector<int64_t>> stridedPositions(Importer &imp, ArrayRef<int64_t> size,
                                                 ArrayRef<int64_t> stride, int64_t offset,
                                                 int64_t numel) {
  if (size.size() != stride.size()) {
    imp.error() << "has " << size.size() << " sizes and " << stride.size() << " strides";
    return failure();
  }
  int64_t count = 1, last = offset;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0 || stride[d] < 0) {
      imp.error() << "sizes and strides must not be negative";
      return failure();
    }
    count *= size[d];
    last += (size[d] - 1) * stride[d];
  }
  if (count > 0 && (offset < 0 || last >= numel)) {
    imp.error() << "the strided view reaches element " << last << " of an input of " << numel
                << " elements (storage offset " << offset << ")";
    return failure();
  }
  SmallVector<int64_t> positions;
  positions.reserve(count);
  SmallVector<int64_t> i(size.size(), 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t p = offset;
    for (size_t d = 0; d < size.size(); ++d)
      p += i[d] * stride[d];
    positions.push_back(p);
    for (int64_t d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {
      if (++i[d] < size[d])
        break;
      i[d] = 0;
    }
  }
  return positions;
}

/// The storage offset argument (None: 0).
FailureOr<int64_t> storageOffset(Importer &imp, const Val &val) {
  if (imp.isNone(val))
    return 0;
  return imp.integer(val);
}

/// as_strided reads PyTorch's storage: the row-major elements of a tensor
/// only when it is not a strided view. Fails (reported) when the input
/// comes straight from a view op whose result PyTorch does not lay out
/// row-major in its own storage (a transpose, an expand, a slice...).
LogicalResult rowMajorStorage(Importer &imp, jit::Node *node) {
  static const llvm::StringSet<> views = {
      "aten::t",          "aten::transpose", "aten::permute",    "aten::expand",
      "aten::expand_as",  "aten::slice",     "aten::select",     "aten::narrow",
      "aten::diagonal",   "aten::as_strided", "aten::unfold",    "aten::numpy_T",
      "aten::matrix_H",   "aten::mT",        "aten::mH",         "aten::adjoint",
      "aten::movedim",    "aten::moveaxis",  "aten::swapaxes",   "aten::swapdims",
      "prim::ListUnpack", "aten::unbind",    "aten::split",      "aten::chunk",
      "aten::unsafe_split", "aten::unsafe_chunk", "aten::broadcast_to"};
  std::string kind = node->input(0)->node()->kind().toQualString();
  if (!views.contains(kind))
    return success();
  imp.error() << "the input is a strided view (" << kind << "), whose elements in PyTorch's "
              << "storage are not its row-major order; call .contiguous() on it first";
  return failure();
}

/// as_strided(self, size, stride, storage_offset): the view of the input's
/// contiguous elements with these strides, a gather of constant positions.
/// (cleave's tensors are contiguous: the view is over the row-major
/// elements, as PyTorch's of a contiguous tensor.)
Result asStrided(Importer &imp, jit::Node *node, Inputs in) {
  if (failed(rowMajorStorage(imp, node)))
    return failure();
  auto x = imp.tensor(in[0]);
  auto size = failed(x) ? FailureOr<std::vector<int64_t>>(failure()) : imp.intList(in[1]);
  auto stride = failed(size) ? FailureOr<std::vector<int64_t>>(failure()) : imp.intList(in[2]);
  auto offset = failed(stride) ? FailureOr<int64_t>(failure()) : storageOffset(imp, in[3]);
  if (failed(offset))
    return failure();
  auto positions =
      stridedPositions(imp, *size, *stride, *offset, typeOf(*x).getNumElements());
  if (failed(positions))
    return failure();
  return one(gatherFlat(imp, *x, *positions, *size));
}

/// as_strided_scatter(self, src, size, stride, storage_offset): self with
/// the strided view replaced by src, a scatter of constant positions.
Result asStridedScatter(Importer &imp, jit::Node *node, Inputs in) {
  if (failed(rowMajorStorage(imp, node)))
    return failure();
  auto x = imp.tensor(in[0]);
  auto size = failed(x) ? FailureOr<std::vector<int64_t>>(failure()) : imp.intList(in[2]);
  auto stride = failed(size) ? FailureOr<std::vector<int64_t>>(failure()) : imp.intList(in[3]);
  auto offset = failed(stride) ? FailureOr<int64_t>(failure()) : storageOffset(imp, in[4]);
  if (failed(offset))
    return failure();
  auto positions =
      stridedPositions(imp, *size, *stride, *offset, typeOf(*x).getNumElements());
  if (failed(positions))
    return failure();
  auto src = viewSource(imp, in[1], *x, *size);
  if (failed(src))
    return failure();
  return one(scatterFlat(imp, *x, *positions, *src));
}

/// unfold(self, dimension, size, step) (Tensor.unfold): the windows of
/// `size` every `step` along the dim, as a new last dim. An index_select of
/// the windows' positions, a reshape and a permute.
Result unfold(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto size = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[2]);
  auto step = failed(size) ? FailureOr<int64_t>(failure()) : imp.integer(in[3]);
  if (failed(step))
    return failure();
  auto type = typeOf(*x);
  auto dim = dimArg(imp, in[1], type.getRank());
  if (failed(dim))
    return failure();
  int64_t extent = type.getRank() == 0 ? 1 : type.getDimSize(*dim);
  if (*size < 0 || *size > extent || *step < 1) {
    imp.error() << "window size " << *size << " and step " << *step
                << " do not fit a dim of size " << extent;
    return failure();
  }
  if (type.getRank() == 0) // PyTorch: the 0-d tensor as one window of `size`
    return one(imp.reshape(*x, {*size}));
  int64_t windows = (extent - *size) / *step + 1;
  SmallVector<int64_t> positions;
  for (int64_t j = 0; j < windows; ++j)
    for (int64_t k = 0; k < *size; ++k)
      positions.push_back(j * *step + k);
  SmallVector<int64_t> selected(type.getShape());
  selected[*dim] = positions.size();
  auto picked = imp.create<c::IndexSelectOp>(type.clone(selected), *x,
                                             constantIndex(imp, positions), *dim);
  if (failed(picked))
    return failure();
  SmallVector<int64_t> split(type.getShape());
  split[*dim] = *size;
  split.insert(split.begin() + *dim, windows);
  Value y = imp.reshape(*picked, split);
  int64_t rank = split.size();
  if (*dim + 1 == rank - 1)
    return one(y);
  SmallVector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d)
    if (d != *dim + 1)
      order.push_back(d);
  order.push_back(*dim + 1);
  return permuteTo(imp, y, order);
}

/// im2col(self, kernel_size, dilation, padding, stride)
/// (nn.functional.unfold): [N, C, H, W] (or [C, H, W]) to
/// [N, C·kh·kw, L], the sliding blocks' elements as columns. The input
/// zero-padded, its spatial dims flattened, an index_select of every
/// block's positions (kernel offset major, block minor) and a reshape.
Result im2col(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto kernel = pairArg(imp, in[1]), dilation = pairArg(imp, in[2]);
  auto padding = pairArg(imp, in[3]), stride = pairArg(imp, in[4]);
  if (failed(kernel) || failed(dilation) || failed(padding) || failed(stride))
    return failure();
  auto type = typeOf(*x);
  if (type.getRank() != 3 && type.getRank() != 4) {
    imp.error() << "im2col takes a [N, C, H, W] or [C, H, W] input, got " << type;
    return failure();
  }
  for (int i = 0; i < 2; ++i)
    if ((*kernel)[i] < 1 || (*dilation)[i] < 1 || (*stride)[i] < 1 || (*padding)[i] < 0) {
      imp.error() << "kernel sizes, dilations and strides must be positive, paddings not "
                     "negative";
      return failure();
    }
  bool unbatched = type.getRank() == 3;
  Value input = unbatched ? imp.reshape(*x, {1, type.getDimSize(0), type.getDimSize(1),
                                             type.getDimSize(2)})
                          : *x;
  auto t = typeOf(input);
  int64_t n = t.getDimSize(0), ch = t.getDimSize(1);
  int64_t ph = (*padding)[0], pw = (*padding)[1];
  int64_t hp = t.getDimSize(2) + 2 * ph, wp = t.getDimSize(3) + 2 * pw;
  int64_t kh = (*kernel)[0], kw = (*kernel)[1], dh = (*dilation)[0], dw = (*dilation)[1];
  int64_t oh = (hp - (dh * (kh - 1) + 1)) / (*stride)[0] + 1;
  int64_t ow = (wp - (dw * (kw - 1) + 1)) / (*stride)[1] + 1;
  if (hp < dh * (kh - 1) + 1 || wp < dw * (kw - 1) + 1 || oh < 1 || ow < 1) {
    imp.error() << "the kernel does not fit the padded input " << hp << "x" << wp;
    return failure();
  }
  if (ph || pw) {
    auto padded = imp.create<c::PadOp>(t.clone({n, ch, hp, wp}), input,
                                       imp.builder.getDenseI64ArrayAttr({pw, pw, ph, ph}),
                                       imp.builder.getStringAttr("constant"),
                                       imp.builder.getF64FloatAttr(0.0));
    if (failed(padded))
      return failure();
    input = *padded;
  }
  Value flat = imp.reshape(input, {n, ch, hp * wp});
  SmallVector<int64_t> positions;
  for (int64_t ki = 0; ki < kh; ++ki)
    for (int64_t kj = 0; kj < kw; ++kj)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          positions.push_back((i * (*stride)[0] + ki * dh) * wp + j * (*stride)[1] + kj * dw);
  int64_t count = positions.size();
  auto picked = imp.create<c::IndexSelectOp>(t.clone({n, ch, count}), flat,
                                             constantIndex(imp, positions), 2);
  if (failed(picked))
    return failure();
  if (unbatched)
    return one(imp.reshape(*picked, {ch * kh * kw, oh * ow}));
  return one(imp.reshape(*picked, {n, ch * kh * kw, oh * ow}));
}

//===----------------------------------------------------------------------===//
// Counting, one-hot and reductions into positions: broadcast comparisons
// then sums, and scatters.
//===----------------------------------------------------------------------===//

FailureOr<Value> comparison(Importer &imp, c::ComparePredicate predicate, Value a, Value b) {
  return imp.create<c::CompareOp>(c::ComparePredicateAttr::get(imp.builder.getContext(), predicate),
                                  a, b);
}

/// one_hot(self, num_classes): `self[..., None] == arange(num_classes)` as
/// i64. num_classes=-1 means "the largest class index + 1", a shape taken
/// from tensor values: refused.
Result oneHot(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto classes = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[1]);
  if (failed(classes))
    return failure();
  if (*classes == -1) {
    imp.error() << "num_classes=-1 takes the class count from the input's largest value: the "
                   "output's shape would depend on tensor values; pass num_classes";
    return failure();
  }
  if (*classes < 0 || !typeOf(*x).getElementType().isInteger(64)) {
    imp.error() << "one_hot takes an int64 tensor of class indices and num_classes >= 0, got "
                << typeOf(*x) << " and " << *classes;
    return failure();
  }
  SmallVector<int64_t> shape(typeOf(*x).getShape());
  shape.push_back(1);
  SmallVector<int64_t> range = llvm::to_vector(llvm::seq<int64_t>(0, *classes));
  auto hit = comparison(imp, c::ComparePredicate::eq, imp.reshape(*x, shape),
                        constantIndex(imp, range));
  if (failed(hit))
    return failure();
  return one(imp.cast(*hit, imp.builder.getI64Type()));
}

/// repeat_interleave(self, repeats, dim, output_size) with repeats a number
/// or a constant tensor (without dim, of the flattened input), and
/// repeat_interleave(repeats) (the indices repeated). Repeats computed at
/// run time make the output's size depend on tensor values: refused.
Result repeatInterleave(Importer &imp, jit::Node *node, Inputs in) {
  bool indicesOnly = !node->schema().argumentIndexWithName("self");
  const Val &repeatsVal = indicesOnly ? in[0] : in[1];
  if (repeatsVal.isTensor()) {
    imp.error() << "the repeats come from a tensor computed at run time: the output's size "
                   "would depend on its values";
    return failure();
  }
  std::vector<int64_t> counts;
  bool fromTensor = false;
  if (repeatsVal.isConstant() && repeatsVal.constant.isTensor()) {
    at::Tensor t = repeatsVal.constant.toTensor();
    if (t.dim() > 1 || at::isFloatingType(t.scalar_type())) {
      imp.error() << "repeats must be a number or a 0-d or 1-D integer tensor";
      return failure();
    }
    t = t.to(c10::ScalarType::Long).contiguous();
    counts.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    fromTensor = t.dim() == 1;
  } else {
    auto r = imp.integer(repeatsVal);
    if (failed(r))
      return failure();
    counts.push_back(*r);
  }
  if (llvm::any_of(counts, [](int64_t c) { return c < 0; })) {
    imp.error() << "repeats must not be negative";
    return failure();
  }
  Value x;
  int64_t dim = 0;
  if (indicesOnly) {
    if (!fromTensor) {
      imp.error() << "repeat_interleave(repeats) needs a 1-D tensor of repeats";
      return failure();
    }
    SmallVector<int64_t> range = llvm::to_vector(llvm::seq<int64_t>(0, counts.size()));
    x = constantIndex(imp, range);
  } else {
    auto t = imp.tensor(in[0]);
    if (failed(t))
      return failure();
    x = *t;
    if (in.size() < 3 || imp.isNone(in[2]) || typeOf(x).getRank() == 0) {
      if (in.size() >= 3 && !imp.isNone(in[2])) {
        auto d = dimArg(imp, in[2], 0);
        if (failed(d))
          return failure();
      }
      x = imp.reshape(x, {typeOf(x).getNumElements()});
    } else {
      auto d = dimArg(imp, in[2], typeOf(x).getRank());
      if (failed(d))
        return failure();
      dim = *d;
    }
  }
  auto type = typeOf(x);
  int64_t size = type.getDimSize(dim);
  if (counts.size() == 1 && (!fromTensor || size != 1))
    counts.assign(size, counts.front());
  if (static_cast<int64_t>(counts.size()) != size) {
    imp.error() << counts.size() << " repeats for a dim of size " << size;
    return failure();
  }
  SmallVector<int64_t> positions;
  for (int64_t i = 0; i < size; ++i)
    positions.append(counts[i], i);
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = positions.size();
  if (positions.empty())
    return one(imp.splat(0, type.getElementType(), shape));
  return one(imp.create<c::IndexSelectOp>(type.clone(shape), x, constantIndex(imp, positions),
                                          dim));
}

/// put(self, index, source, accumulate): source's elements written (or
/// added) at the flat positions `index` (negative ones from the end) of
/// self. Bools accumulate as a logical or, through i64.
Result put(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[1]);
  auto source = failed(index) ? FailureOr<Value>(failure()) : imp.tensor(in[2]);
  auto accumulate = failed(source) ? FailureOr<bool>(failure()) : imp.boolean(in[3]);
  if (failed(accumulate))
    return failure();
  auto type = typeOf(*x);
  int64_t n = type.getNumElements(), m = typeOf(*index).getNumElements();
  if (typeOf(*source).getNumElements() != m) {
    imp.error() << "source " << typeOf(*source) << " must have one element per index, " << m;
    return failure();
  }
  if (m == 0)
    return one(*x);
  Type et = type.getElementType();
  bool viaI64 = *accumulate && et.isInteger(1);
  Type work = viaI64 ? imp.builder.getI64Type() : et;
  Value flat = imp.reshape(imp.cast(*x, work), {n});
  Value idx = imp.reshape(imp.cast(*index, imp.builder.getI64Type()), {m});
  auto negative = comparison(imp, c::ComparePredicate::lt, idx, imp.splat(0, typeOf(idx).getElementType()));
  auto shifted = imp.create<c::AddOp>(idx, imp.splat(n, typeOf(idx).getElementType()));
  if (failed(negative) || failed(shifted))
    return failure();
  auto wrapped = imp.create<c::WhereOp>(*negative, *shifted, idx);
  if (failed(wrapped))
    return failure();
  Value src = imp.reshape(imp.cast(*source, work), {m});
  auto written = scatterWith(imp, flat, 0, *wrapped, src,
                             *accumulate ? c::ScatterReduce::sum : c::ScatterReduce::none);
  if (failed(written))
    return failure();
  Value result = imp.reshape(written->front().tensor, type.getShape());
  return one(viaI64 ? imp.cast(result, et) : result);
}

/// index_reduce(self, dim, index, source, reduce, include_self): source's
/// slices reduced (prod, mean, amax, amin) into self's along dim, a
/// scatter_reduce of the index broadcast to the source.
Result indexReduce(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto index = failed(x) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2]);
  auto source = failed(index) ? FailureOr<Value>(failure()) : imp.tensor(in[3]);
  auto include = failed(source) ? FailureOr<bool>(failure()) : imp.boolean(in[5]);
  if (failed(include))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  if (!in[4].isConstant() || !in[4].constant.isString()) {
    imp.error() << "reduce must be a constant string";
    return failure();
  }
  std::string kind = in[4].constant.toStringRef();
  auto reduce = c::symbolizeScatterReduce(kind);
  if (!reduce || (*reduce != c::ScatterReduce::prod && *reduce != c::ScatterReduce::mean &&
                  *reduce != c::ScatterReduce::amax && *reduce != c::ScatterReduce::amin)) {
    imp.error() << "unknown reduce '" << kind << "' (prod, mean, amax, amin)";
    return failure();
  }
  auto type = typeOf(*x);
  Type et = type.getElementType();
  if (*reduce == c::ScatterReduce::mean && et.isInteger(1)) {
    imp.error() << "mean of a bool tensor is not supported (PyTorch refuses it)";
    return failure();
  }
  Value self = *x, src = imp.cast(*source, et);
  if (type.getRank() == 0) { // one element, as a 1-D tensor
    self = imp.reshape(self, {1});
    src = imp.reshape(src, {typeOf(src).getNumElements()});
  }
  if (typeOf(src).getRank() != typeOf(self).getRank()) {
    imp.error() << "source " << typeOf(*source) << " must have the input's rank";
    return failure();
  }
  auto scatterIndex = alongDim(imp, *index, *dim, typeOf(src).getShape());
  if (failed(scatterIndex))
    return failure();
  auto reduced = scatterWith(imp, self, *dim, *scatterIndex, src, *reduce, *include);
  if (failed(reduced))
    return failure();
  return one(imp.reshape(reduced->front().tensor, type.getShape()));
}

/// The number of entries of `sorted` (its last dim) below each value, or
/// at most each value with `right`: `values[..., :, None]` compared with
/// `sorted[..., None, :]`, summed. A 1-D `sorted` serves every value;
/// otherwise its leading dims match the values'.
FailureOr<Value> countBelow(Importer &imp, Value values, Value sorted, bool right, bool i32) {
  auto promoted = imp.promote({Val::ofTensor(values), Val::ofTensor(sorted)});
  if (failed(promoted))
    return failure();
  Value v = (*promoted)[0], s = (*promoted)[1];
  auto vt = typeOf(v), st = typeOf(s);
  SmallVector<int64_t> vShape(vt.getShape());
  vShape.push_back(1);
  if (st.getRank() > 1) {
    if (st.getRank() != vt.getRank() || st.getShape().drop_back() != vt.getShape().drop_back()) {
      imp.error() << "the sorted sequence " << st << " and the values " << vt
                  << " must match in every dim but the last";
      return failure();
    }
    SmallVector<int64_t> sShape(st.getShape());
    sShape.insert(sShape.end() - 1, 1);
    s = imp.reshape(s, sShape);
  }
  auto below = comparison(imp, right ? c::ComparePredicate::le : c::ComparePredicate::lt, s,
                          imp.reshape(v, vShape));
  if (failed(below))
    return failure();
  int64_t last = typeOf(*below).getRank() - 1;
  auto count = imp.create<c::ReduceSumOp>(imp.cast(*below, imp.builder.getI64Type()),
                                          imp.builder.getDenseI64ArrayAttr({last}),
                                          imp.builder.getBoolAttr(false));
  if (failed(count))
    return failure();
  return i32 ? imp.cast(*count, imp.builder.getI32Type()) : *count;
}

/// bucketize(self, boundaries, out_int32, right).
Result bucketize(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto boundaries = failed(x) ? FailureOr<Value>(failure()) : imp.tensor(in[1]);
  auto i32 = failed(boundaries) ? FailureOr<bool>(failure()) : imp.boolean(in[2]);
  auto right = failed(i32) ? FailureOr<bool>(failure()) : imp.boolean(in[3]);
  if (failed(right))
    return failure();
  if (typeOf(*boundaries).getRank() != 1) {
    imp.error() << "boundaries must be 1-D, got " << typeOf(*boundaries);
    return failure();
  }
  return one(countBelow(imp, *x, *boundaries, *right, *i32));
}

/// searchsorted(sorted_sequence, self, out_int32, right, side, sorter): the
/// sequence put in order by `sorter` first (a gather along its last dim).
Result searchsorted(Importer &imp, jit::Node *node, Inputs in) {
  auto sorted = imp.tensor(in[0]);
  auto x = failed(sorted) ? FailureOr<Value>(failure()) : imp.tensor(in[1]);
  auto i32 = failed(x) ? FailureOr<bool>(failure()) : imp.boolean(in[2]);
  auto right = failed(i32) ? FailureOr<bool>(failure()) : imp.boolean(in[3]);
  if (failed(right))
    return failure();
  const auto &schema = node->schema();
  bool toRight = *right;
  if (auto i = schema.argumentIndexWithName("side"); i && !imp.isNone(in[*i])) {
    if (!in[*i].isConstant() || !in[*i].constant.isString()) {
      imp.error() << "side must be a constant string";
      return failure();
    }
    std::string side = in[*i].constant.toStringRef();
    if ((side != "left" && side != "right") || (side == "left" && *right)) {
      imp.error() << "side must be 'left' or 'right' and agree with right=" << *right;
      return failure();
    }
    toRight = side == "right";
  }
  Value seq = *sorted;
  if (typeOf(seq).getRank() == 0) {
    imp.error() << "the sorted sequence must have at least 1 dim";
    return failure();
  }
  if (auto i = schema.argumentIndexWithName("sorter"); i && !imp.isNone(in[*i])) {
    auto sorter = indexTensor(imp, in[*i], "sorter");
    if (failed(sorter))
      return failure();
    if (typeOf(*sorter).getShape() != typeOf(seq).getShape()) {
      imp.error() << "sorter " << typeOf(*sorter) << " must have the sequence's shape "
                  << typeOf(seq);
      return failure();
    }
    if (typeOf(seq).getNumElements() > 0) {
      auto gathered = imp.create<c::GatherOp>(typeOf(seq), seq, *sorter,
                                              imp.builder.getI64IntegerAttr(typeOf(seq).getRank() - 1));
      if (failed(gathered))
        return failure();
      seq = *gathered;
    }
  }
  return one(countBelow(imp, *x, seq, toRight, *i32));
}

/// histc(self, bins, min, max): counts of `bins` equal bins over [min, max]
/// (the data's range when min == max, computed at run time; widened by 1
/// each way when that is one point), elements outside ignored, the last
/// bin closed. The bin of x is trunc((x - min) · bins / (max - min)), as
/// PyTorch's kernel; one-hot comparisons summed.
Result histc(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto bins = failed(x) ? FailureOr<int64_t>(failure()) : imp.integer(in[1]);
  auto lo = failed(bins) ? FailureOr<double>(failure()) : imp.real(in[2]);
  auto hi = failed(lo) ? FailureOr<double>(failure()) : imp.real(in[3]);
  if (failed(hi))
    return failure();
  auto type = typeOf(*x);
  Type et = type.getElementType();
  if (!llvm::isa<FloatType>(et)) {
    imp.error() << "histc takes a float tensor, got " << type;
    return failure();
  }
  if (*bins < 1 || *lo > *hi) {
    imp.error() << "histc needs bins >= 1 and min <= max";
    return failure();
  }
  int64_t n = type.getNumElements();
  Value flat = imp.reshape(*x, {n});
  Value low, high;
  auto widen = [&](Value v, double by) -> FailureOr<Value> {
    return imp.create<c::AddOp>(v, imp.splat(by, et));
  };
  if (*lo == *hi && n > 0) {
    auto dims = imp.builder.getDenseI64ArrayAttr({0});
    auto mn = imp.create<c::AminOp>(flat, dims, imp.builder.getBoolAttr(false));
    auto mx = imp.create<c::ReduceMaxOp>(flat, dims, imp.builder.getBoolAttr(false));
    if (failed(mn) || failed(mx))
      return failure();
    auto same = comparison(imp, c::ComparePredicate::eq, *mn, *mx);
    auto mnWide = widen(*mn, -1), mxWide = widen(*mx, 1);
    if (failed(same) || failed(mnWide) || failed(mxWide))
      return failure();
    auto l = imp.create<c::WhereOp>(*same, *mnWide, *mn);
    auto h = imp.create<c::WhereOp>(*same, *mxWide, *mx);
    if (failed(l) || failed(h))
      return failure();
    low = *l;
    high = *h;
  } else {
    double l = *lo, h = *hi;
    if (l == h) {
      l -= 1;
      h += 1;
    }
    low = imp.splat(l, et);
    high = imp.splat(h, et);
  }
  auto offset = imp.create<c::SubOp>(flat, low);
  auto width = imp.create<c::SubOp>(high, low);
  if (failed(offset) || failed(width))
    return failure();
  auto scaled = imp.create<c::MulOp>(*offset, imp.splat(*bins, et));
  auto ratio = failed(scaled) ? FailureOr<Value>(failure()) : imp.create<c::DivOp>(*scaled, *width);
  auto bin = failed(ratio) ? FailureOr<Value>(failure()) : imp.create<c::TruncOp>(*ratio);
  if (failed(bin))
    return failure();
  // The right edge belongs to the last bin.
  auto atEdge = comparison(imp, c::ComparePredicate::eq, *bin, imp.splat(*bins, et));
  if (failed(atEdge))
    return failure();
  auto clamped = imp.create<c::WhereOp>(*atEdge, imp.splat(*bins - 1, et), *bin);
  auto aboveLow = comparison(imp, c::ComparePredicate::ge, flat, low);
  auto belowHigh = comparison(imp, c::ComparePredicate::le, flat, high);
  if (failed(clamped) || failed(aboveLow) || failed(belowHigh))
    return failure();
  auto inside = imp.create<c::AndOp>(*aboveLow, *belowHigh);
  if (failed(inside))
    return failure();
  SmallVector<Attribute> binIds;
  for (int64_t b = 0; b < *bins; ++b)
    binIds.push_back(FloatAttr::get(et, static_cast<double>(b)));
  auto idsType = RankedTensorType::get({*bins}, et);
  Value ids = imp.builder.create<c::ConstantOp>(imp.loc(), DenseElementsAttr::get(idsType, binIds));
  auto hit = comparison(imp, c::ComparePredicate::eq, imp.reshape(*clamped, {n, 1}), ids);
  if (failed(hit))
    return failure();
  auto counted = imp.create<c::AndOp>(*hit, imp.reshape(*inside, {n, 1}));
  if (failed(counted))
    return failure();
  return one(imp.create<c::ReduceSumOp>(imp.cast(*counted, et),
                                        imp.builder.getDenseI64ArrayAttr({0}),
                                        imp.builder.getBoolAttr(false)));
}

/// The biased variance's reciprocal square root and the mean of `x` over
/// `dims` (kept as size 1), as the normalization kernels save them.
FailureOr<std::pair<Value, Value>> meanAndRstd(Importer &imp, Value x, ArrayRef<int64_t> dims,
                                               double eps) {
  auto dimsAttr = imp.builder.getDenseI64ArrayAttr(dims);
  auto mean = imp.create<c::ReduceMeanOp>(x, dimsAttr, imp.builder.getBoolAttr(true));
  auto centered = failed(mean) ? FailureOr<Value>(failure()) : imp.create<c::SubOp>(x, *mean);
  auto squared =
      failed(centered) ? FailureOr<Value>(failure()) : imp.create<c::MulOp>(*centered, *centered);
  auto var = failed(squared) ? FailureOr<Value>(failure())
                             : imp.create<c::ReduceMeanOp>(*squared, dimsAttr,
                                                           imp.builder.getBoolAttr(true));
  Type et = typeOf(x).getElementType();
  auto shifted =
      failed(var) ? FailureOr<Value>(failure()) : imp.create<c::AddOp>(*var, imp.splat(eps, et));
  auto rstd = failed(shifted) ? FailureOr<Value>(failure()) : imp.create<c::RsqrtOp>(*shifted);
  if (failed(rstd))
    return failure();
  return std::make_pair(*mean, *rstd);
}

/// native_layer_norm(input, normalized_shape, weight, bias, eps) ->
/// (output, mean, rstd): the layer norm, and its statistics over the
/// normalized dims, kept as size 1.
Result nativeLayerNorm(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto shape = imp.intList(in[1]);
  auto weight = optionalTensor(imp, in[2]), bias = optionalTensor(imp, in[3]);
  auto eps = imp.real(in[4]);
  if (failed(x) || failed(shape) || failed(weight) || failed(bias) || failed(eps))
    return failure();
  auto type = typeOf(*x);
  Type et = type.getElementType();
  int64_t rank = type.getRank(), k = shape->size();
  if (!llvm::isa<FloatType>(et) || k == 0 || k > rank ||
      type.getShape().take_back(k) != ArrayRef<int64_t>(*shape)) {
    imp.error() << "native_layer_norm takes a float tensor whose trailing dims are "
                   "normalized_shape, got "
                << type << " and [" << ArrayRef<int64_t>(*shape) << "]";
    return failure();
  }
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(rank - k, rank));
  auto stats = meanAndRstd(imp, *x, dims, *eps);
  if (failed(stats))
    return failure();
  // PyTorch's kernel: (x · rstd + (-rstd · mean)) · weight + bias. Any eps
  // is taken (a negative one gives NaN where var + eps < 0, as PyTorch).
  auto shift = imp.create<c::MulOp>(stats->second, stats->first);
  auto negShift = failed(shift) ? FailureOr<Value>(failure()) : imp.create<c::NegOp>(*shift);
  auto scaled = failed(negShift) ? FailureOr<Value>(failure())
                                 : imp.create<c::MulOp>(*x, stats->second);
  auto out = failed(scaled) ? FailureOr<Value>(failure())
                            : imp.create<c::AddOp>(*scaled, *negShift);
  if (failed(out) || (*weight && failed(out = imp.create<c::MulOp>(*out, imp.cast(*weight, et)))) ||
      (*bias && failed(out = imp.create<c::AddOp>(*out, imp.cast(*bias, et)))))
    return failure();
  return std::vector<Val>{Val::ofTensor(*out), Val::ofTensor(stats->first),
                          Val::ofTensor(stats->second)};
}

/// native_batch_norm(input, weight, bias, running_mean, running_var,
/// training, momentum, eps) -> (output, save_mean, save_invstd). In
/// training the batch's statistics per channel (dim 1) normalize and are
/// saved; otherwise the running ones normalize and the saved ones are
/// empty, as PyTorch's CPU kernel. (The running statistics' update is not
/// an output.)
Result nativeBatchNorm(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto weight = optionalTensor(imp, in[1]), bias = optionalTensor(imp, in[2]);
  auto training = imp.boolean(in[5]);
  auto eps = imp.real(in[7]);
  if (failed(x) || failed(weight) || failed(bias) || failed(training) || failed(eps))
    return failure();
  auto type = typeOf(*x);
  Type et = type.getElementType();
  if (!llvm::isa<FloatType>(et) || type.getRank() < 2) {
    imp.error() << "native_batch_norm takes a float [N, C, ...] tensor, got " << type;
    return failure();
  }
  int64_t channels = type.getDimSize(1);
  if (!*training) {
    auto out = batchNorm(imp, node, in);
    if (failed(out))
      return failure();
    Value empty = imp.splat(0, et, {0});
    return std::vector<Val>{out->front(), Val::ofTensor(empty), Val::ofTensor(empty)};
  }
  SmallVector<int64_t> dims{0};
  for (int64_t d = 2; d < type.getRank(); ++d)
    dims.push_back(d);
  auto stats = meanAndRstd(imp, *x, dims, *eps);
  if (failed(stats))
    return failure();
  auto centered = imp.create<c::SubOp>(*x, stats->first);
  auto y = failed(centered) ? FailureOr<Value>(failure())
                            : imp.create<c::MulOp>(*centered, stats->second);
  if (failed(y))
    return failure();
  SmallVector<int64_t> perChannel(type.getRank(), 1);
  perChannel[1] = channels;
  Value out = *y;
  if (*weight) {
    auto scaled = imp.create<c::MulOp>(out, imp.reshape(imp.cast(*weight, et), perChannel));
    if (failed(scaled))
      return failure();
    out = *scaled;
  }
  if (*bias) {
    auto shifted = imp.create<c::AddOp>(out, imp.reshape(imp.cast(*bias, et), perChannel));
    if (failed(shifted))
      return failure();
    out = *shifted;
  }
  return std::vector<Val>{Val::ofTensor(out), Val::ofTensor(imp.reshape(stats->first, {channels})),
                          Val::ofTensor(imp.reshape(stats->second, {channels}))};
}

/// embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
/// per_sample_weights, include_last_offset, padding_idx): the rows of the
/// indices reduced per bag (mode 0 sum, 1 mean, 2 max), bag b holding the
/// positions from offsets[b] to the next offset. The offsets may be
/// computed at run time: the number of bags is their count. Each position's
/// bag is the number of offsets at or before it, minus 1 (a broadcast
/// comparison and a sum); a [positions, bags] membership matrix then sums
/// the rows by a matmul, or masks them for the maximum. Padding indices
/// take no part; an empty bag gives zeros. Only the first output is
/// supported (offset2bag, bag_size and max_indices are internal to
/// PyTorch's backward).
Result embeddingBag(Importer &imp, jit::Node *node, Inputs in) {
  auto w = imp.tensor(in[0]);
  auto ids = failed(w) ? FailureOr<Value>(failure()) : indexTensor(imp, in[1], "indices");
  auto offsets = failed(ids) ? FailureOr<Value>(failure()) : indexTensor(imp, in[2], "offsets");
  auto mode = failed(offsets) ? FailureOr<int64_t>(failure()) : imp.integer(in[4]);
  if (failed(mode))
    return failure();
  for (size_t k = 1; k < node->outputs().size(); ++k)
    if (!node->outputs()[k]->uses().empty()) {
      imp.error() << "only embedding_bag's first output is supported (offset2bag, bag_size and "
                     "max_indices are not)";
      return failure();
    }
  if (imp.training)
    for (auto [i, what] : {std::pair{3, "scale_grad_by_freq=True"}, {5, "sparse=True"}}) {
      auto flag = imp.boolean(in[i]);
      if (failed(flag))
        return failure();
      if (*flag) {
        imp.error() << "embedding_bag with " << what << " cannot be trained (cleave's "
                    << "embedding gradient is dense and unscaled)";
        return failure();
      }
    }
  Value weights;
  if (in.size() > 6 && !imp.isNone(in[6])) {
    auto given = imp.tensor(in[6]);
    if (failed(given))
      return failure();
    weights = *given;
  }
  bool includeLast = false;
  if (in.size() > 7) {
    auto given = imp.boolean(in[7]);
    if (failed(given))
      return failure();
    includeLast = *given;
  }
  std::optional<int64_t> padding;
  if (in.size() > 8 && !imp.isNone(in[8])) {
    auto given = imp.integer(in[8]);
    if (failed(given))
      return failure();
    int64_t rows = typeOf(*w).getRank() > 0 ? typeOf(*w).getDimSize(0) : 0;
    if (*given < -rows || *given >= rows) {
      imp.error() << "padding_idx " << *given << " is outside the table's " << rows << " rows";
      return failure();
    }
    padding = *given < 0 ? *given + rows : *given; // given, it wraps (None means none)
  }
  auto wt = typeOf(*w);
  Type et = wt.getElementType();
  if (wt.getRank() != 2 || !llvm::isa<FloatType>(et) || typeOf(*ids).getRank() != 1 ||
      typeOf(*offsets).getRank() != 1) {
    imp.error() << "embedding_bag takes a float [rows, dim] table, 1-D indices and 1-D offsets, "
                   "got "
                << wt << ", " << typeOf(*ids) << ", " << typeOf(*offsets);
    return failure();
  }
  if (*mode < 0 || *mode > 2 || (weights && *mode != 0)) {
    imp.error() << "mode must be sum (0), mean (1) or max (2), per_sample_weights only with sum";
    return failure();
  }
  int64_t n = typeOf(*ids).getNumElements(), given = typeOf(*offsets).getNumElements();
  int64_t bags = given - (includeLast ? 1 : 0), dim = wt.getDimSize(1);
  if (bags < 0) {
    imp.error() << "include_last_offset needs at least one offset";
    return failure();
  }
  auto rows = imp.create<c::EmbeddingOp>(*w, *ids, mlir::IntegerAttr(), mlir::IntegerAttr());
  if (failed(rows))
    return failure();
  Type i64 = imp.builder.getI64Type();
  // Each position's bag: the offsets at or before it, minus 1.
  Value positions = imp.reshape(constantIndex(imp, llvm::to_vector(llvm::seq<int64_t>(0, n))),
                                {n, 1});
  auto started = comparison(imp, c::ComparePredicate::le,
                            imp.reshape(imp.cast(*offsets, i64), {1, given}), positions);
  if (failed(started))
    return failure();
  auto count = imp.create<c::ReduceSumOp>(imp.cast(*started, i64),
                                          imp.builder.getDenseI64ArrayAttr({1}),
                                          imp.builder.getBoolAttr(true));
  auto bag = failed(count) ? FailureOr<Value>(failure())
                           : imp.create<c::SubOp>(*count, imp.splat(1, i64));
  if (failed(bag))
    return failure();
  auto member = comparison(imp, c::ComparePredicate::eq, *bag,
                           constantIndex(imp, llvm::to_vector(llvm::seq<int64_t>(0, bags))));
  if (failed(member))
    return failure();
  if (padding) {
    auto kept = comparison(imp, c::ComparePredicate::ne,
                           imp.reshape(imp.cast(*ids, i64), {n, 1}), imp.splat(*padding, i64));
    auto both = failed(kept) ? FailureOr<Value>(failure()) : imp.create<c::AndOp>(*member, *kept);
    if (failed(both))
      return failure();
    member = *both;
  }
  Value memberF = imp.cast(*member, et); // [n, bags]
  auto sizes = imp.create<c::ReduceSumOp>(memberF, imp.builder.getDenseI64ArrayAttr({0}),
                                          imp.builder.getBoolAttr(false));
  if (failed(sizes))
    return failure();
  Value bagSizes = imp.reshape(*sizes, {bags, 1});
  std::vector<Val> outputs(node->outputs().size(), Val::poison());
  if (*mode == 2) {
    auto masked = imp.create<c::WhereOp>(imp.reshape(*member, {n, bags, 1}),
                                         imp.reshape(*rows, {n, 1, dim}),
                                         imp.splat(-std::numeric_limits<double>::infinity(), et));
    auto best = failed(masked) ? FailureOr<Value>(failure())
                               : imp.create<c::ReduceMaxOp>(*masked,
                                                            imp.builder.getDenseI64ArrayAttr({0}),
                                                            imp.builder.getBoolAttr(false));
    auto empty = failed(best) ? FailureOr<Value>(failure())
                              : comparison(imp, c::ComparePredicate::eq, bagSizes,
                                           imp.splat(0, et));
    auto out = failed(empty) ? FailureOr<Value>(failure())
                             : imp.create<c::WhereOp>(*empty, imp.splat(0, et), *best);
    if (failed(out))
      return failure();
    outputs[0] = Val::ofTensor(*out);
    return outputs;
  }
  Value values = *rows;
  if (weights) {
    if (typeOf(weights).getNumElements() != n) {
      imp.error() << "per_sample_weights " << typeOf(weights) << " must have one weight per index";
      return failure();
    }
    auto scaled = imp.create<c::MulOp>(values, imp.reshape(imp.cast(weights, et), {n, 1}));
    if (failed(scaled))
      return failure();
    values = *scaled;
  }
  auto byBag = imp.create<c::PermuteOp>(memberF, imp.builder.getDenseI64ArrayAttr({1, 0}));
  auto sums = failed(byBag) ? FailureOr<Value>(failure())
                            : imp.create<c::MatmulOp>(*byBag, values);
  if (failed(sums))
    return failure();
  Value out = *sums;
  if (*mode == 1) {
    auto divisor = imp.create<c::MaximumOp>(bagSizes, imp.splat(1, et));
    auto mean = failed(divisor) ? FailureOr<Value>(failure()) : imp.create<c::DivOp>(out, *divisor);
    if (failed(mean))
      return failure();
    out = *mean;
  }
  outputs[0] = Val::ofTensor(out);
  return outputs;
}

/// embedding_renorm_(self, indices, max_norm, norm_type): the rows that
/// `indices` names scaled to a `norm_type` norm of at most max_norm (by
/// max_norm / (norm + 1e-7), as PyTorch's kernel), the others unchanged;
/// the in-place form rebinds the table. Which rows are named: a broadcast
/// comparison of the indices with every row number, summed.
Result embeddingRenorm(Importer &imp, jit::Node *, Inputs in) {
  auto w = imp.tensor(in[0]);
  auto ids = failed(w) ? FailureOr<Value>(failure()) : indexTensor(imp, in[1], "indices");
  auto maxNorm = failed(ids) ? FailureOr<double>(failure()) : imp.real(in[2]);
  auto p = failed(maxNorm) ? FailureOr<double>(failure()) : imp.real(in[3]);
  if (failed(p))
    return failure();
  auto type = typeOf(*w);
  Type et = type.getElementType();
  if (type.getRank() != 2 || !llvm::isa<FloatType>(et)) {
    imp.error() << "embedding_renorm takes a float [rows, dim] table, got " << type;
    return failure();
  }
  int64_t rows = type.getDimSize(0), m = typeOf(*ids).getNumElements();
  Type i64 = imp.builder.getI64Type();
  auto named = comparison(imp, c::ComparePredicate::eq,
                          imp.reshape(imp.cast(*ids, i64), {m, 1}),
                          constantIndex(imp, llvm::to_vector(llvm::seq<int64_t>(0, rows))));
  auto uses = failed(named) ? FailureOr<Value>(failure())
                            : imp.create<c::ReduceSumOp>(imp.cast(*named, i64),
                                                         imp.builder.getDenseI64ArrayAttr({0}),
                                                         imp.builder.getBoolAttr(false));
  auto used = failed(uses) ? FailureOr<Value>(failure())
                           : comparison(imp, c::ComparePredicate::gt, *uses, imp.splat(0, i64));
  auto norms = failed(used) ? FailureOr<Value>(failure())
                            : imp.create<c::NormOp>(*w, imp.builder.getDenseI64ArrayAttr({1}),
                                                    imp.builder.getBoolAttr(false),
                                                    imp.builder.getF64FloatAttr(*p));
  auto over = failed(norms) ? FailureOr<Value>(failure())
                            : comparison(imp, c::ComparePredicate::gt, *norms,
                                         imp.splat(*maxNorm, et));
  auto hit = failed(over) ? FailureOr<Value>(failure()) : imp.create<c::AndOp>(*used, *over);
  auto padded = failed(hit) ? FailureOr<Value>(failure())
                            : imp.create<c::AddOp>(*norms, imp.splat(1e-7, et));
  auto scale = failed(padded) ? FailureOr<Value>(failure())
                              : imp.create<c::DivOp>(imp.splat(*maxNorm, et), *padded);
  auto factor = failed(scale) ? FailureOr<Value>(failure())
                              : imp.create<c::WhereOp>(*hit, *scale, imp.splat(1, et));
  if (failed(factor))
    return failure();
  return one(imp.create<c::MulOp>(*w, imp.reshape(*factor, {rows, 1})));
}

//===----------------------------------------------------------------------===//
// Sorting, order statistics and running extrema.
//===----------------------------------------------------------------------===//

/// An argument looked up by its schema name: `in[index]`, or nullptr when
/// the overload has no such argument.
const Val *namedArg(jit::Node *node, Inputs in, const char *name) {
  auto index = node->schema().argumentIndexWithName(name);
  return index ? &in[*index] : nullptr;
}

/// A boolean argument by name, `otherwise` when the overload has none.
FailureOr<bool> boolArg(Importer &imp, jit::Node *node, Inputs in, const char *name,
                        bool otherwise) {
  const Val *v = namedArg(node, in, name);
  return v && !imp.isNone(*v) ? imp.boolean(*v) : FailureOr<bool>(otherwise);
}

/// The dim argument by name (`otherwise` when absent), normalized for `x`.
FailureOr<int64_t> namedDim(Importer &imp, jit::Node *node, Inputs in, Value x,
                            int64_t otherwise = -1) {
  const Val *v = namedArg(node, in, "dim");
  if (v && !imp.isNone(*v))
    return dimArg(imp, *v, typeOf(x).getRank());
  return normDim(imp, otherwise, typeOf(x).getRank());
}

/// Builds an op with two inferred results (values, indices), verifies it,
/// and reports `what` at the node when it does not fit.
template <typename OpTy, typename... Args>
FailureOr<std::pair<Value, Value>> createPair(Importer &imp, const char *what, Value x,
                                              Args &&...args) {
  auto op = imp.builder.create<OpTy>(imp.loc(), x, std::forward<Args>(args)...);
  if (failed(mlir::verify(op))) {
    op->erase();
    imp.error() << "cannot " << what << " " << typeOf(x);
    return failure();
  }
  return std::make_pair(Value(op->getResult(0)), Value(op->getResult(1)));
}

/// cleave.sort along `dim`; a 0-d tensor is its own sort, at index 0.
FailureOr<std::pair<Value, Value>> sortAlong(Importer &imp, Value x, int64_t dim,
                                             bool descending) {
  if (typeOf(x).getRank() == 0)
    return std::make_pair(x, imp.splat(0, imp.builder.getI64Type()));
  return createPair<mlir::cleave::SortOp>(imp, "sort", x, imp.builder.getI64IntegerAttr(dim),
                                          imp.builder.getBoolAttr(descending));
}

/// sort(self, dim=-1, descending=False), sort.stable(self, *, stable, dim,
/// descending), argsort (the indices) and msort (dim 0, the values). cleave's
/// sort is always stable, which the unstable overloads allow.
Converter sortConverter(bool values, bool indices, std::optional<int64_t> fixedDim = {}) {
  return [=](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto dim = fixedDim ? normDim(imp, *fixedDim, typeOf(*x).getRank())
                        : namedDim(imp, node, in, *x);
    auto descending = boolArg(imp, node, in, "descending", false);
    if (failed(dim) || failed(descending))
      return failure();
    auto sorted = sortAlong(imp, *x, *dim, *descending);
    if (failed(sorted))
      return failure();
    std::vector<Val> out;
    if (values)
      out.push_back(Val::ofTensor(sorted->first));
    if (indices)
      out.push_back(Val::ofTensor(sorted->second));
    return out;
  };
}

/// topk(self, k, dim=-1, largest=True, sorted=True): the first k of a sort
/// (descending when largest), so the result is always sorted, as PyTorch's
/// with sorted=True. Among equal values the indices follow the stable sort,
/// where PyTorch's partial sort may order them differently.
Result topk(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto k = imp.integer(in[1]);
  if (failed(x) || failed(k))
    return failure();
  auto dim = namedDim(imp, node, in, *x);
  auto largest = boolArg(imp, node, in, "largest", true);
  if (failed(dim) || failed(largest))
    return failure();
  int64_t n = typeOf(*x).getRank() == 0 ? 1 : typeOf(*x).getDimSize(*dim);
  if (*k < 0 || *k > n) {
    imp.error() << "k = " << *k << " is out of range for a dim of size " << n
                << " (PyTorch refuses it too)";
    return failure();
  }
  auto sorted = sortAlong(imp, *x, *dim, *largest);
  if (failed(sorted))
    return failure();
  if (typeOf(*x).getRank() == 0)
    return std::vector<Val>{Val::ofTensor(sorted->first), Val::ofTensor(sorted->second)};
  auto values = slice(imp, sorted->first, *dim, 0, *k);
  auto indices = slice(imp, sorted->second, *dim, 0, *k);
  if (failed(values) || failed(indices))
    return failure();
  return std::vector<Val>{Val::ofTensor(*values), Val::ofTensor(*indices)};
}

/// A reduced result in the shape a reduction over `dim` gives.
Value reducedShape(Importer &imp, Value v, RankedTensorType input, int64_t dim, bool keepdim) {
  SmallVector<int64_t> shape(input.getShape());
  if (shape.empty())
    return imp.reshape(v, {});
  if (keepdim)
    shape[dim] = 1;
  else
    shape.erase(shape.begin() + dim);
  return imp.reshape(v, shape);
}

/// kthvalue(self, k, dim=-1, keepdim=False): element k - 1 of the sorted
/// slice and its index.
Result kthvalue(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto k = imp.integer(in[1]);
  if (failed(x) || failed(k))
    return failure();
  auto dim = namedDim(imp, node, in, *x);
  auto keepdim = boolArg(imp, node, in, "keepdim", false);
  if (failed(dim) || failed(keepdim))
    return failure();
  RankedTensorType type = typeOf(*x);
  int64_t n = type.getRank() == 0 ? 1 : type.getDimSize(*dim);
  if (*k < 1 || *k > n) {
    imp.error() << "k = " << *k << " is out of range for a dim of size " << n
                << " (PyTorch refuses it too)";
    return failure();
  }
  auto sorted = sortAlong(imp, *x, *dim, false);
  if (failed(sorted))
    return failure();
  if (type.getRank() == 0)
    return std::vector<Val>{Val::ofTensor(sorted->first), Val::ofTensor(sorted->second)};
  auto values = slice(imp, sorted->first, *dim, *k - 1, *k);
  auto indices = slice(imp, sorted->second, *dim, *k - 1, *k);
  if (failed(values) || failed(indices))
    return failure();
  return std::vector<Val>{Val::ofTensor(reducedShape(imp, *values, type, *dim, *keepdim)),
                          Val::ofTensor(reducedShape(imp, *indices, type, *dim, *keepdim))};
}

/// median / nanmedian (self): the flattened tensor's, 0-d, values only;
/// (self, dim, keepdim=False): values and indices. mode(self, dim=-1,
/// keepdim=False) likewise with a dim.
template <typename OpTy> Converter selection(const char *what, bool ignoreNan) {
  return [=](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    RankedTensorType type = typeOf(*x);
    const Val *dimVal = namedArg(node, in, "dim");
    bool whole = !dimVal && !std::is_same_v<OpTy, mlir::cleave::ModeOp>;
    auto dim = whole ? FailureOr<int64_t>(0) : namedDim(imp, node, in, *x);
    auto keepdim = boolArg(imp, node, in, "keepdim", false);
    if (failed(dim) || failed(keepdim))
      return failure();
    Value input = whole || type.getRank() == 0 ? imp.reshape(*x, {type.getNumElements()}) : *x;
    if (typeOf(input).getDimSize(whole ? 0 : *dim) == 0) {
      imp.error() << "cannot take the " << what << " of an empty dim of " << type
                  << " (PyTorch refuses it too)";
      return failure();
    }
    auto dimAttr = imp.builder.getI64IntegerAttr(whole || type.getRank() == 0 ? 0 : *dim);
    auto keepAttr = imp.builder.getBoolAttr(*keepdim && !whole && type.getRank() != 0);
    FailureOr<std::pair<Value, Value>> pair;
    if constexpr (std::is_same_v<OpTy, mlir::cleave::MedianOp>)
      pair = createPair<OpTy>(imp, what, input, dimAttr, keepAttr,
                              imp.builder.getBoolAttr(ignoreNan));
    else
      pair = createPair<OpTy>(imp, what, input, dimAttr, keepAttr);
    if (failed(pair))
      return failure();
    if (whole)
      return one(imp.reshape(pair->first, {}));
    if (type.getRank() == 0)
      return std::vector<Val>{Val::ofTensor(imp.reshape(pair->first, {})),
                              Val::ofTensor(imp.reshape(pair->second, {}))};
    return std::vector<Val>{Val::ofTensor(pair->first), Val::ofTensor(pair->second)};
  };
}

/// quantile / nanquantile(self, q, dim=None, keepdim=False, *,
/// interpolation='linear'): q a number (a 0-d result per slice) or a 0-d or
/// 1-D tensor; without a dim, over the flattened tensor (keepdim keeps every
/// dim as size 1).
Converter quantile(bool ignoreNan) {
  return [=](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    RankedTensorType type = typeOf(*x);
    if (!llvm::isa<FloatType>(type.getElementType())) {
      imp.error() << "quantile of a " << type << " needs a float tensor (PyTorch refuses it too)";
      return failure();
    }
    Value q;
    if (in[1].isConstant() && (in[1].constant.isDouble() || in[1].constant.isInt())) {
      q = imp.splat(in[1].constant.toScalar().toDouble(), type.getElementType());
    } else {
      auto t = imp.tensor(in[1]);
      if (failed(t))
        return failure();
      q = imp.cast(*t, type.getElementType());
    }
    std::string interpolation = "linear";
    if (const Val *v = namedArg(node, in, "interpolation")) {
      if (!v->isConstant() || !v->constant.isString()) {
        imp.error() << "interpolation must be a constant string";
        return failure();
      }
      interpolation = v->constant.toStringRef();
    }
    auto keepdim = boolArg(imp, node, in, "keepdim", false);
    if (failed(keepdim))
      return failure();
    const Val *dimVal = namedArg(node, in, "dim");
    bool whole = !dimVal || imp.isNone(*dimVal) || type.getRank() == 0;
    auto dim = whole ? FailureOr<int64_t>(0) : namedDim(imp, node, in, *x);
    if (failed(dim))
      return failure();
    Value input = whole ? imp.reshape(*x, {type.getNumElements()}) : *x;
    auto result = imp.create<mlir::cleave::QuantileOp>(
        input, q, *dim, whole ? false : *keepdim, interpolation, ignoreNan);
    if (failed(result) || !whole || !*keepdim)
      return one(result);
    SmallVector<int64_t> shape(typeOf(q).getShape());
    shape.append(type.getRank(), 1);
    return one(imp.reshape(*result, shape));
  };
}

/// cummax / cummin(self, dim): values and indices; a 0-d tensor is itself,
/// at index 0.
template <typename OpTy> Converter indexScan(const char *what) {
  return [=](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
    if (failed(dim))
      return failure();
    if (typeOf(*x).getRank() == 0)
      return std::vector<Val>{Val::ofTensor(*x),
                              Val::ofTensor(imp.splat(0, imp.builder.getI64Type()))};
    auto pair = createPair<OpTy>(imp, what, *x, imp.builder.getI64IntegerAttr(*dim));
    if (failed(pair))
      return failure();
    return std::vector<Val>{Val::ofTensor(pair->first), Val::ofTensor(pair->second)};
  };
}

/// logcumsumexp(self, dim): floats only, as PyTorch; 0-d is itself.
Result logcumsumexp(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dim = dimArg(imp, in[1], typeOf(*x).getRank());
  if (failed(dim))
    return failure();
  if (!llvm::isa<FloatType>(typeOf(*x).getElementType())) {
    imp.error() << "logcumsumexp of a " << typeOf(*x)
                << " needs a float tensor (PyTorch refuses it too)";
    return failure();
  }
  if (typeOf(*x).getRank() == 0)
    return one(*x);
  return one(imp.create<mlir::cleave::LogcumsumexpOp>(*x, *dim, false));
}

/// Ops whose result shape is computed from tensor values: a static graph
/// cannot hold them, so the importer refuses them naming why.
Converter valueDependentShape(const char *why) {
  return [why](Importer &imp, jit::Node *, Inputs) -> Result {
    imp.error() << "shape depends on tensor values: " << why
                << "; cleave compiles static shapes only";
    return failure();
  };
}

//===----------------------------------------------------------------------===//
// Constructions from constants: spectral transforms of real signals as
// products with constant DFT matrices, block and pairwise layouts, finite
// differences, attention. Each is built from core ops at import.
//===----------------------------------------------------------------------===//

/// `x` with `matrix` ([size of dim, n]) applied along `dim`: sum_k x[..k..] m[k, t].
FailureOr<Value> applyAlongDim(Importer &imp, Value x, int64_t dim, Value matrix) {
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  SmallVector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      order.push_back(d);
  order.push_back(dim);
  auto moved = permuteTo(imp, x, order);
  if (failed(moved))
    return failure();
  Value last = moved->front().tensor;
  int64_t in = type.getDimSize(dim), out = typeOf(matrix).getDimSize(1);
  int64_t rows = in == 0 ? 0 : typeOf(last).getNumElements() / in;
  auto product = imp.create<mlir::cleave::MatmulOp>(imp.reshape(last, {rows, in}), matrix);
  if (failed(product))
    return failure();
  SmallVector<int64_t> shape(typeOf(last).getShape());
  shape.back() = out;
  Value result = imp.reshape(*product, shape);
  SmallVector<int64_t> back(rank);
  for (int64_t d = 0; d < rank; ++d)
    back[order[d]] = d;
  auto restored = permuteTo(imp, result, back);
  if (failed(restored))
    return failure();
  return restored->front().tensor;
}

/// The scale of an inverse transform of `points` points under torch.fft's
/// `norm` ("backward" divides the inverse, "forward" the forward transform).
FailureOr<double> fftScale(Importer &imp, const Val &normVal, double points, bool inverse) {
  std::string norm = "backward";
  if (!imp.isNone(normVal)) {
    if (!normVal.isConstant() || !normVal.constant.isString()) {
      imp.error() << "norm must be a constant string";
      return failure();
    }
    norm = normVal.constant.toStringRef();
  }
  if (norm == "ortho")
    return 1.0 / std::sqrt(points);
  if (norm != "backward" && norm != "forward") {
    imp.error() << "unknown norm '" << norm << "' (expected backward, forward or ortho)";
    return failure();
  }
  return (norm == "backward") == inverse ? 1.0 / points : 1.0;
}

/// irfftn / hfftn of a real signal (a complex one is refused at import as
/// every complex tensor is): an inverse DFT over every dim but the last (as
/// real and imaginary parts), then the Hermitian-to-real transform over the
/// last, whose input is cut or zero-padded to n/2 + 1 entries.
Result realOutputFft(Importer &imp, jit::Node *node, Inputs in, bool hermitianForward,
                     std::optional<SmallVector<int64_t>> defaultDims) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Value re = *x;
  Type f32 = imp.builder.getF32Type();
  if (!llvm::isa<FloatType>(typeOf(re).getElementType()))
    re = imp.cast(re, f32);
  auto type = typeOf(re);
  int64_t rank = type.getRank();
  auto argIndex = [&](const char *name) { return node->schema().argumentIndexWithName(name); };
  // irfft/hfft take (n, dim); the 2-D and n-D forms take (s, dim).
  std::optional<SmallVector<int64_t>> sizes;
  SmallVector<int64_t> dims;
  if (auto n = argIndex("n")) {
    if (!imp.isNone(in[*n])) {
      auto given = imp.integer(in[*n]);
      if (failed(given))
        return failure();
      sizes = SmallVector<int64_t>{*given};
    }
    auto d = dimArg(imp, in[*argIndex("dim")], rank);
    if (failed(d))
      return failure();
    dims = {*d};
  } else {
    auto s = argIndex("s");
    if (s && !imp.isNone(in[*s])) {
      auto given = imp.intList(in[*s]);
      if (failed(given))
        return failure();
      sizes = SmallVector<int64_t>(given->begin(), given->end());
    }
    auto d = argIndex("dim");
    if (d && !imp.isNone(in[*d])) {
      auto given = dimListArg(imp, in[*d], rank);
      if (failed(given))
        return failure();
      dims = *given;
    } else if (defaultDims) {
      for (int64_t dim : *defaultDims)
        dims.push_back(dim + rank);
    } else {
      int64_t count = sizes ? static_cast<int64_t>(sizes->size()) : rank;
      for (int64_t dim = rank - count; dim < rank; ++dim)
        dims.push_back(dim);
    }
  }
  if (dims.empty() || llvm::any_of(dims, [&](int64_t d) { return d < 0 || d >= rank; })) {
    imp.error() << "needs at least one dim within the input's rank " << rank;
    return failure();
  }
  if (sizes && sizes->size() != dims.size()) {
    imp.error() << "s has " << sizes->size() << " entries for " << dims.size() << " dims";
    return failure();
  }
  SmallVector<int64_t> points;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t given = type.getDimSize(dims[i]);
    int64_t n = sizes && (*sizes)[i] != -1 ? (*sizes)[i]
                : i + 1 == dims.size()   ? 2 * (given - 1)
                                         : given;
    if (n < 1) {
      imp.error() << "invalid number of data points (" << n << ") along dim " << dims[i];
      return failure();
    }
    points.push_back(n);
  }
  auto matrix = [&](int64_t rows, int64_t n, auto entry) {
    at::Tensor m = at::zeros({rows, n}, at::kDouble);
    auto a = m.accessor<double, 2>();
    for (int64_t k = 0; k < rows; ++k)
      for (int64_t t = 0; t < n; ++t)
        a[k][t] = entry(k, t);
    return imp.constantTensor(m.to(at::kFloat));
  };
  auto angle = [](int64_t k, int64_t t, int64_t n) {
    return 2.0 * M_PI * static_cast<double>((k * t) % n) / static_cast<double>(n);
  };
  std::optional<Value> im; // the imaginary part, none while it is zero
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    int64_t n = points[i], rows = typeOf(re).getDimSize(dims[i]);
    auto cosines = matrix(rows, n, [&](int64_t k, int64_t t) { return k < n ? std::cos(angle(k, t, n)) : 0.0; });
    auto sines = matrix(rows, n, [&](int64_t k, int64_t t) { return k < n ? std::sin(angle(k, t, n)) : 0.0; });
    if (failed(cosines) || failed(sines))
      return failure();
    auto reC = applyAlongDim(imp, re, dims[i], *cosines);
    auto reS = applyAlongDim(imp, re, dims[i], *sines);
    if (failed(reC) || failed(reS))
      return failure();
    if (!im) {
      re = *reC;
      im = *reS;
      continue;
    }
    auto imC = applyAlongDim(imp, *im, dims[i], *cosines);
    auto imS = applyAlongDim(imp, *im, dims[i], *sines);
    if (failed(imC) || failed(imS))
      return failure();
    auto nextRe = imp.create<mlir::cleave::SubOp>(*reC, *imS);
    auto nextIm = imp.create<mlir::cleave::AddOp>(*reS, *imC);
    if (failed(nextRe) || failed(nextIm))
      return failure();
    re = *nextRe;
    im = *nextIm;
  }
  int64_t last = dims.back(), n = points.back(), used = n / 2 + 1;
  int64_t rows = typeOf(re).getDimSize(last);
  auto weight = [&](int64_t k) { return k >= used ? 0.0 : (k == 0 || 2 * k == n) ? 1.0 : 2.0; };
  auto cosines = matrix(rows, n, [&](int64_t k, int64_t t) { return weight(k) * std::cos(angle(k, t, n)); });
  if (failed(cosines))
    return failure();
  auto out = applyAlongDim(imp, re, last, *cosines);
  if (failed(out))
    return failure();
  if (im) {
    auto sines = matrix(rows, n, [&](int64_t k, int64_t t) { return weight(k) * std::sin(angle(k, t, n)); });
    if (failed(sines))
      return failure();
    auto imS = applyAlongDim(imp, *im, last, *sines);
    if (failed(imS))
      return failure();
    out = imp.create<mlir::cleave::SubOp>(*out, *imS);
    if (failed(out))
      return failure();
  }
  double total = 1;
  for (int64_t p : points)
    total *= static_cast<double>(p);
  auto scale = fftScale(imp, in[*node->schema().argumentIndexWithName("norm")], total,
                        /*inverse=*/!hermitianForward);
  if (failed(scale))
    return failure();
  if (*scale == 1.0)
    return one(*out);
  return one(imp.create<mlir::cleave::MulOp>(*out, imp.splat(*scale, typeOf(*out).getElementType())));
}

/// fftshift / ifftshift: a roll by half of each dim (all dims by default).
Converter fftShift(bool inverse) {
  return [inverse](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto type = typeOf(*x);
    SmallVector<int64_t> dims;
    if (imp.isNone(in[1])) {
      dims = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    } else {
      auto given = dimListArg(imp, in[1], type.getRank());
      if (failed(given))
        return failure();
      dims = *given;
    }
    if (dims.empty())
      return one(*x);
    SmallVector<int64_t> shifts;
    for (int64_t d : dims)
      shifts.push_back(inverse ? -(type.getDimSize(d) / 2) : type.getDimSize(d) / 2);
    return one(imp.create<mlir::cleave::RollOp>(*x, imp.builder.getDenseI64ArrayAttr(shifts),
                                                imp.builder.getDenseI64ArrayAttr(dims)));
  };
}

/// block_diag(tensors): each tensor (0-d as 1x1, 1-D as one row) on the
/// diagonal of a zero matrix, in the promoted dtype.
Result blockDiag(Importer &imp, jit::Node *, Inputs in) {
  auto items = imp.list(in[0]);
  if (failed(items))
    return failure();
  auto values = imp.promote(*items);
  if (failed(values))
    return failure();
  std::vector<Value> blocks;
  int64_t width = 0, height = 0;
  for (Value v : *values) {
    int64_t rank = typeOf(v).getRank();
    if (rank > 2) {
      imp.error() << "block_diag takes tensors of at most 2 dims, got " << typeOf(v);
      return failure();
    }
    if (rank < 2)
      v = imp.reshape(v, {1, rank == 0 ? 1 : typeOf(v).getDimSize(0)});
    blocks.push_back(v);
    height += typeOf(v).getDimSize(0);
    width += typeOf(v).getDimSize(1);
  }
  Type et = blocks.empty() ? imp.builder.getF32Type() : typeOf(blocks[0]).getElementType();
  std::vector<Value> rows;
  int64_t left = 0;
  for (Value b : blocks) {
    int64_t r = typeOf(b).getDimSize(0), c = typeOf(b).getDimSize(1);
    std::vector<Value> parts;
    if (left > 0)
      parts.push_back(imp.splat(0, et, {r, left}));
    if (c > 0)
      parts.push_back(b);
    if (width - left - c > 0)
      parts.push_back(imp.splat(0, et, {r, width - left - c}));
    left += c;
    if (r == 0 || parts.empty())
      continue;
    if (parts.size() == 1) {
      rows.push_back(parts[0]);
      continue;
    }
    auto row = imp.create<mlir::cleave::ConcatOp>(parts, 1);
    if (failed(row))
      return failure();
    rows.push_back(*row);
  }
  if (rows.empty() || width == 0)
    return one(imp.splat(0, et, {height, width}));
  if (rows.size() == 1)
    return one(rows[0]);
  return one(imp.create<mlir::cleave::ConcatOp>(rows, 0));
}

/// Rows of x picked by constant flat positions, reshaped to `shape`.
FailureOr<Value> pickConstant(Importer &imp, Value x, const std::vector<int64_t> &positions,
                              ArrayRef<int64_t> shape) {
  auto type = typeOf(x);
  if (positions.empty())
    return imp.splat(0, type.getElementType(), shape);
  auto index = imp.constantTensor(at::tensor(positions, at::TensorOptions().dtype(at::kLong)));
  if (failed(index))
    return failure();
  Value flat = imp.reshape(x, {type.getNumElements()});
  auto picked = imp.create<mlir::cleave::TakeOp>(
      type.clone({static_cast<int64_t>(positions.size())}), flat, *index);
  if (failed(picked))
    return failure();
  return imp.reshape(*picked, shape);
}

/// combinations(x, r, with_replacement): the r-tuples of x's elements in
/// lexicographic order of positions, as itertools yields them.
Result combinations(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto r = imp.integer(in[1]);
  auto replace = imp.boolean(in[2]);
  if (failed(x) || failed(r) || failed(replace))
    return failure();
  if (typeOf(*x).getRank() != 1) {
    imp.error() << "combinations takes a 1-D tensor, got " << typeOf(*x);
    return failure();
  }
  if (*r < 0) {
    imp.error() << "r must be non-negative, got " << *r;
    return failure();
  }
  int64_t n = typeOf(*x).getDimSize(0);
  if (*r == 0)
    return one(imp.splat(0, typeOf(*x).getElementType(), {0}));
  std::vector<int64_t> positions, tuple(*r, 0);
  std::function<void(int64_t, int64_t)> walk = [&](int64_t slot, int64_t from) {
    if (slot == *r) {
      positions.insert(positions.end(), tuple.begin(), tuple.end());
      return;
    }
    for (int64_t i = from; i < n; ++i) {
      tuple[slot] = i;
      walk(slot + 1, *replace ? i : i + 1);
    }
  };
  walk(0, 0);
  int64_t count = static_cast<int64_t>(positions.size()) / *r;
  return one(pickConstant(imp, *x, positions, {count, *r}));
}

/// cartesian_prod(tensors): every combination of one element of each, rows
/// in the order of nested loops (a single tensor is returned as is).
Result cartesianProd(Importer &imp, jit::Node *node, Inputs in) {
  auto items = imp.list(in[0]);
  if (failed(items))
    return failure();
  auto values = imp.promote(*items);
  if (failed(values))
    return failure();
  SmallVector<int64_t> sizes;
  for (Value v : *values) {
    if (typeOf(v).getRank() != 1) {
      imp.error() << "cartesian_prod takes 1-D tensors, got " << typeOf(v);
      return failure();
    }
    sizes.push_back(typeOf(v).getDimSize(0));
  }
  if (values->size() == 1)
    return one((*values)[0]);
  int64_t total = 1;
  for (int64_t s : sizes)
    total *= s;
  std::vector<Value> columns;
  for (size_t i = 0; i < values->size(); ++i) {
    SmallVector<int64_t> shape(sizes.size(), 1);
    shape[i] = sizes[i];
    auto grid = broadcastTo(imp, imp.reshape((*values)[i], shape), sizes);
    if (failed(grid))
      return failure();
    columns.push_back(imp.reshape(grid->front().tensor, {total, 1}));
  }
  return one(imp.create<mlir::cleave::ConcatOp>(columns, 1));
}

/// The p-norm distances between the rows of x1 [..., P, M] and x2 [..., R, M].
FailureOr<Value> pairwiseDistances(Importer &imp, Value x1, Value x2, double p) {
  auto t1 = typeOf(x1), t2 = typeOf(x2);
  if (t1.getRank() < 2 || t2.getRank() < 2 || t1.getShape().back() != t2.getShape().back()) {
    imp.error() << "needs tensors [..., P, M] and [..., R, M], got " << t1 << " and " << t2;
    return failure();
  }
  SmallVector<int64_t> s1(t1.getShape()), s2(t2.getShape());
  s1.insert(s1.end() - 1, 1); // [..., P, 1, M]
  s2.insert(s2.end() - 2, 1); // [..., 1, R, M]
  auto diff = imp.create<mlir::cleave::SubOp>(imp.reshape(x1, s1), imp.reshape(x2, s2));
  if (failed(diff))
    return failure();
  int64_t rank = typeOf(*diff).getRank();
  return imp.create<mlir::cleave::NormOp>(*diff, imp.builder.getDenseI64ArrayAttr({rank - 1}),
                                          imp.builder.getBoolAttr(false),
                                          imp.builder.getF64FloatAttr(p));
}

Result cdist(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0], in[1]}, /*integerToFloat=*/true);
  auto p = imp.real(in[2]);
  if (failed(values) || failed(p))
    return failure();
  if (*p < 0) {
    imp.error() << "cdist only supports non-negative p, got " << *p;
    return failure();
  }
  return one(pairwiseDistances(imp, (*values)[0], (*values)[1], *p));
}

/// pdist(x, p): the distances of rows i < j of x [N, M], in row-major order.
Result pdist(Importer &imp, jit::Node *, Inputs in) {
  auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
  auto p = imp.real(in[1]);
  if (failed(values) || failed(p))
    return failure();
  Value x = (*values)[0];
  if (typeOf(x).getRank() != 2) {
    imp.error() << "pdist takes a 2-D tensor, got " << typeOf(x);
    return failure();
  }
  if (*p < 0) {
    imp.error() << "pdist only supports non-negative p, got " << *p;
    return failure();
  }
  int64_t n = typeOf(x).getDimSize(0);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j)
      positions.push_back(i * n + j);
  if (positions.empty())
    return one(imp.splat(0, typeOf(x).getElementType(), {0}));
  auto all = pairwiseDistances(imp, x, x, *p);
  if (failed(all))
    return failure();
  return one(pickConstant(imp, *all, positions, {static_cast<int64_t>(positions.size())}));
}

/// gradient(f, spacing, dim, edge_order): central differences inside, one-
/// or two-sided differences of order `edge_order` at the ends, over sample
/// coordinates (uniform spacing as evenly spaced ones), as torch.gradient.
Result gradient(Importer &imp, jit::Node *node, Inputs in) {
  auto f = imp.promote({in[0]}, /*integerToFloat=*/true);
  if (failed(f))
    return failure();
  Value x = (*f)[0];
  auto type = typeOf(x);
  int64_t rank = type.getRank();
  Type et = type.getElementType();
  auto arg = [&](const char *name) -> std::optional<Val> {
    auto i = node->schema().argumentIndexWithName(name);
    if (!i || imp.isNone(in[*i]))
      return std::nullopt;
    return in[*i];
  };
  SmallVector<int64_t> dims;
  if (auto d = arg("dim")) {
    if (d->kind == Val::Kind::List || (d->isConstant() && d->constant.isIntList())) {
      auto given = dimListArg(imp, *d, rank);
      if (failed(given))
        return failure();
      dims = *given;
    } else {
      auto given = dimArg(imp, *d, rank);
      if (failed(given))
        return failure();
      dims = {*given};
    }
  } else {
    dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  auto order = imp.integer(*arg("edge_order"));
  if (failed(order))
    return failure();
  if (*order != 1 && *order != 2) {
    imp.error() << "edge_order must be 1 or 2, got " << *order;
    return failure();
  }
  // One coordinate tensor per dim: from spacing scalars or given tensors.
  std::vector<std::optional<Val>> spacing(dims.size());
  if (auto s = arg("spacing")) {
    if (s->kind == Val::Kind::List || (s->isConstant() && s->constant.isList())) {
      auto entries = imp.list(*s);
      if (failed(entries))
        return failure();
      if (entries->size() != dims.size()) {
        imp.error() << "spacing has " << entries->size() << " entries for " << dims.size() << " dims";
        return failure();
      }
      for (size_t i = 0; i < dims.size(); ++i)
        spacing[i] = (*entries)[i];
    } else {
      for (auto &entry : spacing)
        entry = *s;
    }
  }
  std::vector<Val> results;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t dim = dims[i], n = type.getDimSize(dim);
    if (n < *order + 1) {
      imp.error() << "each dim needs at least edge_order + 1 = " << *order + 1
                  << " samples, dim " << dim << " has " << n;
      return failure();
    }
    Value coords;
    if (spacing[i] && (spacing[i]->isTensor() ||
                       (spacing[i]->isConstant() && spacing[i]->constant.isTensor()))) {
      auto given = imp.promote({*spacing[i]}, /*integerToFloat=*/true);
      if (failed(given))
        return failure();
      coords = imp.cast((*given)[0], et);
      if (typeOf(coords).getRank() != 1 || typeOf(coords).getDimSize(0) != n) {
        imp.error() << "the coordinates of dim " << dim << " must be 1-D of size " << n
                    << ", got " << typeOf(coords);
        return failure();
      }
    } else {
      double h = 1;
      if (spacing[i]) {
        auto given = imp.real(*spacing[i]);
        if (failed(given))
          return failure();
        h = *given;
      }
      auto c = imp.constantTensor(at::arange(n, at::kDouble).mul(h).to(at::kFloat));
      if (failed(c))
        return failure();
      coords = imp.cast(*c, et);
    }
    // Coordinates broadcast along `dim`.
    SmallVector<int64_t> cshape(rank, 1);
    auto along = [&](Value v) {
      cshape[dim] = typeOf(v).getDimSize(0);
      return imp.reshape(v, cshape);
    };
    auto sl = [&](Value v, int64_t d, int64_t a, int64_t b) { return slice(imp, v, d, a, b); };
    auto dc = sl(coords, 0, 1, n);
    auto dp = sl(coords, 0, 0, n - 1);
    if (failed(dc) || failed(dp))
      return failure();
    auto h = imp.create<mlir::cleave::SubOp>(*dc, *dp); // h[j] = c[j+1] - c[j]
    if (failed(h))
      return failure();
    auto op = [&](auto tag, Value a, Value b) -> FailureOr<Value> {
      using OpTy = decltype(tag);
      return imp.create<OpTy>(a, b);
    };
    using Sub = mlir::cleave::SubOp;
    using Add = mlir::cleave::AddOp;
    using Mul = mlir::cleave::MulOp;
    using Div = mlir::cleave::DivOp;
    bool ok = true;
    auto V = [&](FailureOr<Value> v) {
      if (failed(v)) {
        ok = false;
        return Value();
      }
      return *v;
    };
    std::vector<Value> pieces;
    // Left edge.
    {
      Value f0 = V(sl(x, dim, 0, 1)), f1 = V(sl(x, dim, 1, 2));
      Value h1 = along(V(sl(*h, 0, 0, 1)));
      if (!ok)
        return failure();
      if (*order == 1) {
        pieces.push_back(V(op(Div(), V(op(Sub(), f1, f0)), h1)));
      } else {
        Value f2 = V(sl(x, dim, 2, 3)), h2 = along(V(sl(*h, 0, 1, 2)));
        if (!ok)
          return failure();
        Value s = V(op(Add(), h1, h2));
        // -(2h1 + h2)/(h1 s) f0 + s/(h1 h2) f1 - h1/(h2 s) f2
        Value a = V(op(Div(), V(op(Add(), V(op(Add(), h1, h1)), h2)), V(op(Mul(), h1, s))));
        Value b = V(op(Div(), s, V(op(Mul(), h1, h2))));
        Value c = V(op(Div(), h1, V(op(Mul(), h2, s))));
        Value t = V(op(Sub(), V(op(Mul(), b, f1)), V(op(Mul(), a, f0))));
        pieces.push_back(V(op(Sub(), t, V(op(Mul(), c, f2)))));
      }
    }
    // Inside: (hl^2 f[i+1] - hr^2 f[i-1] + (hr^2 - hl^2) f[i]) / (hl hr (hl + hr)).
    if (n > 2) {
      Value fl = V(sl(x, dim, 0, n - 2)), fm = V(sl(x, dim, 1, n - 1)), fr = V(sl(x, dim, 2, n));
      Value hl = along(V(sl(*h, 0, 0, n - 2))), hr = along(V(sl(*h, 0, 1, n - 1)));
      if (!ok)
        return failure();
      Value hl2 = V(op(Mul(), hl, hl)), hr2 = V(op(Mul(), hr, hr));
      Value num = V(op(Sub(), V(op(Mul(), hl2, fr)), V(op(Mul(), hr2, fl))));
      num = V(op(Add(), num, V(op(Mul(), V(op(Sub(), hr2, hl2)), fm))));
      Value den = V(op(Mul(), V(op(Mul(), hl, hr)), V(op(Add(), hl, hr))));
      pieces.push_back(V(op(Div(), num, den)));
    }
    // Right edge.
    {
      Value fa = V(sl(x, dim, n - 2, n - 1)), fb = V(sl(x, dim, n - 1, n));
      Value h2 = along(V(sl(*h, 0, n - 2, n - 1)));
      if (!ok)
        return failure();
      if (*order == 1) {
        pieces.push_back(V(op(Div(), V(op(Sub(), fb, fa)), h2)));
      } else {
        Value fz = V(sl(x, dim, n - 3, n - 2)), h1 = along(V(sl(*h, 0, n - 3, n - 2)));
        if (!ok)
          return failure();
        Value s = V(op(Add(), h1, h2));
        // h2/(h1 s) f[n-3] - s/(h1 h2) f[n-2] + (2h2 + h1)/(h2 s) f[n-1]
        Value a = V(op(Div(), h2, V(op(Mul(), h1, s))));
        Value b = V(op(Div(), s, V(op(Mul(), h1, h2))));
        Value c = V(op(Div(), V(op(Add(), V(op(Add(), h2, h2)), h1)), V(op(Mul(), h2, s))));
        Value t = V(op(Sub(), V(op(Mul(), a, fz)), V(op(Mul(), b, fa))));
        pieces.push_back(V(op(Add(), t, V(op(Mul(), c, fb)))));
      }
    }
    if (!ok)
      return failure();
    auto joined = imp.create<mlir::cleave::ConcatOp>(pieces, dim);
    if (failed(joined))
      return failure();
    results.push_back(Val::ofTensor(*joined));
  }
  return std::vector<Val>{Val::ofList(std::move(results))};
}

/// softmax(q k^T * scale + mask) v (scale 1/sqrt(E) unless given) and the
/// weights, as PyTorch's math path; dropout_p > 0 draws random masks.
Result attentionMath(Importer &imp, Inputs in, const Val &maskArg, const Val &dropoutArg,
                     const Val &causalArg, std::optional<double> scale) {
  auto values = imp.promote({in[0], in[1], in[2]}, /*integerToFloat=*/true);
  auto dropout = imp.real(dropoutArg);
  auto causal = imp.boolean(causalArg);
  if (failed(values) || failed(dropout) || failed(causal))
    return failure();
  if (*dropout != 0) {
    imp.error() << "dropout_p = " << *dropout
                << " draws random attention masks; only dropout_p = 0 is supported";
    return failure();
  }
  Value q = (*values)[0], k = (*values)[1], v = (*values)[2];
  auto qt = typeOf(q);
  int64_t rank = qt.getRank();
  if (rank < 2 || typeOf(k).getRank() != rank || typeOf(v).getRank() != rank) {
    imp.error() << "q, k and v need one rank of at least 2, got " << qt << ", " << typeOf(k)
                << " and " << typeOf(v);
    return failure();
  }
  Type et = qt.getElementType();
  int64_t e = qt.getShape().back(), l = qt.getDimSize(rank - 2), s = typeOf(k).getDimSize(rank - 2);
  auto scaled =
      imp.create<mlir::cleave::MulOp>(q, imp.splat(scale ? *scale : 1.0 / std::sqrt(double(e)), et));
  if (failed(scaled))
    return failure();
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 1], swap[rank - 2]);
  auto kt = permuteTo(imp, k, swap);
  if (failed(kt))
    return failure();
  auto scores = imp.create<mlir::cleave::MatmulOp>(*scaled, kt->front().tensor);
  if (failed(scores))
    return failure();
  Value negInf = imp.splat(-INFINITY, et);
  if (!imp.isNone(maskArg)) {
    auto mask = imp.tensor(maskArg);
    if (failed(mask))
      return failure();
    if (typeOf(*mask).getElementType().isInteger(1))
      scores = imp.create<mlir::cleave::WhereOp>(*mask, *scores, negInf);
    else
      scores = imp.create<mlir::cleave::AddOp>(*scores, imp.cast(*mask, et));
    if (failed(scores))
      return failure();
  }
  if (*causal) {
    auto keep = imp.constantTensor(at::ones({l, s}, at::kBool).tril());
    if (failed(keep))
      return failure();
    scores = imp.create<mlir::cleave::WhereOp>(*keep, *scores, negInf);
    if (failed(scores))
      return failure();
  }
  auto weights = imp.create<mlir::cleave::SoftmaxOp>(*scores, rank - 1);
  if (failed(weights))
    return failure();
  auto out = imp.create<mlir::cleave::MatmulOp>(*weights, v);
  if (failed(out))
    return failure();
  return std::vector<Val>{Val::ofTensor(*out), Val::ofTensor(*weights)};
}

/// PyTorch 1.13's _scaled_dot_product_attention(q, k, v, attn_mask,
/// dropout_p, need_attn_weights, is_causal): the output and the weights.
Result privateScaledDotProductAttention(Importer &imp, jit::Node *, Inputs in) {
  return attentionMath(imp, in, in[3], in[4], in[6], std::nullopt);
}

/// PyTorch 2's scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
/// is_causal, *, scale, enable_gqa): the output (TorchImporter.cpp declares
/// the op to LibTorch 1.13 so that files from PyTorch 2 load).
Result scaledDotProductAttention(Importer &imp, jit::Node *node, Inputs in) {
  std::optional<double> scale;
  if (in.size() > 6 && !imp.isNone(in[6])) {
    auto given = imp.real(in[6]);
    if (failed(given))
      return failure();
    scale = *given;
  }
  if (in.size() > 7) {
    auto gqa = imp.boolean(in[7]);
    if (failed(gqa))
      return failure();
    if (*gqa) {
      imp.error() << "enable_gqa = True (grouped-query attention by broadcasting heads) is not "
                     "supported; repeat k and v over the heads in the model";
      return failure();
    }
  }
  auto both = attentionMath(imp, in, in[3], in[4], in[5], scale);
  if (failed(both))
    return failure();
  return std::vector<Val>{both->front()};
}

/// The weights of PyTorch's fused inference attention: the packed in
/// projection [3E, E] (q, k, v rows) with its bias, and the out projection.
struct FusedAttentionWeights {
  Value qkvWeight, qkvBias, projWeight, projBias;
};

/// nn.MultiheadAttention's fast path (batch-first [B, L, E] inputs), as its
/// math: the three projections, heads [B, H, L, D], softmax(q k^T / sqrt(D)
/// + mask) v, the out projection. A bool mask is True where attention is
/// masked: mask_type 0 an attention mask [L, S], 1 a key padding mask
/// [B, S]; a float mask is added. Returns the output and the weights
/// ([B, L, S] averaged over heads, [B, H, L, S], or empty without
/// need_weights).
FailureOr<std::pair<Value, Value>>
fusedAttention(Importer &imp, Value query, Value key, Value value, int64_t embed, int64_t heads,
               const FusedAttentionWeights &w, const Val &maskArg,
               std::optional<int64_t> maskType, bool needWeights, bool average) {
  auto qt = typeOf(query);
  if (qt.getRank() != 3 || typeOf(key).getRank() != 3 || typeOf(value).getRank() != 3 ||
      qt.getDimSize(2) != embed || heads < 1 || embed % heads ||
      typeOf(w.qkvWeight).getShape() != ArrayRef<int64_t>{3 * embed, embed}) {
    imp.error() << "fused attention needs batch-first [B, L, " << embed << "] inputs, " << heads
                << " heads dividing " << embed << " and a [" << 3 * embed << ", " << embed
                << "] in-projection, got " << qt << " and " << typeOf(w.qkvWeight);
    return failure();
  }
  int64_t b = qt.getDimSize(0), l = qt.getDimSize(1), d = embed / heads;
  auto project = [&](Value x, int64_t part) -> FailureOr<Value> {
    auto weight = slice(imp, w.qkvWeight, 0, part * embed, (part + 1) * embed);
    if (failed(weight))
      return failure();
    Value bias;
    if (w.qkvBias) {
      auto piece = slice(imp, w.qkvBias, 0, part * embed, (part + 1) * embed);
      if (failed(piece))
        return failure();
      bias = *piece;
    }
    auto y = imp.create<mlir::cleave::LinearOp>(x, *weight, bias);
    if (failed(y))
      return failure();
    int64_t n = typeOf(*y).getDimSize(1);
    auto split = permuteTo(imp, imp.reshape(*y, {typeOf(*y).getDimSize(0), n, heads, d}),
                           {0, 2, 1, 3});
    if (failed(split))
      return failure();
    return split->front().tensor;
  };
  auto q = project(query, 0), k = project(key, 1), v = project(value, 2);
  if (failed(q) || failed(k) || failed(v))
    return failure();
  Val mask = Val::ofConstant(c10::IValue());
  if (!imp.isNone(maskArg)) {
    auto m = imp.tensor(maskArg);
    if (failed(m))
      return failure();
    Value given = *m;
    if (maskType && *maskType == 1) { // key padding [B, S] -> [B, 1, 1, S]
      auto mt = typeOf(given);
      if (mt.getRank() != 2) {
        imp.error() << "a key padding mask is [B, S], got " << mt;
        return failure();
      }
      given = imp.reshape(given, {mt.getDimSize(0), 1, 1, mt.getDimSize(1)});
    }
    if (typeOf(given).getElementType().isInteger(1)) {
      auto keep = imp.create<mlir::cleave::NotOp>(given); // True = masked in this op
      if (failed(keep))
        return failure();
      given = *keep;
    }
    mask = Val::ofTensor(given);
  }
  std::vector<Val> qkv{Val::ofTensor(*q), Val::ofTensor(*k), Val::ofTensor(*v)};
  auto attended = attentionMath(imp, qkv, mask, Val::ofConstant(c10::IValue(0.0)),
                                Val::ofConstant(c10::IValue(false)), std::nullopt);
  if (failed(attended))
    return failure();
  auto merged = permuteTo(imp, (*attended)[0].tensor, {0, 2, 1, 3});
  if (failed(merged))
    return failure();
  auto out = imp.create<mlir::cleave::LinearOp>(imp.reshape(merged->front().tensor, {b, l, embed}),
                                                w.projWeight, w.projBias);
  if (failed(out))
    return failure();
  Value weights = (*attended)[1].tensor;
  if (!needWeights) {
    weights = imp.splat(0, qt.getElementType(), {0});
  } else if (average) {
    auto mean = imp.create<mlir::cleave::ReduceMeanOp>(
        weights, imp.builder.getDenseI64ArrayAttr({1}), imp.builder.getBoolAttr(false));
    if (failed(mean))
      return failure();
    weights = *mean;
  }
  return std::make_pair(*out, weights);
}

/// _native_multi_head_attention(query, key, value, embed_dim, num_head,
/// qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
/// average_attn_weights, mask_type): nn.MultiheadAttention traced under
/// no_grad in eval mode.
Result nativeMultiHeadAttention(Importer &imp, jit::Node *, Inputs in) {
  auto q = imp.tensor(in[0]), k = imp.tensor(in[1]), v = imp.tensor(in[2]);
  auto embed = imp.integer(in[3]), heads = imp.integer(in[4]);
  auto qkvWeight = imp.tensor(in[5]), projWeight = imp.tensor(in[7]);
  auto qkvBias = optionalTensor(imp, in[6]), projBias = optionalTensor(imp, in[8]);
  auto need = imp.boolean(in[10]), average = imp.boolean(in[11]);
  auto maskType = imp.optionalInteger(in[12]);
  if (failed(q) || failed(k) || failed(v) || failed(embed) || failed(heads) ||
      failed(qkvWeight) || failed(projWeight) || failed(qkvBias) || failed(projBias) ||
      failed(need) || failed(average) || failed(maskType))
    return failure();
  auto both = fusedAttention(imp, *q, *k, *v, *embed, *heads,
                             {*qkvWeight, *qkvBias, *projWeight, *projBias}, in[9], *maskType,
                             *need, *average);
  if (failed(both))
    return failure();
  return std::vector<Val>{Val::ofTensor(both->first), Val::ofTensor(both->second)};
}

/// _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight,
/// qkv_bias, proj_weight, proj_bias, use_gelu, norm_first, eps, norm1 w/b,
/// norm2 w/b, ffn1 w/b, ffn2 w/b, mask, mask_type): nn.TransformerEncoderLayer
/// traced under no_grad in eval mode, as its math (dropout is off in eval).
Result transformerEncoderLayer(Importer &imp, jit::Node *, Inputs in) {
  auto src = imp.tensor(in[0]);
  auto embed = imp.integer(in[1]), heads = imp.integer(in[2]);
  auto qkvWeight = imp.tensor(in[3]), projWeight = imp.tensor(in[5]);
  auto qkvBias = optionalTensor(imp, in[4]), projBias = optionalTensor(imp, in[6]);
  auto useGelu = imp.boolean(in[7]), normFirst = imp.boolean(in[8]);
  auto eps = imp.real(in[9]);
  if (failed(src) || failed(embed) || failed(heads) || failed(qkvWeight) ||
      failed(projWeight) || failed(qkvBias) || failed(projBias) || failed(useGelu) ||
      failed(normFirst) || failed(eps))
    return failure();
  std::vector<Value> params;
  for (int i = 10; i < 18; ++i) {
    auto t = optionalTensor(imp, in[i]);
    if (failed(t))
      return failure();
    params.push_back(*t);
  }
  auto maskType = imp.optionalInteger(in[19]);
  if (failed(maskType))
    return failure();
  auto &b = imp.builder;
  auto norm = [&](Value x, int which) {
    return imp.create<mlir::cleave::LayerNormOp>(x, params[2 * which], params[2 * which + 1],
                                                 b.getDenseI64ArrayAttr({*embed}),
                                                 b.getF64FloatAttr(*eps));
  };
  auto attend = [&](Value x) -> FailureOr<Value> {
    auto both = fusedAttention(imp, x, x, x, *embed, *heads,
                               {*qkvWeight, *qkvBias, *projWeight, *projBias}, in[18],
                               *maskType, false, false);
    if (failed(both))
      return failure();
    return both->first;
  };
  auto feedForward = [&](Value x) -> FailureOr<Value> {
    auto hidden = imp.create<mlir::cleave::LinearOp>(x, params[4], params[5]);
    if (failed(hidden))
      return failure();
    FailureOr<Value> act =
        *useGelu ? imp.create<mlir::cleave::GeluOp>(*hidden, mlir::cleave::GeluApproximation::none)
                 : imp.create<mlir::cleave::ReluOp>(*hidden);
    if (failed(act))
      return failure();
    return imp.create<mlir::cleave::LinearOp>(*act, params[6], params[7]);
  };
  Value x = *src;
  FailureOr<Value> y;
  if (*normFirst) {
    auto n1 = norm(x, 0);
    auto a = failed(n1) ? FailureOr<Value>(failure()) : attend(*n1);
    auto r1 = failed(a) ? FailureOr<Value>(failure()) : imp.create<mlir::cleave::AddOp>(x, *a);
    auto n2 = failed(r1) ? FailureOr<Value>(failure()) : norm(*r1, 1);
    auto f = failed(n2) ? FailureOr<Value>(failure()) : feedForward(*n2);
    y = failed(f) ? FailureOr<Value>(failure()) : imp.create<mlir::cleave::AddOp>(*r1, *f);
  } else {
    auto a = attend(x);
    auto r1 = failed(a) ? FailureOr<Value>(failure()) : imp.create<mlir::cleave::AddOp>(x, *a);
    auto n1 = failed(r1) ? FailureOr<Value>(failure()) : norm(*r1, 0);
    auto f = failed(n1) ? FailureOr<Value>(failure()) : feedForward(*n1);
    auto r2 = failed(f) ? FailureOr<Value>(failure()) : imp.create<mlir::cleave::AddOp>(*n1, *f);
    y = failed(r2) ? FailureOr<Value>(failure()) : norm(*r2, 1);
  }
  return one(y);
}

void addConstructionConverters(llvm::StringMap<Converter> &r) {
  r["aten::fft_irfft"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, false, std::nullopt);
  };
  r["aten::fft_irfft2"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, false, SmallVector<int64_t>{-2, -1});
  };
  r["aten::fft_irfftn"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, false, std::nullopt);
  };
  r["aten::fft_hfft"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, true, std::nullopt);
  };
  r["aten::fft_hfft2"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, true, SmallVector<int64_t>{-2, -1});
  };
  r["aten::fft_hfftn"] = [](Importer &imp, jit::Node *node, Inputs in) {
    return realOutputFft(imp, node, in, true, std::nullopt);
  };
  r["aten::fft_fftshift"] = fftShift(false);
  r["aten::fft_ifftshift"] = fftShift(true);
  r["aten::block_diag"] = blockDiag;
  r["aten::combinations"] = combinations;
  r["aten::cartesian_prod"] = cartesianProd;
  r["aten::cdist"] = cdist;
  r["aten::_cdist_forward"] = cdist;
  r["aten::pdist"] = pdist;
  r["aten::_pdist_forward"] = pdist;
  r["aten::gradient"] = gradient;
  r["aten::_scaled_dot_product_attention"] = privateScaledDotProductAttention;
  r["aten::scaled_dot_product_attention"] = scaledDotProductAttention;
  r["aten::_native_multi_head_attention"] = nativeMultiHeadAttention;
  r["aten::_transformer_encoder_layer_fwd"] = transformerEncoderLayer;
}

void addCompositeConverters(llvm::StringMap<Converter> &r) {
  namespace c = mlir::cleave;
  r["aten::embedding_renorm"] = embeddingRenorm; // embedding_renorm_, rebound in place
  r["aten::embedding_bag"] = embeddingBag;
  // Counting, one-hot and reductions into positions.
  r["aten::one_hot"] = oneHot;
  r["aten::repeat_interleave"] = repeatInterleave;
  r["aten::put"] = put;
  r["aten::index_reduce"] = indexReduce;
  r["aten::bucketize"] = bucketize;
  r["aten::searchsorted"] = searchsorted;
  r["aten::histc"] = histc;
  r["aten::native_layer_norm"] = nativeLayerNorm;
  r["aten::native_batch_norm"] = nativeBatchNorm;
  // Shapes and strides.
  r["aten::numpy_T"] = numpyT;
  r["aten::matrix_H"] = matrixH;
  r["aten::sum_to_size"] = sumToSize;
  r["aten::zero"] = zero; // zero_, rebound in place
  // Undefined values (empty, new_empty...): zeros.
  r["aten::empty_like"] = fillLike(0.0);
  r["aten::new_empty"] = fillNew(0.0);
  r["aten::new_empty_strided"] = fillNew(0.0);
  r["aten::tensor_split"] = tensorSplit(std::nullopt);
  r["aten::hsplit"] = tensorSplit(1);
  r["aten::vsplit"] = tensorSplit(0);
  r["aten::dsplit"] = tensorSplit(2);
  r["aten::select_scatter"] = selectScatter;
  r["aten::slice_scatter"] = sliceScatter;
  r["aten::diagonal_scatter"] = diagonalScatter;
  r["aten::diag_embed"] = diagEmbed;
  r["aten::diagflat"] = diagflat;
  r["aten::as_strided"] = asStrided;
  r["aten::as_strided_scatter"] = asStridedScatter;
  r["aten::unfold"] = unfold;
  r["aten::im2col"] = im2col;
  r["aten::gather"] = gather;
  r["aten::scatter"] = scatter(std::nullopt);
  r["aten::scatter_add"] = scatter(c::ScatterReduce::sum);
  r["aten::scatter_reduce"] = scatter(std::nullopt);
  r["aten::index_add"] = indexAlongDimUpdate(c::ScatterReduce::sum);
  r["aten::index_copy"] = indexAlongDimUpdate(c::ScatterReduce::none);
  r["aten::index_fill"] = indexFill;
  r["aten::index_select"] = indexSelect;
  r["aten::take"] = take;
  r["aten::take_along_dim"] = takeAlongDim;
  r["aten::index"] = advancedIndex;
  r["aten::index_put"] = indexPut;
  r["aten::masked_select"] = maskedSelect;
  r["aten::sort"] = sortConverter(true, true);
  r["aten::argsort"] = sortConverter(false, true);
  r["aten::msort"] = sortConverter(true, false, 0);
  r["aten::topk"] = topk;
  r["aten::kthvalue"] = kthvalue;
  r["aten::median"] = selection<c::MedianOp>("median", false);
  r["aten::nanmedian"] = selection<c::MedianOp>("nanmedian", true);
  r["aten::mode"] = selection<c::ModeOp>("mode", false);
  r["aten::quantile"] = quantile(false);
  r["aten::nanquantile"] = quantile(true);
  r["aten::cummax"] = indexScan<c::CummaxOp>("take the running maximum of");
  r["aten::cummin"] = indexScan<c::CumminOp>("take the running minimum of");
  r["aten::logcumsumexp"] = logcumsumexp;
  for (const char *kind : {"aten::unique", "aten::_unique", "aten::_unique2", "aten::unique_dim",
                           "aten::unique_dim_consecutive"})
    r[kind] = valueDependentShape("unique returns as many elements as the input has distinct "
                                  "values");
  r["aten::unique_consecutive"] = valueDependentShape(
      "unique_consecutive returns as many elements as the input has runs of equal values");
  r["aten::nonzero"] = valueDependentShape(
      "nonzero returns one row per non-zero element of the input");
  r["aten::nonzero_numpy"] = valueDependentShape(
      "nonzero returns one index per non-zero element of the input");
  r["aten::argwhere"] = valueDependentShape(
      "argwhere returns one row per non-zero element of the input");
  r["aten::bincount"] = valueDependentShape(
      "bincount returns max(input) + 1 counts (or minlength)");
  r["aten::masked_scatter"] = maskedScatter;
  r["aten::flip"] = flip;
  r["aten::fliplr"] = flipFixed(1);
  r["aten::flipud"] = flipFixed(0);
  r["aten::roll"] = roll;
  r["aten::rot90"] = rot90;
  r["aten::square"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    Value input = *x; // a bool squares as pow(x, 2): to i64, as PyTorch
    if (typeOf(input).getElementType().isInteger(1))
      input = imp.cast(input, imp.builder.getI64Type());
    return one(imp.create<c::SquareOp>(input));
  };
  r["aten::exp2"] = floatMap<c::Exp2Op>();
  r["aten::special_exp2"] = floatMap<c::Exp2Op>();
  r["aten::log2"] = floatMap<c::Log2Op>();
  r["aten::log10"] = floatMap<c::Log10Op>();
  r["aten::erfc"] = floatMap<c::ErfcOp>();
  r["aten::special_erfc"] = floatMap<c::ErfcOp>();
  r["aten::sinc"] = floatMap<c::SincOp>();
  r["aten::special_sinc"] = floatMap<c::SincOp>();
  r["aten::rad2deg"] = floatMap<c::Rad2degOp>();
  r["aten::deg2rad"] = floatMap<c::Deg2radOp>();
  r["aten::hardsigmoid"] = floatMap<c::HardsigmoidOp>();
  r["aten::hardswish"] = floatMap<c::HardswishOp>();
  r["aten::logit"] = logit;
  r["aten::special_logit"] = logit;
  r["aten::leaky_relu"] = parameterizedMap<c::LeakyReluOp>(true, {{"negative_slope", 0.01}});
  r["aten::hardtanh"] = parameterizedMap<c::HardtanhOp>(false, {{"min_val", -1.0}, {"max_val", 1.0}});
  r["aten::relu6"] = relu6;
  r["aten::softshrink"] = parameterizedMap<c::SoftshrinkOp>(true, {{"lambd", 0.5}});
  r["aten::hardshrink"] = parameterizedMap<c::HardshrinkOp>(true, {{"lambd", 0.5}});
  r["aten::threshold"] = parameterizedMap<c::ThresholdOp>(false, {{"threshold", 0.0}, {"value", 0.0}});
  r["aten::nan_to_num"] = nanToNum;
  r["aten::frac"] = floatMap<c::FracOp>();
  r["aten::log_sigmoid"] = floatMap<c::LogSigmoidOp>();
  r["aten::mish"] = floatMap<c::MishOp>();
  // Special functions: core ops with kernels (runtime/SpecialMath.h), or
  // composites of them; integers promote to f32, as PyTorch.
  r["aten::lgamma"] = floatMap<c::LgammaOp>();
  r["aten::special_gammaln"] = floatMap<c::LgammaOp>();
  r["aten::erfinv"] = floatMap<c::ErfinvOp>();
  r["aten::special_erfinv"] = floatMap<c::ErfinvOp>();
  r["aten::i0"] = floatMap<c::I0Op>();
  r["aten::special_i0"] = floatMap<c::I0Op>();
  r["aten::special_modified_bessel_i0"] = floatMap<c::I0Op>();
  r["aten::special_i0e"] = floatMap<c::I0eOp>();
  r["aten::special_i1"] = floatMap<c::I1Op>();
  r["aten::special_modified_bessel_i1"] = floatMap<c::I1Op>();
  r["aten::special_i1e"] = floatMap<c::I1eOp>();
  r["aten::special_ndtri"] = floatMap<c::NdtriOp>();
  r["aten::special_erfcx"] = floatMap<c::ErfcxOp>();
  r["aten::special_bessel_j0"] = floatMap<c::BesselJ0Op>();
  r["aten::special_bessel_j1"] = floatMap<c::BesselJ1Op>();
  r["aten::special_bessel_y0"] = floatMap<c::BesselY0Op>();
  r["aten::special_bessel_y1"] = floatMap<c::BesselY1Op>();
  r["aten::special_modified_bessel_k0"] = floatMap<c::ModifiedBesselK0Op>();
  r["aten::special_modified_bessel_k1"] = floatMap<c::ModifiedBesselK1Op>();
  r["aten::special_scaled_modified_bessel_k0"] = floatMap<c::ScaledModifiedBesselK0Op>();
  r["aten::special_scaled_modified_bessel_k1"] = floatMap<c::ScaledModifiedBesselK1Op>();
  r["aten::special_airy_ai"] = floatMap<c::AiryAiOp>();
  r["aten::special_ndtr"] = floatMap<c::NdtrOp>();
  r["aten::special_log_ndtr"] = floatMap<c::LogNdtrOp>();
  r["aten::special_entr"] = floatMap<c::EntrOp>();
  r["aten::special_spherical_bessel_j0"] = floatMap<c::SphericalBesselJ0Op>();
  r["aten::special_zeta"] = broadcastComposite<c::ZetaOp, 2>(true);
  r["aten::igamma"] = broadcastComposite<c::IgammaOp, 2>(true);
  r["aten::special_gammainc"] = broadcastComposite<c::IgammaOp, 2>(true);
  r["aten::igammac"] = broadcastComposite<c::IgammacOp, 2>(true);
  r["aten::special_gammaincc"] = broadcastComposite<c::IgammacOp, 2>(true);
  // nextafter of floats only, gcd/lcm of integers only: PyTorch refuses the
  // other dtypes (no promotion).
  r["aten::nextafter"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto values = imp.promote({in[0], in[1]});
    if (failed(values))
      return failure();
    if (!llvm::isa<FloatType>(typeOf((*values)[0]).getElementType())) {
      imp.error() << "nextafter of " << typeOf((*values)[0]).getElementType()
                  << " tensors (PyTorch takes floats only)";
      return failure();
    }
    return one(imp.create<c::NextafterOp>((*values)[0], (*values)[1]));
  };
  for (const char *name : {"aten::gcd", "aten::lcm"})
    r[name] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
      auto values = imp.promote({in[0], in[1]});
      if (failed(values))
        return failure();
      Type et = typeOf((*values)[0]).getElementType();
      if (!et.isInteger(64) && !et.isInteger(32)) {
        imp.error() << node->kind().toQualString() << " of " << et
                    << " tensors (cleave takes i64 and i32; PyTorch integers only)";
        return failure();
      }
      if (node->kind().toQualString() == std::string("aten::gcd"))
        return one(imp.create<c::GcdOp>((*values)[0], (*values)[1]));
      return one(imp.create<c::LcmOp>((*values)[0], (*values)[1]));
    };
  // frexp(self) -> (mantissa, exponent): floats only, as PyTorch.
  r["aten::frexp"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    if (!llvm::isa<FloatType>(typeOf(*x).getElementType())) {
      imp.error() << "frexp of " << typeOf(*x).getElementType()
                  << " tensors (PyTorch takes floats only)";
      return failure();
    }
    auto op = imp.builder.create<c::FrexpOp>(imp.loc(), *x);
    return std::vector<Val>{Val::ofTensor(op.getMantissa()), Val::ofTensor(op.getExponent())};
  };
  // polygamma(n, self), digamma = polygamma(0, self).
  auto polygamma = [](Importer &imp, Val order, Val self) -> Result {
    auto n = imp.integer(order);
    auto values = imp.promote({self}, /*integerToFloat=*/true);
    if (failed(n) || failed(values))
      return failure();
    if (*n < 0) {
      imp.error() << "polygamma of a negative order " << *n << " (PyTorch refuses it too)";
      return failure();
    }
    Value x = (*values)[0];
    return one(imp.create<c::PolygammaOp>(x, imp.builder.getI64IntegerAttr(*n)));
  };
  for (const char *name : {"aten::digamma", "aten::special_digamma", "aten::special_psi"})
    r[name] = [polygamma](Importer &imp, jit::Node *, Inputs in) -> Result {
      return polygamma(imp, Val::ofConstant(c10::IValue(int64_t(0))), in[0]);
    };
  for (const char *name : {"aten::polygamma", "aten::special_polygamma"})
    r[name] = [polygamma](Importer &imp, jit::Node *, Inputs in) -> Result {
      return polygamma(imp, in[0], in[1]);
    };
  // mvlgamma(self, p): a sum of p lgammas (the domain check x > (p-1)/2
  // depends on the values; out of it, the lgammas of the terms).
  for (const char *name : {"aten::mvlgamma", "aten::special_multigammaln"})
    r[name] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
      auto p = imp.integer(in[1]);
      auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
      if (failed(p) || failed(values))
        return failure();
      if (*p < 1) {
        imp.error() << "mvlgamma with p = " << *p << " (p must be at least 1, as PyTorch)";
        return failure();
      }
      return one(imp.create<c::MvlgammaOp>((*values)[0], imp.builder.getI64IntegerAttr(*p)));
    };
  for (const char *family :
       {"chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
        "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p"}) {
    std::string kind = family; // chebyshev_polynomial_t -> chebyshev_t
    kind.erase(kind.find("polynomial_"), std::string("polynomial_").size());
    r[std::string("aten::special_") + family] = [kind](Importer &imp, jit::Node *,
                                                       Inputs in) -> Result {
      auto values = imp.promote({in[0], in[1]}, /*integerToFloat=*/true);
      if (failed(values))
        return failure();
      return one(imp.create<c::OrthogonalPolynomialOp>((*values)[0], (*values)[1],
                                                       imp.builder.getStringAttr(kind)));
    };
  }
  r["aten::softplus"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
    auto beta = realAttr(imp, node, in, "beta", 1.0);
    auto threshold = realAttr(imp, node, in, "threshold", 20.0);
    if (failed(values) || failed(beta) || failed(threshold))
      return failure();
    return one(imp.create<c::SoftplusOp>((*values)[0], *beta, *threshold));
  };
  r["aten::elu"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
    auto alpha = realAttr(imp, node, in, "alpha", 1.0);
    auto scale = realAttr(imp, node, in, "scale", 1.0);
    auto inputScale = realAttr(imp, node, in, "input_scale", 1.0);
    if (failed(values) || failed(alpha) || failed(scale) || failed(inputScale))
      return failure();
    return one(imp.create<c::EluOp>((*values)[0], *alpha, *scale, *inputScale));
  };
  r["aten::selu"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
    if (failed(values))
      return failure();
    auto f = [&](double v) { return imp.builder.getF64FloatAttr(v); };
    return one(imp.create<c::EluOp>((*values)[0], f(1.6732632423543772848170429916717),
                                    f(1.0507009873554804934193349852946), f(1.0)));
  };
  r["aten::celu"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
    auto alpha = realAttr(imp, node, in, "alpha", 1.0);
    if (failed(values) || failed(alpha))
      return failure();
    double a = alpha->getValueAsDouble();
    if (a == 0.0) {
      imp.error() << "celu with alpha 0 (PyTorch rejects it too)";
      return failure();
    }
    return one(imp.create<c::EluOp>((*values)[0], *alpha, imp.builder.getF64FloatAttr(1.0),
                                    imp.builder.getF64FloatAttr(1.0 / a)));
  };
  // rrelu outside training: leaky_relu with the mean slope.
  r["aten::rrelu"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto values = imp.promote({in[0]}, /*integerToFloat=*/true);
    auto lower = realAttr(imp, node, in, "lower", 1.0 / 8);
    auto upper = realAttr(imp, node, in, "upper", 1.0 / 3);
    if (failed(values) || failed(lower) || failed(upper))
      return failure();
    if (auto i = node->schema().argumentIndexWithName("training")) {
      auto training = imp.boolean(in[*i]);
      if (failed(training))
        return failure();
      if (*training) {
        imp.error() << "rrelu in training draws a random slope per element; not supported";
        return failure();
      }
    }
    double slope = (lower->getValueAsDouble() + upper->getValueAsDouble()) / 2;
    return one(imp.create<c::LeakyReluOp>((*values)[0], imp.builder.getF64FloatAttr(slope)));
  };
  r["aten::xlog1py"] = broadcastComposite<c::Xlog1pyOp, 2>(true);
  r["aten::special_xlog1py"] = broadcastComposite<c::Xlog1pyOp, 2>(true);
  r["aten::logaddexp"] = broadcastComposite<c::LogaddexpOp, 2>(true);
  r["aten::logaddexp2"] = broadcastComposite<c::Logaddexp2Op, 2>(true);
  r["aten::atan2"] = broadcastComposite<c::Atan2Op, 2>(true);
  r["aten::arctan2"] = broadcastComposite<c::Atan2Op, 2>(true);
  r["aten::fmod"] = broadcastComposite<c::FmodOp, 2>(false);
  r["aten::remainder"] = broadcastComposite<c::RemainderOp, 2>(false);
  r["aten::floor_divide"] = broadcastComposite<c::FloorDivideOp, 2>(false);
  r["aten::isnan"] = test<c::IsnanOp>();
  r["aten::isinf"] = test<c::IsinfOp>();
  r["aten::isposinf"] = test<c::IsposinfOp>();
  r["aten::isneginf"] = test<c::IsneginfOp>();
  r["aten::isfinite"] = test<c::IsfiniteOp>();
  r["aten::xlogy"] = broadcastComposite<c::XlogyOp, 2>(true);
  r["aten::special_xlogy"] = broadcastComposite<c::XlogyOp, 2>(true);
  r["aten::hypot"] = broadcastComposite<c::HypotOp, 2>(true);
  r["aten::copysign"] = broadcastComposite<c::CopysignOp, 2>(true);
  r["aten::heaviside"] = broadcastComposite<c::HeavisideOp, 2>(false);
  r["aten::fmax"] = broadcastComposite<c::FmaxOp, 2>(false);
  r["aten::fmin"] = broadcastComposite<c::FminOp, 2>(false);
  r["aten::lerp"] = broadcastComposite<c::LerpOp, 3>(true);
  r["aten::addcmul"] = addcOp<c::AddcmulOp>(false);
  r["aten::addcdiv"] = addcOp<c::AddcdivOp>(true);
  r["aten::var"] = varianceOf<c::VarOp>();
  r["aten::std"] = varianceOf<c::StdOp>();
  r["aten::var_mean"] = varianceOf<c::VarMeanOp>();
  r["aten::std_mean"] = varianceOf<c::StdMeanOp>();
  r["aten::logsumexp"] = compositeReduction<c::LogsumexpOp>(true);
  r["aten::special_logsumexp"] = compositeReduction<c::LogsumexpOp>(true);
  r["aten::amin"] = compositeReduction<c::AminOp>(false);
  r["aten::aminmax"] = compositeReduction<c::AminmaxOp>(false);
  r["aten::nansum"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = reductionInput(imp, node, in, /*needsFloat=*/false);
    if (failed(x))
      return failure();
    if (typeOf(*x).getElementType().isInteger(1)) // bools count, as sum's
      x = imp.cast(*x, imp.builder.getI64Type());
    auto args = reduceArgs(imp, node, in, typeOf(*x).getRank());
    if (failed(args))
      return failure();
    return one(imp.create<c::NansumOp>(*x, imp.builder.getDenseI64ArrayAttr(args->dims),
                                       imp.builder.getBoolAttr(args->keepdim)));
  };
  r["aten::nanmean"] = compositeReduction<c::NanmeanOp>(true);
  r["aten::norm"] = norm;
  r["aten::linalg_vector_norm"] = norm;
  r["aten::frobenius_norm"] = norm;
  r["aten::prelu"] = prelu;
  r["aten::glu"] = glu;
  // Spellings of core ops.
  r["aten::positive"] = identity;
  r["aten::mT"] = matrixTranspose;
  r["aten::mH"] = matrixTranspose;
  r["aten::adjoint"] = matrixTranspose;
  r["aten::swapaxes"] = transpose;
  r["aten::swapdims"] = transpose;
  r["aten::movedim"] = movedim;
  r["aten::moveaxis"] = movedim;
  r["aten::ravel"] = ravel;
  r["aten::unflatten"] = unflatten;
  r["aten::narrow_copy"] = narrow;
  r["aten::clamp_min"] = clampOneSide(true);
  r["aten::clamp_max"] = clampOneSide(false);
  r["aten::mv"] = matmul;
  r["aten::dot"] = matmul;
  r["aten::vdot"] = matmul;
  r["aten::inner"] = inner;
  r["aten::outer"] = outer;
  r["aten::ger"] = outer;
  r["aten::addmv"] = addProduct(AddProduct::Mv);
  r["aten::addr"] = addProduct(AddProduct::Outer);
  r["aten::baddbmm"] = addProduct(AddProduct::Bmm);
  r["aten::addbmm"] = addProduct(AddProduct::SummedBmm);
  r["aten::pad"] = pad(std::nullopt);
  r["aten::constant_pad_nd"] = pad("constant");
  for (const char *kind : {"aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d"})
    r[kind] = pad("reflect");
  for (const char *kind : {"aten::replication_pad1d", "aten::replication_pad2d", "aten::replication_pad3d"})
    r[kind] = pad("replicate");
  r["aten::group_norm"] = groupNorm;
  r["aten::instance_norm"] = instanceNorm;
  for (const char *kind : {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d"})
    r[kind] = upsample("nearest");
  for (const char *kind : {"aten::_upsample_nearest_exact1d", "aten::_upsample_nearest_exact2d",
                           "aten::_upsample_nearest_exact3d"})
    r[kind] = upsample("nearest_exact");
  for (const char *kind : {"aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_trilinear3d"})
    r[kind] = upsample("linear");
  r["aten::upsample_bicubic2d"] = upsample("cubic");
  r["aten::l1_loss"] = loss<c::L1LossOp>({});
  r["aten::smooth_l1_loss"] = loss<c::SmoothL1LossOp>({{"beta", 1.0}});
  r["aten::huber_loss"] = loss<c::HuberLossOp>({{"delta", 1.0}});
  r["aten::soft_margin_loss"] = loss<c::SoftMarginLossOp>({});
  r["aten::kl_div"] = loss<c::KlDivOp>({}, {}, "log_target");
  r["aten::binary_cross_entropy"] = loss<c::BinaryCrossEntropyOp>({}, {"weight"});
  r["aten::binary_cross_entropy_with_logits"] =
      loss<c::BinaryCrossEntropyWithLogitsOp>({}, {"weight", "pos_weight"});
  r["aten::broadcast_to"] = broadcastToOp;
  r["aten::meshgrid"] = meshgrid;
  r["aten::atleast_1d"] = atLeast(1);
  r["aten::atleast_2d"] = atLeast(2);
  r["aten::atleast_3d"] = atLeast(3);
  r["aten::hstack"] = stackAlong(0);
  r["aten::vstack"] = stackAlong(1);
  r["aten::row_stack"] = stackAlong(1);
  r["aten::dstack"] = stackAlong(2);
  r["aten::column_stack"] = stackAlong(3);
  r["aten::diagonal"] = diagonal;
  r["aten::trace"] = trace;
  r["aten::diag"] = diag;
  // Real tensors: conjugation is the identity; eval mode: so is feature
  // alpha dropout.
  for (const char *kind : {"aten::resolve_conj", "aten::resolve_neg", "aten::conj_physical",
                           "aten::conj"})
    r[kind] = identity;
  r["aten::feature_alpha_dropout"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto train = imp.boolean(in[2]);
    if (failed(train))
      return failure();
    if (*train) { // its result is random: nothing can reproduce it
      imp.error() << "feature_alpha_dropout in training draws random masks; not supported";
      return failure();
    }
    return identity(imp, nullptr, in);
  };
  // The bitwise ops: bitwise on integers, logical on bools (cleave.and, or,
  // xor and not take both); logical_xor tests each operand for non-zero.
  for (const char *kind : {"aten::bitwise_and", "aten::__and__", "aten::bitwise_or",
                           "aten::__or__", "aten::bitwise_xor", "aten::__xor__",
                           "aten::logical_xor"})
    r[kind] = [op = StringRef(kind)](Importer &imp, jit::Node *, Inputs in) -> Result {
      auto values = imp.promote({in[0], in[1]});
      if (failed(values))
        return failure();
      Value a = (*values)[0], b = (*values)[1];
      if (op == "aten::logical_xor") {
        a = imp.cast(a, imp.builder.getI1Type());
        b = imp.cast(b, imp.builder.getI1Type());
      } else if (llvm::isa<FloatType>(typeOf(a).getElementType())) {
        imp.error() << "bitwise ops take integer or bool tensors, got " << typeOf(a)
                    << " (PyTorch refuses floats too)";
        return failure();
      }
      if (op.contains("and"))
        return one(imp.create<c::AndOp>(a, b));
      if (op.contains("or") && !op.contains("xor"))
        return one(imp.create<c::OrOp>(a, b));
      return one(imp.create<c::XorOp>(a, b));
    };
  r["aten::bitwise_not"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    if (llvm::isa<FloatType>(typeOf(*x).getElementType())) {
      imp.error() << "bitwise_not takes an integer or bool tensor, got " << typeOf(*x);
      return failure();
    }
    return one(imp.create<c::NotOp>(*x));
  };
  // Shifts of integers, PyTorch's out-of-range counts included (the kernels).
  for (const char *kind : {"aten::bitwise_left_shift", "aten::__lshift__",
                           "aten::bitwise_right_shift", "aten::__rshift__"})
    r[kind] = [left = StringRef(kind).contains("left") || StringRef(kind).contains("lshift")](
                  Importer &imp, jit::Node *, Inputs in) -> Result {
      auto values = imp.promote({in[0], in[1]});
      if (failed(values))
        return failure();
      Value a = (*values)[0], b = (*values)[1];
      Type et = typeOf(a).getElementType();
      if (!llvm::isa<IntegerType>(et) || et.isInteger(1)) {
        imp.error() << "shifts take integer tensors, got " << typeOf(a);
        return failure();
      }
      if (left)
        return one(imp.create<c::ShiftLeftOp>(a, b));
      return one(imp.create<c::ShiftRightOp>(a, b));
    };
  r["aten::repeat"] = repeat(false);
  r["aten::tile"] = repeat(true);
  r["aten::pixel_shuffle"] = pixelShuffle(false);
  r["aten::pixel_unshuffle"] = pixelShuffle(true);
  r["aten::conv1d"] = as2d(conv2d, {3, 5}, {4}, /*reshapeWeight=*/true);
  // Traced convolutions: 1-D ones (a 3-D weight) through their 2-D form.
  for (const char *kind : {"aten::_convolution", "aten::convolution"})
    r[kind] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
      auto w = imp.tensor(in[1]);
      if (failed(w))
        return failure();
      if (typeOf(*w).getRank() == 3)
        return as2d(convolution, {3, 5}, {4, 7}, /*reshapeWeight=*/true)(imp, node, in);
      return convolution(imp, node, in);
    };
  r["aten::max_pool1d"] = as2d(maxPool2d, {1, 2, 4}, {3}, false);
  r["aten::avg_pool1d"] = as2d(avgPool2d, {1, 2}, {3}, false, /*extra=*/1);
  r["aten::adaptive_avg_pool1d"] = as2d(adaptiveAvgPool2d, {1}, {}, false);
  // conv_transpose2d/3d(input, weight, bias, stride, padding, output_padding,
  // groups, dilation), as scripted models call them.
  for (int64_t nd : {2, 3})
    r["aten::conv_transpose" + std::to_string(nd) + "d"] = [nd](Importer &imp, jit::Node *,
                                                               Inputs in) -> Result {
      auto x = imp.tensor(in[0]), w = imp.tensor(in[1]);
      auto bias = optionalTensor(imp, in[2]);
      auto groups = imp.integer(in[6]);
      auto stride = spatialArg(imp, in[3], nd), padding = spatialArg(imp, in[4], nd),
           outputPadding = spatialArg(imp, in[5], nd), dilation = spatialArg(imp, in[7], nd);
      if (failed(x) || failed(w) || failed(bias) || failed(groups) || failed(stride) ||
          failed(padding) || failed(outputPadding) || failed(dilation))
        return failure();
      return transposedConv(imp, *x, *w, *bias, *stride, *padding, *dilation, *outputPadding,
                            *groups);
    };
  r["aten::avg_pool3d"] = avgPool3d;
  r["aten::adaptive_avg_pool3d"] = adaptivePoolNd(3, /*max=*/false);
  for (int64_t nd : {1, 2, 3}) {
    std::string suffix = std::to_string(nd) + "d";
    r["aten::adaptive_max_pool" + suffix] = adaptivePoolNd(nd, /*max=*/true);
    r["aten::max_pool" + suffix + "_with_indices"] = maxPoolNd(nd, /*withIndices=*/true);
  }
  r["aten::max_pool3d"] = maxPoolNd(3, /*withIndices=*/false);
  r["aten::max_unpool2d"] = maxUnpoolNd(2);
  r["aten::max_unpool3d"] = maxUnpoolNd(3);
}

} // namespace

// MathConverters.cpp: math ops spelled as core ops.
void addMathConverters(llvm::StringMap<Converter> &r);
// RecurrentConverters.cpp: RNN, LSTM and GRU unrolled over time.
void addRecurrentConverters(llvm::StringMap<Converter> &r);
// ComplexConverters.cpp: stft, istft and the complex values between them.
void addComplexConverters(llvm::StringMap<Converter> &r);

namespace {

struct Registry {
  llvm::StringMap<Converter> converters;

  Registry() {
    auto &r = converters;
    r["aten::add"] = addOrConcatLists;
    r["aten::sub"] = addSub<mlir::cleave::SubOp>();
    r["aten::rsub"] = addSub<mlir::cleave::SubOp>(/*reversed=*/true);
    r["aten::mul"] = binary<mlir::cleave::MulOp>();
    r["aten::div"] = binary<mlir::cleave::DivOp>(/*trueDivision=*/true);
    r["aten::true_divide"] = binary<mlir::cleave::DivOp>(true);
    // PyTorch's promotion: integer powers stay integers (cleave.pow is exact
    // on them); bools have no pow, in PyTorch either.
    r["aten::pow"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
      auto values = imp.promote({in[0], in[1]});
      if (failed(values))
        return failure();
      Value x = (*values)[0], e = (*values)[1];
      if (typeOf(x).getElementType().isInteger(1)) {
        imp.error() << "pow of bool tensors is not supported (PyTorch has none either)";
        return failure();
      }
      return one(imp.create<mlir::cleave::PowOp>(x, e));
    };
    r["aten::maximum"] = [](Importer &imp, jit::Node *, Inputs in) {
      return elementwiseExtremum(imp, in, /*max=*/true);
    };
    r["aten::minimum"] = [](Importer &imp, jit::Node *, Inputs in) {
      return elementwiseExtremum(imp, in, /*max=*/false);
    };
    r["aten::logical_and"] = logical<mlir::cleave::AndOp>;
    r["aten::logical_or"] = logical<mlir::cleave::OrOp>;
    r["aten::eq"] = compare(mlir::cleave::ComparePredicate::eq);
    r["aten::ne"] = compare(mlir::cleave::ComparePredicate::ne);
    r["aten::lt"] = compare(mlir::cleave::ComparePredicate::lt);
    r["aten::le"] = compare(mlir::cleave::ComparePredicate::le);
    r["aten::gt"] = compare(mlir::cleave::ComparePredicate::gt);
    r["aten::ge"] = compare(mlir::cleave::ComparePredicate::ge);
    r["aten::where"] = [](Importer &imp, jit::Node *, Inputs in) {
      return where(imp, in[0], in[1], in[2]);
    };
    r["aten::masked_fill"] = maskedFill;
    r["aten::fill"] = fillOp;
    r["aten::copy"] = copyOp;
    r["aten::logical_not"] = [](Importer &imp, jit::Node *, Inputs in) -> Result {
      auto x = imp.tensor(in[0]);
      if (failed(x))
        return failure();
      Value b = imp.cast(*x, imp.builder.getI1Type());
      return one(imp.create<mlir::cleave::NotOp>(b));
    };
    r["aten::neg"] = unary<mlir::cleave::NegOp>(false);
    r["aten::abs"] = unary<mlir::cleave::AbsOp>(false);
    r["aten::relu"] = unary<mlir::cleave::ReluOp>(false);
    r["aten::silu"] = unary<mlir::cleave::SiluOp>(true);
    r["aten::sigmoid"] = unary<mlir::cleave::SigmoidOp>(true);
    r["aten::tanh"] = unary<mlir::cleave::TanhOp>(true);
    r["aten::exp"] = unary<mlir::cleave::ExpOp>(true);
    r["aten::log"] = unary<mlir::cleave::LogOp>(true);
    r["aten::sqrt"] = unary<mlir::cleave::SqrtOp>(true);
    r["aten::rsqrt"] = unary<mlir::cleave::RsqrtOp>(true);
    r["aten::sin"] = unary<mlir::cleave::SinOp>(true);
    r["aten::cos"] = unary<mlir::cleave::CosOp>(true);
    r["aten::erf"] = unary<mlir::cleave::ErfOp>(true);
    r["aten::floor"] = rounding<mlir::cleave::FloorOp>();
    r["aten::ceil"] = rounding<mlir::cleave::CeilOp>();
    r["aten::trunc"] = rounding<mlir::cleave::TruncOp>();
    r["aten::round"] = roundDecimals;
    r["aten::sign"] = unary<mlir::cleave::SignOp>(false);
    r["aten::sgn"] = unary<mlir::cleave::SignOp>(false); // sign, for the real tensors cleave has
    r["aten::log1p"] = unary<mlir::cleave::Log1pOp>(true);
    r["aten::expm1"] = unary<mlir::cleave::Expm1Op>(true);
    r["aten::tan"] = unary<mlir::cleave::TanOp>(true);
    r["aten::asin"] = unary<mlir::cleave::AsinOp>(true);
    r["aten::acos"] = unary<mlir::cleave::AcosOp>(true);
    r["aten::atan"] = unary<mlir::cleave::AtanOp>(true);
    r["aten::sinh"] = unary<mlir::cleave::SinhOp>(true);
    r["aten::cosh"] = unary<mlir::cleave::CoshOp>(true);
    r["aten::asinh"] = unary<mlir::cleave::AsinhOp>(true);
    r["aten::acosh"] = unary<mlir::cleave::AcoshOp>(true);
    r["aten::atanh"] = unary<mlir::cleave::AtanhOp>(true);
    r["aten::reciprocal"] = unary<mlir::cleave::ReciprocalOp>(true);
    r["aten::gelu"] = gelu;
    r["aten::clamp"] = clamp;
    r["aten::to"] = castTo;
    r["aten::type_as"] = castTo;
    r["aten::dropout"] = dropout;
    // Channel-wise and alpha dropout stay plain identities: their training
    // cost is not modelled.
    for (const char *kind : {"aten::feature_dropout", "aten::alpha_dropout", "aten::contiguous", "aten::detach", "aten::clone",
                             "aten::alias", "aten::lift_fresh"})
      r[kind] = identity;
    r["aten::zeros_like"] = fillLike(0.0);
    r["aten::ones_like"] = fillLike(1.0);
    r["aten::full_like"] = fillLike(std::nullopt);
    r["aten::new_zeros"] = fillNew(0.0);
    r["aten::new_ones"] = fillNew(1.0);
    r["aten::new_full"] = fillNew(std::nullopt);

    r["aten::matmul"] = matmul;
    r["aten::bmm"] = matmul;
    r["aten::mm"] = matmul;
    r["aten::addmm"] = addmm;
    r["aten::linear"] = linear;
    r["aten::embedding"] = embedding;
    r["aten::layer_norm"] = layerNorm;
    r["aten::batch_norm"] = batchNorm;
    r["aten::softmax"] = normalizeAlongDim<mlir::cleave::SoftmaxOp>();
    r["aten::log_softmax"] = normalizeAlongDim<mlir::cleave::LogSoftmaxOp>();
    r["aten::mean"] = reduction<mlir::cleave::ReduceMeanOp>(true);
    r["aten::sum"] = reduction<mlir::cleave::ReduceSumOp>(false);
    r["aten::amax"] = reduction<mlir::cleave::ReduceMaxOp>(false);
    r["aten::prod"] = prod;
    r["aten::argmax"] = argExtremum(/*max=*/true);
    r["aten::argmin"] = argExtremum(/*max=*/false);
    r["aten::max"] = extremum(/*max=*/true);
    r["aten::min"] = extremum(/*max=*/false);
    r["aten::cumsum"] = scan<mlir::cleave::CumsumOp>();
    r["aten::cumprod"] = scan<mlir::cleave::CumprodOp>();

    r["aten::conv2d"] = conv2d;
    r["aten::conv3d"] = conv2d; // the same arguments; conv() goes by the weight's rank
    // A traced conv with a string padding ('same', 'valid'): conv2d's
    // arguments, 1-D through the 2-D form.
    r["aten::_convolution_mode"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
      auto w = imp.tensor(in[1]);
      if (failed(w))
        return failure();
      if (typeOf(*w).getRank() == 3)
        return as2d(conv2d, {3, 5}, {4}, /*reshapeWeight=*/true)(imp, node, in);
      return conv2d(imp, node, in);
    };
    r["aten::max_pool2d"] = maxPool2d;
    r["aten::avg_pool2d"] = avgPool2d;
    r["aten::adaptive_avg_pool2d"] = adaptiveAvgPool2d;

    r["aten::view"] = view;
    r["aten::reshape"] = view;
    r["aten::view_as"] = viewAs;
    r["aten::reshape_as"] = viewAs;
    r["aten::flatten"] = flatten;
    r["aten::unsqueeze"] = unsqueeze;
    r["aten::squeeze"] = squeeze;
    r["aten::permute"] = permute;
    r["aten::transpose"] = transpose;
    r["aten::t"] = transpose;
    r["aten::expand"] = expand;
    r["aten::expand_as"] = expandAs;
    r["aten::slice"] = sliceOp;
    r["aten::select"] = selectOp;
    r["aten::narrow"] = narrow;
    r["aten::split"] = split;
    r["aten::split_with_sizes"] = split;
    r["aten::chunk"] = chunk;
    // The unsafe_ forms differ only in what autograd may assume about aliasing
    // (traced LSTM and GRU cells use them).
    r["aten::unsafe_split"] = split;
    r["aten::unsafe_split_with_sizes"] = split;
    r["aten::unsafe_chunk"] = chunk;
    r["aten::unbind"] = unbind;
    r["aten::cat"] = concat(false);
    r["aten::concat"] = concat(false);
    r["aten::stack"] = concat(true);
    r["aten::broadcast_tensors"] = broadcastTensors;
    r["aten::cross_entropy_loss"] = crossEntropyLoss;
    r["aten::nll_loss"] = nllLoss;
    r["aten::nll_loss_nd"] = nllLoss;
    r["aten::nll_loss2d"] = nllLoss;
    r["aten::mse_loss"] = mseLoss;
    r["aten::tril"] = triangle<mlir::cleave::TrilOp>();
    r["aten::triu"] = triangle<mlir::cleave::TriuOp>();
    addCompositeConverters(r);
    addMathConverters(r); // before linalg: its matrix_power hands n >= 0 to math's
    addLinalgConverters(r);
    addConstructionConverters(r);
    addRecurrentConverters(r);
    addComplexConverters(r);
  }
};

} // namespace

const Converter *findConverter(const std::string &kind) {
  static const Registry registry;
  auto it = registry.converters.find(kind);
  return it == registry.converters.end() ? nullptr : &it->second;
}

} // namespace cleave::importer
