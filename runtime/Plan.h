//===- Plan.h - A loaded, validated plan directory ------------------------===//
//
// A plan directory (docs/plan-format.md):
//   manifest.json             model, inputs/outputs, mesh, batch, schedule,
//                             groups, devices, parameters, programs
//   programs/<program>.json   buffers and per-phase instruction lists
//   weights/<program>.safetensors   (absent when model.weights is false)
// loadPlan reads and cross-checks all of it; a plan that loads is internally
// consistent (every buffer in range and typed as its weight, every binding
// matching the manifest, every rank where the mesh puts it, every schedule
// slot naming a phase its stage's programs have). Kernel contracts are
// checked by the Executor, which knows the backend; whether the ranks of a
// multi-device plan compose (matching sends, collectives, weight shards) by
// verifyPlan (runtime/PlanVerify.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Attributes.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cleave::runtime {

/// A weight's slot in a weights region laid out by the runtime (a program
/// holding ZeRO parts): its bytes rounded up to 64.
inline size_t alignWeightSlot(size_t bytes) { return (bytes + 63) / 64 * 64; }

/// The part of a tensor of `whole` elements that rank `index` of `ranks`
/// holds under ZeRO, as a byte copy: `part` (k elements of `elementBytes`)
/// gets elements [index*k, (index+1)*k) of `data`, zeros past its end.
void copyZeroPart(const void *data, size_t wholeBytes, int64_t index, void *part,
                  size_t partBytes);

/// Inference plans; training plans are version 2 (state, in-place updates,
/// backward and optimizer phases). This runtime reads both.
constexpr int kPlanFormatVersion = 1;
constexpr int kTrainingPlanFormatVersion = 2;

/// Where a weight or state lives (version 2, a buffer's "pool"): device
/// memory, or the host pool, outside the device's budget, which `prefetch`
/// copies into the arena before use and `spill` copies back into.
enum class Pool : uint8_t { Device, Host };

/// "device" or "host".
const char *poolName(Pool pool);

/// A tensor of a program: a region of the arena, or a weight (possibly seen
/// with another shape of the same size).
struct BufferSpec {
  int64_t id = 0;
  /// What the buffer holds, in the user's words: a weight path, an input
  /// name, or the module scope and op that produced it.
  std::string name;
  TensorDesc desc;
  /// Set for arena buffers: byte offset in the arena.
  std::optional<size_t> arenaOffset;
  /// Set for weight buffers: the tensor's name in the weights file.
  std::optional<std::string> weight;
  /// Set for state buffers (version 2): the state's name and its byte offset
  /// in the program's state region (optimizer moments, the step counter).
  std::optional<std::string> state;
  std::optional<size_t> stateOffset;
  /// Set for a state or weight that holds this rank's ZeRO part of a
  /// tensor of this shape: the tensor flattened and zero-padded to dp * k
  /// elements (k = this buffer's elements), of which rank r of the dp group
  /// holds [r*k, (r+1)*k).
  std::optional<Shape> shardOf;
  /// A weight's or state's pool; arena buffers are always on the device.
  /// Every buffer viewing one weight or state has the same pool.
  Pool pool = Pool::Device;

  /// Weights and states outlive a step; arena buffers do not.
  bool persistent() const { return !arenaOffset; }
  bool onHost() const { return pool == Pool::Host; }
};

/// What the compiler's cost model says one instruction's kernel does (an
/// instruction's optional "cost"): its op class ("gemm", "convolution",
/// "elementwise", ...; cost/OpCost.h names them), FLOPs, and bytes read
/// and written. Reports set measured time against it (runtime/Roofline.h).
struct InstructionCost {
  std::string opClass;
  double flops = 0;
  double bytes = 0;
};

struct InstructionSpec {
  std::string kernel;
  /// Buffer ids; std::nullopt for an absent optional operand.
  std::vector<std::optional<int64_t>> inputs;
  std::vector<int64_t> outputs;
  /// Arena region the kernel may use while it runs.
  size_t scratchOffset = 0;
  size_t scratchBytes = 0;
  Attributes attrs;
  /// Source location of the op, "model.py:42 (in blocks.0.attn)".
  std::string loc;
  /// Absent in plans from before the field, and for kernels the cost model
  /// does not count (collectives, send, recv).
  std::optional<InstructionCost> cost;
};

struct Binding {
  std::string name;
  int64_t buffer = 0;
  /// The phase (index in ProgramSpec::phases) the binding belongs to; absent
  /// in single-device programs, whose bindings hold for every phase.
  std::optional<int64_t> phase;
};

struct Phase {
  /// "forward"; training plans add "backward" and "optimizer".
  std::string name;
  /// The model chunk the phase runs: the program's stage unless the
  /// schedule interleaves chunks.
  int64_t chunk = 0;
  /// Set in a pipeline stage's training step, whose program holds a phase
  /// per slot of its schedule: the one microbatch the phase runs. Unset:
  /// the phase runs every microbatch.
  std::optional<int64_t> microbatch;
  /// This phase's bindings (the program's bindings of this phase index, or
  /// all of them in single-device programs).
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<InstructionSpec> instructions;
};

struct ProgramSpec {
  std::string name;
  std::string file;
  /// Empty when the plan has no weights (model.weights false).
  std::string weightsFile;
  /// The (stage, tp index) the program runs; 0 and 0 on one device.
  int64_t stage = 0, tp = 0;
  size_t arenaBytes = 0;
  /// The state region (version 2): zeroed when the program is loaded.
  size_t stateBytes = 0;
  /// The host state region ("host_state_bytes"): the states in the host
  /// pool, zeroed when the program is loaded, outside the device's memory.
  size_t hostStateBytes = 0;
  /// The weights file's data bytes, or the manifest's weight_bytes when the
  /// plan has no weights.
  size_t weightBytes = 0;
  std::vector<BufferSpec> buffers; // indexed by id
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<Phase> phases;
  /// Empty when the plan has no weights.
  SafetensorsIndex weights;
  /// Weights the program holds as the rank's ZeRO part (BufferSpec::shardOf
  /// on their buffers), by name: the whole tensor's shape, which is what
  /// the file holds.
  std::map<std::string, Shape> weightShards;
  /// Weights in the host pool (a buffer's "pool": "host"), by name.
  std::set<std::string> hostWeights;
  /// Where each weight lies in the weights region the runtime allocates,
  /// and its bytes there: the file's layout, unless the program holds ZeRO
  /// parts or host-pool weights (`slottedWeights`: then every weight gets a
  /// 64-byte aligned slot in file order, a part only its part's bytes, in
  /// the device weights region or, `host`, in the host weights region).
  struct WeightSlot {
    size_t offset = 0, bytes = 0;
    bool host = false;
  };
  std::map<std::string, WeightSlot> weightSlots;
  bool slottedWeights = false;
  /// The device weights region (the manifest's weight_bytes, with weights)
  /// and the host weights region.
  size_t weightRegionBytes = 0;
  size_t hostWeightRegionBytes = 0;
  /// True when some weight or state is in the host pool (a spilled plan).
  bool hostPool = false;
  /// False for another rank's program under loadPlanForRank: only name,
  /// files, stage and tp are set.
  bool loaded = true;

  /// The first phase of that name (single-device programs have one).
  const Phase *findPhase(const std::string &name) const;
  const Phase *findPhase(const std::string &name, int64_t chunk,
                         std::optional<int64_t> microbatch = std::nullopt) const;
  /// The index of the phase that runs `slot`, or -1.
  int64_t phaseIndex(const std::string &name, int64_t chunk, int64_t microbatch) const;
  /// Bytes the runtime allocates for this program in device memory:
  /// arena, device weights, device state.
  size_t predictedBytes() const { return arenaBytes + weightBytes + stateBytes; }
  /// Bytes it allocates in host memory (the host pool, the manifest's
  /// host_bytes): host weights and host state.
  size_t hostBytes() const { return hostWeightRegionBytes + hostStateBytes; }
  /// The whole tensor's shape when the program holds weight `name` as the
  /// rank's ZeRO part.
  const Shape *weightShard(const std::string &name) const {
    auto it = weightShards.find(name);
    return it == weightShards.end() ? nullptr : &it->second;
  }
  /// The index of the first phase named `name`, or -1.
  int64_t phaseIndex(const std::string &name) const;
  /// The weight holding the model's tensor `tensor`: the tensor whole, or
  /// this tp rank's part of it (`tensor[split(D) t/n]`); null when none.
  const SafetensorsEntry *weightHolding(const std::string &tensor) const;
};

struct TensorSpec {
  std::string name;
  TensorDesc desc;
  /// The dim that holds the samples; absent when the plan does not say
  /// (single-device plans) or says null (no batch dim).
  std::optional<int64_t> batchDim;
};

/// One entry of a stage's schedule: run phase `phase` of chunk `chunk` on
/// microbatch `microbatch`.
struct ScheduleSlot {
  std::string phase = "forward";
  int64_t chunk = 0;
  int64_t microbatch = 0;
};

/// How timelines name a slot: "F mb0 chunk1", "B mb0 chunk1" or
/// "optimizer" (cleave inspect --trace predicts them, cleave train --trace
/// measures them).
std::string slotName(const ScheduleSlot &slot);

/// The compiler's predictions (manifest.json "predicted"); what a plan does
/// not record stays absent.
struct PredictedCost {
  std::optional<double> stepSeconds, computeSeconds, communicationSeconds, bubbleSeconds;
  std::optional<int64_t> memoryBudgetBytes;
  /// The largest program's arena, weights and their sum.
  std::optional<int64_t> arenaBytes, weightBytes, totalBytes;
  /// Training plans: the state region, and the total by category
  /// (parameters, buffers, optimizer_state, activations, gradients,
  /// temporaries, arena_unused), by name.
  std::optional<int64_t> stateBytes;
  std::vector<std::pair<std::string, int64_t>> byCategory;
  /// A spilled plan's host pool (memory_bytes.host): host weights and host
  /// state, outside `totalBytes`.
  std::optional<int64_t> hostBytes;
};

/// One entry of the model's state_dict: the weight that holds it, or the
/// extra file that keeps a tensor the program never reads.
struct StateDictEntry {
  std::string name;
  std::string tensor; // a weight of the program
  std::string file;   // or a safetensors file in the plan, holding `name`
};

/// The optimizer as the update instructions hold it (manifest.json
/// training.optimizer), for reports and checkpoints.
struct OptimizerSpec {
  std::string kind = "none"; // adamw, sgd or none
  double lr = 0, weightDecay = 0, beta1 = 0, beta2 = 0, eps = 0;
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  std::optional<double> clipGradNorm;
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
};

/// manifest.json `training` (version 2).
struct TrainingSpec {
  std::string loss;
  /// The input the appended loss reads its targets from; empty with
  /// --loss model.
  std::string labels;
  int64_t batchSize = 0;
  std::string dtype = "f32";
  int64_t seed = 0;
  /// ZeRO over the dp group: "none", "optimizer", "gradients" or
  /// "parameters" (absent in older plans: none).
  std::string zero = "none";
  OptimizerSpec optimizer;
  std::vector<std::string> parameters;
  std::vector<StateDictEntry> stateDict;
};

/// One rank: where it sits in the mesh and the program it runs.
struct DeviceSpec {
  int64_t rank = 0;
  std::string backend;
  int64_t stage = 0, tp = 0, dp = 0;
  std::string program;
};

/// Rank lists of the groups ranks communicate in, each in rank order.
struct Groups {
  std::vector<std::vector<int64_t>> tp, dp, pipeline;
};

struct Plan {
  std::string dir;
  int64_t version = 0;
  std::string modelSource;
  /// False for a model exported on the meta device: no weight files, the
  /// plan is for inspection and verification only.
  bool hasWeights = true;
  /// Shapes at the global batch.
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t pp = 1, tp = 1, dp = 1;
  /// True when the manifest has "batch": programs are compiled for one
  /// microbatch and bind only what their phases read and write.
  bool hasBatch = false;
  int64_t globalBatch = 0, microbatchSize = 0;
  std::string schedule;
  int64_t microbatches = 1;
  int64_t virtualStages = 1;
  /// Per stage, its slots in order (a forward over every microbatch when
  /// the manifest lists none).
  std::vector<std::vector<ScheduleSlot>> stageSlots;
  /// A pipelined training plan's schedule (gpipe, 1f1b or interleaved):
  /// the order of its stages' slots (schedule.pipeline).
  std::string pipelineSchedule;
  /// A training step written per (stage, tp index) in slot order: pipelines,
  /// tensor splits, and recomputation even on one stage.
  bool partitionedTraining() const { return pp > 1 || tp > 1 || !pipelineSchedule.empty(); }
  /// From the manifest, or derived from the mesh when it has none.
  Groups groups;
  std::vector<DeviceSpec> devices;
  /// Every parameter at its full shape (multi-device plans).
  std::map<std::string, TensorDesc> parameters;
  std::map<std::string, ProgramSpec> programs;
  PredictedCost predicted;
  /// Set for training plans (schedule kind "train").
  std::optional<TrainingSpec> training;

  const ProgramSpec *programForRank(int64_t rank) const;
  /// Model chunks: pp per virtual stage.
  int64_t chunks() const { return pp * virtualStages; }
  /// The stage that runs chunk `chunk` (chunk c lives on stage c mod pp).
  int64_t stageOfChunk(int64_t chunk) const { return chunk % pp; }
  /// The tp or dp group (`kind`) of `rank`; null for another kind.
  const std::vector<int64_t> *groupOf(const std::string &kind, int64_t rank) const;
};

/// Reads and validates the plan directory `dir`.
Status loadPlan(const std::string &dir, Plan *plan);

/// What one rank of a distributed run reads: the manifest, the program that
/// `rank` runs and its weight file's header, nothing of the other ranks'
/// programs (their entries keep only name, files, stage and tp, and
/// `loaded` false). The manifest's own checks all hold; those that need
/// another program's contents are left to `cleave verify`.
Status loadPlanForRank(const std::string &dir, int64_t rank, Plan *plan);

/// The error for running a plan without weights (a meta-device export).
Status planWithoutWeights(const std::string &dir, const std::string &modelSource);

/// The number of devices the manifest lists, whether the plan has weights
/// and the model it came from (all a launcher needs to know).
Status readPlanDeviceCount(const std::string &dir, int64_t *devices, bool *hasWeights = nullptr,
                           std::string *modelSource = nullptr);

} // namespace cleave::runtime
