//===- Layers.h - Ops grouped into the model's layers -----------*- C++ -*-===//
//
// A layer is the ops and parameters of one module scope, cut after its first
// numeric component (`blocks.3.attn.qkv` belongs to `blocks.3`), so repeated
// blocks of a Sequential or ModuleList are layers of their own and parts that
// do not repeat (embeddings, head) are units too. Layers with the same
// structural signature compute the same function of their inputs and
// parameters: the planner solves one of them and reuses the answer.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_LAYERS_H
#define CLEAVE_PASSES_LAYERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace mlir::cleave {

/// The layer a module scope belongs to: its path up to and including the
/// first numeric component (`blocks.3.attn` -> `blocks.3`, `layer1.0.conv1`
/// -> `layer1.0`), else its first component (`head`); `(root)` for ops
/// outside any module.
std::string layerOfScope(llvm::StringRef scope);

/// The layer of a parameter, from its name: `blocks.0.fc.weight` is in `blocks.0`.
std::string layerOfParam(llvm::StringRef name);

struct Layer {
  std::string name;
  std::vector<Operation *> ops;    // computing ops, in program order
  std::vector<Operation *> params; // its cleave.param ops
  std::vector<Operation *> constants; // cleave.constant ops in its scope
  /// Structure of the layer: each op's name, attributes, result types, and
  /// where each operand comes from (an earlier op of the layer, one of its
  /// parameters by its name inside the layer, or outside, by type).
  std::string signature;
  unsigned kind = 0; // index of the first layer with this signature
};

/// The layers of `func` in program order: each is a run of consecutive
/// computing ops of one scope layer (a scope that recurs after others starts
/// another run, `name#2`), with the params its name gives it and the
/// constants of its scope. Layers that hold only weights come last.
std::vector<Layer> discoverLayers(func::FuncOp func);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_LAYERS_H
