//===- RankRunner.cpp - one rank's schedule of a multi-device plan --------===//

#include "runtime/comm/RankRunner.h"
#include "runtime/DeviceBackends.h"
#include "runtime/comm/HostStagedCommunicator.h"
#include "runtime/cuda/CudaPlugin.h"

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <map>

namespace cleave::runtime {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}


enum class Category : uint8_t { Compute, Communication, Waiting };

Category categoryOf(const std::string &kernel) {
  if (kernel == "recv")
    return Category::Waiting;
  return isCommKernel(kernel) ? Category::Communication : Category::Compute;
}

int64_t peakResidentBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
}

/// Samples of one microbatch along the batch dim: `pieces` equal runs, this one
/// `piece`.
TensorDesc pieceDesc(const TensorSpec &spec, int64_t pieces) {
  TensorDesc d = spec.desc;
  if (spec.batchDim)
    d.shape[*spec.batchDim] /= pieces;
  return d;
}

} // namespace

/// One status for every rank: ok if all are, else the failed ranks'
/// messages (identical ones once, with their ranks). Collective.
Status splitMeshGroups(Communicator &world, const Plan &plan, int64_t rank,
                       std::unique_ptr<Communicator> *tp, std::unique_ptr<Communicator> *dp) {
  const DeviceSpec &me = plan.devices[rank];
  CLEAVE_RETURN_IF_ERROR(
      world.split(static_cast<int>(me.stage * plan.dp + me.dp), static_cast<int>(me.tp),
                  "tp group " + std::to_string(me.stage * plan.dp + me.dp), tp));
  return world.split(static_cast<int>(me.stage * plan.tp + me.tp), static_cast<int>(me.dp),
                     "dp group " + std::to_string(me.stage * plan.tp + me.tp), dp);
}

Status agreeAcrossRanks(Communicator &world, const Status &mine) {
  constexpr size_t kBytes = 1024; // per rank; longer messages are cut
  std::vector<char> message(kBytes, 0), all(kBytes * world.size(), 0);
  if (!mine.ok()) {
    message[0] = 1;
    std::strncpy(message.data() + 1, mine.message().c_str(), kBytes - 2);
  }
  CLEAVE_RETURN_IF_ERROR(world.allGather(message.data(), all.data(), kBytes / 4, DType::I32));
  std::vector<std::pair<std::string, std::vector<int>>> failures;
  for (int r = 0; r < world.size(); ++r) {
    const char *m = all.data() + r * kBytes;
    if (!m[0])
      continue;
    std::string text(m + 1, strnlen(m + 1, kBytes - 1));
    auto it = std::find_if(failures.begin(), failures.end(),
                           [&](const auto &f) { return f.first == text; });
    if (it == failures.end())
      failures.push_back({text, {r}});
    else
      it->second.push_back(r);
  }
  if (failures.empty())
    return {};
  std::string text;
  for (const auto &[m, ranks] : failures) {
    std::string who = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i)
      who += (i ? ", " : "") + std::to_string(ranks[i]);
    text += (text.empty() ? "" : "\n") + who + ": " + m;
  }
  return CLEAVE_ERROR(text);
}

RankRunner::~RankRunner() {
  if (backend_)
    (void)backend_->finishSends();
}

Status RankRunner::create(const std::string &dir, Communicator &world, Backend &compute,
                          std::unique_ptr<RankRunner> *out, GpuComm gpuComm) {
  std::unique_ptr<RankRunner> r(new RankRunner());
  r->world_ = &world;
  r->rank_ = world.rank();

  int64_t devices = 0;
  CLEAVE_RETURN_IF_ERROR(readPlanDeviceCount(dir, &devices));
  if (devices != world.size())
    return CLEAVE_ERROR(dir, ": the plan has ", devices, " devices, the job ", world.size(),
                        " ranks: run it with mpirun -np ", devices, " or cleave run --local ",
                        devices);
  // Load this rank's part; every rank reports before any goes on.
  Status loaded = loadPlanForRank(dir, r->rank_, &r->plan_).prepend(dir);
  if (loaded.ok() && !r->plan_.hasWeights)
    loaded = planWithoutWeights(dir, r->plan_.modelSource);
  CLEAVE_RETURN_IF_ERROR(agreeAcrossRanks(world, loaded));
  const Plan &plan = r->plan_;
  r->program_ = plan.programForRank(r->rank_);

  CLEAVE_RETURN_IF_ERROR(splitMeshGroups(world, plan, r->rank_, &r->tp_, &r->dp_));
  CLEAVE_RETURN_IF_ERROR(world.split(0, r->rank_, "outputs", &r->gather_));
  RankComms comms{&world, r->tp_.get(), r->dp_.get()};
  if (!compute.sharesHostMemory() && gpuComm == GpuComm::HostMpi) {
    // Device memory through the MPI groups, staged in host memory.
    auto mirror = [&](Communicator &group, std::unique_ptr<Communicator> *out) {
      *out = std::make_unique<HostStagedCommunicator>(group, compute, group.name());
    };
    mirror(world, &r->deviceWorld_);
    mirror(*r->tp_, &r->deviceTp_);
    mirror(*r->dp_, &r->deviceDp_);
    comms = {r->deviceWorld_.get(), r->deviceTp_.get(), r->deviceDp_.get()};
  } else if (!compute.sharesHostMemory()) {
    // Device memory: the kernels' transfers go through NCCL communicators
    // mirroring the MPI groups (outputs still gather on the host, over MPI).
    const CudaPluginApi *api = nullptr;
    Status made = loadCudaPlugin(&api);
    auto mirror = [&](Communicator &group, std::unique_ptr<Communicator> *out) {
      if (made.ok())
        made = api->createNcclCommunicator(group, compute, group.name() + " (NCCL)", out);
    };
    mirror(world, &r->deviceWorld_);
    mirror(*r->tp_, &r->deviceTp_);
    mirror(*r->dp_, &r->deviceDp_);
    CLEAVE_RETURN_IF_ERROR(agreeAcrossRanks(world, made));
    comms = {r->deviceWorld_.get(), r->deviceTp_.get(), r->deviceDp_.get()};
  }

  Status prepared;
  if (plan.training)
    prepared = CLEAVE_ERROR(dir, ": a training plan (schedule 'train', ", plan.devices.size(),
                            " ranks): run it with 'cleave train --local ", plan.devices.size(),
                            "' or 'mpirun -np ", plan.devices.size(), " cleave train'");
  for (size_t p = 0; prepared.ok() && p < r->program_->phases.size(); ++p) {
    const Phase &phase = r->program_->phases[p];
    if (phase.name != "forward") {
      prepared = CLEAVE_ERROR(r->program_->file, ": phase '", phase.name,
                              "' cannot run yet (forward plans only)");
      break;
    }
    r->phaseOfChunk_[phase.chunk] = p;
  }
  if (prepared.ok()) {
    r->backend_ = std::make_unique<CommBackend>(compute, plan, r->rank_, comms);
    prepared =
        Executor::create(*r->program_, *r->backend_, &r->executor_)
            .prepend(dir + " (rank " + std::to_string(r->rank_) + ", " + r->program_->name + ")");
  }
  CLEAVE_RETURN_IF_ERROR(agreeAcrossRanks(world, prepared));
  r->executor_->setProfiling(true);
  *out = std::move(r);
  return {};
}

Status RankRunner::loadInputs(const std::string &path) {
  Status status = [&]() -> Status {
    SafetensorsIndex index;
    CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(path, &index));
    for (const TensorSpec &spec : plan_.inputs) {
      const SafetensorsEntry *entry = index.find(spec.name);
      if (!entry)
        return CLEAVE_ERROR(path, ": missing input '", spec.name, "' (",
                            describe(spec.desc.shape, spec.desc.dtype), ")");
      if (entry->desc != spec.desc)
        return CLEAVE_ERROR(path, ": input '", spec.name, "' is ",
                            describe(entry->desc.shape, entry->desc.dtype), ", the plan expects ",
                            describe(spec.desc.shape, spec.desc.dtype), " (the global batch)");
    }
    for (const SafetensorsEntry &entry : index.entries)
      if (std::none_of(plan_.inputs.begin(), plan_.inputs.end(),
                       [&](const TensorSpec &s) { return s.name == entry.name; }))
        return CLEAVE_ERROR(path, ": unexpected input '", entry.name, "'");

    // This rank's microbatches of the inputs its phases read.
    const int64_t dpIndex = plan_.devices[rank_].dp, M = plan_.microbatches;
    inputs_.clear();
    for (const Phase &phase : program_->phases)
      for (const Binding &b : phase.inputs) {
        if (inputs_.count({b.name, 0}))
          continue;
        const TensorSpec *spec = nullptr;
        for (const TensorSpec &s : plan_.inputs)
          if (s.name == b.name)
            spec = &s;
        std::vector<char> whole(spec->desc.bytes());
        CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(index, *index.find(b.name), whole.data()));
        const int64_t pieces = plan_.dp * M;
        const TensorDesc piece = pieceDesc(*spec, pieces);
        for (int64_t m = 0; m < M; ++m) {
          std::vector<char> &data = inputs_[{b.name, m}];
          data.resize(piece.bytes());
          if (spec->batchDim)
            extractPart(whole.data(), spec->desc.shape, *spec->batchDim, 1, pieces, dpIndex * M + m,
                        dtypeBytes(piece.dtype), data.data());
          else
            data = whole;
        }
      }
    return {};
  }();
  return agreeAcrossRanks(*world_, status);
}

Status RankRunner::runSlot(const ScheduleSlot &slot) {
  auto phase = phaseOfChunk_.find(slot.chunk);
  if (slot.phase != "forward" || phase == phaseOfChunk_.end())
    return CLEAVE_ERROR(program_->name, ": the schedule runs ", slot.phase, " of chunk ",
                        slot.chunk, ", which this program does not have");
  const size_t p = phase->second;
  const Phase &spec = program_->phases[p];
  for (const Binding &b : spec.inputs) {
    const std::vector<char> &data = inputs_.at({b.name, slot.microbatch});
    CLEAVE_RETURN_IF_ERROR(executor_->setPhaseInput(p, b.name, data.data(), data.size()));
  }
  CLEAVE_RETURN_IF_ERROR(executor_->runPhase(p));
  const std::vector<double> &seconds = executor_->lastRunSeconds();
  for (size_t i = 0; i < seconds.size(); ++i) {
    switch (categoryOf(spec.instructions[i].kernel)) {
    case Category::Compute:
      total_.compute += seconds[i];
      break;
    case Category::Communication:
      total_.communication += seconds[i];
      break;
    case Category::Waiting:
      total_.waiting += seconds[i];
      break;
    }
  }
  for (const Binding &b : spec.outputs) {
    const TensorDesc &desc = program_->buffers[b.buffer].desc;
    std::vector<char> &data = outputs_[{b.name, slot.microbatch}];
    data.resize(desc.bytes());
    CLEAVE_RETURN_IF_ERROR(executor_->getPhaseOutput(p, b.name, data.data(), data.size()));
  }
  return {};
}

Status RankRunner::step() {
  auto start = std::chrono::steady_clock::now();
  double inKernels = total_.compute + total_.communication + total_.waiting;
  for (const ScheduleSlot &slot : plan_.stageSlots[plan_.devices[rank_].stage]) {
    Status s = runSlot(slot);
    if (!s.ok())
      return s.prepend("rank " + std::to_string(rank_) + " (" + program_->name + "), " +
                       slot.phase + " chunk " + std::to_string(slot.chunk) + " microbatch " +
                       std::to_string(slot.microbatch));
  }
  CLEAVE_RETURN_IF_ERROR(backend_->finishSends().prepend("rank " + std::to_string(rank_)));
  double seconds = secondsSince(start);
  inKernels = total_.compute + total_.communication + total_.waiting - inKernels;
  total_.step += seconds;
  total_.waiting += std::max(0.0, seconds - inKernels);
  if (++steps_ == 1) {
    // The first step pays for first touches (kernel code generation, pages,
    // connections): kept apart, so repeated steps measure the steady state.
    first_ = total_;
    total_ = RankTimes();
  }
  return {};
}

Status RankRunner::writeOutputs(const std::string &path) {
  Communicator &comm = *gather_;
  const int64_t M = plan_.microbatches, pieces = plan_.dp * M;
  const DeviceSpec &me = plan_.devices[rank_];
  std::vector<std::vector<char>> wholes;
  std::vector<SafetensorsTensor> tensors;
  Status status;
  for (size_t o = 0; o < plan_.outputs.size(); ++o) {
    const TensorSpec &spec = plan_.outputs[o];
    // Who holds it: tp index 0 of the ranks that compute it, one per dp index.
    int32_t holds = me.tp == 0 && outputs_.count({spec.name, 0}) ? 1 : 0;
    std::vector<int32_t> holders(comm.size());
    CLEAVE_RETURN_IF_ERROR(comm.allGather(&holds, holders.data(), 1, DType::I32));
    const TensorDesc piece = pieceDesc(spec, pieces);
    if (holds && rank_ != 0)
      for (int64_t m = 0; m < M; ++m)
        CLEAVE_RETURN_IF_ERROR(comm.send(outputs_.at({spec.name, m}).data(), piece.numel(),
                                         piece.dtype, 0, static_cast<int>(m)));
    if (rank_ != 0)
      continue;
    wholes.emplace_back(spec.desc.bytes());
    for (int64_t r = 0; r < comm.size(); ++r) {
      if (!holders[r])
        continue;
      const int64_t dpIndex = plan_.devices[r].dp;
      std::vector<char> received(piece.bytes());
      for (int64_t m = 0; m < M; ++m) {
        const char *data = nullptr;
        if (r == 0) {
          data = outputs_.at({spec.name, m}).data();
        } else {
          CLEAVE_RETURN_IF_ERROR(comm.recv(received.data(), piece.numel(), piece.dtype,
                                           static_cast<int>(r), static_cast<int>(m)));
          data = received.data();
        }
        if (spec.batchDim)
          insertPart(data, spec.desc.shape, *spec.batchDim, 1, pieces, dpIndex * M + m,
                     dtypeBytes(piece.dtype), wholes.back().data());
        else
          std::memcpy(wholes.back().data(), data, piece.bytes());
      }
    }
    tensors.push_back({spec.name, spec.desc, wholes.back().data()});
  }
  if (rank_ == 0)
    status = writeSafetensors(path, tensors);
  return agreeAcrossRanks(*world_, status);
}

std::string formatRunReport(const Plan &plan, const std::string &planDir, int repeat,
                            const std::vector<RankReport> &reports) {
  using Json = nlohmann::ordered_json;
  auto predicted = [](const std::optional<double> &v) { return v ? Json(*v) : Json(nullptr); };
  Json ranks = Json::array();
  double slowest = 0;
  for (const RankReport &r : reports) {
    slowest = std::max(slowest, r.measured.step);
    ranks.push_back(Json{{"rank", r.rank},
                         {"stage", r.stage},
                         {"tp", r.tp},
                         {"dp", r.dp},
                         {"step_seconds", r.measured.step},
                         {"compute_seconds", r.measured.compute},
                         {"communication_seconds", r.measured.communication},
                         {"waiting_seconds", r.measured.waiting},
                         {"plan_bytes", r.planBytes},
                         {"comm_bytes", r.commBytes},
                         {"peak_resident_bytes", r.peakResidentBytes}});
  }
  Json json{{"plan", planDir},
            {"mesh", Json{{"pp", plan.pp}, {"tp", plan.tp}, {"dp", plan.dp}}},
            {"schedule", plan.schedule},
            {"microbatches", plan.microbatches},
            {"microbatch_size", plan.microbatchSize},
            {"steps", repeat},
            {"measured_steps", repeat > 1 ? repeat - 1 : 1},
            {"step_seconds", slowest},
            {"predicted", Json{{"step_seconds", predicted(plan.predicted.stepSeconds)},
                               {"compute_seconds", predicted(plan.predicted.computeSeconds)},
                               {"communication_seconds",
                                predicted(plan.predicted.communicationSeconds)},
                               {"bubble_seconds", predicted(plan.predicted.bubbleSeconds)}}},
            {"ranks", ranks}};
  return json.dump(1) + "\n";
}

Status RankRunner::gatherReports(std::vector<RankReport> *reports) {
  constexpr int kFields = 11;
  RankTimes mean = steps_ > 1 ? total_ : first_;
  if (steps_ > 2)
    for (double *t : {&mean.step, &mean.compute, &mean.communication, &mean.waiting})
      *t /= steps_ - 1;
  const DeviceSpec &me = plan_.devices[rank_];
  int64_t mine[kFields] = {rank_,
                           me.stage,
                           me.tp,
                           me.dp,
                           0,
                           0,
                           0,
                           0,
                           static_cast<int64_t>(program_->predictedBytes()),
                           static_cast<int64_t>(backend_->heldBytes()),
                           peakResidentBytes()};
  double times[4] = {mean.step, mean.compute, mean.communication, mean.waiting};
  std::memcpy(&mine[4], times, sizeof(times));
  std::vector<int64_t> all(kFields * world_->size());
  CLEAVE_RETURN_IF_ERROR(world_->allGather(mine, all.data(), kFields, DType::I64));
  reports->clear();
  if (rank_ != 0)
    return {};
  for (int r = 0; r < world_->size(); ++r) {
    const int64_t *f = &all[r * kFields];
    RankReport report;
    report.rank = f[0];
    report.stage = f[1];
    report.tp = f[2];
    report.dp = f[3];
    double t[4];
    std::memcpy(t, &f[4], sizeof(t));
    report.measured = {t[0], t[1], t[2], t[3]};
    report.planBytes = f[8];
    report.commBytes = f[9];
    report.peakResidentBytes = f[10];
    reports->push_back(report);
  }
  return {};
}

} // namespace cleave::runtime
