//===- ConvScratch.h - Scratch bytes of a CPU conv2d ----------------------===//
//
// The CPU conv2d lowers each (image, group) to one GEMM over an im2col
// matrix kept in the instruction's scratch. The compiler reserves exactly
// this many bytes and the kernel builder checks it, so both include this
// header. Header-only, no dependencies beyond runtime/Tensor.h.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Tensor.h"

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

/// Bytes of scratch a CPU conv2d needs: the im2col matrix of one image and
/// one group, (C_in / groups) * KH * KW rows by OH * OW columns, or 0 for the
/// direct-GEMM case. `input` is [N, C_in, H, W], `weight` [F, C_in / groups,
/// KH, KW], `output` [N, F, OH, OW]. The matrix holds the kernel's compute
/// type: f32 for f32 and for bf16/f16, which the CPU backend widens to f32.
/// Malformed shapes give 0 (the kernel builder rejects them with a clearer
/// error).
inline size_t conv2dScratchBytes(const Shape &input, const Shape &weight, const Shape &output,
                                 int64_t groups, const std::vector<int64_t> &stride,
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

/// Scratch of conv2d_backward_input: the column matrix of one image and one
/// group, as the forward's im2col (the GEMM writes columns, col2im adds them
/// into the input's gradient). Same arguments as conv2dScratchBytes.
inline size_t conv2dBackwardInputScratchBytes(const Shape &input, const Shape &weight,
                                              const Shape &output, int64_t groups,
                                              const std::vector<int64_t> &stride,
                                              const std::vector<int64_t> &padding,
                                              const std::vector<int64_t> &dilation, DType dtype) {
  return conv2dScratchBytes(input, weight, output, groups, stride, padding, dilation, dtype);
}

/// Scratch of conv2d_backward_weight: the forward input's im2col matrix of
/// one image and one group. Same arguments as conv2dScratchBytes.
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
