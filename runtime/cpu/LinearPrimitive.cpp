//===- LinearPrimitive.cpp - linear through oneDNN's matmul primitive -----===//

#include "runtime/cpu/LinearPrimitive.h"
#include "runtime/cpu/Dnnl.h"

#include <memory>
#include <unordered_map>

namespace cleave::runtime::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

struct LinearPrimitive {
  bool hasBias = false;
  memory::desc input, bias, output;
  PrepackedWeight weights;
  dnnl::matmul matmul;
};

Status runLinear(LinearPrimitive &l, const KernelCall &call) {
  dnnl::engine &engine = dnnlEngine();
  dnnl::stream stream(engine);
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, memory(l.input, engine, const_cast<void *>(call.inputs[0]))},
      {DNNL_ARG_WEIGHTS, l.weights.use(const_cast<void *>(call.inputs[1]), stream)},
      {DNNL_ARG_DST, memory(l.output, engine, call.outputs[0])}};
  if (l.hasBias)
    args.emplace(DNNL_ARG_BIAS, memory(l.bias, engine, const_cast<void *>(call.inputs[2])));
  l.matmul.execute(stream, args);
  stream.wait();
  return {};
}

} // namespace

Status buildPrimitiveLinear(const KernelSignature &sig, const LinearParams &p, KernelFn *fn) {
  if (!sig.ownsConstant(1) || p.m == 0 || p.n == 0 || p.k == 0)
    return {};
  auto l = std::make_shared<LinearPrimitive>();
  l->hasBias = p.hasBias;
  try {
    l->input = memory::desc({p.m, p.k}, kF32, Tag::ab);
    // The weight [n, k] is the primitive's k x n operand transposed.
    const memory::desc weightsPlain({p.k, p.n}, kF32, Tag::ba);
    l->output = memory::desc({p.m, p.n}, kF32, Tag::ab);
    if (p.hasBias)
      l->bias = memory::desc({1, p.n}, kF32, Tag::ab);
    auto pd = dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(l->input, memory::desc({p.k, p.n}, kF32, Tag::any), l->bias, l->output),
        dnnlEngine());
    if (pd.weights_desc().get_size() != weightsPlain.get_size() || pd.src_desc() != l->input ||
        pd.dst_desc() != l->output)
      return {};
    l->weights = PrepackedWeight(weightsPlain, pd.weights_desc());
    l->matmul = dnnl::matmul(pd);
  } catch (const dnnl::error &e) {
    const TensorDesc &x = *sig.inputs[0], &w = *sig.inputs[1];
    return CLEAVE_ERROR(sig.kernel, ": oneDNN cannot run this linear (input ",
                        describe(x.shape, x.dtype), ", weight ", describe(w.shape, w.dtype),
                        "): ", e.what());
  }
  *fn = [l](const KernelCall &call) -> Status {
    try {
      return runLinear(*l, call);
    } catch (const dnnl::error &e) {
      return CLEAVE_ERROR("linear: oneDNN's matmul failed: ", e.what());
    }
  };
  return {};
}

} // namespace cleave::runtime::cpu
