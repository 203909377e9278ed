//===- Philox.h - Philox-4x32-10 and the dropout_train mask ---------------===//
//
// The counter-based generator behind `dropout_train` (docs/plan-format.md,
// "Training kernels"): whether element i is kept is a pure function of
// (seed, step, stream, i), so every backend draws the same mask and backward
// recomputes it instead of storing it. Header-only, no dependencies: the
// functions are `constexpr`-friendly plain integer code that CUDA device code
// can include too (CLEAVE_PHILOX_HD marks them __host__ __device__ there).
//
// Philox-4x32-10 is Salmon et al.'s generator as Random123, cuRAND and
// PyTorch's CUDA generator compute it: ten rounds, the key bumped by the
// Weyl constants between rounds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CLEAVE_PHILOX_HD __host__ __device__ __forceinline__
#else
#define CLEAVE_PHILOX_HD inline
#endif

namespace cleave::runtime::philox {

struct Uint4 {
  uint32_t x, y, z, w;
};

constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;

/// Philox-4x32-10 of `counter` under the 64-bit key (key0 low, key1 high).
CLEAVE_PHILOX_HD Uint4 philox4x32_10(Uint4 counter, uint32_t key0, uint32_t key1) {
  Uint4 c = counter;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c.x;
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c.z;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = Uint4{hi1 ^ c.y ^ key0, lo1, hi0 ^ c.w ^ key1, lo0};
  }
  return c;
}

/// The mask of one dropout_train instruction at one step: key = (seed mod
/// 2^32, seed / 2^32), counter = (block mod 2^32, block / 2^32, stream,
/// t mod 2^32) for the block i / 4 of 4 elements, word i mod 4.
struct DropoutMask {
  uint32_t key0 = 0, key1 = 0;
  uint32_t stream = 0, step = 0;
  /// Element kept when (word >> 8) >= threshold, i.e. u = (word >> 8)·2^-24
  /// >= p exactly (p·2^24 is exact in double).
  uint32_t threshold = 0;

  CLEAVE_PHILOX_HD DropoutMask() = default;
  CLEAVE_PHILOX_HD DropoutMask(uint64_t seed, uint32_t stream, int64_t t, double p)
      : key0(static_cast<uint32_t>(seed)), key1(static_cast<uint32_t>(seed >> 32)),
        stream(stream), step(static_cast<uint32_t>(static_cast<uint64_t>(t))),
        threshold(thresholdOf(p)) {}

  /// ceil(p·2^24), clamped to [0, 2^24].
  static CLEAVE_PHILOX_HD uint32_t thresholdOf(double p) {
    double scaled = std::ceil(p * 16777216.0);
    if (!(scaled > 0))
      return 0;
    return scaled >= 16777216.0 ? 16777216u : static_cast<uint32_t>(scaled);
  }

  /// The four words of block `block` (elements 4·block .. 4·block + 3).
  CLEAVE_PHILOX_HD Uint4 words(uint64_t block) const {
    return philox4x32_10(Uint4{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                               stream, step},
                         key0, key1);
  }

  CLEAVE_PHILOX_HD bool keeps(uint32_t word) const { return (word >> 8) >= threshold; }
};

/// The scale of kept elements: float(1 / (1 - p)).
CLEAVE_PHILOX_HD float dropoutScale(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

} // namespace cleave::runtime::philox
