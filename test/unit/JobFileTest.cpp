//===- JobFileTest.cpp - multi-model job files: what loadJob accepts ------===//

#include "compiler/Job.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace cleave;

namespace {

/// A directory with a job file and two (empty) files its models name.
class JobFile : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/cleave-job-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    std::ofstream(dir + "/m.pt") << "x";
    std::ofstream(dir + "/d.safetensors") << "x";
  }
  void TearDown() override { std::system(("rm -rf " + dir).c_str()); }

  runtime::Status load(const std::string &models, const std::string &extra = "") {
    std::ofstream(dir + "/job.json")
        << R"({"format": "cleave-job", "version": 1, )" << extra << R"("models": [)" << models
        << "]}";
    return loadJob(dir + "/job.json", job);
  }
  static std::string model(const std::string &name, const std::string &fields = "") {
    return R"({"name": ")" + name +
           R"(", "model": "m.pt", "data": "d.safetensors", "global_batch": 4, "steps": 3)" +
           fields + "}";
  }

  std::string dir;
  Job job;
};

TEST_F(JobFile, ReadsModelsWithPathsBesideTheFile) {
  runtime::Status s =
      load(model("a", R"(, "lr": 0.01, "loss": "cross_entropy")") + ", " +
               model("b", R"(, "optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "betas": [0.8, 0.99], "shuffle_seed": 7)"),
           R"("slice_seconds": 2.5, )");
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(job.models.size(), 2u);
  EXPECT_EQ(job.models[0].model, dir + "/m.pt");
  EXPECT_EQ(job.models[0].data, dir + "/d.safetensors");
  EXPECT_EQ(job.models[0].training.loss, "cross_entropy");
  EXPECT_DOUBLE_EQ(job.models[0].training.lr, 0.01);
  EXPECT_EQ(job.models[1].training.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(job.models[1].training.momentum, 0.9);
  EXPECT_DOUBLE_EQ(job.models[1].training.beta1, 0.8);
  EXPECT_EQ(job.models[1].shuffleSeed, std::optional<uint64_t>(7));
  EXPECT_DOUBLE_EQ(job.sliceSeconds, 2.5);
}

TEST_F(JobFile, ErrorsNameTheModelAndTheField) {
  struct Case {
    std::string models, expected;
  } cases[] = {
      {model("a", R"(, "lr": -1)"), "models[0].lr"},
      {model("a", R"(, "colour": 1)"), "unknown field 'colour'"},
      {model("a") + ", " + model("a"), "'a' is given twice"},
      {model("a/b"), "models[0].name"},
      {model("a", R"(, "optimizer": "lamb")"), "must be adamw or sgd"},
      {model("a", R"(, "optimizer": "sgd")"), "sgd needs 'lr'"},
      {model("a", R"(, "loss": "hinge")"), "models[0].loss"},
      {model("a", R"(, "dtype": "f16")"), "models[0].dtype"},
      {model("a", R"(, "betas": [0.9])"), "models[0].betas"},
      {R"({"name": "a", "model": "m.pt", "data": "d.safetensors", "steps": 3})", "needs 'global_batch'"},
      {R"({"name": "a", "model": "gone.pt", "data": "d.safetensors", "global_batch": 1, "steps": 3})",
       "no file"},
      {"", "models must be a non-empty array"},
  };
  for (const Case &c : cases) {
    runtime::Status s = load(c.models);
    ASSERT_FALSE(s.ok()) << c.models;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("job.json"), std::string::npos) << s.message();
  }
  std::ofstream(dir + "/job.json") << R"({"format": "cleave-plan", "version": 1, "models": []})";
  EXPECT_FALSE(loadJob(dir + "/job.json", job).ok());
  std::ofstream(dir + "/job.json") << "{not json";
  EXPECT_FALSE(loadJob(dir + "/job.json", job).ok());
  EXPECT_FALSE(loadJob(dir + "/missing.json", job).ok());
}

} // namespace
