//===- AttentionTiles.cuh - What the tensor-core attentions share ---------===//
//
// The forward attention (Attention.cu) and its backward (AttentionBackward.cu)
// both run bf16 tiles through WMMA (bf16 inputs, fp32 accumulators): tiles
// of 64 rows in shared memory, the head dim padded with zeros to P (64, 128
// or 256), a warp per 16 rows.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/BackwardParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

namespace cleave::runtime::cuda {

/// dst[r][c] = src[r][c] for r < valid, c < cols; zero elsewhere in
/// [rows][P]. `vec` (cols % 8 == 0, 16-byte aligned rows) copies 16 bytes
/// at a time.
template <int P>
__device__ __forceinline__ void loadBf16Tile(bf16 *dst, int ld, const bf16 *src, int rows,
                                             int valid, int64_t cols, bool vec) {
  if (vec) {
    constexpr int per = P / 8;
    for (int idx = threadIdx.x; idx < rows * per; idx += blockDim.x) {
      const int r = idx / per, c = (idx % per) * 8;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r < valid && c < cols)
        value = *reinterpret_cast<const uint4 *>(src + r * cols + c);
      *reinterpret_cast<uint4 *>(dst + r * ld + c) = value;
    }
  } else {
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (int idx = threadIdx.x; idx < rows * P; idx += blockDim.x) {
      const int r = idx / P, c = idx % P;
      dst[r * ld + c] = r < valid && c < cols ? src[r * cols + c] : zero;
    }
  }
}

/// The widest head dim the tensor-core attention_backward takes: its
/// accumulators live in registers, 16 x P per warp for each gradient.
constexpr int64_t kAttentionBackwardWmmaMaxDim = 128;

/// attention_backward on tensor cores, for bf16 operands whose head dims
/// are at most kAttentionBackwardWmmaMaxDim (the caller has checked both).
/// Same contract and scratch as the fp32 kernels.
Status makeAttentionBackwardWmma(const KernelSignature &sig, DeviceContext &ctx,
                                 const AttentionParams &p, KernelFn *fn);

} // namespace cleave::runtime::cuda
