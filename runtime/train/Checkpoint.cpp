#include "runtime/train/Checkpoint.h"

#include "runtime/AtomicFile.h"
#include "runtime/Executor.h"
#include "runtime/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace cleave::runtime {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char *kFormat = "cleave-checkpoint";
constexpr int kVersion = 1;
constexpr const char *kWeightsFile = "weights.safetensors";
constexpr const char *kStateFile = "state.safetensors";
constexpr const char *kInfoFile = "checkpoint.json";

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

Status syncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return CLEAVE_ERROR(path, ": cannot open to sync: ", std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return CLEAVE_ERROR(path, ": cannot sync: ", std::strerror(errno));
  return {};
}

/// The state buffers of the program, one per state name, in buffer order.
std::vector<const BufferSpec *> statesOf(const ProgramSpec &program) {
  std::vector<const BufferSpec *> states;
  std::set<std::string> seen;
  // Gradient accumulators are zero between steps (and absent from a plan
  // without microbatches), and ZeRO's copy of a rank's part of a parameter
  // is taken from the parameter each step: nothing to keep.
  auto transient = [](const std::string &name) {
    return name.rfind("gradient_accumulator.", 0) == 0 || name.rfind("zero.param_shard.", 0) == 0;
  };
  for (const BufferSpec &b : program.buffers)
    if (b.state && !transient(*b.state) && seen.insert(*b.state).second)
      states.push_back(&b);
  return states;
}

/// What a checkpoint holds of a state: the whole tensor.
TensorDesc wholeDesc(const BufferSpec &state) {
  return state.shardOf ? TensorDesc{state.desc.dtype, *state.shardOf} : state.desc;
}

/// The weights a checkpoint keeps: the model's tensors the program holds
/// (trained parameters and state_dict entries), in the weights file's order.
std::vector<const SafetensorsEntry *> modelWeightsOf(const Plan &plan,
                                                     const ProgramSpec &program) {
  std::set<std::string> model;
  if (plan.training) {
    model.insert(plan.training->parameters.begin(), plan.training->parameters.end());
    for (const StateDictEntry &entry : plan.training->stateDict)
      if (!entry.tensor.empty())
        model.insert(entry.tensor);
  }
  std::vector<const SafetensorsEntry *> kept;
  for (const SafetensorsEntry &entry : program.weights.entries)
    if (model.count(entry.name))
      kept.push_back(&entry);
  return kept;
}

/// Every tensor of `index` against what the plan expects (`want`: name to
/// desc), both ways; names in `ignored` (a program's constants, which
/// checkpoints of earlier versions kept) may be there and are not read.
Status checkTensors(const SafetensorsIndex &index, const std::map<std::string, TensorDesc> &want,
                    const char *what, const std::set<std::string> &ignored = {}) {
  for (const auto &[name, desc] : want) {
    const SafetensorsEntry *entry = index.find(name);
    if (!entry)
      return CLEAVE_ERROR(index.path, ": missing ", what, " '", name,
                          "' (the checkpoint is not of this plan)");
    if (entry->desc != desc)
      return CLEAVE_ERROR(index.path, ": ", what, " '", name, "' is ",
                          describe(entry->desc.shape, entry->desc.dtype), ", the plan's is ",
                          describe(desc.shape, desc.dtype));
  }
  for (const SafetensorsEntry &entry : index.entries)
    if (!want.count(entry.name) && !ignored.count(entry.name))
      return CLEAVE_ERROR(index.path, ": ", what, " '", entry.name,
                          "' is not in the plan (the checkpoint is not of this plan)");
  return {};
}

Status readText(const std::string &path, std::string *text) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return {};
}

} // namespace

Status fileChecksum(const std::string &path, uint64_t *checksum, uint64_t *bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  uint64_t hash = 0xcbf29ce484222325ull, total = 0;
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), block.size());
    std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) {
      hash ^= static_cast<unsigned char>(block[i]);
      hash *= 0x100000001b3ull;
    }
    total += static_cast<uint64_t>(n);
  }
  if (in.bad())
    return CLEAVE_ERROR(path, ": read failed: ", std::strerror(errno));
  *checksum = hash;
  *bytes = total;
  return {};
}

namespace {
/// `part` (this rank's part of `what`, `count` elements) becomes the whole
/// tensor of `wholeBytes`: every rank's part gathered, the padding dropped.
Status gatherWhole(const CheckpointShards &shards, const std::string &what, DType dtype,
                   size_t count, size_t wholeBytes, std::vector<char> *part) {
  if (!shards.gather || shards.ranks < 1)
    return CLEAVE_ERROR(what, " is sharded over the dp group, and this rank cannot gather it");
  std::vector<char> all(part->size() * static_cast<size_t>(shards.ranks));
  CLEAVE_RETURN_IF_ERROR(
      shards.gather(part->data(), all.data(), count, dtype).prepend("gathering " + what));
  all.resize(wholeBytes);
  part->swap(all);
  return {};
}
} // namespace

Status readWholeWeight(const Executor &executor, const CheckpointShards &shards,
                       const std::string &name, std::vector<char> *out) {
  const ProgramSpec &program = executor.program();
  const SafetensorsEntry *entry = program.weights.find(name);
  auto slot = program.weightSlots.find(name);
  if (!entry || slot == program.weightSlots.end())
    return CLEAVE_ERROR(program.weightsFile, ": no weight '", name, "'");
  out->resize(slot->second.bytes);
  CLEAVE_RETURN_IF_ERROR(executor.readWeight(name, out->data(), out->size()));
  if (!program.weightShard(name))
    return {};
  size_t count = slot->second.bytes / dtypeBytes(entry->desc.dtype);
  return gatherWhole(shards, "weight '" + name + "'", entry->desc.dtype, count,
                     entry->desc.bytes(), out);
}

Status readWholeState(const Executor &executor, const CheckpointShards &shards,
                      const BufferSpec &state, std::vector<char> *out) {
  out->resize(state.desc.bytes());
  CLEAVE_RETURN_IF_ERROR(executor.readState(*state.state, out->data(), out->size()));
  if (!state.shardOf)
    return {};
  return gatherWhole(shards, "state '" + *state.state + "'", state.desc.dtype,
                     state.desc.numel(), wholeDesc(state).bytes(), out);
}

Status collectCheckpoint(const Plan &plan, const Executor &executor,
                         const CheckpointShards &shards, CheckpointTensors *tensors) {
  const ProgramSpec &program = executor.program();
  std::vector<std::vector<char>> &data = tensors->data;
  data.clear();
  tensors->weights.clear();
  tensors->states.clear();
  data.reserve(program.weights.entries.size() + program.buffers.size());
  for (const SafetensorsEntry *entry : modelWeightsOf(plan, program)) {
    data.emplace_back();
    CLEAVE_RETURN_IF_ERROR(readWholeWeight(executor, shards, entry->name, &data.back()));
    tensors->weights.push_back({entry->name, entry->desc, data.back().data()});
  }
  for (const BufferSpec *buffer : statesOf(program)) {
    data.emplace_back();
    CLEAVE_RETURN_IF_ERROR(readWholeState(executor, shards, *buffer, &data.back()));
    tensors->states.push_back({*buffer->state, wholeDesc(*buffer), data.back().data()});
  }
  return {};
}

Status saveCheckpoint(const std::string &root, const Plan &plan, const Executor &executor,
                      const CheckpointInfo &info, std::string *path) {
  CheckpointTensors tensors;
  CLEAVE_RETURN_IF_ERROR(collectCheckpoint(plan, executor, {}, &tensors));
  return writeCheckpoint(root, plan, executor.program(), tensors, info, path);
}

Status writeCheckpoint(const std::string &root, const Plan &plan, const ProgramSpec &program,
                       const CheckpointTensors &tensors, const CheckpointInfo &info,
                       std::string *path) {
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return CLEAVE_ERROR(root, ": cannot create the checkpoint directory: ", ec.message());
  // A writer that crashed left its temporary directory: the checkpoint it
  // was writing never became one, so it goes.
  for (const fs::directory_entry &entry : fs::directory_iterator(root, ec)) {
    std::string leaf = entry.path().filename().string();
    if (leaf.rfind(".ckpt-", 0) == 0 && leaf.find(".tmp-") != std::string::npos)
      fs::remove_all(entry.path(), ec);
  }
  ec.clear();
  std::string name = "ckpt-" + std::to_string(info.step);
  std::string final = root + "/" + name;
  std::string temp = root + "/." + name + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(temp, ec);
  fs::create_directory(temp, ec);
  if (ec)
    return CLEAVE_ERROR(temp, ": cannot create: ", ec.message());
  auto abandon = [&](Status status) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    return status.prepend("checkpoint " + final);
  };

  Json files = Json::object();
  for (auto [file, list] :
       {std::pair{kWeightsFile, &tensors.weights}, {kStateFile, &tensors.states}}) {
    std::string filePath = temp + "/" + file;
    Status s = writeSafetensors(filePath, *list);
    if (s.ok())
      s = syncPath(filePath);
    uint64_t checksum = 0, bytes = 0;
    if (s.ok())
      s = fileChecksum(filePath, &checksum, &bytes);
    if (!s.ok())
      return abandon(s);
    files[file] = Json{{"bytes", bytes}, {"fnv1a64", hex(checksum)}};
  }
  Json json{{"format", kFormat},
            {"version", kVersion},
            {"step", info.step},
            {"seed", info.seed},
            {"shuffle_seed", info.shuffleSeed ? Json(*info.shuffleSeed) : Json(nullptr)},
            {"data", Json{{"samples", info.dataSamples},
                          {"bytes", info.dataBytes},
                          {"next_sample", plan.training ? info.step * plan.training->batchSize
                                                        : 0}}},
            {"plan", Json{{"model", plan.modelSource},
                          {"program", program.name},
                          {"weight_bytes", program.weightRegionBytes},
                          {"state_bytes", program.stateBytes}}},
            {"files", files}};
  Status s = writeFileAtomically(temp + "/" + kInfoFile, json.dump(1) + "\n");
  if (s.ok())
    s = syncPath(temp + "/" + kInfoFile);
  if (s.ok())
    s = syncPath(temp);
  if (!s.ok())
    return abandon(s);

  // Into place: an older checkpoint of the same step is replaced only once
  // the new one is complete.
  std::string old = root + "/." + name + ".old-" + std::to_string(::getpid());
  bool hadOld = fs::exists(final, ec);
  if (hadOld) {
    fs::rename(final, old, ec);
    if (ec)
      return abandon(CLEAVE_ERROR("cannot move the previous ", name, " aside: ", ec.message()));
  }
  fs::rename(temp, final, ec);
  if (ec)
    return abandon(CLEAVE_ERROR("cannot rename into place: ", ec.message()));
  if (hadOld)
    fs::remove_all(old, ec);
  CLEAVE_RETURN_IF_ERROR(writeFileAtomically(root + "/latest", name + "\n"));
  CLEAVE_RETURN_IF_ERROR(syncPath(root));
  *path = final;
  return {};
}

Status loadCheckpoint(const std::string &path, const Plan &plan, Executor &executor,
                      CheckpointInfo *info, std::string *resolved,
                      const CheckpointShards &shards) {
  std::error_code ec;
  std::string dir = path;
  if (!fs::exists(dir + "/" + kInfoFile, ec)) {
    std::string latest;
    if (!fs::exists(path + "/latest", ec))
      return CLEAVE_ERROR(path, ": not a checkpoint (neither ", kInfoFile,
                          " nor a 'latest' file naming one)");
    CLEAVE_RETURN_IF_ERROR(readText(path + "/latest", &latest));
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' '))
      latest.pop_back();
    if (latest.empty() || latest.find('/') != std::string::npos ||
        latest.rfind("ckpt-", 0) != 0)
      return CLEAVE_ERROR(path, "/latest: damaged (names '", latest,
                          "', expected ckpt-<step>)");
    dir = path + "/" + latest;
    if (!fs::exists(dir + "/" + kInfoFile, ec))
      return CLEAVE_ERROR(path, "/latest names ", latest, ", which has no ", kInfoFile);
  }
  std::string text;
  CLEAVE_RETURN_IF_ERROR(readText(dir + "/" + kInfoFile, &text));
  std::string infoPath = dir + "/" + kInfoFile;
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    return CLEAVE_ERROR(infoPath, ": damaged (not valid JSON)");
  auto bad = [&](const std::string &what) {
    return CLEAVE_ERROR(infoPath, ": damaged (", what, ")");
  };
  if (json.value("format", "") != kFormat)
    return bad("format is not " + std::string(kFormat));
  if (!json["version"].is_number_integer() || json["version"].get<int64_t>() != kVersion)
    return CLEAVE_ERROR(infoPath, ": unsupported checkpoint version (this runtime reads ",
                        kVersion, ")");
  if (!json["step"].is_number_integer() || json["step"].get<int64_t>() < 0)
    return bad("no step");
  if (!json["seed"].is_number_integer())
    return bad("no seed");
  if (!json["data"].is_object() || !json["data"]["samples"].is_number_integer() ||
      !json["data"]["bytes"].is_number_integer())
    return bad("no data position");
  if (!json["files"].is_object())
    return bad("no file list");
  CheckpointInfo loaded;
  loaded.step = json["step"].get<int64_t>();
  loaded.seed = json["seed"].get<int64_t>();
  if (json.contains("shuffle_seed") && json["shuffle_seed"].is_number_unsigned())
    loaded.shuffleSeed = json["shuffle_seed"].get<uint64_t>();
  loaded.dataSamples = json["data"]["samples"].get<int64_t>();
  loaded.dataBytes = json["data"]["bytes"].get<uint64_t>();
  if (plan.training && loaded.seed != plan.training->seed)
    return CLEAVE_ERROR(infoPath, ": seed ", loaded.seed, ", the plan's is ",
                        plan.training->seed, " (the checkpoint is not of this plan)");

  // Every file whole and unchanged before anything is read from it.
  for (const char *file : {kWeightsFile, kStateFile}) {
    const Json &entry = json["files"][file];
    if (!entry.is_object() || !entry["bytes"].is_number_integer() || !entry["fnv1a64"].is_string())
      return bad(std::string("no size or checksum for ") + file);
    uint64_t checksum = 0, bytes = 0;
    CLEAVE_RETURN_IF_ERROR(fileChecksum(dir + "/" + file, &checksum, &bytes));
    if (bytes != entry["bytes"].get<uint64_t>())
      return CLEAVE_ERROR(dir, "/", file, ": damaged: ", bytes, " bytes, the checkpoint wrote ",
                          entry["bytes"].get<uint64_t>());
    if (hex(checksum) != entry["fnv1a64"].get<std::string>())
      return CLEAVE_ERROR(dir, "/", file, ": damaged: checksum ", hex(checksum),
                          ", the checkpoint wrote ", entry["fnv1a64"].get<std::string>());
  }
  const ProgramSpec &program = executor.program();
  SafetensorsIndex weights, states;
  CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(dir + "/" + kWeightsFile, &weights));
  CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(dir + "/" + kStateFile, &states));
  std::map<std::string, TensorDesc> wantWeights, wantStates;
  for (const SafetensorsEntry *entry : modelWeightsOf(plan, program))
    wantWeights[entry->name] = entry->desc;
  std::set<std::string> constants;
  for (const SafetensorsEntry &entry : program.weights.entries)
    if (!wantWeights.count(entry.name))
      constants.insert(entry.name);
  std::map<std::string, const BufferSpec *> stateBuffers;
  for (const BufferSpec *buffer : statesOf(program)) {
    wantStates[*buffer->state] = wholeDesc(*buffer);
    stateBuffers[*buffer->state] = buffer;
  }
  CLEAVE_RETURN_IF_ERROR(checkTensors(weights, wantWeights, "weight", constants));
  CLEAVE_RETURN_IF_ERROR(checkTensors(states, wantStates, "state"));

  // Read everything, then write into the executor.
  std::vector<std::pair<const SafetensorsEntry *, std::vector<char>>> weightData, stateData;
  for (auto [index, out] : {std::pair{&weights, &weightData}, {&states, &stateData}})
    for (const SafetensorsEntry &entry : index->entries) {
      if (index == &weights && !wantWeights.count(entry.name))
        continue; // a constant an earlier checkpoint kept: the plan's own stands
      std::vector<char> bytes(entry.desc.bytes());
      CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(*index, entry, bytes.data()));
      out->emplace_back(&entry, std::move(bytes));
    }
  // A tensor the program holds as this rank's ZeRO part gets that part.
  auto partOf = [&](const std::string &what, size_t partBytes, std::vector<char> &bytes) {
    if (shards.index < 0 || shards.index >= shards.ranks)
      return CLEAVE_ERROR(what, " is sharded, and rank index ", shards.index,
                          " is not in the dp group of ", shards.ranks);
    std::vector<char> part(partBytes);
    copyZeroPart(bytes.data(), bytes.size(), shards.index, part.data(), part.size());
    bytes.swap(part);
    return Status();
  };
  for (auto &[entry, bytes] : weightData) {
    if (program.weightShard(entry->name))
      CLEAVE_RETURN_IF_ERROR(partOf("weight '" + entry->name + "'",
                                    program.weightSlots.at(entry->name).bytes, bytes));
    CLEAVE_RETURN_IF_ERROR(executor.writeWeight(entry->name, bytes.data(), bytes.size()));
  }
  for (auto &[entry, bytes] : stateData) {
    const BufferSpec &buffer = *stateBuffers.at(entry->name);
    if (buffer.shardOf)
      CLEAVE_RETURN_IF_ERROR(partOf("state '" + entry->name + "'", buffer.desc.bytes(), bytes));
    CLEAVE_RETURN_IF_ERROR(executor.writeState(entry->name, bytes.data(), bytes.size()));
  }
  *info = loaded;
  if (resolved)
    *resolved = dir;
  return {};
}

} // namespace cleave::runtime
