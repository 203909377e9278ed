//===- ProfileCommand.cpp - cleave profile --------------------------------===//
//
// Measures this machine and writes a cluster spec calibrated to it. Every
// compute measurement is a one-op plan compiled and run exactly as `cleave
// compile` and `cleave run` would, and its cost comes from the op's
// CostOpInterface, so the efficiencies written are those the cost model will
// apply to the same ops. Collectives are measured over MPI (ProfileComm.h).
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "cli/ProfileComm.h"
#include "compiler/PlanEmitter.h"
#include "cost/ClusterSpec.h"
#include "cost/Collectives.h"
#include "cost/Format.h"
#include "cost/OpTime.h"
#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "compiler/CompileDriver.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <random>
#include <thread>
#include <unistd.h>

namespace cleave {
namespace {

namespace rt = runtime;
using Clock = std::chrono::steady_clock;

constexpr const char *kProfileUsage = R"(usage: cleave profile [-o SPEC.json] [options]

Measures this machine and writes a cluster spec calibrated to it
(docs/cluster-spec.md): GEMM throughput at several shapes, dense, grouped and
depthwise convolutions, elementwise and reduction kernels, memory bandwidth and
per-kernel overhead, all through the CPU runtime's own kernels, the host link
(one copy thread's memcpy bandwidth and hand-off latency) and host memory
(capacity, and bandwidth: the devices' memory bandwidth together), and
collectives and send/recv over MPI between local ranks. Progress goes to
stderr.

options:
  -o SPEC.json    where to write the spec (default: stdout)
  --ranks N       devices on this machine: the spec has N devices per node,
                  each with cores/N threads; collectives are measured with
                  max(2, N) ranks (default 1)
  --threads T     threads per device for the compute measurements
                  (default: cores / ranks)
  --name NAME     the spec's name (default: cpu-<cores>core)
  --quick         fewer shapes and shorter timing, for tests
  -h, --help      show this help
)";

struct Progress {
  int done = 0, total = 0;
  void step(const std::string &what) {
    ++done;
    llvm::errs() << llvm::formatv("[{0,2}/{1}] {2}\n", done, total, what);
    llvm::errs().flush();
  }
};

struct Measured {
  cost::OpCost cost;
  double seconds = 0; // median kernel time
};

/// A measured kernel the spec's model is then asked to predict. A GEMM or
/// convolution sample is predicted from the other samples (left out of its
/// own interpolation), so its error is that of an unseen shape.
struct Term {
  std::string termClass; // "gemm", "convolution", "grouped_convolution", "memory", "kernel"
  std::string label;
  Measured measured;
  int sample = -1; // its index in device.gemmSamples, or -1
};

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      std::string name = line.substr(colon + 1);
      return name.substr(name.find_first_not_of(' '));
    }
  return "unknown CPU";
}

double memTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Bytes copied per second by `threads` threads each memcpy-ing its share of
/// a `bytes` buffer; best of `runs`. Each byte copied is read and written, so
/// the memory moves twice this.
double measureCopyBandwidth(int threads, size_t bytes, int runs) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < runs; ++rep) {
    auto start = Clock::now();
    std::vector<std::thread> pool;
    size_t chunk = bytes / threads;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::memcpy(dst.data() + t * chunk, src.data() + t * chunk, chunk);
      });
    for (auto &th : pool)
      th.join();
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, double(chunk) * threads / s);
  }
  return best;
}

/// Median time to hand a small copy to a waiting copy thread and wait until
/// it is done: the latency of one spilling copy on a CPU device, whose host
/// memory is its own and whose copies run on one copy thread.
double measureCopyHandOff(int handOffs) {
  std::mutex mutex;
  std::condition_variable wake;
  int posted = 0, done = 0;
  bool stop = false;
  std::array<char, 256> from{}, to{};
  std::thread copier([&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      wake.wait(lock, [&] { return stop || posted > done; });
      if (stop)
        return;
      std::memcpy(to.data(), from.data(), from.size());
      ++done;
      wake.notify_all();
    }
  });
  std::vector<double> times;
  for (int i = 0; i < handOffs + 10; ++i) {
    auto start = Clock::now();
    std::unique_lock<std::mutex> lock(mutex);
    ++posted;
    wake.notify_all();
    wake.wait(lock, [&] { return done == posted; });
    lock.unlock();
    if (i >= 10) // the first hand-offs warm the thread up
      times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  wake.notify_all();
  copier.join();
  return median(times);
}

/// Physical memory of this machine: the host memory spilled state lives in.
double physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) : 0;
}

/// Compiles `mlir` (a @forward of one computing op) to a plan in `workDir`,
/// runs it until `minSeconds` have passed, and returns the op's cost and its
/// median kernel time.
/// Puts an add over two inputs of `elements` each, whose result is returned,
/// before the measured (first computing) op: it sweeps the caches, so the op
/// then finds its weights in memory, as in a model whose weights outgrow the
/// cache. With `warmInputs`, each input the op reads is first copied by a
/// `neg`, so it arrives warm, as a model's activations do from the op that
/// produced them. Returns the kernels inserted before the measured op.
int insertCacheSweep(mlir::ModuleOp module, int64_t elements, bool warmInputs) {
  auto func = module.lookupSymbol<mlir::func::FuncOp>("forward");
  mlir::Builder b(module.getContext());
  auto type = mlir::RankedTensorType::get({elements}, b.getF32Type());
  unsigned inputs = func.getNumArguments();
  for (const char *name : {"sweep_a", "sweep_b"})
    func.insertArgument(func.getNumArguments(), type,
                        b.getDictionaryAttr(b.getNamedAttr("cleave.name", b.getStringAttr(name))),
                        func.getLoc());
  mlir::Operation *measured = nullptr;
  func.walk([&](mlir::cleave::CostOpInterface op) {
    if (!measured && op.getCost().forward.kernels > 0)
      measured = op;
  });
  mlir::OpBuilder builder(measured);
  auto sweep = builder.create<mlir::cleave::AddOp>(func.getLoc(), func.getArgument(inputs),
                                                   func.getArgument(inputs + 1));
  int inserted = 1;
  if (warmInputs)
    for (unsigned i = 0; i < inputs; ++i) {
      mlir::Value arg = func.getArgument(i);
      auto copy = builder.create<mlir::cleave::NegOp>(func.getLoc(), arg);
      arg.replaceUsesWithIf(copy, [&](mlir::OpOperand &use) { return use.getOwner() == measured; });
      ++inserted;
    }
  mlir::Operation *ret = func.front().getTerminator();
  ret->insertOperands(ret->getNumOperands(), {sweep.getResult()});
  llvm::SmallVector<mlir::Type> results(func.getResultTypes());
  results.push_back(type);
  func.setType(b.getFunctionType(func.getArgumentTypes(), results));
  return inserted;
}

/// How a measurement counts time: the kernels' own time, as `cleave run
/// --profile` reports it, or the wall time of the program, dispatch included.
enum class Timing { Kernels, Wall };

/// A measurement that runs as load for another: `warm` is called once the
/// kernel has run twice, and it goes on while `keepRunning` says so.
struct LoadControl {
  std::function<void()> warm;
  std::function<bool()> keepRunning;
};

rt::Status measureOp(mlir::MLIRContext &context, const std::string &mlir,
                     const std::string &workDir, double minSeconds, Measured &out,
                     int expectedKernels = 1, int64_t sweepElements = 0,
                     Timing timing = Timing::Kernels, const LoadControl *load = nullptr) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(mlir, &context);
  if (!module)
    return CLEAVE_ERROR("internal: profile kernel does not parse:\n", mlir);
  // Kernels before the measured ones: the cache sweep and input copies.
  int setupKernels = 0;
  if (sweepElements > 0)
    setupKernels = insertCacheSweep(*module, sweepElements, /*warmInputs=*/expectedKernels == 1);
  if (!lowerForOneDevice(*module).ok())
    return CLEAVE_ERROR("internal: profile kernel does not compile:\n", mlir);

  // Weights: random data for every param.
  decltype(ImportedModel::params) params;
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  int kernels = 0;
  module->walk([&](mlir::Operation *op) {
    if (auto param = llvm::dyn_cast<mlir::cleave::ParamOp>(op)) {
      auto type = llvm::cast<mlir::RankedTensorType>(param.getType());
      ParamData data;
      data.shape.assign(type.getShape().begin(), type.getShape().end());
      data.dtype = "f32";
      data.bytes = type.getNumElements() * sizeof(float);
      auto storage = std::shared_ptr<float[]>(new float[type.getNumElements()]);
      for (int64_t i = 0; i < type.getNumElements(); ++i)
        storage[i] = dist(rng);
      data.data = storage.get();
      data.owner = storage;
      params.insert({param.getName().str(), data});
    } else if (auto costly = llvm::dyn_cast<mlir::cleave::CostOpInterface>(op)) {
      cost::OpCost c = costly.getCost();
      if (c.forward.kernels > 0) {
        // The measured op is the last: a cache sweep comes before it.
        out.cost = c;
        ++kernels;
      }
    }
  });
  kernels -= setupKernels;
  if (kernels != expectedKernels)
    return CLEAVE_ERROR("internal: profile program has ", kernels, " kernels, not ",
                        expectedKernels);

  std::string dir = workDir + "/plan";
  if (mlir::failed(emitSingleDevicePlan(*module, params, dir, PlanEmitOptions{})))
    return CLEAVE_ERROR("internal: cannot write the profile plan to ", dir);
  rt::Plan plan;
  CLEAVE_RETURN_IF_ERROR(rt::loadPlan(dir, &plan));
  std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
  std::unique_ptr<rt::Executor> executor;
  CLEAVE_RETURN_IF_ERROR(rt::Executor::create(*plan.programForRank(0), *backend, &executor));
  for (const rt::TensorSpec &input : plan.inputs) {
    std::vector<float> data(input.desc.numel());
    for (float &x : data)
      x = dist(rng);
    CLEAVE_RETURN_IF_ERROR(
        executor->setInput(input.name, data.data(), data.size() * sizeof(float)));
  }
  bool perKernel = timing == Timing::Kernels;
  executor->setProfiling(perKernel);
  for (int i = 0; i < 2; ++i)
    CLEAVE_RETURN_IF_ERROR(executor->run());
  if (load)
    load->warm();
  std::vector<double> times;
  auto start = Clock::now();
  auto more = [&] {
    if (load)
      return load->keepRunning();
    return times.size() < 5 ||
           (std::chrono::duration<double>(Clock::now() - start).count() < minSeconds &&
            times.size() < 20000);
  };
  while (more()) {
    auto runStart = Clock::now();
    CLEAVE_RETURN_IF_ERROR(executor->run());
    double total = std::chrono::duration<double>(Clock::now() - runStart).count();
    if (perKernel) {
      const std::vector<double> &seconds = executor->lastRunSeconds();
      total = 0;
      for (size_t i = setupKernels; i < seconds.size(); ++i)
        total += seconds[i];
    }
    times.push_back(total);
  }
  out.seconds = median(times);
  return {};
}

std::string tensor(std::initializer_list<int64_t> dims) {
  std::string text = "tensor<";
  for (int64_t d : dims)
    text += std::to_string(d) + "x";
  return text + "f32>";
}

std::string linearKernel(int64_t m, int64_t n, int64_t k) {
  return llvm::formatv(R"(func.func @forward(%x: {0} {{cleave.name = "x"}) -> {2} {{
  %w = cleave.param "w" : {1}
  %y = cleave.linear %x, %w : {0}, {1} -> {2}
  return %y : {2}
})",
                       tensor({m, k}), tensor({n, k}), tensor({m, n}));
}

std::string matmulKernel(int64_t b, int64_t m, int64_t n, int64_t k) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}, %b: {1} {{cleave.name = "b"}) -> {2} {{
  %y = cleave.matmul %a, %b : {0}, {1} -> {2}
  return %y : {2}
})",
                       tensor({b, m, k}), tensor({b, k, n}), tensor({b, m, n}));
}

std::string convKernel(int64_t n, int64_t c, int64_t hw, int64_t oc, int64_t kernel,
                       int64_t stride, int64_t groups = 1) {
  int64_t pad = kernel / 2;
  int64_t out = (hw + 2 * pad - kernel) / stride + 1;
  return llvm::formatv(
      R"(func.func @forward(%x: {0} {{cleave.name = "x"}) -> {2} {{
  %w = cleave.param "w" : {1}
  %y = cleave.conv2d %x, %w {{stride = array<i64: {3}, {3}>, padding = array<i64: {4}, {4}>, dilation = array<i64: 1, 1>, groups = {5} : i64} : {0}, {1} -> {2}
  return %y : {2}
})",
      tensor({n, c, hw, hw}), tensor({oc, c / groups, kernel, kernel}),
      tensor({n, oc, out, out}), stride, pad, groups);
}

std::string addKernel(int64_t elements) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}, %b: {0} {{cleave.name = "b"}) -> {0} {{
  %y = cleave.add %a, %b : {0}, {0} -> {0}
  return %y : {0}
})",
                       tensor({elements}));
}

/// `count` dependent adds of `elements` each, every one adding the previous
/// result and a second input: the same input for all (`ownInputs` false: a
/// tiny chain is nearly all dispatch, for the per-kernel overhead) or one
/// input each (as activations flow through a model, for the bandwidth).
std::string addChainKernel(int64_t elements, int count, bool ownInputs) {
  std::string type = tensor({elements});
  std::string args = llvm::formatv("%a: {0} {{cleave.name = \"a\"}", type);
  std::string body;
  std::string last = "%a";
  for (int i = 0; i < count; ++i) {
    std::string input = ownInputs ? "b" + std::to_string(i) : "b";
    if (ownInputs || i == 0)
      args += llvm::formatv(", %{0}: {1} {{cleave.name = \"{0}\"}", input, type);
    body += llvm::formatv("  %y{0} = cleave.add {1}, %{2} : {3}, {3} -> {3}\n", i, last, input,
                          type);
    last = "%y" + std::to_string(i);
  }
  return llvm::formatv("func.func @forward({0}) -> {1} {{\n{2}  return {3} : {1}\n}", args, type,
                       body, last);
}

std::string geluKernel(int64_t elements) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}) -> {0} {{
  %y = cleave.gelu %a : {0}
  return %y : {0}
})",
                       tensor({elements}));
}

std::string softmaxKernel(int64_t rows, int64_t cols) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}) -> {0} {{
  %y = cleave.softmax %a {{dim = 1 : i64} : {0}
  return %y : {0}
})",
                       tensor({rows, cols}));
}

std::string attentionKernel(int64_t b, int64_t h, int64_t s, int64_t d, bool causal) {
  std::string t = tensor({b, h, s, d});
  return llvm::formatv(R"(func.func @forward(%q: {0} {{cleave.name = "q"}, %k: {0} {{cleave.name = "k"},
                    %v: {0} {{cleave.name = "v"}) -> {0} {{
  %y = cleave.attention %q, %k, %v {{causal = {1}, scale = {2} : f64} : {0}, {0}, {0} -> {0}
  return %y : {0}
})",
                       t, causal ? "true" : "false", 1.0 / std::sqrt(double(d)));
}

std::string layerNormKernel(int64_t rows, int64_t cols) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}) -> {0} {{
  %w = cleave.param "w" : {1}
  %b = cleave.param "b" : {1}
  %y = cleave.layer_norm %a weight %w bias %b {{normalized_shape = array<i64: {2}>, eps = 1.0e-05 : f64} : ({0}, {1}, {1}) -> {0}
  return %y : {0}
})",
                       tensor({rows, cols}), tensor({cols}), cols);
}

std::string permuteKernel(int64_t b, int64_t s, int64_t h, int64_t d) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}) -> {1} {{
  %y = cleave.permute %a {{dims = array<i64: 0, 2, 1, 3>} : {0} -> {1}
  return %y : {1}
})",
                       tensor({b, s, h, d}), tensor({b, h, s, d}));
}

/// A windowed pool (`max` or `avg`) of a `kernel`x`kernel` window with
/// `stride` and `pad` over an n x c x hw x hw input.
std::string poolKernel(const std::string &kind, int64_t n, int64_t c, int64_t hw, int64_t kernel,
                       int64_t stride, int64_t pad) {
  int64_t out = (hw + 2 * pad - kernel) / stride + 1;
  std::string extra = kind == "max" ? ", dilation = array<i64: 1, 1>" : "";
  return llvm::formatv(R"(func.func @forward(%x: {0} {{cleave.name = "x"}) -> {1} {{
  %y = cleave.{2}_pool2d %x {{kernel = array<i64: {3}, {3}>, stride = array<i64: {4}, {4}>, padding = array<i64: {5}, {5}>{6}} : {0} -> {1}
  return %y : {1}
})",
                       tensor({n, c, hw, hw}), tensor({n, c, out, out}), kind, kernel, stride,
                       pad, extra);
}

/// A permute of a 4-D `shape` by `dims` (result dim i is input dim dims[i]).
std::string permuteDimsKernel(std::array<int64_t, 4> shape, std::array<int64_t, 4> dims) {
  return llvm::formatv(R"(func.func @forward(%a: {0} {{cleave.name = "a"}) -> {1} {{
  %y = cleave.permute %a {{dims = array<i64: {2}, {3}, {4}, {5}>} : {0} -> {1}
  return %y : {1}
})",
                       tensor({shape[0], shape[1], shape[2], shape[3]}),
                       tensor({shape[dims[0]], shape[dims[1]], shape[dims[2]], shape[dims[3]]}),
                       dims[0], dims[1], dims[2], dims[3]);
}

/// Inference batch norm over channel dim 1 of an n x c x hw x hw input.
std::string batchNormKernel(int64_t n, int64_t c, int64_t hw) {
  return llvm::formatv(R"(func.func @forward(%x: {0} {{cleave.name = "x"}) -> {0} {{
  %m = cleave.param "m" : {1}
  %v = cleave.param "v" : {1}
  %w = cleave.param "w" : {1}
  %b = cleave.param "b" : {1}
  %y = cleave.batch_norm %x, %m, %v weight %w bias %b {{eps = 1.0e-05 : f64} : ({0}, {1}, {1}, {1}, {1}) -> {0}
  return %y : {0}
})",
                       tensor({n, c, hw, hw}), tensor({c}));
}

struct ProfileOptions {
  std::string output;
  int ranks = 1;
  int threads = 0;
  std::string name;
  bool quick = false;
};

/// The GEMM shapes measured: squares, the projections of transformer layers
/// at several token counts, and the small batched products of attention.
struct GemmCase {
  int64_t batch, m, n, k;
};
std::vector<GemmCase> gemmCases(bool quick) {
  if (quick)
    return {{1, 256, 256, 256}, {1, 512, 512, 512}, {8, 128, 128, 64}};
  return {{1, 256, 256, 256},    {1, 512, 512, 512},    {1, 1024, 1024, 1024},
          {1, 2048, 2048, 2048}, {1, 2048, 1536, 512},  {1, 2048, 512, 512},
          {1, 2048, 2048, 512},  {1, 2048, 512, 2048},  {1, 2048, 8192, 512},
          {1, 4096, 3072, 768},  {1, 4096, 768, 3072},  {1, 256, 1536, 512},
          {1, 64, 2048, 512},    {1, 16384, 512, 512},  {1, 256, 128, 128},
          {1, 256, 384, 128},    {1, 256, 512, 128},    {1, 256, 128, 512},
          {32, 32, 32, 32},      {64, 256, 256, 64},
          {64, 256, 64, 256},    {16, 512, 512, 64},    {16, 512, 64, 512},
          {96, 128, 128, 64},    {96, 128, 64, 128}};
}

/// A kernel every device of a node runs at once to measure contention:
/// "memory", the chain of adds the bandwidth comes from, or "gemm", a
/// 1024^3 GEMM (256^3 with --quick).
struct ContentionKernel {
  std::string mlir;
  int kernels = 1;
};
/// Elements of each add of the chain the memory bandwidth comes from: 16 MiB
/// operands, so the previous add's result is half out of a 32 MiB
/// last-level cache, as a model's activations are. With 4 MiB ones it stayed
/// in cache, and the zoo's maps, batch norms and pools ran a third slower in
/// their models than that bandwidth said (docs/cost-model.md).
int64_t chainElements(bool quick) { return quick ? 1 << 14 : 1 << 22; }

std::optional<ContentionKernel> contentionKernel(const std::string &kind, bool quick) {
  if (kind == "memory")
    return ContentionKernel{addChainKernel(chainElements(quick), 16, /*ownInputs=*/true), 16};
  if (kind == "gemm") {
    int64_t n = quick ? 256 : 1024;
    return ContentionKernel{linearKernel(n, n, n), 1};
  }
  return std::nullopt;
}

int64_t cacheSweepElements(bool quick) { return quick ? 0 : int64_t(1) << 24; }

/// Measures `kind` on this process while `others` processes of this binary
/// (`cleave profile-load-worker`) run the same kernel with the same threads:
/// the rate one device keeps when `others` + 1 devices of the node are busy.
/// Workers start, warm up and say so through a file; they stop when the stop
/// file appears, and any that outlive it by 30 s are killed.
rt::Status measureContended(mlir::MLIRContext &context, const std::string &workDir,
                            const std::string &self, const std::string &kind, int threads,
                            bool quick, int others, double minSeconds, Measured &out) {
  std::optional<ContentionKernel> kernel = contentionKernel(kind, quick);
  if (!kernel)
    return CLEAVE_ERROR("internal: unknown contention kernel '", kind, "'");
  std::string stop = workDir + "/stop-" + kind;
  llvm::sys::fs::remove(stop);
  struct Worker {
    llvm::sys::ProcessInfo process;
    std::string ready, log;
    bool done = false;
  };
  std::vector<Worker> workers(others);
  auto stopAll = [&](unsigned graceSeconds) {
    std::ofstream(stop).flush();
    for (Worker &w : workers)
      if (!w.done && w.process.Pid > 0) {
        llvm::sys::Wait(w.process, graceSeconds);
        w.done = true;
      }
  };
  struct Stopper {
    std::function<void()> f;
    ~Stopper() { f(); }
  } stopper{[&] { stopAll(30); }};
  std::string threadsText = std::to_string(threads);
  for (int i = 0; i < others; ++i) {
    Worker &w = workers[i];
    w.ready = workDir + "/ready-" + kind + "-" + std::to_string(i);
    w.log = workDir + "/load-" + kind + "-" + std::to_string(i) + ".log";
    llvm::sys::fs::remove(w.ready);
    std::vector<llvm::StringRef> args = {self, "profile-load-worker", kind, threadsText, w.ready,
                                         stop};
    if (quick)
      args.push_back("--quick");
    std::optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(w.log),
                                                  llvm::StringRef(w.log)};
    std::string error;
    bool failed = false;
    w.process = llvm::sys::ExecuteNoWait(self, args, std::nullopt, redirects, 0, &error, &failed);
    if (failed)
      return CLEAVE_ERROR("cannot start a contention worker (", self, "): ", error);
  }
  auto logOf = [](const Worker &w) {
    std::ifstream in(w.log);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto deadline = Clock::now() + std::chrono::seconds(120);
  for (Worker &w : workers)
    while (!llvm::sys::fs::exists(w.ready)) {
      llvm::sys::ProcessInfo polled =
          llvm::sys::Wait(w.process, 0, nullptr, nullptr, /*Polling=*/true);
      if (polled.Pid != 0) {
        w.done = true;
        return CLEAVE_ERROR("a contention worker (", kind, ") ended before it was ready: ",
                            logOf(w));
      }
      if (Clock::now() > deadline)
        return CLEAVE_ERROR("contention workers (", kind, ") not ready after 120 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  CLEAVE_RETURN_IF_ERROR(measureOp(context, kernel->mlir, workDir, minSeconds, out,
                                   kernel->kernels, cacheSweepElements(quick)));
  stopAll(30);
  return {};
}

} // namespace

/// `cleave profile-load-worker KIND THREADS READY STOP [--quick]`: runs
/// KIND's contention kernel on THREADS threads, creates READY once warm, and
/// stops when STOP exists (or after 600 s, or when its parent is gone).
int runProfileLoadWorker(int argc, char **argv) {
  if (argc < 4 || argc > 5 || (argc == 5 && std::string(argv[4]) != "--quick")) {
    llvm::errs() << "usage: cleave profile-load-worker KIND THREADS READY STOP [--quick] "
                    "(started by cleave profile)\n";
    return 1;
  }
  std::string kind = argv[0], ready = argv[2], stop = argv[3];
  bool quick = argc == 5;
  int threads = 0;
  if (!parseCount(argv[1], threads, 1, 4096)) {
    llvm::errs() << "cleave profile-load-worker: error: THREADS must be a count, got '"
                 << argv[1] << "'\n";
    return 1;
  }
  std::optional<ContentionKernel> kernel = contentionKernel(kind, quick);
  if (!kernel) {
    llvm::errs() << "cleave profile-load-worker: error: unknown KIND '" << kind
                 << "' (memory or gemm)\n";
    return 1;
  }
  rt::setCpuThreads(threads);
  mlir::MLIRContext context;
  context.disableMultithreading();
  context.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  CliDiagnostics diagnostics(context);
  llvm::SmallString<128> workDir;
  if (llvm::sys::fs::createUniqueDirectory("cleave-profile-load", workDir)) {
    llvm::errs() << "cleave profile-load-worker: error: cannot create a temporary directory\n";
    return 1;
  }
  std::string dir = workDir.str().str();
  pid_t parent = getppid();
  auto start = Clock::now();
  LoadControl load{[&] { std::ofstream(ready).flush(); },
                   [&] {
                     return !llvm::sys::fs::exists(stop) && getppid() == parent &&
                            Clock::now() - start < std::chrono::seconds(600);
                   }};
  Measured m;
  rt::Status status = measureOp(context, kernel->mlir, dir, 0, m, kernel->kernels,
                                cacheSweepElements(quick), Timing::Kernels, &load);
  llvm::sys::fs::remove_directories(dir);
  if (!status.ok()) {
    llvm::errs() << "cleave profile-load-worker: error: " << status.message() << "\n";
    return 1;
  }
  return 0;
}

namespace {

std::string signedPercent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f %%", 100 * fraction);
  return text;
}

/// One AdamW step measured through the runtime's own kernel.
struct OptimizerStep {
  int64_t parameters = 0;
  double seconds = 0; // median
};

/// Times the CPU backend's `adamw` kernel over `parameters` f32 parameters
/// (grad, param and both moments: past the last-level cache at the full
/// size, as a model's optimizer state is), called until `minSeconds` have
/// passed; the median call.
rt::Status measureOptimizerStep(int64_t parameters, double minSeconds, OptimizerStep &out) {
  std::unique_ptr<rt::Backend> backend = rt::createCpuBackend();
  rt::KernelSignature sig;
  sig.kernel = "adamw";
  const rt::TensorDesc vector{rt::DType::F32, {parameters}};
  sig.inputs = {vector, rt::TensorDesc{rt::DType::I64, {}}};
  sig.outputs = {vector, vector, vector};
  for (auto [name, value] : {std::pair<const char *, double>{"lr", 1e-3}, {"beta1", 0.9},
                             {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}})
    sig.attrs.set(name, value);
  sig.attrs.set("schedule", std::string("constant"));
  sig.attrs.set("warmup_steps", int64_t(0));
  sig.attrs.set("decay_steps", int64_t(0));
  rt::KernelFn fn;
  CLEAVE_RETURN_IF_ERROR(backend->prepareKernel(sig, &fn));

  // grad, param, exp_avg, exp_avg_sq in the backend's own memory.
  std::array<float *, 4> buffers{};
  struct Free {
    rt::Backend &backend;
    std::array<float *, 4> &buffers;
    ~Free() {
      for (float *b : buffers)
        if (b)
          backend.deallocate(b);
    }
  } release{*backend, buffers};
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (float *&b : buffers) {
    void *p = nullptr;
    CLEAVE_RETURN_IF_ERROR(backend->allocate(vector.bytes(), &p));
    b = static_cast<float *>(p);
  }
  for (int64_t i = 0; i < parameters; ++i) {
    buffers[0][i] = dist(rng);
    buffers[1][i] = dist(rng);
    buffers[2][i] = 0;
    buffers[3][i] = 0;
  }
  int64_t step = 1;
  rt::KernelCall call;
  call.inputs = {buffers[0], &step};
  call.outputs = {buffers[1], buffers[2], buffers[3]};
  std::vector<double> times;
  auto start = Clock::now();
  for (int i = 0; i < 2; ++i, ++step) // first touches, then warm code
    CLEAVE_RETURN_IF_ERROR(fn(call));
  while (times.size() < 5 ||
         (std::chrono::duration<double>(Clock::now() - start).count() < minSeconds &&
          times.size() < 1000)) {
    auto begin = Clock::now();
    CLEAVE_RETURN_IF_ERROR(fn(call));
    times.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    ++step;
  }
  out.parameters = parameters;
  out.seconds = median(times);
  return {};
}

/// Every measured term next to what the finished spec predicts for it
/// (printed, and returned for the spec's measurements): kernels through the
/// op-time model (GEMM and convolution samples left out of their own
/// interpolation; kernel time only, no dispatch overhead), each collective
/// size from the other sizes and the fitted link, the optimizer step from its
/// bytes. Terms the spec's figures are defined by (the peak GEMM, gelu, the
/// chain of adds) are not listed: they are exact by construction.
nlohmann::json predictedAgainstMeasured(const cost::ClusterSpec &spec,
                                        const std::vector<Term> &terms,
                                        const CommProfile &comm,
                                        const OptimizerStep &optimizer) {
  struct Row {
    std::string termClass, label;
    double measured = 0, predicted = 0;
  };
  std::vector<Row> rows;
  for (const Term &t : terms) {
    cost::DeviceSpec device = spec.device;
    if (t.sample >= 0 && t.sample < int(device.gemmSamples.size()))
      device.gemmSamples.erase(device.gemmSamples.begin() + t.sample);
    cost::PassTime time =
        cost::predictPass(device, t.measured.cost, t.measured.cost.forward, rt::DType::F32);
    rows.push_back({t.termClass, t.label, t.measured.seconds, std::max(time.compute, time.memory)});
  }
  // The optimizer step as a spec without the measured rate predicts it:
  // its bytes at the elementwise memory rate.
  if (optimizer.parameters > 0) {
    cost::DeviceSpec unmeasured = spec.device;
    unmeasured.adamwSecondsPerParameter = 0;
    rows.push_back({"optimizer",
                    llvm::formatv("adamw of {0} parameters ({1})", optimizer.parameters,
                                  cost::humanBytes(double(optimizer.parameters) *
                                                   cost::kAdamWBytesPerParameter)),
                    optimizer.seconds,
                    cost::optimizerStepSeconds(unmeasured, double(optimizer.parameters))});
  }
  for (const CollectiveSample &sample : comm.samples) {
    std::optional<cost::Collective> kind = cost::parseCollective(sample.collective);
    if (!kind)
      continue;
    // Predicted from the other sizes (and the fitted link past them).
    cost::ClusterSpec others = spec;
    others.devicesPerNode = std::max(spec.devicesPerNode, sample.ranks);
    llvm::erase_if(others.measuredCollectives, [&](const cost::MeasuredCollective &m) {
      return m.collective == sample.collective && m.ranks == sample.ranks &&
             m.bytes == sample.bytes;
    });
    std::vector<int> ranks(sample.ranks);
    for (int r = 0; r < sample.ranks; ++r)
      ranks[r] = r;
    cost::CommGroup group = cost::groupOfRanks(ranks, others.devicesPerNode);
    rows.push_back({"collective",
                    llvm::formatv("{0} on {1} ranks, {2}", sample.collective, sample.ranks,
                                  cost::humanBytes(sample.bytes)),
                    sample.seconds,
                    cost::estimateCollective(others, *kind, group, sample.bytes).seconds});
  }

  llvm::errs() << "predicted against measured (error = predicted / measured - 1):\n";
  nlohmann::json list = nlohmann::json::array();
  std::map<std::string, std::vector<double>> errors;
  std::vector<std::string> order;
  for (const Row &r : rows) {
    double error = r.measured > 0 ? r.predicted / r.measured - 1 : 0;
    if (!errors.count(r.termClass))
      order.push_back(r.termClass);
    errors[r.termClass].push_back(error);
    llvm::errs() << llvm::formatv("  {0,-20} {1,-52} measured {2,10}, predicted {3,10} ({4})\n",
                                  r.termClass, r.label, cost::humanSeconds(r.measured),
                                  cost::humanSeconds(r.predicted), signedPercent(error));
    list.push_back({{"class", r.termClass},
                    {"term", r.label},
                    {"measured_seconds", r.measured},
                    {"predicted_seconds", r.predicted},
                    {"error", error}});
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const std::string &c : order) {
    const std::vector<double> &e = errors[c];
    double sumAbs = 0, sum = 0, worst = 0;
    for (double x : e) {
      sumAbs += std::abs(x);
      sum += x;
      worst = std::max(worst, std::abs(x));
    }
    summary[c] = {{"terms", e.size()},
                  {"mean_abs_error", sumAbs / e.size()},
                  {"max_abs_error", worst},
                  {"mean_signed_error", sum / e.size()}};
    llvm::errs() << llvm::formatv("  {0,-20} {1} terms: mean |error| {2:f1} %, max {3:f1} %, "
                                  "mean signed {4}\n",
                                  c, e.size(), 100 * sumAbs / e.size(), 100 * worst,
                                  signedPercent(sum / e.size()));
  }
  return {{"terms", list}, {"summary", summary}};
}

rt::Status profile(const ProfileOptions &options, const char *argv0, cost::ClusterSpec &spec) {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int threads = options.threads > 0 ? options.threads : std::max(1, cores / options.ranks);
  rt::setCpuThreads(threads);
  double minSeconds = options.quick ? 0.02 : 0.25;

  mlir::MLIRContext context;
  context.disableMultithreading();
  context.loadDialect<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  CliDiagnostics diagnostics(context);
  llvm::SmallString<128> workDir;
  if (llvm::sys::fs::createUniqueDirectory("cleave-profile", workDir))
    return CLEAVE_ERROR("cannot create a temporary directory");
  struct Cleanup {
    std::string dir;
    ~Cleanup() { llvm::sys::fs::remove_directories(dir); }
  } cleanup{workDir.str().str()};

  std::vector<GemmCase> gemms = gemmCases(options.quick);
  struct ConvCase {
    int64_t n, c, hw, oc, kernel, stride, groups = 1;
  };
  std::vector<ConvCase> convs =
      options.quick ? std::vector<ConvCase>{{1, 16, 16, 16, 3, 1}}
                    : std::vector<ConvCase>{{8, 64, 56, 64, 3, 1},    {8, 256, 56, 64, 1, 1},
                                            {8, 128, 28, 128, 3, 1},  {8, 3, 224, 64, 7, 2},
                                            {8, 512, 7, 512, 3, 1},   {8, 1024, 14, 256, 1, 1},
                                            {8, 256, 14, 256, 3, 1},  {8, 64, 56, 128, 3, 2},
                                            {8, 128, 28, 256, 3, 2},  {8, 64, 56, 128, 1, 2},
                                            {8, 32, 112, 64, 3, 1},   {8, 2048, 7, 512, 1, 1},
                                            // A tensor split's halves of the 3x3
                                            // layers: half the output channels.
                                            {8, 64, 56, 32, 3, 1},    {8, 128, 28, 64, 3, 1},
                                            {8, 256, 14, 128, 3, 1},  {8, 512, 7, 256, 3, 1},
                                            // Pointwise layers of few channels
                                            // (MobileNet, ShuffleNet, RegNet's
                                            // small widths): small products, far
                                            // from ResNet's.
                                            {2, 16, 112, 96, 1, 1},   {2, 144, 56, 24, 1, 1},
                                            {2, 24, 56, 144, 1, 1},   {2, 58, 28, 58, 1, 1},
                                            {2, 64, 14, 384, 1, 1},   {2, 960, 7, 160, 1, 1}};
  // Grouped convolutions, a class of their own with samples by shape:
  // depthwise 3x3 (MobileNet) from 112x112x32 to 7x7x960, 5x5 (MnasNet,
  // EfficientNet) and 7x7 (ConvNeXt); groups of 4 to 32 channels (ResNeXt,
  // RegNet), many groups of few channels and few groups of many.
  std::vector<ConvCase> groupedConvs =
      options.quick ? std::vector<ConvCase>{{1, 16, 16, 16, 3, 1, 16}, {1, 16, 16, 16, 3, 1, 4}}
                    : std::vector<ConvCase>{{8, 32, 112, 32, 3, 1, 32},
                                            {8, 96, 56, 96, 3, 1, 96},
                                            {8, 384, 14, 384, 3, 1, 384},
                                            {8, 960, 7, 960, 3, 1, 960},
                                            {8, 240, 28, 240, 5, 1, 240},
                                            {8, 96, 56, 96, 7, 1, 96},
                                            {8, 768, 7, 768, 7, 1, 768},
                                            {8, 128, 56, 128, 3, 1, 32},
                                            {8, 1024, 7, 1024, 3, 1, 32},
                                            {8, 48, 56, 48, 3, 1, 6},
                                            {8, 208, 14, 208, 3, 1, 26},
                                            {8, 432, 7, 432, 3, 1, 18},
                                            {8, 72, 56, 72, 3, 1, 3},
                                            {8, 168, 28, 168, 3, 1, 7},
                                            {8, 408, 14, 408, 3, 1, 17},
                                            // Wide groups (RegNetX-8GF's 120
                                            // channels per group).
                                            {2, 240, 28, 240, 3, 1, 2},
                                            {2, 720, 14, 720, 3, 1, 6},
                                            {2, 1920, 7, 1920, 3, 1, 16}};
  // add over sizes from cache-resident to far past the last-level cache, for
  // the record; the bandwidth the cost model uses comes from a chain of adds.
  std::vector<int64_t> addSizes = options.quick ? std::vector<int64_t>{1 << 14, 1 << 18}
                                                : std::vector<int64_t>{1 << 16, 1 << 20, 1 << 24};
  int64_t big = options.quick ? 1 << 16 : 1 << 22;
  // Windowed pools: ResNet's stem max pool, VGG's 2x2 halving, the 3x3/2
  // pools of SqueezeNet and GoogLeNet at smaller maps, GoogLeNet's 3x3/1
  // branch pools and Inception's 3x3/1 average pool.
  struct PoolCase {
    const char *kind;
    int64_t n, c, hw, kernel, stride, pad;
  };
  std::vector<PoolCase> pools =
      options.quick ? std::vector<PoolCase>{{"max", 1, 8, 16, 3, 2, 1}}
                    : std::vector<PoolCase>{{"max", 8, 64, 112, 3, 2, 1},
                                            {"max", 2, 64, 224, 2, 2, 0},
                                            {"max", 2, 96, 109, 3, 2, 0},
                                            {"max", 2, 480, 28, 3, 2, 1},
                                            {"max", 2, 480, 14, 3, 1, 1},
                                            {"avg", 2, 192, 35, 3, 1, 1}};
  // Batch norm at the maps of ResNet's and DenseNet's stages, from 56x56
  // planes to 7x7 ones.
  struct NormCase {
    int64_t n, c, hw;
  };
  std::vector<NormCase> norms =
      options.quick ? std::vector<NormCase>{{1, 16, 8}}
                    : std::vector<NormCase>{{8, 64, 56}, {8, 256, 28}, {8, 512, 14}, {8, 1024, 7}};
  // Permutes that move the innermost dim: ConvNeXt's NCHW -> NHWC and back
  // around each block's layer norm, at its first and third stages' maps,
  // and a matrix transpose.
  struct LayoutCase {
    std::array<int64_t, 4> shape, dims;
  };
  std::vector<LayoutCase> layouts =
      options.quick
          ? std::vector<LayoutCase>{{{1, 16, 8, 8}, {0, 2, 3, 1}}}
          : std::vector<LayoutCase>{{{8, 96, 56, 56}, {0, 2, 3, 1}},
                                    {{8, 56, 56, 96}, {0, 3, 1, 2}},
                                    {{8, 384, 14, 14}, {0, 2, 3, 1}},
                                    {{8, 14, 14, 384}, {0, 3, 1, 2}},
                                    {{1, 1, 2048, 2048}, {0, 1, 3, 2}}};
  Progress progress;
  progress.total = 2 + gemms.size() + convs.size() + groupedConvs.size() + pools.size() +
                   norms.size() + layouts.size() + addSizes.size() + 1 + 1 + 5 + 1 + (options.ranks > 1 ? 2 : 0) + (options.quick ? 1 : 4);

  // Memory bandwidth: bytes read and written per second.
  double bandwidth = 2 * measureCopyBandwidth(threads, size_t(options.quick ? 64 : 256) << 20,
                                              options.quick ? 3 : 8);
  progress.step(llvm::formatv("memory bandwidth (copy, {0} threads): {1:f1} GB/s", threads,
                              bandwidth / 1e9));
  // The host link: a CPU device's host memory is its own memory, and a
  // spilling copy is one copy thread's memcpy, handed to it and waited for.
  constexpr size_t kHostCopyBytes = size_t(64) << 20;
  double hostBandwidth = measureCopyBandwidth(1, kHostCopyBytes, options.quick ? 3 : 8);
  double hostLatency = measureCopyHandOff(options.quick ? 200 : 2000);
  spec.hostLink = {hostBandwidth, hostLatency};
  spec.hostMemoryBytes = physicalMemoryBytes();
  progress.step(llvm::formatv("host link (1 copy thread, {0}): {1:f1} GB/s, {2} per hand-off",
                              cost::humanBytes(kHostCopyBytes), hostBandwidth / 1e9,
                              cost::humanSeconds(hostLatency)));

  // Past the last-level caches of today's CPUs (and a GPU's L2).
  int64_t sweep = options.quick ? 0 : int64_t(1) << 24;
  auto run = [&](const std::string &kernel, Measured &m) {
    return measureOp(context, kernel, workDir.str().str(), minSeconds, m, 1, sweep);
  };
  nlohmann::json record = nlohmann::json::object();
  record["threads"] = threads;
  record["copy_bandwidth"] = bandwidth;
  record["host_copy"] = {{"threads", 1},
                         {"bytes", kHostCopyBytes},
                         {"bandwidth", hostBandwidth},
                         {"hand_off_seconds", hostLatency}};

  // GEMMs.
  std::vector<Term> terms;
  std::vector<cost::GemmSample> samples;
  for (const GemmCase &g : gemms) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(run(g.batch == 1 ? linearKernel(g.m, g.n, g.k)
                                            : matmulKernel(g.batch, g.m, g.n, g.k),
                               m));
    cost::GemmSample sample;
    sample.shape = *m.cost.gemm;
    sample.dtype = rt::DType::F32;
    sample.flopsPerSecond = m.cost.forward.flops / m.seconds;
    samples.push_back(sample);
    terms.push_back({"gemm", llvm::formatv("gemm {0}x{1}x{2}x{3}", g.batch, g.m, g.n, g.k), m,
                     int(samples.size()) - 1});
    progress.step(llvm::formatv("gemm {0}x{1}x{2}x{3} (batch x m x n x k): {4:f1} GFLOP/s",
                                g.batch, g.m, g.n, g.k, sample.flopsPerSecond / 1e9));
  }
  double peak = 0;
  for (const auto &s : samples)
    peak = std::max(peak, s.flopsPerSecond);

  cost::DeviceSpec &device = spec.device;
  device.name = llvm::formatv("{0} ({1} threads)", cpuModelName(), threads);
  device.kind = "cpu";
  device.memoryBytes = memTotalBytes() / options.ranks;
  device.memoryReserveBytes = std::min(2.0 * (1 << 30), device.memoryBytes / 4);
  device.peakFlops = {{rt::DType::F32, peak}};
  device.gemmSamples = samples;
  for (cost::Efficiency &e : device.efficiency)
    e = {1.0, 1.0};
  // Largest square GEMM as the class figure (used only where no sample applies).
  device.efficiency[int(cost::OpClass::Gemm)].compute =
      std::min(1.0, samples[std::min<size_t>(3, samples.size() - 1)].flopsPerSecond / peak);

  // Memory-bound kernels: one add alone runs from cache at several times the
  // memory's speed, which a model's kernels never see. A chain of adds, each
  // reading the previous result and an operand of its own, with a working
  // set past the last-level cache, moves activations as a model does; its
  // bandwidth is the device's, and memory-bound kernels run at it.
  nlohmann::json addRecord = nlohmann::json::array();
  for (int64_t n : addSizes) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(run(addKernel(n), m));
    double bytes = m.cost.forward.bytesRead + m.cost.forward.bytesWritten;
    addRecord.push_back({{"bytes", bytes}, {"seconds", m.seconds}});
    terms.push_back({"memory", llvm::formatv("add of {0} ({1} elements), alone",
                                             cost::humanBytes(bytes), n),
                     m});
    progress.step(llvm::formatv("add of {0} elements ({1}), alone: {2:f1} GB/s", n,
                                cost::humanBytes(bytes), bytes / m.seconds / 1e9));
  }
  record["add_alone"] = addRecord;
  {
    constexpr int kAdds = 16;
    int64_t elements = chainElements(options.quick);
    Measured chain;
    CLEAVE_RETURN_IF_ERROR(measureOp(context, addChainKernel(elements, kAdds, /*ownInputs=*/true),
                                     workDir.str().str(), minSeconds, chain, kAdds, sweep));
    double bytes = kAdds * (chain.cost.forward.bytesRead + chain.cost.forward.bytesWritten);
    device.memoryBandwidth = bytes / chain.seconds;
    record["add_chain"] = {{"adds", kAdds}, {"bytes", bytes}, {"seconds", chain.seconds}};
    progress.step(llvm::formatv("{0} chained adds of {1} elements: {2:f1} GB/s", kAdds, elements,
                                device.memoryBandwidth / 1e9));
  }
  // The optimizer step: AdamW over more state than the last-level cache holds.
  OptimizerStep optimizer;
  CLEAVE_RETURN_IF_ERROR(
      measureOptimizerStep(options.quick ? int64_t(1) << 16 : int64_t(1) << 23, minSeconds,
                           optimizer));
  // Plans cost their optimizer step at the measured rate.
  device.adamwSecondsPerParameter = optimizer.seconds / double(optimizer.parameters);
  record["optimizer"] = {{"kernel", "adamw"},
                         {"parameters", optimizer.parameters},
                         {"seconds", optimizer.seconds}};
  progress.step(llvm::formatv("adamw of {0} parameters: {1:f1} GB/s ({2:f2} ns per parameter)",
                              optimizer.parameters,
                              double(optimizer.parameters) * cost::kAdamWBytesPerParameter /
                                  optimizer.seconds / 1e9,
                              optimizer.seconds / double(optimizer.parameters) * 1e9));
  // Host memory is this machine's memory: each of the node's devices streams
  // it at the rate just measured.
  spec.hostMemoryBandwidth = device.memoryBandwidth * options.ranks;
  for (cost::Efficiency &e : device.efficiency)
    e.memory = 1.0;

  // A kernel's compute efficiency: what makes the roofline exact for it.
  auto computeEfficiency = [&](const Measured &m) {
    return std::clamp(m.cost.forward.flops / (peak * m.seconds), 1e-4, 1.0);
  };
  Measured gelu, softmax, layerNorm, permute, tiny;
  CLEAVE_RETURN_IF_ERROR(run(geluKernel(big), gelu));
  device.efficiency[int(cost::OpClass::Elementwise)].compute = computeEfficiency(gelu);
  progress.step(llvm::formatv("gelu of {0} elements: {1:f1} GFLOP/s", big,
                              gelu.cost.forward.flops / gelu.seconds / 1e9));
  CLEAVE_RETURN_IF_ERROR(run(softmaxKernel(big / 256, 256), softmax));
  progress.step(llvm::formatv("softmax of {0}x256: {1:f1} GFLOP/s", big / 256,
                              softmax.cost.forward.flops / softmax.seconds / 1e9));
  CLEAVE_RETURN_IF_ERROR(run(layerNormKernel(big / 512, 512), layerNorm));
  progress.step(llvm::formatv("layer_norm of {0}x512: {1:f1} GFLOP/s", big / 512,
                              layerNorm.cost.forward.flops / layerNorm.seconds / 1e9));
  device.efficiency[int(cost::OpClass::Reduction)].compute =
      median({computeEfficiency(softmax), computeEfficiency(layerNorm)});
  terms.push_back({"kernel", llvm::formatv("softmax of {0}x256", big / 256), softmax});
  terms.push_back({"kernel", llvm::formatv("layer_norm of {0}x512", big / 512), layerNorm});
  // A kernel kept as a term of `termClass`, its rate in GB/s on the progress line.
  auto measureTerm = [&](const std::string &kernel, const std::string &termClass,
                         const std::string &label, Measured &m) -> rt::Status {
    CLEAVE_RETURN_IF_ERROR(run(kernel, m));
    terms.push_back({termClass, label, m});
    progress.step(llvm::formatv("{0}: {1:f1} GB/s", label,
                                (m.cost.forward.bytesRead + m.cost.forward.bytesWritten) /
                                    m.seconds / 1e9));
    return {};
  };
  CLEAVE_RETURN_IF_ERROR(measureTerm(permuteKernel(options.quick ? 2 : 8, 256, 8, 64), "kernel",
                                     "permute (attention heads)", permute));
  // Windowed pools: their class figure is the median of their rates.
  std::vector<double> poolEfficiencies;
  for (const PoolCase &c : pools) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(measureTerm(
        poolKernel(c.kind, c.n, c.c, c.hw, c.kernel, c.stride, c.pad), "pooling",
        llvm::formatv("{0}_pool2d {1}x{2}x{3}x{3}, {4}x{4}/{5}", c.kind, c.n, c.c, c.hw, c.kernel,
                      c.stride),
        m));
    poolEfficiencies.push_back(computeEfficiency(m));
  }
  device.efficiency[int(cost::OpClass::Pooling)].compute = median(poolEfficiencies);
  // Batch norm and strided permutes are memory-bound: their classes keep
  // the median fraction of the memory bandwidth they reached.
  auto memoryEfficiency = [&](const Measured &m) {
    double bytes = m.cost.forward.bytesRead + m.cost.forward.bytesWritten;
    return std::clamp(bytes / (device.memoryBandwidth * m.seconds), 1e-4, 1.0);
  };
  std::vector<double> normEfficiencies;
  for (const NormCase &c : norms) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(measureTerm(batchNormKernel(c.n, c.c, c.hw), "normalization",
                                       llvm::formatv("batch_norm {0}x{1}x{2}x{2}", c.n, c.c, c.hw),
                                       m));
    normEfficiencies.push_back(memoryEfficiency(m));
  }
  device.efficiency[int(cost::OpClass::Normalization)] = {1.0, median(normEfficiencies)};
  std::vector<double> layoutEfficiencies;
  for (const LayoutCase &c : layouts) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(measureTerm(
        permuteDimsKernel(c.shape, c.dims), "layout",
        llvm::formatv("permute {0}x{1}x{2}x{3} by ({4}, {5}, {6}, {7})", c.shape[0], c.shape[1],
                      c.shape[2], c.shape[3], c.dims[0], c.dims[1], c.dims[2], c.dims[3]),
        m));
    layoutEfficiencies.push_back(memoryEfficiency(m));
  }
  device.efficiency[int(cost::OpClass::Layout)] = {1.0, median(layoutEfficiencies)};
  // Per-kernel overhead: the wall time per kernel of a program of kernels
  // with almost nothing to do (dispatch included).
  constexpr int kChain = 64;
  constexpr int64_t kChainElements = 1024;
  CLEAVE_RETURN_IF_ERROR(measureOp(context, addChainKernel(kChainElements, kChain, /*ownInputs=*/false),
                                   workDir.str().str(), minSeconds, tiny, kChain, 0,
                                   Timing::Wall));
  device.kernelOverhead = tiny.seconds / kChain;
  progress.step(llvm::formatv("kernel overhead ({0} adds of {1} elements): {2} per kernel",
                              kChain, kChainElements, cost::humanSeconds(device.kernelOverhead)));

  // Convolutions run as implicit GEMMs; their class efficiency is relative
  // to the GEMM samples at the same implicit shape.
  std::vector<double> convRatios;
  std::vector<cost::GemmSample> convSamples;
  for (const ConvCase &c : convs) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(run(convKernel(c.n, c.c, c.hw, c.oc, c.kernel, c.stride), m));
    double achieved = m.cost.forward.flops / m.seconds;
    double asGemm =
        cost::gemmEfficiency(device, *m.cost.gemm, rt::DType::F32, cost::OpClass::Gemm) * peak;
    convRatios.push_back(achieved / asGemm);
    convSamples.push_back({*m.cost.gemm, rt::DType::F32, achieved, cost::OpClass::Convolution});
    terms.push_back({"convolution",
                     llvm::formatv("conv2d {0}x{1}x{2}x{2} -> {3}, {4}x{4}/{5}", c.n, c.c, c.hw,
                                   c.oc, c.kernel, c.stride),
                     m, int(device.gemmSamples.size() + convSamples.size()) - 1});
    progress.step(llvm::formatv("conv2d {0}x{1}x{2}x{2} -> {3}, {4}x{4}/{5}: {6:f1} GFLOP/s "
                                "({7:f2} of a GEMM of its shape)",
                                c.n, c.c, c.hw, c.oc, c.kernel, c.stride, achieved / 1e9,
                                achieved / asGemm));
  }
  double gemmClass = device.efficiency[int(cost::OpClass::Gemm)].compute;
  device.efficiency[int(cost::OpClass::Convolution)].compute =
      std::clamp(gemmClass * median(convRatios), 1e-4, 1.0);
  // Each layer is also a sample of its own class, which dense convolutions
  // interpolate by shape (the class figure stays for specs read without them).
  device.gemmSamples.insert(device.gemmSamples.end(), convSamples.begin(), convSamples.end());
  std::vector<double> groupedEfficiencies;
  for (const ConvCase &c : groupedConvs) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(
        run(convKernel(c.n, c.c, c.hw, c.oc, c.kernel, c.stride, c.groups), m));
    groupedEfficiencies.push_back(computeEfficiency(m));
    cost::GemmSample sample;
    sample.shape = *m.cost.gemm;
    sample.dtype = rt::DType::F32;
    sample.flopsPerSecond = m.cost.forward.flops / m.seconds;
    sample.opClass = cost::OpClass::GroupedConvolution;
    device.gemmSamples.push_back(sample);
    terms.push_back({"grouped_convolution",
                     llvm::formatv("conv2d {0}x{1}x{2}x{2} -> {3}, {4}x{4}/{5}, {6} groups", c.n,
                                   c.c, c.hw, c.oc, c.kernel, c.stride, c.groups),
                     m, int(device.gemmSamples.size()) - 1});
    progress.step(llvm::formatv("conv2d {0}x{1}x{2}x{2} -> {3}, {4}x{4}/{5}, {6} groups: "
                                "{7:f1} GFLOP/s",
                                c.n, c.c, c.hw, c.oc, c.kernel, c.stride, c.groups,
                                m.cost.forward.flops / m.seconds / 1e9));
  }
  // The class figure, for shapes when no sample applies.
  device.efficiency[int(cost::OpClass::GroupedConvolution)].compute =
      median(groupedEfficiencies);
  // Fused attention: its block products are plain vectorized loops and the
  // softmax per pair weighs at small head dims, far from GEMM efficiency;
  // the class figure is the median over shapes of the models it serves
  // (a small GPT's 32-wide heads, ViT-B's 197 tokens, GPT-2's 64-wide ones).
  struct AttentionCase {
    int64_t b, h, s, d;
    bool causal;
  };
  std::vector<AttentionCase> attentions =
      options.quick ? std::vector<AttentionCase>{{1, 2, 32, 16, true}}
                    : std::vector<AttentionCase>{{8, 4, 32, 32, true},
                                                 {1, 12, 197, 64, false},
                                                 {2, 8, 256, 64, true},
                                                 {4, 12, 512, 64, true}};
  std::vector<double> attentionEfficiencies;
  for (const AttentionCase &a : attentions) {
    Measured m;
    CLEAVE_RETURN_IF_ERROR(run(attentionKernel(a.b, a.h, a.s, a.d, a.causal), m));
    attentionEfficiencies.push_back(computeEfficiency(m));
    terms.push_back({"kernel",
                     llvm::formatv("attention {0}x{1}x{2}x{3}{4}", a.b, a.h, a.s, a.d,
                                   a.causal ? " causal" : ""),
                     m});
    progress.step(llvm::formatv("attention {0}x{1}x{2}x{3}{4}: {5:f1} GFLOP/s", a.b, a.h, a.s,
                                a.d, a.causal ? " causal" : "",
                                m.cost.forward.flops / m.seconds / 1e9));
  }
  device.efficiency[int(cost::OpClass::Attention)] = {median(attentionEfficiencies), 1.0};

  // Contention: the node's devices (cores of this machine) share its memory
  // channels, last-level cache and clocks. Each kernel runs alone, then with
  // every other device running it at once; the ratios scale the figures
  // above (what one device keeps of them when all are busy).
  if (options.ranks > 1) {
    nlohmann::json contention = nlohmann::json::object();
    contention["devices"] = options.ranks;
    spec.contention.devices = options.ranks;
    for (const char *kind : {"memory", "gemm"}) {
      Measured alone, loaded;
      CLEAVE_RETURN_IF_ERROR(measureContended(context, workDir.str().str(), argv0, kind, threads,
                                              options.quick, 0, minSeconds, alone));
      CLEAVE_RETURN_IF_ERROR(measureContended(context, workDir.str().str(), argv0, kind, threads,
                                              options.quick, options.ranks - 1, minSeconds,
                                              loaded));
      // A busy node is never faster than an idle one: a ratio above 1 is noise.
      double ratio = std::min(1.0, alone.seconds / loaded.seconds);
      bool memory = std::string(kind) == "memory";
      int kernels = contentionKernel(kind, options.quick)->kernels;
      double work = kernels * (memory ? alone.cost.forward.bytesRead + alone.cost.forward.bytesWritten
                                      : alone.cost.forward.flops);
      contention[kind] = {{"alone_per_s", work / alone.seconds},
                          {"all_busy_per_s", work / loaded.seconds},
                          {"ratio", ratio}};
      if (memory)
        spec.contention.memoryBandwidth = device.memoryBandwidth * ratio;
      else
        spec.contention.computeScale = ratio;
      progress.step(llvm::formatv(
          "{0} with {1} devices busy: {2:f1} {3} each, {4:f1} alone ({5:f2}x)",
          memory ? "memory bandwidth (16 chained adds)" : "gemm (square)", options.ranks,
          work / loaded.seconds / 1e9, memory ? "GB/s" : "GFLOP/s", work / alone.seconds / 1e9,
          ratio));
    }
    record["contention"] = contention;
  }

  // Collectives between local ranks.
  CommProfile comm;
  int commRanks = std::max(2, options.ranks);
  CommProfileOptions commOptions;
  if (options.quick)
    commOptions.maxBytes = 1 << 20;
  CLEAVE_RETURN_IF_ERROR(profileCollectives(
      argv0, commRanks, [&](const std::string &line) { llvm::errs() << "      " << line << "\n"; },
      comm, commOptions));
  progress.step(llvm::formatv("collectives over {0} MPI ranks: link {1:f2} GB/s, {2}", commRanks,
                              comm.linkBandwidth / 1e9, cost::humanSeconds(comm.linkLatency)));
  spec.intraNode = {comm.linkBandwidth, comm.linkLatency};
  // Each collective by size, as measured: one latency and bandwidth cannot
  // follow messages that stay in cache and those that stream from memory.
  for (const CollectiveSample &sample : comm.samples)
    spec.measuredCollectives.push_back(
        {sample.collective, sample.ranks, sample.bytes, sample.seconds});
  // One machine: nothing crosses nodes. The inter-node link is the same
  // shared memory, recorded so multi-node what-ifs have a figure to start from.
  spec.interNode = spec.intraNode;
  spec.nicsPerNode = 1;

  char host[256] = "";
  gethostname(host, sizeof host - 1);
  spec.name = options.name.empty() ? llvm::formatv("cpu-{0}core", cores).str() : options.name;
  spec.description = llvm::formatv("{0}: {1} cores, {2} device(s) of {3} thread(s)",
                                   cpuModelName(), cores, options.ranks, threads);
  spec.source = llvm::formatv(
      "measured by cleave profile on {0}: f32 peak = best GEMM measured; efficiencies are "
      "what the runtime's kernels achieved; links fitted from MPI collectives over {1} "
      "local ranks (inter-node = intra-node: not measured, one machine); host link = one "
      "copy thread's memcpy of 64 MiB and the hand-off of a copy to it",
      host, commRanks);
  spec.nodes = 1;
  spec.devicesPerNode = options.ranks;
  record["kernels"] = {
      {"gelu_seconds", gelu.seconds},       {"softmax_seconds", softmax.seconds},
      {"layer_norm_seconds", layerNorm.seconds}, {"permute_seconds", permute.seconds},
      {"kernel_overhead_seconds", device.kernelOverhead}, {"conv_vs_gemm", convRatios},
      {"grouped_conv_efficiency", groupedEfficiencies},
      {"pooling_efficiency", poolEfficiencies},
      {"normalization_memory_efficiency", normEfficiencies},
      {"layout_memory_efficiency", layoutEfficiencies},
      {"attention_efficiency", attentionEfficiencies}};
  record["collectives"] = nlohmann::json::parse(comm.toJson());
  record["predicted_vs_measured"] = predictedAgainstMeasured(spec, terms, comm, optimizer);
  spec.measurementsJson = record.dump();
  return {};
}

} // namespace

int runProfile(int argc, char **argv, const char *argv0) {
  ProfileOptions options;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kProfileUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a file", kProfileUsage);
      options.output = value;
    } else if (optionValue(argc, argv, i, "--ranks", &value)) {
      if (!parseCount(value, options.ranks, 1, 4096))
        return usageError("--ranks needs a count from 1 to 4096", kProfileUsage);
    } else if (optionValue(argc, argv, i, "--threads", &value)) {
      if (!parseCount(value, options.threads, 1, 4096))
        return usageError("--threads needs a count from 1 to 4096", kProfileUsage);
    } else if (optionValue(argc, argv, i, "--name", &value)) {
      if (!value || !*value)
        return usageError("--name needs a value", kProfileUsage);
      options.name = value;
    } else if (arg == "--quick") {
      options.quick = true;
    } else {
      return usageError("unexpected argument '" + arg + "'", kProfileUsage);
    }
  }
  // The worker is this same binary; argv[0] may be relative to a cwd mpirun
  // does not share, so use the resolved path.
  std::string self = llvm::sys::fs::getMainExecutable(argv0, (void *)&runProfile);
  cost::ClusterSpec spec;
  if (rt::Status s = profile(options, self.c_str(), spec); !s.ok()) {
    llvm::errs() << "cleave: error: profile: " << s.message() << "\n";
    return 1;
  }
  if (options.output.empty()) {
    llvm::outs() << cost::formatClusterSpec(spec);
    return 0;
  }
  if (rt::Status s = cost::saveClusterSpec(spec, options.output); !s.ok()) {
    llvm::errs() << "cleave: error: " << s.message() << "\n";
    return 1;
  }
  llvm::errs() << "cleave: wrote " << options.output << "\n";
  return 0;
}

} // namespace cleave
