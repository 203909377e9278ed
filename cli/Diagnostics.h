//===- Diagnostics.h - one-line diagnostics for the cleave CLI --*- C++ -*-===//

#ifndef CLEAVE_CLI_DIAGNOSTICS_H
#define CLEAVE_CLI_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace cleave {

/// Prints diagnostics as `cleave: error: FILE:LINE (in SCOPE): message`,
/// notes indented below, and counts the errors.
class CliDiagnostics {
public:
  explicit CliDiagnostics(mlir::MLIRContext &context);
  ~CliDiagnostics();
  unsigned errors() const { return errorCount; }

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID id;
  unsigned errorCount = 0;
};

} // namespace cleave

#endif // CLEAVE_CLI_DIAGNOSTICS_H
