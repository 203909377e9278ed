#include "runtime/train/Trainer.h"

#include "runtime/TensorParts.h"

#include "runtime/AtomicFile.h"
#include "runtime/JsonFile.h"
#include "runtime/BFloat16.h"
#include "runtime/Executor.h"
#include "runtime/Kernel.h"
#include "runtime/Safetensors.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/TrainingData.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

namespace cleave::runtime {
namespace {

using Json = nlohmann::json;

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A log written beside its final path and renamed there on success.
class StepLog {
public:
  Status open(const std::string &path) {
    if (path.empty())
      return {};
    path_ = path;
    temp_ = path + ".tmp-" + std::to_string(::getpid());
    out_.open(temp_, std::ios::trunc);
    if (!out_)
      return CLEAVE_ERROR(path, ": cannot write the log: ", std::strerror(errno));
    return {};
  }
  void write(const StepRecord &r) {
    if (!out_.is_open())
      return;
    Json line{{"step", r.step}, {"loss", r.loss}, {"seconds", r.seconds},
              {"samples_per_second", r.samplesPerSecond}};
    out_ << line.dump() << "\n";
  }
  Status commit() {
    if (!out_.is_open())
      return {};
    out_.close();
    if (!out_ || std::rename(temp_.c_str(), path_.c_str()) != 0)
      return CLEAVE_ERROR(path_, ": cannot write the log: ", std::strerror(errno));
    temp_.clear();
    return {};
  }
  ~StepLog() {
    if (!temp_.empty())
      std::remove(temp_.c_str());
  }

private:
  std::string path_, temp_;
  std::ofstream out_;
};

const Binding *findOutput(const ProgramSpec &program, const std::string &name) {
  for (const Binding &b : program.outputs)
    if (b.name == name)
      return &b;
  return nullptr;
}

/// "samples 8..15 of DATA" (rows of the batch in order), or the list of
/// indices under --shuffle: where a bad sample that fails a step lies.
std::string describeBatch(const TrainingData &data, int64_t step,
                          std::optional<uint64_t> shuffleSeed) {
  std::vector<int64_t> indices = data.batchIndices(step, shuffleSeed);
  bool contiguous = true;
  for (size_t j = 1; j < indices.size(); ++j)
    contiguous &= indices[j] == indices[j - 1] + 1;
  std::string text = "rows 0.." + std::to_string(indices.size() - 1) + " are samples ";
  if (contiguous && !indices.empty()) {
    text += std::to_string(indices.front()) + ".." + std::to_string(indices.back());
  } else {
    for (size_t j = 0; j < indices.size(); ++j)
      text += (j ? ", " : "") + std::to_string(indices[j]);
  }
  return text + " of " + data.path();
}

} // namespace

namespace {
/// The state_dict entries `keep` selects, read off the executor (or the
/// plan's file), floating tensors in f32.
Status stateDictTensors(const Plan &plan, const Executor &executor, const CheckpointShards &shards,
                        const std::function<bool(const StateDictEntry &)> &keep,
                        std::deque<std::vector<char>> &data,
                        std::vector<SafetensorsTensor> &tensors) {
  const ProgramSpec &program = executor.program();
  std::map<std::string, SafetensorsIndex> extras;
  for (const StateDictEntry &entry : plan.training->stateDict) {
    if (!keep(entry))
      continue;
    TensorDesc desc;
    std::vector<char> bytes;
    std::string name = entry.name;
    if (!entry.tensor.empty()) {
      const SafetensorsEntry *weight = program.weightHolding(entry.tensor);
      if (!weight)
        return CLEAVE_ERROR(program.file, ": holds no weight '", entry.tensor,
                            "' for state_dict entry '", entry.name, "'");
      desc = weight->desc;
      CLEAVE_RETURN_IF_ERROR(readWholeWeight(executor, shards, weight->name, &bytes));
      // A tp rank's part keeps its part's name: the parts are put together.
      name += weight->name.substr(entry.tensor.size());
    } else {
      auto it = extras.find(entry.file);
      if (it == extras.end()) {
        SafetensorsIndex index;
        CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(plan.dir + "/" + entry.file, &index));
        it = extras.emplace(entry.file, std::move(index)).first;
      }
      const SafetensorsEntry *extra = it->second.find(entry.name);
      desc = extra->desc;
      bytes.resize(desc.bytes());
      CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(it->second, *extra, bytes.data()));
    }
    // Floating tensors go out in f32, whatever the plan computes in.
    if (desc.dtype == DType::BF16) {
      std::vector<char> wide(desc.numel() * sizeof(float));
      bf16ToFloat(reinterpret_cast<const uint16_t *>(bytes.data()),
                  reinterpret_cast<float *>(wide.data()), desc.numel());
      bytes.swap(wide);
      desc.dtype = DType::F32;
    }
    data.push_back(std::move(bytes));
    tensors.push_back({name, desc, data.back().data()});
  }
  return {};
}
} // namespace

Status saveStateDict(const Plan &plan, const Executor &executor, const std::string &path,
                     const CheckpointShards &shards, bool write) {
  std::deque<std::vector<char>> data;
  std::vector<SafetensorsTensor> tensors;
  CLEAVE_RETURN_IF_ERROR(stateDictTensors(
      plan, executor, shards, [](const StateDictEntry &) { return true; }, data, tensors));
  if (!write)
    return {};
  return writeSafetensors(path, tensors, {{"format", "pt"}});
}

Status saveStageStateDict(const Plan &plan, const Executor &executor, const std::string &path,
                          const CheckpointShards &shards, const CheckpointGroup &group) {
  const ProgramSpec &program = executor.program();
  auto partPath = [&](int64_t stage, int64_t tp) {
    return path + ".stage" + std::to_string(stage) + ".tp" + std::to_string(tp) + ".tmp";
  };
  // Each stage's tensors, the whole ones from tp index 0, every tp index
  // its parts of split ones.
  auto keep = [&](const StateDictEntry &entry) {
    if (entry.tensor.empty())
      return program.stage == 0 && program.tp == 0;
    const SafetensorsEntry *weight = program.weightHolding(entry.tensor);
    if (!weight || !firstHolder(plan, program, weight->name, false))
      return false;
    return program.tp == 0 || weight->name != entry.tensor;
  };
  // ZeRO parts are gathered by every rank of the dp group.
  std::deque<std::vector<char>> data;
  std::vector<SafetensorsTensor> tensors;
  Status mine = stateDictTensors(plan, executor, shards, keep, data, tensors);
  if (mine.ok() && group.writesStage)
    mine = writeSafetensors(partPath(program.stage, program.tp), tensors, {{"format", "pt"}});
  CLEAVE_RETURN_IF_ERROR(group.agree(mine));
  Status merged;
  if (group.rank == 0) {
    merged = [&]() -> Status {
      std::vector<SafetensorsIndex> parts(plan.pp * plan.tp);
      for (int64_t s = 0; s < plan.pp; ++s)
        for (int64_t t = 0; t < plan.tp; ++t)
          CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(partPath(s, t), &parts[s * plan.tp + t]));
      std::deque<std::vector<char>> all;
      std::vector<SafetensorsTensor> ordered;
      for (const StateDictEntry &entry : plan.training->stateDict) {
        const SafetensorsEntry *found = nullptr;
        const SafetensorsIndex *in = nullptr;
        for (const SafetensorsIndex &part : parts)
          if ((found = part.find(entry.name))) {
            in = &part;
            break;
          }
        if (found) {
          all.emplace_back(found->desc.bytes());
          CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(*in, *found, all.back().data()));
          ordered.push_back({entry.name, found->desc, all.back().data()});
          continue;
        }
        // Split over the tp group: its parts, put together.
        TensorDesc whole;
        std::vector<std::pair<WeightShard, std::vector<char>>> pieces;
        for (const SafetensorsIndex &part : parts)
          for (const SafetensorsEntry &e : part.entries) {
            WeightShard shard;
            if (!isPartOf(e.name, entry.name, &shard))
              continue;
            whole = e.desc;
            whole.shape[shard.dim] *= shard.parts;
            std::vector<char> bytes(e.desc.bytes());
            CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(part, e, bytes.data()));
            pieces.emplace_back(shard, std::move(bytes));
          }
        if (pieces.empty() || static_cast<int64_t>(pieces.size()) != pieces.front().first.parts)
          return CLEAVE_ERROR(path, ": no stage holds state_dict entry '", entry.name, "'");
        std::vector<char> &bytes = all.emplace_back(whole.bytes());
        for (const auto &[shard, piece] : pieces)
          placePart(piece.data(), whole.shape, dtypeBytes(whole.dtype), shard, bytes.data());
        ordered.push_back({entry.name, whole, bytes.data()});
      }
      return writeSafetensors(path, ordered, {{"format", "pt"}});
    }();
    for (int64_t s = 0; s < plan.pp; ++s)
      for (int64_t t = 0; t < plan.tp; ++t)
        std::remove(partPath(s, t).c_str());
  }
  return group.agree(merged);
}

Status train(const Plan &plan, Backend &backend, const TrainOptions &options,
             TrainReport *report, const std::function<void(const StepRecord &)> &onStep) {
  auto agree = [&](const Status &mine) { return options.agree ? options.agree(mine) : mine; };
  if (!plan.training)
    return agree(CLEAVE_ERROR(plan.dir, ": not a training plan (compile it with --mode train)"));
  if (!plan.hasWeights)
    return agree(planWithoutWeights(plan.dir, plan.modelSource));
  const TrainingSpec &training = *plan.training;
  auto loadStart = std::chrono::steady_clock::now();

  // Everything that can be checked is checked before the first step, and
  // on every rank before any steps.
  TrainingData data;
  const ProgramSpec *mine = plan.programForRank(options.rank);
  const ProgramSpec &program = mine ? *mine : plan.programs.begin()->second;
  // A pipeline or a tp group: each rank runs its (stage, tp index)'s
  // program, its stage's slots, each a phase of the program.
  const bool pipelined = plan.partitionedTraining();
  std::unique_ptr<Executor> executor;
  int64_t done = 0;
  StepLog log;
  Status setup = [&]() -> Status {
    CLEAVE_RETURN_IF_ERROR(
        TrainingData::load(options.dataPath, plan, &data).prepend("training data"));
    data.takeShare(options.dataShare, options.dataShares);
    const Binding *loss = findOutput(program, "loss");
    if ((!pipelined || loss) &&
        (!loss || program.buffers[loss->buffer].desc.dtype != DType::F32 ||
         program.buffers[loss->buffer].desc.numel() != 1))
      return CLEAVE_ERROR(program.file, ": a training program outputs 'loss', one f32 value");
    if (pipelined && !options.shareLoss)
      return CLEAVE_ERROR(plan.dir, ": a partitioned plan (", plan.pp, " stages, ", plan.tp,
                          " tensor-parallel ranks) runs one program per rank: run it with "
                          "'cleave train --local ",
                          plan.devices.size(), "' or 'mpirun -np ", plan.devices.size(),
                          " cleave train'");
    if (pipelined && !options.group.agree)
      return CLEAVE_ERROR(plan.dir, ": a pipelined plan's checkpoints need its ranks together");
    CLEAVE_RETURN_IF_ERROR(Executor::create(program, backend, &executor, options.shards.index));
    report->allocatedBytes = executor->allocatedBytes();
    report->predictedBytes = program.predictedBytes();
    report->workspaceBytes = backend.workspaceBytes();
    report->spilled = std::any_of(plan.programs.begin(), plan.programs.end(),
                                  [](const auto &p) { return p.second.hostPool; });
    report->hostBytes = executor->hostBytes();

    if (!options.resumePath.empty()) {
      CheckpointInfo info;
      CLEAVE_RETURN_IF_ERROR(
          loadCheckpoint(options.resumePath, plan, *executor, &info, &report->resumedFrom,
                         options.shards));
      if (info.dataSamples != data.samples() || info.dataBytes != data.fileBytes())
        return CLEAVE_ERROR(report->resumedFrom, ": was trained on data of ", info.dataSamples,
                            " samples (", info.dataBytes, " bytes), ", options.dataPath, " has ",
                            data.samples(), " (", data.fileBytes(),
                            " bytes): resuming needs the same data");
      if (info.shuffleSeed != options.shuffleSeed)
        return CLEAVE_ERROR(report->resumedFrom, ": was trained ",
                            info.shuffleSeed
                                ? "with --shuffle " + std::to_string(*info.shuffleSeed)
                                : std::string("without --shuffle"),
                            "; resume with the same");
      done = info.step;
    }
    if (done > options.steps)
      return CLEAVE_ERROR(report->resumedFrom, ": already at step ", done, ", past --steps ",
                          options.steps,
                          " (--steps counts all steps, the checkpoint's included)");
    if (options.writesFiles)
      CLEAVE_RETURN_IF_ERROR(log.open(options.logPath));
    return {};
  }();
  CLEAVE_RETURN_IF_ERROR(agree(setup));
  // ZeRO parts of states or weights: checkpoints and saved weights gather
  // them on every rank of the dp group.
  const bool sharded = std::any_of(program.buffers.begin(), program.buffers.end(),
                                   [](const BufferSpec &b) { return b.shardOf.has_value(); });
  // Each instruction's time splits a step into compute and communication.
  // On a backend that queues kernels (a GPU), timing one means waiting for
  // it, which would idle the device between launches: there a phase counts
  // whole, as compute, and only the traced step waits per instruction.
  const bool timeInstructions = backend.sharesHostMemory();
  const int64_t microbatches = std::max<int64_t>(1, plan.microbatches);
  const bool holdsSampleOffset =
      std::any_of(program.buffers.begin(), program.buffers.end(),
                  [](const BufferSpec &b) { return b.state && *b.state == "sample_offset"; });
  report->loadSeconds = since(loadStart);
  report->firstStep = done + 1;
  report->stepping = true;
  const CopyStats copiesBefore = executor->copyStats();

  // Sharded states are gathered by every rank of the dp group together;
  // the rank that writes files writes the checkpoint.
  auto writeCheckpointAt = [&](int64_t step) -> Status {
    if (!(options.writesFiles || sharded || pipelined) || options.checkpointDir.empty())
      return {};
    CheckpointInfo info;
    info.step = step;
    info.seed = training.seed;
    info.shuffleSeed = options.shuffleSeed;
    info.dataSamples = data.samples();
    info.dataBytes = data.fileBytes();
    std::string written;
    const std::string what = "checkpoint of step " + std::to_string(step);
    if (pipelined || (sharded && options.group.agree)) {
      // Every stage writes its own tensors and every rank its ZeRO parts
      // (version 2); rank 0 the index.
      LocalCheckpoint local;
      CLEAVE_RETURN_IF_ERROR(
          collectLocalCheckpoint(plan, *executor, options.shards.index, &local).prepend(what));
      CLEAVE_RETURN_IF_ERROR(writeShardedCheckpoint(options.checkpointDir, plan, program, local,
                                                    info, options.group, &written));
      if (options.writesFiles)
        report->checkpoints.push_back(written);
    } else if (options.writesFiles) {
      CheckpointTensors tensors;
      CLEAVE_RETURN_IF_ERROR(
          collectCheckpoint(plan, *executor, options.shards, &tensors).prepend(what));
      CLEAVE_RETURN_IF_ERROR(
          writeCheckpoint(options.checkpointDir, plan, program, tensors, info, &written));
      report->checkpoints.push_back(written);
    }
    return {};
  };

  for (int64_t step = done + 1; step <= options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    StepRecord record;
    const bool tracing = options.trace && step == options.steps;
    const bool profiling = timeInstructions || tracing;
    executor->setProfiling(profiling);
    // The schedule the plan loader built: forward and backward on each
    // microbatch in turn (the gradients accumulate in the program's state),
    // then the optimizer once. The step's loss is the microbatches' mean.
    double loss = 0;
    const std::vector<ScheduleSlot> &slots = plan.stageSlots[program.stage];
    for (size_t n = 0; n < slots.size(); ++n) {
      const ScheduleSlot &slot = slots[n];
      const bool update = slot.phase == "optimizer";
      auto sameMicrobatch = [&](size_t other) {
        return other < slots.size() && slots[other].phase != "optimizer" &&
               slots[other].microbatch == slot.microbatch;
      };
      const int64_t index = pipelined
                                ? program.phaseIndex(slot.phase, slot.chunk, slot.microbatch)
                                : program.phaseIndex(slot.phase);
      if (index < 0)
        return CLEAVE_ERROR(program.file, ": no phase runs ", slotName(slot));
      // Dropouts drawing one device's masks read which samples this
      // microbatch holds.
      if (holdsSampleOffset && !update) {
        const int64_t first = data.sampleOffset(slot.microbatch, microbatches);
        CLEAVE_RETURN_IF_ERROR(executor->writeState("sample_offset", &first, sizeof(first)));
      }
      if (pipelined ? !program.phases[index].inputs.empty()
                    : !update && (n == 0 || !sameMicrobatch(n - 1)))
        CLEAVE_RETURN_IF_ERROR(
            data.setBatch(step - 1, options.shuffleSeed, *executor, slot.microbatch,
                          microbatches,
                          pipelined ? std::optional<size_t>(index) : std::nullopt)
                .prepend("step " + std::to_string(step)));
      double phaseStart = since(start);
      if (Status s = executor->runPhase(static_cast<size_t>(index)); !s.ok())
        return s.prepend("step " + std::to_string(step) + " (" +
                         describeBatch(data, step - 1, options.shuffleSeed) + ")");
      static const std::vector<double> kUntimed;
      const std::vector<double> &seconds = profiling ? executor->lastRunSeconds() : kUntimed;
      const std::vector<InstructionSpec> &instructions = program.phases[index].instructions;
      for (size_t i = 0; i < seconds.size() && i < instructions.size(); ++i)
        (isCommKernel(instructions[i].kernel) ? record.communicationSeconds
                                              : record.computeSeconds) += seconds[i];
      if (!profiling)
        record.computeSeconds += since(start) - phaseStart;
      if (tracing) {
        TraceEvent event;
        event.name = slotName(slot);
        event.phase = slot.phase;
        event.chunk = slot.chunk;
        event.microbatch = slot.microbatch;
        event.start = phaseStart;
        event.seconds = since(start) - phaseStart;
        report->trace.push_back(event);
        double at = phaseStart;
        for (size_t i = 0; i < seconds.size() && i < instructions.size(); ++i) {
          TraceEvent k = event;
          k.kernel = true;
          k.name = instructions[i].kernel;
          k.loc = instructions[i].loc;
          k.start = at;
          k.seconds = seconds[i];
          report->trace.push_back(k);
          at += seconds[i];
        }
      }
      if (pipelined) {
        // The last stage's step outputs the loss (the microbatches' mean)
        // from the phase that computes it.
        const std::vector<Binding> &outs = program.phases[index].outputs;
        if (std::any_of(outs.begin(), outs.end(), [](const Binding &b) { return b.name == "loss"; })) {
          float value = 0;
          CLEAVE_RETURN_IF_ERROR(
              executor->getPhaseOutput(static_cast<size_t>(index), "loss", &value, sizeof(value)));
          loss = value;
        }
      } else if (!update && !sameMicrobatch(n + 1)) {
        float value = 0;
        CLEAVE_RETURN_IF_ERROR(executor->getOutput("loss", &value, sizeof(value)));
        loss += value;
      }
    }
    if (pipelined) {
      CLEAVE_RETURN_IF_ERROR(
          options.shareLoss(&loss).prepend("step " + std::to_string(step)));
    }
    report->copies = executor->copyStats() - copiesBefore;
    record.step = step;
    record.loss = microbatches > 1 && !pipelined ? loss / static_cast<double>(microbatches) : loss;
    record.seconds = since(start);
    record.samplesPerSecond = record.seconds > 0 ? training.batchSize / record.seconds : 0;
    report->steps.push_back(record);
    log.write(record);
    if (onStep)
      onStep(record);
    bool last = step == options.steps;
    if ((options.checkpointEvery > 0 && step % options.checkpointEvery == 0) || last)
      CLEAVE_RETURN_IF_ERROR(writeCheckpointAt(step));
  }
  // Resumed at --steps: no step to take, and the checkpoint asked for is the
  // resumed state in this plan's layout (a checkpoint moved to another mesh).
  if (done == options.steps && !options.resumePath.empty())
    CLEAVE_RETURN_IF_ERROR(writeCheckpointAt(done));
  Status end;
  if (pipelined && !options.saveWeightsPath.empty())
    end = saveStageStateDict(plan, *executor, options.saveWeightsPath, options.shards,
                             options.group);
  else if ((options.writesFiles || sharded) && !options.saveWeightsPath.empty())
    end = saveStateDict(plan, *executor, options.saveWeightsPath, options.shards,
                        options.writesFiles);
  if (end.ok())
    end = log.commit();
  // Every rank has finished its steps: the ranks can agree again.
  report->stepping = false;
  return agree(end);
}

std::string traceEventsJson(const std::vector<TraceEvent> &events) {
  Json list = Json::array();
  for (const TraceEvent &e : events)
    list.push_back(Json{{"name", e.name},
                        {"phase", e.phase},
                        {"loc", e.loc},
                        {"kernel", e.kernel},
                        {"microbatch", e.microbatch},
                        {"chunk", e.chunk},
                        {"start", e.start},
                        {"seconds", e.seconds}});
  return list.dump();
}

Status parseTraceEvents(const std::string &text, std::vector<TraceEvent> *events) {
  Json list;
  CLEAVE_RETURN_IF_ERROR(parseJson(text, "a rank's trace events", &list));
  if (!list.is_array())
    return CLEAVE_ERROR("a rank's trace events are not a JSON array");
  events->clear();
  for (const Json &j : list) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("start") ||
        !j["start"].is_number() || !j.contains("seconds") || !j["seconds"].is_number())
      return CLEAVE_ERROR("a rank's trace event is malformed: ", jsonExcerpt(j, 200));
    TraceEvent e;
    e.name = j["name"].get<std::string>();
    e.phase = j.value("phase", "");
    e.loc = j.value("loc", "");
    e.kernel = j.value("kernel", false);
    e.microbatch = j.value("microbatch", int64_t(0));
    e.chunk = j.value("chunk", int64_t(0));
    e.start = j["start"].get<double>();
    e.seconds = j["seconds"].get<double>();
    events->push_back(std::move(e));
  }
  return {};
}

std::string chromeTrace(const Plan &plan, const std::vector<std::vector<TraceEvent>> &perRank,
                        int64_t step) {
  auto microseconds = [](double seconds) { return std::round(seconds * 1e9) / 1e3; };
  Json events = Json::array();
  for (size_t r = 0; r < perRank.size(); ++r) {
    const DeviceSpec *d = r < plan.devices.size() ? &plan.devices[r] : nullptr;
    std::string name = "rank " + std::to_string(r);
    if (d)
      name += " (stage " + std::to_string(d->stage) + ", tp " + std::to_string(d->tp) +
              ", dp " + std::to_string(d->dp) + ")";
    int64_t pid = static_cast<int64_t>(r);
    events.push_back(Json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0},
                          {"args", Json{{"name", name}}}});
    events.push_back(Json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid},
                          {"tid", 0}, {"args", Json{{"sort_index", pid}}}});
    events.push_back(Json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", 0},
                          {"args", Json{{"name", "schedule"}}}});
    events.push_back(Json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", 1},
                          {"args", Json{{"name", "kernels"}}}});
    for (const TraceEvent &e : perRank[r]) {
      Json args{{"phase", e.phase}, {"chunk", e.chunk}, {"microbatch", e.microbatch}};
      if (e.kernel && !e.loc.empty())
        args["loc"] = e.loc;
      events.push_back(Json{{"ph", "X"},
                            {"name", e.name},
                            {"cat", e.kernel ? (isCommKernel(e.name) ? "communication" : "compute")
                                             : e.phase},
                            {"pid", pid},
                            {"tid", e.kernel ? 1 : 0},
                            {"ts", microseconds(e.start)},
                            {"dur", microseconds(e.seconds)},
                            {"args", args}});
    }
  }
  Json other{{"plan", plan.dir}, {"measured_step", step}};
  std::string out = "{\"displayTimeUnit\": \"ms\", \"otherData\": " + other.dump() +
                    ",\n \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i)
    out += "  " + events[i].dump() + (i + 1 < events.size() ? ",\n" : "\n");
  return out + "]}\n";
}

RankMeasure measureOf(const TrainReport &report) {
  RankMeasure m;
  m.allocatedBytes = report.allocatedBytes;
  m.hostBytes = report.hostBytes;
  m.copies = report.copies;
  // The first step warms caches; the means leave it out when there are more.
  size_t first = report.steps.size() > 1 ? 1 : 0;
  size_t n = report.steps.size() - first;
  for (size_t i = first; i < report.steps.size(); ++i) {
    m.stepSeconds += report.steps[i].seconds / n;
    m.computeSeconds += report.steps[i].computeSeconds / n;
    m.communicationSeconds += report.steps[i].communicationSeconds / n;
  }
  return m;
}

std::string trainReportJson(const Plan &plan, const TrainOptions &options,
                            const TrainReport &report) {
  Json steps = Json::array();
  for (const StepRecord &r : report.steps)
    steps.push_back(Json{{"step", r.step}, {"loss", r.loss}, {"seconds", r.seconds}});
  // Device memory: the plan's regions (arena, device weights, device
  // state) and the backend's workspace, against the planner's budget; the
  // host pool apart.
  Json memory{{"allocated", report.allocatedBytes},
              {"predicted", report.predictedBytes},
              {"backend_workspace", report.workspaceBytes},
              {"device_total", report.allocatedBytes + report.workspaceBytes},
              {"host", report.hostBytes}};
  if (plan.predicted.memoryBudgetBytes)
    memory["budget"] = *plan.predicted.memoryBudgetBytes;
  if (plan.predicted.totalBytes)
    memory["predicted_total"] = *plan.predicted.totalBytes;
  if (plan.predicted.hostBytes)
    memory["predicted_host"] = *plan.predicted.hostBytes;
  Json byCategory = Json::object();
  for (const auto &[name, bytes] : plan.predicted.byCategory)
    byCategory[name] = bytes;
  memory["predicted_by_category"] = byCategory;
  RankMeasure mine = measureOf(report);
  // A spilled plan's host pool and copies, summed over the steps run.
  auto spill = [](const RankMeasure &m) {
    return Json{{"host_bytes", m.hostBytes},
                {"device_bytes", m.allocatedBytes},
                {"prefetch_bytes", m.copies.prefetchBytes},
                {"spill_bytes", m.copies.spillBytes},
                {"copy_seconds", m.copies.copySeconds},
                {"stall_seconds", m.copies.stallSeconds},
                {"overlap", m.copies.overlap()}};
  };
  Json ranks = Json::array();
  std::vector<size_t> perRank;
  for (size_t r = 0; r < report.ranks.size(); ++r) {
    const RankMeasure &m = report.ranks[r];
    ranks.push_back(Json{{"rank", r},
                         {"step_seconds", m.stepSeconds},
                         {"compute_seconds", m.computeSeconds},
                         {"communication_seconds", m.communicationSeconds},
                         {"allocated_bytes", m.allocatedBytes}});
    if (report.spilled)
      ranks.back()["spill"] = spill(m);
    perRank.push_back(m.allocatedBytes);
  }
  if (!perRank.empty())
    memory["allocated_per_rank"] = perRank;
  auto predicted = [](const std::optional<double> &v) { return v ? Json(*v) : Json(nullptr); };
  Json json{{"plan", plan.dir},
            {"data", options.dataPath},
            {"batch_size", plan.training ? plan.training->batchSize : 0},
            {"first_step", report.firstStep},
            {"steps", steps},
            {"mean_step_seconds", mine.stepSeconds},
            {"mean_compute_seconds", mine.computeSeconds},
            {"mean_communication_seconds", mine.communicationSeconds},
            {"predicted", Json{{"step_seconds", predicted(plan.predicted.stepSeconds)},
                               {"compute_seconds", predicted(plan.predicted.computeSeconds)},
                               {"communication_seconds",
                                predicted(plan.predicted.communicationSeconds)},
                               {"bubble_seconds", predicted(plan.predicted.bubbleSeconds)}}},
            {"ranks", ranks},
            {"load_seconds", report.loadSeconds},
            {"memory_bytes", memory},
            {"checkpoints", report.checkpoints},
            {"resumed_from", report.resumedFrom.empty() ? Json(nullptr)
                                                        : Json(report.resumedFrom)}};
  if (report.spilled)
    json["spill"] = spill(mine);
  return json.dump(1) + "\n";
}

} // namespace cleave::runtime
