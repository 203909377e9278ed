//===- Convolution.cpp - conv2d through cuDNN -----------------------------===//
//
// cuDNN's convolution API (deprecated in cuDNN 9 in favour of the graph API,
// still supported): descriptors and the algorithm are chosen at prepare
// time; the workspace is the plan's scratch when it is large enough (it
// reserves the CPU kernel's, conv2dScratchBytes), else the backend's shared
// workspace. The bias is added by cudnnAddTensor. fused_conv2d's residual
// is copied into the output, which the convolution adds to (beta 1); its
// clamp is cuDNN's relu or clipped relu, in place.
//
//===----------------------------------------------------------------------===//

#include "runtime/Conv2dContract.h"
#include "runtime/cuda/DeviceContext.h"

#include <limits>
#include <memory>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace cleave::runtime::cuda {
namespace {

struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspaceBytes = 0;

  ~ConvDescriptors() {
    for (cudnnTensorDescriptor_t t : {x, y, bias})
      if (t)
        cudnnDestroyTensorDescriptor(t);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
    if (activation)
      cudnnDestroyActivationDescriptor(activation);
  }
};

/// conv2d, or with an epilogue fused_conv2d (inputs[3]: the residual).
Status buildConvolution(const KernelSignature &sig, const Conv2dParams &p,
                        const ConvEpilogue &epilogue, DeviceContext &ctx, KernelFn *fn) {
  for (int64_t v : {p.batch, p.channels, p.height, p.width, p.filters, p.oh, p.ow})
    if (v > std::numeric_limits<int>::max())
      return CLEAVE_ERROR(sig.kernel, ": a dim of ", v, " is beyond cuDNN's 32-bit dims");
  const DType dtype = sig.inputs[0]->dtype;
  if (p.batch == 0 || p.filters == 0 || p.oh == 0 || p.ow == 0) {
    *fn = [](const KernelCall &) -> Status { return {}; };
    return {};
  }
  const cudnnDataType_t type = dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  auto d = std::make_shared<ConvDescriptors>();
  auto i = [](int64_t v) { return static_cast<int>(v); };
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
  // fp32 stays fp32 unless TF32 is allowed; bf16 uses tensor cores.
  cudnnMathType_t math = dtype == DType::BF16 ? CUDNN_TENSOR_OP_MATH
                         : ctx.tf32           ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                              : CUDNN_FMA_MATH;
  CLEAVE_CUDNN_TRY(cudnnSetConvolutionMathType(d->conv, math));
  CLEAVE_CUDNN_TRY(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, type, i(p.batch),
                                              i(p.filters), i(p.oh), i(p.ow)));
  if (epilogue.clamps()) {
    // cuDNN's activations clamp below at 0 only; -cleave-fuse-conv-epilogue
    // forms no other.
    if (!epilogue.hasMin || epilogue.min != 0.0f)
      return CLEAVE_ERROR(sig.kernel, ": the CUDA backend fuses a clamp from 0 only (relu, "
                                      "relu6), not [", epilogue.min, ", ", epilogue.max, "]");
    CLEAVE_CUDNN_TRY(cudnnCreateActivationDescriptor(&d->activation));
    CLEAVE_CUDNN_TRY(cudnnSetActivationDescriptor(
        d->activation, epilogue.hasMax ? CUDNN_ACTIVATION_CLIPPED_RELU : CUDNN_ACTIVATION_RELU,
        CUDNN_PROPAGATE_NAN, epilogue.hasMax ? epilogue.max : 0.0));
  }
  if (p.hasBias) {
    CLEAVE_CUDNN_TRY(cudnnCreateTensorDescriptor(&d->bias));
    CLEAVE_CUDNN_TRY(
        cudnnSetTensor4dDescriptor(d->bias, CUDNN_TENSOR_NCHW, type, 1, i(p.filters), 1, 1));
  }
  // The heuristics' ranking, first one that works.
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int found = 0;
  CLEAVE_CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(
      ctx.dnn, d->x, d->w, d->conv, d->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf));
  bool chosen = false;
  for (int k = 0; k < found && !chosen; ++k)
    if (perf[k].status == CUDNN_STATUS_SUCCESS) {
      d->algo = perf[k].algo;
      d->workspaceBytes = perf[k].memory;
      chosen = true;
    }
  if (!chosen)
    return CLEAVE_ERROR(sig.kernel, ": cuDNN has no forward algorithm for this convolution (",
                        describe(sig.inputs[0]->shape, dtype), " * ",
                        describe(sig.inputs[1]->shape, dtype), ")");
  const bool useScratch = d->workspaceBytes <= sig.scratchBytes;
  if (!useScratch) {
    void *unused = nullptr;
    CLEAVE_RETURN_IF_ERROR(ctx.sharedWorkspace(d->workspaceBytes, &unused));
  }
  DeviceContext *c = &ctx;
  const bool hasBias = p.hasBias, residual = epilogue.residual;
  const size_t outputBytes = sig.outputs[0].bytes();
  *fn = [c, d, useScratch, hasBias, residual, outputBytes](const KernelCall &call) -> Status {
    const float one = 1.0f, zero = 0.0f;
    void *workspace = useScratch ? call.scratch : c->workspace;
    if (residual)
      CLEAVE_CUDA_TRY(cudaMemcpyAsync(call.outputs[0], call.inputs[3], outputBytes,
                                      cudaMemcpyDeviceToDevice, c->stream));
    CLEAVE_CUDNN_TRY(cudnnConvolutionForward(c->dnn, &one, d->x, call.inputs[0], d->w,
                                             call.inputs[1], d->conv, d->algo, workspace,
                                             d->workspaceBytes, residual ? &one : &zero, d->y,
                                             call.outputs[0]));
    if (hasBias)
      CLEAVE_CUDNN_TRY(
          cudnnAddTensor(c->dnn, &one, d->bias, call.inputs[2], &one, d->y, call.outputs[0]));
    if (d->activation)
      CLEAVE_CUDNN_TRY(cudnnActivationForward(c->dnn, d->activation, &one, d->y, call.outputs[0],
                                              &zero, d->y, call.outputs[0]));
    return {};
  };
  return {};
}

Status buildConv2d(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  Conv2dParams p;
  CLEAVE_RETURN_IF_ERROR(parseConv2d(sig, "cuda", {DType::F32, DType::BF16}, &p));
  return buildConvolution(sig, p, ConvEpilogue(), ctx, fn);
}

Status buildFusedConv2d(const KernelSignature &sig, DeviceContext &ctx, KernelFn *fn) {
  Conv2dParams p;
  ConvEpilogue epilogue;
  CLEAVE_RETURN_IF_ERROR(parseFusedConv2d(sig, "cuda", {DType::F32, DType::BF16}, &p, &epilogue));
  return buildConvolution(sig, p, epilogue, ctx, fn);
}

} // namespace

void registerConvolutionKernels(KernelTable &table) {
  table["conv2d"] = buildConv2d;
  table["fused_conv2d"] = buildFusedConv2d;
}

} // namespace cleave::runtime::cuda
