//===- JobSchedule.cpp - LRTF rounds of a multi-model job -----------------===//

#include "passes/JobSchedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace cleave::planner {

JobSchedule scheduleJob(const std::vector<JobModelTime> &models, int devices,
                        double sliceSeconds) {
  JobSchedule schedule;
  if (devices < 1 || models.empty())
    return schedule;
  double work = 0;
  for (const JobModelTime &m : models)
    work += double(m.steps) * m.stepSeconds;
  // With a device for every model nothing needs sharing: one round, each
  // model whole on its device. Otherwise rounds of an eighth of each
  // device's share of the work.
  if (sliceSeconds <= 0)
    sliceSeconds = models.size() <= size_t(devices) ? std::numeric_limits<double>::infinity()
                                                    : work / double(devices) / 8;
  std::vector<int64_t> done(models.size(), 0);
  std::vector<int> lastDevice(models.size(), -1);
  auto remaining = [&](size_t m) { return double(models[m].steps - done[m]) * models[m].stepSeconds; };
  for (;;) {
    std::vector<size_t> waiting;
    for (size_t m = 0; m < models.size(); ++m)
      if (done[m] < models[m].steps)
        waiting.push_back(m);
    if (waiting.empty())
      break;
    // Longest remaining time first; ties in the job's order.
    std::stable_sort(waiting.begin(), waiting.end(),
                     [&](size_t a, size_t b) { return remaining(a) > remaining(b); });
    waiting.resize(std::min<size_t>(waiting.size(), size_t(devices)));
    // Models that ran last round keep their device; the rest take the free
    // devices in order.
    std::vector<bool> taken(devices, false);
    std::vector<int> deviceOf(waiting.size(), -1);
    for (size_t i = 0; i < waiting.size(); ++i) {
      int d = lastDevice[waiting[i]];
      if (d >= 0 && !taken[d]) {
        deviceOf[i] = d;
        taken[d] = true;
      }
    }
    int next = 0;
    std::vector<JobSlice> round;
    double longest = 0;
    for (size_t i = 0; i < waiting.size(); ++i) {
      size_t m = waiting[i];
      if (deviceOf[i] < 0) {
        while (taken[next])
          ++next;
        deviceOf[i] = next;
        taken[next] = true;
      }
      const JobModelTime &model = models[m];
      int64_t steps = model.steps - done[m];
      if (model.stepSeconds > 0 && std::isfinite(sliceSeconds))
        steps = std::max<int64_t>(
            1, std::llround(std::min(sliceSeconds / model.stepSeconds, double(steps))));
      steps = std::min(steps, model.steps - done[m]);
      round.push_back(JobSlice{deviceOf[i], int(m), done[m] + 1, done[m] + steps});
      done[m] += steps;
      lastDevice[m] = deviceOf[i];
      longest = std::max(longest, double(steps) * model.stepSeconds);
    }
    std::sort(round.begin(), round.end(),
              [](const JobSlice &a, const JobSlice &b) { return a.device < b.device; });
    schedule.rounds.push_back(std::move(round));
    schedule.roundSeconds.push_back(longest);
  }
  schedule.makespanSeconds =
      std::accumulate(schedule.roundSeconds.begin(), schedule.roundSeconds.end(), 0.0);
  return schedule;
}

} // namespace cleave::planner
