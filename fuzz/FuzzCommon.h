//===- FuzzCommon.h - What the runtime's fuzz harnesses share ------------===//
//
// Each harness (fuzz_*.cpp) is a libFuzzer target: LLVMFuzzerTestOneInput
// gets bytes, writes them where the loader reads (an in-memory file, or one
// file of a copy of a real plan or checkpoint in a temporary directory of its
// own) and calls the loader. An error Status is the loader doing its job; a
// crash, a sanitizer report, an uncaught exception, a leak or a hang is a
// finding. Harnesses write only under their temporary directory (made under
// $TMPDIR, removed at exit) and never outside it.
//
// Seeds: the real plans, data and checkpoints fuzz/make-seeds.sh makes, in
// $CLEAVE_FUZZ_SEEDS (default: ../seeds next to the harness's bin/).
// With CLEAVE_FUZZ_WRITE_CORPUS=DIR a harness writes its initial corpus (its
// input format applied to the seeds) into DIR and exits.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace cleave::fuzz {

namespace fs = std::filesystem;

/// The harness's temporary directory, removed by die() too (a failed
/// start, e.g. a bad seed, exits before any destructor runs).
inline std::string &tempDirToRemove() {
  static std::string path;
  return path;
}

[[noreturn]] inline void die(const std::string &message) {
  std::fprintf(stderr, "fuzz harness: %s\n", message.c_str());
  if (!tempDirToRemove().empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tempDirToRemove(), ec);
  }
  std::exit(2);
}

/// The seeds directory (see the file comment).
inline fs::path seedsDir() {
  if (const char *env = std::getenv("CLEAVE_FUZZ_SEEDS"))
    return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec)
    die("cannot find the harness's own path; set CLEAVE_FUZZ_SEEDS");
  return exe.parent_path().parent_path() / "seeds";
}

inline fs::path seed(const std::string &relative) {
  fs::path path = seedsDir() / relative;
  if (!fs::exists(path))
    die("missing seed " + path.string() + " (run fuzz/make-seeds.sh, or scripts/fuzz.sh)");
  return path;
}

inline std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    die("cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void writeFile(const fs::path &path, const void *data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
  if (!out)
    die("cannot write " + path.string());
}
inline void writeFile(const fs::path &path, const std::string &bytes) {
  writeFile(path, bytes.data(), bytes.size());
}

/// A directory of the harness's own under $TMPDIR (or /tmp), removed with
/// everything in it when the process exits normally (libFuzzer exits
/// through exit() at the end of a campaign). A crash leaves it for the
/// post-mortem; scripts/fuzz.sh points TMPDIR into the build directory and
/// empties it after each campaign.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/cleave-fuzz-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!mkdtemp(buffer.data()))
      die("cannot make a temporary directory from " + pattern);
    path_ = buffer.data();
    tempDirToRemove() = path_.string();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    tempDirToRemove().clear();
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const fs::path &path() const { return path_; }

private:
  fs::path path_;
};

/// An anonymous in-memory file the loaders open by path
/// (/proc/self/fd/N): nothing touches the disk.
class MemFile {
public:
  MemFile() {
    fd_ = memfd_create("cleave-fuzz", 0);
    if (fd_ < 0)
      die("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;
  /// Replaces the file's contents with `data`.
  void set(const uint8_t *data, size_t size) {
    if (ftruncate(fd_, 0) != 0)
      die("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0)
        die("pwrite failed");
      done += static_cast<size_t>(n);
    }
  }
  const std::string &path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

/// Copies the regular files of `from` under `to` (made), keeping relative
/// paths; `keep` says which relative paths to copy.
template <typename Keep>
void copyTree(const fs::path &from, const fs::path &to, Keep keep) {
  for (const fs::directory_entry &entry : fs::recursive_directory_iterator(from)) {
    if (!entry.is_regular_file())
      continue;
    fs::path relative = fs::relative(entry.path(), from);
    if (!keep(relative))
      continue;
    fs::create_directories((to / relative).parent_path());
    fs::copy_file(entry.path(), to / relative, fs::copy_options::overwrite_existing);
  }
}

/// CLEAVE_FUZZ_WRITE_CORPUS, or empty.
inline std::string corpusOutput() {
  const char *env = std::getenv("CLEAVE_FUZZ_WRITE_CORPUS");
  return env ? env : "";
}

/// Writes one initial corpus entry DIR/NAME.
inline void writeCorpusEntry(const std::string &dir, const std::string &name,
                             const std::string &bytes) {
  fs::create_directories(dir);
  writeFile(fs::path(dir) / name, bytes);
}

/// A file name for a corpus entry made from `relative`.
inline std::string flatName(const fs::path &relative) {
  std::string name = relative.string();
  for (char &c : name)
    if (c == '/')
      c = '_';
  return name;
}

/// The seed training plan (train.plan) loaded, with an executor of its one
/// program on the CPU backend: what the checkpoint and data harnesses load
/// their inputs into.
struct TrainingSeed {
  runtime::Plan plan;
  std::unique_ptr<runtime::Backend> backend = runtime::createCpuBackend();
  std::unique_ptr<runtime::Executor> executor;

  TrainingSeed() {
    fs::path planDir = seed("train.plan");
    runtime::Status s = runtime::loadPlan(planDir.string(), &plan);
    if (!s.ok())
      die("seed train.plan: " + s.message());
    s = runtime::Executor::create(*plan.programForRank(0), *backend, &executor);
    if (!s.ok())
      die("seed train.plan: " + s.message());
  }
};

} // namespace cleave::fuzz
