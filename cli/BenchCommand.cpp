//===- BenchCommand.cpp - cleave bench ------------------------------------===//
//
// Side-by-side forward time and peak memory of a compiled plan and of LibTorch
// eager on the same model, inputs and thread count. Each engine runs in a
// fresh process of this same binary (`cleave bench-worker`), so both start
// from the same libraries and the same resident baseline; peak memory is the
// process's high-water mark (VmHWM) minus its resident size before loading.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "compiler/TorchReference.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Program.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <chrono>
#include <fstream>
#include <unistd.h>

extern char **environ;

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kBenchUsage = R"(usage: cleave bench MODEL.pt --plan PLAN_DIR --inputs IN.safetensors [options]

Measures the forward time and peak memory of PLAN_DIR (compiled from MODEL.pt)
and of LibTorch eager running MODEL.pt, on the same inputs and thread count,
each in a fresh process, and prints both and their ratios. The outputs of the
two are compared as well.

options:
  --plan DIR         the compiled plan
  --inputs FILE      the inputs (safetensors, keyed by forward argument name)
  --threads N        threads for both engines (default: all cores)
  --iterations N     timed forward calls per engine (default 10)
  --warmup N         untimed calls first (default 2)
  --json FILE        also write the measurements as JSON (docs/cli.md)
  -h, --help         show this help
)";

/// A field of /proc/self/status in KiB (VmRSS, VmHWM).
long procStatusKiB(const char *field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::stol(line.substr(std::strlen(field) + 1));
  return -1;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct EngineResult {
  std::string engine;
  double loadSeconds = 0, medianSeconds = 0, minSeconds = 0;
  double peakMiB = 0;
};

/// Runs one engine in a child process and reads back its JSON report.
bool runWorker(const std::string &self, const std::string &engine, const std::string &label,
               const std::string &extraEnv, const std::string &model,
               const std::string &plan, const std::string &inputs, int threads, int warmup,
               int iterations, const std::string &outputs, EngineResult &result) {
  llvm::SmallString<128> report;
  llvm::sys::fs::createTemporaryFile("cleave-bench", "json", report);
  std::vector<std::string> args = {self, "bench-worker", engine, model, plan, inputs,
                                   std::to_string(threads), std::to_string(warmup),
                                   std::to_string(iterations), outputs};
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(report),
                                                std::nullopt};
  // The child inherits this environment, plus `extraEnv` (NAME=VALUE) if set.
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    env.push_back(*e);
  if (!extraEnv.empty())
    env.push_back(extraEnv);
  std::vector<llvm::StringRef> envRefs(env.begin(), env.end());
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(self, argRefs, envRefs, redirects, 0, 0, &error);
  std::ifstream in(std::string(report.str()));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  llvm::sys::fs::remove(report);
  if (rc != 0 || json.is_discarded()) {
    llvm::errs() << "cleave: error: the " << label << " run failed (exit " << rc << ")"
                 << (error.empty() ? "" : ": " + error) << "\n";
    return false;
  }
  result.engine = label;
  result.loadSeconds = json["load_s"];
  result.medianSeconds = json["median_s"];
  result.minSeconds = json["min_s"];
  result.peakMiB = (json["peak_rss_kib"].get<double>() - json["baseline_rss_kib"].get<double>()) / 1024;
  return true;
}

/// Largest |a - b| over all outputs; -1 if the files do not match in names or shapes.
double maxDifference(const std::string &a, const std::string &b) {
  rt::SafetensorsIndex ia, ib;
  if (!rt::readSafetensorsIndex(a, &ia).ok() || !rt::readSafetensorsIndex(b, &ib).ok() ||
      ia.entries.size() != ib.entries.size())
    return -1;
  double worst = 0;
  for (const rt::SafetensorsEntry &ea : ia.entries) {
    const rt::SafetensorsEntry *eb = ib.find(ea.name);
    if (!eb || eb->desc != ea.desc)
      return -1;
    if (ea.desc.dtype != rt::DType::F32)
      continue;
    std::vector<float> va(ea.desc.numel()), vb(ea.desc.numel());
    if (!rt::readSafetensorsTensor(ia, ea, va.data()).ok() ||
        !rt::readSafetensorsTensor(ib, *eb, vb.data()).ok())
      return -1;
    for (size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(va[i] - vb[i])));
  }
  return worst;
}

} // namespace

int runBenchWorker(int argc, char **argv) {
  if (argc != 8) {
    llvm::errs() << "cleave: error: bench-worker is internal to 'cleave bench'\n";
    return 1;
  }
  std::string engine = argv[0], model = argv[1], plan = argv[2], inputs = argv[3];
  int threads = std::atoi(argv[4]), warmup = std::atoi(argv[5]), iterations = std::atoi(argv[6]);
  std::string outputs = argv[7];

  long baseline = procStatusKiB("VmRSS");
  auto start = std::chrono::steady_clock::now();
  std::function<bool(std::string &)> run, write;
  std::unique_ptr<TorchReference> torch;
  rt::Plan loadedPlan;
  std::unique_ptr<rt::Backend> backend;
  std::unique_ptr<rt::Executor> executor;
  std::string error;
  if (engine == "libtorch") {
    setTorchThreads(threads);
    torch = TorchReference::load(model, inputs, error);
    if (!torch) {
      llvm::errs() << "cleave: error: " << error << "\n";
      return 1;
    }
    run = [&](std::string &e) { return torch->run(e); };
    write = [&](std::string &e) { return torch->writeOutputs(outputs, e); };
  } else {
    rt::setCpuThreads(threads);
    rt::Status s = rt::loadPlan(plan, &loadedPlan);
    backend = rt::createCpuBackend();
    if (s.ok())
      s = rt::Executor::create(*loadedPlan.programForRank(0), *backend, &executor);
    rt::SafetensorsIndex index;
    if (s.ok())
      s = rt::readSafetensorsIndex(inputs, &index);
    if (s.ok())
      s = executor->setInputs(index);
    if (!s.ok()) {
      llvm::errs() << "cleave: error: " << s.message() << "\n";
      return 1;
    }
    run = [&](std::string &e) {
      rt::Status st = executor->run("forward");
      e = st.message();
      return st.ok();
    };
    write = [&](std::string &e) {
      rt::Status st = executor->writeOutputs(outputs);
      e = st.message();
      return st.ok();
    };
  }
  double loadSeconds = secondsSince(start);
  std::vector<double> seconds;
  for (int i = 0; i < warmup + iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!run(error)) {
      llvm::errs() << "cleave: error: " << engine << " forward failed: " << error << "\n";
      return 1;
    }
    if (i >= warmup)
      seconds.push_back(secondsSince(t0));
  }
  long peak = procStatusKiB("VmHWM");
  if (!write(error)) {
    llvm::errs() << "cleave: error: " << error << "\n";
    return 1;
  }
  std::sort(seconds.begin(), seconds.end());
  nlohmann::json report = {{"load_s", loadSeconds},
                           {"median_s", seconds[seconds.size() / 2]},
                           {"min_s", seconds.front()},
                           {"baseline_rss_kib", baseline},
                           {"peak_rss_kib", peak}};
  llvm::outs() << report.dump() << "\n";
  return 0;
}

int runBench(int argc, char **argv, const char *argv0) {
  std::string model, plan, inputs, jsonPath;
  int threads = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), iterations = 10, warmup = 2;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kBenchUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--plan", &value)) {
      if (!value)
        return usageError("--plan needs a directory", kBenchUsage);
      plan = value;
    } else if (optionValue(argc, argv, i, "--inputs", &value)) {
      if (!value)
        return usageError("--inputs needs a file", kBenchUsage);
      inputs = value;
    } else if (optionValue(argc, argv, i, "--threads", &value)) {
      if (!parseCount(value, threads, 1))
        return usageError("--threads needs a positive integer", kBenchUsage);
    } else if (optionValue(argc, argv, i, "--iterations", &value)) {
      if (!parseCount(value, iterations, 1))
        return usageError("--iterations needs a positive integer", kBenchUsage);
    } else if (optionValue(argc, argv, i, "--warmup", &value)) {
      if (!parseCount(value, warmup, 0))
        return usageError("--warmup needs a non-negative integer", kBenchUsage);
    } else if (optionValue(argc, argv, i, "--json", &value)) {
      if (!value)
        return usageError("--json needs a file", kBenchUsage);
      jsonPath = value;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kBenchUsage);
    } else if (model.empty()) {
      model = arg;
    } else {
      return usageError("more than one model given", kBenchUsage);
    }
  }
  if (model.empty() || plan.empty() || inputs.empty())
    return usageError("bench needs MODEL.pt, --plan and --inputs", kBenchUsage);

  std::string self = llvm::sys::fs::getMainExecutable(argv0, (void *)&runBench);
  llvm::SmallString<128> torchOut, cleaveOut;
  llvm::sys::fs::createTemporaryFile("cleave-bench-libtorch", "safetensors", torchOut);
  llvm::sys::fs::createTemporaryFile("cleave-bench-cleave", "safetensors", cleaveOut);
  // LibTorch runs twice: as installed, and with idle OpenMP threads sleeping
  // instead of spinning (OMP_WAIT_POLICY=passive), which keeps them from
  // competing with OpenBLAS's own threads; the ratios use its better run.
  EngineResult torchDefault, torchPassive, cleave;
  bool ok = runWorker(self, "libtorch", "libtorch", "", model, plan, inputs, threads, warmup,
                      iterations, std::string(torchOut.str()), torchDefault) &&
            runWorker(self, "libtorch", "libtorch*", "OMP_WAIT_POLICY=passive", model, plan,
                      inputs, threads, warmup, iterations, std::string(torchOut.str()),
                      torchPassive) &&
            runWorker(self, "cleave", "cleave", "", model, plan, inputs, threads, warmup,
                      iterations, std::string(cleaveOut.str()), cleave);
  double difference = ok ? maxDifference(std::string(torchOut.str()), std::string(cleaveOut.str())) : -1;
  llvm::sys::fs::remove(torchOut);
  llvm::sys::fs::remove(cleaveOut);
  if (!ok)
    return 1;

  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  llvm::outs() << llvm::formatv("model {0}, plan {1}\n{2} threads, {3} timed forward calls after "
                                "{4} warm-up, host {5} ({6} cores)\n\n",
                                model, plan, threads, iterations, warmup, host,
                                sysconf(_SC_NPROCESSORS_ONLN));
  llvm::outs() << "engine     load s   median ms   min ms   peak memory MiB\n";
  for (const EngineResult *r : {&torchDefault, &torchPassive, &cleave})
    llvm::outs() << llvm::formatv("{0,-9} {1,7:f2} {2,11:f2} {3,8:f2} {4,17:f1}\n", r->engine,
                                  r->loadSeconds, r->medianSeconds * 1e3, r->minSeconds * 1e3,
                                  r->peakMiB);
  double torchSeconds = std::min(torchDefault.medianSeconds, torchPassive.medianSeconds);
  double torchPeak = std::min(torchDefault.peakMiB, torchPassive.peakMiB);
  llvm::outs() << "(libtorch* = libtorch with OMP_WAIT_POLICY=passive)\n";
  llvm::outs() << llvm::formatv("\nspeed (best libtorch median / cleave median): {0:f2}x\n",
                                torchSeconds / cleave.medianSeconds);
  llvm::outs() << llvm::formatv("peak memory (cleave / lowest libtorch):       {0:f2}x\n",
                                cleave.peakMiB / torchPeak);
  if (difference < 0)
    llvm::outs() << "outputs: the two engines' outputs differ in names, shapes or dtypes\n";
  else
    llvm::outs() << llvm::formatv("outputs: max |cleave - libtorch| = {0:e2}\n", difference);
  if (!jsonPath.empty()) {
    nlohmann::json engines = nlohmann::json::array();
    for (const EngineResult *r : {&torchDefault, &torchPassive, &cleave})
      engines.push_back({{"engine", r->engine},
                         {"load_s", r->loadSeconds},
                         {"median_s", r->medianSeconds},
                         {"min_s", r->minSeconds},
                         {"peak_mib", r->peakMiB}});
    nlohmann::json report = {
        {"model", model},
        {"plan", plan},
        {"threads", threads},
        {"iterations", iterations},
        {"warmup", warmup},
        {"engines", engines},
        {"speedup", torchSeconds / cleave.medianSeconds},
        {"memory_ratio", cleave.peakMiB / torchPeak},
        {"max_difference", difference < 0 ? nlohmann::json(nullptr) : nlohmann::json(difference)}};
    if (!writeAtomically(jsonPath, [&](llvm::raw_ostream &os) { os << report.dump(1) << "\n"; }))
      return 1;
  }
  return difference < 0 ? 1 : 0;
}

} // namespace cleave
