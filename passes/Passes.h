//===- Passes.h - cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PASSES_H
