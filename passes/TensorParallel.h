//===- TensorParallel.h - Splitting one layer across a tp group -*- C++ -*-===//
//
// The intra-layer half of the planner. For one layer and a tensor-parallel
// degree it chooses, op by op, which factor of the op's sharding rule
// (ShardingOpInterface) is split across the tp group, and so which
// collectives the layer needs, minimizing the layer's predicted time:
// compute divided over the group plus the collectives, forward and, when
// training, backward. The layer's inputs arrive replicated and its outputs
// leave replicated, so layers compose without resharding between them.
//
// The search is a dynamic program over the ops in program order whose state
// is the sharding of every value still to be read; states that agree on those
// are merged, keeping the cheapest. Nothing in it knows about attention or
// MLPs: on a GPT block it finds Megatron's split (column- then row-parallel
// linears, heads split in attention, one all-reduce per sub-block in forward)
// because the rules and the costs make that the cheapest.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_TENSORPARALLEL_H
#define CLEAVE_PASSES_TENSORPARALLEL_H

#include "cost/ClusterSpec.h"
#include "cost/Collectives.h"
#include "passes/Layers.h"
#include "passes/PlanSearch.h"
#include "runtime/DType.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::cleave {

/// How one tensor is laid out over the tp group.
struct TensorSharding {
  enum Kind : uint8_t { Replicated, Sharded, Partial };
  Kind kind = Replicated;
  /// Sharded: the split dim, and how many equal blocks of that dim each rank
  /// holds a part of (1: rank r holds the r-th contiguous part; 3: the r-th
  /// part of each third, as for a fused QKV projection's output).
  int dim = -1;
  int64_t blocks = 1;

  static TensorSharding replicated() { return {}; }
  static TensorSharding partial() { return {Partial, -1, 1}; }
  static TensorSharding sharded(int dim, int64_t blocks = 1) { return {Sharded, dim, blocks}; }
  bool operator==(const TensorSharding &o) const {
    return kind == o.kind && dim == o.dim && blocks == o.blocks;
  }
  bool operator!=(const TensorSharding &o) const { return !(*this == o); }
  /// "replicated", "partial", "split(2)", "split(2, blocks=3)".
  std::string str() const;
  /// The inverse of str(); nullopt for anything else.
  static std::optional<TensorSharding> parse(llvm::StringRef text);
};

/// The layout the planner gave `value` in the IR: its defining op's
/// `cleave.sharding` entry, replicated for arguments and unannotated ops.
/// Fails, with an error at the op, on an entry that is no layout.
FailureOr<TensorSharding> annotatedLayout(Value value);

/// A collective the split layer runs, per microbatch.
struct TpCollective {
  ::cleave::cost::Collective collective;
  bool backward = false; // run in the backward pass (else forward)
  double bytes = 0;      // at the traced batch size, in the compute dtype
  Operation *before = nullptr; // the op that needs the result (nullptr: layer end)
};

/// What the planner needs to know about a layer split tp ways, at the traced
/// batch size and in the compute dtype.
struct LayerSplit {
  int tp = 1;
  /// The layout of each value the layer's ops produce and of each parameter.
  llvm::DenseMap<Value, TensorSharding> layout;
  /// Per op of the layer (Layer::ops order): the layout each operand must
  /// have when the op runs; where it differs from the layout the operand
  /// arrives in, a collective (or a free local slice) changes it.
  std::vector<llvm::SmallVector<TensorSharding, 3>> operandLayout;
  std::vector<TpCollective> collectives;
  /// What the split minimized: seconds of compute and collectives per
  /// microbatch (forward, and backward when training), plus the optimizer
  /// step's time for the weights a rank holds.
  double objective = 0;
  /// What the inter-layer search reads: times, collectives, memory per rank.
  ::cleave::planner::LayerSplitCost cost;
};

struct TensorParallelOptions {
  int tp = 1;
  bool training = true;
  /// The dtype compute runs in: bf16 for mixed-precision training of an f32
  /// model. Float tensors are costed at its size and the device's peak for it.
  ::cleave::runtime::DType computeDType = ::cleave::runtime::DType::F32;
  /// May a partial sum be reduce-scattered, so that what follows runs on a
  /// part of it (Megatron-LM's sequence parallelism)? Off, every partial sum
  /// is all-reduced and the ops between split regions run whole on every
  /// rank, as in Megatron-LM's tensor parallelism before it.
  bool reduceScatter = true;
  /// States kept per step of the search after merging.
  int beamWidth = 256;
  /// Weights whose layout is fixed in advance (a weight tied between
  /// layers has one layout for all of them): ops that need another layout
  /// reshard it every microbatch.
  llvm::DenseMap<Value, TensorSharding> weightLayouts;
};

/// The cheapest split of `layer` over a tp group of `options.tp` ranks inside
/// one node of `cluster`. tp = 1 gives the unsplit layer.
LayerSplit splitLayer(const Layer &layer, const ::cleave::cost::ClusterSpec &cluster,
                      const TensorParallelOptions &options);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_TENSORPARALLEL_H
