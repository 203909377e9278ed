//===- SpillRuntimeTest.cpp - host pools, prefetch and spill --------------===//
//
// Spilled training plans (docs/plan-format.md, "Spilling to host memory"),
// written by hand into a temporary directory:
//   - a step y = linear(x, W, b), loss = sum(y), dW = yᵀx, AdamW on W, in
//     two forms: everything on the device, and W, its gradient and its
//     moments in the host pool (W prefetched into the arena, dW spilled to
//     a host state, AdamW updating host tensors): the same numbers, bit for
//     bit, and checkpoints that resume across the two;
//   - a program built to break if the executor did not order its copies
//     (run on a copy queue slowed down so that every copy is still in
//     flight when the next instruction starts);
//   - the loader's and the copy kernels' errors, the statistics, the report.
//
//===----------------------------------------------------------------------===//

#include "runtime/DeviceBackends.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/PlanVerify.h"
#include "runtime/Safetensors.h"
#include "runtime/cpu/CopyQueue.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Trainer.h"

#include "HandWrittenPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace cleave::runtime;
using namespace cleave::testplan;
namespace fs = std::filesystem;

namespace {

/// The CPU backend with another copy queue: none (as a backend without
/// one, the CUDA backend today, answers) or one whose copies each take
/// `delay` seconds longer.
class QueueBackend final : public ForwardingBackend {
public:
  QueueBackend(Backend &inner, bool hasQueue, double delay)
      : ForwardingBackend(inner), hasQueue_(hasQueue), delay_(delay) {}
  const char *name() const override { return hasQueue_ ? "slow-copy cpu" : "no-copy cpu"; }
  bool sharesHostMemory() const override { return true; }
  Status createCopyQueue(std::unique_ptr<CopyQueue> *out) override {
    if (!hasQueue_)
      return Backend::createCopyQueue(out);
    *out = cpu::createThreadCopyQueue(delay_);
    return {};
  }

private:
  bool hasQueue_;
  double delay_;
};

/// A new directory for the running test: cleave-spill-<what>-<pid>-<test name>.
std::string tempDir(const std::string &what) { return testDir("spill-" + what); }

Json adamwSpec() {
  return Json{{"kind", "adamw"}, {"lr", 0.01},          {"betas", {0.9, 0.999}},
              {"eps", 1e-8},     {"weight_decay", 0.01}, {"clip_grad_norm", nullptr},
              {"lr_schedule", "constant"}, {"warmup_steps", 0}, {"decay_steps", 0}};
}

Json adamwAttrs() {
  return Json{{"lr", 0.01},          {"beta1", 0.9},          {"beta2", 0.999},
              {"eps", 1e-8},         {"weight_decay", 0.01},  {"schedule", "constant"},
              {"warmup_steps", 0},   {"decay_steps", 0}};
}

//===----------------------------------------------------------------------===//
// The linear step, on the device or spilled.
//===----------------------------------------------------------------------===//

class SpillPlan : public ::testing::Test {
protected:
  /// The step's manifest and program; `spilled` puts W, grad.W and W's
  /// moments in the host pool.
  void build(bool spilled) {
    Json buffers = Json::array({
        arena(0, "x", {4, 8}, 0),
        weight(1, "W", {6, 8}, spilled),
        weight(2, "b", {6}, false),
        arena(3, "W on the device", {6, 8}, 128),
        arena(4, "y", {4, 6}, 320),
        arena(5, "loss", {}, 448),
        arena(6, "dW", {6, 8}, 512),
        state(7, "grad.W", {6, 8}, spilled ? 0 : 64, spilled),
        state(8, "optimizer.exp_avg.W", {6, 8}, spilled ? 192 : 256, spilled),
        state(9, "optimizer.exp_avg_sq.W", {6, 8}, spilled ? 384 : 448, spilled),
        state(10, "step", {}, 0, false, "i64"),
        weight(11, "one", {}, false, "i64"),
        arena(12, "step + 1", {}, 704, "i64"),
    });
    Json forward = Json::array();
    if (spilled) {
      Json prefetch = inst("prefetch", {1}, {3});
      prefetch["loc"] = "model.py:7 (in fc)";
      forward.push_back(prefetch);
    }
    forward.push_back(inst("linear", {0, spilled ? 3 : 1, 2}, {4}));
    forward.push_back(inst("reduce_sum", {4}, {5}, {{"dims", {0, 1}}}));
    Json backward = Json::array({inst("linear_backward_weight", {4, 0}, {6}),
                                 inst(spilled ? "spill" : "assign", {6}, {7})});
    Json optimizer = Json::array({inst("add", {10, 11}, {12}), inst("assign", {12}, {10}),
                                  inst("adamw", {7, 10}, {1, 8, 9}, adamwAttrs())});
    program = trainingProgram(768, spilled ? 64 : 640, 5, buffers,
                              Json::array({phase("forward", forward), phase("backward", backward),
                                           phase("optimizer", optimizer)}));
    if (spilled)
      program["host_state_bytes"] = 576;
    // weight_bytes: the slots of b and one, 64 each; the file: 192 + 24 + 8.
    Json entry = programEntry(768, spilled ? 128 : 224, spilled ? 64 : 640);
    if (spilled)
      entry["host_bytes"] = 192 + 576; // W's slot, host_state_bytes
    manifest = trainingManifest({4, 8}, {}, entry,
                                trainingSection(4, 0, adamwSpec(), {"W"}, {"W", "b"}));
    manifest["predicted"] = {{"memory_budget_bytes", 4096}};
    if (spilled)
      manifest["predicted"]["memory_bytes"] = {{"host", 768}};
  }

  void SetUp() override { build(true); }

  void TearDown() override {
    for (const std::string &d : dirs)
      fs::remove_all(d);
  }

  /// Writes the plan into a new directory; returns it.
  std::string write(const std::string &what = "plan") {
    std::string dir = tempDir(what);
    dirs.push_back(dir);
    std::vector<float> w(48), b(6);
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = 0.05f * static_cast<float>(static_cast<int>(i % 13) - 6);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = 0.1f * static_cast<float>(i);
    int64_t one = 1;
    Status s = writePlanFiles(dir, manifest, program,
                              {{"W", TensorDesc{DType::F32, {6, 8}}, w.data()},
                               {"b", TensorDesc{DType::F32, {6}}, b.data()},
                               {"one", TensorDesc{DType::I64, {}}, &one}});
    EXPECT_TRUE(s.ok()) << s.message();
    return dir;
  }
  Status load(Plan *plan, const std::string &what = "plan") {
    return loadPlan(write(what), plan);
  }
  /// A data file of `samples` rows of x.
  std::string data(int64_t samples) {
    std::vector<float> x(samples * 8);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = 0.25f * static_cast<float>(static_cast<int>(i % 7) - 3);
    std::string dir = tempDir("data");
    dirs.push_back(dir);
    std::string path = dir + "/data.safetensors";
    Status s = writeSafetensors(path, {{"x", TensorDesc{DType::F32, {samples, 8}}, x.data()}});
    EXPECT_TRUE(s.ok()) << s.message();
    return path;
  }

  /// What `steps` steps on `backend` leave: each step's loss, then W and
  /// its moments, as bytes.
  struct Result {
    std::vector<float> losses;
    std::vector<char> w, m, v;
    CopyStats copies;
  };
  void runSteps(const Plan &plan, Backend &backend, int steps, Result *out) {
    std::unique_ptr<Executor> ex;
    ASSERT_OK(Executor::create(plan.programs.at("stage0_tp0"), backend, &ex));
    for (int step = 0; step < steps; ++step) {
      std::vector<float> x(32);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = 0.125f * static_cast<float>(static_cast<int>((i + step) % 9) - 4);
      ASSERT_OK(ex->setInput("x", x.data(), x.size() * 4));
      for (size_t p = 0; p < 3; ++p)
        ASSERT_OK(ex->runPhase(p));
      float loss = 0;
      ASSERT_OK(ex->getOutput("loss", &loss, 4));
      out->losses.push_back(loss);
    }
    out->w.resize(192);
    out->m.resize(192);
    out->v.resize(192);
    ASSERT_OK(ex->readWeight("W", out->w.data(), 192));
    ASSERT_OK(ex->readState("optimizer.exp_avg.W", out->m.data(), 192));
    ASSERT_OK(ex->readState("optimizer.exp_avg_sq.W", out->v.data(), 192));
    out->copies = ex->copyStats();
  }

  Json manifest, program;
  std::vector<std::string> dirs;
};

TEST_F(SpillPlan, LoadsHostPoolsAndLaysOutTwoWeightRegions) {
  Plan plan;
  ASSERT_OK(load(&plan));
  const ProgramSpec &p = plan.programs.at("stage0_tp0");
  EXPECT_TRUE(p.hostPool);
  EXPECT_TRUE(p.slottedWeights);
  EXPECT_EQ(p.hostWeights, std::set<std::string>{"W"});
  // Every weight in file order in a 64-byte slot, W in the host region.
  EXPECT_TRUE(p.weightSlots.at("W").host);
  EXPECT_EQ(p.weightSlots.at("W").offset, 0u);
  size_t next = 0;
  for (const SafetensorsEntry &e : p.weights.entries)
    if (e.name != "W") {
      EXPECT_FALSE(p.weightSlots.at(e.name).host) << e.name;
      EXPECT_EQ(p.weightSlots.at(e.name).offset, next) << e.name;
      next += 64;
    }
  EXPECT_EQ(p.weightRegionBytes, 128u);
  EXPECT_EQ(p.hostWeightRegionBytes, 192u);
  EXPECT_EQ(p.hostStateBytes, 576u);
  EXPECT_EQ(p.hostBytes(), 768u);
  EXPECT_EQ(p.predictedBytes(), 768u + 128u + 64u); // device only
  EXPECT_TRUE(p.buffers[7].onHost());
  EXPECT_FALSE(p.buffers[10].onHost());
  EXPECT_FALSE(p.buffers[2].onHost());
  // cleave verify takes it.
  VerifyResult verified = verifyPlan(plan);
  EXPECT_TRUE(verified.ok()) << (verified.errors.empty() ? "" : verified.errors[0]);

  build(false);
  Plan device;
  ASSERT_OK(load(&device, "device"));
  const ProgramSpec &d = device.programs.at("stage0_tp0");
  EXPECT_FALSE(d.hostPool);
  EXPECT_FALSE(d.slottedWeights);
  EXPECT_EQ(d.hostBytes(), 0u);
}

TEST_F(SpillPlan, RejectsBadPools) {
  Plan plan;
  program["buffers"][1]["pool"] = "gpu";
  expectError(load(&plan), "programs/stage0_tp0.json: buffer 1 (W): pool \"gpu\" is neither");

  SetUp();
  program["buffers"][1]["pool"] = 3;
  expectError(load(&plan), "buffer 1 (W): pool 3 is neither \"device\" nor \"host\"");

  SetUp();
  program["buffers"][0]["pool"] = "host";
  expectError(load(&plan),
              "programs/stage0_tp0.json: buffer 0 (x): an arena buffer has no pool");

  SetUp();
  program["buffers"][0]["pool"] = "device";
  expectError(load(&plan), "buffer 0 (x): an arena buffer has no pool");

  SetUp(); // past host_state_bytes
  program["buffers"][9]["state_offset"] = 448;
  expectError(load(&plan), "buffer 9 (optimizer.exp_avg_sq.W) spans host state bytes [448, "
                           "640), past the host state region's 576 bytes");

  SetUp(); // host states overlap as device states would
  program["buffers"][9]["state_offset"] = 128;
  expectError(load(&plan),
              "state 'optimizer.exp_avg_sq.W' overlaps state 'optimizer.exp_avg.W' (buffer 8)");

  SetUp(); // a host state is 64-byte aligned
  program["buffers"][9]["state_offset"] = 376;
  expectError(load(&plan), "state_offset 376 of a host state is not 64-byte aligned");

  SetUp();
  manifest["programs"]["stage0_tp0"]["host_bytes"] = 700;
  expectError(load(&plan), "program 'stage0_tp0' predicts host_bytes 700, its host pool needs "
                           "768 (host weights 192 + host_state_bytes 576)");

  SetUp(); // absent is 0
  manifest["programs"]["stage0_tp0"].erase("host_bytes");
  expectError(load(&plan), "predicts host_bytes 0, its host pool needs 768");

  SetUp(); // weight_bytes is the device weights' slots
  manifest["programs"]["stage0_tp0"]["weight_bytes"] = 224;
  expectError(load(&plan), "needs 128 (its device weights, in 64-byte slots)");

  SetUp(); // host_state_bytes larger than its states reach
  program["host_state_bytes"] = 1024;
  manifest["programs"]["stage0_tp0"]["host_bytes"] = 192 + 1024;
  expectError(load(&plan), "host_state_bytes 1024 is more than its host state buffers reach");

  SetUp(); // every view of a weight is in one pool
  program["buffers"].push_back(weight(13, "W", {48}, false));
  expectError(load(&plan), "buffer 13 (W) puts weight 'W' in the device pool, buffer 1 in the "
                           "host pool");

  SetUp(); // and of a state
  program["buffers"].push_back(state(13, "grad.W", {48}, 0, false));
  expectError(load(&plan), "buffer 13 (grad.W) puts state 'grad.W' in the device pool, buffer 7 "
                           "in the host pool");

  SetUp(); // version 1 has no pools
  manifest["version"] = 1;
  manifest["schedule"]["kind"] = "forward";
  manifest.erase("training");
  program["version"] = 1;
  program.erase("host_state_bytes");
  expectError(load(&plan), "buffer 1 (W): 'pool' needs plan format version 2");

  SetUp(); // nor host states
  manifest["version"] = 1;
  manifest["schedule"]["kind"] = "forward";
  manifest.erase("training");
  program["version"] = 1;
  expectError(load(&plan), "host_state_bytes needs plan format version 2");
}

TEST_F(SpillPlan, RejectsCopiesAgainstTheirContract) {
  auto create = [&]() -> Status {
    Plan plan;
    CLEAVE_RETURN_IF_ERROR(load(&plan));
    std::unique_ptr<Backend> cpu = createCpuBackend();
    std::unique_ptr<Executor> ex;
    return Executor::create(plan.programs.at("stage0_tp0"), *cpu, &ex);
  };
  Json &prefetch = program["phases"][0]["instructions"][0];
  Json &spill = program["phases"][1]["instructions"][1];
  ASSERT_EQ(prefetch["kernel"], "prefetch");
  ASSERT_EQ(spill["kernel"], "spill");

  prefetch["inputs"] = {10}; // the step: a device state
  expectError(create(), "programs/stage0_tp0.json: forward instruction 0 (prefetch) at model.py:7 "
                        "(in fc): prefetch: input 0 (source) is buffer 10 (step), a device state; "
                        "prefetch copies from a weight or state in the host pool");
  SetUp();
  program["phases"][0]["instructions"][0]["inputs"] = {6}; // an arena buffer
  expectError(create(), "prefetch: input 0 (source) is buffer 6 (dW), an arena buffer");
  SetUp();
  program["phases"][0]["instructions"][0]["outputs"] = {8}; // a host state
  expectError(create(), "prefetch: output 0 (destination) is buffer 8 (optimizer.exp_avg.W), a "
                        "host state; prefetch copies into an arena buffer");
  SetUp();
  program["phases"][1]["instructions"][1]["outputs"] = {3}; // spill into the arena
  expectError(create(), "backward instruction 1 (spill): spill: output 0 (destination) is buffer "
                        "3 (W on the device), an arena buffer; spill copies into a weight or "
                        "state in the host pool");
  SetUp();
  program["phases"][1]["instructions"][1]["inputs"] = {7}; // spill from the host
  program["phases"][1]["instructions"][1]["outputs"] = {8};
  expectError(create(), "spill: input 0 (source) is buffer 7 (grad.W), a host state");
  SetUp();
  program["phases"][1]["instructions"][1]["inputs"] = {4}; // y [4, 6] into grad.W [6, 8]
  expectError(create(), "spill: output 0 (destination) buffer 7 (grad.W), a host state, is "
                        "6x8xf32 but input 0 (source) buffer 4 (y), an arena buffer, is 4x6xf32: a "
                        "copy keeps the shape and dtype");
  SetUp();
  program["phases"][0]["instructions"][0]["attrs"] = {{"async", true}};
  expectError(create(), "prefetch: takes no attributes, got 'async'");
  SetUp();
  program["phases"][0]["instructions"][0]["inputs"] = {1, 2};
  expectError(create(), "prefetch: expects 1 input and 1 output, got 2 and 1");
}

TEST_F(SpillPlan, BackendsWithoutACopyQueueRefuseSpilledPlans) {
  Plan plan;
  ASSERT_OK(load(&plan));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueueBackend none(*cpu, /*hasQueue=*/false, 0);
  std::unique_ptr<Executor> ex;
  expectError(Executor::create(plan.programs.at("stage0_tp0"), none, &ex),
              "programs/stage0_tp0.json: spilled plans (pool host) run on the CPU backend only "
              "for now");
  // A plan that does not spill runs there.
  build(false);
  Plan device;
  ASSERT_OK(load(&device, "device"));
  ASSERT_OK(Executor::create(device.programs.at("stage0_tp0"), none, &ex));
}

TEST_F(SpillPlan, TheCudaBackendRefusesSpilledPlans) {
  std::unique_ptr<Backend> cuda;
  Status started = createBackend(BackendChoice::Cuda, 0, 1, {}, &cuda);
  if (!started.ok())
    GTEST_SKIP() << "no CUDA backend here: " << started.message();
  Plan plan;
  ASSERT_OK(load(&plan));
  std::unique_ptr<Executor> ex;
  expectError(Executor::create(plan.programs.at("stage0_tp0"), *cuda, &ex),
              "spilled plans (pool host) run on the CPU backend only for now");
}

TEST_F(SpillPlan, SpilledStepEqualsTheDeviceStepBitForBit) {
  Plan spilled, device;
  ASSERT_OK(load(&spilled, "spilled"));
  build(false);
  ASSERT_OK(load(&device, "device"));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueueBackend slow(*cpu, /*hasQueue=*/true, 0.01);
  Result onDevice, onHost, onSlowHost;
  runSteps(device, *cpu, 3, &onDevice);
  runSteps(spilled, *cpu, 3, &onHost);
  // Every copy still in flight when the next instruction starts: the
  // executor's waits keep the numbers.
  runSteps(spilled, slow, 3, &onSlowHost);
  ASSERT_EQ(onDevice.losses.size(), 3u);
  for (const Result *r : {&onHost, &onSlowHost}) {
    ASSERT_EQ(r->losses.size(), 3u);
    EXPECT_EQ(0, std::memcmp(r->losses.data(), onDevice.losses.data(), 12));
    EXPECT_EQ(r->w, onDevice.w);
    EXPECT_EQ(r->m, onDevice.m);
    EXPECT_EQ(r->v, onDevice.v);
  }
  EXPECT_NE(onDevice.losses[0], onDevice.losses[2]) << "the step trains";
  // Per step one prefetch of W and one spill of dW, 192 bytes each.
  for (const Result *r : {&onHost, &onSlowHost}) {
    EXPECT_EQ(r->copies.prefetchBytes, 3u * 192);
    EXPECT_EQ(r->copies.spillBytes, 3u * 192);
    EXPECT_EQ(r->copies.prefetches, 3u);
    EXPECT_EQ(r->copies.spills, 3u);
    EXPECT_GT(r->copies.copySeconds, 0.0);
  }
  // The slow copies: 6 of at least 10 ms; the linear right after the
  // prefetch waited for each, and so did each phase's end.
  EXPECT_GE(onSlowHost.copies.copySeconds, 0.06);
  EXPECT_GT(onSlowHost.copies.stallSeconds, 0.03);
  EXPECT_LE(onSlowHost.copies.stallSeconds, onSlowHost.copies.copySeconds + 0.05);
  EXPECT_EQ(onDevice.copies.prefetchBytes + onDevice.copies.spillBytes, 0u);
  EXPECT_EQ(onDevice.copies.overlap(), 1.0);
}

TEST_F(SpillPlan, PersistentTensorsOfTheHostPoolByNameAndRegion) {
  Plan plan;
  ASSERT_OK(load(&plan));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  std::unique_ptr<Executor> ex;
  ASSERT_OK(Executor::create(plan.programs.at("stage0_tp0"), *cpu, &ex));
  EXPECT_EQ(ex->allocatedBytes(), 960u);
  EXPECT_EQ(ex->hostBytes(), 768u);
  // The host state starts zeroed, the host weight as the file has it.
  std::vector<float> m(48, -1), w(48);
  ASSERT_OK(ex->readState("optimizer.exp_avg.W", m.data(), 192));
  EXPECT_EQ(m, std::vector<float>(48, 0.0f));
  ASSERT_OK(ex->readWeight("W", w.data(), 192));
  EXPECT_EQ(w[1], 0.05f * -5);
  for (size_t i = 0; i < m.size(); ++i)
    m[i] = static_cast<float>(i);
  ASSERT_OK(ex->writeState("optimizer.exp_avg.W", m.data(), 192));
  std::vector<float> back(48);
  ASSERT_OK(ex->readState("optimizer.exp_avg.W", back.data(), 192));
  EXPECT_EQ(back, m);
  w[0] = 42;
  ASSERT_OK(ex->writeWeight("W", w.data(), 192));
  ASSERT_OK(ex->readWeight("W", back.data(), 192));
  EXPECT_EQ(back[0], 42.0f);
  expectError(ex->readState("grad.W", back.data(), 100), "has 192 bytes, not 100");

  // The state regions: device (64 bytes: the step), then host (576).
  ASSERT_EQ(ex->stateRegionBytes(), 64u + 576u);
  std::vector<char> region(ex->stateRegionBytes());
  ASSERT_OK(ex->readStateRegion(region.data()));
  EXPECT_EQ(0, std::memcmp(region.data() + 64 + 192, m.data(), 192));
  int64_t step = 7;
  std::memcpy(region.data(), &step, 8);
  float g = 3;
  std::memcpy(region.data() + 64 + 4, &g, 4); // grad.W[1]
  ASSERT_OK(ex->writeStateRegion(region.data()));
  std::vector<float> grad(48);
  ASSERT_OK(ex->readState("grad.W", grad.data(), 192));
  EXPECT_EQ(grad[1], 3.0f);
  ASSERT_OK(ex->readState("step", &step, 8));
  EXPECT_EQ(step, 7);
}

TEST_F(SpillPlan, TrainerReportsTheHostPoolAndCheckpointsResumeAcrossPools) {
  Plan spilled, device;
  ASSERT_OK(load(&spilled, "spilled"));
  build(false);
  ASSERT_OK(load(&device, "device"));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  TrainOptions options;
  options.dataPath = data(12);
  options.steps = 3;
  std::string ckSpilled = dirs.front() + "/ck", ckDevice = dirs.front() + "/ck-device";
  options.checkpointDir = ckSpilled;
  options.checkpointEvery = 2;
  TrainReport onHost, onDevice;
  ASSERT_OK(train(spilled, *cpu, options, &onHost));
  options.checkpointDir = ckDevice;
  ASSERT_OK(train(device, *cpu, options, &onDevice));
  ASSERT_EQ(onHost.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(onHost.steps[i].loss, onDevice.steps[i].loss) << "step " << i + 1;

  Json report = Json::parse(trainReportJson(spilled, options, onHost));
  ASSERT_TRUE(report.contains("spill"));
  const Json &spill = report["spill"];
  EXPECT_EQ(spill["host_bytes"], 768);
  EXPECT_EQ(spill["device_bytes"], 960);
  EXPECT_EQ(spill["prefetch_bytes"], 3 * 192);
  EXPECT_EQ(spill["spill_bytes"], 3 * 192);
  EXPECT_GT(spill["copy_seconds"].get<double>(), 0.0);
  EXPECT_GE(spill["stall_seconds"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(spill["overlap"].get<double>(),
                   std::clamp(1 - spill["stall_seconds"].get<double>() /
                                      spill["copy_seconds"].get<double>(),
                              0.0, 1.0));
  EXPECT_EQ(report["memory_bytes"]["allocated"], 960);
  EXPECT_EQ(report["memory_bytes"]["host"], 768);
  EXPECT_EQ(report["memory_bytes"]["budget"], 4096);
  EXPECT_EQ(report["memory_bytes"]["predicted_host"], 768);
  EXPECT_EQ(report["memory_bytes"]["device_total"],
            960 + report["memory_bytes"]["backend_workspace"].get<int64_t>());
  Json plain = Json::parse(trainReportJson(device, options, onDevice));
  EXPECT_FALSE(plain.contains("spill"));
  EXPECT_EQ(plain["memory_bytes"]["host"], 0);
  EXPECT_EQ(plain["memory_bytes"]["allocated"], 224 + 640 + 768);

  // A checkpoint holds every state by name, wherever it lived: each form
  // resumes the other's and goes on as it would have.
  for (auto [plan, from, uninterrupted] :
       {std::tuple{&device, ckSpilled, &onDevice}, {&spilled, ckDevice, &onHost}}) {
    TrainOptions resume = options;
    resume.checkpointDir.clear();
    resume.resumePath = from + "/ckpt-2";
    TrainReport resumed;
    ASSERT_OK(train(*plan, *cpu, resume, &resumed));
    ASSERT_EQ(resumed.steps.size(), 1u);
    EXPECT_EQ(resumed.steps[0].loss, uninterrupted->steps[2].loss) << from;
  }
}

//===----------------------------------------------------------------------===//
// The executor's ordering, on a program that breaks without it.
//===----------------------------------------------------------------------===//

class SpillHazards : public ::testing::Test {
protected:
  static constexpr int64_t kN = 1024; // floats per tensor
  static constexpr size_t kBytes = kN * 4;

  void SetUp() override {
    dir = tempDir("hazards");
    // Arena: x, A, C, E, B, D, F; host: the weight HW, states H1, H2, H3.
    Json buffers = Json::array({
        arena(0, "x", {kN}, 0),
        arena(1, "A", {kN}, kBytes),
        arena(2, "C", {kN}, 2 * kBytes),
        arena(3, "E", {kN}, 3 * kBytes),
        arena(4, "B", {kN}, 4 * kBytes),
        arena(5, "D", {kN}, 5 * kBytes),
        arena(6, "F", {kN}, 6 * kBytes),
        weight(7, "HW", {kN}, true),
        state(8, "H1", {kN}, 0, true),
        state(9, "H2", {kN}, kBytes, true),
        state(10, "H3", {kN}, 2 * kBytes, true),
    });
    Json steps = Json::array({
        inst("add", {0, 0}, {1}),   // 0: A = 2x
        inst("spill", {1}, {8}),    // 1: H1 <- A, in flight
        inst("mul", {0, 0}, {1}),   // 2: writes the spill's source: waits, H1 = 2x
        inst("spill", {1}, {9}),    // 3: H2 <- A = x²
        inst("prefetch", {9}, {2}), // 4: C <- H2: after 3 on the queue, C = x²
        inst("add", {2, 0}, {3}),   // 5: reads the prefetch's destination: E = x² + x
        inst("prefetch", {7}, {4}), // 6: B <- HW (as loaded)
        inst("assign", {1}, {7}),   // 7: writes the prefetch's source: waits, HW = x²
        inst("add", {4, 3}, {5}),   // 8: D = HW0 + x² + x
        inst("spill", {5}, {10}),   // 9: H3 <- D
        inst("add", {10, 0}, {6}),  // 10: a kernel reads a host state being spilled into: F = D + x
    });
    Json program = trainingProgram(7 * kBytes, 0, 6, buffers,
                                   Json::array({phase("forward", steps)}));
    program["host_state_bytes"] = 3 * kBytes;
    Json entry = programEntry(7 * kBytes, 0, 0);
    entry["host_bytes"] = 4 * kBytes;
    Json manifest = trainingManifest({kN}, {kN}, entry,
                                     trainingSection(kN, 0, {{"kind", "none"}}, {"HW"}, {"HW"}));
    hw.resize(kN);
    x.resize(kN);
    for (int64_t i = 0; i < kN; ++i) {
      hw[i] = static_cast<float>(1000 + i);
      x[i] = static_cast<float>(i % 17) - 8;
    }
    ASSERT_OK(writePlanFiles(dir, manifest, program,
                             {{"HW", TensorDesc{DType::F32, {kN}}, hw.data()}}));
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Runs the phase on `backend` and checks every tensor it leaves.
  void check(Backend &backend, CopyStats *stats) {
    Plan plan;
    ASSERT_OK(loadPlan(dir, &plan));
    std::unique_ptr<Executor> ex;
    ASSERT_OK(Executor::create(plan.programs.at("stage0_tp0"), backend, &ex));
    ASSERT_OK(ex->setInput("x", x.data(), kBytes));
    ASSERT_OK(ex->run("forward"));
    std::vector<float> h1(kN), h2(kN), h3(kN), w(kN), f(kN);
    ASSERT_OK(ex->readState("H1", h1.data(), kBytes));
    ASSERT_OK(ex->readState("H2", h2.data(), kBytes));
    ASSERT_OK(ex->readState("H3", h3.data(), kBytes));
    ASSERT_OK(ex->readWeight("HW", w.data(), kBytes));
    ASSERT_OK(ex->getOutput("loss", f.data(), kBytes));
    int wrong[5] = {0, 0, 0, 0, 0};
    for (int64_t i = 0; i < kN; ++i) {
      const float xi = x[i], d = hw[i] + xi * xi + xi;
      wrong[0] += h1[i] != 2 * xi;     // the spill copied A before it was overwritten
      wrong[1] += h2[i] != xi * xi;
      wrong[2] += w[i] != xi * xi;     // assign wrote HW after the prefetch read it
      wrong[3] += h3[i] != d;          // D used B and C as prefetched
      wrong[4] += f[i] != d + xi;      // F read H3 after the spill into it
    }
    EXPECT_EQ(wrong[0], 0) << "H1: the spill's source was overwritten before it was copied";
    EXPECT_EQ(wrong[1], 0) << "H2";
    EXPECT_EQ(wrong[2], 0) << "HW";
    EXPECT_EQ(wrong[3], 0) << "H3 = D: a prefetch's destination read early or its source "
                              "written early";
    EXPECT_EQ(wrong[4], 0) << "F: a host state read before the spill into it finished";
    *stats = ex->copyStats();
  }

  std::string dir;
  std::vector<float> hw, x;
};

TEST_F(SpillHazards, CopiesInFlightAreWaitedForWhereTheyOverlap) {
  std::unique_ptr<Backend> cpu = createCpuBackend();
  CopyStats fast, slow;
  check(*cpu, &fast);
  // Each copy sleeps 20 ms first: without the waits every check above fails.
  QueueBackend slowBackend(*cpu, /*hasQueue=*/true, 0.02);
  check(slowBackend, &slow);
  for (const CopyStats *s : {&fast, &slow}) {
    EXPECT_EQ(s->prefetches, 2u);
    EXPECT_EQ(s->spills, 3u);
    EXPECT_EQ(s->prefetchBytes, 2 * kBytes);
    EXPECT_EQ(s->spillBytes, 3 * kBytes);
  }
  // Five copies of 20 ms or more; the instructions waited for most of them
  // (nothing here computes long enough to hide one), never longer than
  // they took.
  EXPECT_GE(slow.copySeconds, 0.1);
  EXPECT_GE(slow.stallSeconds, 0.06);
  EXPECT_LE(slow.stallSeconds, slow.copySeconds + 0.05);
  EXPECT_LE(slow.overlap(), 1.0);
}

TEST(CopyQueue, RunsCopiesOneAtATimeInOrderAndCountsItsTime) {
  // A chain: each copy reads what the one before wrote. Waiting for the
  // last one (the caller may run copies the thread has not taken) must
  // still run them one after another.
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<CopyQueue> q = cpu::createThreadCopyQueue(round % 2 ? 0.002 : 0);
    std::vector<std::vector<int>> v(6, std::vector<int>(1000, 0));
    v[0].assign(1000, round + 1);
    uint64_t last = 0;
    for (size_t i = 1; i < v.size(); ++i)
      last = q->issue(v[i].data(), v[i - 1].data(), 4000, i % 2 == 0);
    EXPECT_EQ(last, 5u);
    ASSERT_OK(q->wait(last));
    EXPECT_EQ(q->done(), 5u);
    EXPECT_EQ(v[5], v[0]) << "round " << round;
    if (round % 2)
      EXPECT_GE(q->busySeconds(), 0.01);
    expectError(q->wait(6), "only 5 were issued");
  }
}

} // namespace
