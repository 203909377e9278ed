//===- fuzz_training_data.cpp - TrainingData::load on hostile data -------===//
//
// Once: the one-device training plan of fuzz/make-seeds.sh loaded and an
// Executor for it on the CPU backend. Input: a whole data file (safetensors,
// one tensor per plan input), read from an in-memory file with
// TrainingData::load; when it is accepted, the batches of a few steps (in
// order and shuffled) are computed and copied into the executor's inputs,
// as a training run does. Seeds: the data file the plan was trained on, and
// the same data with fewer and more samples.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/train/TrainingData.h"

#include <memory>

using namespace cleave;
namespace fs = std::filesystem;

namespace {

struct State : fuzz::TrainingSeed {
  fuzz::MemFile file;
};

State &state() {
  static State s;
  return s;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  State &s = state();
  std::string out = fuzz::corpusOutput();
  if (out.empty())
    return 0;
  fs::path seeds = fuzz::seedsDir();
  for (const fs::directory_entry &entry : fs::directory_iterator(seeds / "data")) {
    std::string bytes = fuzz::readFile(entry.path());
    // The seed must load: otherwise the harness tests nothing past the
    // first check.
    s.file.set(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
    runtime::TrainingData data;
    runtime::Status status = runtime::TrainingData::load(s.file.path(), s.plan, &data);
    if (!status.ok())
      fuzz::die("seed " + entry.path().string() + " does not load: " + status.message());
    fuzz::writeCorpusEntry(out, entry.path().filename().string(), bytes);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  State &s = state();
  s.file.set(data, size);
  runtime::TrainingData training;
  if (!runtime::TrainingData::load(s.file.path(), s.plan, &training).ok())
    return 0;
  if (training.samples() <= 0)
    __builtin_trap();
  for (int64_t step : {0, 1, 7}) {
    for (std::optional<uint64_t> shuffle : {std::optional<uint64_t>(), std::optional<uint64_t>(7)}) {
      std::vector<int64_t> indices = training.batchIndices(step, shuffle);
      for (int64_t index : indices)
        if (index < 0 || index >= training.samples())
          __builtin_trap();
      (void)training.setBatch(step, shuffle, *s.executor);
    }
  }
  return 0;
}
