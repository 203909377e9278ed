//===- TestShardingRules.cpp - print each op's ShardingOpInterface rule ---===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_TESTSHARDINGRULES
#include "passes/Passes.h.inc"

namespace {

struct TestShardingRulesPass : impl::TestShardingRulesBase<TestShardingRulesPass> {
  void runOnOperation() override {
    // One write per function: function passes may run on several threads.
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "sharding rules of @" << getOperation().getName() << "\n";
    getOperation().walk([&](ShardingOpInterface op) {
      os << op->getName() << ": " << op.getShardingRule().str() << "\n";
    });
    llvm::outs() << os.str();
  }
};

} // namespace
} // namespace mlir::cleave
