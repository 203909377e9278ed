//===- InputSpec.cpp - model input names, shapes and dtypes ---------------===//

#include "compiler/InputSpec.h"
#include "runtime/Safetensors.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <regex>

namespace cleave {

static const char *const kDtypes[] = {"f32", "bf16", "f16", "i64", "i32", "i1"};

bool isKnownDtype(const std::string &dtype) {
  for (const char *known : kDtypes)
    if (dtype == known)
      return true;
  return false;
}

int64_t dtypeBytes(const std::string &dtype) {
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "bf16" || dtype == "f16")
    return 2;
  if (dtype == "i64")
    return 8;
  return 1;
}

std::optional<InputSpec> parseInputSpec(const std::string &text,
                                        std::string &error) {
  auto fail = [&](const std::string &why) -> std::optional<InputSpec> {
    error = "bad --input-shape '" + text + "': " + why +
            " (expected NAME=2x64 or NAME=2x64:i64)";
    return std::nullopt;
  };
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return fail("missing input name");
  InputSpec spec;
  spec.name = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  if (size_t colon = rest.find(':'); colon != std::string::npos) {
    spec.dtype = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (!isKnownDtype(spec.dtype))
      return fail("unknown dtype '" + spec.dtype +
                  "' (known: f32, bf16, f16, i64, i32, i1)");
  }
  if (rest == "scalar")
    return spec;
  if (rest.empty())
    return fail("missing shape");
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t x = rest.find('x', pos);
    std::string dim = rest.substr(pos, x == std::string::npos ? x : x - pos);
    if (dim.empty() || dim.size() > 18)
      return fail("dim '" + dim + "' is not a non-negative integer");
    for (char c : dim)
      if (!std::isdigit(static_cast<unsigned char>(c)))
        return fail("dim '" + dim + "' is not a non-negative integer");
    // Zero-size dims are shapes like any other (an empty batch, no boxes).
    spec.shape.push_back(std::stoll(dim));
    if (x == std::string::npos)
      break;
    pos = x + 1;
  }
  return spec;
}

std::optional<std::vector<InputSpec>> readExampleInputs(const std::string &path,
                                                        std::string &error) {
  runtime::SafetensorsIndex index;
  runtime::Status status = runtime::readSafetensorsIndex(path, &index);
  if (!status.ok()) {
    error = "--example-inputs: " + status.message();
    return std::nullopt;
  }
  if (index.entries.empty()) {
    error = "--example-inputs: '" + path + "' holds no tensors";
    return std::nullopt;
  }
  std::vector<InputSpec> specs;
  for (const runtime::SafetensorsEntry &entry : index.entries) {  // sorted by data offset
    InputSpec spec;
    spec.name = entry.name;
    spec.shape.assign(entry.desc.shape.begin(), entry.desc.shape.end());
    spec.dtype = runtime::dtypeName(entry.desc.dtype);
    specs.push_back(spec);
  }
  return specs;
}

std::vector<const InputSpec *> matchExampleInputs(const std::vector<std::string> &names,
                                                  const std::vector<InputSpec> &examples) {
  std::vector<const InputSpec *> match(names.size(), nullptr);
  bool anyByName = false;
  for (size_t i = 0; i < names.size(); ++i)
    for (const InputSpec &example : examples)
      if (example.name == names[i]) {
        match[i] = &example;
        anyByName = true;
      }
  // torch.jit.trace names the inputs of forward(self, *args) argument_1,
  // argument_2, ...; saved and loaded again they are input, input0, input1, ...
  static const std::regex traceArg("argument_[0-9]+|input[0-9]*");
  bool positional = !anyByName && !names.empty() && examples.size() == names.size() &&
                    std::all_of(names.begin(), names.end(), [](const std::string &n) {
                      return std::regex_match(n, traceArg);
                    });
  if (positional)
    for (size_t i = 0; i < names.size(); ++i)
      match[i] = &examples[i];
  return match;
}

} // namespace cleave
