//===- Importer.h - TorchScript to cleave IR --------------------*- C++ -*-===//
//
// Imports a TorchScript file into a module holding `func.func @forward` in the
// cleave dialect. This is the only part of cleave that uses LibTorch; this
// header exposes none of it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_IMPORTER_H
#define CLEAVE_COMPILER_IMPORTER_H

#include "compiler/InputSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/MapVector.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cleave {

/// One parameter or buffer of an imported model. `data` is null for models
/// exported on the meta device: their parameters have a shape but no storage.
struct ParamData {
  std::vector<int64_t> shape;
  std::string dtype;       ///< cleave spelling: f32, bf16, f16, i64, i32, i1
  const void *data = nullptr; ///< contiguous row-major bytes, or null (meta)
  size_t bytes = 0;        ///< size of the tensor in bytes, with or without data
  std::shared_ptr<void> owner; ///< keeps `data` alive
};

/// One entry of the TorchScript module's `state_dict` (a parameter or a
/// buffer, under its recursive name `blocks.0.ln1.weight`).
struct StateDictItem {
  std::string name;
  /// The `cleave.param` that holds the tensor in the imported IR (tied
  /// entries name the same one), or empty when the IR never reads it.
  std::string param;
  /// The tensor's data (null for meta-device exports): a plan keeps the
  /// entries its program no longer reads (folded buffers) from it.
  ParamData data;
};

/// The result of an import: the IR and the data of every `cleave.param` in
/// it, keyed by the param's name.
struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  llvm::MapVector<std::string, ParamData, std::map<std::string, unsigned>> params;
  /// Every entry of the model's state_dict, in its order (the order of
  /// `torch.jit.load(path).state_dict()`).
  std::vector<StateDictItem> stateDict;
  bool meta = false; ///< parameters have no data (meta-device export)
};

struct ImportOptions {
  /// Input shapes given on the command line; they override the shapes the
  /// export recorded in the model file.
  std::vector<InputSpec> inputShapes;
  /// `--example-inputs FILE`: a safetensors file of example inputs whose
  /// shapes and dtypes stand for each forward input it names (by name, or by
  /// position for a model traced through `*args`, whose inputs TorchScript
  /// names input, input0, ...; those inputs take the file's names). Between
  /// `inputShapes` and the shapes the export recorded.
  std::string exampleInputs;
  /// Replaces dim 0 (the batch dim, by the convention of traced models) of
  /// every input of rank >= 1, after `inputShapes`; shapes inside the model
  /// follow, since the importer folds shape arithmetic from the inputs.
  std::optional<int64_t> batchSize;
  /// Imports for a training step (`cleave compile --mode train`): in-place
  /// updates of the model's buffers (a batch norm's `num_batches_tracked.add_(1)`)
  /// become `cleave.assign`, and what training cannot reproduce (a batch
  /// norm with momentum=None) is an error. Inference drops such updates.
  bool training = false;
};

/// Exit codes of a failed import, for the CLI.
enum class ImportFailure {
  BadInput = 1,      ///< unreadable file, bad or missing input shapes
  Unsupported = 2,   ///< the model uses ops or constructs cleave cannot import
};

/// Imports the TorchScript model at `path`. On failure, diagnostics have been
/// reported through `context`'s diagnostic engine (one error, with notes) and
/// `failure` says which kind of failure it was.
mlir::FailureOr<ImportedModel> importTorchScript(mlir::MLIRContext &context,
                                                 const std::string &path,
                                                 const ImportOptions &options,
                                                 ImportFailure *failure = nullptr);

} // namespace cleave

#endif // CLEAVE_COMPILER_IMPORTER_H
