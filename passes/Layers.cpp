//===- Layers.cpp - Ops grouped into the model's layers -------------------===//

#include "passes/Layers.h"
#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

#include <map>

namespace mlir::cleave {

std::string layerOfScope(llvm::StringRef scope) {
  if (scope.empty())
    return "(root)";
  llvm::SmallVector<llvm::StringRef> parts;
  scope.split(parts, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    int64_t index;
    if (!parts[i].getAsInteger(10, index))
      return llvm::join(llvm::ArrayRef(parts).take_front(i + 1), ".");
  }
  return parts.front().str();
}

std::string layerOfParam(llvm::StringRef name) {
  auto [owner, leaf] = name.rsplit('.');
  return layerOfScope(leaf.empty() ? "" : owner);
}

namespace {

std::string print(Type type) {
  std::string text;
  llvm::raw_string_ostream(text) << type;
  return text;
}

/// The op's own attributes, without discardable (dotted) annotations such as
/// memory offsets, which differ between otherwise identical layers.
std::string printAttributes(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (NamedAttribute attr : op->getAttrs()) {
    if (attr.getName().getValue().contains('.'))
      continue;
    os << attr.getName().getValue() << "=" << attr.getValue() << ";";
  }
  return text;
}

std::string signatureOf(const Layer &layer) {
  llvm::DenseMap<Value, std::string> local;
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::StringRef prefix = layer.name;
  for (Operation *param : layer.params) {
    auto p = cast<ParamOp>(param);
    llvm::StringRef name = p.getName();
    // A parameter is known by its name inside the layer: `ln_1.weight`.
    if (name.starts_with(prefix) && name.size() > prefix.size() && name[prefix.size()] == '.')
      name = name.drop_front(prefix.size() + 1);
    local[p.getResult()] = ("param " + name + " " + print(p.getType())).str();
  }
  for (auto [index, op] : llvm::enumerate(layer.ops)) {
    os << op->getName() << "(";
    for (Value operand : op->getOperands()) {
      auto it = local.find(operand);
      if (it != local.end())
        os << it->second;
      else if (auto constant = operand.getDefiningOp<ConstantOp>())
        os << "constant " << constant.getValue(); // constants compare by value
      else
        os << "outside " << print(operand.getType());
      os << ",";
    }
    os << ") {" << printAttributes(op) << "} ->";
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      os << " " << print(result.getType());
      local[result] = "%" + std::to_string(index) + "#" + std::to_string(r);
    }
    os << "\n";
  }
  return text;
}

} // namespace

std::vector<Layer> discoverLayers(func::FuncOp func) {
  std::vector<Layer> layers;
  std::map<std::string, size_t> indexOf;
  auto layer = [&](const std::string &name) -> Layer & {
    auto [it, inserted] = indexOf.try_emplace(name, layers.size());
    if (inserted) {
      layers.emplace_back();
      layers.back().name = name;
    }
    return layers[it->second];
  };
  // Params first, so a layer's order follows its first computing op.
  std::vector<Operation *> params;
  func.walk([&](Operation *op) {
    if (isa<ParamOp>(op))
      params.push_back(op);
    else if (isa<ConstantOp>(op))
      layer(layerOfScope(moduleScope(op->getLoc()))).constants.push_back(op);
    else if (isa<CostOpInterface>(op))
      layer(layerOfScope(moduleScope(op->getLoc()))).ops.push_back(op);
  });
  for (Operation *op : params)
    layer(layerOfParam(cast<ParamOp>(op).getName())).params.push_back(op);

  std::map<std::string, unsigned> kinds;
  for (auto [i, l] : llvm::enumerate(layers)) {
    l.signature = signatureOf(l);
    l.kind = kinds.try_emplace(l.signature, i).first->second;
  }
  return layers;
}

} // namespace mlir::cleave
