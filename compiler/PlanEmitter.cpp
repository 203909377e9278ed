//===- PlanEmitter.cpp - write a plan directory ---------------------------===//

#include "compiler/PlanEmitter.h"

#include "dialects/cleave/CleaveDialect.h"
#include "dialects/cleave/Locations.h"
#include "runtime/BFloat16.h"
#include "runtime/Plan.h"
#include "runtime/Safetensors.h"
#include "passes/TensorParallel.h"
#include "passes/Training.h"
#include "runtime/TensorParts.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <fstream>
#include <set>

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

} // namespace

rt::TensorDesc tensorDescOf(mlir::Type type) { return descOf(type); }

namespace {

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
  std::deque<std::vector<char>> constantData; // owns constant and sliced bytes
  std::set<std::string> weightNames;
  /// Each parameter's weight: its path, or its tp part's name.
  std::map<std::string, std::string> weightOfParameter;
  /// Weights the program holds as the rank's ZeRO part (the file holds them
  /// whole): their part's bytes, which is what the runtime allocates.
  std::map<std::string, size_t> partBytes;
  /// Weights kept in host memory (spilling, `cleave.pool = "host"`).
  std::set<std::string> hostWeights;
  llvm::DenseMap<mlir::Value, int64_t> bufferOf;
  int64_t constants = 0;
  int64_t stages = 1; ///< pipeline stages: a chunk c runs on stage c % stages
  /// The phase of each instruction (forward, backward, optimizer), and
  /// its index in the function's phases (mlir::cleave::phaseSlotsOf).
  std::vector<std::string> instructionPhases;
  std::vector<size_t> instructionSlots;

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

/// The "shard" entry of a buffer that `op` defines as the rank's ZeRO part
/// (from its cleave.shard: group, ranks and the whole tensor's shape); null
/// when the op holds the whole tensor.
/// A param or state that spilling keeps in host memory.
bool inHostPool(mlir::Operation *op) {
  auto pool = op->getAttrOfType<mlir::StringAttr>(mlir::cleave::kPoolAttr);
  return pool && pool.getValue() == mlir::cleave::kHostPool;
}

mlir::FailureOr<Json> shardEntry(mlir::Operation *op) {
  auto shard = op->getAttrOfType<mlir::DictionaryAttr>(mlir::cleave::kShardAttr);
  if (!shard)
    return Json();
  auto group = shard.getAs<mlir::StringAttr>("group");
  auto ranks = shard.getAs<mlir::IntegerAttr>("ranks");
  auto shape = shard.getAs<mlir::DenseI64ArrayAttr>("shape");
  if (!group || !ranks || !shape)
    return op->emitError("malformed ") << mlir::cleave::kShardAttr << " " << shard;
  return Json{{"group", group.str()},
              {"ranks", ranks.getInt()},
              {"shape", rt::Shape(shape.asArrayRef().begin(), shape.asArrayRef().end())}};
}

/// How a program's weights are cut: the tp degree and the program's tp
/// index (1 and 0 for a single device).
struct WeightSlicing {
  int64_t ranks = 1, rank = 0;
  bool withData = true; ///< false: a meta model, the plan has no weight files
};

/// The name of a parameter's part in a weight file (docs/plan-format.md):
/// the path, plus the split and the part when the tp group splits it.
std::string weightName(const std::string &path, const mlir::cleave::TensorSharding &layout,
                       const WeightSlicing &slicing) {
  if (layout.kind != mlir::cleave::TensorSharding::Sharded || slicing.ranks == 1)
    return path;
  return path + "[" + layout.str() + " " + std::to_string(slicing.rank) + "/" +
         std::to_string(slicing.ranks) + "]";
}

/// A count as JSON: an integer while doubles hold it exactly, so plans read
/// as counts; a number beyond.
Json countJson(double count) {
  constexpr double kExact = 9007199254740992.0; // 2^53
  if (count >= 0 && count < kExact)
    return static_cast<int64_t>(std::llround(count));
  return count;
}

/// The instruction's "cost" (docs/plan-format.md): what the op's cost
/// interface says its kernel does, for reports that set measured time
/// against it (`cleave run --roofline`). Every emitted op is its own kernel
/// (a backward phase holds the backward ops, each costing itself), so the
/// op's `forward` pass is the instruction's; none for ops that run no
/// costed kernel (collectives, send and recv: their time is the link's).
std::optional<Json> costEntry(mlir::Operation &op) {
  auto costly = llvm::dyn_cast<mlir::cleave::CostOpInterface>(op);
  if (!costly)
    return std::nullopt;
  ::cleave::cost::OpCost cost = costly.getCost();
  if (cost.forward.kernels == 0)
    return std::nullopt;
  return Json{{"class", std::string(::cleave::cost::opClassName(cost.opClass))},
              {"flops", countJson(cost.forward.flops)},
              {"bytes", countJson(cost.forward.bytesRead + cost.forward.bytesWritten)}};
}

/// The bindings of one phase: its inputs and outputs by name.
struct PhaseBindings {
  Json inputs = Json::array(), outputs = Json::array();
};

/// Adds the buffers and instructions of `func` (one phase) to `program`.
/// `modelInputs`/`modelOutputs` receive the descriptions of the model's
/// inputs and outputs the phase binds.
mlir::LogicalResult buildProgram(mlir::func::FuncOp func,
                                 const decltype(ImportedModel::params) &params,
                                 const WeightSlicing &slicing, ProgramBuilder &program,
                                 PhaseBindings &phase, Json &modelInputs, Json &modelOutputs) {
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
    phase.inputs.push_back(Json{{"name", name.str()}, {"buffer", id}});
  }

  int64_t &constants = program.constants;
  std::vector<llvm::StringRef> phases = mlir::cleave::phasesOf(body);
  std::vector<size_t> slotOfOp;
  (void)mlir::cleave::phaseSlotsOf(body, slotOfOp);
  size_t position = 0;
  for (mlir::Operation &op : body) {
    size_t slotOfThis = slotOfOp[position];
    llvm::StringRef phaseOfOp = phases[position++];
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto named = func.getResultAttrOfType<mlir::StringAttr>(i, "cleave.name");
        std::string name = named ? named.str() : "output_" + std::to_string(i);
        modelOutputs.push_back(describeTensor(name, descOf(value.getType())));
        phase.outputs.push_back(Json{{"name", name}, {"buffer", program.bufferOf.lookup(value)}});
      }
      continue;
    }
    if (auto param = llvm::dyn_cast<mlir::cleave::ParamOp>(op)) {
      std::string path = param.getName().str();
      auto it = params.find(path);
      const ParamData *data = it != params.end() ? &it->second : nullptr;
      // An empty tensor has no bytes to point at: its null data is not the
      // meta device's.
      if (!data || (slicing.withData && !data->data && data->bytes != 0))
        return param.emitError("parameter '")
               << path << "' has no data"
               << (data ? " (the model was exported on the meta device; compile needs real weights)"
                        : "");
      auto layout = mlir::cleave::annotatedLayout(param.getResult());
      if (mlir::failed(layout))
        return mlir::failure();
      std::string name = weightName(path, *layout, slicing);
      rt::TensorDesc desc = descOf(param.getType());
      Json storage{{"weight", name}};
      // ZeRO-3: the program holds the rank's part, the file the whole
      // tensor (every rank cuts its own part when it loads).
      mlir::FailureOr<Json> shard = shardEntry(param);
      if (mlir::failed(shard))
        return mlir::failure();
      if (!shard->is_null()) {
        program.partBytes[name] = desc.bytes();
        desc.shape = (*shard)["shape"].get<rt::Shape>();
        storage["shard"] = std::move(*shard);
      }
      if (inHostPool(param)) {
        storage["pool"] = mlir::cleave::kHostPool.str();
        program.hostWeights.insert(name);
      }
      program.addBuffer(param, path, std::move(storage));
      program.weightOfParameter.emplace(path, name);
      if (!program.weightNames.insert(name).second)
        continue; // a weight several phases read (interleaved chunks)
      std::optional<rt::DType> stored = rt::parseDType(data->dtype);
      if (!stored)
        return param.emitError("parameter '")
               << path << "' has unknown dtype '" << data->dtype << "'";
      size_t fullBytes =
          rt::TensorDesc{*stored, rt::Shape(data->shape.begin(), data->shape.end())}.bytes();
      if (data->bytes != fullBytes)
        return param.emitError("parameter '") << path << "' holds " << data->bytes
                                              << " bytes, its shape needs " << fullBytes;
      const void *bytes = data->data;
      if (*stored != desc.dtype) {
        // cleave-convert-precision gave the param a narrower type; the
        // importer holds its f32 data.
        if (*stored != rt::DType::F32 || desc.dtype != rt::DType::BF16)
          return param.emitError("parameter '")
                 << path << "' is stored as " << data->dtype << " but its type is "
                 << param.getType() << ": only f32 data is converted (to bf16)";
        if (slicing.withData) {
          std::vector<char> &rounded = program.constantData.emplace_back(fullBytes / 2);
          rt::floatToBf16(static_cast<const float *>(data->data),
                          reinterpret_cast<uint16_t *>(rounded.data()), fullBytes / 4);
          bytes = rounded.data();
        }
        fullBytes /= 2;
      }
      if (slicing.withData && name != path) {
        rt::WeightShard part;
        part.parameter = path;
        part.split = true;
        part.dim = layout->dim;
        part.blocks = layout->blocks;
        part.part = slicing.rank;
        part.parts = slicing.ranks;
        program.constantData.push_back(rt::copyPart(static_cast<const char *>(bytes),
                                                    rt::Shape(data->shape.begin(), data->shape.end()),
                                                    rt::dtypeBytes(desc.dtype), part));
        bytes = program.constantData.back().data();
      }
      if (slicing.withData &&
          desc.bytes() != (name != path ? program.constantData.back().size() : fullBytes))
        return param.emitError("parameter '") << path << "': its part " << name << " is "
                                              << desc.bytes() << " bytes, the slice holds a different size";
      program.weights.push_back({name, desc, bytes});
      continue;
    }
    if (auto state = llvm::dyn_cast<mlir::cleave::StateOp>(op)) {
      auto offset = state->getAttrOfType<mlir::IntegerAttr>("cleave.state_offset");
      if (!offset)
        return state.emitError("has no state offset: run cleave-plan-memory first");
      // The state of a weight a tp group splits is the rank's part of it,
      // named as the weight's part is.
      std::string name = state.getName().str();
      if (auto layoutText = state->getAttrOfType<mlir::StringAttr>(mlir::cleave::kTpLayoutAttr)) {
        std::optional<mlir::cleave::TensorSharding> layout =
            mlir::cleave::TensorSharding::parse(layoutText.getValue());
        if (!layout)
          return state.emitError("malformed ") << mlir::cleave::kTpLayoutAttr << " " << layoutText;
        name = weightName(name, *layout, slicing);
      }
      Json entry{{"state", name}, {"state_offset", offset.getInt()}};
      // ZeRO: the state is this rank's part of a tensor of `shape`.
      mlir::FailureOr<Json> shard = shardEntry(state);
      if (mlir::failed(shard))
        return mlir::failure();
      if (!shard->is_null())
        entry["shard"] = std::move(*shard);
      if (inHostPool(state))
        entry["pool"] = mlir::cleave::kHostPool.str();
      program.addBuffer(state, name, std::move(entry));
      continue;
    }
    if (auto constant = llvm::dyn_cast<mlir::cleave::ConstantOp>(op)) {
      std::string name = "constant." + std::to_string(constants++);
      std::vector<char> bytes;
      if (!constantBytes(constant.getValue(), bytes))
        return constant.emitError("constant has no dense data to write");
      program.constantData.push_back(std::move(bytes));
      program.addBuffer(constant, name, Json{{"weight", name}});
      program.weightNames.insert(name);
      program.weights.push_back(
          {name, descOf(constant.getType()), program.constantData.back().data()});
      continue;
    }

    auto executable = llvm::dyn_cast<mlir::cleave::ExecutableOpInterface>(op);
    if (!executable)
      return op.emitError("cannot be emitted: not a cleave op");
    std::string kernel = op.getName().stripDialect().str();
    std::string scope = moduleScope(op.getLoc());
    std::string name = (scope.empty() ? "" : scope + ": ") + kernel;

    Json outputs = Json::array();
    if (op.getNumResults() == 1) {
      mlir::Value result = op.getResult(0);
      if (std::optional<unsigned> viewed = executable.getViewedOperand()) {
        // A view shares the storage of the buffer it views.
        const Json &source = program.bufferJson(op.getOperand(*viewed));
        Json storage = source;
        for (const char *key : {"id", "name", "shape", "dtype"})
          storage.erase(key);
        program.addBuffer(result, name, storage);
        continue;
      }
      auto offset = op.getAttrOfType<mlir::IntegerAttr>("cleave.arena_offset");
      if (!offset)
        return op.emitError("has no arena offset: run cleave-plan-memory first");
      outputs.push_back(program.addBuffer(result, name, Json{{"arena_offset", offset.getInt()}}));
    } else if (op.getNumResults() > 1) {
      auto offsets = op.getAttrOfType<mlir::DenseI64ArrayAttr>("cleave.arena_offsets");
      if (!offsets || offsets.size() != static_cast<int64_t>(op.getNumResults()))
        return op.emitError("has no arena offsets: run cleave-plan-memory first");
      for (auto [result, offset] : llvm::zip(op.getResults(), offsets.asArrayRef()))
        outputs.push_back(program.addBuffer(result, name, Json{{"arena_offset", offset}}));
    }
    // Tensors an update writes in place are its outputs too, after the
    // results; the kernel reads and writes them (docs/plan-format.md).
    llvm::SmallVector<unsigned> updated = executable.getUpdatedOperands();
    for (unsigned index : updated)
      outputs.push_back(program.bufferOf.lookup(op.getOperand(index)));

    Json inputs = Json::array();
    if (!updated.empty()) {
      // An update's inputs are the operands it only reads; an absent
      // optional one is left out.
      for (mlir::OpOperand &operand : op.getOpOperands())
        if (!llvm::is_contained(updated, operand.getOperandNumber()))
          inputs.push_back(program.bufferOf.lookup(operand.get()));
    } else if (auto segments = op.getAttrOfType<mlir::DenseI32ArrayAttr>("operandSegmentSizes")) {
      // Optional operands keep their slot (null when absent) where the op
      // declares operand segments, so kernels see fixed positions.
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
    // A pipeline peer is a model chunk in the IR; ranks need its stage too.
    if (attrs.contains("peer")) {
      int64_t chunk = attrs["peer"].get<int64_t>();
      attrs.erase("peer");
      attrs["peer_chunk"] = chunk;
      attrs["peer_stage"] = chunk % program.stages;
    }
    Json instruction{{"kernel", kernel}, {"inputs", inputs}, {"outputs", outputs}};
    if (!attrs.empty())
      instruction["attrs"] = attrs;
    if (int64_t scratch = executable.getScratchBytes()) {
      auto scratchOffset = op.getAttrOfType<mlir::IntegerAttr>("cleave.scratch_offset");
      if (!scratchOffset)
        return op.emitError("has no scratch offset: run cleave-plan-memory first");
      instruction["scratch"] = Json{{"arena_offset", scratchOffset.getInt()}, {"bytes", scratch}};
    }
    if (auto region = op.getAttrOfType<mlir::IntegerAttr>("cleave.recompute_region"))
      instruction["recompute_region"] = region.getInt();
    std::string loc = describeLocation(op.getLoc());
    if (!loc.empty())
      instruction["loc"] = loc;
    if (std::optional<Json> cost = costEntry(op))
      instruction["cost"] = std::move(*cost);
    program.instructions.push_back(instruction);
    program.instructionPhases.push_back(phaseOfOp.str());
    program.instructionSlots.push_back(slotOfThis);
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

/// A program ready to write: its JSON and its weights.
struct ProgramFiles {
  std::string name;
  Json json;
  ProgramBuilder builder;
};

/// Writes the plan under a temporary name next to `dir`, then renames it
/// into place: the directory appears complete or not at all.
/// A weights file beside the programs' (`weights/state_dict_extra.safetensors`).
struct ExtraWeights {
  std::string file;
  std::vector<rt::SafetensorsTensor> tensors;
};

mlir::LogicalResult writePlanDirectory(mlir::Location loc, const std::string &dir,
                                       const Json &manifest, const std::vector<ProgramFiles> &programs,
                                       bool withWeights, const PlanEmitOptions &options,
                                       const std::vector<ExtraWeights> &extras = {}) {
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
  for (const ProgramFiles &program : programs) {
    text.clear();
    prettyPrint(program.json, text, 0);
    if (mlir::failed(writeText(loc, tmp + "/programs/" + program.name + ".json", text + "\n")))
      return mlir::failure();
    if (!withWeights)
      continue;
    rt::Status status = rt::writeSafetensors(
        tmp + "/weights/" + program.name + ".safetensors", program.builder.weights,
        {{"format", "cleave-weights"}, {"program", program.name}});
    if (!status.ok())
      return mlir::emitError(loc) << status.message();
  }
  for (const ExtraWeights &extra : extras) {
    rt::Status status = rt::writeSafetensors(tmp + "/" + extra.file, extra.tensors,
                                             {{"format", "cleave-weights"}});
    if (!status.ok())
      return mlir::emitError(loc) << status.message();
  }
  if (!options.strategyJson.empty() &&
      mlir::failed(writeText(loc, tmp + "/strategy.json", options.strategyJson)))
    return mlir::failure();
  for (const auto &[name, ir] : options.irSnapshots)
    if (mlir::failed(writeText(loc, tmp + "/ir/" + name + ".mlir", ir)))
      return mlir::failure();
  if (options.check && mlir::failed(options.check(tmp)))
    return mlir::failure();
  if (mlir::failed(publish(loc, tmp, dir)))
    return mlir::failure();
  cleanup.release();
  return mlir::success();
}

/// The bytes of the device's weights region, or with `host` of the host
/// pool's weights (spilling).
size_t weightBytesOf(const ProgramBuilder &program, bool host = false) {
  size_t bytes = 0;
  for (const rt::SafetensorsTensor &w : program.weights) {
    if (program.hostWeights.count(w.name) != size_t(host))
      continue;
    if (program.partBytes.empty() && program.hostWeights.empty()) {
      bytes += w.desc.bytes(); // the file's layout
      continue;
    }
    // With ZeRO parts or host weights the runtime lays the weights out
    // itself (rt::weightRegionBytes): each in a 64-byte aligned slot.
    auto part = program.partBytes.find(w.name);
    bytes += rt::alignWeightSlot(part != program.partBytes.end() ? part->second : w.desc.bytes());
  }
  return bytes;
}

/// The program-level bindings: every phase's, with its index when there
/// are several phases.
void addBindings(Json &programJson, const std::vector<PhaseBindings> &phases) {
  Json inputs = Json::array(), outputs = Json::array();
  for (auto [i, phase] : llvm::enumerate(phases))
    for (auto [all, part] : {std::pair{&inputs, &phase.inputs}, {&outputs, &phase.outputs}})
      for (Json binding : *part) {
        if (phases.size() > 1)
          binding["phase"] = i;
        all->push_back(binding);
      }
  programJson["inputs"] = inputs;
  programJson["outputs"] = outputs;
}

} // namespace

namespace {

/// The instructions of each phase, in order: forward, then backward and
/// optimizer when the program has them.
Json phasesJson(const ProgramBuilder &program) {
  Json phases = Json::array();
  for (llvm::StringRef name : {mlir::cleave::kForwardPhase, mlir::cleave::kBackwardPhase,
                               mlir::cleave::kOptimizerPhase}) {
    Json instructions = Json::array();
    for (auto [instruction, phase] : llvm::zip(program.instructions, program.instructionPhases))
      if (phase == name)
        instructions.push_back(instruction);
    if (name == mlir::cleave::kForwardPhase || !instructions.empty())
      phases.push_back(Json{{"name", name.str()}, {"instructions", instructions}});
  }
  return phases;
}

int64_t intAttr(mlir::Operation *op, llvm::StringRef name) {
  auto attr = op->getAttrOfType<mlir::IntegerAttr>(name);
  return attr ? attr.getInt() : 0;
}

/// The manifest's `training` section, the trainable parameters and the
/// state_dict's extra tensors of a training program.
/// `funcs[i]` was emitted as `programs[i]` (one program on one device,
/// one per stage in a pipeline); `parameterBytes[i]` receives the bytes of
/// the parameters program i trains.
mlir::LogicalResult trainingManifest(llvm::ArrayRef<mlir::func::FuncOp> funcs,
                                     const TrainingEmitInfo &info,
                                     llvm::ArrayRef<const ProgramBuilder *> programs,
                                     int64_t ranks, Json &training, ExtraWeights &extra,
                                     std::vector<int64_t> &parameterBytes) {
  // Every input holds the samples of one step in dim 0.
  int64_t batch = -1;
  for (mlir::func::FuncOp func : funcs)
    for (mlir::BlockArgument arg : func.getArguments()) {
      auto type = llvm::cast<mlir::RankedTensorType>(arg.getType());
      auto name = func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), "cleave.name");
      if (type.getRank() == 0 || (batch >= 0 && type.getDimSize(0) != batch))
        return func.emitError("training needs every input to hold the step's samples in dim 0; '")
               << (name ? name.getValue() : "?") << "' is " << type;
      batch = type.getDimSize(0);
    }
  // The parameters the step trains: those an update writes, or, for a
  // plan that returns its gradients, those it returns gradients of.
  std::vector<std::string> trained;
  parameterBytes.assign(funcs.size(), 0);
  // Whole, or as a tp rank's part.
  auto holds = [&](const std::string &name) {
    return llvm::any_of(programs,
                        [&](const ProgramBuilder *p) { return p->weightOfParameter.count(name); });
  };
  for (size_t f = 0; f < funcs.size(); ++f) {
  mlir::func::FuncOp func = funcs[f];
  const ProgramBuilder *program = programs[f];
  std::vector<std::string> trainedHere;
  llvm::DenseSet<mlir::Value> seen;
  for (mlir::Operation &op : func.front()) {
    auto executable = llvm::dyn_cast<mlir::cleave::ExecutableOpInterface>(op);
    if (!executable || !llvm::isa<mlir::cleave::AdamWOp, mlir::cleave::SgdOp>(op))
      continue;
    mlir::Value param = op.getOperand(0);
    if (!seen.insert(param).second)
      continue;
    if (auto whole = param.getDefiningOp<mlir::cleave::ParamOp>()) {
      trainedHere.push_back(whole.getName().str());
      continue;
    }
    // ZeRO: the update writes this rank's part of the parameter.
    auto part = param.getDefiningOp<mlir::cleave::StateOp>();
    auto shard = part ? part->getAttrOfType<mlir::DictionaryAttr>(mlir::cleave::kShardAttr)
                      : mlir::DictionaryAttr();
    auto of = shard ? shard.getAs<mlir::StringAttr>("param") : mlir::StringAttr();
    if (!of)
      return op.emitError("updates neither a parameter nor a part of one");
    if (std::find(trainedHere.begin(), trainedHere.end(), of.str()) == trainedHere.end())
      trainedHere.push_back(of.str());
  }
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto of = func.getResultAttrOfType<mlir::StringAttr>(i, "cleave.gradient_of"))
      trainedHere.push_back(of.str());
  int64_t &bytes = parameterBytes[f];
  for (const std::string &name : trainedHere) {
    auto held = program->weightOfParameter.find(name);
    for (const rt::SafetensorsTensor &w : program->weights)
      if (held != program->weightOfParameter.end() && w.name == held->second) {
        auto part = program->partBytes.find(w.name);
        bytes += part == program->partBytes.end() ? w.desc.bytes()
                                                  : rt::alignWeightSlot(part->second);
      }
    // A weight tied across stages is trained on each stage that holds it.
    if (std::find(trained.begin(), trained.end(), name) == trained.end())
      trained.push_back(name);
  }
  }

  Json stateDict = Json::array();
  if (info.stateDict.empty()) {
    std::set<std::string> listed;
    for (mlir::func::FuncOp func : funcs)
      for (auto param : func.front().getOps<mlir::cleave::ParamOp>())
        if (listed.insert(param.getName().str()).second)
          stateDict.push_back(
              Json{{"name", param.getName().str()}, {"tensor", param.getName().str()}});
  }
  extra.file = "weights/state_dict_extra.safetensors";
  for (const StateDictEntry &entry : info.stateDict) {
    // An entry whose weight the passes removed (nothing reads it any more)
    // is kept from its data, as one the program never read.
    if (!entry.tensor.empty() && (holds(entry.tensor) || !entry.data)) {
      if (!holds(entry.tensor))
        return mlir::func::FuncOp(funcs.front()).emitError("state_dict entry '")
               << entry.name << "' names '" << entry.tensor << "', which the program does not hold";
      stateDict.push_back(Json{{"name", entry.name}, {"tensor", entry.tensor}});
      continue;
    }
    const ParamData *data = entry.data;
    std::optional<rt::DType> dtype = data ? rt::parseDType(data->dtype) : std::nullopt;
    if (!data || (!data->data && data->bytes != 0) || !dtype)
      return mlir::func::FuncOp(funcs.front()).emitError("state_dict entry '")
             << entry.name << "' has no data to keep";
    extra.tensors.push_back(
        {entry.name, rt::TensorDesc{*dtype, rt::Shape(data->shape.begin(), data->shape.end())},
         data->data});
    stateDict.push_back(Json{{"name", entry.name}, {"file", extra.file}});
  }
  training = Json{{"loss", info.loss},
                  {"labels", info.labels ? Json("labels") : Json(nullptr)},
                  {"batch_size", batch >= 0 ? Json(batch * ranks) : Json(nullptr)}, // null: no inputs
                  {"dtype", info.dtype},
                  {"seed", info.seed},
                  {"optimizer", info.optimizer},
                  {"parameters", trained},
                  {"state_dict", stateDict}};
  return mlir::success();
}

/// What a spilling step keeps in host memory, by category: the spilled
/// parameters, their gradients' host copies, their optimizer state; empty
/// when nothing is spilled.
Json hostMemory(mlir::func::FuncOp func) {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;
  std::set<std::string> seen;
  func.walk([&](mlir::Operation *op) {
    if (!inHostPool(op))
      return;
    auto type = op->getResult(0).getType();
    int64_t bytes = static_cast<int64_t>(rt::alignWeightSlot(mlir::cleave::tensorBytes(type)));
    if (auto param = llvm::dyn_cast<mlir::cleave::ParamOp>(op)) {
      if (seen.insert("param:" + param.getName().str()).second)
        parameters += bytes;
    } else if (auto state = llvm::dyn_cast<mlir::cleave::StateOp>(op)) {
      if (!seen.insert("state:" + state.getName().str()).second)
        return;
      llvm::StringRef name = state.getName();
      (name.starts_with("host_gradient.")     ? gradients
       : name.starts_with("host_activation.") ? activations
                                              : optimizer) += bytes;
    }
  });
  if (seen.empty())
    return Json::object();
  return Json{{"parameters", parameters},
              {"gradients", gradients},
              {"optimizer_state", optimizer},
              {"activations", activations},
              {"total", parameters + gradients + optimizer + activations}};
}

/// A training step's memory by what it holds: the weights as parameters
/// and buffers, the state region as optimizer state (gradient accumulators
/// count as gradients), the arena at its peak by the phase that computed
/// each live value, and what the placement leaves unused.
Json memoryByCategory(mlir::func::FuncOp func, int64_t weightBytes, int64_t parameterBytes) {
  int64_t arenaBytes = intAttr(func, "cleave.arena_bytes");
  int64_t stateBytes = intAttr(func, "cleave.state_bytes");
  auto peak = func->getAttrOfType<mlir::DictionaryAttr>("cleave.arena_peak");
  int64_t peakLive = intAttr(func, "cleave.peak_live_bytes");
  auto peakPart = [&](llvm::StringRef key) -> int64_t {
    auto attr = peak ? peak.getAs<mlir::IntegerAttr>(key) : mlir::IntegerAttr();
    return attr ? attr.getInt() : 0;
  };
  int64_t activations = peak ? peakPart("activations") : peakLive;
  int64_t accumulatorBytes = 0;
  func.walk([&](mlir::cleave::StateOp state) {
    if (state.getName().starts_with("gradient_accumulator."))
      accumulatorBytes += static_cast<int64_t>(mlir::cleave::tensorBytes(state.getType()));
  });
  // Spilled parameters are in the host pool; their copies on the device
  // (and those of spilled activations) are the arena's `prefetched`. (The device's weight slots are
  // then 64-byte aligned: the padding counts as buffers.)
  int64_t hostParameterBytes = 0;
  std::set<std::string> hostParams;
  func.walk([&](mlir::cleave::ParamOp param) {
    if (inHostPool(param) && hostParams.insert(param.getName().str()).second)
      hostParameterBytes += mlir::cleave::tensorBytes(param.getType());
  });
  Json categories{{"parameters", parameterBytes - hostParameterBytes},
                  {"buffers", weightBytes - (parameterBytes - hostParameterBytes)},
                  {"optimizer_state", stateBytes - accumulatorBytes},
                  {"activations", activations},
                  {"gradients", peakPart("gradients") + accumulatorBytes},
                  {"temporaries", peakPart("temporaries")}};
  if (int64_t prefetched = peakPart("prefetched"))
    categories["prefetched"] = prefetched;
  categories["arena_unused"] = arenaBytes - peakLive;
  return categories;
}

} // namespace

TrainingEmitInfo trainingEmitInfo(const mlir::cleave::TrainingOptions &o, const std::string &dtype,
                                  int64_t seed) {
  TrainingEmitInfo info;
  info.loss = o.loss;
  info.labels = o.loss != "model";
  info.dtype = dtype;
  info.seed = seed;
  Json optimizer{{"kind", o.optimizer}};
  Json clip = o.clipGradNorm > 0 ? Json(o.clipGradNorm) : Json(nullptr);
  if (o.optimizer == "adamw") {
    optimizer.update(Json{{"lr", o.lr < 0 ? 1e-3 : o.lr},
                          {"betas", Json::array({o.beta1, o.beta2})},
                          {"eps", o.eps},
                          {"weight_decay", o.weightDecay < 0 ? 1e-2 : o.weightDecay}});
  } else if (o.optimizer == "sgd") {
    optimizer.update(Json{{"lr", o.lr},
                          {"momentum", o.momentum},
                          {"dampening", o.dampening},
                          {"nesterov", o.nesterov},
                          {"weight_decay", o.weightDecay < 0 ? 0.0 : o.weightDecay}});
  }
  if (o.optimizer != "none")
    optimizer.update(Json{{"clip_grad_norm", clip},
                          {"lr_schedule", o.lrSchedule},
                          {"warmup_steps", o.warmupSteps},
                          {"decay_steps", o.decaySteps}});
  info.optimizer = optimizer;
  return info;
}

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

  std::vector<ProgramFiles> programs(1);
  ProgramFiles &program = programs.front();
  program.name = kProgram;
  PhaseBindings phase;
  Json modelInputs = Json::array(), modelOutputs = Json::array();
  if (mlir::failed(buildProgram(func, params, WeightSlicing(), program.builder, phase,
                                modelInputs, modelOutputs)))
    return mlir::failure();
  int64_t weightBytes = static_cast<int64_t>(weightBytesOf(program.builder));
  int64_t stateBytes = intAttr(func, "cleave.state_bytes");
  bool training = options.training.has_value();
  const int64_t ranks = options.dataParallel ? options.dataParallel->ranks : 1;
  const int64_t microbatches = options.dataParallel ? options.dataParallel->microbatches : 1;
  // Training plans are version 2: state, in-place updates and phases that
  // a version-1 reader would silently skip.
  int version = training ? 2 : rt::kPlanFormatVersion;

  program.json = Json{{"format", "cleave-program"},
                      {"version", version},
                      {"name", kProgram},
                      {"arena_bytes", arenaBytes.getInt()}};
  if (training)
    program.json["state_bytes"] = stateBytes;
  // Spilling: the host pool holds the spilled weights (laid out by the
  // runtime) and the host state region.
  int64_t hostStateBytes = intAttr(func, "cleave.host_state_bytes");
  int64_t hostBytes = static_cast<int64_t>(weightBytesOf(program.builder, /*host=*/true)) +
                      hostStateBytes;
  if (hostStateBytes > 0)
    program.json["host_state_bytes"] = hostStateBytes;
  program.json.update(Json{{"inputs", phase.inputs},
                           {"outputs", phase.outputs},
                           {"buffers", program.builder.buffers},
                           {"phases", phasesJson(program.builder)}});
  std::string programFile = std::string("programs/") + kProgram + ".json";
  std::string weightsFile = std::string("weights/") + kProgram + ".safetensors";
  Json programEntry{{"file", programFile},
                    {"weights", weightsFile},
                    {"arena_bytes", arenaBytes.getInt()},
                    {"weight_bytes", weightBytes}};
  Json memory{{"arena", arenaBytes.getInt()}, {"weights", weightBytes}};
  std::vector<ExtraWeights> extras;
  Json trainingJson;
  if (hostBytes > 0)
    programEntry["host_bytes"] = hostBytes;
  if (training) {
    programEntry["state_bytes"] = stateBytes;
    ExtraWeights extra;
    std::vector<int64_t> parameterBytesOf;
    const ProgramBuilder *builder = &program.builder;
    if (mlir::failed(trainingManifest(func, *options.training, builder, ranks * microbatches,
                                      trainingJson, extra, parameterBytesOf)))
      return mlir::failure();
    int64_t parameterBytes = parameterBytesOf.front();
    if (!extra.tensors.empty())
      extras.push_back(std::move(extra));
    memory["state"] = stateBytes;
    memory["total"] = arenaBytes.getInt() + weightBytes + stateBytes;
    memory["by_category"] = memoryByCategory(func, weightBytes, parameterBytes);
    if (Json host = hostMemory(func); !host.empty()) {
      if (host["total"].get<int64_t>() != hostBytes)
        return func.emitError("host memory by category (")
               << host["total"].get<int64_t>() << " bytes) differs from the host pool ("
               << hostBytes << " bytes)";
      memory["host"] = hostBytes;
      memory["host_by_category"] = host;
    }
  } else {
    memory["total"] = arenaBytes.getInt() + weightBytes;
  }
  Json devices = Json::array();
  for (int64_t r = 0; r < ranks; ++r)
    devices.push_back(Json{{"rank", r}, {"backend", "cpu"}, {"stage", 0}, {"tp", 0}, {"dp", r},
                           {"program", kProgram}});
  Json manifest{
      {"format", "cleave-plan"},
      {"version", version},
      {"model", Json{{"source", options.modelSource}}},
      {"inputs", modelInputs},
      {"outputs", modelOutputs},
      {"mesh", Json{{"pp", 1}, {"tp", 1}, {"dp", ranks}}}};
  if (options.dataParallel) {
    // Every rank runs the program on its share of the batch (dim 0); the
    // outputs (the loss, averaged) are alike on every rank.
    int64_t local = -1;
    for (Json &t : manifest["inputs"]) {
      auto shape = t["shape"].get<std::vector<int64_t>>();
      local = shape.at(0);
      shape[0] *= ranks * microbatches;
      t["shape"] = shape;
      t["batch_dim"] = 0;
    }
    for (Json &t : manifest["outputs"])
      t["batch_dim"] = nullptr;
    if (local < 0)
      return func.emitError("a data-parallel training plan needs inputs to split");
    manifest["batch"] = Json{{"global", local * ranks * microbatches},
                             {"microbatch_size", local},
                             {"microbatches", microbatches}};
  }
  manifest["schedule"] = Json{{"kind", training ? "train" : "forward"},
                              {"microbatches", microbatches}};
  manifest["devices"] = devices;
  if (options.dataParallel) {
    Json list = Json::array();
    for (int64_t r = 0; r < ranks; ++r)
      list.push_back(r);
    Json singles = Json::array();
    for (int64_t r = 0; r < ranks; ++r)
      singles.push_back(Json::array({r}));
    manifest["groups"] = Json{{"tp", singles}, {"dp", Json::array({list})}, {"pipeline", singles}};
  }
  manifest["programs"] = Json{{kProgram, programEntry}};
  if (training) {
    // ZeRO over the dp group: "none", "optimizer", "gradients" or "parameters".
    trainingJson["zero"] = options.dataParallel ? options.dataParallel->zero : "none";
    manifest["training"] = trainingJson;
  }
  Json predicted = options.dataParallel ? Json(options.dataParallel->predicted) : Json::object();
  predicted["memory_bytes"] = memory;
  manifest["predicted"] = predicted;
  return writePlanDirectory(func.getLoc(), dir, manifest, programs, /*withWeights=*/true, options,
                            extras);
}

std::vector<std::vector<ScheduleSlot>> forwardSlots(const std::string &kind, int64_t stages,
                                                    int64_t microbatches, int64_t virtualStages) {
  std::vector<std::vector<ScheduleSlot>> slots(stages);
  for (int64_t s = 0; s < stages; ++s) {
    if (kind != "interleaved" || virtualStages <= 1) {
      for (int64_t m = 0; m < microbatches; ++m)
        slots[s].push_back({"forward", s, m});
      continue;
    }
    // Megatron-LM's interleaved order: microbatches in groups of `stages`,
    // each group through every chunk of the stage before the next group.
    for (int64_t first = 0; first < microbatches; first += stages)
      for (int64_t k = 0; k < virtualStages; ++k)
        for (int64_t m = first; m < std::min(microbatches, first + stages); ++m)
          slots[s].push_back({"forward", k * stages + s, m});
  }
  return slots;
}

namespace {
/// "stage<s>_tp<t>": the program a (stage, tp index) function becomes.
std::string programNameOf(mlir::func::FuncOp func) {
  return "stage" + std::to_string(intAttr(func, "cleave.stage")) + "_tp" +
         std::to_string(intAttr(func, "cleave.tp"));
}
/// A partitioned plan's program: its JSON (version 2 with a state region),
/// and its manifest entry, returned.
Json finishProgram(ProgramFiles &program, const std::vector<PhaseBindings> &bindings,
                   const Json &phases, int64_t stage, int64_t tp, int64_t arena,
                   int64_t weightBytes, std::optional<int64_t> stateBytes, bool withWeights) {
  program.json = Json{{"format", "cleave-program"},
                      {"version", stateBytes ? 2 : rt::kPlanFormatVersion},
                      {"name", program.name},
                      {"stage", stage},
                      {"tp", tp},
                      {"arena_bytes", arena}};
  if (stateBytes)
    program.json["state_bytes"] = *stateBytes;
  addBindings(program.json, bindings);
  program.json["buffers"] = program.builder.buffers;
  program.json["phases"] = phases;
  Json entry{{"file", "programs/" + program.name + ".json"}};
  if (withWeights)
    entry["weights"] = "weights/" + program.name + ".safetensors";
  entry.update(Json{{"stage", stage}, {"tp", tp}, {"arena_bytes", arena},
                    {"weight_bytes", weightBytes}});
  if (stateBytes)
    entry["state_bytes"] = *stateBytes;
  return entry;
}
} // namespace

mlir::LogicalResult emitPartitionedPlan(mlir::ModuleOp module,
                                        const decltype(ImportedModel::params) &params,
                                        const std::string &dir, const PlanEmitOptions &options,
                                        const PartitionInfo &info) {
  mlir::Location loc = module.getLoc();
  // Programs: one per (stage, tp index), a phase per chunk in chunk order.
  std::map<std::pair<int64_t, int64_t>, std::vector<mlir::func::FuncOp>> phasesOf;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    auto stage = func->getAttrOfType<mlir::IntegerAttr>("cleave.stage");
    auto tp = func->getAttrOfType<mlir::IntegerAttr>("cleave.tp");
    if (!stage || !tp || !func->hasAttr("cleave.arena_bytes"))
      return func.emitError("is not a memory-planned function of one stage and tp index: run "
                            "cleave-outline-stages, cleave-specialize-ranks and "
                            "cleave-plan-memory first");
    phasesOf[{stage.getInt(), tp.getInt()}].push_back(func);
  }
  if (int64_t(phasesOf.size()) != info.pp * info.tp)
    return mlir::emitError(loc) << "the module has " << phasesOf.size()
                                << " (stage, tp index) programs, the mesh needs "
                                << info.pp * info.tp;
  auto chunkOf = [](mlir::func::FuncOp f) {
    auto chunk = f->getAttrOfType<mlir::IntegerAttr>("cleave.chunk");
    return chunk ? chunk.getInt() : f->getAttrOfType<mlir::IntegerAttr>("cleave.stage").getInt();
  };

  std::vector<ProgramFiles> programs;
  // Weights point into their builder's buffers: the vector must not move
  // (or copy) a builder once it holds some.
  programs.reserve(phasesOf.size());
  Json programsJson = Json::object();
  Json modelInputs = Json::array(), modelOutputs = Json::array();
  int64_t largestArena = 0, largestWeights = 0;
  const bool training = options.training.has_value();
  std::vector<mlir::func::FuncOp> trainingFuncs;
  std::vector<const ProgramBuilder *> trainingBuilders;
  // Per stage, the slots its step runs (from its phases, in order).
  std::vector<Json> trainingSlots(info.pp, Json::array());
  Json largestMemory;
  for (auto &[key, funcs] : phasesOf) {
    auto [stage, tp] = key;
    if (training) {
      if (funcs.size() != 1)
        return funcs.front().emitError("a pipelined training step has one function per stage and "
                                       "tp index, not ")
               << funcs.size();
      mlir::func::FuncOp func = funcs.front();
      ProgramFiles &program = programs.emplace_back();
      program.name = programNameOf(func);
      program.builder.stages = info.pp;
      PhaseBindings all;
      Json inputs = Json::array(), outputs = Json::array();
      if (mlir::failed(buildProgram(func, params, WeightSlicing{info.tp, tp, info.withWeights},
                                    program.builder, all, inputs, outputs)))
        return mlir::failure();
      if (tp == 0)
        for (auto [every, part] : {std::pair{&modelInputs, &inputs}, {&modelOutputs, &outputs}})
          for (const Json &t : *part)
            every->push_back(t);
      std::vector<size_t> slotOfOp;
      std::vector<mlir::cleave::PhaseSlot> slots = mlir::cleave::phaseSlotsOf(func.front(), slotOfOp);
      // A phase per slot: its instructions, the inputs its first reader
      // reads (a microbatch's arguments) and the outputs it computes.
      std::vector<PhaseBindings> bindings(slots.size());
      std::vector<Json> instructions(slots.size(), Json::array());
      std::map<int64_t, size_t> writer; // buffer -> slot of the instruction writing it
      for (auto [instruction, slot] :
           llvm::zip(program.builder.instructions, program.builder.instructionSlots)) {
        instructions[slot].push_back(instruction);
        for (const Json &b : instruction["outputs"])
          writer[b.get<int64_t>()] = slot;
      }
      for (auto [i, input] : llvm::enumerate(all.inputs)) {
        auto chunk = func.getArgAttrOfType<mlir::IntegerAttr>(i, mlir::cleave::kPhaseChunkAttr);
        auto microbatch =
            func.getArgAttrOfType<mlir::IntegerAttr>(i, mlir::cleave::kPhaseMicrobatchAttr);
        auto it = llvm::find_if(slots, [&](const mlir::cleave::PhaseSlot &slot) {
          return chunk && microbatch && slot.name == mlir::cleave::kForwardPhase &&
                 slot.chunk == chunk.getInt() && slot.microbatch == microbatch.getInt();
        });
        if (it == slots.end())
          return func.emitError("argument ") << i << " is read by no forward slot";
        bindings[it - slots.begin()].inputs.push_back(input);
      }
      for (const Json &output : all.outputs) {
        auto it = writer.find(output["buffer"].get<int64_t>());
        if (it == writer.end())
          return func.emitError("output '") << output["name"].get<std::string>()
                                            << "' is computed by no instruction";
        bindings[it->second].outputs.push_back(output);
      }
      Json phases = Json::array();
      for (auto [k, slot] : llvm::enumerate(slots)) {
        Json phase{{"name", slot.name.str()}, {"chunk", slot.chunk >= 0 ? slot.chunk : stage}};
        if (slot.microbatch >= 0)
          phase["microbatch"] = slot.microbatch;
        phase.update(Json{{"inputs", bindings[k].inputs},
                          {"outputs", bindings[k].outputs},
                          {"instructions", instructions[k]}});
        phases.push_back(phase);
        if (tp == 0)
          trainingSlots[stage].push_back(Json{{"phase", slot.name.str()},
                                              {"chunk", slot.chunk >= 0 ? slot.chunk : stage},
                                              {"microbatch", std::max<int64_t>(0, slot.microbatch)}});
      }
      int64_t arena = intAttr(func, "cleave.arena_bytes");
      int64_t state = intAttr(func, "cleave.state_bytes");
      int64_t weightBytes = weightBytesOf(program.builder);
      programsJson[program.name] =
          finishProgram(program, bindings, phases, stage, tp, arena, weightBytes, state,
                        info.withWeights);
      int64_t total = arena + weightBytes + state;
      if (largestMemory.is_null() || total > largestMemory["total"].get<int64_t>())
        largestMemory = Json{{"arena", arena}, {"weights", weightBytes}, {"state", state},
                             {"total", total}};
      trainingFuncs.push_back(func);
      trainingBuilders.push_back(&program.builder);
      continue;
    }
    llvm::sort(funcs, [&](auto a, auto b) { return chunkOf(a) < chunkOf(b); });
    ProgramFiles &program = programs.emplace_back();
    program.name = "stage" + std::to_string(stage) + "_tp" + std::to_string(tp);
    program.builder.stages = info.pp;
    WeightSlicing slicing{info.tp, tp, info.withWeights};
    std::vector<PhaseBindings> bindings;
    Json phases = Json::array();
    int64_t arena = 0;
    for (mlir::func::FuncOp func : funcs) {
      program.builder.instructions = Json::array();
      program.builder.instructionPhases.clear();
      PhaseBindings &phase = bindings.emplace_back();
      Json inputs = Json::array(), outputs = Json::array();
      if (mlir::failed(buildProgram(func, params, slicing, program.builder, phase, inputs,
                                    outputs)))
        return mlir::failure();
      if (tp == 0) // every tp index binds the same model inputs and outputs
        for (auto [all, part] : {std::pair{&modelInputs, &inputs}, {&modelOutputs, &outputs}})
          for (const Json &t : *part)
            all->push_back(t);
      arena = std::max(arena, func->getAttrOfType<mlir::IntegerAttr>("cleave.arena_bytes").getInt());
      phases.push_back(Json{{"name", "forward"}, {"chunk", chunkOf(func)},
                            {"inputs", phase.inputs}, {"outputs", phase.outputs},
                            {"instructions", program.builder.instructions}});
    }
    // Meta plans have no files but the same weights: what a plan with data
    // would allocate.
    int64_t weightBytes = weightBytesOf(program.builder);
    largestArena = std::max(largestArena, arena);
    largestWeights = std::max(largestWeights, weightBytes);
    programsJson[program.name] = finishProgram(program, bindings, phases, stage, tp, arena,
                                               weightBytes, std::nullopt, info.withWeights);
  }

  // The model's inputs and outputs at the global batch, in name order of
  // the original @forward (each appears in one phase of stage 0 / the last).
  int64_t scale = info.globalBatch / info.microbatchSize;
  auto globalize = [&](const Json &tensors, const std::vector<std::string> &order,
                       const char *what) -> mlir::FailureOr<Json> {
    Json out = Json::array();
    for (const std::string &name : order) {
      auto it = std::find_if(tensors.begin(), tensors.end(),
                             [&](const Json &t) { return t["name"] == name; });
      if (it == tensors.end())
        return mlir::emitError(loc) << "no program binds the model's " << what << " '" << name
                                    << "'";
      Json t = *it;
      if (training && std::string(what) == "output") {
        // A training step's outputs (the loss) are reduced over the batch.
        t["batch_dim"] = nullptr;
        out.push_back(t);
        continue;
      }
      auto shape = t["shape"].get<std::vector<int64_t>>();
      int64_t dim = info.batchDim;
      bool batched = dim < int64_t(shape.size()) && shape[dim] == info.microbatchSize;
      if (!batched && scale > 1)
        return mlir::emitError(loc) << "the model's " << what << " '" << name << "' ("
                                    << t["shape"].dump() << ") has no batch dim " << dim
                                    << " of the microbatch size " << info.microbatchSize
                                    << ", so microbatches and data-parallel ranks cannot split it";
      if (batched)
        shape[dim] *= scale;
      t["shape"] = shape;
      t["batch_dim"] = batched ? Json(dim) : Json(nullptr);
      out.push_back(t);
    }
    return out;
  };
  auto inputs = globalize(modelInputs, info.inputNames, "input");
  auto outputs = globalize(modelOutputs, info.outputNames, "output");
  if (mlir::failed(inputs) || mlir::failed(outputs))
    return mlir::failure();

  // Ranks: tp fastest, then dp, then stage (docs/plan-format.md).
  int64_t ranks = info.pp * info.dp * info.tp;
  auto coordsOf = [&](int64_t r) {
    return std::array<int64_t, 3>{r / (info.dp * info.tp), (r / info.tp) % info.dp, r % info.tp};
  };
  Json devices = Json::array();
  for (int64_t r = 0; r < ranks; ++r) {
    auto [s, d, t] = coordsOf(r);
    devices.push_back(Json{{"rank", r}, {"backend", "cpu"}, {"stage", s}, {"tp", t}, {"dp", d},
                           {"program", "stage" + std::to_string(s) + "_tp" + std::to_string(t)}});
  }
  // The ranks that differ only in mesh coordinate `axis` (0 stage, 1 dp,
  // 2 tp), each group in rank order, groups by their first rank.
  auto groupsAlong = [&](int axis) {
    std::map<std::array<int64_t, 3>, Json> byOthers;
    for (int64_t r = 0; r < ranks; ++r) {
      auto key = coordsOf(r);
      key[axis] = 0;
      byOthers.try_emplace(key, Json::array()).first->second.push_back(r);
    }
    Json groups = Json::array();
    for (auto &[key, group] : byOthers)
      groups.push_back(group);
    llvm::sort(groups.begin(), groups.end());
    return groups;
  };
  Json tpGroups = groupsAlong(2), dpGroups = groupsAlong(1), pipelines = groupsAlong(0);

  Json stages = Json::array();
  auto slots = forwardSlots(info.schedule, info.pp, info.microbatches, info.virtualStages);
  for (auto [s, list] : llvm::enumerate(slots)) {
    Json js = Json::array();
    for (const ScheduleSlot &slot : list)
      js.push_back(Json{{"phase", slot.phase}, {"chunk", slot.chunk}, {"microbatch", slot.microbatch}});
    stages.push_back(Json{{"stage", s}, {"slots", training ? trainingSlots[s] : js}});
  }
  Json parameters = Json::object();
  for (const auto &[name, type] : info.parameters)
    parameters[name] = describeTensor(name, type);
  for (auto &[name, p] : parameters.items())
    p.erase("name");

  Json predicted = info.predicted;
  predicted["memory_bytes"] = Json{{"arena", largestArena}, {"weights", largestWeights},
                                   {"total", largestArena + largestWeights}};
  Json trainingJson;
  std::vector<ExtraWeights> extras;
  if (training) {
    // The largest program's memory (each program's is in its entry).
    predicted["memory_bytes"] = largestMemory;
    ExtraWeights extra;
    std::vector<int64_t> parameterBytes;
    if (mlir::failed(trainingManifest(trainingFuncs, *options.training, trainingBuilders,
                                      info.dp * info.microbatches, trainingJson, extra,
                                      parameterBytes)))
      return mlir::failure();
    trainingJson["zero"] = options.training->zero;
    if (!extra.tensors.empty())
      extras.push_back(std::move(extra));
    // Each program's memory by category in its entry; the manifest's is
    // the largest program's.
    for (size_t i = 0; i < trainingFuncs.size(); ++i) {
      std::string name = programNameOf(trainingFuncs[i]);
      Json &entry = programsJson[name];
      entry["memory_by_category"] = memoryByCategory(
          trainingFuncs[i], entry["weight_bytes"].get<int64_t>(), parameterBytes[i]);
      int64_t total = entry["arena_bytes"].get<int64_t>() + entry["weight_bytes"].get<int64_t>() +
                      entry["state_bytes"].get<int64_t>();
      if (total == largestMemory["total"].get<int64_t>())
        predicted["memory_bytes"]["by_category"] = entry["memory_by_category"];
    }
  }
  Json manifest{
      {"format", "cleave-plan"},
      {"version", training ? 2 : rt::kPlanFormatVersion},
      {"model", Json{{"source", options.modelSource}, {"weights", info.withWeights}}},
      {"inputs", *inputs},
      {"outputs", *outputs},
      {"mesh", Json{{"pp", info.pp}, {"tp", info.tp}, {"dp", info.dp}}},
      {"batch", Json{{"global", info.globalBatch}, {"microbatch_size", info.microbatchSize},
                     {"microbatches", info.microbatches}}},
      {"schedule", Json{{"kind", training ? std::string("train") : info.schedule},
                        {"microbatches", info.microbatches},
                        {"virtual_stages", info.virtualStages}, {"stages", stages}}},
      {"groups", Json{{"tp", tpGroups}, {"dp", dpGroups}, {"pipeline", pipelines}}},
      {"devices", devices},
      {"parameters", parameters},
      {"programs", programsJson},
      {"predicted", predicted}};
  if (training) {
    // The pipeline's order of forward and backward slots.
    manifest["schedule"]["pipeline"] = info.schedule;
    manifest["training"] = trainingJson;
  }
  return writePlanDirectory(loc, dir, manifest, programs, info.withWeights, options, extras);
}

} // namespace cleave
