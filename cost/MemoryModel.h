//===- MemoryModel.h - Memory of one device under a strategy ---*- C++ -*-===//
//
// Bytes one device holds at its peak, by category: parameters, gradients,
// optimizer state (AdamW), saved activations, communication buffers and
// kernel workspace. The caller says what this device holds (its share of the
// model after tensor and pipeline parallelism, its activations per
// microbatch); this model adds what data-parallel sharding (ZeRO) and the
// pipeline schedule do to it. docs/cluster-spec.md, "Memory model".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/DType.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cleave::cost {

/// Pipeline schedules: GPipe runs every microbatch's forward before any
/// backward; 1F1B alternates after a warm-up; Interleaved is Megatron's 1F1B
/// over several model chunks (virtual stages) per device.
enum class Schedule : uint8_t { GPipe, OneFOneB, Interleaved };
/// "gpipe", "1f1b", "interleaved".
std::string_view scheduleName(Schedule schedule);
std::optional<Schedule> parseSchedule(std::string_view name);

/// What data parallelism shards across its ranks; each level includes the
/// ones before it (ZeRO stages 1, 2, 3).
enum class ShardingLevel : uint8_t { None, OptimizerState, Gradients, Parameters };
/// "none", "optimizer", "gradients", "parameters".
std::string_view shardingLevelName(ShardingLevel level);
std::optional<ShardingLevel> parseShardingLevel(std::string_view name);

struct MemoryInputs {
  bool training = true;
  /// Parameters this device holds after tensor and pipeline parallelism,
  /// before data-parallel sharding.
  int64_t parameters = 0;
  /// The dtype parameters and gradients are kept in for compute (bf16 with
  /// mixed precision, f32 otherwise).
  runtime::DType paramDType = runtime::DType::F32;
  /// AdamW with fp32 master weights and fp32 moments next to low-precision
  /// parameters and gradients (12 B/param of optimizer state); otherwise
  /// AdamW's two moments in paramDType.
  bool mixedPrecision = false;
  int dp = 1; // data-parallel degree: the ranks sharding divides over
  ShardingLevel sharding = ShardingLevel::None;

  /// Training: activation bytes saved for backward per microbatch by the
  /// layers that do not recompute.
  double activationBytesPerMicrobatch = 0;
  /// Training: bytes kept per microbatch by the layers that recompute (each
  /// one's input).
  double checkpointBytesPerMicrobatch = 0;
  /// Training: the largest recomputing layer's activations, re-materialized
  /// during its backward (0 when none recomputes).
  double recomputeWorkingBytes = 0;
  /// Every layer recomputes: activationBytesPerMicrobatch is ignored.
  bool recompute = false;

  Schedule schedule = Schedule::OneFOneB;
  int pp = 1;            // pipeline stages (devices along the pipeline)
  int stage = 0;         // this device's pipeline rank, 0-based
  int microbatches = 1;  // per iteration
  int virtualStages = 1; // model chunks per device (Interleaved only)

  /// Inference: the stored bytes of everything the weights hold (parameters,
  /// buffers and constants, each in its own dtype) when known exactly, as for
  /// an imported model; otherwise parameters × paramDType bytes.
  std::optional<double> parameterBytes;
  /// Inference: peak bytes of live activations during one forward.
  double inferenceActivationBytes = 0;
  /// Communication buffers (NCCL, gathered ZeRO-3 parameters of one layer,
  /// pipeline send/receive buffers).
  double commBufferBytes = 0;
  /// Kernel scratch (cuBLAS workspace, im2col buffers).
  double workspaceBytes = 0;
};

struct MemoryBreakdown {
  double parameters = 0;
  double gradients = 0;
  double optimizerState = 0;
  double activations = 0;
  double commBuffers = 0;
  double workspace = 0;
  /// Spilling: device copies of host-held parameters (the layer computing
  /// and the one prefetched) and a gradient on its way to the host.
  double prefetched = 0;
  /// Spilling: what host memory holds (parameters, their gradients' copies
  /// and optimizer state of the spilled layers); not in total().
  double host = 0;

  double total() const {
    return parameters + gradients + optimizerState + activations + commBuffers + workspace +
           prefetched;
  }
};

/// Model chunks whose forward activations stage `stage` holds at once at the
/// schedule's peak: GPipe m; 1F1B min(pp − stage, m); Interleaved with v
/// chunks per device min(m·v, 2·(pp − stage − 1) + (v − 1)·pp + 1) (v = 1 is
/// plain 1F1B). With one chunk per device a chunk is a whole microbatch.
int inFlightChunks(Schedule schedule, int pp, int stage, int microbatches, int virtualStages);
/// inFlightChunks in microbatches' worth of this device's activations: each
/// chunk holds 1/v of the device's layers.
double inFlightMicrobatches(Schedule schedule, int pp, int stage, int microbatches,
                            int virtualStages);

MemoryBreakdown predictMemory(const MemoryInputs &inputs);

/// The breakdown as JSON: {"parameters", "gradients", "optimizer_state",
/// "activations", "comm_buffers", "workspace", "total"} in bytes; the form
/// `cleave cost --json` and the strategy JSON share.
std::string memoryBreakdownJson(const MemoryBreakdown &memory);

} // namespace cleave::cost
