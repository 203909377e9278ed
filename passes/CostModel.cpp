//===- CostModel.cpp - Per-op and per-layer cost of a model ---------------===//

#include "passes/CostModel.h"
#include "dialects/cleave/CleaveDialect.h"
#include "passes/Layers.h"
#include "passes/Liveness.h"

#include "llvm/ADT/DenseSet.h"


namespace mlir::cleave {

using ::cleave::runtime::DType;

void LayerEstimate::add(const LayerEstimate &o) {
  ops += o.ops;
  parameters += o.parameters;
  parameterBytes += o.parameterBytes;
  forwardFlops += o.forwardFlops;
  backwardFlops += o.backwardFlops;
  forwardBytes += o.forwardBytes;
  backwardBytes += o.backwardBytes;
  activationBytes += o.activationBytes;
  forwardSeconds += o.forwardSeconds;
  backwardSeconds += o.backwardSeconds;
  trainingForwardSeconds += o.trainingForwardSeconds;
}

namespace {

/// The compute dtype of an op: its first float result's, else f32.
DType computeDType(Operation *op) {
  for (Value v : op->getResults())
    if (auto tensor = dyn_cast<RankedTensorType>(v.getType())) {
      Type e = tensor.getElementType();
      if (e.isBF16())
        return DType::BF16;
      if (e.isF16())
        return DType::F16;
    }
  return DType::F32;
}

} // namespace

FailureOr<ModelEstimate> estimateModel(func::FuncOp func,
                                       const ::cleave::cost::DeviceSpec &device) {
  ModelEstimate model;
  FailureOr<std::vector<BufferInterval>> buffers = computeBufferIntervals(func);
  if (failed(buffers))
    return failure();
  model.peakLiveBytes = static_cast<double>(peakLiveBytes(*buffers));
  for (BlockArgument arg : func.getArguments())
    model.inputBytes += tensorBytes(arg.getType());

  for (const Layer &layer : discoverLayers(func)) {
    LayerEstimate &row = model.layers.emplace_back();
    row.name = layer.name;
    for (Operation *op : layer.params) {
      auto param = cast<ParamOp>(op);
      if (!param.getBuffer())
        row.parameters += llvm::cast<RankedTensorType>(param.getType()).getNumElements();
      row.parameterBytes += tensorBytes(param.getType());
    }
    for (Operation *op : layer.constants)
      row.parameterBytes += tensorBytes(op->getResult(0).getType());
    // Saved tensors count once per layer, however many of its ops read them.
    llvm::DenseSet<Value> saved;
    for (Operation *op : layer.ops) {
      auto costly = cast<CostOpInterface>(op);
      OpEstimate estimate{op, costly.getCost(), {}, {}};
      DType dtype = computeDType(op);
      ::cleave::cost::OpCost training = costly.getTrainingCost();
      estimate.forward = predictPass(device, estimate.cost, estimate.cost.forward, dtype);
      estimate.backward = predictPass(device, training, training.backward, dtype);
      row.trainingForwardSeconds += predictPass(device, training, training.forward, dtype).seconds();
      if (estimate.cost.forward.kernels > 0)
        ++row.ops;
      row.forwardFlops += estimate.cost.forward.flops;
      row.backwardFlops += training.backward.flops;
      row.forwardBytes += estimate.cost.forward.bytesRead + estimate.cost.forward.bytesWritten;
      row.backwardBytes += training.backward.bytesRead + training.backward.bytesWritten;
      row.forwardSeconds += estimate.forward.seconds();
      row.backwardSeconds += estimate.backward.seconds();
      SmallVector<Value> kept;
      costly.getSavedForBackward(kept);
      for (Value v : kept)
        if (!isWeight(v) && saved.insert(v).second)
          row.activationBytes += tensorBytes(v.getType());
      model.ops.push_back(estimate);
    }
  }
  for (const LayerEstimate &row : model.layers)
    model.total.add(row);
  model.total.name = "total";
  return model;
}

} // namespace mlir::cleave
