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

/// The tensors of a safetensors file of example inputs (`--example-inputs`),
/// as specs in the order their data lies in the file. Returns std::nullopt
/// and sets `error` (naming the file) when it cannot be read or holds a dtype
/// cleave has no input type for.
std::optional<std::vector<InputSpec>> readExampleInputs(const std::string &path,
                                                        std::string &error);

/// The example for each of forward's inputs `names` (null where none): the
/// tensor of the same name or, when no name matches and every input is
/// named as TorchScript names the inputs of `forward(self, *args)`
/// (argument_1, argument_2, ... when traced; input, input0, input1, ... once
/// saved and loaded), the file's tensors by position (the order their data
/// lies in the file), provided it holds exactly one per input.
std::vector<const InputSpec *> matchExampleInputs(const std::vector<std::string> &names,
                                                  const std::vector<InputSpec> &examples);

} // namespace cleave

#endif // CLEAVE_COMPILER_INPUTSPEC_H
