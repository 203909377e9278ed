//===- Diagnostics.cpp - one-line diagnostics for the cleave CLI ----------===//

#include "cli/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace cleave {

static std::string where(Location loc) {
  std::string scope;
  if (auto name = llvm::dyn_cast<NameLoc>(loc)) {
    scope = name.getName().str();
    loc = name.getChildLoc();
  }
  std::string text;
  if (auto file = llvm::dyn_cast<FileLineColLoc>(loc)) {
    text = file.getFilename().str();
    if (file.getLine())
      text += ":" + std::to_string(file.getLine());
  }
  if (!scope.empty())
    text += (text.empty() ? "in " : " (in ") + scope + (text.empty() ? "" : ")");
  return text;
}

static void print(const Diagnostic &diag, llvm::StringRef prefix) {
  auto &os = llvm::errs();
  const char *severity = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                         : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                             : "note";
  std::string at = where(diag.getLocation());
  os << prefix << severity << ": " << (at.empty() ? "" : at + ": ") << diag.str() << "\n";
  for (const Diagnostic &note : diag.getNotes())
    print(note, "  ");
}

CliDiagnostics::CliDiagnostics(MLIRContext &context) : context(context) {
  id = context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++errorCount;
    print(diag, "cleave: ");
    return success();
  });
}

CliDiagnostics::~CliDiagnostics() { context.getDiagEngine().eraseHandler(id); }

} // namespace cleave
