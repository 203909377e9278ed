//===- InputSpec.h - model input names, shapes and dtypes -------*- C++ -*-===//
//
// Parses `--input-shape NAME=2x64:i64` and the dtype spellings cleave uses in
// its files (f32, bf16, f16, i64, i32, i1). Independent of LibTorch and MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_INPUTSPEC_H
#define CLEAVE_COMPILER_INPUTSPEC_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype = "f32";
};

/// True for the dtype spellings cleave accepts.
bool isKnownDtype(const std::string &dtype);

/// Bytes per element of a known dtype (i1 takes one byte).
int64_t dtypeBytes(const std::string &dtype);

/// Parses `NAME=D0xD1x...[:DTYPE]` (a scalar input is `NAME=scalar[:DTYPE]`).
/// Returns std::nullopt and sets `error` to a one-line reason on bad input.
std::optional<InputSpec> parseInputSpec(const std::string &text,
                                        std::string &error);

} // namespace cleave

#endif // CLEAVE_COMPILER_INPUTSPEC_H
