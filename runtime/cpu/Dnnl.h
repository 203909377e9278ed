//===- Dnnl.h - what oneDNN's primitives in this backend share ------------===//
//
// The convolution and linear primitives (ConvPrimitive.h, LinearPrimitive.h)
// run on one CPU engine and rewrite a weight the kernel owns into their
// blocked format once, in place (KernelSignature::ownedConstants).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <dnnl.hpp>

#include <vector>

namespace cleave::runtime::cpu {

/// The engine every oneDNN primitive of the CPU backend runs on.
inline dnnl::engine &dnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A weight the kernel owns (KernelSignature::ownedConstants), held in the
/// primitive's blocked layout of the same size (the caller checked the
/// sizes) from the first call on.
struct PrepackedWeight {
  dnnl::memory::desc plain, blocked;
  dnnl::reorder toBlocked;
  bool done = false;

  PrepackedWeight() = default;
  PrepackedWeight(const dnnl::memory::desc &plain, const dnnl::memory::desc &blocked)
      : plain(plain), blocked(blocked),
        toBlocked(dnnl::reorder::primitive_desc(dnnlEngine(), plain, dnnlEngine(), blocked)) {}

  /// The weight at `data` as the primitive reads it; the first call rewrites
  /// it in place, through a copy, since a reorder does not run in place.
  dnnl::memory use(void *data, dnnl::stream &stream) {
    if (!done) {
      const char *bytes = static_cast<const char *>(data);
      std::vector<char> copy(bytes, bytes + plain.get_size());
      dnnl::memory from(plain, dnnlEngine(), copy.data()), to(blocked, dnnlEngine(), data);
      toBlocked.execute(stream, from, to);
      stream.wait();
      done = true;
    }
    return dnnl::memory(blocked, dnnlEngine(), data);
  }
};

} // namespace cleave::runtime::cpu
