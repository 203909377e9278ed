//===- OpCost.h - What one op costs, forward and backward ------*- C++ -*-===//
//
// The numbers an op reports through the dialect's CostOpInterface. Plain data,
// no MLIR, so the cost model, the planner and `cleave profile` share it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cleave::cost {

/// Ops whose kernels run at similar efficiency share a class; the cluster spec
/// gives each class its achievable fraction of peak compute and bandwidth.
enum class OpClass : uint8_t {
  Gemm,        // matmul, linear
  Convolution, // conv2d
  Elementwise, // unary/binary maps, casts, copies (permute, slice, concat)
  Reduction,   // reductions, softmax, normalization, global pooling
  Attention,   // fused attention kernels
  GroupedConvolution, // conv2d with groups > 1: depthwise, ResNeXt's grouped
  Pooling,     // windowed max and average pooling: strided windows, far slower per element than a reduction
  Normalization, // batch norm (inference): a map over channel dim 1, in runs of one plane
  Layout,      // permutes that move the innermost dim (NCHW <-> NHWC, transposes): strided copies
};
inline constexpr int kNumOpClasses = 9;
inline constexpr std::array<std::string_view, kNumOpClasses> kOpClassNames = {
    "gemm",      "convolution",         "elementwise", "reduction",     "attention",
    "grouped_convolution", "pooling",   "normalization", "layout"};
std::string_view opClassName(OpClass opClass);
std::optional<OpClass> parseOpClass(std::string_view name);

/// A (batched) matrix product C[batch, m, n] = A[batch, m, k] * B[batch, k, n];
/// GEMM efficiency depends on these dims, not only on the FLOP count.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};

/// Cost of one direction (forward, or backward) of an op.
struct PassCost {
  double flops = 0;
  double bytesRead = 0;
  double bytesWritten = 0;
  int kernels = 0; // kernel launches: each pays the device's per-kernel overhead
};

struct OpCost {
  OpClass opClass = OpClass::Elementwise;
  PassCost forward;
  PassCost backward;
  /// Activation bytes this op keeps from forward for its backward (operands or
  /// results; parameters excluded). A tensor kept by several ops counts once
  /// per layer: the analysis de-duplicates by value, this is the op's view.
  double savedBytes = 0;
  /// Set for GEMM-class ops: the forward product's dims.
  std::optional<GemmShape> gemm;
};

} // namespace cleave::cost
