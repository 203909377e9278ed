//===- ConvScratch.h - Scratch bytes of a CPU conv2d ----------------------===//
//
// A CPU conv2d and its two gradients may run oneDNN's convolution
// primitives on channels-last copies of a few images at a time
// (conv2dUsesPrimitive says when); the copies, and in training the weight in
// the primitive's blocked format, live in the instruction's scratch.
// Otherwise each (image, group) is one GEMM over an im2col matrix kept in
// the scratch, and the scratch holds either. The compiler
// reserves exactly this many bytes and the kernel builder checks it, so both
// include this header. Header-only, no dependencies beyond runtime/Tensor.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Tensor.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave::runtime {

/// A 1x1 kernel with stride 1, no padding and dilation 1 reads the input as
/// the GEMM operand directly: no im2col, no scratch.
inline bool conv2dIsDirectGemm(const Shape &weight, const std::vector<int64_t> &stride,
                               const std::vector<int64_t> &padding,
                               const std::vector<int64_t> &dilation) {
  auto all = [](const std::vector<int64_t> &v, int64_t value) {
    for (int64_t x : v)
      if (x != value)
        return false;
    return true;
  };
  return weight.size() == 4 && weight[2] == 1 && weight[3] == 1 && all(stride, 1) &&
         all(padding, 0) && all(dilation, 1);
}

/// Images per call of oneDNN's convolution: the channels-last copies in the
/// scratch grow with it, and past a few images the primitive gains nothing.
inline constexpr int64_t kConvPrimitiveImages = 4;

/// Whether a grouped convolution's GEMM per (image, group), filters x depth
/// by columns, is small enough that the CPU kernel runs the groups as
/// parallel tasks (Im2col.h, runGroupsAsTasks): the GEMM's multiply-adds
/// under kSmallGroupGemm and its column matrix at most kSmallGroupColumns
/// floats.
inline constexpr int64_t kSmallGroupGemm = 1 << 21;    // multiply-adds
inline constexpr int64_t kSmallGroupColumns = 1 << 18; // floats: 1 MiB
inline bool smallGroupGemm(int64_t filtersPerGroup, int64_t depth, int64_t positions) {
  const int64_t columns = depth * positions;
  return filtersPerGroup * columns < kSmallGroupGemm && columns <= kSmallGroupColumns;
}

/// Channels per group from which a grouped convolution runs the primitive.
/// Measured on RegNet's groups at 2 threads (docs/measurements.md): with
/// groups of 48 channels (regnet_x_3_2gf) the whole model takes 0.59-0.81x
/// the time in inference at batch 2 with prepacked weights, and 0.84-0.92x
/// in a training step at batch 8 with the weights reordered on every call;
/// groups of 16 (regnet_x_800mf, regnet_y_800mf) gained nothing, groups of
/// 24 (regnet_x_1_6gf) were slower when last measured (weights then
/// reordered on every call), and ResNeXt's small groups run faster as
/// parallel tasks (smallGroupGemm).
inline constexpr int64_t kConvPrimitiveMinGroupChannels = 32;

/// Whether the CPU conv2d can run oneDNN's convolution primitive, by shape:
/// not depthwise (one channel per group has its own direct kernel), a
/// kernel larger than 1x1 (a 1x1 is a GEMM over the image, or over its
/// strided subsample: cheaper than the primitive's layout copies), and,
/// grouped, wide groups whose GEMMs are not small (smallGroupGemm). A
/// forward-only program's weights (KernelSignature::ownedConstants) are
/// prepacked once, in place, where the primitive's format has their size
/// (otherwise the kernel falls back to im2col); training's forward and both
/// gradients reorder the weight into the scratch on every call.
inline bool conv2dUsesPrimitive(const Shape &input, const Shape &weight, const Shape &output,
                                int64_t groups) {
  if (input.size() != 4 || weight.size() != 4 || output.size() != 4 || groups < 1 ||
      weight[1] <= 1 || weight[2] * weight[3] <= 1)
    return false;
  if (groups > 1)
    return weight[1] >= kConvPrimitiveMinGroupChannels &&
           !smallGroupGemm(weight[0] / groups, weight[1] * weight[2] * weight[3],
                           output[2] * output[3]);
  return true;
}

/// The scratch layout of the primitive path: the channels-last input of
/// kConvPrimitiveImages images at the start, their output at dstOffset, and
/// at weightOffset the weight in the primitive's blocked format, reordered
/// there on every call where the weight changes between calls (training:
/// the forward, the input's gradient; the weight's gradient is computed
/// there). Each part 64-byte aligned; the primitive's own scratchpad is
/// oneDNN's. f32 only: the CPU backend widens bf16/f16 operands before the
/// kernel sees them.
struct ConvPrimitiveScratch {
  size_t dstOffset = 0, weightOffset = 0, weightBytes = 0, total = 0;
};

inline size_t alignScratch(size_t bytes) { return (bytes + 63) / 64 * 64; }

/// A bound on a weight's bytes in any of oneDNN's f32 blocked formats: each
/// group's filters and channels rounded up to the widest block, 16.
inline size_t conv2dBlockedWeightBytes(const Shape &weight, int64_t groups) {
  if (weight.size() != 4 || groups < 1)
    return 0;
  auto up16 = [](int64_t n) { return (n + 15) / 16 * 16; };
  const int64_t elements =
      groups * up16(weight[0] / groups) * up16(weight[1]) * weight[2] * weight[3];
  return elements > 0 ? static_cast<size_t>(elements) * 4 : 0;
}

inline ConvPrimitiveScratch conv2dPrimitiveScratch(const Shape &input, const Shape &weight,
                                                   const Shape &output, int64_t groups) {
  ConvPrimitiveScratch s;
  if (input.size() != 4 || output.size() != 4)
    return s;
  const int64_t images = std::min<int64_t>(input[0], kConvPrimitiveImages);
  const int64_t src = images * input[1] * input[2] * input[3];
  const int64_t dst = images * output[1] * output[2] * output[3];
  const size_t weightBytes = conv2dBlockedWeightBytes(weight, groups);
  if (src <= 0 || dst <= 0 || weightBytes == 0)
    return s;
  s.dstOffset = alignScratch(static_cast<size_t>(src) * 4);
  s.weightOffset = s.dstOffset + alignScratch(static_cast<size_t>(dst) * 4);
  s.weightBytes = weightBytes;
  s.total = s.weightOffset + alignScratch(weightBytes);
  return s;
}

/// Bytes of the im2col matrix of one image and one group, (C_in / groups) *
/// KH * KW rows by OH * OW columns, or 0 for the direct-GEMM case. `input` is
/// [N, C_in, H, W], `weight` [F, C_in / groups, KH, KW], `output` [N, F, OH,
/// OW]. The matrix holds the kernel's compute type: f32 for f32 and for
/// bf16/f16, which the CPU backend widens to f32. Malformed shapes give 0
/// (the kernel builder rejects them with a clearer error).
inline size_t conv2dIm2colScratchBytes(const Shape &input, const Shape &weight,
                                       const Shape &output, int64_t groups,
                                       const std::vector<int64_t> &stride,
                                       const std::vector<int64_t> &padding,
                                       const std::vector<int64_t> &dilation, DType dtype) {
  if (input.size() != 4 || weight.size() != 4 || output.size() != 4 || groups < 1)
    return 0;
  if (conv2dIsDirectGemm(weight, stride, padding, dilation))
    return 0;
  size_t elementBytes = 4;
  switch (dtype) {
  case DType::F32: case DType::I32: case DType::BF16: case DType::F16: elementBytes = 4; break;
  case DType::I64: elementBytes = 8; break;
  case DType::I1: elementBytes = 1; break;
  }
  int64_t channelsPerGroup = input[1] / groups;
  int64_t elements = channelsPerGroup * weight[2] * weight[3] * output[2] * output[3];
  return elements > 0 ? static_cast<size_t>(elements) * elementBytes : 0;
}

/// Bytes of scratch a CPU conv2d needs: its im2col matrix, and where it runs
/// the primitive, at least the primitive's copies (conv2dPrimitiveScratch),
/// so that either path fits. Same arguments as conv2dIm2colScratchBytes.
inline size_t conv2dScratchBytes(const Shape &input, const Shape &weight, const Shape &output,
                                 int64_t groups, const std::vector<int64_t> &stride,
                                 const std::vector<int64_t> &padding,
                                 const std::vector<int64_t> &dilation, DType dtype) {
  const size_t im2col =
      conv2dIm2colScratchBytes(input, weight, output, groups, stride, padding, dilation, dtype);
  if (conv2dUsesPrimitive(input, weight, output, groups))
    return std::max(conv2dPrimitiveScratch(input, weight, output, groups).total, im2col);
  return im2col;
}

/// Scratch of conv2d_backward_input: the column matrix of one image and one
/// group, as the forward's im2col (the GEMM writes columns, col2im adds them
/// into the input's gradient), or where the primitive runs
/// (conv2dUsesPrimitive), its copies, as the forward's. Same arguments as
/// conv2dIm2colScratchBytes.
inline size_t conv2dBackwardInputScratchBytes(const Shape &input, const Shape &weight,
                                              const Shape &output, int64_t groups,
                                              const std::vector<int64_t> &stride,
                                              const std::vector<int64_t> &padding,
                                              const std::vector<int64_t> &dilation, DType dtype) {
  return conv2dScratchBytes(input, weight, output, groups, stride, padding, dilation, dtype);
}

/// Scratch of conv2d_backward_weight: the forward input's im2col matrix of
/// one image and one group, or where the primitive runs, its copies, as the
/// forward's. Same arguments as conv2dIm2colScratchBytes.
inline size_t conv2dBackwardWeightScratchBytes(const Shape &input, const Shape &weight,
                                               const Shape &output, int64_t groups,
                                               const std::vector<int64_t> &stride,
                                               const std::vector<int64_t> &padding,
                                               const std::vector<int64_t> &dilation, DType dtype) {
  return conv2dScratchBytes(input, weight, output, groups, stride, padding, dilation, dtype);
}

/// Scratch of attention_backward: two f32 per query row of q [B, H, Sq, D].
inline size_t attentionBackwardScratchBytes(const Shape &q) {
  if (q.size() != 4)
    return 0;
  return static_cast<size_t>(q[0] * q[1] * q[2]) * 8;
}

} // namespace cleave::runtime
