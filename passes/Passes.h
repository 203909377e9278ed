//===- Passes.h - cleave passes ---------------------------------*- C++ -*-===//

#ifndef CLEAVE_PASSES_PASSES_H
#define CLEAVE_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mlir::cleave {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The module scope of an op: the name of its outermost NameLoc, or "".
std::string moduleScope(Location loc);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PASSES_H
