//===- CleaveDialect.cpp - the cleave dialect -----------------------------===//

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cleave;

#include "dialects/cleave/CleaveDialect.cpp.inc"
#include "dialects/cleave/CleaveEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/cleave/CleaveAttrs.cpp.inc"

void CleaveDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/cleave/CleaveAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/cleave/CleaveOps.cpp.inc"
      >();
}

Operation *CleaveDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
