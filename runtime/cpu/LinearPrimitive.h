//===- LinearPrimitive.h - linear through oneDNN's matmul primitive -------===//
//
// dnnl_sgemm packs its weight operand into the kernel's blocks on every
// call; at a transformer's row counts (a few hundred tokens) that packing is
// a tenth of the GEMM's time. A forward-only program's linear whose weight
// the kernel owns (KernelSignature::ownedConstants) runs oneDNN's matmul
// primitive instead, the weight reordered into its blocked format once, in
// place, and the bias added in the primitive.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"
#include "runtime/KernelParams.h"

namespace cleave::runtime::cpu {

/// Prepares the primitive for `p` (an f32 linear, its weight an owned
/// constant). Leaves `*fn` empty where the weight is not owned or oneDNN's
/// blocked format would not keep the weight's size: the caller runs
/// dnnl_sgemm instead. An error names the shape oneDNN could not take.
Status buildPrimitiveLinear(const KernelSignature &sig, const LinearParams &p, KernelFn *fn);

} // namespace cleave::runtime::cpu
