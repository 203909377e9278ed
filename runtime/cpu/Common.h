//===- Common.h - Shared helpers of the CPU kernels -----------------------===//
//
// Load-time validation (every builder checks its instruction completely and
// names the problem), dtype dispatch, broadcasting layouts and the OpenMP
// loop helpers that every kernel family uses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"

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
// Validation. Every message starts with the kernel name.
//===----------------------------------------------------------------------===//

/// "cpu backend has no bf16 kernel for 'add' yet".
Status noKernelFor(const std::string &kernel, DType dtype);

/// Checks the number of input slots (between minInputs and maxInputs) and
/// that there is exactly `outputs` outputs.
Status checkArity(const KernelSignature &sig, size_t minInputs, size_t maxInputs,
                  size_t outputs = 1);

/// Checks that input slot `index` (called `name` in messages) is present.
Status requirePresent(const KernelSignature &sig, size_t index, const char *name);

/// Checks that `desc` (operand `name`) has one of `allowed`. A bf16/f16
/// operand of a kernel that has an f32 version is reported as "no bf16
/// kernel yet" rather than as a wrong dtype.
Status checkDType(const KernelSignature &sig, const char *name, const TensorDesc &desc,
                  std::initializer_list<DType> allowed);

/// Checks that both operands have the same dtype.
Status checkSameDType(const KernelSignature &sig, const char *nameA, const TensorDesc &a,
                      const char *nameB, const TensorDesc &b);

/// Checks that the output is `expected`; `how` says where the expected shape
/// came from ("the broadcast of 2x1xf32 and 3xf32").
Status checkOutput(const KernelSignature &sig, const TensorDesc &expected,
                   const std::string &how = "");

/// Prefixes an attribute error with the kernel name.
Status withKernel(const KernelSignature &sig, Status status);

/// Checks that a dim attribute lies in [0, rank).
Status checkDim(const KernelSignature &sig, const char *attr, int64_t dim, int64_t rank);

/// Checks that a spatial attribute has two entries, each >= min.
Status checkPair(const KernelSignature &sig, const char *attr,
                 const std::vector<int64_t> &pair, int64_t min);

/// "[0, 2, 1]".
std::string formatList(const std::vector<int64_t> &values);

/// numpy broadcast of shapes, or nullopt if they do not broadcast.
std::optional<Shape> broadcastShapes(const std::vector<Shape> &shapes);

/// Row-major strides in elements.
std::vector<int64_t> contiguousStrides(const Shape &shape);

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

constexpr int kMaxOperands = 3;

struct BroadcastLayout {
  int operands = 0;
  /// Coalesced output dims, outermost first; at least one (possibly 1).
  std::vector<int64_t> dims;
  /// strides[d][k]: the stride of operand k along dim d, in elements.
  std::vector<std::array<int64_t, kMaxOperands>> strides;

  int64_t innerSize() const { return dims.back(); }
  int64_t innerStride(int k) const { return strides.back()[k]; }
};

/// The layout of `inputs` broadcast to `output` (which must be their
/// broadcast shape, or a shape they broadcast to).
BroadcastLayout makeBroadcastLayout(const Shape &output, const std::vector<Shape> &inputs);

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
