//===- TorchLoad.cpp - load a TorchScript file for import -----------------===//
//
// LibTorch 1.13's torch::jit::load ends with a backward-compatibility rewrite
// (rewriteQuantizedConvForBC): for every submodule it builds a
// SubgraphRewriter, parses four patterns of quantized convolutions as saved
// by PyTorch before 1.6, and matches them against each of the submodule's
// methods. A traced model has a class per submodule, so a 1T GPT's 1,543
// submodules cost 6,000 pattern parses: about a tenth of `cleave plan`'s
// time. cleave imports no quantized operator, so while it loads a model
// that rewrite cannot change anything cleave keeps.
//
// The definition of SubgraphRewriter::runOnModule below interposes
// LibTorch's (the executable's definition comes first in the dynamic
// symbol lookup; the rewrite's call goes through the PLT). While
// loadTorchScript runs on this thread it does nothing; everywhere else it
// does what LibTorch's does: run the registered patterns over every method
// of the module. ImporterTest checks both.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchLoad.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/subgraph_rewrite.h>
#include <torch/csrc/jit/serialization/import.h>

namespace {
thread_local bool loadingForImport = false;

/// Sets the flag for one load and restores what it was (a load inside a
/// load, should LibTorch ever nest them, leaves the outer one flagged).
struct LoadingForImport {
  bool outer = loadingForImport;
  LoadingForImport() { loadingForImport = true; }
  ~LoadingForImport() { loadingForImport = outer; }
};
} // namespace

namespace torch::jit {
Module SubgraphRewriter::runOnModule(const Module &module) {
  if (loadingForImport)
    return module;
  for (const Method &method : module.get_methods()) {
    std::shared_ptr<Graph> graph = toGraphFunction(method.function()).graph();
    runOnGraph(graph);
  }
  return module;
}
} // namespace torch::jit

namespace cleave {

torch::jit::Module loadTorchScript(const std::string &path, torch::jit::ExtraFilesMap &extra) {
  LoadingForImport guard;
  return torch::jit::load(path, c10::nullopt, extra);
}

} // namespace cleave
