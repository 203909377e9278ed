//===- CudaPlugin.h - What the CUDA plugin exports to the runtime ---------===//
//
// The CUDA backend and NCCL communicator live in lib/libcleave_cuda.so, which
// links CUDA, cuBLASLt, cuDNN and NCCL. The runtime dlopens it only when a
// run asks for CUDA (runtime/DeviceBackends.h), so the `cleave` binary starts
// on machines without those libraries. The plugin and the binary come from
// one build: the table carries an ABI number that both must agree on.
//
// No CUDA types here: this header is included by code built without CUDA.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/DeviceBackends.h"
#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>

namespace cleave::runtime {

struct CudaPluginApi {
  /// Changes whenever this table or the interfaces it passes change.
  static constexpr int kAbi = 2;
  int abi;
  /// GPUs this process can use; an error that names why there are none
  /// (no driver, driver too old, no device).
  Status (*deviceCount)(int *count);
  /// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, CUDA driver 13.0".
  Status (*describeDevice)(int device, std::string *description);
  /// A backend that owns GPU `device`: its compute stream, library handles
  /// and memory.
  Status (*createBackend)(int device, const BackendOptions &options, std::unique_ptr<Backend> *out);
  /// A NCCL communicator over the ranks of `bootstrap` (an MPI group, used
  /// once to broadcast the NCCL unique id from its rank 0). Buffers are
  /// device memory of `backend` (a backend from createBackend); every call
  /// is ordered on the backend's compute stream (see NcclCommunicator.h).
  Status (*createNcclCommunicator)(Communicator &bootstrap, Backend &backend,
                                   const std::string &name, std::unique_ptr<Communicator> *out);
};

} // namespace cleave::runtime

/// The plugin's one exported symbol.
extern "C" const cleave::runtime::CudaPluginApi *cleave_cuda_plugin_api();
