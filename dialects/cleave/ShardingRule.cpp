//===- ShardingRule.cpp - the replicated rule and the readable form -------===//

#include "dialects/cleave/ShardingRule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir::cleave;

TensorFactors ShardingRule::addFactors(llvm::ArrayRef<int64_t> shape, FactorKind kind) {
  TensorFactors dims;
  for (int64_t size : shape)
    dims.push_back({addFactor(size, kind)});
  return dims;
}

ShardingRule ShardingRule::replicated(llvm::ArrayRef<llvm::ArrayRef<int64_t>> operandShapes,
                                      llvm::ArrayRef<llvm::ArrayRef<int64_t>> resultShapes) {
  ShardingRule rule;
  for (llvm::ArrayRef<int64_t> shape : operandShapes)
    rule.operands.push_back(rule.addFactors(shape, FactorKind::NeedReplication));
  for (llvm::ArrayRef<int64_t> shape : resultShapes)
    rule.results.push_back(rule.addFactors(shape, FactorKind::NeedReplication));
  return rule;
}

namespace {

/// i, j, …, z, then the alphabet's numbering goes on: f26, f27, ….
std::string factorName(int factor) {
  constexpr int first = 'i' - 'a', letters = 'z' - 'i' + 1;
  if (factor < letters)
    return std::string(1, static_cast<char>('i' + factor));
  return "f" + std::to_string(first + factor);
}

void printTensors(llvm::raw_ostream &os, llvm::ArrayRef<TensorFactors> tensors) {
  os << "(";
  llvm::interleaveComma(tensors, os, [&](const TensorFactors &dims) {
    os << "[";
    llvm::interleaveComma(dims, os, [&](const DimFactors &factors) {
      if (factors.empty())
        os << "1";
      llvm::interleave(
          factors, os, [&](int factor) { os << factorName(factor); }, "*");
    });
    os << "]";
  });
  os << ")";
}

} // namespace

std::string ShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  printTensors(os, operands);
  os << " -> ";
  printTensors(os, results);
  for (auto [index, factor] : llvm::enumerate(factors)) {
    os << " " << factorName(static_cast<int>(index)) << "=" << factor.size;
    if (factor.kind == FactorKind::Reduction)
      os << ":reduction";
    else if (factor.kind == FactorKind::NeedReplication)
      os << ":replicated";
  }
  return os.str();
}
