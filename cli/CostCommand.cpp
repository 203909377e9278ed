//===- CostCommand.cpp - cleave cost --------------------------------------===//
//
// Prints what the cost model predicts for a model on one device of a cluster
// spec: per layer FLOPs, parameters, saved activations and forward/backward
// time, then the memory of a single-device run, inference and training.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "compiler/CompileDriver.h"
#include "cost/ClusterSpec.h"
#include "cost/Format.h"
#include "cost/MemoryModel.h"
#include "dialects/cleave/Locations.h"
#include "passes/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>

#include <map>

namespace cleave {
namespace {

using cost::humanBytes;
using cost::humanCount;
using cost::humanSeconds;

constexpr const char *kCostUsage = R"(usage: cleave cost MODEL --cluster SPEC.json [options]

Predicts, for one device of the cluster spec, each layer's FLOPs, parameters,
activation bytes kept for backward and forward/backward time, the totals, and
the memory of running the model on one device (inference and training).
MODEL is a TorchScript file (.pt, with weights or exported on the meta device)
or cleave IR (.mlir).

options:
  --cluster SPEC.json              the cluster spec (examples/clusters/, or
                                   written by 'cleave profile') (required)
  --nodes N                        override the spec's node count
  --batch N                        batch size: replaces dim 0 of every input
  --input-shape NAME=DIMS[:DTYPE]  shape of forward input NAME (repeatable)
  --example-inputs IN.safetensors  the inputs' shapes from a file of example inputs
  --no-fuse-attention              keep attention unfused (matmul, softmax,
                                   matmul), to compare with cleave.attention
  --no-fold-batch-norm             keep inference batch norms apart from the
                                   convolutions before them, to compare
  --no-fuse-conv-epilogue          keep convolutions' residual adds and relus
                                   apart from them, to compare
  --ops                            also print every op: class, FLOPs, bytes,
                                   predicted forward time and what bounds it
  --kernels                        also print predicted forward time per kernel,
                                   as 'cleave run --profile' reports measured time
  --json                           print the same as JSON, for scripts
  -h, --help                       show this help

exit status: 0 success, 1 bad arguments, spec or model, 2 the model uses ops
cleave cannot import.
)";

/// The request (model, cluster, nodes, shapes) and the output flags.
struct CostOptions : CompileRequest {
  bool json = false, ops = false, kernels = false;
};

/// Memory of a single-device run: inference holds the weights and the
/// forward's live activations; training (fp32 AdamW, no recomputation, one
/// microbatch) also holds gradients, moments and every saved activation.
std::pair<cost::MemoryBreakdown, cost::MemoryBreakdown>
singleDeviceMemory(const mlir::cleave::ModelEstimate &model) {
  cost::MemoryInputs inference;
  inference.training = false;
  inference.parameterBytes = model.total.parameterBytes;
  inference.inferenceActivationBytes = model.peakLiveBytes;
  cost::MemoryInputs training;
  training.training = true;
  training.parameters = static_cast<int64_t>(model.total.parameters);
  training.paramDType = runtime::DType::F32;
  training.activationBytesPerMicrobatch = model.total.activationBytes + model.inputBytes;
  return {cost::predictMemory(inference), cost::predictMemory(training)};
}

nlohmann::json layerJson(const mlir::cleave::LayerEstimate &row) {
  return {{"name", row.name},
          {"ops", row.ops},
          {"parameters", row.parameters},
          {"parameter_bytes", row.parameterBytes},
          {"forward_flops", row.forwardFlops},
          {"backward_flops", row.backwardFlops},
          {"activation_bytes", row.activationBytes},
          {"forward_seconds", row.forwardSeconds},
          {"backward_seconds", row.backwardSeconds},
          {"training_forward_seconds", row.trainingForwardSeconds}};
}

nlohmann::json memoryJson(const cost::MemoryBreakdown &m) {
  return nlohmann::json::parse(cost::memoryBreakdownJson(m));
}

void printTable(const CostOptions &options, const cost::ClusterSpec &spec,
                const mlir::cleave::ModelEstimate &model, mlir::func::FuncOp func) {
  auto &os = llvm::outs();
  std::string inputs;
  for (mlir::Type type : func.getArgumentTypes()) {
    std::string text;
    llvm::raw_string_ostream(text) << type;
    inputs += (inputs.empty() ? "" : ", ") + text;
  }
  os << llvm::formatv("model {0} ({1})\ndevice {2} of cluster {3} ({4} x {5})\n\n",
                      options.model, inputs, spec.device.name, spec.name, spec.nodes,
                      spec.devicesPerNode);
  os << llvm::formatv("{0,-22} {1,5} {2,10} {3,10} {4,10} {5,12} {6,11} {7,11}\n", "layer",
                      "ops", "params", "fwd FLOPs", "bwd FLOPs", "activations", "fwd time",
                      "bwd time");
  auto row = [&](const mlir::cleave::LayerEstimate &r) {
    os << llvm::formatv("{0,-22} {1,5} {2,10} {3,10} {4,10} {5,12} {6,11} {7,11}\n", r.name,
                        r.ops, humanCount(r.parameters), humanCount(r.forwardFlops),
                        humanCount(r.backwardFlops), humanBytes(r.activationBytes),
                        humanSeconds(r.forwardSeconds), humanSeconds(r.backwardSeconds));
  };
  for (const auto &r : model.layers)
    row(r);
  row(model.total);
  auto [inference, training] = singleDeviceMemory(model);
  os << llvm::formatv("\nforward {0} ({1:f1} GFLOP/s), backward {2}, training step {3}\n",
                      humanSeconds(model.total.forwardSeconds),
                      model.total.forwardFlops / model.total.forwardSeconds / 1e9,
                      humanSeconds(model.total.backwardSeconds),
                      humanSeconds(model.total.trainingForwardSeconds +
                                   model.total.backwardSeconds));
  os << llvm::formatv("memory, inference on one device: parameters {0} + activations {1} = {2}\n",
                      humanBytes(inference.parameters), humanBytes(inference.activations),
                      humanBytes(inference.total()));
  os << llvm::formatv("memory, fp32 AdamW training on one device: parameters {0} + gradients "
                      "{1} + optimizer {2} + activations {3} = {4}\n",
                      humanBytes(training.parameters), humanBytes(training.gradients),
                      humanBytes(training.optimizerState), humanBytes(training.activations),
                      humanBytes(training.total()));
}

/// The plan's kernel name of an op: its mnemonic without the dialect.
std::string kernelName(mlir::Operation *op) {
  return op->getName().stripDialect().str();
}

void printOps(const mlir::cleave::ModelEstimate &model) {
  auto &os = llvm::outs();
  os << llvm::formatv("\n{0,-14} {1,-28} {2,-11} {3,10} {4,10} {5,11} {6,-7}\n", "op", "scope",
                      "class", "fwd FLOPs", "fwd bytes", "fwd time", "bound");
  for (const auto &e : model.ops) {
    if (e.cost.forward.kernels == 0)
      continue;
    std::string scope = mlir::cleave::moduleScope(e.op->getLoc());
    os << llvm::formatv("{0,-14} {1,-28} {2,-11} {3,10} {4,10} {5,11} {6,-7}\n", kernelName(e.op),
                        scope.empty() ? "(root)" : scope, cost::opClassName(e.cost.opClass),
                        humanCount(e.cost.forward.flops),
                        humanBytes(e.cost.forward.bytesRead + e.cost.forward.bytesWritten),
                        humanSeconds(e.forward.seconds()),
                        e.forward.computeBound() ? "compute" : "memory");
  }
}

/// Predicted forward time of one kind of kernel, summed over its calls.
struct KernelTotal {
  int calls = 0;
  double seconds = 0, flops = 0, bytes = 0;
};

/// The forward's kernels by (op class, kernel name): the keys `cleave run
/// --roofline` reports measured time under, so the two join per kernel.
std::map<std::pair<std::string, std::string>, KernelTotal>
kernelTotals(const mlir::cleave::ModelEstimate &model) {
  std::map<std::pair<std::string, std::string>, KernelTotal> totals;
  for (const auto &e : model.ops)
    if (e.cost.forward.kernels > 0) {
      KernelTotal &t =
          totals[{std::string(cost::opClassName(e.cost.opClass)), kernelName(e.op)}];
      ++t.calls;
      t.seconds += e.forward.seconds();
      t.flops += e.cost.forward.flops;
      t.bytes += e.cost.forward.bytesRead + e.cost.forward.bytesWritten;
    }
  return totals;
}

nlohmann::json kernelsJson(const mlir::cleave::ModelEstimate &model) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto &[key, t] : kernelTotals(model))
    list.push_back({{"class", key.first},
                    {"kernel", key.second},
                    {"calls", t.calls},
                    {"forward_seconds", t.seconds},
                    {"flops", t.flops},
                    {"bytes", t.bytes}});
  return list;
}

nlohmann::json opsJson(const mlir::cleave::ModelEstimate &model) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto &e : model.ops) {
    if (e.cost.forward.kernels == 0)
      continue;
    nlohmann::json op = {{"kernel", kernelName(e.op)},
                         {"scope", mlir::cleave::moduleScope(e.op->getLoc())},
                         {"class", cost::opClassName(e.cost.opClass)},
                         {"flops", e.cost.forward.flops},
                         {"bytes", e.cost.forward.bytesRead + e.cost.forward.bytesWritten},
                         {"forward_seconds", e.forward.seconds()},
                         {"bound", e.forward.computeBound() ? "compute" : "memory"}};
    if (e.cost.gemm)
      op["gemm"] = {e.cost.gemm->batch, e.cost.gemm->m, e.cost.gemm->n, e.cost.gemm->k};
    list.push_back(std::move(op));
  }
  return list;
}

void printKernels(const mlir::cleave::ModelEstimate &model) {
  std::map<std::string, std::pair<int, double>> byKernel;
  double total = 0;
  for (const auto &[key, t] : kernelTotals(model)) {
    auto &entry = byKernel[key.second];
    entry.first += t.calls;
    entry.second += t.seconds;
    total += t.seconds;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> rows(byKernel.begin(),
                                                                    byKernel.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto &a, const auto &b) { return a.second.second > b.second.second; });
  auto &os = llvm::outs();
  os << llvm::formatv("\n{0,-18} {1,6} {2,10} {3,7}\n", "kernel", "calls", "pred. ms", "share");
  for (const auto &[name, entry] : rows)
    os << llvm::formatv("{0,-18} {1,6} {2,10:f2} {3,6:f1}%\n", name, entry.first,
                        entry.second * 1e3, 100 * entry.second / total);
}

} // namespace

int runCost(int argc, char **argv) {
  CostOptions options;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kCostUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--cluster", &value)) {
      if (!value || !*value)
        return usageError("--cluster needs a spec file", kCostUsage);
      options.cluster = value;
    } else if (optionValue(argc, argv, i, "--nodes", &value)) {
      if (!parseCount(value, options.nodes, 1, 1000000))
        return usageError("--nodes needs a positive count", kCostUsage);
    } else if (optionValue(argc, argv, i, "--batch", &value)) {
      int64_t batch;
      if (!parseCount(value, batch, 1, INT64_MAX))
        return usageError("--batch needs a positive size", kCostUsage);
      options.import.batchSize = batch;
    } else if (optionValue(argc, argv, i, "--input-shape", &value)) {
      if (int status = addInputShape(value, options.import.inputShapes, kCostUsage); status >= 0)
        return status;
    } else if (optionValue(argc, argv, i, "--example-inputs", &value)) {
      if (int status = setExampleInputs(value, options.import.exampleInputs, kCostUsage);
          status >= 0)
        return status;
    } else if (arg == "--json") {
      options.json = true;
    } else if (arg == "--ops") {
      options.ops = true;
    } else if (arg == "--kernels") {
      options.kernels = true;
    } else if (arg == "--no-fuse-attention") {
      options.fuseAttention = false;
    } else if (arg == "--no-fold-batch-norm") {
      options.foldBatchNorm = false;
    } else if (arg == "--no-fuse-conv-epilogue") {
      options.fuseConvEpilogue = false;
    } else if (int status = takeModelArgument(arg, options.model, kCostUsage); status >= 0) {
      return status;
    }
  }
  if (options.model.empty())
    return usageError("no model given", kCostUsage);
  if (options.cluster.empty())
    return usageError("no cluster spec given (--cluster SPEC.json)", kCostUsage);

  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  cost::ClusterSpec spec;
  if (DriverStatus s = setUpCluster(context, options, spec); !s.ok())
    return s.exitCode();
  LoadedModel loaded;
  if (DriverStatus s = loadModel(context, options, loaded); !s.ok())
    return s.exitCode();
  auto func = loaded.forward();
  mlir::cleave::ModelEstimate estimate;
  if (DriverStatus s = costModel(loaded, spec, estimate); !s.ok())
    return s.exitCode();

  if (!options.json) {
    printTable(options, spec, estimate, func);
    if (options.kernels)
      printKernels(estimate);
    if (options.ops)
      printOps(estimate);
    return 0;
  }
  auto [inference, training] = singleDeviceMemory(estimate);
  nlohmann::json out = {{"model", options.model},
                        {"cluster", spec.name},
                        {"device", spec.device.name},
                        {"layers", nlohmann::json::array()},
                        {"total", layerJson(estimate.total)},
                        {"input_bytes", estimate.inputBytes},
                        {"peak_live_bytes", estimate.peakLiveBytes},
                        {"memory", {{"inference", memoryJson(inference)},
                                    {"training", memoryJson(training)}}}};
  for (const auto &row : estimate.layers)
    out["layers"].push_back(layerJson(row));
  if (options.kernels)
    out["kernels"] = kernelsJson(estimate);
  if (options.ops)
    out["ops"] = opsJson(estimate);
  llvm::outs() << out.dump(2) << "\n";
  return 0;
}

} // namespace cleave
