//===- Planner.h - Parallelization planner over a model's layers -*- C++ -*-===//
//
// Puts the two halves together: layer discovery (passes/Layers.h), the
// intra-layer tensor-parallel split of each layer kind at each tp degree
// (passes/TensorParallel.h), and the inter-layer search over mesh, stages,
// ZeRO level, recomputation, microbatches and schedule (passes/PlanSearch.h).
// The chosen strategy is written back as attributes on the IR and as a
// strategy JSON (docs/planner.md).
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PLANNER_H
#define CLEAVE_PASSES_PLANNER_H

#include "passes/Layers.h"
#include "passes/PlanSearch.h"
#include "passes/TensorParallel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::cleave {

struct PlannerOptions {
  ::cleave::planner::SearchOptions search;
  /// The dtype compute runs in (bf16 for mixed precision).
  ::cleave::runtime::DType computeDType = ::cleave::runtime::DType::BF16;
  /// The tp split may reduce-scatter partial sums (sequence parallelism);
  /// false: all-reduce only (--sequence-parallel off).
  bool sequenceParallel = true;
  /// Which dim of the model's inputs is the batch (docs/planner.md).
  int batchDim = 0;
};

struct PlannerResult {
  std::vector<Layer> layers;
  /// splits[tp][kind]: the split of the first layer of each kind.
  std::map<int, std::map<unsigned, LayerSplit>> splits;
  ::cleave::planner::ModelProfile profile;
  ::cleave::planner::SearchResult search;
  double splitSeconds = 0; // time spent splitting layers (intra-layer)
};

/// Sizes `spec` to `devices` devices: fewer than a node makes one smaller
/// node; more must be whole nodes (`devices` <= 0: the spec's own). The
/// device then carries the node's contention (cost::deviceSharingNode) for
/// the devices of a node that run at once. Returns the error, or "".
std::string useDevices(::cleave::cost::ClusterSpec &spec, int devices);

/// The default memory budget per device: its capacity minus the spec's
/// planning reserve.
double defaultMemoryBudget(const ::cleave::cost::DeviceSpec &device);

/// Plans `func`. Fails with a diagnostic naming the problem when the model
/// has no batch dim to scale, or the search has no candidate at all; a search
/// that finds candidates but none within the budget succeeds with an empty
/// `search.best` and the least memory needed in `search.leastMemory`.
FailureOr<PlannerResult> planModel(func::FuncOp func, const ::cleave::cost::ClusterSpec &cluster,
                                   const PlannerOptions &options);

/// Writes `candidate` onto the IR: the mesh and schedule on the module, and
/// on every op its stage, its results' shardings and whether it recomputes.
void annotateStrategy(func::FuncOp func, const PlannerResult &plan,
                      const ::cleave::planner::Candidate &candidate);

/// The strategy JSON of `candidate` (format in docs/planner.md); `top` are
/// the runners-up listed with it.
std::string strategyJson(const PlannerResult &plan, const ::cleave::planner::Candidate &candidate,
                         const ::cleave::cost::ClusterSpec &cluster,
                         const PlannerOptions &options, const std::string &model);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_PLANNER_H
