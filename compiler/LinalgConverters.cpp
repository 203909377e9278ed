//===- LinalgConverters.cpp - dense linear algebra as core ops ------------===//
//
// The importer's spellings of PyTorch's dense linear algebra on (batches of)
// small matrices, written as the core ops lu_factor, lu_pivots_to_permutation,
// cholesky and triangular_solve plus matmul, compares, selects and
// reductions:
//
// - det, slogdet, logdet: the LU factors' diagonal (its product, or its
//   signs and the sum of log |u_ii|) and the pivots' parity;
// - solve, inv, lu_solve: the permutation as a 0/1 matrix (P^T B is a
//   matmul), then two triangular solves;
// - lu, lu_unpack: P, L and U unpacked from the packed factors;
// - cholesky_solve, cholesky_inverse: two triangular solves;
// - tensorinv, tensorsolve: inv and solve of the tensors viewed as matrices.
//
// PyTorch raises on a singular input where cleave cannot (the values are only
// known at run time): det gives 0, solve and inv give infinities or NaN, and
// the *_ex ops return PyTorch's info codes. Only f32 is taken (PyTorch's CPU
// linear algebra is LAPACK's f32/f64; cleave has no f64).
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "dialects/cleave/CleaveBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;
namespace jit = torch::jit;

namespace cleave::importer {
namespace {

using Inputs = ArrayRef<Val>;
using Result = FailureOr<std::vector<Val>>;

Result values(std::initializer_list<Value> vs) {
  std::vector<Val> out;
  for (Value v : vs)
    out.push_back(Val::ofTensor(v));
  return out;
}

/// The batch dims of a batch of matrices.
SmallVector<int64_t> batchOf(Value x) {
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  return SmallVector<int64_t>(shape.drop_back(2));
}
int64_t rowsOf(Value x) { return typeOf(x).getShape().end()[-2]; }
int64_t colsOf(Value x) { return typeOf(x).getShape().back(); }

/// Reads operand `val` of op `name` as an f32 batch of matrices (square with
/// `square`), or reports why not.
FailureOr<Value> matrices(Importer &imp, const Val &val, const char *name, const char *what,
                          bool square) {
  auto x = imp.tensor(val);
  if (failed(x))
    return failure();
  auto type = typeOf(*x);
  if (!type.getElementType().isF32()) {
    imp.error() << name << ": " << what << " " << type
                << " must be f32 (PyTorch takes floating point matrices; cleave's linear "
                   "algebra kernels are f32)";
    return failure();
  }
  if (type.getRank() < 2) {
    imp.error() << name << ": " << what << " " << type
                << " must be a matrix or a batch of matrices (rank >= 2)";
    return failure();
  }
  if (square && rowsOf(*x) != colsOf(*x)) {
    imp.error() << name << ": " << what << " " << type << " must hold square matrices";
    return failure();
  }
  return *x;
}

/// The linear algebra of one node, built with one location.
struct Linalg {
  Importer &imp;
  CleaveBuilder b;

  explicit Linalg(Importer &imp) : imp(imp), b{imp.builder, imp.loc()} {}

  Type f32() { return imp.builder.getF32Type(); }
  Type i32() { return imp.builder.getI32Type(); }

  struct Lu {
    Value lu, pivots, info;
  };
  Lu luFactor(Value x) {
    SmallVector<int64_t> batch = batchOf(x), pivots = batch;
    pivots.push_back(std::min(rowsOf(x), colsOf(x)));
    auto op = b.b.create<LuFactorOp>(b.loc, typeOf(x), RankedTensorType::get(pivots, i32()),
                                     RankedTensorType::get(batch, i32()), x);
    return {op.getLu(), op.getPivots(), op.getInfo()};
  }

  /// P of A = P L U, [..., rows, rows] f32: P[i, j] = (perm[j] == i).
  Value permutationMatrix(Value pivots, int64_t rows) {
    SmallVector<int64_t> shape(typeOf(pivots).getShape());
    shape.back() = rows;
    Value perm = b.make<LuPivotsToPermutationOp>(
        RankedTensorType::get(shape, imp.builder.getI64Type()), pivots,
        imp.builder.getI64IntegerAttr(rows));
    shape.insert(shape.end() - 1, 1);
    perm = b.reshape(perm, shape);
    Value same = b.compare(ComparePredicate::eq, iota(rows, {rows, 1}), perm);
    return b.cast(same, f32());
  }

  /// 0, 1, ... n-1 as i64 in `shape` (n elements).
  Value iota(int64_t n, ArrayRef<int64_t> shape, int64_t start = 0) {
    SmallVector<int64_t> v(n);
    for (int64_t i = 0; i < n; ++i)
      v[i] = start + i;
    auto type = RankedTensorType::get(shape, imp.builder.getI64Type());
    return b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(type, ArrayRef<int64_t>(v)));
  }

  /// The [rows, cols] f32 identity (ones on the main diagonal).
  Value eye(int64_t rows, int64_t cols) {
    SmallVector<float> v(rows * cols, 0.0f);
    for (int64_t i = 0; i < std::min(rows, cols); ++i)
      v[i * cols + i] = 1.0f;
    auto type = RankedTensorType::get({rows, cols}, f32());
    return b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(type, ArrayRef<float>(v)));
  }

  /// The main diagonal of square matrices [..., n, n] as [..., n]: a select
  /// and a sum (exact: one term per row is not zero).
  Value diagonal(Value x) {
    int64_t n = colsOf(x);
    SmallVector<bool> v(n * n, false);
    for (int64_t i = 0; i < n; ++i)
      v[i * n + i] = true;
    auto type = RankedTensorType::get({n, n}, imp.builder.getI1Type());
    Value mask = b.b.create<ConstantOp>(b.loc, DenseElementsAttr::get(type, ArrayRef<bool>(v)));
    Value kept = b.where(mask, x, b.scalar(0, f32()));
    return b.reduceSum(kept, {typeOf(x).getRank() - 1}, /*keepdim=*/false);
  }

  Value reduceProd(Value x, int64_t dim) {
    return b.make<ReduceProdOp>(x, imp.builder.getDenseI64ArrayAttr({dim}),
                                imp.builder.getBoolAttr(false));
  }

  /// The sign of the pivots' permutation, f32 [...]: -1 per actual swap.
  Value permutationSign(Value pivots) {
    int64_t k = typeOf(pivots).getShape().back();
    Value swapped =
        b.compare(ComparePredicate::ne, b.cast(pivots, imp.builder.getI64Type()), iota(k, {k}, 1));
    Value factor = b.where(swapped, b.scalar(-1, f32()), b.scalar(1, f32()));
    return reduceProd(factor, typeOf(factor).getRank() - 1);
  }

  Value triangularSolve(Value a, Value rhs, bool upper, bool transpose, bool unit) {
    SmallVector<int64_t> shape =
        *broadcastShapes({typeOf(a).getShape().drop_back(2), typeOf(rhs).getShape().drop_back(2)});
    shape.append({rowsOf(rhs), colsOf(rhs)});
    return b.make<TriangularSolveOp>(RankedTensorType::get(shape, f32()), a, rhs,
                                     imp.builder.getBoolAttr(upper),
                                     imp.builder.getBoolAttr(transpose),
                                     imp.builder.getBoolAttr(unit));
  }

  /// Solves A X = B (A^H X = B with `adjoint`; X A = B, X A^H = B without
  /// `left`) from A's packed LU factors and pivots.
  Value luSolve(Value lu, Value pivots, Value rhs, bool left, bool adjoint) {
    if (!left) // X A = B is A^T X^T = B^T.
      return b.transpose(luSolve(lu, pivots, b.transpose(rhs), true, !adjoint));
    Value p = permutationMatrix(pivots, rowsOf(lu));
    if (!adjoint) { // U^-1 L^-1 P^T B
      Value y = b.make<MatmulOp>(b.transpose(p), rhs);
      Value z = triangularSolve(lu, y, /*upper=*/false, false, /*unit=*/true);
      return triangularSolve(lu, z, /*upper=*/true, false, false);
    }
    // A^T = U^T L^T P^T, so X = P L^-T U^-T B.
    Value y = triangularSolve(lu, rhs, /*upper=*/true, /*transpose=*/true, false);
    Value z = triangularSolve(lu, y, /*upper=*/false, /*transpose=*/true, /*unit=*/true);
    return b.make<MatmulOp>(p, z);
  }

  /// P, L, U of the packed factors of [..., m, n] matrices: P [m, m], L
  /// [m, k] with a unit diagonal, U [k, n].
  std::tuple<Value, Value, Value> unpack(Value lu, Value pivots) {
    int64_t m = rowsOf(lu), n = colsOf(lu), k = std::min(m, n);
    int64_t rank = typeOf(lu).getRank();
    Value p = permutationMatrix(pivots, m);
    Value lower = k == n ? lu : b.make<SliceOp>(lu, rank - 1, int64_t(0), k, int64_t(1));
    Value upper = k == m ? lu : b.make<SliceOp>(lu, rank - 2, int64_t(0), k, int64_t(1));
    Value l = b.add(b.make<TrilOp>(lower, int64_t(-1)), eye(m, k));
    Value u = b.make<TriuOp>(upper, int64_t(0));
    return {p, l, u};
  }

  /// A^-1 of square matrices, and the factorization's info.
  std::pair<Value, Value> inverse(Value a) {
    Lu f = luFactor(a);
    int64_t n = colsOf(a);
    Value inv = luSolve(f.lu, f.pivots, eye(n, n), true, false);
    return {b.broadcastTo(inv, typeOf(a)), f.info};
  }

  /// Solves A X = B (X A = B without `left`); B may be a (batch of)
  /// vector(s) as linalg.solve takes them. Returns X and the info.
  FailureOr<std::pair<Value, Value>> solve(Value a, Value rhs, bool left, const char *name) {
    auto bt = typeOf(rhs);
    int64_t n = colsOf(a);
    ArrayRef<int64_t> as = typeOf(a).getShape();
    bool vector = bt.getRank() == 1 ||
                  (bt.getRank() == typeOf(a).getRank() - 1 && bt.getShape() == as.drop_back(1));
    SmallVector<int64_t> shape(bt.getShape());
    if (vector)
      shape.insert(left ? shape.end() : shape.end() - 1, 1);
    if (!bt.getElementType().isF32() || shape.size() < 2 ||
        shape[left ? shape.size() - 2 : shape.size() - 1] != n) {
      imp.error() << name << ": B " << bt << " does not fit A " << typeOf(a)
                  << (left ? " (A X = B)" : " (X A = B)");
      return failure();
    }
    SmallVector<int64_t> batchA(as.drop_back(2)), batchB(ArrayRef<int64_t>(shape).drop_back(2));
    if (!broadcastShapes({batchA, batchB})) {
      imp.error() << name << ": batch dims of A " << typeOf(a) << " and B " << bt
                  << " do not broadcast";
      return failure();
    }
    Lu f = luFactor(a);
    Value x = luSolve(f.lu, f.pivots, b.reshape(rhs, shape), left, false);
    if (vector) {
      SmallVector<int64_t> out(typeOf(x).getShape());
      out.erase(left ? out.end() - 1 : out.end() - 2);
      x = b.reshape(x, out);
    }
    return std::make_pair(x, f.info);
  }

  /// Solves A X = B for A = L L^T (U^T U with `upper`).
  Value choleskySolve(Value factor, Value rhs, bool upper) {
    if (upper) {
      Value y = triangularSolve(factor, rhs, true, /*transpose=*/true, false);
      return triangularSolve(factor, y, true, false, false);
    }
    Value y = triangularSolve(factor, rhs, false, false, false);
    return triangularSolve(factor, y, false, /*transpose=*/true, false);
  }

  /// det of square matrices, and their LU factors.
  Value det(Value a) {
    Lu f = luFactor(a);
    Value d = diagonal(f.lu);
    return b.mul(permutationSign(f.pivots), reduceProd(d, typeOf(d).getRank() - 1));
  }

  /// sign and log |det| of square matrices: a singular one has sign 0 and
  /// logabsdet -inf, as PyTorch.
  std::pair<Value, Value> slogdet(Value a) {
    Lu f = luFactor(a);
    Value d = diagonal(f.lu);
    int64_t last = typeOf(d).getRank() - 1;
    Value sign = b.mul(permutationSign(f.pivots), reduceProd(b.make<SignOp>(d), last));
    Value logabs = b.reduceSum(b.make<LogOp>(b.make<AbsOp>(d)), {last}, false);
    return {sign, logabs};
  }
};

/// Reads a bool argument.
FailureOr<bool> flag(Importer &imp, const Val &val) { return imp.boolean(val); }

/// linalg.lu_factor and friends take pivot=True only on the CPU.
LogicalResult requirePivoting(Importer &imp, const Val &val, const char *name) {
  auto pivot = flag(imp, val);
  if (failed(pivot))
    return failure();
  if (!*pivot) {
    imp.error() << name << ": pivot=False is not supported (PyTorch's CPU LU always pivots)";
    return failure();
  }
  return success();
}

Result det(Importer &imp, jit::Node *, Inputs in) {
  auto a = matrices(imp, in[0], "det", "A", true);
  if (failed(a))
    return failure();
  return values({Linalg(imp).det(*a)});
}

Result slogdet(Importer &imp, jit::Node *, Inputs in) {
  auto a = matrices(imp, in[0], "slogdet", "A", true);
  if (failed(a))
    return failure();
  auto [sign, logabs] = Linalg(imp).slogdet(*a);
  return values({sign, logabs});
}

/// logdet: log |det| where det > 0, NaN where it is negative, -inf at 0.
Result logdet(Importer &imp, jit::Node *, Inputs in) {
  auto a = matrices(imp, in[0], "logdet", "A", true);
  if (failed(a))
    return failure();
  Linalg l(imp);
  auto [sign, logabs] = l.slogdet(*a);
  Value negative = l.b.compare(ComparePredicate::eq, sign, l.b.scalar(-1, l.f32()));
  return values({l.b.where(negative, l.b.scalar(std::nan(""), l.f32()), logabs)});
}

/// linalg_lu_factor(A, pivot) / linalg_lu_factor_ex(A, pivot, check_errors)
/// / _lu_with_info(A, pivot, check_errors).
Converter luFactor(bool withInfo) {
  return [withInfo](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto a = matrices(imp, in[0], "lu_factor", "A", false);
    if (failed(a) || failed(requirePivoting(imp, in[1], "lu_factor")))
      return failure();
    auto f = Linalg(imp).luFactor(*a);
    if (withInfo)
      return values({f.lu, f.pivots, f.info});
    return values({f.lu, f.pivots});
  };
}

Result linalgLu(Importer &imp, jit::Node *, Inputs in) {
  auto a = matrices(imp, in[0], "linalg.lu", "A", false);
  if (failed(a) || failed(requirePivoting(imp, in[1], "linalg.lu")))
    return failure();
  Linalg l(imp);
  auto f = l.luFactor(*a);
  auto [p, lower, upper] = l.unpack(f.lu, f.pivots);
  return values({p, lower, upper});
}

/// Checks that `pivots` fits the factors `lu` ([..., min(m, n)] integers).
LogicalResult checkPivots(Importer &imp, Value lu, Value pivots, const char *name) {
  auto type = typeOf(pivots);
  int64_t k = std::min(rowsOf(lu), colsOf(lu));
  SmallVector<int64_t> expected = batchOf(lu);
  expected.push_back(k);
  if (!type.getElementType().isInteger(32) && !type.getElementType().isInteger(64)) {
    imp.error() << name << ": pivots " << type << " must be integers (PyTorch's are i32)";
    return failure();
  }
  if (type.getShape() != ArrayRef<int64_t>(expected)) {
    imp.error() << name << ": pivots " << type << " must have shape ["
                << llvm::make_range(expected.begin(), expected.end()) << "] for LU "
                << typeOf(lu);
    return failure();
  }
  return success();
}

Result luUnpack(Importer &imp, jit::Node *, Inputs in) {
  auto lu = matrices(imp, in[0], "lu_unpack", "LU_data", false);
  auto pivots = imp.tensor(in[1]);
  auto unpackData = flag(imp, in[2]), unpackPivots = flag(imp, in[3]);
  if (failed(lu) || failed(pivots) || failed(unpackData) || failed(unpackPivots) ||
      failed(checkPivots(imp, *lu, *pivots, "lu_unpack")))
    return failure();
  if (!*unpackData || !*unpackPivots) {
    imp.error() << "lu_unpack: unpack_data=False or unpack_pivots=False (empty results) is not "
                   "supported";
    return failure();
  }
  auto [p, lower, upper] = Linalg(imp).unpack(*lu, *pivots);
  return values({p, lower, upper});
}

/// linalg_lu_solve(LU, pivots, B, left, adjoint) and lu_solve(B, LU, pivots).
Converter luSolve(bool legacy) {
  return [legacy](Importer &imp, jit::Node *, Inputs in) -> Result {
    const Val &luVal = legacy ? in[1] : in[0], &pivVal = legacy ? in[2] : in[1];
    const Val &bVal = legacy ? in[0] : in[2];
    auto lu = matrices(imp, luVal, "lu_solve", "LU", true);
    auto pivots = imp.tensor(pivVal);
    auto rhs = matrices(imp, bVal, "lu_solve", "B", false);
    FailureOr<bool> left = true, adjoint = false;
    if (!legacy) {
      left = flag(imp, in[3]);
      adjoint = flag(imp, in[4]);
    }
    if (failed(lu) || failed(pivots) || failed(rhs) || failed(left) || failed(adjoint) ||
        failed(checkPivots(imp, *lu, *pivots, "lu_solve")))
      return failure();
    int64_t n = colsOf(*lu);
    if ((*left ? rowsOf(*rhs) : colsOf(*rhs)) != n ||
        !broadcastShapes({batchOf(*lu), batchOf(*rhs)})) {
      imp.error() << "lu_solve: B " << typeOf(*rhs) << " does not fit LU " << typeOf(*lu);
      return failure();
    }
    return values({Linalg(imp).luSolve(*lu, *pivots, *rhs, *left, *adjoint)});
  };
}

/// linalg_solve(A, B, left) / linalg_solve_ex(A, B, left, check_errors).
Converter solve(bool withInfo) {
  return [withInfo](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto a = matrices(imp, in[0], "linalg.solve", "A", true);
    auto rhs = imp.tensor(in[1]);
    auto left = flag(imp, in[2]);
    if (failed(a) || failed(rhs) || failed(left))
      return failure();
    auto solved = Linalg(imp).solve(*a, *rhs, *left, "linalg.solve");
    if (failed(solved))
      return failure();
    if (withInfo)
      return values({solved->first, solved->second});
    return values({solved->first});
  };
}

/// linalg_inv(A), inverse(A), linalg_inv_ex(A, check_errors).
Converter inverse(bool withInfo) {
  return [withInfo](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto a = matrices(imp, in[0], "linalg.inv", "A", true);
    if (failed(a))
      return failure();
    auto [inv, info] = Linalg(imp).inverse(*a);
    if (withInfo)
      return values({inv, info});
    return values({inv});
  };
}

/// linalg_solve_triangular(A, B, upper, left, unitriangular).
Result solveTriangular(Importer &imp, jit::Node *, Inputs in) {
  auto a = matrices(imp, in[0], "linalg.solve_triangular", "A", true);
  auto rhs = matrices(imp, in[1], "linalg.solve_triangular", "B", false);
  auto upper = flag(imp, in[2]), left = flag(imp, in[3]), unit = flag(imp, in[4]);
  if (failed(a) || failed(rhs) || failed(upper) || failed(left) || failed(unit))
    return failure();
  int64_t n = colsOf(*a);
  if ((*left ? rowsOf(*rhs) : colsOf(*rhs)) != n ||
      !broadcastShapes({batchOf(*a), batchOf(*rhs)})) {
    imp.error() << "linalg.solve_triangular: B " << typeOf(*rhs) << " does not fit A "
                << typeOf(*a) << (*left ? " (A X = B)" : " (X A = B)");
    return failure();
  }
  Linalg l(imp);
  if (*left)
    return values({l.triangularSolve(*a, *rhs, *upper, false, *unit)});
  // X A = B is A^T X^T = B^T.
  return values(
      {l.b.transpose(l.triangularSolve(*a, l.b.transpose(*rhs), *upper, true, *unit))});
}

/// triangular_solve(B, A, upper, transpose, unitriangular) -> (X, A): A is
/// returned broadcast to the solution's batch, as PyTorch's clone.
Result triangularSolve(Importer &imp, jit::Node *, Inputs in) {
  auto rhs = matrices(imp, in[0], "triangular_solve", "B", false);
  auto a = matrices(imp, in[1], "triangular_solve", "A", true);
  auto upper = flag(imp, in[2]), transpose = flag(imp, in[3]), unit = flag(imp, in[4]);
  if (failed(a) || failed(rhs) || failed(upper) || failed(transpose) || failed(unit))
    return failure();
  if (rowsOf(*rhs) != colsOf(*a) || !broadcastShapes({batchOf(*a), batchOf(*rhs)})) {
    imp.error() << "triangular_solve: B " << typeOf(*rhs) << " does not fit A " << typeOf(*a);
    return failure();
  }
  Linalg l(imp);
  Value x = l.triangularSolve(*a, *rhs, *upper, *transpose, *unit);
  SmallVector<int64_t> shape = batchOf(x);
  shape.append({colsOf(*a), colsOf(*a)});
  return values({x, l.b.broadcastTo(*a, RankedTensorType::get(shape, l.f32()))});
}

/// cholesky(A, upper) / linalg_cholesky(A, upper) / linalg_cholesky_ex(A,
/// upper, check_errors). A matrix that is not positive definite gives a
/// partial factor (PyTorch raises, except in the _ex op, whose info says so).
Converter cholesky(bool withInfo) {
  return [withInfo](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto a = matrices(imp, in[0], "cholesky", "A", true);
    auto upper = flag(imp, in[1]);
    if (failed(a) || failed(upper))
      return failure();
    Linalg l(imp);
    auto op = l.b.b.create<CholeskyOp>(
        l.b.loc, typeOf(*a), RankedTensorType::get(batchOf(*a), l.i32()), *a,
        imp.builder.getBoolAttr(*upper));
    if (withInfo)
      return values({op.getResult(), op.getInfo()});
    return values({op.getResult()});
  };
}

/// cholesky_solve(B, L, upper).
Result choleskySolve(Importer &imp, jit::Node *, Inputs in) {
  auto rhs = matrices(imp, in[0], "cholesky_solve", "B", false);
  auto factor = matrices(imp, in[1], "cholesky_solve", "L", true);
  auto upper = flag(imp, in[2]);
  if (failed(rhs) || failed(factor) || failed(upper))
    return failure();
  if (rowsOf(*rhs) != colsOf(*factor) || !broadcastShapes({batchOf(*factor), batchOf(*rhs)})) {
    imp.error() << "cholesky_solve: B " << typeOf(*rhs) << " does not fit L "
                << typeOf(*factor);
    return failure();
  }
  return values({Linalg(imp).choleskySolve(*factor, *rhs, *upper)});
}

/// cholesky_inverse(L, upper): (L L^T)^-1 (or (U^T U)^-1).
Result choleskyInverse(Importer &imp, jit::Node *, Inputs in) {
  auto factor = matrices(imp, in[0], "cholesky_inverse", "L", true);
  auto upper = flag(imp, in[1]);
  if (failed(factor) || failed(upper))
    return failure();
  Linalg l(imp);
  int64_t n = colsOf(*factor);
  Value inv = l.choleskySolve(*factor, l.eye(n, n), *upper);
  return values({l.b.broadcastTo(inv, typeOf(*factor))});
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// linalg_tensorinv(A, ind): A viewed as a [prod(A.shape[:ind]),
/// prod(A.shape[ind:])] matrix, inverted, viewed as A.shape[ind:] +
/// A.shape[:ind].
Result tensorinv(Importer &imp, jit::Node *, Inputs in) {
  auto a = imp.tensor(in[0]);
  auto ind = imp.integer(in[1]);
  if (failed(a) || failed(ind))
    return failure();
  auto type = typeOf(*a);
  ArrayRef<int64_t> shape = type.getShape();
  if (*ind <= 0 || *ind > type.getRank()) {
    imp.error() << "linalg.tensorinv: ind " << *ind << " must be in [1, " << type.getRank()
                << "] for " << type;
    return failure();
  }
  int64_t rows = product(shape.take_front(*ind)), cols = product(shape.drop_front(*ind));
  if (rows != cols || !type.getElementType().isF32()) {
    imp.error() << "linalg.tensorinv: " << type << " with ind " << *ind
                << " must be f32 and view as a square matrix (" << rows << " x " << cols << ")";
    return failure();
  }
  Linalg l(imp);
  Value inv = l.inverse(l.b.reshape(*a, {rows, cols})).first;
  SmallVector<int64_t> out(shape.drop_front(*ind));
  out.append(shape.begin(), shape.begin() + *ind);
  return values({l.b.reshape(inv, out)});
}

/// linalg_tensorsolve(A, B, dims): `dims` of A moved last, A viewed as a
/// [B.numel(), rest] matrix, B as a vector; X has A's trailing dims.
Result tensorsolve(Importer &imp, jit::Node *, Inputs in) {
  auto a = imp.tensor(in[0]);
  auto rhs = imp.tensor(in[1]);
  if (failed(a) || failed(rhs))
    return failure();
  Linalg l(imp);
  Value x = *a;
  int64_t rank = typeOf(x).getRank();
  if (!imp.isNone(in[2])) {
    auto dims = imp.intList(in[2]);
    if (failed(dims))
      return failure();
    SmallVector<int64_t> order, moved;
    for (int64_t d : *dims) {
      int64_t nd = d < 0 ? d + rank : d;
      if (nd < 0 || nd >= rank || llvm::is_contained(moved, nd)) {
        imp.error() << "linalg.tensorsolve: dims [" << llvm::make_range(dims->begin(), dims->end())
                    << "] are not distinct dims of " << typeOf(x);
        return failure();
      }
      moved.push_back(nd);
    }
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(moved, d))
        order.push_back(d);
    order.append(moved.begin(), moved.end());
    x = l.b.permute(x, order);
  }
  auto type = typeOf(x), btype = typeOf(*rhs);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t brank = btype.getRank();
  int64_t rows = btype.getNumElements();
  // As PyTorch: A's leading B.ndim dims and its other dims each hold as many
  // elements as B (their sizes need not be B's).
  if (brank > rank || product(shape.take_front(brank)) != rows ||
      product(shape.drop_front(brank)) != rows || !type.getElementType().isF32() ||
      !btype.getElementType().isF32()) {
    imp.error() << "linalg.tensorsolve: A " << type << " (dims moved last) must have "
                << "leading " << brank << " dims and trailing dims of as many elements as B "
                << btype << " (f32)";
    return failure();
  }
  auto solved = l.solve(l.b.reshape(x, {rows, rows}), l.b.reshape(*rhs, {rows, 1}), true,
                        "linalg.tensorsolve");
  if (failed(solved))
    return failure();
  return values({l.b.reshape(solved->first, shape.drop_front(brank))});
}

/// A^n of square matrices (n >= 0) by PyTorch's binary powering: the
/// identity, A, A·A, (A·A)·A, else squarings multiplied in low bit first.
Value matrixPower(Linalg &l, Value a, int64_t n) {
  int64_t size = colsOf(a);
  if (n == 0)
    return l.b.broadcastTo(l.b.cast(l.eye(size, size), typeOf(a).getElementType()), typeOf(a));
  if (n == 1)
    return a;
  if (n == 2)
    return l.b.make<MatmulOp>(a, a);
  if (n == 3)
    return l.b.make<MatmulOp>(l.b.make<MatmulOp>(a, a), a);
  Value z, result;
  while (n > 0) {
    bool bit = n % 2;
    n /= 2;
    z = z ? l.b.make<MatmulOp>(z, z) : a;
    if (bit)
      result = result ? l.b.make<MatmulOp>(result, z) : z;
  }
  return result;
}

/// linalg_matrix_power(A, n) / matrix_power(A, n): n < 0 is the power -n of
/// A's inverse, as PyTorch. n >= 0 goes to the converter registered before
/// this one when there is one (the matmul chain of the elementwise-math
/// spellings), else to matrixPower.
Converter matrixPowerConverter(Converter previous) {
  return [previous](Importer &imp, jit::Node *node, Inputs in) -> Result {
    auto n = imp.integer(in[1]);
    if (failed(n))
      return failure();
    if (*n >= 0 && previous)
      return previous(imp, node, in);
    // Integer matrices have non-negative powers (matmul takes them).
    auto a = *n < 0 ? matrices(imp, in[0], "linalg.matrix_power", "A", true) : imp.tensor(in[0]);
    if (failed(a))
      return failure();
    if (typeOf(*a).getRank() < 2 || rowsOf(*a) != colsOf(*a)) {
      imp.error() << "linalg.matrix_power: A " << typeOf(*a) << " must hold square matrices";
      return failure();
    }
    Linalg l(imp);
    Value base = *n >= 0 ? *a : l.inverse(*a).first;
    return values({matrixPower(l, base, *n >= 0 ? *n : -*n)});
  };
}

} // namespace

void addLinalgConverters(llvm::StringMap<Converter> &r) {
  r["aten::linalg_det"] = det;
  r["aten::det"] = det;
  r["aten::linalg_slogdet"] = slogdet;
  r["aten::slogdet"] = slogdet;
  r["aten::logdet"] = logdet;
  r["aten::linalg_lu_factor"] = luFactor(/*withInfo=*/false);
  r["aten::linalg_lu_factor_ex"] = luFactor(/*withInfo=*/true);
  r["aten::_lu_with_info"] = luFactor(/*withInfo=*/true);
  r["aten::linalg_lu"] = linalgLu;
  r["aten::lu_unpack"] = luUnpack;
  r["aten::linalg_lu_solve"] = luSolve(/*legacy=*/false);
  r["aten::lu_solve"] = luSolve(/*legacy=*/true);
  r["aten::linalg_solve"] = solve(/*withInfo=*/false);
  r["aten::linalg_solve_ex"] = solve(/*withInfo=*/true);
  r["aten::linalg_inv"] = inverse(/*withInfo=*/false);
  r["aten::inverse"] = inverse(/*withInfo=*/false);
  r["aten::linalg_inv_ex"] = inverse(/*withInfo=*/true);
  r["aten::linalg_solve_triangular"] = solveTriangular;
  r["aten::triangular_solve"] = triangularSolve;
  r["aten::cholesky"] = cholesky(/*withInfo=*/false);
  r["aten::linalg_cholesky"] = cholesky(/*withInfo=*/false);
  r["aten::linalg_cholesky_ex"] = cholesky(/*withInfo=*/true);
  r["aten::cholesky_solve"] = choleskySolve;
  r["aten::cholesky_inverse"] = choleskyInverse;
  r["aten::linalg_tensorinv"] = tensorinv;
  r["aten::linalg_tensorsolve"] = tensorsolve;
  for (const char *name : {"aten::linalg_matrix_power", "aten::matrix_power"}) {
    auto it = r.find(name);
    r[name] = matrixPowerConverter(it == r.end() ? Converter() : it->second);
  }
}

} // namespace cleave::importer
