//===- Pipelines.cpp - the pass pipelines of cleave compile ---------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::cleave {

void addCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addSingleDevicePlanPipeline(OpPassManager &pm) {
  addCleanupPipeline(pm);
  pm.addNestedPass<func::FuncOp>(createPlanMemory());
}

void registerCleavePipelines() {
  registerCleavePasses();
  PassPipelineRegistration<>("cleave-single-device-plan",
                             "fold, then plan memory for one device",
                             addSingleDevicePlanPipeline);
}

} // namespace mlir::cleave
