//===- Diagnostics.cpp - one-line diagnostics for the cleave CLI ----------===//

#include "cli/Diagnostics.h"
#include "dialects/cleave/Locations.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace cleave {

static void print(const Diagnostic &diag, llvm::StringRef prefix) {
  auto &os = llvm::errs();
  const char *severity = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                         : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                             : "note";
  std::string at = mlir::cleave::describeLocation(diag.getLocation());
  os << prefix << severity << ": " << (at.empty() ? "" : at + ": ") << diag.str() << "\n";
  for (const Diagnostic &note : diag.getNotes())
    print(note, "  ");
}

CliDiagnostics::CliDiagnostics(MLIRContext &context) : context(context) {
  // A user reads the source line an error names; a dump of the failing
  // function's IR is for cleave-opt and the plan's ir/ snapshots.
  context.printOpOnDiagnostic(false);
  id = context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      ++errorCount;
    print(diag, "cleave: ");
    return success();
  });
}

CliDiagnostics::~CliDiagnostics() { context.getDiagEngine().eraseHandler(id); }

} // namespace cleave
