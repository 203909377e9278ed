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
  std::map<std::string, size_t> firstRun; // scope layer name -> its first run
  std::map<std::string, int> runs;
  llvm::DenseMap<Operation *, size_t> layerOfOp;
  // A layer is a run of consecutive computing ops of one scope layer, so
  // layers follow the program and data flows from earlier layers to later
  // ones; a scope that comes back after others (ops at the root between two
  // modules) starts another run, named `scope#2`, `scope#3`, ...
  std::string current;
  func.walk([&](Operation *op) {
    if (isa<ParamOp, ConstantOp>(op) || !isa<CostOpInterface>(op))
      return;
    std::string name = layerOfScope(moduleScope(op->getLoc()));
    if (layers.empty() || name != current) {
      int run = ++runs[name];
      layers.emplace_back();
      layers.back().name = run == 1 ? name : name + "#" + std::to_string(run);
      firstRun.try_emplace(name, layers.size() - 1);
      current = name;
    }
    layers.back().ops.push_back(op);
    layerOfOp[op] = layers.size() - 1;
  });
  // Weights join the layer their name says, else the layer of their first
  // reader; a weight no op reads goes to a layer of its own, last.
  auto home = [&](Operation *weight, const std::string &name) -> Layer & {
    if (auto it = firstRun.find(name); it != firstRun.end())
      return layers[it->second];
    for (Operation *user : weight->getUsers())
      if (auto it = layerOfOp.find(user); it != layerOfOp.end())
        return layers[it->second];
    firstRun[name] = layers.size();
    layers.emplace_back();
    layers.back().name = name;
    return layers.back();
  };
  func.walk([&](Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op))
      home(op, layerOfParam(param.getName())).params.push_back(op);
    else if (isa<ConstantOp>(op))
      home(op, layerOfScope(moduleScope(op->getLoc()))).constants.push_back(op);
  });

  std::map<std::string, unsigned> kinds;
  for (auto [i, l] : llvm::enumerate(layers)) {
    l.signature = signatureOf(l);
    l.kind = kinds.try_emplace(l.signature, i).first->second;
  }
  return layers;
}

} // namespace mlir::cleave
