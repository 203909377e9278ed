//===- OwnedWeightsTest.cpp - weights a kernel may prepack in place -------===//
//
// The executor marks a weight as the kernel's own (KernelSignature::
// ownedConstants) only in a forward-only program, where one instruction
// reads it and none writes it; the CPU conv2d then prepacks it in place
// into oneDNN's layout. A hand-written forward program with a weight read by
// two convolutions and another read by one: the flags, and the same outputs
// from every convolution, run after run.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"

#include "HandWrittenPlans.h"

#include <gtest/gtest.h>

#include <map>

using namespace cleave::runtime;
using namespace cleave::testplan;

namespace {

/// The CPU backend, recording each kernel's ownedConstants in the order the
/// executor prepares them.
class RecordingBackend final : public ForwardingBackend {
public:
  using ForwardingBackend::ForwardingBackend;
  Status prepareKernel(const KernelSignature &s, KernelFn *fn) override {
    owned.push_back(s.ownedConstants);
    return inner_.prepareKernel(s, fn);
  }

  std::vector<std::vector<bool>> owned;
};

constexpr size_t kImage = 2 * 16 * 12 * 12, kOut = 2 * 64 * 12 * 12;

/// y_i = conv2d(x, W) for i = 1, 2 (W read twice), y3 = conv2d(x, V), V a
/// copy of W (read once), 3x3, padding 1.
Json convProgram() {
  const size_t out = kImage * 4, scratch = out + 3 * kOut * 4;
  Json attrs = {{"stride", {1, 1}}, {"padding", {1, 1}}, {"dilation", {1, 1}}, {"groups", 1}};
  // The convolution's scratch: its channels-last copies of x and y and the
  // weight in oneDNN's blocked format (where it changes between calls),
  // larger than its im2col matrix (16 * 9 x 144 floats).
  const size_t scratchBytes = (kImage + kOut + 64 * 16 * 9) * 4;
  Json scratchSpec = {{"arena_offset", scratch}, {"bytes", scratchBytes}};
  Json instructions = Json::array();
  for (auto [w, y] : {std::pair{1, 3}, std::pair{1, 4}, std::pair{2, 5}}) {
    Json i = inst("conv2d", {0, w}, {y}, attrs);
    i["scratch"] = scratchSpec;
    instructions.push_back(i);
  }
  return Json{{"format", "cleave-program"},
              {"version", 1},
              {"name", "stage0_tp0"},
              {"arena_bytes", scratch + scratchBytes},
              {"inputs", Json::array({{{"name", "x"}, {"buffer", 0}}})},
              {"outputs", Json::array({{{"name", "y1"}, {"buffer", 3}},
                                       {{"name", "y2"}, {"buffer", 4}},
                                       {{"name", "y3"}, {"buffer", 5}}})},
              {"buffers", Json::array({arena(0, "x", {2, 16, 12, 12}, 0),
                                       weight(1, "W", {64, 16, 3, 3}, false),
                                       weight(2, "V", {64, 16, 3, 3}, false),
                                       arena(3, "y1", {2, 64, 12, 12}, out),
                                       arena(4, "y2", {2, 64, 12, 12}, out + kOut * 4),
                                       arena(5, "y3", {2, 64, 12, 12}, out + 2 * kOut * 4)})},
              {"phases", Json::array({phase("forward", instructions)})}};
}

TEST(OwnedWeights, OnlyAForwardProgramsSingleReaderWeightIsPrepackedInPlace) {
  const ScopedTestDir scoped("owned-weights");
  const std::string &dir = scoped.path();
  Json program = convProgram();
  auto output = [](const std::string &name) {
    return Json{{"name", name}, {"shape", {2, 64, 12, 12}}, {"dtype", "f32"}};
  };
  Json manifest = {
      {"format", "cleave-plan"},
      {"version", 1},
      {"model", {{"source", "handwritten"}}},
      {"inputs", Json::array({{{"name", "x"}, {"shape", {2, 16, 12, 12}}, {"dtype", "f32"}}})},
      {"outputs", Json::array({output("y1"), output("y2"), output("y3")})},
      {"mesh", {{"pp", 1}, {"tp", 1}, {"dp", 1}}},
      {"schedule", {{"kind", "forward"}, {"microbatches", 1}}},
      {"devices", Json::array({{{"rank", 0}, {"backend", "cpu"}, {"stage", 0}, {"tp", 0},
                                {"dp", 0}, {"program", "stage0_tp0"}}})},
      {"programs",
       {{"stage0_tp0",
         {{"file", "programs/stage0_tp0.json"},
          {"weights", "weights/stage0_tp0.safetensors"},
          {"arena_bytes", program["arena_bytes"]},
          {"weight_bytes", 2 * 64 * 16 * 9 * 4}}}}}};
  std::vector<float> w(64 * 16 * 9), x(kImage);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.01f * static_cast<float>(static_cast<int>(i * 7 % 23) - 11);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.1f * static_cast<float>(static_cast<int>(i * 5 % 17) - 8);
  TensorDesc wDesc{DType::F32, {64, 16, 3, 3}};
  ASSERT_TRUE(writePlanFiles(dir, manifest, program, {{"W", wDesc, w.data()}, {"V", wDesc, w.data()}})
                  .ok());
  Plan plan;
  Status loaded = loadPlan(dir, &plan);
  ASSERT_TRUE(loaded.ok()) << loaded.message();

  std::unique_ptr<Backend> cpu = createCpuBackend();
  RecordingBackend backend(*cpu);
  std::unique_ptr<Executor> ex;
  Status created = Executor::create(plan.programs.at("stage0_tp0"), backend, &ex);
  ASSERT_TRUE(created.ok()) << created.message();
  ASSERT_EQ(backend.owned.size(), 3u);
  EXPECT_EQ(backend.owned[0], (std::vector<bool>{false, false})); // W has two readers
  EXPECT_EQ(backend.owned[1], (std::vector<bool>{false, false}));
  EXPECT_EQ(backend.owned[2], (std::vector<bool>{false, true}));  // V is conv 3's own

  // V prepacked by the first run stays right in the second; W, read twice,
  // is left as it is.
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(ex->setInput("x", x.data(), x.size() * 4).ok());
    ASSERT_TRUE(ex->run().ok());
    std::vector<float> y1(kOut), y2(kOut), y3(kOut);
    ASSERT_TRUE(ex->getOutput("y1", y1.data(), kOut * 4).ok());
    ASSERT_TRUE(ex->getOutput("y2", y2.data(), kOut * 4).ok());
    ASSERT_TRUE(ex->getOutput("y3", y3.data(), kOut * 4).ok());
    EXPECT_EQ(y1, y2) << "run " << run;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < kOut; ++i) {
      worst = std::max(worst, std::abs(double(y1[i]) - y3[i]));
      scale = std::max(scale, std::abs(double(y1[i])));
    }
    EXPECT_GT(scale, 0.1);
    EXPECT_LE(worst, 1e-5 * scale) << "run " << run;
  }
}

TEST(OwnedWeights, ATrainingProgramOwnsNoWeight) {
  const ScopedTestDir scoped("owned-weights-train");
  const std::string &dir = scoped.path();
  ASSERT_TRUE(writeWPlusXPlan(dir).ok());
  Plan plan;
  ASSERT_TRUE(loadPlan(dir, &plan).ok());
  std::unique_ptr<Backend> cpu = createCpuBackend();
  RecordingBackend backend(*cpu);
  std::unique_ptr<Executor> ex;
  ASSERT_TRUE(Executor::create(plan.programs.at("stage0_tp0"), backend, &ex).ok());
  ASSERT_FALSE(backend.owned.empty());
  for (const std::vector<bool> &flags : backend.owned)
    for (bool flag : flags)
      EXPECT_FALSE(flag);
}

} // namespace
