//===- TestLayerGroups.cpp - print the layers of a model ------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Layers.h"
#include "passes/Passes.h"

#include "llvm/Support/FormatVariadic.h"

#include <set>

namespace mlir::cleave {
#define GEN_PASS_DEF_TESTLAYERGROUPS
#include "passes/Passes.h.inc"

namespace {

struct TestLayerGroupsPass : impl::TestLayerGroupsBase<TestLayerGroupsPass> {
  void runOnOperation() override {
    std::vector<Layer> layers = discoverLayers(getOperation());
    auto &os = llvm::outs();
    os << "layers of @" << getOperation().getName() << "\n";
    std::set<unsigned> kinds;
    for (const Layer &layer : layers) {
      int64_t params = 0;
      for (Operation *p : layer.params)
        params += cast<RankedTensorType>(p->getResult(0).getType()).getNumElements();
      kinds.insert(layer.kind);
      os << llvm::formatv("{0}: {1} ops, {2} param elements, kind {3}", layer.name,
                          layer.ops.size(), params, layers[layer.kind].name);
      os << "\n";
    }
    os << layers.size() << " layers, " << kinds.size() << " kinds\n";
  }
};

} // namespace
} // namespace mlir::cleave
