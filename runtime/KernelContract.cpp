#include "runtime/KernelContract.h"

#include <algorithm>
#include <sstream>

namespace cleave::runtime {

Status noKernelFor(const char *backend, const std::string &kernel, DType dtype) {
  return CLEAVE_ERROR(backend, " backend has no ", dtypeName(dtype), " kernel for '", kernel,
                      "' yet");
}

Status checkShapes(const KernelSignature &sig) {
  auto check = [&](const TensorDesc &desc, const char *what, size_t i) -> Status {
    for (int64_t d : desc.shape)
      if (d < 0)
        return CLEAVE_ERROR(sig.kernel, ": ", what, " ", i, " has a negative dim: ",
                            describe(desc.shape, desc.dtype));
    return {};
  };
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (sig.inputs[i])
      CLEAVE_RETURN_IF_ERROR(check(*sig.inputs[i], "input", i));
  for (size_t i = 0; i < sig.outputs.size(); ++i)
    CLEAVE_RETURN_IF_ERROR(check(sig.outputs[i], "output", i));
  return {};
}

Status checkArity(const KernelSignature &sig, size_t minInputs, size_t maxInputs, size_t outputs) {
  size_t n = sig.inputs.size();
  if (n < minInputs || n > maxInputs) {
    if (minInputs == maxInputs)
      return CLEAVE_ERROR(sig.kernel, ": expects ", minInputs, " input", minInputs == 1 ? "" : "s",
                          ", got ", n);
    if (maxInputs == SIZE_MAX)
      return CLEAVE_ERROR(sig.kernel, ": expects at least ", minInputs, " input",
                          minInputs == 1 ? "" : "s", ", got ", n);
    return CLEAVE_ERROR(sig.kernel, ": expects ", minInputs, " to ", maxInputs, " inputs, got ", n);
  }
  if (sig.outputs.size() != outputs)
    return CLEAVE_ERROR(sig.kernel, ": expects ", outputs, " output", outputs == 1 ? "" : "s",
                        ", got ", sig.outputs.size());
  return {};
}

Status requirePresent(const KernelSignature &sig, size_t index, const char *name) {
  if (index >= sig.inputs.size() || !sig.inputs[index])
    return CLEAVE_ERROR(sig.kernel, ": input ", index, " (", name,
                        ") is missing; it is not optional");
  return {};
}

Status checkDType(const KernelSignature &sig, const char *backend, const char *name,
                  const TensorDesc &desc, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (d == desc.dtype)
      return {};
  bool hasF32 = false;
  for (DType d : allowed)
    hasF32 |= d == DType::F32;
  if (hasF32 && (desc.dtype == DType::BF16 || desc.dtype == DType::F16))
    return noKernelFor(backend, sig.kernel, desc.dtype);
  std::string names;
  for (DType d : allowed)
    names += std::string(names.empty() ? "" : ", ") + dtypeName(d);
  return CLEAVE_ERROR(sig.kernel, ": ", name, " ", describe(desc.shape, desc.dtype),
                      " has element type ", dtypeName(desc.dtype), ", expected ",
                      allowed.size() == 1 ? "" : "one of ", names);
}

Status checkSameDType(const KernelSignature &sig, const char *nameA, const TensorDesc &a,
                      const char *nameB, const TensorDesc &b) {
  if (a.dtype != b.dtype)
    return CLEAVE_ERROR(sig.kernel, ": ", nameA, " ", describe(a.shape, a.dtype), " and ", nameB,
                        " ", describe(b.shape, b.dtype), " have different element types");
  return {};
}

Status checkOutput(const KernelSignature &sig, const TensorDesc &expected, const std::string &how) {
  const TensorDesc &out = sig.outputs[0];
  if (out != expected)
    return CLEAVE_ERROR(sig.kernel, ": output is ", describe(out.shape, out.dtype), ", expected ",
                        describe(expected.shape, expected.dtype), how.empty() ? "" : " (", how,
                        how.empty() ? "" : ")");
  return {};
}

Status withKernel(const KernelSignature &sig, Status status) { return status.prepend(sig.kernel); }

Status checkDim(const KernelSignature &sig, const char *attr, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return CLEAVE_ERROR(sig.kernel, ": ", attr, " ", dim, " is out of range for rank ", rank);
  return {};
}

Status checkPair(const KernelSignature &sig, const char *attr, const std::vector<int64_t> &pair,
                 int64_t min) {
  if (pair.size() != 2)
    return CLEAVE_ERROR(sig.kernel, ": '", attr, "' must have 2 entries (height, width), got ",
                        formatList(pair));
  if (pair[0] < min || pair[1] < min)
    return CLEAVE_ERROR(sig.kernel, ": '", attr, "' entries must be >= ", min, ", got ",
                        formatList(pair));
  return {};
}

std::string formatList(const std::vector<int64_t> &values) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < values.size(); ++i)
    os << (i ? ", " : "") << values[i];
  os << "]";
  return os.str();
}

std::optional<Shape> broadcastShapes(const std::vector<Shape> &shapes) {
  size_t rank = 0;
  for (const Shape &s : shapes)
    rank = std::max(rank, s.size());
  Shape result(rank, 1);
  for (const Shape &s : shapes) {
    size_t offset = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t &dim = result[offset + i];
      if (s[i] == dim || s[i] == 1)
        continue;
      if (dim != 1)
        return std::nullopt;
      dim = s[i];
    }
  }
  return result;
}

std::vector<int64_t> contiguousStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

BroadcastLayout makeBroadcastLayout(const Shape &output, const std::vector<Shape> &inputs) {
  BroadcastLayout layout;
  layout.operands = static_cast<int>(inputs.size());
  const size_t rank = output.size();
  // Per output dim, the stride of each operand (0 where it is stretched).
  std::vector<std::array<int64_t, kMaxOperands>> strides(rank);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape &in = inputs[k];
    std::vector<int64_t> inStrides = contiguousStrides(in);
    size_t offset = rank - in.size();
    for (size_t d = 0; d < rank; ++d) {
      int64_t s = 0;
      if (d >= offset && in[d - offset] != 1)
        s = inStrides[d - offset];
      strides[d][k] = s;
    }
  }
  // Drop size-1 dims, then merge dim d into the previous one when every
  // operand steps through them as one dim.
  for (size_t d = 0; d < rank; ++d) {
    if (output[d] == 1)
      continue;
    if (!layout.dims.empty()) {
      bool mergeable = true;
      for (int k = 0; k < layout.operands; ++k)
        mergeable &= layout.strides.back()[k] == strides[d][k] * output[d];
      if (mergeable) {
        layout.dims.back() *= output[d];
        layout.strides.back() = strides[d];
        continue;
      }
    }
    layout.dims.push_back(output[d]);
    layout.strides.push_back(strides[d]);
  }
  if (layout.dims.empty()) {
    layout.dims.push_back(1);
    layout.strides.push_back({});
  }
  return layout;
}

} // namespace cleave::runtime
