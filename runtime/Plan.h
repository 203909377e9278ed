//===- Plan.h - A loaded, validated plan directory ------------------------===//
//
// A plan directory (docs/plan-format.md):
//   manifest.json             model, inputs/outputs, mesh, devices, programs
//   programs/<program>.json   buffers and per-phase instruction lists
//   weights/<program>.safetensors
// loadPlan reads and cross-checks all of it; a plan that loads is internally
// consistent (every buffer in range and typed as its weight, every binding
// matching the manifest). Kernel contracts are checked by the Executor, which
// knows the backend.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Attributes.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

constexpr int kPlanFormatVersion = 1;

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
};

struct Phase {
  /// "forward"; training plans add "backward" and "optimizer".
  std::string name;
  std::vector<InstructionSpec> instructions;
};

struct Binding {
  std::string name;
  int64_t buffer = 0;
};

struct ProgramSpec {
  std::string name;
  std::string file;
  std::string weightsFile;
  size_t arenaBytes = 0;
  std::vector<BufferSpec> buffers; // indexed by id
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::vector<Phase> phases;
  SafetensorsIndex weights;

  const Phase *findPhase(const std::string &name) const;
  /// Bytes the runtime allocates for this program: arena plus weights.
  size_t predictedBytes() const { return arenaBytes + weights.dataBytes; }
};

struct TensorSpec {
  std::string name;
  TensorDesc desc;
};

/// One rank: where it sits in the mesh and the program it runs.
struct DeviceSpec {
  int64_t rank = 0;
  std::string backend;
  int64_t stage = 0, tp = 0, dp = 0;
  std::string program;
};

struct Plan {
  std::string dir;
  int64_t version = 0;
  std::string modelSource;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t pp = 1, tp = 1, dp = 1;
  std::string schedule;
  int64_t microbatches = 1;
  std::vector<DeviceSpec> devices;
  std::map<std::string, ProgramSpec> programs;

  const ProgramSpec *programForRank(int64_t rank) const;
};

/// Reads and validates the plan directory `dir`.
Status loadPlan(const std::string &dir, Plan *plan);

} // namespace cleave::runtime
