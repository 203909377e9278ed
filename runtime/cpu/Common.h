//===- Common.h - Shared helpers of the CPU kernels -----------------------===//
//
// Load-time validation (every builder checks its instruction completely and
// names the problem), dtype dispatch, broadcasting layouts and the OpenMP
// loop helpers that every kernel family uses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/KernelContract.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

/// Hot float loops are compiled for AVX-512 (256-bit vectors), AVX2+FMA and
/// the x86-64-v2 baseline; the dynamic linker picks one at load, so the
/// binary still runs on CPUs without AVX2.
#define CLEAVE_CLONES                                                          \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

namespace cleave::runtime::cpu {

//===----------------------------------------------------------------------===//
// Element types.
//===----------------------------------------------------------------------===//

/// i1 is one byte per element, 0 or 1.
using Bool = uint8_t;

template <DType D> struct DTypeTraits;
template <> struct DTypeTraits<DType::F32> { using type = float; };
template <> struct DTypeTraits<DType::I64> { using type = int64_t; };
template <> struct DTypeTraits<DType::I32> { using type = int32_t; };
template <> struct DTypeTraits<DType::I1> { using type = Bool; };

//===----------------------------------------------------------------------===//
// Validation (runtime/KernelContract.h). Every message starts with the kernel
// name; the CPU's dtype check names this backend when a bf16/f16 operand has
// no kernel.
//===----------------------------------------------------------------------===//

using runtime::broadcastShapes;
using runtime::BroadcastLayout;
using runtime::checkArity;
using runtime::checkDim;
using runtime::checkOutput;
using runtime::checkPair;
using runtime::checkSameDType;
using runtime::contiguousStrides;
using runtime::formatList;
using runtime::kMaxOperands;
using runtime::makeBroadcastLayout;
using runtime::requirePresent;
using runtime::withKernel;

/// "cpu backend has no bf16 kernel for 'add' yet".
inline Status noKernelFor(const std::string &kernel, DType dtype) {
  return runtime::noKernelFor("cpu", kernel, dtype);
}

inline Status checkDType(const KernelSignature &sig, const char *name, const TensorDesc &desc,
                         std::initializer_list<DType> allowed) {
  return runtime::checkDType(sig, "cpu", name, desc, allowed);
}

//===----------------------------------------------------------------------===//
// Parallel loops. GEMMs are never called from inside these: the GEMM library
// threads itself (and would run single-threaded nested in a region).
//===----------------------------------------------------------------------===//

/// Below this many elements of work a loop runs on one thread.
constexpr int64_t kParallelGrain = 32768;

/// Runs fn(begin, end) over contiguous chunks of [0, n), one per thread when
/// n * costPerItem is large enough to pay for the threads, else fn(0, n).
template <typename Fn>
void parallelRange(int64_t n, int64_t costPerItem, const Fn &fn) {
  if (n <= 0)
    return;
  int64_t work = n * std::max<int64_t>(costPerItem, 1);
  int threads = 1;
  if (work >= kParallelGrain && n > 1 && !omp_in_parallel())
    threads = static_cast<int>(std::min<int64_t>(
        {static_cast<int64_t>(omp_get_max_threads()), n, work / (kParallelGrain / 2)}));
  if (threads <= 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (begin < end)
      fn(begin, end);
  }
}

//===----------------------------------------------------------------------===//
// Broadcasting. Operands are dense row-major; a broadcast operand has stride
// 0 along its stretched dims. Dims are coalesced so that common cases become
// one or two dims.
//===----------------------------------------------------------------------===//

/// Calls fn(offsets, outOffset, length) for spans of the output: `length`
/// consecutive output elements starting at `outOffset`, whose operand k
/// starts at offsets[k] and advances by layout.innerStride(k). Spans are
/// split across threads when the output is large.
template <typename Fn>
void forEachSpan(const BroadcastLayout &layout, const Fn &fn) {
  const int64_t inner = layout.innerSize();
  int64_t total = inner;
  for (size_t d = 0; d + 1 < layout.dims.size(); ++d)
    total *= layout.dims[d];
  if (total == 0)
    return;
  const int outerRank = static_cast<int>(layout.dims.size()) - 1;
  const int n = layout.operands;
  parallelRange(total, 1, [&](int64_t begin, int64_t end) {
    int64_t row = begin / inner, col = begin % inner;
    // Odometer over the outer dims, with the operand offsets of the row.
    std::vector<int64_t> index(std::max(outerRank, 1), 0);
    std::array<int64_t, kMaxOperands> offsets{};
    int64_t rest = row;
    for (int d = outerRank - 1; d >= 0; --d) {
      index[d] = rest % layout.dims[d];
      rest /= layout.dims[d];
      for (int k = 0; k < n; ++k)
        offsets[k] += index[d] * layout.strides[d][k];
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t len = std::min(inner - col, end - pos);
      std::array<int64_t, kMaxOperands> start;
      for (int k = 0; k < n; ++k)
        start[k] = offsets[k] + col * layout.strides[outerRank][k];
      fn(start, pos, len);
      pos += len;
      col = 0;
      // Next row.
      for (int d = outerRank - 1; d >= 0; --d) {
        for (int k = 0; k < n; ++k)
          offsets[k] += layout.strides[d][k];
        if (++index[d] < layout.dims[d])
          break;
        for (int k = 0; k < n; ++k)
          offsets[k] -= index[d] * layout.strides[d][k];
        index[d] = 0;
      }
    }
  });
}

} // namespace cleave::runtime::cpu
