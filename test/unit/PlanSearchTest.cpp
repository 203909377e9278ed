//===- PlanSearchTest.cpp - the planner's inter-layer search --------------===//
//
// A synthetic GPT-like model (an embedding, identical blocks, a head) whose
// costs are set by hand, on the DGX A100 spec: the search's answers are
// checked against what the costs imply, and pruning against exhaustive
// evaluation.
//
//===----------------------------------------------------------------------===//

#include "passes/PlanSearch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace cleave;
using namespace cleave::planner;

namespace {

cost::ClusterSpec dgx(int nodes) {
  cost::ClusterSpec spec;
  runtime::Status status =
      cost::loadClusterSpec(std::string(CLEAVE_CLUSTERS_DIR) + "/dgx-a100-80gb.json", spec, nodes);
  EXPECT_TRUE(status.ok()) << status.message();
  return spec;
}

/// `blocks` identical blocks between an embedding and a head. A block at tp
/// computes 1/tp of the work and all-reduces its output twice each way.
ModelProfile syntheticGpt(int blocks, double blockSeconds = 0.01, double blockParams = 2e8,
                          double blockActivation = 2e9) {
  ModelProfile model;
  model.tracedBatch = 1;
  model.layerNames.push_back("embed");
  model.layerKind.push_back(0);
  for (int b = 0; b < blocks; ++b) {
    model.layerNames.push_back("blocks." + std::to_string(b));
    model.layerKind.push_back(1);
  }
  model.layerNames.push_back("head");
  model.layerKind.push_back(2);
  model.borrowed.assign(model.layerKind.size(), {});
  model.borrowed.back().push_back({0, 1e8}); // the head reads the embedding's weight
  for (int tp : {1, 2, 4, 8}) {
    std::vector<LayerSplitCost> kinds(3);
    LayerSplitCost &embed = kinds[0], &block = kinds[1], &head = kinds[2];
    embed.forwardCompute = 1e-4;
    embed.backwardCompute = 2e-4;
    embed.parameters = 1e8 / tp;
    embed.activationBytes = 1e7;
    embed.outputBytes = 1e7;
    block.forwardCompute = blockSeconds / tp;
    block.backwardCompute = 2 * blockSeconds / tp;
    block.forwardOverhead = block.backwardOverhead = 1e-5;
    block.parameters = blockParams / tp;
    block.activationBytes = blockActivation / tp;
    block.inputBytes = 1e7;
    block.outputBytes = 1e7;
    if (tp > 1)
      for (bool backward : {false, true})
        for (int i = 0; i < 2; ++i)
          block.collectives.push_back({cost::Collective::AllReduce, backward, 1e7});
    head.forwardCompute = blockSeconds / tp;
    head.backwardCompute = 2 * blockSeconds / tp;
    head.activationBytes = 1e8 / tp;
    head.inputBytes = 1e7;
    head.outputBytes = 1e8;
    model.costs[tp] = kinds;
  }
  return model;
}

SearchOptions options(int devices, int64_t batch, double budgetGiB = 77) {
  SearchOptions o;
  o.devices = devices;
  o.globalBatch = batch;
  o.memoryBudget = budgetGiB * 1073741824.0;
  return o;
}

TEST(PlanSearch, PipelineFormula) {
  std::vector<double> equal = {1, 1, 1, 1};
  EXPECT_DOUBLE_EQ(pipelineSeconds(cost::Schedule::OneFOneB, equal, 8, 1), 11.0);
  EXPECT_DOUBLE_EQ(pipelineSeconds(cost::Schedule::GPipe, equal, 8, 1), 11.0);
  EXPECT_DOUBLE_EQ(pipelineSeconds(cost::Schedule::Interleaved, equal, 8, 2), 9.5);
  // The slowest stage sets the pace; the others add their time once.
  EXPECT_DOUBLE_EQ(pipelineSeconds(cost::Schedule::OneFOneB, {1, 2, 1}, 4, 1), 3 * 2 + 4);
}

TEST(PlanSearch, PruningNeverChangesTheAnswer) {
  cost::ClusterSpec spec = dgx(4);
  ModelProfile model = syntheticGpt(16);
  for (double budget : {77.0, 20.0, 8.0}) {
    SearchOptions pruned = options(32, 64, budget);
    pruned.top = 3;
    SearchOptions exhaustive = pruned;
    exhaustive.prune = false;
    SearchResult a, b;
    std::string error;
    ASSERT_TRUE(searchPlan(model, spec, pruned, a, error)) << error;
    ASSERT_TRUE(searchPlan(model, spec, exhaustive, b, error)) << error;
    ASSERT_EQ(a.best.size(), b.best.size()) << "budget " << budget;
    for (size_t i = 0; i < a.best.size(); ++i) {
      EXPECT_DOUBLE_EQ(a.best[i].objective, b.best[i].objective) << "budget " << budget;
      EXPECT_EQ(a.best[i].label(), b.best[i].label());
    }
    EXPECT_LE(a.candidatesEvaluated, b.candidatesEvaluated);
    EXPECT_EQ(b.candidatesEvaluated, b.candidatesConsidered);
  }
}

TEST(PlanSearch, TopIsSortedAndWithinBudget) {
  SearchOptions o = options(32, 64);
  o.top = 6;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(4), o, r, error)) << error;
  ASSERT_EQ(r.best.size(), 6u);
  for (size_t i = 0; i < r.best.size(); ++i) {
    EXPECT_LE(r.best[i].memory.total(), o.memoryBudget);
    EXPECT_TRUE(r.best[i].fits);
    EXPECT_EQ(r.best[i].tp * r.best[i].pp * r.best[i].dp, 32);
    EXPECT_EQ(r.best[i].dp * r.best[i].microbatchSize * r.best[i].microbatches, 64);
    if (i > 0)
      EXPECT_LE(r.best[i - 1].objective, r.best[i].objective);
  }
}

TEST(PlanSearch, PinsAreRespected) {
  SearchOptions o = options(64, 128);
  o.tp = 2;
  o.pp = 4;
  o.schedule = cost::Schedule::Interleaved;
  o.sharding = cost::ShardingLevel::OptimizerState;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  const Candidate &c = r.best.front();
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.pp, 4);
  EXPECT_EQ(c.dp, 8);
  EXPECT_EQ(c.schedule, cost::Schedule::Interleaved);
  EXPECT_GT(c.virtualStages, 1);
  EXPECT_EQ(c.sharding, cost::ShardingLevel::OptimizerState);
  // Every layer is placed exactly once, in order, v chunks per device.
  std::vector<int> placed(18, 0);
  for (const StagePlan &s : c.stages) {
    EXPECT_EQ(int(s.chunks.size()), c.virtualStages);
    for (auto [begin, end] : s.chunks)
      for (int l = begin; l < end; ++l)
        ++placed[l];
  }
  for (int n : placed)
    EXPECT_EQ(n, 1);
}

TEST(PlanSearch, BatchStatisticsKeepEachReplicasBatchWhole) {
  // Unconstrained, this pipeline would cut each replica's batch into
  // microbatches to fill its bubble; batch norm's statistics forbid that.
  SearchOptions o = options(64, 128);
  o.pp = 4;
  o.top = 50;
  SearchResult free, whole;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, free, error)) << error;
  ASSERT_FALSE(free.best.empty());
  EXPECT_GT(free.best.front().microbatches, 1);
  o.batchStatistics = true;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, whole, error)) << error;
  ASSERT_FALSE(whole.best.empty());
  for (const Candidate &c : whole.best) {
    EXPECT_EQ(c.microbatches, 1) << c.label();
    EXPECT_EQ(c.microbatchSize * c.dp, 128) << c.label();
  }
  // A pinned microbatch smaller than a replica's batch leaves nothing, and
  // the reason names batch norm and the size that would do.
  o.microbatchSize = 2;
  o.dp = 8;
  EXPECT_FALSE(searchPlan(syntheticGpt(16), dgx(8), o, whole, error));
  EXPECT_NE(error.find("--microbatch 2: batch norm"), std::string::npos) << error;
  EXPECT_NE(error.find("16 samples per replica"), std::string::npos) << error;
  // Inference normalizes with running statistics: no constraint.
  o.training = false;
  o.microbatchSize.reset();
  o.dp.reset();
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, whole, error)) << error;
}

TEST(PlanSearch, CompileLeavesOutShardedGradientsAcrossStages) {
  // A budget that ZeRO-3 helps: explored, the search picks sharded
  // gradients or parameters with stages or splits somewhere in its top.
  SearchOptions o = options(64, 128, 20);
  o.top = 200;
  SearchResult explored, runnable;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, explored, error)) << error;
  auto splitAndSharded = [](const Candidate &c) {
    return (c.tp > 1 || c.pp > 1) && c.sharding >= cost::ShardingLevel::Gradients;
  };
  EXPECT_TRUE(std::any_of(explored.best.begin(), explored.best.end(), splitAndSharded));
  o.untrainedCombinations = false;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(8), o, runnable, error)) << error;
  ASSERT_FALSE(runnable.best.empty());
  EXPECT_TRUE(std::none_of(runnable.best.begin(), runnable.best.end(), splitAndSharded));
  // Nor ZeRO-3 with recomputation.
  EXPECT_TRUE(std::none_of(runnable.best.begin(), runnable.best.end(), [](const Candidate &c) {
    return c.dp > 1 && c.sharding == cost::ShardingLevel::Parameters &&
           std::any_of(c.stages.begin(), c.stages.end(),
                       [](const StagePlan &s) { return !s.recomputed.empty(); });
  }));
  // Pinned, the combination is refused naming the pins that avoid it.
  o.pp = 4;
  o.sharding = cost::ShardingLevel::Parameters;
  EXPECT_FALSE(searchPlan(syntheticGpt(16), dgx(8), o, runnable, error));
  EXPECT_NE(error.find("--zero parameters with pipeline stages or tensor splits does not train"),
            std::string::npos)
      << error;
}

TEST(PlanSearch, InterleavedChunksFitWhenBalanced) {
  // 16 blocks of 5e8 parameters (8 GB each with AdamW in mixed precision,
  // nothing sharded) in 8 chunks on 4 devices: balanced, a device holds 4-5 blocks and fits
  // in 77 GiB; a chunk filled by a loose time limit alone takes up to 11
  // layers and does not. The search must find the balanced plan.
  SearchOptions o = options(8, 8);
  o.tp = 1;
  o.pp = 4;
  o.schedule = cost::Schedule::Interleaved;
  o.virtualStages = 2;
  o.microbatchSize = 1;
  o.recompute = RecomputeMode::Full;
  o.sharding = cost::ShardingLevel::None;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16, 0.01, 5e8, 1e8), dgx(1), o, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  const Candidate &c = r.best.front();
  EXPECT_EQ(c.virtualStages, 2);
  EXPECT_LE(c.memory.total(), o.memoryBudget);
  for (const StagePlan &s : c.stages)
    EXPECT_LE(s.parameters, 5 * 5e8 + 1e8 + 1);
}

TEST(PlanSearch, StagesAreBalancedByTime) {
  SearchOptions o = options(8, 64);
  o.tp = 1;
  o.pp = 4;
  o.schedule = cost::Schedule::OneFOneB;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(syntheticGpt(16), dgx(1), o, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  // 16 blocks and a head as heavy as a block: 17 units over 4 stages, so the
  // slowest stage holds 5 blocks' worth and no stage more.
  double block = 0.03 * double(r.best.front().microbatchSize);
  for (const StagePlan &s : r.best.front().stages)
    EXPECT_LE(s.forwardSeconds + s.backwardSeconds, 5 * block * 1.001 + 1e-3);
}

TEST(PlanSearch, RecomputationOnlyWhenMemoryNeedsIt) {
  cost::ClusterSpec spec = dgx(1);
  ModelProfile model = syntheticGpt(16, 0.01, 1e8, 4e9);
  SearchOptions roomy = options(8, 8, 1000);
  roomy.tp = 1;
  roomy.pp = 1;
  roomy.microbatchSize = 1;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(model, spec, roomy, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  EXPECT_TRUE(r.best.front().stages[0].recomputed.empty());

  // 16 blocks × 4 GB of activations do not fit in 40 GiB with the weights:
  // some blocks recompute, not all.
  SearchOptions tight = roomy;
  tight.memoryBudget = 40 * 1073741824.0;
  ASSERT_TRUE(searchPlan(model, spec, tight, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  size_t recomputed = r.best.front().stages[0].recomputed.size();
  EXPECT_GT(recomputed, 0u);
  EXPECT_LT(recomputed, 16u);
  EXPECT_LE(r.best.front().memory.total(), tight.memoryBudget);
  EXPECT_GT(r.best.front().stages[0].recomputeSeconds, 0);

  // Forbidding recomputation leaves nothing that fits, and says how much
  // the least hungry candidate needs.
  SearchOptions none = tight;
  none.recompute = RecomputeMode::None;
  ASSERT_TRUE(searchPlan(model, spec, none, r, error)) << error;
  EXPECT_TRUE(r.best.empty());
  ASSERT_TRUE(r.leastMemory.has_value());
  EXPECT_GT(r.leastMemory->memory.total(), none.memoryBudget);
  EXPECT_GT(r.leastMemory->memory.activations, r.leastMemory->memory.parameters);
}

TEST(PlanSearch, ZeroShardingWhenOptimizerStateDoesNotFit) {
  // 16 × 2e9 parameters: 512 GB of optimizer state unsharded.
  ModelProfile model = syntheticGpt(16, 0.01, 2e9, 1e8);
  SearchOptions o = options(64, 64);
  o.tp = 1;
  o.pp = 1;
  SearchResult r;
  std::string error;
  ASSERT_TRUE(searchPlan(model, dgx(8), o, r, error)) << error;
  ASSERT_FALSE(r.best.empty());
  EXPECT_GE(r.best.front().sharding, cost::ShardingLevel::OptimizerState);
  EXPECT_LE(r.best.front().memory.total(), o.memoryBudget);
}

TEST(PlanSearch, ImpossibleInputsAreErrors) {
  SearchResult r;
  std::string error;
  // The reason given is the most specific one: tp=1 pp=1 does leave dp=32,
  // but 7 samples do not divide over it.
  SearchOptions o = options(32, 7);
  o.dp = 32;
  EXPECT_FALSE(searchPlan(syntheticGpt(4), dgx(4), o, r, error));
  EXPECT_NE(error.find("global batch 7 does not divide over dp=32"), std::string::npos) << error;

  SearchOptions noMesh = options(32, 64);
  noMesh.dp = 3; // no tp × pp leaves 3 of 32
  EXPECT_FALSE(searchPlan(syntheticGpt(4), dgx(4), noMesh, r, error));
  EXPECT_NE(error.find("--dp 3"), std::string::npos) << error;

  SearchOptions deep = options(32, 64);
  deep.pp = 32; // more stages than the 6 layers
  deep.tp = 1;
  EXPECT_FALSE(searchPlan(syntheticGpt(4), dgx(4), deep, r, error));
  EXPECT_NE(error.find("more stages than"), std::string::npos) << error;
}

TEST(PlanSearch, InferenceObjectives) {
  SearchOptions latency = options(8, 16);
  latency.training = false;
  latency.mixedPrecision = false;
  latency.objective = Objective::Latency;
  SearchOptions throughput = latency;
  throughput.objective = Objective::Throughput;
  SearchResult a, b;
  std::string error;
  ModelProfile model = syntheticGpt(16);
  ASSERT_TRUE(searchPlan(model, dgx(1), latency, a, error)) << error;
  ASSERT_TRUE(searchPlan(model, dgx(1), throughput, b, error)) << error;
  ASSERT_FALSE(a.best.empty());
  ASSERT_FALSE(b.best.empty());
  // Steady-state throughput never counts the fill and drain that latency does.
  EXPECT_LE(b.best.front().objective, a.best.front().objective + 1e-12);
  EXPECT_EQ(a.best.front().sharding, cost::ShardingLevel::None);
  for (const StagePlan &s : a.best.front().stages) {
    EXPECT_EQ(s.backwardSeconds, 0);
    EXPECT_EQ(s.memory.gradients, 0);
    EXPECT_EQ(s.memory.optimizerState, 0);
  }
}

} // namespace

// Spilling: one device whose budget holds a fraction of the training state.
// Auto spills the fewest layers that make it fit; none finds nothing; all
// spills every layer with parameters; a spec without a host link spills
// nothing.
TEST(PlanSearchSpill, SpillsOnlyWhatTheBudgetNeeds) {
  cost::ClusterSpec spec = dgx(1);
  ModelProfile model = syntheticGpt(8, 0.01, 2e8, 1e8);
  SearchOptions o = options(1, 8, 24);
  o.mixedPrecision = false;
  o.paramDType = runtime::DType::F32;
  o.recompute = RecomputeMode::None;
  SearchResult result;
  std::string error;
  ASSERT_TRUE(searchPlan(model, spec, o, result, error)) << error;
  ASSERT_FALSE(result.best.empty());
  const Candidate &c = result.best.front();
  ASSERT_EQ(c.stages.size(), 1u);
  const StagePlan &stage = c.stages.front();
  EXPECT_GT(stage.spilled.size(), 0u);
  EXPECT_LT(stage.spilled.size(), 10u); // not every layer with parameters
  EXPECT_LE(c.memory.total(), o.memoryBudget);
  EXPECT_GT(c.memory.host, 0);
  EXPECT_GT(c.memory.prefetched, 0);
  EXPECT_EQ(c.spilledLayers, int(stage.spilled.size()));
  // The host holds the spilled layers' parameters, gradients and both
  // moments: 16 bytes per parameter in f32.
  EXPECT_DOUBLE_EQ(c.memory.host, 16.0 * stage.spilledParameters);
  // A block's 0.8 GB cross PCIe 4 (25 GB/s effective) in 32 ms, behind a
  // neighbour's 80 ms of forward: hidden. With blocks 100 times faster the
  // copies show, and the step pays them.
  EXPECT_EQ(c.spillSeconds, 0);
  SearchResult fast;
  ASSERT_TRUE(searchPlan(syntheticGpt(8, 1e-4, 2e8, 1e8), spec, o, fast, error)) << error;
  ASSERT_FALSE(fast.best.empty());
  EXPECT_GT(fast.best.front().spillSeconds, 0);

  o.spill = SpillMode::None;
  SearchResult none;
  ASSERT_TRUE(searchPlan(model, spec, o, none, error)) << error;
  EXPECT_TRUE(none.best.empty());

  o.spill = SpillMode::All;
  o.memoryBudget = 77 * 1073741824.0;
  SearchResult all;
  ASSERT_TRUE(searchPlan(model, spec, o, all, error)) << error;
  ASSERT_FALSE(all.best.empty());
  EXPECT_EQ(all.best.front().stages.front().spilled.size(), 9u); // embed and 8 blocks (the head borrows)
  EXPECT_GT(all.best.front().stepSeconds, result.best.front().stepSeconds * 0.999);

  spec.hostLink = cost::LinkSpec();
  o.spill = SpillMode::Auto;
  o.memoryBudget = 24 * 1073741824.0;
  SearchResult noLink;
  ASSERT_TRUE(searchPlan(model, spec, o, noLink, error)) << error;
  EXPECT_TRUE(noLink.best.empty());
  o.spill = SpillMode::All;
  EXPECT_FALSE(searchPlan(model, spec, o, noLink, error));
  EXPECT_NE(error.find("host_link"), std::string::npos) << error;
}
