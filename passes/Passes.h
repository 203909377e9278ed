//===- Passes.h - cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/Pass.h"

#include <functional>

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The data of a buffer (row-major, its IR type's element type) by the
/// param's name, or null when it is unknown (meta models, parsed IR).
using ParamDataLookup = std::function<const void *(llvm::StringRef name)>;

/// -cleave-fuse-attention, reading mask buffers through `paramData`.
std::unique_ptr<Pass> createFuseAttention(ParamDataLookup paramData);

/// How an imported model is prepared for analysis, planning and emission.
struct PrepareOptions {
  /// Form cleave.attention (`--no-fuse-attention` turns it off, to compare).
  bool fuseAttention = true;
  /// The model's buffer data, so masks held in buffers can be proved causal.
  ParamDataLookup paramData;
  /// The float type programs compute in (`cleave compile --dtype`): f32
  /// keeps the imported types; bf16 runs -cleave-convert-precision.
  std::string dtype = "f32";
};

/// Canonicalize and CSE: fold what the importer left.
void addCleanupPipeline(OpPassManager &pm);
/// What every command runs on an imported model before it analyzes, plans
/// or emits it: the clean-up, attention fusion (which reads mask buffers at
/// their imported type), then the precision conversion for `dtype`. The
/// cost model, the planner and the memory planner all see this IR.
void addPreparePipeline(OpPassManager &pm, const PrepareOptions &options = {});
/// What `cleave compile` runs between import and emission for one device:
/// the preparation, then memory planning.
void addSingleDevicePlanPipeline(OpPassManager &pm, const PrepareOptions &options = {});

/// Adds `cleave-convert-precision` to `dtype` on every function; nothing for
/// f32 (the imported precision).
void addPrecisionPipeline(OpPassManager &pm, llvm::StringRef dtype);

/// Registers the passes and the named pipelines `cleave-prepare` and
/// `cleave-single-device-plan` (options `fuse-attention`, default true, and
/// `dtype`, f32 or bf16, default f32).
void registerCleavePipelines();

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PASSES_H
