//===- Decompose.cpp - composite ops rewritten as core ops ----------------===//
//
// The first pass after import: every op with DecomposableOpInterface is
// replaced by what its `decompose` builds. A rule may build composites
// itself (std builds var), so the rewrite repeats until none is left. After
// it, every op carries the interfaces that analysis, planning,
// differentiation and lowering ask.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_DECOMPOSE
#include "passes/Passes.h.inc"

namespace {

/// Rounds of rewriting before a rule that builds its own op again is
/// reported: nesting in the table is at most a few levels deep.
constexpr int kMaxRounds = 8;

struct DecomposePass : impl::DecomposeBase<DecomposePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    for (int round = 0;; ++round) {
      SmallVector<DecomposableOpInterface> composites;
      func.walk([&](DecomposableOpInterface op) { composites.push_back(op); });
      if (composites.empty())
        return;
      if (round == kMaxRounds) {
        composites.front()->emitError()
            << "does not decompose into core ops after " << kMaxRounds << " rounds";
        return signalPassFailure();
      }
      for (DecomposableOpInterface op : composites)
        if (failed(rewrite(op)))
          return signalPassFailure();
    }
  }

  LogicalResult rewrite(DecomposableOpInterface op) {
    OpBuilder builder(op);
    SmallVector<Value> results;
    if (failed(op.decompose(builder, results)))
      return failure();
    // A rule that builds the wrong types is a bug in the rule, reported at
    // the op rather than left to corrupt later passes.
    if (results.size() != op->getNumResults())
      return op->emitError() << "decomposition built " << results.size() << " values for "
                             << op->getNumResults() << " results";
    for (auto [value, result] : llvm::zip(results, op->getResults()))
      if (value.getType() != result.getType())
        return op->emitError() << "decomposition built " << value.getType() << " for a result of "
                               << result.getType();
    op->replaceAllUsesWith(results);
    op->erase();
    ++numDecomposed;
    return success();
  }
};

} // namespace
} // namespace mlir::cleave
