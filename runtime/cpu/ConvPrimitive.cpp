//===- ConvPrimitive.cpp - conv2d through oneDNN's convolution primitive --===//

#include "runtime/cpu/ConvPrimitive.h"
#include "runtime/cpu/ConvScratch.h"
#include "runtime/cpu/Dnnl.h"

#include <array>
#include <limits>
#include <memory>
#include <unordered_map>

namespace cleave::runtime::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

/// [F, C, KH, KW], or [G, F/G, C/G, KH, KW] for a grouped convolution: the
/// same memory as PyTorch's [F, C/G, KH, KW].
memory::dims weightDims(const Conv2dParams &p) {
  if (p.groups == 1)
    return {p.filters, p.channels, p.kh, p.kw};
  return {p.groups, p.filters / p.groups, p.channels / p.groups, p.kh, p.kw};
}

/// The primitives for one count of images per call: NCHW -> channels-last
/// copy of the input, the convolution, and the copy of its output back.
struct ImageBatch {
  memory::desc srcPlain, srcBlocked, dstPlain, dstBlocked;
  /// dstIn: a fused residual into the output's copy, which the
  /// convolution's sum post-op then adds to.
  dnnl::reorder srcIn, dstOut, dstIn;
  dnnl::convolution_forward conv;
};

struct ConvPrimitives {
  Conv2dParams p;
  ConvEpilogue epilogue;
  ConvPrimitiveScratch layout;
  memory::desc bias;
  PrepackedWeight weights;
  /// kConvPrimitiveImages images a call (or the whole batch where it is
  /// smaller), and the last call's remainder, if any.
  ImageBatch full, rest;
  int64_t imagesPerCall = 0;
};

/// False where the primitive's formats are not the ones the kernel lays
/// out: channels-last activations, weights of their plain size.
/// fused_conv2d's epilogue as oneDNN post-ops: the residual as a sum onto
/// the output's copy, then relu (a lone lower bound of 0) or a clip.
dnnl::primitive_attr epilogueAttr(const ConvEpilogue &e) {
  dnnl::post_ops ops;
  if (e.residual)
    ops.append_sum(1.0f);
  if (e.hasMin && e.min == 0.0f && !e.hasMax)
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  else if (e.clamps())
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip,
                       e.hasMin ? e.min : -std::numeric_limits<float>::infinity(),
                       e.hasMax ? e.max : std::numeric_limits<float>::infinity());
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

bool buildImageBatch(const Conv2dParams &p, const ConvEpilogue &epilogue, int64_t images,
                     ImageBatch *out, memory::desc *weightsBlocked) {
  const memory::dims src{images, p.channels, p.height, p.width};
  const memory::dims dst{images, p.filters, p.oh, p.ow};
  out->srcPlain = memory::desc(src, kF32, Tag::nchw);
  out->srcBlocked = memory::desc(src, kF32, Tag::nhwc);
  out->dstPlain = memory::desc(dst, kF32, Tag::nchw);
  out->dstBlocked = memory::desc(dst, kF32, Tag::nhwc);
  // oneDNN counts dilation from 0 (a dense kernel), PyTorch from 1.
  auto desc = dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, out->srcBlocked,
      memory::desc(weightDims(p), kF32, Tag::any),
      p.hasBias ? memory::desc({p.filters}, kF32, Tag::a) : memory::desc(), out->dstBlocked,
      {p.sh, p.sw}, {p.dh - 1, p.dw - 1}, {p.ph, p.pw}, {p.ph, p.pw});
  auto pd = dnnl::convolution_forward::primitive_desc(desc, epilogueAttr(epilogue), dnnlEngine());
  const size_t weightBytes =
      static_cast<size_t>(p.filters * (p.channels / p.groups) * p.kh * p.kw) * 4;
  if (pd.weights_desc().get_size() != weightBytes || pd.src_desc() != out->srcBlocked ||
      pd.dst_desc() != out->dstBlocked)
    return false;
  *weightsBlocked = pd.weights_desc();
  out->conv = dnnl::convolution_forward(pd);
  out->srcIn = dnnl::reorder(
      dnnl::reorder::primitive_desc(dnnlEngine(), out->srcPlain, dnnlEngine(), out->srcBlocked));
  out->dstOut = dnnl::reorder(
      dnnl::reorder::primitive_desc(dnnlEngine(), out->dstBlocked, dnnlEngine(), out->dstPlain));
  if (epilogue.residual)
    out->dstIn = dnnl::reorder(
        dnnl::reorder::primitive_desc(dnnlEngine(), out->dstPlain, dnnlEngine(), out->dstBlocked));
  return true;
}

Status runConv(ConvPrimitives &c, const KernelCall &call) {
  const Conv2dParams &p = c.p;
  dnnl::engine &engine = dnnlEngine();
  dnnl::stream stream(engine);
  char *scratch = static_cast<char *>(call.scratch);
  memory weights = c.weights.use(const_cast<void *>(call.inputs[1]), stream);
  memory bias = p.hasBias ? memory(c.bias, engine, const_cast<void *>(call.inputs[2]))
                          : memory(memory::desc(), engine, nullptr);
  const float *x = static_cast<const float *>(call.inputs[0]);
  float *y = static_cast<float *>(call.outputs[0]);
  const int64_t imageIn = p.channels * p.height * p.width, imageOut = p.filters * p.oh * p.ow;
  for (int64_t n = 0; n < p.batch; n += c.imagesPerCall) {
    const ImageBatch &b = p.batch - n >= c.imagesPerCall ? c.full : c.rest;
    memory src(b.srcBlocked, engine, scratch);
    memory dst(b.dstBlocked, engine, scratch + c.layout.dstOffset);
    memory srcPlain(b.srcPlain, engine, const_cast<float *>(x + n * imageIn));
    memory dstPlain(b.dstPlain, engine, y + n * imageOut);
    b.srcIn.execute(stream, srcPlain, src);
    if (c.epilogue.residual) {
      const float *r = static_cast<const float *>(call.inputs[3]) + n * imageOut;
      memory residual(b.dstPlain, engine, const_cast<float *>(r));
      b.dstIn.execute(stream, residual, dst);
    }
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
    if (p.hasBias)
      args.emplace(DNNL_ARG_BIAS, bias);
    b.conv.execute(stream, args);
    b.dstOut.execute(stream, dst, dstPlain);
  }
  stream.wait();
  return {};
}

//===----------------------------------------------------------------------===//
// Weights that change between calls: training's forward and both gradients
//===----------------------------------------------------------------------===//

/// The activations of one call in both layouts, and the reorders between
/// them: src is the convolution's input (or its gradient), dst its output
/// (or its gradient).
struct TrainingImages {
  memory::desc srcPlain, srcBlocked, dstPlain, dstBlocked;
  dnnl::reorder srcIn, srcOut, dstIn, dstOut;
  dnnl::primitive conv;
  memory::desc weightsBlocked;
};

struct TrainingConv {
  Conv2dParams p;
  ConvPass pass = ConvPass::Forward;
  ConvPrimitiveScratch layout;
  memory::desc weightsPlain, bias;
  /// Forward and input gradient: the weight into the primitive's format.
  /// Weight gradient: the primitive's result out of it, the first call's
  /// written (toPlain), each later call's added (addToPlain).
  dnnl::reorder toBlocked, toPlain, addToPlain;
  TrainingImages full, rest;
  int64_t imagesPerCall = 0;
};

dnnl::reorder makeReorder(const memory::desc &from, const memory::desc &to,
                          const dnnl::primitive_attr &attr = dnnl::primitive_attr()) {
  return dnnl::reorder(
      dnnl::reorder::primitive_desc(dnnlEngine(), from, dnnlEngine(), to, attr));
}

/// The descriptor of a gradient's primitive (backward data or weights): both
/// take the activations' layouts and the forward's as a hint.
template <typename Primitive>
typename Primitive::primitive_desc
backwardDesc(const TrainingImages &images, const memory::desc &anyWeights, const Conv2dParams &p,
             const dnnl::convolution_forward::primitive_desc &forward) {
  return typename Primitive::primitive_desc(
      {dnnl::algorithm::convolution_direct, images.srcBlocked, anyWeights, images.dstBlocked,
       {p.sh, p.sw}, {p.dh - 1, p.dw - 1}, {p.ph, p.pw}, {p.ph, p.pw}},
      dnnlEngine(), forward);
}

/// The primitive of `pass` for `images` images; false where oneDNN's
/// activations would not be channels-last or its weight would not fit the
/// scratch's bound.
bool buildTrainingImages(const Conv2dParams &p, ConvPass pass, int64_t images,
                         size_t weightBound, TrainingImages *out) {
  const memory::dims src{images, p.channels, p.height, p.width};
  const memory::dims dst{images, p.filters, p.oh, p.ow};
  out->srcPlain = memory::desc(src, kF32, Tag::nchw);
  out->srcBlocked = memory::desc(src, kF32, Tag::nhwc);
  out->dstPlain = memory::desc(dst, kF32, Tag::nchw);
  out->dstBlocked = memory::desc(dst, kF32, Tag::nhwc);
  const memory::desc anyWeights(weightDims(p), kF32, Tag::any);
  const bool bias = pass == ConvPass::Forward && p.hasBias;
  dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, out->srcBlocked,
       anyWeights, bias ? memory::desc({p.filters}, kF32, Tag::a) : memory::desc(),
       out->dstBlocked, {p.sh, p.sw}, {p.dh - 1, p.dw - 1}, {p.ph, p.pw}, {p.ph, p.pw}},
      dnnlEngine());
  // The layouts oneDNN picked: src, dst (or their gradients) and the weight.
  std::array<memory::desc, 3> seen;
  switch (pass) {
  case ConvPass::Forward:
    out->conv = dnnl::convolution_forward(forward);
    seen = {forward.src_desc(), forward.dst_desc(), forward.weights_desc()};
    break;
  case ConvPass::BackwardInput: {
    auto pd = backwardDesc<dnnl::convolution_backward_data>(*out, anyWeights, p, forward);
    out->conv = dnnl::convolution_backward_data(pd);
    seen = {pd.diff_src_desc(), pd.diff_dst_desc(), pd.weights_desc()};
    break;
  }
  case ConvPass::BackwardWeight: {
    auto pd = backwardDesc<dnnl::convolution_backward_weights>(*out, anyWeights, p, forward);
    out->conv = dnnl::convolution_backward_weights(pd);
    seen = {pd.src_desc(), pd.diff_dst_desc(), pd.diff_weights_desc()};
    break;
  }
  }
  out->weightsBlocked = seen[2];
  if (seen[0] != out->srcBlocked || seen[1] != out->dstBlocked ||
      out->weightsBlocked.get_size() > weightBound)
    return false;
  if (pass == ConvPass::BackwardInput) {
    out->dstIn = makeReorder(out->dstPlain, out->dstBlocked);
    out->srcOut = makeReorder(out->srcBlocked, out->srcPlain);
  } else {
    out->srcIn = makeReorder(out->srcPlain, out->srcBlocked);
    if (pass == ConvPass::Forward)
      out->dstOut = makeReorder(out->dstBlocked, out->dstPlain);
    else
      out->dstIn = makeReorder(out->dstPlain, out->dstBlocked);
  }
  return true;
}

/// inputs: forward x, w (, bias); input gradient g, w; weight gradient g, x.
Status runTrainingConv(TrainingConv &c, const KernelCall &call) {
  const Conv2dParams &p = c.p;
  dnnl::engine &engine = dnnlEngine();
  dnnl::stream stream(engine);
  char *scratch = static_cast<char *>(call.scratch);
  void *weightsScratch = scratch + c.layout.weightOffset;
  const int64_t imageIn = p.channels * p.height * p.width, imageOut = p.filters * p.oh * p.ow;
  if (c.pass != ConvPass::BackwardWeight) {
    memory plain(c.weightsPlain, engine, const_cast<void *>(call.inputs[1]));
    memory blocked(c.full.weightsBlocked, engine, weightsScratch);
    c.toBlocked.execute(stream, plain, blocked);
  }
  for (int64_t n = 0; n < p.batch; n += c.imagesPerCall) {
    const TrainingImages &b = p.batch - n >= c.imagesPerCall ? c.full : c.rest;
    memory src(b.srcBlocked, engine, scratch);
    memory dst(b.dstBlocked, engine, scratch + c.layout.dstOffset);
    memory weights(b.weightsBlocked, engine, weightsScratch);
    switch (c.pass) {
    case ConvPass::Forward: {
      const float *x = static_cast<const float *>(call.inputs[0]) + n * imageIn;
      float *y = static_cast<float *>(call.outputs[0]) + n * imageOut;
      memory xPlain(b.srcPlain, engine, const_cast<float *>(x)), yPlain(b.dstPlain, engine, y);
      b.srcIn.execute(stream, xPlain, src);
      std::unordered_map<int, memory> args = {
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
      if (p.hasBias)
        args.emplace(DNNL_ARG_BIAS, memory(c.bias, engine, const_cast<void *>(call.inputs[2])));
      b.conv.execute(stream, args);
      b.dstOut.execute(stream, dst, yPlain);
      break;
    }
    case ConvPass::BackwardInput: {
      const float *g = static_cast<const float *>(call.inputs[0]) + n * imageOut;
      float *dx = static_cast<float *>(call.outputs[0]) + n * imageIn;
      memory gPlain(b.dstPlain, engine, const_cast<float *>(g)), dxPlain(b.srcPlain, engine, dx);
      b.dstIn.execute(stream, gPlain, dst);
      b.conv.execute(stream, {{DNNL_ARG_DIFF_DST, dst},
                              {DNNL_ARG_WEIGHTS, weights},
                              {DNNL_ARG_DIFF_SRC, src}});
      b.srcOut.execute(stream, src, dxPlain);
      break;
    }
    case ConvPass::BackwardWeight: {
      const float *g = static_cast<const float *>(call.inputs[0]) + n * imageOut;
      const float *x = static_cast<const float *>(call.inputs[1]) + n * imageIn;
      memory gPlain(b.dstPlain, engine, const_cast<float *>(g));
      memory xPlain(b.srcPlain, engine, const_cast<float *>(x));
      b.srcIn.execute(stream, xPlain, src);
      b.dstIn.execute(stream, gPlain, dst);
      b.conv.execute(stream, {{DNNL_ARG_SRC, src},
                              {DNNL_ARG_DIFF_DST, dst},
                              {DNNL_ARG_DIFF_WEIGHTS, weights}});
      // The batch's sum, call by call in image order.
      memory dw(c.weightsPlain, engine, call.outputs[0]);
      (n == 0 ? c.toPlain : c.addToPlain).execute(stream, weights, dw);
      break;
    }
    }
  }
  stream.wait();
  return {};
}

} // namespace

Status buildTrainingConv(const KernelSignature &sig, const Conv2dParams &p, ConvPass pass,
                         KernelFn *fn) {
  const Shape input{p.batch, p.channels, p.height, p.width};
  const Shape weight{p.filters, p.channels / p.groups, p.kh, p.kw};
  const Shape output{p.batch, p.filters, p.oh, p.ow};
  auto c = std::make_shared<TrainingConv>();
  c->p = p;
  c->pass = pass;
  c->layout = conv2dPrimitiveScratch(input, weight, output, p.groups);
  c->imagesPerCall = std::min<int64_t>(p.batch, kConvPrimitiveImages);
  if (c->imagesPerCall <= 0 || c->layout.total == 0 || sig.scratchBytes < c->layout.total)
    return {};
  try {
    bool fits = buildTrainingImages(p, pass, c->imagesPerCall, c->layout.weightBytes, &c->full);
    if (const int64_t rest = p.batch % c->imagesPerCall; rest && fits)
      // One weight layout serves every call.
      fits = buildTrainingImages(p, pass, rest, c->layout.weightBytes, &c->rest) &&
             c->rest.weightsBlocked == c->full.weightsBlocked;
    if (!fits)
      return {};
    c->weightsPlain = memory::desc(weightDims(p), kF32, p.groups == 1 ? Tag::oihw : Tag::goihw);
    c->bias = memory::desc({p.filters}, kF32, Tag::a);
    if (pass == ConvPass::BackwardWeight) {
      dnnl::post_ops add;
      add.append_sum(1.0f);
      dnnl::primitive_attr accumulate;
      accumulate.set_post_ops(add);
      c->toPlain = makeReorder(c->full.weightsBlocked, c->weightsPlain);
      c->addToPlain = makeReorder(c->full.weightsBlocked, c->weightsPlain, accumulate);
    } else {
      c->toBlocked = makeReorder(c->weightsPlain, c->full.weightsBlocked);
    }
  } catch (const dnnl::error &e) {
    return CLEAVE_ERROR(sig.kernel, ": oneDNN cannot run this convolution (input ",
                        describe(input, DType::F32), ", weight ", describe(weight, DType::F32),
                        "): ", e.what());
  }
  *fn = [c, name = sig.kernel](const KernelCall &call) -> Status {
    try {
      return runTrainingConv(*c, call);
    } catch (const dnnl::error &e) {
      return CLEAVE_ERROR(name, ": oneDNN's convolution failed: ", e.what());
    }
  };
  return {};
}

Status buildPrimitiveConv2d(const KernelSignature &sig, const Conv2dParams &p,
                            const ConvEpilogue &epilogue, KernelFn *fn) {
  const TensorDesc &x = *sig.inputs[0], &w = *sig.inputs[1];
  if (!sig.ownsConstant(1))
    // An epilogue is inference's: with a weight that changes, the caller's
    // im2col + GEMM applies it.
    return epilogue.any() ? Status() : buildTrainingConv(sig, p, ConvPass::Forward, fn);
  auto c = std::make_shared<ConvPrimitives>();
  c->p = p;
  c->epilogue = epilogue;
  c->layout = conv2dPrimitiveScratch(x.shape, w.shape, sig.outputs[0].shape, p.groups);
  c->imagesPerCall = std::min<int64_t>(p.batch, kConvPrimitiveImages);
  if (c->imagesPerCall <= 0 || c->layout.total == 0 || sig.scratchBytes < c->layout.total)
    return {};
  try {
    memory::desc weightsBlocked;
    bool fits = buildImageBatch(p, epilogue, c->imagesPerCall, &c->full, &weightsBlocked);
    if (const int64_t rest = p.batch % c->imagesPerCall; rest && fits) {
      memory::desc restWeights;
      // One prepacked weight serves every call.
      fits = buildImageBatch(p, epilogue, rest, &c->rest, &restWeights) &&
             restWeights == weightsBlocked;
    }
    if (!fits)
      return {};
    c->weights = PrepackedWeight(
        memory::desc(weightDims(p), kF32, p.groups == 1 ? Tag::oihw : Tag::goihw), weightsBlocked);
    c->bias = memory::desc({p.filters}, kF32, Tag::a);
  } catch (const dnnl::error &e) {
    return CLEAVE_ERROR(sig.kernel, ": oneDNN cannot run this convolution (input ",
                        describe(x.shape, x.dtype), ", weight ", describe(w.shape, w.dtype),
                        "): ", e.what());
  }
  *fn = [c](const KernelCall &call) -> Status {
    try {
      return runConv(*c, call);
    } catch (const dnnl::error &e) {
      return CLEAVE_ERROR("conv2d: oneDNN's convolution failed: ", e.what());
    }
  };
  return {};
}

} // namespace cleave::runtime::cpu
