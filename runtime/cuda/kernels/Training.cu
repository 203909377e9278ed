//===- Training.cu - The training kernels of family A on the GPU ----------===//
//
// assign, dropout_train, batch_norm_train, update_running_stats,
// batch_norm_backward, nll_loss, nll_loss_backward, softmax_backward,
// log_softmax_backward, layer_norm_backward, gelu_backward, silu_backward,
// relu_backward, adamw and sgd: the CPU's contracts (runtime/TrainingParams.h). The
// activations' and normalizations' gradients (and dropout) take f32 or bf16
// (mixed precision plans compute their backward in bf16), computing in fp32;
// losses and optimizer updates are f32 (the masters).
//
// What lives in device memory stays there: the step counter, the clipping
// scale and a dropout part's first sample are read by the kernels, and the
// learning-rate schedule and bias corrections are evaluated on the device
// (once per block), so an optimizer phase issues its updates without a host
// round trip. Errors only the data can show (a target outside the classes,
// a step below 1) are device errors the backend reports at its next
// synchronize.
//
// Every sum runs in an order fixed by the shapes (per-channel and
// per-column sums in double, blocks combined in order), so results repeat
// run to run: no atomics.
//
//===----------------------------------------------------------------------===//

#include "runtime/Philox.h"
#include "runtime/TrainingParams.h"
#include "runtime/cuda/kernels/DeviceCommon.cuh"

#include <cmath>
#include <string>

namespace cleave::runtime::cuda {
namespace {

constexpr int kChannelThreads = 512;
constexpr int kRowThreads = 256;
/// layer_norm_backward's weight and bias gradients: at most this many
/// chunks of rows summed apart (in double), then in order.
constexpr int64_t kColumnChunks = 128;

//===----------------------------------------------------------------------===//
// assign
//===----------------------------------------------------------------------===//

Status buildAssign(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  size_t bytes = 0;
  CLEAVE_RETURN_IF_ERROR(parseAssign(sig, &bytes));
  DeviceContext *c = &ctx;
  *fn = [c, bytes](const KernelCall &call) -> Status {
    if (!bytes)
      return {};
    CLEAVE_CUDA_TRY(cudaMemcpyAsync(call.outputs[0], call.inputs[0], bytes,
                                    cudaMemcpyDeviceToDevice, c->stream));
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// dropout_train: Philox-4x32-10 (runtime/Philox.h), one thread per block of
// four words; element i of a part is element base + i of the whole batch.
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void dropoutKernel(const T *__restrict x, T *__restrict y, DropoutParams p,
                              const int64_t *step, const int64_t *sampleOffset,
                              DeviceError *error) {
  const int64_t offset = p.part ? *sampleOffset : 0;
  if (offset < 0) {
    if (globalThread() == 0)
      reportDeviceError(error, DeviceError::SampleOffsetNegative, offset, 0, 0);
    return;
  }
  const uint64_t base = static_cast<uint64_t>(offset) * static_cast<uint64_t>(p.perSample);
  const philox::DropoutMask mask(p.seed, p.stream, *step, p.p);
  const uint64_t firstBlock = base / 4;
  const int64_t blocks = static_cast<int64_t>((base % 4 + static_cast<uint64_t>(p.n) + 3) / 4);
  for (int64_t b = globalThread(); b < blocks; b += globalThreads()) {
    const uint64_t block = firstBlock + static_cast<uint64_t>(b);
    const philox::Uint4 w = mask.words(block);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t e = 4 * block + k;
      if (e < base)
        continue;
      const uint64_t i = e - base;
      if (i >= static_cast<uint64_t>(p.n))
        break;
      y[i] = store<T>(mask.keeps(words[k]) ? load(x[i]) * p.scale : 0.0f);
    }
  }
}

template <typename T>
KernelFn makeDropout(DeviceContext &ctx, const std::string &name, const DropoutParams &p) {
  DeviceContext *c = &ctx;
  return [c, p, name](const KernelCall &call) -> Status {
    if (!p.n)
      return {};
    dropoutKernel<T><<<gridFor(*c, p.n / 4 + 2), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<T *>(call.outputs[0]), p,
        static_cast<const int64_t *>(call.inputs[1]),
        p.part ? static_cast<const int64_t *>(call.inputs[2]) : nullptr, c->deviceError);
    return launchStatus(name);
  };
}

Status buildDropoutTrain(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  DropoutParams p;
  CLEAVE_RETURN_IF_ERROR(parseDropoutTrain(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = p.dtype == DType::BF16 ? makeDropout<bf16>(ctx, sig.kernel, p)
                               : makeDropout<float>(ctx, sig.kernel, p);
  return {};
}

//===----------------------------------------------------------------------===//
// batch_norm_train, update_running_stats, batch_norm_backward: one block per
// channel walks its N planes; sums in double, as the CPU.
//===----------------------------------------------------------------------===//

/// Element k of channel c's N·inner values.
__device__ __forceinline__ int64_t channelAt(const ChannelLayout &l, int64_t c, int64_t k) {
  const int64_t n = k / l.inner, j = k - n * l.inner;
  return (n * l.channels + c) * l.inner + j;
}

template <typename T>
__global__ void batchNormTrainKernel(const T *__restrict x, const T *__restrict w,
                                     const T *__restrict b, T *__restrict y,
                                     T *__restrict meanOut, T *__restrict varOut,
                                     ChannelLayout l, float eps) {
  __shared__ double shared[32];
  const int64_t count = l.count();
  for (int64_t c = blockIdx.x; c < l.channels; c += gridDim.x) {
    double s = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
      s += load(x[channelAt(l, c, k)]);
    const double mean = blockReduce(s, SumOp{}, shared) / static_cast<double>(count);
    double sq = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const double d = static_cast<double>(load(x[channelAt(l, c, k)])) - mean;
      sq += d * d;
    }
    const double var = blockReduce(sq, SumOp{}, shared) / static_cast<double>(count);
    const double a = (w ? static_cast<double>(load(w[c])) : 1.0) / sqrt(var + eps);
    const float scale = static_cast<float>(a);
    const float shift =
        static_cast<float>((b ? static_cast<double>(load(b[c])) : 0.0) - mean * a);
    if (threadIdx.x == 0) {
      meanOut[c] = store<T>(mean);
      varOut[c] = store<T>(var);
    }
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t at = channelAt(l, c, k);
      y[at] = store<T>(load(x[at]) * scale + shift);
    }
  }
}

template <typename T>
KernelFn makeBatchNormTrain(DeviceContext &ctx, const std::string &name,
                            const BatchNormTrainParams &p) {
  DeviceContext *c = &ctx;
  return [c, p, name](const KernelCall &call) -> Status {
    if (!p.layout.channels)
      return {};
    batchNormTrainKernel<T><<<gridForItems(p.layout.channels), kChannelThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<const T *>(call.inputs[2]), static_cast<T *>(call.outputs[0]),
        static_cast<T *>(call.outputs[1]), static_cast<T *>(call.outputs[2]), p.layout, p.eps);
    return launchStatus(name);
  };
}

Status buildBatchNormTrain(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BatchNormTrainParams p;
  CLEAVE_RETURN_IF_ERROR(parseBatchNormTrain(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = p.dtype == DType::BF16 ? makeBatchNormTrain<bf16>(ctx, sig.kernel, p)
                               : makeBatchNormTrain<float>(ctx, sig.kernel, p);
  return {};
}

__global__ void runningStatsKernel(const float *__restrict mean, const float *__restrict var,
                                   float *__restrict rm, float *__restrict rv,
                                   RunningStatsParams p) {
  for (int64_t c = globalThread(); c < p.channels; c += globalThreads()) {
    rm[c] = static_cast<float>(p.momentum * mean[c] + (1 - p.momentum) * rm[c]);
    rv[c] = static_cast<float>(p.momentum * var[c] * p.unbias + (1 - p.momentum) * rv[c]);
  }
}

Status buildUpdateRunningStats(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  RunningStatsParams p;
  CLEAVE_RETURN_IF_ERROR(parseUpdateRunningStats(sig, "cuda", &p));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [c, p, name](const KernelCall &call) -> Status {
    if (!p.channels)
      return {};
    runningStatsKernel<<<gridFor(*c, p.channels), kThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), static_cast<const float *>(call.inputs[1]),
        static_cast<float *>(call.outputs[0]), static_cast<float *>(call.outputs[1]), p);
    return launchStatus(name);
  };
  return {};
}

template <typename T>
__global__ void batchNormBackwardKernel(const T *__restrict g, const T *__restrict x,
                                        const T *__restrict mean, const T *__restrict var,
                                        const T *__restrict w, T *__restrict dx,
                                        T *__restrict dw, T *__restrict db, ChannelLayout l,
                                        float eps) {
  __shared__ double shared[32];
  const int64_t count = l.count();
  for (int64_t c = blockIdx.x; c < l.channels; c += gridDim.x) {
    const float m = load(mean[c]);
    const float rstd = static_cast<float>(1.0 / sqrt(static_cast<double>(load(var[c])) + eps));
    double sg = 0, sgx = 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t at = channelAt(l, c, k);
      const float xhat = (load(x[at]) - m) * rstd;
      const float gk = load(g[at]);
      sg += gk;
      sgx += static_cast<double>(gk) * xhat;
    }
    const double sumG = blockReduce(sg, SumOp{}, shared);
    const double sumGX = blockReduce(sgx, SumOp{}, shared);
    if (threadIdx.x == 0) {
      db[c] = store<T>(sumG);
      dw[c] = store<T>(sumGX);
    }
    const float k = (w ? load(w[c]) : 1.0f) * rstd;
    const float mdb = static_cast<float>(sumG / static_cast<double>(count));
    const float mdw = static_cast<float>(sumGX / static_cast<double>(count));
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const int64_t at = channelAt(l, c, i);
      const float xhat = (load(x[at]) - m) * rstd;
      dx[at] = store<T>(k * (load(g[at]) - mdb - xhat * mdw));
    }
  }
}

template <typename T>
KernelFn makeBatchNormBackward(DeviceContext &ctx, const std::string &name,
                               const BatchNormBackwardParams &p) {
  DeviceContext *c = &ctx;
  return [c, p, name](const KernelCall &call) -> Status {
    const int64_t channels = p.layout.channels;
    if (!channels)
      return {};
    if (!p.layout.count()) {
      // No values: the sums are zero (dx is empty).
      CLEAVE_CUDA_TRY(cudaMemsetAsync(call.outputs[1], 0, channels * sizeof(T), c->stream));
      CLEAVE_CUDA_TRY(cudaMemsetAsync(call.outputs[2], 0, channels * sizeof(T), c->stream));
      return {};
    }
    batchNormBackwardKernel<T><<<gridForItems(channels), kChannelThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<const T *>(call.inputs[2]), static_cast<const T *>(call.inputs[3]),
        p.hasWeight ? static_cast<const T *>(call.inputs[4]) : nullptr,
        static_cast<T *>(call.outputs[0]), static_cast<T *>(call.outputs[1]),
        static_cast<T *>(call.outputs[2]), p.layout, p.eps);
    return launchStatus(name);
  };
}

Status buildBatchNormBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  BatchNormBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseBatchNormBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = p.dtype == DType::BF16 ? makeBatchNormBackward<bf16>(ctx, sig.kernel, p)
                               : makeBatchNormBackward<float>(ctx, sig.kernel, p);
  return {};
}

//===----------------------------------------------------------------------===//
// nll_loss and its backward: one block (the rows are a batch's tokens), the
// loss summed in double.
//===----------------------------------------------------------------------===//

constexpr int kLossThreads = 1024;

__device__ __forceinline__ int64_t targetAt(const void *target, bool wide, int64_t i) {
  return wide ? static_cast<const int64_t *>(target)[i]
              : static_cast<const int32_t *>(target)[i];
}

/// Whether row i's target counts; reports one outside the classes.
__device__ __forceinline__ bool counted(const NllParams &p, int64_t t, int64_t i,
                                        DeviceError *error, int code) {
  if (t == p.ignoreIndex)
    return false;
  if (t < 0 || t >= p.classes) {
    reportDeviceError(error, code, t, i, p.classes);
    return false;
  }
  return true;
}

__global__ void nllLossKernel(const float *__restrict logp, const void *target,
                              float *__restrict loss, NllParams p, DeviceError *error) {
  __shared__ double shared[32];
  double sum = 0, count = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) {
    const int64_t t = targetAt(target, p.wideTarget, i);
    float l = 0.0f;
    if (counted(p, t, i, error, DeviceError::TargetOutOfRange)) {
      l = -logp[i * p.classes + t];
      count += 1;
    }
    if (p.reduction == Reduction::None)
      loss[i] = l;
    else
      sum += l;
  }
  if (p.reduction == Reduction::None)
    return;
  sum = blockReduce(sum, SumOp{}, shared);
  count = blockReduce(count, SumOp{}, shared);
  if (threadIdx.x == 0)
    *loss = static_cast<float>(p.reduction == Reduction::Sum ? sum : sum / count); // 0/0: NaN
}

__global__ void nllLossBackwardKernel(const float *__restrict g, const void *target,
                                      float *__restrict dx, NllParams p, DeviceError *error) {
  __shared__ double shared[32];
  double count = 0;
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x)
    if (counted(p, targetAt(target, p.wideTarget, i), i, error,
                DeviceError::NllBackwardTargetOutOfRange))
      count += 1;
  count = blockReduce(count, SumOp{}, shared);
  float value = 0.0f;
  if (p.reduction == Reduction::Mean)
    value = -g[0] / static_cast<float>(count);
  else if (p.reduction == Reduction::Sum)
    value = -g[0];
  for (int64_t i = threadIdx.x; i < p.rows; i += blockDim.x) {
    const int64_t t = targetAt(target, p.wideTarget, i);
    if (t == p.ignoreIndex || t < 0 || t >= p.classes)
      continue;
    dx[i * p.classes + t] = p.reduction == Reduction::None ? -g[i] : value;
  }
}

Status buildNllLoss(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  NllParams p;
  CLEAVE_RETURN_IF_ERROR(parseNllLoss(sig, "cuda", &p));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [c, p, name](const KernelCall &call) -> Status {
    if (!p.rows && p.reduction == Reduction::None)
      return {};
    nllLossKernel<<<1, kLossThreads, 0, c->stream>>>(static_cast<const float *>(call.inputs[0]),
                                                    call.inputs[1],
                                                    static_cast<float *>(call.outputs[0]), p,
                                                    c->deviceError);
    return launchStatus(name);
  };
  return {};
}

Status buildNllLossBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  NllParams p;
  CLEAVE_RETURN_IF_ERROR(parseNllLossBackward(sig, "cuda", &p));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  const size_t bytes = sig.outputs[0].bytes();
  *fn = [c, p, name, bytes](const KernelCall &call) -> Status {
    if (!bytes)
      return {};
    CLEAVE_CUDA_TRY(cudaMemsetAsync(call.outputs[0], 0, bytes, c->stream));
    nllLossBackwardKernel<<<1, kLossThreads, 0, c->stream>>>(
        static_cast<const float *>(call.inputs[0]), call.inputs[1],
        static_cast<float *>(call.outputs[0]), p, c->deviceError);
    return launchStatus(name);
  };
  return {};
}

//===----------------------------------------------------------------------===//
// softmax_backward, log_softmax_backward: a block per row along the last
// dim, a thread per column otherwise.
//   softmax:      dx = y·(g − Σ g·y)
//   log_softmax:  dx = g − exp(y)·Σ g
//===----------------------------------------------------------------------===//

template <bool Log>
__device__ __forceinline__ float softmaxGradTerm(float g, float y) {
  return Log ? g : g * y;
}
template <bool Log>
__device__ __forceinline__ float softmaxGrad(float g, float y, float s) {
  return Log ? g - expf(y) * s : y * (g - s);
}

template <typename T, bool Log>
__global__ void softmaxBackwardRows(const T *__restrict g, const T *__restrict y,
                                    T *__restrict dx, int64_t rows, int64_t d) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = g + r * d, *yr = y + r * d;
    T *dr = dx + r * d;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      s += softmaxGradTerm<Log>(load(gr[i]), load(yr[i]));
    s = blockReduce(s, SumOp{}, shared);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      dr[i] = store<T>(softmaxGrad<Log>(load(gr[i]), load(yr[i]), s));
  }
}

template <typename T, bool Log>
__global__ void softmaxBackwardColumns(const T *__restrict g, const T *__restrict y,
                                       T *__restrict dx, int64_t columns, int64_t d,
                                       int64_t inner) {
  for (int64_t col = globalThread(); col < columns; col += globalThreads()) {
    const int64_t o = col / inner, j = col - o * inner;
    const int64_t base = o * d * inner + j;
    float s = 0.0f;
    for (int64_t r = 0; r < d; ++r) {
      const int64_t at = base + r * inner;
      s += softmaxGradTerm<Log>(load(g[at]), load(y[at]));
    }
    for (int64_t r = 0; r < d; ++r) {
      const int64_t at = base + r * inner;
      dx[at] = store<T>(softmaxGrad<Log>(load(g[at]), load(y[at]), s));
    }
  }
}

template <typename T, bool Log>
KernelFn makeSoftmaxBackward(DeviceContext &ctx, const std::string &name,
                             const SoftmaxBackwardParams &p) {
  DeviceContext *c = &ctx;
  return [c, p, name](const KernelCall &call) -> Status {
    const int64_t columns = p.outer * p.inner;
    if (!columns || !p.d)
      return {};
    const T *g = static_cast<const T *>(call.inputs[0]);
    const T *y = static_cast<const T *>(call.inputs[1]);
    T *dx = static_cast<T *>(call.outputs[0]);
    if (p.inner == 1)
      softmaxBackwardRows<T, Log>
          <<<gridForItems(p.outer), kRowThreads, 0, c->stream>>>(g, y, dx, p.outer, p.d);
    else
      softmaxBackwardColumns<T, Log>
          <<<gridFor(*c, columns), kThreads, 0, c->stream>>>(g, y, dx, columns, p.d, p.inner);
    return launchStatus(name);
  };
}

template <bool Log>
Status buildSoftmaxBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  SoftmaxBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseSoftmaxBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = p.dtype == DType::BF16 ? makeSoftmaxBackward<bf16, Log>(ctx, sig.kernel, p)
                               : makeSoftmaxBackward<float, Log>(ctx, sig.kernel, p);
  return {};
}

//===----------------------------------------------------------------------===//
// layer_norm_backward: a block per row recomputes the row's statistics as
// the forward does (fp32, the variance around the mean), writes dx and keeps
// mean and 1/std in the workspace; the weight and bias gradients are column
// sums over chunks of rows (double), then over the chunks in order.
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void layerNormBackwardRows(const T *__restrict g, const T *__restrict x,
                                      const T *__restrict w, T *__restrict dx,
                                      float *__restrict stats, int64_t rows, int64_t d,
                                      float eps) {
  __shared__ float shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *gr = g + r * d, *xr = x + r * d;
    T *dr = dx + r * d;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
      s += load(xr[i]);
    const float mean = blockReduce(s, SumOp{}, shared) / static_cast<float>(d);
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float c = load(xr[i]) - mean;
      sq += c * c;
    }
    const float rstd =
        1.0f / sqrtf(blockReduce(sq, SumOp{}, shared) / static_cast<float>(d) + eps);
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float xhat = (load(xr[i]) - mean) * rstd;
      const float gh = w ? load(gr[i]) * load(w[i]) : load(gr[i]);
      sumG += gh;
      sumGX += gh * xhat;
    }
    const float meanG = blockReduce(sumG, SumOp{}, shared) / static_cast<float>(d);
    const float meanGX = blockReduce(sumGX, SumOp{}, shared) / static_cast<float>(d);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const float xhat = (load(xr[i]) - mean) * rstd;
      const float gh = w ? load(gr[i]) * load(w[i]) : load(gr[i]);
      dr[i] = store<T>(rstd * (gh - meanG - xhat * meanGX));
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// partial[chunk][0][i] = Σ g·x̂, partial[chunk][1][i] = Σ g over the
/// chunk's rows, for column i (blockIdx.y is the chunk).
template <typename T>
__global__ void layerNormBackwardColumns(const T *__restrict g, const T *__restrict x,
                                         const float *__restrict stats,
                                         double *__restrict partial, int64_t rows, int64_t d,
                                         int64_t perChunk) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d)
    return;
  const int64_t chunk = blockIdx.y;
  const int64_t r0 = chunk * perChunk, r1 = r0 + perChunk < rows ? r0 + perChunk : rows;
  double sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float xhat = (load(x[r * d + i]) - stats[2 * r]) * stats[2 * r + 1];
    const float gi = load(g[r * d + i]);
    sw += static_cast<double>(gi) * xhat;
    sb += gi;
  }
  partial[chunk * 2 * d + i] = sw;
  partial[chunk * 2 * d + d + i] = sb;
}

template <typename T>
__global__ void layerNormBackwardSum(const double *__restrict partial, T *__restrict dw,
                                     T *__restrict db, int64_t d, int64_t chunks) {
  for (int64_t i = globalThread(); i < d; i += globalThreads()) {
    double sw = 0, sb = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      sw += partial[k * 2 * d + i];
      sb += partial[k * 2 * d + d + i];
    }
    dw[i] = store<T>(sw);
    db[i] = store<T>(sb);
  }
}

template <typename T>
KernelFn makeLayerNormBackward(DeviceContext &ctx, const std::string &name,
                               const LayerNormBackwardParams &p, int64_t perChunk,
                               int64_t chunks, size_t statsBytes) {
  DeviceContext *c = &ctx;
  return [c, p, name, perChunk, chunks, statsBytes](const KernelCall &call) -> Status {
    const T *g = static_cast<const T *>(call.inputs[0]);
    const T *x = static_cast<const T *>(call.inputs[1]);
    const T *w = p.hasWeight ? static_cast<const T *>(call.inputs[2]) : nullptr;
    T *dx = static_cast<T *>(call.outputs[0]);
    T *dw = static_cast<T *>(call.outputs[1]);
    T *db = static_cast<T *>(call.outputs[2]);
    if (!p.d)
      return {};
    if (!p.rows) {
      CLEAVE_CUDA_TRY(cudaMemsetAsync(dw, 0, p.d * sizeof(T), c->stream));
      CLEAVE_CUDA_TRY(cudaMemsetAsync(db, 0, p.d * sizeof(T), c->stream));
      return {};
    }
    float *stats = static_cast<float *>(c->workspace);
    double *partial =
        reinterpret_cast<double *>(static_cast<char *>(c->workspace) + statsBytes);
    layerNormBackwardRows<<<gridForItems(p.rows), kRowThreads, 0, c->stream>>>(
        g, x, w, dx, stats, p.rows, p.d, p.eps);
    CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    const dim3 grid(static_cast<unsigned>((p.d + kThreads - 1) / kThreads),
                    static_cast<unsigned>(chunks));
    layerNormBackwardColumns<<<grid, kThreads, 0, c->stream>>>(g, x, stats, partial, p.rows, p.d,
                                                              perChunk);
    CLEAVE_RETURN_IF_ERROR(launchStatus(name));
    layerNormBackwardSum<<<gridFor(*c, p.d), kThreads, 0, c->stream>>>(partial, dw, db, p.d,
                                                                       chunks);
    return launchStatus(name);
  };
}

Status buildLayerNormBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  LayerNormBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseLayerNormBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  const int64_t perChunk = std::max<int64_t>(1, (p.rows + kColumnChunks - 1) / kColumnChunks);
  const int64_t chunks = (p.rows + perChunk - 1) / perChunk;
  // The rows' statistics (2 floats each, padded to 8 bytes), then the
  // chunks' partial sums.
  const size_t statsBytes = ((2 * sizeof(float) * p.rows + 255) / 256) * 256;
  const size_t partialBytes = sizeof(double) * 2 * p.d * chunks;
  void *unused = nullptr;
  CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(statsBytes + partialBytes, &unused));
  *fn = p.dtype == DType::BF16
            ? makeLayerNormBackward<bf16>(ctx, sig.kernel, p, perChunk, chunks, statsBytes)
            : makeLayerNormBackward<float>(ctx, sig.kernel, p, perChunk, chunks, statsBytes);
  return {};
}

//===----------------------------------------------------------------------===//
// gelu_backward, silu_backward, relu_backward: elementwise, PyTorch's
// formulas (as the CPU).
//===----------------------------------------------------------------------===//

// Relu's second operand is its output (threshold_backward), the others' their input.
enum class Activation { GeluErf, GeluTanh, Silu, Relu };

template <typename T, Activation A>
__global__ void activationBackwardKernel(const T *__restrict g, const T *__restrict x,
                                         T *__restrict dx, int64_t n) {
  for (int64_t i = globalThread(); i < n; i += globalThreads()) {
    const float v = load(x[i]);
    if constexpr (A == Activation::Relu) {
      // A select, not g * (y > 0): an infinite gradient where y <= 0 gives 0.
      dx[i] = v > 0.0f ? g[i] : store<T>(0.0f);
      continue;
    }
    float d;
    if constexpr (A == Activation::GeluErf) {
      const float kAlpha = 0.70710678118654752440f;
      const float kBeta = 1.12837916709551257390f * 0.70710678118654752440f * 0.5f;
      const float cdf = 0.5f * (1.0f + erff(v * kAlpha));
      const float pdf = kBeta * expf(-0.5f * v * v);
      d = cdf + v * pdf;
    } else if constexpr (A == Activation::GeluTanh) {
      const float kBeta = 1.41421356237309504880f * 1.12837916709551257390f * 0.5f;
      const float kKappa = 0.044715f;
      const float xSq = v * v;
      const float inner = kBeta * (v + kKappa * xSq * v);
      const float t = tanhf(inner);
      d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * (kBeta * (1.0f + 3.0f * kKappa * xSq));
    } else {
      const float s = 1.0f / (1.0f + expf(-v));
      d = s * (1.0f + v * (1.0f - s));
    }
    dx[i] = store<T>(load(g[i]) * d);
  }
}

template <typename T, Activation A>
KernelFn activationBackward(DeviceContext &ctx, const std::string &name, int64_t n) {
  DeviceContext *c = &ctx;
  return [c, name, n](const KernelCall &call) -> Status {
    if (!n)
      return {};
    activationBackwardKernel<T, A><<<gridFor(*c, n), kThreads, 0, c->stream>>>(
        static_cast<const T *>(call.inputs[0]), static_cast<const T *>(call.inputs[1]),
        static_cast<T *>(call.outputs[0]), n);
    return launchStatus(name);
  };
}

template <Activation A>
KernelFn activationBackward(DeviceContext &ctx, const std::string &name,
                            const ActivationBackwardParams &p) {
  return p.dtype == DType::BF16 ? activationBackward<bf16, A>(ctx, name, p.n)
                                : activationBackward<float, A>(ctx, name, p.n);
}

Status buildGeluBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ActivationBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseGeluBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = p.tanh ? activationBackward<Activation::GeluTanh>(ctx, sig.kernel, p)
               : activationBackward<Activation::GeluErf>(ctx, sig.kernel, p);
  return {};
}

Status buildSiluBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ActivationBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseSiluBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = activationBackward<Activation::Silu>(ctx, sig.kernel, p);
  return {};
}

Status buildReluBackward(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  ActivationBackwardParams p;
  CLEAVE_RETURN_IF_ERROR(parseReluBackward(sig, "cuda", {DType::F32, DType::BF16}, &p));
  *fn = activationBackward<Activation::Relu>(ctx, sig.kernel, p);
  return {};
}

//===----------------------------------------------------------------------===//
// adamw, sgd: each block's first thread turns the step (and the clipping
// scale) into the step's scalars; the elements follow the CPU's formulas
// (runtime/TrainingParams.h).
//===----------------------------------------------------------------------===//

/// The step t, or 0 after reporting t < 1 (then nothing is updated);
/// `kernel` 0 is adamw, 1 sgd.
__device__ __forceinline__ int64_t readStep(const int64_t *step, DeviceError *error, int kernel) {
  const int64_t t = *step;
  if (t < 1) {
    if (globalThread() == 0)
      reportDeviceError(error, DeviceError::StepNotPositive, t, kernel, 0);
    return 0;
  }
  return t;
}

__global__ void adamwKernel(float *__restrict p, float *__restrict m, float *__restrict v,
                            const float *__restrict grad, const int64_t *step,
                            const float *gradScale, AdamWParams a, DeviceError *error) {
  __shared__ AdamWScalars shared;
  __shared__ bool ok;
  if (threadIdx.x == 0) {
    const int64_t t = readStep(step, error, 0);
    ok = t > 0;
    if (ok)
      shared = adamwScalars(a, t, gradScale ? *gradScale : 1.0f);
  }
  __syncthreads();
  if (!ok)
    return;
  const AdamWScalars s = shared;
  for (int64_t i = globalThread(); i < a.n; i += globalThreads())
    adamwElement(p[i], m[i], v[i], grad[i], s);
}

__global__ void sgdKernel(float *__restrict p, float *__restrict buf,
                          const float *__restrict grad, const int64_t *step,
                          const float *gradScale, SgdParams a, DeviceError *error) {
  __shared__ SgdScalars shared;
  __shared__ bool ok;
  if (threadIdx.x == 0) {
    const int64_t t = readStep(step, error, 1);
    ok = t > 0;
    if (ok)
      shared = sgdScalars(a, t, gradScale ? *gradScale : 1.0f);
  }
  __syncthreads();
  if (!ok)
    return;
  const SgdScalars s = shared;
  for (int64_t i = globalThread(); i < a.n; i += globalThreads())
    sgdElement(p[i], buf ? buf + i : nullptr, grad[i], s);
}

Status buildAdamW(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  AdamWParams a;
  CLEAVE_RETURN_IF_ERROR(parseAdamW(sig, "cuda", &a));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [c, a, name](const KernelCall &call) -> Status {
    // Even an empty update checks its step, as the CPU does.
    adamwKernel<<<gridFor(*c, a.n), kThreads, 0, c->stream>>>(
        static_cast<float *>(call.outputs[0]), static_cast<float *>(call.outputs[1]),
        static_cast<float *>(call.outputs[2]), static_cast<const float *>(call.inputs[0]),
        static_cast<const int64_t *>(call.inputs[1]),
        a.hasScale ? static_cast<const float *>(call.inputs[2]) : nullptr, a, c->deviceError);
    return launchStatus(name);
  };
  return {};
}

Status buildSgd(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  SgdParams a;
  CLEAVE_RETURN_IF_ERROR(parseSgd(sig, "cuda", &a));
  DeviceContext *c = &ctx;
  const std::string name = sig.kernel;
  *fn = [c, a, name](const KernelCall &call) -> Status {
    sgdKernel<<<gridFor(*c, a.n), kThreads, 0, c->stream>>>(
        static_cast<float *>(call.outputs[0]),
        a.hasBuffer ? static_cast<float *>(call.outputs[1]) : nullptr,
        static_cast<const float *>(call.inputs[0]), static_cast<const int64_t *>(call.inputs[1]),
        a.hasScale ? static_cast<const float *>(call.inputs[2]) : nullptr, a, c->deviceError);
    return launchStatus(name);
  };
  return {};
}

} // namespace

void registerTrainingKernels(KernelTable &table) {
  table["assign"] = buildAssign;
  table["dropout_train"] = buildDropoutTrain;
  table["batch_norm_train"] = buildBatchNormTrain;
  table["update_running_stats"] = buildUpdateRunningStats;
  table["batch_norm_backward"] = buildBatchNormBackward;
  table["nll_loss"] = buildNllLoss;
  table["nll_loss_backward"] = buildNllLossBackward;
  table["softmax_backward"] = buildSoftmaxBackward<false>;
  table["log_softmax_backward"] = buildSoftmaxBackward<true>;
  table["layer_norm_backward"] = buildLayerNormBackward;
  table["gelu_backward"] = buildGeluBackward;
  table["silu_backward"] = buildSiluBackward;
  table["relu_backward"] = buildReluBackward;
  table["adamw"] = buildAdamW;
  table["sgd"] = buildSgd;
}

} // namespace cleave::runtime::cuda
