//===- ShardingRule.h - How an op may be split across devices --*- C++ -*-===//
//
// A sharding rule describes an op as a set of factors, in the manner of
// GSPMD/Shardy: every dim of every operand and result is the product of
// factors (major first), and a factor names one loop of the op's iteration
// space. Splitting a factor across the ranks of a mesh axis splits every dim
// it appears in; what that implies follows from the factor's kind:
//   Parallel        each rank computes its slice; operands the factor does not
//                   appear in are read whole by every rank (so their
//                   gradients are partial sums)
//   Reduction       the factor is summed over: each rank computes a partial
//                   sum, and the result needs an all-reduce (or a
//                   reduce-scatter) before it is complete
//   NeedReplication the op cannot be split along it (a softmax's dim, a
//                   slice's cut dim)
// A dim of size 1 that broadcasts has no factors. A dim that is viewed as
// several dims (reshape) or cut in equal blocks (slice, fused QKV) is several
// factors, so `3·d` split on its minor factor means every rank holds its part
// of each of the three blocks: this is how the rules find Megatron's split of
// a fused QKV projection without knowing what attention is.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_DIALECTS_CLEAVE_SHARDINGRULE_H
#define CLEAVE_DIALECTS_CLEAVE_SHARDINGRULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>

namespace mlir::cleave {

enum class FactorKind : uint8_t { Parallel, Reduction, NeedReplication };

struct ShardingFactor {
  int64_t size = 1;
  FactorKind kind = FactorKind::Parallel;
};

/// The factors one dim is made of, major first (empty for a broadcast dim of
/// size 1).
using DimFactors = llvm::SmallVector<int, 2>;
/// One tensor's dims.
using TensorFactors = llvm::SmallVector<DimFactors, 4>;

struct ShardingRule {
  llvm::SmallVector<ShardingFactor, 8> factors;
  llvm::SmallVector<TensorFactors, 4> operands; // one per operand
  llvm::SmallVector<TensorFactors, 1> results;  // one per result

  /// A rule whose every operand and result dim is a factor of its own that
  /// must stay whole: the op runs replicated (the safe default for ops
  /// without a rule).
  static ShardingRule replicated(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operandShapes,
                                 llvm::ArrayRef<llvm::ArrayRef<int64_t>> resultShapes);

  /// Adds a factor and returns its index.
  int addFactor(int64_t size, FactorKind kind = FactorKind::Parallel) {
    factors.push_back({size, kind});
    return static_cast<int>(factors.size()) - 1;
  }

  /// Adds one factor of `kind` per dim of `shape`, in order, and returns the
  /// dims made of them (to use for a tensor of that shape).
  TensorFactors addFactors(llvm::ArrayRef<int64_t> shape,
                           FactorKind kind = FactorKind::Parallel);

  /// Readable form, factors named i, j, k, …, z, f26, f27, … in order of
  /// creation: `([i, k], [j, k], [j]) -> ([i, j]) i=16 j=96 k=32:reduction`;
  /// a dim of several factors is `i*j`, a broadcast dim `1`, a rank-0 tensor
  /// `[]`, NeedReplication `:replicated`.
  std::string str() const;
};

} // namespace mlir::cleave

#endif // CLEAVE_DIALECTS_CLEAVE_SHARDINGRULE_H
