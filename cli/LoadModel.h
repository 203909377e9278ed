//===- LoadModel.h - a model's forward function, for analysis --*- C++ -*-===//
//
// `cleave cost` and `cleave plan` read the same thing: the model's @forward
// after the clean-up `cleave compile` starts with (folding, CSE), so what
// they analyze is what a plan executes. MODEL is TorchScript (with weights or meta) or cleave IR.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_LOADMODEL_H
#define CLEAVE_CLI_LOADMODEL_H

#include "compiler/Importer.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace cleave {

/// Imports or parses `path` and runs the clean-up. On failure
/// the error has been reported and `exitCode` says which kind it was (1 bad
/// input, 2 unsupported ops).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
loadForwardModule(mlir::MLIRContext &context, const std::string &path,
                  const ImportOptions &import, int &exitCode);

} // namespace cleave

#endif // CLEAVE_CLI_LOADMODEL_H
