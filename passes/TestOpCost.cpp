//===- TestOpCost.cpp - print each op's CostOpInterface answers -----------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::cleave {
#define GEN_PASS_DEF_TESTOPCOST
#include "passes/Passes.h.inc"

namespace {

struct TestOpCostPass : impl::TestOpCostBase<TestOpCostPass> {
  void runOnOperation() override {
    // One write per function: function passes may run on several threads.
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "cost of @" << getOperation().getName() << "\n";
    auto pass = [](const ::cleave::cost::PassCost &p) {
      return llvm::formatv("flops={0} read={1} written={2} kernels={3}", int64_t(p.flops),
                           int64_t(p.bytesRead), int64_t(p.bytesWritten), p.kernels)
          .str();
    };
    auto print = [&](const ::cleave::cost::OpCost &cost) {
      os << ::cleave::cost::opClassName(cost.opClass) << " fwd: " << pass(cost.forward)
         << " bwd: " << pass(cost.backward) << " saved=" << int64_t(cost.savedBytes);
      if (cost.gemm)
        os << llvm::formatv(" gemm={0}x{1}x{2}x{3}", cost.gemm->batch, cost.gemm->m,
                            cost.gemm->n, cost.gemm->k);
      os << "\n";
    };
    getOperation().walk([&](CostOpInterface op) {
      ::cleave::cost::OpCost cost = op.getCost();
      ::cleave::cost::OpCost training = op.getTrainingCost();
      // Ops that differ in training (dropout) print that cost too.
      bool differs = training.forward.kernels != cost.forward.kernels ||
                     training.forward.flops != cost.forward.flops ||
                     training.savedBytes != cost.savedBytes;
      if (cost.forward.kernels == 0 && !differs)
        return;
      os << op->getName() << " ";
      print(cost);
      if (differs) {
        os << op->getName() << " training ";
        print(training);
      }
    });
    llvm::outs() << os.str();
  }
};

} // namespace
} // namespace mlir::cleave
