//===- MemoryPlanning.cpp - one arena for all activations, by liveness ----===//
//
// Straight-line functions only (the importer unrolls and folds control flow),
// so liveness is an interval over op positions. Placement is the classic
// greedy: largest buffer first, at the lowest offset that fits among the
// buffers already placed whose intervals overlap its own.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-plan-memory"

namespace mlir::cleave {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"

namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

int64_t tensorBytes(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  int64_t bits = tensor.getElementType().getIntOrFloatBitWidth();
  // i1 is stored as one byte per element, as PyTorch's bool.
  return tensor.getNumElements() * std::max<int64_t>(1, bits / 8);
}

/// A region of the arena: a value's buffer (with its views) or an op's scratch.
struct Interval {
  int64_t start, end; // op positions, inclusive
  int64_t bytes;
  int64_t offset = -1;
  Value value;             // set for value buffers
  Operation *scratchOwner; // set for scratch
};

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!llvm::hasSingleElement(func.getBody())) {
      func.emitOpError("memory planning needs a function of one block");
      return signalPassFailure();
    }
    Block &body = func.front();

    // Position of each op; arguments are defined at -1, before the first op.
    llvm::DenseMap<Operation *, int64_t> position;
    int64_t end = 0;
    for (Operation &op : body)
      position[&op] = end++;

    // Each value's buffer root: itself, or for a view the root of the viewed operand.
    llvm::DenseMap<Value, Value> root;
    auto rootOf = [&](Value v) {
      auto it = root.find(v);
      return it == root.end() ? v : it->second;
    };
    std::vector<Interval> intervals;
    llvm::DenseMap<Value, size_t> intervalOf;
    auto addBuffer = [&](Value v, int64_t start) {
      intervalOf[v] = intervals.size();
      intervals.push_back({start, start, tensorBytes(v.getType()), -1, v, nullptr});
    };
    // Inputs stay intact to the end, so a program can run again on the
    // inputs it was given (and a caller can still read them).
    for (BlockArgument arg : body.getArguments()) {
      addBuffer(arg, -1);
      intervals.back().end = end;
    }

    for (Operation &op : body) {
      int64_t at = position[&op];
      // Uses extend the lifetime of their operands' roots.
      for (Value operand : op.getOperands()) {
        auto it = intervalOf.find(rootOf(operand));
        if (it != intervalOf.end())
          intervals[it->second].end =
              std::max(intervals[it->second].end, isa<func::ReturnOp>(op) ? end : at);
      }
      if (isa<func::ReturnOp>(op) || isa<ParamOp, ConstantOp>(op))
        continue;
      auto executable = dyn_cast<ExecutableOpInterface>(op);
      if (!executable || op.getNumResults() != 1) {
        op.emitOpError("cannot be placed in memory: not a single-result cleave op");
        return signalPassFailure();
      }
      if (std::optional<unsigned> viewed = executable.getViewedOperand()) {
        root[op.getResult(0)] = rootOf(op.getOperand(*viewed));
        continue;
      }
      addBuffer(op.getResult(0), at);
      if (int64_t scratch = executable.getScratchBytes())
        intervals.push_back({at, at, scratch, -1, Value(), &op});
    }

    // Peak of live bytes: the lower bound any placement must reach.
    std::vector<int64_t> live(end + 2, 0);
    for (const Interval &i : intervals)
      for (int64_t t = i.start; t <= i.end; ++t)
        live[t + 1] += alignUp(i.bytes);
    int64_t peak = live.empty() ? 0 : *std::max_element(live.begin(), live.end());

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
      Interval &cur = intervals[index];
      std::vector<std::pair<int64_t, int64_t>> taken; // [offset, offset + bytes)
      for (size_t p : placed) {
        const Interval &other = intervals[p];
        if (other.start <= cur.end && cur.start <= other.end)
          taken.push_back({other.offset, other.offset + alignUp(other.bytes)});
      }
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [begin, stop] : taken) {
        if (offset + alignUp(cur.bytes) <= begin)
          break;
        offset = std::max(offset, stop);
      }
      cur.offset = offset;
      arenaBytes = std::max(arenaBytes, offset + alignUp(cur.bytes));
      placed.push_back(index);
    }

    Builder b(func.getContext());
    for (const Interval &i : intervals) {
      if (i.scratchOwner) {
        i.scratchOwner->setAttr("cleave.scratch_offset", b.getI64IntegerAttr(i.offset));
      } else if (auto arg = dyn_cast<BlockArgument>(i.value)) {
        func.setArgAttr(arg.getArgNumber(), "cleave.arena_offset",
                        b.getI64IntegerAttr(i.offset));
      } else {
        i.value.getDefiningOp()->setAttr("cleave.arena_offset",
                                         b.getI64IntegerAttr(i.offset));
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
