//===- TrainCommand.cpp - cleave train ------------------------------------===//
//
// Parses the options, prints progress; the run itself is the runtime's
// Trainer (runtime/train/Trainer.h). Built into cleave-runtime, which links
// the runtime only: no LLVM, MLIR or LibTorch in a training process.
//
//===----------------------------------------------------------------------===//

#include "cli/Args.h"
#include "runtime/AtomicFile.h"
#include "runtime/DeviceBackends.h"
#include "runtime/Plan.h"
#include "runtime/comm/CommKernels.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/RankRunner.h"
#include "runtime/train/Job.h"
#include "runtime/train/Trainer.h"

#include <chrono>
#include <climits>
#include <cstring>
#include <cstdio>
#include <functional>
#include <thread>
#include <unistd.h>

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kTrainUsage =
    R"(usage: cleave train PLAN_DIR --data DATA.safetensors --steps N [options]
       mpirun -np N cleave train PLAN_DIR ...   (a plan for N ranks)
       cleave train --local N PLAN_DIR ...      (the same, N ranks started here)
       cleave train --job JOB_DIR --out RUN_DIR [--local N] [--report FILE] [-q]
                                                (a multi-model job plan)

Trains a plan compiled with 'cleave compile --mode train': on one device, or
on the ranks of a plan compiled with --cluster: each data-parallel rank on
its share of every batch (rank r of N: rows [r*B/N, (r+1)*B/N)), each
pipeline stage and tensor-parallel rank running its own program, the loss
reported being the whole batch's. DATA
holds one tensor per plan input (the model's inputs, and 'labels' when the
loss was appended), dim 0 indexing the samples; step i (from 1) takes samples
[(i-1)*B, i*B) modulo their number, B being the plan's batch. One line per
step reports the loss, the step time and samples/s (a progress bar with an
ETA when stdout is a terminal).

options:
  --data FILE            the training samples (safetensors)
  --steps N              train until N steps are done (a resumed run counts
                         the checkpoint's steps)
  --log FILE             one JSON object per step: {"step", "loss", "seconds",
                         "samples_per_second"}
  --save-weights FILE    at the end, the model's state_dict (parameters and
                         buffers under their names, f32) as safetensors that
                         PyTorch's load_state_dict takes
  --checkpoint DIR       write checkpoints to DIR (ckpt-<step>/ and 'latest'),
                         every --checkpoint-every K steps and after the last
  --checkpoint-every K   steps between checkpoints
  --resume PATH          continue from a checkpoint: DIR (its latest) or
                         DIR/ckpt-<step>; one of another mesh's plan of the
                         same model moves to this plan's; at --steps already,
                         no step is taken and --checkpoint writes the state
                         in this plan's layout
  --shuffle SEED         take each epoch's samples in an order drawn from SEED
  --backend B            cpu, cuda or auto (default cpu)
  --threads N            CPU threads for kernels (default: OMP_NUM_THREADS,
                         else the cores shared among the ranks on this machine)
  --local N              start N ranks on this machine through mpirun (N must
                         be the plan's device count)
  --report FILE          a JSON report: per-step losses and times, memory
                         allocated next to the plan's prediction; on many
                         ranks each rank's step, compute and communication
                         time and allocation, and the plan's predictions
  --trace FILE           the last step's measured timeline as Chrome trace
                         events: a process per rank, its phase runs ('F mb0
                         chunk0', 'B mb0 chunk0', 'optimizer') and kernels,
                         laid out as 'cleave inspect --trace' lays out the
                         predicted one
  -q, --quiet            no per-step lines
  -h, --help             show this help

multi-model jobs (docs/training.md, "Multi-model jobs: running"):
  --job DIR              run the job plan directory DIR (job.json and
                         models/<name>/, one-device training plans): its
                         rounds in order, each device (rank) training its
                         slice of a model, a barrier between rounds; one
                         line per slice. Takes --local N (N = job.json's
                         devices; or mpirun -np N), --report, --threads,
                         --backend and -q, none of the options of one plan
  --out DIR              the run directory (must not exist or be empty):
                         checkpoints/<name>/, and once the job succeeded
                         logs/<name>.jsonl and weights/<name>.safetensors
  --report FILE          (with --job) the measured makespan next to
                         job.json's prediction, per model, device and round

Outputs (--log, --save-weights, --report) appear complete when training
succeeds and not at all when it fails; checkpoints written before a failure
stay, each complete. On many ranks the first writes them (the ranks hold the
same weights and state, so a checkpoint resumes on any number of ranks, one
device included); a rank that fails mid-run ends the job.

exit status: 0 success, 1 bad arguments, plan, data or checkpoint, or a failed
step.
)";

int fail(const rt::Status &status) {
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: %s\n", status.message().c_str());
  return 1;
}

/// The loss to 7 significant digits.
std::string lossText(double loss) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.7g", loss);
  return text;
}

/// "1:02:03" or "2:03".
std::string clock(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof(text), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(text, sizeof(text), "%ld:%02ld", s / 60, s % 60);
  return text;
}

/// One line per step ("step 3/10  loss ...  ms  samples/s").
void printStep(const rt::StepRecord &r, int64_t total) {
  std::printf("step %lld/%lld  loss %s  %.2f ms  %.1f samples/s\n",
              static_cast<long long>(r.step), static_cast<long long>(total),
              lossText(r.loss).c_str(), r.seconds * 1e3, r.samplesPerSecond);
  std::fflush(stdout);
}

/// --report and --trace, each written whole or not at all.
/// "2 pipeline stages (1f1b) x 2 tensor-parallel ranks x 1 data-parallel
/// rank": the mesh a training plan runs on.
std::string meshText(const rt::Plan &plan) {
  std::string text;
  if (plan.pp > 1)
    text = std::to_string(plan.pp) + " pipeline stages (" + plan.pipelineSchedule + ") x ";
  if (plan.tp > 1)
    text += std::to_string(plan.tp) + " tensor-parallel ranks x ";
  return text + std::to_string(plan.dp) + (plan.dp == 1 ? " data-parallel rank" : " data-parallel ranks");
}

rt::Status writeOutputs(const rt::Plan &plan, const rt::TrainOptions &options,
                        const rt::TrainReport &report, const std::string &reportPath,
                        const std::string &tracePath,
                        const std::vector<std::vector<rt::TraceEvent>> &traces) {
  if (!reportPath.empty())
    CLEAVE_RETURN_IF_ERROR(
        rt::writeFileAtomically(reportPath, rt::trainReportJson(plan, options, report)));
  if (!tracePath.empty())
    CLEAVE_RETURN_IF_ERROR(
        rt::writeFileAtomically(tracePath, rt::chromeTrace(plan, traces, options.steps)));
  return {};
}

/// Collective: every rank's trace events, on rank 0 in rank order (empty
/// elsewhere). Each rank's events travel as JSON text, padded to whole
/// 32-bit words.
rt::Status gatherTraces(rt::Communicator &world, const std::vector<rt::TraceEvent> &mine,
                        std::vector<std::vector<rt::TraceEvent>> *all) {
  std::string text = rt::traceEventsJson(mine);
  int64_t length = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(world.size());
  CLEAVE_RETURN_IF_ERROR(world.allGather(&length, lengths.data(), 1, rt::DType::I64));
  auto words = [](int64_t bytes) { return static_cast<size_t>((bytes + 3) / 4); };
  all->clear();
  if (world.rank() != 0) {
    text.resize(words(length) * 4, ' ');
    return world.send(text.data(), words(length), rt::DType::I32, 0, 7);
  }
  for (int r = 0; r < world.size(); ++r) {
    std::string received = text;
    if (r != 0) {
      received.assign(words(lengths[r]) * 4, ' ');
      CLEAVE_RETURN_IF_ERROR(
          world.recv(received.data(), words(lengths[r]), rt::DType::I32, r, 7));
      received.resize(static_cast<size_t>(lengths[r]));
    }
    std::vector<rt::TraceEvent> events;
    CLEAVE_RETURN_IF_ERROR(rt::parseTraceEvents(received, &events).prepend(
        "rank " + std::to_string(r)));
    all->push_back(std::move(events));
  }
  return {};
}

/// An error that every rank met alike, agreed on across the ranks: rank 0
/// prints it, once. Returns the rank's exit status.
int failAgreed(const rt::Communicator &world, const rt::Status &status) {
  if (world.rank() == 0)
    fail(status);
  return 1;
}

/// The start of a rank under mpirun: joins the MPI world (`*world`), runs
/// `load` (reading what the ranks run, once the world is joined) and agrees
/// on its status across the ranks, then sets the CPU threads (--threads,
/// else OMP_NUM_THREADS, else this machine's cores shared among the ranks
/// on it). Returns -1 to go on, else the rank's exit status.
int startRank(std::unique_ptr<rt::Communicator> *world, int threads,
              const std::function<rt::Status()> &load) {
  if (rt::Status s = rt::createMpiWorld(world); !s.ok())
    return fail(s);
  if (rt::Status s = rt::agreeAcrossRanks(**world, load()); !s.ok())
    return failAgreed(**world, s);
  if (threads == 0 && !std::getenv("OMP_NUM_THREADS"))
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / localRanks());
  rt::setCpuThreads(threads);
  return -1;
}

/// One rank of a data-parallel training job under mpirun. Errors that every
/// rank meets alike (the plan, the data, a checkpoint, the world size) are
/// agreed on and printed once by rank 0; a rank that fails mid-run prints
/// its own error and ends the job, since the others wait for it in a
/// collective.
int trainRank(const std::string &planDir, rt::TrainOptions options,
              const std::string &reportPath, const std::string &tracePath,
              rt::BackendChoice choice, int threads, bool quiet) {
  std::unique_ptr<rt::Communicator> world;
  rt::Plan plan;
  auto load = [&]() -> rt::Status {
    int64_t devices = 0;
    CLEAVE_RETURN_IF_ERROR(rt::readPlanDeviceCount(planDir, &devices));
    if (devices != world->size())
      return CLEAVE_ERROR(planDir, ": the plan has ", devices, " devices, the job ",
                          world->size(), " ranks: run it with mpirun -np ", devices,
                          " or cleave train --local ", devices);
    CLEAVE_RETURN_IF_ERROR(rt::loadPlan(planDir, &plan).prepend(planDir));
    if (!plan.training)
      return CLEAVE_ERROR(planDir, ": not a training plan (schedule '", plan.schedule,
                          "'); compile it with 'cleave compile --mode train'");
    return {};
  };
  if (int exit = startRank(&world, threads, load); exit >= 0)
    return exit;
  const int rank = world->rank();
  std::unique_ptr<rt::Backend> compute;
  std::string why;
  rt::Status created = rt::createBackend(choice, localRank(), localRanks(), {}, &compute, &why);
  if (created.ok() && !compute->sharesHostMemory())
    created = CLEAVE_ERROR("training on many ranks runs on the CPU backend so far (--backend "
                           "cpu); ",
                           compute->name(), " ranks are not supported yet");
  if (rt::Status s = rt::agreeAcrossRanks(*world, created); !s.ok())
    return failAgreed(*world, s);

  // The dp group: the ranks of this stage and tp index (all of them
  // without a pipeline or tensor splits); the tp group: the ranks of this
  // stage and dp index.
  const rt::DeviceSpec &me = plan.devices[rank];
  std::unique_ptr<rt::Communicator> dpGroup, tpGroup;
  if (rt::Status s = rt::splitMeshGroups(*world, plan, rank, &tpGroup, &dpGroup); !s.ok())
    return fail(s);
  rt::CommBackend backend(*compute, plan, rank,
                          rt::RankComms{world.get(), tpGroup.get(), dpGroup.get()});
  options.rank = rank;
  options.dataShare = me.dp;
  options.dataShares = plan.dp;
  options.writesFiles = rank == 0;
  options.group.rank = rank;
  options.group.stage = me.stage;
  options.group.dp = me.dp;
  // Each (stage, tp index)'s first rank writes what its program holds.
  options.group.writesStage = me.dp == 0;
  // Ranks write checkpoints together (pipelines, ZeRO parts): agreed on.
  options.group.agree = [&](const rt::Status &s) { return rt::agreeAcrossRanks(*world, s); };
  if (plan.partitionedTraining()) {
    // The last stage computes the loss (averaged over its dp group): its
    // first rank gives it to every rank.
    const int holder = static_cast<int>((plan.pp - 1) * plan.dp * plan.tp);
    options.shareLoss = [&world, holder](double *loss) -> rt::Status {
      float value = static_cast<float>(*loss);
      CLEAVE_RETURN_IF_ERROR(world->broadcast(&value, 1, rt::DType::F32, holder));
      *loss = value;
      return {};
    };
  }
  options.agree = [&](const rt::Status &s) { return rt::agreeAcrossRanks(*world, s); };
  options.shards.index = me.dp;
  options.shards.ranks = plan.dp;
  options.shards.gather = [&](const void *part, void *whole, size_t count, rt::DType dtype) {
    return dpGroup->allGather(part, whole, count, dtype);
  };
  rt::TrainReport report;
  auto onStep = [&](const rt::StepRecord &r) {
    if (!quiet && rank == 0)
      printStep(r, options.steps);
  };
  rt::Status status = rt::train(plan, backend, options, &report, onStep);
  if (!status.ok()) {
    if (!report.stepping)
      return failAgreed(*world, status);
    fail(status.prepend("rank " + std::to_string(rank)));
    std::fflush(stderr);
    world->abortJob(1); // the others may wait on this rank forever
  }
  // Every rank's times and allocation, for the report (each allocation must
  // be its program's prediction), and a spilled plan's host pool and copies:
  // three times, six counts, two times (a time's bits in an int64).
  constexpr int kFields = 11;
  rt::RankMeasure measure = rt::measureOf(report);
  int64_t mine[kFields] = {0,
                           0,
                           0,
                           static_cast<int64_t>(measure.allocatedBytes),
                           static_cast<int64_t>(measure.hostBytes),
                           static_cast<int64_t>(measure.copies.prefetchBytes),
                           static_cast<int64_t>(measure.copies.spillBytes),
                           static_cast<int64_t>(measure.copies.prefetches),
                           static_cast<int64_t>(measure.copies.spills),
                           0,
                           0};
  double times[3] = {measure.stepSeconds, measure.computeSeconds, measure.communicationSeconds};
  std::memcpy(mine, times, sizeof(times));
  double copyTimes[2] = {measure.copies.copySeconds, measure.copies.stallSeconds};
  std::memcpy(&mine[9], copyTimes, sizeof(copyTimes));
  std::vector<int64_t> all(kFields * world->size());
  if (rt::Status s = world->allGather(mine, all.data(), kFields, rt::DType::I64); !s.ok())
    return fail(s);
  for (int r = 0; r < world->size(); ++r) {
    rt::RankMeasure m;
    const int64_t *f = &all[r * kFields];
    std::memcpy(times, f, sizeof(times));
    m.stepSeconds = times[0];
    m.computeSeconds = times[1];
    m.communicationSeconds = times[2];
    m.allocatedBytes = static_cast<size_t>(f[3]);
    m.hostBytes = static_cast<size_t>(f[4]);
    m.copies.prefetchBytes = static_cast<uint64_t>(f[5]);
    m.copies.spillBytes = static_cast<uint64_t>(f[6]);
    m.copies.prefetches = static_cast<uint64_t>(f[7]);
    m.copies.spills = static_cast<uint64_t>(f[8]);
    std::memcpy(copyTimes, &f[9], sizeof(copyTimes));
    m.copies.copySeconds = copyTimes[0];
    m.copies.stallSeconds = copyTimes[1];
    report.ranks.push_back(m);
  }
  std::vector<std::vector<rt::TraceEvent>> traces;
  if (!tracePath.empty())
    if (rt::Status s = gatherTraces(*world, report.trace, &traces); !s.ok())
      return fail(s);
  if (rank == 0) {
    if (rt::Status s = writeOutputs(plan, options, report, reportPath, tracePath, traces);
        !s.ok())
      return fail(s);
    if (!quiet)
      std::printf("cleave train: steps %lld..%lld on %s%s (%s), memory %.2f "
                  "MiB allocated per rank (%.2f MiB predicted)%s%s\n",
                  static_cast<long long>(report.firstStep),
                  static_cast<long long>(options.steps),
                  meshText(plan).c_str(),
                  plan.training->zero == "none"
                      ? ""
                      : (" with ZeRO (" + plan.training->zero + ")").c_str(),
                  compute->name(),
                  report.allocatedBytes / 1048576.0, report.predictedBytes / 1048576.0,
                  report.resumedFrom.empty() ? "" : ", resumed from ",
                  report.resumedFrom.c_str());
  }
  return 0;
}

/// One line per slice of a job ("round 2/4  device 1  gpt  steps 6..10  loss ...  s").
void printSlice(const rt::JobPlan &job, const rt::JobSliceResult &r) {
  const rt::JobSlice &s = r.slice;
  std::printf("round %zu/%zu  device %lld  %s  steps %lld..%lld/%lld  loss %s  %.3f s\n",
              r.round + 1, job.rounds.size(), static_cast<long long>(s.device),
              job.models[s.model].name.c_str(), static_cast<long long>(s.firstStep),
              static_cast<long long>(s.lastStep),
              static_cast<long long>(job.models[s.model].steps), lossText(r.lastLoss).c_str(),
              r.seconds);
  std::fflush(stdout);
}

/// Runs this rank's slices of the job (`ranks`: empty on one device), into
/// the run directory; a line per slice unless `quiet`.
rt::Status runSlices(const rt::JobPlan &job, rt::Backend &compute, const std::string &runDir,
                     const rt::JobRanks &ranks, bool quiet, rt::JobReport *report) {
  rt::JobOptions options;
  options.runDir = runDir;
  auto onSlice = [&](const rt::JobSliceResult &r) {
    if (!quiet)
      printSlice(job, r);
  };
  return rt::runJob(job, compute, options, ranks, report, onSlice);
}

/// After a job: the report, and the summary line.
int finishJob(const rt::JobPlan &job, const rt::JobReport &report, const std::string &runDir,
              const std::string &reportPath, const char *device, bool quiet) {
  if (!reportPath.empty())
    if (rt::Status s = rt::writeFileAtomically(reportPath, rt::jobReportJson(job, report));
        !s.ok())
      return fail(s);
  if (!quiet) {
    double sequential = 0;
    for (const rt::JobSliceResult &r : report.slices)
      sequential += r.seconds;
    std::printf("cleave train: job of %zu model%s on %lld device%s (%s), %zu round%s in %.3f s",
                job.models.size(), job.models.size() == 1 ? "" : "s",
                static_cast<long long>(job.devices), job.devices == 1 ? "" : "s", device,
                job.rounds.size(), job.rounds.size() == 1 ? "" : "s", report.makespanSeconds);
    if (job.predictedMakespanSeconds)
      std::printf(" (predicted %.3f s)", *job.predictedMakespanSeconds);
    std::printf(", the slices one after another %.3f s; outputs in %s\n", sequential,
                runDir.c_str());
  }
  return 0;
}

/// The job and its models, checked before any rank starts (once, here,
/// rather than by every rank after mpirun's start-up).
rt::Status checkJob(const std::string &jobDir, const std::string &runDir, rt::JobPlan *job) {
  CLEAVE_RETURN_IF_ERROR(rt::loadJobPlan(jobDir, job));
  CLEAVE_RETURN_IF_ERROR(rt::checkJobModels(*job));
  return rt::checkRunDir(runDir);
}

/// One rank of a job under mpirun: rank r runs device r's slices.
int jobRank(const std::string &jobDir, const std::string &runDir, const std::string &reportPath,
            rt::BackendChoice choice, int threads, bool quiet) {
  std::unique_ptr<rt::Communicator> world;
  // Every rank reads job.json; rank 0 checks the models' plans too.
  rt::JobPlan job;
  auto load = [&]() -> rt::Status {
    CLEAVE_RETURN_IF_ERROR(rt::loadJobPlan(jobDir, &job));
    if (world->rank() == 0)
      CLEAVE_RETURN_IF_ERROR(rt::checkJobModels(job));
    if (job.devices != world->size())
      return CLEAVE_ERROR(job.file, ": the job has ", job.devices, " devices, the run ",
                          world->size(), " ranks: run it with mpirun -np ", job.devices,
                          " or cleave train --job ... --local ", job.devices);
    return {};
  };
  if (int exit = startRank(&world, threads, load); exit >= 0)
    return exit;
  const int rank = world->rank();
  std::unique_ptr<rt::Backend> compute;
  rt::Status created = rt::createBackend(choice, localRank(), localRanks(), {}, &compute);
  if (rt::Status s = rt::agreeAcrossRanks(*world, created); !s.ok())
    return failAgreed(*world, s);

  rt::JobRanks ranks;
  ranks.rank = rank;
  ranks.size = world->size();
  ranks.agree = [&](const rt::Status &s) { return rt::agreeAcrossRanks(*world, s); };
  ranks.allGather = [&](const double *mine, double *all, size_t count) {
    // Doubles travel as their bits: a gather only moves bytes.
    return world->allGather(mine, all, count, rt::DType::I64);
  };
  rt::JobReport report;
  if (rt::Status s = runSlices(job, *compute, runDir, ranks, quiet, &report); !s.ok())
    return failAgreed(*world, s);
  if (rank != 0)
    return 0;
  return finishJob(job, report, runDir, reportPath, compute->name(), quiet);
}

/// `cleave train --job`: checks the job once, then runs it here (one
/// device), under mpirun (a rank), or on --local N ranks.
int runJobCommand(const std::string &jobDir, const std::string &runDir,
                  const std::string &reportPath, int64_t local,
                  const std::vector<std::string> &rankArgs, rt::BackendChoice choice, int threads,
                  bool quiet) {
  if (launchedAsRanks()) {
    if (local > 0)
      return usageError("--local starts ranks itself; under mpirun leave it out", kTrainUsage);
    return jobRank(jobDir, runDir, reportPath, choice, threads, quiet);
  }
  rt::JobPlan job;
  if (rt::Status s = checkJob(jobDir, runDir, &job); !s.ok())
    return fail(s);
  if (local > 0) {
    if (local != job.devices)
      return fail(CLEAVE_ERROR(job.file, ": the job has ", job.devices, " devices; --local ",
                               local, " would start ", local, " ranks"));
    std::vector<std::string> args = {"train"};
    args.insert(args.end(), rankArgs.begin(), rankArgs.end());
    return launchLocal(static_cast<int>(local), args);
  }
  if (job.devices != 1)
    return fail(CLEAVE_ERROR(job.file, ": the job has ", job.devices,
                             " devices: run it with cleave train --job ", jobDir, " --out ",
                             runDir, " --local ", job.devices, " (or mpirun -np ", job.devices,
                             ")"));
  rt::setCpuThreads(threads);
  std::unique_ptr<rt::Backend> compute;
  if (rt::Status s = rt::createBackend(choice, 0, 1, {}, &compute); !s.ok())
    return fail(s);
  rt::JobReport report;
  if (rt::Status s = runSlices(job, *compute, runDir, {}, quiet, &report); !s.ok())
    return fail(s);
  return finishJob(job, report, runDir, reportPath, compute->name(), quiet);
}

} // namespace

int runTrain(int argc, char **argv) {
  std::string planDir;
  rt::TrainOptions options;
  std::string reportPath, tracePath;
  int threads = 0;
  int64_t local = 0;
  std::vector<std::string> rankArgs; // what --local passes on to every rank
  bool quiet = false, haveSteps = false;
  std::string jobDir, runDir;
  std::vector<std::string> planOptions; // those a job does not take
  rt::BackendChoice backend = rt::BackendChoice::Cpu;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    const int first = i;
    auto file = [&](const char *option, std::string &out) {
      if (!value)
        return usageError(std::string(option) + " needs a path", kTrainUsage);
      out = value;
      return -1;
    };
    int status = -1;
    for (const char *option : {"--data", "--steps", "--log", "--save-weights", "--checkpoint",
                               "--checkpoint-every", "--resume", "--shuffle", "--trace"})
      if (arg == option || arg.rfind(std::string(option) + "=", 0) == 0)
        planOptions.push_back(option);
    if (arg == "-h" || arg == "--help") {
      std::fputs(kTrainUsage, stdout);
      return 0;
    } else if (optionValue(argc, argv, i, "--job", &value)) {
      status = file("--job", jobDir);
    } else if (optionValue(argc, argv, i, "--out", &value)) {
      status = file("--out", runDir);
    } else if (optionValue(argc, argv, i, "--data", &value)) {
      status = file("--data", options.dataPath);
    } else if (optionValue(argc, argv, i, "--steps", &value)) {
      if (!parseInteger(value, options.steps, 1, INT64_MAX))
        return usageError("--steps needs a positive number of steps", kTrainUsage);
      haveSteps = true;
    } else if (optionValue(argc, argv, i, "--log", &value)) {
      status = file("--log", options.logPath);
    } else if (optionValue(argc, argv, i, "--save-weights", &value)) {
      status = file("--save-weights", options.saveWeightsPath);
    } else if (optionValue(argc, argv, i, "--checkpoint", &value)) {
      status = file("--checkpoint", options.checkpointDir);
    } else if (optionValue(argc, argv, i, "--checkpoint-every", &value)) {
      if (!parseInteger(value, options.checkpointEvery, 1, INT64_MAX))
        return usageError("--checkpoint-every needs a positive number of steps", kTrainUsage);
    } else if (optionValue(argc, argv, i, "--resume", &value)) {
      status = file("--resume", options.resumePath);
    } else if (optionValue(argc, argv, i, "--shuffle", &value)) {
      int64_t seed = 0;
      if (!parseInteger(value, seed, 0, INT64_MAX))
        return usageError("--shuffle needs a non-negative integer seed", kTrainUsage);
      options.shuffleSeed = static_cast<uint64_t>(seed);
    } else if (optionValue(argc, argv, i, "--report", &value)) {
      status = file("--report", reportPath);
    } else if (optionValue(argc, argv, i, "--trace", &value)) {
      status = file("--trace", tracePath);
      options.trace = true;
    } else if (optionValue(argc, argv, i, "--backend", &value)) {
      if (!value)
        return usageError("--backend needs cpu, cuda or auto", kTrainUsage);
      if (rt::Status s = rt::parseBackendChoice(value, &backend); !s.ok())
        return usageError(s.message(), kTrainUsage);
    } else if (optionValue(argc, argv, i, "--threads", &value)) {
      int64_t count = 0;
      if (!parseInteger(value, count, 1, INT32_MAX))
        return usageError("--threads needs a positive integer", kTrainUsage);
      threads = static_cast<int>(count);
    } else if (optionValue(argc, argv, i, "--local", &value)) {
      if (!parseInteger(value, local, 1, 4096))
        return usageError("--local needs a positive number of ranks", kTrainUsage);
      continue; // not passed on to the ranks
    } else if (arg == "-q" || arg == "--quiet") {
      quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kTrainUsage);
    } else if (planDir.empty()) {
      planDir = arg;
    } else {
      return usageError("more than one plan given ('" + planDir + "', '" + arg + "')",
                        kTrainUsage);
    }
    if (status >= 0)
      return status;
    for (int k = first; k <= i; ++k)
      rankArgs.push_back(argv[k]);
  }
  if (!jobDir.empty()) {
    if (!planDir.empty())
      return usageError("--job runs a job plan directory; a plan directory ('" + planDir +
                            "') cannot be given with it",
                        kTrainUsage);
    if (!planOptions.empty())
      return usageError(planOptions.front() +
                            " is an option of one plan; a job's models, data and steps are "
                            "in its job.json (--job takes --out, --local, --report, --threads, "
                            "--backend and -q)",
                        kTrainUsage);
    if (runDir.empty())
      return usageError("--job needs --out RUN_DIR (a directory that does not exist or is empty)",
                        kTrainUsage);
    return runJobCommand(jobDir, runDir, reportPath, local, rankArgs, backend, threads, quiet);
  }
  if (!runDir.empty())
    return usageError("--out is the run directory of --job", kTrainUsage);
  if (planDir.empty())
    return usageError("no plan directory given", kTrainUsage);
  if (options.dataPath.empty())
    return usageError("no training data given (--data DATA.safetensors)", kTrainUsage);
  if (!haveSteps)
    return usageError("no step count given (--steps N)", kTrainUsage);
  if (options.checkpointEvery > 0 && options.checkpointDir.empty())
    return usageError("--checkpoint-every needs --checkpoint DIR", kTrainUsage);

  if (local > 0)
    return launchPlanRanks(static_cast<int>(local), planDir, "train", rankArgs, kTrainUsage);
  if (launchedAsRanks())
    return trainRank(planDir, options, reportPath, tracePath, backend, threads, quiet);

  rt::Plan plan;
  if (rt::Status s = rt::loadPlan(planDir, &plan); !s.ok())
    return fail(s.prepend(planDir));
  if (plan.devices.size() > 1)
    return fail(CLEAVE_ERROR(planDir, ": the plan is for ", plan.devices.size(),
                             " ranks: run it with mpirun -np ", plan.devices.size(),
                             " or cleave train --local ", plan.devices.size()));
  if (!plan.training)
    return fail(CLEAVE_ERROR(planDir, ": not a training plan (schedule '", plan.schedule,
                             "'); compile it with 'cleave compile --mode train'"));
  rt::setCpuThreads(threads);
  std::unique_ptr<rt::Backend> device;
  std::string why;
  if (rt::Status s = rt::createBackend(backend, 0, 1, {}, &device, &why); !s.ok())
    return fail(s);

  bool terminal = isatty(STDOUT_FILENO);
  int64_t total = options.steps;
  auto start = std::chrono::steady_clock::now();
  int64_t first = -1;
  auto onStep = [&](const rt::StepRecord &r) {
    if (quiet)
      return;
    if (first < 0)
      first = r.step;
    if (!terminal) {
      printStep(r, total);
      return;
    }
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t doneHere = r.step - first + 1;
    double eta = elapsed / doneHere * (total - r.step);
    constexpr int kWidth = 24;
    int filled = static_cast<int>(kWidth * r.step / std::max<int64_t>(1, total));
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    std::printf("\r[%s] %lld/%lld  loss %s  %.2f ms  %.1f samples/s  ETA %s  ", bar.c_str(),
                static_cast<long long>(r.step), static_cast<long long>(total),
                lossText(r.loss).c_str(), r.seconds * 1e3, r.samplesPerSecond,
                clock(eta).c_str());
    if (r.step == total)
      std::printf("\n");
    std::fflush(stdout);
  };
  if (plan.partitionedTraining()) {
    // A one-stage step in slot order (recomputation): this process holds
    // the loss and writes the checkpoint alone.
    options.shareLoss = [](double *) { return rt::Status(); };
    options.group.writesStage = true;
    options.group.agree = [](const rt::Status &s) { return s; };
  }
  rt::TrainReport report;
  rt::Status status = rt::train(plan, *device, options, &report, onStep);
  if (terminal && !quiet && !report.steps.empty() && report.steps.back().step != total)
    std::printf("\n");
  if (!status.ok())
    return fail(status);
  if (rt::Status s =
          writeOutputs(plan, options, report, reportPath, tracePath, {report.trace});
      !s.ok())
    return fail(s);
  if (!quiet) {
    if (report.firstStep > total)
      std::printf("cleave train: no step to take (at step %lld of %lld) on %s%s, memory %.2f MiB "
                  "allocated (%.2f MiB predicted)",
                  static_cast<long long>(report.firstStep - 1), static_cast<long long>(total),
                  device->name(),
                  report.checkpoints.empty() ? "" : ", the state written as a checkpoint",
                  report.allocatedBytes / 1048576.0, report.predictedBytes / 1048576.0);
    else
      std::printf("cleave train: steps %lld..%lld on %s, memory %.2f MiB allocated (%.2f MiB "
                  "predicted)",
                  static_cast<long long>(report.firstStep), static_cast<long long>(total),
                  device->name(), report.allocatedBytes / 1048576.0,
                  report.predictedBytes / 1048576.0);
    if (!report.resumedFrom.empty())
      std::printf(", resumed from %s", report.resumedFrom.c_str());
    std::printf("\n");
  }
  return 0;
}

} // namespace cleave
