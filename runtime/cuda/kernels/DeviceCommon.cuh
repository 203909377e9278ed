//===- DeviceCommon.cuh - What the CUDA kernel families share ---*- CUDA -*-===//
//
// Element access (bf16 is stored, fp32 is computed), launch geometry, warp
// and block reductions, broadcast layouts passed by value, and the device
// error reporter. Host and device code both include this.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/cuda/DeviceContext.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace cleave::runtime::cuda {

using bf16 = __nv_bfloat16;
/// i1 is one byte per element, 0 or 1.
using Bool = uint8_t;

//===----------------------------------------------------------------------===//
// Element types: floats load as fp32, store rounding to nearest even.
//===----------------------------------------------------------------------===//

/// What arithmetic on T runs in: float for bf16, T itself otherwise.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<bf16> { using type = float; };
template <typename T> using Compute = typename ComputeOf<T>::type;

template <typename T> constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, bf16>;

template <typename T> __device__ __forceinline__ Compute<T> load(T v) { return v; }
template <> __device__ __forceinline__ float load<bf16>(bf16 v) { return __bfloat162float(v); }

template <typename T, typename C> __device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, bf16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// `V` elements moved as one aligned access.
template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };

/// The unsigned integer type of `Bytes` bytes (data movement moves bits).
template <int Bytes> struct BitsOf;
template <> struct BitsOf<1> { using type = uint8_t; };
template <> struct BitsOf<2> { using type = uint16_t; };
template <> struct BitsOf<4> { using type = uint32_t; };
template <> struct BitsOf<8> { using type = uint64_t; };
template <> struct BitsOf<16> { using type = uint4; };

/// Calls `f(T{})` with T the unsigned integer type of an element of `bytes`
/// bytes (1, 2, 4, else 8): kernels that only select or move elements
/// instantiate once per size, not per dtype.
template <typename F> void byElementSize(size_t bytes, F &&f) {
  switch (bytes) {
  case 1:
    f(uint8_t{});
    break;
  case 2:
    f(uint16_t{});
    break;
  case 4:
    f(uint32_t{});
    break;
  default:
    f(uint64_t{});
    break;
  }
}

inline bool aligned(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

//===----------------------------------------------------------------------===//
// Launch geometry.
//===----------------------------------------------------------------------===//

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over `work` items of `threads` per block:
/// enough to fill every SM several times, no more.
inline unsigned gridFor(const DeviceContext &ctx, int64_t work, int threads = kThreads) {
  int64_t blocks = (work + threads - 1) / threads;
  int64_t cap = static_cast<int64_t>(std::max(ctx.smCount, 1)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

/// Blocks for one item per block (rows), capped by the grid limit.
inline unsigned gridForItems(int64_t items) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(items, 1 << 30)));
}

__device__ __forceinline__ int64_t globalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t globalThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

struct SumOp {
  template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
/// NaN-propagating maximum (as torch.max).
struct MaxNanOp {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return (a > b || a != a) ? a : b;
  }
};
/// Maximum that ignores NaN on the right (a softmax's running max: a NaN
/// row still ends NaN through its exponentials, as on the CPU).
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return b > a ? b : a; }
};

template <typename T, typename Op> __device__ __forceinline__ T warpReduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Reduces over the whole block; every thread gets the result. `shared`
/// holds 32 values; blockDim.x is a multiple of 32. Safe to call again
/// right away (it synchronizes before reusing `shared`).
template <typename T, typename Op> __device__ __forceinline__ T blockReduce(T v, Op op, T *shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warpReduce(v, op);
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  T r = shared[0];
  for (int w = 1; w < warps; ++w)
    r = op(r, shared[w]);
  return r;
}

//===----------------------------------------------------------------------===//
// Broadcast layouts (runtime::makeBroadcastLayout, coalesced) by value.
//===----------------------------------------------------------------------===//

constexpr int kMaxLayoutRank = 10;

struct DeviceLayout {
  int rank = 0;
  int64_t dims[kMaxLayoutRank] = {};
  int64_t strides[kMaxLayoutRank][kMaxOperands] = {};
};

/// The device copy of `layout`; an error for more coalesced dims than it holds.
inline Status toDevice(const KernelSignature &sig, const BroadcastLayout &layout,
                       DeviceLayout *out) {
  if (layout.dims.size() > static_cast<size_t>(kMaxLayoutRank))
    return CLEAVE_ERROR(sig.kernel, ": the cuda backend handles at most ", kMaxLayoutRank,
                        " non-contiguous dims, got ", layout.dims.size());
  out->rank = static_cast<int>(layout.dims.size());
  for (int d = 0; d < out->rank; ++d) {
    out->dims[d] = layout.dims[d];
    for (int k = 0; k < kMaxOperands; ++k)
      out->strides[d][k] = layout.strides[d][k];
  }
  return {};
}

/// Whether every index and offset of the layout fits 32 bits (the index math
/// then avoids 64-bit divisions).
inline bool fits32(const DeviceLayout &layout, int64_t total) {
  int64_t limit = std::numeric_limits<int32_t>::max();
  if (total > limit)
    return false;
  for (int k = 0; k < kMaxOperands; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < layout.rank; ++d)
      reach += (layout.dims[d] - 1) * std::abs(layout.strides[d][k]);
    if (reach > limit)
      return false;
  }
  return true;
}

/// The offsets of operands [0, N) for flat output index `flat`.
template <int N, typename I>
__device__ __forceinline__ void layoutOffsets(const DeviceLayout &layout, I flat, I (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    off[k] = 0;
  for (int d = layout.rank - 1; d >= 0; --d) {
    const I dim = static_cast<I>(layout.dims[d]);
    const I i = d == 0 ? flat : flat % dim;
    flat = d == 0 ? 0 : flat / dim;
#pragma unroll
    for (int k = 0; k < N; ++k)
      off[k] += i * static_cast<I>(layout.strides[d][k]);
  }
}

//===----------------------------------------------------------------------===//
// Device errors.
//===----------------------------------------------------------------------===//

/// Records the first run-time error of any kernel (later ones are dropped).
__device__ __forceinline__ void reportDeviceError(DeviceError *error, int code, long long a,
                                                  long long b, long long c) {
  if (atomicCAS(&error->code, 0, code) == 0) {
    error->values[0] = a;
    error->values[1] = b;
    error->values[2] = c;
    __threadfence();
  }
}

} // namespace cleave::runtime::cuda
