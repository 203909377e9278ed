#include "runtime/train/Checkpoint.h"

#include "runtime/AtomicFile.h"
#include "runtime/Checked.h"
#include "runtime/JsonFile.h"
#include "runtime/Executor.h"
#include "runtime/Safetensors.h"
#include "runtime/TensorParts.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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
/// A pipeline's checkpoint: a file pair per stage and a global index.
constexpr int kStagesVersion = 2;
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
  // without microbatches), ZeRO's copy of a rank's part of a parameter is
  // taken from the parameter each step, a spilled gradient's host copy is
  // written by backward before the update reads it, and the sample offset
  // is set before each microbatch: nothing to keep.
  auto transient = [](const std::string &name) {
    return name.rfind("gradient_accumulator.", 0) == 0 ||
           name.rfind("host_gradient.", 0) == 0 || name.rfind("host_activation.", 0) == 0 ||
           name.rfind("zero.param_shard.", 0) == 0 || name == "sample_offset";
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

/// What a plan's tensor name says: the tensor whole, or a tp rank's part
/// (`NAME[split(D) t/n]`) of the tensor NAME.
WeightShard partOfName(const std::string &name) {
  WeightShard shard;
  if (!parseWeightShard(name, &shard)) {
    shard = WeightShard();
    shard.parameter = name;
  }
  return shard;
}

/// The weights a checkpoint keeps: the model's tensors the program holds
/// (trained parameters and state_dict entries, whole or a tp rank's part),
/// in the weights file's order.
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
    if (model.count(partOfName(entry.name).parameter))
      kept.push_back(&entry);
  return kept;
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

namespace {
/// Moves the complete checkpoint `temp` to root/name and points `latest`
/// at it: an older checkpoint of the same step is replaced only once the
/// new one is complete.
Status publishCheckpoint(const std::string &root, const std::string &name,
                         const std::string &temp) {
  std::error_code ec;
  std::string final = root + "/" + name;
  std::string old = root + "/." + name + ".old-" + std::to_string(::getpid());
  bool hadOld = fs::exists(final, ec);
  if (hadOld) {
    fs::rename(final, old, ec);
    if (ec)
      return CLEAVE_ERROR("cannot move the previous ", name, " aside: ", ec.message());
  }
  fs::rename(temp, final, ec);
  if (ec)
    return CLEAVE_ERROR("cannot rename into place: ", ec.message());
  if (hadOld)
    fs::remove_all(old, ec);
  CLEAVE_RETURN_IF_ERROR(writeFileAtomically(root + "/latest", name + "\n"));
  return syncPath(root);
}

/// Creates `root` and removes what crashed writers left there.
Status prepareRoot(const std::string &root) {
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
  return {};
}

/// checkpoint.json's common fields.
Json infoJson(const Plan &plan, const CheckpointInfo &info, int version) {
  return Json{{"format", kFormat},
              {"version", version},
              {"step", info.step},
              {"seed", info.seed},
              {"shuffle_seed", info.shuffleSeed ? Json(*info.shuffleSeed) : Json(nullptr)},
              {"data", Json{{"samples", info.dataSamples},
                            {"bytes", info.dataBytes},
                            {"next_sample",
                             plan.training ? info.step * plan.training->batchSize : 0}}}};
}
} // namespace

bool firstHolder(const Plan &plan, const ProgramSpec &program, const std::string &name,
                 bool state) {
  for (const auto &[_, other] : plan.programs) {
    if (other.stage >= program.stage || other.tp != program.tp)
      continue;
    if (!state && other.weights.find(name))
      return false;
    if (state && std::any_of(other.buffers.begin(), other.buffers.end(),
                             [&](const BufferSpec &b) { return b.state && *b.state == name; }))
      return false;
  }
  return true;
}

Status collectLocalCheckpoint(const Plan &plan, const Executor &executor, int64_t dpIndex,
                              LocalCheckpoint *out) {
  const ProgramSpec &program = executor.program();
  *out = LocalCheckpoint();
  // The valid elements of this rank's part of a tensor of `numel`.
  auto partElements = [&](int64_t numel, int64_t partNumel) {
    return std::clamp<int64_t>(numel - dpIndex * partNumel, 0, partNumel);
  };
  for (const SafetensorsEntry *entry : modelWeightsOf(plan, program)) {
    const size_t slot = program.weightSlots.at(entry->name).bytes;
    std::vector<char> &bytes = out->data.emplace_back(slot);
    CLEAVE_RETURN_IF_ERROR(executor.readWeight(entry->name, bytes.data(), bytes.size()));
    if (!program.weightShard(entry->name)) {
      out->weights.push_back({entry->name, entry->desc, bytes.data()});
      continue;
    }
    const int64_t element = static_cast<int64_t>(dtypeBytes(entry->desc.dtype));
    int64_t n = partElements(entry->desc.numel(), static_cast<int64_t>(slot) / element);
    bytes.resize(static_cast<size_t>(n * element));
    if (n > 0) // a small tensor may leave the last ranks nothing
      out->weightParts.push_back({entry->name, TensorDesc{entry->desc.dtype, {n}}, bytes.data()});
  }
  for (const BufferSpec *buffer : statesOf(program)) {
    std::vector<char> &bytes = out->data.emplace_back(buffer->desc.bytes());
    CLEAVE_RETURN_IF_ERROR(executor.readState(*buffer->state, bytes.data(), bytes.size()));
    if (!buffer->shardOf) {
      out->states.push_back({*buffer->state, buffer->desc, bytes.data()});
      continue;
    }
    int64_t n = partElements(wholeDesc(*buffer).numel(), buffer->desc.numel());
    bytes.resize(static_cast<size_t>(n) * dtypeBytes(buffer->desc.dtype));
    if (n > 0)
      out->stateParts.push_back(
          {*buffer->state, TensorDesc{buffer->desc.dtype, {n}}, bytes.data()});
  }
  return {};
}

Status writeShardedCheckpoint(const std::string &root, const Plan &plan,
                              const ProgramSpec &program, const LocalCheckpoint &local,
                              const CheckpointInfo &info, const CheckpointGroup &group,
                              std::string *path) {
  const std::string name = "ckpt-" + std::to_string(info.step);
  const std::string final = root + "/" + name;
  // One temporary directory for all ranks (so not named by a pid).
  const std::string temp = root + "/." + name + ".tmp-ranks";
  auto where = [&](Status s) { return s.prepend("checkpoint " + final); };
  Status prepared;
  if (group.rank == 0) {
    prepared = prepareRoot(root);
    std::error_code ec;
    if (prepared.ok() && !fs::create_directory(temp, ec))
      prepared = CLEAVE_ERROR(temp, ": cannot create: ", ec ? ec.message() : "it exists");
  }
  CLEAVE_RETURN_IF_ERROR(group.agree(where(prepared)));

  // With a tp group, each tp index of a stage writes its own files (the
  // parts of split tensors; the whole ones only tp index 0).
  auto tpInfix = [&](int64_t tp) {
    return plan.tp > 1 ? ".tp" + std::to_string(tp) : std::string();
  };
  auto stageFile = [&](int64_t stage, int64_t tp, const char *what) {
    return "stage" + std::to_string(stage) + tpInfix(tp) + "." + what + ".safetensors";
  };
  auto partFile = [&](int64_t stage, int64_t tp, int64_t dp, const char *what) {
    return "stage" + std::to_string(stage) + tpInfix(tp) + ".dp" + std::to_string(dp) + "." +
           what + ".safetensors";
  };
  const bool sharded = std::any_of(program.buffers.begin(), program.buffers.end(),
                                   [](const BufferSpec &b) { return b.shardOf.has_value(); });
  auto write = [&](const std::string &file, const std::vector<SafetensorsTensor> &list,
                   bool state) -> Status {
    std::vector<SafetensorsTensor> mine;
    for (const SafetensorsTensor &t : list)
      if (firstHolder(plan, program, t.name, state) &&
          (program.tp == 0 || partOfName(t.name).split))
        mine.push_back(t);
    std::string filePath = temp + "/" + file;
    CLEAVE_RETURN_IF_ERROR(writeSafetensors(filePath, mine));
    return syncPath(filePath);
  };
  Status written = [&]() -> Status {
    if (group.writesStage) {
      CLEAVE_RETURN_IF_ERROR(
          write(stageFile(group.stage, program.tp, "weights"), local.weights, false));
      CLEAVE_RETURN_IF_ERROR(
          write(stageFile(group.stage, program.tp, "state"), local.states, true));
    }
    // Every rank its own ZeRO parts: nothing is gathered.
    if (sharded) {
      CLEAVE_RETURN_IF_ERROR(write(partFile(group.stage, program.tp, group.dp, "weights"),
                                   local.weightParts, false));
      CLEAVE_RETURN_IF_ERROR(
          write(partFile(group.stage, program.tp, group.dp, "state"), local.stateParts, true));
    }
    return {};
  }();
  CLEAVE_RETURN_IF_ERROR(group.agree(where(written)));

  Status finished;
  if (group.rank == 0) {
    finished = [&]() -> Status {
      Json files = Json::object(), weights = Json::object(), states = Json::object();
      // The whole shape of a tensor some program holds as ZeRO parts.
      auto wholeShape = [&](const std::string &tensor, bool state) -> std::optional<Shape> {
        for (const auto &[_, p] : plan.programs) {
          if (!state && p.weightShard(tensor))
            return p.weights.find(tensor)->desc.shape;
          for (const BufferSpec &b : p.buffers)
            if (state && b.state && *b.state == tensor && b.shardOf)
              return *b.shardOf;
        }
        return std::nullopt;
      };
      auto add = [&](const std::string &file, bool state, std::optional<int64_t> dp) -> Status {
        std::string filePath = temp + "/" + file;
        if (dp && !fs::exists(filePath))
          return {};
        uint64_t checksum = 0, bytes = 0;
        CLEAVE_RETURN_IF_ERROR(fileChecksum(filePath, &checksum, &bytes));
        files[file] = Json{{"bytes", bytes}, {"fnv1a64", hex(checksum)}};
        SafetensorsIndex index;
        CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(filePath, &index));
        Json &kind = state ? states : weights;
        for (const SafetensorsEntry &e : index.entries) {
          // A tp rank's part also names its tensor and where it lies.
          auto describePart = [&](Json &entry, const Shape &shape) {
            WeightShard part = partOfName(e.name);
            if (!part.split)
              return;
            Shape whole = shape;
            if (part.dim < static_cast<int64_t>(whole.size()))
              whole[part.dim] *= part.parts;
            entry["part_of"] = Json{{"tensor", part.parameter}, {"shape", whole},
                                    {"dim", part.dim},         {"blocks", part.blocks},
                                    {"part", part.part},       {"parts", part.parts}};
          };
          if (!dp) {
            kind[e.name] = Json{{"file", file}, {"dtype", dtypeName(e.desc.dtype)},
                                {"shape", e.desc.shape}};
            describePart(kind[e.name], e.desc.shape);
            continue;
          }
          std::optional<Shape> shape = wholeShape(e.name, state);
          if (!shape)
            return CLEAVE_ERROR(filePath, ": '", e.name, "' is no ZeRO part of the plan");
          int64_t numel = TensorDesc{e.desc.dtype, *shape}.numel();
          int64_t k = (numel + plan.dp - 1) / plan.dp;
          Json &entry = kind[e.name];
          entry["dtype"] = dtypeName(e.desc.dtype);
          entry["shape"] = *shape;
          entry["parts"].push_back(Json{{"file", file}, {"begin", *dp * k}});
          describePart(entry, *shape);
        }
        return {};
      };
      for (int64_t s = 0; s < plan.pp; ++s)
        for (int64_t t = 0; t < plan.tp; ++t) {
          CLEAVE_RETURN_IF_ERROR(add(stageFile(s, t, "weights"), false, std::nullopt));
          CLEAVE_RETURN_IF_ERROR(add(stageFile(s, t, "state"), true, std::nullopt));
          for (int64_t d = 0; d < plan.dp; ++d) {
            CLEAVE_RETURN_IF_ERROR(add(partFile(s, t, d, "weights"), false, d));
            CLEAVE_RETURN_IF_ERROR(add(partFile(s, t, d, "state"), true, d));
          }
        }
      Json json = infoJson(plan, info, kStagesVersion);
      json["plan"] = Json{{"model", plan.modelSource}, {"stages", plan.pp}, {"tp", plan.tp},
                          {"dp", plan.dp}};
      json["files"] = files;
      // The global index: where each tensor is, whole or in parts.
      json["index"] = Json{{"weights", weights}, {"states", states}};
      CLEAVE_RETURN_IF_ERROR(writeFileAtomically(temp + "/" + kInfoFile, json.dump(1) + "\n"));
      CLEAVE_RETURN_IF_ERROR(syncPath(temp + "/" + kInfoFile));
      CLEAVE_RETURN_IF_ERROR(syncPath(temp));
      return publishCheckpoint(root, name, temp);
    }();
    if (!finished.ok()) {
      std::error_code ignored;
      fs::remove_all(temp, ignored);
    }
  }
  CLEAVE_RETURN_IF_ERROR(group.agree(where(finished)));
  *path = final;
  return {};
}

Status writeCheckpoint(const std::string &root, const Plan &plan, const ProgramSpec &program,
                       const CheckpointTensors &tensors, const CheckpointInfo &info,
                       std::string *path) {
  CLEAVE_RETURN_IF_ERROR(prepareRoot(root));
  std::error_code ec;
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
  Json json = infoJson(plan, info, kVersion);
  json["plan"] = Json{{"model", plan.modelSource},
                      {"program", program.name},
                      {"weight_bytes", program.weightRegionBytes},
                      {"state_bytes", program.stateBytes}};
  if (program.hostBytes()) // informative: states and weights resume by name, any pool
    json["plan"]["host_bytes"] = program.hostBytes();
  json["files"] = files;
  Status s = writeFileAtomically(temp + "/" + kInfoFile, json.dump(1) + "\n");
  if (s.ok())
    s = syncPath(temp + "/" + kInfoFile);
  if (s.ok())
    s = syncPath(temp);
  if (!s.ok())
    return abandon(s);

  if (Status placed = publishCheckpoint(root, name, temp); !placed.ok())
    return abandon(placed);
  *path = final;
  return {};
}

namespace {
Status loadCheckpointImpl(const std::string &path, const Plan &plan, Executor &executor,
                          CheckpointInfo *info, std::string *resolved,
                          const CheckpointShards &shards);
} // namespace

Status loadCheckpoint(const std::string &path, const Plan &plan, Executor &executor,
                      CheckpointInfo *info, std::string *resolved,
                      const CheckpointShards &shards) {
  return catchExceptions(path, [&] {
    return loadCheckpointImpl(path, plan, executor, info, resolved, shards);
  });
}

namespace {
Status loadCheckpointImpl(const std::string &path, const Plan &plan, Executor &executor,
                          CheckpointInfo *info, std::string *resolved,
                          const CheckpointShards &shards) {
  std::error_code ec;
  std::string dir = path;
  if (!fs::exists(dir + "/" + kInfoFile, ec)) {
    std::string latest;
    if (!fs::exists(path + "/latest", ec))
      return CLEAVE_ERROR(path, ": not a checkpoint (neither ", kInfoFile,
                          " nor a 'latest' file naming one)");
    CLEAVE_RETURN_IF_ERROR(readTextFile(path + "/latest", &latest));
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' '))
      latest.pop_back();
    if (latest.empty() || latest.find('/') != std::string::npos ||
        latest.rfind("ckpt-", 0) != 0)
      return CLEAVE_ERROR(path, "/latest: damaged (names '", excerpt(latest),
                          "', expected ckpt-<step>)");
    dir = path + "/" + latest;
    if (!fs::exists(dir + "/" + kInfoFile, ec))
      return CLEAVE_ERROR(path, "/latest names ", latest, ", which has no ", kInfoFile);
  }
  std::string text;
  CLEAVE_RETURN_IF_ERROR(readTextFile(dir + "/" + kInfoFile, &text));
  std::string infoPath = dir + "/" + kInfoFile;
  Json json;
  if (Status parsed = parseJson(text, infoPath, &json); !parsed.ok())
    return CLEAVE_ERROR(infoPath, ": damaged (", parsed.message().substr(infoPath.size() + 2), ")");
  if (!json.is_object())
    return CLEAVE_ERROR(infoPath, ": damaged (not a JSON object)");
  auto bad = [&](const std::string &what) {
    return CLEAVE_ERROR(infoPath, ": damaged (", what, ")");
  };
  if (json.value("format", "") != kFormat)
    return bad("format is not " + std::string(kFormat));
  const int64_t version =
      json["version"].is_number_integer() ? json["version"].get<int64_t>() : -1;
  if (version != kVersion && version != kStagesVersion)
    return CLEAVE_ERROR(infoPath, ": unsupported checkpoint version (this runtime reads ",
                        kVersion, " and ", kStagesVersion, ")");
  if (!json["step"].is_number_integer() || json["step"].get<int64_t>() < 0)
    return bad("no step");
  if (!json["seed"].is_number_integer())
    return bad("no seed");
  if (!json["data"].is_object() || !json["data"]["samples"].is_number_integer() ||
      !json["data"]["bytes"].is_number_integer() || json["data"]["samples"].get<int64_t>() < 0)
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
  // The data position is the step's: a checkpoint whose next sample says
  // otherwise was not written by a run of this plan.
  if (plan.training && json["data"].contains("next_sample")) {
    std::optional<int64_t> next = checkedMul(loaded.step, plan.training->batchSize);
    const Json &written = json["data"]["next_sample"];
    if (!next || !written.is_number_unsigned() ||
        written.get<uint64_t>() != static_cast<uint64_t>(*next))
      return CLEAVE_ERROR(infoPath, ": data.next_sample ", jsonExcerpt(written), " is not step ",
                          loaded.step, " x the plan's batch of ", plan.training->batchSize,
                          " (written by a run of another batch size, or damaged)");
  }
  if (plan.training && loaded.seed != plan.training->seed)
    return CLEAVE_ERROR(infoPath, ": seed ", loaded.seed, ", the plan's is ",
                        plan.training->seed, " (the checkpoint is not of this plan)");

  // Version 1: one weights and one state file; version 2: the files of a
  // pipeline's stages and the global index saying which holds what.
  std::vector<std::string> fileNames;
  if (version == kVersion) {
    fileNames = {kWeightsFile, kStateFile};
  } else {
    if (!json["index"].is_object() || !json["index"]["weights"].is_object() ||
        !json["index"]["states"].is_object())
      return bad("no index");
    for (auto it = json["files"].begin(); it != json["files"].end(); ++it) {
      const std::string &file = it.key();
      if (file.empty() || file[0] == '.' || file.find('/') != std::string::npos)
        return bad("file name '" + file + "'");
      fileNames.push_back(file);
    }
  }
  // Every file whole and unchanged before anything is read from it.
  for (const std::string &file : fileNames) {
    Json &entry = json["files"][file]; // not const: a missing key reads as null
    if (!entry.is_object() || !entry["bytes"].is_number_integer() || !entry["fnv1a64"].is_string())
      return bad("no size or checksum for " + file);
    uint64_t checksum = 0, bytes = 0;
    CLEAVE_RETURN_IF_ERROR(fileChecksum(dir + "/" + file, &checksum, &bytes));
    if (bytes != entry["bytes"].get<uint64_t>())
      return CLEAVE_ERROR(dir, "/", file, ": damaged: ", bytes, " bytes, the checkpoint wrote ",
                          entry["bytes"].get<uint64_t>());
    if (hex(checksum) != entry["fnv1a64"].get<std::string>())
      return CLEAVE_ERROR(dir, "/", file, ": damaged: checksum ", hex(checksum),
                          ", the checkpoint wrote ", entry["fnv1a64"].get<std::string>());
  }
  std::map<std::string, SafetensorsIndex> indexes;
  for (const std::string &file : fileNames)
    CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(dir + "/" + file, &indexes[file]));
  // Each tensor the checkpoint holds: its file's index and entry.
  // Each tensor the checkpoint holds: its whole desc and the pieces that
  // make it up, each a file's entry holding elements [begin, begin + n) of
  // the flattened tensor (one piece, unless ranks wrote their ZeRO parts).
  struct Piece {
    const SafetensorsIndex *index;
    const SafetensorsEntry *entry;
    int64_t begin;
  };
  struct Source {
    TensorDesc desc;
    std::vector<Piece> pieces;
  };
  using Found = std::map<std::string, Source>;
  Found weights, states;
  if (version == kVersion) {
    for (auto [file, found] : {std::pair{kWeightsFile, &weights}, {kStateFile, &states}})
      for (const SafetensorsEntry &e : indexes.at(file).entries)
        (*found)[e.name] = Source{e.desc, {Piece{&indexes.at(file), &e, 0}}};
  } else {
    for (auto [kind, found] : {std::pair{"weights", &weights}, {"states", &states}})
      for (auto it = json["index"][kind].begin(); it != json["index"][kind].end(); ++it) {
        const std::string &name = it.key();
        Json &where = it.value(); // not const: a missing key reads as null
        if (!where.is_object() || !where["dtype"].is_string() || !where["shape"].is_array())
          return bad("the index entry of '" + excerpt(name) + "'");
        std::optional<DType> dtype = parseDType(where["dtype"].get<std::string>());
        if (!dtype)
          return bad("the index entry of '" + excerpt(name) + "': dtype");
        Shape shape;
        for (const Json &d : where["shape"]) {
          if (!d.is_number_integer() || d.get<int64_t>() < 0)
            return bad("the index entry of '" + excerpt(name) + "': shape " +
                       jsonExcerpt(where["shape"]));
          shape.push_back(d.get<int64_t>());
        }
        Source source{TensorDesc{*dtype, shape}, {}};
        CLEAVE_RETURN_IF_ERROR(checkTensorSize(source.desc, infoPath + ": index." + kind + "." +
                                                                excerpt(name)));
        // A whole tensor names its file; a sharded one its parts.
        Json parts = where.contains("parts")
                         ? where["parts"]
                         : Json::array({Json{{"file", where.value("file", "")}, {"begin", 0}}});
        if (!parts.is_array())
          return bad("the index entry of '" + name + "': parts");
        for (Json &part : parts) {
          std::string file = part.is_object() && part["file"].is_string()
                                 ? part["file"].get<std::string>()
                                 : std::string();
          auto index = indexes.find(file);
          if (index == indexes.end())
            return bad("the index puts '" + name + "' in '" + file + "', not a listed file");
          const SafetensorsEntry *e = index->second.find(name);
          if (!e || !part["begin"].is_number_integer() || part["begin"].get<int64_t>() < 0)
            return bad("the index puts '" + name + "' in " + file + ", which does not hold it");
          source.pieces.push_back(Piece{&index->second, e, part["begin"].get<int64_t>()});
        }
        // The pieces tile the whole tensor, in order, in its dtype.
        int64_t next = 0;
        for (const Piece &piece : source.pieces) {
          if (piece.begin != next || piece.entry->desc.dtype != source.desc.dtype)
            return bad("the parts of '" + name + "' do not tile it");
          std::optional<int64_t> end = checkedAdd(next, piece.entry->desc.numel());
          if (!end)
            return bad("the parts of '" + name + "' do not tile it");
          next = *end;
        }
        if (next != source.desc.numel())
          return bad("the parts of '" + name + "' do not tile it");
        (*found)[name] = std::move(source);
      }
  }

  const ProgramSpec &program = executor.program();
  std::map<std::string, TensorDesc> wantWeights, wantStates;
  for (const SafetensorsEntry *entry : modelWeightsOf(plan, program))
    wantWeights[entry->name] = entry->desc;
  std::map<std::string, const BufferSpec *> stateBuffers;
  for (const BufferSpec *buffer : statesOf(program)) {
    wantStates[*buffer->state] = wholeDesc(*buffer);
    stateBuffers[*buffer->state] = buffer;
  }
  // What else may be there: the plan's other programs' tensors (another
  // stage's, another tp index's part), and this program's constants (which
  // checkpoints of earlier versions kept); anything more is of another
  // model. Parts count by the tensor they are of: a checkpoint of another
  // mesh holds other parts.
  std::set<std::string> known;
  for (const SafetensorsEntry &entry : program.weights.entries)
    known.insert(partOfName(entry.name).parameter);
  for (const auto &[_, other] : plan.programs) {
    if (!other.loaded)
      continue;
    for (const SafetensorsEntry *entry : modelWeightsOf(plan, other))
      known.insert(partOfName(entry->name).parameter);
    for (const BufferSpec *buffer : statesOf(other))
      known.insert(partOfName(*buffer->state).parameter);
  }
  const std::string weightsWhere = version == kVersion ? dir + "/" + kWeightsFile : dir;
  const std::string statesWhere = version == kVersion ? dir + "/" + kStateFile : dir;
  for (auto [found, what, where] : {std::tuple{&weights, "weight", &weightsWhere},
                                    {&states, "state", &statesWhere}})
    for (const auto &[name, at] : *found)
      if (!known.count(partOfName(name).parameter))
        return CLEAVE_ERROR(at.pieces.front().index->path, ": ", what, " '", name,
                            "' is not in the plan (the checkpoint is not of this plan)");

  // A tensor's bytes from its pieces, in its dtype.
  auto assemble = [](const Source &at, std::vector<char> *bytes) -> Status {
    bytes->assign(at.desc.bytes(), 0);
    const size_t element = dtypeBytes(at.desc.dtype);
    for (const Piece &piece : at.pieces)
      CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(
          *piece.index, *piece.entry, bytes->data() + static_cast<size_t>(piece.begin) * element));
    return {};
  };
  // What the program holds as `name`, of `want`'s dtype and shape: the
  // tensor as stored, or, when the checkpoint was written on another mesh,
  // assembled from the tp parts it holds and cut to the part this program
  // holds.
  // The tp parts each checkpoint tensor is stored as, by tensor (parsed once).
  using PartsOf = std::map<std::string, std::vector<std::pair<WeightShard, const Source *>>>;
  auto partsOf = [](const Found &found) {
    PartsOf parts;
    for (const auto &[stored, at] : found)
      if (WeightShard part = partOfName(stored); part.split)
        parts[part.parameter].emplace_back(part, &at);
    return parts;
  };
  auto resolve = [&](const Found &found, const PartsOf &stored, const std::string &name,
                     const TensorDesc &want, const char *what, const std::string &where,
                     std::vector<char> *bytes) -> Status {
    auto mismatch = [&](const std::string &file, const TensorDesc &have, const TensorDesc &desc) {
      return CLEAVE_ERROR(file, ": ", what, " '", name, "' is ", describe(have.shape, have.dtype),
                          ", the plan's is ", describe(desc.shape, desc.dtype));
    };
    if (auto it = found.find(name); it != found.end()) {
      if (it->second.desc != want)
        return mismatch(it->second.pieces.front().index->path, it->second.desc, want);
      return assemble(it->second, bytes);
    }
    const WeightShard mine = partOfName(name);
    TensorDesc whole = want;
    if (mine.split)
      whole.shape[mine.dim] *= mine.parts;
    std::vector<char> wholeBytes;
    if (auto it = found.find(mine.parameter); it != found.end()) {
      if (it->second.desc != whole)
        return mismatch(it->second.pieces.front().index->path, it->second.desc, whole);
      CLEAVE_RETURN_IF_ERROR(assemble(it->second, &wholeBytes));
    } else {
      // Every part of one split of the tensor.
      std::map<std::tuple<int64_t, int64_t, int64_t>, std::map<int64_t, const Source *>> splits;
      if (auto it = stored.find(mine.parameter); it != stored.end())
        for (const auto &[part, at] : it->second)
          splits[{part.dim, part.blocks, part.parts}][part.part] = at;
      const std::map<int64_t, const Source *> *complete = nullptr;
      WeightShard layout;
      for (const auto &[key, parts] : splits)
        if (static_cast<int64_t>(parts.size()) == std::get<2>(key)) {
          complete = &parts;
          std::tie(layout.dim, layout.blocks, layout.parts) = key;
          layout.split = true;
          break;
        }
      if (!complete)
        return CLEAVE_ERROR(where, ": missing ", what, " '", name,
                            splits.empty() ? "' (the checkpoint is not of this plan)"
                                           : "' (the checkpoint holds only some of its parts)");
      if (!canSplit(whole.shape, layout))
        return CLEAVE_ERROR(where, ": ", what, " '", mine.parameter,
                            "' is saved split in dim ", layout.dim, " into ", layout.parts,
                            " parts, which the plan's ", describe(whole.shape, whole.dtype),
                            " cannot be");
      wholeBytes.assign(whole.bytes(), 0);
      const size_t element = dtypeBytes(whole.dtype);
      for (const auto &[index, at] : *complete) {
        layout.part = index;
        TensorDesc expected{whole.dtype, partShape(whole.shape, layout)};
        if (at->desc != expected)
          return mismatch(at->pieces.front().index->path, at->desc, expected);
        std::vector<char> part;
        CLEAVE_RETURN_IF_ERROR(assemble(*at, &part));
        placePart(part.data(), whole.shape, element, layout, wholeBytes.data());
      }
    }
    if (!mine.split) {
      bytes->swap(wholeBytes);
      return {};
    }
    *bytes = copyPart(wholeBytes.data(), whole.shape, dtypeBytes(whole.dtype), mine);
    return {};
  };

  // Read everything, then write into the executor.
  // Only what this program holds: a constant an earlier checkpoint kept
  // (the plan's own stands) and other stages' tensors are not read.
  std::vector<std::pair<std::string, std::vector<char>>> weightData, stateData;
  for (auto [found, want, out, what, where] :
       {std::tuple{&weights, &wantWeights, &weightData, "weight", &weightsWhere},
        {&states, &wantStates, &stateData, "state", &statesWhere}}) {
    const PartsOf stored = partsOf(*found);
    for (const auto &[name, desc] : *want) {
      std::vector<char> bytes;
      CLEAVE_RETURN_IF_ERROR(resolve(*found, stored, name, desc, what, *where, &bytes));
      out->emplace_back(name, std::move(bytes));
    }
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
  for (auto &[name, bytes] : weightData) {
    if (program.weightShard(name))
      CLEAVE_RETURN_IF_ERROR(
          partOf("weight '" + name + "'", program.weightSlots.at(name).bytes, bytes));
    CLEAVE_RETURN_IF_ERROR(executor.writeWeight(name, bytes.data(), bytes.size()));
  }
  for (auto &[name, bytes] : stateData) {
    const BufferSpec &buffer = *stateBuffers.at(name);
    if (buffer.shardOf)
      CLEAVE_RETURN_IF_ERROR(partOf("state '" + name + "'", buffer.desc.bytes(), bytes));
    CLEAVE_RETURN_IF_ERROR(executor.writeState(name, bytes.data(), bytes.size()));
  }
  *info = loaded;
  if (resolved)
    *resolved = dir;
  return {};
}
} // namespace

} // namespace cleave::runtime
