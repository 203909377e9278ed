//===- Job.h - Several models trained at once, round by round -------------===//
//
// A job plan directory (what the compiler writes for a job file listing
// several models; docs/training.md, "Multi-model jobs: running"):
//
//   JOBDIR/job.json          the models and the joint schedule
//   JOBDIR/models/<name>/    an ordinary one-device training plan each
//
// The schedule is a list of rounds; in a round each device runs at most one
// slice, a run of consecutive steps of one model. Every rank (one per
// device) runs the rounds in order, with a barrier between rounds, so the
// next slice of a model, on whichever device, starts from the checkpoint
// its previous slice wrote at its end. A slice is an ordinary runtime::train
// of the model's plan (resumed from RUNDIR/checkpoints/<name> after its first
// slice), so a model trains exactly as `cleave train` would train it alone.
//
// The run directory RUNDIR:
//   checkpoints/<name>/      one checkpoint per slice (ckpt-<last step>/, latest)
//   logs/<name>.jsonl        every step's record, as `cleave train --log` writes
//   weights/<name>.safetensors  the model's state_dict after its last step
// logs/ and weights/ appear when the whole job has succeeded, each file
// complete; a failed job leaves only its checkpoints, each complete.
//
// Nothing here starts MPI: the ranks' collectives come in as functions
// (JobRanks), so the job runs in one process as a world of one, and the
// command line (cli/TrainCommand.cpp) gives it the MPI world.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

struct JobModel {
  /// A safe file name: [A-Za-z0-9_.-]+, not "." or "..", unique in the job.
  std::string name;
  /// As job.json gives them, and resolved against the job directory.
  std::string planField, dataField;
  std::string plan, data;
  int64_t steps = 0;
  std::optional<double> predictedStepSeconds;
  std::optional<uint64_t> shuffleSeed;
};

/// One entry of a round: model `model` (an index into JobPlan::models)
/// trains steps first..last (from 1, both included) on device `device`.
struct JobSlice {
  int64_t device = 0;
  size_t model = 0;
  int64_t firstStep = 0, lastStep = 0;
};

struct JobPlan {
  std::string dir;  // the job plan directory
  std::string file; // its job.json
  int64_t devices = 0;
  int64_t sliceSteps = 0;
  std::vector<JobModel> models;
  std::vector<std::vector<JobSlice>> rounds;
  /// job.json's "predicted" object as JSON text ("null" when absent),
  /// copied into the report.
  std::string predictedJson = "null";
  /// Its "makespan_seconds", when a number.
  std::optional<double> predictedMakespanSeconds;

  /// The index of the model named `name`, or -1.
  int64_t modelIndex(const std::string &name) const;
  /// The slice device `device` runs in round `round`, or null.
  const JobSlice *sliceOf(size_t round, int64_t device) const;
};

/// Parses and validates job.json's text (read from `file`, in the job plan
/// directory `dir`). Every error names the file and the field
/// (`rounds[2][0].first_step`). Checks the format and version, the device
/// count, each model's fields, and the schedule: every entry's device in
/// [0, devices) and model one of the job's, a device and a model at most
/// once per round, and each model's slices covering steps 1..steps in
/// round order, without gaps or overlaps. Fields it does not know are
/// ignored.
Status parseJobPlan(const std::string &text, const std::string &dir, const std::string &file,
                    JobPlan *out);
/// A model's name in a job: letters, digits, '_', '.', '-' (a file name
/// under models/, logs/ and weights/), not "." or "..", at most 200.
bool isJobModelName(const std::string &name);
/// Reads DIR/job.json and parses it.
Status loadJobPlan(const std::string &dir, JobPlan *out);

/// What can be checked of the models before any rank starts: each plan
/// directory loads, is a training plan for one device, and each data file
/// exists. (The data's contents are checked by the slice that reads them.)
Status checkJobModels(const JobPlan &job);

/// RUNDIR must not exist, or be an empty directory.
Status checkRunDir(const std::string &runDir);

/// The collectives a job needs of its ranks: one process per device, rank r
/// running device r. The defaults are a world of one.
struct JobRanks {
  int rank = 0, size = 1;
  /// Collective: every rank gets one status, ok if every rank's is, else
  /// the failures (agreeAcrossRanks). Also the job's barrier.
  std::function<Status(const Status &)> agree;
  /// Collective: `all` gets every rank's `count` values, rank r's at r·count.
  std::function<Status(const double *mine, double *all, size_t count)> allGather;
};

struct JobOptions {
  std::string runDir;
};

/// One slice as it ran.
struct JobSliceResult {
  size_t round = 0;
  JobSlice slice;
  /// Its wall time: loading the plan and the data, resuming, the steps,
  /// the checkpoint and, at the model's end, its weights.
  double seconds = 0;
  /// The steps' own times, summed, and their number; the last step's loss.
  double stepSeconds = 0;
  int64_t stepsRun = 0;
  double lastLoss = 0;
};

struct JobReport {
  /// From the first round's start to the last round's end (rank 0's clock,
  /// each end after the round's barrier).
  double makespanSeconds = 0;
  std::vector<double> roundSeconds;
  /// On rank 0: every slice, round by round, in device order.
  std::vector<JobSliceResult> slices;
};

/// Runs the job on this rank (every rank calls it; `ranks.size` must be the
/// job's device count). `backend` is this rank's. `onSlice` (rank 0) sees
/// every slice once its round is over, for progress output. A failure on
/// any rank (a slice's data, its checkpoint, a step) ends the round on
/// every rank with the agreed error; nothing waits on a failed rank.
Status runJob(const JobPlan &job, Backend &backend, const JobOptions &options,
              const JobRanks &ranks, JobReport *report,
              const std::function<void(const JobSliceResult &)> &onSlice = {});

/// The report (`cleave train --job ... --report`): the measured makespan and
/// job.json's prediction, per model its steps, seconds, mean step time and
/// the devices it ran on, per device its busy time and slice count, per
/// round its time, and every slice.
std::string jobReportJson(const JobPlan &job, const JobReport &report);

} // namespace cleave::runtime
