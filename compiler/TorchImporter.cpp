//===- TorchImporter.cpp - walk TorchScript graphs into cleave IR ---------===//
//
// The walker follows the TorchScript graph of `forward` node by node, inlining
// method calls itself so that every op knows its module path. Values known at
// compile time (shape arithmetic, config flags, small constant tensors) are
// evaluated with LibTorch's own kernels; `prim::If` on such values picks its
// branch and `prim::Loop` unrolls. Everything else goes to a converter.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "compiler/TorchLoad.h"
#include "dialects/cleave/Locations.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <nlohmann/json.hpp>
#include <ATen/ScalarOps.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/library.h>
#include <torch/version.h>

#include <fstream>
#include <regex>

using namespace mlir;
namespace jit = torch::jit;

//===----------------------------------------------------------------------===//
// Operators of newer PyTorch releases.
//===----------------------------------------------------------------------===//

namespace {

/// PyTorch 2's scaled_dot_product_attention, as its math path (no dropout,
/// no grouped-query broadcast): declared to LibTorch 1.13 so that files that
/// call it load, and computed when the importer evaluates shapes.
at::Tensor scaledDotProductAttention(const at::Tensor &q, const at::Tensor &k,
                                     const at::Tensor &v, const c10::optional<at::Tensor> &mask,
                                     double dropout, bool causal, c10::optional<double> scale,
                                     bool enableGqa) {
  TORCH_CHECK(dropout == 0, "scaled_dot_product_attention: dropout_p = ", dropout,
              " is not supported");
  TORCH_CHECK(!enableGqa, "scaled_dot_product_attention: enable_gqa is not supported");
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q.mul(s), k.transpose(-2, -1));
  if (causal)
    scores = scores.masked_fill(
        at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril().logical_not(),
        -INFINITY);
  if (mask && mask->defined())
    scores = mask->scalar_type() == at::kBool ? scores.masked_fill(mask->logical_not(), -INFINITY)
                                              : scores.add(*mask);
  return at::matmul(at::softmax(scores, -1), v);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(aten, m) {
  m.def("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? "
        "attn_mask=None, float dropout_p=0.0, bool is_causal=False, *, float? scale=None, "
        "bool enable_gqa=False) -> Tensor",
        torch::dispatch(c10::DispatchKey::CompositeImplicitAutograd,
                        TORCH_FN(scaledDotProductAttention)));
}


namespace cleave::importer {

/// Folded tensors with more elements than this (unless splat) stay as cleave
/// ops on constant operands rather than dense attributes in the IR.
static constexpr int64_t kMaxFoldedElements = 1 << 14;

/// The first line of an exception message (LibTorch appends backtraces).
std::string firstLine(const std::string &text) {
  size_t start = text.find_first_not_of(" \t\n");
  if (start == std::string::npos)
    return "unknown error";
  return text.substr(start, text.find('\n', start) - start);
}

/// A TorchScript load error in one line: its first line, and where in the
/// file's code it points (`File "code/...", line N`), if it says.
std::string loadError(const std::string &text) {
  std::string line = firstLine(text);
  if (!line.empty() && line.back() == '.')
    line.pop_back();
  static const std::regex where("File \"([^\"]+)\", line ([0-9]+)");
  std::smatch m;
  if (std::regex_search(text, m, where))
    line += " (at " + m[1].str() + ":" + m[2].str() + ")";
  if (line.find("Unknown builtin op") != std::string::npos)
    line += ": the file was written by a PyTorch with operators cleave's LibTorch (" +
            std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ") does not know";
  return line;
}


//===----------------------------------------------------------------------===//
// Locations.
//===----------------------------------------------------------------------===//

/// One frame of a recorded Python stack, `FILE(LINE): FUNCTION`, or nullopt
/// for any other line. Parsed by hand: std::regex, run on every node, was a
/// large part of the time an import of a thousand layers spends walking.
static std::optional<std::pair<std::string, unsigned>> parseFrame(std::string_view line) {
  // The function name has no spaces, so the frame's "): " is the last one.
  size_t close = line.rfind("): ");
  if (close == std::string_view::npos)
    return std::nullopt;
  std::string_view function = line.substr(close + 3);
  if (function.empty() || function.find_first_of(" \t\r\n\v\f") != std::string_view::npos)
    return std::nullopt;
  size_t open = close;
  while (open > 0 && line[open - 1] >= '0' && line[open - 1] <= '9')
    --open;
  size_t digits = close - open;
  if (digits == 0 || digits > 9 || open < 2 || line[open - 1] != '(')
    return std::nullopt;
  unsigned number = 0;
  for (char c : line.substr(open, digits))
    number = number * 10 + unsigned(c - '0');
  return std::pair<std::string, unsigned>{std::string(line.substr(0, open - 1)), number};
}

/// Finds the user's frame in a traced node's recorded Python stack: the first
/// frame outside PyTorch's own package (`torch/nn/modules/linear.py` says
/// nothing about the model).
static std::optional<std::pair<std::string, unsigned>>
userFrame(std::string_view stack) {
  std::optional<std::pair<std::string, unsigned>> first;
  size_t start = 0;
  while (start < stack.size()) {
    size_t end = stack.find('\n', start);
    std::string_view line = stack.substr(start, end == std::string_view::npos ? end : end - start);
    start = end == std::string_view::npos ? stack.size() : end + 1;
    auto found = parseFrame(line);
    if (!found)
      continue;
    bool insideTorch = found->first.find("/torch/") != std::string::npos ||
                       found->first.find("/torchvision/") != std::string::npos;
    if (!insideTorch)
      return found;
    if (!first)
      first = found;
  }
  return first;
}

Location Importer::locationOf(jit::Node *node, const std::string &scope) {
  Location fileLoc = UnknownLoc::get(&context);
  jit::SourceRange range = node->sourceRange();
  if (auto generated = range.findSourceRangeThatGenerated())
    range = *generated;
  if (range.source()) {
    // Traced graphs record the Python stack as the range's text.
    if (auto frame = userFrame(range.text().str()))
      fileLoc = FileLineColLoc::get(&context, frame->first, frame->second, 0);
    else if (auto flc = range.file_line_col(); flc && !std::get<0>(*flc).empty())
      fileLoc = FileLineColLoc::get(&context, std::get<0>(*flc),
                                    std::get<1>(*flc), std::get<2>(*flc));
  }
  if (scope.empty())
    return fileLoc;
  return NameLoc::get(StringAttr::get(&context, scope), fileLoc);
}

std::string Importer::describe(Location loc) const {
  return mlir::cleave::describeLocation(loc, "unknown source line");
}

InFlightDiagnostic Importer::error() {
  hadError = true;
  auto diag = emitError(currentLoc);
  if (currentNode)
    diag << currentNode->kind().toQualString() << ": ";
  return diag;
}

//===----------------------------------------------------------------------===//
// Operand access.
//===----------------------------------------------------------------------===//

FailureOr<Type> Importer::elementType(c10::ScalarType dtype) {
  switch (dtype) {
  case c10::ScalarType::Float: return Type(builder.getF32Type());
  case c10::ScalarType::BFloat16: return Type(builder.getBF16Type());
  case c10::ScalarType::Half: return Type(builder.getF16Type());
  case c10::ScalarType::Long: return Type(builder.getI64Type());
  case c10::ScalarType::Int: return Type(builder.getI32Type());
  case c10::ScalarType::Bool: return Type(builder.getI1Type());
  default:
    error() << "dtype " << c10::toString(dtype)
            << " is not supported (cleave handles f32, bf16, f16, i64, i32, i1)";
    return failure();
  }
}

FailureOr<c10::ScalarType> Importer::torchDtype(Type type) {
  if (type.isF32()) return c10::ScalarType::Float;
  if (type.isBF16()) return c10::ScalarType::BFloat16;
  if (type.isF16()) return c10::ScalarType::Half;
  if (type.isInteger(64)) return c10::ScalarType::Long;
  if (type.isInteger(32)) return c10::ScalarType::Int;
  if (type.isInteger(1)) return c10::ScalarType::Bool;
  error() << "no torch dtype for " << type;
  return failure();
}

Value Importer::splat(double value, Type elementType, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elementType);
  Attribute element;
  if (auto floatType = llvm::dyn_cast<FloatType>(elementType)) {
    APFloat apValue(value);
    bool lost;
    apValue.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    element = FloatAttr::get(floatType, apValue);
  } else if (elementType.isInteger(1)) {
    element = builder.getBoolAttr(value != 0);
  } else {
    element = IntegerAttr::get(elementType, int64_t(value));
  }
  return builder.create<mlir::cleave::ConstantOp>(loc(), DenseElementsAttr::get(type, element));
}

FailureOr<Value> Importer::constantTensor(const at::Tensor &input) {
  at::Tensor tensor = input;
  std::vector<int64_t> shape = tensor.sizes().vec();
  // A splat held in one element stays one element.
  bool splat = isSplatView(tensor);
  if (splat)
    tensor = tensor.as_strided({}, {}, tensor.storage_offset());
  // PyTorch's default for Python floats in tensors is f64; cleave computes in
  // f32 and lower, as the model's own f32 tensors would after promotion.
  if (tensor.scalar_type() == c10::ScalarType::Double)
    tensor = tensor.to(c10::ScalarType::Float);
  tensor = tensor.contiguous();
  auto et = elementType(tensor.scalar_type());
  if (failed(et))
    return failure();
  auto type = RankedTensorType::get(shape, *et);
  bool isSplat = splat || ::cleave::importer::isSplat(tensor);
  DenseElementsAttr attr;
  if (et->isInteger(1)) {
    std::vector<char> bits(tensor.data_ptr<bool>(),
                           tensor.data_ptr<bool>() + (isSplat ? 1 : tensor.numel()));
    llvm::SmallVector<bool> values(bits.begin(), bits.end());
    attr = isSplat ? DenseElementsAttr::get(type, values[0])
                   : DenseElementsAttr::get(type, values);
  } else {
    size_t bytes = (isSplat ? 1 : tensor.numel()) * tensor.element_size();
    attr = DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(static_cast<const char *>(tensor.data_ptr()), bytes));
  }
  return Value(builder.create<mlir::cleave::ConstantOp>(loc(), attr));
}

FailureOr<Value> Importer::tensor(const Val &val) {
  if (val.complex) {
    error() << "takes a complex tensor, which cleave holds only between stft or "
               "view_as_complex and view_as_real or istft";
    return failure();
  }
  if (val.isTensor())
    return val.tensor;
  if (val.isConstant() && val.constant.isTensor())
    return constantTensor(val.constant.toTensor());
  if (val.isConstant() && (val.constant.isDouble() || val.constant.isInt() ||
                           val.constant.isBool())) {
    // A Python number where a tensor is expected: a 0-d tensor of its type.
    return constantTensor(at::scalar_to_tensor(val.constant.toScalar()));
  }
  error() << "expected a tensor operand";
  return failure();
}

FailureOr<int64_t> Importer::integer(const Val &val) {
  if (val.isConstant()) {
    if (val.constant.isInt())
      return val.constant.toInt();
    if (val.constant.isBool())
      return int64_t(val.constant.toBool());
    if (val.constant.isTensor() && val.constant.toTensor().numel() == 1 &&
        !c10::isFloatingType(val.constant.toTensor().scalar_type()))
      return val.constant.toTensor().item<int64_t>();
  }
  if (val.kind == Val::Kind::Dynamic)
    error() << "needs an integer known at compile time, but it depends on tensor "
               "data read at "
            << val.path;
  else
    error() << "expected a constant integer operand";
  return failure();
}

FailureOr<double> Importer::real(const Val &val) {
  if (val.isConstant()) {
    if (val.constant.isDouble())
      return val.constant.toDouble();
    if (val.constant.isInt())
      return double(val.constant.toInt());
    if (val.constant.isBool())
      return double(val.constant.toBool());
    if (val.constant.isTensor() && val.constant.toTensor().numel() == 1)
      return val.constant.toTensor().item<double>();
  }
  error() << "expected a constant number operand";
  return failure();
}

FailureOr<bool> Importer::boolean(const Val &val) {
  if (val.isConstant() && val.constant.isBool())
    return val.constant.toBool();
  auto value = integer(val);
  if (failed(value))
    return failure();
  return *value != 0;
}

FailureOr<std::vector<int64_t>> Importer::intList(const Val &val) {
  if (val.isConstant() && val.constant.isIntList())
    return val.constant.toIntVector();
  if (val.isConstant() && val.constant.isInt())
    return std::vector<int64_t>{val.constant.toInt()};
  auto items = list(val);
  if (failed(items))
    return failure();
  std::vector<int64_t> result;
  for (const Val &item : *items) {
    auto value = integer(item);
    if (failed(value))
      return failure();
    result.push_back(*value);
  }
  return result;
}

FailureOr<std::vector<Val>> Importer::list(const Val &val) {
  if (val.kind == Val::Kind::List)
    return val.items;
  if (val.isConstant() && val.constant.isList()) {
    std::vector<Val> items;
    for (const c10::IValue &item : val.constant.toListRef())
      items.push_back(Val::ofConstant(item));
    return items;
  }
  if (val.isConstant() && val.constant.isTuple()) {
    std::vector<Val> items;
    for (const c10::IValue &item : val.constant.toTupleRef().elements())
      items.push_back(Val::ofConstant(item));
    return items;
  }
  error() << "expected a list operand";
  return failure();
}

Value Importer::cast(Value value, Type elementType) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  // A cast between static shapes of one size always verifies.
  return builder.create<mlir::cleave::CastOp>(loc(), type.clone(elementType), value);
}

Value Importer::reshape(Value value, ArrayRef<int64_t> shape) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return builder.create<mlir::cleave::ReshapeOp>(loc(), type.clone(shape), value);
}

//===----------------------------------------------------------------------===//
// Type promotion, as PyTorch's ResultTypeState: tensors with dims outrank
// 0-d tensors, which outrank Python numbers, unless a lower group brings a
// higher category (bool < integer < floating).
//===----------------------------------------------------------------------===//

namespace {
enum class Category { None, Bool, Integer, Float };

Category categoryOf(c10::ScalarType dtype) {
  if (dtype == c10::ScalarType::Bool)
    return Category::Bool;
  return c10::isFloatingType(dtype) ? Category::Float : Category::Integer;
}

struct PromotionGroup {
  std::optional<c10::ScalarType> dtype;
  void add(c10::ScalarType other) {
    dtype = dtype ? c10::promoteTypes(*dtype, other) : other;
  }
};

std::optional<c10::ScalarType> combine(std::optional<c10::ScalarType> higher,
                                       std::optional<c10::ScalarType> lower) {
  if (!higher)
    return lower;
  if (!lower)
    return higher;
  if (categoryOf(*higher) == Category::Float)
    return higher;
  if (categoryOf(*lower) > categoryOf(*higher))
    return c10::promoteTypes(*higher, *lower);
  return higher;
}
} // namespace

FailureOr<std::vector<Value>> Importer::promote(ArrayRef<Val> operands,
                                                bool integerToFloat) {
  PromotionGroup dims, zeroDim, numbers;
  for (const Val &val : operands) {
    if (val.isTensor()) {
      auto type = llvm::cast<RankedTensorType>(val.tensor.getType());
      auto dtype = torchDtype(type.getElementType());
      if (failed(dtype))
        return failure();
      (type.getRank() ? dims : zeroDim).add(*dtype);
    } else if (val.isConstant() && val.constant.isTensor()) {
      const at::Tensor &t = val.constant.toTensor();
      auto dtype = t.scalar_type() == c10::ScalarType::Double ? c10::ScalarType::Float
                                                             : t.scalar_type();
      (t.dim() ? dims : zeroDim).add(dtype);
    } else if (val.isConstant() && val.constant.isDouble()) {
      numbers.add(c10::ScalarType::Float);
    } else if (val.isConstant() && val.constant.isInt()) {
      numbers.add(c10::ScalarType::Long);
    } else if (val.isConstant() && val.constant.isBool()) {
      numbers.add(c10::ScalarType::Bool);
    } else {
      error() << "expected a tensor or number operand";
      return failure();
    }
  }
  auto dtype = combine(dims.dtype, combine(zeroDim.dtype, numbers.dtype));
  if (integerToFloat && categoryOf(*dtype) != Category::Float)
    dtype = c10::ScalarType::Float;
  auto et = elementType(*dtype);
  if (failed(et))
    return failure();
  std::vector<Value> values;
  for (const Val &val : operands) {
    if (val.isConstant() && !val.constant.isTensor()) {
      auto number = real(val);
      if (failed(number))
        return failure();
      values.push_back(splat(*number, *et));
      continue;
    }
    auto value = tensor(val);
    if (failed(value))
      return failure();
    values.push_back(cast(*value, *et));
  }
  return values;
}

//===----------------------------------------------------------------------===//
// The walk.
//===----------------------------------------------------------------------===//

FailureOr<Val> Importer::getAttr(jit::Node *node, const Val &owner) {
  const std::string &name = node->s(c10::attr::name);
  if (owner.kind != Val::Kind::Module) {
    error() << "attribute '" << name << "' read from something that is not a module";
    return failure();
  }
  const jit::Object &object = *owner.module;
  std::string path = owner.path.empty() ? name : owner.path + "." + name;
  c10::IValue value = object.attr(name);
  if (value.isObject()) {
    Val module;
    module.kind = Val::Kind::Module;
    module.module = std::make_shared<jit::Object>(value.toObject());
    module.path = path;
    return module;
  }
  if (!value.isTensor())
    return Val::ofConstant(value); // config attributes: ints, bools, lists

  // A parameter or buffer: one cleave.param per tensor, so tied weights
  // (the same tensor under two paths) stay one value.
  const at::Tensor &data = value.toTensor();
  const void *identity = data.unsafeGetTensorImpl();
  if (auto it = paramsByTensor.find(identity); it != paramsByTensor.end()) {
    if (auto assign = assigns.find(it->second); assign != assigns.end())
      return Val::ofTensor(assign->second->getOperand(1)); // updated in place before
    return Val::ofTensor(it->second);
  }
  auto et = elementType(data.scalar_type());
  if (failed(et))
    return failure();
  auto slot = object.type()->findAttributeSlot(name);
  bool isBuffer = !slot || !object.type()->is_parameter(*slot);
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(entry);
  // The param's location is its owning module's scope, like the ops that use it.
  Location paramLoc = UnknownLoc::get(&context);
  if (!owner.path.empty())
    paramLoc = NameLoc::get(builder.getStringAttr(owner.path), paramLoc);
  auto param = builder.create<mlir::cleave::ParamOp>(paramLoc,
      RankedTensorType::get(data.sizes().vec(), *et), path, isBuffer);
  // A parameter with requires_grad=False is not trained (passes/Training.cpp,
  // isTrainable); it still is a parameter of the state_dict.
  if (!isBuffer && !data.requires_grad())
    param->setAttr("frozen", builder.getUnitAttr());
  paramsByTensor[identity] = param;

  ParamData record;
  record.shape = data.sizes().vec();
  auto spelling = [&](Type type) -> std::string {
    std::string s;
    llvm::raw_string_ostream os(s);
    if (type.isInteger(1)) return "i1";
    type.print(os);
    return s;
  };
  record.dtype = spelling(*et);
  record.bytes = size_t(data.numel()) * data.element_size();
  if (data.is_meta()) {
    result.meta = true;
  } else {
    auto owned = std::make_shared<at::Tensor>(data.contiguous());
    record.data = owned->data_ptr();
    record.owner = owned;
  }
  result.params[path] = std::move(record);
  return Val::ofTensor(param);
}

std::optional<std::string> Importer::paramName(const at::Tensor &tensor) const {
  auto it = paramsByTensor.find(tensor.unsafeGetTensorImpl());
  if (it == paramsByTensor.end())
    return std::nullopt;
  return it->second.getDefiningOp<mlir::cleave::ParamOp>().getName().str();
}

std::optional<std::vector<Val>> Importer::tryFold(jit::Node *node,
                                                  ArrayRef<Val> inputs) {
  if (!node->maybeOperator() || node->isNondeterministic() || node->hasSideEffects())
    return std::nullopt;
  std::vector<c10::IValue> args;
  for (const Val &val : inputs) {
    if (!val.isConstant())
      return std::nullopt;
    args.push_back(val.constant);
  }
  // Every layer of a model that builds its mask in forward folds the same
  // ops on the same constants: fold each once and share the outputs, unless
  // something may write into them, or into an input (whose identity in the
  // key would then no longer say what it holds).
  const c10::FunctionSchema *schema = node->maybeSchema();
  auto written = [](const jit::Value *v) { return mayBeMutated(v); };
  bool shared = schema && !schema->is_mutable() && llvm::none_of(node->outputs(), written) &&
                llvm::none_of(node->inputs(), written);
  std::optional<std::string> key = shared ? foldKey(node, args) : std::nullopt;
  auto asVals = [](const std::optional<std::vector<c10::IValue>> &outputs)
      -> std::optional<std::vector<Val>> {
    if (!outputs)
      return std::nullopt;
    std::vector<Val> vals;
    for (const c10::IValue &value : *outputs)
      vals.push_back(Val::ofConstant(value));
    return vals;
  };
  if (key)
    if (const FoldCache::Entry *entry = foldCache.find(*key))
      return asVals(entry->outputs);
  auto outputs = runFold(node, args);
  if (key)
    foldCache.insert(std::move(*key), {std::move(args), outputs});
  return asVals(outputs);
}

std::optional<std::vector<c10::IValue>> Importer::runFold(jit::Node *node,
                                                          const std::vector<c10::IValue> &args) {
  jit::Stack stack(args);
  try {
    node->getOperation()(stack);
  } catch (const std::exception &) {
    // An op that cannot take a one-element splat (a `view` of it) gets the
    // full tensor; otherwise the converter reports a precise error.
    bool compacted = false;
    stack = args;
    for (c10::IValue &value : stack)
      if (value.isTensor() && isSplatView(value.toTensor())) {
        value = value.toTensor().contiguous();
        compacted = true;
      }
    if (!compacted)
      return std::nullopt;
    try {
      node->getOperation()(stack);
    } catch (const std::exception &) {
      return std::nullopt;
    }
  }
  if (stack.size() != node->outputs().size())
    return std::nullopt;
  for (size_t i = 0; i < stack.size(); ++i) {
    c10::IValue &value = stack[i];
    if (!value.isTensor() || !value.toTensor().defined() ||
        value.toTensor().numel() <= kMaxFoldedElements)
      continue;
    // Big non-splat tensors stay ops when a converter can express them.
    const at::Tensor &t = value.toTensor();
    bool splat = isSplat(t);
    if (!splat && findConverter(node->kind().toQualString()))
      return std::nullopt;
    // A big splat is held in one element (a causal mask's ones(T, T) in
    // each of a thousand layers), unless something writes into it.
    if (splat && !isSplatView(t) && !mayBeMutated(node->output(i)))
      value = compactSplat(t);
  }
  return std::vector<c10::IValue>(stack.begin(), stack.end());
}

FailureOr<std::vector<Val>> Importer::importIf(jit::Node *node, ArrayRef<Val> inputs,
                                               const std::string &scope) {
  if (inputs[0].kind == Val::Kind::Dynamic || inputs[0].isTensor()) {
    error() << "data-dependent control flow is not supported: this `if` "
               "depends on tensor values"
            << (inputs[0].kind == Val::Kind::Dynamic ? " read at " + inputs[0].path : "")
            << "; only conditions decided by constants or static shapes fold";
    return failure();
  }
  auto condition = boolean(inputs[0]);
  if (failed(condition))
    return failure();
  return importBlock(node->blocks()[*condition ? 0 : 1], {}, scope);
}

FailureOr<std::vector<Val>> Importer::importLoop(jit::Node *node, ArrayRef<Val> inputs,
                                                 const std::string &scope) {
  // prim::Loop(max_trip_count, initial_condition, carried...) with a body
  // taking (iteration, carried...) and returning (condition, carried...).
  static constexpr int64_t kMaxUnroll = 1 << 16;
  auto dataDependent = [&](const Val &val) {
    if (val.kind != Val::Kind::Dynamic && !val.isTensor())
      return false;
    error() << "data-dependent control flow is not supported: this loop's trip "
               "count or condition depends on tensor values";
    return true;
  };
  if (dataDependent(inputs[0]) || dataDependent(inputs[1]))
    return failure();
  auto tripCount = integer(inputs[0]);
  auto condition = boolean(inputs[1]);
  if (failed(tripCount) || failed(condition))
    return failure();
  std::vector<Val> carried(inputs.begin() + 2, inputs.end());
  Location loopLoc = currentLoc;
  for (int64_t i = 0; *condition && i < *tripCount; ++i) {
    if (i == kMaxUnroll) {
      currentLoc = loopLoc;
      error() << "loop runs more than " << kMaxUnroll << " iterations; cleave unrolls loops";
      return failure();
    }
    std::vector<Val> bodyInputs{Val::ofConstant(c10::IValue(i))};
    bodyInputs.insert(bodyInputs.end(), carried.begin(), carried.end());
    auto outputs = importBlock(node->blocks()[0], bodyInputs, scope);
    if (failed(outputs))
      return failure();
    currentLoc = loopLoc;
    currentNode = node;
    if (dataDependent((*outputs)[0]))
      return failure();
    condition = boolean((*outputs)[0]);
    if (failed(condition))
      return failure();
    carried.assign(outputs->begin() + 1, outputs->end());
  }
  return carried;
}

std::optional<int64_t> Importer::batchesTracked(Value value) const {
  auto param = value.getDefiningOp<mlir::cleave::ParamOp>();
  int64_t increments = 0;
  for (auto &[buffer, assign] : assigns)
    if (assign->getOperand(1) == value) {
      param = buffer.getDefiningOp<mlir::cleave::ParamOp>();
      increments = 1;
    }
  if (!param || !(param.getName() == "num_batches_tracked" ||
                  param.getName().ends_with(".num_batches_tracked")))
    return std::nullopt;
  auto it = result.params.find(param.getName().str());
  if (it == result.params.end() || !it->second.data || it->second.dtype != "i64")
    return std::nullopt;
  return *static_cast<const int64_t *>(it->second.data) + increments;
}

/// Tensor-to-scalar reads: their result depends on data, not shapes.
static bool readsTensorData(jit::Node *node) {
  static const std::set<std::string> kinds = {
      "aten::Bool", "aten::Int", "aten::Float", "aten::item", "aten::ScalarImplicit",
      "aten::is_nonzero", "aten::tolist"};
  return kinds.count(node->kind().toQualString());
}

FailureOr<std::vector<Val>> Importer::convert(jit::Node *node, std::vector<Val> &inputs,
                                              const std::string &scope) {
  const std::string kind = node->kind().toQualString();
  if (node->kind() == c10::prim::Constant) {
    // Function constants (`F.batch_norm` called from scripted code) have no
    // IValue; prim::CallFunction reads the function from the value's type.
    std::optional<c10::IValue> constant = jit::toIValue(node->output());
    if (!constant)
      return std::vector<Val>{Val::ofConstant(c10::IValue())};
    c10::IValue value = *constant;
    // Meta-device exports bake `device='meta'` into constants; values cleave
    // evaluates at compile time live on the CPU.
    if (value.isDevice())
      value = c10::IValue(c10::Device(c10::kCPU));
    return std::vector<Val>{Val::ofConstant(value)};
  }
  if (node->kind() == c10::prim::GetAttr) {
    auto attr = getAttr(node, inputs[0]);
    if (failed(attr))
      return failure();
    return std::vector<Val>{*attr};
  }
  if (node->kind() == c10::prim::CallMethod) {
    if (inputs[0].kind != Val::Kind::Module) {
      error() << "method call on something that is not a module";
      return failure();
    }
    const jit::Object &object = *inputs[0].module;
    auto method = object.find_method(node->s(c10::attr::name));
    if (!method) {
      error() << "module " << inputs[0].path << " has no method "
              << node->s(c10::attr::name);
      return failure();
    }
    auto caller = currentModule;
    currentModule = inputs[0].module;
    auto outputs = importGraph(*jit::toGraphFunction(method->function()).graph(), inputs,
                               inputs[0].path);
    currentModule = caller;
    return outputs;
  }
  if (node->kind() == c10::prim::CallFunction) {
    auto function = node->input(0)->type()->expect<c10::FunctionType>()->function();
    return importGraph(*jit::toGraphFunction(*function).graph(),
                       {inputs.begin() + 1, inputs.end()}, scope);
  }
  if (node->kind() == c10::prim::If)
    return importIf(node, inputs, scope);
  if (node->kind() == c10::prim::Loop)
    return importLoop(node, inputs, scope);
  if (node->kind() == c10::prim::RaiseException) {
    std::string message = inputs.size() && inputs[0].isConstant() &&
                                  inputs[0].constant.isString()
                              ? inputs[0].constant.toStringRef()
                              : "an exception";
    error() << "the model raises for these input shapes: " << firstLine(message);
    return failure();
  }

  // A complex operand goes to the ops that know complex tensors.
  if (llvm::any_of(inputs, [](const Val &v) { return v.complex; }))
    return convertComplex(*this, node, kind, inputs);

  // Shape queries on imported tensors fold to constants.
  if (!inputs.empty() && inputs[0].isTensor()) {
    auto type = llvm::cast<RankedTensorType>(inputs[0].tensor.getType());
    if (kind == "aten::size" || kind == "prim::shape" || kind == "aten::dim" ||
        kind == "aten::numel" || kind == "prim::dtype" || kind == "prim::device" ||
        kind == "aten::is_floating_point" || kind == "prim::is_cuda" ||
        kind == "prim::requires_grad" || kind == "prim::layout") {
      std::vector<int64_t> shape(type.getShape());
      c10::IValue value;
      if (kind == "aten::size" && inputs.size() == 2) {
        auto dim = integer(inputs[1]);
        if (failed(dim))
          return failure();
        int64_t d = *dim < 0 ? *dim + type.getRank() : *dim;
        if (d < 0 || d >= type.getRank()) {
          error() << "dim " << *dim << " is out of range for " << type;
          return failure();
        }
        value = shape[d];
      } else if (kind == "aten::size" || kind == "prim::shape") {
        value = c10::IValue(shape);
      } else if (kind == "aten::dim") {
        value = type.getRank();
      } else if (kind == "aten::numel") {
        value = type.getNumElements();
      } else if (kind == "prim::dtype") {
        auto dtype = torchDtype(type.getElementType());
        if (failed(dtype))
          return failure();
        value = int64_t(*dtype);
      } else if (kind == "prim::device") {
        value = c10::Device(c10::kCPU);
      } else if (kind == "aten::is_floating_point") {
        value = llvm::isa<FloatType>(type.getElementType());
      } else if (kind == "prim::layout") {
        value = int64_t(c10::kStrided);
      } else {
        value = false;
      }
      return std::vector<Val>{Val::ofConstant(value)};
    }
    if (readsTensorData(node)) {
      if (auto count = batchesTracked(inputs[0].tensor); count && kind == "aten::Float")
        return std::vector<Val>{Val::ofConstant(c10::IValue(double(*count)))};
      Val dynamic;
      dynamic.kind = Val::Kind::Dynamic;
      dynamic.path = describe(currentLoc);
      return std::vector<Val>(node->outputs().size(), dynamic);
    }
  }

  for (const Val &val : inputs) {
    if (val.kind != Val::Kind::Dynamic)
      continue;
    error() << "uses a scalar read from tensor data at " << val.path
            << "; cleave needs shapes and control flow known at compile time";
    return failure();
  }

  if (auto folded = tryFold(node, inputs))
    return *folded;

  // The interpreter builds lists and tuples itself (no operator to fold
  // with): constant ones become constant IValues here.
  bool allConstant = llvm::all_of(inputs, [](const Val &v) { return v.isConstant(); });
  if (allConstant && kind == "prim::ListConstruct") {
    auto listType = node->output()->type()->expect<c10::ListType>();
    c10::impl::GenericList items(listType->getElementType());
    for (const Val &val : inputs)
      items.push_back(val.constant);
    return std::vector<Val>{Val::ofConstant(c10::IValue(items))};
  }
  if (allConstant && kind == "prim::TupleConstruct") {
    std::vector<c10::IValue> items;
    for (const Val &val : inputs)
      items.push_back(val.constant);
    return std::vector<Val>{Val::ofConstant(c10::ivalue::Tuple::create(std::move(items)))};
  }

  // Containers of imported values.
  if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct")
    return std::vector<Val>{Val::ofList(inputs)};
  if (kind == "prim::ListUnpack" || kind == "prim::TupleUnpack") {
    auto items = list(inputs[0]);
    if (failed(items))
      return failure();
    if (items->size() != node->outputs().size()) {
      error() << "unpacks " << node->outputs().size() << " values from a list of "
              << items->size();
      return failure();
    }
    return *items;
  }
  if (kind == "aten::__getitem__" || kind == "prim::TupleIndex" ||
      kind == "aten::len") {
    auto items = list(inputs[0]);
    if (failed(items))
      return failure();
    if (kind == "aten::len")
      return std::vector<Val>{Val::ofConstant(int64_t(items->size()))};
    auto index = integer(inputs[1]);
    if (failed(index))
      return failure();
    int64_t i = *index < 0 ? *index + int64_t(items->size()) : *index;
    if (i < 0 || i >= int64_t(items->size())) {
      error() << "index " << *index << " is out of range for a list of "
              << items->size();
      return failure();
    }
    return std::vector<Val>{(*items)[i]};
  }
  if (kind == "prim::unchecked_cast" || kind == "aten::list")
    return std::vector<Val>{inputs[0]};

  // Tensor ops. In-place variants (`relu_`) compute the same value and
  // rebind their first operand, which they mutate.
  std::string base = kind;
  bool inPlace = base.size() > 1 && base.back() == '_' && base.rfind("__") != base.size() - 2;
  if (inPlace)
    base.pop_back();
  const Converter *converter = findConverter(base);
  if (!converter)
    return failure(); // the caller records the unsupported kind
  auto outputs = (*converter)(*this, node, inputs);
  if (failed(outputs))
    return failure();
  if (outputs->size() != node->outputs().size()) {
    error() << "converter produced " << outputs->size() << " values for "
            << node->outputs().size() << " outputs";
    return failure();
  }
  if (inPlace) {
    if (failed(updateInPlace(inputs[0], (*outputs)[0])))
      return failure();
    env[node->input(0)] = (*outputs)[0];
    // A view mutated in place (`mask[a:b, c:d] = k` traces as slice, slice,
    // fill_) changes its base: slice_scatter / select_scatter write the new
    // view back, up the chain of views. (A view of the base taken before the
    // mutation and read after it keeps the old value.)
    const jit::Value *target = node->input(0);
    Val value = (*outputs)[0];
    for (auto it = viewOf.find(target); it != viewOf.end(); it = viewOf.find(target)) {
      jit::Node *view = it->second;
      const jit::Value *base = view->input(0);
      std::vector<Val> args = {env[base], value};
      for (size_t i = 1; i < view->inputs().size(); ++i)
        args.push_back(env[view->input(i)]);
      const bool slice = view->kind().toQualString() == std::string("aten::slice");
      auto written =
          (*findConverter(slice ? "aten::slice_scatter" : "aten::select_scatter"))(*this, view, args);
      if (failed(written) || failed(updateInPlace(env[base], written->front())))
        return failure();
      value = written->front();
      env[base] = value;
      target = base;
    }
  } else if (base == "aten::slice" || base == "aten::select") {
    viewOf[node->output(0)] = node;
  }
  return outputs;
}

/// An in-place op on a parameter or buffer of the model (a batch norm's
/// `num_batches_tracked.add_(1)`): the graph reads the new value from then on
/// (the caller rebinds it). Inference computes with the weights as they are,
/// so the update is dropped; a training step keeps it as `cleave.assign`,
/// which writes the buffer once per step.
LogicalResult Importer::updateInPlace(const Val &target, const Val &value) {
  if (!training || !target.isTensor() || !value.isTensor())
    return success();
  // The target is the buffer itself or its value after an earlier update.
  mlir::cleave::ParamOp param = target.tensor.getDefiningOp<mlir::cleave::ParamOp>();
  for (auto &[buffer, assign] : assigns)
    if (assign->getOperand(1) == target.tensor)
      param = buffer.getDefiningOp<mlir::cleave::ParamOp>();
  if (!param)
    return success();
  if (!param.getBuffer()) {
    error() << "updates the parameter '" << param.getName()
            << "' in place; training cannot combine that with the optimizer's update";
    return failure();
  }
  Value updated = value.tensor;
  if (updated.getType() != param.getType()) {
    auto type = llvm::cast<RankedTensorType>(param.getType());
    if (llvm::cast<RankedTensorType>(updated.getType()).getShape() != type.getShape()) {
      error() << "updates the buffer '" << param.getName() << "' in place with a value of type "
              << updated.getType() << "; the buffer is " << type;
      return failure();
    }
    updated = cast(updated, type.getElementType());
  }
  auto assign = builder.create<mlir::cleave::AssignOp>(loc(), param.getResult(), updated);
  if (failed(verify(assign))) {
    assign->erase();
    hadError = true;
    return failure();
  }
  // One write per step, of the last value: a module called twice (two
  // increments) keeps only the second assign.
  auto [it, inserted] = assigns.try_emplace(param.getResult(), assign);
  if (!inserted) {
    it->second->erase();
    it->second = assign;
  }
  return success();
}

LogicalResult Importer::importNode(jit::Node *node, const std::string &scope) {
  std::vector<Val> inputs;
  bool poisoned = false;
  for (jit::Value *input : node->inputs()) {
    auto it = env.find(input);
    if (it == env.end()) {
      error() << "internal: value %" << input->debugName() << " used before it is defined";
      return failure();
    }
    inputs.push_back(it->second);
    poisoned |= it->second.kind == Val::Kind::Poison;
  }
  currentNode = node;
  currentLoc = locationOf(node, scope);
  const std::string kind = node->kind().toQualString();

  auto recordUnsupported = [&] {
    auto &entry = unsupported[kind];
    if (entry.count++ == 0)
      entry.firstAt = describe(currentLoc);
  };
  bool known = node->kind().is_prim() || findConverter(kind) ||
               (kind.back() == '_' && findConverter(kind.substr(0, kind.size() - 1)));
  if (poisoned) {
    // Downstream of an unsupported op: count unsupported kinds, skip the rest.
    if (!known && !tryFold(node, inputs))
      recordUnsupported();
    for (jit::Value *output : node->outputs())
      env[output] = Val::poison();
    return success();
  }
  auto outputs = convert(node, inputs, scope);
  if (failed(outputs)) {
    if (hadError)
      return failure();
    recordUnsupported();
    for (jit::Value *output : node->outputs())
      env[output] = Val::poison();
    return success();
  }
  for (auto [output, val] : llvm::zip(node->outputs(), *outputs))
    env[output] = val;
  return success();
}

FailureOr<std::vector<Val>> Importer::importBlock(jit::Block *block,
                                                  std::vector<Val> inputs,
                                                  const std::string &scope) {
  for (auto [input, val] : llvm::zip(block->inputs(), inputs))
    env[input] = val;
  for (jit::Node *node : block->nodes())
    if (failed(importNode(node, scope)))
      return failure();
  std::vector<Val> outputs;
  for (jit::Value *output : block->outputs())
    outputs.push_back(env.at(output));
  return outputs;
}

FailureOr<std::vector<Val>> Importer::importGraph(jit::Graph &graph,
                                                  std::vector<Val> inputs,
                                                  const std::string &scope) {
  if (inputs.size() != graph.inputs().size()) {
    error() << "call passes " << inputs.size() << " arguments to a graph of "
            << graph.inputs().size() << " inputs";
    return failure();
  }
  return importBlock(graph.block(), std::move(inputs), scope);
}

} // namespace cleave::importer

//===----------------------------------------------------------------------===//
// Entry point.
//===----------------------------------------------------------------------===//

namespace cleave {

using importer::firstLine;
using importer::Importer;
using importer::Val;

namespace {
/// Input specs recorded by the export in the model file's `cleave.json`.
LogicalResult readRecordedInputs(const std::string &text, std::vector<InputSpec> &specs,
                                 std::string &error) {
  try {
    auto json = nlohmann::json::parse(text);
    for (const auto &input : json.at("inputs")) {
      InputSpec spec;
      spec.name = input.at("name").get<std::string>();
      spec.shape = input.at("shape").get<std::vector<int64_t>>();
      spec.dtype = input.value("dtype", "f32");
      if (!isKnownDtype(spec.dtype)) {
        error = "cleave.json: input '" + spec.name + "' has unknown dtype '" +
                spec.dtype + "'";
        return failure();
      }
      specs.push_back(spec);
    }
  } catch (const std::exception &e) {
    error = std::string("cleave.json in the model is malformed: ") + firstLine(e.what());
    return failure();
  }
  return success();
}

Type elementTypeOf(Builder &builder, const std::string &dtype) {
  if (dtype == "f32") return builder.getF32Type();
  if (dtype == "bf16") return builder.getBF16Type();
  if (dtype == "f16") return builder.getF16Type();
  if (dtype == "i64") return builder.getI64Type();
  if (dtype == "i32") return builder.getI32Type();
  return builder.getI1Type();
}

/// The data of a parameter or buffer, as ImportedModel records it.
ParamData paramDataOf(const at::Tensor &tensor) {
  ParamData record;
  record.shape = tensor.sizes().vec();
  switch (tensor.scalar_type()) {
  case c10::ScalarType::Float: record.dtype = "f32"; break;
  case c10::ScalarType::BFloat16: record.dtype = "bf16"; break;
  case c10::ScalarType::Half: record.dtype = "f16"; break;
  case c10::ScalarType::Long: record.dtype = "i64"; break;
  case c10::ScalarType::Int: record.dtype = "i32"; break;
  case c10::ScalarType::Bool: record.dtype = "i1"; break;
  default: record.dtype = c10::toString(tensor.scalar_type()); break;
  }
  record.bytes = size_t(tensor.numel()) * tensor.element_size();
  if (!tensor.is_meta()) {
    auto owned = std::make_shared<at::Tensor>(tensor.contiguous());
    record.data = owned->data_ptr();
    record.owner = owned;
  }
  return record;
}

/// Appends the state_dict entries of `object` under `prefix`, as
/// `nn.Module.state_dict` walks a scripted module: its parameters, its
/// buffers, then its submodules, each in the order of the module's slots
/// (registration order). Parameters and buffers that are None are skipped.
void appendStateDict(const Importer &imp, const c10::intrusive_ptr<c10::ivalue::Object> &object,
                     const std::string &prefix, std::vector<StateDictItem> &out) {
  const c10::ClassTypePtr &type = object->type();
  size_t slots = type->numAttributes();
  auto add = [&](size_t i) {
    StateDictItem item;
    item.name = prefix + type->getAttributeName(i);
    const at::Tensor &tensor = object->getSlot(i).toTensor();
    if (auto name = imp.paramName(tensor))
      item.param = *name;
    item.data = paramDataOf(tensor);
    out.push_back(std::move(item));
  };
  for (size_t i = 0; i < slots; ++i)
    if (type->is_parameter(i) && object->getSlot(i).isTensor())
      add(i);
  for (size_t i = 0; i < slots; ++i)
    if (type->is_buffer(i) && object->getSlot(i).isTensor())
      add(i);
  for (size_t i = 0; i < slots; ++i) {
    const c10::IValue &slot = object->getSlot(i);
    if (slot.isObject() && slot.toObjectRef().type()->is_module())
      appendStateDict(imp, slot.toObject(), prefix + type->getAttributeName(i) + ".", out);
  }
}

std::vector<StateDictItem> stateDictOf(const Importer &imp,
                                       const c10::intrusive_ptr<c10::ivalue::Object> &root) {
  std::vector<StateDictItem> items;
  appendStateDict(imp, root, "", items);
  return items;
}

/// Flattens the graph outputs (a tensor, or nested tuples and lists of them).
LogicalResult flattenOutputs(Importer &imp, const Val &val, std::vector<Value> &out) {
  if (val.isTensor() || (val.isConstant() && val.constant.isTensor())) {
    auto value = imp.tensor(val);
    if (failed(value))
      return failure();
    out.push_back(*value);
    return success();
  }
  if (val.kind == Val::Kind::List ||
      (val.isConstant() && (val.constant.isList() || val.constant.isTuple()))) {
    auto items = imp.list(val);
    if (failed(items))
      return failure();
    for (const Val &item : *items)
      if (failed(flattenOutputs(imp, item, out)))
        return failure();
    return success();
  }
  imp.error() << "forward returns a value that is not a tensor (or tuple/list of "
                 "tensors); cleave outputs are tensors";
  return failure();
}
} // namespace

FailureOr<ImportedModel> importTorchScript(MLIRContext &context, const std::string &path,
                                           const ImportOptions &options,
                                           ImportFailure *failureKind) {
  context.loadDialect<mlir::cleave::CleaveDialect, func::FuncDialect>();
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  auto fail = [&](ImportFailure kind) -> FailureOr<ImportedModel> {
    if (failureKind)
      *failureKind = kind;
    return failure();
  };

  if (!std::ifstream(path).good()) {
    emitError(fileLoc) << "cannot open model file '" << path << "'";
    return fail(ImportFailure::BadInput);
  }
  jit::ExtraFilesMap extra{{"cleave.json", ""}};
  jit::Module module;
  try {
    module = loadTorchScript(path, extra);
  } catch (const c10::Error &e) {
    emitError(fileLoc) << "'" << path << "' is not a readable TorchScript file: "
                       << importer::loadError(e.what_without_backtrace());
    return fail(ImportFailure::BadInput);
  } catch (const std::exception &e) {
    emitError(fileLoc) << "'" << path << "' is not a readable TorchScript file: "
                       << importer::loadError(e.what());
    return fail(ImportFailure::BadInput);
  }

  std::vector<InputSpec> recorded;
  std::string error;
  if (!extra["cleave.json"].empty() &&
      failed(readRecordedInputs(extra["cleave.json"], recorded, error))) {
    emitError(fileLoc) << error;
    return fail(ImportFailure::BadInput);
  }

  auto forward = module.find_method("forward");
  if (!forward) {
    emitError(fileLoc) << "the model has no forward method";
    return fail(ImportFailure::BadInput);
  }
  const c10::FunctionSchema &schema = forward->function().getSchema();

  // Input shapes: the command line wins over what the export recorded.
  std::vector<InputSpec> inputs;
  std::vector<std::string> names;
  for (const c10::Argument &arg : llvm::ArrayRef(schema.arguments()).drop_front())
    names.push_back(arg.name());
  for (const InputSpec &given : options.inputShapes) {
    if (llvm::find(names, given.name) == names.end()) {
      emitError(fileLoc) << "--input-shape names '" << given.name
                         << "', but forward's inputs are: " << llvm::join(names, ", ");
      return fail(ImportFailure::BadInput);
    }
  }
  // Example inputs stand between the command line's shapes and the export's.
  std::vector<InputSpec> examples;
  std::vector<const InputSpec *> exampleFor(names.size(), nullptr);
  if (!options.exampleInputs.empty()) {
    std::optional<std::vector<InputSpec>> read = readExampleInputs(options.exampleInputs, error);
    if (!read) {
      emitError(fileLoc) << error;
      return fail(ImportFailure::BadInput);
    }
    examples = std::move(*read);
    exampleFor = matchExampleInputs(names, examples);
  }
  OpBuilder builder(&context);
  SmallVector<Type> argTypes;
  for (auto [i, arg] : llvm::enumerate(llvm::ArrayRef(schema.arguments()).drop_front())) {
    const InputSpec *spec = nullptr;
    for (const InputSpec &candidate : options.inputShapes)
      if (!spec && candidate.name == arg.name())
        spec = &candidate;
    if (!spec)
      spec = exampleFor[i];
    for (const InputSpec &candidate : recorded)
      if (!spec && candidate.name == arg.name())
        spec = &candidate;
    if (!spec) {
      InFlightDiagnostic diag = emitError(fileLoc);
      diag << "input '" << arg.name() << "' has no shape: the model file records none";
      if (!examples.empty()) {
        std::vector<std::string> held;
        for (const InputSpec &example : examples)
          held.push_back(example.name);
        diag << " and the example inputs '" << options.exampleInputs
             << "' have no tensor of that name (they hold: " << llvm::join(held, ", ")
             << "; forward's inputs are: " << llvm::join(names, ", ") << ")";
      }
      diag << "; pass --example-inputs FILE.safetensors or --input-shape " << arg.name()
           << "=DIMS[:DTYPE], e.g. " << arg.name() << "=2x64:i64";
      return fail(ImportFailure::BadInput);
    }
    if (arg.type()->kind() != c10::TypeKind::TensorType) {
      emitError(fileLoc) << "input '" << arg.name() << "' has type "
                         << arg.type()->str() << "; cleave model inputs are tensors";
      return fail(ImportFailure::BadInput);
    }
    InputSpec input = *spec;
    // Matched by position, the input takes the file's name: the same file then
    // feeds `cleave run` (for a match by name the names are the same).
    if (exampleFor[i])
      input.name = exampleFor[i]->name;
    if (options.batchSize && !input.shape.empty())
      input.shape[0] = *options.batchSize;
    inputs.push_back(input);
    argTypes.push_back(
        RankedTensorType::get(input.shape, elementTypeOf(builder, input.dtype)));
  }

  ImportedModel result;
  result.module = ModuleOp::create(fileLoc);
  (*result.module)->setAttr("cleave.source", builder.getStringAttr(path));
  builder.setInsertionPointToEnd(result.module->getBody());
  auto func = builder.create<func::FuncOp>(fileLoc, "forward",
                                           builder.getFunctionType(argTypes, {}));
  for (auto [i, spec] : llvm::enumerate(inputs))
    func.setArgAttr(i, "cleave.name", builder.getStringAttr(spec.name));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToEnd(entry);

  Importer imp(context, builder, result);
  imp.entry = entry;
  imp.training = options.training;
  // Params go first in the entry block; the computation follows them.
  Block *body = new Block();
  func.getBody().push_back(body);
  builder.setInsertionPointToEnd(body);

  Val self;
  self.kind = Val::Kind::Module;
  self.module = std::make_shared<jit::Object>(module._ivalue());
  imp.currentModule = self.module;
  std::vector<Val> graphInputs{self};
  for (BlockArgument arg : entry->getArguments())
    graphInputs.push_back(Val::ofTensor(arg));

  FailureOr<std::vector<Val>> outputs = failure();
  try {
    outputs = imp.importGraph(*jit::toGraphFunction(forward->function()).graph(),
                              graphInputs, "");
  } catch (const std::exception &e) {
    imp.error() << "LibTorch failed: " << firstLine(e.what());
    return fail(ImportFailure::Unsupported);
  }
  if (!imp.unsupported.empty()) {
    size_t total = 0;
    for (auto &entry : imp.unsupported)
      total += entry.second.count;
    auto diag = emitError(fileLoc)
                << "the model uses " << imp.unsupported.size()
                << " unsupported op kind" << (imp.unsupported.size() == 1 ? "" : "s")
                << " (" << total << " uses):";
    for (auto &[kind, entry] : imp.unsupported)
      diag << llvm::formatv("\n  {0,-28} {1,-9} first at {2}", kind,
                            std::to_string(entry.count) +
                                (entry.count == 1 ? " use," : " uses,"),
                            entry.firstAt)
                  .str();
    return fail(ImportFailure::Unsupported);
  }
  if (failed(outputs) || imp.hadError)
    return fail(ImportFailure::Unsupported);

  std::vector<Value> results;
  for (const Val &val : *outputs)
    if (failed(flattenOutputs(imp, val, results)))
      return fail(ImportFailure::Unsupported);
  builder.create<func::ReturnOp>(imp.loc(), results);
  func.setFunctionType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  for (size_t i = 0; i < results.size(); ++i)
    func.setResultAttr(i, "cleave.name", builder.getStringAttr("output_" + std::to_string(i)));

  // Merge the computation block after the params.
  entry->getOperations().splice(entry->end(), body->getOperations());
  body->erase();

  if (failed(verify(*result.module))) {
    emitError(fileLoc) << "internal error: the imported IR does not verify";
    return fail(ImportFailure::Unsupported);
  }
  result.stateDict = stateDictOf(imp, module._ivalue());
  return result;
}

} // namespace cleave
