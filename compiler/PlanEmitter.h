//===- PlanEmitter.h - write a plan directory -----------------------------===//
//
// The last compiler step: a memory-planned function becomes a plan directory
// the runtime loads (docs/plan-format.md). The directory appears complete or
// not at all: it is written under a temporary name and renamed into place.
//
//===----------------------------------------------------------------------===//
#ifndef CLEAVE_COMPILER_PLANEMITTER_H
#define CLEAVE_COMPILER_PLANEMITTER_H

#include "compiler/Importer.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>
#include <vector>

namespace cleave {

struct PlanEmitOptions {
  /// The model file the plan was compiled from, recorded in the manifest.
  std::string modelSource;
  /// IR snapshots written to ir/<name>.mlir, for people reading the plan.
  std::vector<std::pair<std::string, std::string>> irSnapshots;
};

/// Writes the single-device plan of `module`, whose @forward has been through
/// `cleave-plan-memory`, to `dir`, taking weight data from `params`. An
/// existing plan directory at `dir` is replaced; any other existing file or
/// non-empty directory is an error. Errors are reported as diagnostics.
mlir::LogicalResult emitSingleDevicePlan(mlir::ModuleOp module,
                                         const decltype(ImportedModel::params) &params,
                                         const std::string &dir,
                                         const PlanEmitOptions &options);

} // namespace cleave

#endif // CLEAVE_COMPILER_PLANEMITTER_H
