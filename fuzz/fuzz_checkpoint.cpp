//===- fuzz_checkpoint.cpp - loadCheckpoint on hostile checkpoints -------===//
//
// Once: the one-device training plan of fuzz/make-seeds.sh loaded, an
// Executor for it on the CPU backend, and the seed checkpoints (all of that
// plan's model: version 1 from one device, version 2 from a pp2 run and
// from a dp2 ZeRO run, each a root with `latest` and one ckpt-<step>/)
// copied into the harness's temporary directory. An input replaces ONE file
// of one of them:
//   byte 0      which file: index (mod the count) into the sorted list of
//               every copied file (latest, checkpoint.json, *.safetensors);
//   byte 1      bit 0: when the file is a .safetensors, also rewrite
//               checkpoint.json's size and FNV-1a checksum of it, so the
//               input reaches the checks behind the checksum; bit 1: load
//               the ckpt-<step>/ directory itself instead of the root;
//   the rest    the file's new contents.
// Then loadCheckpoint into the executor. The files are put back afterwards.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/train/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

using namespace cleave;
namespace fs = std::filesystem;

namespace {

const char *const kCheckpoints[] = {"ckpt/v1", "ckpt/pp2", "ckpt/zero2"};

struct CheckpointFile {
  fs::path root;     ///< the copy's root (holds `latest`)
  fs::path relative; ///< `latest` or ckpt-<step>/<file>
  std::string original;
};

std::string fnv1a64Hex(const uint8_t *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

struct State : fuzz::TrainingSeed {
  fuzz::TempDir dir;
  std::vector<CheckpointFile> files;

  State() {
    for (const char *name : kCheckpoints) {
      fs::path copy = dir.path() / fs::path(name).filename();
      fuzz::copyTree(fuzz::seed(name), copy, [](const fs::path &) { return true; });
      std::vector<CheckpointFile> mine;
      for (const fs::directory_entry &entry : fs::recursive_directory_iterator(copy))
        if (entry.is_regular_file())
          mine.push_back({copy, fs::relative(entry.path(), copy), fuzz::readFile(entry.path())});
      std::sort(mine.begin(), mine.end(), [](const CheckpointFile &a, const CheckpointFile &b) {
        return a.relative < b.relative;
      });
      files.insert(files.end(), mine.begin(), mine.end());
      // The seed itself must load: otherwise every input stops at the
      // first difference and the harness tests nothing.
      runtime::CheckpointInfo info;
      runtime::Status s = runtime::loadCheckpoint(copy.string(), plan, *executor, &info);
      if (!s.ok())
        fuzz::die(std::string("seed ") + name + " does not load: " + s.message());
    }
  }

  /// checkpoint.json of the ckpt-<step>/ that holds `file`, or null.
  const CheckpointFile *index(const CheckpointFile &file) const {
    for (const CheckpointFile &other : files)
      if (other.root == file.root && other.relative.parent_path() == file.relative.parent_path() &&
          other.relative.filename() == "checkpoint.json")
        return &other;
    return nullptr;
  }
};

State &state() {
  static State *s = new State; // destroyed by the atexit below, after the last input
  static bool registered = [] {
    std::atexit([] { delete s; });
    return true;
  }();
  (void)registered;
  return *s;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  State &s = state();
  std::string out = fuzz::corpusOutput();
  if (out.empty())
    return 0;
  for (size_t i = 0; i < s.files.size(); ++i) {
    const CheckpointFile &file = s.files[i];
    std::string bytes(1, static_cast<char>(i));
    bytes += file.relative.extension() == ".safetensors" ? '\1' : '\0';
    bytes += file.original;
    fuzz::writeCorpusEntry(out,
                           file.root.filename().string() + "_" + fuzz::flatName(file.relative),
                           bytes);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  State &s = state();
  const CheckpointFile &file = s.files[data[0] % s.files.size()];
  const bool fixChecksum = data[1] & 1, loadDirectory = data[1] & 2;
  const uint8_t *content = data + 2;
  const size_t bytes = size - 2;
  fuzz::writeFile(file.root / file.relative, content, bytes);

  const CheckpointFile *index = s.index(file);
  bool indexChanged = false;
  if (fixChecksum && index && &file != index && file.relative.extension() == ".safetensors") {
    nlohmann::json json = nlohmann::json::parse(index->original);
    nlohmann::json &entry = json["files"][file.relative.filename().string()];
    entry["bytes"] = bytes;
    entry["fnv1a64"] = fnv1a64Hex(content, bytes);
    fuzz::writeFile(index->root / index->relative, json.dump(1));
    indexChanged = true;
  }

  fs::path path = file.root;
  if (loadDirectory && index)
    path = index->root / index->relative.parent_path();
  runtime::CheckpointInfo info;
  std::string resolved;
  (void)runtime::loadCheckpoint(path.string(), s.plan, *s.executor, &info, &resolved);

  fuzz::writeFile(file.root / file.relative, file.original);
  if (indexChanged)
    fuzz::writeFile(index->root / index->relative, index->original);
  return 0;
}
