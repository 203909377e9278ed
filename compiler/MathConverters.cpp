//===- MathConverters.cpp - aten math ops spelled as core ops -------------===//
//
// Importer spellings of aten ops that are compositions of core ops with no
// semantics of their own worth a composite op: tests (all, any, isclose,
// signbit...), differences and products along dims (diff, cross, kron,
// tensordot, einsum...), distances and margin losses, and the norms that
// need no SVD. Each converter checks its operands' shapes first, so the core
// ops it then builds always verify; a bad input is an error at the node.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "dialects/cleave/CleaveBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <cctype>
#include <cmath>
#include <map>

using namespace mlir;
namespace jit = torch::jit;
namespace c = mlir::cleave;

namespace cleave::importer {
namespace {

using Inputs = ArrayRef<Val>;
using Result = FailureOr<std::vector<Val>>;
using c::ComparePredicate;
using c::typeOf;

constexpr double kPi = 3.14159265358979323846;

Result one(Value value) { return std::vector<Val>{Val::ofTensor(value)}; }

bool isFloatType(Type t) { return llvm::isa<FloatType>(t); }
Type elementOf(Value v) { return typeOf(v).getElementType(); }
int64_t rankOf(Value v) { return typeOf(v).getRank(); }

/// The core-op builder at the node being converted, with the helpers the
/// spellings below share.
struct Math : c::CleaveBuilder {
  Importer &imp;
  Math(Importer &imp) : c::CleaveBuilder{imp.builder, imp.loc()}, imp(imp) {}

  Value zeroLike(Value x) { return scalarLike(0, x); }
  Value absOf(Value x) { return make<c::AbsOp>(x); }
  Value sqrtOf(Value x) { return make<c::SqrtOp>(x); }
  Value powOf(Value x, Value y) { return make<c::PowOp>(x, y); }
  Value matmul(Value x, Value y) { return make<c::MatmulOp>(x, y); }
  Value nonZero(Value x) {
    if (elementOf(x).isInteger(1))
      return x;
    return compare(ComparePredicate::ne, x, zeroLike(x));
  }
  Value clampMin(Value x, double lo) { return maximum(x, scalarLike(lo, x)); }
  /// A sum over `dims`, `x` itself when there are none.
  Value sumOver(Value x, ArrayRef<int64_t> dims, bool keepdim) {
    if (dims.empty())
      return x;
    return reduceSum(x, dims, keepdim);
  }
  Value sliceOf(Value x, int64_t dim, int64_t start, int64_t end) {
    if (start == 0 && end == typeOf(x).getDimSize(dim))
      return x;
    return make<c::SliceOp>(x, dim, start, end, int64_t(1));
  }
  Value concatOf(ArrayRef<Value> xs, int64_t dim) {
    if (xs.size() == 1)
      return xs.front();
    return make<c::ConcatOp>(ValueRange(xs), dim);
  }
  /// `x` with size-1 dims inserted so it has `rank` dims, aligned at the end.
  Value alignTo(Value x, int64_t rank) {
    SmallVector<int64_t> shape(rank - rankOf(x), 1);
    llvm::append_range(shape, typeOf(x).getShape());
    return reshape(x, shape);
  }
  /// The reduction over every dim (a 0-d result).
  Value sumAll(Value x) {
    return sumOver(x, llvm::to_vector(llvm::seq<int64_t>(0, rankOf(x))), false);
  }
  Value meanAll(Value x) {
    if (rankOf(x) == 0)
      return x;
    return reduceMean(x, llvm::to_vector(llvm::seq<int64_t>(0, rankOf(x))), false);
  }
  /// gather(input, index, dim): the result has the index's shape.
  Value gather(Value input, Value index, int64_t dim) {
    return make<c::GatherOp>(typeOf(input).clone(typeOf(index).getShape()), input, index,
                             b.getI64IntegerAttr(dim));
  }
  Value iota(int64_t n, ArrayRef<int64_t> shape) {
    SmallVector<int64_t> values(n);
    std::iota(values.begin(), values.end(), 0);
    auto type = RankedTensorType::get(shape, b.getI64Type());
    return b.create<c::ConstantOp>(loc, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
  }
};

FailureOr<int64_t> normDim(Importer &imp, int64_t dim, int64_t rank) {
  int64_t wrap = std::max<int64_t>(rank, 1);
  int64_t d = dim < 0 ? dim + wrap : dim;
  if (d < 0 || d >= wrap) {
    imp.error() << "dim " << dim << " is out of range for rank " << rank;
    return failure();
  }
  return d;
}

/// An optional argument by its schema name: the Val, or null when absent or None.
const Val *argNamed(Importer &imp, jit::Node *node, Inputs in, const char *name) {
  auto index = node->schema().argumentIndexWithName(name);
  if (!index || size_t(*index) >= in.size() || imp.isNone(in[*index]))
    return nullptr;
  return &in[*index];
}

FailureOr<double> realNamed(Importer &imp, jit::Node *node, Inputs in, const char *name,
                            double fallback) {
  const Val *v = argNamed(imp, node, in, name);
  return v ? imp.real(*v) : FailureOr<double>(fallback);
}
FailureOr<int64_t> intNamed(Importer &imp, jit::Node *node, Inputs in, const char *name,
                            int64_t fallback) {
  const Val *v = argNamed(imp, node, in, name);
  return v ? imp.integer(*v) : FailureOr<int64_t>(fallback);
}
FailureOr<bool> boolNamed(Importer &imp, jit::Node *node, Inputs in, const char *name,
                          bool fallback) {
  const Val *v = argNamed(imp, node, in, name);
  return v ? imp.boolean(*v) : FailureOr<bool>(fallback);
}

/// The `dim` argument (an int, a list or None: every dim) normalized for
/// `rank`, sorted and without repeats; empty for a 0-d tensor.
FailureOr<SmallVector<int64_t>> dimsNamed(Importer &imp, jit::Node *node, Inputs in,
                                          int64_t rank, const char *name = "dim") {
  SmallVector<int64_t> dims;
  if (const Val *v = argNamed(imp, node, in, name)) {
    auto given = imp.intList(*v);
    if (failed(given))
      return failure();
    for (int64_t d : *given) {
      auto dim = normDim(imp, d, rank);
      if (failed(dim))
        return failure();
      if (llvm::is_contained(dims, *dim)) {
        imp.error() << "dim " << d << " appears more than once in the reduction";
        return failure();
      }
      dims.push_back(*dim);
    }
  }
  if (dims.empty())
    dims = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (rank == 0)
    dims.clear();
  llvm::sort(dims);
  return dims;
}

/// The broadcast shape of two shapes, or an error.
FailureOr<SmallVector<int64_t>> broadcastShape(Importer &imp, ArrayRef<int64_t> a,
                                               ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1) {
      imp.error() << "shapes [" << a << "] and [" << b << "] do not broadcast";
      return failure();
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

/// Both operands broadcast to their common shape.
FailureOr<std::pair<Value, Value>> broadcastPair(Importer &imp, Math &m, Value x, Value y) {
  auto shape = broadcastShape(imp, typeOf(x).getShape(), typeOf(y).getShape());
  if (failed(shape))
    return failure();
  auto to = [&](Value v) {
    return m.broadcastTo(m.alignTo(v, shape->size()),
                         RankedTensorType::get(*shape, elementOf(v)));
  };
  return std::make_pair(to(x), to(y));
}

/// Two tensor operands promoted to one dtype (to a float with `toFloat`).
FailureOr<std::pair<Value, Value>> promotePair(Importer &imp, const Val &x, const Val &y,
                                               bool toFloat = false) {
  auto values = imp.promote({x, y}, toFloat);
  if (failed(values))
    return failure();
  return std::make_pair((*values)[0], (*values)[1]);
}

FailureOr<Value> floatTensor(Importer &imp, const Val &val) {
  auto values = imp.promote({val}, /*integerToFloat=*/true);
  if (failed(values))
    return failure();
  return (*values)[0];
}

LogicalResult requireFloat(Importer &imp, jit::Node *node, Value x) {
  if (isFloatType(elementOf(x)))
    return success();
  imp.error() << node->kind().toQualString() << " of a non-float tensor (PyTorch refuses it too)";
  return failure();
}

FailureOr<StringRef> reductionNamed(Importer &imp, jit::Node *node, Inputs in) {
  const Val *v = argNamed(imp, node, in, "reduction");
  if (!v)
    return StringRef("mean");
  auto code = imp.integer(*v);
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

Value reduceLoss(Math &m, Value losses, StringRef reduction) {
  if (reduction == "none")
    return losses;
  return reduction == "mean" ? m.meanAll(losses) : m.sumAll(losses);
}

//===----------------------------------------------------------------------===//
// Tests and elementwise.
//===----------------------------------------------------------------------===//

/// all / any (self[, dim, keepdim]): counts of the zero (all) or non-zero
/// (any) elements compared with 0, as bools.
Converter allAny(bool all) {
  return [all](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    if (failed(x))
      return failure();
    auto dims = dimsNamed(imp, node, in, rankOf(*x));
    auto keepdim = boolNamed(imp, node, in, "keepdim", false);
    if (failed(dims) || failed(keepdim))
      return failure();
    Math m(imp);
    Value t = m.nonZero(*x);
    if (all)
      t = m.logicalNot(t);
    Value count = m.sumOver(m.cast(t, imp.builder.getI64Type()), *dims, *keepdim);
    return one(m.compare(all ? ComparePredicate::eq : ComparePredicate::ne, count,
                         m.zeroLike(count)));
  };
}

/// count_nonzero(self, dim): an i64 count over the dims (every dim for None or []).
Result countNonzero(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto dims = dimsNamed(imp, node, in, rankOf(*x));
  if (failed(dims))
    return failure();
  Math m(imp);
  return one(m.sumOver(m.cast(m.nonZero(*x), imp.builder.getI64Type()), *dims, false));
}

/// real(self) of a real tensor is itself; isreal is true everywhere.
Result realOf(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  return one(*x);
}
Result isReal(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  return one(imp.splat(1, imp.builder.getI1Type(), typeOf(*x).getShape()));
}

/// angle of a real tensor: pi below 0, 0 otherwise, NaN kept; integers and
/// bools give floats.
Result angle(Importer &imp, jit::Node *, Inputs in) {
  auto x = floatTensor(imp, in[0]);
  if (failed(x))
    return failure();
  Math m(imp);
  Value negative = m.compare(ComparePredicate::lt, *x, m.zeroLike(*x));
  Value a = m.where(negative, m.scalarLike(kPi, *x), m.zeroLike(*x));
  Value nan = m.compare(ComparePredicate::ne, *x, *x);
  return one(m.where(nan, *x, a));
}

/// signbit: x < 0, and -0.0 for floats (1 / -0 is -inf); false for bools.
Result signbit(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Math m(imp);
  if (elementOf(*x).isInteger(1))
    return one(imp.splat(0, imp.builder.getI1Type(), typeOf(*x).getShape()));
  Value negative = m.compare(ComparePredicate::lt, *x, m.zeroLike(*x));
  if (!isFloatType(elementOf(*x)))
    return one(negative);
  Value zero = m.compare(ComparePredicate::eq, *x, m.zeroLike(*x));
  Value inverse = m.div(m.scalarLike(1, *x), *x);
  Value negZero = m.logicalAnd(zero, m.compare(ComparePredicate::lt, inverse, m.zeroLike(*x)));
  return one(m.logicalOr(negative, negZero));
}

/// isclose(self, other, rtol, atol, equal_nan), as PyTorch: equal, or both
/// NaN with equal_nan, or a finite |a - b| <= atol + rtol |b| (integers
/// compared as floats).
Result isclose(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto y = imp.tensor(in[1]);
  auto rtol = realNamed(imp, node, in, "rtol", 1e-5);
  auto atol = realNamed(imp, node, in, "atol", 1e-8);
  auto equalNan = boolNamed(imp, node, in, "equal_nan", false);
  if (failed(x) || failed(y) || failed(rtol) || failed(atol) || failed(equalNan))
    return failure();
  if (elementOf(*x) != elementOf(*y)) {
    imp.error() << "isclose of two dtypes (PyTorch requires one)";
    return failure();
  }
  if (*rtol < 0 || *atol < 0) {
    imp.error() << "isclose with a negative rtol or atol (PyTorch refuses it too)";
    return failure();
  }
  Math m(imp);
  auto pair = broadcastPair(imp, m, *x, *y);
  if (failed(pair))
    return failure();
  auto [a, b] = *pair;
  Value close = m.compare(ComparePredicate::eq, a, b);
  bool isFloat = isFloatType(elementOf(a));
  if (*equalNan && isFloat)
    close = m.logicalOr(close, m.logicalAnd(m.compare(ComparePredicate::ne, a, a),
                                            m.compare(ComparePredicate::ne, b, b)));
  if ((*rtol == 0 && *atol == 0) || elementOf(a).isInteger(1))
    return one(close);
  if (!isFloat) {
    a = m.cast(a, imp.builder.getF32Type());
    b = m.cast(b, imp.builder.getF32Type());
  }
  Value allowed = m.add(m.scalarLike(*atol, b), m.absOf(m.mul(m.scalarLike(*rtol, b), b)));
  Value actual = m.absOf(m.sub(a, b));
  Value finite = m.compare(ComparePredicate::lt, actual,
                           m.scalarLike(std::numeric_limits<double>::infinity(), actual));
  return one(m.logicalOr(close, m.logicalAnd(finite,
                                             m.compare(ComparePredicate::le, actual, allowed))));
}

/// ldexp(self, other) = self * 2^other, in a float dtype.
Result ldexp(Importer &imp, jit::Node *, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1], /*toFloat=*/true);
  if (failed(pair))
    return failure();
  Math m(imp);
  if (failed(broadcastShape(imp, typeOf(pair->first).getShape(), typeOf(pair->second).getShape())))
    return failure();
  return one(m.mul(pair->first, m.powOf(m.scalarLike(2, pair->second), pair->second)));
}

/// isin(elements, test_elements, assume_unique, invert): each element
/// compared with every test element (flattened into a trailing dim).
Result isin(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  auto invert = boolNamed(imp, node, in, "invert", false);
  if (failed(pair) || failed(invert))
    return failure();
  Math m(imp);
  auto [x, t] = *pair;
  SmallVector<int64_t> shape(typeOf(x).getShape());
  int64_t n = typeOf(t).getNumElements();
  Value flat = m.reshape(t, {n});
  SmallVector<int64_t> column(shape);
  column.push_back(1);
  Value xs = m.reshape(x, column);
  Value eq = m.cast(m.compare(ComparePredicate::eq, xs, flat), imp.builder.getI64Type());
  Value count = m.reduceSum(eq, {int64_t(shape.size())}, false);
  return one(m.compare(*invert ? ComparePredicate::eq : ComparePredicate::ne, count,
                       m.zeroLike(count)));
}

//===----------------------------------------------------------------------===//
// Differences and products along dims.
//===----------------------------------------------------------------------===//

/// diff(self, n, dim, prepend, append): prepend and append joined along
/// dim, then n differences of neighbours (!= for bools); n past the size
/// leaves an empty dim.
Result diff(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto n = intNamed(imp, node, in, "n", 1);
  if (failed(x) || failed(n))
    return failure();
  if (rankOf(*x) == 0) {
    imp.error() << "diff of a 0-d tensor (PyTorch refuses it too)";
    return failure();
  }
  auto dimGiven = intNamed(imp, node, in, "dim", -1);
  if (failed(dimGiven))
    return failure();
  auto dim = normDim(imp, *dimGiven, rankOf(*x));
  if (failed(dim))
    return failure();
  if (*n < 0) {
    imp.error() << "diff with a negative order n = " << *n << " (PyTorch refuses it too)";
    return failure();
  }
  Math m(imp);
  SmallVector<Value> parts;
  for (const char *name : {"prepend", "append"}) {
    if (name == StringRef("append"))
      parts.push_back(*x);
    const Val *v = argNamed(imp, node, in, name);
    if (!v)
      continue;
    auto t = imp.tensor(*v);
    if (failed(t))
      return failure();
    Value part = imp.cast(*t, elementOf(*x));
    if (rankOf(part) != rankOf(*x)) {
      imp.error() << "diff's " << name << " must have the input's rank";
      return failure();
    }
    for (int64_t d = 0; d < rankOf(part); ++d)
      if (d != *dim && typeOf(part).getDimSize(d) != typeOf(*x).getDimSize(d)) {
        imp.error() << "diff's " << name << " must match the input's shape outside dim";
        return failure();
      }
    parts.push_back(part);
  }
  Value y = m.concatOf(parts, *dim);
  bool isBool = elementOf(y).isInteger(1);
  for (int64_t i = 0; i < *n && typeOf(y).getDimSize(*dim) > 0; ++i) {
    int64_t size = typeOf(y).getDimSize(*dim);
    Value hi = m.sliceOf(y, *dim, 1, size), lo = m.sliceOf(y, *dim, 0, size - 1);
    y = isBool ? m.compare(ComparePredicate::ne, hi, lo) : m.sub(hi, lo);
  }
  return one(y);
}

/// cross / linalg_cross(self, other, dim): the 3-vector product along dim
/// (cross with dim None takes the first dim of size 3).
Result cross(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  if (failed(pair))
    return failure();
  Math m(imp);
  if (rankOf(pair->first) != rankOf(pair->second)) {
    imp.error() << "cross of tensors of different ranks (PyTorch refuses it too)";
    return failure();
  }
  auto bc = broadcastPair(imp, m, pair->first, pair->second);
  if (failed(bc))
    return failure();
  auto [a, b] = *bc;
  if (elementOf(a).isInteger(1)) {
    imp.error() << "cross of bool tensors (PyTorch refuses it too)";
    return failure();
  }
  int64_t rank = rankOf(a);
  int64_t dim = -1;
  if (const Val *v = argNamed(imp, node, in, "dim")) {
    auto given = imp.integer(*v);
    if (failed(given))
      return failure();
    auto d = normDim(imp, *given, rank);
    if (failed(d))
      return failure();
    dim = *d;
  } else if (node->kind().toQualString() == std::string("aten::linalg_cross")) {
    dim = rank - 1;
  } else {
    for (int64_t d = 0; d < rank && dim < 0; ++d)
      if (typeOf(a).getDimSize(d) == 3)
        dim = d;
  }
  if (dim < 0 || rank == 0 || typeOf(a).getDimSize(dim) != 3) {
    imp.error() << "cross needs a dim of size 3";
    return failure();
  }
  auto at = [&](Value v, int64_t i) { return m.sliceOf(v, dim, i, i + 1); };
  Value parts[3];
  for (int64_t i = 0; i < 3; ++i) {
    int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    parts[i] = m.sub(m.mul(at(a, j), at(b, k)), m.mul(at(a, k), at(b, j)));
  }
  return one(m.concatOf(parts, dim));
}

/// linalg_vecdot(x, y, dim): sum(x * y) along dim, broadcasting.
Result vecdot(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  if (failed(pair))
    return failure();
  if (failed(requireFloat(imp, node, pair->first)))
    return failure();
  Math m(imp);
  auto bc = broadcastPair(imp, m, pair->first, pair->second);
  if (failed(bc))
    return failure();
  Value product = m.mul(bc->first, bc->second);
  auto dimGiven = intNamed(imp, node, in, "dim", -1);
  if (failed(dimGiven))
    return failure();
  if (rankOf(product) == 0) {
    imp.error() << "vecdot of 0-d tensors";
    return failure();
  }
  auto dim = normDim(imp, *dimGiven, rankOf(product));
  if (failed(dim))
    return failure();
  return one(m.reduceSum(product, {*dim}, false));
}

/// A matrix product of two tensors of one element type; bools through i64
/// then back to bool (non-zero), as PyTorch's bool matmul.
Value matmulOf(Math &m, Value x, Value y) {
  Type et = elementOf(x);
  if (!et.isInteger(1))
    return m.matmul(x, y);
  Type i64 = m.b.getI64Type();
  Value r = m.matmul(m.cast(x, i64), m.cast(y, i64));
  return m.nonZero(r);
}

/// linalg_multi_dot(tensors): a chain of matmuls, a 1-D first operand as a
/// row and a 1-D last one as a column (dropped from the result).
Result multiDot(Importer &imp, jit::Node *node, Inputs in) {
  auto items = imp.list(in[0]);
  if (failed(items))
    return failure();
  if (items->size() < 2) {
    imp.error() << "multi_dot needs at least two tensors";
    return failure();
  }
  std::vector<Value> xs;
  for (const Val &v : *items) {
    auto t = imp.tensor(v);
    if (failed(t))
      return failure();
    xs.push_back(*t);
  }
  Type et = elementOf(xs.front());
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t r = rankOf(xs[i]);
    bool end = i == 0 || i + 1 == xs.size();
    if (elementOf(xs[i]) != et) {
      imp.error() << "multi_dot of tensors of different dtypes (PyTorch refuses it too)";
      return failure();
    }
    if (r != 2 && !(end && r == 1)) {
      imp.error() << "multi_dot needs 2-D tensors (1-D only first or last), got rank " << r
                  << " at " << i;
      return failure();
    }
  }
  Math m(imp);
  bool rowFirst = rankOf(xs.front()) == 1, colLast = rankOf(xs.back()) == 1;
  if (rowFirst)
    xs.front() = m.reshape(xs.front(), {1, typeOf(xs.front()).getDimSize(0)});
  if (colLast)
    xs.back() = m.reshape(xs.back(), {typeOf(xs.back()).getDimSize(0), 1});
  for (size_t i = 0; i + 1 < xs.size(); ++i)
    if (typeOf(xs[i]).getDimSize(1) != typeOf(xs[i + 1]).getDimSize(0)) {
      imp.error() << "multi_dot: operands " << i << " and " << i + 1 << " cannot be multiplied";
      return failure();
    }
  Value r = xs.front();
  for (size_t i = 1; i < xs.size(); ++i)
    r = matmulOf(m, r, xs[i]);
  SmallVector<int64_t> shape;
  if (!rowFirst)
    shape.push_back(typeOf(r).getDimSize(0));
  if (!colLast)
    shape.push_back(typeOf(r).getDimSize(1));
  (void)node;
  return one(m.reshape(r, shape));
}

/// kron(a, b): a viewed as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...]
/// (ranks aligned at the end), then merged pairwise.
Result kron(Importer &imp, jit::Node *, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  if (failed(pair))
    return failure();
  Math m(imp);
  int64_t rank = std::max(rankOf(pair->first), rankOf(pair->second));
  Value a = m.alignTo(pair->first, rank), b = m.alignTo(pair->second, rank);
  SmallVector<int64_t> as, bs, out;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t x = typeOf(a).getDimSize(d), y = typeOf(b).getDimSize(d);
    as.append({x, 1});
    bs.append({1, y});
    out.push_back(x * y);
  }
  Value product;
  if (elementOf(a).isInteger(1))
    product = m.logicalAnd(m.reshape(a, as), m.reshape(b, bs));
  else
    product = m.mul(m.reshape(a, as), m.reshape(b, bs));
  return one(m.reshape(product, out));
}

/// The contraction of `a`'s dims `da` with `b`'s dims `db` (pairwise, equal
/// sizes): a permuted to [free, contracted], b to [contracted, free], one
/// matmul, reshaped to a's free dims then b's.
FailureOr<Value> contract(Importer &imp, Math &m, Value a, Value b, ArrayRef<int64_t> da,
                          ArrayRef<int64_t> db) {
  SmallVector<int64_t> freeA, freeB, permA, permB, shape;
  int64_t k = 1, fa = 1, fb = 1;
  for (size_t i = 0; i < da.size(); ++i) {
    if (typeOf(a).getDimSize(da[i]) != typeOf(b).getDimSize(db[i])) {
      imp.error() << "contracted dims " << da[i] << " and " << db[i] << " have different sizes";
      return failure();
    }
    k *= typeOf(a).getDimSize(da[i]);
  }
  for (int64_t d = 0; d < rankOf(a); ++d)
    if (!llvm::is_contained(da, d)) {
      permA.push_back(d);
      fa *= typeOf(a).getDimSize(d);
      shape.push_back(typeOf(a).getDimSize(d));
    }
  llvm::append_range(permA, da);
  llvm::append_range(permB, db);
  for (int64_t d = 0; d < rankOf(b); ++d)
    if (!llvm::is_contained(db, d)) {
      permB.push_back(d);
      fb *= typeOf(b).getDimSize(d);
      shape.push_back(typeOf(b).getDimSize(d));
    }
  auto perm = [&](Value v, ArrayRef<int64_t> p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != int64_t(i))
        return m.permute(v, p);
    return v;
  };
  Value a2 = m.reshape(perm(a, permA), {fa, k});
  Value b2 = m.reshape(perm(b, permB), {k, fb});
  return m.reshape(matmulOf(m, a2, b2), shape);
}

/// tensordot(self, other, dims_self, dims_other).
Result tensordot(Importer &imp, jit::Node *, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  auto da = imp.intList(in[2]);
  auto db = imp.intList(in[3]);
  if (failed(pair) || failed(da) || failed(db))
    return failure();
  if (da->size() != db->size()) {
    imp.error() << "tensordot needs as many dims of each operand";
    return failure();
  }
  SmallVector<int64_t> dimsA, dimsB;
  for (size_t i = 0; i < da->size(); ++i) {
    auto x = normDim(imp, (*da)[i], rankOf(pair->first));
    auto y = normDim(imp, (*db)[i], rankOf(pair->second));
    if (failed(x) || failed(y))
      return failure();
    if (llvm::is_contained(dimsA, *x) || llvm::is_contained(dimsB, *y)) {
      imp.error() << "tensordot contracts a dim twice";
      return failure();
    }
    dimsA.push_back(*x);
    dimsB.push_back(*y);
  }
  Math m(imp);
  auto r = contract(imp, m, pair->first, pair->second, dimsA, dimsB);
  if (failed(r))
    return failure();
  return one(*r);
}

/// dist(self, other, p): the p-norm of the difference over every element.
Result dist(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1]);
  auto p = realNamed(imp, node, in, "p", 2);
  if (failed(pair) || failed(p))
    return failure();
  if (failed(requireFloat(imp, node, pair->first)))
    return failure();
  Math m(imp);
  if (failed(broadcastShape(imp, typeOf(pair->first).getShape(), typeOf(pair->second).getShape())))
    return failure();
  Value d = m.sub(pair->first, pair->second);
  return one(m.make<c::NormOp>(d, imp.builder.getDenseI64ArrayAttr(
                                      llvm::to_vector(llvm::seq<int64_t>(0, rankOf(d)))),
                               imp.builder.getBoolAttr(false), imp.builder.getF64FloatAttr(*p)));
}


//===----------------------------------------------------------------------===//
// Distances and margin losses.
//===----------------------------------------------------------------------===//

/// The p-norm of `x` along `dim` (a 0-d tensor as one element), through the
/// norm composite.
Value normAlong(Math &m, Value x, int64_t dim, bool keepdim, double p) {
  auto &b = m.b;
  if (rankOf(x) == 0) {
    Value n = m.make<c::NormOp>(m.reshape(x, {1}), b.getDenseI64ArrayAttr({0}),
                                b.getBoolAttr(false), b.getF64FloatAttr(p));
    return n;
  }
  return m.make<c::NormOp>(x, b.getDenseI64ArrayAttr({dim}), b.getBoolAttr(keepdim),
                           b.getF64FloatAttr(p));
}

/// pairwise_distance(x1, x2, p, eps, keepdim): the p-norm of x1 - x2 + eps
/// along the last dim of the broadcast shape.
FailureOr<Value> pairwiseDistance(Importer &imp, Math &m, Value x1, Value x2, double p,
                                  double eps, bool keepdim) {
  auto shape = broadcastShape(imp, typeOf(x1).getShape(), typeOf(x2).getShape());
  if (failed(shape))
    return failure();
  Value d = m.add(m.sub(x1, x2), m.scalarLike(eps, x1));
  return normAlong(m, d, int64_t(shape->size()) - 1, keepdim, p);
}

Result pairwiseDistanceOp(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1], /*toFloat=*/true);
  auto p = realNamed(imp, node, in, "p", 2);
  auto eps = realNamed(imp, node, in, "eps", 1e-6);
  auto keepdim = boolNamed(imp, node, in, "keepdim", false);
  if (failed(pair) || failed(p) || failed(eps) || failed(keepdim))
    return failure();
  Math m(imp);
  auto r = pairwiseDistance(imp, m, pair->first, pair->second, *p, *eps, *keepdim);
  if (failed(r))
    return failure();
  return one(*r);
}

/// cosine_similarity(x1, x2, dim, eps): sum((x1 / max(|x1|, eps)) * (x2 /
/// max(|x2|, eps))) along dim, the norms along dim, as PyTorch's kernel.
Result cosineSimilarity(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1], /*toFloat=*/true);
  auto dimGiven = intNamed(imp, node, in, "dim", 1);
  auto eps = realNamed(imp, node, in, "eps", 1e-8);
  if (failed(pair) || failed(dimGiven) || failed(eps))
    return failure();
  Math m(imp);
  auto bc = broadcastPair(imp, m, pair->first, pair->second);
  if (failed(bc))
    return failure();
  auto [x1, x2] = *bc;
  bool scalar = rankOf(x1) == 0;
  if (scalar) {
    x1 = m.reshape(x1, {1});
    x2 = m.reshape(x2, {1});
  }
  auto dim = normDim(imp, *dimGiven, rankOf(x1));
  if (failed(dim))
    return failure();
  Value n1 = m.maximum(normAlong(m, x1, *dim, true, 2), m.scalarLike(*eps, x1));
  Value n2 = m.maximum(normAlong(m, x2, *dim, true, 2), m.scalarLike(*eps, x2));
  Value r = m.reduceSum(m.mul(m.div(x1, n1), m.div(x2, n2)), {*dim}, false);
  return one(r);
}

/// triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
/// reduction): max(margin + d(a, p) - d(a, n), 0), d(a, n) the smaller of
/// it and d(p, n) with swap.
Result tripletMarginLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0], in[1], in[2]}, /*integerToFloat=*/true);
  auto margin = realNamed(imp, node, in, "margin", 1);
  auto p = realNamed(imp, node, in, "p", 2);
  auto eps = realNamed(imp, node, in, "eps", 1e-6);
  auto swap = boolNamed(imp, node, in, "swap", false);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(values) || failed(margin) || failed(p) || failed(eps) || failed(swap) ||
      failed(reduction))
    return failure();
  Value a = (*values)[0], pos = (*values)[1], neg = (*values)[2];
  if (rankOf(a) != rankOf(pos) || rankOf(a) != rankOf(neg)) {
    imp.error() << "triplet_margin_loss needs anchor, positive and negative of one rank";
    return failure();
  }
  Math m(imp);
  auto dPos = pairwiseDistance(imp, m, a, pos, *p, *eps, false);
  auto dNeg = pairwiseDistance(imp, m, a, neg, *p, *eps, false);
  if (failed(dPos) || failed(dNeg))
    return failure();
  if (failed(broadcastShape(imp, typeOf(*dPos).getShape(), typeOf(*dNeg).getShape())))
    return failure();
  Value far = *dNeg;
  if (*swap) {
    auto dSwap = pairwiseDistance(imp, m, pos, neg, *p, *eps, false);
    if (failed(dSwap))
      return failure();
    if (failed(broadcastShape(imp, typeOf(*dSwap).getShape(), typeOf(far).getShape())))
      return failure();
    far = m.minimum(far, *dSwap);
  }
  Value loss = m.clampMin(m.sub(m.add(m.scalarLike(*margin, *dPos), *dPos), far), 0);
  return one(reduceLoss(m, loss, *reduction));
}

/// cosine_embedding_loss(x1, x2, target, margin, reduction): 1 - cos where
/// target is 1, max(cos - margin, 0) where it is -1, 0 elsewhere; cos along
/// the dim after the target's dims, the squared norms plus 1e-12.
Result cosineEmbeddingLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0], in[1], in[2]}, /*integerToFloat=*/true);
  auto margin = realNamed(imp, node, in, "margin", 0);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(values) || failed(margin) || failed(reduction))
    return failure();
  Value x1 = (*values)[0], x2 = (*values)[1], target = (*values)[2];
  int64_t dim = rankOf(target);
  if (rankOf(x1) != dim + 1 || rankOf(x2) != dim + 1 || dim > 1) {
    imp.error() << "cosine_embedding_loss needs 1-D or 2-D inputs and a target of one dim less";
    return failure();
  }
  Math m(imp);
  if (failed(broadcastShape(imp, typeOf(x1).getShape(), typeOf(x2).getShape())))
    return failure();
  Value dot = m.reduceSum(m.mul(x1, x2), {dim}, false);
  Value sq1 = m.add(m.reduceSum(m.mul(x1, x1), {dim}, false), m.scalarLike(1e-12, x1));
  Value sq2 = m.add(m.reduceSum(m.mul(x2, x2), {dim}, false), m.scalarLike(1e-12, x2));
  Value cos = m.div(dot, m.sqrtOf(m.mul(sq1, sq2)));
  if (failed(broadcastShape(imp, typeOf(cos).getShape(), typeOf(target).getShape())))
    return failure();
  Value zero = m.zeroLike(cos);
  Value pos = m.sub(m.scalarLike(1, cos), cos);
  Value neg = m.clampMin(m.sub(cos, m.scalarLike(*margin, cos)), 0);
  Value outPos = m.where(m.compare(ComparePredicate::eq, target, m.scalarLike(1, target)), pos, zero);
  Value outNeg = m.where(m.compare(ComparePredicate::eq, target, m.scalarLike(-1, target)), neg, zero);
  return one(reduceLoss(m, m.add(outPos, outNeg), *reduction));
}

/// hinge_embedding_loss(self, target, margin, reduction): max(margin - x, 0)
/// where target != 1, plus x where target != -1.
Result hingeEmbeddingLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1], /*toFloat=*/true);
  auto margin = realNamed(imp, node, in, "margin", 1);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(pair) || failed(margin) || failed(reduction))
    return failure();
  auto [x, t] = *pair;
  Math m(imp);
  if (failed(broadcastShape(imp, typeOf(x).getShape(), typeOf(t).getShape())))
    return failure();
  Value zero = m.zeroLike(x);
  Value clamped = m.clampMin(m.sub(m.scalarLike(*margin, x), x), 0);
  Value outMargin = m.where(m.compare(ComparePredicate::ne, t, m.scalarLike(1, t)), clamped, zero);
  Value outSelf = m.where(m.compare(ComparePredicate::ne, t, m.scalarLike(-1, t)), x, zero);
  return one(reduceLoss(m, m.add(outMargin, outSelf), *reduction));
}

/// margin_ranking_loss(x1, x2, target, margin, reduction): max(-t (x1 - x2) + margin, 0).
Result marginRankingLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0], in[1], in[2]}, /*integerToFloat=*/true);
  auto margin = realNamed(imp, node, in, "margin", 0);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(values) || failed(margin) || failed(reduction))
    return failure();
  Value x1 = (*values)[0], x2 = (*values)[1], t = (*values)[2];
  Math m(imp);
  auto s = broadcastShape(imp, typeOf(x1).getShape(), typeOf(x2).getShape());
  if (failed(s) || failed(broadcastShape(imp, *s, typeOf(t).getShape())))
    return failure();
  Value loss = m.clampMin(m.add(m.mul(m.neg(t), m.sub(x1, x2)), m.scalarLike(*margin, x1)), 0);
  return one(reduceLoss(m, loss, *reduction));
}

/// poisson_nll_loss(input, target, log_input, full, eps, reduction):
/// exp(x) - t x, or x - t log(x + eps); with full, Stirling's term
/// t log t - t + log(2 pi t) / 2 where t > 1.
Result poissonNllLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto pair = promotePair(imp, in[0], in[1], /*toFloat=*/true);
  auto logInput = imp.boolean(in[2]);
  auto full = imp.boolean(in[3]);
  auto eps = imp.real(in[4]);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(pair) || failed(logInput) || failed(full) || failed(eps) || failed(reduction))
    return failure();
  auto [x, t] = *pair;
  Math m(imp);
  if (failed(broadcastShape(imp, typeOf(x).getShape(), typeOf(t).getShape())))
    return failure();
  Value loss;
  if (*logInput)
    loss = m.sub(m.make<c::ExpOp>(x), m.mul(t, x));
  else
    loss = m.sub(x, m.mul(t, m.make<c::LogOp>(m.add(x, m.scalarLike(*eps, x)))));
  if (*full) {
    Value logT = m.make<c::LogOp>(t);
    Value stirling = m.add(m.sub(m.mul(t, logT), t),
                           m.mul(m.scalarLike(0.5, t),
                                 m.make<c::LogOp>(m.mul(m.scalarLike(2 * kPi, t), t))));
    Value small = m.compare(ComparePredicate::le, t, m.scalarLike(1, t));
    loss = m.add(loss, m.where(small, m.zeroLike(stirling), stirling));
  }
  return one(reduceLoss(m, loss, *reduction));
}

/// The classes' scores as [N, C] (a 1-D input as one row) and whether it was 1-D.
FailureOr<std::pair<Value, bool>> scoreRows(Importer &imp, Math &m, jit::Node *node, Value x) {
  if (rankOf(x) == 2)
    return std::make_pair(x, false);
  if (rankOf(x) == 1 || rankOf(x) == 0) {
    int64_t c = rankOf(x) == 0 ? 1 : typeOf(x).getDimSize(0);
    return std::make_pair(m.reshape(x, {1, c}), true);
  }
  imp.error() << node->kind().toQualString() << " needs a 1-D or 2-D input, got rank "
              << rankOf(x);
  return failure();
}

/// multi_margin_loss(self, target, p, margin, weight, reduction): per row,
/// the sum over the classes j != y of w[y] max(margin - x[y] + x[j], 0)^p / C.
Result multiMarginLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto x = floatTensor(imp, in[0]);
  auto target = imp.tensor(in[1]);
  auto p = imp.real(in[2]);
  auto margin = imp.real(in[3]);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(x) || failed(target) || failed(p) || failed(margin) || failed(reduction))
    return failure();
  if (*p != 1 && *p != 2) {
    imp.error() << "multi_margin_loss supports p = 1 or 2 (PyTorch too), got " << *p;
    return failure();
  }
  Math m(imp);
  auto rows = scoreRows(imp, m, node, *x);
  if (failed(rows))
    return failure();
  Value scores = rows->first;
  int64_t n = typeOf(scores).getDimSize(0), classes = typeOf(scores).getDimSize(1);
  if (elementOf(*target).isInteger(1) || isFloatType(elementOf(*target)) ||
      typeOf(*target).getNumElements() != n || rankOf(*target) > 1) {
    imp.error() << "multi_margin_loss needs an integer target of one class per row";
    return failure();
  }
  Value y = m.reshape(imp.cast(*target, imp.builder.getI64Type()), {n, 1});
  Value scoreY = m.gather(scores, y, int64_t(1));
  Value z = m.clampMin(m.add(m.sub(m.scalarLike(*margin, scores), scoreY), scores), 0);
  if (*p == 2)
    z = m.mul(z, z);
  if (const Val *w = argNamed(imp, node, in, "weight")) {
    auto weight = imp.tensor(*w);
    if (failed(weight))
      return failure();
    if (rankOf(*weight) != 1 || typeOf(*weight).getDimSize(0) != classes) {
      imp.error() << "multi_margin_loss's weight must have one entry per class";
      return failure();
    }
    Value wy = m.gather(m.reshape(imp.cast(*weight, elementOf(scores)), {1, classes}),
                                   m.reshape(y, {1, n}), int64_t(1));
    z = m.mul(z, m.reshape(wy, {n, 1}));
  }
  Value isY = m.compare(ComparePredicate::eq, y, m.iota(classes, {1, classes}));
  z = m.where(isY, m.zeroLike(z), z);
  Value loss = m.div(m.reduceSum(z, {1}, false), m.scalarLike(double(classes), z));
  loss = m.reshape(loss, typeOf(*target).getShape()); // [N], or a 1-D input's [1] or []
  return one(reduceLoss(m, loss, *reduction));
}

/// multilabel_margin_loss(self, target, reduction): per row, the targets
/// are y[0..k) before the first negative entry; the sum over them and over
/// the non-target classes j of max(1 - x[y] + x[j], 0), divided by C.
Result multilabelMarginLoss(Importer &imp, jit::Node *node, Inputs in) {
  auto x = floatTensor(imp, in[0]);
  auto target = imp.tensor(in[1]);
  auto reduction = reductionNamed(imp, node, in);
  if (failed(x) || failed(target) || failed(reduction))
    return failure();
  Math m(imp);
  auto rows = scoreRows(imp, m, node, *x);
  if (failed(rows))
    return failure();
  Value scores = rows->first;
  int64_t n = typeOf(scores).getDimSize(0), classes = typeOf(scores).getDimSize(1);
  if (elementOf(*target).isInteger(1) || isFloatType(elementOf(*target)) ||
      typeOf(*target).getNumElements() != n * classes || rankOf(*target) != rankOf(*x)) {
    imp.error() << "multilabel_margin_loss needs an integer target of the input's shape";
    return failure();
  }
  Type i64 = imp.builder.getI64Type();
  Value t = m.reshape(imp.cast(*target, i64), {n, classes});
  Value negatives = m.cast(m.compare(ComparePredicate::lt, t, m.zeroLike(t)), i64);
  Value valid = m.compare(ComparePredicate::eq, m.make<c::CumsumOp>(negatives, int64_t(1), false),
                          m.zeroLike(t)); // [N, C]: the targets before the first negative
  Value hits = m.logicalAnd(
      m.compare(ComparePredicate::eq, m.reshape(t, {n, classes, 1}), m.iota(classes, {1, 1, classes})),
      m.reshape(valid, {n, classes, 1}));
  Value isTarget = m.compare(ComparePredicate::ne, m.reduceSum(m.cast(hits, i64), {1}, false),
                             m.scalar(0, i64)); // [N, C]
  Value index = m.maximum(t, m.zeroLike(t));
  Value scoreY = m.gather(scores, index, int64_t(1)); // [N, C(targets)]
  Value z = m.add(m.sub(m.scalarLike(1, scores), m.reshape(scoreY, {n, classes, 1})),
                  m.reshape(scores, {n, 1, classes}));
  Value mask = m.logicalAnd(m.reshape(valid, {n, classes, 1}),
                            m.logicalNot(m.reshape(isTarget, {n, 1, classes})));
  Value h = m.where(mask, m.clampMin(z, 0), m.zeroLike(z));
  Value loss = m.div(m.reduceSum(h, {1, 2}, false), m.scalarLike(double(classes), h));
  if (rows->second)
    loss = m.reshape(loss, {});
  return one(reduceLoss(m, loss, *reduction));
}

/// bilinear(x1, x2, weight, bias): y[..., o] = x1 W[o] x2 + b[o]: x1 times
/// W as [I, O J] (a matmul), times x2 summed over J.
Result bilinear(Importer &imp, jit::Node *node, Inputs in) {
  auto values = imp.promote({in[0], in[1], in[2]});
  if (failed(values))
    return failure();
  Value x1 = (*values)[0], x2 = (*values)[1], w = (*values)[2];
  if (elementOf(x1).isInteger(1)) {
    imp.error() << "bilinear of bool tensors (PyTorch refuses it too)";
    return failure();
  }
  if (rankOf(w) != 3 || rankOf(x1) < 1 || rankOf(x1) != rankOf(x2) ||
      typeOf(x1).getShape().drop_back() != typeOf(x2).getShape().drop_back() ||
      typeOf(x1).getShape().back() != typeOf(w).getDimSize(1) ||
      typeOf(x2).getShape().back() != typeOf(w).getDimSize(2)) {
    imp.error() << "bilinear needs inputs [..., I] and [..., J] with one batch shape and a "
                   "weight [O, I, J]";
    return failure();
  }
  Math m(imp);
  int64_t o = typeOf(w).getDimSize(0), i = typeOf(w).getDimSize(1), j = typeOf(w).getDimSize(2);
  SmallVector<int64_t> outShape(typeOf(x1).getShape().drop_back());
  int64_t batch = 1;
  for (int64_t d : outShape)
    batch *= d;
  outShape.push_back(o);
  Value wi = m.reshape(m.permute(w, {1, 0, 2}), {i, o * j});
  Value t = m.reshape(m.matmul(m.reshape(x1, {batch, i}), wi), {batch, o, j});
  Value y = m.reduceSum(m.mul(t, m.reshape(x2, {batch, 1, j})), {2}, false);
  if (const Val *bv = argNamed(imp, node, in, "bias")) {
    auto bias = imp.tensor(*bv);
    if (failed(bias))
      return failure();
    if (rankOf(*bias) != 1 || typeOf(*bias).getDimSize(0) != o) {
      imp.error() << "bilinear's bias must be [O]";
      return failure();
    }
    y = m.add(y, imp.cast(*bias, elementOf(y)));
  }
  return one(m.reshape(y, outShape));
}


//===----------------------------------------------------------------------===//
// einsum.
//===----------------------------------------------------------------------===//

/// The diagonal of `x` over its dims `d1` < `d2` (equal sizes), as the last
/// dim: the two dims moved last and merged, then every (n + 1)-th element.
Value diagonalOf(Math &m, Value x, int64_t d1, int64_t d2) {
  SmallVector<int64_t> perm, shape;
  for (int64_t d = 0; d < rankOf(x); ++d)
    if (d != d1 && d != d2) {
      perm.push_back(d);
      shape.push_back(typeOf(x).getDimSize(d));
    }
  int64_t n = typeOf(x).getDimSize(d1);
  perm.append({d1, d2});
  bool identity = d1 == rankOf(x) - 2 && d2 == rankOf(x) - 1;
  Value moved = identity ? x : m.permute(x, perm);
  shape.push_back(n * n);
  Value flat = m.reshape(moved, shape);
  if (n <= 1)
    return flat;
  return m.make<c::SliceOp>(flat, int64_t(shape.size() - 1), int64_t(0), n * n, n + 1);
}

/// einsum(equation, tensors): each operand's repeated labels become their
/// diagonal, every operand is permuted and viewed over all the labels (size
/// 1 where it lacks one), the product broadcasts, and the labels not in the
/// output are summed. "..." stands for the broadcast leading dims.
Result einsum(Importer &imp, jit::Node *, Inputs in) {
  if (!in[0].isConstant() || !in[0].constant.isString()) {
    imp.error() << "einsum needs a constant equation";
    return failure();
  }
  std::string eq;
  for (char ch : in[0].constant.toStringRef())
    if (ch != ' ')
      eq.push_back(ch);
  auto items = imp.list(in[1]);
  if (failed(items))
    return failure();
  std::vector<Val> vals(items->begin(), items->end());
  auto promoted = imp.promote(vals);
  if (failed(promoted))
    return failure();
  std::vector<Value> xs = *promoted;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::optional<std::string> rhs;
  if (arrow != std::string::npos)
    rhs = eq.substr(arrow + 2);
  SmallVector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  if (terms.size() != xs.size()) {
    imp.error() << "einsum equation has " << terms.size() << " operands, got " << xs.size()
                << " tensors";
    return failure();
  }
  // Labels: letters as themselves, ellipsis dims as 0, 1, ... (from the left
  // of the broadcast ellipsis).
  auto parse = [&](const std::string &term, int64_t rank, int64_t &ellipsis,
                   SmallVector<int> &labels) -> LogicalResult {
    int64_t letters = 0;
    bool dots = false;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        if (dots) {
          imp.error() << "einsum term '" << term << "' has two ellipses";
          return failure();
        }
        dots = true;
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
        ++letters;
      } else {
        imp.error() << "einsum: invalid character '" << term[i] << "' in '" << term << "'";
        return failure();
      }
    }
    ellipsis = dots ? rank - letters : 0;
    if (ellipsis < 0 || (!dots && letters != rank)) {
      imp.error() << "einsum term '" << term << "' does not match an operand of rank " << rank;
      return failure();
    }
    return success();
  };
  std::vector<SmallVector<int>> opLabels(xs.size());
  std::vector<int64_t> ellipses(xs.size());
  int64_t maxEllipsis = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    if (failed(parse(terms[k], rankOf(xs[k]), ellipses[k], opLabels[k])))
      return failure();
    maxEllipsis = std::max(maxEllipsis, ellipses[k]);
  }
  // Ellipsis labels are 0..maxEllipsis-1; letters are 256 + the character.
  for (size_t k = 0; k < xs.size(); ++k) {
    const std::string &term = terms[k];
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        for (int64_t e = maxEllipsis - ellipses[k]; e < maxEllipsis; ++e)
          opLabels[k].push_back(int(e));
        i += 2;
      } else {
        opLabels[k].push_back(256 + term[i]);
      }
    }
  }
  std::map<int, int64_t> counts;
  for (auto &labels : opLabels)
    for (int l : labels)
      counts[l]++;
  SmallVector<int> out;
  if (rhs) {
    for (size_t i = 0; i < rhs->size(); ++i) {
      if (rhs->compare(i, 3, "...") == 0) {
        for (int64_t e = 0; e < maxEllipsis; ++e)
          out.push_back(int(e));
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>((*rhs)[i]))) {
        int l = 256 + (*rhs)[i];
        if (!counts.count(l) || llvm::is_contained(out, l)) {
          imp.error() << "einsum output label '" << (*rhs)[i]
                      << "' is repeated or not among the inputs'";
          return failure();
        }
        out.push_back(l);
      } else {
        imp.error() << "einsum: invalid character '" << (*rhs)[i] << "' in the output";
        return failure();
      }
    }
  } else {
    for (int64_t e = 0; e < maxEllipsis; ++e)
      out.push_back(int(e));
    for (auto [l, n] : counts) // std::map: labels in order (A-Z before a-z)
      if (l >= 256 && n == 1)
        out.push_back(l);
  }
  Math m(imp);
  // Diagonals of labels repeated within an operand.
  for (size_t k = 0; k < xs.size(); ++k) {
    auto &labels = opLabels[k];
    for (bool again = true; again;) {
      again = false;
      for (size_t i = 0; i < labels.size() && !again; ++i)
        for (size_t j = i + 1; j < labels.size() && !again; ++j)
          if (labels[i] == labels[j]) {
            if (typeOf(xs[k]).getDimSize(i) != typeOf(xs[k]).getDimSize(j)) {
              imp.error() << "einsum: a repeated label has dims of different sizes";
              return failure();
            }
            xs[k] = diagonalOf(m, xs[k], i, j);
            int l = labels[i];
            labels.erase(labels.begin() + j);
            labels.erase(labels.begin() + i);
            labels.push_back(l);
            again = true;
          }
    }
  }
  // All labels: the output's first, then the summed ones.
  SmallVector<int> all(out);
  for (auto &labels : opLabels)
    for (int l : labels)
      if (!llvm::is_contained(all, l))
        all.push_back(l);
  std::map<int, int64_t> sizes;
  for (size_t k = 0; k < xs.size(); ++k)
    for (size_t i = 0; i < opLabels[k].size(); ++i) {
      int64_t size = typeOf(xs[k]).getDimSize(i);
      auto [it, inserted] = sizes.emplace(opLabels[k][i], size);
      if (!inserted && it->second != size && size != 1 && it->second != 1) {
        imp.error() << "einsum: a label has sizes " << it->second << " and " << size;
        return failure();
      }
      if (!inserted && it->second == 1)
        it->second = size;
    }
  bool isBool = !xs.empty() && elementOf(xs.front()).isInteger(1);
  Value product;
  for (size_t k = 0; k < xs.size(); ++k) {
    SmallVector<int64_t> perm, shape;
    for (int l : all) {
      auto it = llvm::find(opLabels[k], l);
      if (it != opLabels[k].end()) {
        int64_t d = it - opLabels[k].begin();
        perm.push_back(d);
        shape.push_back(typeOf(xs[k]).getDimSize(d));
      } else {
        shape.push_back(1);
      }
    }
    Value v = xs[k];
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity &= perm[i] == int64_t(i);
    if (!identity)
      v = m.permute(v, perm);
    v = m.reshape(v, shape);
    if (isBool)
      v = m.cast(v, imp.builder.getI64Type());
    product = product ? m.mul(product, v) : v;
  }
  SmallVector<int64_t> fullShape;
  for (int l : all)
    fullShape.push_back(sizes[l]);
  product = m.broadcastTo(product, RankedTensorType::get(fullShape, elementOf(product)));
  SmallVector<int64_t> summed;
  for (size_t i = out.size(); i < all.size(); ++i)
    summed.push_back(i);
  Value r = m.sumOver(product, summed, false);
  if (isBool)
    r = m.nonZero(r);
  return one(r);
}

//===----------------------------------------------------------------------===//
// Statistics and integration.
//===----------------------------------------------------------------------===//

/// The diagonal of a square matrix [n, n] as [n].
Value matrixDiagonal(Math &m, Value x) { return diagonalOf(m, x, 0, 1); }

/// cov(self, correction, fweights, aweights), as PyTorch: rows are
/// variables, columns observations (a 0-d or 1-D input is one variable);
/// the weights w = fweights * aweights; avg = sum(x w) / sum(w); the
/// normalization sum(w) - correction (times sum(w aw) / sum(w) with
/// aweights), 0 when not positive; size-1 dims squeezed.
FailureOr<Value> covariance(Importer &imp, Math &m, jit::Node *node, Inputs in, Value x) {
  if (rankOf(x) > 2) {
    imp.error() << "cov expects an input of two or fewer dimensions (PyTorch too)";
    return failure();
  }
  Type f32 = imp.builder.getF32Type();
  if (!isFloatType(elementOf(x)))
    x = m.cast(x, f32);
  Type et = elementOf(x);
  int64_t vars = rankOf(x) < 2 ? 1 : typeOf(x).getDimSize(0);
  int64_t obs = rankOf(x) < 2 ? typeOf(x).getNumElements() : typeOf(x).getDimSize(1);
  x = m.reshape(x, {vars, obs});
  auto correction = intNamed(imp, node, in, "correction", 1);
  if (failed(correction))
    return failure();
  Value w, aw;
  for (const char *name : {"fweights", "aweights"}) {
    const Val *v = node ? argNamed(imp, node, in, name) : nullptr;
    if (!v)
      continue;
    auto t = imp.tensor(*v);
    if (failed(t))
      return failure();
    if (rankOf(*t) > 1 || typeOf(*t).getNumElements() != obs) {
      imp.error() << "cov's " << name << " must be 1-D with one entry per observation";
      return failure();
    }
    bool frequency = name == StringRef("fweights");
    if (frequency && isFloatType(elementOf(*t))) {
      imp.error() << "cov's fweights must be integers (PyTorch too)";
      return failure();
    }
    if (!frequency && !isFloatType(elementOf(*t))) {
      imp.error() << "cov's aweights must be floats (PyTorch too)";
      return failure();
    }
    Value weight = m.reshape(m.cast(*t, et), {obs});
    if (!frequency)
      aw = weight;
    w = w ? m.mul(w, weight) : weight;
  }
  Value wSum = w ? m.reduceSum(w, {0}, false) : m.scalar(double(obs), et);
  Value avg = m.div(m.reduceSum(w ? m.mul(x, w) : x, {1}, true), wSum);
  Value norm;
  if (w && aw && *correction != 0)
    norm = m.sub(wSum, m.div(m.mul(m.scalar(double(*correction), et),
                                   m.reduceSum(m.mul(w, aw), {0}, false)),
                             wSum));
  else
    norm = m.sub(wSum, m.scalar(double(*correction), et));
  norm = m.where(m.compare(ComparePredicate::le, norm, m.zeroLike(norm)), m.zeroLike(norm), norm);
  Value centered = m.sub(x, avg);
  Value c = m.matmul(centered, m.transpose(w ? m.mul(centered, w) : centered));
  c = m.div(c, norm);
  SmallVector<int64_t> squeezed;
  for (int64_t d : typeOf(c).getShape())
    if (d != 1)
      squeezed.push_back(d);
  return m.reshape(c, squeezed);
}

Result cov(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Math m(imp);
  auto c = covariance(imp, m, node, in, *x);
  if (failed(c))
    return failure();
  return one(*c);
}

/// corrcoef(self): cov divided by the outer product of the standard
/// deviations (c / c for one variable), clipped to [-1, 1].
Result corrcoef(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Math m(imp);
  auto c = covariance(imp, m, node, in, *x);
  if (failed(c))
    return failure();
  if (rankOf(*c) == 0)
    return one(m.div(*c, *c));
  int64_t n = typeOf(*c).getDimSize(0);
  Value sd = m.sqrtOf(matrixDiagonal(m, *c));
  Value r = m.div(m.div(*c, m.reshape(sd, {n, 1})), m.reshape(sd, {1, n}));
  return one(m.minimum(m.maximum(r, m.scalarLike(-1, r)), m.scalarLike(1, r)));
}

/// trapezoid / trapz / cumulative_trapezoid (y, x or dx, dim): the areas
/// (y[i] + y[i+1]) dx[i] / 2 along dim, summed or accumulated; dx the
/// differences of x (a 1-D x along dim) or the constant dx.
Converter trapezoid(bool cumulative) {
  return [cumulative](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto y = floatTensor(imp, in[0]);
    auto dimGiven = intNamed(imp, node, in, "dim", -1);
    if (failed(y) || failed(dimGiven))
      return failure();
    if (rankOf(*y) == 0) {
      imp.error() << "trapezoid of a 0-d tensor (PyTorch refuses it too)";
      return failure();
    }
    auto dim = normDim(imp, *dimGiven, rankOf(*y));
    if (failed(dim))
      return failure();
    Math m(imp);
    int64_t n = typeOf(*y).getDimSize(*dim);
    if (n == 0) {
      imp.error() << "trapezoid of an empty dim";
      return failure();
    }
    Value areas = m.add(m.sliceOf(*y, *dim, 1, n), m.sliceOf(*y, *dim, 0, n - 1));
    const Val *xv = argNamed(imp, node, in, "x");
    if (xv && xv->isTensor()) {
      auto x = imp.tensor(*xv);
      if (failed(x))
        return failure();
      Value xs = m.cast(*x, elementOf(*y));
      Value dx;
      if (rankOf(xs) == 1) {
        if (typeOf(xs).getDimSize(0) != n) {
          imp.error() << "trapezoid: x has " << typeOf(xs).getDimSize(0) << " points, y " << n;
          return failure();
        }
        dx = m.sub(m.sliceOf(xs, 0, 1, n), m.sliceOf(xs, 0, 0, n - 1));
        SmallVector<int64_t> shape(rankOf(*y), 1);
        shape[*dim] = n - 1;
        dx = m.reshape(dx, shape);
      } else {
        if (rankOf(xs) != rankOf(*y)) {
          imp.error() << "trapezoid: x must be 1-D or of y's rank";
          return failure();
        }
        int64_t nx = typeOf(xs).getDimSize(*dim);
        if (nx == 0) {
          imp.error() << "trapezoid: x is empty along dim";
          return failure();
        }
        dx = m.sub(m.sliceOf(xs, *dim, 1, nx), m.sliceOf(xs, *dim, 0, nx - 1));
      }
      if (failed(broadcastShape(imp, typeOf(dx).getShape(), typeOf(areas).getShape())))
        return failure();
      areas = m.mul(dx, areas);
    } else {
      double dx = 1;
      if (const Val *dv = argNamed(imp, node, in, "dx")) {
        auto given = imp.real(*dv);
        if (failed(given))
          return failure();
        dx = *given;
      }
      areas = m.mul(m.scalarLike(dx, areas), areas);
    }
    areas = m.div(areas, m.scalarLike(2, areas));
    if (cumulative)
      return one(m.make<c::CumsumOp>(areas, *dim, false));
    if (typeOf(areas).getDimSize(*dim) == 0) {
      SmallVector<int64_t> shape(typeOf(areas).getShape());
      shape.erase(shape.begin() + *dim);
      return one(imp.splat(0, elementOf(areas), shape));
    }
    return one(m.reduceSum(areas, {*dim}, false));
  };
}

/// renorm(self, p, dim, maxnorm): each slice along dim scaled by
/// maxnorm / (norm + 1e-7) where its p-norm exceeds maxnorm.
Result renorm(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto p = imp.real(in[1]);
  auto dimGiven = imp.integer(in[2]);
  auto maxnorm = imp.real(in[3]);
  if (failed(x) || failed(p) || failed(dimGiven) || failed(maxnorm))
    return failure();
  if (!isFloatType(elementOf(*x))) {
    imp.error() << "renorm of a non-float tensor (PyTorch refuses it too)";
    return failure();
  }
  if (*p <= 0 || *maxnorm < 0) {
    imp.error() << "renorm needs p > 0 and maxnorm >= 0 (PyTorch too)";
    return failure();
  }
  if (rankOf(*x) == 0) {
    imp.error() << "renorm of a 0-d tensor (PyTorch refuses it too)";
    return failure();
  }
  auto dim = normDim(imp, *dimGiven, rankOf(*x));
  if (failed(dim))
    return failure();
  Math m(imp);
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < rankOf(*x); ++d)
    if (d != *dim)
      dims.push_back(d);
  Value norm = dims.empty() ? m.absOf(*x)
                            : m.make<c::NormOp>(*x, imp.builder.getDenseI64ArrayAttr(dims),
                                                imp.builder.getBoolAttr(true),
                                                imp.builder.getF64FloatAttr(*p));
  Value limit = m.scalarLike(*maxnorm, norm);
  Value factor = m.where(m.compare(ComparePredicate::gt, norm, limit),
                         m.div(limit, m.add(norm, m.scalarLike(1e-7, norm))),
                         m.scalarLike(1, norm));
  return one(m.mul(*x, factor));
}

/// linalg_vander(x, N): [..., n, N] of the powers x^0 .. x^(N-1), a
/// cumulative product as PyTorch's.
Result vander(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Value v = rankOf(*x) == 0 ? imp.reshape(*x, {1}) : *x; // PyTorch views a 0-d x as [1]
  if (elementOf(v).isInteger(1))
    v = imp.cast(v, imp.builder.getI64Type());
  int64_t n = typeOf(v).getShape().back();
  auto count = intNamed(imp, node, in, "N", n);
  if (failed(count))
    return failure();
  if (*count <= 1) {
    imp.error() << "linalg.vander needs N > 1 (PyTorch too), got " << *count;
    return failure();
  }
  Math m(imp);
  SmallVector<int64_t> shape(typeOf(v).getShape());
  shape.push_back(1);
  Value column = m.reshape(v, shape);
  SmallVector<int64_t> ones(shape), powers(shape);
  powers.back() = *count - 1;
  Value repeated = m.broadcastTo(column, RankedTensorType::get(powers, elementOf(v)));
  Value first = imp.splat(1, elementOf(v), ones);
  return one(m.make<c::CumprodOp>(m.concatOf({first, repeated}, rankOf(column) - 1),
                                  rankOf(column) - 1, false));
}

//===----------------------------------------------------------------------===//
// Norms without an SVD, and matrix powers.
//===----------------------------------------------------------------------===//

Value vectorNorm(Math &m, Value x, ArrayRef<int64_t> dims, bool keepdim, double p) {
  if (rankOf(x) == 0) {
    Value n = normAlong(m, x, 0, false, p);
    return n;
  }
  return m.make<c::NormOp>(x, m.b.getDenseI64ArrayAttr(dims), m.b.getBoolAttr(keepdim),
                           m.b.getF64FloatAttr(p));
}

/// The matrix norm over dims (d0, d1): 'fro' (and "fro" spelled as 2 over
/// both dims by callers), 1/-1 (max/min column sums), inf/-inf (max/min row
/// sums); 2, -2 and 'nuc' need singular values and are refused.
FailureOr<Value> matrixNorm(Importer &imp, Math &m, Value x, std::string ord, int64_t d0,
                            int64_t d1, bool keepdim) {
  if (d0 == d1) {
    imp.error() << "matrix norm over one dim twice";
    return failure();
  }
  SmallVector<int64_t> both{std::min(d0, d1), std::max(d0, d1)};
  if (ord == "fro")
    return vectorNorm(m, x, both, keepdim, 2);
  if (ord == "nuc" || ord == "2" || ord == "-2") {
    imp.error() << "matrix norm of order " << ord
                << " needs singular values (an SVD), which cleave does not compute";
    return failure();
  }
  bool columns = ord == "1" || ord == "-1";
  bool max = ord == "1" || ord == "inf";
  if (!columns && ord != "inf" && ord != "-inf") {
    imp.error() << "matrix norm of order " << ord << " (PyTorch accepts 'fro', 'nuc', +-1, +-2, +-inf)";
    return failure();
  }
  Value sums = m.reduceSum(m.absOf(x), {columns ? d0 : d1}, true);
  int64_t other = columns ? d1 : d0;
  Value r = max ? m.reduceMax(sums, {other}, true)
                : m.neg(m.reduceMax(m.neg(sums), {other}, true));
  if (!keepdim) {
    SmallVector<int64_t> shape;
    for (int64_t d = 0; d < rankOf(x); ++d)
      if (d != d0 && d != d1)
        shape.push_back(typeOf(x).getDimSize(d));
    r = m.reshape(r, shape);
  }
  return r;
}

std::string ordName(double ord) {
  if (std::isinf(ord))
    return ord > 0 ? "inf" : "-inf";
  if (ord == std::floor(ord))
    return std::to_string(static_cast<int64_t>(ord));
  return std::to_string(ord);
}

/// The order argument: a number or a string ('fro', 'nuc').
FailureOr<std::optional<std::pair<double, std::string>>> ordArg(Importer &imp, jit::Node *node,
                                                                Inputs in) {
  const Val *v = argNamed(imp, node, in, "ord");
  if (!v)
    v = argNamed(imp, node, in, "p");
  if (!v)
    return std::optional<std::pair<double, std::string>>();
  if (v->isConstant() && v->constant.isString())
    return std::optional(std::make_pair(0.0, v->constant.toStringRef()));
  auto d = imp.real(*v);
  if (failed(d))
    return failure();
  return std::optional(std::make_pair(*d, ordName(*d)));
}

FailureOr<Value> normInput(Importer &imp, jit::Node *node, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  Value v = *x;
  if (const Val *d = argNamed(imp, node, in, "dtype")) {
    auto code = imp.integer(*d);
    if (failed(code))
      return failure();
    auto type = imp.elementType(static_cast<c10::ScalarType>(*code));
    if (failed(type))
      return failure();
    v = imp.cast(v, *type);
  }
  if (!isFloatType(elementOf(v))) {
    imp.error() << node->kind().toQualString() << " of a non-float tensor (PyTorch refuses it too)";
    return failure();
  }
  return v;
}

/// linalg_norm(self, ord, dim, keepdim, dtype): a vector norm over one dim
/// (or all dims without ord and dim), a matrix norm over two.
Result linalgNorm(Importer &imp, jit::Node *node, Inputs in) {
  auto x = normInput(imp, node, in);
  auto ord = ordArg(imp, node, in);
  auto keepdim = boolNamed(imp, node, in, "keepdim", false);
  if (failed(x) || failed(ord) || failed(keepdim))
    return failure();
  int64_t rank = rankOf(*x);
  SmallVector<int64_t> dims;
  bool dimGiven = false;
  if (const Val *d = argNamed(imp, node, in, "dim")) {
    auto given = imp.intList(*d);
    if (failed(given))
      return failure();
    for (int64_t g : *given) {
      auto n = normDim(imp, g, rank);
      if (failed(n))
        return failure();
      dims.push_back(*n);
    }
    dimGiven = true;
  }
  Math m(imp);
  bool isString = *ord && ((*ord)->second == "fro" || (*ord)->second == "nuc");
  if (!dimGiven) {
    if (!*ord) {
      SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, rank));
      return one(vectorNorm(m, *x, all, *keepdim, 2));
    }
    if (rank == 1 && !isString)
      return one(vectorNorm(m, *x, {0}, *keepdim, (*ord)->first));
    if (rank != 2) {
      imp.error() << "linalg.norm with an order and no dim needs a 1-D or 2-D input";
      return failure();
    }
    dims = {0, 1};
  }
  if (dims.size() == 1) {
    if (isString) {
      imp.error() << "linalg.norm: order " << (*ord)->second << " needs two dims";
      return failure();
    }
    return one(vectorNorm(m, *x, dims, *keepdim, *ord ? (*ord)->first : 2));
  }
  if (dims.size() != 2) {
    imp.error() << "linalg.norm needs one or two dims, got " << dims.size();
    return failure();
  }
  auto r = matrixNorm(imp, m, *x, *ord ? (*ord)->second : "fro", dims[0], dims[1], *keepdim);
  if (failed(r))
    return failure();
  return one(*r);
}

/// linalg_matrix_norm(self, ord, dim, keepdim, dtype).
Result linalgMatrixNorm(Importer &imp, jit::Node *node, Inputs in) {
  auto x = normInput(imp, node, in);
  auto ord = ordArg(imp, node, in);
  auto keepdim = boolNamed(imp, node, in, "keepdim", false);
  if (failed(x) || failed(ord) || failed(keepdim))
    return failure();
  std::vector<int64_t> given{-2, -1};
  if (const Val *d = argNamed(imp, node, in, "dim")) {
    auto list = imp.intList(*d);
    if (failed(list))
      return failure();
    given = *list;
  }
  if (given.size() != 2 || rankOf(*x) < 2) {
    imp.error() << "linalg.matrix_norm needs two dims of an input of rank >= 2";
    return failure();
  }
  auto d0 = normDim(imp, given[0], rankOf(*x));
  auto d1 = normDim(imp, given[1], rankOf(*x));
  if (failed(d0) || failed(d1))
    return failure();
  Math m(imp);
  auto r = matrixNorm(imp, m, *x, *ord ? (*ord)->second : "fro", *d0, *d1, *keepdim);
  if (failed(r))
    return failure();
  return one(*r);
}

/// nuclear_norm: refused, it sums singular values.
Result nuclearNorm(Importer &imp, jit::Node *, Inputs) {
  imp.error() << "nuclear_norm needs singular values (an SVD), which cleave does not compute";
  return failure();
}

/// linalg_matrix_power(self, n): repeated squaring for n >= 0 (n = 0 the
/// identity); a negative n needs an inverse and is refused.
Result matrixPower(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto n = imp.integer(in[1]);
  if (failed(x) || failed(n))
    return failure();
  int64_t rank = rankOf(*x);
  if (rank < 2 || typeOf(*x).getDimSize(rank - 1) != typeOf(*x).getDimSize(rank - 2)) {
    imp.error() << "matrix_power needs square matrices [..., n, n]";
    return failure();
  }
  if (*n < 0) {
    imp.error() << "matrix_power with a negative exponent needs a matrix inverse, which "
                   "cleave does not compute";
    return failure();
  }
  Math m(imp);
  int64_t size = typeOf(*x).getDimSize(rank - 1);
  if (*n == 0) {
    Value eye = m.compare(ComparePredicate::eq, m.iota(size, {size, 1}), m.iota(size, {1, size}));
    return one(m.broadcastTo(m.cast(eye, elementOf(*x)), typeOf(*x)));
  }
  Value result, power = *x;
  for (int64_t e = *n; e > 0; e >>= 1) {
    if (e & 1)
      result = result ? matmulOf(m, result, power) : power;
    if (e > 1)
      power = matmulOf(m, power, power);
  }
  return one(result);
}

} // namespace

void addMathConverters(llvm::StringMap<Converter> &r) {
  r["aten::all"] = allAny(true);
  r["aten::any"] = allAny(false);
  r["aten::count_nonzero"] = countNonzero;
  r["aten::real"] = realOf;
  r["aten::isreal"] = isReal;
  r["aten::angle"] = angle;
  r["aten::signbit"] = signbit;
  r["aten::isclose"] = isclose;
  r["aten::ldexp"] = ldexp;
  r["aten::isin"] = isin;
  r["aten::diff"] = diff;
  r["aten::cross"] = cross;
  r["aten::linalg_cross"] = cross;
  r["aten::linalg_vecdot"] = vecdot;
  r["aten::linalg_multi_dot"] = multiDot;
  r["aten::kron"] = kron;
  r["aten::tensordot"] = tensordot;
  r["aten::dist"] = dist;
  r["aten::pairwise_distance"] = pairwiseDistanceOp;
  r["aten::cosine_similarity"] = cosineSimilarity;
  r["aten::triplet_margin_loss"] = tripletMarginLoss;
  r["aten::cosine_embedding_loss"] = cosineEmbeddingLoss;
  r["aten::hinge_embedding_loss"] = hingeEmbeddingLoss;
  r["aten::margin_ranking_loss"] = marginRankingLoss;
  r["aten::poisson_nll_loss"] = poissonNllLoss;
  r["aten::multi_margin_loss"] = multiMarginLoss;
  r["aten::multilabel_margin_loss"] = multilabelMarginLoss;
  r["aten::bilinear"] = bilinear;
  r["aten::einsum"] = einsum;
  r["aten::cov"] = cov;
  r["aten::corrcoef"] = corrcoef;
  r["aten::trapezoid"] = trapezoid(false);
  r["aten::trapz"] = trapezoid(false);
  r["aten::cumulative_trapezoid"] = trapezoid(true);
  r["aten::renorm"] = renorm;
  r["aten::linalg_vander"] = vander;
  r["aten::linalg_norm"] = linalgNorm;
  r["aten::linalg_matrix_norm"] = linalgMatrixNorm;
  r["aten::nuclear_norm"] = nuclearNorm;
  r["aten::linalg_matrix_power"] = matrixPower;
  r["aten::matrix_power"] = matrixPower;
}

} // namespace cleave::importer
