//===- CompileCommand.cpp - cleave compile --------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "compiler/Importer.h"
#include "compiler/PlanEmitter.h"
#include "passes/Passes.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

namespace cleave {
namespace {

constexpr const char *kCompileUsage = R"(usage: cleave compile MODEL.pt -o PLAN_DIR [options]

Compiles a TorchScript model into a plan directory for one CPU device:
manifest.json, programs/, weights/ and ir/ (docs/plan-format.md). Inputs keep
the names of the model's forward arguments; outputs are output_0, output_1, ...
PLAN_DIR appears complete or not at all; an earlier plan there is replaced.

options:
  --input-shape NAME=DIMS[:DTYPE]  shape of forward input NAME, e.g. idx=2x64:i64
                                   (repeat per input; overrides the export's shapes)
  -o PLAN_DIR                      the plan directory to write (required)
  --timing                         print wall time and peak memory to stderr
  -h, --help                       show this help

exit status: 0 success, 1 bad arguments, unreadable model or a model without
weight data, 2 the model uses ops or control flow cleave cannot import.
)";

std::string printIR(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  flags.elideLargeElementsAttrs(16);
  module.print(os, flags);
  return text;
}

} // namespace

int runCompile(int argc, char **argv) {
  std::string model, output;
  ImportOptions options;
  bool timing = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kCompileUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--input-shape", &value)) {
      if (int status = addInputShape(value, options.inputShapes, kCompileUsage); status >= 0)
        return status;
    } else if (optionValue(argc, argv, i, "-o", &value)) {
      if (!value || !*value)
        return usageError("-o needs a directory", kCompileUsage);
      output = value;
    } else if (arg == "--timing") {
      timing = true;
    } else if (int status = takeModelArgument(arg, model, kCompileUsage); status >= 0) {
      return status;
    }
  }
  if (model.empty())
    return usageError("no model given", kCompileUsage);
  if (output.empty())
    return usageError("no plan directory given (-o PLAN_DIR)", kCompileUsage);
  while (output.size() > 1 && output.back() == '/')
    output.pop_back();

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading();
  CliDiagnostics diagnostics(context);
  ImportFailure failureKind = ImportFailure::BadInput;
  auto imported = importTorchScript(context, model, options, &failureKind);
  if (mlir::failed(imported))
    return static_cast<int>(failureKind);
  if (imported->meta) {
    llvm::errs() << "cleave: error: " << model
                 << ": the model was exported on the meta device and has no weight data; "
                    "compile needs real weights ('cleave import --summary' works on meta models)\n";
    return 1;
  }

  PlanEmitOptions emitOptions;
  emitOptions.modelSource = model;
  emitOptions.irSnapshots.push_back({"0-imported", printIR(*imported->module)});
  mlir::PassManager pm(&context);
  mlir::cleave::addSingleDevicePlanPipeline(pm);
  if (mlir::failed(pm.run(*imported->module)))
    return 1;
  emitOptions.irSnapshots.push_back({"1-memory-planned", printIR(*imported->module)});
  if (mlir::failed(emitSingleDevicePlan(*imported->module, imported->params, output,
                                        emitOptions)))
    return 1;

  auto func = imported->module->lookupSymbol<mlir::func::FuncOp>("forward");
  int64_t arena = func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes").getInt();
  int64_t peak = func->getAttrOfType<mlir::IntegerAttr>("cleave.peak_live_bytes").getInt();
  size_t weights = 0;
  for (auto &entry : imported->params)
    weights += entry.second.bytes;
  llvm::outs() << llvm::formatv(
      "cleave: wrote {0}: 1 device, arena {1:f2} MiB (peak live {2:f2} MiB), "
      "parameters {3:f2} MiB\n",
      output, arena / 1048576.0, peak / 1048576.0, weights / 1048576.0);
  if (timing)
    printTiming("compile",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

} // namespace cleave
