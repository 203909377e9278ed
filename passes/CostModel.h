//===- CostModel.h - Per-op and per-layer cost of a model -------*- C++ -*-===//
//
// Walks a forward function, asks every op for its cost (CostOpInterface) and
// predicts its time on one device of a cluster spec (cost/OpTime.h). Ops are
// grouped into layers by module scope (`blocks.3.attn.qkv` is in layer
// `blocks.3`). This is what `cleave cost` prints and what the planner reads.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_PASSES_COSTMODEL_H
#define CLEAVE_PASSES_COSTMODEL_H

#include "cost/ClusterSpec.h"
#include "cost/OpTime.h"
#include "passes/Layers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace mlir::cleave {

struct OpEstimate {
  Operation *op;
  ::cleave::cost::OpCost cost; // the plan's (inference) cost
  /// The plan's forward, and training's backward (getTrainingCost).
  ::cleave::cost::PassTime forward, backward;
};

struct LayerEstimate {
  std::string name;
  int64_t ops = 0;              // ops that launch a kernel
  double parameters = 0;        // trainable parameter elements
  double parameterBytes = 0;    // parameters, buffers and constants, as stored
  double forwardFlops = 0, backwardFlops = 0;
  double forwardBytes = 0, backwardBytes = 0;
  double activationBytes = 0;   // kept for backward (each tensor once)
  double forwardSeconds = 0, backwardSeconds = 0;
  /// Training's forward: the plan's forward plus what only training runs
  /// (dropout masks; CostOpInterface::getTrainingCost). backwardSeconds is
  /// training's backward.
  double trainingForwardSeconds = 0;
  void add(const LayerEstimate &other);
};

struct ModelEstimate {
  std::vector<OpEstimate> ops;
  std::vector<LayerEstimate> layers; // as discoverLayers orders them
  LayerEstimate total;
  double inputBytes = 0;
  /// Most activation bytes live at once in a forward on one device: the
  /// inference working set (the arena of a single-device plan).
  double peakLiveBytes = 0;
};

/// Costs of `func` on `device`. Fails (with a diagnostic) only when the
/// function cannot be analyzed for liveness.
FailureOr<ModelEstimate> estimateModel(func::FuncOp func,
                                       const ::cleave::cost::DeviceSpec &device);

} // namespace mlir::cleave

#endif // CLEAVE_PASSES_COSTMODEL_H
