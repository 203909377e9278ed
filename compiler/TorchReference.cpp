//===- TorchReference.cpp - run a TorchScript model with LibTorch eager ----===//

#include "compiler/TorchReference.h"

#include <ATen/Parallel.h>
#include <torch/script.h>

#include <map>

namespace cleave {
namespace {

namespace rt = cleave::runtime;

c10::ScalarType scalarType(rt::DType dtype) {
  switch (dtype) {
  case rt::DType::F32: return c10::kFloat;
  case rt::DType::BF16: return c10::kBFloat16;
  case rt::DType::F16: return c10::kHalf;
  case rt::DType::I64: return c10::kLong;
  case rt::DType::I32: return c10::kInt;
  case rt::DType::I1: return c10::kBool;
  }
  return c10::kFloat;
}

std::optional<rt::DType> dtypeOf(c10::ScalarType type) {
  switch (type) {
  case c10::kFloat: return rt::DType::F32;
  case c10::kBFloat16: return rt::DType::BF16;
  case c10::kHalf: return rt::DType::F16;
  case c10::kLong: return rt::DType::I64;
  case c10::kInt: return rt::DType::I32;
  case c10::kBool: return rt::DType::I1;
  default: return std::nullopt;
  }
}

void flatten(const c10::IValue &value, std::vector<at::Tensor> &out) {
  if (value.isTensor())
    out.push_back(value.toTensor());
  else if (value.isTuple())
    for (const c10::IValue &v : value.toTupleRef().elements())
      flatten(v, out);
  else if (value.isList())
    for (const c10::IValue &v : value.toListRef())
      flatten(v, out);
}

class TorchReferenceImpl : public TorchReference {
public:
  torch::jit::Module module;
  std::vector<c10::IValue> inputs;
  c10::IValue last;

  bool run(std::string &error) override {
    try {
      torch::NoGradGuard noGrad;
      last = module.forward(inputs);
      return true;
    } catch (const std::exception &e) {
      error = e.what();
      return false;
    }
  }

  bool writeOutputs(const std::string &path, std::string &error) override {
    std::vector<at::Tensor> tensors;
    flatten(last, tensors);
    std::vector<rt::SafetensorsTensor> outputs;
    for (size_t i = 0; i < tensors.size(); ++i) {
      tensors[i] = tensors[i].contiguous();
      std::optional<rt::DType> dtype = dtypeOf(tensors[i].scalar_type());
      if (!dtype) {
        error = "output " + std::to_string(i) + " has an unsupported dtype";
        return false;
      }
      rt::Shape shape(tensors[i].sizes().begin(), tensors[i].sizes().end());
      outputs.push_back({"output_" + std::to_string(i), {*dtype, shape}, tensors[i].data_ptr()});
    }
    rt::Status status = rt::writeSafetensors(path, outputs);
    error = status.message();
    return status.ok();
  }
};

} // namespace

std::unique_ptr<TorchReference> TorchReference::load(const std::string &modelPath,
                                                     const std::string &inputsPath,
                                                     std::string &error) {
  auto ref = std::make_unique<TorchReferenceImpl>();
  try {
    ref->module = torch::jit::load(modelPath);
    ref->module.eval();
  } catch (const std::exception &e) {
    error = modelPath + ": cannot load: " + std::string(e.what()).substr(0, 200);
    return nullptr;
  }
  rt::SafetensorsIndex index;
  if (rt::Status s = rt::readSafetensorsIndex(inputsPath, &index); !s.ok()) {
    error = s.message();
    return nullptr;
  }
  const auto &arguments = ref->module.get_method("forward").function().getSchema().arguments();
  for (size_t i = 1; i < arguments.size(); ++i) { // argument 0 is self
    const rt::SafetensorsEntry *entry = index.find(arguments[i].name());
    if (!entry) {
      error = inputsPath + ": missing input '" + arguments[i].name() + "'";
      return nullptr;
    }
    at::Tensor t = at::empty(entry->desc.shape, at::TensorOptions().dtype(
                                                    scalarType(entry->desc.dtype)));
    if (rt::Status s = rt::readSafetensorsTensor(index, *entry, t.data_ptr()); !s.ok()) {
      error = s.message();
      return nullptr;
    }
    ref->inputs.push_back(t);
  }
  return ref;
}

void setTorchThreads(int threads) {
  if (threads > 0)
    at::set_num_threads(threads);
}

} // namespace cleave
