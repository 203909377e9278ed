//===- Job.cpp - Multi-model jobs: many models planned for one cluster ----===//

#include "compiler/Job.h"

#include "runtime/JsonFile.h"
#include "runtime/train/Job.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace cleave {
namespace {

using Json = nlohmann::json;

runtime::Status fail(const std::string &where, const std::string &message) {
  return CLEAVE_ERROR(where, ": ", message);
}

/// A path of the job file: as given when absolute, else beside the file.
std::string besideJob(const std::string &jobPath, const std::string &path) {
  if (llvm::sys::path::is_absolute(path))
    return path;
  llvm::SmallString<256> full(llvm::sys::path::parent_path(jobPath));
  llvm::sys::path::append(full, path);
  llvm::sys::fs::make_absolute(full);
  llvm::sys::path::remove_dots(full, /*remove_dot_dot=*/true);
  return std::string(full);
}

runtime::Status parseModel(const std::string &where, const Json &entry, JobModel &m) {
  if (!entry.is_object())
    return fail(where, "must be an object");
  static const std::set<std::string> known = {
      "name",     "model",         "data",    "global_batch", "steps",      "loss",
      "optimizer", "lr",           "weight_decay", "betas",   "eps",        "momentum",
      "dampening", "nesterov",     "clip_grad_norm", "dtype", "seed",       "shuffle_seed"};
  for (auto it = entry.begin(); it != entry.end(); ++it)
    if (!known.count(it.key()))
      return fail(where, "unknown field '" + it.key() + "'");
  auto string = [&](const char *key, std::string &out, bool required) -> runtime::Status {
    auto it = entry.find(key);
    if (it == entry.end())
      return required ? fail(where, std::string("needs '") + key + "'") : runtime::Status();
    if (!it->is_string() || it->get<std::string>().empty())
      return fail(where + "." + key, "must be a non-empty string");
    out = it->get<std::string>();
    return {};
  };
  auto integer = [&](const char *key, int64_t &out, int64_t min, bool required) -> runtime::Status {
    auto it = entry.find(key);
    if (it == entry.end())
      return required ? fail(where, std::string("needs '") + key + "'") : runtime::Status();
    if (!it->is_number_integer() || it->get<int64_t>() < min)
      return fail(where + "." + key, "must be an integer of at least " + std::to_string(min));
    out = it->get<int64_t>();
    return {};
  };
  auto number = [&](const char *key, double &out, double min) -> runtime::Status {
    auto it = entry.find(key);
    if (it == entry.end() || it->is_null())
      return {};
    if (!it->is_number() || !(it->get<double>() >= min))
      return fail(where + "." + key, "must be a number of at least " + std::to_string(min));
    out = it->get<double>();
    return {};
  };
  CLEAVE_RETURN_IF_ERROR(string("name", m.name, true));
  if (!runtime::isJobModelName(m.name))
    return fail(where + ".name", "'" + m.name + "' must be letters, digits, '_', '.' or '-'");
  CLEAVE_RETURN_IF_ERROR(string("model", m.model, true));
  CLEAVE_RETURN_IF_ERROR(string("data", m.data, true));
  CLEAVE_RETURN_IF_ERROR(integer("global_batch", m.globalBatch, 1, true));
  CLEAVE_RETURN_IF_ERROR(integer("steps", m.steps, 1, true));
  CLEAVE_RETURN_IF_ERROR(integer("seed", m.seed, 0, false));
  CLEAVE_RETURN_IF_ERROR(string("dtype", m.dtype, false));
  if (m.dtype != "f32" && m.dtype != "bf16")
    return fail(where + ".dtype", "must be f32 or bf16, got '" + m.dtype + "'");
  mlir::cleave::TrainingOptions &t = m.training;
  CLEAVE_RETURN_IF_ERROR(string("loss", t.loss, false));
  if (t.loss != "model" && t.loss != "cross_entropy" && t.loss != "mse")
    return fail(where + ".loss", "must be model, cross_entropy or mse, got '" + t.loss + "'");
  CLEAVE_RETURN_IF_ERROR(string("optimizer", t.optimizer, false));
  if (t.optimizer != "adamw" && t.optimizer != "sgd")
    return fail(where + ".optimizer", "must be adamw or sgd, got '" + t.optimizer + "'");
  CLEAVE_RETURN_IF_ERROR(number("lr", t.lr, 0));
  if (t.optimizer == "sgd" && t.lr < 0)
    return fail(where, "sgd needs 'lr'");
  CLEAVE_RETURN_IF_ERROR(number("weight_decay", t.weightDecay, 0));
  CLEAVE_RETURN_IF_ERROR(number("eps", t.eps, 0));
  CLEAVE_RETURN_IF_ERROR(number("momentum", t.momentum, 0));
  CLEAVE_RETURN_IF_ERROR(number("dampening", t.dampening, 0));
  CLEAVE_RETURN_IF_ERROR(number("clip_grad_norm", t.clipGradNorm, 0));
  if (auto it = entry.find("betas"); it != entry.end()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number())
      return fail(where + ".betas", "must be two numbers");
    t.beta1 = (*it)[0].get<double>();
    t.beta2 = (*it)[1].get<double>();
    if (!(t.beta1 >= 0 && t.beta1 < 1 && t.beta2 >= 0 && t.beta2 < 1))
      return fail(where + ".betas", "must each be in [0, 1)");
  }
  if (auto it = entry.find("nesterov"); it != entry.end()) {
    if (!it->is_boolean())
      return fail(where + ".nesterov", "must be true or false");
    t.nesterov = it->get<bool>();
  }
  if (auto it = entry.find("shuffle_seed"); it != entry.end() && !it->is_null()) {
    if (!it->is_number_unsigned())
      return fail(where + ".shuffle_seed", "must be a non-negative integer or null");
    m.shuffleSeed = it->get<uint64_t>();
  }
  return {};
}

double stepOf(const planner::Candidate &c) { return c.stepSeconds; }

/// What compiling one model of the job asks of the driver: its training
/// step on the job's cluster.
CompileRequest compileRequestOf(const JobModel &model, const JobRequest &request) {
  CompileRequest r;
  r.model = model.model;
  r.mode = CompileMode::Train;
  r.training = model.training;
  r.seed = model.seed;
  r.dtype = model.dtype;
  r.mixed = model.dtype == "bf16";
  r.cluster = request.cluster;
  r.memory = request.memory;
  r.planner.search.globalBatch = model.globalBatch;
  r.planner.search.spill = request.spill;
  return r;
}

} // namespace

runtime::Status loadJob(const std::string &path, Job &job) {
  std::string text;
  CLEAVE_RETURN_IF_ERROR(runtime::readTextFile(path, &text));
  Json json;
  CLEAVE_RETURN_IF_ERROR(runtime::parseJson(text, path, &json));
  if (!json.is_object())
    return fail(path, "a job file is a JSON object");
  for (auto it = json.begin(); it != json.end(); ++it)
    if (it.key() != "format" && it.key() != "version" && it.key() != "models" &&
        it.key() != "slice_seconds")
      return fail(path, "unknown field '" + it.key() + "'");
  if (json.value("format", "") != "cleave-job")
    return fail(path, "format must be \"cleave-job\"");
  if (!json.contains("version") || !json["version"].is_number_integer() ||
      json["version"].get<int64_t>() != 1)
    return fail(path, "version must be 1");
  job = Job();
  job.path = path;
  if (auto it = json.find("slice_seconds"); it != json.end()) {
    if (!it->is_number() || !(it->get<double>() > 0))
      return fail(path + ": slice_seconds", "must be a positive number");
    job.sliceSeconds = it->get<double>();
  }
  auto models = json.find("models");
  if (models == json.end() || !models->is_array() || models->empty())
    return fail(path, "models must be a non-empty array");
  std::set<std::string> names;
  for (size_t i = 0; i < models->size(); ++i) {
    JobModel m;
    CLEAVE_RETURN_IF_ERROR(parseModel(path + ": models[" + std::to_string(i) + "]", (*models)[i], m));
    if (!names.insert(m.name).second)
      return fail(path + ": models[" + std::to_string(i) + "].name", "'" + m.name + "' is given twice");
    m.model = besideJob(path, m.model);
    m.data = besideJob(path, m.data);
    for (const std::string *file : {&m.model, &m.data})
      if (!llvm::sys::fs::is_regular_file(*file))
        return fail(path + ": model '" + m.name + "'", "no file " + *file);
    job.models.push_back(std::move(m));
  }
  return {};
}

std::string JobPlan::json() const {
  nlohmann::ordered_json j;
  j["format"] = "cleave-job-plan";
  j["version"] = 1;
  j["devices"] = devices;
  int64_t longest = 0;
  for (const auto &round : schedule.rounds)
    for (const planner::JobSlice &slice : round)
      longest = std::max(longest, slice.lastStep - slice.firstStep + 1);
  j["slice_steps"] = longest;
  nlohmann::ordered_json models = nlohmann::ordered_json::array();
  for (size_t m = 0; m < job.models.size(); ++m) {
    const JobModel &model = job.models[m];
    models.push_back({{"name", model.name},
                      {"plan", "models/" + model.name},
                      {"data", model.data},
                      {"steps", model.steps},
                      {"predicted_step_seconds", stepOf(this->models[m].oneDevice)},
                      {"shuffle_seed", model.shuffleSeed ? nlohmann::ordered_json(*model.shuffleSeed)
                                                         : nlohmann::ordered_json(nullptr)}});
  }
  j["models"] = models;
  nlohmann::ordered_json rounds = nlohmann::ordered_json::array();
  for (const auto &round : schedule.rounds) {
    nlohmann::ordered_json slices = nlohmann::ordered_json::array();
    for (const planner::JobSlice &slice : round)
      slices.push_back({{"device", slice.device},
                        {"model", job.models[slice.model].name},
                        {"first_step", slice.firstStep},
                        {"last_step", slice.lastStep}});
    rounds.push_back(slices);
  }
  j["rounds"] = rounds;
  j["predicted"] = {{"makespan_seconds", schedule.makespanSeconds},
                    {"sequential_seconds", sequentialSeconds}};
  return j.dump(1) + "\n";
}

DriverStatus planJob(mlir::MLIRContext &context, const JobRequest &request, JobPlan &plan) {
  auto error = [&]() { return mlir::emitError(mlir::UnknownLoc::get(&context)); };
  plan = JobPlan();
  if (runtime::Status s = loadJob(request.job, plan.job); !s.ok()) {
    error() << s.message();
    return DriverStatus::failure();
  }
  auto note = [&](const std::string &text) {
    if (request.progress)
      request.progress(text);
  };
  std::vector<planner::JobModelTime> times;
  for (const JobModel &model : plan.job.models) {
    CompileRequest r = compileRequestOf(model, request);
    // What the runtime trains: no combination it does not run yet.
    r.planner.search.untrainedCombinations = false;
    LoadedModel loaded;
    if (DriverStatus s = loadModel(context, r, loaded); !s.ok())
      return s;
    JobModelPlan modelPlan;
    modelPlan.name = model.name;
    for (int devices : {1, request.devices}) {
      CompileRequest at = r;
      at.devices = devices;
      cost::ClusterSpec spec;
      if (DriverStatus s = setUpCluster(context, at, spec); !s.ok())
        return s;
      if (devices != 1 && plan.devices == 0)
        plan.devices = spec.deviceCount();
      PlanResult result;
      DriverStatus s = planModel(loaded, at, spec, result);
      if (s.error() == DriverError::NothingFits) {
        error() << "model '" << model.name << "' (" << model.model << ") fits no plan on "
                << (devices == 1 ? std::string("one device, even spilled")
                                 : "the cluster's " + std::to_string(spec.deviceCount()) +
                                       " devices")
                << "; a job runs each model on one device at a time";
        return s;
      }
      if (!s.ok())
        return s;
      (devices == 1 ? modelPlan.oneDevice : modelPlan.allDevices) = *result.chosen;
    }
    note("planned " + model.name + ": one device " + modelPlan.oneDevice.label() + ", all devices " +
         modelPlan.allDevices.label());
    times.push_back({model.name, model.steps, stepOf(modelPlan.oneDevice)});
    plan.sequentialSeconds += double(model.steps) * stepOf(modelPlan.allDevices);
    plan.models.push_back(std::move(modelPlan));
  }
  plan.schedule = planner::scheduleJob(times, plan.devices, plan.job.sliceSeconds);
  // Whole models, one per device, LRTF: slices as long as the longest run.
  double longest = 0;
  for (const planner::JobModelTime &t : times)
    longest = std::max(longest, double(t.steps) * t.stepSeconds);
  plan.onePerDeviceSeconds = planner::scheduleJob(times, plan.devices, longest).makespanSeconds;
  return {};
}

DriverStatus compileJob(mlir::MLIRContext &context, const JobRequest &request, JobPlan &plan) {
  auto error = [&]() { return mlir::emitError(mlir::UnknownLoc::get(&context)); };
  if (request.output.empty()) {
    error() << "no job plan directory given";
    return DriverStatus::failure().withUsage();
  }
  if (DriverStatus s = planJob(context, request, plan); !s.ok())
    return s;
  // An existing directory is replaced only when it is a job plan.
  if (llvm::sys::fs::exists(request.output)) {
    llvm::SmallString<256> marker(request.output);
    llvm::sys::path::append(marker, "job.json");
    if (!llvm::sys::fs::is_directory(request.output) || !llvm::sys::fs::exists(marker)) {
      error() << request.output << " exists and is not a job plan directory; nothing written";
      return DriverStatus::failure();
    }
  }
  std::string temporary =
      request.output + ".tmp-" + std::to_string(llvm::sys::Process::getProcessId());
  (void)llvm::sys::fs::remove_directories(temporary);
  auto cleanup = [&] { (void)llvm::sys::fs::remove_directories(temporary); };
  if (std::error_code ec = llvm::sys::fs::create_directories(temporary + "/models")) {
    error() << temporary << ": " << ec.message();
    return DriverStatus::failure();
  }
  for (const JobModel &model : plan.job.models) {
    CompileRequest r = compileRequestOf(model, request);
    r.devices = 1;
    r.output = temporary + "/models/" + model.name;
    cost::ClusterSpec spec;
    if (DriverStatus s = setUpCluster(context, r, spec); !s.ok()) {
      cleanup();
      return s;
    }
    CompileResult result;
    if (DriverStatus s = compilePlan(context, r, &spec, result); !s.ok()) {
      error() << "compiling model '" << model.name << "' of the job failed; nothing written";
      cleanup();
      return s;
    }
    if (request.progress)
      request.progress("compiled " + model.name);
  }
  {
    std::ofstream out(temporary + "/job.json", std::ios::binary);
    out << plan.json();
    if (!out.flush()) {
      error() << temporary << "/job.json: cannot write";
      cleanup();
      return DriverStatus::failure();
    }
  }
  // What cleave train --job will check, checked before the directory
  // appears (as plans are verified before theirs).
  runtime::JobPlan written;
  runtime::Status loaded = runtime::loadJobPlan(temporary, &written);
  if (loaded.ok())
    loaded = runtime::checkJobModels(written);
  if (!loaded.ok()) {
    error() << "the compiled job plan does not load: " << loaded.message();
    cleanup();
    return DriverStatus::failure();
  }
  (void)llvm::sys::fs::remove_directories(request.output);
  if (std::error_code ec = llvm::sys::fs::rename(temporary, request.output)) {
    error() << request.output << ": " << ec.message();
    cleanup();
    return DriverStatus::failure();
  }
  return {};
}

} // namespace cleave
