//===- HandWrittenPlans.h - small training plans written by hand -*- C++ -*-===//
//
// What the runtime's training tests (TrainingRuntimeTest, SpillRuntimeTest,
// JobTest) share to write plans by hand: a temporary directory per test,
// the pieces of a one-device training plan (manifest, program, buffers,
// instructions) and its files, and the plan "w += x" with its data. Each
// test changes the JSON it gets before writing it, to break one rule.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TEST_UNIT_HANDWRITTENPLANS_H
#define CLEAVE_TEST_UNIT_HANDWRITTENPLANS_H

#include "runtime/Backend.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::cleave::runtime::Status s_ = (expr);                                     \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

namespace cleave::testplan {

using Json = nlohmann::json;
using runtime::Shape;
using runtime::Status;

/// `status` is an error whose message contains `part`.
inline void expectError(const Status &status, const std::string &part) {
  ASSERT_FALSE(status.ok()) << "expected an error mentioning '" << part << "'";
  EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
}

/// A new, empty directory for the running test:
/// <tmp>/cleave-<what>-<pid>-<test name>.
inline std::string testDir(const std::string &what) {
  std::string dir =
      (std::filesystem::temp_directory_path() /
       ("cleave-" + what + "-" + std::to_string(::getpid()) + "-" +
        ::testing::UnitTest::GetInstance()->current_test_info()->name()))
          .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

/// A testDir that is removed, with everything in it, when the test ends:
/// passed, or stopped by a failed ASSERT.
class ScopedTestDir {
public:
  explicit ScopedTestDir(const std::string &what) : path_(testDir(what)) {}
  ~ScopedTestDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTestDir(const ScopedTestDir &) = delete;
  ScopedTestDir &operator=(const ScopedTestDir &) = delete;
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

/// A backend that hands everything to `inner`: tests override the part they
/// watch or change (the copy queue, the kernels' signatures).
class ForwardingBackend : public runtime::Backend {
public:
  explicit ForwardingBackend(runtime::Backend &inner) : inner_(inner) {}
  const char *name() const override { return inner_.name(); }
  bool hasKernel(std::string_view k) const override { return inner_.hasKernel(k); }
  std::vector<std::string> kernelNames() const override { return inner_.kernelNames(); }
  runtime::Status prepareKernel(const runtime::KernelSignature &s,
                                runtime::KernelFn *fn) override {
    return inner_.prepareKernel(s, fn);
  }
  runtime::Status allocate(size_t bytes, void **out) override {
    return inner_.allocate(bytes, out);
  }
  void deallocate(void *p) override { inner_.deallocate(p); }
  runtime::Status copyToDevice(void *d, const void *s, size_t n) override {
    return inner_.copyToDevice(d, s, n);
  }
  runtime::Status copyToHost(void *d, const void *s, size_t n) override {
    return inner_.copyToHost(d, s, n);
  }
  runtime::Status copyOnDevice(void *d, const void *s, size_t n) override {
    return inner_.copyOnDevice(d, s, n);
  }
  runtime::Status synchronize() override { return inner_.synchronize(); }
  bool sharesHostMemory() const override { return inner_.sharesHostMemory(); }

protected:
  runtime::Backend &inner_;
};

//===----------------------------------------------------------------------===//
// A program's pieces: buffers, instructions, phases.
//===----------------------------------------------------------------------===//

inline Json buffer(int64_t id, const std::string &name, Shape shape, const std::string &dtype) {
  return Json{{"id", id}, {"name", name}, {"shape", shape}, {"dtype", dtype}};
}
inline Json arena(int64_t id, const std::string &name, Shape shape, size_t offset,
                  const std::string &dtype = "f32") {
  Json b = buffer(id, name, std::move(shape), dtype);
  b["arena_offset"] = offset;
  return b;
}
/// The weight `name`; `host`: in the host pool.
inline Json weight(int64_t id, const std::string &name, Shape shape, bool host,
                   const std::string &dtype = "f32") {
  Json b = buffer(id, name, std::move(shape), dtype);
  b["weight"] = name;
  if (host)
    b["pool"] = "host";
  return b;
}
/// The state `name` at `offset` of its region; `host`: in the host pool.
inline Json state(int64_t id, const std::string &name, Shape shape, size_t offset, bool host,
                  const std::string &dtype = "f32") {
  Json b = buffer(id, name, std::move(shape), dtype);
  b["state"] = name;
  b["state_offset"] = offset;
  if (host)
    b["pool"] = "host";
  return b;
}
inline Json inst(const std::string &kernel, Json inputs, Json outputs, Json attrs = nullptr) {
  Json i{{"kernel", kernel}, {"inputs", std::move(inputs)}, {"outputs", std::move(outputs)}};
  if (!attrs.is_null())
    i["attrs"] = std::move(attrs);
  return i;
}
inline Json phase(const std::string &name, Json instructions) {
  return Json{{"name", name}, {"instructions", std::move(instructions)}};
}

//===----------------------------------------------------------------------===//
// A one-device training plan: its program stage0_tp0, its manifest, files.
//===----------------------------------------------------------------------===//

/// The program stage0_tp0 (format version 2): input x in buffer 0, output
/// loss in buffer `loss`.
inline Json trainingProgram(size_t arenaBytes, size_t stateBytes, int64_t loss, Json buffers,
                            Json phases) {
  return Json{{"format", "cleave-program"},
              {"version", 2},
              {"name", "stage0_tp0"},
              {"arena_bytes", arenaBytes},
              {"state_bytes", stateBytes},
              {"inputs", Json::array({{{"name", "x"}, {"buffer", 0}}})},
              {"outputs", Json::array({{{"name", "loss"}, {"buffer", loss}}})},
              {"buffers", std::move(buffers)},
              {"phases", std::move(phases)}};
}

/// stage0_tp0's entry in the manifest's "programs": its files and sizes.
inline Json programEntry(size_t arenaBytes, size_t weightBytes, size_t stateBytes) {
  return Json{{"file", "programs/stage0_tp0.json"},
              {"weights", "weights/stage0_tp0.safetensors"},
              {"arena_bytes", arenaBytes},
              {"weight_bytes", weightBytes},
              {"state_bytes", stateBytes}};
}

/// The manifest's "training": the model computes the loss (no labels), in
/// f32; the state_dict is `stateDict`, each name its weight's.
inline Json trainingSection(int64_t batchSize, int64_t seed, Json optimizer,
                            const std::vector<std::string> &parameters,
                            const std::vector<std::string> &stateDict) {
  Json entries = Json::array();
  for (const std::string &name : stateDict)
    entries.push_back({{"name", name}, {"tensor", name}});
  return Json{{"loss", "model"},
              {"labels", nullptr},
              {"batch_size", batchSize},
              {"dtype", "f32"},
              {"seed", seed},
              {"optimizer", std::move(optimizer)},
              {"parameters", parameters},
              {"state_dict", std::move(entries)}};
}

/// The manifest (format version 2) of a training plan on one CPU device
/// running stage0_tp0 (`entry`): input x of `xShape`, output loss of
/// `lossShape`, both f32. No "predicted": a test adds its own.
inline Json trainingManifest(Shape xShape, Shape lossShape, Json entry, Json training) {
  return Json{
      {"format", "cleave-plan"},
      {"version", 2},
      {"model", {{"source", "handwritten"}}},
      {"inputs", Json::array({{{"name", "x"}, {"shape", xShape}, {"dtype", "f32"}}})},
      {"outputs", Json::array({{{"name", "loss"}, {"shape", lossShape}, {"dtype", "f32"}}})},
      {"mesh", {{"pp", 1}, {"tp", 1}, {"dp", 1}}},
      {"schedule", {{"kind", "train"}, {"microbatches", 1}}},
      {"devices", Json::array({{{"rank", 0}, {"backend", "cpu"}, {"stage", 0}, {"tp", 0},
                                {"dp", 0}, {"program", "stage0_tp0"}}})},
      {"programs", {{"stage0_tp0", std::move(entry)}}},
      {"training", std::move(training)}};
}

/// Writes a plan of one program into `dir`: manifest.json,
/// programs/stage0_tp0.json and weights/stage0_tp0.safetensors (`weights`).
inline Status writePlanFiles(const std::string &dir, const Json &manifest, const Json &program,
                             const std::vector<runtime::SafetensorsTensor> &weights) {
  std::filesystem::create_directories(dir + "/programs");
  std::filesystem::create_directories(dir + "/weights");
  std::ofstream(dir + "/manifest.json") << manifest.dump(1);
  std::ofstream(dir + "/programs/stage0_tp0.json") << program.dump(1);
  return runtime::writeSafetensors(dir + "/weights/stage0_tp0.safetensors", weights);
}

//===----------------------------------------------------------------------===//
// The plan "w += x": one weight w (2x3, 1..6) that each step replaces with
// w + x (in place, through assign), the loss sum(w + x), batch 2, seed 5,
// no optimizer; and a state region (a moment and a step nothing writes).
//===----------------------------------------------------------------------===//

inline Json wPlusXProgram() {
  return trainingProgram(
      192, 128, 3,
      Json::array({
          arena(0, "x", {2, 3}, 0),
          weight(1, "w", {2, 3}, false),
          state(2, "moment", {2, 3}, 0, false),
          arena(3, "loss", {}, 64),
          arena(4, "sum", {2, 3}, 128),
          state(5, "step", {}, 64, false, "i64"),
      }),
      Json::array({phase("forward", Json::array({inst("add", {0, 1}, {4}),
                                                 inst("reduce_sum", {4}, {3},
                                                      {{"dims", {0, 1}}})})),
                   phase("optimizer", Json::array({inst("assign", {4}, {1})}))}));
}

inline Json wPlusXManifest() {
  Json manifest = trainingManifest({2, 3}, {}, programEntry(192, 24, 128),
                                   trainingSection(2, 5, {{"kind", "none"}}, {"w"}, {"w"}));
  manifest["predicted"] = {
      {"memory_bytes", {{"arena", 192}, {"weights", 24}, {"state", 128}, {"total", 344}}}};
  return manifest;
}

/// Writes the plan "w += x" into `dir`, as `manifest` and `program` have it.
inline Status writeWPlusXPlan(const std::string &dir, const Json &manifest = wPlusXManifest(),
                              const Json &program = wPlusXProgram()) {
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  return writePlanFiles(dir, manifest, program,
                        {{"w", runtime::TensorDesc{runtime::DType::F32, {2, 3}}, w.data()}});
}

/// Training data for "w += x" at `path`: `samples` rows of x, row i (i, i, i).
inline Status writeWPlusXData(const std::string &path, int64_t samples) {
  std::vector<float> x;
  for (int64_t i = 0; i < samples; ++i)
    x.insert(x.end(), 3, static_cast<float>(i));
  return runtime::writeSafetensors(
      path, {{"x", runtime::TensorDesc{runtime::DType::F32, {samples, 3}}, x.data()}});
}

} // namespace cleave::testplan

#endif // CLEAVE_TEST_UNIT_HANDWRITTENPLANS_H
