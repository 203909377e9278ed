//===- GemmCall.h - One cuBLASLt GEMM for CUDA builders ---------*- C++ -*-===//
//
// The column-major GEMM behind matmul and linear (Gemm.cpp), for the other
// builders that are a GEMM (linear_backward_weight): descriptors made at
// prepare time, the algorithm picked at the first call, when the operands'
// alignment is known, and kept.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/cuda/DeviceContext.h"

namespace cleave::runtime::cuda {

/// One column-major GEMM D[rows, cols] = X[rows, k] · Y[k, cols], X stored
/// as [k, rows] and read transposed when transX, Y stored as [cols, k] and
/// read transposed when transY; `batch` times with element strides between
/// batches (0: shared by every batch).
struct GemmProblem {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, k = 0;
  bool transX = false, transY = false;
  int64_t batch = 1;
  int64_t strideX = 0, strideY = 0, strideD = 0;
  /// Byte offsets the caller adds to X, Y and D between calls (ORed): they
  /// bound the alignment the algorithm may assume.
  uint64_t offsetsX = 0, offsetsY = 0, offsetsD = 0;
  bool bias = false;
  /// Y's leading dim as stored (0: packed, its row count).
  int64_t ldY = 0;
  /// Split-K partial sums only in the compute type (fp32) or not at all:
  /// cuBLASLt's in-place and output-type reductions would round them to a
  /// bf16 D. For long reductions into bf16 (linear_backward_weight).
  bool fp32Reduction = false;
};

/// cuBLASLt descriptors of one problem, and its algorithm once picked.
/// rows, cols and k must be positive (callers handle empty problems).
class Gemm {
public:
  Gemm() = default;
  Gemm(const Gemm &) = delete;
  Gemm &operator=(const Gemm &) = delete;
  ~Gemm();

  /// `tf32`: f32 may run on TF32 tensor cores.
  Status init(const GemmProblem &p, bool tf32);
  /// D = X · Y (+ bias), enqueued on ctx.stream.
  Status run(DeviceContext &ctx, const void *x, const void *y, const void *bias, void *d);

private:
  Status layout(cublasLtMatrixLayout_t *l, uint64_t rows, uint64_t cols, int64_t stride,
                int64_t ld);
  Status pick(DeviceContext &ctx, const uint32_t align[3]);

  GemmProblem p_;
  cudaDataType_t type_ = CUDA_R_32F;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t x_ = nullptr, y_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_;
  bool picked_ = false;
  uint32_t align_[3] = {};
};

/// A row-major operand whose rows are not a multiple of 16 bytes (GPT-2's
/// vocabulary of 50257) leaves cuBLASLt only its slow unaligned kernels: on
/// an H200 the head's three GEMMs ran at 94 to 145 TFLOP/s, PyTorch's the
/// same, where the model's aligned ones reach 450. linear_backward_weight
/// copies blocks of `chunk` columns of such a grad (a multiple of 16 bytes)
/// to aligned rows in the backend's shared workspace (at most kStageBytes)
/// and runs one GEMM per block, the whole sum in each: 4.37 ms became 2.18.
/// Staging linear's output rows or matmul's lhs rows the same way (through
/// cudaMemcpy2DAsync, whole rows at misaligned addresses) made them slower
/// (6.71 to 7.84 ms, 4.60 to 5.81), so they are left as they are.
struct ColumnBlocks {
  static constexpr size_t kStageBytes = size_t(128) << 20;
  static constexpr int64_t kMaxChunk = 2048; // columns per block
  int64_t chunk = 0;
  int64_t per = 0; // elements in 16 bytes
  /// The leading dim of a staged block of `cols` columns.
  int64_t pitch(int64_t cols) const { return (cols + per - 1) / per * per; }
  /// Worth it for `rows` rows of `rowElems` elements: misaligned rows, and
  /// both sizes large.
  static bool wanted(int64_t rowElems, int64_t rows, size_t esz) {
    return (rowElems * static_cast<int64_t>(esz)) % 16 != 0 && rowElems >= 256 && rows >= 256;
  }
  static ColumnBlocks of(int64_t rowElems, int64_t rows, size_t esz);
};

} // namespace cleave::runtime::cuda
