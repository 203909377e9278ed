//===- CpuBackend.cpp - The CPU backend: host memory and the kernel table -===//

#include "runtime/BFloat16.h"
#include "runtime/Backend.h"
#include "runtime/KernelContract.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/CopyQueue.h"
#include "runtime/cpu/Registry.h"

#include <cstdlib>
#include <cstring>

namespace cleave::runtime {
namespace {

const cpu::KernelTable &kernelTable() {
  static const cpu::KernelTable table = [] {
    cpu::KernelTable t;
    cpu::registerElementwiseKernels(t);
    cpu::registerSpecialKernels(t);
    cpu::registerContractionKernels(t);
    cpu::registerNormalizationKernels(t);
    cpu::registerReductionKernels(t);
    cpu::registerPoolingKernels(t);
    cpu::registerDataMovementKernels(t);
    cpu::registerAttentionKernels(t);
    cpu::registerLinalgKernels(t);
    cpu::registerTrainingKernels(t);
    cpu::registerTrainingContractionKernels(t);
    return t;
  }();
  return table;
}

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

constexpr size_t kAlignment = 64;

size_t alignUp(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

CLEAVE_CLONES void widenSpan(const uint16_t *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16ToFloat(in[i]);
}

CLEAVE_CLONES void narrowSpan(const float *in, uint16_t *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToBf16(in[i]);
}

/// bf16 -> f32 (exact) over threads.
void widenBf16(const uint16_t *in, float *out, int64_t n) {
  cpu::parallelRange(n, 1, [&](int64_t b, int64_t e) { widenSpan(in + b, out + b, e - b); });
}

/// f32 -> bf16, to nearest, ties to even, over threads.
void narrowToBf16(const float *in, uint16_t *out, int64_t n) {
  cpu::parallelRange(n, 1, [&](int64_t b, int64_t e) { narrowSpan(in + b, out + b, e - b); });
}

bool hasDType(const KernelSignature &sig, DType dtype) {
  for (const std::optional<TensorDesc> &in : sig.inputs)
    if (in && in->dtype == dtype)
      return true;
  for (const TensorDesc &out : sig.outputs)
    if (out.dtype == dtype)
      return true;
  return false;
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
    if (hasDType(signature, DType::BF16) && !it->second.takesBf16)
      return prepareWidened(it->second.build, signature, fn);
    KernelFn prepared;
    CLEAVE_RETURN_IF_ERROR(it->second.build(signature, &prepared));
    *fn = std::move(prepared);
    return {};
  }

  size_t workspaceBytes() const override { return stagingBytes_; }

  Status allocate(size_t bytes, void **out) override {
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

  Status createCopyQueue(std::unique_ptr<CopyQueue> *out) override {
    *out = cpu::createThreadCopyQueue();
    return {};
  }

private:
  /// A kernel that computes in f32 runs a bf16 instruction widened: its bf16
  /// inputs are converted to f32 in staging memory, the f32 kernel runs with
  /// its bf16 outputs in staging too, and those are rounded to bf16 (to
  /// nearest, ties to even). Kernels accumulate in f32 (GEMM, reductions,
  /// normalizations) and round once per op, as PyTorch's bf16 CPU kernels do.
  /// The staging is one buffer the backend owns, sized to the largest
  /// instruction: the executor runs one instruction at a time.
  Status prepareWidened(KernelBuilder build, const KernelSignature &signature, KernelFn *fn) {
    if (hasDType(signature, DType::F32))
      return CLEAVE_ERROR(signature.kernel,
                          ": mixes bf16 and f32 operands; its operands and results share "
                          "one float type (a cast converts between them)");
    struct Staged {
      size_t index, offset;
      int64_t elements;
    };
    std::vector<Staged> inputs, outputs;
    size_t need = 0;
    KernelSignature wide = signature;
    auto stage = [&](TensorDesc &desc, size_t index, std::vector<Staged> &list) {
      if (desc.dtype != DType::BF16)
        return;
      desc.dtype = DType::F32;
      list.push_back({index, need, desc.numel()});
      need += alignUp(desc.bytes());
    };
    for (size_t i = 0; i < wide.inputs.size(); ++i)
      if (wide.inputs[i])
        stage(*wide.inputs[i], i, inputs);
    // A widened input is the staging buffer, rewritten on every call: the
    // f32 kernel does not own it (KernelSignature::ownedConstants).
    for (const Staged &s : inputs)
      if (s.index < wide.ownedConstants.size())
        wide.ownedConstants[s.index] = false;
    for (size_t i = 0; i < wide.outputs.size(); ++i)
      stage(wide.outputs[i], i, outputs);
    KernelFn f32;
    CLEAVE_RETURN_IF_ERROR(
        build(wide, &f32).prepend("bf16 " + signature.kernel + ", run as its f32 kernel"));
    CLEAVE_RETURN_IF_ERROR(reserveStaging(need));
    *fn = [this, f32 = std::move(f32), inputs, outputs](const KernelCall &call) -> Status {
      KernelCall wideCall = call;
      char *staging = static_cast<char *>(staging_.get());
      for (const Staged &s : inputs) {
        auto *to = reinterpret_cast<float *>(staging + s.offset);
        widenBf16(static_cast<const uint16_t *>(call.inputs[s.index]), to, s.elements);
        wideCall.inputs[s.index] = to;
      }
      for (const Staged &s : outputs)
        wideCall.outputs[s.index] = staging + s.offset;
      CLEAVE_RETURN_IF_ERROR(f32(wideCall));
      for (const Staged &s : outputs)
        narrowToBf16(reinterpret_cast<const float *>(staging + s.offset),
                     static_cast<uint16_t *>(call.outputs[s.index]), s.elements);
      return {};
    };
    return {};
  }

  /// Grows the staging buffer to at least `bytes`. Prepared kernels read
  /// `staging_` when they run, so growing never leaves one behind.
  Status reserveStaging(size_t bytes) {
    if (bytes <= stagingBytes_)
      return {};
    void *p = nullptr;
    CLEAVE_RETURN_IF_ERROR(allocate(bytes, &p).prepend("bf16 staging"));
    staging_.reset(p);
    stagingBytes_ = bytes;
    return {};
  }

  std::unique_ptr<void, FreeDeleter> staging_;
  size_t stagingBytes_ = 0;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace cleave::runtime
