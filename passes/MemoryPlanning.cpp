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
#include "passes/Training.h"

#include "llvm/ADT/StringMap.h"

#include <map>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "cleave-plan-memory"

namespace mlir::cleave {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"

namespace {

/// An op that updates a persistent tensor in place must be its last reader:
/// a later reader of the same SSA value would see the new contents. A later
/// assign that overwrites the tensor whole does not read it (a gradient
/// accumulator is added to in backward and zeroed after the update).
LogicalResult checkUpdates(func::FuncOp func) {
  for (Operation &op : func.front()) {
    auto executable = dyn_cast<ExecutableOpInterface>(op);
    if (!executable)
      continue;
    for (unsigned index : executable.getUpdatedOperands()) {
      Value target = op.getOperand(index);
      for (Operation *user : target.getUsers()) {
        auto assign = dyn_cast<AssignOp>(user);
        if (assign && assign.getTarget() == target && assign.getValue() != target)
          continue;
        if (user != &op && op.isBeforeInBlock(user)) {
          InFlightDiagnostic diag = op.emitOpError()
                                    << "overwrites a tensor that a later op reads";
          diag.attachNote(user->getLoc()) << "read here";
          return failure();
        }
      }
    }
  }
  return success();
}

/// Training state (optimizer moments, the step counter) gets its own region,
/// laid out in program order: it lives across steps, so nothing shares it.
/// States kept in host memory (`cleave.pool = "host"`, spilling) get a
/// region of their own in the host pool, laid out the same way.
void placeStates(func::FuncOp func) {
  Builder b(func.getContext());
  llvm::StringMap<int64_t> offsets;
  int64_t bytes = 0, hostBytes = 0;
  for (StateOp state : func.front().getOps<StateOp>()) {
    auto pool = state->getAttrOfType<StringAttr>(kPoolAttr);
    bool onHost = pool && pool.getValue() == kHostPool;
    int64_t &end = onHost ? hostBytes : bytes;
    auto [it, added] = offsets.try_emplace(state.getName(), end);
    if (added)
      end += alignToArena(tensorBytes(state.getType()));
    state->setAttr("cleave.state_offset", b.getI64IntegerAttr(it->second));
  }
  if (bytes > 0)
    func->setAttr("cleave.state_bytes", b.getI64IntegerAttr(bytes));
  if (hostBytes > 0)
    func->setAttr("cleave.host_state_bytes", b.getI64IntegerAttr(hostBytes));
}

/// What the arena holds at its peak, by the phase that computed each live
/// buffer: forward values (and the inputs) are activations, backward values
/// gradients, optimizer values and kernel scratch temporaries
/// (`cleave.arena_peak`, for the plan's predicted memory by category).
void recordPeakByPhase(func::FuncOp func, const std::vector<BufferInterval> &intervals) {
  std::vector<StringRef> phases = phasesOf(func.front());
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(func.front()))
    position[&op] = i;
  // The first position where the most bytes are live.
  std::map<int64_t, int64_t> delta;
  for (const BufferInterval &i : intervals) {
    delta[i.start] += alignToArena(i.bytes);
    delta[i.end + 1] -= alignToArena(i.bytes);
  }
  int64_t live = 0, peak = -1, at = 0;
  for (auto [where, change] : delta) {
    live += change;
    if (live > peak) {
      peak = live;
      at = where;
    }
  }
  int64_t activations = 0, gradients = 0, temporaries = 0, prefetched = 0;
  for (const BufferInterval &i : intervals) {
    if (i.start > at || i.end < at)
      continue;
    int64_t bytes = alignToArena(i.bytes);
    Operation *def = i.scratchOwner ? nullptr : i.value.getDefiningOp();
    StringRef phase = def ? phases[position.lookup(def)] : StringRef(kForwardPhase);
    if (def && isa<PrefetchOp>(def))
      prefetched += bytes;
    else if (i.scratchOwner || phase == kOptimizerPhase)
      temporaries += bytes;
    else if (phase == kBackwardPhase)
      gradients += bytes;
    else
      activations += bytes;
  }
  Builder b(func.getContext());
  SmallVector<NamedAttribute> categories = {
      b.getNamedAttr("activations", b.getI64IntegerAttr(activations)),
      b.getNamedAttr("gradients", b.getI64IntegerAttr(gradients)),
      b.getNamedAttr("temporaries", b.getI64IntegerAttr(temporaries))};
  // Spilling: device copies of host parameters (-cleave-spill-to-host).
  if (prefetched > 0)
    categories.push_back(b.getNamedAttr("prefetched", b.getI64IntegerAttr(prefetched)));
  func->setAttr("cleave.arena_peak", b.getDictionaryAttr(categories));
}

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
    // Ops of several results record one offset per result.
    llvm::DenseMap<Operation *, SmallVector<int64_t>> resultOffsets;
    for (auto [i, offset] : llvm::zip(intervals, offsets)) {
      if (i.scratchOwner) {
        i.scratchOwner->setAttr("cleave.scratch_offset", b.getI64IntegerAttr(offset));
      } else if (auto arg = dyn_cast<BlockArgument>(i.value)) {
        func.setArgAttr(arg.getArgNumber(), "cleave.arena_offset",
                        b.getI64IntegerAttr(offset));
      } else if (Operation *op = i.value.getDefiningOp(); op->getNumResults() > 1) {
        SmallVector<int64_t> &list = resultOffsets[op];
        list.resize(op->getNumResults(), -1);
        list[cast<OpResult>(i.value).getResultNumber()] = offset;
      } else {
        op->setAttr("cleave.arena_offset", b.getI64IntegerAttr(offset));
      }
    }
    for (auto &[op, list] : resultOffsets)
      op->setAttr("cleave.arena_offsets", b.getDenseI64ArrayAttr(list));
    func->setAttr("cleave.arena_bytes", b.getI64IntegerAttr(arenaBytes));
    func->setAttr("cleave.peak_live_bytes", b.getI64IntegerAttr(peak));
    if (failed(checkUpdates(func)))
      return signalPassFailure();
    placeStates(func);
    if (llvm::any_of(func.front(), [](Operation &op) { return op.hasAttr(kPhaseAttr); }))
      recordPeakByPhase(func, intervals);
    LLVM_DEBUG(llvm::dbgs() << "arena " << arenaBytes << " bytes, peak live " << peak
                            << " bytes, " << intervals.size() << " buffers\n");
  }
};

} // namespace
} // namespace mlir::cleave
