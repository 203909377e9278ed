//===- IntegerMatmul.cu - matmul of i64 and i32 operands ------------------===//
//
// cuBLAS has no integer GEMM. One thread per output element sums its row
// times its column in unsigned arithmetic, so that overflow wraps as
// PyTorch's integer matmul (and the CPU kernel) does. Batch dims broadcast
// through the coalesced layout of the two operands' batch shapes.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <string>
#include <type_traits>

namespace cleave::runtime::cuda {
namespace {

template <typename T>
__global__ void integerMatmulKernel(const T *__restrict__ a, const T *__restrict__ b,
                                    T *__restrict__ c, DeviceLayout batches, int64_t m,
                                    int64_t n, int64_t k, int64_t total) {
  using U = std::make_unsigned_t<T>;
  for (int64_t idx = globalThread(); idx < total; idx += globalThreads()) {
    const int64_t j = idx % n, i = (idx / n) % m;
    int64_t batch = idx / (m * n), aOff = 0, bOff = 0;
    for (int d = batches.rank - 1; d >= 0; --d) {
      const int64_t q = batch % batches.dims[d];
      batch /= batches.dims[d];
      aOff += q * batches.strides[d][0];
      bOff += q * batches.strides[d][1];
    }
    const T *row = a + aOff * m * k + i * k;
    const T *col = b + bOff * k * n + j;
    U sum = 0;
    for (int64_t p = 0; p < k; ++p)
      sum += static_cast<U>(row[p]) * static_cast<U>(col[p * n]);
    c[idx] = static_cast<T>(sum);
  }
}

template <typename T>
KernelFn makeIntegerMatmul(const KernelSignature &sig, DeviceContext &ctx, DeviceLayout batches,
                           const MatmulParams &p) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t m = p.m, n = p.n, k = p.k, total = p.batches * p.m * p.n;
  return [c, name, batches, m, n, k, total](const KernelCall &call) -> Status {
    if (total == 0)
      return {};
    integerMatmulKernel<T><<<gridFor(*c, total), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<T *>(call.outputs[0]), batches, m, n, k, total);
    return launchStatus(name);
  };
}

} // namespace

Status buildIntegerMatmul(const KernelSignature &sig, DeviceContext &ctx,
                          const MatmulParams &params, KernelFn *fn) {
  DeviceLayout batches;
  CLEAVE_RETURN_IF_ERROR(
      toDevice(sig, makeBroadcastLayout(params.batch, {params.aBatch, params.bBatch}), &batches));
  if (sig.inputs[0]->dtype == DType::I64)
    *fn = makeIntegerMatmul<int64_t>(sig, ctx, batches, params);
  else
    *fn = makeIntegerMatmul<int32_t>(sig, ctx, batches, params);
  return {};
}

} // namespace cleave::runtime::cuda
