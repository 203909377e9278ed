//===- DeviceBackends.h - Choosing the backend a run uses -----------------===//
//
// `cleave run --backend cpu|cuda|auto`. The CPU backend is built in; the CUDA
// backend is a plugin loaded at run time (runtime/cuda/CudaPlugin.h), found
// next to the binary (../lib/libcleave_cuda.so) or at $CLEAVE_CUDA_PLUGIN.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"

#include <memory>
#include <string>
#include <string_view>

namespace cleave::runtime {

struct CudaPluginApi;

enum class BackendChoice { Cpu, Cuda, Auto };

/// How the GPU ranks of a multi-device plan move tensors.
enum class GpuComm : uint8_t {
  Nccl,    ///< NCCL: one GPU per rank.
  HostMpi, ///< MPI, every transfer staged through host memory: ranks may share a GPU.
};

/// What `cleave run` passes to a device backend.
struct BackendOptions {
  /// f32 GEMMs may run on TF32 tensor cores (10-bit mantissa inputs).
  bool tf32 = false;
  GpuComm gpuComm = GpuComm::Nccl;
};

/// "nccl" or "mpi"; anything else is an error naming the choices.
Status parseGpuComm(std::string_view text, GpuComm *out);

/// "cpu", "cuda" or "auto"; anything else is an error naming the choices.
Status parseBackendChoice(std::string_view text, BackendChoice *out);
const char *backendChoiceName(BackendChoice choice);

/// Loads the CUDA plugin once per process. Fails with the reason: this
/// build has no CUDA backend, the plugin or one of its libraries (CUDA,
/// cuBLASLt, cuDNN, NCCL) cannot be loaded, or it is from another build.
Status loadCudaPlugin(const CudaPluginApi **api);

/// The backend for `choice`, for rank `localRank` of the `localRanks` ranks
/// on this machine. cuda: GPU `localRank`, or an error saying why there is
/// none (no plugin, no driver, fewer GPUs than ranks here: NCCL needs a GPU
/// per rank); with GpuComm::HostMpi, GPU `localRank` modulo the GPUs here. auto: cuda when that works, else cpu (`*why` says why not).
Status createBackend(BackendChoice choice, int localRank, int localRanks,
                     const BackendOptions &options, std::unique_ptr<Backend> *out,
                     std::string *why = nullptr);

} // namespace cleave::runtime
