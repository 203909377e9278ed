//===- TorchLoad.h - load a TorchScript file for import ---------*- C++ -*-===//
//
// torch::jit::load without the rewrite of pre-1.6 quantized convolutions,
// which cleave's import never needs (TorchLoad.cpp says how and why).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_TORCHLOAD_H
#define CLEAVE_COMPILER_TORCHLOAD_H

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <string>

namespace cleave {

/// torch::jit::load(path, no device, extra), skipping LibTorch's rewrite of
/// quantized convolutions saved by PyTorch before 1.6. Throws what
/// torch::jit::load throws.
torch::jit::Module loadTorchScript(const std::string &path, torch::jit::ExtraFilesMap &extra);

} // namespace cleave

#endif // CLEAVE_COMPILER_TORCHLOAD_H
