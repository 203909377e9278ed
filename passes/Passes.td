//===- Passes.td - cleave passes ---------------------------*- tablegen -*-===//

#ifndef CLEAVE_PASSES_TD
#define CLEAVE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PrintModelSummary : Pass<"cleave-print-summary", "mlir::ModuleOp"> {
  let summary = "Print ops, parameters and bytes per module of the model";
  let description = [{
    Prints one row per module scope, cut to `depth` components of the module
    path (`blocks.3.attn` at depth 1 is `blocks`, at depth 2 `blocks.3`): the
    number of compute ops, of parameter elements, of buffer elements, and the
    bytes of both. Ops are attributed by their `NameLoc` scope, parameters to
    the module their name is under (`blocks.0.fc.weight` to `blocks.0.fc`).
    Ops and parameters outside any module are `(root)`. Changes nothing.
  }];
  let options = [
    Option<"depth", "depth", "unsigned", /*default=*/"1",
           "module path components that name a row">,
  ];
}

#endif // CLEAVE_PASSES_TD
