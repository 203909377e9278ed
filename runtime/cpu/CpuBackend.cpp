//===- CpuBackend.cpp - The CPU backend: host memory and the kernel table -===//

#include "runtime/Backend.h"
#include "runtime/KernelContract.h"
#include "runtime/cpu/Registry.h"

#include <cstdlib>
#include <cstring>

namespace cleave::runtime {
namespace {

const cpu::KernelTable &kernelTable() {
  static const cpu::KernelTable table = [] {
    cpu::KernelTable t;
    cpu::registerElementwiseKernels(t);
    cpu::registerContractionKernels(t);
    cpu::registerNormalizationKernels(t);
    cpu::registerReductionKernels(t);
    cpu::registerPoolingKernels(t);
    cpu::registerDataMovementKernels(t);
    cpu::registerAttentionKernels(t);
    return t;
  }();
  return table;
}

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }
  bool sharesHostMemory() const override { return true; }

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
      return CLEAVE_ERROR("cpu backend has no kernel '", signature.kernel, "'");
    CLEAVE_RETURN_IF_ERROR(checkShapes(signature));
    KernelFn prepared;
    CLEAVE_RETURN_IF_ERROR(it->second(signature, &prepared));
    *fn = std::move(prepared);
    return {};
  }

  Status allocate(size_t bytes, void **out) override {
    constexpr size_t kAlignment = 64;
    // aligned_alloc needs a multiple of the alignment; 0 bytes still gets a
    // unique pointer.
    size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes)
      return CLEAVE_ERROR("cpu backend cannot allocate ", bytes, " bytes: size overflows");
    void *p = std::aligned_alloc(kAlignment, rounded);
    if (!p)
      return CLEAVE_ERROR("cpu backend is out of memory allocating ", bytes, " bytes");
    *out = p;
    return {};
  }

  void deallocate(void *ptr) override { std::free(ptr); }

  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return {};
  }

  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return {};
  }

  Status copyOnDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memmove(dst, src, bytes);
    return {};
  }

  Status synchronize() override { return {}; }
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace cleave::runtime
