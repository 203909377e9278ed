//===- CleaveDialect.h - the cleave dialect ---------------------*- C++ -*-===//
//
// Include this to use the cleave dialect: it brings the dialect, its enums,
// attributes and ops.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
#define CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/cleave/CleaveDialect.h.inc"
#include "dialects/cleave/CleaveEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/cleave/CleaveAttrs.h.inc"

#include "dialects/cleave/ShapeInference.h"

namespace mlir::cleave {
/// The op's own attributes, for its kernel: everything but operand segment
/// sizes and discardable (dotted) annotations.
llvm::SmallVector<NamedAttribute> getDefaultKernelAttributes(Operation *op);
} // namespace mlir::cleave
#include "dialects/cleave/CleaveInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/cleave/CleaveOps.h.inc"

#endif // CLEAVE_DIALECTS_CLEAVE_CLEAVEDIALECT_H
