//===- JobCommand.cpp - cleave plan --job, cleave compile --job -----------===//
//
// Multi-model jobs (compiler/Job.h): the arguments, then the driver's plan
// and its print-out.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/PlannerFlags.h"
#include "compiler/Job.h"
#include "cost/Format.h"

#include "llvm/Support/FormatVariadic.h"

namespace cleave {
namespace {

using cost::humanSeconds;

constexpr const char *kJobUsage = R"(usage: cleave plan --job JOB.json --cluster SPEC.json [options]
       cleave compile --job JOB.json --cluster SPEC.json -o JOB_DIR [options]

A multi-model job (docs/planner.md, "Multi-model jobs"): the models of
JOB.json (format "cleave-job") trained at once on the cluster's devices.
Each model is planned for one device (spilled to host memory where it does
not fit) and for all of them (the baseline: the models one after another);
the joint schedule runs slices of the models' steps on the devices in rounds,
longest remaining time first. `plan` prints it; `compile` also writes the job
plan directory (job.json and models/<name>/) that
`cleave train --job JOB_DIR --out RUN_DIR --local N` runs.

options:
  --cluster SPEC.json      the cluster spec (required)
  --devices N              devices to use (default: the spec's)
  --mem-per-device SIZE    memory budget per device (default: the spec's)
  --spill auto|none|all    spilling (default auto: where a model does not fit)
  -o JOB_DIR               compile: the job plan directory
  --json                   plan: print job.json instead of text
)";

struct JobOptions {
  JobRequest request;
  bool json = false;
};

int parse(int argc, char **argv, bool compile, JobOptions &o) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kJobUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--job", &value)) {
      if (!value || !*value)
        return usageError("--job needs a job file", kJobUsage);
      o.request.job = value;
    } else if (optionValue(argc, argv, i, "--cluster", &value)) {
      if (!value || !*value)
        return usageError("--cluster needs a spec file", kJobUsage);
      o.request.cluster = value;
    } else if (optionValue(argc, argv, i, "--devices", &value)) {
      if (!parseCount(value, o.request.devices, 1, 1 << 20))
        return usageError("--devices needs a positive whole number", kJobUsage);
    } else if (optionValue(argc, argv, i, "--mem-per-device", &value)) {
      o.request.memory = value ? parseBytes(value) : std::nullopt;
      if (!o.request.memory)
        return usageError("--mem-per-device needs a size such as 80GiB, 40GB or a byte count",
                          kJobUsage);
    } else if (optionValue(argc, argv, i, "--spill", &value)) {
      std::string s = value ? value : "";
      if (s == "auto")
        o.request.spill = planner::SpillMode::Auto;
      else if (s == "none")
        o.request.spill = planner::SpillMode::None;
      else if (s == "all")
        o.request.spill = planner::SpillMode::All;
      else
        return usageError("--spill must be auto, none or all", kJobUsage);
    } else if (compile && optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kJobUsage);
      o.request.output = value;
    } else if (!compile && arg == "--json") {
      o.json = true;
    } else {
      return usageError("unexpected argument '" + arg + "'", kJobUsage);
    }
  }
  if (o.request.job.empty())
    return usageError("no job file given (--job JOB.json)", kJobUsage);
  if (o.request.cluster.empty())
    return usageError("a job needs a cluster spec (--cluster SPEC.json)", kJobUsage);
  if (compile && o.request.output.empty())
    return usageError("no job plan directory given (-o JOB_DIR)", kJobUsage);
  while (o.request.output.size() > 1 && o.request.output.back() == '/')
    o.request.output.pop_back();
  return -1;
}

void printJob(const JobPlan &plan) {
  auto &os = llvm::outs();
  os << llvm::formatv("job {0}: {1} models on {2} devices\n\n", plan.job.path,
                      plan.job.models.size(), plan.devices);
  os << llvm::formatv("{0,-20} {1,6} {2,12} {3,-46} {4,12}\n", "model", "steps", "step (1 dev)",
                      "plan on one device", "step (all)");
  for (size_t m = 0; m < plan.models.size(); ++m) {
    const JobModelPlan &p = plan.models[m];
    os << llvm::formatv("{0,-20} {1,6} {2,12} {3,-46} {4,12}\n", p.name,
                        plan.job.models[m].steps, humanSeconds(p.oneDevice.stepSeconds),
                        p.oneDevice.label(), humanSeconds(p.allDevices.stepSeconds));
  }
  os << "\njoint schedule (longest remaining time first), rounds of slices [first..last step]:\n";
  for (size_t r = 0; r < plan.schedule.rounds.size(); ++r) {
    std::string slices;
    for (const planner::JobSlice &s : plan.schedule.rounds[r])
      slices += llvm::formatv("  d{0}: {1} [{2}..{3}]", s.device, plan.job.models[s.model].name,
                              s.firstStep, s.lastStep)
                    .str();
    os << llvm::formatv("  round {0,-3} {1,10}{2}\n", r, humanSeconds(plan.schedule.roundSeconds[r]),
                        slices);
  }
  os << llvm::formatv(
      "\npredicted makespan {0}; one model per device, whole: {1}; one after another on all "
      "{2} devices: {3} ({4:f2}x the joint schedule)\n",
      humanSeconds(plan.schedule.makespanSeconds), humanSeconds(plan.onePerDeviceSeconds),
      plan.devices, humanSeconds(plan.sequentialSeconds),
      plan.schedule.makespanSeconds > 0 ? plan.sequentialSeconds / plan.schedule.makespanSeconds
                                        : 0.0);
}

int run(int argc, char **argv, bool compile) {
  JobOptions o;
  if (int status = parse(argc, argv, compile, o); status >= 0)
    return status;
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  if (!compile)
    o.request.progress = [](const std::string &) {};
  else
    o.request.progress = [](const std::string &line) { llvm::errs() << "cleave: " << line << "\n"; };
  JobPlan plan;
  DriverStatus s = compile ? compileJob(context, o.request, plan) : planJob(context, o.request, plan);
  if (!s.ok()) {
    if (s.showUsage())
      llvm::errs() << "\n" << kJobUsage;
    return s.exitCode();
  }
  if (o.json) {
    llvm::outs() << plan.json();
    return 0;
  }
  printJob(plan);
  if (compile)
    llvm::outs() << llvm::formatv("cleave: wrote {0}: {1} models' training plans and the joint "
                                  "schedule ({2} rounds)\n",
                                  o.request.output, plan.models.size(),
                                  plan.schedule.rounds.size());
  return 0;
}

} // namespace

bool isJobCommand(int argc, char **argv) {
  for (int i = 0; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--job" || llvm::StringRef(argv[i]).starts_with("--job="))
      return true;
  return false;
}

int runJobPlan(int argc, char **argv) { return run(argc, argv, /*compile=*/false); }
int runJobCompile(int argc, char **argv) { return run(argc, argv, /*compile=*/true); }

} // namespace cleave
