//===- TorchImporter.h - state shared by the walker and converters -*- C++ -*-===//
//
// Internal to compiler/: the TorchScript graph walker (TorchImporter.cpp) and
// the per-op converters (AtenConverters.cpp) share these types. A TorchScript
// value is imported as one `Val`: a cleave tensor, a compile-time constant
// (shape arithmetic folds to these), a submodule, a list of Vals, or a value
// that depends on tensor data and so cannot steer the import.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_TORCHIMPORTER_H
#define CLEAVE_COMPILER_TORCHIMPORTER_H

#include "compiler/Importer.h"
#include "compiler/SharedConstants.h"
#include "dialects/cleave/CleaveDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringMap.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include <functional>
#include <string>
#include <vector>

namespace cleave::importer {

/// The first line of an exception message (LibTorch appends backtraces).
std::string firstLine(const std::string &text);

struct Val {
  enum class Kind {
    Tensor,   ///< a cleave SSA tensor
    Constant, ///< a compile-time IValue (ints, floats, lists, CPU tensors...)
    Module,   ///< a submodule of the model, with its module path
    List,     ///< a list or tuple with at least one non-constant element
    Dynamic,  ///< a scalar read from tensor data (aten::item, aten::Bool...)
    Poison,   ///< produced by an unsupported op: already reported
  };
  Kind kind = Kind::Poison;
  mlir::Value tensor;
  c10::IValue constant;
  std::shared_ptr<torch::jit::Object> module;
  std::string path;        ///< Module: module path; Dynamic: where it was read
  std::vector<Val> items;  ///< List
  /// Tensor: a complex tensor held as its real form [..., 2]
  /// (ComplexConverters.cpp); only the ops there take one.
  bool complex = false;

  static Val ofTensor(mlir::Value v) { Val r; r.kind = Kind::Tensor; r.tensor = v; return r; }
  static Val ofConstant(c10::IValue v) { Val r; r.kind = Kind::Constant; r.constant = std::move(v); return r; }
  static Val ofList(std::vector<Val> items) { Val r; r.kind = Kind::List; r.items = std::move(items); return r; }
  static Val poison() { return Val(); }
  static Val ofComplex(mlir::Value v);
  bool isTensor() const { return kind == Kind::Tensor; }
  bool isConstant() const { return kind == Kind::Constant; }
};

class Importer;

/// Converts one TorchScript node whose inputs are imported. Returns the
/// outputs, or failure after reporting an error at the node.
using Converter = std::function<mlir::FailureOr<std::vector<Val>>(
    Importer &, torch::jit::Node *, llvm::ArrayRef<Val>)>;

/// The converter for `kind` (`aten::linear`), or null when it is unsupported.
const Converter *findConverter(const std::string &kind);

/// Converts a node with a complex operand (ComplexConverters.cpp): the ops
/// that know complex tensors, an error naming the op for any other.
mlir::FailureOr<std::vector<Val>> convertComplex(Importer &imp, torch::jit::Node *node,
                                                 const std::string &kind,
                                                 llvm::ArrayRef<Val> inputs);
/// Registers the dense linear algebra converters (LinalgConverters.cpp).
void addLinalgConverters(llvm::StringMap<Converter> &converters);

/// The graph walker and the helpers converters use.
class Importer {
public:
  Importer(mlir::MLIRContext &context, mlir::OpBuilder &builder,
           ImportedModel &result)
      : context(context), builder(builder), result(result) {}

  mlir::MLIRContext &context;
  mlir::OpBuilder &builder;
  ImportedModel &result;

  /// The location of the node being converted: NameLoc(module scope) around
  /// the user's source line.
  mlir::Location loc() const { return currentLoc; }
  std::string describe(mlir::Location loc) const;

  /// Reports an error at the current node (with its TorchScript kind).
  mlir::InFlightDiagnostic error();

  // Reading converter operands. Each reports an error and fails on a value
  // of the wrong kind.
  mlir::FailureOr<mlir::Value> tensor(const Val &val);
  mlir::FailureOr<int64_t> integer(const Val &val);
  mlir::FailureOr<double> real(const Val &val);
  mlir::FailureOr<bool> boolean(const Val &val);
  mlir::FailureOr<std::vector<int64_t>> intList(const Val &val);
  mlir::FailureOr<std::vector<Val>> list(const Val &val);
  bool isNone(const Val &val) const {
    return val.isConstant() && val.constant.isNone();
  }
  /// An optional integer argument: nullopt for None.
  mlir::FailureOr<std::optional<int64_t>> optionalInteger(const Val &val) {
    if (isNone(val))
      return std::optional<int64_t>();
    auto v = integer(val);
    if (mlir::failed(v))
      return mlir::failure();
    return std::optional<int64_t>(*v);
  }

  /// A cleave constant holding `tensor` (a CPU tensor; f64 becomes f32).
  mlir::FailureOr<mlir::Value> constantTensor(const at::Tensor &tensor);
  /// A 0-d (or `shape`d, splat) constant of `elementType` with `value`.
  mlir::Value splat(double value, mlir::Type elementType,
                    llvm::ArrayRef<int64_t> shape = {});

  /// The cleave element type of a torch dtype, or failure with an error.
  mlir::FailureOr<mlir::Type> elementType(c10::ScalarType dtype);
  mlir::FailureOr<c10::ScalarType> torchDtype(mlir::Type elementType);

  /// Imports the operands of an elementwise op: tensors stay, scalars and
  /// constant tensors become constants, and all are cast to the result dtype
  /// PyTorch's type promotion gives.
  mlir::FailureOr<std::vector<mlir::Value>>
  promote(llvm::ArrayRef<Val> operands, bool integerToFloat = false);

  /// Builds a cleave op at the current node and verifies it. Ops that infer
  /// their result type get it inferred here; when inference or verification
  /// fails (the model's shapes do not fit the op), the error is reported at
  /// the node and nothing is left in the IR. Never aborts.
  template <typename OpTy, typename... Args>
  mlir::FailureOr<mlir::Value> create(Args &&...args) {
    OpTy op;
    if constexpr (OpTy::template hasTrait<mlir::InferTypeOpInterface::Trait>()) {
      // Build with a placeholder type, then infer: the ODS builder that
      // infers aborts the process on failure.
      op = builder.create<OpTy>(loc(), builder.getNoneType(),
                                std::forward<Args>(args)...);
      llvm::SmallVector<mlir::Type> types;
      if (mlir::failed(OpTy::inferReturnTypes(
              &context, op.getLoc(), op->getOperands(), op->getAttrDictionary(),
              op->getPropertiesStorage(), op->getRegions(), types))) {
        op->erase();
        hadError = true;
        return mlir::failure();
      }
      op->getResult(0).setType(types.front());
    } else {
      op = builder.create<OpTy>(loc(), std::forward<Args>(args)...);
    }
    if (mlir::failed(mlir::verify(op))) {
      op->erase();
      hadError = true;
      return mlir::failure();
    }
    return op->getResult(0);
  }

  mlir::Value cast(mlir::Value value, mlir::Type elementType);
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);

  /// Runs the import of `graph` with `inputs` bound to its inputs, under
  /// the module scope `scope`; returns the graph outputs.
  mlir::FailureOr<std::vector<Val>> importGraph(torch::jit::Graph &graph,
                                                std::vector<Val> inputs,
                                                const std::string &scope);

  /// Emitted ops of unsupported kinds: kind -> (count, first location).
  struct Unsupported {
    size_t count = 0;
    std::string firstAt;
  };
  llvm::MapVector<std::string, Unsupported, std::map<std::string, unsigned>> unsupported;

  /// Set when the import must stop (an error was reported).
  bool hadError = false;

  /// The block where `cleave.param` ops go (the function entry).
  mlir::Block *entry = nullptr;

  /// Importing for a training step (ImportOptions::training).
  bool training = false;

  /// The module whose method is being imported (null in free functions
  /// called from the top level only if the model has none).
  std::shared_ptr<torch::jit::Object> currentModule;

  /// The name of the `cleave.param` imported for `tensor`, if it was read.
  std::optional<std::string> paramName(const at::Tensor &tensor) const;

private:
  mlir::FailureOr<std::vector<Val>> importBlock(torch::jit::Block *block,
                                                std::vector<Val> inputs,
                                                const std::string &scope);
  mlir::LogicalResult importNode(torch::jit::Node *node,
                                 const std::string &scope);
  mlir::FailureOr<std::vector<Val>> convert(torch::jit::Node *node,
                                            std::vector<Val> &inputs,
                                            const std::string &scope);
  std::optional<std::vector<Val>> tryFold(torch::jit::Node *node,
                                          llvm::ArrayRef<Val> inputs);
  /// Runs `node`'s operator on constants: its outputs, or nullopt where its
  /// converter is to express it (it throws, or gives a big non-splat tensor).
  std::optional<std::vector<c10::IValue>> runFold(torch::jit::Node *node,
                                                  const std::vector<c10::IValue> &args);
  mlir::FailureOr<Val> getAttr(torch::jit::Node *node, const Val &owner);
  mlir::FailureOr<std::vector<Val>> importIf(torch::jit::Node *node,
                                             llvm::ArrayRef<Val> inputs,
                                             const std::string &scope);
  mlir::FailureOr<std::vector<Val>> importLoop(torch::jit::Node *node,
                                               llvm::ArrayRef<Val> inputs,
                                               const std::string &scope);
  mlir::Location locationOf(torch::jit::Node *node, const std::string &scope);
  /// A scripted batch norm with momentum=None reads `float(num_batches_tracked)`
  /// for its update factor: the count the model holds (after this step's
  /// increment), so the import goes on; the factor only matters in training,
  /// which rejects momentum=None (the batch_norm converter).
  std::optional<int64_t> batchesTracked(mlir::Value value) const;
  mlir::LogicalResult updateInPlace(const Val &target, const Val &value);

  std::unordered_map<const torch::jit::Value *, Val> env;
  /// The aten::slice and aten::select nodes by the views they made: an
  /// in-place op on a view writes its new value back into the base.
  std::unordered_map<const torch::jit::Value *, torch::jit::Node *> viewOf;
  std::unordered_map<const void *, mlir::Value> paramsByTensor;
  FoldCache foldCache;
  /// Training: the `cleave.assign` that writes a buffer updated in place
  /// (reads after it see the value it writes), by the buffer's param.
  llvm::DenseMap<mlir::Value, mlir::Operation *> assigns;
  mlir::Location currentLoc = mlir::UnknownLoc::get(&context);
  torch::jit::Node *currentNode = nullptr;
};

} // namespace cleave::importer

#endif // CLEAVE_COMPILER_TORCHIMPORTER_H
