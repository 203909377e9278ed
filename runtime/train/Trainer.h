//===- Trainer.h - Runs a training plan for a number of steps -------------===//
//
// `cleave train` is a thin shell around this: load the data, create the
// executor (which allocates the whole step's memory once), optionally resume
// from a checkpoint, then per step set the batch, run every phase of the
// program in order (forward, backward, optimizer) and read the loss. Nothing
// is allocated per step. Outputs (the loss log, the saved weights) appear
// complete on success and not at all on failure; checkpoints written before
// a failure stay, each complete.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Status.h"
#include "runtime/train/Checkpoint.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

class Executor;

struct TrainOptions {
  std::string dataPath;
  /// Train until this many steps are done in all (a resumed run counts the
  /// checkpoint's).
  int64_t steps = 0;
  std::string logPath;         // one JSON object per step; empty: none
  std::string saveWeightsPath; // the model's state_dict; empty: none
  /// Empty: no checkpoints. A run resumed at `steps` takes no step and
  /// writes the resumed state here, in this plan's layout (a checkpoint
  /// moved to another mesh).
  std::string checkpointDir;
  int64_t checkpointEvery = 0; // steps between checkpoints (0: only at the end)
  std::string resumePath;      // a checkpoint, or a directory whose `latest` names one
  std::optional<uint64_t> shuffleSeed;
  /// Record the last step's timeline (TrainReport::trace).
  bool trace = false;
  /// Data parallelism: this rank trains on share `dataShare` of
  /// `dataShares` of every batch. Only the rank with `writesFiles` writes
  /// the log, checkpoints and weights (the ranks hold the same ones).
  int64_t dataShare = 0, dataShares = 1;
  bool writesFiles = true;
  /// This rank's place in the dp group for the states the plan shards
  /// (ZeRO): checkpoints gather them whole and resume each rank's part.
  CheckpointShards shards;
  /// The rank this process is: a pipelined plan runs the program of its
  /// stage. With more than one stage only the last computes the loss;
  /// `shareLoss` (set on such a job) gives every rank the step's loss from
  /// the rank that holds it.
  int64_t rank = 0;
  std::function<Status(double *loss)> shareLoss;
  /// The ranks of a multi-rank job writing checkpoints (a pipeline's, or
  /// with ZeRO parts: version 2) and a pipeline's saved weights together
  /// (CheckpointGroup::agree set on such a job).
  CheckpointGroup group;
  /// Set on a multi-rank job: makes every rank see one status (all ok, or
  /// the failures), collectively. train() calls it once its setup is done
  /// and once at the end, so an error there stops every rank alike.
  std::function<Status(const Status &)> agree;
};

struct StepRecord {
  int64_t step = 0; // from 1
  double loss = 0;
  double seconds = 0;
  double samplesPerSecond = 0;
  /// The step's time in kernels that compute, and in collectives (on one
  /// device: none); the rest is copying the batch in and the loss out.
  double computeSeconds = 0, communicationSeconds = 0;
};

/// One event of a step's measured timeline: a phase run (`kernel` false:
/// "F mb0 chunk0", "B mb0 chunk0", "optimizer") or one of its kernels, in
/// seconds from the step's start. A phase's start and length are measured;
/// its kernels are laid back to back from the phase's start, each as long
/// as it measured (the gaps between them are the executor's loop).
struct TraceEvent {
  std::string name, phase, loc;
  bool kernel = false;
  int64_t microbatch = 0, chunk = 0;
  double start = 0, seconds = 0;
};

/// One rank's means over the steps after the first (or the only one).
struct RankMeasure {
  double stepSeconds = 0, computeSeconds = 0, communicationSeconds = 0;
  size_t allocatedBytes = 0;
  /// A spilled plan's host pool and its copies, summed over the steps run.
  size_t hostBytes = 0;
  CopyStats copies;
};

struct TrainReport {
  int64_t firstStep = 0; // the first step this run took (1 unless resumed)
  std::vector<StepRecord> steps;
  std::vector<std::string> checkpoints;
  std::string resumedFrom;
  /// What the executor allocated in device memory, and what the plan
  /// predicted.
  size_t allocatedBytes = 0, predictedBytes = 0;
  size_t workspaceBytes = 0;
  /// A spilled plan (a host pool, ProgramSpec::hostPool): what the executor
  /// allocated in host memory, and its copies summed over the steps run.
  bool spilled = false;
  size_t hostBytes = 0;
  CopyStats copies;
  double loadSeconds = 0;
  /// Set once the first step began: a failure after it may leave other
  /// ranks waiting in a collective, so a job must be ended, not agreed on.
  bool stepping = false;
  /// On a multi-rank job (gathered on the first rank): each rank's
  /// measurements, in rank order.
  std::vector<RankMeasure> ranks;
  /// With TrainOptions::trace: the last step's timeline.
  std::vector<TraceEvent> trace;
};

/// The events as a JSON array (to gather them from the ranks), and back.
std::string traceEventsJson(const std::vector<TraceEvent> &events);
Status parseTraceEvents(const std::string &json, std::vector<TraceEvent> *events);

/// Chrome trace events (chrome://tracing, Perfetto) of every rank's last
/// step (`perRank[r]`), laid out as `cleave inspect --trace` lays out the
/// predicted timeline: a process per rank named after its place in the
/// mesh, the phase runs on thread 0 ("schedule"), their kernels on
/// thread 1 ("kernels"), microseconds from the step's start.
std::string chromeTrace(const Plan &plan, const std::vector<std::vector<TraceEvent>> &perRank,
                        int64_t step);

/// This run's means over the steps after the first (or the only one), and
/// its allocation.
RankMeasure measureOf(const TrainReport &report);

/// Trains `plan` on `backend`. `onStep` sees every step as it completes
/// (for progress output).
Status train(const Plan &plan, Backend &backend, const TrainOptions &options,
             TrainReport *report, const std::function<void(const StepRecord &)> &onStep = {});

/// Writes the model's state_dict (manifest training.state_dict, in order)
/// from the executor's weights: floating tensors as f32, integers as they
/// are, standard safetensors that PyTorch's load_state_dict takes.
/// With ZeRO parameter parts, every rank of the dp group calls it (the
/// parts are gathered) and only the one with `write` writes.
Status saveStateDict(const Plan &plan, const Executor &executor, const std::string &path,
                     const CheckpointShards &shards = {}, bool write = true);
/// The same from a pipelined plan's ranks, every rank calling it: each
/// stage's first rank writes the entries it is the first to hold (stage 0
/// also those the plan keeps in a file) to a temporary file beside `path`,
/// then rank 0 puts every entry into `path` in the state_dict's order and
/// removes the temporary files.
Status saveStageStateDict(const Plan &plan, const Executor &executor, const std::string &path,
                          const CheckpointShards &shards, const CheckpointGroup &group);

/// The report as JSON (for --report and tests).
std::string trainReportJson(const Plan &plan, const TrainOptions &options,
                            const TrainReport &report);

} // namespace cleave::runtime
