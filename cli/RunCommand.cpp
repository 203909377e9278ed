//===- RunCommand.cpp - cleave run ----------------------------------------===//
//
// Loads a plan, checks the input file against the plan's inputs, runs the
// forward phase and writes the outputs. Uses only the runtime library.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <map>

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kRunUsage = R"(usage: cleave run PLAN_DIR --inputs IN.safetensors --outputs OUT.safetensors [options]

Runs the forward phase of a single-device plan on the CPU. IN holds one tensor
per plan input, keyed by input name, with the plan's shape and dtype; OUT gets
output_0, output_1, ... and appears complete or not at all.

options:
  --inputs FILE     the input tensors (safetensors)
  --outputs FILE    where to write the outputs (safetensors)
  --threads N       CPU threads for kernels (default: OMP_NUM_THREADS, else all cores)
  --repeat N        run the forward phase N times (outputs are from the last run)
  --timing          print load and run times and peak memory to stderr
  --profile         print the time per kernel of the last run to stderr
  -h, --help        show this help

exit status: 0 success, 1 bad arguments, invalid plan or inputs, or a failed run.
)";

int fail(const rt::Status &status) {
  llvm::errs() << "cleave: error: " << status.message() << "\n";
  return 1;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

int runRun(int argc, char **argv) {
  std::string planDir, inputsPath, outputsPath;
  int threads = 0, repeat = 1;
  bool timing = false, profile = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kRunUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--inputs", &value)) {
      if (!value)
        return usageError("--inputs needs a file", kRunUsage);
      inputsPath = value;
    } else if (optionValue(argc, argv, i, "--outputs", &value)) {
      if (!value)
        return usageError("--outputs needs a file", kRunUsage);
      outputsPath = value;
    } else if (optionValue(argc, argv, i, "--threads", &value)) {
      if (!parseCount(value, threads, 1))
        return usageError("--threads needs a positive integer", kRunUsage);
    } else if (optionValue(argc, argv, i, "--repeat", &value)) {
      if (!parseCount(value, repeat, 1))
        return usageError("--repeat needs a positive integer", kRunUsage);
    } else if (arg == "--timing") {
      timing = true;
    } else if (arg == "--profile") {
      profile = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kRunUsage);
    } else if (planDir.empty()) {
      planDir = arg;
    } else {
      return usageError("more than one plan given ('" + planDir + "', '" + arg + "')",
                        kRunUsage);
    }
  }
  if (planDir.empty())
    return usageError("no plan directory given", kRunUsage);
  if (inputsPath.empty())
    return usageError("no input file given (--inputs IN.safetensors)", kRunUsage);
  if (outputsPath.empty())
    return usageError("no output file given (--outputs OUT.safetensors)", kRunUsage);

  auto start = std::chrono::steady_clock::now();
  rt::Plan plan;
  if (rt::Status s = rt::loadPlan(planDir, &plan); !s.ok())
    return fail(s.prepend(planDir));
  if (!plan.hasWeights)
    return fail(CLEAVE_ERROR(planDir, ": the plan has no weights (model.weights is false: ",
                             plan.modelSource, " was exported on the meta device); ",
                             "'cleave inspect' and 'cleave verify' read it, 'cleave run' cannot"));
  if (plan.devices.size() != 1)
    return fail(CLEAVE_ERROR(planDir, ": the plan has ", plan.devices.size(),
                             " devices; 'cleave run' runs single-device plans"));
  const rt::DeviceSpec &device = plan.devices.front();
  if (device.backend != "cpu")
    return fail(CLEAVE_ERROR(planDir, ": device 0 uses backend '", device.backend,
                             "'; this build runs 'cpu'"));
  rt::SafetensorsIndex inputs;
  if (rt::Status s = rt::readSafetensorsIndex(inputsPath, &inputs); !s.ok())
    return fail(s);

  rt::setCpuThreads(threads);
  std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
  std::unique_ptr<rt::Executor> executor;
  if (rt::Status s = rt::Executor::create(*plan.programForRank(0), *backend, &executor);
      !s.ok())
    return fail(s.prepend(planDir));
  if (rt::Status s = executor->setInputs(inputs); !s.ok())
    return fail(s);
  double loadSeconds = secondsSince(start);

  executor->setProfiling(profile);
  std::vector<double> runSeconds;
  for (int r = 0; r < repeat; ++r) {
    auto runStart = std::chrono::steady_clock::now();
    if (rt::Status s = executor->run("forward"); !s.ok())
      return fail(s);
    runSeconds.push_back(secondsSince(runStart));
  }

  if (rt::Status s = executor->writeOutputs(outputsPath); !s.ok())
    return fail(s);

  if (profile) {
    // Seconds per kernel, most expensive first.
    std::map<std::string, std::pair<double, int>> byKernel;
    const rt::Phase &forward = *executor->program().findPhase("forward");
    double total = 0;
    for (size_t i = 0; i < forward.instructions.size(); ++i) {
      auto &entry = byKernel[forward.instructions[i].kernel];
      entry.first += executor->lastRunSeconds()[i];
      entry.second += 1;
      total += executor->lastRunSeconds()[i];
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(byKernel.begin(),
                                                                    byKernel.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
    llvm::errs() << "kernel                 calls   total ms   share\n";
    for (const auto &[kernel, stats] : rows)
      llvm::errs() << llvm::formatv("{0,-20} {1,7} {2,10:f2} {3,6:f1}%\n", kernel, stats.second,
                                    stats.first * 1e3, 100 * stats.first / total);
  }
  if (timing) {
    std::sort(runSeconds.begin(), runSeconds.end());
    llvm::errs() << llvm::formatv(
        "cleave: load {0:f3} s, forward median {1:f4} s over {2} run(s), {3} threads, "
        "plan memory {4:f1} MiB\n",
        loadSeconds, runSeconds[runSeconds.size() / 2], runSeconds.size(), rt::cpuThreads(),
        executor->allocatedBytes() / 1048576.0);
    printTiming("run", secondsSince(start));
  }
  return 0;
}

} // namespace cleave
