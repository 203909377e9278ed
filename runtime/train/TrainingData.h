//===- TrainingData.h - The samples a training run reads ------------------===//
//
// A data file is safetensors with one tensor per plan input, dim 0 indexing
// the samples and the other dims those of one sample. Step s (from 0) takes
// samples [s*B, (s+1)*B) modulo the sample count, B being the plan's batch;
// with a shuffle seed each pass over the data (epoch) takes them in an order
// drawn from that seed and the epoch, so any step's batch is known from its
// number alone: resuming needs no more than the step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"
#include "runtime/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

class Executor;

class TrainingData {
public:
  /// Reads `path` and checks it against the plan's inputs: every input
  /// present with its dtype and per-sample shape, nothing else, the same
  /// number of samples in each, at least one batch of them.
  static Status load(const std::string &path, const Plan &plan, TrainingData *out);

  int64_t samples() const { return samples_; }
  const std::string &path() const { return path_; }
  /// The file's size, to recognize the same data on resume.
  uint64_t fileBytes() const { return fileBytes_; }

  /// Data parallelism: from now on setBatch copies only share `share` of
  /// `shares` equal runs of each batch's rows (the batch divides evenly:
  /// the plan splits it so).
  void takeShare(int64_t share, int64_t shares) {
    share_ = share;
    shares_ = shares;
  }

  /// The sample indices of step `step` (from 0).
  std::vector<int64_t> batchIndices(int64_t step, std::optional<uint64_t> shuffleSeed) const;
  /// Those this rank's microbatch `microbatch` of `microbatches` takes:
  /// the run of them for piece share·microbatches + microbatch of
  /// shares·microbatches equal pieces.
  std::vector<int64_t> microbatchIndices(int64_t step, std::optional<uint64_t> shuffleSeed,
                                         int64_t microbatch, int64_t microbatches) const;
  /// The position in the step's batch of the first sample
  /// microbatchIndices gives this rank's microbatch `microbatch`.
  int64_t sampleOffset(int64_t microbatch, int64_t microbatches) const {
    const int64_t pieces = shares_ * microbatches;
    return pieces <= 1 ? 0 : (share_ * microbatches + microbatch) * (batch_ / pieces);
  }
  /// Copies step `step`'s batch (this rank's share of it) into the
  /// executor's inputs; with `microbatches` > 1, microbatch `microbatch`
  /// of that share (equal runs of its rows, in order). With `phase` (a
  /// pipeline stage's slot), only the inputs that phase binds, into its
  /// bindings.
  Status setBatch(int64_t step, std::optional<uint64_t> shuffleSeed, Executor &executor,
                  int64_t microbatch = 0, int64_t microbatches = 1,
                  std::optional<size_t> phase = std::nullopt) const;

private:
  static Status loadImpl(const std::string &path, const Plan &plan, TrainingData *out);
  struct Column {
    std::string name;
    size_t sampleBytes = 0;
    std::vector<char> data;
  };
  std::string path_;
  uint64_t fileBytes_ = 0;
  int64_t samples_ = 0, batch_ = 0;
  int64_t share_ = 0, shares_ = 1;
  std::vector<Column> columns_;
  mutable int64_t permutationEpoch_ = -1;
  mutable std::vector<int64_t> permutation_;
  /// One batch of the widest column, sized once by load(), that setBatch
  /// gathers each column's samples into.
  mutable std::vector<char> staging_;
};

} // namespace cleave::runtime
