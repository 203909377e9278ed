//===- Liveness.h - Lifetimes of a program's buffers ------------*- C++ -*-===//
//
// Which buffers a single-block function needs and when each is live, in op
// positions. Memory planning places them; the cost model reads their peak.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_LIVENESS_H
#define CLEAVE_PASSES_LIVENESS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace mlir::cleave {

/// Arena buffers are aligned to this many bytes.
inline constexpr int64_t kArenaAlignment = 64;

inline int64_t alignToArena(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// A region of the arena: a value's buffer (with its views) or an op's scratch.
struct BufferInterval {
  int64_t start, end; // op positions, inclusive; arguments start at -1
  int64_t bytes;
  Value value;                        // set for value buffers
  Operation *scratchOwner = nullptr;  // set for scratch
};

/// The buffers of `func` and their lifetimes. Arguments (the inputs) stay
/// live to the end; a view (`ExecutableOpInterface::getViewedOperand`) shares
/// and extends its operand's buffer; each result of an op with several has
/// its own; params, constants and training state live in the weights and
/// the state region, not here. Emits an error on ops that cannot be placed.
FailureOr<std::vector<BufferInterval>> computeBufferIntervals(func::FuncOp func);

/// Most arena bytes (each buffer aligned) live at one time: no placement of
/// these buffers can use less.
int64_t peakLiveBytes(const std::vector<BufferInterval> &intervals);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_LIVENESS_H
