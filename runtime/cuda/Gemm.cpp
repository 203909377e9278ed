//===- Gemm.cpp - matmul and linear through cuBLASLt ----------------------===//
//
// Row-major C[m, n] = A[m, k] · B is computed as the column-major
// Cᵀ[n, m] = Bᵀ · Aᵀ, so no operand is ever copied or transposed: a
// row-major matrix is its own transpose in column-major. linear's weight
// [n, k] is read transposed, and its bias is cuBLASLt's bias epilogue.
//
// f32 runs in full fp32 (PyTorch's default) unless the backend allows TF32;
// bf16 runs on tensor cores with fp32 accumulation and bf16 output. The
// algorithm is picked at an instruction's first call, when the operands'
// addresses (and so their alignment) are known, and kept.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/GemmCall.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace cleave::runtime::cuda {
namespace {

/// The largest power of two, up to 256, dividing every bit pattern given.
uint32_t alignmentOf(uint64_t bits) {
  bits |= 256;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

} // namespace

Gemm::~Gemm() {
  for (cublasLtMatrixLayout_t l : {x_, y_, d_})
    if (l)
      cublasLtMatrixLayoutDestroy(l);
  if (op_)
    cublasLtMatmulDescDestroy(op_);
}

Status Gemm::init(const GemmProblem &p, bool tf32) {
  p_ = p;
  type_ = p.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t compute =
      p.dtype == DType::F32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CLEAVE_CUBLAS_TRY(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F));
  cublasOperation_t tx = p.transX ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t ty = p.transY ? CUBLAS_OP_T : CUBLAS_OP_N;
  CLEAVE_CUBLAS_TRY(
      cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &tx, sizeof(tx)));
  CLEAVE_CUBLAS_TRY(
      cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &ty, sizeof(ty)));
  if (p.bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CLEAVE_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                     &epilogue, sizeof(epilogue)));
    CLEAVE_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                     &type_, sizeof(type_)));
  }
  uint64_t xRows = p.transX ? p.k : p.rows, xCols = p.transX ? p.rows : p.k;
  uint64_t yRows = p.transY ? p.cols : p.k, yCols = p.transY ? p.k : p.cols;
  CLEAVE_RETURN_IF_ERROR(layout(&x_, xRows, xCols, p.strideX, 0));
  CLEAVE_RETURN_IF_ERROR(layout(&y_, yRows, yCols, p.strideY, p.ldY));
  CLEAVE_RETURN_IF_ERROR(layout(&d_, p.rows, p.cols, p.strideD, 0));
  return {};
}

Status Gemm::run(DeviceContext &ctx, const void *x, const void *y, const void *bias, void *d) {
  if (p_.bias)
    CLEAVE_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &bias, sizeof(bias)));
  const uint64_t esz = dtypeBytes(p_.dtype);
  auto bits = [](const void *ptr) {
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  };
  uint32_t align[3] = {alignmentOf(bits(x) | p_.strideX * esz | p_.offsetsX),
                       alignmentOf(bits(y) | p_.strideY * esz | p_.offsetsY),
                       alignmentOf(bits(d) | p_.strideD * esz | p_.offsetsD)};
  if (!picked_ || std::memcmp(align, align_, sizeof(align)) != 0) {
    CLEAVE_RETURN_IF_ERROR(pick(ctx, align));
    std::memcpy(align_, align, sizeof(align));
  }
  const float one = 1.0f, zero = 0.0f;
  CLEAVE_CUBLAS_TRY(cublasLtMatmul(ctx.lt, op_, &one, x, x_, y, y_, &zero, d, d_, d, d_, &algo_,
                                   ctx.gemmWorkspace, ctx.gemmWorkspaceBytes, ctx.stream));
  return {};
}

Status Gemm::layout(cublasLtMatrixLayout_t *l, uint64_t rows, uint64_t cols, int64_t stride,
                    int64_t ld) {
  CLEAVE_CUBLAS_TRY(
      cublasLtMatrixLayoutCreate(l, type_, rows, cols, ld ? ld : static_cast<int64_t>(rows)));
  if (p_.batch > 1) {
    int32_t count = static_cast<int32_t>(p_.batch);
    CLEAVE_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                       &count, sizeof(count)));
    CLEAVE_CUBLAS_TRY(cublasLtMatrixLayoutSetAttribute(
        *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return {};
}

Status Gemm::pick(DeviceContext &ctx, const uint32_t align[3]) {
  cublasLtMatmulPreference_t pref = nullptr;
  CLEAVE_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                  cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      guard(pref, cublasLtMatmulPreferenceDestroy);
  uint64_t workspace = ctx.gemmWorkspaceBytes;
  CLEAVE_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  // cuBLASLt's A is our X, its B our Y; C is D (beta is 0).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}};
  for (const auto &[attr, value] : alignments)
    CLEAVE_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
  if (p_.fp32Reduction) {
    // NONE (0) always passes the mask; COMPUTE_TYPE keeps partials in fp32.
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    CLEAVE_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)));
  }
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  CLEAVE_CUBLAS_TRY(
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, op_, x_, y_, d_, d_, pref, 1, &result, &found));
  if (found == 0)
    return CLEAVE_ERROR("cuBLASLt has no algorithm for a ", dtypeName(p_.dtype), " GEMM of ",
                        p_.rows, "x", p_.k, " by ", p_.k, "x", p_.cols, " (batch ", p_.batch,
                        ")");
  algo_ = result.algo;
  picked_ = true;
  return {};
}

ColumnBlocks ColumnBlocks::of(int64_t rowElems, int64_t rows, size_t esz) {
  ColumnBlocks s;
  s.per = 16 / static_cast<int64_t>(esz);
  const int64_t fit = static_cast<int64_t>(kStageBytes / (rows * esz)) / s.per * s.per;
  s.chunk = std::min(std::max(s.per, std::min(kMaxChunk, fit)), s.pitch(rowElems));
  return s;
}

namespace {

/// An output with no contraction (k == 0) is zero, plus the bias if any.
Status zeroContraction(DeviceContext &ctx, void *out, const void *bias, int64_t rows, int64_t n,
                       size_t esz) {
  CLEAVE_CUDA_TRY(cudaMemsetAsync(out, 0, rows * n * esz, ctx.stream));
  if (bias && rows > 0)
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(out, bias, n * esz, cudaMemcpyDeviceToDevice, ctx.stream));
  for (int64_t r = 1; bias && r < rows; r *= 2) {
    // Doubling copies: rows [0, r) to [r, 2r).
    int64_t count = std::min(r, rows - r);
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(static_cast<char *>(out) + r * n * esz, out, count * n * esz,
                                    cudaMemcpyDeviceToDevice, ctx.stream));
  }
  return {};
}

bool tf32Allowed(const DeviceContext &ctx) { return ctx.tf32; }

Status buildMatmul(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  MatmulParams mp;
  CLEAVE_RETURN_IF_ERROR(
      parseMatmul(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32}, &mp));
  const TensorDesc &a = *sig.inputs[0];
  if (a.dtype == DType::I64 || a.dtype == DType::I32) // cuBLAS has no integer GEMM
    return buildIntegerMatmul(sig, ctx, mp, fn);
  const int64_t m = mp.m, k = mp.k, n = mp.n, batches = mp.batches;
  const size_t esz = dtypeBytes(a.dtype);
  DeviceContext *c = &ctx;
  if (batches == 0 || m == 0 || n == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  if (k == 0) {
    *fn = [c, batches, m, n, esz](const KernelCall &call) -> Status {
      return zeroContraction(*c, call.outputs[0], nullptr, batches * m, n, esz);
    };
    return {};
  }
  GemmProblem p;
  p.dtype = a.dtype;
  p.rows = n; // D = Cᵀ, X = Bᵀ, Y = Aᵀ
  p.k = k;
  const int64_t aCount = numElements(mp.aBatch), bCount = numElements(mp.bBatch);
  std::vector<std::pair<int64_t, int64_t>> offsets; // per batch, when broadcast partially
  if (bCount == 1) {
    // rhs shared by every batch: lhs's batches fold into its rows.
    p.cols = batches * m;
  } else if ((aCount == 1 || aCount == batches) && bCount == batches) {
    p.cols = m;
    p.batch = batches;
    p.strideX = k * n;
    p.strideY = aCount == 1 ? 0 : m * k;
    p.strideD = m * n;
  } else {
    // Partial broadcast (e.g. 2x1 by 1x3 batches): one GEMM per batch.
    p.cols = m;
    offsets = matmulBatchOffsets(mp);
    for (size_t i = 0; i < offsets.size(); ++i) {
      p.offsetsY |= offsets[i].first * esz;
      p.offsetsX |= offsets[i].second * esz;
      p.offsetsD |= i * m * n * esz;
    }
  }
  auto gemm = std::make_shared<Gemm>();
  CLEAVE_RETURN_IF_ERROR(gemm->init(p, tf32Allowed(ctx)).prepend(sig.kernel));
  const std::string kernel = sig.kernel;
  *fn = [c, gemm, offsets, m, n, esz, kernel](const KernelCall &call) -> Status {
    const char *a = static_cast<const char *>(call.inputs[0]);
    const char *b = static_cast<const char *>(call.inputs[1]);
    char *out = static_cast<char *>(call.outputs[0]);
    if (offsets.empty())
      return gemm->run(*c, b, a, nullptr, out).prepend(kernel);
    for (size_t i = 0; i < offsets.size(); ++i)
      CLEAVE_RETURN_IF_ERROR(gemm->run(*c, b + offsets[i].second * esz, a + offsets[i].first * esz,
                                       nullptr, out + i * m * n * esz)
                                 .prepend(kernel));
    return {};
  };
  return {};
}

Status buildLinear(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  LinearParams lp;
  CLEAVE_RETURN_IF_ERROR(parseLinear(sig, "cuda", {DType::F32, DType::BF16}, &lp));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t m = lp.m, n = lp.n, k = lp.k;
  const bool hasBias = lp.hasBias;
  const size_t esz = dtypeBytes(x.dtype);
  DeviceContext *c = &ctx;
  if (m == 0 || n == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  if (k == 0) {
    *fn = [c, m, n, esz, hasBias](const KernelCall &call) -> Status {
      return zeroContraction(*c, call.outputs[0], hasBias ? call.inputs[2] : nullptr, m, n, esz);
    };
    return {};
  }
  GemmProblem p;
  p.dtype = x.dtype;
  p.rows = n; // Yᵀ = W · xᵀ: X is the weight, stored [k, n] column-major
  p.cols = m;
  p.k = k;
  p.transX = true;
  p.bias = hasBias;
  auto gemm = std::make_shared<Gemm>();
  CLEAVE_RETURN_IF_ERROR(gemm->init(p, tf32Allowed(ctx)).prepend(sig.kernel));
  const std::string kernel = sig.kernel;
  *fn = [c, gemm, hasBias, kernel](const KernelCall &call) -> Status {
    return gemm
        ->run(*c, call.inputs[1], call.inputs[0], hasBias ? call.inputs[2] : nullptr,
              call.outputs[0])
        .prepend(kernel);
  };
  return {};
}

} // namespace

void registerGemmKernels(KernelTable &table) {
  table["matmul"] = buildMatmul;
  table["linear"] = buildLinear;
}

} // namespace cleave::runtime::cuda
