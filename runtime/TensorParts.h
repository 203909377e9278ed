//===- TensorParts.h - a tp rank's part of a tensor -----------------------===//
//
// A tensor a tp group splits is held as parts: rank t of n holds, of each
// of B equal blocks of dim D, the t-th n-th (a fused QKV projection's
// output is three blocks, each split alike). The plan names such a part
// `PATH[split(D) t/n]` (PlanVerify.h's WeightShard). Plans cut parts out
// of whole tensors; checkpoints and state_dicts put them back together, so
// a run resumes on any mesh.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/PlanVerify.h"
#include "runtime/Tensor.h"

#include <vector>

namespace cleave::runtime {

/// Whether `whole` (a shape) can be split as `shard` says: D is a dim and
/// its size a multiple of B * n.
bool canSplit(const Shape &whole, const WeightShard &shard);

/// The shape of a part of a tensor of shape `whole`.
Shape partShape(const Shape &whole, const WeightShard &shard);

/// Copies `shard`'s part out of the row-major tensor `whole` of `shape`.
std::vector<char> copyPart(const char *whole, const Shape &shape, size_t elementBytes,
                           const WeightShard &shard);

/// Writes `part` (`shard`'s part) into its place in the row-major tensor
/// `whole` of `shape`.
void placePart(const char *part, const Shape &shape, size_t elementBytes,
               const WeightShard &shard, char *whole);

} // namespace cleave::runtime
