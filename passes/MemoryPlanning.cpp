//===- MemoryPlanning.cpp - one arena for all activations, by liveness ----===//
//
// Straight-line functions only (the importer unrolls and folds control flow),
// so liveness is an interval over op positions. Placement is the classic
// greedy: largest buffer first, at the lowest offset that fits among the
// buffers already placed whose intervals overlap its own.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-plan-memory"

namespace mlir::cleave {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"

namespace {

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    FailureOr<std::vector<BufferInterval>> buffers = computeBufferIntervals(func);
    if (failed(buffers))
      return signalPassFailure();
    std::vector<BufferInterval> &intervals = *buffers;
    std::vector<int64_t> offsets(intervals.size(), -1);
    // The lower bound any placement must reach.
    int64_t peak = peakLiveBytes(intervals);

    // Largest first; ties by start so the result is deterministic.
    std::vector<size_t> order(intervals.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (intervals[a].bytes != intervals[b].bytes)
        return intervals[a].bytes > intervals[b].bytes;
      return intervals[a].start < intervals[b].start;
    });
    int64_t arenaBytes = 0;
    std::vector<size_t> placed;
    for (size_t index : order) {
      const BufferInterval &cur = intervals[index];
      std::vector<std::pair<int64_t, int64_t>> taken; // [offset, offset + bytes)
      for (size_t p : placed) {
        const BufferInterval &other = intervals[p];
        if (other.start <= cur.end && cur.start <= other.end)
          taken.push_back({offsets[p], offsets[p] + alignToArena(other.bytes)});
      }
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [begin, stop] : taken) {
        if (offset + alignToArena(cur.bytes) <= begin)
          break;
        offset = std::max(offset, stop);
      }
      offsets[index] = offset;
      arenaBytes = std::max(arenaBytes, offset + alignToArena(cur.bytes));
      placed.push_back(index);
    }

    Builder b(func.getContext());
    for (auto [i, offset] : llvm::zip(intervals, offsets)) {
      if (i.scratchOwner) {
        i.scratchOwner->setAttr("cleave.scratch_offset", b.getI64IntegerAttr(offset));
      } else if (auto arg = dyn_cast<BlockArgument>(i.value)) {
        func.setArgAttr(arg.getArgNumber(), "cleave.arena_offset",
                        b.getI64IntegerAttr(offset));
      } else {
        i.value.getDefiningOp()->setAttr("cleave.arena_offset",
                                         b.getI64IntegerAttr(offset));
      }
    }
    func->setAttr("cleave.arena_bytes", b.getI64IntegerAttr(arenaBytes));
    func->setAttr("cleave.peak_live_bytes", b.getI64IntegerAttr(peak));
    LLVM_DEBUG(llvm::dbgs() << "arena " << arenaBytes << " bytes, peak live " << peak
                            << " bytes, " << intervals.size() << " buffers\n");
  }
};

} // namespace
} // namespace mlir::cleave
