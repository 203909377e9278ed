//===- RunCommand.cpp - cleave run ----------------------------------------===//
//
// Loads a plan, checks the input file against the plan's inputs, runs the
// forward phase and writes the outputs. A single-device plan runs in this
// process; a multi-device plan runs as one rank per device under mpirun
// (runtime/comm/RankRunner), and `--local N` starts those N ranks here.
// Uses only the runtime library.
//
//===----------------------------------------------------------------------===//

#include "cli/Args.h"
#include "cost/ClusterSpec.h"
#include "runtime/AtomicFile.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Roofline.h"
#include "runtime/Safetensors.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/DeviceBackends.h"
#include "runtime/comm/RankRunner.h"


#include <csignal>
#include <cstdio>
#include <optional>
#include <cstdlib>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kRunUsage =
    R"(usage: cleave run PLAN_DIR --inputs IN.safetensors --outputs OUT.safetensors [options]
       mpirun -np N cleave run PLAN_DIR ...     (a plan for N devices)
       cleave run --local N PLAN_DIR ...        (the same, N ranks started here)

Runs the forward phase of a plan on CPUs or NVIDIA GPUs (--backend). IN holds
one tensor per plan input, keyed by input name, with the plan's shape and dtype
(the global batch for a multi-device plan); OUT gets output_0, output_1, ... and appears
complete or not at all. A multi-device plan runs one rank per device: each
loads only its program and weight shard, splits its microbatches off the
inputs, and follows its stage's schedule; rank 0 writes the outputs.

options:
  --backend B       cpu, cuda or auto (default): where kernels run. auto uses a
                    GPU when the CUDA backend loads and one is visible, else the
                    CPU. Each rank on a machine takes its own GPU (by local
                    rank); GPU ranks communicate through NCCL, CPU ranks
                    through MPI.
  --tf32            cuda: let f32 GEMMs and convolutions use TF32 tensor cores
  --gpu-comm C      cuda, several ranks: nccl (default; a GPU per rank) or mpi
                    (MPI with every transfer staged through host memory; ranks
                    may share a GPU)
  --inputs FILE     the input tensors (safetensors)
  --outputs FILE    where to write the outputs (safetensors)
  --local N         start N ranks on this machine through mpirun (N must be
                    the plan's device count)
  --threads N       CPU threads for kernels per rank (default: OMP_NUM_THREADS,
                    else the cores divided among the ranks on this machine)
  --repeat N        run the plan N times on the same inputs (outputs are from the
                    last run; times are the mean)
  --report-json FILE
                    multi-device: write the same as JSON to FILE (plan mesh,
                    predicted step by component, each rank's measured step by
                    component and memory; docs/cli.md)
  --report          multi-device: print, per rank, measured time by category and
                    memory next to the plan's prediction
  --timing          print load and run times and peak memory to stderr
  --profile         print the time per kernel of the last run to stderr
  --roofline SPEC.json
                    one device: print how far the run is from the device's
                    peaks (the spec's peak FLOP/s and memory bandwidth; a spec
                    from `cleave profile` on this machine) to stderr: achieved
                    GFLOP/s and GB/s of the whole run, and per op class its
                    share of the time and its efficiency against the roof
                    that bounds it, from the plan's FLOP and byte counts and
                    each instruction's median time over the runs after the
                    first (docs/cli.md)
  --roofline-json FILE
                    with --roofline: write the same as JSON to FILE
  -h, --help        show this help

exit status: 0 success, 1 bad arguments, invalid plan or inputs, or a failed run
(any rank); under --local, mpirun's status.
)";

int fail(const rt::Status &status) {
  std::fprintf(stderr, "cleave: error: %s\n", status.message().c_str());
  return 1;
}

/// `--roofline`: the spec the peaks come from, and where the JSON goes.
struct RooflineRequest {
  std::string specPath, jsonPath;
  cost::ClusterSpec spec;
  bool on() const { return !specPath.empty(); }
};

/// The roofline of the phases a step ran, from each instruction's seconds in
/// every run (`runs[k]` for `phases[k]`): the runs after the first, which
/// warms caches and the kernels' thread pool, unless there is only one.
rt::Status reportRoofline(const RooflineRequest &request, const rt::ProgramSpec &program,
                          const std::vector<const rt::Phase *> &phases,
                          const std::vector<std::vector<std::vector<double>>> &runs) {
  rt::RooflineReport report;
  std::vector<rt::TimedPhase> timed;
  for (size_t k = 0; k < phases.size(); ++k) {
    std::vector<std::vector<double>> steady(runs[k].begin() + (runs[k].size() > 1 ? 1 : 0),
                                            runs[k].end());
    report.runs = static_cast<int>(steady.size());
    rt::TimedPhase &t = timed.emplace_back();
    t.phase = phases[k];
    CLEAVE_RETURN_IF_ERROR(rt::medianSeconds(steady, &t.seconds));
  }
  const cost::DeviceSpec &device = request.spec.device;
  rt::RooflinePeaks peaks;
  peaks.flopsPerSecond = device.peakFlopsOf(rt::computeDType(program, phases));
  peaks.bytesPerSecond = device.memoryBandwidth;
  peaks.source = request.spec.name + " (" + request.specPath + ")";
  CLEAVE_RETURN_IF_ERROR(rt::buildRoofline(timed, peaks, &report).prepend(request.specPath));
  std::fputs(rt::formatRooflineTable(report).c_str(), stderr);
  if (!request.jsonPath.empty())
    CLEAVE_RETURN_IF_ERROR(
        rt::writeFileAtomically(request.jsonPath, rt::formatRooflineJson(report)));
  return {};
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}


double ms(double seconds) { return seconds * 1e3; }
double mib(int64_t bytes) { return bytes / 1048576.0; }

void printReport(const rt::Plan &plan, int repeat, const std::vector<rt::RankReport> &reports) {
  const rt::PredictedCost &p = plan.predicted;
  std::string steps = repeat > 1 ? "mean of " + std::to_string(repeat - 1) +
                                       " step(s) after a first (warm-up) one"
                                 : std::string("one step, warm-up included "
                                               "(--repeat N measures steady steps)");
  std::printf("cleave run: %zu ranks (pp %lld x tp %lld x dp %lld), %lld microbatches of %lld, "
              "schedule %s; %s\n",
              reports.size(), static_cast<long long>(plan.pp), static_cast<long long>(plan.tp),
              static_cast<long long>(plan.dp), static_cast<long long>(plan.microbatches),
              static_cast<long long>(plan.microbatchSize), plan.schedule.c_str(), steps.c_str());
  auto predicted = [](const std::optional<double> &v) {
    return v ? strprintf("%8.2f", ms(*v)) : std::string("       -");
  };
  std::printf("                   measured ms                         | predicted ms"
              "                        | memory MiB\n");
  std::printf("rank stage tp dp |     step  compute     comm wait+bub |     step  compute"
              "     comm   bubble |  plan  comm  peak RSS\n");
  for (const rt::RankReport &r : reports)
    std::printf("%4d %5d %2d %2d | %8.2f %8.2f %8.2f %8.2f | %s %s %s %s | %5.1f %5.1f %9.1f\n",
                static_cast<int>(r.rank), static_cast<int>(r.stage), static_cast<int>(r.tp),
                static_cast<int>(r.dp), ms(r.measured.step), ms(r.measured.compute),
                ms(r.measured.communication), ms(r.measured.waiting),
                predicted(p.stepSeconds).c_str(), predicted(p.computeSeconds).c_str(),
                predicted(p.communicationSeconds).c_str(), predicted(p.bubbleSeconds).c_str(),
                mib(r.planBytes), mib(r.commBytes), mib(r.peakResidentBytes));
  std::printf("(plan: arena + weights, allocated as the plan predicts; comm: send staging "
              "and layout buffers; peak RSS: the whole process, measured)\n");
}

/// Where kernels run: `--backend` and its options.
struct Devices {
  rt::BackendChoice choice = rt::BackendChoice::Auto;
  rt::BackendOptions options;
};

/// The backend `devices` asks for; with `say`, one line on stderr naming it
/// (and why auto did not take a GPU).
rt::Status makeBackend(const Devices &devices, int rank, std::unique_ptr<rt::Backend> *out,
                       bool say) {
  std::string why;
  CLEAVE_RETURN_IF_ERROR(
      rt::createBackend(devices.choice, rank, localRanks(), devices.options, out, &why));
  if (say && rank == 0)
    std::fprintf(stderr, "cleave: backend %s%s\n", (*out)->name(),
                 why.empty() ? "" : (" (auto: " + why + ")").c_str());
  return {};
}

/// One rank of a multi-device run. Errors every rank sees alike (the plan,
/// the inputs, the world size) are printed once by rank 0; a rank that
/// fails mid-run prints its own and ends the job.
int runRank(const std::string &planDir, const std::string &inputsPath,
            const std::string &outputsPath, const Devices &devices, int threads, int repeat,
            bool report, bool timing, const std::string &reportJson) {
  auto start = std::chrono::steady_clock::now();
  std::unique_ptr<rt::Communicator> world;
  if (rt::Status s = rt::createMpiWorld(&world); !s.ok())
    return fail(s);
  const bool printer = world->rank() == 0;
  auto agreedFailure = [&](rt::Status s) {
    if (printer)
      fail(s);
    return 1;
  };
  if (threads == 0 && !std::getenv("OMP_NUM_THREADS")) {
    // Share the cores among the ranks on this machine.
    const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    int ranksHere = local ? std::max(1, std::atoi(local)) : 1;
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranksHere);
  }
  rt::setCpuThreads(threads);
  std::unique_ptr<rt::Backend> compute;
  // Ranks choose alike only if the machines do: agree before going on.
  rt::Status created = makeBackend(devices, localRank(), &compute, timing);
  if (rt::Status s = rt::agreeAcrossRanks(*world, created); !s.ok())
    return agreedFailure(s);
  std::unique_ptr<rt::RankRunner> runner;
  if (rt::Status s = rt::RankRunner::create(planDir, *world, *compute, &runner,
                                                    devices.options.gpuComm); !s.ok())
    return agreedFailure(s);
  if (rt::Status s = runner->loadInputs(inputsPath); !s.ok())
    return agreedFailure(s);
  double loadSeconds = secondsSince(start);
  for (int r = 0; r < repeat; ++r)
    if (rt::Status s = runner->step(); !s.ok()) {
      fail(s);
      std::fflush(stderr);
      world->abortJob(1); // the others may wait on this rank forever
    }
  if (rt::Status s = runner->writeOutputs(outputsPath); !s.ok())
    return agreedFailure(s);
  std::vector<rt::RankReport> reports;
  if (report || timing || !reportJson.empty())
    if (rt::Status s = runner->gatherReports(&reports); !s.ok())
      return fail(s);
  if (printer && report)
    printReport(runner->plan(), repeat, reports);
  if (printer && !reportJson.empty())
    if (rt::Status s = rt::writeFileAtomically(
            reportJson, rt::formatRunReport(runner->plan(), planDir, repeat, reports));
        !s.ok())
      return fail(s);
  if (printer && timing) {
    double slowest = 0;
    for (const rt::RankReport &r : reports)
      slowest = std::max(slowest, r.measured.step);
    std::fprintf(stderr,
                 "cleave: load %.3f s, step (slowest rank, mean of %d) %.4f s, %d ranks, %d "
                 "threads each\n",
                 loadSeconds, repeat, slowest, world->size(), rt::cpuThreads());
    printTiming("run", secondsSince(start));
  }
  return 0;
}

} // namespace

int runRun(int argc, char **argv) {
  std::string planDir, inputsPath, outputsPath;
  int threads = 0, repeat = 1, local = 0;
  bool timing = false, profile = false, report = false;
  std::string reportJson;
  RooflineRequest roofline;
  Devices where;
  std::vector<std::string> rankArgs; // what --local passes on to every rank
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    int before = i;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kRunUsage, stdout);
      return 0;
    } else if (optionValue(argc, argv, i, "--local", &value)) {
      if (!parseCount(value, local, 1, 4096))
        return usageError("--local needs a positive number of ranks", kRunUsage);
      continue;
    } else if (arg == "--report") {
      report = true;
    } else if (optionValue(argc, argv, i, "--report-json", &value)) {
      if (!value || !*value)
        return usageError("--report-json needs a file", kRunUsage);
      reportJson = value;
    } else if (optionValue(argc, argv, i, "--backend", &value)) {
      if (!value)
        return usageError("--backend needs cpu, cuda or auto", kRunUsage);
      if (rt::Status s = rt::parseBackendChoice(value, &where.choice); !s.ok())
        return usageError(s.message(), kRunUsage);
    } else if (arg == "--tf32") {
      where.options.tf32 = true;
    } else if (optionValue(argc, argv, i, "--gpu-comm", &value)) {
      if (!value)
        return usageError("--gpu-comm needs nccl or mpi", kRunUsage);
      if (rt::Status s = rt::parseGpuComm(value, &where.options.gpuComm); !s.ok())
        return usageError(s.message(), kRunUsage);
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
    } else if (optionValue(argc, argv, i, "--roofline", &value)) {
      if (!value || !*value)
        return usageError("--roofline needs a cluster spec (SPEC.json)", kRunUsage);
      roofline.specPath = value;
    } else if (optionValue(argc, argv, i, "--roofline-json", &value)) {
      if (!value || !*value)
        return usageError("--roofline-json needs a file", kRunUsage);
      roofline.jsonPath = value;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kRunUsage);
    } else if (planDir.empty()) {
      planDir = arg;
    } else {
      return usageError("more than one plan given ('" + planDir + "', '" + arg + "')", kRunUsage);
    }
    for (int k = before; k <= i; ++k)
      rankArgs.push_back(argv[k]);
  }
  if (planDir.empty())
    return usageError("no plan directory given", kRunUsage);
  if (inputsPath.empty())
    return usageError("no input file given (--inputs IN.safetensors)", kRunUsage);
  if (outputsPath.empty())
    return usageError("no output file given (--outputs OUT.safetensors)", kRunUsage);
  if (!roofline.jsonPath.empty() && !roofline.on())
    return usageError("--roofline-json needs --roofline SPEC.json", kRunUsage);
  const char *rooflineOneDevice =
      "--roofline is for single-device plans (compiled without --cluster); a plan for a "
      "cluster reports by rank with --report";
  if (roofline.on() && local > 0)
    return usageError(rooflineOneDevice, kRunUsage);

  if (local > 0)
    return launchPlanRanks(local, planDir, "run", rankArgs, kRunUsage);
  int64_t devices = 1;
  bool hasWeights = true;
  std::string modelSource;
  if (rt::Status s = rt::readPlanDeviceCount(planDir, &devices, &hasWeights, &modelSource); !s.ok())
    return fail(s.prepend(planDir));
  if (!hasWeights)
    return fail(rt::planWithoutWeights(planDir, modelSource));
  if (devices > 1 || launchedAsRanks()) {
    if (profile)
      return usageError("--profile is for single-device plans; use --report", kRunUsage);
    if (roofline.on())
      return usageError(rooflineOneDevice, kRunUsage);
    return runRank(planDir, inputsPath, outputsPath, where, threads, repeat, report, timing,
                   reportJson);
  }

  auto start = std::chrono::steady_clock::now();
  rt::Plan plan;
  if (rt::Status s = rt::loadPlan(planDir, &plan); !s.ok())
    return fail(s.prepend(planDir));
  // A plan compiled for a cluster of one device still splits its batch
  // into microbatches: the rank runner follows its schedule.
  if (plan.hasBatch) {
    if (roofline.on())
      return usageError(rooflineOneDevice, kRunUsage);
    return runRank(planDir, inputsPath, outputsPath, where, threads, repeat, report, timing,
                   reportJson);
  }
  if (report || !reportJson.empty())
    return usageError("--report and --report-json are for compiled-for-a-cluster plans (use "
                      "--timing or --profile)",
                      kRunUsage);
  // A bad spec fails before anything runs.
  if (roofline.on())
    if (rt::Status s = cost::loadClusterSpec(roofline.specPath, roofline.spec); !s.ok())
      return fail(s.prepend("--roofline"));
  rt::SafetensorsIndex inputs;
  if (rt::Status s = rt::readSafetensorsIndex(inputsPath, &inputs); !s.ok())
    return fail(s);

  rt::setCpuThreads(threads);
  std::unique_ptr<rt::Backend> backend;
  if (rt::Status s = makeBackend(where, 0, &backend, timing || profile); !s.ok())
    return fail(s);
  std::unique_ptr<rt::Executor> executor;
  if (rt::Status s = rt::Executor::create(*plan.programForRank(0), *backend, &executor); !s.ok())
    return fail(s.prepend(planDir));
  if (rt::Status s = executor->setInputs(inputs); !s.ok())
    return fail(s);
  double loadSeconds = secondsSince(start);

  // A training plan's step is every phase in order (a plan compiled with
  // --optimizer none outputs the loss and the gradients); an inference
  // plan's its forward.
  const rt::ProgramSpec &program = executor->program();
  std::vector<size_t> step;
  for (size_t p = 0; p < program.phases.size(); ++p)
    if (plan.training || static_cast<int64_t>(p) == program.phaseIndex("forward"))
      step.push_back(p);
  if (step.empty())
    return fail(CLEAVE_ERROR(planDir, ": the program has no forward phase"));
  const bool profiling = profile || roofline.on();
  executor->setProfiling(profiling);
  std::vector<double> runSeconds;
  // Each phase's per-instruction seconds, run by run (when profiling).
  std::vector<std::vector<std::vector<double>>> phaseRuns(step.size());
  for (int r = 0; r < repeat; ++r) {
    auto runStart = std::chrono::steady_clock::now();
    for (size_t k = 0; k < step.size(); ++k) {
      if (rt::Status s = executor->runPhase(step[k]); !s.ok())
        return fail(s);
      if (profiling)
        phaseRuns[k].push_back(executor->lastRunSeconds());
    }
    runSeconds.push_back(secondsSince(runStart));
  }

  if (rt::Status s = executor->writeOutputs(outputsPath); !s.ok())
    return fail(s);

  // The forward's place in the step (a training plan has one too).
  const size_t forwardIndex = static_cast<size_t>(program.phaseIndex("forward"));
  const size_t forwardInStep = std::find(step.begin(), step.end(), forwardIndex) - step.begin();
  if (profile && forwardInStep < step.size()) {
    // Seconds per kernel of the last run's forward, most expensive first.
    std::map<std::string, std::pair<double, int>> byKernel;
    const rt::Phase &forward = program.phases[forwardIndex];
    const std::vector<double> &seconds = phaseRuns[forwardInStep].back();
    double total = 0;
    for (size_t i = 0; i < forward.instructions.size(); ++i) {
      auto &entry = byKernel[forward.instructions[i].kernel];
      entry.first += seconds[i];
      entry.second += 1;
      total += seconds[i];
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(byKernel.begin(),
                                                                     byKernel.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto &a, const auto &b) { return a.second.first > b.second.first; });
    std::fprintf(stderr, "kernel                 calls   total ms   share\n");
    for (const auto &[kernel, stats] : rows)
      std::fprintf(stderr, "%-20s %7d %10.2f %6.1f%%\n", kernel.c_str(), stats.second,
                   stats.first * 1e3, 100 * stats.first / total);
  }
  if (roofline.on()) {
    std::vector<const rt::Phase *> phases;
    for (size_t p : step)
      phases.push_back(&program.phases[p]);
    if (rt::Status s = reportRoofline(roofline, program, phases, phaseRuns); !s.ok())
      return fail(s);
  }
  if (timing) {
    std::sort(runSeconds.begin(), runSeconds.end());
    std::fprintf(stderr,
                 "cleave: load %.3f s, forward median %.6f s over %zu run(s), %d threads, plan "
                 "memory %.1f MiB\n",
                 loadSeconds, runSeconds[runSeconds.size() / 2], runSeconds.size(),
                 rt::cpuThreads(), executor->allocatedBytes() / 1048576.0);
    printTiming("run", secondsSince(start));
  }
  return 0;
}

} // namespace cleave
