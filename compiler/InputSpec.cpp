//===- InputSpec.cpp - model input names, shapes and dtypes ---------------===//

#include "compiler/InputSpec.h"

#include <cctype>
#include <limits>

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

} // namespace cleave
