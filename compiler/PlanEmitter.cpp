//===- PlanEmitter.cpp - write a plan directory ---------------------------===//

#include "compiler/PlanEmitter.h"

#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace cleave {
namespace {

using Json = nlohmann::ordered_json;
namespace rt = cleave::runtime;
using mlir::cleave::describeLocation;
using mlir::cleave::moduleScope;

constexpr const char *kProgram = "stage0_tp0";

std::optional<rt::DType> dtypeOf(mlir::Type element) {
  if (element.isF32()) return rt::DType::F32;
  if (element.isBF16()) return rt::DType::BF16;
  if (element.isF16()) return rt::DType::F16;
  if (element.isInteger(64)) return rt::DType::I64;
  if (element.isInteger(32)) return rt::DType::I32;
  if (element.isInteger(1)) return rt::DType::I1;
  return std::nullopt;
}

rt::TensorDesc descOf(mlir::Type type) {
  auto tensor = llvm::cast<mlir::RankedTensorType>(type);
  return {*dtypeOf(tensor.getElementType()),
          rt::Shape(tensor.getShape().begin(), tensor.getShape().end())};
}

Json describeTensor(const std::string &name, const rt::TensorDesc &desc) {
  return Json{{"name", name}, {"shape", desc.shape}, {"dtype", rt::dtypeName(desc.dtype)}};
}

/// Kernel attributes as JSON; false if one has no JSON form.
bool encodeAttribute(mlir::Attribute attr, Json *out) {
  if (auto b = llvm::dyn_cast<mlir::BoolAttr>(attr))
    *out = b.getValue();
  else if (auto i = llvm::dyn_cast<mlir::IntegerAttr>(attr))
    *out = i.getType().isUnsignedInteger() ? int64_t(i.getValue().getZExtValue())
                                           : i.getValue().getSExtValue();
  else if (auto f = llvm::dyn_cast<mlir::FloatAttr>(attr))
    *out = f.getValueAsDouble();
  else if (auto s = llvm::dyn_cast<mlir::StringAttr>(attr))
    *out = s.getValue().str();
  else if (auto a = llvm::dyn_cast<mlir::DenseI64ArrayAttr>(attr))
    *out = std::vector<int64_t>(a.asArrayRef().begin(), a.asArrayRef().end());
  else
    return false;
  return true;
}

/// Pretty JSON for people: containers that fit on a line stay on one line,
/// so a program lists one buffer or instruction per line.
void prettyPrint(const Json &json, std::string &out, int indent) {
  std::string flat = json.dump();
  if (!json.is_structured() || json.empty() || flat.size() + indent <= 160) {
    out += flat;
    return;
  }
  std::string pad(indent + 1, ' ');
  bool isObject = json.is_object();
  out += isObject ? "{\n" : "[\n";
  size_t i = 0;
  for (auto it = json.begin(); it != json.end(); ++it, ++i) {
    out += pad;
    if (isObject)
      out += Json(it.key()).dump() + ": ";
    prettyPrint(*it, out, indent + 1);
    out += i + 1 < json.size() ? ",\n" : "\n";
  }
  out += std::string(indent, ' ') + (isObject ? "}" : "]");
}

mlir::LogicalResult writeText(mlir::Location loc, const std::string &path,
                              const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out)
    return mlir::emitError(loc) << "cannot write '" << path << "'";
  return mlir::success();
}

/// Raw little-endian bytes of a constant (i1 as one byte per element).
bool constantBytes(mlir::ElementsAttr value, std::vector<char> &bytes) {
  auto dense = llvm::dyn_cast<mlir::DenseElementsAttr>(value);
  if (!dense)
    return false;
  mlir::Type element = dense.getElementType();
  auto append = [&](const void *p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const char *>(p), static_cast<const char *>(p) + n);
  };
  if (element.isInteger(1)) {
    for (bool b : dense.getValues<bool>()) {
      char c = b ? 1 : 0;
      append(&c, 1);
    }
  } else if (auto intType = llvm::dyn_cast<mlir::IntegerType>(element)) {
    for (const llvm::APInt &v : dense.getValues<llvm::APInt>()) {
      uint64_t raw = v.getZExtValue();
      append(&raw, intType.getWidth() / 8);
    }
  } else if (llvm::isa<mlir::FloatType>(element)) {
    for (const llvm::APFloat &v : dense.getValues<llvm::APFloat>()) {
      uint64_t raw = v.bitcastToAPInt().getZExtValue();
      append(&raw, element.getIntOrFloatBitWidth() / 8);
    }
  } else {
    return false;
  }
  return true;
}

/// Everything one program needs, gathered before anything is written.
struct ProgramBuilder {
  Json buffers = Json::array();
  Json instructions = Json::array();
  Json inputs = Json::array();
  Json outputs = Json::array();
  std::vector<rt::SafetensorsTensor> weights;
  std::vector<std::vector<char>> constantData; // owns constant bytes
  llvm::DenseMap<mlir::Value, int64_t> bufferOf;

  int64_t addBuffer(mlir::Value value, const std::string &name, Json storage) {
    int64_t id = static_cast<int64_t>(buffers.size());
    rt::TensorDesc desc = descOf(value.getType());
    Json buffer{{"id", id}, {"name", name}, {"shape", desc.shape},
                {"dtype", rt::dtypeName(desc.dtype)}};
    buffer.update(storage);
    buffers.push_back(buffer);
    bufferOf[value] = id;
    return id;
  }
  const Json &bufferJson(mlir::Value v) { return buffers[bufferOf.lookup(v)]; }
};

mlir::LogicalResult buildProgram(mlir::func::FuncOp func,
                                 const decltype(ImportedModel::params) &params,
                                 ProgramBuilder &program, Json &modelInputs,
                                 Json &modelOutputs) {
  mlir::Block &body = func.front();
  for (mlir::BlockArgument arg : body.getArguments()) {
    auto offset = func.getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(),
                                                           "cleave.arena_offset");
    auto name = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), "cleave.name");
    if (!offset || !name)
      return func.emitError("argument ") << arg.getArgNumber()
                                         << " has no name or arena offset: run cleave-plan-memory first";
    int64_t id = program.addBuffer(arg, name.str(), Json{{"arena_offset", offset.getInt()}});
    modelInputs.push_back(describeTensor(name.str(), descOf(arg.getType())));
    program.inputs.push_back(Json{{"name", name.str()}, {"buffer", id}});
  }

  int64_t constants = 0;
  for (mlir::Operation &op : body) {
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        std::string name = "output_" + std::to_string(i);
        modelOutputs.push_back(describeTensor(name, descOf(value.getType())));
        program.outputs.push_back(Json{{"name", name}, {"buffer", program.bufferOf.lookup(value)}});
      }
      continue;
    }
    if (auto param = llvm::dyn_cast<mlir::cleave::ParamOp>(op)) {
      std::string name = param.getName().str();
      const ParamData *data = nullptr;
      auto it = params.find(name);
      if (it != params.end())
        data = &it->second;
      if (!data || !data->data)
        return param.emitError("parameter '")
               << name << "' has no data"
               << (data ? " (the model was exported on the meta device; compile needs real weights)"
                        : "");
      rt::TensorDesc desc = descOf(param.getType());
      if (data->bytes != desc.bytes())
        return param.emitError("parameter '") << name << "' holds " << data->bytes
                                              << " bytes, its type needs " << desc.bytes();
      program.addBuffer(param, name, Json{{"weight", name}});
      program.weights.push_back({name, desc, data->data});
      continue;
    }
    if (auto constant = llvm::dyn_cast<mlir::cleave::ConstantOp>(op)) {
      std::string name = "constant." + std::to_string(constants++);
      std::vector<char> bytes;
      if (!constantBytes(constant.getValue(), bytes))
        return constant.emitError("constant has no dense data to write");
      program.constantData.push_back(std::move(bytes));
      program.addBuffer(constant, name, Json{{"weight", name}});
      program.weights.push_back(
          {name, descOf(constant.getType()), program.constantData.back().data()});
      continue;
    }

    auto executable = llvm::dyn_cast<mlir::cleave::ExecutableOpInterface>(op);
    if (!executable || op.getNumResults() != 1)
      return op.emitError("cannot be emitted: not a single-result cleave op");
    mlir::Value result = op.getResult(0);
    std::string kernel = op.getName().stripDialect().str();
    std::string scope = moduleScope(op.getLoc());
    std::string name = (scope.empty() ? "" : scope + ": ") + kernel;

    if (std::optional<unsigned> viewed = executable.getViewedOperand()) {
      // A view shares the storage of the buffer it views.
      const Json &source = program.bufferJson(op.getOperand(*viewed));
      Json storage = source.contains("weight") ? Json{{"weight", source["weight"]}}
                                               : Json{{"arena_offset", source["arena_offset"]}};
      program.addBuffer(result, name, storage);
      continue;
    }
    auto offset = op.getAttrOfType<mlir::IntegerAttr>("cleave.arena_offset");
    if (!offset)
      return op.emitError("has no arena offset: run cleave-plan-memory first");
    int64_t out = program.addBuffer(result, name, Json{{"arena_offset", offset.getInt()}});

    Json inputs = Json::array();
    // Optional operands keep their slot (null when absent) where the op
    // declares operand segments, so kernels see fixed positions.
    if (auto segments = op.getAttrOfType<mlir::DenseI32ArrayAttr>("operandSegmentSizes")) {
      unsigned next = 0;
      for (int32_t size : segments.asArrayRef()) {
        if (size == 0)
          inputs.push_back(nullptr);
        for (int32_t k = 0; k < size; ++k)
          inputs.push_back(program.bufferOf.lookup(op.getOperand(next++)));
      }
    } else {
      for (mlir::Value operand : op.getOperands())
        inputs.push_back(program.bufferOf.lookup(operand));
    }
    Json attrs = Json::object();
    for (mlir::NamedAttribute attr : executable.getKernelAttributes()) {
      Json value;
      if (!encodeAttribute(attr.getValue(), &value))
        return op.emitError("attribute '") << attr.getName().getValue()
                                           << "' has no plan encoding";
      attrs[attr.getName().getValue().str()] = value;
    }
    Json instruction{{"kernel", kernel}, {"inputs", inputs}, {"outputs", Json::array({out})}};
    if (!attrs.empty())
      instruction["attrs"] = attrs;
    if (int64_t scratch = executable.getScratchBytes()) {
      auto scratchOffset = op.getAttrOfType<mlir::IntegerAttr>("cleave.scratch_offset");
      if (!scratchOffset)
        return op.emitError("has no scratch offset: run cleave-plan-memory first");
      instruction["scratch"] = Json{{"arena_offset", scratchOffset.getInt()}, {"bytes", scratch}};
    }
    std::string loc = describeLocation(op.getLoc());
    if (!loc.empty())
      instruction["loc"] = loc;
    program.instructions.push_back(instruction);
  }
  return mlir::success();
}

/// Moves the finished temporary directory to `dir`, replacing an earlier plan.
mlir::LogicalResult publish(mlir::Location loc, const std::string &tmp, const std::string &dir) {
  bool exists = llvm::sys::fs::exists(dir);
  std::string old;
  if (exists) {
    bool isDir = llvm::sys::fs::is_directory(dir);
    std::error_code ec;
    bool empty = isDir && llvm::sys::fs::directory_iterator(dir, ec) == llvm::sys::fs::directory_iterator();
    if (!isDir || (!empty && !llvm::sys::fs::exists(dir + "/manifest.json")))
      return mlir::emitError(loc) << "refusing to replace '" << dir
                                  << "': it exists and is not a plan directory";
    old = dir + ".old-" + std::to_string(llvm::sys::Process::getProcessId());
    if (auto ec2 = llvm::sys::fs::rename(dir, old))
      return mlir::emitError(loc) << "cannot replace '" << dir << "': " << ec2.message();
  }
  if (auto ec = llvm::sys::fs::rename(tmp, dir)) {
    if (!old.empty())
      llvm::sys::fs::rename(old, dir);
    return mlir::emitError(loc) << "cannot create '" << dir << "': " << ec.message();
  }
  if (!old.empty())
    llvm::sys::fs::remove_directories(old);
  return mlir::success();
}

} // namespace

mlir::LogicalResult emitSingleDevicePlan(mlir::ModuleOp module,
                                         const decltype(ImportedModel::params) &params,
                                         const std::string &dir,
                                         const PlanEmitOptions &options) {
  auto func = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!func || func.isExternal())
    return module.emitError("no @forward function to emit");
  auto arenaBytes = func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes");
  if (!arenaBytes)
    return func.emitError("has no arena size: run cleave-plan-memory first");

  ProgramBuilder program;
  Json modelInputs = Json::array(), modelOutputs = Json::array();
  if (mlir::failed(buildProgram(func, params, program, modelInputs, modelOutputs)))
    return mlir::failure();
  size_t weightBytes = 0;
  for (const rt::SafetensorsTensor &w : program.weights)
    weightBytes += w.desc.bytes();

  Json programJson{{"format", "cleave-program"},
                   {"version", rt::kPlanFormatVersion},
                   {"name", kProgram},
                   {"arena_bytes", arenaBytes.getInt()},
                   {"inputs", program.inputs},
                   {"outputs", program.outputs},
                   {"buffers", program.buffers},
                   {"phases", Json::array({Json{{"name", "forward"},
                                               {"instructions", program.instructions}}})}};
  std::string programFile = std::string("programs/") + kProgram + ".json";
  std::string weightsFile = std::string("weights/") + kProgram + ".safetensors";
  Json manifest{
      {"format", "cleave-plan"},
      {"version", rt::kPlanFormatVersion},
      {"model", Json{{"source", options.modelSource}}},
      {"inputs", modelInputs},
      {"outputs", modelOutputs},
      {"mesh", Json{{"pp", 1}, {"tp", 1}, {"dp", 1}}},
      {"schedule", Json{{"kind", "forward"}, {"microbatches", 1}}},
      {"devices", Json::array({Json{{"rank", 0}, {"backend", "cpu"}, {"stage", 0},
                                    {"tp", 0}, {"dp", 0}, {"program", kProgram}}})},
      {"programs", Json{{kProgram, Json{{"file", programFile},
                                        {"weights", weightsFile},
                                        {"arena_bytes", arenaBytes.getInt()},
                                        {"weight_bytes", weightBytes}}}}},
      {"predicted", Json{{"memory_bytes",
                          Json{{"arena", arenaBytes.getInt()},
                               {"weights", weightBytes},
                               {"total", arenaBytes.getInt() + int64_t(weightBytes)}}}}}};

  // Write everything under a temporary name next to `dir`, then rename.
  mlir::Location loc = func.getLoc();
  std::string tmp = dir + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId());
  llvm::sys::fs::remove_directories(tmp);
  auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(tmp); });
  for (const char *sub : {"programs", "weights", "ir"})
    if (auto ec = llvm::sys::fs::create_directories(tmp + "/" + sub))
      return mlir::emitError(loc) << "cannot create '" << tmp << "': " << ec.message();

  std::string text;
  prettyPrint(manifest, text, 0);
  if (mlir::failed(writeText(loc, tmp + "/manifest.json", text + "\n")))
    return mlir::failure();
  text.clear();
  prettyPrint(programJson, text, 0);
  if (mlir::failed(writeText(loc, tmp + "/" + programFile, text + "\n")))
    return mlir::failure();
  rt::Status status = rt::writeSafetensors(tmp + "/" + weightsFile, program.weights,
                                           {{"format", "cleave-weights"}, {"program", kProgram}});
  if (!status.ok())
    return mlir::emitError(loc) << status.message();
  for (const auto &[name, ir] : options.irSnapshots)
    if (mlir::failed(writeText(loc, tmp + "/ir/" + name + ".mlir", ir)))
      return mlir::failure();
  if (mlir::failed(publish(loc, tmp, dir)))
    return mlir::failure();
  cleanup.release();
  return mlir::success();
}

} // namespace cleave
