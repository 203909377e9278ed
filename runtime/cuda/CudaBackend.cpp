//===- CudaBackend.cpp - The CUDA backend and the plugin's entry point ----===//
//
// One backend owns one GPU: a non-blocking compute stream on which every
// kernel, copy and NCCL wait is issued in program order, the cuBLASLt and
// cuDNN handles, and the memory the executor asks for (cudaMalloc: the
// plan's arena and the weights, nothing per instruction).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaPlugin.h"
#include "runtime/cuda/DeviceContext.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "runtime/TrainingParams.h"

#include <cstring>

namespace cleave::runtime::cuda {
namespace {

/// cuBLASLt's workspace: enough for the split-K and stream-K GEMMs of large
/// shapes on sm_90.
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;

const KernelTable &kernelTable() {
  static const KernelTable table = [] {
    KernelTable t;
    registerElementwiseKernels(t);
    registerSpecialKernels(t);
    registerGemmKernels(t);
    registerConvolutionKernels(t);
    registerNormalizationKernels(t);
    registerReductionKernels(t);
    registerPoolingKernels(t);
    registerDataMovementKernels(t);
    registerAttentionKernels(t);
    registerLinalgKernels(t);
    registerTrainingKernels(t);
    registerTrainingContractionKernels(t);
    return t;
  }();
  return table;
}

class CudaBackend final : public Backend {
public:
  ~CudaBackend() override {
    if (ctx_.stream) {
      cudaSetDevice(ctx_.device);
      cudaStreamSynchronize(ctx_.stream);
    }
    ctx_.release();
    if (ctx_.gemmWorkspace)
      cudaFree(ctx_.gemmWorkspace);
    if (ctx_.deviceError)
      cudaFree(ctx_.deviceError);
    if (ctx_.lt)
      cublasLtDestroy(ctx_.lt);
    if (ctx_.dnn)
      cudnnDestroy(ctx_.dnn);
    if (ctx_.stream)
      cudaStreamDestroy(ctx_.stream);
  }

  Status init(int device, const BackendOptions &options) {
    ctx_.device = device;
    ctx_.tf32 = options.tf32;
    CLEAVE_CUDA_TRY(cudaSetDevice(device));
    cudaDeviceProp props;
    CLEAVE_CUDA_TRY(cudaGetDeviceProperties(&props, device));
    ctx_.smCount = props.multiProcessorCount;
    ctx_.computeCapability = props.major * 10 + props.minor;
    ctx_.sharedMemoryPerBlock = props.sharedMemPerBlockOptin;
    if (ctx_.computeCapability < 80)
      return CLEAVE_ERROR("GPU ", device, " (", props.name, ", sm_", ctx_.computeCapability,
                          ") is older than sm_80: the cuda backend needs bf16 tensor cores");
    CLEAVE_CUDA_TRY(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
    CLEAVE_CUBLAS_TRY(cublasLtCreate(&ctx_.lt));
    CLEAVE_CUDNN_TRY(cudnnCreate(&ctx_.dnn));
    CLEAVE_CUDNN_TRY(cudnnSetStream(ctx_.dnn, ctx_.stream));
    CLEAVE_CUDA_TRY(cudaMalloc(&ctx_.gemmWorkspace, kGemmWorkspaceBytes));
    ctx_.gemmWorkspaceBytes = kGemmWorkspaceBytes;
    CLEAVE_CUDA_TRY(cudaMalloc(reinterpret_cast<void **>(&ctx_.deviceError), sizeof(DeviceError)));
    // On the compute stream: it is non-blocking, so it does not wait for
    // the legacy default stream a plain cudaMemset would run on.
    CLEAVE_CUDA_TRY(cudaMemsetAsync(ctx_.deviceError, 0, sizeof(DeviceError), ctx_.stream));
    return {};
  }

  const char *name() const override { return "cuda"; }
  DeviceContext &context() { return ctx_; }
  size_t workspaceBytes() const override { return ctx_.heldBytes(); }

  bool hasKernel(std::string_view kernel) const override {
    return kernelTable().find(kernel) != kernelTable().end();
  }

  std::vector<std::string> kernelNames() const override {
    std::vector<std::string> names;
    for (const auto &entry : kernelTable())
      names.push_back(entry.first);
    return names;
  }

  Status prepareKernel(const KernelSignature &signature, KernelFn *fn) override {
    auto it = kernelTable().find(signature.kernel);
    if (it == kernelTable().end())
      return CLEAVE_ERROR("cuda backend has no kernel '", signature.kernel, "'");
    CLEAVE_RETURN_IF_ERROR(checkShapes(signature));
    CLEAVE_CUDA_TRY(cudaSetDevice(ctx_.device));
    KernelFn prepared;
    CLEAVE_RETURN_IF_ERROR(it->second(signature, ctx_, &prepared));
    *fn = std::move(prepared);
    return {};
  }

  Status allocate(size_t bytes, void **out) override {
    // cudaMalloc aligns to 256 bytes; 0 bytes still gets a unique pointer.
    void *p = nullptr;
    cudaError_t error = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (error != cudaSuccess) {
      size_t freeBytes = 0, totalBytes = 0;
      cudaMemGetInfo(&freeBytes, &totalBytes);
      return CLEAVE_ERROR("cuda backend cannot allocate ", bytes, " bytes on GPU ", ctx_.device,
                          " (", freeBytes, " of ", totalBytes,
                          " bytes free): ", cudaGetErrorString(error));
    }
    *out = p;
    return {};
  }

  void deallocate(void *ptr) override {
    if (!ptr)
      return;
    // Memory may still be read by issued kernels.
    cudaStreamSynchronize(ctx_.stream);
    cudaFree(ptr);
  }

  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return {};
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_.stream));
    // The caller may reuse `src` as soon as this returns.
    return synchronize();
  }

  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return {};
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx_.stream));
    return synchronize();
  }

  Status copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (!bytes)
      return {};
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx_.stream));
    return {};
  }

  Status copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                  size_t rows) override {
    if (!width || !rows)
      return {};
    CLEAVE_CUDA_TRY(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, rows,
                                      cudaMemcpyDeviceToDevice, ctx_.stream));
    return {};
  }

  Status synchronize() override {
    CLEAVE_CUDA_TRY(cudaStreamSynchronize(ctx_.stream));
    DeviceError error;
    CLEAVE_CUDA_TRY(cudaMemcpy(&error, ctx_.deviceError, sizeof(error), cudaMemcpyDeviceToHost));
    if (error.code == DeviceError::None)
      return {};
    CLEAVE_CUDA_TRY(cudaMemsetAsync(ctx_.deviceError, 0, sizeof(DeviceError), ctx_.stream));
    if (error.code == DeviceError::EmbeddingIndexOutOfRange)
      return CLEAVE_ERROR("embedding: index ", error.values[0], " at position ", error.values[1],
                          " is out of range for a table of ", error.values[2], " rows");
    if (error.code == DeviceError::EmbeddingBackwardIndexOutOfRange)
      return CLEAVE_ERROR("embedding_backward: index ", error.values[0], " at position ",
                          error.values[1], " is out of range for a table of ", error.values[2],
                          " rows");
    if (error.code == DeviceError::GatherIndexOutOfRange ||
        error.code == DeviceError::ScatterIndexOutOfRange)
      return CLEAVE_ERROR(error.code == DeviceError::GatherIndexOutOfRange ? "gather" : "scatter",
                          ": index ", error.values[0], " at position ", error.values[1],
                          " is out of range for a dim of size ", error.values[2]);
    if (error.code == DeviceError::PivotOutOfRange)
      return CLEAVE_ERROR("lu_pivots_to_permutation: pivot ", error.values[0], " of matrix ",
                          error.values[1], " is outside [1, ", error.values[2], "]");
    if (error.code == DeviceError::TargetOutOfRange ||
        error.code == DeviceError::NllBackwardTargetOutOfRange)
      return CLEAVE_ERROR(error.code == DeviceError::TargetOutOfRange ? "nll_loss"
                                                                       : "nll_loss_backward",
                          ": target ", error.values[0], " of row ", error.values[1],
                          " is outside [0, ", error.values[2], ") and is not ignore_index");
    if (error.code == DeviceError::StepNotPositive)
      return stepError(error.values[1] == 0 ? "adamw" : "sgd", error.values[0]);
    if (error.code == DeviceError::SampleOffsetNegative)
      return CLEAVE_ERROR("dropout_train: sample_offset ", error.values[0], " is negative");
    return CLEAVE_ERROR("cuda backend: a kernel reported error code ", error.code);
  }

private:
  DeviceContext ctx_;
};

Status deviceCount(int *count) {
  int n = 0;
  cudaError_t error = cudaGetDeviceCount(&n);
  if (error != cudaSuccess)
    return CLEAVE_ERROR("no usable NVIDIA GPU: cudaGetDeviceCount: ", cudaGetErrorString(error));
  if (n == 0)
    return CLEAVE_ERROR("no NVIDIA GPU is visible to this process (check CUDA_VISIBLE_DEVICES)");
  *count = n;
  return {};
}

Status describeDevice(int device, std::string *description) {
  cudaDeviceProp props;
  CLEAVE_CUDA_TRY(cudaGetDeviceProperties(&props, device));
  int driver = 0;
  CLEAVE_CUDA_TRY(cudaDriverGetVersion(&driver));
  *description = detail::concat(props.name, ", sm_", props.major, props.minor, ", ",
                                props.totalGlobalMem >> 20, " MiB, CUDA driver ", driver / 1000,
                                ".", (driver % 1000) / 10);
  return {};
}

Status createBackend(int device, const BackendOptions &options, std::unique_ptr<Backend> *out) {
  auto backend = std::make_unique<CudaBackend>();
  CLEAVE_RETURN_IF_ERROR(backend->init(device, options).prepend(detail::concat("GPU ", device)));
  *out = std::move(backend);
  return {};
}

Status createNccl(Communicator &bootstrap, Backend &backend, const std::string &name,
                  std::unique_ptr<Communicator> *out) {
  auto *cuda = dynamic_cast<CudaBackend *>(&backend);
  if (!cuda)
    return CLEAVE_ERROR("NCCL communicator '", name, "': needs the cuda backend, got '",
                        backend.name(), "'");
  return createNcclCommunicator(bootstrap, cuda->context(), name, out);
}

const CudaPluginApi kApi = {CudaPluginApi::kAbi, deviceCount, describeDevice, createBackend,
                            createNccl};

} // namespace
} // namespace cleave::runtime::cuda

extern "C" __attribute__((visibility("default"))) const cleave::runtime::CudaPluginApi *
cleave_cuda_plugin_api() {
  return &cleave::runtime::cuda::kApi;
}
