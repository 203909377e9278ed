#include "runtime/Plan.h"
#include "runtime/Checked.h"
#include "runtime/JsonFile.h"
#include "runtime/PlanVerify.h"
#include "runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

namespace cleave::runtime {

const char *poolName(Pool pool) { return pool == Pool::Host ? "host" : "device"; }

namespace {

using Json = nlohmann::json;

/// A JSON value with the path that leads to it, for error messages such as
/// "programs/stage0_tp0.json: buffers[3].shape: ...".
struct Node {
  const Json &json;
  std::string file;
  std::string path;

  // Missing keys and elements read as null, which every getter rejects with
  // the path; nothing here throws.
  Node child(const std::string &key) const {
    static const Json null;
    bool present = json.is_object() && json.contains(key);
    return {present ? json[key] : null, file, path.empty() ? key : path + "." + key};
  }
  Node element(size_t i) const {
    static const Json null;
    return {json.is_array() && i < json.size() ? json[i] : null, file,
            path + "[" + std::to_string(i) + "]"};
  }
  std::string where() const { return file + ": " + (path.empty() ? "top level" : path); }
};

Status field(const Node &node, const std::string &key, Json::value_t kind,
             const char *what, std::optional<Node> *out) {
  if (!node.json.is_object() || !node.json.contains(key))
    return CLEAVE_ERROR(node.where(), ": missing '", key, "'");
  Node child = node.child(key);
  bool ok = child.json.type() == kind ||
            (kind == Json::value_t::number_integer && child.json.is_number_unsigned());
  if (!ok)
    return CLEAVE_ERROR(child.where(), ": expected ", what);
  out->emplace(child);
  return {};
}

Status getString(const Node &node, const std::string &key, std::string *out) {
  std::optional<Node> child;
  CLEAVE_RETURN_IF_ERROR(field(node, key, Json::value_t::string, "a string", &child));
  *out = child->json.get<std::string>();
  return {};
}

Status getInt(const Node &node, const std::string &key, int64_t *out, int64_t min = 0) {
  std::optional<Node> child;
  CLEAVE_RETURN_IF_ERROR(
      field(node, key, Json::value_t::number_integer, "an integer", &child));
  if (child->json.is_number_unsigned() &&
      child->json.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return CLEAVE_ERROR(child->where(), ": out of range");
  *out = child->json.get<int64_t>();
  if (*out < min)
    return CLEAVE_ERROR(child->where(), ": must be at least ", min, ", got ", *out);
  return {};
}

Status getArray(const Node &node, const std::string &key, std::optional<Node> *out) {
  return field(node, key, Json::value_t::array, "a list", out);
}

Status getObject(const Node &node, const std::string &key, std::optional<Node> *out) {
  return field(node, key, Json::value_t::object, "an object", out);
}

bool has(const Node &node, const std::string &key) {
  return node.json.is_object() && node.json.contains(key);
}

Status getDouble(const Node &node, const std::string &key, double *out) {
  Node child = node.child(key);
  if (!child.json.is_number() || child.json.get<double>() < 0)
    return CLEAVE_ERROR(child.where(), ": expected a non-negative number");
  *out = child.json.get<double>();
  return {};
}

/// `key` when present (null counts as absent), else `fallback`.
Status getOptionalInt(const Node &node, const std::string &key, int64_t fallback, int64_t *out,
                      int64_t min = 0) {
  if (!has(node, key) || node.json[key].is_null()) {
    *out = fallback;
    return {};
  }
  return getInt(node, key, out, min);
}

/// "[0, 1]", as the manifest writes a rank list.
std::string rankList(const std::vector<int64_t> &ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

/// A state's or weight's "shard": {"group": "dp", "ranks": dp, "shape":
/// [...]}, the whole tensor whose ZeRO part the buffer holds.
Status parseShard(const Plan &plan, const Node &item, BufferSpec *buffer) {
  std::optional<Node> shard, shape;
  CLEAVE_RETURN_IF_ERROR(getObject(item, "shard", &shard));
  std::string group;
  int64_t ranks = 0;
  CLEAVE_RETURN_IF_ERROR(getString(*shard, "group", &group));
  CLEAVE_RETURN_IF_ERROR(getInt(*shard, "ranks", &ranks, 1));
  CLEAVE_RETURN_IF_ERROR(getArray(*shard, "shape", &shape));
  if (group != "dp" || ranks != plan.dp)
    return CLEAVE_ERROR(shard->where(), ": a tensor is sharded over the dp group of ", plan.dp,
                        " ranks, not '", group, "' of ", ranks);
  Shape whole;
  for (size_t i = 0; i < shape->json.size(); ++i) {
    Node dim = shape->element(i);
    if (!dim.json.is_number_integer() || dim.json.get<int64_t>() < 0)
      return CLEAVE_ERROR(dim.where(), ": expected a size >= 0");
    whole.push_back(dim.json.get<int64_t>());
  }
  CLEAVE_RETURN_IF_ERROR(checkTensorSize(TensorDesc{buffer->desc.dtype, whole}, shape->where()));
  int64_t numel = numElements(whole), part = (numel + ranks - 1) / ranks;
  if (buffer->desc.shape != Shape{part})
    return CLEAVE_ERROR(item.where(), ": a part of ", describe(whole, buffer->desc.dtype),
                        " over ", ranks, " ranks is ", describe(Shape{part}, buffer->desc.dtype),
                        ", the buffer is ", describe(buffer->desc.shape, buffer->desc.dtype));
  buffer->shardOf = whole;
  return {};
}

Status getTensorDesc(const Node &node, TensorDesc *desc) {
  std::string dtype;
  CLEAVE_RETURN_IF_ERROR(getString(node, "dtype", &dtype));
  std::optional<DType> parsed = parseDType(dtype);
  if (!parsed)
    return CLEAVE_ERROR(node.child("dtype").where(), ": unknown dtype '", dtype,
                        "' (expected f32, bf16, f16, i64, i32 or i1)");
  desc->dtype = *parsed;
  std::optional<Node> shape;
  CLEAVE_RETURN_IF_ERROR(getArray(node, "shape", &shape));
  desc->shape.clear();
  for (const Json &d : shape->json) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return CLEAVE_ERROR(shape->where(), ": expected non-negative integers, got ",
                          jsonExcerpt(shape->json));
    desc->shape.push_back(d.get<int64_t>());
  }
  return checkTensorSize(*desc, shape->where());
}

Status readJson(const std::string &dir, const std::string &file, Json *out) {
  std::string path = dir + "/" + file;
  std::ifstream in(path);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  CLEAVE_RETURN_IF_ERROR(parseJson(text.str(), path, out));
  if (!out->is_object())
    return CLEAVE_ERROR(path, ": expected a JSON object");
  return {};
}

/// The file's format and version: 1 (inference) or 2 (training); a program
/// has its manifest's version (`expected`, when given).
Status checkVersion(const Node &top, const std::string &format, int64_t *version,
                    std::optional<int64_t> expected = std::nullopt) {
  std::string actual;
  CLEAVE_RETURN_IF_ERROR(getString(top, "format", &actual));
  if (actual != format)
    return CLEAVE_ERROR(top.file, ": format is '", actual, "', expected '", format, "'");
  CLEAVE_RETURN_IF_ERROR(getInt(top, "version", version));
  if (*version != kPlanFormatVersion && *version != kTrainingPlanFormatVersion)
    return CLEAVE_ERROR(top.file, ": unsupported plan format version ", *version,
                        " (this runtime reads versions ", kPlanFormatVersion, " and ",
                        kTrainingPlanFormatVersion, ")");
  if (expected && *version != *expected)
    return CLEAVE_ERROR(top.file, ": version ", *version, ", the manifest's is ", *expected);
  return {};
}

Status parseTensorSpecs(const Node &top, const std::string &key,
                        std::vector<TensorSpec> *out) {
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(top, key, &list));
  std::set<std::string> seen;
  for (size_t i = 0; i < list->json.size(); ++i) {
    Node item = list->element(i);
    TensorSpec spec;
    CLEAVE_RETURN_IF_ERROR(getString(item, "name", &spec.name));
    CLEAVE_RETURN_IF_ERROR(getTensorDesc(item, &spec.desc));
    if (has(item, "batch_dim") && !item.json["batch_dim"].is_null()) {
      int64_t dim = 0;
      CLEAVE_RETURN_IF_ERROR(getInt(item, "batch_dim", &dim));
      if (dim >= spec.desc.rank())
        return CLEAVE_ERROR(item.child("batch_dim").where(), ": dim ", dim, " of a ",
                            describe(spec.desc.shape, spec.desc.dtype), " tensor");
      spec.batchDim = dim;
    }
    if (!seen.insert(spec.name).second)
      return CLEAVE_ERROR(item.where(), ": duplicate name '", spec.name, "'");
    out->push_back(std::move(spec));
  }
  return {};
}

Status parseAttributes(const Node &node, Attributes *attrs) {
  if (!node.json.is_object())
    return CLEAVE_ERROR(node.where(), ": expected an object");
  for (auto it = node.json.begin(); it != node.json.end(); ++it) {
    const Json &v = *it;
    if (v.is_boolean())
      attrs->set(it.key(), v.get<bool>());
    else if (v.is_number_integer())
      attrs->set(it.key(), v.get<int64_t>());
    else if (v.is_number_float())
      attrs->set(it.key(), v.get<double>());
    else if (v.is_string())
      attrs->set(it.key(), v.get<std::string>());
    else if (v.is_array()) {
      std::vector<int64_t> list;
      for (const Json &e : v) {
        if (!e.is_number_integer())
          return CLEAVE_ERROR(node.where(), ".", it.key(), ": lists must hold integers");
        list.push_back(e.get<int64_t>());
      }
      attrs->set(it.key(), std::move(list));
    } else {
      return CLEAVE_ERROR(node.where(), ".", it.key(), ": unsupported attribute value");
    }
  }
  return {};
}

bool overlaps(size_t aBegin, size_t aBytes, size_t bBegin, size_t bBytes) {
  return aBytes && bBytes && aBegin < bBegin + bBytes && bBegin < aBegin + aBytes;
}

/// A buffer's "pool" (version 2, weights and states only): "device" (the
/// default) or "host".
Status parsePool(const Plan &plan, const ProgramSpec &program, const Node &item,
                 const std::string &label, bool inArena, Pool *pool) {
  *pool = Pool::Device;
  if (!has(item, "pool"))
    return {};
  const Json &value = item.json["pool"];
  if (plan.version < kTrainingPlanFormatVersion)
    return CLEAVE_ERROR(program.file, ": ", label, ": 'pool' needs plan format version ",
                        kTrainingPlanFormatVersion);
  if (!value.is_string() || (value != "host" && value != "device"))
    return CLEAVE_ERROR(program.file, ": ", label, ": pool ", jsonExcerpt(value),
                        " is neither \"device\" nor \"host\"");
  if (inArena)
    return CLEAVE_ERROR(program.file, ": ", label,
                        ": an arena buffer has no pool (only weights and states may live in "
                        "the host pool)");
  *pool = value == "host" ? Pool::Host : Pool::Device;
  return {};
}

Status parseBuffers(const Plan &plan, const Node &top, ProgramSpec *program) {
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "buffers", &list));
  std::map<std::string, int64_t> stateViews;  // a state's first buffer
  std::map<std::string, int64_t> weightViews; // a weight's first buffer
  // Per pool: offset -> buffer, of distinct non-empty states.
  std::map<size_t, int64_t> stateRanges[2];
  for (size_t i = 0; i < list->json.size(); ++i) {
    Node item = list->element(i);
    BufferSpec buffer;
    CLEAVE_RETURN_IF_ERROR(getInt(item, "id", &buffer.id));
    if (buffer.id != static_cast<int64_t>(i))
      return CLEAVE_ERROR(item.where(), ": id ", buffer.id, " out of order (expected ", i, ")");
    CLEAVE_RETURN_IF_ERROR(getString(item, "name", &buffer.name));
    CLEAVE_RETURN_IF_ERROR(getTensorDesc(item, &buffer.desc));
    bool inArena = item.json.contains("arena_offset");
    bool isWeight = item.json.contains("weight");
    bool isState = item.json.contains("state");
    bool training = plan.version >= kTrainingPlanFormatVersion;
    if (int(inArena) + int(isWeight) + int(isState) != 1)
      return CLEAVE_ERROR(item.where(), training
                                            ? ": needs exactly one of 'arena_offset', 'weight' "
                                              "and 'state'"
                                            : ": needs exactly one of 'arena_offset' and 'weight'");
    if (isState && !training)
      return CLEAVE_ERROR(item.where(), ": state buffers need plan format version ",
                          kTrainingPlanFormatVersion);
    std::string label = "buffer " + std::to_string(buffer.id) + " (" + buffer.name + ")";
    CLEAVE_RETURN_IF_ERROR(parsePool(plan, *program, item, label, inArena, &buffer.pool));
    // Every view of one weight or state is in the same pool.
    auto samePool = [&](const BufferSpec &other, const char *what, const std::string &name) {
      if (other.pool == buffer.pool)
        return Status();
      return CLEAVE_ERROR(program->file, ": ", label, " puts ", what, " '", name, "' in the ",
                          poolName(buffer.pool), " pool, buffer ", other.id, " in the ",
                          poolName(other.pool), " pool");
    };
    if (isState) {
      std::string state;
      int64_t offset = 0;
      CLEAVE_RETURN_IF_ERROR(getString(item, "state", &state));
      CLEAVE_RETURN_IF_ERROR(getInt(item, "state_offset", &offset));
      if (auto seen = stateViews.find(state); seen != stateViews.end())
        CLEAVE_RETURN_IF_ERROR(samePool(program->buffers[seen->second], "state", state));
      const bool host = buffer.onHost();
      const size_t regionBytes = host ? program->hostStateBytes : program->stateBytes;
      if (!spanWithin(offset, static_cast<int64_t>(buffer.desc.bytes()),
                      static_cast<int64_t>(regionBytes)))
        return CLEAVE_ERROR(program->file, ": ", label, " spans ", host ? "host " : "",
                            "state bytes [", offset, ", ", offset + buffer.desc.bytes(),
                            "), past the ", host ? "host state region's " : "state region's ",
                            regionBytes, " bytes", host ? " (host_state_bytes)" : "");
      if (offset % std::max<size_t>(1, dtypeBytes(buffer.desc.dtype)) != 0)
        return CLEAVE_ERROR(program->file, ": ", label, ": state_offset ", offset,
                            " is not aligned to its element size");
      if (host && offset % 64 != 0)
        return CLEAVE_ERROR(program->file, ": ", label, ": state_offset ", offset,
                            " of a host state is not 64-byte aligned");
      // Several buffers may view one state; distinct states never overlap.
      // Both are looked up, not scanned for: a program may list many states.
      if (auto seen = stateViews.find(state); seen != stateViews.end()) {
        const BufferSpec &other = program->buffers[seen->second];
        if (*other.stateOffset != static_cast<size_t>(offset) ||
            other.desc.bytes() != buffer.desc.bytes() || other.desc.dtype != buffer.desc.dtype)
          return CLEAVE_ERROR(program->file, ": ", label, " views state '", state,
                              "' unlike buffer ", other.id, " (offset, size or dtype differ)");
      } else if (size_t bytes = buffer.desc.bytes(); bytes > 0) {
        // The states placed so far in this region are disjoint and sorted
        // by offset, so their ends are sorted too: only the last one that
        // begins before this one ends can reach into it.
        std::map<size_t, int64_t> &ranges = stateRanges[host ? 1 : 0];
        auto after = ranges.lower_bound(static_cast<size_t>(offset) + bytes);
        if (after != ranges.begin()) {
          const BufferSpec &other = program->buffers[std::prev(after)->second];
          if (overlaps(*other.stateOffset, other.desc.bytes(), offset, bytes))
            return CLEAVE_ERROR(program->file, ": ", label, ": state '", state,
                                "' overlaps state '", *other.state, "' (buffer ", other.id, ")");
        }
        ranges.emplace(static_cast<size_t>(offset), buffer.id);
      }
      stateViews.emplace(state, buffer.id);
      buffer.state = state;
      buffer.stateOffset = static_cast<size_t>(offset);
      if (has(item, "shard"))
        CLEAVE_RETURN_IF_ERROR(parseShard(plan, item, &buffer));
    } else if (inArena) {
      int64_t offset = 0;
      CLEAVE_RETURN_IF_ERROR(getInt(item, "arena_offset", &offset));
      if (!spanWithin(offset, static_cast<int64_t>(buffer.desc.bytes()),
                      static_cast<int64_t>(program->arenaBytes)))
        return CLEAVE_ERROR(program->file, ": ", label, " spans bytes [", offset, ", ",
                            offset + buffer.desc.bytes(), "), past the arena's ",
                            program->arenaBytes, " bytes");
      buffer.arenaOffset = static_cast<size_t>(offset);
    } else {
      std::string weight;
      CLEAVE_RETURN_IF_ERROR(getString(item, "weight", &weight));
      WeightShard shard;
      if (!parseWeightShard(weight, &shard))
        return CLEAVE_ERROR(item.child("weight").where(), ": '", excerpt(weight),
                            "' is neither a parameter name nor NAME[split(DIM) PART/PARTS] "
                            "(numbers of at most 18 digits, PART < PARTS)");
      buffer.weight = weight;
      if (auto seen = weightViews.find(weight); seen != weightViews.end())
        CLEAVE_RETURN_IF_ERROR(samePool(program->buffers[seen->second], "weight", weight));
      weightViews.emplace(weight, buffer.id);
      if (buffer.onHost())
        program->hostWeights.insert(weight);
      if (program->weightsFile.empty()) { // a plan without weights: nothing to check against
        program->buffers.push_back(std::move(buffer));
        continue;
      }
      const SafetensorsEntry *entry = program->weights.find(weight);
      if (!entry)
        return CLEAVE_ERROR(program->file, ": ", label, " refers to weight '", excerpt(weight),
                            "', missing from ", program->weightsFile);
      if (has(item, "shard")) {
        // ZeRO-3: the buffer is the rank's part of the file's whole tensor.
        if (!training)
          return CLEAVE_ERROR(item.where(), ": sharded weights need plan format version ",
                              kTrainingPlanFormatVersion);
        CLEAVE_RETURN_IF_ERROR(parseShard(plan, item, &buffer));
        TensorDesc whole{buffer.desc.dtype, *buffer.shardOf};
        if (entry->desc != whole)
          return CLEAVE_ERROR(program->file, ": ", label, " is a part of ",
                              describe(whole.shape, whole.dtype), " but weight '", weight,
                              "' in ", program->weightsFile, " is ",
                              describe(entry->desc.shape, entry->desc.dtype));
        auto [it, added] = program->weightShards.emplace(weight, whole.shape);
        if (!added && it->second != whole.shape)
          return CLEAVE_ERROR(program->file, ": ", label, " views weight '", weight,
                              "' as a part of another shape");
        program->buffers.push_back(std::move(buffer));
        continue;
      }
      if (program->weightShards.count(weight))
        return CLEAVE_ERROR(program->file, ": ", label, " views weight '", weight,
                            "' whole, another buffer as a ZeRO part");
      // A buffer may view a weight with another shape of the same size
      // (reshape), never with another dtype or size.
      if (entry->desc.dtype != buffer.desc.dtype || entry->desc.bytes() != buffer.desc.bytes())
        return CLEAVE_ERROR(program->file, ": ", label, " is ",
                            describe(buffer.desc.shape, buffer.desc.dtype), " but weight '",
                            weight, "' in ", program->weightsFile, " is ",
                            describe(entry->desc.shape, entry->desc.dtype));
      if (entry->begin % dtypeBytes(entry->desc.dtype) != 0)
        return CLEAVE_ERROR(program->weightsFile, ": weight '", weight,
                            "' is not aligned to its element size");
    }
    program->buffers.push_back(std::move(buffer));
  }
  program->hostPool = std::any_of(program->buffers.begin(), program->buffers.end(),
                                  [](const BufferSpec &b) { return b.onHost(); });
  return {};
}

Status bufferId(const ProgramSpec &program, const Node &node, int64_t *id) {
  if (!node.json.is_number_integer())
    return CLEAVE_ERROR(node.where(), ": expected a buffer id");
  *id = node.json.get<int64_t>();
  if (*id < 0 || *id >= static_cast<int64_t>(program.buffers.size()))
    return CLEAVE_ERROR(node.where(), ": missing buffer ", *id, " (the program has ",
                        program.buffers.size(), ")");
  return {};
}

/// The kernels partitioning adds: their operand counts and the attributes
/// that say who they talk to, checked against the mesh. Shapes against the
/// group size are verifyPlan's (runtime/PlanVerify.h).
Status checkPartitionKernel(const Plan &plan, const std::string &label,
                            const InstructionSpec &inst) {
  bool isSend = inst.kernel == "send", isRecv = inst.kernel == "recv";
  if (!isSend && !isRecv && !isGroupKernel(inst.kernel))
    return {};
  size_t wantInputs = isRecv ? 0 : 1, wantOutputs = isSend ? 0 : 1;
  if (inst.inputs.size() != wantInputs || inst.outputs.size() != wantOutputs ||
      (wantInputs && !inst.inputs[0]))
    return CLEAVE_ERROR(label, ": ", inst.kernel, " takes ", wantInputs, " input(s) and ",
                        wantOutputs, " output(s), got ", inst.inputs.size(), " and ",
                        inst.outputs.size());
  if (!isSend && !isRecv) {
    std::string group;
    CLEAVE_RETURN_IF_ERROR(inst.attrs.getString("group", &group).prepend(label));
    if (group != "tp" && group != "dp")
      return CLEAVE_ERROR(label, ": group is '", group, "', expected 'tp' or 'dp'");
    return {};
  }
  int64_t peerStage = 0, peerChunk = 0, tag = 0;
  CLEAVE_RETURN_IF_ERROR(inst.attrs.getInt("peer_stage", &peerStage).prepend(label));
  CLEAVE_RETURN_IF_ERROR(inst.attrs.getInt("peer_chunk", &peerChunk).prepend(label));
  CLEAVE_RETURN_IF_ERROR(inst.attrs.getInt("tag", &tag).prepend(label));
  if (peerStage < 0 || peerStage >= plan.pp)
    return CLEAVE_ERROR(label, ": peer_stage ", peerStage, " is not a stage of pp ", plan.pp);
  if (peerChunk < 0 || peerChunk >= plan.chunks() || plan.stageOfChunk(peerChunk) != peerStage)
    return CLEAVE_ERROR(label, ": peer_chunk ", peerChunk, " is not a chunk of stage ",
                        peerStage, " (", plan.chunks(), " chunks on ", plan.pp, " stages)");
  if (tag < 0)
    return CLEAVE_ERROR(label, ": tag must be at least 0, got ", tag);
  return {};
}

/// The most inputs or outputs one instruction may have: far above any
/// kernel's (a concat of thousands of tensors, an unbind over a long
/// sequence), and a bound on the checks that pair them.
constexpr size_t kMaxOperands = size_t(1) << 16;

Status parseInstruction(const Plan &plan, const ProgramSpec &program, const Node &item,
                        InstructionSpec *inst) {
  CLEAVE_RETURN_IF_ERROR(getString(item, "kernel", &inst->kernel));
  if (item.json.contains("loc"))
    CLEAVE_RETURN_IF_ERROR(getString(item, "loc", &inst->loc));
  std::string label = item.where() + " (" + excerpt(inst->kernel) +
                      (inst->loc.empty() ? "" : " at " + excerpt(inst->loc, 400)) + ")";
  std::optional<Node> inputs, outputs;
  CLEAVE_RETURN_IF_ERROR(getArray(item, "inputs", &inputs));
  CLEAVE_RETURN_IF_ERROR(getArray(item, "outputs", &outputs));
  if (inputs->json.size() > kMaxOperands || outputs->json.size() > kMaxOperands)
    return CLEAVE_ERROR(label, ": ", inputs->json.size(), " inputs and ", outputs->json.size(),
                        " outputs (at most ", kMaxOperands, " each)");
  for (size_t i = 0; i < inputs->json.size(); ++i) {
    if (inputs->json[i].is_null()) {
      inst->inputs.push_back(std::nullopt);
      continue;
    }
    int64_t id;
    CLEAVE_RETURN_IF_ERROR(bufferId(program, inputs->element(i), &id));
    inst->inputs.push_back(id);
  }
  for (size_t i = 0; i < outputs->json.size(); ++i) {
    int64_t id;
    CLEAVE_RETURN_IF_ERROR(bufferId(program, outputs->element(i), &id));
    const BufferSpec &out = program.buffers[id];
    // Version 2 instructions may update weights and states in place; the
    // kernel's contract says which outputs it updates.
    if (!out.arenaOffset && plan.version < kTrainingPlanFormatVersion)
      return CLEAVE_ERROR(label, ": writes to weight buffer ", id, " (", out.name, ")");
    inst->outputs.push_back(id);
  }
  if (item.json.contains("scratch")) {
    Node scratch = item.child("scratch");
    int64_t offset = 0, bytes = 0;
    CLEAVE_RETURN_IF_ERROR(getInt(scratch, "arena_offset", &offset));
    CLEAVE_RETURN_IF_ERROR(getInt(scratch, "bytes", &bytes));
    if (!spanWithin(offset, bytes, static_cast<int64_t>(program.arenaBytes)))
      return CLEAVE_ERROR(label, ": scratch of ", bytes, " bytes at ", offset,
                          " is past the arena's ", program.arenaBytes, " bytes");
    inst->scratchOffset = offset;
    inst->scratchBytes = bytes;
  }
  if (item.json.contains("attrs"))
    CLEAVE_RETURN_IF_ERROR(parseAttributes(item.child("attrs"), &inst->attrs));
  if (item.json.contains("cost")) {
    std::optional<Node> cost;
    CLEAVE_RETURN_IF_ERROR(getObject(item, "cost", &cost));
    InstructionCost &c = inst->cost.emplace();
    CLEAVE_RETURN_IF_ERROR(getString(*cost, "class", &c.opClass));
    if (c.opClass.empty())
      return CLEAVE_ERROR(cost->child("class").where(), ": expected an op class name");
    CLEAVE_RETURN_IF_ERROR(getDouble(*cost, "flops", &c.flops));
    CLEAVE_RETURN_IF_ERROR(getDouble(*cost, "bytes", &c.bytes));
  }

  // Kernels assume their outputs share no memory with their inputs or scratch
  // (reshape alone may write over its own input: it is a view). The inputs'
  // ranges are sorted once, so an instruction with many operands costs
  // n log n, not outputs x inputs.
  std::vector<std::pair<size_t, size_t>> inputRanges; // [begin, end), non-empty, by begin
  for (const std::optional<int64_t> &in : inst->inputs)
    if (in && program.buffers[*in].arenaOffset && program.buffers[*in].desc.bytes() > 0)
      inputRanges.emplace_back(*program.buffers[*in].arenaOffset,
                               *program.buffers[*in].arenaOffset + program.buffers[*in].desc.bytes());
  std::sort(inputRanges.begin(), inputRanges.end());
  std::vector<size_t> reach(inputRanges.size()); // the furthest end among the first i + 1
  for (size_t i = 0; i < inputRanges.size(); ++i)
    reach[i] = std::max(inputRanges[i].second, i ? reach[i - 1] : 0);
  for (int64_t o : inst->outputs) {
    const BufferSpec &out = program.buffers[o];
    if (out.persistent())
      continue; // an in-place update: not in the arena
    if (overlaps(*out.arenaOffset, out.desc.bytes(), inst->scratchOffset, inst->scratchBytes))
      return CLEAVE_ERROR(label, ": output buffer ", o, " overlaps the scratch");
    if (inst->kernel == "reshape" || out.desc.bytes() == 0)
      continue;
    // Inputs that begin before this output ends: one of them overlaps it
    // when the furthest of their ends is past its beginning.
    auto first = std::lower_bound(inputRanges.begin(), inputRanges.end(),
                                  std::pair{*out.arenaOffset + out.desc.bytes(), size_t(0)});
    size_t before = static_cast<size_t>(first - inputRanges.begin());
    if (before == 0 || reach[before - 1] <= *out.arenaOffset)
      continue;
    for (const std::optional<int64_t> &in : inst->inputs) { // which one, for the message
      if (!in || !program.buffers[*in].arenaOffset)
        continue;
      const BufferSpec &b = program.buffers[*in];
      if (overlaps(*out.arenaOffset, out.desc.bytes(), *b.arenaOffset, b.desc.bytes()))
        return CLEAVE_ERROR(label, ": output buffer ", o, " overlaps input buffer ", *in);
    }
  }
  return checkPartitionKernel(plan, label, *inst);
}

/// The bindings in `list`: name, buffer and, in multi-device programs, the
/// phase index.
Status parseBindingList(const Node &list, const ProgramSpec &program, bool allowPhase,
                        std::vector<Binding> *out) {
  for (size_t i = 0; i < list.json.size(); ++i) {
    Node item = list.element(i);
    Binding binding;
    CLEAVE_RETURN_IF_ERROR(getString(item, "name", &binding.name));
    CLEAVE_RETURN_IF_ERROR(bufferId(program, item.child("buffer"), &binding.buffer));
    if (allowPhase && has(item, "phase")) {
      int64_t phase = 0;
      CLEAVE_RETURN_IF_ERROR(getInt(item, "phase", &phase));
      if (phase >= static_cast<int64_t>(program.phases.size()))
        return CLEAVE_ERROR(item.child("phase").where(), ": phase ", phase,
                            " (the program has ", program.phases.size(), ")");
      binding.phase = phase;
    }
    out->push_back(binding);
  }
  return {};
}

const TensorSpec *findTensor(const std::vector<TensorSpec> &specs, const std::string &name) {
  for (const TensorSpec &spec : specs)
    if (spec.name == name)
      return &spec;
  return nullptr;
}

/// What a program's buffer for model tensor `spec` holds: the whole tensor
/// on one device, one microbatch of it in a plan with a batch.
TensorDesc perMicrobatch(const Plan &plan, const TensorSpec &spec) {
  TensorDesc desc = spec.desc;
  if (plan.hasBatch && spec.batchDim)
    desc.shape[*spec.batchDim] = plan.microbatchSize;
  return desc;
}

/// Checks a program's input or output bindings (`key`) against the
/// manifest. A single-device program binds every model input and output; a
/// program of many devices binds those its phases read and write, at the
/// microbatch size.
Status checkBindings(const Plan &plan, const ProgramSpec &program, const std::string &key,
                     const std::vector<TensorSpec> &expected, const std::vector<Binding> &bound) {
  if (!plan.hasBatch) {
    if (bound.size() != expected.size())
      return CLEAVE_ERROR(program.file, ": binds ", bound.size(), " ", key,
                          ", the manifest has ", expected.size());
    for (const TensorSpec &spec : expected) {
      bool found = false;
      for (const Binding &b : bound)
        found |= b.name == spec.name;
      if (!found)
        return CLEAVE_ERROR(program.file, ": does not bind ", key, " '", spec.name, "'");
    }
  }
  std::set<std::pair<std::string, int64_t>> seen;
  for (const Binding &binding : bound) {
    const TensorSpec *spec = findTensor(expected, binding.name);
    if (!spec)
      return CLEAVE_ERROR(program.file, ": binds ", key, " '", binding.name,
                          "', which the manifest does not list");
    if (!seen.insert({binding.name, binding.phase.value_or(-1)}).second)
      return CLEAVE_ERROR(program.file, ": binds ", key, " '", binding.name, "' twice");
    const BufferSpec &buffer = program.buffers[binding.buffer];
    TensorDesc want = perMicrobatch(plan, *spec);
    if (buffer.desc != want)
      return CLEAVE_ERROR(program.file, ": '", spec->name, "' is ",
                          describe(want.shape, want.dtype), " in the manifest",
                          plan.hasBatch ? " (one microbatch)" : "", " but its buffer ",
                          buffer.id, " is ", describe(buffer.desc.shape, buffer.desc.dtype));
    if (key == "inputs" && !buffer.arenaOffset)
      return CLEAVE_ERROR(program.file, ": input '", spec->name, "' is bound to a weight");
  }
  return {};
}

/// Gives every phase its bindings: its own "inputs"/"outputs" list, which
/// must be the program's bindings of that phase index, or those bindings.
Status bindPhases(const Node &top, const std::string &key, const std::vector<Binding> &program,
                  std::vector<Phase> *phases) {
  for (size_t p = 0; p < phases->size(); ++p) {
    std::vector<Binding> mine;
    for (const Binding &b : program)
      if (!b.phase || *b.phase == static_cast<int64_t>(p))
        mine.push_back(b);
    Phase &phase = (*phases)[p];
    std::vector<Binding> &list = key == "inputs" ? phase.inputs : phase.outputs;
    if (list.empty() && !has(top.child("phases").element(p), key)) {
      list = mine;
      continue;
    }
    bool same = list.size() == mine.size();
    for (const Binding &b : list) {
      bool found = false;
      for (const Binding &m : mine)
        found |= m.name == b.name && m.buffer == b.buffer;
      same &= found;
    }
    if (!same)
      return CLEAVE_ERROR(top.child("phases").element(p).child(key).where(),
                          ": differs from the program's ", key, " of phase ", p);
  }
  return {};
}

Status parsePhases(const Plan &plan, const Node &top, ProgramSpec *program) {
  std::optional<Node> phases;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "phases", &phases));
  for (size_t p = 0; p < phases->json.size(); ++p) {
    Node phaseNode = phases->element(p);
    Phase phase;
    CLEAVE_RETURN_IF_ERROR(getString(phaseNode, "name", &phase.name));
    // A phase runs its program's own chunk unless the schedule interleaves.
    CLEAVE_RETURN_IF_ERROR(getOptionalInt(phaseNode, "chunk", program->stage, &phase.chunk));
    if (phase.chunk >= plan.chunks() || plan.stageOfChunk(phase.chunk) != program->stage)
      return CLEAVE_ERROR(phaseNode.child("chunk").where(), ": chunk ", phase.chunk,
                          " does not run on stage ", program->stage, " (", plan.chunks(),
                          " chunks on ", plan.pp, " stages: chunk c runs on stage c mod ",
                          plan.pp, ")");
    if (has(phaseNode, "microbatch")) {
      int64_t m = 0;
      CLEAVE_RETURN_IF_ERROR(getInt(phaseNode, "microbatch", &m));
      if (m >= plan.microbatches)
        return CLEAVE_ERROR(phaseNode.child("microbatch").where(), ": microbatch ", m, " of ",
                            plan.microbatches);
      phase.microbatch = m;
    }
    if (std::any_of(program->phases.begin(), program->phases.end(), [&](const Phase &other) {
          return other.name == phase.name && other.chunk == phase.chunk &&
                 (!other.microbatch || !phase.microbatch || *other.microbatch == *phase.microbatch);
        }))
      return CLEAVE_ERROR(phaseNode.where(), ": duplicate phase '", phase.name, "'",
                          plan.chunks() > 1 ? " of chunk " + std::to_string(phase.chunk) : "",
                          phase.microbatch ? " microbatch " + std::to_string(*phase.microbatch)
                                           : "");
    for (const char *key : {"inputs", "outputs"})
      if (has(phaseNode, key)) {
        std::optional<Node> list;
        CLEAVE_RETURN_IF_ERROR(getArray(phaseNode, key, &list));
        CLEAVE_RETURN_IF_ERROR(parseBindingList(*list, *program, /*allowPhase=*/false,
                                                key == std::string("inputs") ? &phase.inputs
                                                                             : &phase.outputs));
      }
    std::optional<Node> list;
    CLEAVE_RETURN_IF_ERROR(getArray(phaseNode, "instructions", &list));
    for (size_t i = 0; i < list->json.size(); ++i) {
      InstructionSpec inst;
      CLEAVE_RETURN_IF_ERROR(parseInstruction(plan, *program, list->element(i), &inst));
      phase.instructions.push_back(std::move(inst));
    }
    program->phases.push_back(std::move(phase));
  }
  if (!program->findPhase("forward"))
    return CLEAVE_ERROR(program->file, ": has no 'forward' phase");
  return {};
}

/// The program's (stage, tp index) from the manifest entry and the program
/// file; where both give one they must agree. Single-device plans give none.
Status programPosition(const Plan &plan, const Node &entry, const Node &top,
                       ProgramSpec *program) {
  for (auto [key, out, extent] : {std::tuple{"stage", &program->stage, plan.pp},
                                  std::tuple{"tp", &program->tp, plan.tp}}) {
    int64_t fromManifest = 0, fromFile = 0;
    CLEAVE_RETURN_IF_ERROR(getOptionalInt(entry, key, 0, &fromManifest));
    CLEAVE_RETURN_IF_ERROR(getOptionalInt(top, key, fromManifest, &fromFile));
    if (has(entry, key) && fromFile != fromManifest)
      return CLEAVE_ERROR(program->file, ": ", key, " ", fromFile, ", the manifest says ",
                          fromManifest);
    if (fromFile >= extent)
      return CLEAVE_ERROR(program->file, ": ", key, " ", fromFile, " is outside the mesh (",
                          key, " ", extent, ")");
    *out = fromFile;
  }
  return {};
}

/// The weights regions: the file's layout, or with ZeRO parts or host-pool
/// weights a 64-byte aligned slot per weight in file order, a part taking
/// its part's bytes, in the device weights region or the host one.
void layOutWeights(const Plan &plan, ProgramSpec *program) {
  program->weightSlots.clear();
  program->slottedWeights = !program->weightShards.empty() || !program->hostWeights.empty();
  size_t offsets[2] = {0, 0}; // device, host
  for (const SafetensorsEntry &entry : program->weights.entries) {
    if (!program->slottedWeights) {
      program->weightSlots[entry.name] = {entry.begin, entry.desc.bytes(), false};
      continue;
    }
    size_t bytes = entry.desc.bytes();
    if (program->weightShard(entry.name)) // parseShard checked: over the plan's dp
      bytes = static_cast<size_t>((entry.desc.numel() + plan.dp - 1) / plan.dp) *
              dtypeBytes(entry.desc.dtype);
    const bool host = program->hostWeights.count(entry.name) != 0;
    size_t &offset = offsets[host ? 1 : 0];
    program->weightSlots[entry.name] = {offset, bytes, host};
    offset += alignWeightSlot(bytes);
  }
  program->weightRegionBytes =
      program->slottedWeights ? offsets[0] : program->weights.dataBytes;
  program->hostWeightRegionBytes = offsets[1];
}

/// The arena and the state region are as large as what lies in them, rounded
/// up to the 64-byte alignment of the plan format: a region sized otherwise
/// (2^62 bytes declared for a few buffers) is not a plan the compiler wrote,
/// and is refused before anything is allocated for it.
Status checkRegionSizes(const ProgramSpec &program) {
  constexpr size_t kAlignment = 64;
  size_t arenaEnd = 0, stateEnd = 0, hostStateEnd = 0;
  for (const BufferSpec &b : program.buffers) {
    if (b.arenaOffset)
      arenaEnd = std::max(arenaEnd, *b.arenaOffset + b.desc.bytes());
    if (b.stateOffset)
      (b.onHost() ? hostStateEnd : stateEnd) =
          std::max(b.onHost() ? hostStateEnd : stateEnd, *b.stateOffset + b.desc.bytes());
  }
  for (const Phase &phase : program.phases)
    for (const InstructionSpec &inst : phase.instructions)
      if (inst.scratchBytes)
        arenaEnd = std::max(arenaEnd, inst.scratchOffset + inst.scratchBytes);
  auto aligned = [](size_t end) { return (end + kAlignment - 1) / kAlignment * kAlignment; };
  if (program.arenaBytes > aligned(arenaEnd))
    return CLEAVE_ERROR(program.file, ": arena_bytes ", program.arenaBytes,
                        " is more than its buffers and scratch reach (", arenaEnd,
                        " bytes, ", aligned(arenaEnd), " aligned)");
  if (program.stateBytes > aligned(stateEnd))
    return CLEAVE_ERROR(program.file, ": state_bytes ", program.stateBytes,
                        " is more than its state buffers reach (", stateEnd, " bytes, ",
                        aligned(stateEnd), " aligned)");
  if (program.hostStateBytes > aligned(hostStateEnd))
    return CLEAVE_ERROR(program.file, ": host_state_bytes ", program.hostStateBytes,
                        " is more than its host state buffers reach (", hostStateEnd,
                        " bytes, ", aligned(hostStateEnd), " aligned)");
  return {};
}

Status loadProgram(const Plan &plan, const std::string &name, const Node &entry,
                   ProgramSpec *program) {
  program->name = name;
  CLEAVE_RETURN_IF_ERROR(getString(entry, "file", &program->file));
  // A plan without weights has no weight files to name (or ignores them).
  if (plan.hasWeights)
    CLEAVE_RETURN_IF_ERROR(getString(entry, "weights", &program->weightsFile));
  for (const std::string *f : {&program->file, &program->weightsFile})
    if ((f == &program->file || plan.hasWeights) &&
        (f->empty() || f->front() == '/' || f->find("..") != std::string::npos))
      return CLEAVE_ERROR(entry.where(), ": '", *f, "' must be a path inside the plan");

  if (plan.hasWeights)
    CLEAVE_RETURN_IF_ERROR(
        readSafetensorsIndex(plan.dir + "/" + program->weightsFile, &program->weights));
  Json json;
  CLEAVE_RETURN_IF_ERROR(readJson(plan.dir, program->file, &json));
  Node top{json, program->file, ""};
  int64_t version = 0;
  CLEAVE_RETURN_IF_ERROR(checkVersion(top, "cleave-program", &version, plan.version));
  std::string declared;
  CLEAVE_RETURN_IF_ERROR(getString(top, "name", &declared));
  if (declared != name)
    return CLEAVE_ERROR(program->file, ": names program '", declared, "', the manifest '",
                        name, "'");
  CLEAVE_RETURN_IF_ERROR(programPosition(plan, entry, top, program));
  int64_t arenaBytes = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(top, "arena_bytes", &arenaBytes));
  program->arenaBytes = static_cast<size_t>(arenaBytes);
  if (plan.version >= kTrainingPlanFormatVersion) {
    int64_t stateBytes = 0, predictedState = 0;
    CLEAVE_RETURN_IF_ERROR(getInt(top, "state_bytes", &stateBytes));
    CLEAVE_RETURN_IF_ERROR(getInt(entry, "state_bytes", &predictedState));
    if (predictedState != stateBytes)
      return CLEAVE_ERROR("manifest.json: program '", name, "' predicts a state region of ",
                          predictedState, " bytes, ", program->file, " declares ", stateBytes);
    program->stateBytes = static_cast<size_t>(stateBytes);
    int64_t hostStateBytes = 0;
    CLEAVE_RETURN_IF_ERROR(getOptionalInt(top, "host_state_bytes", 0, &hostStateBytes));
    program->hostStateBytes = static_cast<size_t>(hostStateBytes);
  } else if (has(top, "host_state_bytes")) {
    return CLEAVE_ERROR(program->file, ": host_state_bytes needs plan format version ",
                        kTrainingPlanFormatVersion);
  }

  // The manifest's predicted memory must be what this program allocates.
  int64_t predictedArena = 0, predictedWeights = 0;
  Node memory = entry;
  CLEAVE_RETURN_IF_ERROR(getInt(memory, "arena_bytes", &predictedArena));
  CLEAVE_RETURN_IF_ERROR(getInt(memory, "weight_bytes", &predictedWeights));
  if (static_cast<size_t>(predictedArena) != program->arenaBytes)
    return CLEAVE_ERROR("manifest.json: program '", name, "' predicts an arena of ",
                        predictedArena, " bytes, ", program->file, " declares ",
                        program->arenaBytes);
  program->weightBytes = static_cast<size_t>(predictedWeights);

  CLEAVE_RETURN_IF_ERROR(parseBuffers(plan, top, program));
  layOutWeights(plan, program);
  if (plan.hasWeights && static_cast<size_t>(predictedWeights) != program->weightRegionBytes)
    return CLEAVE_ERROR("manifest.json: program '", name, "' predicts ", predictedWeights,
                        " weight bytes, ", program->weightsFile, " needs ",
                        program->weightRegionBytes,
                        !program->hostWeights.empty() ? " (its device weights, in 64-byte slots)"
                        : program->weightShards.empty() ? ""
                                                         : " (ZeRO parts)");
  // The host pool: host weights and host states, "host_bytes" (absent: 0).
  int64_t predictedHost = 0;
  CLEAVE_RETURN_IF_ERROR(getOptionalInt(entry, "host_bytes", 0, &predictedHost));
  if (!plan.hasWeights) {
    // Nothing to lay out: the host weights are what the manifest says.
    if (static_cast<size_t>(predictedHost) < program->hostStateBytes)
      return CLEAVE_ERROR("manifest.json: program '", name, "' predicts host_bytes ",
                          predictedHost, ", less than its host_state_bytes ",
                          program->hostStateBytes);
    program->hostWeightRegionBytes = static_cast<size_t>(predictedHost) - program->hostStateBytes;
  } else if (static_cast<size_t>(predictedHost) != program->hostBytes()) {
    return CLEAVE_ERROR("manifest.json: program '", name, "' predicts host_bytes ",
                        predictedHost, ", its host pool needs ", program->hostBytes(),
                        " (host weights ", program->hostWeightRegionBytes,
                        " + host_state_bytes ", program->hostStateBytes, ")");
  }
  CLEAVE_RETURN_IF_ERROR(parsePhases(plan, top, program));
  CLEAVE_RETURN_IF_ERROR(checkRegionSizes(*program));
  for (const char *key : {"inputs", "outputs"}) {
    bool isInputs = key == std::string("inputs");
    std::vector<Binding> &bound = isInputs ? program->inputs : program->outputs;
    std::optional<Node> list;
    CLEAVE_RETURN_IF_ERROR(getArray(top, key, &list));
    CLEAVE_RETURN_IF_ERROR(parseBindingList(*list, *program, plan.hasBatch, &bound));
    CLEAVE_RETURN_IF_ERROR(
        checkBindings(plan, *program, key, isInputs ? plan.inputs : plan.outputs, bound));
    CLEAVE_RETURN_IF_ERROR(bindPhases(top, key, bound, &program->phases));
  }
  return {};
}

/// `batch`: the global batch, the microbatch size the programs are compiled
/// for and the microbatches per dp rank; the inputs and outputs agree.
Status parseBatch(const Node &top, Plan *plan) {
  std::optional<Node> batch;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "batch", &batch));
  int64_t microbatches = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(*batch, "global", &plan->globalBatch, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*batch, "microbatch_size", &plan->microbatchSize, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*batch, "microbatches", &microbatches, 1));
  if (microbatches != plan->microbatches)
    return CLEAVE_ERROR("manifest.json: batch.microbatches is ", microbatches,
                        ", schedule.microbatches ", plan->microbatches);
  std::optional<int64_t> split = checkedProduct(
      std::initializer_list<int64_t>{plan->dp, microbatches, plan->microbatchSize});
  if (!split || plan->globalBatch != *split)
    return CLEAVE_ERROR("manifest.json: batch: global ", plan->globalBatch, " is not dp ",
                        plan->dp, " x microbatches ", microbatches, " x microbatch_size ",
                        plan->microbatchSize, split ? " = " + std::to_string(*split)
                                                    : std::string(" (which overflows)"));
  plan->hasBatch = true;
  for (auto [noun, specs] : {std::pair{"input", &plan->inputs}, {"output", &plan->outputs}})
    for (const TensorSpec &spec : *specs) {
      if (!spec.batchDim) {
        // A training step's outputs (the loss) are reduced over the batch.
        bool reduced = noun == std::string("output") && plan->schedule == "train";
        if (!reduced && (plan->dp > 1 || microbatches > 1))
          return CLEAVE_ERROR("manifest.json: ", noun, " '", spec.name,
                              "' has no batch_dim, but the batch is split into ",
                              plan->dp * microbatches, " microbatches");
        continue;
      }
      if (spec.desc.shape[*spec.batchDim] != plan->globalBatch)
        return CLEAVE_ERROR("manifest.json: ", noun, " '", spec.name, "' is ",
                            describe(spec.desc.shape, spec.desc.dtype),
                            ": its batch_dim ", *spec.batchDim, " is not the global batch ",
                            plan->globalBatch);
    }
  return {};
}

/// `schedule.stages`: per stage, the slots it runs in order. Each slot names
/// a phase every program of the stage has, of a chunk of the stage, and a
/// microbatch; every forward phase runs every microbatch exactly once.
Status parseScheduleStages(const Node &schedule, Plan *plan) {
  plan->stageSlots.assign(plan->pp, {});
  if (!has(schedule, "stages")) {
    // Not given (single-device plans): each stage runs its chunks' forwards
    // microbatch by microbatch.
    for (int64_t s = 0; s < plan->pp; ++s)
      for (int64_t m = 0; m < plan->microbatches; ++m)
        for (int64_t c = s; c < plan->chunks(); c += plan->pp)
          plan->stageSlots[s].push_back({"forward", c, m});
    return {};
  }
  std::optional<Node> stages;
  CLEAVE_RETURN_IF_ERROR(getArray(schedule, "stages", &stages));
  if (static_cast<int64_t>(stages->json.size()) != plan->pp)
    return CLEAVE_ERROR(stages->where(), ": ", stages->json.size(), " entr",
                        stages->json.size() == 1 ? "y" : "ies", " for ", plan->pp,
                        " pipeline stages (one per stage)");
  for (int64_t s = 0; s < plan->pp; ++s) {
    Node entry = stages->element(s);
    int64_t stage = 0;
    CLEAVE_RETURN_IF_ERROR(getOptionalInt(entry, "stage", s, &stage));
    if (stage != s)
      return CLEAVE_ERROR(entry.where(), ": stage ", stage, " out of order (expected ", s, ")");
    std::optional<Node> slots;
    CLEAVE_RETURN_IF_ERROR(getArray(entry, "slots", &slots));
    for (size_t i = 0; i < slots->json.size(); ++i) {
      Node item = slots->element(i);
      ScheduleSlot slot;
      CLEAVE_RETURN_IF_ERROR(getString(item, "phase", &slot.phase));
      CLEAVE_RETURN_IF_ERROR(getOptionalInt(item, "chunk", s, &slot.chunk));
      CLEAVE_RETURN_IF_ERROR(getInt(item, "microbatch", &slot.microbatch));
      if (slot.chunk >= plan->chunks() || plan->stageOfChunk(slot.chunk) != s)
        return CLEAVE_ERROR(item.where(), ": chunk ", slot.chunk, " does not run on stage ",
                            s);
      if (slot.microbatch >= plan->microbatches)
        return CLEAVE_ERROR(item.where(), ": microbatch ", slot.microbatch, " of ",
                            plan->microbatches);
      plan->stageSlots[s].push_back(slot);
    }
  }
  return {};
}

/// Every slot's phase exists in every program of its stage, no slot runs
/// twice, and every forward phase runs once per microbatch.
Status checkScheduleAgainstPrograms(const Plan &plan) {
  for (int64_t s = 0; s < plan.pp; ++s) {
    std::set<std::tuple<std::string, int64_t, int64_t>> ran;
    const std::vector<ScheduleSlot> &slots = plan.stageSlots[s];
    for (size_t i = 0; i < slots.size(); ++i) {
      const ScheduleSlot &slot = slots[i];
      std::string where = "manifest.json: schedule.stages[" + std::to_string(s) + "].slots[" +
                          std::to_string(i) + "]";
      if (!ran.insert({slot.phase, slot.chunk, slot.microbatch}).second)
        return CLEAVE_ERROR(where, ": ", slot.phase, " chunk ", slot.chunk, " microbatch ",
                            slot.microbatch, " runs twice");
      for (const auto &[name, program] : plan.programs)
        if (program.loaded && program.stage == s &&
            !program.findPhase(slot.phase, slot.chunk, slot.microbatch))
          return CLEAVE_ERROR(where, ": program '", name, "' has no ", slot.phase,
                              " phase of chunk ", slot.chunk);
    }
    for (const auto &[name, program] : plan.programs) {
      if (program.stage != s)
        continue;
      for (const Phase &phase : program.phases)
        for (int64_t m = 0; phase.name == "forward" && m < plan.microbatches; ++m)
          if ((!phase.microbatch || *phase.microbatch == m) &&
              !ran.count({phase.name, phase.chunk, m}))
            return CLEAVE_ERROR("manifest.json: schedule.stages[", s, "]: ", phase.name,
                                " chunk ", phase.chunk, " microbatch ", m, " never runs");
    }
  }
  return {};
}

/// Stage, dp index and tp index of `rank`: tp fastest, then dp, then stage.
struct RankPosition {
  int64_t stage, dp, tp;
};
RankPosition positionOf(const Plan &plan, int64_t rank) {
  return {rank / (plan.dp * plan.tp), (rank / plan.tp) % plan.dp, rank % plan.tp};
}

/// The groups of `kind` the mesh implies: ranks that differ only in that
/// coordinate (for "pipeline", the stages of one (dp, tp)), in rank order.
std::vector<std::vector<int64_t>> meshGroups(const Plan &plan, const std::string &kind) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, std::vector<int64_t>> groups;
  for (int64_t r = 0; r < plan.pp * plan.dp * plan.tp; ++r) {
    RankPosition p = positionOf(plan, r);
    auto key = kind == "tp"   ? std::tuple{p.stage, p.dp, int64_t(0)}
               : kind == "dp" ? std::tuple{p.stage, int64_t(0), p.tp}
                              : std::tuple{int64_t(0), p.dp, p.tp};
    groups[key].push_back(r);
  }
  std::vector<std::vector<int64_t>> out;
  for (auto &[key, ranks] : groups)
    out.push_back(std::move(ranks));
  std::sort(out.begin(), out.end());
  return out;
}

/// `groups.KIND`: exactly the mesh's groups of that kind, in any order.
Status parseGroups(const Node &groups, const std::string &kind, const Plan &plan,
                   std::vector<std::vector<int64_t>> *out) {
  std::vector<std::vector<int64_t>> expected = meshGroups(plan, kind);
  *out = expected;
  if (!has(groups, kind))
    return {};
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(groups, kind, &list));
  std::set<std::vector<int64_t>> seen;
  std::map<int64_t, const std::vector<int64_t> *> groupOfRank;
  for (const std::vector<int64_t> &g : expected)
    for (int64_t r : g)
      groupOfRank[r] = &g;
  for (size_t i = 0; i < list->json.size(); ++i) {
    Node item = list->element(i);
    std::vector<int64_t> ranks;
    bool ints = item.json.is_array();
    for (const Json &r : item.json.is_array() ? item.json : Json::array())
      if ((ints &= r.is_number_integer()))
        ranks.push_back(r.get<int64_t>());
    if (!ints || ranks.empty())
      return CLEAVE_ERROR(item.where(), ": expected a list of ranks");
    auto found = groupOfRank.find(ranks.front()); // the group of its first rank
    const std::vector<int64_t> *own = found == groupOfRank.end() ? nullptr : found->second;
    if (!own)
      return CLEAVE_ERROR(item.where(), ": rank ", ranks.front(), " is not a rank of the ",
                          plan.devices.size(), " devices");
    if (ranks != *own)
      return CLEAVE_ERROR(item.where(), ": ", rankList(ranks), " is not a ", kind,
                          " group of the mesh: rank ", ranks.front(), "'s is ", rankList(*own));
    if (!seen.insert(ranks).second)
      return CLEAVE_ERROR(item.where(), ": ", rankList(ranks), " is listed twice");
  }
  if (seen.size() != expected.size())
    return CLEAVE_ERROR(list->where(), ": ", seen.size(), " groups, the mesh has ",
                        expected.size());
  return {};
}

Status parseParameters(const Node &top, Plan *plan) {
  if (!has(top, "parameters"))
    return {};
  std::optional<Node> params;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "parameters", &params));
  for (auto it = params->json.begin(); it != params->json.end(); ++it) {
    TensorDesc desc;
    CLEAVE_RETURN_IF_ERROR(getTensorDesc(params->child(it.key()), &desc));
    plan->parameters.emplace(it.key(), desc);
  }
  return {};
}

Status parsePredicted(const Node &top, PredictedCost *predicted) {
  if (!has(top, "predicted"))
    return {};
  std::optional<Node> node;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "predicted", &node));
  for (auto [key, out] : {std::pair{"step_seconds", &predicted->stepSeconds},
                          {"compute_seconds", &predicted->computeSeconds},
                          {"communication_seconds", &predicted->communicationSeconds},
                          {"bubble_seconds", &predicted->bubbleSeconds}})
    if (has(*node, key)) {
      double value = 0;
      CLEAVE_RETURN_IF_ERROR(getDouble(*node, key, &value));
      *out = value;
    }
  if (has(*node, "memory_budget_bytes")) {
    int64_t budget = 0;
    CLEAVE_RETURN_IF_ERROR(getInt(*node, "memory_budget_bytes", &budget));
    predicted->memoryBudgetBytes = budget;
  }
  if (has(*node, "memory_bytes")) {
    std::optional<Node> memory;
    CLEAVE_RETURN_IF_ERROR(getObject(*node, "memory_bytes", &memory));
    for (auto [key, out] : {std::pair{"arena", &predicted->arenaBytes},
                            {"weights", &predicted->weightBytes},
                            {"state", &predicted->stateBytes},
                            {"total", &predicted->totalBytes},
                            {"host", &predicted->hostBytes}})
      if (has(*memory, key)) {
        int64_t bytes = 0;
        CLEAVE_RETURN_IF_ERROR(getInt(*memory, key, &bytes));
        *out = bytes;
      }
    if (has(*memory, "by_category")) {
      std::optional<Node> categories;
      CLEAVE_RETURN_IF_ERROR(getObject(*memory, "by_category", &categories));
      for (auto it = categories->json.begin(); it != categories->json.end(); ++it) {
        int64_t bytes = 0;
        CLEAVE_RETURN_IF_ERROR(getInt(*categories, it.key(), &bytes));
        predicted->byCategory.emplace_back(it.key(), bytes);
      }
    }
  }
  return {};
}

/// manifest.json `training` (version 2): what `cleave train` needs beyond
/// the programs. Names are checked against the program by checkTraining.
Status parseTraining(const Node &top, Plan *plan) {
  std::optional<Node> node;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "training", &node));
  TrainingSpec training;
  CLEAVE_RETURN_IF_ERROR(getString(*node, "loss", &training.loss));
  if (training.loss != "model" && training.loss != "cross_entropy" && training.loss != "mse")
    return CLEAVE_ERROR(node->child("loss").where(), ": unknown loss '", training.loss,
                        "' (expected model, cross_entropy or mse)");
  if (has(*node, "labels") && !node->json["labels"].is_null())
    CLEAVE_RETURN_IF_ERROR(getString(*node, "labels", &training.labels));
  if (training.labels.empty() != (training.loss == "model"))
    return CLEAVE_ERROR(node->child("labels").where(), ": loss '", training.loss, "' ",
                        training.loss == "model" ? "reads no labels" : "needs a labels input");
  // null when the step reads no inputs (all it computes comes from weights).
  if (!plan->inputs.empty() || !node->child("batch_size").json.is_null())
    CLEAVE_RETURN_IF_ERROR(getInt(*node, "batch_size", &training.batchSize, 1));
  CLEAVE_RETURN_IF_ERROR(getString(*node, "dtype", &training.dtype));
  if (training.dtype != "f32" && training.dtype != "bf16")
    return CLEAVE_ERROR(node->child("dtype").where(), ": unknown dtype '", training.dtype,
                        "' (expected f32 or bf16)");
  CLEAVE_RETURN_IF_ERROR(getInt(*node, "seed", &training.seed));
  if (has(*node, "zero")) {
    CLEAVE_RETURN_IF_ERROR(getString(*node, "zero", &training.zero));
    if (training.zero != "none" && training.zero != "optimizer" && training.zero != "gradients" &&
        training.zero != "parameters")
      return CLEAVE_ERROR(node->child("zero").where(), ": unknown ZeRO level '", training.zero,
                          "' (expected none, optimizer, gradients or parameters)");
  }

  std::optional<Node> opt;
  CLEAVE_RETURN_IF_ERROR(getObject(*node, "optimizer", &opt));
  OptimizerSpec &o = training.optimizer;
  CLEAVE_RETURN_IF_ERROR(getString(*opt, "kind", &o.kind));
  if (o.kind != "adamw" && o.kind != "sgd" && o.kind != "none")
    return CLEAVE_ERROR(opt->child("kind").where(), ": unknown optimizer '", o.kind,
                        "' (expected adamw, sgd or none)");
  if (o.kind != "none") {
    CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "lr", &o.lr));
    CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "weight_decay", &o.weightDecay));
    if (o.kind == "adamw") {
      std::optional<Node> betas;
      CLEAVE_RETURN_IF_ERROR(getArray(*opt, "betas", &betas));
      if (betas->json.size() != 2 || !betas->json[0].is_number() || !betas->json[1].is_number())
        return CLEAVE_ERROR(betas->where(), ": expected two numbers");
      o.beta1 = betas->json[0].get<double>();
      o.beta2 = betas->json[1].get<double>();
      CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "eps", &o.eps));
    } else {
      CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "momentum", &o.momentum));
      CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "dampening", &o.dampening));
      if (!opt->child("nesterov").json.is_boolean())
        return CLEAVE_ERROR(opt->child("nesterov").where(), ": expected true or false");
      o.nesterov = opt->json["nesterov"].get<bool>();
    }
    if (has(*opt, "clip_grad_norm") && !opt->json["clip_grad_norm"].is_null()) {
      double clip = 0;
      CLEAVE_RETURN_IF_ERROR(getDouble(*opt, "clip_grad_norm", &clip));
      o.clipGradNorm = clip;
    }
    CLEAVE_RETURN_IF_ERROR(getString(*opt, "lr_schedule", &o.lrSchedule));
    if (o.lrSchedule != "constant" && o.lrSchedule != "cosine" && o.lrSchedule != "linear")
      return CLEAVE_ERROR(opt->child("lr_schedule").where(), ": unknown schedule '",
                          o.lrSchedule, "' (expected constant, cosine or linear)");
    CLEAVE_RETURN_IF_ERROR(getInt(*opt, "warmup_steps", &o.warmupSteps));
    CLEAVE_RETURN_IF_ERROR(getInt(*opt, "decay_steps", &o.decaySteps));
  }

  std::optional<Node> params;
  CLEAVE_RETURN_IF_ERROR(getArray(*node, "parameters", &params));
  for (size_t i = 0; i < params->json.size(); ++i) {
    if (!params->json[i].is_string())
      return CLEAVE_ERROR(params->element(i).where(), ": expected a weight name");
    training.parameters.push_back(params->json[i].get<std::string>());
  }
  std::optional<Node> stateDict;
  CLEAVE_RETURN_IF_ERROR(getArray(*node, "state_dict", &stateDict));
  std::set<std::string> names;
  for (size_t i = 0; i < stateDict->json.size(); ++i) {
    Node item = stateDict->element(i);
    StateDictEntry entry;
    CLEAVE_RETURN_IF_ERROR(getString(item, "name", &entry.name));
    if (!names.insert(entry.name).second)
      return CLEAVE_ERROR(item.where(), ": duplicate state_dict entry '", entry.name, "'");
    if (has(item, "tensor") == has(item, "file"))
      return CLEAVE_ERROR(item.where(), ": needs exactly one of 'tensor' and 'file'");
    if (has(item, "tensor"))
      CLEAVE_RETURN_IF_ERROR(getString(item, "tensor", &entry.tensor));
    else {
      CLEAVE_RETURN_IF_ERROR(getString(item, "file", &entry.file));
      if (entry.file.empty() || entry.file.front() == '/' ||
          entry.file.find("..") != std::string::npos)
        return CLEAVE_ERROR(item.child("file").where(), ": '", entry.file,
                            "' must be a path inside the plan");
    }
    training.stateDict.push_back(std::move(entry));
  }
  plan->training = std::move(training);
  return {};
}

} // namespace

const SafetensorsEntry *ProgramSpec::weightHolding(const std::string &tensor) const {
  if (const SafetensorsEntry *whole = weights.find(tensor))
    return whole;
  for (const SafetensorsEntry &entry : weights.entries) {
    WeightShard shard;
    if (isPartOf(entry.name, tensor, &shard))
      return &entry;
  }
  return nullptr;
}

namespace {

/// The training section against the loaded program: inputs hold the batch
/// in dim 0, the labels are an input, parameters and state_dict tensors are
/// weights the program holds, extra tensors are in their files.
Status checkTraining(const Plan &plan) {
  const TrainingSpec &training = *plan.training;
  for (const TensorSpec &input : plan.inputs)
    if (input.desc.rank() == 0 || input.desc.shape[0] != training.batchSize)
      return CLEAVE_ERROR("manifest.json: input '", input.name, "' is ",
                          describe(input.desc.shape, input.desc.dtype),
                          ": training inputs hold the step's ", training.batchSize,
                          " samples in dim 0");
  if (!training.labels.empty() && !findTensor(plan.inputs, training.labels))
    return CLEAVE_ERROR("manifest.json: training.labels '", training.labels,
                        "' is not an input of the plan");
  if (!plan.hasWeights)
    return {};
  // A pipeline's programs hold the stages' weights (a tied one several).
  auto holder = [&](const std::string &name) -> const ProgramSpec * {
    for (const auto &[_, program] : plan.programs)
      if (program.weightHolding(name))
        return &program;
    return nullptr;
  };
  const std::string weightFiles =
      plan.programs.size() == 1 ? plan.programs.begin()->second.weightsFile
                                : "any program's weights";
  for (const std::string &name : training.parameters)
    if (!holder(name))
      return CLEAVE_ERROR("manifest.json: training.parameters: '", name, "' is not a weight in ",
                          weightFiles);
  std::map<std::string, SafetensorsIndex> extras;
  for (const StateDictEntry &entry : training.stateDict) {
    if (!entry.tensor.empty()) {
      if (!holder(entry.tensor))
        return CLEAVE_ERROR("manifest.json: training.state_dict: '", entry.name, "' names '",
                            entry.tensor, "', which is not a weight in ", weightFiles);
      continue;
    }
    auto it = extras.find(entry.file);
    if (it == extras.end()) {
      SafetensorsIndex index;
      CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(plan.dir + "/" + entry.file, &index));
      it = extras.emplace(entry.file, std::move(index)).first;
    }
    if (!it->second.find(entry.name))
      return CLEAVE_ERROR(entry.file, ": missing state_dict tensor '", entry.name, "'");
  }
  return {};
}

/// The mesh against the devices the manifest lists, before anything is sized
/// by it: pp x tp x dp must equal their number, computed without wrapping.
Status checkMesh(const Node &top, const Plan &plan) {
  std::optional<Node> devices;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "devices", &devices));
  const int64_t count = static_cast<int64_t>(devices->json.size());
  std::optional<int64_t> ranks = checkedProduct(std::initializer_list<int64_t>{plan.pp, plan.tp, plan.dp});
  if (!ranks || *ranks != count)
    return CLEAVE_ERROR("manifest.json: mesh: pp ", plan.pp, " x tp ", plan.tp, " x dp ", plan.dp,
                        ranks ? " is " + std::to_string(*ranks) : std::string(" overflows"),
                        ", the plan lists ", count, " device", count == 1 ? "" : "s");
  return {};
}

/// The most forward slots one stage may have (microbatches x virtual
/// stages): a bound on the loops and lists the schedule sizes. Real plans
/// have at most a few thousand (Megatron's largest runs: 3072 microbatches
/// of 1 sample per pipeline).
constexpr int64_t kMaxStageSlots = int64_t(1) << 16;

/// Microbatches and virtual stages are counts the schedule loops over: each
/// is bounded by what the manifest holds before any loop or list uses it.
Status checkScheduleCounts(const Node &top, const Node &schedule, const Plan &plan) {
  std::optional<int64_t> chunks = checkedMul(plan.pp, plan.virtualStages);
  std::optional<int64_t> slots =
      chunks ? checkedMul(*chunks, plan.microbatches) : std::nullopt;
  if (!slots || *slots / plan.pp > kMaxStageSlots)
    return CLEAVE_ERROR("manifest.json: schedule: ", plan.microbatches, " microbatches x ",
                        plan.virtualStages, " virtual stages is more than the ", kMaxStageSlots,
                        " slots a stage may run");
  if (plan.microbatches > 1 && !has(top, "batch"))
    return CLEAVE_ERROR("manifest.json: schedule: ", plan.microbatches,
                        " microbatches, but no 'batch' says how the batch splits into them");
  if (!has(schedule, "stages"))
    return {};
  // Listed slots: each stage runs the forward of each of its chunks on each
  // microbatch, so the lists hold at least that many (which slot is missing
  // is checkScheduleAgainstPrograms' to say).
  const Json &stages = schedule.json["stages"];
  int64_t listed = 0;
  for (size_t s = 0; stages.is_array() && s < stages.size(); ++s) {
    const Json &entry = stages[s];
    if (entry.is_object() && entry.contains("slots") && entry["slots"].is_array())
      listed += static_cast<int64_t>(entry["slots"].size());
  }
  if (listed < plan.microbatches * plan.virtualStages)
    return CLEAVE_ERROR("manifest.json: schedule.stages: ", listed, " slots in all, fewer than the ",
                        plan.microbatches, " microbatches x ", plan.virtualStages,
                        " virtual stages each stage runs");
  return {};
}

Status parseDevices(const Node &top, Plan *plan) {
  std::optional<Node> devices;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "devices", &devices));
  // checkMesh already matched the count against pp x tp x dp (at least 1).
  std::set<std::string> used;
  for (size_t i = 0; i < devices->json.size(); ++i) {
    Node item = devices->element(i);
    DeviceSpec device;
    CLEAVE_RETURN_IF_ERROR(getInt(item, "rank", &device.rank));
    if (device.rank != static_cast<int64_t>(i))
      return CLEAVE_ERROR(item.where(), ": rank ", device.rank, " out of order");
    CLEAVE_RETURN_IF_ERROR(getString(item, "backend", &device.backend));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "stage", &device.stage));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "tp", &device.tp));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "dp", &device.dp));
    CLEAVE_RETURN_IF_ERROR(getString(item, "program", &device.program));
    RankPosition at = positionOf(*plan, device.rank);
    if (device.stage != at.stage || device.dp != at.dp || device.tp != at.tp)
      return CLEAVE_ERROR(item.where(), ": rank ", device.rank, " is at stage ", device.stage,
                          ", dp ", device.dp, ", tp ", device.tp, "; the mesh puts it at stage ",
                          at.stage, ", dp ", at.dp, ", tp ", at.tp,
                          " (rank = stage*dp*tp + dp*tp + tp)");
    auto program = plan->programs.find(device.program);
    if (program == plan->programs.end())
      return CLEAVE_ERROR(item.where(), ": unknown program '", device.program, "'");
    if (program->second.stage != device.stage || program->second.tp != device.tp)
      return CLEAVE_ERROR(item.where(), ": rank ", device.rank, " (stage ", device.stage,
                          ", tp ", device.tp, ") runs program '", device.program,
                          "', which is stage ", program->second.stage, ", tp ",
                          program->second.tp);
    used.insert(device.program);
    plan->devices.push_back(std::move(device));
  }
  for (const auto &[name, program] : plan->programs)
    if (!used.count(name))
      return CLEAVE_ERROR("manifest.json: programs.", name, ": no device runs it");
  return {};
}

} // namespace

const Phase *ProgramSpec::findPhase(const std::string &name) const {
  for (const Phase &p : phases)
    if (p.name == name)
      return &p;
  return nullptr;
}

const Phase *ProgramSpec::findPhase(const std::string &name, int64_t chunk,
                                    std::optional<int64_t> microbatch) const {
  for (const Phase &p : phases)
    if (p.name == name && p.chunk == chunk &&
        (!p.microbatch || !microbatch || *p.microbatch == *microbatch))
      return &p;
  return nullptr;
}

int64_t ProgramSpec::phaseIndex(const std::string &name, int64_t chunk, int64_t microbatch) const {
  const Phase *p = findPhase(name, chunk, microbatch);
  return p ? static_cast<int64_t>(p - phases.data()) : -1;
}

int64_t ProgramSpec::phaseIndex(const std::string &name) const {
  for (size_t i = 0; i < phases.size(); ++i)
    if (phases[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

const ProgramSpec *Plan::programForRank(int64_t rank) const {
  for (const DeviceSpec &d : devices)
    if (d.rank == rank) {
      auto it = programs.find(d.program);
      return it == programs.end() ? nullptr : &it->second;
    }
  return nullptr;
}

const std::vector<int64_t> *Plan::groupOf(const std::string &kind, int64_t rank) const {
  const auto *lists = kind == "tp" ? &groups.tp : kind == "dp" ? &groups.dp : nullptr;
  if (!lists)
    return nullptr;
  for (const std::vector<int64_t> &g : *lists)
    if (std::find(g.begin(), g.end(), rank) != g.end())
      return &g;
  return nullptr;
}

namespace {

/// The program the manifest's devices give `rank`.
Status programOfRank(const Node &top, int64_t rank, std::string *program) {
  std::optional<Node> devices;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "devices", &devices));
  for (size_t i = 0; i < devices->json.size(); ++i) {
    Node item = devices->element(i);
    int64_t r = -1;
    CLEAVE_RETURN_IF_ERROR(getInt(item, "rank", &r));
    if (r == rank)
      return getString(item, "program", program);
  }
  return CLEAVE_ERROR("manifest.json: devices: no device has rank ", rank, " (the plan has ",
                      devices->json.size(), ")");
}

Status loadPlanImpl(const std::string &dir, std::optional<int64_t> onlyRank, Plan *out) {
  Plan plan;
  plan.dir = dir;
  Json json;
  CLEAVE_RETURN_IF_ERROR(readJson(dir, "manifest.json", &json).prepend("not a plan directory"));
  Node top{json, "manifest.json", ""};
  CLEAVE_RETURN_IF_ERROR(checkVersion(top, "cleave-plan", &plan.version));

  Node model = top.child("model");
  CLEAVE_RETURN_IF_ERROR(getString(model, "source", &plan.modelSource));
  if (has(model, "weights")) {
    if (!model.json["weights"].is_boolean())
      return CLEAVE_ERROR(model.child("weights").where(), ": expected true or false");
    plan.hasWeights = model.json["weights"].get<bool>();
  }
  CLEAVE_RETURN_IF_ERROR(parseTensorSpecs(top, "inputs", &plan.inputs));
  CLEAVE_RETURN_IF_ERROR(parseTensorSpecs(top, "outputs", &plan.outputs));

  std::optional<Node> mesh;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "mesh", &mesh));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "pp", &plan.pp, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "tp", &plan.tp, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "dp", &plan.dp, 1));
  CLEAVE_RETURN_IF_ERROR(checkMesh(top, plan));
  std::optional<Node> schedule;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "schedule", &schedule));
  CLEAVE_RETURN_IF_ERROR(getString(*schedule, "kind", &plan.schedule));
  if (plan.schedule != "forward" && plan.schedule != "gpipe" && plan.schedule != "1f1b" &&
      plan.schedule != "interleaved" && plan.schedule != "train")
    return CLEAVE_ERROR("manifest.json: schedule.kind: unknown schedule '", plan.schedule,
                        "' (expected forward, gpipe, 1f1b, interleaved or train)");
  bool training = plan.schedule == "train";
  if (training != (plan.version >= kTrainingPlanFormatVersion))
    return CLEAVE_ERROR("manifest.json: schedule.kind '", plan.schedule, "' in a version ",
                        plan.version, " plan (training plans, and only they, are version ",
                        kTrainingPlanFormatVersion, ")");
  // Data parallelism replicates the one program, pipelines and tensor
  // splits run a program per (stage, tp index).
  if (training && (plan.pp > 1 || plan.tp > 1) && !has(*schedule, "stages"))
    return CLEAVE_ERROR("manifest.json: schedule: a pipelined training plan lists its stages' "
                        "slots (schedule.stages)");
  CLEAVE_RETURN_IF_ERROR(getInt(*schedule, "microbatches", &plan.microbatches, 1));
  if (has(*schedule, "pipeline"))
    CLEAVE_RETURN_IF_ERROR(getString(*schedule, "pipeline", &plan.pipelineSchedule));
  CLEAVE_RETURN_IF_ERROR(getOptionalInt(*schedule, "virtual_stages", 1, &plan.virtualStages, 1));
  CLEAVE_RETURN_IF_ERROR(checkScheduleCounts(top, *schedule, plan));
  if (plan.virtualStages > 1 && plan.schedule != "interleaved" &&
      plan.pipelineSchedule != "interleaved")
    return CLEAVE_ERROR("manifest.json: schedule: ", plan.virtualStages,
                        " virtual stages, but the schedule is '", plan.schedule,
                        "' (only 'interleaved' has more than one)");
  if (has(top, "batch"))
    CLEAVE_RETURN_IF_ERROR(parseBatch(top, &plan));
  CLEAVE_RETURN_IF_ERROR(parseScheduleStages(*schedule, &plan));
  CLEAVE_RETURN_IF_ERROR(parseParameters(top, &plan));
  CLEAVE_RETURN_IF_ERROR(parsePredicted(top, &plan.predicted));
  if (training)
    CLEAVE_RETURN_IF_ERROR(parseTraining(top, &plan));

  std::optional<Node> programs;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "programs", &programs));
  std::string only;
  if (onlyRank)
    CLEAVE_RETURN_IF_ERROR(programOfRank(top, *onlyRank, &only));
  for (auto it = programs->json.begin(); it != programs->json.end(); ++it) {
    ProgramSpec program;
    Node entry = programs->child(it.key());
    if (onlyRank && it.key() != only) {
      program.name = it.key();
      program.loaded = false;
      CLEAVE_RETURN_IF_ERROR(getString(entry, "file", &program.file));
      if (plan.hasWeights)
        CLEAVE_RETURN_IF_ERROR(getString(entry, "weights", &program.weightsFile));
      CLEAVE_RETURN_IF_ERROR(programPosition(plan, entry, entry, &program));
    } else {
      CLEAVE_RETURN_IF_ERROR(loadProgram(plan, it.key(), entry, &program));
    }
    plan.programs.emplace(it.key(), std::move(program));
  }
  CLEAVE_RETURN_IF_ERROR(parseDevices(top, &plan));

  if (has(top, "groups")) {
    std::optional<Node> groups;
    CLEAVE_RETURN_IF_ERROR(getObject(top, "groups", &groups));
    CLEAVE_RETURN_IF_ERROR(parseGroups(*groups, "tp", plan, &plan.groups.tp));
    CLEAVE_RETURN_IF_ERROR(parseGroups(*groups, "dp", plan, &plan.groups.dp));
    CLEAVE_RETURN_IF_ERROR(parseGroups(*groups, "pipeline", plan, &plan.groups.pipeline));
  } else {
    plan.groups = {meshGroups(plan, "tp"), meshGroups(plan, "dp"), meshGroups(plan, "pipeline")};
  }
  if (training && !onlyRank)
    CLEAVE_RETURN_IF_ERROR(checkTraining(plan));
  if (training && !has(*schedule, "stages")) {
    // One program: a step runs forward and backward on each microbatch in
    // turn, then the optimizer once.
    plan.stageSlots[0].clear();
    const std::vector<Phase> &phases = plan.programs.begin()->second.phases;
    for (int64_t m = 0; m < plan.microbatches; ++m)
      for (const Phase &phase : phases)
        if (phase.name != "optimizer")
          plan.stageSlots[0].push_back({phase.name, phase.chunk, m});
    for (const Phase &phase : phases)
      if (phase.name == "optimizer")
        plan.stageSlots[0].push_back({phase.name, phase.chunk, 0});
  }
  CLEAVE_RETURN_IF_ERROR(checkScheduleAgainstPrograms(plan));

  // Every model output comes from some program (on one device, checkBindings
  // already required the program to bind all of them).
  for (const TensorSpec &output : plan.outputs) {
    if (onlyRank)
      break; // the other programs were not read
    bool bound = false;
    for (const auto &[name, program] : plan.programs)
      for (const Binding &b : program.outputs)
        bound |= b.name == output.name;
    if (!bound)
      return CLEAVE_ERROR("manifest.json: output '", output.name, "' is bound by no program");
  }
  *out = std::move(plan);
  return {};
}

} // namespace

void copyZeroPart(const void *data, size_t wholeBytes, int64_t index, void *part,
                  size_t partBytes) {
  std::memset(part, 0, partBytes);
  size_t from = static_cast<size_t>(index) * partBytes;
  if (from < wholeBytes)
    std::memcpy(part, static_cast<const char *>(data) + from,
                std::min(partBytes, wholeBytes - from));
}

std::string slotName(const ScheduleSlot &slot) {
  if (slot.phase == "optimizer")
    return "optimizer";
  return std::string(slot.phase == "backward" ? "B" : "F") + " mb" +
         std::to_string(slot.microbatch) + " chunk" + std::to_string(slot.chunk);
}

Status loadPlan(const std::string &dir, Plan *out) {
  return catchExceptions(dir, [&] { return loadPlanImpl(dir, std::nullopt, out); });
}

Status loadPlanForRank(const std::string &dir, int64_t rank, Plan *out) {
  return catchExceptions(dir, [&] { return loadPlanImpl(dir, rank, out); });
}

Status planWithoutWeights(const std::string &dir, const std::string &modelSource) {
  return CLEAVE_ERROR(dir, ": the plan has no weights (model.weights is false: ", modelSource,
                      " was exported on the meta device); 'cleave inspect' and 'cleave verify' "
                      "read it, 'cleave run' cannot");
}

namespace {
Status readDeviceCount(const std::string &dir, int64_t *devices, bool *hasWeights,
                       std::string *modelSource);
} // namespace

Status readPlanDeviceCount(const std::string &dir, int64_t *devices, bool *hasWeights,
                           std::string *modelSource) {
  return catchExceptions(dir, [&] { return readDeviceCount(dir, devices, hasWeights, modelSource); });
}

namespace {
Status readDeviceCount(const std::string &dir, int64_t *devices, bool *hasWeights,
                       std::string *modelSource) {
  Json json;
  CLEAVE_RETURN_IF_ERROR(readJson(dir, "manifest.json", &json).prepend("not a plan directory"));
  Node top{json, "manifest.json", ""};
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "devices", &list));
  *devices = static_cast<int64_t>(list->json.size());
  if (hasWeights) {
    const Json &model = json.contains("model") ? json["model"] : Json();
    *hasWeights = !(model.is_object() && model.contains("weights") &&
                    model["weights"].is_boolean() && !model["weights"].get<bool>());
  }
  if (modelSource && json.contains("model") && json["model"].is_object() &&
      json["model"].contains("source") && json["model"]["source"].is_string())
    *modelSource = json["model"]["source"].get<std::string>();
  return {};
}

} // namespace

} // namespace cleave::runtime
