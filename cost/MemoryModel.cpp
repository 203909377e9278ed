#include "cost/MemoryModel.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace cleave::cost {
namespace {
constexpr std::array<std::string_view, 3> kScheduleNames = {"gpipe", "1f1b", "interleaved"};
constexpr std::array<std::string_view, 4> kShardingNames = {"none", "optimizer", "gradients",
                                                            "parameters"};
} // namespace

std::string_view scheduleName(Schedule schedule) {
  return kScheduleNames[static_cast<int>(schedule)];
}

std::optional<Schedule> parseSchedule(std::string_view name) {
  for (size_t i = 0; i < kScheduleNames.size(); ++i)
    if (kScheduleNames[i] == name)
      return static_cast<Schedule>(i);
  return std::nullopt;
}

std::string_view shardingLevelName(ShardingLevel level) {
  return kShardingNames[static_cast<int>(level)];
}

std::optional<ShardingLevel> parseShardingLevel(std::string_view name) {
  for (size_t i = 0; i < kShardingNames.size(); ++i)
    if (kShardingNames[i] == name)
      return static_cast<ShardingLevel>(i);
  return std::nullopt;
}

int inFlightChunks(Schedule schedule, int pp, int stage, int microbatches, int virtualStages) {
  int m = std::max(1, microbatches);
  int remaining = std::max(1, pp - stage); // stages from this one to the last
  if (schedule == Schedule::GPipe)
    return m;
  if (schedule == Schedule::OneFOneB || virtualStages <= 1)
    return std::min(remaining, m);
  // Megatron's warm-up: 2·(pp − stage − 1) + (v − 1)·pp forward chunks, then
  // one more forward before the first backward frees a chunk.
  int v = virtualStages;
  return std::min(m * v, 2 * (remaining - 1) + (v - 1) * pp + 1);
}

double inFlightMicrobatches(Schedule schedule, int pp, int stage, int microbatches,
                            int virtualStages) {
  int v = schedule == Schedule::Interleaved ? std::max(1, virtualStages) : 1;
  return double(inFlightChunks(schedule, pp, stage, microbatches, virtualStages)) / v;
}

MemoryBreakdown predictMemory(const MemoryInputs &in) {
  MemoryBreakdown out;
  double params = double(in.parameters);
  double elementBytes = double(runtime::dtypeBytes(in.paramDType));
  out.commBuffers = in.commBufferBytes;
  out.workspace = in.workspaceBytes;
  if (!in.training) {
    out.parameters = in.parameterBytes ? *in.parameterBytes : params * elementBytes;
    out.activations = in.inferenceActivationBytes;
    return out;
  }

  // ZeRO's accounting: 2 + 2 + 12 bytes per parameter with mixed precision
  // (fp32 master copy and two fp32 moments); 4 + 4 + 8 in plain f32.
  double optimizerBytes = in.mixedPrecision ? 12.0 : 2.0 * elementBytes;
  double dp = std::max(1, in.dp);
  auto shardedAt = [&](ShardingLevel level) { return in.sharding >= level ? dp : 1.0; };
  out.parameters = params * elementBytes / shardedAt(ShardingLevel::Parameters);
  out.gradients = params * elementBytes / shardedAt(ShardingLevel::Gradients);
  out.optimizerState = params * optimizerBytes / shardedAt(ShardingLevel::OptimizerState);

  double inFlight =
      inFlightMicrobatches(in.schedule, in.pp, in.stage, in.microbatches, in.virtualStages);
  // Layers that recompute keep only their inputs (checkpoints) per
  // microbatch in flight, plus one layer's activations while it recomputes.
  double kept = in.recompute ? 0.0 : in.activationBytesPerMicrobatch;
  out.activations =
      inFlight * (kept + in.checkpointBytesPerMicrobatch) + in.recomputeWorkingBytes;
  return out;
}

std::string memoryBreakdownJson(const MemoryBreakdown &m) {
  nlohmann::json j = {{"parameters", m.parameters},   {"gradients", m.gradients},
                      {"optimizer_state", m.optimizerState}, {"activations", m.activations},
                      {"comm_buffers", m.commBuffers}, {"workspace", m.workspace},
                      {"total", m.total()}};
  if (m.prefetched > 0 || m.host > 0) {
    j["prefetched"] = m.prefetched;
    j["host"] = m.host;
  }
  return j.dump();
}

} // namespace cleave::cost
