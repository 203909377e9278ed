//===- Passes.h - cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/Pass.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// What `cleave compile` runs between import and emission for one device:
/// canonicalize and CSE (fold what the importer left), then memory planning.
void addSingleDevicePlanPipeline(OpPassManager &pm);
/// The clean-up that pipeline starts with (canonicalize, CSE): what the
/// cost model and the planner analyze, without a single-device memory plan.
void addCleanupPipeline(OpPassManager &pm);

/// Registers the passes and the named pipeline `cleave-single-device-plan`.
void registerCleavePipelines();

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PASSES_H
