//===- JobScheduleTest.cpp - LRTF rounds of a multi-model job -------------===//

#include "passes/JobSchedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace cleave::planner;

namespace {

/// Every model's steps covered once, in order; a device and a model at
/// most once per round.
void expectValid(const std::vector<JobModelTime> &models, int devices, const JobSchedule &s) {
  std::vector<int64_t> next(models.size(), 1);
  for (const auto &round : s.rounds) {
    std::set<int> devicesUsed, modelsUsed;
    for (const JobSlice &slice : round) {
      EXPECT_TRUE(devicesUsed.insert(slice.device).second);
      EXPECT_TRUE(modelsUsed.insert(slice.model).second);
      EXPECT_GE(slice.device, 0);
      EXPECT_LT(slice.device, devices);
      EXPECT_EQ(slice.firstStep, next[slice.model]);
      EXPECT_GE(slice.lastStep, slice.firstStep);
      next[slice.model] = slice.lastStep + 1;
    }
  }
  for (size_t m = 0; m < models.size(); ++m)
    EXPECT_EQ(next[m], models[m].steps + 1) << models[m].name;
}

TEST(JobSchedule, FourEqualModelsOnFourDevicesRunSideBySide) {
  std::vector<JobModelTime> models;
  for (int i = 0; i < 4; ++i)
    models.push_back({"m" + std::to_string(i), 40, 0.01});
  JobSchedule s = scheduleJob(models, 4);
  expectValid(models, 4, s);
  EXPECT_NEAR(s.makespanSeconds, 0.4, 1e-9);
  // Nobody moves: each model keeps its device.
  std::map<int, std::set<int>> devicesOf;
  for (const auto &round : s.rounds)
    for (const JobSlice &slice : round)
      devicesOf[slice.model].insert(slice.device);
  for (const auto &[model, devices] : devicesOf)
    EXPECT_EQ(devices.size(), 1u);
}

TEST(JobSchedule, LongestRemainingFirstBalancesUnevenWork) {
  // One long model and five short ones on two devices: LRTF keeps the long
  // one running from the start, so the makespan approaches the work / 2
  // bound instead of short-first's short models + long.
  std::vector<JobModelTime> models = {{"long", 100, 0.01}};
  for (int i = 0; i < 5; ++i)
    models.push_back({"short" + std::to_string(i), 20, 0.01});
  JobSchedule s = scheduleJob(models, 2);
  expectValid(models, 2, s);
  double work = 1.0 + 5 * 0.2;
  EXPECT_GE(s.makespanSeconds, work / 2 - 1e-9);
  EXPECT_LE(s.makespanSeconds, work / 2 * 1.15);
  // The long model runs in the first round.
  bool longFirst = false;
  for (const JobSlice &slice : s.rounds.front())
    longFirst |= slice.model == 0;
  EXPECT_TRUE(longFirst);
}

TEST(JobSchedule, MoreModelsThanDevicesShareThemInSlices) {
  // Five equal models on four devices: whole-model runs would take two full
  // model times; slices finish in about 5/4 of one.
  std::vector<JobModelTime> models;
  for (int i = 0; i < 5; ++i)
    models.push_back({"m" + std::to_string(i), 80, 0.01});
  JobSchedule s = scheduleJob(models, 4);
  expectValid(models, 4, s);
  EXPECT_LT(s.makespanSeconds, 0.8 * 1.5);
  EXPECT_GE(s.makespanSeconds, 0.8 * 5 / 4 - 1e-9);
}

TEST(JobSchedule, SlicesFollowTheirTargetTime) {
  std::vector<JobModelTime> models = {{"fast", 100, 0.001}, {"slow", 10, 0.01}};
  JobSchedule s = scheduleJob(models, 2, 0.02);
  expectValid(models, 2, s);
  for (const JobSlice &slice : s.rounds.front())
    EXPECT_EQ(slice.lastStep - slice.firstStep + 1, slice.model == 0 ? 20 : 2);
  EXPECT_TRUE(scheduleJob({}, 4).rounds.empty());
  EXPECT_TRUE(scheduleJob(models, 0).rounds.empty());
}

} // namespace
