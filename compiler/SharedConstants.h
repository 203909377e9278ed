//===- SharedConstants.h - constants built in forward, folded once -*- C++ -*-===//
//
// Internal to compiler/. Models often build constants in `forward`: a causal
// mask from `ones(T, T).tril()`, a fill value from `full([], min)`, position
// ids from `arange(T)`. Every layer builds the same ones, so the importer
// folds each distinct (op, inputs) once and hands later layers the same
// result, and holds a big splat in one element instead of T*T.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_COMPILER_SHAREDCONSTANTS_H
#define CLEAVE_COMPILER_SHAREDCONSTANTS_H

#include <torch/csrc/jit/ir/ir.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace cleave::importer {

/// Whether `tensor` holds one value in every element through strides of 0
/// (what `compactSplat` makes, or an `expand` of one element).
bool isSplatView(const at::Tensor &tensor);

/// Whether every element of `tensor` equals its first (false when empty).
bool isSplat(const at::Tensor &tensor);

/// The splat `tensor` with the same shape, dtype and values, held in one
/// element (a stride-0 view of a tensor of its own).
at::Tensor compactSplat(const at::Tensor &tensor);

/// Whether an op of the graph may write into `value`, or into a view or a
/// list that holds it, after it is made. Unknown users count as writers.
bool mayBeMutated(const torch::jit::Value *value);

/// A key that names `node`'s operator and its input values exactly: numbers
/// bit for bit, tensors by identity (the caller keeps them alive). None when
/// an input is of a kind the key cannot name.
std::optional<std::string> foldKey(const torch::jit::Node *node,
                                   const std::vector<c10::IValue> &inputs);

/// The folds done so far, by `foldKey`: their outputs, or nullopt where the
/// op was left to its converter. Holds the inputs so that tensor identities in
/// keys stay unique.
class FoldCache {
public:
  struct Entry {
    std::vector<c10::IValue> inputs;
    std::optional<std::vector<c10::IValue>> outputs;
  };
  const Entry *find(const std::string &key) const {
    auto it = entries.find(key);
    return it == entries.end() ? nullptr : &it->second;
  }
  void insert(std::string key, Entry entry) { entries.emplace(std::move(key), std::move(entry)); }

private:
  std::unordered_map<std::string, Entry> entries;
};

} // namespace cleave::importer

#endif // CLEAVE_COMPILER_SHAREDCONSTANTS_H
