//===- LoadModel.h - a model's forward function, for analysis --*- C++ -*-===//
//
// `cleave cost` and `cleave plan` read the same thing: the model's @forward
// after the preparation `cleave compile` starts with (folding, CSE,
// attention fusion), so what they analyze is what a plan executes. MODEL is
// TorchScript (with weights or meta) or cleave IR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_LOADMODEL_H
#define CLEAVE_CLI_LOADMODEL_H

#include "compiler/Importer.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace cleave {

/// Imports or parses `path` and prepares it (addPreparePipeline; attention
/// fusion unless `fuseAttention` is false). On failure the error has been
/// reported and `exitCode` says which kind it was (1 bad input, 2
/// unsupported ops).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
loadForwardModule(mlir::MLIRContext &context, const std::string &path, const ImportOptions &import,
                  int &exitCode, bool fuseAttention = true);

/// The data of an imported model's params by name, for the preparation
/// (a causal mask held in a buffer); valid while `model` lives.
mlir::cleave::ParamDataLookup paramDataOf(const ImportedModel &model);

} // namespace cleave

#endif // CLEAVE_CLI_LOADMODEL_H
