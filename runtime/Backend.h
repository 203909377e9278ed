//===- Backend.h - Where kernels run and buffers live ---------------------===//
//
// The executor sees a device only through this interface: memory, copies and
// kernels. The CPU backend is the reference; the CUDA backend implements the
// same kernels, and one conformance suite checks both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace cleave::runtime {

/// Copies between host memory and a backend's memory that run apart from
/// the kernels, one after another in the order they were issued: a spilled
/// plan's `prefetch` and `spill` instructions (docs/plan-format.md,
/// "Spilling to host memory"). The executor orders them against the
/// kernels; the queue only runs them and says which are done.
class CopyQueue {
public:
  virtual ~CopyQueue() = default;
  /// Issues a copy of `bytes` from `src` to `dst`, host to device
  /// (`toDevice`) or device to host. Returns its ticket: 1 for the first
  /// copy, each next one the previous plus 1.
  virtual uint64_t issue(void *dst, const void *src, size_t bytes, bool toDevice) = 0;
  /// Waits until copy `ticket` is done, and so every copy issued before it.
  virtual Status wait(uint64_t ticket) = 0;
  /// The highest ticket done so far, without waiting.
  virtual uint64_t done() const = 0;
  /// Seconds spent copying so far (the copy engine's busy time).
  virtual double busySeconds() const = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;

  virtual bool hasKernel(std::string_view kernel) const = 0;
  virtual std::vector<std::string> kernelNames() const = 0;
  /// Validates one instruction and prepares the function that runs it.
  virtual Status prepareKernel(const KernelSignature &signature, KernelFn *fn) = 0;

  /// Device memory, aligned to 64 bytes.
  virtual Status allocate(size_t bytes, void **out) = 0;
  virtual void deallocate(void *ptr) = 0;
  virtual Status copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;
  /// Device to device, ordered after the kernels already issued.
  virtual Status copyOnDevice(void *dst, const void *src, size_t bytes) = 0;
  /// `rows` runs of `width` bytes: run r from src + r * srcPitch to
  /// dst + r * dstPitch (one strided copy on a GPU).
  virtual Status copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                          size_t width, size_t rows);
  /// Waits for everything issued; reports an error a kernel found on the
  /// device since the last call.
  virtual Status synchronize() = 0;
  /// True when device memory is host memory (weights load in place).
  virtual bool sharesHostMemory() const { return false; }
  /// Bytes the backend holds for its kernels beyond a plan's arena and
  /// weights (the CPU backend's bf16 staging), once kernels are prepared.
  virtual size_t workspaceBytes() const { return 0; }
  /// The queue a spilled plan's prefetch and spill instructions run on.
  /// A backend that has one also runs every kernel on tensors in host
  /// memory the executor allocates (the host pool, plain aligned memory).
  /// The default: an error saying spilled plans need the CPU backend.
  virtual Status createCopyQueue(std::unique_ptr<CopyQueue> *out);
};

/// The CPU backend: oneDNN GEMM and OpenMP loops.
std::unique_ptr<Backend> createCpuBackend();

/// Threads of the CPU backend's OpenMP pool (loops and GEMMs); 0 leaves
/// the default (OMP_NUM_THREADS, else one per core).
void setCpuThreads(int threads);
int cpuThreads();

} // namespace cleave::runtime
