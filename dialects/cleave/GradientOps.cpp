//===- GradientOps.cpp - each op's vector-Jacobian product ----------------===//
//
// GradientOpInterface::buildGradients for every differentiable cleave op: the
// gradients of its operands from those of its results, written as cleave
// ops. The formulas follow PyTorch's derivatives (tools/autograd's
// derivatives.yaml) including their evaluation order where it changes the
// rounding, so that training matches PyTorch step by step. Broadcast
// operands get the gradient summed back to their shape.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveBuilder.h"
#include "dialects/cleave/CleaveDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::cleave;

LogicalResult mlir::cleave::noGradientRule(Operation *op) {
  return op->emitError() << "no gradient rule for " << op->getName()
                         << ": training through this op is not supported";
}


//===----------------------------------------------------------------------===//
// Unary elementwise.
//===----------------------------------------------------------------------===//

#define CLEAVE_UNARY_GRADIENT(OP, BODY)                                                       \
  LogicalResult OP::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,                    \
                                   SmallVectorImpl<Value> &og) {                              \
    if (!rg[0] || !isFloat(getInput()))                                                       \
      return success();                                                                       \
    CleaveBuilder b{builder, getLoc()};                                                             \
    Value g = rg[0], x = getInput(), y = getResult();                                         \
    (void)x;                                                                                  \
    (void)y;                                                                                  \
    og[0] = BODY;                                                                             \
    return success();                                                                         \
  }

CLEAVE_UNARY_GRADIENT(NegOp, b.neg(g))
// grad * sgn(x).
CLEAVE_UNARY_GRADIENT(AbsOp, b.where(b.compare(ComparePredicate::gt, x, b.scalarLike(0, x)), g,
                                     b.where(b.compare(ComparePredicate::lt, x, b.scalarLike(0, x)),
                                             b.neg(g), b.scalarLike(0, g))))
// threshold_backward(grad, result, 0).
CLEAVE_UNARY_GRADIENT(ReluOp, b.make<ReluBackwardOp>(g.getType(), g, y))
CLEAVE_UNARY_GRADIENT(SiluOp, b.make<SiluBackwardOp>(x.getType(), g, x))
// grad * (1 - y) * y.
CLEAVE_UNARY_GRADIENT(SigmoidOp, b.mul(b.mul(g, b.sub(b.scalarLike(1, y), y)), y))
// grad * (1 - y * y).
CLEAVE_UNARY_GRADIENT(TanhOp, b.mul(g, b.sub(b.scalarLike(1, y), b.mul(y, y))))
CLEAVE_UNARY_GRADIENT(ExpOp, b.mul(g, y))
CLEAVE_UNARY_GRADIENT(LogOp, b.div(g, x))
// grad / (2 * result).
CLEAVE_UNARY_GRADIENT(SqrtOp, b.div(g, b.mul(b.scalarLike(2, y), y)))
// -0.5 * grad * result^3.
CLEAVE_UNARY_GRADIENT(RsqrtOp, b.mul(b.mul(b.scalarLike(-0.5, g), g), b.mul(b.mul(y, y), y)))
CLEAVE_UNARY_GRADIENT(SinOp, b.mul(g, b.make<CosOp>(x)))
// grad * -sin(x).
CLEAVE_UNARY_GRADIENT(CosOp, b.mul(g, b.neg(b.make<SinOp>(x))))
// 2 / sqrt(pi) * exp(-x^2) * grad.
CLEAVE_UNARY_GRADIENT(ErfOp, b.mul(b.mul(b.scalarLike(2.0 / std::sqrt(M_PI), x),
                                         b.make<ExpOp>(b.neg(b.mul(x, x)))),
                                   g))
// Piecewise constant: zeros_like(grad), as PyTorch.
CLEAVE_UNARY_GRADIENT(FloorOp, b.broadcastTo(b.scalarLike(0, g), typeOf(g)))
CLEAVE_UNARY_GRADIENT(CeilOp, b.broadcastTo(b.scalarLike(0, g), typeOf(g)))
CLEAVE_UNARY_GRADIENT(RoundOp, b.broadcastTo(b.scalarLike(0, g), typeOf(g)))
CLEAVE_UNARY_GRADIENT(TruncOp, b.broadcastTo(b.scalarLike(0, g), typeOf(g)))
CLEAVE_UNARY_GRADIENT(SignOp, b.broadcastTo(b.scalarLike(0, g), typeOf(g)))
// grad / (self + 1).
CLEAVE_UNARY_GRADIENT(Log1pOp, b.div(g, b.add(x, b.scalarLike(1, x))))
// grad * (result + 1).
CLEAVE_UNARY_GRADIENT(Expm1Op, b.mul(g, b.add(y, b.scalarLike(1, y))))
// grad * (1 + result^2).
CLEAVE_UNARY_GRADIENT(TanOp, b.mul(g, b.add(b.scalarLike(1, y), b.mul(y, y))))
// grad * rsqrt(-self * self + 1).
CLEAVE_UNARY_GRADIENT(AsinOp,
                      b.mul(g, b.make<RsqrtOp>(b.add(b.mul(b.neg(x), x), b.scalarLike(1, x)))))
// grad * -rsqrt(-self * self + 1).
CLEAVE_UNARY_GRADIENT(AcosOp, b.mul(g, b.neg(b.make<RsqrtOp>(
                                           b.add(b.mul(b.neg(x), x), b.scalarLike(1, x))))))
// grad / (self * self + 1).
CLEAVE_UNARY_GRADIENT(AtanOp, b.div(g, b.add(b.mul(x, x), b.scalarLike(1, x))))
CLEAVE_UNARY_GRADIENT(SinhOp, b.mul(g, b.make<CoshOp>(x)))
CLEAVE_UNARY_GRADIENT(CoshOp, b.mul(g, b.make<SinhOp>(x)))
// grad * rsqrt(self^2 + 1).
CLEAVE_UNARY_GRADIENT(AsinhOp,
                      b.mul(g, b.make<RsqrtOp>(b.add(b.mul(x, x), b.scalarLike(1, x)))))
// grad * rsqrt(self^2 - 1).
CLEAVE_UNARY_GRADIENT(AcoshOp,
                      b.mul(g, b.make<RsqrtOp>(b.sub(b.mul(x, x), b.scalarLike(1, x)))))
// grad * 1 / (1 - self^2).
CLEAVE_UNARY_GRADIENT(AtanhOp, b.div(g, b.sub(b.scalarLike(1, x), b.mul(x, x))))
// -grad * (result * result).
CLEAVE_UNARY_GRADIENT(ReciprocalOp, b.mul(b.neg(g), b.mul(y, y)))
// Special functions, as PyTorch's derivatives.yaml.
namespace {
Value polygammaOf(CleaveBuilder &b, int64_t n, Value x) {
  return b.b.create<PolygammaOp>(b.loc, x.getType(), x, b.b.getI64IntegerAttr(n)).getResult();
}
/// where(x == 0, value, otherwise).
Value atZero(CleaveBuilder &b, Value x, double value, Value otherwise) {
  return b.where(b.compare(ComparePredicate::eq, x, b.scalarLike(0, x)), b.scalarLike(value, x),
                 otherwise);
}
} // namespace
// grad * digamma(self).
CLEAVE_UNARY_GRADIENT(LgammaOp, b.mul(g, polygammaOf(b, 0, x)))
// grad * polygamma(n + 1, self).
CLEAVE_UNARY_GRADIENT(PolygammaOp, b.mul(g, polygammaOf(b, static_cast<int64_t>(getN()) + 1, x)))
// 0.5 * sqrt(pi) * exp(self.erfinv().pow(2)) * grad.
CLEAVE_UNARY_GRADIENT(ErfinvOp, b.mul(b.mul(b.scalarLike(0.5 * std::sqrt(M_PI), y),
                                            b.make<ExpOp>(b.mul(y, y))),
                                      g))
// grad * i1(self).
CLEAVE_UNARY_GRADIENT(I0Op, b.mul(g, b.make<I1Op>(x)))
// grad * (i1e(self) - sgn(self) * result).
CLEAVE_UNARY_GRADIENT(I0eOp, b.mul(g, b.sub(b.make<I1eOp>(x), b.mul(b.make<SignOp>(x), y))))
// grad * (i0(self) - result / self), 0.5 at self == 0.
CLEAVE_UNARY_GRADIENT(I1Op, b.mul(g, atZero(b, x, 0.5, b.sub(b.make<I0Op>(x), b.div(y, x)))))
// grad * (i0e(self) - result * (sgn(self) + 1 / self)), 0.5 at self == 0.
CLEAVE_UNARY_GRADIENT(I1eOp,
                      b.mul(g, atZero(b, x, 0.5,
                                      b.sub(b.make<I0eOp>(x),
                                            b.mul(y, b.add(b.make<SignOp>(x),
                                                           b.make<ReciprocalOp>(x)))))))
// grad * sqrt(2 pi) * exp(result^2 / 2).
CLEAVE_UNARY_GRADIENT(NdtriOp, b.mul(g, b.mul(b.scalarLike(std::sqrt(2 * M_PI), y),
                                              b.make<ExpOp>(b.mul(b.scalarLike(0.5, y),
                                                                  b.mul(y, y))))))
// (2 * self * result - 2 / sqrt(pi)) * grad.
CLEAVE_UNARY_GRADIENT(ErfcxOp, b.mul(b.sub(b.mul(b.scalarLike(2, x), b.mul(x, y)),
                                           b.scalarLike(2 / std::sqrt(M_PI), x)),
                                     g))
#undef CLEAVE_UNARY_GRADIENT
#define CLEAVE_NOT_DIFFERENTIABLE(OP)                                                         \
  LogicalResult OP::buildGradients(OpBuilder &, ArrayRef<Value> rg, SmallVectorImpl<Value> &) { \
    if (!rg[0])                                                                               \
      return success();                                                                       \
    return emitOpError("is not differentiable (PyTorch defines no derivative for it)");       \
  }
CLEAVE_NOT_DIFFERENTIABLE(BesselJ0Op)
CLEAVE_NOT_DIFFERENTIABLE(BesselJ1Op)
CLEAVE_NOT_DIFFERENTIABLE(BesselY0Op)
CLEAVE_NOT_DIFFERENTIABLE(BesselY1Op)
CLEAVE_NOT_DIFFERENTIABLE(ModifiedBesselK0Op)
CLEAVE_NOT_DIFFERENTIABLE(ModifiedBesselK1Op)
CLEAVE_NOT_DIFFERENTIABLE(ScaledModifiedBesselK0Op)
CLEAVE_NOT_DIFFERENTIABLE(ScaledModifiedBesselK1Op)
CLEAVE_NOT_DIFFERENTIABLE(AiryAiOp)
CLEAVE_NOT_DIFFERENTIABLE(OrthogonalPolynomialOp)
CLEAVE_NOT_DIFFERENTIABLE(NextafterOp)
#undef CLEAVE_NOT_DIFFERENTIABLE


LogicalResult NotOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success(); // booleans carry no gradient
}

LogicalResult DropoutOp::buildGradients(OpBuilder &, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  og[0] = rg[0]; // the identity of a plan's forward
  return success();
}

LogicalResult DropoutTrainOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                             SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  // The same mask, regenerated from the same (seed, step, stream, samples).
  og[0] = builder.create<DropoutTrainOp>(getLoc(), rg[0].getType(), rg[0], getStep(),
                                         getSampleOffset(), getPAttr(), getSeedAttr(),
                                         getStreamAttr(), getSamplesAttr());
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  og[0] = builder.create<GeluBackwardOp>(getLoc(), getInput().getType(), rg[0], getInput(),
                                         getApproximationAttr());
  return success();
}

LogicalResult CastOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()) || !isFloat(getResult()))
    return success();
  og[0] = builder.create<CastOp>(getLoc(), getInput().getType(), rg[0]);
  return success();
}

template <typename Op>
static LogicalResult triangleGradient(Op op, OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (rg[0] && isFloat(op.getInput()))
    og[0] = builder.create<Op>(op.getLoc(), rg[0], op.getDiagonalAttr());
  return success();
}
LogicalResult TrilOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg, SmallVectorImpl<Value> &og) {
  return triangleGradient(*this, b, rg, og);
}
LogicalResult TriuOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg, SmallVectorImpl<Value> &og) {
  return triangleGradient(*this, b, rg, og);
}

//===----------------------------------------------------------------------===//
// Binary elementwise, with broadcasting.
//===----------------------------------------------------------------------===//

namespace {
/// Sets the gradients of a binary op's operands, each summed back to the
/// operand's shape; a null gradient or a non-float operand gets none.
void setBinary(CleaveBuilder &b, Operation *op, SmallVectorImpl<Value> &og, Value lhs, Value rhs) {
  if (lhs && isFloat(op->getOperand(0)))
    og[0] = b.sumToShape(lhs, op->getOperand(0));
  if (rhs && isFloat(op->getOperand(1)))
    og[1] = b.sumToShape(rhs, op->getOperand(1));
}
} // namespace

LogicalResult AddOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  setBinary(b, *this, og, rg[0], rg[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Layout changes. In a tensor-parallel step every rank of the tp group
// computes the same loss, so a value every rank holds whole (replicated)
// has the same, whole gradient on every rank, and a split value's gradient
// is split the same way: each change's gradient is the change back
// (docs/training.md, "Tensor parallelism"). The data-parallel group is
// different: its ranks compute different losses whose sum is the objective.
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  // tp: each rank's partial sum counts once in the result, whose gradient
  // every rank holds whole: that is each partial's gradient.
  if (getGroup() == "tp") {
    og[0] = rg[0];
    return success();
  }
  // dp: every rank's result is the sum of every rank's input, so each
  // input's gradient is the sum over the group of the results' gradients (a
  // synchronized batch norm's backward sums its statistics' gradients so).
  og[0] = builder.create<AllReduceOp>(getLoc(), rg[0].getType(), rg[0], getGroupAttr());
  return success();
}

LogicalResult AllGatherOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  Type part = getInput().getType();
  // A gradient summed over the group (the readers' partial sums) only to be
  // cut to this rank's part is reduce-scattered instead: the pair that
  // sequence parallelism trades an all-reduce for.
  if (auto sum = rg[0].getDefiningOp<AllReduceOp>();
      sum && sum.getGroup() == getGroup() && sum->use_empty()) {
    og[0] = builder.create<ReduceScatterOp>(getLoc(), part, sum.getInput(), getGroupAttr(),
                                            getDimAttr(), getBlocksAttr());
    sum->erase();
    return success();
  }
  og[0] = builder.create<ShardOp>(getLoc(), part, rg[0], getGroupAttr(), getDimAttr(),
                                  getBlocksAttr());
  return success();
}

namespace {
/// The gradient of a change to split(dim, blocks) from a whole value (a
/// shard) or a partial sum (a reduce-scatter): the whole gradient of every
/// rank's input, gathered from the parts.
template <typename Op>
LogicalResult gatherBack(Op op, OpBuilder &builder, ArrayRef<Value> rg,
                         SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(op.getResult()))
    return success();
  og[0] = builder.create<AllGatherOp>(op.getLoc(), op.getInput().getType(), rg[0],
                                      op.getGroupAttr(), op.getDimAttr(), op.getBlocksAttr());
  return success();
}
} // namespace

LogicalResult ReduceScatterOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                              SmallVectorImpl<Value> &og) {
  return gatherBack(*this, builder, rg, og);
}

LogicalResult ShardOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  return gatherBack(*this, builder, rg, og);
}

LogicalResult AllToAllOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                         SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  og[0] = builder.create<AllToAllOp>(getLoc(), getInput().getType(), rg[0], getGroupAttr(),
                                     getToDimAttr(), getToBlocksAttr(), getFromDimAttr(),
                                     getFromBlocksAttr());
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  setBinary(b, *this, og, rg[0], b.neg(rg[0]));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0];
  setBinary(b, *this, og, b.mul(g, getRhs()), b.mul(g, getLhs()));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], x = getLhs(), y = getRhs();
  // other: -grad * self / (other * other).
  Value dy = isa_and_nonnull<ConstantOp>(y.getDefiningOp())
                 ? Value()
                 : b.div(b.mul(b.neg(g), x), b.mul(y, y));
  setBinary(b, *this, og, b.div(g, y), dy);
  return success();
}

/// The value of a splat constant, if `v` is one.
static std::optional<double> splatValue(Value v) {
  auto constant = dyn_cast_or_null<ConstantOp>(v.getDefiningOp());
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat() || !llvm::isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

LogicalResult PowOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                    SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult())) // integer powers carry no gradient
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], x = getLhs(), e = getRhs();
  if (std::optional<double> exponent = splatValue(e)) {
    // pow_backward: grad * (exponent * self.pow(exponent - 1)); zero for 0.
    Value dx = *exponent == 0
                   ? b.mul(g, b.scalarLike(0, g))
                   : b.mul(g, b.mul(b.scalarLike(*exponent, x),
                                    b.make<PowOp>(x, b.scalarLike(*exponent - 1, x))));
    setBinary(b, *this, og, dx, Value());
    return success();
  }
  Value dx = b.mul(g, b.mul(e, b.make<PowOp>(x, b.sub(e, b.scalarLike(1, e)))));
  // grad * self^exponent * log(self), zero where self == 0 and exponent >= 0.
  Value zeroBase = b.make<AndOp>(b.compare(ComparePredicate::eq, x, b.scalarLike(0, x)),
                                 b.compare(ComparePredicate::ge, e, b.scalarLike(0, e)));
  Value de = b.mul(g, b.where(zeroBase, b.scalarLike(0, g),
                              b.mul(getResult(), b.make<LogOp>(x))));
  setBinary(b, *this, og, dx, de);
  return success();
}

/// maximum/minimum: ties split the gradient in half; the smaller (larger)
/// operand gets none. `loses` is the predicate under which lhs gets nothing.
static LogicalResult extremumGradient(Operation *op, OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og, ComparePredicate lhsLoses,
                                      ComparePredicate rhsLoses) {
  if (!rg[0] || !isFloat(op->getResult(0)))
    return success();
  CleaveBuilder b{builder, op->getLoc()};
  Value g = rg[0], x = op->getOperand(0), y = op->getOperand(1);
  Value zero = b.scalarLike(0, g);
  Value shared = b.where(b.compare(ComparePredicate::eq, x, y), b.div(g, b.scalarLike(2, g)), g);
  setBinary(b, op, og, b.where(b.compare(lhsLoses, x, y), zero, shared),
            b.where(b.compare(rhsLoses, x, y), zero, shared));
  return success();
}
LogicalResult MaximumOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  return extremumGradient(*this, b, rg, og, ComparePredicate::lt, ComparePredicate::gt);
}
LogicalResult MinimumOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  return extremumGradient(*this, b, rg, og, ComparePredicate::gt, ComparePredicate::lt);
}

LogicalResult AndOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}
LogicalResult OrOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}
// Bit operations of integers and bools: nothing to differentiate.
LogicalResult XorOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}
LogicalResult ShiftLeftOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}
LogicalResult ShiftRightOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                           SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult WhereOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], c = getCondition(), zero = b.scalarLike(0, g);
  og[1] = b.sumToShape(b.where(c, g, zero), getOnTrue());
  og[2] = b.sumToShape(b.where(c, zero, g), getOnFalse());
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and layers.
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], lhs = getLhs(), rhs = getRhs();
  auto lhsType = typeOf(lhs), gType = typeOf(g);
  bool lhsUnbroadcast = lhsType.getShape().drop_back() == gType.getShape().drop_back();
  if (typeOf(rhs).getRank() == 2 && lhsUnbroadcast) {
    // A 2-D right operand: dlhs = g rhs^T is a linear with rhs as the
    // weight, drhs = lhs^T g sums over every leading position: one GEMM
    // each, nothing transposed in memory.
    og[0] = b.make<LinearOp>(g, rhs, Value());
    og[1] = b.make<LinearBackwardWeightOp>(rhs.getType(), lhs, g);
    return success();
  }
  og[0] = b.sumToShape(b.make<MatmulOp>(g, b.transpose(rhs)), lhs);
  og[1] = b.sumToShape(b.make<MatmulOp>(b.transpose(lhs), g), rhs);
  return success();
}

LogicalResult LinearOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], x = getInput(), w = getWeight();
  auto xType = typeOf(x);
  int64_t n = typeOf(w).getDimSize(0), k = typeOf(w).getDimSize(1);
  int64_t rows = xType.getNumElements() / std::max<int64_t>(1, k);
  // dx = g w over all leading positions as one [rows, n] x [n, k] GEMM.
  Value rowsOfG = b.reshape(g, {rows, n});
  og[0] = b.reshape(b.make<MatmulOp>(rowsOfG, w), xType.getShape());
  og[1] = b.make<LinearBackwardWeightOp>(w.getType(), g, x);
  if (Value bias = getBias()) {
    SmallVector<int64_t> leading(typeOf(g).getRank() - 1);
    std::iota(leading.begin(), leading.end(), 0);
    og[2] = leading.empty() ? g : b.reduceSum(g, leading, /*keepdim=*/false);
  }
  return success();
}

LogicalResult EmbeddingOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  og[0] = builder.create<EmbeddingBackwardOp>(getLoc(), getWeight().getType(), rg[0],
                                              getIndices(), getRowOffsetAttr(),
                                              getPaddingIdxAttr());
  return success();
}

LogicalResult GatherOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  // gather_backward: the gradient scatter-added into zeros of the input's
  // shape (repeated indices add up).
  CleaveBuilder b{builder, getLoc()};
  Value zeros = b.broadcastTo(b.scalarLike(0, getInput()), typeOf(getInput()));
  og[0] = b.make<ScatterOp>(zeros, getIndex(), rg[0], getDimAttr(),
                            ScatterReduceAttr::get(builder.getContext(), ScatterReduce::sum),
                            builder.getBoolAttr(true));
  return success();
}

LogicalResult ScatterOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  ScatterReduce reduce = getReduce();
  if (reduce != ScatterReduce::none && reduce != ScatterReduce::sum)
    return emitError() << "no gradient rule for cleave.scatter with reduce = "
                       << stringifyScatterReduce(reduce)
                       << ": training through it is not supported (only none and sum)";
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0];
  // derivatives.yaml: src gets grad.gather(dim, index); self gets grad where
  // nothing overwrote it (scatter: grad.scatter(dim, index, 0)), all of grad
  // for a sum that includes self.
  og[2] = b.make<GatherOp>(getSrc().getType(), g, getIndex(), getDimAttr());
  if (reduce == ScatterReduce::sum && getIncludeSelf()) {
    og[0] = g;
  } else {
    Value zeros = b.broadcastTo(b.scalarLike(0, g), typeOf(getSrc()));
    og[0] = b.make<ScatterOp>(g, getIndex(), zeros, getDimAttr(),
                              ScatterReduceAttr::get(builder.getContext(), ScatterReduce::none),
                              builder.getBoolAttr(true));
  }
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  auto input = typeOf(getInput());
  auto affine = RankedTensorType::get(getNormalizedShape(), input.getElementType());
  auto backward = builder.create<LayerNormBackwardOp>(
      getLoc(), TypeRange{input, affine, affine}, rg[0], getInput(), getWeight(),
      getNormalizedShapeAttr(), getEpsAttr());
  og[0] = backward.getGradInput();
  unsigned next = 1;
  if (getWeight())
    og[next++] = backward.getGradWeight();
  if (getBias())
    og[next] = backward.getGradBias();
  return success();
}

LogicalResult BatchNormTrainOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                               SmallVectorImpl<Value> &og) {
  // Only the normalized result carries a gradient: the statistics feed the
  // running-statistics update, which is not differentiated.
  if (!rg[0])
    return success();
  auto input = typeOf(getInput());
  auto channels = RankedTensorType::get({input.getDimSize(1)}, input.getElementType());
  auto backward = builder.create<BatchNormBackwardOp>(
      getLoc(), TypeRange{input, channels, channels}, rg[0], getInput(), getMean(), getVar(),
      getWeight(), getEpsAttr());
  og[0] = backward.getGradInput();
  unsigned next = 1;
  if (getWeight())
    og[next++] = backward.getGradWeight();
  if (getBias())
    og[next] = backward.getGradBias();
  return success();
}

LogicalResult AttentionOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  auto backward = builder.create<AttentionBackwardOp>(
      getLoc(), TypeRange{getQ().getType(), getK().getType(), getV().getType()}, rg[0], getQ(),
      getK(), getV(), getResult(), getCausalAttr(), getScaleAttr());
  og[0] = backward.getGradQ();
  og[1] = backward.getGradK();
  og[2] = backward.getGradV();
  return success();
}

template <typename Op, typename BackwardOp>
static LogicalResult normalizeGradient(Op op, OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (rg[0])
    og[0] = builder.create<BackwardOp>(op.getLoc(), op.getType(), rg[0], op.getResult(),
                                       op.getDimAttr());
  return success();
}
LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  return normalizeGradient<SoftmaxOp, SoftmaxBackwardOp>(*this, b, rg, og);
}
LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &og) {
  return normalizeGradient<LogSoftmaxOp, LogSoftmaxBackwardOp>(*this, b, rg, og);
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  auto input = typeOf(getInput());
  og[0] = b.broadcastTo(b.keepDims(rg[0], input, getDims()), input);
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  auto input = typeOf(getInput());
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= input.getDimSize(d);
  // grad.expand(sizes) / numel; dividing before the expansion divides the
  // same values.
  Value scaled = b.div(rg[0], b.scalarLike(static_cast<double>(count), rg[0]));
  og[0] = b.broadcastTo(b.keepDims(scaled, input, getDims()), input);
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  auto input = typeOf(getInput());
  // The gradient is shared among the elements equal to the maximum.
  Value max = b.keepDims(getResult(), input, getDims());
  Value isMax = b.compare(ComparePredicate::eq, getInput(), max);
  Value mask = b.make<CastOp>(input, isMax);
  Value count = b.reduceSum(mask, getDims(), /*keepdim=*/true);
  og[0] = b.mul(b.div(b.keepDims(rg[0], input, getDims()), count), mask);
  return success();
}

// PyTorch's prod_backward: grad * (result / input) where the slice has no
// zero; at a slice's only zero the product of the other elements; zero
// elsewhere (a slice with two zeros has a zero gradient everywhere).
LogicalResult ReduceProdOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                           SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value x = getInput();
  auto input = typeOf(x);
  Value g = b.keepDims(rg[0], input, getDims());
  Value product = b.keepDims(getResult(), input, getDims());
  Value isZero = b.compare(ComparePredicate::eq, x, b.scalarLike(0, x));
  Value zeros = b.reduceSum(b.cast(isZero, input.getElementType()), getDims(), /*keepdim=*/true);
  Value others = b.make<ReduceProdOp>(b.where(isZero, b.scalarLike(1, x), x),
                                      builder.getDenseI64ArrayAttr(getDims()),
                                      builder.getBoolAttr(true));
  Value zero = b.scalarLike(0, g);
  Value atZero =
      b.where(b.compare(ComparePredicate::eq, zeros, b.scalarLike(1, zeros)), b.mul(g, others), zero);
  Value noZero = b.where(b.compare(ComparePredicate::eq, zeros, zero), b.mul(g, b.div(product, x)),
                         zero);
  og[0] = b.broadcastTo(b.where(isZero, atZero, noZero), input);
  return success();
}

/// PyTorch's value_selecting_reduction_backward: each slice's gradient at
/// the saved index along `dim`, zeros elsewhere. The positions along `dim`
/// are a constant shaped to broadcast against the indices.
static Value gradientAtIndex(CleaveBuilder &b, Value g, Value indices, RankedTensorType input,
                             int64_t dim) {
  SmallVector<int64_t> shape(input.getRank(), 1);
  shape[dim] = input.getDimSize(dim);
  SmallVector<int64_t> positions(shape[dim]);
  std::iota(positions.begin(), positions.end(), int64_t(0));
  auto type = RankedTensorType::get(shape, b.b.getI64Type());
  Value iota = b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(type, ArrayRef(positions)));
  Value at = b.compare(ComparePredicate::eq, iota, b.keepDims(indices, input, {dim}));
  return b.broadcastTo(b.where(at, b.keepDims(g, input, {dim}), b.scalarLike(0, g)), input);
}

LogicalResult ReduceMaxIndexOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                               SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  og[0] = gradientAtIndex(b, rg[0], getIndices(), typeOf(getInput()), getDim());
  return success();
}

LogicalResult ReduceMinIndexOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                               SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  og[0] = gradientAtIndex(b, rg[0], getIndices(), typeOf(getInput()), getDim());
  return success();
}

/// The gradient of values taken from positions `indices` along `dim`: each
/// added at its position (zeros elsewhere). A sort moves every element once;
/// a running extremum may take one element many times, and its gradients
/// sum, as PyTorch's cummaxmin_backward (a scatter_add). The indices get none.
static Value gradientAtIndices(CleaveBuilder &b, Value g, Value indices, Value input,
                               IntegerAttr dim) {
  Value zeros = b.broadcastTo(b.scalarLike(0, input), typeOf(input));
  return b.make<ScatterOp>(zeros, indices, g, dim,
                           ScatterReduceAttr::get(b.b.getContext(), ScatterReduce::sum),
                           b.b.getBoolAttr(true));
}

/// sort, cummax, cummin: the values' gradient goes back to the positions the
/// indices name (the indices have none).
template <typename ValuesAndIndicesOp>
static LogicalResult valuesAndIndicesGradient(ValuesAndIndicesOp op, OpBuilder &builder,
                                              ArrayRef<Value> rg, SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(op.getInput()))
    return success();
  CleaveBuilder b{builder, op.getLoc()};
  og[0] = gradientAtIndices(b, rg[0], op.getIndices(), op.getInput(), op.getDimAttr());
  return success();
}

LogicalResult SortOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  return valuesAndIndicesGradient(*this, builder, rg, og);
}

//===----------------------------------------------------------------------===//
// Scans.
//===----------------------------------------------------------------------===//

LogicalResult CummaxOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  return valuesAndIndicesGradient(*this, builder, rg, og);
}

LogicalResult CumminOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  return valuesAndIndicesGradient(*this, builder, rg, og);
}

// d out_i / d x_j = exp(x_j - out_i) for j reached by i. PyTorch's
// logcumsumexp_backward sums them in log space, split by the gradient's sign
// so each logarithm is of a positive number:
//   dx_j = exp(x_j + rev_lcse(log(g+) - out))_j - exp(x_j + rev_lcse(log(g-) - out))_j
// where g+ = max(g, 0), g- = max(-g, 0), log(0) = -inf adds nothing, and
// rev_lcse runs the other way. No exp can overflow where PyTorch's does not.
LogicalResult LogcumsumexpOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                             SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], x = getInput(), y = getResult();
  Value zero = b.scalarLike(0, g);
  BoolAttr backward = builder.getBoolAttr(!getReverse());
  auto part = [&](Value positive) {
    Value logs = b.sub(b.make<LogOp>(positive), y);
    Value summed = builder.create<LogcumsumexpOp>(getLoc(), logs, getDimAttr(), backward);
    return b.make<ExpOp>(b.add(x, summed));
  };
  og[0] = b.sub(part(b.maximum(g, zero)), part(b.maximum(b.neg(g), zero)));
  return success();
}

// The sum of the gradients of the elements each one reached: the cumsum
// the other way (PyTorch's reversed cumsum).
LogicalResult CumsumOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  og[0] = builder.create<CumsumOp>(getLoc(), rg[0], getDimAttr(),
                                   builder.getBoolAttr(!getReverse()));
  return success();
}

// d out_j / d x_i = prod_{k <= j, k != i} x_k for i <= j. Before the first
// zero of a slice this is PyTorch's reversed_cumsum(grad * result) / input;
// at the first zero z it is prod_{k < z} x_k * sum_{j >= z} grad_j
// prod_{z < k <= j} x_k; after it, zero. PyTorch's cumprod_backward computes
// the same values.
LogicalResult CumprodOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0], x = getInput(), y = getResult();
  IntegerAttr dim = getDimAttr();
  BoolAttr forward = builder.getBoolAttr(getReverse()),
           backward = builder.getBoolAttr(!getReverse());
  auto scan = [&](auto op, Value v, BoolAttr direction) -> Value {
    return builder.create<decltype(op)>(getLoc(), v, dim, direction);
  };
  Value one = b.scalarLike(1, x), zero = b.scalarLike(0, x);
  Value isZero = b.compare(ComparePredicate::eq, x, zero);
  // Zeros met so far, this element included.
  Value seen = scan(CumsumOp(), b.cast(isZero, typeOf(x).getElementType()), forward);
  Value before = b.compare(ComparePredicate::eq, seen, zero);
  Value first = b.logicalAnd(isZero, b.compare(ComparePredicate::eq, seen, one));
  Value beforeZero = b.div(scan(CumsumOp(), b.mul(y, g), backward), x);
  Value leading = scan(CumprodOp(), b.where(before, x, one), forward);
  Value trailing = scan(CumprodOp(), b.where(b.logicalOr(before, first), one, x), forward);
  Value reached = scan(CumsumOp(), b.where(before, zero, b.mul(g, trailing)), backward);
  og[0] = b.where(before, beforeZero, b.where(first, b.mul(leading, reached), zero));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling.
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0];
  og[0] = b.make<Conv2dBackwardInputOp>(getInput().getType(), g, getWeight(), getStrideAttr(),
                                        getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  og[1] = b.make<Conv2dBackwardWeightOp>(getWeight().getType(), g, getInput(), getStrideAttr(),
                                         getPaddingAttr(), getDilationAttr(), getGroupsAttr());
  if (getBias())
    og[2] = b.reduceSum(g, {0, 2, 3}, /*keepdim=*/false);
  return success();
}

LogicalResult MaxPool2dOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (rg[0])
    og[0] = builder.create<MaxPool2dBackwardOp>(getLoc(), getInput().getType(), rg[0], getInput(),
                                                getKernelAttr(), getStrideAttr(), getPaddingAttr(),
                                                getDilationAttr(), getCeilModeAttr());
  return success();
}

LogicalResult AvgPool2dOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                          SmallVectorImpl<Value> &og) {
  if (rg[0])
    og[0] = builder.create<AvgPool2dBackwardOp>(getLoc(), getInput().getType(), rg[0],
                                                getKernelAttr(), getStrideAttr(), getPaddingAttr(),
                                                getCeilModeAttr(), getCountIncludePadAttr());
  return success();
}

LogicalResult AdaptiveAvgPool2dOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                                  SmallVectorImpl<Value> &og) {
  if (rg[0])
    og[0] = builder.create<AdaptiveAvgPool2dBackwardOp>(getLoc(), getInput().getType(), rg[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (rg[0] && isFloat(getInput()))
    og[0] = CleaveBuilder{builder, getLoc()}.reshape(rg[0], typeOf(getInput()).getShape());
  return success();
}

LogicalResult PermuteOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getInput()))
    return success();
  ArrayRef<int64_t> dims = getDims();
  SmallVector<int64_t> inverse(dims.size());
  for (auto [i, d] : llvm::enumerate(dims))
    inverse[d] = static_cast<int64_t>(i);
  og[0] = CleaveBuilder{builder, getLoc()}.permute(rg[0], inverse);
  return success();
}

LogicalResult BroadcastToOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                            SmallVectorImpl<Value> &og) {
  if (rg[0] && isFloat(getInput()))
    og[0] = CleaveBuilder{builder, getLoc()}.sumToShape(rg[0], getInput());
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (rg[0] && isFloat(getInput()))
    og[0] = builder.create<SliceBackwardOp>(getLoc(), getInput().getType(), rg[0], getDimAttr(),
                                            getStartAttr(), getEndAttr(), getStepAttr());
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0] || !isFloat(getResult()))
    return success();
  int64_t dim = static_cast<int64_t>(getDim()), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = typeOf(input).getDimSize(dim);
    og[i] = builder.create<SliceOp>(getLoc(), rg[0], dim, offset, offset + size, 1);
    offset += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Losses.
//===----------------------------------------------------------------------===//

LogicalResult NllLossOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (rg[0])
    og[0] = builder.create<NllLossBackwardOp>(getLoc(), getInput().getType(), rg[0], getTarget(),
                                              getReductionAttr(), getIgnoreIndexAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra.
//===----------------------------------------------------------------------===//

LogicalResult TriangularSolveOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                                SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  // linalg_solve_triangular_backward: X = M^-1 B with M = op(A) gives
  // gB = M^-T g, gM = -gB X^T; gA is gM (its transpose when M = A^T) kept
  // on the triangle the op reads. Broadcast batch dims sum back.
  CleaveBuilder b{builder, getLoc()};
  Value x = getResult();
  Value gb = b.make<TriangularSolveOp>(x.getType(), getA(), rg[0], getUpperAttr(),
                                       builder.getBoolAttr(!getTranspose()),
                                       getUnitriangularAttr());
  Value gm = getTranspose() ? b.make<MatmulOp>(x, b.transpose(gb))
                            : b.make<MatmulOp>(gb, b.transpose(x));
  int64_t keep = getUnitriangular() ? 1 : 0;
  Value ga = getUpper() ? b.make<TriuOp>(b.neg(gm), keep) : b.make<TrilOp>(b.neg(gm), -keep);
  og[0] = b.sumToShape(ga, getA());
  og[1] = b.sumToShape(gb, getB());
  return success();
}

LogicalResult CholeskyOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                         SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  // PyTorch's cholesky_backward (Iain Murray, arXiv 1602.07527), for the
  // lower factor L (the upper one's transpose): gA = tril(L^H gL)
  // symmetrized, then L^-H gA L^-1 as two triangular solves.
  CleaveBuilder b{builder, getLoc()};
  Value l = getResult(), gl = rg[0];
  if (getUpper()) {
    l = b.transpose(l);
    gl = b.transpose(gl);
  }
  Value ga = b.make<TrilOp>(b.make<MatmulOp>(b.transpose(l), gl), int64_t(0));
  ga = b.mul(b.add(ga, b.transpose(b.make<TrilOp>(ga, int64_t(-1)))), b.scalarLike(0.5, ga));
  auto solve = [&](Value rhs, bool transpose) {
    return b.make<TriangularSolveOp>(rhs.getType(), l, rhs, builder.getBoolAttr(false),
                                     builder.getBoolAttr(transpose), builder.getBoolAttr(false));
  };
  ga = solve(ga, /*transpose=*/true);                  // L^H X = gA
  og[0] = b.transpose(solve(b.transpose(ga), true));   // X L = gA: L^T X^T = gA^T
  return success();
}

LogicalResult LuFactorOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                         SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  auto type = typeOf(getLu());
  int64_t n = type.getShape().back();
  if (type.getShape().end()[-2] != n)
    return emitError() << "no gradient rule for cleave.lu_factor of non-square matrices "
                       << type << ": training through it is not supported";
  // PyTorch's lu_factor_ex_backward (square): with L, U unpacked from the
  // factors and gL = tril(g, -1), gU = triu(g) from the packed gradient,
  // gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H. The solves read L
  // (unit) and U straight from the packed factors.
  CleaveBuilder b{builder, getLoc()};
  Value lu = getLu(), g = rg[0];
  SmallVector<float> eye(n * n, 0.0f);
  SmallVector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) {
    eye[i * n + i] = 1.0f;
    rows[i] = i;
  }
  auto eyeType = RankedTensorType::get({n, n}, type.getElementType());
  Value identity = b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(eyeType, ArrayRef(eye)));
  Value l = b.add(b.make<TrilOp>(lu, int64_t(-1)), identity);
  Value u = b.make<TriuOp>(lu, int64_t(0));
  Value r = b.add(
      b.make<TrilOp>(b.make<MatmulOp>(b.transpose(l), b.make<TrilOp>(g, int64_t(-1))), int64_t(-1)),
      b.make<TriuOp>(b.make<MatmulOp>(b.make<TriuOp>(g, int64_t(0)), b.transpose(u)), int64_t(0)));
  auto solve = [&](Value rhs, bool upper, bool transpose, bool unit) {
    return b.make<TriangularSolveOp>(rhs.getType(), lu, rhs, builder.getBoolAttr(upper),
                                     builder.getBoolAttr(transpose), builder.getBoolAttr(unit));
  };
  // X U^H = R is U X^H = R^H; then L^H Y = X.
  Value x = b.transpose(solve(b.transpose(r), /*upper=*/true, false, false));
  Value y = solve(x, /*upper=*/false, /*transpose=*/true, /*unit=*/true);
  // P[i, j] = (perm[j] == i), perm the pivots' row permutation.
  SmallVector<int64_t> permShape(typeOf(getPivots()).getShape());
  Value perm = b.make<LuPivotsToPermutationOp>(
      RankedTensorType::get(permShape, builder.getI64Type()), getPivots(),
      builder.getI64IntegerAttr(n));
  permShape.insert(permShape.end() - 1, 1);
  auto rowsType = RankedTensorType::get({n, 1}, builder.getI64Type());
  Value rowIndex = b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(rowsType, ArrayRef(rows)));
  Value p = b.cast(b.compare(ComparePredicate::eq, rowIndex, b.reshape(perm, permShape)),
                   type.getElementType());
  og[0] = b.make<MatmulOp>(p, y);
  return success();
}

// frexp: the mantissa's gradient is grad / 2^exponent; the exponent has none.
LogicalResult FrexpOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                      SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value g = rg[0];
  Value scale = b.make<PowOp>(b.scalarLike(2, g), b.cast(getExponent(), typeOf(g).getElementType()));
  og[0] = b.div(g, scale);
  return success();
}

// Integer operands: nothing to differentiate.
LogicalResult GcdOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}
LogicalResult LcmOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

// zeta(x, q): d/dq = -x * zeta(x + 1, q); PyTorch defines none for x, which
// gets no gradient.
LogicalResult ZetaOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                     SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  Value s = getLhs(), q = getRhs();
  Value dq = b.mul(rg[0], b.mul(b.neg(s), b.make<ZetaOp>(b.add(s, b.scalarLike(1, s)), q)));
  setBinary(b, *this, og, Value(), dq);
  return success();
}

// igamma(a, x): d/dx = exp((a - 1) log x - x - lgamma(a)) (igammac: its
// negation); PyTorch defines none for a, which gets no gradient.
static Value incompleteGammaDensity(CleaveBuilder &b, Value a, Value x) {
  return b.make<ExpOp>(b.sub(b.sub(b.mul(b.sub(a, b.scalarLike(1, a)), b.make<LogOp>(x)), x),
                             b.make<LgammaOp>(a)));
}
LogicalResult IgammaOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                       SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  setBinary(b, *this, og, Value(), b.mul(rg[0], incompleteGammaDensity(b, getLhs(), getRhs())));
  return success();
}
LogicalResult IgammacOp::buildGradients(OpBuilder &builder, ArrayRef<Value> rg,
                                        SmallVectorImpl<Value> &og) {
  if (!rg[0])
    return success();
  CleaveBuilder b{builder, getLoc()};
  setBinary(b, *this, og, Value(),
            b.neg(b.mul(rg[0], incompleteGammaDensity(b, getLhs(), getRhs()))));
  return success();
}
