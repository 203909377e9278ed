//===- JobSchedule.h - The joint schedule of a multi-model job -*- C++ -*-===//
//
// Model selection trains many models at once (docs/planner.md, "Multi-model
// jobs"). Each model runs on one device at a time (spilled where it does not
// fit), and its training is cut into slices of steps that a checkpoint hands
// from one slice to the next, so a model may move between devices. The
// schedule is a list of rounds: in a round every device runs at most one
// slice, the slices last about the same time, and the next round starts when
// the round's last slice ends. Which models run in a round is Hydra's longest
// remaining time first (LRTF): the models with the most predicted time left.
// No MLIR: numbers in, slices out, tested on synthetic jobs.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_JOBSCHEDULE_H
#define CLEAVE_PASSES_JOBSCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::planner {

/// One model of a job, as the scheduler sees it.
struct JobModelTime {
  std::string name;
  int64_t steps = 0;
  double stepSeconds = 0; // predicted, on one device
};

/// Steps [firstStep, lastStep] (from 1) of `model` (an index into the job's
/// models) on `device`.
struct JobSlice {
  int device = 0;
  int model = 0;
  int64_t firstStep = 1, lastStep = 1;
};

struct JobSchedule {
  std::vector<std::vector<JobSlice>> rounds;
  /// Per round, its longest slice; the makespan is their sum.
  std::vector<double> roundSeconds;
  double makespanSeconds = 0;
};

/// LRTF rounds of about `sliceSeconds` each (0: one round of whole models
/// when there is a device for each, else an eighth of each device's share
/// of the work, so every device sees several rounds). A model runs
/// max(1, round(sliceSeconds / its step time)) steps per round (fewer at
/// its end); a model keeps the device it ran on when it runs in the next
/// round too, so checkpoints move only when they must. Every model's steps
/// are covered once, in order.
JobSchedule scheduleJob(const std::vector<JobModelTime> &models, int devices,
                        double sliceSeconds = 0);

} // namespace cleave::planner

#endif // CLEAVE_PASSES_JOBSCHEDULE_H
