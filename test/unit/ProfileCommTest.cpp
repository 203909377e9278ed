//===- ProfileCommTest.cpp - Collective fits and the mpirun launcher ------===//
//
// The fit recovers a known link (α, B) from samples generated with the ring
// formulas; the launcher is checked against fake `mpirun` scripts that hang,
// fail or are missing, so these tests need no MPI job.
//
//===----------------------------------------------------------------------===//

#include "cli/ProfileComm.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace cleave;

namespace {

constexpr double kLatency = 3e-6;   // α: 3 us
constexpr double kBandwidth = 12e9; // B: 12 GB/s

/// time of `collective` on n ranks by the ring formulas of ProfileComm.h.
double ringTime(const std::string &collective, int n, double bytes) {
  double steps = n - 1;
  if (collective == "all-reduce")
    return 2 * steps * kLatency + 2 * steps / n * bytes / kBandwidth;
  if (collective == "send-recv")
    return kLatency + bytes / kBandwidth;
  return steps * kLatency + steps / n * bytes / kBandwidth;
}

std::vector<CollectiveSample> syntheticSamples(int ranks, double noise) {
  std::vector<CollectiveSample> samples;
  int i = 0;
  for (const char *collective : {"all-reduce", "all-gather", "reduce-scatter",
                                 "all-to-all", "send-recv"})
    for (double bytes = 4096; bytes <= 64 << 20; bytes *= 4, ++i) {
      // Alternating relative noise, as repeated measurements scatter.
      double jitter = 1 + (i % 2 ? noise : -noise);
      samples.push_back({collective, ranks, bytes,
                         ringTime(collective, ranks, bytes) * jitter});
    }
  return samples;
}

TEST(ProfileCommFit, RecoversLinkFromEveryCollective) {
  for (int ranks : {2, 4, 8}) {
    CommProfile profile;
    auto status = fitCommProfile(syntheticSamples(ranks, 0), ranks, profile);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(profile.fits.size(), 5u);
    for (const CollectiveFit &fit : profile.fits) {
      EXPECT_NEAR(fit.latency, kLatency, 0.01 * kLatency)
          << fit.collective << " on " << ranks << " ranks";
      EXPECT_NEAR(fit.bandwidth, kBandwidth, 0.01 * kBandwidth)
          << fit.collective << " on " << ranks << " ranks";
      EXPECT_LT(fit.maxRelativeError, 1e-9);
    }
    EXPECT_EQ(profile.linkSource, "all-reduce");
    EXPECT_NEAR(profile.linkLatency, kLatency, 0.01 * kLatency);
    EXPECT_NEAR(profile.linkBandwidth, kBandwidth, 0.01 * kBandwidth);
  }
}

TEST(ProfileCommFit, ToleratesMeasurementNoise) {
  CommProfile profile;
  auto status = fitCommProfile(syntheticSamples(4, 0.002), 4, profile);
  ASSERT_TRUE(status.ok()) << status.message();
  for (const CollectiveFit &fit : profile.fits) {
    EXPECT_NEAR(fit.latency, kLatency, 0.01 * kLatency) << fit.collective;
    EXPECT_NEAR(fit.bandwidth, kBandwidth, 0.01 * kBandwidth) << fit.collective;
    EXPECT_LT(fit.maxRelativeError, 0.01) << fit.collective;
  }
}

TEST(ProfileCommFit, FallsBackToSendRecvWithoutAllReduce) {
  std::vector<CollectiveSample> samples;
  for (const CollectiveSample &s : syntheticSamples(2, 0))
    if (s.collective == "send-recv")
      samples.push_back(s);
  CommProfile profile;
  ASSERT_TRUE(fitCommProfile(samples, 2, profile).ok());
  EXPECT_EQ(profile.linkSource, "send-recv");
  EXPECT_NEAR(profile.linkBandwidth, kBandwidth, 0.01 * kBandwidth);
}

TEST(ProfileCommFit, RejectsWhatCannotBeFitted) {
  CommProfile profile;
  auto one = fitCommProfile({{"all-reduce", 2, 4096, 1e-5}}, 2, profile);
  EXPECT_NE(one.message().find("two sizes or more"), std::string::npos)
      << one.message();
  auto unknown = fitCommProfile(
      {{"gossip", 2, 4096, 1e-5}, {"gossip", 2, 8192, 2e-5}}, 2, profile);
  EXPECT_NE(unknown.message().find("unknown collective 'gossip'"),
            std::string::npos)
      << unknown.message();
  auto mixed = fitCommProfile({{"all-reduce", 4, 4096, 1e-5}}, 2, profile);
  EXPECT_FALSE(mixed.ok());
  EXPECT_FALSE(fitCommProfile({}, 2, profile).ok());
}

TEST(ProfileCommFit, JsonHasLinkFitsAndSamples) {
  CommProfile profile;
  ASSERT_TRUE(fitCommProfile(syntheticSamples(2, 0), 2, profile).ok());
  nlohmann::json json = nlohmann::json::parse(profile.toJson());
  EXPECT_EQ(json["ranks"], 2);
  EXPECT_EQ(json["link"]["source"], "all-reduce");
  EXPECT_NEAR(json["link"]["bandwidth"].get<double>(), kBandwidth,
              0.01 * kBandwidth);
  EXPECT_EQ(json["fits"].size(), 5u);
  EXPECT_EQ(json["samples"].size(), profile.samples.size());
  EXPECT_EQ(json["samples"][0]["collective"], "all-reduce");
}

/// A directory holding a fake `mpirun`, put first on PATH for one test.
class ProfileCommLauncher : public ::testing::Test {
protected:
  void SetUp() override {
    char dir[] = "/tmp/cleave-fake-mpirun-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    const char *path = std::getenv("PATH");
    savedPath_ = path ? path : "";
    setenv("PATH", (dir_ + ":" + savedPath_).c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", savedPath_.c_str(), 1);
    std::remove((dir_ + "/mpirun").c_str());
    std::remove((dir_ + "/pid").c_str());
    rmdir(dir_.c_str());
  }
  void writeMpirun(const std::string &script) {
    std::string path = dir_ + "/mpirun";
    std::ofstream(path) << "#!/bin/sh\n" << script;
    chmod(path.c_str(), 0755);
  }

  std::string dir_, savedPath_;
};

TEST_F(ProfileCommLauncher, MissingMpirunIsAClearError) {
  setenv("PATH", dir_.c_str(), 1); // holds no mpirun
  CommProfile profile;
  auto status = profileCollectives("/bin/true", 2, nullptr, profile);
  EXPECT_NE(status.message().find("needs mpirun, which is neither beside this executable nor on PATH"),
            std::string::npos)
      << status.message();
}

TEST_F(ProfileCommLauncher, WorkerFailureCarriesItsError) {
  writeMpirun("echo 'all-reduce on 2 ranks, 4 KiB: 5 us'\n"
              "echo 'cleave profile-comm-worker: error: all-reduce on group "
              "world failed' >&2\n"
              "echo 'mpirun noticed that a rank exited' >&2\n"
              "exit 3\n");
  std::vector<std::string> lines;
  CommProfile profile;
  auto status = profileCollectives(
      "/bin/true", 2, [&](const std::string &line) { lines.push_back(line); },
      profile);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("exited with status 3"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("all-reduce on group world failed"),
            std::string::npos)
      << status.message();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "all-reduce on 2 ranks, 4 KiB: 5 us");
}

TEST_F(ProfileCommLauncher, HangIsKilledAtTheTimeout) {
  writeMpirun("echo $$ > " + dir_ +
              "/pid\n"
              "echo started\n"
              "sleep 60\n");
  CommProfileOptions options;
  options.timeoutSeconds = 1;
  std::vector<std::string> lines;
  CommProfile profile;
  auto start = std::chrono::steady_clock::now();
  auto status = profileCollectives(
      "/bin/true", 2, [&](const std::string &line) { lines.push_back(line); },
      profile, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("did not finish within 1 s"),
            std::string::npos)
      << status.message();
  EXPECT_LT(seconds, 10);
  EXPECT_EQ(lines, std::vector<std::string>{"started"});
  pid_t pid = 0;
  std::ifstream(dir_ + "/pid") >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_NE(kill(pid, 0), 0) << "the fake mpirun survived";
}

} // namespace
