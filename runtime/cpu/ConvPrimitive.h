//===- ConvPrimitive.h - conv2d through oneDNN's convolution primitive ----===//
//
// oneDNN's direct convolution kernels (JIT, channels-last activations,
// blocked weights) run 3x3 and strided convolutions at close to the GEMM
// peak, where im2col + GEMM spends a third of its time building columns,
// and wide groups faster than a GEMM per group. The plan keeps NCHW
// tensors, so each call copies a few images at a time into channels-last
// layout and back, in the instruction's scratch (ConvScratch.h). The
// weights are reordered into the primitive's format once, in place, which
// needs a weight the kernel owns (KernelSignature::ownedConstants).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Conv2dContract.h"
#include "runtime/Kernel.h"

namespace cleave::runtime::cpu {

/// Prepares the primitives for `p` (an f32 conv2d, conv2dUsesPrimitive, its
/// weight an owned constant). Leaves `*fn` empty where oneDNN's weight
/// format is not the weight's own size (padded blocks) or its activations
/// not channels-last: the caller runs im2col + GEMM instead. An error names
/// the shape oneDNN could not take.
Status buildPrimitiveConv2d(const KernelSignature &sig, const Conv2dParams &p, KernelFn *fn);

} // namespace cleave::runtime::cpu
