//===- JobTest.cpp - multi-model job plans: job.json, rounds, runJob ------===//
//
// job.json's parser and every rule it checks (each error naming the file
// and the field), and runJob on a training plan written by hand (one
// weight w that each step replaces with w + x, the loss sum(w + x)): on one
// rank, and on two ranks as two threads exchanging through a small
// in-process world, a model moving between them from one round to the
// next; its losses and weights equal one uninterrupted train(), and a
// failing slice stops both ranks with no log or weights written.
//
//===----------------------------------------------------------------------===//

#include "runtime/Backend.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"
#include "runtime/train/Job.h"
#include "runtime/train/Trainer.h"

#include "HandWrittenPlans.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

using namespace cleave::runtime;
using namespace cleave::testplan;
namespace fs = std::filesystem;

namespace {

/// A valid job: models a (10 steps), b (6), c (5) on 2 devices; a moves
/// from device 0 to device 1.
Json validJob() {
  return Json{
      {"format", "cleave-job-plan"},
      {"version", 1},
      {"devices", 2},
      {"slice_steps", 5},
      {"models",
       Json::array({{{"name", "a"}, {"plan", "models/a"}, {"data", "/abs/a.safetensors"},
                     {"steps", 10}, {"predicted_step_seconds", 0.5}, {"shuffle_seed", nullptr}},
                    {{"name", "b_lr0.01"}, {"plan", "models/b_lr0.01"}, {"data", "data/b.safetensors"},
                     {"steps", 6}, {"predicted_step_seconds", 0.25}, {"shuffle_seed", 7}},
                    {{"name", "c"}, {"plan", "models/c"}, {"data", "c.safetensors"},
                     {"steps", 5}}})},
      {"rounds",
       Json::array({Json::array({{{"device", 0}, {"model", "a"}, {"first_step", 1}, {"last_step", 5}},
                                 {{"device", 1}, {"model", "b_lr0.01"}, {"first_step", 1},
                                  {"last_step", 3}}}),
                    Json::array({{{"device", 1}, {"model", "a"}, {"first_step", 6}, {"last_step", 10}},
                                 {{"device", 0}, {"model", "b_lr0.01"}, {"first_step", 4},
                                  {"last_step", 6}}}),
                    Json::array({{{"device", 0}, {"model", "c"}, {"first_step", 1},
                                  {"last_step", 5}}})})},
      {"predicted", {{"makespan_seconds", 5.5}, {"sequential_seconds", 9.0}}}};
}

Status parse(const Json &job, JobPlan *out) {
  return parseJobPlan(job.dump(), "/jobs/j", "/jobs/j/job.json", out);
}

void expectJobError(const Json &job, const std::string &part) {
  JobPlan plan;
  Status s = parse(job, &plan);
  expectError(s, part);
  // Every error names the file.
  if (!s.ok()) {
    EXPECT_EQ(s.message().rfind("/jobs/j/job.json: ", 0), 0u) << s.message();
  }
}

TEST(JobPlan, ParsesModelsRoundsAndPaths) {
  JobPlan job;
  ASSERT_OK(parse(validJob(), &job));
  EXPECT_EQ(job.devices, 2);
  EXPECT_EQ(job.sliceSteps, 5);
  ASSERT_EQ(job.models.size(), 3u);
  EXPECT_EQ(job.models[0].plan, "/jobs/j/models/a");
  EXPECT_EQ(job.models[0].data, "/abs/a.safetensors"); // absolute: as given
  EXPECT_EQ(job.models[1].data, "/jobs/j/data/b.safetensors");
  EXPECT_EQ(job.models[1].name, "b_lr0.01");
  EXPECT_FALSE(job.models[0].shuffleSeed.has_value());
  ASSERT_TRUE(job.models[1].shuffleSeed.has_value());
  EXPECT_EQ(*job.models[1].shuffleSeed, 7u);
  EXPECT_FALSE(job.models[2].shuffleSeed.has_value()); // absent
  EXPECT_FALSE(job.models[2].predictedStepSeconds.has_value());
  EXPECT_DOUBLE_EQ(*job.models[0].predictedStepSeconds, 0.5);
  ASSERT_EQ(job.rounds.size(), 3u);
  const JobSlice *moved = job.sliceOf(1, 1);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(moved->model, 0u);
  EXPECT_EQ(moved->firstStep, 6);
  EXPECT_EQ(moved->lastStep, 10);
  EXPECT_EQ(job.sliceOf(2, 1), nullptr); // device 1 idles in the last round
  EXPECT_EQ(job.modelIndex("c"), 2);
  EXPECT_EQ(job.modelIndex("d"), -1);
  EXPECT_DOUBLE_EQ(*job.predictedMakespanSeconds, 5.5);
  EXPECT_EQ(Json::parse(job.predictedJson)["sequential_seconds"], 9.0);

  // Fields it does not know are ignored; "predicted" is optional.
  Json extra = validJob();
  extra["compiled_by"] = "cleave compile --job";
  extra["models"][0]["optimizer"] = "adamw";
  extra.erase("predicted");
  ASSERT_OK(parse(extra, &job));
  EXPECT_EQ(job.predictedJson, "null");
}

TEST(JobPlan, RejectsBadTopLevelFields) {
  {
    JobPlan job;
    expectError(parseJobPlan("{\"format\": ", "/jobs/j", "/jobs/j/job.json", &job),
                "/jobs/j/job.json");
  }
  expectJobError(Json::array(), "not a JSON object");
  Json j = validJob();
  j.erase("format");
  expectJobError(j, "/jobs/j/job.json: format: missing");
  j = validJob();
  j["format"] = "cleave-job";
  expectJobError(j, "format: 'cleave-job', expected 'cleave-job-plan'");
  j = validJob();
  j["version"] = 2;
  expectJobError(j, "version: 2, this runtime reads version 1");
  j = validJob();
  j.erase("devices");
  expectJobError(j, "devices: missing");
  j = validJob();
  j["devices"] = 0;
  expectJobError(j, "devices: 0 is less than 1");
  j = validJob();
  j["devices"] = 1.5;
  expectJobError(j, "devices: must be an integer, not 1.5");
  j = validJob();
  j.erase("slice_steps");
  expectJobError(j, "slice_steps: missing");
  j = validJob();
  j["slice_steps"] = "5";
  expectJobError(j, "slice_steps: must be an integer");
  j = validJob();
  j.erase("models");
  expectJobError(j, "models: missing");
  j = validJob();
  j["models"] = Json::array();
  expectJobError(j, "models: must be a non-empty array");
  j = validJob();
  j.erase("rounds");
  expectJobError(j, "rounds: missing");
  j = validJob();
  j["rounds"] = Json::object();
  expectJobError(j, "rounds: must be an array of rounds");
  j = validJob();
  j["predicted"] = 3;
  expectJobError(j, "predicted: must be an object");
}

TEST(JobPlan, RejectsBadModels) {
  for (const char *field : {"name", "plan", "data", "steps"}) {
    Json j = validJob();
    j["models"][1].erase(field);
    expectJobError(j, std::string("models[1].") + field + ": missing");
  }
  Json j = validJob();
  j["models"][2] = "c";
  expectJobError(j, "models[2]: must be an object");
  for (const char *bad : {"a/b", "..", ".", "a b", "", "ü"}) {
    j = validJob();
    j["models"][2]["name"] = bad;
    expectJobError(j, "models[2].name: ");
  }
  j = validJob();
  j["models"][2]["name"] = "a/b";
  expectJobError(j, "models[2].name: 'a/b' is not a safe file name");
  j = validJob();
  j["models"][2]["name"] = 3;
  expectJobError(j, "models[2].name: must be a string, not 3");
  j = validJob();
  j["models"][2]["name"] = "a";
  expectJobError(j, "models[2].name: 'a' names two models");
  j = validJob();
  j["models"][0]["plan"] = "/elsewhere/a";
  expectJobError(j, "models[0].plan: '/elsewhere/a' must be relative to the job plan directory");
  j = validJob();
  j["models"][0]["steps"] = 0;
  expectJobError(j, "models[0].steps: 0 is less than 1");
  j = validJob();
  j["models"][0]["shuffle_seed"] = -1;
  expectJobError(j, "models[0].shuffle_seed: must be a non-negative integer or null");
  j = validJob();
  j["models"][0]["shuffle_seed"] = "7";
  expectJobError(j, "models[0].shuffle_seed: must be a non-negative integer or null");
  j = validJob();
  j["models"][0]["predicted_step_seconds"] = -0.1;
  expectJobError(j, "models[0].predicted_step_seconds: must be a non-negative number or null");
}

TEST(JobPlan, RejectsBadRounds) {
  Json j = validJob();
  j["rounds"][1] = Json::object();
  expectJobError(j, "rounds[1]: must be an array of slices");
  j = validJob();
  j["rounds"][1][0] = 4;
  expectJobError(j, "rounds[1][0]: must be an object");
  for (const char *field : {"device", "model", "first_step", "last_step"}) {
    j = validJob();
    j["rounds"][1][1].erase(field);
    expectJobError(j, std::string("rounds[1][1].") + field + ": missing");
  }
  // An unknown model.
  j = validJob();
  j["rounds"][1][0]["model"] = "nope";
  expectJobError(j, "rounds[1][0].model: 'nope' is not a model of the job (models: a, b_lr0.01, c)");
  // Devices out of range.
  j = validJob();
  j["rounds"][0][1]["device"] = 2;
  expectJobError(j, "rounds[0][1].device: 2 is not a device of the job (devices 0..1)");
  j = validJob();
  j["rounds"][0][1]["device"] = -1;
  expectJobError(j, "rounds[0][1].device: -1 is not a device of the job (devices 0..1)");
  j = validJob();
  j["rounds"][0][1]["device"] = "1";
  expectJobError(j, "rounds[0][1].device: must be an integer");
  // A device used twice in a round.
  j = validJob();
  j["rounds"][0][1]["device"] = 0;
  expectJobError(j, "rounds[0][1].device: device 0 already runs rounds[0][0]: a device runs "
                    "one slice per round");
  // Two slices of one model in a round.
  j = validJob();
  j["rounds"][0][1] = {{"device", 1}, {"model", "a"}, {"first_step", 6}, {"last_step", 10}};
  expectJobError(j, "rounds[0][1].model: model 'a' already runs in rounds[0][0]: a model runs "
                    "one slice per round");
  // A gap: a's steps 6..7 never run.
  j = validJob();
  j["rounds"][1][0]["first_step"] = 8;
  expectJobError(j, "rounds[1][0].first_step: model 'a' resumes at step 8, but its slices before "
                    "end at step 5: steps 6..7 would never run (a gap)");
  // A model's first slice must start at step 1.
  j = validJob();
  j["rounds"][2][0]["first_step"] = 2;
  expectJobError(j, "rounds[2][0].first_step: model 'c' resumes at step 2, but its slices before "
                    "end at step 0 (none): step 1 would never run (a gap)");
  // An overlap: a's steps 4..5 would run twice.
  j = validJob();
  j["rounds"][1][0]["first_step"] = 4;
  expectJobError(j, "rounds[1][0].first_step: model 'a' starts at step 4, but its slices before "
                    "run to step 5: steps 4..5 would run twice (an overlap)");
  // Steps backwards, past the model's steps, not integers.
  j = validJob();
  j["rounds"][1][0]["last_step"] = 5;
  expectJobError(j, "rounds[1][0].last_step: 5 is before first_step 6");
  j = validJob();
  j["rounds"][1][0]["last_step"] = 11;
  expectJobError(j, "rounds[1][0].last_step: 11 is past model 'a''s last step (its steps are 10)");
  j = validJob();
  j["rounds"][1][0]["first_step"] = 0;
  expectJobError(j, "rounds[1][0].first_step: 0 is less than 1");
  j = validJob();
  j["rounds"][1][0]["first_step"] = 6.0;
  expectJobError(j, "rounds[1][0].first_step: must be an integer");
  // Steps no round covers: at the end, and a model in no round.
  j = validJob();
  j["rounds"][1][0]["last_step"] = 9;
  expectJobError(j, "models[0].steps: model 'a' has 10 steps, but its slices end at step 9: "
                    "step 10 would never run");
  j = validJob();
  j["rounds"].erase(2);
  expectJobError(j, "models[2].steps: model 'c' has 5 steps, but its slices are in no round: "
                    "steps 1..5 would never run");
  // An empty round is only a barrier.
  j = validJob();
  j["rounds"].insert(j["rounds"].begin() + 1, Json::array());
  JobPlan job;
  ASSERT_OK(parse(j, &job));
  EXPECT_EQ(job.rounds.size(), 4u);
}

TEST(JobPlan, LoadsFromADirectoryAndChecksTheModelsAndRunDir) {
  const std::string dir =
      (fs::temp_directory_path() / ("cleave-job-load-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  JobPlan job;
  expectError(loadJobPlan(dir, &job), "not a job plan directory (no such directory)");
  fs::create_directories(dir);
  expectError(loadJobPlan(dir, &job), "not a job plan directory (no job.json)");
  Json j = validJob();
  std::ofstream(dir + "/job.json") << j.dump();
  ASSERT_OK(loadJobPlan(dir, &job));
  EXPECT_EQ(job.file, dir + "/job.json");
  EXPECT_EQ(job.models[2].data, dir + "/c.safetensors");
  // No model plan: the error names the model and its plan.
  expectError(checkJobModels(job), "job.json: model 'a': plan " + dir + "/models/a");

  EXPECT_TRUE(checkRunDir(dir + "/run").ok());
  fs::create_directories(dir + "/run");
  EXPECT_TRUE(checkRunDir(dir + "/run").ok()); // empty
  std::ofstream(dir + "/run/x") << "x";
  expectError(checkRunDir(dir + "/run"), "run: not empty");
  expectError(checkRunDir(dir + "/run/x"), "exists and is not a directory");
  fs::remove_all(dir);
}

/// The ranks of a job as threads of this process: each collective is an
/// exchange of every rank's bytes.
class ThreadWorld {
public:
  explicit ThreadWorld(int size) : size_(size), slots_(size) {}

  std::vector<std::string> exchange(int rank, std::string mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    slots_[rank] = std::move(mine);
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
    return result_;
  }

  JobRanks ranks(int rank) {
    JobRanks r;
    r.rank = rank;
    r.size = size_;
    r.agree = [this, rank](const Status &mine) {
      std::vector<std::string> all = exchange(rank, mine.ok() ? "" : mine.message());
      std::string text;
      for (size_t i = 0; i < all.size(); ++i)
        if (!all[i].empty())
          text += (text.empty() ? "" : "\n") + ("rank " + std::to_string(i) + ": " + all[i]);
      return text.empty() ? Status() : CLEAVE_ERROR(text);
    };
    r.allGather = [this, rank](const double *mine, double *all, size_t count) {
      std::vector<std::string> parts =
          exchange(rank, std::string(reinterpret_cast<const char *>(mine), count * sizeof(double)));
      for (size_t i = 0; i < parts.size(); ++i)
        std::memcpy(all + i * count, parts[i].data(), count * sizeof(double));
      return Status();
    };
    return r;
  }

private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  std::vector<std::string> slots_, result_;
};

/// A job plan directory of handwritten one-device training plans.
class JobRun : public ::testing::Test {
protected:
  void SetUp() override {
    dir = testDir("job");
    // Plan p is "w += x" (w 2x3, 1..6; loss sum(w + x), batch 2).
    Status s = writeWPlusXPlan(dir + "/job/models/p");
    EXPECT_TRUE(s.ok()) << s.message();
    // Rows i = (i, i, i), 6 samples: batches wrap after 3 steps.
    s = writeWPlusXData(dir + "/job/data.safetensors", 6);
    ASSERT_TRUE(s.ok()) << s.message();
    runDir = dir + "/run";
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Writes job.json: models a (6 steps) and b (4 steps, shuffled), both
  /// the plan p, on `devices` devices in `rounds`.
  void writeJob(int devices, const Json &rounds, const std::string &bData = "data.safetensors") {
    Json job{{"format", "cleave-job-plan"},
             {"version", 1},
             {"devices", devices},
             {"slice_steps", 3},
             {"models", Json::array({{{"name", "a"}, {"plan", "models/p"},
                                      {"data", dir + "/job/data.safetensors"}, {"steps", 6},
                                      {"predicted_step_seconds", 0.001}},
                                     {{"name", "b"}, {"plan", "models/p"}, {"data", bData},
                                      {"steps", 4}, {"shuffle_seed", 11}}})},
             {"rounds", rounds},
             {"predicted", {{"makespan_seconds", 0.25}, {"sequential_seconds", 0.5}}}};
    std::ofstream(dir + "/job/job.json") << job.dump(1);
  }

  static Json slice(int device, const char *model, int first, int last) {
    return Json{{"device", device}, {"model", model}, {"first_step", first}, {"last_step", last}};
  }

  /// The losses one uninterrupted train() of plan p gives.
  std::vector<double> uninterrupted(int64_t steps, std::optional<uint64_t> shuffle,
                                    const std::string &weights) {
    Plan plan;
    Status s = loadPlan(dir + "/job/models/p", &plan);
    EXPECT_TRUE(s.ok()) << s.message();
    std::unique_ptr<Backend> cpu = createCpuBackend();
    TrainOptions options;
    options.dataPath = dir + "/job/data.safetensors";
    options.steps = steps;
    options.shuffleSeed = shuffle;
    options.saveWeightsPath = weights;
    TrainReport report;
    s = train(plan, *cpu, options, &report);
    EXPECT_TRUE(s.ok()) << s.message();
    std::vector<double> losses;
    for (const StepRecord &r : report.steps)
      losses.push_back(r.loss);
    return losses;
  }

  static std::vector<double> logLosses(const std::string &path, std::vector<int64_t> *steps) {
    std::ifstream in(path);
    std::vector<double> losses;
    std::string line;
    while (std::getline(in, line)) {
      Json record = Json::parse(line);
      steps->push_back(record["step"].get<int64_t>());
      losses.push_back(record["loss"].get<double>());
      EXPECT_TRUE(record.contains("seconds") && record.contains("samples_per_second"));
    }
    return losses;
  }

  static std::string fileBytes(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  /// Runs `job` on two ranks, threads of this process exchanging through a
  /// ThreadWorld, each on its own CPU backend: rank r's status and report.
  void runOnTwoRanks(const JobPlan &job, Status statuses[2], JobReport reports[2]) {
    ThreadWorld world(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank)
      threads.emplace_back([&, rank] {
        std::unique_ptr<Backend> cpu = createCpuBackend();
        statuses[rank] = runJob(job, *cpu, {runDir}, world.ranks(rank), &reports[rank]);
      });
    for (std::thread &t : threads)
      t.join();
  }

  /// Both models' logs and weights equal uninterrupted runs'.
  void expectSameAsUninterrupted() {
    std::vector<double> a = uninterrupted(6, std::nullopt, dir + "/a.safetensors");
    std::vector<double> b = uninterrupted(4, 11, dir + "/b.safetensors");
    std::vector<int64_t> aSteps, bSteps;
    EXPECT_EQ(logLosses(runDir + "/logs/a.jsonl", &aSteps), a);
    EXPECT_EQ(logLosses(runDir + "/logs/b.jsonl", &bSteps), b);
    EXPECT_EQ(aSteps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(bSteps, (std::vector<int64_t>{1, 2, 3, 4}));
    // The shuffle seed reached b's slices: unshuffled, step 2 would differ.
    EXPECT_NE(b, uninterrupted(4, std::nullopt, ""));
    EXPECT_EQ(fileBytes(runDir + "/weights/a.safetensors"), fileBytes(dir + "/a.safetensors"));
    EXPECT_EQ(fileBytes(runDir + "/weights/b.safetensors"), fileBytes(dir + "/b.safetensors"));
    EXPECT_FALSE(fs::exists(runDir + "/.partial"));
  }

  std::string dir, runDir;
};

TEST_F(JobRun, OneRankRunsTheRoundsAndEqualsUninterruptedTraining) {
  // a and b interleaved on one device: each resumes from its own checkpoint.
  writeJob(1, Json::array({Json::array({slice(0, "a", 1, 3)}), Json::array({slice(0, "b", 1, 2)}),
                           Json::array({slice(0, "a", 4, 6)}),
                           Json::array({slice(0, "b", 3, 4)})}));
  JobPlan job;
  ASSERT_OK(loadJobPlan(dir + "/job", &job));
  ASSERT_OK(checkJobModels(job));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  JobOptions options;
  options.runDir = runDir;
  JobReport report;
  std::vector<std::string> seen;
  ASSERT_OK(runJob(job, *cpu, options, {}, &report, [&](const JobSliceResult &r) {
    seen.push_back(job.models[r.slice.model].name + std::to_string(r.slice.lastStep));
  }));
  EXPECT_EQ(seen, (std::vector<std::string>{"a3", "b2", "a6", "b4"}));
  expectSameAsUninterrupted();
  EXPECT_TRUE(fs::exists(runDir + "/checkpoints/a/ckpt-3/checkpoint.json"));
  EXPECT_TRUE(fs::exists(runDir + "/checkpoints/a/ckpt-6/checkpoint.json"));
  EXPECT_TRUE(fs::exists(runDir + "/checkpoints/b/ckpt-4/checkpoint.json"));

  Json json = Json::parse(jobReportJson(job, report));
  EXPECT_GT(json["makespan_seconds"].get<double>(), 0);
  EXPECT_EQ(json["predicted"]["makespan_seconds"], 0.25);
  ASSERT_EQ(json["models"].size(), 2u);
  EXPECT_EQ(json["models"][0]["name"], "a");
  EXPECT_EQ(json["models"][0]["steps"], 6);
  EXPECT_EQ(json["models"][0]["devices"], Json::array({0}));
  EXPECT_GT(json["models"][0]["seconds"].get<double>(),
            json["models"][0]["mean_step_seconds"].get<double>());
  EXPECT_EQ(json["devices"][0]["slices"], 4);
  EXPECT_EQ(json["rounds"].size(), 4u);
  EXPECT_EQ(json["slices"].size(), 4u);

  // The run directory must be empty now.
  JobReport again;
  expectError(runJob(job, *cpu, options, {}, &again), "not empty");
}

TEST_F(JobRun, TheRanksMustBeTheJobsDevices) {
  writeJob(2, Json::array({Json::array({slice(0, "a", 1, 6), slice(1, "b", 1, 4)})}));
  JobPlan job;
  ASSERT_OK(loadJobPlan(dir + "/job", &job));
  std::unique_ptr<Backend> cpu = createCpuBackend();
  JobReport report;
  expectError(runJob(job, *cpu, {runDir}, {}, &report),
              "job.json: the job has 2 devices, the run 1 ranks");
  EXPECT_FALSE(fs::exists(runDir));
}

TEST_F(JobRun, TwoRanksHandAModelOverBetweenRounds) {
  // a: device 0, then device 1; b: device 1, then device 0.
  writeJob(2, Json::array({Json::array({slice(0, "a", 1, 3), slice(1, "b", 1, 2)}),
                           Json::array({slice(1, "a", 4, 6), slice(0, "b", 3, 4)})}));
  JobPlan job;
  ASSERT_OK(loadJobPlan(dir + "/job", &job));
  Status statuses[2];
  JobReport reports[2];
  runOnTwoRanks(job, statuses, reports);
  ASSERT_OK(statuses[0]);
  ASSERT_OK(statuses[1]);
  expectSameAsUninterrupted();
  // Rank 0 gathered every slice, round by round in device order.
  ASSERT_EQ(reports[0].slices.size(), 4u);
  EXPECT_EQ(reports[0].slices[2].slice.device, 0);
  EXPECT_EQ(job.models[reports[0].slices[2].slice.model].name, "b");
  EXPECT_EQ(reports[0].slices[3].slice.firstStep, 4);
  EXPECT_GT(reports[0].slices[3].seconds, 0);
  EXPECT_TRUE(reports[1].slices.empty());
  Json json = Json::parse(jobReportJson(job, reports[0]));
  EXPECT_EQ(json["models"][0]["devices"], Json::array({0, 1}));
  EXPECT_EQ(json["models"][1]["devices"], Json::array({0, 1}));
  EXPECT_EQ(json["devices"][1]["slices"], 2);
  EXPECT_GT(json["devices"][1]["busy_seconds"].get<double>(), 0);
  EXPECT_EQ(json["rounds"].size(), 2u);
}

TEST_F(JobRun, AFailingSliceStopsEveryRankAndWritesNoOutputs) {
  // b's data does not exist: its first slice fails on rank 1 while rank 0
  // trains a; both ranks stop after that round with the same error.
  writeJob(2,
           Json::array({Json::array({slice(0, "a", 1, 3), slice(1, "b", 1, 2)}),
                        Json::array({slice(1, "a", 4, 6), slice(0, "b", 3, 4)})}),
           "missing.safetensors");
  JobPlan job;
  ASSERT_OK(loadJobPlan(dir + "/job", &job));
  expectError(checkJobModels(job), "model 'b': data " + dir + "/job/missing.safetensors: no such file");
  Status statuses[2];
  JobReport reports[2];
  runOnTwoRanks(job, statuses, reports);
  for (const Status &s : statuses)
    expectError(s, "rank 1: rounds[0]: model 'b' on device 1, steps 1..2: training data: ");
  EXPECT_EQ(statuses[0].message(), statuses[1].message());
  EXPECT_FALSE(fs::exists(runDir + "/logs"));
  EXPECT_FALSE(fs::exists(runDir + "/weights"));
  EXPECT_FALSE(fs::exists(runDir + "/.partial"));
  // a's slice of the round finished: its checkpoint stays, whole.
  EXPECT_TRUE(fs::exists(runDir + "/checkpoints/a/ckpt-3/checkpoint.json"));
}

} // namespace
