//===- Locations.h - the module-scope location convention -------*- C++ -*-===//
//
// cleave ops carry NameLoc(module scope) around the user's FileLineColLoc.
// These helpers read that convention back.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_LOCATIONS_H
#define CLEAVE_DIALECTS_CLEAVE_LOCATIONS_H

#include "mlir/IR/Location.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::cleave {

/// The module scope of a location: the name of its outermost NameLoc
/// (looking inside FusedLocs), or "".
std::string moduleScope(Location loc);

/// `FILE:LINE (in SCOPE)` for people; `noFile` stands in for a location
/// without a file (so the result may be `in SCOPE` or "").
std::string describeLocation(Location loc, llvm::StringRef noFile = "");

} // namespace mlir::cleave

#endif // CLEAVE_DIALECTS_CLEAVE_LOCATIONS_H
