//===- Linalg.cu - Factorizations and solves of small matrices ------------===//
//
// lu_factor, lu_pivots_to_permutation, cholesky and triangular_solve on
// batches of small matrices: one thread per matrix, running the same
// arithmetic as the CPU (runtime/LinalgKernels.h) in double, its scratch in
// the shared workspace. Meant for the small matrices models carry (a
// thread walks a whole factorization); f32 only, as the CPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/LinalgKernels.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

namespace cleave::runtime::cuda {
namespace {

constexpr int kLinalgThreads = 64;

unsigned blocksFor(int64_t matrices) {
  return static_cast<unsigned>((matrices + kLinalgThreads - 1) / kLinalgThreads);
}

__global__ void luFactorKernel(const float *a, float *lu, int32_t *pivots, int32_t *info,
                               int64_t batch, int64_t m, int64_t n, double *scratch) {
  const int64_t i = globalThread();
  if (i >= batch)
    return;
  const int64_t size = m * n, k = m < n ? m : n;
  info[i] = linalg::luFactor(a + i * size, lu + i * size, pivots + i * k, m, n,
                             scratch + i * size);
}

template <typename P>
__global__ void pivotsKernel(const P *pivots, int64_t *permutation, int64_t batch, int64_t k,
                             int64_t rows, DeviceError *error) {
  const int64_t i = globalThread();
  if (i >= batch)
    return;
  int64_t bad = linalg::pivotsToPermutation(pivots + i * k, permutation + i * rows, k, rows);
  if (bad >= 0)
    reportDeviceError(error, DeviceError::PivotOutOfRange,
                      static_cast<long long>(pivots[i * k + bad]), i, rows);
}

__global__ void choleskyKernel(const float *a, float *out, int32_t *info, int64_t batch,
                               int64_t n, bool upper, double *scratch) {
  const int64_t i = globalThread();
  if (i >= batch)
    return;
  const int64_t size = n * n;
  info[i] = linalg::cholesky(a + i * size, out + i * size, n, upper, scratch + i * size);
}

/// Where each result matrix's a and b matrices are: the broadcast batch
/// dims and each operand's matrix stride along them (0 where broadcast).
struct BatchMap {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t aStride[kMaxRank] = {}, bStride[kMaxRank] = {};
};

__global__ void triangularSolveKernel(const float *a, const float *b, float *x, int64_t batch,
                                      int64_t n, int64_t k, bool upper, bool transpose,
                                      bool unit, BatchMap map, double *scratch) {
  const int64_t i = globalThread();
  if (i >= batch)
    return;
  int64_t ai = 0, bi = 0, flat = i;
  for (int d = map.rank - 1; d >= 0; --d) {
    const int64_t coord = flat % map.dims[d];
    flat /= map.dims[d];
    ai += coord * map.aStride[d];
    bi += coord * map.bStride[d];
  }
  linalg::triangularSolve(a + ai * n * n, b + bi * n * k, x + i * n * k, n, k, upper, transpose,
                          unit, scratch + i * n * k);
}

Status buildLuFactor(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  LuFactorParams p;
  CLEAVE_RETURN_IF_ERROR(parseLuFactor(sig, "cuda", {DType::F32}, &p));
  void *unused = nullptr;
  CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(sizeof(double) * p.batch * p.m * p.n, &unused));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (p.batch == 0)
      return {};
    luFactorKernel<<<blocksFor(p.batch), kLinalgThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), static_cast<float *>(call.outputs[0]),
        static_cast<int32_t *>(call.outputs[1]), static_cast<int32_t *>(call.outputs[2]),
        p.batch, p.m, p.n, static_cast<double *>(c->workspace));
    return launchStatus(name);
  };
  return {};
}

Status buildPivotsToPermutation(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  PivotsParams p;
  CLEAVE_RETURN_IF_ERROR(parsePivotsToPermutation(sig, "cuda", &p));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (p.batch == 0 || p.rows == 0)
      return {};
    int64_t *out = static_cast<int64_t *>(call.outputs[0]);
    if (p.pivotType == DType::I32)
      pivotsKernel<<<blocksFor(p.batch), kLinalgThreads, 0, c->stream>>>(
          static_cast<const int32_t *>(call.inputs[0]), out, p.batch, p.k, p.rows,
          c->deviceError);
    else
      pivotsKernel<<<blocksFor(p.batch), kLinalgThreads, 0, c->stream>>>(
          static_cast<const int64_t *>(call.inputs[0]), out, p.batch, p.k, p.rows,
          c->deviceError);
    return launchStatus(name);
  };
  return {};
}

Status buildCholesky(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  CholeskyParams p;
  CLEAVE_RETURN_IF_ERROR(parseCholesky(sig, "cuda", {DType::F32}, &p));
  void *unused = nullptr;
  CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(sizeof(double) * p.batch * p.n * p.n, &unused));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  *fn = [=](const KernelCall &call) -> Status {
    if (p.batch == 0)
      return {};
    choleskyKernel<<<blocksFor(p.batch), kLinalgThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), static_cast<float *>(call.outputs[0]),
        static_cast<int32_t *>(call.outputs[1]), p.batch, p.n, p.upper,
        static_cast<double *>(c->workspace));
    return launchStatus(name);
  };
  return {};
}

Status buildTriangularSolve(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  TriangularSolveParams p;
  CLEAVE_RETURN_IF_ERROR(parseTriangularSolve(sig, "cuda", {DType::F32}, &p));
  const Shape &as = sig.inputs[0]->shape, &bs = sig.inputs[1]->shape;
  const Shape &rs = sig.outputs[0].shape;
  BatchMap map;
  map.rank = static_cast<int>(rs.size()) - 2;
  if (map.rank > BatchMap::kMaxRank)
    return CLEAVE_ERROR(sig.kernel, ": the cuda kernel takes at most ", BatchMap::kMaxRank,
                        " batch dims, got ", map.rank);
  // Row-major matrix strides of each operand over its own batch dims,
  // aligned to the result's from the right; broadcast dims stride 0.
  auto strides = [&](const Shape &operand, int64_t *out) {
    const int own = static_cast<int>(operand.size()) - 2;
    int64_t stride = 1;
    for (int d = map.rank - 1; d >= 0; --d) {
      const int od = d - (map.rank - own);
      if (od < 0) {
        out[d] = 0;
        continue;
      }
      out[d] = operand[od] == 1 ? 0 : stride;
      stride *= operand[od];
    }
  };
  for (int d = 0; d < map.rank; ++d)
    map.dims[d] = rs[d];
  strides(as, map.aStride);
  strides(bs, map.bStride);
  void *unused = nullptr;
  CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(sizeof(double) * p.batch * p.n * p.k, &unused));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t batch = p.batch, n = p.n, k = p.k;
  const bool upper = p.upper, transpose = p.transpose, unit = p.unitriangular;
  *fn = [=](const KernelCall &call) -> Status {
    if (batch == 0 || n == 0 || k == 0)
      return {};
    triangularSolveKernel<<<blocksFor(batch), kLinalgThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), static_cast<const float *>(call.inputs[1]),
        static_cast<float *>(call.outputs[0]), batch, n, k, upper, transpose, unit, map,
        static_cast<double *>(c->workspace));
    return launchStatus(name);
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

} // namespace cleave::runtime::cuda
