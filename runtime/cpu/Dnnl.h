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

/// Rewrites `data`, laid out as `plain`, in `blocked`'s layout of the same
/// size (the caller checked the sizes): through a copy, since a reorder
/// does not run in place.
inline void prepackInPlace(const dnnl::reorder &toBlocked, const dnnl::memory::desc &plain,
                           const dnnl::memory::desc &blocked, void *data, dnnl::stream &stream) {
  const char *bytes = static_cast<const char *>(data);
  std::vector<char> copy(bytes, bytes + plain.get_size());
  dnnl::memory from(plain, dnnlEngine(), copy.data()), to(blocked, dnnlEngine(), data);
  toBlocked.execute(stream, from, to);
  stream.wait();
}

} // namespace cleave::runtime::cpu
