//===- PlanSearch.h - The inter-layer search of the planner ----*- C++ -*-===//
//
// Given what each layer costs when split tp ways (passes/TensorParallel.h),
// chooses the mesh (tp × pp × dp), pipeline stage boundaries, data-parallel
// sharding level (ZeRO 0–3), which layers recompute their activations,
// microbatch size and count, and the schedule (GPipe, 1F1B, interleaved 1F1B
// with virtual stages), minimizing predicted step time under a per-device
// memory budget. No MLIR here: the search reads numbers only, so it is tested
// on synthetic models and is fast.
//
// How it stays fast: layers with the same signature share one cost entry;
// every candidate mesh/microbatch/schedule/sharding gets a lower bound on its
// step time (perfectly balanced stages, no recomputation) and candidates are
// evaluated in order of that bound until the bound exceeds the K-th best
// time found; a candidate's stage boundaries come from a bisection on the
// slowest stage's time with a greedy fill that also decides recomputation.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_PLANSEARCH_H
#define CLEAVE_PASSES_PLANSEARCH_H

#include "cost/ClusterSpec.h"
#include "cost/Collectives.h"
#include "cost/MemoryModel.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::planner {

/// A collective a split layer runs per microbatch, at the traced batch.
struct LayerCollective {
  cost::Collective collective;
  bool backward = false;
  double bytes = 0;
};

/// One layer kind split tp ways, per rank, at the traced batch size.
struct LayerSplitCost {
  double forwardCompute = 0, backwardCompute = 0;   // seconds, overhead included
  double forwardOverhead = 0, backwardOverhead = 0; // the part that does not scale with batch
  std::vector<LayerCollective> collectives;
  double parameters = 0;     // trainable elements
  double bufferBytes = 0;    // buffers and constants (not trained, not sharded by ZeRO)
  double activationBytes = 0; // saved for backward
  double inputBytes = 0;      // what recomputation keeps instead
  double outputBytes = 0;     // sent to the next stage
  int splitOps = 0, kernelOps = 0;
};

struct ModelProfile {
  std::vector<std::string> layerNames;
  std::vector<int> layerKind; // per layer: index into kinds
  /// Parameters a layer reads that another layer owns (tied weights): they
  /// are held twice when the two layers are on different devices.
  struct Borrowed {
    int owner = 0;
    double parameters = 0;
  };
  std::vector<std::vector<Borrowed>> borrowed; // per layer
  /// costs[tp][kind].
  std::map<int, std::vector<LayerSplitCost>> costs;
  int64_t tracedBatch = 1;
};

enum class Objective { StepTime, Latency, Throughput };
enum class RecomputeMode { Auto, None, Full };
/// Model spilling (docs/planner.md): Auto spills layers to host memory only
/// where a candidate does not fit otherwise; All spills every layer with
/// parameters; None never.
enum class SpillMode { Auto, None, All };

struct SearchOptions {
  int devices = 1;
  int64_t globalBatch = 1;
  bool training = true;
  Objective objective = Objective::StepTime;
  /// Per-device budget in bytes.
  double memoryBudget = 0;
  /// Mixed precision: bf16 parameters and gradients, fp32 master weights and
  /// moments (AdamW).
  bool mixedPrecision = true;
  runtime::DType paramDType = runtime::DType::BF16;
  RecomputeMode recompute = RecomputeMode::Auto;
  /// Spilling needs the spec's host link. The runtime spills on one
  /// replica's whole step: candidates with pp = tp = 1, one microbatch and
  /// no ZeRO.
  SpillMode spill = SpillMode::Auto;
  // Pins the search must respect.
  std::optional<int> tp, pp, dp, virtualStages;
  std::optional<int64_t> microbatchSize;
  /// Training normalizes over the batch (batch norm): a replica runs its
  /// whole share as one microbatch, since statistics over a microbatch would
  /// differ from the batch's and waiting for every microbatch before
  /// normalizing any leaves nothing to overlap.
  bool batchStatistics = false;
  /// Whether to consider what the runtime does not train yet (ZeRO-2 and 3
  /// with pipeline stages or tensor splits, ZeRO-3 with recomputation):
  /// `cleave plan` explores them; `cleave compile` turns this off.
  bool untrainedCombinations = true;
  std::optional<cost::Schedule> schedule;
  std::optional<cost::ShardingLevel> sharding;
  int top = 1;
  /// Off only in tests, to check that pruning never changes the answer.
  bool prune = true;
};

/// The layers of one pipeline device.
struct StagePlan {
  std::vector<std::pair<int, int>> chunks; // [begin, end) layer ranges (v of them)
  std::vector<int> recomputed;             // layers that recompute
  /// Layers whose parameters, gradients' copies and optimizer state live in
  /// host memory, prefetched a layer ahead (docs/planner.md, "Spilling").
  std::vector<int> spilled;
  double spilledParameters = 0;
  /// Layers whose saved activations live in host memory, copied out in
  /// forward and back a layer ahead of their backward.
  std::vector<int> activationsSpilled;
  double spilledActivationBytes = 0, largestSpilledActivation = 0;
  /// Per microbatch: the copies' time not hidden behind compute.
  double spillSeconds = 0;
  /// Per step: the spilled layers' optimizer updates on the host.
  double hostOptimizerSeconds = 0;
  double forwardSeconds = 0, backwardSeconds = 0, recomputeSeconds = 0; // per microbatch
  double tpCommSeconds = 0, p2pSeconds = 0;                             // per microbatch
  double parameters = 0;
  cost::MemoryBreakdown memory;
  double seconds() const {
    return forwardSeconds + backwardSeconds + recomputeSeconds + tpCommSeconds + p2pSeconds +
           spillSeconds;
  }
};

struct Candidate {
  int tp = 1, pp = 1, dp = 1, virtualStages = 1;
  int64_t microbatchSize = 1, microbatches = 1;
  cost::Schedule schedule = cost::Schedule::OneFOneB;
  cost::ShardingLevel sharding = cost::ShardingLevel::None;
  std::vector<StagePlan> stages;
  double stepSeconds = 0;     // predicted iteration (training) or batch (inference) time
  double objective = 0;       // what was minimized (seconds; for throughput, seconds per batch at steady state)
  double pipelineSeconds = 0; // the pipelined forward/backward part
  double bubbleFraction = 0;  // idle share of pipelineSeconds
  double tpCommSeconds = 0;   // per step, on the slowest stage
  double dpCommSeconds = 0, optimizerSeconds = 0;
  /// Spilling, on the stage with the most memory: its copies' exposed time
  /// per step, and the layers spilled (parameters or activations; their
  /// count, for the label).
  double spillSeconds = 0;
  int spilledLayers = 0;
  bool fits = true;
  int worstStage = 0; // the stage with the most memory
  cost::MemoryBreakdown memory; // of worstStage
  std::string label() const;    // "tp=8 pp=8 dp=24 mb=1×96 1f1b zero=optimizer"
};

struct SearchResult {
  std::vector<Candidate> best;      // up to top, fastest first, all within budget
  /// The fastest candidate over budget per (tp, pp), for --explain and for
  /// the error when nothing fits; empty memory figures when none was over.
  std::vector<Candidate> overBudget;
  /// The fastest candidate within budget of every mesh shape (tp, pp) that
  /// was evaluated, and for shapes pruned unevaluated the lower bound that
  /// ruled them out, for --explain.
  std::vector<Candidate> bestPerMesh;
  std::map<std::pair<int, int>, double> prunedMeshBound;
  /// When nothing fits: the candidate needing the least memory.
  std::optional<Candidate> leastMemory;
  int64_t candidatesConsidered = 0, candidatesEvaluated = 0;
  double searchSeconds = 0;
};

/// Searches; fails only for inputs that leave no candidate at all (a pin that
/// does not divide the devices, a global batch the dp degree does not
/// divide), with the reason in `error`.
bool searchPlan(const ModelProfile &model, const cost::ClusterSpec &cluster,
                const SearchOptions &options, SearchResult &result, std::string &error);

/// The tp degrees worth splitting layers for: divisors of the devices per
/// node that divide the device count (or the pinned one).
std::vector<int> tpCandidates(const cost::ClusterSpec &cluster, const SearchOptions &options);

/// The predicted time of a collective of `bytes` on a tp group of `tp`
/// consecutive ranks (inside one node when tp divides the devices per node).
double tpCollectiveSeconds(const cost::ClusterSpec &cluster, int tp,
                           cost::Collective collective, double bytes);

/// Pipeline time of per-microbatch stage times for a schedule: (m − 1)·max +
/// Σ for GPipe and 1F1B; (m + (pp − 1)/v)·max for interleaved with v chunks.
double pipelineSeconds(cost::Schedule schedule, const std::vector<double> &stageSeconds,
                       int64_t microbatches, int virtualStages);

} // namespace cleave::planner

#endif // CLEAVE_PASSES_PLANSEARCH_H
