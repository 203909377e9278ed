//===- Liveness.cpp - Lifetimes of a program's buffers --------------------===//

#include "passes/Liveness.h"
#include "dialects/cleave/CleaveDialect.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace mlir::cleave {

FailureOr<std::vector<BufferInterval>> computeBufferIntervals(func::FuncOp func) {
  if (!llvm::hasSingleElement(func.getBody()))
    return func.emitOpError("memory planning needs a function of one block");
  Block &body = func.front();

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
  std::vector<BufferInterval> intervals;
  llvm::DenseMap<Value, size_t> intervalOf;
  auto addBuffer = [&](Value v, int64_t start) {
    intervalOf[v] = intervals.size();
    intervals.push_back({start, start, tensorBytes(v.getType()), v, nullptr});
  };
  // Inputs stay intact to the end, so a program can run again on the inputs
  // it was given (and a caller can still read them).
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
    if (isa<func::ReturnOp>(op) || isa<ParamOp, ConstantOp, StateOp>(op))
      continue;
    auto executable = dyn_cast<ExecutableOpInterface>(op);
    if (!executable)
      return op.emitOpError("cannot be placed in memory: not a cleave op");
    if (op.getNumResults() == 0)
      continue; // it only reads (cleave.send) or updates persistent tensors
    if (std::optional<unsigned> viewed = executable.getViewedOperand()) {
      if (op.getNumResults() != 1)
        return op.emitOpError("cannot be placed in memory: a view has one result");
      root[op.getResult(0)] = rootOf(op.getOperand(*viewed));
      continue;
    }
    for (Value result : op.getResults())
      addBuffer(result, at);
    if (int64_t scratch = executable.getScratchBytes())
      intervals.push_back({at, at, scratch, Value(), &op});
  }
  return intervals;
}

int64_t peakLiveBytes(const std::vector<BufferInterval> &intervals) {
  // Sweep the starts and ends in position order.
  std::vector<std::pair<int64_t, int64_t>> events; // (position, +/- bytes)
  for (const BufferInterval &i : intervals) {
    events.push_back({i.start, alignToArena(i.bytes)});
    events.push_back({i.end + 1, -alignToArena(i.bytes)});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    live += events[i].second;
    // Apply every event at one position before reading the level.
    if (i + 1 == events.size() || events[i + 1].first != events[i].first)
      peak = std::max(peak, live);
  }
  return peak;
}

} // namespace mlir::cleave
