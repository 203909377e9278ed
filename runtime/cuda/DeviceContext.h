//===- DeviceContext.h - What CUDA kernels share on one GPU -----*- C++ -*-===//
//
// One DeviceContext per CUDA backend: the GPU, its compute stream, the
// cuBLASLt and cuDNN handles, and the device memory kernels keep besides the
// plan's arena (GEMM and cuDNN workspaces). Kernel builders get it at
// prepare time and capture what they need; every launch goes on `stream`, so
// a program's instructions run in order without host synchronization.
//
// Builders validate through the parsers the CPU ones use (runtime/
// KernelParams.h, KernelContract.h) and name the backend "cuda" in dtype
// errors.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/KernelContract.h"
#include "runtime/KernelParams.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <string>
#include <vector>

namespace cleave::runtime::cuda {

/// A run-time error a kernel finds on the device, where it cannot return a
/// Status (an embedding index outside the table). Kernels record the first
/// one (atomicCAS on `code`); the backend turns it into an error naming the
/// instruction at its next synchronize.
struct DeviceError {
  enum Code : int {
    None = 0,
    EmbeddingIndexOutOfRange = 1,
    GatherIndexOutOfRange = 2,
    ScatterIndexOutOfRange = 3,
    PivotOutOfRange = 4,
    TargetOutOfRange = 5,
    StepNotPositive = 6,
    SampleOffsetNegative = 7,
    NllBackwardTargetOutOfRange = 8,
    EmbeddingBackwardIndexOutOfRange = 9
  };
  int code;
  int pad;
  /// EmbeddingIndexOutOfRange, EmbeddingBackwardIndexOutOfRange: the index,
  /// its position, the table's rows.
  /// Gather/ScatterIndexOutOfRange: the index, its position, the size of
  /// the indexed dim. PivotOutOfRange: the pivot, its matrix, the rows.
  /// TargetOutOfRange (nll_loss), NllBackwardTargetOutOfRange: the target,
  /// its row, the classes. StepNotPositive: the step, then 0 for adamw, 1
  /// for sgd. SampleOffsetNegative (dropout_train): the offset.
  long long values[3];
};

struct DeviceContext {
  int device = 0;
  int smCount = 0;
  int computeCapability = 0; // 90 for sm_90
  size_t sharedMemoryPerBlock = 0;
  /// f32 GEMMs may use TF32 tensor cores (`cleave run --tf32`).
  bool tf32 = false;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  /// Device memory of one DeviceError, zeroed at start and after reporting.
  DeviceError *deviceError = nullptr;
  /// One cuBLASLt workspace shared by every GEMM (they run in stream order).
  void *gemmWorkspace = nullptr;
  size_t gemmWorkspaceBytes = 0;

  /// Grows the workspace shared by kernels that run in stream order to at
  /// least `bytes` (at prepare time). Kernels read `workspace` when they run,
  /// never a pointer captured at prepare.
  Status sharedWorkspace(size_t bytes, void **out);
  /// What kernels hold besides the plan's arena and weights.
  size_t heldBytes() const { return workspaceBytes + gemmWorkspaceBytes; }
  void *workspace = nullptr;
  size_t workspaceBytes = 0;

  void release();
};

/// A prepared kernel: validates at load, then launches on ctx.stream.
using KernelBuilder = Status (*)(const KernelSignature &signature, DeviceContext &ctx,
                                 KernelFn *fn);
using KernelTable = std::map<std::string, KernelBuilder, std::less<>>;

/// "cuda: <what>: <CUDA's error string>", or ok.
Status cudaStatus(cudaError_t error, const char *what);
/// The launch error of the kernel just enqueued (bad configuration, no
/// kernel image for this GPU), named after the instruction's kernel.
Status launchStatus(const std::string &kernel);
Status cublasStatus(cublasStatus_t status, const char *what);
Status cudnnStatus(cudnnStatus_t status, const char *what);

#define CLEAVE_CUDA_TRY(expr)                                                                      \
  CLEAVE_RETURN_IF_ERROR(::cleave::runtime::cuda::cudaStatus((expr), #expr))
#define CLEAVE_CUBLAS_TRY(expr)                                                                    \
  CLEAVE_RETURN_IF_ERROR(::cleave::runtime::cuda::cublasStatus((expr), #expr))
#define CLEAVE_CUDNN_TRY(expr)                                                                     \
  CLEAVE_RETURN_IF_ERROR(::cleave::runtime::cuda::cudnnStatus((expr), #expr))

/// Dtype checks in the CUDA backend's words.
inline Status checkDType(const KernelSignature &sig, const char *name, const TensorDesc &desc,
                         std::initializer_list<DType> allowed) {
  return runtime::checkDType(sig, "cuda", name, desc, allowed);
}

/// Families of kernels, each registering its builders under the dialect's
/// kernel names (the same names as runtime/cpu/Registry.h).
/// neg abs relu silu sigmoid tanh exp log sqrt rsqrt sin cos erf not gelu,
/// floor ceil round trunc sign log1p expm1 tan asin acos atan sinh cosh asinh
/// acosh atanh reciprocal,
/// add sub mul div pow maximum minimum and or, compare where cast tril triu.
void registerElementwiseKernels(KernelTable &table);
/// The special functions of runtime/SpecialMath.h (kernels/Special.cu), the
/// CPU's names: lgamma polygamma erfinv i0 ... zeta igamma igammac
/// orthogonal_polynomial.
void registerSpecialKernels(KernelTable &table);
/// matmul of i64 or i32 operands (kernels/IntegerMatmul.cu), wrapping on
/// overflow as PyTorch's; Gemm.cpp's matmul hands such operands here.
Status buildIntegerMatmul(const KernelSignature &sig, DeviceContext &ctx,
                          const MatmulParams &params, KernelFn *fn);
/// matmul linear (cuBLASLt).
void registerGemmKernels(KernelTable &table);
/// conv2d (cuDNN).
void registerConvolutionKernels(KernelTable &table);
/// layer_norm batch_norm softmax log_softmax.
void registerNormalizationKernels(KernelTable &table);
/// reduce_sum reduce_mean reduce_max reduce_prod, reduce_max_index
/// reduce_min_index, cumsum cumprod, cummax cummin logcumsumexp, sort.
void registerReductionKernels(KernelTable &table);
/// max_pool2d avg_pool2d adaptive_avg_pool2d.
void registerPoolingKernels(KernelTable &table);
/// reshape permute broadcast_to slice concat embedding gather scatter.
void registerDataMovementKernels(KernelTable &table);
/// attention (fused causal or full; online softmax, no S x S buffer).
void registerAttentionKernels(KernelTable &table);
/// lu_factor lu_pivots_to_permutation cholesky triangular_solve (a thread
/// per matrix, in double).
void registerLinalgKernels(KernelTable &table);
/// Training, family A (kernels/Training.cu): assign dropout_train
/// batch_norm_train update_running_stats batch_norm_backward nll_loss
/// nll_loss_backward softmax_backward log_softmax_backward
/// layer_norm_backward gelu_backward silu_backward relu_backward adamw sgd.
void registerTrainingKernels(KernelTable &table);
/// The gradients of the contractions (kernels/TrainingContractions.cu):
/// linear_backward_weight (cuBLASLt) conv2d_backward_input
/// conv2d_backward_weight (cuDNN) max_pool2d_backward avg_pool2d_backward
/// adaptive_avg_pool2d_backward attention_backward embedding_backward
/// slice_backward.
void registerTrainingContractionKernels(KernelTable &table);
/// Its library calls (ContractionBackward.cpp): linear_backward_weight
/// conv2d_backward_input conv2d_backward_weight.
void registerContractionBackwardKernels(KernelTable &table);

} // namespace cleave::runtime::cuda
