//===- Inspect.h - What a plan spills and what a job plan runs ------------===//
//
// The facts `cleave inspect` prints about spilling and multi-model jobs, kept
// here (not in the command) so a test can call them:
//
//  - a program's spilling (docs/plan-format.md, "Spilling to host memory"):
//    its device regions against its host pool, the parameters in the host
//    pool grouped by layer with the host states kept for them, and the
//    prefetch and spill instructions of each phase;
//  - a job plan directory (docs/training.md, "Multi-model jobs: running"):
//    job.json, parsed by the runtime's own reader (parseJobPlan), and each
//    model's plan, as the predicted joint schedule: rounds of slices with
//    their predicted times, each model's devices and memory, each device's
//    models and busy time; and that schedule as a Chrome trace.
//
// Nothing here formats for people: the JSON is what `cleave inspect --json`
// prints, the structures are what its text is made from.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"
#include "runtime/Status.h"
#include "runtime/train/Job.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cleave::runtime {

//===--------------------------------------------------------------------===//
// Spilling.
//===--------------------------------------------------------------------===//

/// The layer of a parameter: its module path cut after the first numeric
/// component ("blocks.3" for "blocks.3.fc.weight"; the planner's layers,
/// docs/planner.md), the whole module path when none is numeric ("head" for
/// "head.weight"), "(root)" for a parameter of the root module. A tensor
/// part's suffix ("w[split(0) 1/2]") is ignored.
std::string layerOfParameter(const std::string &name);

/// A weight in the host pool.
struct SpilledParameter {
  std::string name;
  std::string layer;
  /// As the program holds it (a ZeRO part's shape when it holds a part).
  TensorDesc desc;
  /// Its bytes in the host weights region (without the slot's alignment).
  size_t bytes = 0;
  /// The host states named after it (`host_gradient.<name>`, the
  /// optimizer's `optimizer.exp_avg.<name>`, ...).
  size_t hostStateBytes = 0;
};

/// The spilled parameters of one layer.
struct SpilledLayer {
  std::string layer;
  std::vector<std::string> parameters;
  size_t parameterBytes = 0, hostStateBytes = 0;
};

/// The copies one phase issues.
struct PhaseCopies {
  size_t phase = 0; // the index in ProgramSpec::phases
  std::string name;
  int64_t chunk = 0;
  std::optional<int64_t> microbatch;
  int64_t prefetches = 0, spills = 0;
  /// The bytes the copies move (each copy's source).
  size_t prefetchBytes = 0, spillBytes = 0;
};

/// What a program keeps on the device and in host memory.
struct ProgramSpill {
  std::string program;
  /// The device regions (ProgramSpec::predictedBytes is their sum).
  size_t arenaBytes = 0, weightBytes = 0, stateBytes = 0;
  /// The host pool (ProgramSpec::hostBytes, the manifest's host_bytes).
  size_t hostWeightBytes = 0, hostStateBytes = 0;
  /// The weights in the host pool, in buffer order; grouped by layer in
  /// the order of each layer's first parameter.
  std::vector<SpilledParameter> parameters;
  std::vector<SpilledLayer> layers;
  /// Host states named after no spilled parameter.
  size_t otherHostStateBytes = 0;
  /// Every phase, in program order, and the totals over them.
  std::vector<PhaseCopies> phases;
  int64_t prefetches = 0, spills = 0;

  size_t deviceBytes() const { return arenaBytes + weightBytes + stateBytes; }
  size_t hostBytes() const { return hostWeightBytes + hostStateBytes; }
  /// Whether anything lives in host memory or is copied there or back.
  bool spilled() const { return hostBytes() > 0 || prefetches > 0 || spills > 0; }
};

/// Describes a loaded program (ProgramSpec::loaded).
ProgramSpill describeSpill(const ProgramSpec &program);

/// A plan's predicted host pool by category, the manifest's
/// `predicted.memory_bytes.host_by_category` (the largest program's, as
/// `by_category`), by name; empty when the manifest has none. Reads
/// PLAN_DIR/manifest.json: an error names the file and the field.
Status readHostByCategory(const std::string &planDir,
                          std::vector<std::pair<std::string, int64_t>> *out);

/// `{host_bytes, host_weight_bytes, host_state_bytes, device_bytes,
/// arena_bytes, weight_bytes, state_bytes, spilled_parameters[],
/// spilled_layers[], other_host_state_bytes, phases[], prefetches, spills}`.
nlohmann::json spillJson(const ProgramSpill &spill);

//===--------------------------------------------------------------------===//
// Job plan directories.
//===--------------------------------------------------------------------===//

/// A model of the job with its plan's memory.
struct JobModelFacts {
  /// The model's predicted step time: job.json's predicted_step_seconds,
  /// else its plan's predicted.step_seconds; `stepSource` says which
  /// ("job.json", "manifest", or "" when neither has one).
  std::optional<double> stepSeconds;
  std::string stepSource;
  /// The devices its slices run on (sorted) and the number of its slices.
  std::vector<int64_t> devices;
  size_t slices = 0;
  /// Its plan's budget (predicted.memory_budget_bytes), when recorded.
  std::optional<int64_t> budgetBytes;
  /// Its plan's one program: device regions, host pool, what is spilled.
  ProgramSpill memory;
  std::vector<std::pair<std::string, int64_t>> hostByCategory;

  /// Whether its plan is spilled: its manifest's host_bytes > 0.
  bool spilled() const { return memory.hostBytes() > 0; }
};

/// A slice with its predicted time and start.
struct JobSliceFacts {
  JobSlice slice;
  std::optional<double> seconds; // steps x the model's step time
  double startSeconds = 0;       // its round's start
};

struct JobRoundFacts {
  std::vector<JobSliceFacts> slices; // job.json's order
  /// Its longest slice (0 for an empty round); unset when a slice's time
  /// is unknown.
  std::optional<double> seconds;
  /// The rounds before it, end to end (when all of them are known).
  std::optional<double> startSeconds;
};

/// One device over the job.
struct JobDeviceFacts {
  int64_t device = 0;
  /// The models it runs, in the order of their first slice on it, and
  /// its slices' number.
  std::vector<size_t> models;
  size_t slices = 0;
  /// Its slices' predicted times summed (unset when one is unknown).
  std::optional<double> busySeconds;
  /// The most any of its models holds on the device and in host memory (a
  /// device holds one model at a time).
  size_t peakDeviceBytes = 0, peakHostBytes = 0;
};

struct JobFacts {
  JobPlan job;
  std::vector<JobModelFacts> models; // job.models' order
  std::vector<JobRoundFacts> rounds;
  std::vector<JobDeviceFacts> devices; // 0..devices-1
  /// job.json's predicted.makespan_seconds and sequential_seconds.
  std::optional<double> makespanSeconds, sequentialSeconds;
  /// The rounds end to end, when every slice's time is known.
  std::optional<double> roundsSeconds;
};

/// Whether `dir` holds a job.json (and so is a job plan directory).
bool isJobPlanDir(const std::string &dir);

/// Reads the job plan directory `dir`: job.json by loadJobPlan (every rule
/// of the format, each error naming the file and field), its `predicted`
/// (makespan_seconds and sequential_seconds, when present, non-negative
/// numbers or null), and each model's plan, which must load and be a
/// one-device training plan (errors name job.json, the model and the plan).
/// The models' data files are not read.
Status inspectJob(const std::string &dir, JobFacts *out);

/// The facts as `cleave inspect JOBDIR --json` prints them (docs/cli.md).
nlohmann::json jobJson(const JobFacts &facts);

/// The predicted joint schedule as Chrome trace events: a process per
/// device (`device D`, thread 0 `slices`) with a complete event per slice,
/// named `MODEL [first..last]`, starting at its round's start and lasting
/// its predicted time. An error when a slice's time is unknown (a model
/// without a predicted step time in job.json or its manifest).
Status jobTrace(const JobFacts &facts, nlohmann::json *events);

} // namespace cleave::runtime
