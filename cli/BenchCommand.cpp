//===- BenchCommand.cpp - cleave bench ------------------------------------===//
//
// Side-by-side forward time and peak memory of a compiled plan and of LibTorch
// eager on the same model, inputs and thread count. Each engine runs in a
// fresh process of this same binary (`cleave bench-worker`), so both start
// from the same libraries and the same resident baseline; peak memory is the
// process's high-water mark (VmHWM) minus its resident size before loading.
//
// LibTorch is measured at its best: its GEMMs are OpenBLAS's, and which
// OpenBLAS kernels are fastest depends on the machine (the variables
// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE can hold them to AVX2, and without
// them OpenBLAS has been seen to pick SSE3 kernels on an AVX-512 Xeon). So
// before the LibTorch runs a few settings of the two variables are probed,
// each in a fresh process timing one GEMM (`bench-worker blas-probe`), and
// LibTorch runs under the fastest whose product agrees with the first's.
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

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <chrono>
#include <dlfcn.h>
#include <fstream>
#include <limits>
#include <optional>
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
  --baseline-blas auto|inherit
                     auto (default): before LibTorch runs, time a 1024x1024
                     f32 GEMM in LibTorch under each OpenBLAS setting (the
                     environment as inherited; OPENBLAS_CORETYPE and
                     OPENBLAS_L2_SIZE unset; OPENBLAS_CORETYPE=SkylakeX where
                     the CPU has AVX-512, =Haswell where it has AVX2), each in
                     a fresh process, and run LibTorch under the fastest
                     whose result agrees with the first's; inherit: run
                     LibTorch in the environment as it is
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

/// The OpenBLAS variables a LibTorch child runs with; unset where empty.
constexpr const char *kBlasVariables[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"};

/// One OpenBLAS setting probed for LibTorch, and what its probe measured.
struct BlasSetting {
  std::string name;                          // inherit, unset, SkylakeX, Haswell
  std::optional<std::string> values[2];      // of kBlasVariables, as the child sees them
  std::string sameAs;                        // an earlier setting with the same values
  bool ran = false, agrees = false;
  double gflops = 0;
  double difference = 0;                     // max |C - C_ref| / max |C_ref|
  std::string core;                          // OpenBLAS's kernels, as it names them
  std::string error;                         // why it did not run or was excluded
  std::vector<float> product;

  std::string describe() const {
    std::string text;
    for (int v = 0; v < 2; ++v)
      text += std::string(v ? ", " : "") + kBlasVariables[v] +
              (values[v] ? "=" + *values[v] : std::string(" unset"));
    return text;
  }
};

/// This process's environment with the OpenBLAS variables of `blas` (if
/// given) and `extra` (NAME=VALUE, if set) in place of the inherited ones.
std::vector<std::string> childEnvironment(const BlasSetting *blas, const std::string &extra) {
  auto named = [](const char *entry, llvm::StringRef name) {
    return llvm::StringRef(entry).starts_with((name + "=").str());
  };
  std::string extraName = extra.substr(0, extra.find('='));
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    if (blas && (named(*e, kBlasVariables[0]) || named(*e, kBlasVariables[1])))
      continue;
    if (!extra.empty() && named(*e, extraName))
      continue;
    env.push_back(*e);
  }
  if (blas)
    for (int v = 0; v < 2; ++v)
      if (blas->values[v])
        env.push_back(std::string(kBlasVariables[v]) + "=" + *blas->values[v]);
  if (!extra.empty())
    env.push_back(extra);
  return env;
}

/// Runs `self` with `args` in `env`, its stdout parsed as JSON into `json`
/// (stderr to `errorFile` if given, else inherited), killed after
/// `timeoutSeconds` (0: no limit). Returns the exit status (-1: could not
/// start, or killed); `error` says why it failed to start or was killed.
int runChild(const std::string &self, const std::vector<std::string> &args,
             const std::vector<std::string> &env, unsigned timeoutSeconds,
             const std::string &errorFile, nlohmann::json &json, std::string &error) {
  llvm::SmallString<128> report;
  llvm::sys::fs::createTemporaryFile("cleave-bench", "json", report);
  std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
  std::vector<llvm::StringRef> envRefs(env.begin(), env.end());
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, llvm::StringRef(report),
      errorFile.empty() ? std::nullopt : std::optional<llvm::StringRef>(errorFile)};
  int rc = llvm::sys::ExecuteAndWait(self, argRefs, envRefs, redirects, timeoutSeconds, 0,
                                     &error);
  std::ifstream in(std::string(report.str()));
  json = nlohmann::json::parse(in, nullptr, false);
  llvm::sys::fs::remove(report);
  return rc;
}

/// Runs one engine in a child process and reads back its JSON report.
bool runWorker(const std::string &self, const std::string &engine, const std::string &label,
               const std::vector<std::string> &env, const std::string &model,
               const std::string &plan, const std::string &inputs, int threads, int warmup,
               int iterations, const std::string &outputs, EngineResult &result) {
  std::vector<std::string> args = {self, "bench-worker", engine, model, plan, inputs,
                                   std::to_string(threads), std::to_string(warmup),
                                   std::to_string(iterations), outputs};
  nlohmann::json json;
  std::string error;
  int rc = runChild(self, args, env, 0, "", json, error);
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

/// The side of the probe's square GEMM: 2 GFLOP, a few tens of milliseconds
/// per product on two cores even with SSE3 kernels.
constexpr int64_t kProbeSize = 1024;
/// A probe that has not finished by then is killed and its setting excluded.
constexpr unsigned kProbeTimeoutSeconds = 60;
/// Rounds of the probe over the settings; each setting keeps its best.
constexpr int kProbeRounds = 3;

/// The settings worth probing on this CPU: the environment as inherited,
/// OpenBLAS's own detection, and the widest kernels the CPU runs.
std::vector<BlasSetting> blasCandidates() {
  std::vector<BlasSetting> settings(1);
  settings[0].name = "inherit";
  for (int v = 0; v < 2; ++v)
    if (const char *value = getenv(kBlasVariables[v]))
      settings[0].values[v] = value;
  settings.emplace_back().name = "unset";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    settings.emplace_back().name = "SkylakeX";
    settings.back().values[0] = "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2")) {
    settings.emplace_back().name = "Haswell";
    settings.back().values[0] = "Haswell";
  }
  for (size_t i = 1; i < settings.size(); ++i)
    for (size_t j = 0; j < i && settings[i].sameAs.empty(); ++j)
      if (settings[i].values[0] == settings[j].values[0] &&
          settings[i].values[1] == settings[j].values[1])
        settings[i].sameAs = settings[j].name;
  return settings;
}

/// The last non-empty line of a file (a failed child's stderr), or "".
std::string lastLine(const std::string &path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      last = line;
  return last;
}

/// Probes every setting in a fresh process; marks which agree with the first
/// that ran and returns the fastest of those (its index), or -1 if none ran.
int probeBlas(const std::string &self, int threads, std::vector<BlasSetting> &settings) {
  // One probe process under setting `s`: its product goes to `product`, its
  // stderr to `errorFile` (or stays ours when empty).
  auto runProbe = [&](const BlasSetting &s, const std::string &product,
                      const std::string &errorFile, nlohmann::json &json, std::string &error) {
    return runChild(self, {self, "bench-worker", "blas-probe", std::to_string(threads), product},
                    childEnvironment(&s, ""), kProbeTimeoutSeconds, errorFile, json, error);
  };
  const BlasSetting *reference = nullptr;
  double scale = 0;
  for (BlasSetting &s : settings) {
    if (!s.sameAs.empty())
      continue;
    llvm::SmallString<128> product, stderrFile;
    llvm::sys::fs::createTemporaryFile("cleave-blas-probe", "f32", product);
    llvm::sys::fs::createTemporaryFile("cleave-blas-probe", "log", stderrFile);
    nlohmann::json json;
    std::string error;
    int rc = runProbe(s, std::string(product.str()), std::string(stderrFile.str()), json, error);
    std::string childError = lastLine(std::string(stderrFile.str()));
    llvm::sys::fs::remove(stderrFile);
    if (rc == 0 && json.is_object() && json.value("gflops", 0.0) > 0) {
      s.product.resize(kProbeSize * kProbeSize);
      std::ifstream in(std::string(product.str()), std::ios::binary);
      in.read(reinterpret_cast<char *>(s.product.data()), s.product.size() * sizeof(float));
      if (in.gcount() == static_cast<std::streamsize>(s.product.size() * sizeof(float))) {
        s.ran = true;
        s.gflops = json["gflops"];
        s.core = json.value("core", "");
      } else {
        s.error = "its product is incomplete";
      }
    } else if (rc == 0) {
      s.error = "no measurement came back";
    } else {
      // ExecuteAndWait: -1 when it could not start, -2 when it crashed or was killed.
      llvm::StringRef why = llvm::StringRef(error).rtrim(" :");
      s.error = why.contains("timed out")
                    ? "killed after " + std::to_string(kProbeTimeoutSeconds) + " s"
                : rc == -2 ? "crashed" + (why.empty() ? "" : ": " + why.str())
                : rc == -1 ? "did not start" + (why.empty() ? "" : ": " + why.str())
                           : "exit " + std::to_string(rc);
      if (!childError.empty())
        s.error += " (" + childError + ")";
    }
    llvm::sys::fs::remove(product);
    if (!s.ran)
      continue;
    if (!reference) {
      reference = &s;
      for (float x : s.product)
        scale = std::max(scale, static_cast<double>(std::fabs(x)));
    }
    double worst = 0;
    for (size_t i = 0; i < s.product.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(s.product[i] - reference->product[i])));
    // NaN or inf in a product fails the comparison as well.
    s.difference = scale > 0 ? worst / scale : std::numeric_limits<double>::infinity();
    s.agrees = s.difference <= 1e-4;
    if (!s.agrees)
      s.error = llvm::formatv("its product differs from {0}'s by {1:e2} of max |C|",
                              reference->name, s.difference)
                    .str();
  }
  // One process's GEMM rate moves by up to 1.6x on a shared VM (thread
  // placement, the neighbours): the agreeing settings are timed
  // kProbeRounds - 1 more times, in turn, each keeping its best, so that a
  // close pair is not decided by one unlucky process.
  for (int round = 1; round < kProbeRounds; ++round)
    for (BlasSetting &s : settings) {
      if (!s.agrees || !s.sameAs.empty())
        continue;
      llvm::SmallString<128> product;
      llvm::sys::fs::createTemporaryFile("cleave-blas-probe", "f32", product);
      nlohmann::json json;
      std::string error;
      int rc = runProbe(s, std::string(product.str()), "", json, error);
      llvm::sys::fs::remove(product);
      // A failed repeat leaves the first round's figure.
      if (rc == 0 && json.is_object())
        s.gflops = std::max(s.gflops, json.value("gflops", 0.0));
    }
  for (BlasSetting &s : settings) {
    s.product.clear();
    s.product.shrink_to_fit();
    if (s.sameAs.empty())
      continue;
    for (const BlasSetting &t : settings)
      if (t.name == s.sameAs) {
        std::string sameAs = s.sameAs, name = s.name;
        s = t;
        s.name = name;
        s.sameAs = sameAs;
      }
  }
  int best = -1;
  for (size_t i = 0; i < settings.size(); ++i)
    if (settings[i].agrees && settings[i].sameAs.empty() &&
        (best < 0 || settings[i].gflops > settings[best].gflops))
      best = static_cast<int>(i);
  return best;
}

/// `cleave bench-worker blas-probe THREADS OUT`: one f32 GEMM of fixed
/// pseudo-random matrices in LibTorch on THREADS threads; prints its best
/// GFLOP/s of a few after a warm-up as JSON and writes the product to OUT
/// (raw f32, row-major), for the parent to check against the other settings'.
int runBlasProbe(int threads, const std::string &out) {
  try {
    setTorchThreads(threads);
    const int64_t n = kProbeSize;
    at::Tensor a = at::empty({n, n}, at::kFloat), b = at::empty({n, n}, at::kFloat);
    uint64_t state = 0x2545F4914F6CDD1Dull; // fixed seed: every probe multiplies the same
    for (at::Tensor *t : {&a, &b}) {
      float *data = t->data_ptr<float>();
      for (int64_t i = 0; i < n * n; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        data[i] = static_cast<float>(static_cast<int64_t>(state >> 40) - (1 << 23)) / (1 << 23);
      }
    }
    at::Tensor c = at::mm(a, b); // warm-up: thread pools, OpenBLAS's buffers
    double best = std::numeric_limits<double>::infinity();
    auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < 5 && (i < 2 || secondsSince(begin) < 0.5); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      c = at::mm(a, b);
      best = std::min(best, secondsSince(t0));
    }
    c = c.contiguous();
    std::ofstream file(out, std::ios::binary);
    file.write(reinterpret_cast<const char *>(c.data_ptr<float>()), n * n * sizeof(float));
    if (!file.flush()) {
      llvm::errs() << "cleave: error: cannot write " << out << "\n";
      return 1;
    }
    nlohmann::json report = {{"gflops", 2.0 * n * n * n / best / 1e9}, {"seconds", best},
                             {"n", n}};
    // OpenBLAS's name for the kernels it chose, where LibTorch's BLAS is OpenBLAS.
    using CoreName = char *(*)();
    if (auto corename = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
      if (const char *name = corename())
        report["core"] = name;
    llvm::outs() << report.dump() << "\n";
    return 0;
  } catch (const std::exception &e) {
    llvm::errs() << "cleave: error: the GEMM probe failed: " << e.what() << "\n";
    return 1;
  }
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

/// The "baseline" object of the JSON report: the probe's rows, the setting
/// LibTorch ran under, and its faster run.
nlohmann::json baselineJson(const std::string &mode, const std::vector<BlasSetting> &settings,
                            const std::string &chosen, const std::string &bestEngine) {
  nlohmann::json rows = nlohmann::json::array();
  if (mode == "auto")
    for (const BlasSetting &s : settings) {
      nlohmann::json env = nlohmann::json::object();
      for (int v = 0; v < 2; ++v)
        env[kBlasVariables[v]] = s.values[v] ? nlohmann::json(*s.values[v]) : nlohmann::json(nullptr);
      nlohmann::json row = {{"setting", s.name}, {"env", env}, {"agrees", s.agrees}};
      row["gflops"] = s.ran ? nlohmann::json(s.gflops) : nlohmann::json(nullptr);
      if (s.ran)
        row["difference"] = s.difference;
      if (!s.core.empty())
        row["core"] = s.core;
      if (!s.sameAs.empty())
        row["same_as"] = s.sameAs;
      if (!s.error.empty())
        row["error"] = s.error;
      rows.push_back(row);
    }
  return {{"blas_mode", mode},
          {"blas_probe", rows},
          {"blas_setting", chosen},
          {"best_engine", bestEngine}};
}

} // namespace

int runBenchWorker(int argc, char **argv) {
  if (argc == 3 && std::string(argv[0]) == "blas-probe")
    return runBlasProbe(std::atoi(argv[1]), argv[2]);
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
  std::string model, plan, inputs, jsonPath, baselineBlas = "auto";
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
    } else if (optionValue(argc, argv, i, "--baseline-blas", &value)) {
      if (!value || (std::string(value) != "auto" && std::string(value) != "inherit"))
        return usageError("--baseline-blas needs auto or inherit", kBenchUsage);
      baselineBlas = value;
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
  // LibTorch at its best: under the fastest OpenBLAS setting that computes
  // the same GEMM (or as inherited, if asked or if no probe ran).
  std::vector<BlasSetting> blasSettings = blasCandidates();
  int chosen = 0;
  if (baselineBlas == "auto") {
    chosen = probeBlas(self, threads, blasSettings);
  } else {
    blasSettings.resize(1);
  }
  BlasSetting &torchBlas = blasSettings[std::max(chosen, 0)];
  // LibTorch runs twice: as installed, and with idle OpenMP threads sleeping
  // instead of spinning (OMP_WAIT_POLICY=passive), which keeps them from
  // competing with OpenBLAS's own threads; the ratios use its better run.
  // cleave runs in the environment as it is.
  EngineResult torchDefault, torchPassive, cleave;
  bool ok = runWorker(self, "libtorch", "libtorch", childEnvironment(&torchBlas, ""), model, plan,
                      inputs, threads, warmup, iterations, std::string(torchOut.str()),
                      torchDefault) &&
            runWorker(self, "libtorch", "libtorch*",
                      childEnvironment(&torchBlas, "OMP_WAIT_POLICY=passive"), model, plan,
                      inputs, threads, warmup, iterations, std::string(torchOut.str()),
                      torchPassive) &&
            runWorker(self, "cleave", "cleave", childEnvironment(nullptr, ""), model, plan,
                      inputs, threads, warmup, iterations, std::string(cleaveOut.str()), cleave);
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
  if (baselineBlas == "auto") {
    llvm::outs() << llvm::formatv("OpenBLAS for libtorch: a {0}x{0} f32 GEMM on {1} threads under "
                                  "each setting, each in a fresh process\n",
                                  kProbeSize, threads);
    llvm::outs() << "setting    OPENBLAS_CORETYPE  OPENBLAS_L2_SIZE  kernels    GFLOP/s\n";
    for (size_t i = 0; i < blasSettings.size(); ++i) {
      const BlasSetting &s = blasSettings[i];
      llvm::outs() << llvm::formatv("{0,-10} {1,-18} {2,-17} ", s.name,
                                    s.values[0].value_or("-"), s.values[1].value_or("-"));
      if (!s.sameAs.empty())
        llvm::outs() << "(as " << s.sameAs << ")";
      else if (s.ran)
        llvm::outs() << llvm::formatv("{0,-9} {1,8:f1}", s.core.empty() ? "?" : s.core,
                                      s.gflops);
      if (s.sameAs.empty() && static_cast<int>(i) == chosen)
        llvm::outs() << "  chosen";
      if (s.sameAs.empty() && !s.agrees)
        llvm::outs() << "  excluded: " << s.error;
      llvm::outs() << "\n";
    }
    if (chosen < 0)
      llvm::outs() << "no setting's probe ran: libtorch runs in the environment as inherited\n";
    llvm::outs() << "\n";
  }
  llvm::outs() << "engine     load s   median ms   min ms   peak memory MiB\n";
  for (const EngineResult *r : {&torchDefault, &torchPassive, &cleave})
    llvm::outs() << llvm::formatv("{0,-9} {1,7:f2} {2,11:f2} {3,8:f2} {4,17:f1}\n", r->engine,
                                  r->loadSeconds, r->medianSeconds * 1e3, r->minSeconds * 1e3,
                                  r->peakMiB);
  const EngineResult &bestTorch =
      torchPassive.medianSeconds < torchDefault.medianSeconds ? torchPassive : torchDefault;
  double torchSeconds = bestTorch.medianSeconds;
  double torchPeak = std::min(torchDefault.peakMiB, torchPassive.peakMiB);
  std::string blasName = baselineBlas == "auto" && chosen >= 0 ? torchBlas.name : "inherit";
  llvm::outs() << "(libtorch* = libtorch with OMP_WAIT_POLICY=passive; both with OpenBLAS "
               << blasName << ": " << torchBlas.describe() << ")\n";
  llvm::outs() << llvm::formatv("\nspeed (best libtorch median / cleave median): {0:f2}x "
                                "(best: {1}, OpenBLAS {2})\n",
                                torchSeconds / cleave.medianSeconds, bestTorch.engine, blasName);
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
        {"max_difference", difference < 0 ? nlohmann::json(nullptr) : nlohmann::json(difference)},
        {"baseline", baselineJson(baselineBlas, blasSettings, blasName, bestTorch.engine)}};
    if (!writeAtomically(jsonPath, [&](llvm::raw_ostream &os) { os << report.dump(1) << "\n"; }))
      return 1;
  }
  return difference < 0 ? 1 : 0;
}

} // namespace cleave
