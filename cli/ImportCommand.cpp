//===- ImportCommand.cpp - cleave import ----------------------------------===//

#include "cli/Commands.h"
#include "cli/Diagnostics.h"
#include "compiler/Importer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OperationSupport.h"
#include "compiler/CompileDriver.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstring>

namespace cleave {
namespace {

constexpr const char *kImportUsage = R"(usage: cleave import MODEL.pt [options]

Imports a TorchScript model (torch.jit.trace or torch.jit.script, real or
meta-device weights) into the cleave dialect and writes the IR, with each op's
module scope and source line as its location.

options:
  --input-shape NAME=DIMS[:DTYPE]  shape of forward input NAME, e.g. idx=2x64:i64
                                   (repeat per input; overrides the shapes the
                                   export recorded; dtypes f32 bf16 f16 i64 i32 i1)
  --example-inputs IN.safetensors  the inputs' shapes and dtypes from a file of
                                   example inputs (by name; by position for a
                                   model traced through *args)
  -o FILE                          write the IR to FILE (default: stdout)
  --summary                        print ops, parameters and bytes per module
                                   instead of the IR
  --depth N                        module path components per summary row (1)
  --timing                         print wall time and peak memory to stderr
  -h, --help                       show this help

exit status: 0 success, 1 bad arguments or unreadable model, 2 the model uses
ops or control flow cleave cannot import (all of them are listed).
)";

} // namespace

int runImport(int argc, char **argv) {
  std::string model, output;
  ImportOptions options;
  bool summary = false, timing = false;
  unsigned depth = 1;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        return nullptr;
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kImportUsage;
      return 0;
    } else if (arg == "--input-shape" || arg.rfind("--input-shape=", 0) == 0) {
      const char *text = arg == "--input-shape" ? value()
                                                : argv[i] + strlen("--input-shape=");
      if (int status = addInputShape(text, options.inputShapes, kImportUsage); status >= 0)
        return status;
    } else if (arg == "--example-inputs" || arg.rfind("--example-inputs=", 0) == 0) {
      const char *text = arg == "--example-inputs" ? value()
                                                   : argv[i] + strlen("--example-inputs=");
      if (int status = setExampleInputs(text, options.exampleInputs, kImportUsage); status >= 0)
        return status;
    } else if (arg == "-o") {
      const char *text = value();
      if (!text)
        return usageError("-o needs a file name", kImportUsage);
      output = text;
    } else if (arg == "--summary") {
      summary = true;
    } else if (arg == "--depth") {
      const char *text = value();
      if (!text || llvm::StringRef(text).getAsInteger(10, depth) || depth == 0)
        return usageError("--depth needs a positive integer", kImportUsage);
    } else if (arg == "--timing") {
      timing = true;
    } else if (int status = takeModelArgument(arg, model, kImportUsage); status >= 0) {
      return status;
    }
  }
  if (model.empty())
    return usageError("no model given", kImportUsage);

  auto start = std::chrono::steady_clock::now();
  mlir::MLIRContext context;
  context.disableMultithreading(); // one model, one thread: less memory
  CliDiagnostics diagnostics(context);
  ImportFailure failureKind = ImportFailure::BadInput;
  auto imported = importTorchScript(context, model, options, &failureKind);
  if (mlir::failed(imported))
    return static_cast<int>(failureKind);

  int status = 0;
  if (summary) {
    auto func = *imported->module->getOps<mlir::func::FuncOp>().begin();
    llvm::outs() << "model: " << model << (imported->meta ? " (meta: no weight data)" : "")
                 << "\n";
    auto describe = [&](mlir::Type type) {
      std::string s;
      llvm::raw_string_ostream os(s);
      type.print(os);
      return s;
    };
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      llvm::outs() << "input  " << func.getArgAttrOfType<mlir::StringAttr>(i, "cleave.name").str()
                   << ": " << describe(type) << "\n";
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      llvm::outs() << "output " << "output_" << i << ": " << describe(type) << "\n";
    llvm::outs() << "\n";
    if (!summarizeModel(*imported->module, depth).ok())
      status = 1;
  } else {
    mlir::OpPrintingFlags flags;
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    auto write = [&](llvm::raw_ostream &os) { imported->module->print(os, flags); };
    if (output.empty() || output == "-")
      write(llvm::outs());
    else if (!writeAtomically(output, write))
      status = 1;
  }

  if (timing) {
    printTiming("import",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return status;
}

} // namespace cleave
