#include "runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace cleave::runtime {
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
                          shape->json.dump());
    desc->shape.push_back(d.get<int64_t>());
  }
  return {};
}

Status readJson(const std::string &dir, const std::string &file, Json *out) {
  std::string path = dir + "/" + file;
  std::ifstream in(path);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  *out = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded())
    return CLEAVE_ERROR(path, ": not valid JSON");
  if (!out->is_object())
    return CLEAVE_ERROR(path, ": expected a JSON object");
  return {};
}

Status checkVersion(const Node &top, const std::string &format, int64_t *version) {
  std::string actual;
  CLEAVE_RETURN_IF_ERROR(getString(top, "format", &actual));
  if (actual != format)
    return CLEAVE_ERROR(top.file, ": format is '", actual, "', expected '", format, "'");
  CLEAVE_RETURN_IF_ERROR(getInt(top, "version", version));
  if (*version != kPlanFormatVersion)
    return CLEAVE_ERROR(top.file, ": unsupported plan format version ", *version,
                        " (this runtime reads version ", kPlanFormatVersion, ")");
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

Status parseBuffers(const Node &top, ProgramSpec *program) {
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "buffers", &list));
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
    if (inArena == isWeight)
      return CLEAVE_ERROR(item.where(), ": needs exactly one of 'arena_offset' and 'weight'");
    std::string label = "buffer " + std::to_string(buffer.id) + " (" + buffer.name + ")";
    if (inArena) {
      int64_t offset = 0;
      CLEAVE_RETURN_IF_ERROR(getInt(item, "arena_offset", &offset));
      if (static_cast<size_t>(offset) + buffer.desc.bytes() > program->arenaBytes)
        return CLEAVE_ERROR(program->file, ": ", label, " spans bytes [", offset, ", ",
                            offset + buffer.desc.bytes(), "), past the arena's ",
                            program->arenaBytes, " bytes");
      buffer.arenaOffset = static_cast<size_t>(offset);
    } else {
      std::string weight;
      CLEAVE_RETURN_IF_ERROR(getString(item, "weight", &weight));
      const SafetensorsEntry *entry = program->weights.find(weight);
      if (!entry)
        return CLEAVE_ERROR(program->file, ": ", label, " refers to weight '", weight,
                            "', missing from ", program->weightsFile);
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
      buffer.weight = weight;
    }
    program->buffers.push_back(std::move(buffer));
  }
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

bool overlaps(size_t aBegin, size_t aBytes, size_t bBegin, size_t bBytes) {
  return aBytes && bBytes && aBegin < bBegin + bBytes && bBegin < aBegin + aBytes;
}

Status parseInstruction(const ProgramSpec &program, const Node &item, InstructionSpec *inst) {
  CLEAVE_RETURN_IF_ERROR(getString(item, "kernel", &inst->kernel));
  if (item.json.contains("loc"))
    CLEAVE_RETURN_IF_ERROR(getString(item, "loc", &inst->loc));
  std::string label = item.where() + " (" + inst->kernel +
                      (inst->loc.empty() ? "" : " at " + inst->loc) + ")";
  std::optional<Node> inputs, outputs;
  CLEAVE_RETURN_IF_ERROR(getArray(item, "inputs", &inputs));
  CLEAVE_RETURN_IF_ERROR(getArray(item, "outputs", &outputs));
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
    if (!out.arenaOffset)
      return CLEAVE_ERROR(label, ": writes to weight buffer ", id, " (", out.name, ")");
    inst->outputs.push_back(id);
  }
  if (item.json.contains("scratch")) {
    Node scratch = item.child("scratch");
    int64_t offset = 0, bytes = 0;
    CLEAVE_RETURN_IF_ERROR(getInt(scratch, "arena_offset", &offset));
    CLEAVE_RETURN_IF_ERROR(getInt(scratch, "bytes", &bytes));
    if (static_cast<size_t>(offset + bytes) > program.arenaBytes)
      return CLEAVE_ERROR(label, ": scratch [", offset, ", ", offset + bytes,
                          ") is past the arena's ", program.arenaBytes, " bytes");
    inst->scratchOffset = offset;
    inst->scratchBytes = bytes;
  }
  if (item.json.contains("attrs"))
    CLEAVE_RETURN_IF_ERROR(parseAttributes(item.child("attrs"), &inst->attrs));

  // Kernels assume their outputs share no memory with their inputs or scratch
  // (reshape alone may write over its own input: it is a view).
  for (int64_t o : inst->outputs) {
    const BufferSpec &out = program.buffers[o];
    if (overlaps(*out.arenaOffset, out.desc.bytes(), inst->scratchOffset, inst->scratchBytes))
      return CLEAVE_ERROR(label, ": output buffer ", o, " overlaps the scratch");
    if (inst->kernel == "reshape")
      continue;
    for (const std::optional<int64_t> &in : inst->inputs) {
      if (!in || !program.buffers[*in].arenaOffset)
        continue;
      const BufferSpec &b = program.buffers[*in];
      if (overlaps(*out.arenaOffset, out.desc.bytes(), *b.arenaOffset, b.desc.bytes()))
        return CLEAVE_ERROR(label, ": output buffer ", o, " overlaps input buffer ", *in);
    }
  }
  return {};
}

Status parseBindings(const Node &top, const std::string &key, const ProgramSpec &program,
                     const std::vector<TensorSpec> &expected, std::vector<Binding> *out) {
  std::optional<Node> list;
  CLEAVE_RETURN_IF_ERROR(getArray(top, key, &list));
  for (size_t i = 0; i < list->json.size(); ++i) {
    Node item = list->element(i);
    Binding binding;
    CLEAVE_RETURN_IF_ERROR(getString(item, "name", &binding.name));
    CLEAVE_RETURN_IF_ERROR(bufferId(program, item.child("buffer"), &binding.buffer));
    out->push_back(binding);
  }
  // A single-device program binds every model input and output.
  if (out->size() != expected.size())
    return CLEAVE_ERROR(program.file, ": binds ", out->size(), " ", key, ", the manifest has ",
                        expected.size());
  for (const TensorSpec &spec : expected) {
    const Binding *binding = nullptr;
    for (const Binding &b : *out)
      if (b.name == spec.name)
        binding = &b;
    if (!binding)
      return CLEAVE_ERROR(program.file, ": does not bind ", key, " '", spec.name, "'");
    const BufferSpec &buffer = program.buffers[binding->buffer];
    if (buffer.desc != spec.desc)
      return CLEAVE_ERROR(program.file, ": '", spec.name, "' is ",
                          describe(spec.desc.shape, spec.desc.dtype),
                          " in the manifest but its buffer ", buffer.id, " is ",
                          describe(buffer.desc.shape, buffer.desc.dtype));
    if (key == "inputs" && !buffer.arenaOffset)
      return CLEAVE_ERROR(program.file, ": input '", spec.name, "' is bound to a weight");
  }
  return {};
}

Status loadProgram(const Plan &plan, const std::string &name, const Node &entry,
                   ProgramSpec *program) {
  program->name = name;
  CLEAVE_RETURN_IF_ERROR(getString(entry, "file", &program->file));
  CLEAVE_RETURN_IF_ERROR(getString(entry, "weights", &program->weightsFile));
  for (const std::string *f : {&program->file, &program->weightsFile})
    if (f->empty() || f->front() == '/' || f->find("..") != std::string::npos)
      return CLEAVE_ERROR(entry.where(), ": '", *f, "' must be a path inside the plan");

  CLEAVE_RETURN_IF_ERROR(
      readSafetensorsIndex(plan.dir + "/" + program->weightsFile, &program->weights));
  Json json;
  CLEAVE_RETURN_IF_ERROR(readJson(plan.dir, program->file, &json));
  Node top{json, program->file, ""};
  int64_t version = 0;
  CLEAVE_RETURN_IF_ERROR(checkVersion(top, "cleave-program", &version));
  std::string declared;
  CLEAVE_RETURN_IF_ERROR(getString(top, "name", &declared));
  if (declared != name)
    return CLEAVE_ERROR(program->file, ": names program '", declared, "', the manifest '",
                        name, "'");
  int64_t arenaBytes = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(top, "arena_bytes", &arenaBytes));
  program->arenaBytes = static_cast<size_t>(arenaBytes);

  // The manifest's predicted memory must be what this program allocates.
  int64_t predictedArena = 0, predictedWeights = 0;
  Node memory = entry;
  CLEAVE_RETURN_IF_ERROR(getInt(memory, "arena_bytes", &predictedArena));
  CLEAVE_RETURN_IF_ERROR(getInt(memory, "weight_bytes", &predictedWeights));
  if (static_cast<size_t>(predictedArena) != program->arenaBytes)
    return CLEAVE_ERROR("manifest.json: program '", name, "' predicts an arena of ",
                        predictedArena, " bytes, ", program->file, " declares ",
                        program->arenaBytes);
  if (static_cast<size_t>(predictedWeights) != program->weights.dataBytes)
    return CLEAVE_ERROR("manifest.json: program '", name, "' predicts ", predictedWeights,
                        " weight bytes, ", program->weightsFile, " holds ",
                        program->weights.dataBytes);

  CLEAVE_RETURN_IF_ERROR(parseBuffers(top, program));
  CLEAVE_RETURN_IF_ERROR(parseBindings(top, "inputs", *program, plan.inputs, &program->inputs));
  CLEAVE_RETURN_IF_ERROR(
      parseBindings(top, "outputs", *program, plan.outputs, &program->outputs));

  std::optional<Node> phases;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "phases", &phases));
  for (size_t p = 0; p < phases->json.size(); ++p) {
    Node phaseNode = phases->element(p);
    Phase phase;
    CLEAVE_RETURN_IF_ERROR(getString(phaseNode, "name", &phase.name));
    if (program->findPhase(phase.name))
      return CLEAVE_ERROR(phaseNode.where(), ": duplicate phase '", phase.name, "'");
    std::optional<Node> list;
    CLEAVE_RETURN_IF_ERROR(getArray(phaseNode, "instructions", &list));
    for (size_t i = 0; i < list->json.size(); ++i) {
      InstructionSpec inst;
      CLEAVE_RETURN_IF_ERROR(parseInstruction(*program, list->element(i), &inst));
      phase.instructions.push_back(std::move(inst));
    }
    program->phases.push_back(std::move(phase));
  }
  if (!program->findPhase("forward"))
    return CLEAVE_ERROR(program->file, ": has no 'forward' phase");
  return {};
}

} // namespace

const Phase *ProgramSpec::findPhase(const std::string &name) const {
  for (const Phase &p : phases)
    if (p.name == name)
      return &p;
  return nullptr;
}

const ProgramSpec *Plan::programForRank(int64_t rank) const {
  for (const DeviceSpec &d : devices)
    if (d.rank == rank) {
      auto it = programs.find(d.program);
      return it == programs.end() ? nullptr : &it->second;
    }
  return nullptr;
}

Status loadPlan(const std::string &dir, Plan *out) {
  Plan plan;
  plan.dir = dir;
  Json json;
  CLEAVE_RETURN_IF_ERROR(readJson(dir, "manifest.json", &json).prepend("not a plan directory"));
  Node top{json, "manifest.json", ""};
  CLEAVE_RETURN_IF_ERROR(checkVersion(top, "cleave-plan", &plan.version));

  Node model = top.child("model");
  CLEAVE_RETURN_IF_ERROR(getString(model, "source", &plan.modelSource));
  CLEAVE_RETURN_IF_ERROR(parseTensorSpecs(top, "inputs", &plan.inputs));
  CLEAVE_RETURN_IF_ERROR(parseTensorSpecs(top, "outputs", &plan.outputs));

  std::optional<Node> mesh;
  CLEAVE_RETURN_IF_ERROR(field(top, "mesh", Json::value_t::object, "an object", &mesh));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "pp", &plan.pp, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "tp", &plan.tp, 1));
  CLEAVE_RETURN_IF_ERROR(getInt(*mesh, "dp", &plan.dp, 1));
  std::optional<Node> schedule;
  CLEAVE_RETURN_IF_ERROR(field(top, "schedule", Json::value_t::object, "an object", &schedule));
  CLEAVE_RETURN_IF_ERROR(getString(*schedule, "kind", &plan.schedule));
  CLEAVE_RETURN_IF_ERROR(getInt(*schedule, "microbatches", &plan.microbatches, 1));

  std::optional<Node> programs;
  CLEAVE_RETURN_IF_ERROR(
      field(top, "programs", Json::value_t::object, "an object", &programs));
  for (auto it = programs->json.begin(); it != programs->json.end(); ++it) {
    ProgramSpec program;
    CLEAVE_RETURN_IF_ERROR(loadProgram(plan, it.key(), programs->child(it.key()), &program));
    plan.programs.emplace(it.key(), std::move(program));
  }

  std::optional<Node> devices;
  CLEAVE_RETURN_IF_ERROR(getArray(top, "devices", &devices));
  if (devices->json.empty())
    return CLEAVE_ERROR("manifest.json: devices: the plan has no device");
  if (static_cast<int64_t>(devices->json.size()) != plan.pp * plan.tp * plan.dp)
    return CLEAVE_ERROR("manifest.json: ", devices->json.size(), " devices for a mesh of pp ",
                        plan.pp, " x tp ", plan.tp, " x dp ", plan.dp);
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
    if (!plan.programs.count(device.program))
      return CLEAVE_ERROR(item.where(), ": unknown program '", device.program, "'");
    plan.devices.push_back(std::move(device));
  }
  *out = std::move(plan);
  return {};
}

} // namespace cleave::runtime
