//===- ConvPrimitive.cpp - conv2d through oneDNN's convolution primitive --===//

#include "runtime/cpu/ConvPrimitive.h"
#include "runtime/cpu/ConvScratch.h"
#include "runtime/cpu/Dnnl.h"

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
  dnnl::reorder srcIn, dstOut;
  dnnl::convolution_forward conv;
};

struct ConvPrimitives {
  Conv2dParams p;
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
bool buildImageBatch(const Conv2dParams &p, int64_t images, ImageBatch *out,
                     memory::desc *weightsBlocked) {
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
  auto pd = dnnl::convolution_forward::primitive_desc(desc, dnnlEngine());
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

} // namespace

Status buildPrimitiveConv2d(const KernelSignature &sig, const Conv2dParams &p, KernelFn *fn) {
  const TensorDesc &x = *sig.inputs[0], &w = *sig.inputs[1];
  if (!sig.ownsConstant(1))
    return {};
  auto c = std::make_shared<ConvPrimitives>();
  c->p = p;
  c->layout = conv2dPrimitiveScratch(x.shape, sig.outputs[0].shape);
  c->imagesPerCall = std::min<int64_t>(p.batch, kConvPrimitiveImages);
  if (c->imagesPerCall <= 0 || c->layout.total == 0 || sig.scratchBytes < c->layout.total)
    return {};
  try {
    memory::desc weightsBlocked;
    bool fits = buildImageBatch(p, c->imagesPerCall, &c->full, &weightsBlocked);
    if (const int64_t rest = p.batch % c->imagesPerCall; rest && fits) {
      memory::desc restWeights;
      // One prepacked weight serves every call.
      fits = buildImageBatch(p, rest, &c->rest, &restWeights) && restWeights == weightsBlocked;
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
