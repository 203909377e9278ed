//===- cleave-runtime.cpp - The runtime-only tool: run and train plans ----===//
//
// Links the runtime alone (no MLIR, LLVM or LibTorch), so it is what a GPU
// machine or a cluster node needs (scripts/bundle-runtime.sh ships it), and
// what `cleave train` execs: a training process holds the plan's memory and
// the kernels' libraries, not the compiler's (about 200 MiB of resident
// memory).
//
//===----------------------------------------------------------------------===//

#include "cli/Args.h"

#include <cstdio>
#include <cstring>

namespace {

constexpr const char *kUsage =
    R"(usage: cleave-runtime run PLAN_DIR --inputs IN --outputs OUT [options]
       cleave-runtime train PLAN_DIR --data DATA [options]
       cleave-runtime train --job JOB_DIR --out RUN_DIR [--local N] [options]

The runtime of cleave without its compiler: runs the forward phase of a
compiled plan (`run`) or trains it (`train`), on CPUs or NVIDIA GPUs, one rank
or many (--local N, or under mpirun); `train --job` trains the models of a
multi-model job plan (`cleave compile --job`) round by round, one rank per
device. `cleave-runtime COMMAND --help` lists a
command's options; they are those of `cleave run` and `cleave train`.
)";

} // namespace

static int runTool(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  std::string command = argv[1];
  if (command == "run")
    return cleave::runRun(argc - 2, argv + 2);
  if (command == "train")
    return cleave::runTrain(argc - 2, argv + 2);
  return cleave::usageError("unknown command '" + command + "': expected run or train", kUsage);
}

int main(int argc, char **argv) {
  return cleave::guardedMain([&] { return runTool(argc, argv); });
}
