//===- Locations.cpp - the module-scope location convention ---------------===//

#include "dialects/cleave/Locations.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace mlir::cleave {

std::string moduleScope(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto scope = moduleScope(inner); !scope.empty())
        return scope;
  return "";
}

std::string describeLocation(Location loc, llvm::StringRef noFile) {
  std::string scope;
  if (auto name = llvm::dyn_cast<NameLoc>(loc)) {
    scope = name.getName().str();
    loc = name.getChildLoc();
  }
  std::string text = noFile.str();
  if (auto file = llvm::dyn_cast<FileLineColLoc>(loc)) {
    text = file.getFilename().str();
    if (file.getLine())
      text += ":" + std::to_string(file.getLine());
  }
  if (!scope.empty())
    text = text.empty() ? "in " + scope : text + " (in " + scope + ")";
  return text;
}

} // namespace mlir::cleave
