//===- SharedConstants.cpp - constants built in forward, folded once ------===//

#include "compiler/SharedConstants.h"

#include <cstdint>
#include <cstring>
#include <sstream>

namespace cleave::importer {

namespace jit = torch::jit;

bool isSplatView(const at::Tensor &tensor) {
  if (tensor.numel() < 2)
    return false;
  for (int64_t d = 0; d < tensor.dim(); ++d)
    if (tensor.size(d) > 1 && tensor.stride(d) != 0)
      return false;
  return true;
}

bool isSplat(const at::Tensor &tensor) {
  if (tensor.numel() == 0)
    return false;
  if (tensor.numel() == 1 || isSplatView(tensor))
    return true;
  return tensor.eq(tensor.reshape({-1})[0]).all().item<bool>();
}

at::Tensor compactSplat(const at::Tensor &tensor) {
  // Element [0, ..., 0], copied out so the full tensor's storage is freed.
  at::Tensor one = tensor.as_strided({}, {}, tensor.storage_offset()).clone();
  return one.expand(tensor.sizes());
}

namespace {

/// Whether a value of `type` can be written in place: tensors and the
/// containers and objects that may hold them. Numbers, strings, devices and
/// None cannot.
bool canBeWritten(const c10::TypePtr &type) {
  switch (type->kind()) {
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::BoolType:
  case c10::TypeKind::NumberType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::DeviceObjType:
  case c10::TypeKind::LayoutType:
  case c10::TypeKind::ScalarTypeType:
  case c10::TypeKind::MemoryFormatType:
    return false;
  case c10::TypeKind::OptionalType:
    return canBeWritten(type->expectRef<c10::OptionalType>().getElementType());
  case c10::TypeKind::TupleType:
    for (const c10::TypePtr &element : type->containedTypes())
      if (canBeWritten(element))
        return true;
    return false;
  default:
    return true; // tensors, lists, dicts, objects, anything unknown
  }
}

bool mayBeMutated(const jit::Value *value, int depth) {
  if (!canBeWritten(value->type()))
    return false;
  // Deep chains of views and lists are rare: past a few, assume a writer.
  if (depth > 16)
    return true;
  for (const jit::Use &use : value->uses()) {
    const jit::Node *user = use.user;
    const std::string kind = user->kind().toQualString();
    if (kind == "prim::Return") {
      // The graph's output is read, not written; a block's flows on into
      // its If or Loop, which this does not follow.
      if (user->owningBlock()->owningNode())
        return true;
      continue;
    }
    if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct") {
      if (mayBeMutated(user->output(), depth + 1))
        return true;
      continue;
    }
    const c10::FunctionSchema *schema = user->maybeSchema();
    if (!schema || use.offset >= schema->arguments().size())
      return true; // no schema, or a vararg: unknown
    // Only the argument this value is passed as matters: `add_(t, x)` writes
    // t, not x.
    const c10::AliasInfo *alias = schema->arguments()[use.offset].alias_info();
    if (!alias)
      continue;
    if (alias->isWrite() || alias->isWildcardAfter())
      return true;
    // A view aliases its input: writing into the view writes into it.
    for (size_t i = 0; i < schema->returns().size() && i < user->outputs().size(); ++i)
      if (schema->returns()[i].alias_info() && mayBeMutated(user->output(i), depth + 1))
        return true;
  }
  return false;
}

bool encode(const c10::IValue &value, std::string &key) {
  if (value.isNone()) {
    key += 'N';
  } else if (value.isBool()) {
    key += value.toBool() ? "b1" : "b0";
  } else if (value.isInt()) {
    key += 'i' + std::to_string(value.toInt()) + ';';
  } else if (value.isDouble()) {
    double d = value.toDouble();
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    key += 'd' + std::to_string(bits) + ';';
  } else if (value.isString()) {
    const std::string &s = value.toStringRef();
    key += 's' + std::to_string(s.size()) + ':' + s;
  } else if (value.isDevice()) {
    key += 'D' + value.toDevice().str() + ';';
  } else if (value.isTensor()) {
    const at::Tensor &t = value.toTensor();
    if (!t.defined()) {
      key += 'U';
    } else {
      std::ostringstream ptr;
      ptr << static_cast<const void *>(t.unsafeGetTensorImpl());
      key += 'T' + ptr.str() + ';';
    }
  } else if (value.isList()) {
    key += '[';
    for (const c10::IValue &item : value.toListRef())
      if (!encode(item, key))
        return false;
    key += ']';
  } else if (value.isTuple()) {
    key += '(';
    for (const c10::IValue &item : value.toTupleRef().elements())
      if (!encode(item, key))
        return false;
    key += ')';
  } else {
    return false; // generators, objects, futures...: never shared
  }
  return true;
}

} // namespace

bool mayBeMutated(const jit::Value *value) { return mayBeMutated(value, 0); }

std::optional<std::string> foldKey(const jit::Node *node,
                                   const std::vector<c10::IValue> &inputs) {
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema)
    return std::nullopt;
  // The operator and its overload (aten::full, aten::full.names...).
  std::string text = schema->name() + '.' + schema->overload_name() + '|';
  for (const c10::IValue &input : inputs)
    if (!encode(input, text))
      return std::nullopt;
  return text;
}

} // namespace cleave::importer
