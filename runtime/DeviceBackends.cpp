//===- DeviceBackends.cpp - Backend choice and the CUDA plugin loader -----===//

#include "runtime/DeviceBackends.h"
#include "runtime/cuda/CudaPlugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#ifndef CLEAVE_HAVE_CUDA
#define CLEAVE_HAVE_CUDA 0
#endif

namespace cleave::runtime {

Status parseBackendChoice(std::string_view text, BackendChoice *out) {
  if (text == "cpu")
    *out = BackendChoice::Cpu;
  else if (text == "cuda")
    *out = BackendChoice::Cuda;
  else if (text == "auto")
    *out = BackendChoice::Auto;
  else
    return CLEAVE_ERROR("unknown backend '", text, "': expected cpu, cuda or auto");
  return {};
}

const char *backendChoiceName(BackendChoice choice) {
  switch (choice) {
  case BackendChoice::Cpu:
    return "cpu";
  case BackendChoice::Cuda:
    return "cuda";
  case BackendChoice::Auto:
    return "auto";
  }
  return "?";
}

Status parseGpuComm(std::string_view text, GpuComm *out) {
  if (text == "nccl")
    *out = GpuComm::Nccl;
  else if (text == "mpi")
    *out = GpuComm::HostMpi;
  else
    return CLEAVE_ERROR("unknown GPU communication '", text, "': expected nccl or mpi");
  return {};
}

namespace {

/// The directory of the running binary, from /proc/self/exe.
std::string executableDir() {
  std::vector<char> path(4096);
  ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0)
    return "";
  std::string exe(path.data(), static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "" : exe.substr(0, slash);
}

Status loadPluginOnce(const CudaPluginApi **api) {
  if (!CLEAVE_HAVE_CUDA)
    return CLEAVE_ERROR("this cleave was built without the CUDA backend (no CUDA toolkit at "
                        "build time): rebuild on a machine with /usr/local/cuda, or use "
                        "--backend cpu");
  // $CLEAVE_CUDA_PLUGIN, else next to the binary (bin/../lib), else where
  // this build put it (for test binaries outside bin/).
  std::string path;
  if (const char *env = std::getenv("CLEAVE_CUDA_PLUGIN"); env && *env) {
    path = env;
  } else {
    path = executableDir() + "/../lib/libcleave_cuda.so";
#ifdef CLEAVE_CUDA_PLUGIN_BUILD_PATH
    if (access(path.c_str(), F_OK) != 0)
      path = CLEAVE_CUDA_PLUGIN_BUILD_PATH;
#endif
  }
  // RTLD_LOCAL: the plugin's private copy of the runtime core must not
  // interpose on the binary's.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *err = dlerror();
    return CLEAVE_ERROR("cannot load the CUDA backend ", path, ": ", err ? err : "unknown error",
                        " (CUDA, cuBLASLt, cuDNN and NCCL must be on the library path, e.g. "
                        "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib)");
  }
  using Entry = const CudaPluginApi *(*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, "cleave_cuda_plugin_api"));
  if (!entry)
    return CLEAVE_ERROR(path, " is not a cleave CUDA plugin (no cleave_cuda_plugin_api)");
  const CudaPluginApi *table = entry();
  if (!table || table->abi != CudaPluginApi::kAbi)
    return CLEAVE_ERROR(path, " is from another cleave build (plugin ABI ", table ? table->abi : -1,
                        ", this binary ", CudaPluginApi::kAbi, "): rebuild both");
  // Never dlclose: prepared kernels and backends point into the plugin.
  *api = table;
  return {};
}

} // namespace

Status loadCudaPlugin(const CudaPluginApi **api) {
  static std::once_flag once;
  static Status status;
  static const CudaPluginApi *table = nullptr;
  std::call_once(once, [] { status = loadPluginOnce(&table); });
  if (!status.ok())
    return status;
  *api = table;
  return {};
}

Status createBackend(BackendChoice choice, int localRank, int localRanks,
                     const BackendOptions &options, std::unique_ptr<Backend> *out,
                     std::string *why) {
  if (choice == BackendChoice::Cpu) {
    *out = createCpuBackend();
    return {};
  }
  auto cuda = [&]() -> Status {
    const CudaPluginApi *api = nullptr;
    CLEAVE_RETURN_IF_ERROR(loadCudaPlugin(&api));
    int count = 0;
    CLEAVE_RETURN_IF_ERROR(api->deviceCount(&count));
    if (options.gpuComm == GpuComm::HostMpi && count > 0)
      return api->createBackend(localRank % count, options, out);
    if (localRanks > count)
      return CLEAVE_ERROR(localRanks, " ranks on this machine but ", count, " GPU",
                          count == 1 ? "" : "s",
                          ": each rank needs its own GPU for NCCL (--gpu-comm mpi lets ranks "
                          "share a GPU, staging transfers through host memory)");
    return api->createBackend(localRank, options, out);
  };
  Status status = cuda();
  if (status.ok() || choice == BackendChoice::Cuda)
    return status.prepend(status.ok() ? "" : "--backend cuda");
  if (why)
    *why = status.message();
  *out = createCpuBackend();
  return {};
}

} // namespace cleave::runtime
