//===- fuzz_plan.cpp - The plan loader and verifier on hostile files -----===//
//
// The seeds are real plans (fuzz/make-seeds.sh): a one-device inference
// plan, a pp2 x tp2 inference plan, a one-device training plan and a pp2
// training plan. At start each is copied (manifest.json, programs/,
// weights/) into the harness's temporary directory. An input replaces ONE
// file of one of them:
//   byte 0      which file: index (mod the count) into the sorted list of
//               every copied file of every plan;
//   byte 1      the rank loadPlanForRank reads (mod 8: ranks past the
//               plan's devices are errors to report, not to crash on);
//   the rest    the file's new contents.
// Then loadPlan and, when it accepts the plan, verifyPlan; when the plan is
// one device, small, and has weights, an Executor on the CPU backend (which
// checks the kernel contracts) and, if that accepts it, every phase run
// once; then loadPlanForRank. The file is put back afterwards, so each
// input sees the seed plan with exactly one file replaced.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Plan.h"
#include "runtime/PlanVerify.h"

#include <algorithm>
#include <memory>

using namespace cleave;
namespace fs = std::filesystem;

namespace {

const char *const kPlans[] = {"infer.plan", "pp2tp2.plan", "train.plan", "pp2-train.plan"};

struct PlanFile {
  fs::path plan;     ///< the copy's directory
  fs::path relative; ///< e.g. programs/stage0_tp0.json
  std::string original;
};

bool planFile(const fs::path &relative) {
  std::string first = relative.begin()->string();
  return relative == "manifest.json" || first == "programs" || first == "weights";
}

struct State {
  fuzz::TempDir dir;
  std::vector<PlanFile> files;
  std::unique_ptr<runtime::Backend> backend = runtime::createCpuBackend();

  State() {
    for (const char *name : kPlans) {
      fs::path copy = dir.path() / name;
      fuzz::copyTree(fuzz::seed(name), copy, planFile);
      std::vector<PlanFile> mine;
      for (const fs::directory_entry &entry : fs::recursive_directory_iterator(copy))
        if (entry.is_regular_file())
          mine.push_back({copy, fs::relative(entry.path(), copy), fuzz::readFile(entry.path())});
      std::sort(mine.begin(), mine.end(),
                [](const PlanFile &a, const PlanFile &b) { return a.relative < b.relative; });
      files.insert(files.end(), mine.begin(), mine.end());
    }
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

/// Runs a loaded one-device plan: the Executor checks each kernel's
/// contract against its buffers; what it accepts must run without a fault.
void execute(const runtime::Plan &plan) {
  if (plan.programs.size() != 1 || !plan.hasWeights)
    return;
  const runtime::ProgramSpec *program = plan.programForRank(0);
  if (!program || program->arenaBytes + program->weightRegionBytes + program->stateBytes >
                      (size_t{64} << 20))
    return;
  std::unique_ptr<runtime::Executor> executor;
  if (!runtime::Executor::create(*program, *state().backend, &executor).ok())
    return;
  for (size_t phase = 0; phase < program->phases.size(); ++phase)
    (void)executor->runPhase(phase);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  State &s = state();
  std::string out = fuzz::corpusOutput();
  if (out.empty())
    return 0;
  for (size_t i = 0; i < s.files.size(); ++i) {
    std::string bytes(1, static_cast<char>(i));
    bytes += '\0';
    bytes += s.files[i].original;
    fuzz::writeCorpusEntry(out,
                           s.files[i].plan.filename().string() + "_" +
                               fuzz::flatName(s.files[i].relative),
                           bytes);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  State &s = state();
  const PlanFile &file = s.files[data[0] % s.files.size()];
  const int64_t rank = data[1] % 8;
  const fs::path path = file.plan / file.relative;
  fuzz::writeFile(path, data + 2, size - 2);

  {
    runtime::Plan plan;
    if (runtime::loadPlan(file.plan.string(), &plan).ok()) {
      runtime::VerifyResult verified = runtime::verifyPlan(plan);
      (void)verified;
      execute(plan);
    }
  }
  {
    runtime::Plan plan;
    (void)runtime::loadPlanForRank(file.plan.string(), rank, &plan);
  }
  {
    int64_t devices = 0;
    bool hasWeights = false;
    std::string model;
    (void)runtime::readPlanDeviceCount(file.plan.string(), &devices, &hasWeights, &model);
  }

  fuzz::writeFile(path, file.original);
  return 0;
}
