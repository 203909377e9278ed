#include "runtime/train/TrainingData.h"

#include "runtime/Executor.h"
#include "runtime/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <sys/stat.h>

namespace cleave::runtime {
namespace {

/// SplitMix64: a small, well-mixed generator whose sequence is fixed by its
/// seed on every platform (the shuffle must not depend on the C++ library).
uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

Status TrainingData::load(const std::string &path, const Plan &plan, TrainingData *out) {
  return catchExceptions(path, [&] { return loadImpl(path, plan, out); });
}

Status TrainingData::loadImpl(const std::string &path, const Plan &plan, TrainingData *out) {
  TrainingData data;
  data.path_ = path;
  SafetensorsIndex index;
  CLEAVE_RETURN_IF_ERROR(readSafetensorsIndex(path, &index));
  struct stat st {};
  if (stat(path.c_str(), &st) == 0)
    data.fileBytes_ = static_cast<uint64_t>(st.st_size);
  data.batch_ = plan.training ? plan.training->batchSize : 0;

  std::set<std::string> expected;
  for (const TensorSpec &input : plan.inputs) {
    expected.insert(input.name);
    const SafetensorsEntry *entry = index.find(input.name);
    Shape sample(input.desc.shape.begin() + 1, input.desc.shape.end());
    std::string want = "[N" ;
    for (int64_t d : sample)
      want += ", " + std::to_string(d);
    want += "] " + std::string(dtypeName(input.desc.dtype));
    if (!entry)
      return CLEAVE_ERROR(path, ": missing tensor '", input.name, "' (the plan's input '",
                          input.name, "' needs ", want, ": one row per sample)");
    const TensorDesc &got = entry->desc;
    Shape gotSample = got.rank() ? Shape(got.shape.begin() + 1, got.shape.end()) : Shape();
    if (got.dtype != input.desc.dtype || got.rank() == 0 || gotSample != sample)
      return CLEAVE_ERROR(path, ": tensor '", input.name, "' is ", describe(got.shape, got.dtype),
                          ", the plan's input needs ", want, " (one row per sample)");
    int64_t n = got.shape[0];
    if (!data.columns_.empty() && n != data.samples_)
      return CLEAVE_ERROR(path, ": tensor '", input.name, "' has ", n, " samples, '",
                          data.columns_.front().name, "' has ", data.samples_);
    if (n < data.batch_)
      return CLEAVE_ERROR(path, ": tensor '", input.name, "' has ", n,
                          " samples, fewer than one batch of ", data.batch_);
    data.samples_ = n;
    Column column;
    column.name = input.name;
    column.sampleBytes = TensorDesc{got.dtype, sample}.bytes();
    column.data.resize(got.bytes());
    CLEAVE_RETURN_IF_ERROR(readSafetensorsTensor(index, *entry, column.data.data()));
    data.staging_.resize(std::max(data.staging_.size(),
                                  column.sampleBytes * static_cast<size_t>(data.batch_)));
    data.columns_.push_back(std::move(column));
  }
  for (const SafetensorsEntry &entry : index.entries)
    if (!expected.count(entry.name)) {
      std::string names;
      for (const std::string &n : expected)
        names += (names.empty() ? "" : ", ") + n;
      return CLEAVE_ERROR(path, ": unexpected tensor '", entry.name, "' (the plan's inputs: ",
                          names, ")");
    }
  *out = std::move(data);
  return {};
}

std::vector<int64_t> TrainingData::batchIndices(int64_t step,
                                                std::optional<uint64_t> shuffleSeed) const {
  std::vector<int64_t> indices(batch_);
  for (int64_t j = 0; j < batch_; ++j) {
    int64_t global = step * batch_ + j;
    int64_t epoch = global / samples_, position = global % samples_;
    if (!shuffleSeed) {
      indices[j] = position;
      continue;
    }
    if (permutationEpoch_ != epoch) {
      // Fisher-Yates with SplitMix64 seeded by (seed, epoch).
      permutation_.resize(samples_);
      std::iota(permutation_.begin(), permutation_.end(), 0);
      uint64_t state = *shuffleSeed ^ (0x5851f42d4c957f2dull * static_cast<uint64_t>(epoch + 1));
      for (int64_t i = samples_ - 1; i > 0; --i) {
        int64_t k = static_cast<int64_t>(splitMix64(state) % static_cast<uint64_t>(i + 1));
        std::swap(permutation_[i], permutation_[k]);
      }
      permutationEpoch_ = epoch;
    }
    indices[j] = permutation_[position];
  }
  return indices;
}

std::vector<int64_t> TrainingData::microbatchIndices(int64_t step,
                                                     std::optional<uint64_t> shuffleSeed,
                                                     int64_t microbatch,
                                                     int64_t microbatches) const {
  std::vector<int64_t> indices = batchIndices(step, shuffleSeed);
  const int64_t pieces = shares_ * microbatches, piece = share_ * microbatches + microbatch;
  if (pieces <= 1)
    return indices;
  const size_t part = indices.size() / static_cast<size_t>(pieces);
  return std::vector<int64_t>(indices.begin() + piece * part,
                              indices.begin() + (piece + 1) * part);
}

Status TrainingData::setBatch(int64_t step, std::optional<uint64_t> shuffleSeed,
                              Executor &executor, int64_t microbatch,
                              int64_t microbatches, std::optional<size_t> phase) const {
  std::vector<int64_t> indices = microbatchIndices(step, shuffleSeed, microbatch, microbatches);
  for (const Column &column : columns_) {
    if (phase) {
      const std::vector<Binding> &bound = executor.program().phases.at(*phase).inputs;
      if (std::none_of(bound.begin(), bound.end(),
                       [&](const Binding &b) { return b.name == column.name; }))
        continue;
    }
    for (size_t j = 0; j < indices.size(); ++j)
      std::memcpy(staging_.data() + j * column.sampleBytes,
                  column.data.data() + indices[j] * column.sampleBytes, column.sampleBytes);
    const size_t bytes = column.sampleBytes * indices.size();
    CLEAVE_RETURN_IF_ERROR(phase ? executor.setPhaseInput(*phase, column.name, staging_.data(), bytes)
                                 : executor.setInput(column.name, staging_.data(), bytes));
  }
  return {};
}

} // namespace cleave::runtime
