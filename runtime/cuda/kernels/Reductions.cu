//===- Reductions.cu - reductions, index reductions and scans -------------===//
//
// As the CPU (runtime/cpu/Reductions.cpp): the input dims are coalesced into
// alternating kept / reduced groups. [kept, reduced] reduces rows (a warp
// per row, or a block per long row), [kept?, reduced, kept] reduces columns
// (a thread per output, reads coalesced across threads), anything else walks
// the reduced elements of each output. Floats accumulate in fp32, integers
// in int64; the maximum propagates NaN. An empty `dims` reduces nothing.
//
// Few long outputs would leave most of the GPU idle (a bias gradient sums
// 8192 rows into 768 columns: 768 threads): there the reduced dim is split
// into chunks, reduced apart into the workspace, then the chunks in order.
// The chunks depend on the shape only, so results repeat run to run.
//
// reduce_max_index / reduce_min_index and the scans (cumsum, cumprod) view
// the input as [outer, size, inner] and give a thread to each (outer, inner)
// column, reads coalesced across threads; scans of floats accumulate in
// double, as the CPU's.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <string>

namespace cleave::runtime::cuda {
namespace {

enum class Reduce { Sum, Mean, Max, Prod };

template <Reduce K, typename T> struct Reducer {
  using Acc = std::conditional_t<kIsFloat<T>, float, int64_t>;

  __device__ __forceinline__ static Acc identity() {
    if constexpr (K == Reduce::Prod)
      return Acc(1);
    else if constexpr (K != Reduce::Max)
      return Acc(0);
    else if constexpr (kIsFloat<T>)
      return -std::numeric_limits<float>::infinity();
    else
      return static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  __device__ __forceinline__ static Acc combine(Acc a, Acc b) {
    if constexpr (K == Reduce::Prod)
      return a * b;
    else if constexpr (K != Reduce::Max)
      return a + b;
    else if constexpr (kIsFloat<T>)
      return (a > b || a != a) ? a : b; // NaN propagates
    else
      return a > b ? a : b;
  }
  __device__ __forceinline__ static T finish(Acc acc, int64_t count) {
    if constexpr (K == Reduce::Mean)
      return store<T>(acc / static_cast<float>(count));
    else
      return store<T>(acc);
  }
};

template <Reduce K, typename T> struct Combine {
  __device__ __forceinline__ auto operator()(typename Reducer<K, T>::Acc a,
                                             typename Reducer<K, T>::Acc b) const {
    return Reducer<K, T>::combine(a, b);
  }
};

constexpr int64_t kWarpRowLimit = 1024;
constexpr int kWarpsPerBlock = 8;
constexpr int kRowBlockThreads = 512;

/// y[o] = reduce of x[o * r, (o + 1) * r): a warp per row.
template <Reduce K, typename T>
__global__ void rowsWarpKernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows,
                               int64_t r) {
  using R = Reducer<K, T>;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; o < rows;
       o += warps) {
    typename R::Acc acc = R::identity();
    for (int64_t i = threadIdx.x % 32; i < r; i += 32)
      acc = R::combine(acc, load(x[o * r + i]));
    acc = warpReduce(acc, Combine<K, T>{});
    if (threadIdx.x % 32 == 0)
      y[o] = R::finish(acc, r);
  }
}

/// The same, a block per row.
template <Reduce K, typename T>
__global__ void rowsBlockKernel(const T *__restrict__ x, T *__restrict__ y, int64_t rows,
                                int64_t r) {
  using R = Reducer<K, T>;
  __shared__ typename R::Acc shared[32];
  for (int64_t o = blockIdx.x; o < rows; o += gridDim.x) {
    typename R::Acc acc = R::identity();
    for (int64_t i = threadIdx.x; i < r; i += blockDim.x)
      acc = R::combine(acc, load(x[o * r + i]));
    acc = blockReduce(acc, Combine<K, T>{}, shared);
    if (threadIdx.x == 0)
      y[o] = R::finish(acc, r);
  }
}

/// y[o, j] = reduce over i < r of x[(o * r + i) * inner + j]: a thread per
/// output.
template <Reduce K, typename T>
__global__ void columnsKernel(const T *__restrict__ x, T *__restrict__ y, int64_t outputs,
                              int64_t r, int64_t inner) {
  using R = Reducer<K, T>;
  for (int64_t t = globalThread(); t < outputs; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const T *src = x + o * r * inner + j;
    typename R::Acc acc = R::identity();
    for (int64_t i = 0; i < r; ++i)
      acc = R::combine(acc, load(src[i * inner]));
    y[t] = R::finish(acc, r);
  }
}

/// Split reductions: about this many threads (or row blocks) in the first
/// pass, and at least this many elements per chunk.
constexpr int64_t kSplitThreads = int64_t(1) << 18;
constexpr int64_t kMinColumnChunk = 32;
constexpr int64_t kRowChunk = 16384;
constexpr int64_t kMaxChunks = 4096;

/// partial[chunk][t] = reduce over rows [chunk * per, (chunk + 1) * per) of
/// column t of [o, r, inner] (blockIdx.y is the chunk).
template <Reduce K, typename T>
__global__ void columnChunksKernel(const T *__restrict__ x,
                                   typename Reducer<K, T>::Acc *__restrict__ partial,
                                   int64_t outputs, int64_t r, int64_t inner, int64_t per) {
  using R = Reducer<K, T>;
  const int64_t chunk = blockIdx.y;
  const int64_t i0 = chunk * per, i1 = i0 + per < r ? i0 + per : r;
  for (int64_t t = globalThread(); t < outputs; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const T *src = x + o * r * inner + j;
    typename R::Acc acc = R::identity();
    for (int64_t i = i0; i < i1; ++i)
      acc = R::combine(acc, load(src[i * inner]));
    partial[chunk * outputs + t] = acc;
  }
}

/// y[t] = the chunks of output t combined in order (a thread per output).
template <Reduce K, typename T>
__global__ void combineColumnChunksKernel(const typename Reducer<K, T>::Acc *__restrict__ partial,
                                          T *__restrict__ y, int64_t outputs, int64_t chunks,
                                          int64_t count) {
  using R = Reducer<K, T>;
  for (int64_t t = globalThread(); t < outputs; t += globalThreads()) {
    typename R::Acc acc = R::identity();
    for (int64_t k = 0; k < chunks; ++k)
      acc = R::combine(acc, partial[k * outputs + t]);
    y[t] = R::finish(acc, count);
  }
}

/// partial[row * chunks + chunk] = reduce of the row's chunk (a block each:
/// blockIdx.x the chunk, blockIdx.y the row).
template <Reduce K, typename T>
__global__ void rowChunksKernel(const T *__restrict__ x,
                                typename Reducer<K, T>::Acc *__restrict__ partial, int64_t r,
                                int64_t per) {
  using R = Reducer<K, T>;
  __shared__ typename R::Acc shared[32];
  const int64_t row = blockIdx.y, chunk = blockIdx.x;
  const int64_t i0 = chunk * per, i1 = i0 + per < r ? i0 + per : r;
  typename R::Acc acc = R::identity();
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
    acc = R::combine(acc, load(x[row * r + i]));
  acc = blockReduce(acc, Combine<K, T>{}, shared);
  if (threadIdx.x == 0)
    partial[row * gridDim.x + chunk] = acc;
}

/// y[row] = the row's chunks combined (a warp per row, in a fixed order).
template <Reduce K, typename T>
__global__ void combineRowChunksKernel(const typename Reducer<K, T>::Acc *__restrict__ partial,
                                       T *__restrict__ y, int64_t rows, int64_t chunks,
                                       int64_t count) {
  using R = Reducer<K, T>;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; o < rows;
       o += warps) {
    typename R::Acc acc = R::identity();
    for (int64_t k = threadIdx.x % 32; k < chunks; k += 32)
      acc = R::combine(acc, partial[o * chunks + k]);
    acc = warpReduce(acc, Combine<K, T>{});
    if (threadIdx.x % 32 == 0)
      y[o] = R::finish(acc, count);
  }
}

struct GeneralLayout {
  int kept = 0, reduced = 0;
  int64_t keptSizes[kMaxLayoutRank], keptStrides[kMaxLayoutRank];
  int64_t redSizes[kMaxLayoutRank], redStrides[kMaxLayoutRank];
};

/// Any pattern: the kept dims index the output, the reduced dims are walked
/// with an odometer.
template <Reduce K, typename T>
__global__ void generalKernel(const T *__restrict__ x, T *__restrict__ y, GeneralLayout g,
                              int64_t outputs, int64_t reducedCount) {
  using R = Reducer<K, T>;
  for (int64_t o = globalThread(); o < outputs; o += globalThreads()) {
    int64_t base = 0, rest = o;
    for (int d = g.kept - 1; d >= 0; --d) {
      base += (rest % g.keptSizes[d]) * g.keptStrides[d];
      rest /= g.keptSizes[d];
    }
    int64_t index[kMaxLayoutRank] = {};
    typename R::Acc acc = R::identity();
    int64_t off = base;
    for (int64_t i = 0; i < reducedCount; ++i) {
      acc = R::combine(acc, load(x[off]));
      for (int d = g.reduced - 1; d >= 0; --d) {
        off += g.redStrides[d];
        if (++index[d] < g.redSizes[d])
          break;
        off -= index[d] * g.redStrides[d];
        index[d] = 0;
      }
    }
    y[o] = R::finish(acc, reducedCount);
  }
}

template <typename T> __global__ void fillKernel(T *__restrict__ y, int64_t n, float value) {
  for (int64_t i = globalThread(); i < n; i += globalThreads())
    y[i] = store<T>(value);
}

template <Reduce K, typename T>
Status makeReduction(const KernelSignature &sig, DeviceContext &ctx,
                     const std::vector<ReduceGroup> &groups, int64_t outCount, int64_t reducedCount,
                     const Shape &inShape, const std::vector<bool> &reducedDims, KernelFn *fn) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  using Acc = typename Reducer<K, T>::Acc;
  // [kept?, reduced]: rows.
  if (groups.size() <= 2 && !groups.empty() && groups.back().reduced) {
    const int64_t r = groups.back().size;
    const int64_t rows = groups.size() == 2 ? groups[0].size : 1;
    // A few long rows: chunks of kRowChunk, a block each.
    const int64_t rowChunks = std::min(kMaxChunks, (r + kRowChunk - 1) / kRowChunk);
    if (rowChunks > 1 && rows > 0 && rows * rowChunks <= kSplitThreads / 64 && rows <= 65535) {
      const int64_t per = (r + rowChunks - 1) / rowChunks;
      const int64_t chunks = (r + per - 1) / per;
      void *unused = nullptr;
      CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(sizeof(Acc) * rows * chunks, &unused));
      *fn = [=](const KernelCall &call) -> Status {
        Acc *partial = static_cast<Acc *>(c->workspace);
        rowChunksKernel<K, T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)),
                                kRowBlockThreads, 0, c->stream>>>(
            static_cast<const T *>(call.inputs[0]), partial, r, per);
        CLEAVE_RETURN_IF_ERROR(launchStatus(name));
        combineRowChunksKernel<K, T><<<gridForItems((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                                       32 * kWarpsPerBlock, 0, c->stream>>>(
            partial, static_cast<T *>(call.outputs[0]), rows, chunks, r);
        return launchStatus(name);
      };
      return {};
    }
    *fn = [=](const KernelCall &call) -> Status {
      const T *x = static_cast<const T *>(call.inputs[0]);
      T *y = static_cast<T *>(call.outputs[0]);
      if (r > kWarpRowLimit)
        rowsBlockKernel<K, T>
            <<<gridForItems(rows), kRowBlockThreads, 0, c->stream>>>(x, y, rows, r);
      else
        rowsWarpKernel<K, T><<<gridForItems((rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                               32 * kWarpsPerBlock, 0, c->stream>>>(x, y, rows, r);
      return launchStatus(name);
    };
    return {};
  }
  // [kept?, reduced, kept]: columns.
  if ((groups.size() == 2 && groups[0].reduced) || (groups.size() == 3 && groups[1].reduced)) {
    const int64_t r = groups[groups.size() - 2].size, inner = groups.back().size;
    // Few outputs: chunks of the reduced dim, of at least kMinColumnChunk.
    const int64_t columnChunks = std::min(
        {kMaxChunks, r / kMinColumnChunk, kSplitThreads / std::max<int64_t>(outCount, 1)});
    if (columnChunks > 1 && outCount > 0) {
      const int64_t per = (r + columnChunks - 1) / columnChunks;
      const int64_t chunks = (r + per - 1) / per;
      void *unused = nullptr;
      CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(sizeof(Acc) * outCount * chunks, &unused));
      *fn = [=](const KernelCall &call) -> Status {
        Acc *partial = static_cast<Acc *>(c->workspace);
        const dim3 grid(static_cast<unsigned>((outCount + kThreads - 1) / kThreads),
                        static_cast<unsigned>(chunks));
        columnChunksKernel<K, T><<<grid, kThreads, 0, c->stream>>>(
            static_cast<const T *>(call.inputs[0]), partial, outCount, r, inner, per);
        CLEAVE_RETURN_IF_ERROR(launchStatus(name));
        combineColumnChunksKernel<K, T><<<gridFor(*c, outCount), kThreads, 0, c->stream>>>(
            partial, static_cast<T *>(call.outputs[0]), outCount, chunks, r);
        return launchStatus(name);
      };
      return {};
    }
    *fn = [=](const KernelCall &call) -> Status {
      columnsKernel<K, T><<<gridFor(*c, outCount), kThreads, 0, c->stream>>>(
          static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), outCount, r,
          inner);
      return launchStatus(name);
    };
    return {};
  }
  // Nothing reduced (only size-1 dims, or no dims): a copy.
  bool anyReduced = false;
  for (const ReduceGroup &g : groups)
    anyReduced |= g.reduced;
  if (!anyReduced) {
    const size_t bytes = sizeof(T) * outCount;
    *fn = [c, bytes](const KernelCall &call) -> Status {
      return cudaStatus(cudaMemcpyAsync(call.outputs[0], call.inputs[0], bytes,
                                        cudaMemcpyDeviceToDevice, c->stream),
                        "cudaMemcpyAsync");
    };
    return {};
  }
  GeneralLayout g;
  std::vector<int64_t> strides = contiguousStrides(inShape);
  for (size_t d = 0; d < inShape.size(); ++d) {
    if (inShape[d] == 1)
      continue;
    if (reducedDims[d]) {
      if (g.reduced == kMaxLayoutRank)
        return CLEAVE_ERROR(sig.kernel, ": the cuda backend reduces at most ", kMaxLayoutRank,
                            " separate dims");
      g.redSizes[g.reduced] = inShape[d];
      g.redStrides[g.reduced++] = strides[d];
    } else {
      if (g.kept == kMaxLayoutRank)
        return CLEAVE_ERROR(sig.kernel, ": the cuda backend keeps at most ", kMaxLayoutRank,
                            " separate dims");
      g.keptSizes[g.kept] = inShape[d];
      g.keptStrides[g.kept++] = strides[d];
    }
  }
  *fn = [=](const KernelCall &call) -> Status {
    generalKernel<K, T><<<gridFor(*c, outCount), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), g, outCount,
        reducedCount);
    return launchStatus(name);
  };
  return {};
}

template <Reduce K>
Status buildReduction(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ReduceParams r;
  CLEAVE_RETURN_IF_ERROR(parseReduction(
      sig, "cuda",
      K == Reduce::Mean
          ? std::initializer_list<DType>{DType::F32, DType::BF16}
          : std::initializer_list<DType>{DType::F32, DType::BF16, DType::I64, DType::I32},
      K == Reduce::Max, &r));
  const TensorDesc &x = *sig.inputs[0];
  const int64_t outCount = r.outCount, reducedCount = r.reducedCount;
  const std::vector<ReduceGroup> &groups = r.groups;
  const std::vector<bool> &reduced = r.reduced;
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  if (outCount == 0 || x.numel() == 0) {
    // Nothing to read: sums are 0, means 0/0, products 1.
    const DType dtype = x.dtype;
    *fn = [c, name, outCount, dtype](const KernelCall &call) -> Status {
      if (outCount == 0)
        return {};
      if (K == Reduce::Prod) {
        void *y = call.outputs[0];
        const unsigned grid = gridFor(*c, outCount);
        if (dtype == DType::F32)
          fillKernel<float><<<grid, kThreads, 0, c->stream>>>(static_cast<float *>(y), outCount, 1);
        else if (dtype == DType::BF16)
          fillKernel<bf16><<<grid, kThreads, 0, c->stream>>>(static_cast<bf16 *>(y), outCount, 1);
        else if (dtype == DType::I64)
          fillKernel<int64_t>
              <<<grid, kThreads, 0, c->stream>>>(static_cast<int64_t *>(y), outCount, 1);
        else
          fillKernel<int32_t>
              <<<grid, kThreads, 0, c->stream>>>(static_cast<int32_t *>(y), outCount, 1);
        return launchStatus(name);
      }
      if (K == Reduce::Mean) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        if (dtype == DType::F32)
          fillKernel<float><<<gridFor(*c, outCount), kThreads, 0, c->stream>>>(
              static_cast<float *>(call.outputs[0]), outCount, nan);
        else
          fillKernel<bf16><<<gridFor(*c, outCount), kThreads, 0, c->stream>>>(
              static_cast<bf16 *>(call.outputs[0]), outCount, nan);
        return launchStatus(name);
      }
      return cudaStatus(
          cudaMemsetAsync(call.outputs[0], 0, outCount * dtypeBytes(dtype), c->stream),
          "cudaMemsetAsync");
    };
    return {};
  }
  switch (x.dtype) {
  case DType::F32:
    return makeReduction<K, float>(sig, ctx, groups, outCount, reducedCount, x.shape, reduced, fn);
  case DType::BF16:
    return makeReduction<K, bf16>(sig, ctx, groups, outCount, reducedCount, x.shape, reduced, fn);
  case DType::I64:
    if constexpr (K != Reduce::Mean)
      return makeReduction<K, int64_t>(sig, ctx, groups, outCount, reducedCount, x.shape, reduced,
                                       fn);
    break;
  case DType::I32:
    if constexpr (K != Reduce::Mean)
      return makeReduction<K, int32_t>(sig, ctx, groups, outCount, reducedCount, x.shape, reduced,
                                       fn);
    break;
  default:
    break;
  }
  return noKernelFor("cuda", sig.kernel, x.dtype);
}

//===----------------------------------------------------------------------===//
// Index reductions.
//===----------------------------------------------------------------------===//

/// Whether `v` replaces `best`: strictly beyond it (ties keep the first
/// index); a NaN replaces any number, never another NaN.
template <bool Max, typename C> __device__ __forceinline__ bool replaces(C v, C best) {
  if constexpr (std::is_floating_point_v<C>) {
    if (v != v)
      return best == best;
  }
  return Max ? v > best : v < best;
}

template <bool Max, typename T>
__global__ void indexReductionKernel(const T *__restrict__ x, T *__restrict__ values,
                                     int64_t *__restrict__ indices, int64_t outputs, int64_t size,
                                     int64_t inner) {
  for (int64_t t = globalThread(); t < outputs; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const T *src = x + o * size * inner + j;
    auto best = load(src[0]);
    int64_t at = 0;
    for (int64_t i = 1; i < size; ++i) {
      auto v = load(src[i * inner]);
      if (replaces<Max>(v, best)) {
        best = v;
        at = i;
      }
    }
    values[t] = store<T>(best);
    indices[t] = at;
  }
}

template <bool Max>
Status buildIndexReduction(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  IndexReduceParams p;
  CLEAVE_RETURN_IF_ERROR(parseIndexReduction(
      sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}, &p));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t outputs = p.outer * p.inner, size = p.size, inner = p.inner;
  auto make = [&](auto zero) {
    using T = decltype(zero);
    *fn = [=](const KernelCall &call) -> Status {
      if (outputs == 0)
        return {};
      indexReductionKernel<Max, T><<<gridFor(*c, outputs), kThreads, 0, c->stream>>>(
          static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]),
          static_cast<int64_t *>(call.outputs[1]), outputs, size, inner);
      return launchStatus(name);
    };
    return Status();
  };
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    return make(float{});
  case DType::BF16:
    return make(bf16{});
  case DType::I64:
    return make(int64_t{});
  case DType::I32:
    return make(int32_t{});
  case DType::I1:
    return make(Bool{});
  default:
    return noKernelFor("cuda", sig.kernel, sig.inputs[0]->dtype);
  }
}

//===----------------------------------------------------------------------===//
// Scans.
//===----------------------------------------------------------------------===//

enum class Scan { Sum, Prod };

template <Scan K, typename T>
__global__ void scanKernel(const T *__restrict__ x, T *__restrict__ y, int64_t columns,
                           int64_t size, int64_t inner, bool reverse) {
  using Acc = std::conditional_t<kIsFloat<T>, double, int64_t>;
  for (int64_t t = globalThread(); t < columns; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const int64_t base = o * size * inner + j;
    Acc acc = K == Scan::Sum ? Acc(0) : Acc(1);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t at = base + (reverse ? size - 1 - i : i) * inner;
      const Acc v = static_cast<Acc>(load(x[at]));
      acc = K == Scan::Sum ? acc + v : acc * v;
      y[at] = store<T>(acc);
    }
  }
}

template <Scan K> Status buildScan(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(
      parseScan(sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32}, &p));
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t columns = p.outer * p.inner, size = p.size, inner = p.inner;
  const bool reverse = p.reverse;
  auto make = [&](auto zero) {
    using T = decltype(zero);
    *fn = [=](const KernelCall &call) -> Status {
      if (columns == 0 || size == 0)
        return {};
      scanKernel<K, T><<<gridFor(*c, columns), kThreads, 0, c->stream>>>(
          static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), columns,
          size, inner, reverse);
      return launchStatus(name);
    };
    return Status();
  };
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    return make(float{});
  case DType::BF16:
    return make(bf16{});
  case DType::I64:
    return make(int64_t{});
  case DType::I32:
    return make(int32_t{});
  default:
    return noKernelFor("cuda", sig.kernel, sig.inputs[0]->dtype);
  }
}

//===----------------------------------------------------------------------===//
// Sorting and scans with indices.
//===----------------------------------------------------------------------===//

template <typename C> __device__ __forceinline__ bool isNanValue(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return v != v;
  else
    return false;
}

/// PyTorch's sort order: NaN after every number (before it descending).
template <typename C> __device__ __forceinline__ bool sortsBefore(C a, C b, bool descending) {
  if (descending)
    return (isNanValue(a) && !isNanValue(b)) || a > b;
  return (!isNanValue(a) && isNanValue(b)) || a < b;
}

/// A thread per (outer, inner) slice, an insertion sort in the outputs: a
/// strict comparison keeps equal elements in order (stable, as the CPU's
/// std::stable_sort). Quadratic in the slice length: the slices models sort
/// (top-k of logits rows, medians) are short; a long one wants a segmented
/// radix sort (CUB), left for when a GPU can test it.
template <typename T>
__global__ void sortKernel(const T *__restrict__ x, T *__restrict__ values,
                           int64_t *__restrict__ indices, int64_t columns, int64_t size,
                           int64_t inner, bool descending) {
  for (int64_t t = globalThread(); t < columns; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const int64_t base = o * size * inner + j;
    for (int64_t i = 0; i < size; ++i) {
      const T raw = x[base + i * inner];
      const auto v = load(raw);
      int64_t k = i;
      while (k > 0 && sortsBefore(v, load(values[base + (k - 1) * inner]), descending)) {
        values[base + k * inner] = values[base + (k - 1) * inner];
        indices[base + k * inner] = indices[base + (k - 1) * inner];
        --k;
      }
      values[base + k * inner] = raw;
      indices[base + k * inner] = i;
    }
  }
}

/// Running maximum (minimum) and its index: >= (<=) replaces, so ties take
/// the later index; a NaN replaces anything (the CPU's rule).
template <bool Max, typename T>
__global__ void indexScanKernel(const T *__restrict__ x, T *__restrict__ values,
                                int64_t *__restrict__ indices, int64_t columns, int64_t size,
                                int64_t inner) {
  for (int64_t t = globalThread(); t < columns; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const int64_t base = o * size * inner + j;
    T best = x[base];
    int64_t at = 0;
    for (int64_t i = 0; i < size; ++i) {
      const T raw = x[base + i * inner];
      const auto v = load(raw), m = load(best);
      if (i == 0 || isNanValue(v) || (Max ? v >= m : v <= m)) {
        best = raw;
        at = i;
      }
      values[base + i * inner] = best;
      indices[base + i * inner] = at;
    }
  }
}

/// A running log-sum-exp in double, one element at a time (the CPU's rule).
template <typename T>
__global__ void logcumsumexpKernel(const T *__restrict__ x, T *__restrict__ y, int64_t columns,
                                   int64_t size, int64_t inner, bool reverse) {
  for (int64_t t = globalThread(); t < columns; t += globalThreads()) {
    const int64_t o = t / inner, j = t - o * inner;
    const int64_t base = o * size * inner + j;
    double acc = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < size; ++i) {
      const int64_t at = base + (reverse ? size - 1 - i : i) * inner;
      const double v = static_cast<double>(load(x[at]));
      if (v != v || acc != acc) {
        acc = std::numeric_limits<double>::quiet_NaN();
      } else {
        const double lo = fmin(acc, v), hi = fmax(acc, v);
        if (!(lo == -std::numeric_limits<double>::infinity() || (lo == hi && isinf(lo))))
          acc = hi + log1p(exp(lo - hi));
        else
          acc = hi;
      }
      y[at] = store<T>(static_cast<float>(acc));
    }
  }
}

/// Builds a kernel over [outer, size, inner] slices for the dtypes the
/// launcher `launch(T{}, columns)` takes.
template <typename Launch>
Status buildSliceKernel(const KernelSignature &sig, DeviceContext &ctx, const ScanParams &p,
                        bool withBool, KernelFn *fn, Launch launch) {
  DeviceContext *c = &ctx;
  std::string name = sig.kernel;
  const int64_t columns = p.outer * p.inner, size = p.size;
  auto make = [&](auto zero) {
    using T = decltype(zero);
    *fn = [=](const KernelCall &call) -> Status {
      if (columns == 0 || size == 0)
        return {};
      launch(T{}, call, gridFor(*c, columns), c->stream);
      return launchStatus(name);
    };
    return Status();
  };
  switch (sig.inputs[0]->dtype) {
  case DType::F32:
    return make(float{});
  case DType::BF16:
    return make(bf16{});
  case DType::I64:
    return make(int64_t{});
  case DType::I32:
    return make(int32_t{});
  case DType::I1:
    if (withBool)
      return make(Bool{});
    break;
  default:
    break;
  }
  return noKernelFor("cuda", sig.kernel, sig.inputs[0]->dtype);
}

Status buildSort(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseValuesAndIndicesScan(
      sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}, &p));
  const int64_t columns = p.outer * p.inner, size = p.size, inner = p.inner;
  const bool descending = p.reverse;
  return buildSliceKernel(sig, ctx, p, true, fn,
                          [=](auto zero, const KernelCall &call, auto grid, auto stream) {
                            using T = decltype(zero);
                            sortKernel<T><<<grid, kThreads, 0, stream>>>(
                                static_cast<const T *>(call.inputs[0]),
                                static_cast<T *>(call.outputs[0]),
                                static_cast<int64_t *>(call.outputs[1]), columns, size, inner,
                                descending);
                          });
}

template <bool Max>
Status buildIndexScan(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseValuesAndIndicesScan(
      sig, "cuda", {DType::F32, DType::BF16, DType::I64, DType::I32, DType::I1}, &p));
  const int64_t columns = p.outer * p.inner, size = p.size, inner = p.inner;
  return buildSliceKernel(sig, ctx, p, true, fn,
                          [=](auto zero, const KernelCall &call, auto grid, auto stream) {
                            using T = decltype(zero);
                            indexScanKernel<Max, T><<<grid, kThreads, 0, stream>>>(
                                static_cast<const T *>(call.inputs[0]),
                                static_cast<T *>(call.outputs[0]),
                                static_cast<int64_t *>(call.outputs[1]), columns, size, inner);
                          });
}

Status buildLogcumsumexp(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ScanParams p;
  CLEAVE_RETURN_IF_ERROR(parseScan(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const int64_t columns = p.outer * p.inner, size = p.size, inner = p.inner;
  const bool reverse = p.reverse;
  return buildSliceKernel(sig, ctx, p, false, fn,
                          [=](auto zero, const KernelCall &call, auto grid, auto stream) {
                            using T = decltype(zero);
                            if constexpr (kIsFloat<T>)
                              logcumsumexpKernel<T><<<grid, kThreads, 0, stream>>>(
                                  static_cast<const T *>(call.inputs[0]),
                                  static_cast<T *>(call.outputs[0]), columns, size, inner,
                                  reverse);
                          });
}

} // namespace

void registerReductionKernels(KernelTable &table) {
  table["reduce_sum"] = buildReduction<Reduce::Sum>;
  table["reduce_mean"] = buildReduction<Reduce::Mean>;
  table["reduce_max"] = buildReduction<Reduce::Max>;
  table["reduce_prod"] = buildReduction<Reduce::Prod>;
  table["reduce_max_index"] = buildIndexReduction<true>;
  table["reduce_min_index"] = buildIndexReduction<false>;
  table["cumsum"] = buildScan<Scan::Sum>;
  table["cumprod"] = buildScan<Scan::Prod>;
  table["cummax"] = buildIndexScan<true>;
  table["cummin"] = buildIndexScan<false>;
  table["logcumsumexp"] = buildLogcumsumexp;
  table["sort"] = buildSort;
}

} // namespace cleave::runtime::cuda
