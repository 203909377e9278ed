//===- Job.h - Multi-model jobs: many models planned for one cluster -*- C++ -*-===//
//
// Model selection trains many configurations at once: several learning
// rates, depths, or different models. A job file (docs/planner.md,
// "Multi-model jobs") lists them; planJob plans each model for one device
// (spilled where it does not fit) and for the whole cluster, and schedules
// the models' slices of steps on the devices in LRTF rounds
// (passes/JobSchedule.h); compileJob also compiles each model's one-device
// training plan and writes the job plan directory `cleave train --job` runs:
//
//   JOBDIR/job.json          the models, their data and steps, the rounds
//   JOBDIR/models/<name>/    each model's training plan
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_JOB_H
#define CLEAVE_COMPILER_JOB_H

#include "compiler/CompileDriver.h"
#include "passes/JobSchedule.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// One model of a job file.
struct JobModel {
  std::string name;
  std::string model; ///< the TorchScript file (absolute, or as the job file gives it)
  std::string data;  ///< its training data (safetensors)
  int64_t globalBatch = 0, steps = 0;
  std::string dtype = "f32";
  mlir::cleave::TrainingOptions training;
  int64_t seed = 0;
  std::optional<uint64_t> shuffleSeed;
};

struct Job {
  std::string path;
  std::vector<JobModel> models;
  /// The rounds' target length; 0: JobSchedule's default.
  double sliceSeconds = 0;
};

/// Reads and checks a job file (format "cleave-job", version 1); paths in
/// it are relative to the file. Errors name the file, the model and the
/// field.
runtime::Status loadJob(const std::string &path, Job &job);

struct JobRequest {
  std::string job;     ///< the job file
  std::string cluster; ///< the cluster spec
  int devices = 0;     ///< 0: the spec's
  std::optional<double> memory;
  planner::SpillMode spill = planner::SpillMode::Auto;
  std::string output; ///< compileJob's job plan directory
  std::function<void(const std::string &)> progress;
};

/// What planJob decided for one model.
struct JobModelPlan {
  std::string name;
  /// On one device: the planner's choice (possibly spilled) and its step.
  planner::Candidate oneDevice;
  /// On every device of the cluster: the best plan and its step (the
  /// baseline of training the models one after another).
  planner::Candidate allDevices;
};

struct JobPlan {
  Job job;
  int devices = 0;
  std::vector<JobModelPlan> models;
  planner::JobSchedule schedule;
  /// The models one after another, each on every device with its best plan.
  double sequentialSeconds = 0;
  /// The models one per device, whole (no slices), LRTF order.
  double onePerDeviceSeconds = 0;
  /// The job plan directory's job.json.
  std::string json() const;
};

/// Plans every model of `request.job` and schedules them. NothingFits when a
/// model fits no device even spilled (jobs run each model on one device at
/// a time).
DriverStatus planJob(mlir::MLIRContext &context, const JobRequest &request, JobPlan &plan);

/// planJob, then each model's one-device training plan, written with
/// job.json into `request.output`, which appears complete or not at all.
DriverStatus compileJob(mlir::MLIRContext &context, const JobRequest &request, JobPlan &plan);

} // namespace cleave

#endif // CLEAVE_COMPILER_JOB_H
