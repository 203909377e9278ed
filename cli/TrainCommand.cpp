//===- TrainCommand.cpp - cleave train ------------------------------------===//
//
// Parses the options, prints progress; the run itself is the runtime's
// Trainer (runtime/train/Trainer.h).
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "runtime/AtomicFile.h"
#include "runtime/DeviceBackends.h"
#include "runtime/Plan.h"
#include "runtime/train/Trainer.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kTrainUsage =
    R"(usage: cleave train PLAN_DIR --data DATA.safetensors --steps N [options]

Trains a plan compiled with 'cleave compile --mode train' on one device. DATA
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
                         DIR/ckpt-<step>
  --shuffle SEED         take each epoch's samples in an order drawn from SEED
  --backend B            cpu, cuda or auto (default cpu)
  --threads N            CPU threads for kernels (default: OMP_NUM_THREADS,
                         else one per core)
  --report FILE          a JSON report: per-step losses and times, memory
                         allocated next to the plan's prediction
  -q, --quiet            no per-step lines
  -h, --help             show this help

Outputs (--log, --save-weights, --report) appear complete when training
succeeds and not at all when it fails; checkpoints written before a failure
stay, each complete.

exit status: 0 success, 1 bad arguments, plan, data or checkpoint, or a failed
step.
)";

int fail(const rt::Status &status) {
  llvm::errs() << "cleave: error: " << status.message() << "\n";
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
  if (s >= 3600)
    return llvm::formatv("{0}:{1,0+2}:{2,0+2}", s / 3600, (s / 60) % 60, s % 60).str();
  return llvm::formatv("{0}:{1,0+2}", s / 60, s % 60).str();
}

} // namespace

int runTrain(int argc, char **argv) {
  std::string planDir;
  rt::TrainOptions options;
  std::string reportPath;
  int threads = 0;
  bool quiet = false, haveSteps = false;
  rt::BackendChoice backend = rt::BackendChoice::Cpu;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    auto file = [&](const char *option, std::string &out) {
      if (!value)
        return usageError(std::string(option) + " needs a path", kTrainUsage);
      out = value;
      return -1;
    };
    int status = -1;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kTrainUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--data", &value)) {
      status = file("--data", options.dataPath);
    } else if (optionValue(argc, argv, i, "--steps", &value)) {
      if (!parseCount(value, options.steps, 1, INT64_MAX))
        return usageError("--steps needs a positive number of steps", kTrainUsage);
      haveSteps = true;
    } else if (optionValue(argc, argv, i, "--log", &value)) {
      status = file("--log", options.logPath);
    } else if (optionValue(argc, argv, i, "--save-weights", &value)) {
      status = file("--save-weights", options.saveWeightsPath);
    } else if (optionValue(argc, argv, i, "--checkpoint", &value)) {
      status = file("--checkpoint", options.checkpointDir);
    } else if (optionValue(argc, argv, i, "--checkpoint-every", &value)) {
      if (!parseCount(value, options.checkpointEvery, 1, INT64_MAX))
        return usageError("--checkpoint-every needs a positive number of steps", kTrainUsage);
    } else if (optionValue(argc, argv, i, "--resume", &value)) {
      status = file("--resume", options.resumePath);
    } else if (optionValue(argc, argv, i, "--shuffle", &value)) {
      uint64_t seed = 0;
      if (!value || llvm::StringRef(value).getAsInteger(10, seed))
        return usageError("--shuffle needs a non-negative integer seed", kTrainUsage);
      options.shuffleSeed = seed;
    } else if (optionValue(argc, argv, i, "--report", &value)) {
      status = file("--report", reportPath);
    } else if (optionValue(argc, argv, i, "--backend", &value)) {
      if (!value)
        return usageError("--backend needs cpu, cuda or auto", kTrainUsage);
      if (rt::Status s = rt::parseBackendChoice(value, &backend); !s.ok())
        return usageError(s.message(), kTrainUsage);
    } else if (optionValue(argc, argv, i, "--threads", &value)) {
      if (!parseCount(value, threads, 1))
        return usageError("--threads needs a positive integer", kTrainUsage);
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
  }
  if (planDir.empty())
    return usageError("no plan directory given", kTrainUsage);
  if (options.dataPath.empty())
    return usageError("no training data given (--data DATA.safetensors)", kTrainUsage);
  if (!haveSteps)
    return usageError("no step count given (--steps N)", kTrainUsage);
  if (options.checkpointEvery > 0 && options.checkpointDir.empty())
    return usageError("--checkpoint-every needs --checkpoint DIR", kTrainUsage);

  rt::Plan plan;
  if (rt::Status s = rt::loadPlan(planDir, &plan); !s.ok())
    return fail(s.prepend(planDir));
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
      llvm::outs() << llvm::formatv("step {0}/{1}  loss {2}  {3:f2} ms  {4:f1} samples/s\n",
                                    r.step, total, lossText(r.loss), r.seconds * 1e3, r.samplesPerSecond);
      llvm::outs().flush();
      return;
    }
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t doneHere = r.step - first + 1;
    double eta = elapsed / doneHere * (total - r.step);
    constexpr int kWidth = 24;
    int filled = static_cast<int>(kWidth * r.step / std::max<int64_t>(1, total));
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    llvm::outs() << llvm::formatv("\r[{0}] {1}/{2}  loss {3}  {4:f2} ms  {5:f1} samples/s  "
                                  "ETA {6}  ",
                                  bar, r.step, total, lossText(r.loss), r.seconds * 1e3,
                                  r.samplesPerSecond, clock(eta));
    if (r.step == total)
      llvm::outs() << "\n";
    llvm::outs().flush();
  };
  rt::TrainReport report;
  rt::Status status = rt::train(plan, *device, options, &report, onStep);
  if (terminal && !quiet && !report.steps.empty() && report.steps.back().step != total)
    llvm::outs() << "\n";
  if (!status.ok())
    return fail(status);
  if (!reportPath.empty())
    if (rt::Status s = rt::writeFileAtomically(reportPath,
                                               rt::trainReportJson(plan, options, report));
        !s.ok())
      return fail(s);
  if (!quiet) {
    llvm::outs() << llvm::formatv("cleave train: steps {0}..{1} on {2}, memory {3:f2} MiB "
                                  "allocated ({4:f2} MiB predicted)",
                                  report.firstStep, total, device->name(),
                                  report.allocatedBytes / 1048576.0,
                                  report.predictedBytes / 1048576.0);
    if (!report.resumedFrom.empty())
      llvm::outs() << ", resumed from " << report.resumedFrom;
    llvm::outs() << "\n";
  }
  return 0;
}

} // namespace cleave
