//===- Registry.h - The CPU kernels, by family ----------------------------===//
//
// Each family file registers its builders under the cleave op mnemonics.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"

#include <map>
#include <string>

namespace cleave::runtime::cpu {

/// A kernel's builder, and whether it reads bf16 operands itself. Kernels that
/// compute are written for f32 (and integers); the backend runs their bf16
/// instructions widened to f32 (CpuBackend.cpp). Kernels that only move
/// elements, or convert them, take bf16 directly.
struct KernelEntry {
  KernelBuilder build = nullptr;
  bool takesBf16 = false;

  KernelEntry() = default;
  KernelEntry(KernelBuilder build, bool takesBf16 = false) : build(build), takesBf16(takesBf16) {}
};

using KernelTable = std::map<std::string, KernelEntry, std::less<>>;

/// neg abs relu silu sigmoid tanh exp log sqrt rsqrt sin cos erf not gelu,
/// floor ceil round trunc sign log1p expm1 tan asin acos atan sinh cosh asinh
/// acosh atanh reciprocal,
/// add sub mul div pow maximum minimum and or, compare where cast tril triu.
void registerElementwiseKernels(KernelTable &table);
/// The special functions of runtime/SpecialMath.h: lgamma polygamma erfinv
/// i0 i0e i1 i1e ndtri erfcx bessel_j0/j1/y0/y1 modified_bessel_k0/k1
/// scaled_modified_bessel_k0/k1 airy_ai, zeta igamma igammac
/// orthogonal_polynomial, nextafter gcd lcm frexp.
void registerSpecialKernels(KernelTable &table);
/// matmul linear embedding conv2d.
void registerContractionKernels(KernelTable &table);
/// layer_norm batch_norm softmax log_softmax.
void registerNormalizationKernels(KernelTable &table);
/// reduce_sum reduce_mean reduce_max reduce_prod, reduce_max_index
/// reduce_min_index, cumsum cumprod, cummax cummin logcumsumexp, sort.
void registerReductionKernels(KernelTable &table);
/// max_pool2d avg_pool2d adaptive_avg_pool2d.
void registerPoolingKernels(KernelTable &table);
/// reshape permute broadcast_to slice concat gather scatter.
void registerDataMovementKernels(KernelTable &table);
/// lu_factor lu_pivots_to_permutation cholesky triangular_solve (batches of
/// small matrices, in double).
void registerLinalgKernels(KernelTable &table);
/// attention (fused, causal or not).
void registerAttentionKernels(KernelTable &table);
/// Training, family A: assign dropout_train batch_norm_train
/// update_running_stats batch_norm_backward nll_loss nll_loss_backward
/// softmax_backward log_softmax_backward layer_norm_backward gelu_backward
/// silu_backward relu_backward adamw sgd.
void registerTrainingKernels(KernelTable &table);
/// The gradients of the contractions, poolings, attention, embedding and
/// slice: linear_backward_weight conv2d_backward_input conv2d_backward_weight
/// max_pool2d_backward avg_pool2d_backward adaptive_avg_pool2d_backward
/// attention_backward embedding_backward slice_backward.
void registerTrainingContractionKernels(KernelTable &table);

} // namespace cleave::runtime::cpu
