//===- RankRunner.h - One rank of a multi-device plan ------------*- C++
//-*-===//
//
// Every rank of `mpirun -np N cleave run PLAN` builds one RankRunner. It
// reads only its own program and weight shard, splits the tp and dp groups
// off the world, and runs its stage's schedule slots in the manifest's
// order: for each slot, it copies the slot's microbatch of the model inputs
// the phase reads (dp index D, microbatch m: samples
// [D*global/dp + m*microbatch_size, ...) along batch_dim), runs the phase,
// and keeps the microbatch of any model output it computes. Rank 0 gathers
// the outputs and writes them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/DeviceBackends.h"
#include "runtime/Executor.h"
#include "runtime/comm/CommKernels.h"

#include <map>
#include <memory>

namespace cleave::runtime {

/// Where a rank's time went, summed over its instructions (seconds per step).
struct RankTimes {
  double step = 0;          // wall time of the rank's slots, sends drained
  double compute = 0;       // kernels that compute
  double communication = 0; // collectives and sends
  double waiting = 0;       // recvs (mostly waiting for the previous stage) and the
                            // rest of the step outside kernels (input copies)
};

/// One rank's measurements, gathered to rank 0 by `report`.
struct RankReport {
  int64_t rank = 0, stage = 0, tp = 0, dp = 0;
  RankTimes measured;            // the mean of the steps after the first, or the only one
  int64_t planBytes = 0;         // arena + weights: what the plan predicts and allocates
  int64_t commBytes = 0;         // staging the comm kernels hold besides
  int64_t peakResidentBytes = 0; // the process's peak resident set (getrusage)
};

/// The report of a forward run (`cleave run --report-json`): the plan's mesh
/// and schedule, its predicted step by component, and each rank's measured
/// step by component (the mean of `repeat` - 1 steps after a warm-up one, or
/// the only one), with its memory. JSON text.
std::string formatRunReport(const Plan &plan, const std::string &planDir, int repeat,
                            const std::vector<RankReport> &reports);

/// One status for every rank of `world`: ok if all are, else the failed
/// ranks' messages (identical ones once, with their ranks). Collective.
Status agreeAcrossRanks(Communicator &world, const Status &mine);

/// The mesh groups of `rank` of `plan` (collective: every rank of `world`
/// calls it): its tp group, the (stage, dp) row ordered by tp index, and its
/// dp group, the (stage, tp) ranks ordered by dp index.
Status splitMeshGroups(Communicator &world, const Plan &plan, int64_t rank,
                       std::unique_ptr<Communicator> *tp, std::unique_ptr<Communicator> *dp);

class RankRunner {
public:
  /// Loads `rank`'s part of the plan in `dir` and prepares it on `compute`.
  /// `world` is the job's world (its size must be the plan's device count).
  /// Collective over `world`: every rank calls it. On a device backend,
  /// `gpuComm` says how tensors move between the ranks.
  static Status create(const std::string &dir, Communicator &world, Backend &compute,
                       std::unique_ptr<RankRunner> *out, GpuComm gpuComm = GpuComm::Nccl);
  ~RankRunner();

  /// Checks the input file against the plan's inputs (names, global shapes,
  /// dtypes) and keeps this rank's microbatches of those its phases read.
  Status loadInputs(const std::string &path);
  /// Runs this rank's schedule once.
  Status step();
  /// Collective: rank 0 assembles every model output at the global batch and
  /// writes them to `path` (atomically); other ranks send theirs.
  Status writeOutputs(const std::string &path);
  /// Collective: every rank's report, in rank order, on rank 0 (empty
  /// elsewhere).
  Status gatherReports(std::vector<RankReport> *reports);

  const Plan &plan() const { return plan_; }
  const ProgramSpec &program() const { return *program_; }
  int64_t rank() const { return rank_; }

private:
  RankRunner() = default;
  Status runSlot(const ScheduleSlot &slot);

  Plan plan_;
  int64_t rank_ = 0;
  const ProgramSpec *program_ = nullptr;
  std::unique_ptr<Communicator> tp_, dp_, gather_; // gather_: outputs to rank 0
  /// On a GPU backend, NCCL mirrors of the world, tp and dp groups.
  std::unique_ptr<Communicator> deviceWorld_, deviceTp_, deviceDp_;
  Communicator *world_ = nullptr;
  std::unique_ptr<CommBackend> backend_;
  std::unique_ptr<Executor> executor_;
  /// phase index of each chunk this rank runs
  std::map<int64_t, size_t> phaseOfChunk_;
  /// (input name, microbatch) -> bytes of that microbatch
  std::map<std::pair<std::string, int64_t>, std::vector<char>> inputs_;
  /// (output name, microbatch) -> bytes, for the outputs this rank computes
  std::map<std::pair<std::string, int64_t>, std::vector<char>> outputs_;
  RankTimes first_, total_; // the first step; the sum of the others
  int64_t steps_ = 0;
};

} // namespace cleave::runtime
