//===- TorchReference.h - run a TorchScript model with LibTorch eager ------===//
//
// The baseline cleave is measured and checked against: the model's own
// forward in LibTorch, in eval mode without autograd, on the same inputs.
// Lives in compiler/ because compiler/ is the only LibTorch user.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_COMPILER_TORCHREFERENCE_H
#define CLEAVE_COMPILER_TORCHREFERENCE_H

#include "runtime/Safetensors.h"

#include <memory>
#include <string>
#include <vector>

namespace cleave {

class TorchReference {
public:
  /// Loads `modelPath` and binds the tensors of `inputsPath` to forward's
  /// arguments by name. Returns null and sets `error` on failure.
  static std::unique_ptr<TorchReference> load(const std::string &modelPath,
                                              const std::string &inputsPath,
                                              std::string &error);
  virtual ~TorchReference() = default;
  /// One forward call; false and `error` set if it throws.
  virtual bool run(std::string &error) = 0;
  /// Writes the last run's outputs as output_0, output_1, ... (safetensors).
  virtual bool writeOutputs(const std::string &path, std::string &error) = 0;
};

/// Sets LibTorch's intra-op thread count.
void setTorchThreads(int threads);

} // namespace cleave

#endif // CLEAVE_COMPILER_TORCHREFERENCE_H
