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
#include "dialects/cleave/ShapeInference.h"

#include <algorithm>
#include <cmath>
#include <vector>
#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::cleave;

namespace {

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

#define CLEAVE_MAP_RULE(OP, ...)                                                             \
  LogicalResult OP::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {          \
    Rules b = rulesFor(builder, *this);                                                       \
    Value x = getInput();                                                                     \
    results.push_back(__VA_ARGS__);                                                           \
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
// erfc(|x|/sqrt 2)/2 through erfcx, finite for every x (no 0 * inf on either
// side of the where, so the gradient is finite too).
static Value halfErfcOfAbs(Rules &b, Value x) {
  Value z = b.mulBy(b.make<AbsOp>(x), M_SQRT1_2);
  return b.mulBy(b.mul(b.make<ErfcxOp>(z), b.make<ExpOp>(b.neg(b.mul(z, z)))), 0.5);
}
CLEAVE_MAP_RULE(NdtrOp, [&] {
  Value tail = halfErfcOfAbs(b, x);
  return b.where(b.cmp(ComparePredicate::lt, x, 0.0), tail, b.sub(b.scalarLike(1, x), tail));
}())
// Below 0: log(erfcx(z)/2) - z^2 (no underflow); above: log1p(-tail).
CLEAVE_MAP_RULE(LogNdtrOp, [&] {
  Value z = b.mulBy(b.make<AbsOp>(x), M_SQRT1_2);
  Value lower = b.sub(b.make<LogOp>(b.mulBy(b.make<ErfcxOp>(z), 0.5)), b.mul(z, z));
  Value upper = b.make<Log1pOp>(b.neg(halfErfcOfAbs(b, x)));
  return b.where(b.cmp(ComparePredicate::lt, x, 0.0), lower, upper);
}())
CLEAVE_MAP_RULE(EntrOp, [&] {
  Value entropy = b.neg(b.mul(x, b.make<LogOp>(x)));
  return b.where(b.cmp(ComparePredicate::lt, x, 0.0),
                 b.scalarLike(-std::numeric_limits<double>::infinity(), x),
                 b.where(b.cmp(ComparePredicate::eq, x, 0.0), b.scalarLike(0, x), entropy));
}())
CLEAVE_MAP_RULE(MvlgammaOp, [&] {
  const int64_t p = static_cast<int64_t>(getP());
  Value sum = b.make<LgammaOp>(x);
  for (int64_t i = 1; i < p; ++i)
    sum = b.add(sum, b.make<LgammaOp>(b.addTo(x, -0.5 * static_cast<double>(i))));
  return b.addTo(sum, static_cast<double>(p) * static_cast<double>(p - 1) / 4.0 * std::log(M_PI));
}())
// 0 at +-inf, as PyTorch's.
CLEAVE_MAP_RULE(SphericalBesselJ0Op,
                b.where(b.cmp(ComparePredicate::eq, x, 0.0), b.scalarLike(1, x),
                        b.where(b.cmp(ComparePredicate::eq, b.make<AbsOp>(x),
                                      std::numeric_limits<double>::infinity()),
                                b.scalarLike(0, x), b.div(b.make<SinOp>(x), x))))
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
CLEAVE_MAP_RULE(FracOp, b.sub(x, b.make<TruncOp>(x)))
CLEAVE_MAP_RULE(LogSigmoidOp,
                b.sub(b.minimum(x, b.scalarLike(0, x)),
                      b.make<Log1pOp>(b.make<ExpOp>(b.neg(b.absOf(x))))))
CLEAVE_MAP_RULE(SoftplusOp, [&] {
  double beta = getBeta().convertToDouble();
  Value scaled = beta == 1.0 ? x : b.mulBy(x, beta);
  Value soft = b.make<Log1pOp>(b.make<ExpOp>(scaled));
  if (beta != 1.0)
    soft = b.div(soft, b.scalarLike(beta, x));
  return b.where(b.cmp(ComparePredicate::gt, scaled, getThreshold().convertToDouble()), x, soft);
}())
CLEAVE_MAP_RULE(MishOp, b.mul(x, b.make<TanhOp>(b.make<Log1pOp>(b.make<ExpOp>(x)))))
// PyTorch's form; NaN takes the positive branch and stays NaN.
CLEAVE_MAP_RULE(EluOp, [&] {
  double alpha = getAlpha().convertToDouble(), scale = getScale().convertToDouble();
  double inputScale = getInputScale().convertToDouble();
  Value inner = inputScale == 1.0 ? x : b.mulBy(x, inputScale);
  Value negative = b.mulBy(b.make<Expm1Op>(inner), alpha * scale);
  Value positive = scale == 1.0 ? x : b.mulBy(x, scale);
  return b.where(b.cmp(ComparePredicate::le, x, 0.0), negative, positive);
}())
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

#define CLEAVE_BINARY_RULE(OP, ...)                                                          \
  LogicalResult OP::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {          \
    Rules b = rulesFor(builder, *this);                                                       \
    Value x = getLhs(), y = getRhs();                                                         \
    results.push_back(b.broadcastTo(__VA_ARGS__, typeOf(getResult())));                                        \
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
CLEAVE_BINARY_RULE(Xlog1pyOp,
                   b.where(b.isNan(y), y,
                           b.where(b.cmp(ComparePredicate::eq, x, 0.0), b.scalarLike(0, x),
                                   b.mul(x, b.make<Log1pOp>(y)))))
// PyTorch's form: equal infinities give themselves (not inf - inf).
CLEAVE_BINARY_RULE(LogaddexpOp, [&] {
  Value sum = b.add(b.maximum(x, y),
                    b.make<Log1pOp>(b.make<ExpOp>(b.neg(b.absOf(b.sub(x, y))))));
  Value same = b.logicalAnd(b.cmp(ComparePredicate::eq, b.absOf(x), kInf),
                            b.cmp(ComparePredicate::eq, x, y));
  return b.where(same, x, sum);
}())
CLEAVE_BINARY_RULE(Logaddexp2Op, [&] {
  Value d = b.neg(b.absOf(b.sub(x, y)));
  Value sum = b.add(b.maximum(x, y),
                    b.mulBy(b.make<Log1pOp>(b.make<PowOp>(b.scalarLike(2, d), d)), 1.0 / M_LN2));
  Value same = b.logicalAnd(b.cmp(ComparePredicate::eq, b.absOf(x), kInf),
                            b.cmp(ComparePredicate::eq, x, y));
  return b.where(same, x, sum);
}())
// atan(y / x) moved to the quadrant of (x, y); x = rhs, y = lhs.
CLEAVE_BINARY_RULE(Atan2Op, [&] {
  Value py = x, px = y;
  Value base = b.make<AtanOp>(b.div(py, px));
  Value yNonNegative = b.cmp(ComparePredicate::ge, py, 0.0);
  Value left = b.where(yNonNegative, b.addTo(base, M_PI), b.addTo(base, -M_PI));
  Value vertical = b.where(b.cmp(ComparePredicate::gt, py, 0.0), b.scalarLike(M_PI / 2, py),
                           b.where(b.cmp(ComparePredicate::lt, py, 0.0),
                                   b.scalarLike(-M_PI / 2, py), b.mulBy(py, 0.0)));
  return b.where(b.cmp(ComparePredicate::gt, px, 0.0), base,
                 b.where(b.cmp(ComparePredicate::lt, px, 0.0), left, vertical));
}())
// Integer division truncates already; floats truncate the quotient.
CLEAVE_BINARY_RULE(FmodOp, b.sub(x, b.mul(isFloat(x) ? b.make<TruncOp>(b.div(x, y)) : b.div(x, y), y)))
// fmod, moved by y when its sign differs from y's (PyTorch's kernel).
CLEAVE_BINARY_RULE(RemainderOp, [&] {
  Value r = b.make<FmodOp>(x, y);
  Value zero = b.scalarLike(0, r);
  Value differs = b.logicalAnd(
      b.cmp(ComparePredicate::ne, r, zero),
      b.cmp(ComparePredicate::ne, b.cmp(ComparePredicate::lt, r, zero),
            b.cmp(ComparePredicate::lt, y, b.scalarLike(0, y))));
  return b.where(differs, b.add(r, y), r);
}())
// Floats: floor of the quotient. Integers: the truncated quotient, one
// less where the remainder's sign differs from y's.
CLEAVE_BINARY_RULE(FloorDivideOp, [&] {
  if (isFloat(x))
    return b.make<FloorOp>(b.div(x, y));
  Value q = b.div(x, y);
  Value r = b.sub(x, b.mul(q, y));
  Value zero = b.scalarLike(0, r);
  Value differs = b.logicalAnd(
      b.cmp(ComparePredicate::ne, r, zero),
      b.cmp(ComparePredicate::ne, b.cmp(ComparePredicate::lt, r, zero),
            b.cmp(ComparePredicate::lt, y, b.scalarLike(0, y))));
  return b.where(differs, b.addTo(q, -1), q);
}())
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

//===----------------------------------------------------------------------===//
// Indexing. Negative indices wrap where PyTorch wraps them (take, index,
// index_put); an index still outside its dim becomes -1, which the gather
// or scatter kernel rejects at run time naming itself.
//===----------------------------------------------------------------------===//

namespace {

/// `index` as i64, negative entries plus `size`; entries still outside
/// [0, size) are flagged in `inside` (when given).
Value wrapIndex(Rules &b, Value index, int64_t size, Value *inside = nullptr) {
  index = b.cast(index, b.b.getI64Type());
  Value wrapped = b.where(b.cmp(ComparePredicate::lt, index, 0.0), b.addTo(index, size), index);
  if (inside)
    *inside = b.logicalAnd(b.cmp(ComparePredicate::ge, wrapped, 0.0),
                           b.cmp(ComparePredicate::lt, wrapped, static_cast<double>(size)));
  return wrapped;
}

/// A 1-D index of `n` entries as an index of `rank` dims, the entries
/// along `dim`, broadcast to `shape`.
Value indexAlong(Rules &b, Value index, int64_t dim, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> along(shape.size(), 1);
  along[dim] = typeOf(index).getNumElements();
  Value reshaped = b.reshape(index, along);
  return b.broadcastTo(reshaped, RankedTensorType::get(shape, typeOf(index).getElementType()));
}

Value gatherAlong(Rules &b, Value input, Value index, int64_t dim) {
  auto type = RankedTensorType::get(typeOf(index).getShape(), typeOf(input).getElementType());
  return b.make<GatherOp>(type, input, index, b.b.getI64IntegerAttr(dim));
}

bool adjacentDims(ArrayRef<int64_t> dims) {
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1)
      return false;
  return true;
}

/// The advanced-indexing frame shared by index and index_put: the input
/// permuted to [indexed dims..., other dims...] and viewed as [P, rest...],
/// and the position of every index entry among the P rows (-1 when an
/// index is out of range), flattened to [numel(B)].
struct IndexFrame {
  SmallVector<int64_t> perm, rest, broadcast;
  int64_t rows = 1;
  Value flatInput, rowIndex;
};

IndexFrame indexFrame(Rules &b, Value input, ValueRange indices, ArrayRef<int64_t> dims) {
  IndexFrame f;
  auto type = typeOf(input);
  f.perm.assign(dims.begin(), dims.end());
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!llvm::is_contained(dims, d)) {
      f.perm.push_back(d);
      f.rest.push_back(type.getDimSize(d));
    }
  for (int64_t d : dims)
    f.rows *= type.getDimSize(d);
  bool identity = true;
  for (size_t i = 0; i < f.perm.size(); ++i)
    identity &= f.perm[i] == static_cast<int64_t>(i);
  Value permuted = identity ? input : b.permute(input, f.perm);
  SmallVector<int64_t> flatShape{f.rows};
  flatShape.append(f.rest);
  f.flatInput = b.reshape(permuted, flatShape);

  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value index : indices)
    shapes.push_back(typeOf(index).getShape());
  f.broadcast = *broadcastShapes(shapes);
  auto bType = RankedTensorType::get(f.broadcast, b.b.getI64Type());
  Value row, allInside;
  int64_t stride = 1;
  for (int64_t k = static_cast<int64_t>(dims.size()) - 1; k >= 0; --k) {
    int64_t size = type.getDimSize(dims[k]);
    Value inside;
    Value wrapped = b.broadcastTo(wrapIndex(b, indices[k], size, &inside), bType);
    inside = b.broadcastTo(inside, RankedTensorType::get(f.broadcast, b.b.getI1Type()));
    Value term = stride == 1 ? wrapped : b.mulBy(wrapped, static_cast<double>(stride));
    row = row ? b.add(row, term) : term;
    allInside = allInside ? b.logicalAnd(allInside, inside) : inside;
    stride *= size;
  }
  row = b.where(allInside, row, b.scalar(-1, b.b.getI64Type()));
  f.rowIndex = b.reshape(row, {bType.getNumElements()});
  return f;
}

/// [numel(B), rest...] index of the frame's rows, for a gather or scatter
/// along dim 0 of the flat input.
Value rowIndexFor(Rules &b, const IndexFrame &f) {
  SmallVector<int64_t> shape{typeOf(f.rowIndex).getNumElements()};
  shape.append(f.rest);
  return indexAlong(b, f.rowIndex, 0, shape);
}

/// The permutation from [B..., rest...] to the result's order: B moves to
/// the first indexed dim when the indexed dims are adjacent.
SmallVector<int64_t> resultOrder(ArrayRef<int64_t> dims, int64_t broadcastRank,
                                 int64_t restRank) {
  SmallVector<int64_t> order;
  int64_t lead = adjacentDims(dims) ? dims.front() : 0;
  for (int64_t i = 0; i < lead; ++i)
    order.push_back(broadcastRank + i);
  for (int64_t i = 0; i < broadcastRank; ++i)
    order.push_back(i);
  for (int64_t i = broadcastRank + lead; i < broadcastRank + restRank; ++i)
    order.push_back(i);
  return order;
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

} // namespace

std::optional<SmallVector<int64_t>>
mlir::cleave::advancedIndexShape(ArrayRef<int64_t> input, ArrayRef<int64_t> dims,
                                 ArrayRef<SmallVector<int64_t>> indexShapes, std::string &why) {
  if (dims.empty() || dims.size() != indexShapes.size()) {
    why = "needs one dim per index tensor, and at least one";
    return std::nullopt;
  }
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(input.size()) ||
        (i > 0 && dims[i] <= dims[i - 1])) {
      why = "dims must be increasing dims of the input";
      return std::nullopt;
    }
  SmallVector<ArrayRef<int64_t>> shapes(indexShapes.begin(), indexShapes.end());
  auto broadcast = broadcastShapes(shapes);
  if (!broadcast) {
    why = "the index tensors do not broadcast together";
    return std::nullopt;
  }
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < static_cast<int64_t>(input.size()); ++d)
    if (!llvm::is_contained(dims, d))
      rest.push_back(d);
  SmallVector<int64_t> shape;
  int64_t lead = adjacentDims(dims) ? dims.front() : 0;
  for (int64_t d = 0; d < lead; ++d)
    shape.push_back(input[d]);
  shape.append(broadcast->begin(), broadcast->end());
  for (int64_t d : rest)
    if (d >= lead)
      shape.push_back(input[d]);
  return shape;
}

LogicalResult IndexSelectOp::verify() {
  auto input = typeOf(getInput()), index = typeOf(getIndex());
  int64_t dim = getDim(), rank = input.getRank();
  if (index.getRank() > 1)
    return emitOpError() << "index " << index << " must be 0-d or 1-D";
  if (!(rank == 0 && dim == 0) && (dim < 0 || dim >= rank))
    return emitOpError() << "dim " << dim << " is out of range for rank " << rank;
  SmallVector<int64_t> shape(input.getShape());
  if (rank > 0)
    shape[dim] = index.getNumElements();
  if (getType().getShape() != ArrayRef<int64_t>(shape) ||
      getType().getElementType() != input.getElementType())
    return emitOpError() << "result " << getType() << " must be the input with dim " << dim
                         << " of the index's size";
  return success();
}

LogicalResult IndexSelectOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  auto input = typeOf(getInput());
  if (input.getRank() == 0) {
    // A 0-d input takes index 0 only.
    Value x = b.reshape(getInput(), {1});
    Value y = gatherAlong(b, x, b.reshape(getIndex(), {1}), 0);
    results.push_back(b.reshape(y, {}));
    return success();
  }
  Value index = indexAlong(b, getIndex(), getDim(), getType().getShape());
  results.push_back(gatherAlong(b, getInput(), index, getDim()));
  return success();
}

LogicalResult TakeOp::verify() {
  if (getType().getShape() != typeOf(getIndex()).getShape() ||
      getType().getElementType() != typeOf(getInput()).getElementType())
    return emitOpError() << "result " << getType()
                         << " must have the index's shape and the input's element type";
  return success();
}

LogicalResult TakeOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  int64_t n = typeOf(getInput()).getNumElements();
  int64_t m = typeOf(getIndex()).getNumElements();
  Value flat = b.reshape(getInput(), {n});
  Value index = b.reshape(wrapIndex(b, getIndex(), n), {m});
  results.push_back(b.reshape(gatherAlong(b, flat, index, 0), getType().getShape()));
  return success();
}

/// Dims each once and in range.
static LogicalResult verifyDimList(Operation *op, ArrayRef<int64_t> dims, int64_t rank) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= rank)
      return op->emitOpError() << "dim " << dims[i] << " is out of range for rank " << rank;
    if (llvm::is_contained(dims.take_front(i), dims[i]))
      return op->emitOpError() << "dim " << dims[i] << " appears twice";
  }
  return success();
}

LogicalResult FlipOp::verify() {
  return verifyDimList(*this, getDims(), typeOf(getInput()).getRank());
}

LogicalResult FlipOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  auto type = typeOf(x);
  for (int64_t d : getDims()) {
    int64_t n = type.getDimSize(d);
    if (n <= 1)
      continue;
    SmallVector<int64_t> reversed(n);
    for (int64_t i = 0; i < n; ++i)
      reversed[i] = n - 1 - i;
    auto indexType = RankedTensorType::get({n}, b.b.getI64Type());
    Value index = b.make<ConstantOp>(DenseElementsAttr::get(indexType, ArrayRef(reversed)));
    x = gatherAlong(b, x, indexAlong(b, index, d, type.getShape()), d);
  }
  results.push_back(x);
  return success();
}

LogicalResult RollOp::verify() {
  if (getShifts().size() != getDims().size())
    return emitOpError() << "has " << getShifts().size() << " shifts for " << getDims().size()
                         << " dims";
  return verifyDimList(*this, getDims(), typeOf(getInput()).getRank());
}

LogicalResult RollOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  for (auto [shift, d] : llvm::zip(getShifts(), getDims())) {
    int64_t n = typeOf(x).getDimSize(d);
    int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
    if (s == 0)
      continue;
    // The last s elements first.
    Value tail = b.make<SliceOp>(x, d, n - s, n, 1);
    Value head = b.make<SliceOp>(x, d, 0, n - s, 1);
    x = b.make<ConcatOp>(ValueRange{tail, head}, d);
  }
  results.push_back(x);
  return success();
}

/// The shape of input[indices] for an index or index_put op, or an error.
static FailureOr<SmallVector<int64_t>> selectionShape(Operation *op, Value input,
                                                      ValueRange indices,
                                                      ArrayRef<int64_t> dims) {
  SmallVector<SmallVector<int64_t>> shapes;
  for (Value index : indices)
    shapes.emplace_back(typeOf(index).getShape());
  std::string why;
  auto shape = advancedIndexShape(typeOf(input).getShape(), dims, shapes, why);
  if (!shape)
    return op->emitOpError() << why;
  return *shape;
}

LogicalResult IndexOp::verify() {
  auto shape = selectionShape(*this, getInput(), getIndices(), getDims());
  if (failed(shape))
    return failure();
  if (getType().getShape() != ArrayRef<int64_t>(*shape) ||
      getType().getElementType() != typeOf(getInput()).getElementType())
    return emitOpError() << "result " << getType() << " must have shape ["
                         << ArrayRef<int64_t>(*shape) << "] and the input's element type";
  return success();
}

LogicalResult IndexOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  IndexFrame f = indexFrame(b, getInput(), getIndices(), getDims());
  Value rows = gatherAlong(b, f.flatInput, rowIndexFor(b, f), 0);
  SmallVector<int64_t> shape(f.broadcast);
  shape.append(f.rest);
  Value y = b.reshape(rows, shape);
  SmallVector<int64_t> order =
      resultOrder(getDims(), static_cast<int64_t>(f.broadcast.size()),
                  static_cast<int64_t>(f.rest.size()));
  if (!isIdentity(order))
    y = b.permute(y, order);
  results.push_back(y);
  return success();
}

LogicalResult IndexPutOp::verify() {
  auto shape = selectionShape(*this, getInput(), getIndices(), getDims());
  if (failed(shape))
    return failure();
  auto values = typeOf(getValues());
  if (values.getElementType() != typeOf(getInput()).getElementType())
    return emitOpError() << "values " << values << " must have the input's element type";
  auto joint = broadcastShapes({values.getShape(), ArrayRef<int64_t>(*shape)});
  if (!joint || ArrayRef<int64_t>(*joint) != ArrayRef<int64_t>(*shape))
    return emitOpError() << "values " << values << " do not broadcast to the selection ["
                         << ArrayRef<int64_t>(*shape) << "]";
  return success();
}

LogicalResult IndexPutOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value input = getInput();
  IndexFrame f = indexFrame(b, input, getIndices(), getDims());
  // The values in the selection's shape, then in the frame's [B..., rest...]
  // order, then [numel(B), rest...].
  std::string why;
  SmallVector<SmallVector<int64_t>> shapes;
  for (Value index : getIndices())
    shapes.emplace_back(typeOf(index).getShape());
  auto selection = *advancedIndexShape(typeOf(input).getShape(), getDims(), shapes, why);
  Value v = b.broadcastTo(getValues(),
                          RankedTensorType::get(selection, typeOf(input).getElementType()));
  SmallVector<int64_t> order = resultOrder(getDims(), static_cast<int64_t>(f.broadcast.size()),
                                           static_cast<int64_t>(f.rest.size()));
  if (!isIdentity(order)) {
    SmallVector<int64_t> inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i)
      inverse[order[i]] = static_cast<int64_t>(i);
    v = b.permute(v, inverse);
  }
  SmallVector<int64_t> flatShape{typeOf(f.rowIndex).getNumElements()};
  flatShape.append(f.rest);
  v = b.reshape(v, flatShape);
  auto reduce = getAccumulate() ? ScatterReduce::sum : ScatterReduce::none;
  Value scattered = b.make<ScatterOp>(f.flatInput, rowIndexFor(b, f), v, b.b.getI64IntegerAttr(0),
                                      ScatterReduceAttr::get(b.b.getContext(), reduce),
                                      b.b.getBoolAttr(true));
  // Back to the input's shape and dim order.
  SmallVector<int64_t> permutedShape;
  for (int64_t d : f.perm)
    permutedShape.push_back(typeOf(input).getDimSize(d));
  Value y = b.reshape(scattered, permutedShape);
  if (!isIdentity(f.perm)) {
    SmallVector<int64_t> inverse(f.perm.size());
    for (size_t i = 0; i < f.perm.size(); ++i)
      inverse[f.perm[i]] = static_cast<int64_t>(i);
    y = b.permute(y, inverse);
  }
  results.push_back(y);
  return success();
}

//===----------------------------------------------------------------------===//
// Padding, normalization and resampling.
//===----------------------------------------------------------------------===//

namespace {
Value sliceOf(Rules &b, Value x, int64_t dim, int64_t start, int64_t end) {
  if (start == 0 && end == typeOf(x).getDimSize(dim))
    return x;
  return b.make<SliceOp>(x, dim, start, end, 1);
}

bool validPadMode(StringRef mode) {
  return mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular";
}
} // namespace

LogicalResult PadOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  ArrayRef<int64_t> pads = getPads();
  if (pads.size() % 2 || static_cast<int64_t>(pads.size() / 2) > input.getRank())
    return emitOpError() << pads.size() << " pad sizes for rank " << input.getRank()
                         << ": expected pairs for at most every dim";
  if (!validPadMode(getMode()))
    return emitOpError() << "mode '" << getMode()
                         << "' is not constant, reflect, replicate or circular";
  SmallVector<int64_t> shape(input.getShape());
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = input.getRank() - 1 - i, size = shape[d];
    int64_t before = pads[2 * i], after = pads[2 * i + 1];
    if (getMode() == "reflect" && (before >= size || after >= size))
      return emitOpError() << "reflect padding of dim " << d << " by " << before << ", "
                           << after << " needs them below its size " << size;
    if (getMode() != "constant" && (before < 0 || after < 0))
      return emitOpError() << "negative padding crops only in constant mode";
    if ((getMode() == "replicate" || getMode() == "circular") && size == 0 &&
        before + after > 0)
      return emitOpError() << getMode() << " padding of the empty dim " << d;
    if (getMode() == "circular" && (before > size || after > size))
      return emitOpError() << "circular padding of dim " << d << " wraps more than once";
    shape[d] = size + before + after;
    if (shape[d] < 0)
      return emitOpError() << "crops dim " << d << " of size " << size << " below zero";
  }
  auto result = llvm::cast<RankedTensorType>(getType());
  if (result.getShape() != ArrayRef<int64_t>(shape) ||
      result.getElementType() != input.getElementType())
    return emitOpError() << "result type " << result << " is not the padded input's";
  return success();
}

LogicalResult PadOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  ArrayRef<int64_t> pads = getPads();
  StringRef mode = getMode();
  int64_t rank = typeOf(x).getRank();
  for (size_t i = 0; i < pads.size() / 2; ++i) {
    int64_t d = rank - 1 - i, before = pads[2 * i], after = pads[2 * i + 1];
    int64_t size = typeOf(x).getDimSize(d);
    // Crops first (constant mode only).
    x = sliceOf(b, x, d, std::max<int64_t>(-before, 0), size - std::max<int64_t>(-after, 0));
    before = std::max<int64_t>(before, 0);
    after = std::max<int64_t>(after, 0);
    size = typeOf(x).getDimSize(d);
    if (before == 0 && after == 0)
      continue;
    auto piece = [&](int64_t n) {
      SmallVector<int64_t> shape(typeOf(x).getShape());
      shape[d] = n;
      return RankedTensorType::get(shape, typeOf(x).getElementType());
    };
    SmallVector<Value> parts;
    auto side = [&](int64_t n, bool front) {
      if (n == 0)
        return;
      if (mode == "constant") {
        parts.push_back(b.splat(getValue().convertToDouble(), piece(n)));
      } else if (mode == "replicate") {
        Value edge = front ? sliceOf(b, x, d, 0, 1) : sliceOf(b, x, d, size - 1, size);
        parts.push_back(b.broadcastTo(edge, piece(n)));
      } else if (mode == "circular") {
        parts.push_back(front ? sliceOf(b, x, d, size - n, size) : sliceOf(b, x, d, 0, n));
      } else { // reflect: the mirror image without the edge element
        for (int64_t j = 0; j < n; ++j) {
          int64_t at = front ? n - j : size - 2 - j;
          parts.push_back(sliceOf(b, x, d, at, at + 1));
        }
      }
    };
    side(before, true);
    parts.push_back(x);
    side(after, false);
    x = b.make<ConcatOp>(parts, d);
  }
  results.push_back(x);
  return success();
}

LogicalResult Conv3dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferConvolutionType(loc, 3, adaptor.getInput(), adaptor.getWeight(),
                              adaptor.getBias(), adaptor.getStride(), adaptor.getPadding(),
                              adaptor.getDilation(), adaptor.getGroupsAttr().getInt(), types);
}

// One conv2d over the frames each output frame reads, stacked as channels:
// output frame t reads input frames t·s + k·d (k < KD) of the input padded
// by p zero frames on each side, a strided slice per k. The slices are
// stacked into the channel dim, group-major ([g, KD, C/g] per output frame),
// and the weight's depth moved beside its input channels ([F, KD·C/g, KH,
// KW]), so a single conv2d with the same groups sums over depth, channels
// and window at once. The frames move to [N, D, C, H, W] first so that each
// slice keeps its frames contiguous.
LogicalResult Conv3dOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput(), w = getWeight();
  auto xt = typeOf(x), wt = typeOf(w), yt = typeOf(getResult());
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), h = xt.getDimSize(3),
          wd = xt.getDimSize(4);
  int64_t f = wt.getDimSize(0), cg = wt.getDimSize(1), kd = wt.getDimSize(2),
          kh = wt.getDimSize(3), kw = wt.getDimSize(4);
  int64_t od = yt.getDimSize(2), oh = yt.getDimSize(3), ow = yt.getDimSize(4);
  int64_t g = getGroups();
  ArrayRef<int64_t> stride = getStride(), padding = getPadding(), dilation = getDilation();
  Type et = xt.getElementType();
  Value frames = b.permute(x, {0, 2, 1, 3, 4});
  if (padding[0] > 0) {
    Value zeros = b.splat(0, RankedTensorType::get({n, padding[0], c, h, wd}, et));
    frames = b.make<ConcatOp>(ValueRange{zeros, frames, zeros}, int64_t(1));
  }
  SmallVector<Value> taps;
  for (int64_t k = 0; k < kd; ++k) {
    int64_t first = k * dilation[0];
    Value slab = b.make<SliceOp>(frames, 1, first, first + stride[0] * (od - 1) + 1, stride[0]);
    taps.push_back(b.reshape(slab, {n, od, 1, c, h, wd}));
  }
  // [N, OD, KD, C, H, W] -> [N·OD, g·KD·C/g, H, W], group-major.
  Value stacked = kd == 1 ? taps[0] : b.make<ConcatOp>(taps, int64_t(2));
  if (kd > 1 && g > 1)
    stacked = b.permute(b.reshape(stacked, {n, od, kd, g, cg, h, wd}), {0, 1, 3, 2, 4, 5, 6});
  Value input = b.reshape(stacked, {n * od, kd * c, h, wd});
  // [F, C/g, KD, KH, KW] -> [F, KD·C/g, KH, KW].
  Value kernel = kd == 1 ? w : b.permute(w, {0, 2, 1, 3, 4});
  kernel = b.reshape(kernel, {f, kd * cg, kh, kw});
  Value y = b.make<Conv2dOp>(input, kernel, getBias(),
                             b.b.getDenseI64ArrayAttr({stride[1], stride[2]}),
                             b.b.getDenseI64ArrayAttr({padding[1], padding[2]}),
                             b.b.getDenseI64ArrayAttr({dilation[1], dilation[2]}), g);
  results.push_back(b.permute(b.reshape(y, {n, od, f, oh, ow}), {0, 2, 1, 3, 4}));
  return success();
}

LogicalResult GroupNormOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  int64_t groups = getNumGroups();
  if (input.getRank() < 2)
    return emitOpError() << "expected an [N, C, ...] input, got " << input;
  int64_t c = input.getDimSize(1);
  if (groups <= 0 || c % groups)
    return emitOpError() << c << " channels do not fall into " << groups << " groups";
  for (Value v : {getWeight(), getBias()})
    if (v && llvm::cast<RankedTensorType>(v.getType()).getShape() != ArrayRef<int64_t>{c})
      return emitOpError() << "weight and bias need one value per channel (" << c << ")";
  return success();
}

// (x - mean) * rsqrt(var + eps) per (sample, group), then weight and bias
// per channel.
LogicalResult GroupNormOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  auto type = typeOf(x);
  int64_t n = type.getDimSize(0), c = type.getDimSize(1), g = getNumGroups();
  Value grouped = b.reshape(x, {n, g, type.getNumElements() / std::max<int64_t>(n * g, 1)});
  Value mean = b.reduceMean(grouped, {2}, /*keepdim=*/true);
  Value centered = b.sub(grouped, mean);
  Value var = b.reduceMean(b.mul(centered, centered), {2}, /*keepdim=*/true);
  Value normalized = b.mul(centered, b.make<RsqrtOp>(b.addTo(var, getEps().convertToDouble())));
  Value y = b.reshape(normalized, type.getShape());
  SmallVector<int64_t> perChannel(type.getRank(), 1);
  perChannel[1] = c;
  if (getWeight())
    y = b.mul(y, b.reshape(getWeight(), perChannel));
  if (getBias())
    y = b.add(y, b.reshape(getBias(), perChannel));
  results.push_back(y);
  return success();
}

namespace {
/// PyTorch's source-index scale for one dim (area_pixel_compute_scale and
/// compute_scales_value): `given` > 0 is the user's scale factor.
float resizeScale(int64_t in, int64_t out, bool alignCorners, double given, bool nearest) {
  if (!nearest && alignCorners)
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return given > 0 ? static_cast<float>(1.0 / given)
                   : static_cast<float>(in) / static_cast<float>(out);
}

float cubicNear(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
float cubicFar(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

/// The [in, out] matrix whose column j weighs the inputs output j reads.
std::vector<float> resizeMatrix(StringRef mode, int64_t in, int64_t out, bool alignCorners,
                                double given) {
  std::vector<float> m(in * out, 0.0f);
  auto at = [&](int64_t i, int64_t j) -> float & { return m[i * out + j]; };
  bool nearest = mode.starts_with("nearest");
  float scale = resizeScale(in, out, alignCorners, given, nearest);
  for (int64_t j = 0; j < out; ++j) {
    if (nearest) {
      float src = mode == "nearest_exact" ? (j + 0.5f) * scale : j * scale;
      at(std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in - 1), j) = 1.0f;
      continue;
    }
    float src = alignCorners ? scale * j : scale * (j + 0.5f) - 0.5f;
    if (mode == "linear") {
      src = std::max(src, 0.0f);
      int64_t i0 = static_cast<int64_t>(src);
      int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      float t = src - i0;
      at(i0, j) += 1.0f - t;
      at(i1, j) += t;
      continue;
    }
    // cubic: four taps around floor(src), indices clamped to the edges.
    const float a = -0.75f;
    int64_t i = static_cast<int64_t>(std::floor(src));
    float t = src - i;
    float w[4] = {cubicFar(t + 1, a), cubicNear(t, a), cubicNear(1 - t, a), cubicFar(2 - t, a)};
    for (int k = 0; k < 4; ++k)
      at(std::clamp<int64_t>(i - 1 + k, 0, in - 1), j) += w[k];
  }
  return m;
}
} // namespace

LogicalResult InterpolateOp::verify() {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  auto result = llvm::cast<RankedTensorType>(getType());
  StringRef mode = getMode();
  if (mode != "nearest" && mode != "nearest_exact" && mode != "linear" && mode != "cubic")
    return emitOpError() << "mode '" << mode << "' is not nearest, nearest_exact, linear or cubic";
  if (input.getRank() < 3 || result.getRank() != input.getRank() ||
      result.getShape().take_front(2) != input.getShape().take_front(2))
    return emitOpError() << "resamples the dims after [N, C]: " << input << " to " << result;
  if (static_cast<int64_t>(getScales().size()) != input.getRank() - 2)
    return emitOpError() << "needs one scale per spatial dim (0 for none)";
  for (int64_t d = 2; d < input.getRank(); ++d)
    if (input.getDimSize(d) == 0 || result.getDimSize(d) == 0)
      return emitOpError() << "resamples an empty dim " << d;
  return success();
}

// One matmul per resampled dim: the dim moved last, times the constant
// [in, out] weights, moved back.
LogicalResult InterpolateOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  auto result = typeOf(getResult());
  int64_t rank = result.getRank();
  for (int64_t d = 2; d < rank; ++d) {
    int64_t in = typeOf(x).getDimSize(d), out = result.getDimSize(d);
    if (in == out && getScales()[d - 2] <= 0)
      continue; // the identity at the same size, whatever the mode
    std::vector<float> weights =
        resizeMatrix(getMode(), in, out, getAlignCorners(), getScales()[d - 2]);
    Type et = typeOf(x).getElementType();
    auto f32 = RankedTensorType::get({in, out}, b.b.getF32Type());
    Value matrix = b.make<ConstantOp>(DenseElementsAttr::get(f32, ArrayRef<float>(weights)));
    matrix = b.cast(matrix, et);
    SmallVector<int64_t> order;
    for (int64_t k = 0; k < rank; ++k)
      if (k != d)
        order.push_back(k);
    order.push_back(d);
    SmallVector<int64_t> back(rank);
    for (int64_t k = 0; k < rank; ++k)
      back[order[k]] = k;
    Value moved = d == rank - 1 ? x : b.permute(x, order);
    Value resized = b.make<MatmulOp>(moved, matrix);
    x = d == rank - 1 ? resized : b.permute(resized, back);
  }
  results.push_back(x);
  return success();
}

//===----------------------------------------------------------------------===//
// Losses: the per-element loss (PyTorch's formulas), then the reduction.
//===----------------------------------------------------------------------===//

namespace {
/// `losses` reduced by `reduction` (none keeps them).
Value reduceLosses(Rules &b, Value losses, StringRef reduction) {
  int64_t rank = typeOf(losses).getRank();
  if (reduction == "none" || rank == 0)
    return losses;
  SmallVector<int64_t> dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  return reduction == "mean" ? b.reduceMean(losses, dims, false) : b.reduceSum(losses, dims, false);
}

/// The per-element losses broadcast to the pair's shape (a loss of an
/// input against a broadcast target still has one loss per pair).
Value pairShaped(Rules &b, Value losses, Value input, Value target) {
  SmallVector<Type> types;
  if (failed(inferBroadcastType(std::nullopt, {input.getType(), target.getType()}, {}, nullptr,
                                types)))
    return losses;
  return b.broadcastTo(losses, llvm::cast<RankedTensorType>(types.front()));
}
} // namespace

#define CLEAVE_LOSS_RULE(OP, ...)                                                             \
  LogicalResult OP::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {          \
    Rules b = rulesFor(builder, *this);                                                       \
    Value x = getInput(), y = getTarget();                                                    \
    Value losses = pairShaped(b, __VA_ARGS__, x, y);                                          \
    results.push_back(reduceLosses(b, losses, getReduction()));                               \
    return success();                                                                         \
  }

CLEAVE_LOSS_RULE(L1LossOp, b.absOf(b.sub(x, y)))
// beta = 0 is the l1 loss (PyTorch's special case).
CLEAVE_LOSS_RULE(SmoothL1LossOp, [&] {
  double beta = getBeta().convertToDouble();
  Value z = b.absOf(b.sub(x, y));
  if (beta == 0.0)
    return z;
  Value quadratic = b.div(b.mulBy(b.mul(z, z), 0.5), b.scalarLike(beta, z));
  return b.where(b.cmp(ComparePredicate::lt, z, beta), quadratic, b.addTo(z, -0.5 * beta));
}())
CLEAVE_LOSS_RULE(HuberLossOp, [&] {
  double delta = getDelta().convertToDouble();
  Value z = b.absOf(b.sub(x, y));
  return b.where(b.cmp(ComparePredicate::lt, z, delta), b.mulBy(b.mul(z, z), 0.5),
                 b.mulBy(b.addTo(z, -0.5 * delta), delta));
}())
CLEAVE_LOSS_RULE(SoftMarginLossOp, b.make<Log1pOp>(b.make<ExpOp>(b.neg(b.mul(x, y)))))
CLEAVE_LOSS_RULE(KlDivOp, getLogTarget()
                              ? b.mul(b.make<ExpOp>(y), b.sub(y, x))
                              : b.sub(b.make<XlogyOp>(y, y), b.mul(y, x)))
// PyTorch clamps the logs at -100 so that 0 and 1 give finite losses.
CLEAVE_LOSS_RULE(BinaryCrossEntropyOp, [&] {
  Value logX = b.maximum(b.make<LogOp>(x), b.scalarLike(-100, x));
  Value log1mX = b.maximum(b.make<Log1pOp>(b.neg(x)), b.scalarLike(-100, x));
  Value loss = b.sub(b.mul(b.addTo(y, -1), log1mX), b.mul(y, logX));
  return getWeight() ? b.mul(loss, getWeight()) : loss;
}())
// PyTorch's stable form: m = max(-x, 0) keeps the exponentials below 1.
CLEAVE_LOSS_RULE(BinaryCrossEntropyWithLogitsOp, [&] {
  Value m = b.maximum(b.neg(x), b.scalarLike(0, x));
  Value softplus = b.add(b.make<LogOp>(b.add(b.make<ExpOp>(b.neg(m)),
                                             b.make<ExpOp>(b.sub(b.neg(x), m)))),
                         m);
  Value oneMinusY = b.sub(b.scalarLike(1, y), y);
  Value loss;
  if (Value p = getPosWeight()) {
    Value logWeight = b.addTo(b.mul(b.addTo(p, -1), y), 1);
    loss = b.add(b.mul(oneMinusY, x), b.mul(logWeight, softplus));
  } else {
    loss = b.add(b.mul(oneMinusY, x), softplus);
  }
  return getWeight() ? b.mul(loss, getWeight()) : loss;
}())
#undef CLEAVE_LOSS_RULE

//===----------------------------------------------------------------------===//
// Order statistics.
//===----------------------------------------------------------------------===//

namespace {
/// `x` sorted ascending along `dim`: the values and their indices.
SortOp sortAlong(Rules &b, Value x, int64_t dim) {
  return b.b.create<SortOp>(b.loc, x, b.b.getI64IntegerAttr(dim), b.b.getBoolAttr(false));
}

/// The dims of a rank-`rank` tensor with `dim` moved last.
SmallVector<int64_t> dimLast(int64_t rank, int64_t dim) {
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  perm.push_back(dim);
  return perm;
}

/// The positions 0..n-1 as an i64 constant.
Value positions(Rules &b, int64_t n) {
  SmallVector<int64_t> values(n);
  std::iota(values.begin(), values.end(), int64_t(0));
  auto type = RankedTensorType::get({n}, b.b.getI64Type());
  return b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(type, ArrayRef(values)));
}
} // namespace

// The element at a computed position k of each sorted slice (a gather):
// median: k = (n - 1) / 2, or the first NaN (n - NaNs) where there is one;
// nanmedian: k = (c - 1) / 2 of the c numbers, 0 when there are none.
LogicalResult MedianOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  int64_t dim = getDim(), n = typeOf(x).getDimSize(dim);
  Type i64 = builder.getI64Type();
  SortOp sorted = sortAlong(b, x, dim);
  SmallVector<int64_t> kept(typeOf(x).getShape());
  kept[dim] = 1;
  Value k = b.splat(static_cast<double>((n - 1) / 2), RankedTensorType::get(kept, i64));
  if (isFloat(x)) {
    Value nans = b.reduceSum(b.cast(b.isNan(x), i64), {dim}, /*keepdim=*/true);
    Value numbers = b.sub(b.scalar(static_cast<double>(n), i64), nans);
    if (getIgnoreNan())
      k = b.where(b.cmp(ComparePredicate::gt, numbers, 0.0),
                  b.div(b.addTo(numbers, -1), b.scalar(2, i64)), b.scalar(0, i64));
    else
      k = b.where(b.cmp(ComparePredicate::gt, nans, 0.0), numbers, k);
  }
  results.push_back(b.dropDims(gatherAlong(b, sorted.getValues(), k, dim), getValues().getType()));
  results.push_back(
      b.dropDims(gatherAlong(b, sorted.getIndices(), k, dim), getIndices().getType()));
  return success();
}

// Counts pairwise: count_i = #{j : x_j == x_i} over a slice moved last; the
// mode is the smallest value of the largest count, its index the last one
// holding it. Bools count as i64.
LogicalResult ModeOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Type et = typeOf(x).getElementType(), i64 = builder.getI64Type();
  int64_t rank = typeOf(x).getRank(), dim = getDim(), n = typeOf(x).getDimSize(dim);
  Value v = et.isInteger(1) ? b.cast(x, i64) : x;
  Value t = b.permute(v, dimLast(rank, dim)); // [rest..., n]
  SmallVector<int64_t> column(typeOf(t).getShape()), row(typeOf(t).getShape());
  column.push_back(1);
  row.insert(row.end() - 1, 1);
  Value equal = b.compare(ComparePredicate::eq, b.reshape(t, column), b.reshape(t, row));
  Value counts = b.reduceSum(b.cast(equal, i64), {rank}, /*keepdim=*/false); // [rest..., n]
  Value most = b.reduceMax(counts, {rank - 1}, /*keepdim=*/true);
  Value candidate = b.compare(ComparePredicate::eq, counts, most);
  // Non-candidates become a value no candidate is above: +inf, or the
  // slice's maximum for integers.
  Value above = isFloat(v) ? b.scalarLike(kInf, t) : b.reduceMax(t, {rank - 1}, true);
  Value masked = b.where(candidate, t, above);
  Value mode = b.neg(b.reduceMax(b.neg(masked), {rank - 1}, /*keepdim=*/true));
  Value at = b.where(b.compare(ComparePredicate::eq, t, mode), positions(b, n),
                     b.scalar(0, i64));
  Value index = b.reduceMax(at, {rank - 1}, /*keepdim=*/true);
  results.push_back(b.reshape(b.cast(mode, et), getValues().getType().getShape()));
  results.push_back(b.reshape(index, getIndices().getType().getShape()));
  return success();
}

LogicalResult QuantileOp::verify() {
  auto input = typeOf(getInput()), q = typeOf(getQ());
  int64_t dim = getDim();
  if (dim < 0 || dim >= input.getRank())
    return emitOpError() << "dim " << dim << " is out of range for rank " << input.getRank();
  if (input.getDimSize(dim) == 0)
    return emitOpError() << "cannot take a quantile over the empty dim " << dim << " of "
                         << input;
  if (q.getRank() > 1 || q.getElementType() != input.getElementType())
    return emitOpError() << "q must be a 0-d or 1-D tensor of the input's element type, got "
                         << q;
  if (!llvm::is_contained({"linear", "lower", "higher", "nearest", "midpoint"},
                          getInterpolation()))
    return emitOpError() << "interpolation must be linear, lower, higher, nearest or midpoint, "
                            "got '"
                         << getInterpolation() << "'";
  return success();
}

// PyTorch's quantile on the sorted slice moved last: rank = q (n - 1), the
// last index where the slice holds a NaN (or q (c - 1) over the c numbers,
// at least 0, with ignore_nan); lower/higher/nearest round the rank (nearest
// to even, as torch.round), then the element below it is lerped towards
// the one above by the fraction (linear) or by 0.5 (midpoint).
LogicalResult QuantileOp::decompose(OpBuilder &builder, SmallVectorImpl<Value> &results) {
  Rules b = rulesFor(builder, *this);
  Value x = getInput();
  Type et = typeOf(x).getElementType(), i64 = builder.getI64Type();
  int64_t rank = typeOf(x).getRank(), dim = getDim(), n = typeOf(x).getDimSize(dim);
  Value s = b.permute(sortAlong(b, x, dim).getValues(), dimLast(rank, dim)); // [rest..., n]
  int64_t qs = typeOf(getQ()).getNumElements();
  SmallVector<int64_t> qShape(rank + 1, 1), out{qs}, data{qs};
  qShape[0] = qs;
  llvm::append_range(out, typeOf(s).getShape().drop_back());
  llvm::append_range(data, typeOf(s).getShape());
  out.push_back(1);
  Value q = b.reshape(getQ(), qShape);
  Value nan = b.cast(b.isNan(s), et);
  Value r;
  if (getIgnoreNan()) {
    Value numbers = b.sub(b.scalar(static_cast<double>(n), et), b.reduceSum(nan, {rank - 1}, true));
    r = b.mul(q, b.addTo(numbers, -1));
    r = b.where(b.cmp(ComparePredicate::lt, r, 0.0), b.scalarLike(0, r), r);
  } else {
    Value hasNan = b.cmp(ComparePredicate::gt, b.reduceMax(nan, {rank - 1}, true), 0.0);
    r = b.where(hasNan, b.scalar(static_cast<double>(n - 1), et),
                b.mulBy(q, static_cast<double>(n - 1)));
  }
  r = b.broadcastTo(r, RankedTensorType::get(out, et));
  StringRef mode = getInterpolation();
  if (mode == "lower")
    r = b.make<FloorOp>(r);
  else if (mode == "higher")
    r = b.make<CeilOp>(r);
  else if (mode == "nearest")
    r = b.make<RoundOp>(r);
  Value sorted = b.broadcastTo(s, RankedTensorType::get(data, et));
  Value below = b.cast(r, i64);
  Value result = gatherAlong(b, sorted, below, rank);
  if (mode == "linear" || mode == "midpoint") {
    Value weight = mode == "midpoint" ? b.scalar(0.5, et) : b.sub(r, b.cast(below, et));
    Value above = gatherAlong(b, sorted, b.cast(b.make<CeilOp>(r), i64), rank);
    result = b.make<LerpOp>(result, above, weight);
  }
  results.push_back(b.reshape(result, getType().getShape()));
  return success();
}
