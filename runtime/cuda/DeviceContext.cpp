//===- DeviceContext.cpp - Errors and the shared workspace ---------------===//

#include "runtime/cuda/DeviceContext.h"

namespace cleave::runtime::cuda {

Status cudaStatus(cudaError_t error, const char *what) {
  if (error == cudaSuccess)
    return {};
  return CLEAVE_ERROR("cuda: ", what, ": ", cudaGetErrorString(error));
}

Status launchStatus(const std::string &kernel) {
  cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess)
    return {};
  return CLEAVE_ERROR(kernel, ": CUDA kernel launch failed: ", cudaGetErrorString(error));
}

Status cublasStatus(cublasStatus_t status, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return {};
  return CLEAVE_ERROR("cuBLASLt: ", what, ": ", cublasLtGetStatusString(status));
}

Status cudnnStatus(cudnnStatus_t status, const char *what) {
  if (status == CUDNN_STATUS_SUCCESS)
    return {};
  return CLEAVE_ERROR("cuDNN: ", what, ": ", cudnnGetErrorString(status));
}

Status DeviceContext::sharedWorkspace(size_t bytes, void **out) {
  if (bytes > workspaceBytes) {
    // Kernels read `workspace` through the context when they run, so it may
    // move; work already enqueued must be done with the old one first.
    CLEAVE_CUDA_TRY(cudaStreamSynchronize(stream));
    void *p = nullptr;
    cudaError_t error = cudaMalloc(&p, bytes);
    if (error != cudaSuccess)
      return CLEAVE_ERROR("cuda backend cannot allocate ", bytes,
                          " bytes of kernel workspace: ", cudaGetErrorString(error));
    if (workspace)
      cudaFree(workspace);
    workspace = p;
    workspaceBytes = bytes;
  }
  *out = workspace;
  return {};
}

void DeviceContext::release() {
  if (workspace)
    cudaFree(workspace);
  workspace = nullptr;
  workspaceBytes = 0;
}

} // namespace cleave::runtime::cuda
