//===- ConvPrimitive.h - conv2d through oneDNN's convolution primitive ----===//
//
// oneDNN's direct convolution kernels (JIT, channels-last activations,
// blocked weights) run 3x3 and strided convolutions at close to the GEMM
// peak, where im2col + GEMM spends a third of its time building columns,
// and wide groups faster than a GEMM per group. The plan keeps NCHW
// tensors, so each call copies a few images at a time into channels-last
// layout and back, in the instruction's scratch (ConvScratch.h). A weight
// the kernel owns (KernelSignature::ownedConstants: a forward-only
// program's) is reordered into the primitive's format once, in place; one
// that changes between calls (training) is reordered into the scratch on
// every call, and the weight's gradient is reordered out of it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Conv2dContract.h"
#include "runtime/Kernel.h"

namespace cleave::runtime::cpu {

/// Prepares the primitives for `p` (an f32 conv2d, conv2dUsesPrimitive),
/// with fused_conv2d's `epilogue` as post-ops; a weight the kernel does not
/// own goes to buildTrainingConv (without an epilogue). Leaves `*fn`
/// empty where oneDNN's format for an owned weight is not the weight's own
/// size (padded blocks) or its activations not channels-last: the caller
/// runs im2col + GEMM instead. An error names the shape oneDNN could not
/// take.
Status buildPrimitiveConv2d(const KernelSignature &sig, const Conv2dParams &p,
                            const ConvEpilogue &epilogue, KernelFn *fn);

/// Which of a convolution's three computations a kernel runs.
enum class ConvPass { Forward, BackwardInput, BackwardWeight };

/// The primitive of `pass` for `p` (f32, conv2dUsesPrimitive) where the
/// weight is not the kernel's own: the forward reorders it into the scratch
/// on every call, as does the input's gradient (inputs: grad, weight); the
/// weight's gradient (inputs: grad, input) is summed over the batch's calls
/// into the output. Leaves `*fn` empty where oneDNN's activations would not
/// be channels-last or its weight outgrows the scratch's bound: the caller
/// runs im2col + GEMM instead.
Status buildTrainingConv(const KernelSignature &sig, const Conv2dParams &p, ConvPass pass,
                         KernelFn *fn);

} // namespace cleave::runtime::cpu
