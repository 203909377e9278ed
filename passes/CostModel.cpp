//===- CostModel.cpp - Per-op and per-layer cost of a model ---------------===//

#include "passes/CostModel.h"
#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "passes/Layers.h"
#include "passes/Liveness.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

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

bool isWeight(Value v) {
  Operation *def = v.getDefiningOp();
  return def && isa<ParamOp, ConstantOp>(def);
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

  std::map<std::string, size_t> layerIndex;
  auto layer = [&](const std::string &name) -> LayerEstimate & {
    auto [it, inserted] = layerIndex.try_emplace(name, model.layers.size());
    if (inserted) {
      model.layers.emplace_back();
      model.layers.back().name = name;
    }
    return model.layers[it->second];
  };
  // Saved tensors count once per layer, however many of its ops read them.
  std::map<std::string, llvm::DenseSet<Value>> savedByLayer;

  func.walk([&](Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      LayerEstimate &row = layer(layerOfParam(param.getName()));
      if (!param.getBuffer())
        row.parameters += llvm::cast<RankedTensorType>(param.getType()).getNumElements();
      row.parameterBytes += tensorBytes(param.getType());
      return;
    }
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      layer(layerOfScope(moduleScope(op->getLoc()))).parameterBytes +=
          tensorBytes(constant.getType());
      return;
    }
    auto costly = dyn_cast<CostOpInterface>(op);
    if (!costly)
      return;
    OpEstimate estimate{op, costly.getCost(), {}, {}};
    DType dtype = computeDType(op);
    estimate.forward = predictPass(device, estimate.cost, estimate.cost.forward, dtype);
    estimate.backward = predictPass(device, estimate.cost, estimate.cost.backward, dtype);
    std::string name = layerOfScope(moduleScope(op->getLoc()));
    LayerEstimate &row = layer(name);
    if (estimate.cost.forward.kernels > 0)
      ++row.ops;
    row.forwardFlops += estimate.cost.forward.flops;
    row.backwardFlops += estimate.cost.backward.flops;
    row.forwardBytes += estimate.cost.forward.bytesRead + estimate.cost.forward.bytesWritten;
    row.backwardBytes += estimate.cost.backward.bytesRead + estimate.cost.backward.bytesWritten;
    row.forwardSeconds += estimate.forward.seconds();
    row.backwardSeconds += estimate.backward.seconds();
    SmallVector<Value> saved;
    costly.getSavedForBackward(saved);
    for (Value v : saved)
      if (!isWeight(v) && savedByLayer[name].insert(v).second)
        row.activationBytes += tensorBytes(v.getType());
    model.ops.push_back(estimate);
  });
  for (const LayerEstimate &row : model.layers)
    model.total.add(row);
  model.total.name = "total";
  return model;
}

} // namespace mlir::cleave
