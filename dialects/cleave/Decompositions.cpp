//===- Decompositions.cpp - composite ops written as core ops -------------===//
//
// DecomposableOpInterface::decompose for every composite op: one rule per
// op, in the order of CleaveCompositeOps.td. The formulas follow PyTorch's CPU
// kernels, their special cases (NaN, infinities, zeros) included, so that
// the core ops compute what PyTorch computes. A rule may build another
// composite (std builds var); `-cleave-decompose` rewrites until none is
// left.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveBuilder.h"
#include "dialects/cleave/CleaveDialect.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::cleave;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

bool isFloat(Value v) { return llvm::isa<FloatType>(typeOf(v).getElementType()); }

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Rule builders: comparisons against a number and the NaN test.
struct Rules : CleaveBuilder {
  Value cmp(ComparePredicate p, Value x, double v) { return compare(p, x, scalarLike(v, x)); }
  Value cmp(ComparePredicate p, Value x, Value y) { return compare(p, x, y); }
  Value isNan(Value x) { return compare(ComparePredicate::ne, x, x); }
  Value absOf(Value x) { return make<AbsOp>(x); }
  Value mulBy(Value x, double v) { return mul(x, scalarLike(v, x)); }
  Value addTo(Value x, double v) { return add(x, scalarLike(v, x)); }
  /// min(max(x, lo), hi), NaN propagating, as torch.clamp.
  Value clamp(Value x, double lo, double hi) {
    return minimum(maximum(x, scalarLike(lo, x)), scalarLike(hi, x));
  }
  /// A reduction's result from its keepdim form.
  Value dropDims(Value kept, Type result) {
    return reshape(kept, llvm::cast<RankedTensorType>(result).getShape());
  }
};

Rules rulesFor(OpBuilder &builder, Operation *op) { return Rules{{builder, op->getLoc()}}; }

/// Elements reduced into one result element.
int64_t reducedCount(Value input, ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= typeOf(input).getDimSize(d);
  return n;
}

} // namespace

#define CLEAVE_MAP_RULE(OP, BODY)                                                             \
  LogicalResult OP::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {          \
    Rules b = rulesFor(builder, *this);                                                       \
    Value x = getInput();                                                                     \
    results.push_back(BODY);                                                                  \
    return success();                                                                         \
  }

//===----------------------------------------------------------------------===//
// Elementwise maps.
//===----------------------------------------------------------------------===//

CLEAVE_MAP_RULE(SquareOp, b.mul(x, x))
CLEAVE_MAP_RULE(Exp2Op, b.make<PowOp>(b.scalarLike(2, x), x))
CLEAVE_MAP_RULE(Log2Op, b.mulBy(b.make<LogOp>(x), 1.0 / M_LN2))
CLEAVE_MAP_RULE(Log10Op, b.mulBy(b.make<LogOp>(x), 1.0 / M_LN10))
CLEAVE_MAP_RULE(ErfcOp, b.sub(b.scalarLike(1, x), b.make<ErfOp>(x)))
// sin(pi x) / (pi x), exactly 1 at 0.
CLEAVE_MAP_RULE(SincOp, [&] {
  Value t = b.mulBy(x, M_PI);
  return b.where(b.cmp(ComparePredicate::eq, x, 0.0), b.scalarLike(1, x),
                 b.div(b.make<SinOp>(t), t));
}())
CLEAVE_MAP_RULE(Rad2degOp, b.mulBy(x, 180.0 / M_PI))
CLEAVE_MAP_RULE(Deg2radOp, b.mulBy(x, M_PI / 180.0))
CLEAVE_MAP_RULE(HardsigmoidOp, b.div(b.clamp(b.addTo(x, 3), 0, 6), b.scalarLike(6, x)))
// PyTorch's order: x * clamp(x + 3, 0, 6), then / 6.
CLEAVE_MAP_RULE(HardswishOp,
                b.div(b.mul(x, b.clamp(b.addTo(x, 3), 0, 6)), b.scalarLike(6, x)))
CLEAVE_MAP_RULE(LeakyReluOp,
                b.where(b.cmp(ComparePredicate::gt, x, 0.0), x,
                        b.mulBy(x, getNegativeSlope().convertToDouble())))
CLEAVE_MAP_RULE(HardtanhOp,
                b.clamp(x, getMinVal().convertToDouble(), getMaxVal().convertToDouble()))
// NaN gives 0, as PyTorch's kernel.
CLEAVE_MAP_RULE(SoftshrinkOp, [&] {
  double l = getLambd().convertToDouble();
  return b.where(b.cmp(ComparePredicate::gt, x, l), b.addTo(x, -l),
                 b.where(b.cmp(ComparePredicate::lt, x, -l), b.addTo(x, l),
                         b.scalarLike(0, x)));
}())
// NaN stays NaN.
CLEAVE_MAP_RULE(HardshrinkOp, [&] {
  double l = getLambd().convertToDouble();
  Value inside = b.logicalAnd(b.cmp(ComparePredicate::ge, x, -l), b.cmp(ComparePredicate::le, x, l));
  return b.where(inside, b.scalarLike(0, x), x);
}())
// x <= threshold ? value : x, so that NaN stays NaN.
CLEAVE_MAP_RULE(ThresholdOp,
                b.where(b.cmp(ComparePredicate::le, x, getThreshold().convertToDouble()),
                        b.scalarLike(getValue().convertToDouble(), x), x))
CLEAVE_MAP_RULE(NanToNumOp, [&] {
  Value y = b.where(b.cmp(ComparePredicate::eq, x, -kInf),
                    b.scalarLike(getNeginf().convertToDouble(), x), x);
  y = b.where(b.cmp(ComparePredicate::eq, x, kInf),
              b.scalarLike(getPosinf().convertToDouble(), x), y);
  return b.where(b.isNan(x), b.scalarLike(getNan().convertToDouble(), x), y);
}())
// log(z / (1 - z)); with eps, z = x clamped to [eps, 1 - eps] (NaN stays).
CLEAVE_MAP_RULE(LogitOp, [&] {
  Value z = x;
  if (auto eps = getEps())
    z = b.clamp(x, eps->convertToDouble(), 1.0 - eps->convertToDouble());
  return b.make<LogOp>(b.div(z, b.sub(b.scalarLike(1, z), z)));
}())

//===----------------------------------------------------------------------===//
// Tests. Integer and bool tensors hold no NaN or infinity.
//===----------------------------------------------------------------------===//

namespace {
/// All-false (or all-true) i1 of x's shape, for integer operands.
Value constantTest(Rules &b, Value x, bool value) {
  return b.cmp(value ? ComparePredicate::eq : ComparePredicate::ne, x, x);
}
} // namespace

CLEAVE_MAP_RULE(IsnanOp, b.isNan(x))
CLEAVE_MAP_RULE(IsinfOp, isFloat(x) ? b.cmp(ComparePredicate::eq, b.absOf(x), kInf)
                                    : constantTest(b, x, false))
CLEAVE_MAP_RULE(IsposinfOp, isFloat(x) ? b.cmp(ComparePredicate::eq, x, kInf)
                                       : constantTest(b, x, false))
CLEAVE_MAP_RULE(IsneginfOp, isFloat(x) ? b.cmp(ComparePredicate::eq, x, -kInf)
                                       : constantTest(b, x, false))
// |x| < inf is false for NaN too.
CLEAVE_MAP_RULE(IsfiniteOp, isFloat(x) ? b.cmp(ComparePredicate::lt, b.absOf(x), kInf)
                                       : constantTest(b, x, true))
#undef CLEAVE_MAP_RULE

//===----------------------------------------------------------------------===//
// Elementwise with broadcasting.
//===----------------------------------------------------------------------===//

#define CLEAVE_BINARY_RULE(OP, BODY)                                                          \
  LogicalResult OP::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {          \
    Rules b = rulesFor(builder, *this);                                                       \
    Value x = getLhs(), y = getRhs();                                                         \
    results.push_back(b.broadcastTo(BODY, typeOf(getResult())));                                        \
    return success();                                                                         \
  }

// NaN y gives NaN; x == 0 gives 0 (also where log(y) is infinite).
CLEAVE_BINARY_RULE(XlogyOp,
                   b.where(b.isNan(y), y,
                           b.where(b.cmp(ComparePredicate::eq, x, 0.0), b.scalarLike(0, x),
                                   b.mul(x, b.make<LogOp>(y)))))
CLEAVE_BINARY_RULE(HypotOp, b.make<SqrtOp>(b.add(b.mul(x, x), b.mul(y, y))))
// The sign of y: negative, or -0 (1 / -0 = -inf).
CLEAVE_BINARY_RULE(CopysignOp, [&] {
  Value negative = b.logicalOr(
      b.cmp(ComparePredicate::lt, y, 0.0),
      b.logicalAnd(b.cmp(ComparePredicate::eq, y, 0.0),
                   b.cmp(ComparePredicate::lt, b.div(b.scalarLike(1, y), y), 0.0)));
  Value magnitude = b.absOf(x);
  return b.where(negative, b.neg(magnitude), magnitude);
}())
CLEAVE_BINARY_RULE(HeavisideOp,
                   b.where(b.cmp(ComparePredicate::eq, x, 0.0), y,
                           b.cast(b.cmp(ComparePredicate::gt, x, 0.0),
                                  typeOf(x).getElementType())))
CLEAVE_BINARY_RULE(FmaxOp, isFloat(x) ? b.where(b.isNan(x), y, b.where(b.isNan(y), x, b.maximum(x, y)))
                                      : b.maximum(x, y))
CLEAVE_BINARY_RULE(FminOp, isFloat(x) ? b.where(b.isNan(x), y, b.where(b.isNan(y), x, b.minimum(x, y)))
                                      : b.minimum(x, y))
#undef CLEAVE_BINARY_RULE

// PyTorch's form: from start when |weight| < 0.5, from end otherwise.
LogicalResult LerpOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value start = getStart(), end = getEnd(), w = getWeight();
  Value diff = b.sub(end, start);
  Value fromStart = b.add(start, b.mul(w, diff));
  Value fromEnd = b.sub(end, b.mul(diff, b.sub(b.scalarLike(1, w), w)));
  Value near = b.cmp(ComparePredicate::lt, b.absOf(w), 0.5);
  results.push_back(b.broadcastTo(b.where(near, fromStart, fromEnd), typeOf(getResult())));
  return success();
}

// input + (value * t1) * t2, PyTorch's order.
LogicalResult AddcmulOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  double value = getValue().convertToDouble();
  Value t1 = value == 1.0 ? getT1() : b.mulBy(getT1(), value);
  results.push_back(b.broadcastTo(b.add(getInput(), b.mul(t1, getT2())), typeOf(getResult())));
  return success();
}

// input + (value * t1) / t2, PyTorch's order.
LogicalResult AddcdivOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  double value = getValue().convertToDouble();
  Value t1 = value == 1.0 ? getT1() : b.mulBy(getT1(), value);
  results.push_back(b.broadcastTo(b.add(getInput(), b.div(t1, getT2())), typeOf(getResult())));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

namespace {
/// sum((x - mean)^2) / max(n - correction, 0): a zero divisor gives inf or
/// NaN, as PyTorch.
Value variance(Rules &b, Value x, ArrayRef<int64_t> dims, bool keepdim, double correction) {
  Value mean = b.reduceMean(x, dims, /*keepdim=*/true);
  Value d = b.sub(x, mean);
  Value sum = b.reduceSum(b.mul(d, d), dims, keepdim);
  double divisor = std::max(static_cast<double>(reducedCount(x, dims)) - correction, 0.0);
  return b.div(sum, b.scalarLike(divisor, sum));
}
} // namespace

LogicalResult VarOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  results.push_back(variance(b, getInput(), getDims(), getKeepdim(),
                             getCorrection().convertToDouble()));
  return success();
}

LogicalResult StdOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  results.push_back(b.make<SqrtOp>(b.make<VarOp>(getInput(), getDims(), getKeepdim(),
                                                 getCorrection())));
  return success();
}

LogicalResult VarMeanOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  results.push_back(b.make<VarOp>(getInput(), getDims(), getKeepdim(), getCorrection()));
  results.push_back(b.reduceMean(getInput(), getDims(), getKeepdim()));
  return success();
}

LogicalResult StdMeanOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  results.push_back(b.make<StdOp>(getInput(), getDims(), getKeepdim(), getCorrection()));
  results.push_back(b.reduceMean(getInput(), getDims(), getKeepdim()));
  return success();
}

// max + log(sum(exp(x - max))), an infinite max taken as 0 (PyTorch's
// guard: all -inf gives -inf, any +inf gives +inf).
LogicalResult LogsumexpOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Value max = b.reduceMax(x, getDims(), /*keepdim=*/true);
  max = b.where(b.cmp(ComparePredicate::eq, b.absOf(max), kInf), b.scalarLike(0, max), max);
  Value sum = b.reduceSum(b.make<ExpOp>(b.sub(x, max)), getDims(), /*keepdim=*/true);
  results.push_back(b.dropDims(b.add(b.make<LogOp>(sum), max), getType()));
  return success();
}

LogicalResult NormOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  double p = getP().convertToDouble();
  ArrayRef<int64_t> dims = getDims();
  bool keepdim = getKeepdim();
  Value norm;
  if (p == 2.0) {
    norm = b.make<SqrtOp>(b.reduceSum(b.mul(x, x), dims, keepdim));
  } else if (p == 1.0) {
    norm = b.reduceSum(b.absOf(x), dims, keepdim);
  } else if (p == kInf) {
    norm = b.reduceMax(b.absOf(x), dims, keepdim);
  } else if (p == -kInf) {
    norm = b.make<AminOp>(b.absOf(x), dims, keepdim);
  } else if (p == 0.0) {
    norm = b.reduceSum(b.cast(b.cmp(ComparePredicate::ne, x, 0.0), typeOf(x).getElementType()),
                       dims, keepdim);
  } else {
    Value powered = b.make<PowOp>(b.absOf(x), b.scalarLike(p, x));
    Value sum = b.reduceSum(powered, dims, keepdim);
    norm = b.make<PowOp>(sum, b.scalarLike(1.0 / p, sum));
  }
  results.push_back(norm);
  return success();
}

// -max(-x): NaN propagates as amax's. Booleans go through i64.
LogicalResult AminOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Type et = typeOf(x).getElementType();
  if (et.isInteger(1))
    x = b.cast(x, b.b.getI64Type());
  results.push_back(b.cast(b.neg(b.reduceMax(b.neg(x), getDims(), getKeepdim())), et));
  return success();
}

LogicalResult AminmaxOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Type et = typeOf(x).getElementType();
  results.push_back(b.make<AminOp>(x, getDims(), getKeepdim()));
  // Booleans go through i64 (reduce_max takes numbers).
  results.push_back(b.cast(b.reduceMax(b.cast(x, et.isInteger(1) ? b.b.getI64Type() : et),
                                       getDims(), getKeepdim()),
                           et));
  return success();
}

LogicalResult NansumOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Value zeroed = b.where(b.isNan(x), b.scalarLike(0, x), x);
  results.push_back(b.reduceSum(zeroed, getDims(), getKeepdim()));
  return success();
}

// sum of the non-NaN elements / their count (NaN where there are none).
LogicalResult NanmeanOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Value nan = b.isNan(x);
  Value sum = b.reduceSum(b.where(nan, b.scalarLike(0, x), x), getDims(), getKeepdim());
  Value count = b.reduceSum(b.cast(b.logicalNot(nan), typeOf(x).getElementType()), getDims(),
                            getKeepdim());
  results.push_back(b.div(sum, count));
  return success();
}

//===----------------------------------------------------------------------===//
// Activations with a parameter tensor or a split.
//===----------------------------------------------------------------------===//

LogicalResult PreluOp::verify() {
  auto input = getInput().getType(), weight = getWeight().getType();
  int64_t n = weight.getNumElements();
  if (weight.getRank() > 1 ||
      (n != 1 && (input.getRank() < 2 || input.getDimSize(1) != n)))
    return emitOpError() << "weight of " << n << " elements is neither one nor one per "
                         << "channel (dim 1) of the input";
  if (weight.getElementType() != input.getElementType())
    return emitOpError() << "weight and input differ in element type";
  return success();
}

// x > 0 ? x : w * x, one weight per channel (dim 1).
LogicalResult PreluOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput(), w = getWeight();
  auto input = typeOf(x);
  if (typeOf(w).getNumElements() == 1) {
    w = b.reshape(w, {});
  } else {
    SmallVector<int64_t> shape(input.getRank(), 1);
    shape[1] = input.getDimSize(1);
    w = b.reshape(w, shape);
  }
  results.push_back(b.where(b.cmp(ComparePredicate::gt, x, 0.0), x, b.mul(w, x)));
  return success();
}

LogicalResult GluOp::verify() {
  auto input = getInput().getType();
  int64_t dim = getDim();
  if (dim < 0 || dim >= input.getRank())
    return emitOpError() << "dim " << dim << " is out of range for rank " << input.getRank();
  if (input.getDimSize(dim) % 2 != 0)
    return emitOpError() << "halves dim " << dim << " of odd size " << input.getDimSize(dim);
  SmallVector<int64_t> shape(input.getShape());
  shape[dim] /= 2;
  if (getType().getShape() != ArrayRef<int64_t>(shape) ||
      getType().getElementType() != input.getElementType())
    return emitOpError() << "result type " << getType() << " is not the input's with dim "
                         << dim << " halved";
  return success();
}

LogicalResult GluOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  int64_t dim = getDim(), half = typeOf(getInput()).getDimSize(dim) / 2;
  Value a = b.make<SliceOp>(getInput(), dim, 0, half, 1);
  Value gate = b.make<SliceOp>(getInput(), dim, half, 2 * half, 1);
  results.push_back(b.mul(a, b.make<SigmoidOp>(gate)));
  return success();
}
