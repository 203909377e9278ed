//===- Linalg.cpp - Factorizations and solves of small matrices -----------===//
//
// lu_factor, lu_pivots_to_permutation, cholesky and triangular_solve on
// batches of small matrices: a matrix per task, the arithmetic of
// runtime/LinalgKernels.h in double (per-thread scratch), f32 in and out.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/LinalgKernels.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/Registry.h"

#include <vector>

namespace cleave::runtime::cpu {
namespace {

Status buildLuFactor(const KernelSignature &sig, KernelFn *fn) {
  LuFactorParams p;
  CLEAVE_RETURN_IF_ERROR(parseLuFactor(sig, "cpu", {DType::F32}, &p));
  *fn = [p](const KernelCall &call) -> Status {
    const float *a = static_cast<const float *>(call.inputs[0]);
    float *lu = static_cast<float *>(call.outputs[0]);
    int32_t *pivots = static_cast<int32_t *>(call.outputs[1]);
    int32_t *info = static_cast<int32_t *>(call.outputs[2]);
    const int64_t size = p.m * p.n, k = std::min(p.m, p.n);
    parallelRange(p.batch, size * k + 1, [&](int64_t b, int64_t e) {
      std::vector<double> w(size);
      for (int64_t i = b; i < e; ++i)
        info[i] = linalg::luFactor(a + i * size, lu + i * size, pivots + i * k, p.m, p.n,
                                   w.data());
    });
    return {};
  };
  return {};
}

template <typename P> KernelFn makePivotsToPermutation(const PivotsParams &p, std::string name) {
  return [p, name](const KernelCall &call) -> Status {
    const P *pivots = static_cast<const P *>(call.inputs[0]);
    int64_t *permutation = static_cast<int64_t *>(call.outputs[0]);
    for (int64_t i = 0; i < p.batch; ++i) {
      int64_t bad = linalg::pivotsToPermutation(pivots + i * p.k, permutation + i * p.rows, p.k,
                                                p.rows);
      if (bad >= 0)
        return CLEAVE_ERROR(name, ": pivot ", static_cast<int64_t>(pivots[i * p.k + bad]),
                            " (entry ", bad, " of matrix ", i, ") is outside [1, ", p.rows,
                            "]");
    }
    return {};
  };
}

Status buildPivotsToPermutation(const KernelSignature &sig, KernelFn *fn) {
  PivotsParams p;
  CLEAVE_RETURN_IF_ERROR(parsePivotsToPermutation(sig, "cpu", &p));
  *fn = p.pivotType == DType::I32 ? makePivotsToPermutation<int32_t>(p, sig.kernel)
                                  : makePivotsToPermutation<int64_t>(p, sig.kernel);
  return {};
}

Status buildCholesky(const KernelSignature &sig, KernelFn *fn) {
  CholeskyParams p;
  CLEAVE_RETURN_IF_ERROR(parseCholesky(sig, "cpu", {DType::F32}, &p));
  *fn = [p](const KernelCall &call) -> Status {
    const float *a = static_cast<const float *>(call.inputs[0]);
    float *out = static_cast<float *>(call.outputs[0]);
    int32_t *info = static_cast<int32_t *>(call.outputs[1]);
    const int64_t size = p.n * p.n;
    parallelRange(p.batch, size * p.n + 1, [&](int64_t b, int64_t e) {
      std::vector<double> w(size);
      for (int64_t i = b; i < e; ++i)
        info[i] = linalg::cholesky(a + i * size, out + i * size, p.n, p.upper, w.data());
    });
    return {};
  };
  return {};
}

Status buildTriangularSolve(const KernelSignature &sig, KernelFn *fn) {
  TriangularSolveParams p;
  CLEAVE_RETURN_IF_ERROR(parseTriangularSolve(sig, "cpu", {DType::F32}, &p));
  *fn = [p](const KernelCall &call) -> Status {
    const float *a = static_cast<const float *>(call.inputs[0]);
    const float *b = static_cast<const float *>(call.inputs[1]);
    float *x = static_cast<float *>(call.outputs[0]);
    const int64_t aSize = p.n * p.n, bSize = p.n * p.k;
    parallelRange(p.batch, aSize * p.k + 1, [&](int64_t begin, int64_t end) {
      std::vector<double> w(bSize);
      for (int64_t i = begin; i < end; ++i)
        linalg::triangularSolve(a + p.aIndex[i] * aSize, b + p.bIndex[i] * bSize, x + i * bSize,
                                p.n, p.k, p.upper, p.transpose, p.unitriangular, w.data());
    });
    return {};
  };
  return {};
}

} // namespace

void registerLinalgKernels(KernelTable &table) {
  table["lu_factor"] = buildLuFactor;
  table["lu_pivots_to_permutation"] = buildPivotsToPermutation;
  table["cholesky"] = buildCholesky;
  table["triangular_solve"] = buildTriangularSolve;
}

} // namespace cleave::runtime::cpu
