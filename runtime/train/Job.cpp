//===- Job.cpp - Several models trained at once, round by round -----------===//

#include "runtime/train/Job.h"

#include "runtime/AtomicFile.h"
#include "runtime/JsonFile.h"
#include "runtime/Plan.h"
#include "runtime/train/Trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
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

constexpr const char *kFormat = "cleave-job-plan";
constexpr int64_t kVersion = 1;
constexpr int64_t kMaxDevices = 1 << 16;
constexpr size_t kMaxNameLength = 200;
constexpr int64_t kMaxSteps = int64_t(1) << 53;

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Reads and checks job.json's fields: every error is "FILE: FIELD: what".
class Fields {
public:
  explicit Fields(const std::string &file) : file_(file) {}

  Status error(const std::string &field, const std::string &what) const {
    return CLEAVE_ERROR(file_, ": ", field, ": ", what);
  }

  /// The value `key` of `object` (at `field`), which must be present.
  Status get(const Json &object, const std::string &field, const char *key,
             const Json **out) const {
    auto it = object.find(key);
    if (it == object.end())
      return error(field, "missing");
    *out = &*it;
    return {};
  }

  Status integer(const Json &value, const std::string &field, int64_t min, int64_t max,
                 int64_t *out) const {
    if (!value.is_number_integer())
      return error(field, "must be an integer, not " + jsonExcerpt(value));
    int64_t v = 0;
    if (value.is_number_unsigned()) {
      uint64_t u = value.get<uint64_t>();
      if (u > static_cast<uint64_t>(max))
        return error(field, jsonExcerpt(value) + " is larger than " + std::to_string(max));
      v = static_cast<int64_t>(u);
    } else {
      v = value.get<int64_t>();
    }
    if (v < min)
      return error(field, jsonExcerpt(value) + " is less than " + std::to_string(min));
    if (v > max)
      return error(field, jsonExcerpt(value) + " is larger than " + std::to_string(max));
    *out = v;
    return {};
  }

  Status integerField(const Json &object, const std::string &field, const char *key,
                      int64_t min, int64_t max, int64_t *out) const {
    const Json *value = nullptr;
    CLEAVE_RETURN_IF_ERROR(get(object, field + key, key, &value));
    return integer(*value, field + key, min, max, out);
  }

  Status string(const Json &object, const std::string &field, const char *key,
                std::string *out) const {
    const Json *value = nullptr;
    CLEAVE_RETURN_IF_ERROR(get(object, field + key, key, &value));
    if (!value->is_string())
      return error(field + key, "must be a string, not " + jsonExcerpt(*value));
    *out = value->get<std::string>();
    if (out->empty())
      return error(field + key, "is empty");
    return {};
  }

private:
  std::string file_;
};

} // namespace

bool isJobModelName(const std::string &name) {
  if (name.empty() || name.size() > kMaxNameLength || name == "." || name == "..")
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
}

namespace {

std::string joinPath(const std::string &dir, const std::string &path) {
  if (!path.empty() && path[0] == '/')
    return path;
  return (fs::path(dir) / path).lexically_normal().string();
}

std::string stepsText(int64_t first, int64_t last) {
  return first == last ? "step " + std::to_string(first)
                       : "steps " + std::to_string(first) + ".." + std::to_string(last);
}


/// Where a slice's pieces wait until the job is over.
std::string partialDir(const std::string &runDir) { return runDir + "/.partial"; }
std::string sliceLogPath(const std::string &runDir, const JobModel &model, const JobSlice &s) {
  return partialDir(runDir) + "/" + model.name + ".steps-" + std::to_string(s.firstStep) + "-" +
         std::to_string(s.lastStep) + ".jsonl";
}
std::string partialWeightsPath(const std::string &runDir, const JobModel &model) {
  return partialDir(runDir) + "/" + model.name + ".safetensors";
}
std::string checkpointRoot(const std::string &runDir, const JobModel &model) {
  return runDir + "/checkpoints/" + model.name;
}

/// "rounds[1]: model 'gpt' on device 1, steps 6..10": where a slice's
/// error happened.
std::string sliceWhere(const JobPlan &job, size_t round, const JobSlice &s) {
  return "rounds[" + std::to_string(round) + "]: model '" + job.models[s.model].name +
         "' on device " + std::to_string(s.device) + ", " + stepsText(s.firstStep, s.lastStep);
}

/// Loads a model's plan and checks it is a one-device training plan.
Status loadModelPlan(const JobPlan &job, const JobModel &model, Plan *plan) {
  const std::string where = job.file + ": model '" + model.name + "': plan " + model.plan;
  int64_t devices = 0;
  CLEAVE_RETURN_IF_ERROR(readPlanDeviceCount(model.plan, &devices).prepend(where));
  if (devices != 1)
    return CLEAVE_ERROR(where, ": a plan for ", devices,
                        " devices; a job's models are one-device plans");
  CLEAVE_RETURN_IF_ERROR(loadPlan(model.plan, plan).prepend(where));
  if (!plan->training)
    return CLEAVE_ERROR(where, ": not a training plan (schedule '", plan->schedule,
                        "'); compile it with 'cleave compile --mode train'");
  if (!plan->hasWeights)
    return planWithoutWeights(model.plan, plan->modelSource).prepend(where);
  return {};
}

/// Trains one slice on this rank.
Status runSlice(const JobPlan &job, const JobSlice &slice, Backend &backend,
                const std::string &runDir, JobSliceResult *result) {
  const JobModel &model = job.models[slice.model];
  Plan plan;
  CLEAVE_RETURN_IF_ERROR(loadModelPlan(job, model, &plan));
  TrainOptions options;
  options.dataPath = model.data;
  options.steps = slice.lastStep;
  options.shuffleSeed = model.shuffleSeed;
  options.checkpointDir = checkpointRoot(runDir, model);
  options.checkpointEvery = 0; // one checkpoint, after the slice's last step
  options.logPath = sliceLogPath(runDir, model, slice);
  if (slice.lastStep == model.steps)
    options.saveWeightsPath = partialWeightsPath(runDir, model);
  if (slice.firstStep > 1) {
    // The previous slice's checkpoint, whichever device wrote it.
    const std::string latest = options.checkpointDir + "/latest";
    std::string text;
    CLEAVE_RETURN_IF_ERROR(readTextFile(latest, &text).prepend(
        "no checkpoint to resume from (the slice before should have written it)"));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    const std::string expected = "ckpt-" + std::to_string(slice.firstStep - 1);
    if (text != expected)
      return CLEAVE_ERROR(latest, ": names '", text.substr(0, 80), "', the slice resumes from ",
                          expected);
    options.resumePath = options.checkpointDir;
  }
  if (plan.partitionedTraining()) {
    // A one-device step in slot order (recomputation): this process holds
    // the loss and writes the checkpoint alone, as `cleave train` does.
    options.shareLoss = [](double *) { return Status(); };
    options.group.writesStage = true;
    options.group.agree = [](const Status &s) { return s; };
  }
  TrainReport report;
  CLEAVE_RETURN_IF_ERROR(train(plan, backend, options, &report));
  if (report.firstStep != slice.firstStep)
    return CLEAVE_ERROR(report.resumedFrom, ": resumed at step ", report.firstStep,
                        ", the slice starts at step ", slice.firstStep);
  for (const StepRecord &r : report.steps)
    result->stepSeconds += r.seconds;
  result->stepsRun = static_cast<int64_t>(report.steps.size());
  if (!report.steps.empty())
    result->lastLoss = report.steps.back().loss;
  return {};
}

/// After the last round, on rank 0: every model's log put together from its
/// slices' logs, its weights moved into weights/, the pieces removed.
Status finishOutputs(const JobPlan &job, const std::string &runDir) {
  std::error_code ec;
  fs::create_directories(runDir + "/logs", ec);
  if (ec)
    return CLEAVE_ERROR(runDir, "/logs: cannot create: ", ec.message());
  fs::create_directories(runDir + "/weights", ec);
  if (ec)
    return CLEAVE_ERROR(runDir, "/weights: cannot create: ", ec.message());
  for (size_t m = 0; m < job.models.size(); ++m) {
    const JobModel &model = job.models[m];
    std::string log;
    for (const std::vector<JobSlice> &round : job.rounds)
      for (const JobSlice &s : round) {
        if (s.model != m)
          continue;
        std::string part;
        CLEAVE_RETURN_IF_ERROR(readTextFile(sliceLogPath(runDir, model, s), &part));
        log += part;
      }
    CLEAVE_RETURN_IF_ERROR(writeFileAtomically(runDir + "/logs/" + model.name + ".jsonl", log));
  }
  for (const JobModel &model : job.models) {
    fs::rename(partialWeightsPath(runDir, model), runDir + "/weights/" + model.name + ".safetensors",
               ec);
    if (ec)
      return CLEAVE_ERROR(runDir, "/weights/", model.name, ".safetensors: cannot move into place: ",
                          ec.message());
  }
  fs::remove_all(partialDir(runDir), ec);
  return {};
}

/// After a failure, on rank 0: the pieces of unfinished outputs go; the
/// checkpoints stay (each complete). A run directory this job created and
/// left empty goes too.
void removePartialOutputs(const std::string &runDir, bool created) {
  std::error_code ec;
  fs::remove_all(partialDir(runDir), ec);
  for (const char *sub : {"/logs", "/weights", "/checkpoints"})
    if (fs::is_directory(runDir + sub, ec) && fs::is_empty(runDir + sub, ec))
      fs::remove(runDir + sub, ec);
  if (created && fs::is_directory(runDir, ec) && fs::is_empty(runDir, ec))
    fs::remove(runDir, ec);
}

} // namespace

int64_t JobPlan::modelIndex(const std::string &name) const {
  for (size_t i = 0; i < models.size(); ++i)
    if (models[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

const JobSlice *JobPlan::sliceOf(size_t round, int64_t device) const {
  if (round >= rounds.size())
    return nullptr;
  for (const JobSlice &s : rounds[round])
    if (s.device == device)
      return &s;
  return nullptr;
}

Status parseJobPlan(const std::string &text, const std::string &dir, const std::string &file,
                    JobPlan *out) {
  return catchExceptions(file, [&]() -> Status {
    Json root;
    CLEAVE_RETURN_IF_ERROR(parseJson(text, file, &root));
    Fields f(file);
    if (!root.is_object())
      return CLEAVE_ERROR(file, ": not a JSON object");
    JobPlan job;
    job.dir = dir;
    job.file = file;

    std::string format;
    CLEAVE_RETURN_IF_ERROR(f.string(root, "", "format", &format));
    if (format != kFormat)
      return f.error("format", "'" + format.substr(0, 80) + "', expected '" + kFormat + "'");
    int64_t version = 0;
    CLEAVE_RETURN_IF_ERROR(f.integerField(root, "", "version", 0, INT64_MAX, &version));
    if (version != kVersion)
      return f.error("version", std::to_string(version) + ", this runtime reads version " +
                                    std::to_string(kVersion));
    CLEAVE_RETURN_IF_ERROR(f.integerField(root, "", "devices", 1, kMaxDevices, &job.devices));
    CLEAVE_RETURN_IF_ERROR(
        f.integerField(root, "", "slice_steps", 1, kMaxSteps, &job.sliceSteps));

    // The models.
    const Json *models = nullptr;
    CLEAVE_RETURN_IF_ERROR(f.get(root, "models", "models", &models));
    if (!models->is_array() || models->empty())
      return f.error("models", "must be a non-empty array of models");
    for (size_t i = 0; i < models->size(); ++i) {
      const Json &entry = (*models)[i];
      const std::string at = "models[" + std::to_string(i) + "]";
      if (!entry.is_object())
        return f.error(at, "must be an object, not " + jsonExcerpt(entry));
      const std::string field = at + ".";
      JobModel model;
      CLEAVE_RETURN_IF_ERROR(f.string(entry, field, "name", &model.name));
      if (!isJobModelName(model.name))
        return f.error(field + "name",
                       "'" + model.name.substr(0, 80) +
                           "' is not a safe file name (letters, digits, '_', '.' and '-', "
                           "not '.' or '..', at most " +
                           std::to_string(kMaxNameLength) + " characters)");
      if (job.modelIndex(model.name) >= 0)
        return f.error(field + "name", "'" + model.name + "' names two models");
      CLEAVE_RETURN_IF_ERROR(f.string(entry, field, "plan", &model.planField));
      if (model.planField[0] == '/')
        return f.error(field + "plan", "'" + model.planField.substr(0, 200) +
                                           "' must be relative to the job plan directory");
      model.plan = joinPath(dir, model.planField);
      CLEAVE_RETURN_IF_ERROR(f.string(entry, field, "data", &model.dataField));
      model.data = joinPath(dir, model.dataField);
      CLEAVE_RETURN_IF_ERROR(f.integerField(entry, field, "steps", 1, kMaxSteps, &model.steps));
      if (auto it = entry.find("predicted_step_seconds"); it != entry.end() && !it->is_null()) {
        if (!it->is_number() || it->get<double>() < 0)
          return f.error(field + "predicted_step_seconds",
                         "must be a non-negative number or null, not " + jsonExcerpt(*it));
        model.predictedStepSeconds = it->get<double>();
      }
      if (auto it = entry.find("shuffle_seed"); it != entry.end() && !it->is_null()) {
        if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0))
          return f.error(field + "shuffle_seed",
                         "must be a non-negative integer or null, not " + jsonExcerpt(*it));
        model.shuffleSeed = it->is_number_unsigned() ? it->get<uint64_t>()
                                                     : static_cast<uint64_t>(it->get<int64_t>());
      }
      job.models.push_back(std::move(model));
    }

    // The rounds: each model's slices cover its steps in order.
    const Json *rounds = nullptr;
    CLEAVE_RETURN_IF_ERROR(f.get(root, "rounds", "rounds", &rounds));
    if (!rounds->is_array())
      return f.error("rounds", "must be an array of rounds, not " + jsonExcerpt(*rounds));
    std::vector<int64_t> next(job.models.size(), 1); // each model's next step
    for (size_t r = 0; r < rounds->size(); ++r) {
      const Json &round = (*rounds)[r];
      const std::string at = "rounds[" + std::to_string(r) + "]";
      if (!round.is_array())
        return f.error(at, "must be an array of slices, not " + jsonExcerpt(round));
      std::vector<JobSlice> slices;
      std::map<int64_t, size_t> deviceAt, modelAt;
      for (size_t e = 0; e < round.size(); ++e) {
        const Json &entry = round[e];
        const std::string here = at + "[" + std::to_string(e) + "]";
        if (!entry.is_object())
          return f.error(here, "must be an object, not " + jsonExcerpt(entry));
        const std::string field = here + ".";
        JobSlice slice;
        CLEAVE_RETURN_IF_ERROR(
            f.integerField(entry, field, "device", INT64_MIN, INT64_MAX, &slice.device));
        if (slice.device < 0 || slice.device >= job.devices)
          return f.error(field + "device", std::to_string(slice.device) +
                                               " is not a device of the job (devices 0.." +
                                               std::to_string(job.devices - 1) + ")");
        if (auto [it, fresh] = deviceAt.emplace(slice.device, e); !fresh)
          return f.error(field + "device", "device " + std::to_string(slice.device) +
                                               " already runs " + at + "[" +
                                               std::to_string(it->second) +
                                               "]: a device runs one slice per round");
        std::string name;
        CLEAVE_RETURN_IF_ERROR(f.string(entry, field, "model", &name));
        const int64_t index = job.modelIndex(name);
        if (index < 0) {
          std::string known;
          for (const JobModel &m : job.models)
            known += (known.empty() ? "" : ", ") + m.name;
          return f.error(field + "model", "'" + name.substr(0, 80) +
                                              "' is not a model of the job (models: " + known +
                                              ")");
        }
        slice.model = static_cast<size_t>(index);
        if (auto [it, fresh] = modelAt.emplace(index, e); !fresh)
          return f.error(field + "model", "model '" + name + "' already runs in " + at + "[" +
                                              std::to_string(it->second) +
                                              "]: a model runs one slice per round");
        const JobModel &model = job.models[slice.model];
        CLEAVE_RETURN_IF_ERROR(
            f.integerField(entry, field, "first_step", 1, kMaxSteps, &slice.firstStep));
        CLEAVE_RETURN_IF_ERROR(
            f.integerField(entry, field, "last_step", 1, kMaxSteps, &slice.lastStep));
        if (slice.lastStep < slice.firstStep)
          return f.error(field + "last_step", std::to_string(slice.lastStep) +
                                                  " is before first_step " +
                                                  std::to_string(slice.firstStep));
        if (slice.lastStep > model.steps)
          return f.error(field + "last_step",
                         std::to_string(slice.lastStep) + " is past model '" + model.name +
                             "''s last step (its steps are " + std::to_string(model.steps) + ")");
        int64_t &expected = next[slice.model];
        if (slice.firstStep > expected)
          return f.error(field + "first_step",
                         "model '" + model.name + "' resumes at step " +
                             std::to_string(slice.firstStep) + ", but its slices before end at " +
                             (expected == 1 ? std::string("step 0 (none)")
                                            : "step " + std::to_string(expected - 1)) +
                             ": " + stepsText(expected, slice.firstStep - 1) +
                             " would never run (a gap)");
        if (slice.firstStep < expected)
          return f.error(field + "first_step",
                         "model '" + model.name + "' starts at step " +
                             std::to_string(slice.firstStep) + ", but its slices before run to " +
                             "step " + std::to_string(expected - 1) + ": " +
                             stepsText(slice.firstStep, std::min(expected - 1, slice.lastStep)) +
                             " would run twice (an overlap)");
        expected = slice.lastStep + 1;
        slices.push_back(slice);
      }
      job.rounds.push_back(std::move(slices));
    }
    for (size_t m = 0; m < job.models.size(); ++m)
      if (next[m] != job.models[m].steps + 1)
        return f.error("models[" + std::to_string(m) + "].steps",
                       "model '" + job.models[m].name + "' has " +
                           std::to_string(job.models[m].steps) + " steps, but its slices " +
                           (next[m] == 1 ? std::string("are in no round")
                                         : "end at step " + std::to_string(next[m] - 1)) +
                           ": " + stepsText(next[m], job.models[m].steps) +
                           " would never run");

    if (auto it = root.find("predicted"); it != root.end() && !it->is_null()) {
      if (!it->is_object())
        return f.error("predicted", "must be an object, not " + jsonExcerpt(*it));
      job.predictedJson = it->dump();
      if (auto m = it->find("makespan_seconds"); m != it->end() && m->is_number())
        job.predictedMakespanSeconds = m->get<double>();
    }
    *out = std::move(job);
    return {};
  });
}

Status loadJobPlan(const std::string &dir, JobPlan *out) {
  const std::string file = (fs::path(dir) / "job.json").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return CLEAVE_ERROR(dir, ": not a job plan directory (no such directory)");
  if (!fs::exists(file, ec))
    return CLEAVE_ERROR(dir, ": not a job plan directory (no job.json)");
  std::string text;
  CLEAVE_RETURN_IF_ERROR(readTextFile(file, &text));
  return parseJobPlan(text, dir, file, out);
}

Status checkJobModels(const JobPlan &job) {
  for (const JobModel &model : job.models) {
    Plan plan;
    CLEAVE_RETURN_IF_ERROR(loadModelPlan(job, model, &plan));
    std::error_code ec;
    if (!fs::is_regular_file(model.data, ec))
      return CLEAVE_ERROR(job.file, ": model '", model.name, "': data ", model.data,
                          ": no such file");
  }
  return {};
}

Status checkRunDir(const std::string &runDir) {
  std::error_code ec;
  if (runDir.empty())
    return CLEAVE_ERROR("no run directory given (--out RUNDIR)");
  if (!fs::exists(runDir, ec))
    return {};
  if (!fs::is_directory(runDir, ec))
    return CLEAVE_ERROR(runDir, ": exists and is not a directory (the run directory must not "
                                "exist or be empty)");
  if (!fs::is_empty(runDir, ec))
    return CLEAVE_ERROR(runDir, ": not empty (the run directory must not exist or be empty)");
  return {};
}

Status runJob(const JobPlan &job, Backend &backend, const JobOptions &options,
              const JobRanks &ranks, JobReport *report,
              const std::function<void(const JobSliceResult &)> &onSlice) {
  auto agree = [&](const Status &s) { return ranks.agree ? ranks.agree(s) : s; };
  auto allGather = [&](const double *mine, double *all, size_t count) -> Status {
    if (ranks.allGather)
      return ranks.allGather(mine, all, count);
    std::copy(mine, mine + count, all);
    return {};
  };
  const bool first = ranks.rank == 0;
  const std::string &runDir = options.runDir;
  *report = JobReport();

  // Rank 0 checks and makes the run directory; every rank hears.
  bool created = false;
  Status setup;
  if (ranks.size != job.devices)
    setup = CLEAVE_ERROR(job.file, ": the job has ", job.devices, " devices, the run ", ranks.size,
                         " ranks: run it with --local ", job.devices, " or mpirun -np ",
                         job.devices);
  else if (first)
    setup = [&]() -> Status {
      CLEAVE_RETURN_IF_ERROR(checkRunDir(runDir));
      std::error_code ec;
      created = !fs::exists(runDir, ec);
      fs::create_directories(partialDir(runDir), ec);
      if (!ec)
        fs::create_directories(runDir + "/checkpoints", ec);
      if (ec)
        return CLEAVE_ERROR(runDir, ": cannot create the run directory: ", ec.message());
      return {};
    }();
  if (Status s = agree(setup); !s.ok()) {
    if (first && setup.ok())
      removePartialOutputs(runDir, created);
    return s;
  }

  constexpr size_t kFields = 4; // seconds, step seconds, steps run, last loss
  std::vector<double> all(kFields * static_cast<size_t>(ranks.size));
  const auto jobStart = std::chrono::steady_clock::now();
  for (size_t r = 0; r < job.rounds.size(); ++r) {
    const auto roundStart = std::chrono::steady_clock::now();
    JobSliceResult mine;
    Status ran;
    if (const JobSlice *slice = job.sliceOf(r, ranks.rank)) {
      mine.round = r;
      mine.slice = *slice;
      ran = catchExceptions(sliceWhere(job, r, *slice), [&]() {
              return runSlice(job, *slice, backend, runDir, &mine);
            }).prepend(sliceWhere(job, r, *slice));
      mine.seconds = since(roundStart);
    }
    // The round's barrier: every rank's slice is done (its checkpoint
    // written) before any starts the next round.
    Status agreed = agree(ran);
    if (!agreed.ok()) {
      if (first)
        removePartialOutputs(runDir, created);
      return agreed;
    }
    report->roundSeconds.push_back(since(roundStart));
    double fields[kFields] = {mine.seconds, mine.stepSeconds, static_cast<double>(mine.stepsRun),
                              mine.lastLoss};
    CLEAVE_RETURN_IF_ERROR(allGather(fields, all.data(), kFields));
    if (!first)
      continue;
    std::vector<JobSlice> order = job.rounds[r];
    std::sort(order.begin(), order.end(),
              [](const JobSlice &a, const JobSlice &b) { return a.device < b.device; });
    for (const JobSlice &s : order) {
      const double *f = &all[kFields * static_cast<size_t>(s.device)];
      JobSliceResult result;
      result.round = r;
      result.slice = s;
      result.seconds = f[0];
      result.stepSeconds = f[1];
      result.stepsRun = static_cast<int64_t>(f[2]);
      result.lastLoss = f[3];
      report->slices.push_back(result);
      if (onSlice)
        onSlice(result);
    }
  }
  report->makespanSeconds = since(jobStart);

  // Every slice is over: rank 0 puts the outputs in place.
  Status finished;
  if (first) {
    finished = finishOutputs(job, runDir);
    if (!finished.ok())
      removePartialOutputs(runDir, created);
  }
  return agree(finished);
}

std::string jobReportJson(const JobPlan &job, const JobReport &report) {
  struct ModelSum {
    double seconds = 0, stepSeconds = 0, lastLoss = 0;
    int64_t steps = 0, slices = 0;
    std::set<int64_t> devices;
  };
  struct DeviceSum {
    double busy = 0;
    int64_t slices = 0;
  };
  std::vector<ModelSum> models(job.models.size());
  std::vector<DeviceSum> devices(static_cast<size_t>(job.devices));
  Json slices = Json::array();
  double sequential = 0;
  for (const JobSliceResult &r : report.slices) {
    ModelSum &m = models[r.slice.model];
    m.seconds += r.seconds;
    m.stepSeconds += r.stepSeconds;
    m.steps += r.stepsRun;
    m.slices += 1;
    m.lastLoss = r.lastLoss;
    m.devices.insert(r.slice.device);
    DeviceSum &d = devices[static_cast<size_t>(r.slice.device)];
    d.busy += r.seconds;
    d.slices += 1;
    sequential += r.seconds;
    slices.push_back(Json{{"round", r.round},
                          {"device", r.slice.device},
                          {"model", job.models[r.slice.model].name},
                          {"first_step", r.slice.firstStep},
                          {"last_step", r.slice.lastStep},
                          {"seconds", r.seconds},
                          {"step_seconds", r.stepSeconds},
                          {"loss", r.lastLoss}});
  }
  Json modelList = Json::array();
  for (size_t i = 0; i < job.models.size(); ++i) {
    const JobModel &model = job.models[i];
    const ModelSum &m = models[i];
    modelList.push_back(
        Json{{"name", model.name},
             {"steps", m.steps},
             {"seconds", m.seconds},
             {"mean_step_seconds", m.steps ? m.stepSeconds / static_cast<double>(m.steps) : 0.0},
             {"predicted_step_seconds",
              model.predictedStepSeconds ? Json(*model.predictedStepSeconds) : Json(nullptr)},
             {"final_loss", m.lastLoss},
             {"slices", m.slices},
             {"devices", std::vector<int64_t>(m.devices.begin(), m.devices.end())}});
  }
  Json deviceList = Json::array();
  for (size_t d = 0; d < devices.size(); ++d)
    deviceList.push_back(Json{{"device", d},
                              {"busy_seconds", devices[d].busy},
                              {"slices", devices[d].slices}});
  Json roundList = Json::array();
  for (size_t r = 0; r < report.roundSeconds.size(); ++r)
    roundList.push_back(Json{{"round", r}, {"seconds", report.roundSeconds[r]}});
  Json predicted;
  Status parsed = parseJson(job.predictedJson, "job.json's predicted", &predicted);
  if (!parsed.ok())
    predicted = nullptr;
  Json json{{"job", job.dir},
            {"device_count", job.devices},
            {"makespan_seconds", report.makespanSeconds},
            {"sequential_seconds", sequential},
            {"predicted", predicted},
            {"models", modelList},
            {"devices", deviceList},
            {"rounds", roundList},
            {"slices", slices}};
  return json.dump(1) + "\n";
}

} // namespace cleave::runtime
