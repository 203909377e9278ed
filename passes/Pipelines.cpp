//===- Pipelines.cpp - the pass pipelines of cleave compile ---------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::cleave {

void addCleanupPipeline(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void addPrecisionPipeline(OpPassManager &pm, llvm::StringRef dtype) {
  if (dtype == "f32")
    return;
  ConvertPrecisionOptions options;
  options.dtype = dtype.str();
  pm.addNestedPass<func::FuncOp>(createConvertPrecision(options));
}

void addPreparePipeline(OpPassManager &pm, const PrepareOptions &options) {
  addCleanupPipeline(pm);
  // After folding (CSE makes the scale and -inf constants shared scalars),
  // before anything measures memory or cost.
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createFuseAttention(options.paramData));
  // Last: fusion reads mask buffers' data at their imported (f32) type.
  addPrecisionPipeline(pm, options.dtype);
}

void addSingleDevicePlanPipeline(OpPassManager &pm, const PrepareOptions &options) {
  addPreparePipeline(pm, options);
  pm.addNestedPass<func::FuncOp>(createPlanMemory());
}

namespace {
struct PipelineOptions : PassPipelineOptions<PipelineOptions> {
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("form cleave.attention (-cleave-fuse-attention)"),
                             llvm::cl::init(true)};
  Option<std::string> dtype{*this, "dtype",
                            llvm::cl::desc("the float type programs compute in: f32 or bf16"),
                            llvm::cl::init("f32")};

  PrepareOptions prepare() const {
    PrepareOptions options;
    options.fuseAttention = fuseAttention;
    options.dtype = dtype;
    return options;
  }
};
} // namespace

void registerCleavePipelines() {
  registerCleavePasses();
  PassPipelineRegistration<PipelineOptions>(
      "cleave-prepare",
      "fold, fuse attention, convert to dtype: what analysis and planning see",
      [](OpPassManager &pm, const PipelineOptions &options) {
        addPreparePipeline(pm, options.prepare());
      });
  PassPipelineRegistration<PipelineOptions>("cleave-single-device-plan",
                                            "fold, fuse attention, convert to dtype, then plan "
                                            "memory for one device",
                                            [](OpPassManager &pm, const PipelineOptions &options) {
                                              addSingleDevicePlanPipeline(pm, options.prepare());
                                            });
}

} // namespace mlir::cleave
