//===- LoadModel.cpp - a model's forward function, for analysis -----------===//

#include "cli/LoadModel.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace cleave {

mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
loadForwardModule(mlir::MLIRContext &context, const std::string &path, const ImportOptions &import,
                  int &exitCode, bool fuseAttention) {
  exitCode = 1;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  // Keeps the imported buffers' data until the preparation has read them.
  std::optional<ImportedModel> imported;
  mlir::cleave::PrepareOptions prepare;
  prepare.fuseAttention = fuseAttention;
  if (llvm::StringRef(path).ends_with(".mlir")) {
    if (import.batchSize || !import.inputShapes.empty()) {
      llvm::errs() << "cleave: error: --batch and --input-shape need a TorchScript model: the "
                      "shapes of cleave IR are fixed\n";
      return mlir::failure();
    }
    module = mlir::parseSourceFile<mlir::ModuleOp>(path, &context);
    if (!module)
      return mlir::failure();
  } else {
    ImportFailure kind = ImportFailure::BadInput;
    auto result = importTorchScript(context, path, import, &kind);
    if (mlir::failed(result)) {
      exitCode = static_cast<int>(kind);
      return mlir::failure();
    }
    imported = std::move(*result);
    module = std::move(imported->module);
    prepare.paramData = paramDataOf(*imported);
  }
  mlir::PassManager pm(&context);
  mlir::cleave::addPreparePipeline(pm, prepare);
  if (mlir::failed(pm.run(*module)))
    return mlir::failure();
  if (!module->lookupSymbol<mlir::func::FuncOp>("forward")) {
    llvm::errs() << "cleave: error: " << path << ": no function @forward\n";
    return mlir::failure();
  }
  return module;
}

mlir::cleave::ParamDataLookup paramDataOf(const ImportedModel &model) {
  return [&model](llvm::StringRef name) -> const void * {
    auto it = model.params.find(name.str());
    return it == model.params.end() ? nullptr : it->second.data;
  };
}

} // namespace cleave
