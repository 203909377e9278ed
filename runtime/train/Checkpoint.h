//===- Checkpoint.h - Saving and resuming a training run ------------------===//
//
// A checkpoint directory DIR holds one subdirectory per saved step,
// ckpt-<step>/, and a file `latest` naming the newest. Each ckpt-<step>/ has
//   weights.safetensors   the model's tensors the program holds: its
//                         parameters and state_dict buffers (not the plan's
//                         constants, which never change and whose names
//                         depend on how the plan was compiled: a checkpoint
//                         resumes in a plan for another mesh)
//   state.safetensors     every state: optimizer moments, the step counter
//   checkpoint.json       the step, the seed (the dropout generator is a
//                         function of seed and step, so this is its whole
//                         state), the data position and shuffle seed, what
//                         the plan and data were, and each file's size and
//                         FNV-1a 64 checksum.
// That is version 1. A plan with pipeline stages, tensor splits or ZeRO
// parts writes version 2: instead of the two files, stage<s>.weights.safetensors
// and stage<s>.state.safetensors per stage (each written by its stage's first
// rank; with a tp group stage<s>.tp<t>.*, one pair per tp index, the whole
// tensors only from tp index 0) and stage<s>[.tp<t>].dp<d>.*.safetensors
// holding rank d's ZeRO parts, and checkpoint.json adds the global index
// (each tensor's dtype, whole shape, and its file or its parts' files and
// element ranges; a tp rank's part, NAME[split(D) t/n], also names its
// tensor, whole shape and slice).
// A checkpoint is written into a temporary directory, synced, and renamed
// into place; only then does `latest` (itself replaced atomically) name it.
// A crash at any point leaves the previous checkpoint and `latest` intact.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"
#include "runtime/Safetensors.h"
#include "runtime/Status.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>
#include <optional>
#include <string>

namespace cleave::runtime {

class Executor;

struct CheckpointInfo {
  /// Steps completed.
  int64_t step = 0;
  int64_t seed = 0;
  std::optional<uint64_t> shuffleSeed;
  /// The data file's sample count and size (resuming on other data would
  /// not continue the same run).
  int64_t dataSamples = 0;
  uint64_t dataBytes = 0;
};

/// How this rank holds the states the plan shards with ZeRO
/// (BufferSpec::shardOf): its index in the dp group, and a gather of every
/// rank's part (an all-gather: `whole` gets part r at r * count). A
/// checkpoint holds such states whole, so it resumes on any mesh.
struct CheckpointShards {
  int64_t index = 0, ranks = 1;
  std::function<Status(const void *part, void *whole, size_t count, DType dtype)> gather;
};

/// A weight or state of the executor's program as the whole tensor, read
/// off the device; when the program holds a ZeRO part of it, every rank's
/// part is gathered (a collective: every rank of the dp group calls it for
/// the same tensors in the same order).
Status readWholeWeight(const Executor &executor, const CheckpointShards &shards,
                       const std::string &name, std::vector<char> *out);
Status readWholeState(const Executor &executor, const CheckpointShards &shards,
                      const BufferSpec &state, std::vector<char> *out);

/// The tensors a checkpoint keeps, read off the device: the model's
/// weights, and the states whole. With sharded states every rank of the dp
/// group calls this together.
struct CheckpointTensors {
  std::vector<std::vector<char>> data;
  std::vector<SafetensorsTensor> weights, states;
};
Status collectCheckpoint(const Plan &plan, const Executor &executor,
                         const CheckpointShards &shards, CheckpointTensors *tensors);

/// Writes ckpt-<info.step>/ under `root` (created if missing) and points
/// `latest` at it. `*path` gets the checkpoint's directory.
Status writeCheckpoint(const std::string &root, const Plan &plan, const ProgramSpec &program,
                       const CheckpointTensors &tensors, const CheckpointInfo &info,
                       std::string *path);

/// A pipelined or tensor-parallel plan's ranks writing one checkpoint
/// together: each (stage, tp index)'s first rank (dp 0) writes its
/// program's tensors, the first rank of the job the index. `agree` is collective (every rank calls it with its
/// status and gets one status, all ok or the failures).
struct CheckpointGroup {
  int64_t rank = 0, stage = 0, dp = 0;
  bool writesStage = false;
  std::function<Status(const Status &)> agree;
};

/// What one rank writes of a checkpoint (version 2), read off the device
/// with no collective: the tensors its program holds whole, and its ZeRO
/// parts of the sharded ones, the padding dropped (a part holds elements
/// [dp·k, dp·k + n) of the flattened tensor, k = ceil(numel / ranks)).
struct LocalCheckpoint {
  std::deque<std::vector<char>> data;
  std::vector<SafetensorsTensor> weights, states;
  std::vector<SafetensorsTensor> weightParts, stateParts;
};
Status collectLocalCheckpoint(const Plan &plan, const Executor &executor, int64_t dpIndex,
                              LocalCheckpoint *out);

/// Version 2, one checkpoint from every rank (every rank calls it with what
/// collectLocalCheckpoint gave it), all files written into one temporary
/// directory: each stage's first rank writes stage<s>.weights.safetensors
/// and stage<s>.state.safetensors (a tensor several stages hold, a tied
/// weight or the step counter, only the first of them), and every rank of
/// a plan with ZeRO parts its own stage<s>.dp<d>.weights/state.safetensors.
/// Then rank 0 writes checkpoint.json with every file's size and checksum
/// and the global index (each tensor's name, dtype and whole shape, and its
/// file, or its parts with the element range each holds), renames the
/// directory into place and replaces `latest`. Any plan loads it.
Status writeShardedCheckpoint(const std::string &root, const Plan &plan,
                              const ProgramSpec &program, const LocalCheckpoint &local,
                              const CheckpointInfo &info, const CheckpointGroup &group,
                              std::string *path);

/// Whether `program` is the first (lowest stage) of the plan's programs to
/// hold the weight or state `name`: the one that writes it when several do.
bool firstHolder(const Plan &plan, const ProgramSpec &program, const std::string &name,
                 bool state);

/// collectCheckpoint, then writeCheckpoint, on one rank.
Status saveCheckpoint(const std::string &root, const Plan &plan, const Executor &executor,
                      const CheckpointInfo &info, std::string *path);

/// Reads the checkpoint `path` names: a checkpoint directory itself, or a
/// root whose `latest` names one, of version 1 (one weights and one state
/// file) or 2 (a pipeline's files with a global index). Every file is
/// checked (checksums, the plan's weights and states by name, shape and
/// dtype) before anything is written into the executor; the checkpoint may
/// hold tensors of the plan's other programs (another stage's), not of
/// another model. A sharded state gets this rank's part; a tensor the
/// program holds as a tp part is cut from the whole, which is assembled
/// from the checkpoint's own tp parts when it was written on another mesh.
Status loadCheckpoint(const std::string &path, const Plan &plan, Executor &executor,
                      CheckpointInfo *info, std::string *resolved = nullptr,
                      const CheckpointShards &shards = {});

/// FNV-1a 64 of a file's bytes.
Status fileChecksum(const std::string &path, uint64_t *checksum, uint64_t *bytes);

} // namespace cleave::runtime
