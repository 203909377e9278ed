//===- Inspect.cpp - What a plan spills and what a job plan runs ----------===//

#include "runtime/Inspect.h"

#include "runtime/DType.h"
#include "runtime/JsonFile.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace cleave::runtime {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

bool numeric(const std::string &part) {
  return !part.empty() && std::all_of(part.begin(), part.end(),
                                      [](char c) { return c >= '0' && c <= '9'; });
}


Json optionalNumber(const std::optional<double> &v) { return v ? Json(*v) : Json(); }

std::string stepsText(const JobSlice &s) {
  return "[" + std::to_string(s.firstStep) + ".." + std::to_string(s.lastStep) + "]";
}

} // namespace

//===--------------------------------------------------------------------===//
// Spilling.
//===--------------------------------------------------------------------===//

std::string layerOfParameter(const std::string &name) {
  std::string path = name.substr(0, name.find('['));
  size_t dot = path.rfind('.');
  if (dot == std::string::npos)
    return "(root)";
  path = path.substr(0, dot); // the module
  std::string layer;
  std::stringstream parts(path);
  for (std::string part; std::getline(parts, part, '.');) {
    layer += (layer.empty() ? "" : ".") + part;
    if (numeric(part))
      break;
  }
  return layer;
}

ProgramSpill describeSpill(const ProgramSpec &program) {
  ProgramSpill s;
  s.program = program.name;
  s.arenaBytes = program.arenaBytes;
  s.weightBytes = program.weightBytes;
  s.stateBytes = program.stateBytes;
  s.hostWeightBytes = program.hostWeightRegionBytes;
  s.hostStateBytes = program.hostStateBytes;

  // The host weights, once each (several buffers may view one).
  std::map<std::string, size_t> parameterAt;
  for (const BufferSpec &b : program.buffers) {
    if (!b.weight || !b.onHost() || parameterAt.count(*b.weight))
      continue;
    SpilledParameter p;
    p.name = *b.weight;
    p.layer = layerOfParameter(p.name);
    p.desc = b.desc;
    auto slot = program.weightSlots.find(p.name);
    p.bytes = slot != program.weightSlots.end() ? slot->second.bytes : b.desc.bytes();
    parameterAt[p.name] = s.parameters.size();
    s.parameters.push_back(std::move(p));
  }
  // The host states, each to the spilled parameter it is named after
  // ("<what>.<parameter>", the longest such parameter).
  std::set<std::string> states;
  for (const BufferSpec &b : program.buffers) {
    if (!b.state || !b.onHost() || !states.insert(*b.state).second)
      continue;
    const std::string &name = *b.state;
    std::optional<size_t> owner;
    for (size_t dot = name.find('.'); dot != std::string::npos && !owner;
         dot = name.find('.', dot + 1))
      if (auto it = parameterAt.find(name.substr(dot + 1)); it != parameterAt.end())
        owner = it->second;
    if (owner)
      s.parameters[*owner].hostStateBytes += b.desc.bytes();
    else
      s.otherHostStateBytes += b.desc.bytes();
  }
  std::map<std::string, size_t> layerAt;
  for (const SpilledParameter &p : s.parameters) {
    auto [it, fresh] = layerAt.emplace(p.layer, s.layers.size());
    if (fresh)
      s.layers.push_back({p.layer, {}, 0, 0});
    SpilledLayer &layer = s.layers[it->second];
    layer.parameters.push_back(p.name);
    layer.parameterBytes += p.bytes;
    layer.hostStateBytes += p.hostStateBytes;
  }

  for (size_t i = 0; i < program.phases.size(); ++i) {
    const Phase &phase = program.phases[i];
    PhaseCopies c;
    c.phase = i;
    c.name = phase.name;
    c.chunk = phase.chunk;
    c.microbatch = phase.microbatch;
    for (const InstructionSpec &inst : phase.instructions) {
      auto sourceBytes = [&]() -> size_t {
        if (inst.inputs.empty() || !inst.inputs[0] || *inst.inputs[0] < 0 ||
            static_cast<size_t>(*inst.inputs[0]) >= program.buffers.size())
          return 0;
        return program.buffers[*inst.inputs[0]].desc.bytes();
      };
      if (inst.kernel == "prefetch") {
        ++c.prefetches;
        c.prefetchBytes += sourceBytes();
      } else if (inst.kernel == "spill") {
        ++c.spills;
        c.spillBytes += sourceBytes();
      }
    }
    s.prefetches += c.prefetches;
    s.spills += c.spills;
    s.phases.push_back(c);
  }
  return s;
}

Status readHostByCategory(const std::string &planDir,
                          std::vector<std::pair<std::string, int64_t>> *out) {
  out->clear();
  const std::string file = planDir + "/manifest.json";
  std::string text;
  CLEAVE_RETURN_IF_ERROR(readTextFile(file, &text));
  Json root;
  CLEAVE_RETURN_IF_ERROR(parseJson(text, file, &root));
  const Json *node = &root;
  std::string field;
  for (const char *key : {"predicted", "memory_bytes", "host_by_category"}) {
    if (!node->is_object() || !node->contains(key))
      return {};
    node = &(*node)[key];
    field += (field.empty() ? "" : ".") + std::string(key);
  }
  if (!node->is_object())
    return CLEAVE_ERROR(file, ": ", field, ": must be an object of byte counts, not ",
                        jsonExcerpt(*node));
  for (auto it = node->begin(); it != node->end(); ++it) {
    if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0))
      return CLEAVE_ERROR(file, ": ", field, ".", it.key(),
                          ": must be a non-negative integer, not ", jsonExcerpt(*it));
    out->emplace_back(it.key(), it->get<int64_t>());
  }
  return {};
}

Json spillJson(const ProgramSpill &s) {
  Json parameters = Json::array();
  for (const SpilledParameter &p : s.parameters)
    parameters.push_back({{"name", p.name},
                          {"layer", p.layer},
                          {"shape", p.desc.shape},
                          {"dtype", dtypeName(p.desc.dtype)},
                          {"bytes", p.bytes},
                          {"host_state_bytes", p.hostStateBytes}});
  Json layers = Json::array();
  for (const SpilledLayer &l : s.layers)
    layers.push_back({{"layer", l.layer},
                      {"parameters", l.parameters},
                      {"parameter_bytes", l.parameterBytes},
                      {"host_state_bytes", l.hostStateBytes}});
  Json phases = Json::array();
  for (const PhaseCopies &c : s.phases)
    phases.push_back({{"phase", c.name},
                      {"index", c.phase},
                      {"chunk", c.chunk},
                      {"microbatch", c.microbatch ? Json(*c.microbatch) : Json()},
                      {"prefetches", c.prefetches},
                      {"spills", c.spills},
                      {"prefetch_bytes", c.prefetchBytes},
                      {"spill_bytes", c.spillBytes}});
  return {{"program", s.program},
          {"device_bytes", s.deviceBytes()},
          {"arena_bytes", s.arenaBytes},
          {"weight_bytes", s.weightBytes},
          {"state_bytes", s.stateBytes},
          {"host_bytes", s.hostBytes()},
          {"host_weight_bytes", s.hostWeightBytes},
          {"host_state_bytes", s.hostStateBytes},
          {"spilled_parameters", parameters},
          {"spilled_layers", layers},
          {"other_host_state_bytes", s.otherHostStateBytes},
          {"phases", phases},
          {"prefetches", s.prefetches},
          {"spills", s.spills}};
}

//===--------------------------------------------------------------------===//
// Job plan directories.
//===--------------------------------------------------------------------===//

bool isJobPlanDir(const std::string &dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "job.json", ec);
}

Status inspectJob(const std::string &dir, JobFacts *out) {
  return catchExceptions(dir, [&]() -> Status {
    JobFacts facts;
    CLEAVE_RETURN_IF_ERROR(loadJobPlan(dir, &facts.job));
    const JobPlan &job = facts.job;

    // The prediction: the runtime copies it as it is; inspect reads two of
    // its numbers and so checks them.
    Json predicted;
    CLEAVE_RETURN_IF_ERROR(parseJson(job.predictedJson, job.file, &predicted));
    if (predicted.is_object())
      for (auto [key, value] : {std::pair{"makespan_seconds", &facts.makespanSeconds},
                                {"sequential_seconds", &facts.sequentialSeconds}}) {
        auto it = predicted.find(key);
        if (it == predicted.end() || it->is_null())
          continue;
        if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>()))
          return CLEAVE_ERROR(job.file, ": predicted.", key,
                              ": must be a non-negative number or null, not ",
                              jsonExcerpt(*it));
        *value = it->get<double>();
      }

    // Each model's plan: a one-device training plan, as `cleave train --job`
    // requires.
    for (size_t m = 0; m < job.models.size(); ++m) {
      const JobModel &model = job.models[m];
      const std::string where = job.file + ": models[" + std::to_string(m) + "]: model '" +
                                model.name + "': plan " + model.plan;
      int64_t devices = 0;
      CLEAVE_RETURN_IF_ERROR(readPlanDeviceCount(model.plan, &devices).prepend(where));
      if (devices != 1)
        return CLEAVE_ERROR(where, ": a plan for ", devices,
                            " devices; a job's models are one-device plans");
      Plan plan;
      CLEAVE_RETURN_IF_ERROR(loadPlan(model.plan, &plan).prepend(where));
      if (!plan.training)
        return CLEAVE_ERROR(where, ": not a training plan (schedule '", plan.schedule,
                            "'); a job's models are training plans");
      const ProgramSpec *program = plan.programForRank(0);
      if (!program)
        return CLEAVE_ERROR(where, ": no program for rank 0");
      JobModelFacts mf;
      if (model.predictedStepSeconds) {
        mf.stepSeconds = model.predictedStepSeconds;
        mf.stepSource = "job.json";
      } else if (plan.predicted.stepSeconds) {
        mf.stepSeconds = plan.predicted.stepSeconds;
        mf.stepSource = "manifest";
      }
      mf.budgetBytes = plan.predicted.memoryBudgetBytes;
      mf.memory = describeSpill(*program);
      CLEAVE_RETURN_IF_ERROR(readHostByCategory(model.plan, &mf.hostByCategory).prepend(where));
      facts.models.push_back(std::move(mf));
    }

    // The rounds, end to end.
    facts.devices.resize(static_cast<size_t>(job.devices));
    for (int64_t d = 0; d < job.devices; ++d) {
      facts.devices[d].device = d;
      facts.devices[d].busySeconds = 0.0;
    }
    std::optional<double> clock = 0.0;
    for (const std::vector<JobSlice> &round : job.rounds) {
      JobRoundFacts rf;
      rf.startSeconds = clock;
      rf.seconds = 0.0;
      for (const JobSlice &slice : round) {
        JobModelFacts &mf = facts.models[slice.model];
        JobDeviceFacts &df = facts.devices[slice.device];
        JobSliceFacts sf;
        sf.slice = slice;
        if (mf.stepSeconds)
          sf.seconds = static_cast<double>(slice.lastStep - slice.firstStep + 1) * *mf.stepSeconds;
        sf.startSeconds = clock.value_or(0.0);
        if (sf.seconds && rf.seconds)
          rf.seconds = std::max(*rf.seconds, *sf.seconds);
        else
          rf.seconds.reset();
        if (sf.seconds && df.busySeconds)
          *df.busySeconds += *sf.seconds;
        else
          df.busySeconds.reset();
        ++mf.slices;
        if (std::find(mf.devices.begin(), mf.devices.end(), slice.device) == mf.devices.end())
          mf.devices.push_back(slice.device);
        ++df.slices;
        if (std::find(df.models.begin(), df.models.end(), slice.model) == df.models.end())
          df.models.push_back(slice.model);
        df.peakDeviceBytes = std::max(df.peakDeviceBytes, mf.memory.deviceBytes());
        df.peakHostBytes = std::max(df.peakHostBytes, mf.memory.hostBytes());
        rf.slices.push_back(sf);
      }
      if (clock && rf.seconds)
        *clock += *rf.seconds;
      else
        clock.reset();
      facts.rounds.push_back(std::move(rf));
    }
    facts.roundsSeconds = clock;
    for (JobModelFacts &mf : facts.models)
      std::sort(mf.devices.begin(), mf.devices.end());
    *out = std::move(facts);
    return {};
  });
}

Json jobJson(const JobFacts &facts) {
  const JobPlan &job = facts.job;
  Json j;
  j["job"] = job.dir;
  j["file"] = job.file;
  j["format"] = "cleave-job-plan";
  j["device_count"] = job.devices;
  j["slice_steps"] = job.sliceSteps;
  j["models"] = Json::array();
  for (size_t m = 0; m < job.models.size(); ++m) {
    const JobModel &model = job.models[m];
    const JobModelFacts &mf = facts.models[m];
    Json hostByCategory = Json::object();
    for (const auto &[category, bytes] : mf.hostByCategory)
      hostByCategory[category] = bytes;
    Json spill;
    if (mf.memory.spilled()) {
      spill = spillJson(mf.memory);
      spill["host_by_category"] = hostByCategory;
    }
    j["models"].push_back(
        {{"name", model.name},
         {"plan", model.plan},
         {"data", model.data},
         {"steps", model.steps},
         {"predicted_step_seconds", optionalNumber(mf.stepSeconds)},
         {"step_seconds_source", mf.stepSource.empty() ? Json() : Json(mf.stepSource)},
         {"predicted_seconds",
          mf.stepSeconds ? Json(static_cast<double>(model.steps) * *mf.stepSeconds) : Json()},
         {"devices", mf.devices},
         {"slices", mf.slices},
         {"memory_budget_bytes", mf.budgetBytes ? Json(*mf.budgetBytes) : Json()},
         {"device_bytes", mf.memory.deviceBytes()},
         {"arena_bytes", mf.memory.arenaBytes},
         {"weight_bytes", mf.memory.weightBytes},
         {"state_bytes", mf.memory.stateBytes},
         {"host_bytes", mf.memory.hostBytes()},
         {"spilled", mf.spilled()},
         {"spill", spill}});
  }
  j["rounds"] = Json::array();
  for (size_t r = 0; r < facts.rounds.size(); ++r) {
    const JobRoundFacts &rf = facts.rounds[r];
    Json slices = Json::array();
    for (const JobSliceFacts &sf : rf.slices)
      slices.push_back({{"device", sf.slice.device},
                        {"model", job.models[sf.slice.model].name},
                        {"first_step", sf.slice.firstStep},
                        {"last_step", sf.slice.lastStep},
                        {"steps", sf.slice.lastStep - sf.slice.firstStep + 1},
                        {"seconds", optionalNumber(sf.seconds)}});
    j["rounds"].push_back({{"round", r},
                           {"start_seconds", optionalNumber(rf.startSeconds)},
                           {"seconds", optionalNumber(rf.seconds)},
                           {"slices", slices}});
  }
  j["devices"] = Json::array();
  for (const JobDeviceFacts &df : facts.devices) {
    Json models = Json::array();
    for (size_t m : df.models) {
      const JobModelFacts &mf = facts.models[m];
      std::vector<std::string> layers;
      for (const SpilledLayer &l : mf.memory.layers)
        layers.push_back(l.layer);
      size_t slices = 0;
      for (const JobRoundFacts &rf : facts.rounds)
        for (const JobSliceFacts &sf : rf.slices)
          slices += sf.slice.device == df.device && sf.slice.model == m;
      models.push_back({{"model", job.models[m].name},
                        {"slices", slices},
                        {"device_bytes", mf.memory.deviceBytes()},
                        {"host_bytes", mf.memory.hostBytes()},
                        {"spilled", mf.spilled()},
                        {"spilled_layer_names", layers}});
    }
    std::optional<double> idle;
    if (df.busySeconds && facts.roundsSeconds)
      idle = std::max(0.0, *facts.roundsSeconds - *df.busySeconds);
    j["devices"].push_back({{"device", df.device},
                                {"models", models},
                                {"slices", df.slices},
                                {"busy_seconds", optionalNumber(df.busySeconds)},
                                {"idle_seconds", optionalNumber(idle)},
                                {"peak_device_bytes", df.peakDeviceBytes},
                                {"peak_host_bytes", df.peakHostBytes}});
  }
  j["predicted"] = {{"makespan_seconds", optionalNumber(facts.makespanSeconds)},
                    {"sequential_seconds", optionalNumber(facts.sequentialSeconds)},
                    {"rounds_seconds", optionalNumber(facts.roundsSeconds)}};
  return j;
}

Status jobTrace(const JobFacts &facts, Json *events) {
  const JobPlan &job = facts.job;
  for (size_t m = 0; m < job.models.size(); ++m)
    if (!facts.models[m].stepSeconds)
      return CLEAVE_ERROR(job.file, ": models[", m, "].predicted_step_seconds: model '",
                          job.models[m].name,
                          "' has no predicted step time (null here and none in its plan's "
                          "manifest): --trace needs every slice's predicted time");
  // To the nanosecond: sums of seconds leave noise in the last digits.
  auto microseconds = [](double seconds) { return std::round(seconds * 1e9) / 1e3; };
  Json trace = Json::array();
  for (int64_t d = 0; d < job.devices; ++d) {
    trace.push_back({{"ph", "M"},
                     {"name", "process_name"},
                     {"pid", d},
                     {"tid", 0},
                     {"args", {{"name", "device " + std::to_string(d)}}}});
    trace.push_back({{"ph", "M"},
                     {"name", "process_sort_index"},
                     {"pid", d},
                     {"tid", 0},
                     {"args", {{"sort_index", d}}}});
    trace.push_back({{"ph", "M"},
                     {"name", "thread_name"},
                     {"pid", d},
                     {"tid", 0},
                     {"args", {{"name", "slices"}}}});
  }
  for (size_t r = 0; r < facts.rounds.size(); ++r)
    for (const JobSliceFacts &sf : facts.rounds[r].slices) {
      const JobModel &model = job.models[sf.slice.model];
      trace.push_back({{"ph", "X"},
                       {"name", model.name + " " + stepsText(sf.slice)},
                       {"cat", "slice"},
                       {"pid", sf.slice.device},
                       {"tid", 0},
                       {"ts", microseconds(sf.startSeconds)},
                       {"dur", microseconds(sf.seconds.value_or(0.0))},
                       {"args",
                        {{"round", r},
                         {"model", model.name},
                         {"first_step", sf.slice.firstStep},
                         {"last_step", sf.slice.lastStep},
                         {"spilled", facts.models[sf.slice.model].spilled()}}}});
    }
  *events = std::move(trace);
  return {};
}

} // namespace cleave::runtime
