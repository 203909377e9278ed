//===- ContractionBackward.cpp - The GEMM and cuDNN training kernels ------===//
//
// The gradients that are a library call (the rest of the family is in
// kernels/TrainingContractions.cu):
//   linear_backward_weight  one cuBLASLt GEMM (GemmCall.h): row-major
//                           dW[n, k] = g^T x is the column-major
//                           dW^T[k, n] = x^T g, read without copies;
//   conv2d_backward_input   cudnnConvolutionBackwardData;
//   conv2d_backward_weight  cudnnConvolutionBackwardFilter.
// Every one overwrites its output (beta = 0), as the CPU's, and takes f32
// or bf16 (a mixed precision plan's backward): bf16 runs on tensor cores
// with fp32 accumulation and is rounded once into the bf16 output. cuDNN's
// algorithms are picked at prepare time from its heuristics' ranking,
// preferring a deterministic one (some backward-filter algorithms add with
// atomics); the workspace is the plan's scratch when large enough (it holds
// the CPU's column matrix), else the backend's shared workspace. Problems
// with nothing to contract (no images, filters or channels) write zeros
// without calling the libraries, which reject empty dims.
//
//===----------------------------------------------------------------------===//

#include "runtime/BackwardParams.h"
#include "runtime/cuda/GemmCall.h"

#include <limits>
#include <memory>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace cleave::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// linear_backward_weight
//===----------------------------------------------------------------------===//

Status buildLinearBackwardWeight(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  LinearBackwardWeightParams lp;
  CLEAVE_RETURN_IF_ERROR(
      parseLinearBackwardWeight(sig, "cuda", {DType::F32, DType::BF16}, &lp));
  const int64_t rows = lp.rows, n = lp.n, k = lp.k;
  DeviceContext *c = &ctx;
  if (n == 0 || k == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  if (rows == 0) { // an empty sum
    const size_t bytes = static_cast<size_t>(n * k) * dtypeBytes(lp.dtype);
    *fn = [c, bytes](const KernelCall &call) -> Status {
      CLEAVE_CUDA_TRY(cudaMemsetAsync(call.outputs[0], 0, bytes, c->stream));
      return {};
    };
    return {};
  }
  // bf16: cuBLASLt's 16BF operands, CUBLAS_COMPUTE_32F and a 16BF D (Gemm
  // picks the algorithm for the pointers' alignment; odd n or k are
  // leading dims cuBLASLt handles with its unaligned kernels). The sum runs
  // over every row of the batch (thousands of tokens), so a split-K's
  // partial sums must stay fp32 and D is rounded once.
  GemmProblem p;
  p.dtype = lp.dtype;
  p.fp32Reduction = lp.dtype == DType::BF16;
  p.rows = k; // D = dW^T [k, n]; X = x^T, stored as row-major x [rows, k]
  p.cols = n; // Y = g [rows, n], stored as row-major g, i.e. column-major g^T
  p.k = rows;
  p.transY = true;
  const std::string kernel = sig.kernel;
  const size_t esz = dtypeBytes(lp.dtype);
  if (ColumnBlocks::wanted(n, rows, esz)) {
    // g's rows are misaligned: blocks of its columns (dW's rows) are copied
    // to aligned rows in the workspace, each block one whole-sum GEMM
    // (ColumnBlocks), so the sum over the rows is still not split.
    const ColumnBlocks st = ColumnBlocks::of(n, rows, esz);
    std::shared_ptr<Gemm> full, tail;
    for (int64_t cols : {st.chunk, n % st.chunk}) {
      if (cols == 0)
        continue;
      GemmProblem q = p;
      q.cols = cols;
      q.ldY = st.pitch(cols);
      q.offsetsD = static_cast<uint64_t>(st.chunk * k) * esz;
      auto g = std::make_shared<Gemm>();
      CLEAVE_RETURN_IF_ERROR(g->init(q, ctx.tf32).prepend(sig.kernel));
      (cols == st.chunk ? full : tail) = g;
    }
    void *unused = nullptr;
    CLEAVE_RETURN_IF_ERROR(
        ctx.sharedWorkspace(static_cast<size_t>(st.chunk * rows) * esz, &unused));
    *fn = [c, full, tail, st, rows, n, k, esz, kernel](const KernelCall &call) -> Status {
      const char *g = static_cast<const char *>(call.inputs[0]);
      char *out = static_cast<char *>(call.outputs[0]);
      for (int64_t n0 = 0; n0 < n; n0 += st.chunk) {
        const int64_t cols = std::min(st.chunk, n - n0);
        // The block, row by row, to aligned rows of the workspace.
        CLEAVE_CUDA_TRY(cudaMemcpy2DAsync(c->workspace, st.pitch(cols) * esz, g + n0 * esz, n * esz,
                                          cols * esz, rows, cudaMemcpyDeviceToDevice, c->stream));
        Gemm &gemm = cols == st.chunk ? *full : *tail;
        CLEAVE_RETURN_IF_ERROR(
            gemm.run(*c, call.inputs[1], c->workspace, nullptr, out + n0 * k * esz)
                .prepend(kernel));
      }
      return {};
    };
    return {};
  }
  auto gemm = std::make_shared<Gemm>();
  CLEAVE_RETURN_IF_ERROR(gemm->init(p, ctx.tf32).prepend(sig.kernel));
  *fn = [c, gemm, kernel](const KernelCall &call) -> Status {
    return gemm->run(*c, call.inputs[1], call.inputs[0], nullptr, call.outputs[0]).prepend(kernel);
  };
  return {};
}

//===----------------------------------------------------------------------===//
// conv2d_backward_input, conv2d_backward_weight
//===----------------------------------------------------------------------===//

struct ConvBackwardDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionBwdDataAlgo_t dataAlgo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnConvolutionBwdFilterAlgo_t filterAlgo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  size_t workspaceBytes = 0;

  ~ConvBackwardDescriptors() {
    for (cudnnTensorDescriptor_t t : {x, y})
      if (t)
        cudnnDestroyTensorDescriptor(t);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
  }
};

/// The first of cuDNN's ranked algorithms that works, a deterministic one
/// if any works.
template <typename Perf> const Perf *pickAlgorithm(const Perf *perf, int found) {
  const Perf *any = nullptr;
  for (int i = 0; i < found; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS)
      continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC)
      return &perf[i];
    if (!any)
      any = &perf[i];
  }
  return any;
}

Status describeConv(const Conv2dParams &p, DType dtype, bool tf32, ConvBackwardDescriptors *d) {
  auto i = [](int64_t v) { return static_cast<int>(v); };
  const cudnnDataType_t type = dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  CLEAVE_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->x));
  CLEAVE_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->y));
  CLEAVE_CUDNN_TRY(cudnnCreateFilterDescriptor(&d->w));
  CLEAVE_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&d->conv));
  CLEAVE_CUDNN_TRY(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, type, i(p.batch),
                                              i(p.channels), i(p.height), i(p.width)));
  CLEAVE_CUDNN_TRY(cudnnSetFilter4dDescriptor(d->w, type, CUDNN_TENSOR_NCHW, i(p.filters),
                                              i(p.channels / p.groups), i(p.kh), i(p.kw)));
  CLEAVE_CUDNN_TRY(cudnnSetConvolution2dDescriptor(d->conv, i(p.ph), i(p.pw), i(p.sh), i(p.sw),
                                                   i(p.dh), i(p.dw), CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
  CLEAVE_CUDNN_TRY(cudnnSetConvolutionGroupCount(d->conv, i(p.groups)));
  // fp32 stays fp32 unless TF32 is allowed, as the forward; bf16 uses
  // tensor cores, computing in fp32 (the descriptor's compute type above).
  const cudnnMathType_t math = dtype == DType::BF16 ? CUDNN_TENSOR_OP_MATH
                               : tf32               ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                    : CUDNN_FMA_MATH;
  CLEAVE_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, math));
  CLEAVE_CUDNN_TRY(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, i(p.batch),
                                              i(p.filters), i(p.oh), i(p.ow)));
  return {};
}

Status buildConv2dBackward(const KernelSignature &sig, DeviceContext &ctx, bool forInput,
                           KernelFn *fn) {
  Conv2dParams p;
  CLEAVE_RETURN_IF_ERROR(
      parseConv2dBackward(sig, "cuda", {DType::F32, DType::BF16}, forInput, &p));
  const DType dtype = sig.inputs[0]->dtype;
  for (int64_t v : {p.batch, p.channels, p.height, p.width, p.filters, p.oh, p.ow})
    if (v > std::numeric_limits<int>::max())
      return CLEAVE_ERROR(sig.kernel, ": a dim of ", v, " is beyond cuDNN's 32-bit dims");
  const size_t outBytes = sig.outputs[0].bytes();
  DeviceContext *c = &ctx;
  if (outBytes == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  if (p.batch == 0 || p.filters == 0 || p.channels == 0 || p.height == 0 || p.width == 0) {
    // Nothing is summed into the output (the image or the filters are
    // empty, or every tap is padding).
    *fn = [c, outBytes](const KernelCall &call) -> Status {
      CLEAVE_CUDA_TRY(cudaMemsetAsync(call.outputs[0], 0, outBytes, c->stream));
      return {};
    };
    return {};
  }
  auto d = std::make_shared<ConvBackwardDescriptors>();
  CLEAVE_RETURN_IF_ERROR(describeConv(p, dtype, ctx.tf32, d.get()).prepend(sig.kernel));
  bool chosen = false;
  if (forInput) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int found = 0;
    CLEAVE_CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        ctx.dnn, d->w, d->y, d->conv, d->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf));
    if (const auto *best = pickAlgorithm(perf, found)) {
      d->dataAlgo = best->algo;
      d->workspaceBytes = best->memory;
      chosen = true;
    }
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int found = 0;
    CLEAVE_CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        ctx.dnn, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf));
    if (const auto *best = pickAlgorithm(perf, found)) {
      d->filterAlgo = best->algo;
      d->workspaceBytes = best->memory;
      chosen = true;
    }
  }
  if (!chosen)
    return CLEAVE_ERROR(
        sig.kernel, ": cuDNN has no ", forInput ? "backward-data" : "backward-filter",
        " algorithm for this convolution (grad ", describe(sig.inputs[0]->shape, dtype), ", ",
        describe(sig.inputs[1]->shape, dtype), ")");
  const bool useScratch = d->workspaceBytes <= sig.scratchBytes;
  if (!useScratch) {
    void *unused = nullptr;
    CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(d->workspaceBytes, &unused));
  }
  *fn = [c, d, useScratch, forInput](const KernelCall &call) -> Status {
    const float one = 1.0f, zero = 0.0f;
    void *workspace = useScratch ? call.scratch : c->workspace;
    if (forInput)
      CLEAVE_CUDNN_TRY(cudnnConvolutionBackwardData(
          c->dnn, &one, d->w, call.inputs[1], d->y, call.inputs[0], d->conv, d->dataAlgo, workspace,
          d->workspaceBytes, &zero, d->x, call.outputs[0]));
    else
      CLEAVE_CUDNN_TRY(cudnnConvolutionBackwardFilter(
          c->dnn, &one, d->x, call.inputs[1], d->y, call.inputs[0], d->conv, d->filterAlgo,
          workspace, d->workspaceBytes, &zero, d->w, call.outputs[0]));
    return {};
  };
  return {};
}

Status buildConv2dBackwardInput(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  return buildConv2dBackward(sig, ctx, /*forInput=*/true, fn);
}

Status buildConv2dBackwardWeight(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  return buildConv2dBackward(sig, ctx, /*forInput=*/false, fn);
}

} // namespace

void registerContractionBackwardKernels(KernelTable &table) {
  table["linear_backward_weight"] = buildLinearBackwardWeight;
  table["conv2d_backward_input"] = buildConv2dBackwardInput;
  table["conv2d_backward_weight"] = buildConv2dBackwardWeight;
}

} // namespace cleave::runtime::cuda
