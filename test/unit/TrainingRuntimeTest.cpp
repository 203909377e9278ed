//===- TrainingRuntimeTest.cpp - plan version 2, the trainer, checkpoints -===//
//
// A training plan written by hand into a temporary directory: one weight w
// that each step replaces with w + x (an in-place update through `assign`),
// the loss sum(w + x), and a state region. Checks the loader's version-2
// rules, the executor's state region and persistent tensors, the data
// order, and checkpoints (round trip, damage, another plan's).
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"
#include "runtime/TensorParts.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"
#include "runtime/train/TrainingData.h"

#include "HandWrittenPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

using namespace cleave::runtime;
using namespace cleave::testplan;
namespace fs = std::filesystem;

namespace {

class TrainingPlan : public ::testing::Test {
protected:
  void SetUp() override {
    dir = testDir("training");
    manifest = wPlusXManifest();
    program = wPlusXProgram();
  }
  void TearDown() override { fs::remove_all(dir); }

  void write() { ASSERT_OK(writeWPlusXPlan(dir, manifest, program)); }
  Status load(Plan *plan) {
    write();
    return loadPlan(dir, plan);
  }
  /// A data file of `samples` rows of x: row i is (i, i, i).
  std::string data(int64_t samples) {
    std::string path = dir + "/data.safetensors";
    Status s = writeWPlusXData(path, samples);
    EXPECT_TRUE(s.ok()) << s.message();
    return path;
  }

  std::string dir;
  Json manifest, program;
};

TEST_F(TrainingPlan, LoadsStateBuffersTheTrainingSectionAndInPlaceUpdates) {
  Plan plan;
  ASSERT_OK(load(&plan));
  EXPECT_EQ(plan.version, 2);
  ASSERT_TRUE(plan.training.has_value());
  EXPECT_EQ(plan.training->batchSize, 2);
  EXPECT_EQ(plan.training->seed, 5);
  EXPECT_EQ(plan.training->optimizer.kind, "none");
  const ProgramSpec &p = plan.programs.at("stage0_tp0");
  EXPECT_EQ(p.stateBytes, 128u);
  EXPECT_EQ(p.predictedBytes(), 344u);
  ASSERT_TRUE(p.buffers[2].state.has_value());
  EXPECT_EQ(*p.buffers[2].stateOffset, 0u);
  EXPECT_TRUE(p.buffers[1].persistent());
  // Every phase runs once per step, in order.
  ASSERT_EQ(plan.stageSlots[0].size(), 2u);
  EXPECT_EQ(plan.stageSlots[0][1].phase, "optimizer");
}

TEST_F(TrainingPlan, RejectsStateOutsideVersion2AndOverlappingStates) {
  program["buffers"][5]["state_offset"] = 16; // inside "moment"'s 24 bytes
  Plan plan;
  expectError(load(&plan), "overlaps state 'moment'");

  SetUp();
  program["buffers"][5]["state_offset"] = 128; // past the region
  expectError(load(&plan), "past the state region's 128 bytes");

  SetUp();
  manifest["programs"]["stage0_tp0"]["state_bytes"] = 64;
  expectError(load(&plan), "predicts a state region of 64 bytes");

  SetUp();
  manifest["version"] = 1;
  program["version"] = 1;
  manifest["schedule"]["kind"] = "forward";
  manifest.erase("training");
  expectError(load(&plan), "state buffers need plan format version 2");

  SetUp();
  program["version"] = 1;
  expectError(load(&plan), "version 1, the manifest's is 2");

  SetUp();
  manifest["training"]["state_dict"][0]["tensor"] = "nothing";
  expectError(load(&plan), "names 'nothing', which is not a weight");
}

TEST_F(TrainingPlan, VersionOneRejectsWritesToWeights) {
  // The same in-place update in an inference plan: not allowed there.
  manifest["version"] = 1;
  program["version"] = 1;
  manifest["schedule"]["kind"] = "forward";
  manifest.erase("training");
  program.erase("state_bytes");
  manifest["programs"]["stage0_tp0"].erase("state_bytes");
  for (auto [id, offset] : {std::pair{2, 192}, {5, 224}}) {
    program["buffers"][id].erase("state");
    program["buffers"][id].erase("state_offset");
    program["buffers"][id]["arena_offset"] = offset;
  }
  // The states moved into the arena: it grows to hold them (232 bytes, 256 aligned).
  program["arena_bytes"] = 256;
  manifest["programs"]["stage0_tp0"]["arena_bytes"] = 256;
  manifest["predicted"]["memory_bytes"]["arena"] = 256;
  Plan plan;
  expectError(load(&plan), "writes to weight buffer 1");
}

TEST_F(TrainingPlan, ExecutorAllocatesTheStateZeroedAndUpdatesInPlace) {
  Plan plan;
  ASSERT_OK(load(&plan));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  std::unique_ptr<Executor> ex;
  ASSERT_OK(Executor::create(plan.programs.at("stage0_tp0"), *cpu, &ex));
  EXPECT_EQ(ex->allocatedBytes(), 344u);
  std::vector<float> moment(6, -1);
  ASSERT_OK(ex->readState("moment", moment.data(), 24));
  EXPECT_EQ(moment, std::vector<float>(6, 0.0f));
  int64_t step = -1;
  ASSERT_OK(ex->readState("step", &step, 8));
  EXPECT_EQ(step, 0);
  expectError(ex->readState("moment", moment.data(), 20), "has 24 bytes, not 20");
  expectError(ex->readState("nothing", moment.data(), 24), "no state 'nothing'");

  std::vector<float> x = {1, 1, 1, 1, 1, 1};
  ASSERT_OK(ex->setInput("x", x.data(), 24));
  for (size_t p = 0; p < plan.programs.at("stage0_tp0").phases.size(); ++p)
    ASSERT_OK(ex->runPhase(p));
  float loss = 0;
  ASSERT_OK(ex->getOutput("loss", &loss, 4));
  EXPECT_EQ(loss, 27.0f); // sum(w + 1)
  std::vector<float> w(6);
  ASSERT_OK(ex->readWeight("w", w.data(), 24));
  EXPECT_EQ(w, (std::vector<float>{2, 3, 4, 5, 6, 7}));
}

TEST_F(TrainingPlan, DataOrderWrapsAndShufflesByEpoch) {
  Plan plan;
  ASSERT_OK(load(&plan));
  TrainingData d;
  ASSERT_OK(TrainingData::load(data(5), plan, &d));
  EXPECT_EQ(d.batchIndices(0, std::nullopt), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(d.batchIndices(2, std::nullopt), (std::vector<int64_t>{4, 0}));
  // Under a shuffle each epoch is a permutation of the samples, the same for
  // the same seed, another for another epoch or seed.
  auto epoch = [&](uint64_t seed, int64_t e) {
    std::vector<int64_t> order;
    for (int64_t g = e * 5; g < (e + 1) * 5; ++g) {
      std::vector<int64_t> b = d.batchIndices(g / 2, seed);
      order.push_back(b[g % 2]);
    }
    return order;
  };
  std::vector<int64_t> first = epoch(7, 0), sorted = first;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(epoch(7, 0), first);
  std::set<std::vector<int64_t>> orders;
  for (int64_t e = 0; e < 6; ++e)
    orders.insert(epoch(7, e));
  EXPECT_GT(orders.size(), 1u);

  TrainingData few;
  expectError(TrainingData::load(data(1), plan, &few), "fewer than one batch of 2");
}

TEST_F(TrainingPlan, TrainerRunsStepsAndCheckpointsRoundTrip) {
  Plan plan;
  ASSERT_OK(load(&plan));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  TrainOptions options;
  options.dataPath = data(4);
  options.steps = 3;
  options.checkpointDir = dir + "/ck";
  options.checkpointEvery = 2;
  TrainReport full;
  ASSERT_OK(train(plan, *cpu, options, &full));
  ASSERT_EQ(full.steps.size(), 3u);
  // w0 = 1..6, then w += x each step: rows (0,0,0),(1,1,1), then (2,2,2),(3,3,3), ...
  EXPECT_EQ(full.steps[0].loss, 21.0f + 3.0f);
  EXPECT_EQ(full.allocatedBytes, full.predictedBytes);
  EXPECT_TRUE(fs::exists(dir + "/ck/ckpt-2/checkpoint.json"));
  EXPECT_TRUE(fs::exists(dir + "/ck/ckpt-3/checkpoint.json"));

  TrainOptions resume = options;
  resume.resumePath = dir + "/ck/ckpt-2";
  resume.checkpointDir.clear();
  TrainReport resumed;
  ASSERT_OK(train(plan, *cpu, resume, &resumed));
  ASSERT_EQ(resumed.steps.size(), 1u);
  EXPECT_EQ(resumed.steps[0].step, 3);
  EXPECT_EQ(resumed.steps[0].loss, full.steps[2].loss);

  // A changed byte in the state file is found before anything is restored.
  std::string state = dir + "/ck/ckpt-2/state.safetensors";
  {
    std::fstream f(state, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  TrainReport damaged;
  expectError(train(plan, *cpu, resume, &damaged), "state.safetensors: damaged: checksum");
}

TEST_F(TrainingPlan, DataParallelSharesAndMicrobatchesTakeTheirRows) {
  Plan plan;
  ASSERT_OK(load(&plan));
  TrainingData d;
  ASSERT_OK(TrainingData::load(data(5), plan, &d));
  // Batch 2 of one device: share 1 of 2 takes the second row of each batch.
  d.takeShare(1, 2);
  EXPECT_EQ(d.microbatchIndices(0, std::nullopt, 0, 1), (std::vector<int64_t>{1}));
  EXPECT_EQ(d.microbatchIndices(2, std::nullopt, 0, 1), (std::vector<int64_t>{0}));
  d.takeShare(0, 1);
  EXPECT_EQ(d.microbatchIndices(1, std::nullopt, 1, 2), (std::vector<int64_t>{3}));
  // Under a shuffle the rows are the shuffled batch's, split the same way.
  std::vector<int64_t> whole = d.batchIndices(3, 11);
  d.takeShare(1, 2);
  EXPECT_EQ(d.microbatchIndices(3, 11, 0, 1), (std::vector<int64_t>{whole[1]}));
}

TEST_F(TrainingPlan, MicrobatchesRunForwardEachAndTheOptimizerOnce) {
  // The global batch of 4 in 2 microbatches of 2: the program binds one.
  manifest["inputs"][0]["shape"] = {4, 3};
  manifest["inputs"][0]["batch_dim"] = 0;
  manifest["outputs"][0]["batch_dim"] = nullptr;
  manifest["batch"] = {{"global", 4}, {"microbatch_size", 2}, {"microbatches", 2}};
  manifest["schedule"]["microbatches"] = 2;
  manifest["training"]["batch_size"] = 4;
  Plan plan;
  ASSERT_OK(load(&plan));
  std::vector<std::string> slots;
  for (const ScheduleSlot &slot : plan.stageSlots[0])
    slots.push_back(slot.phase + std::to_string(slot.microbatch));
  EXPECT_EQ(slots, (std::vector<std::string>{"forward0", "forward1", "optimizer0"}));

  std::unique_ptr<Backend> cpu = createCpuBackend();
  TrainOptions options;
  options.dataPath = data(8);
  options.steps = 1;
  options.trace = true;
  TrainReport report;
  ASSERT_OK(train(plan, *cpu, options, &report));
  // Rows (0,0,0),(1,1,1) give sum(w + x) = 21 + 3, rows 2 and 3 give 21 + 15:
  // the step's loss is their mean; the optimizer ran once, after the second.
  ASSERT_EQ(report.steps.size(), 1u);
  EXPECT_EQ(report.steps[0].loss, 30.0);
  // The last step's trace: each phase run, then its kernels.
  std::vector<std::string> phases;
  for (const TraceEvent &e : report.trace)
    if (!e.kernel)
      phases.push_back(e.name);
  EXPECT_EQ(phases, (std::vector<std::string>{"F mb0 chunk0", "F mb1 chunk0", "optimizer"}));
  std::vector<TraceEvent> back;
  ASSERT_OK(parseTraceEvents(traceEventsJson(report.trace), &back));
  ASSERT_EQ(back.size(), report.trace.size());
  EXPECT_EQ(back[1].name, report.trace[1].name);
  EXPECT_EQ(back[1].kernel, true);
  EXPECT_DOUBLE_EQ(back[1].start, report.trace[1].start);
  Json chrome = Json::parse(chromeTrace(plan, {report.trace}, 1));
  EXPECT_EQ(chrome["otherData"]["measured_step"], 1);
  expectError(parseTraceEvents("{\"not\": \"a list\"}", &back), "not a JSON array");
}

} // namespace

// A tp rank's part of a tensor (runtime/TensorParts.h): what the plan cuts
// and what checkpoints and state_dicts put back together.
TEST(TensorParts, PartsOfBlocksTileTheTensorAndPutItBackTogether) {
  // [2, 12] as three blocks of 4 columns (a fused QKV output), over 2 ranks:
  // rank 1 holds columns 2-3 of each block.
  const Shape shape = {2, 12};
  std::vector<float> whole(24);
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = static_cast<float>(i);
  WeightShard part;
  ASSERT_TRUE(parseWeightShard("qkv.weight[split(1, blocks=3) 1/2]", &part));
  ASSERT_TRUE(canSplit(shape, part));
  EXPECT_EQ(partShape(shape, part), (Shape{2, 6}));
  std::vector<char> bytes =
      copyPart(reinterpret_cast<const char *>(whole.data()), shape, sizeof(float), part);
  ASSERT_EQ(bytes.size(), 12 * sizeof(float));
  std::vector<float> got(12);
  std::memcpy(got.data(), bytes.data(), bytes.size());
  EXPECT_EQ(got, (std::vector<float>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23}));

  std::vector<float> back(24, -1);
  for (int64_t rank = 0; rank < 2; ++rank) {
    part.part = rank;
    std::vector<char> piece =
        copyPart(reinterpret_cast<const char *>(whole.data()), shape, sizeof(float), part);
    placePart(piece.data(), shape, sizeof(float), part, reinterpret_cast<char *>(back.data()));
  }
  EXPECT_EQ(back, whole);

  WeightShard rows;
  ASSERT_TRUE(parseWeightShard("w[split(0) 0/4]", &rows));
  EXPECT_FALSE(canSplit(shape, rows)) << "2 rows do not split 4 ways";
  rows.dim = 2;
  EXPECT_FALSE(canSplit(shape, rows)) << "no dim 2";
}
