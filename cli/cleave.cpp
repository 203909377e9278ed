//===- cleave.cpp - the cleave command line -------------------------------===//
//
// `cleave SUBCOMMAND ...`: dispatches to the subcommands in cli/*Command.cpp.
//
//===----------------------------------------------------------------------===//

#include "cli/Args.h"
#include "cli/Commands.h"
#include "cli/ProfileComm.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace cleave;

namespace {

constexpr const char *kUsage = R"(cleave: compiles TorchScript models into partitioned, per-device plans.

usage: cleave <command> [options]

commands:
  import    import a TorchScript model into cleave IR, or summarize it
  compile   compile a TorchScript model into a plan directory
  run       run a plan on inputs from a safetensors file
  train     train a plan compiled with --mode train on a data file
  verify    check that a plan's ranks compose: sends, collectives, weight shards
  inspect   describe a plan: stages, memory, predicted time; graph, trace, diff
  bench     time a plan against LibTorch eager on the same model and inputs
  cost      predict per-layer FLOPs, memory and time on a cluster spec
  plan      choose tensor, pipeline and data parallelism for a cluster
  profile   measure this machine and write a calibrated cluster spec

Run 'cleave <command> --help' for a command's options.
)";

} // namespace

static int runTool(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << kUsage;
    return 1;
  }
  std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    llvm::outs() << kUsage;
    return 0;
  }
  if (command == "import")
    return runImport(argc - 2, argv + 2);
  if (command == "compile")
    return runCompile(argc - 2, argv + 2);
  if (command == "run")
    return runRun(argc - 2, argv + 2);
  if (command == "train")
    return runTrainTool(argc - 2, argv + 2);
  if (command == "verify")
    return runVerify(argc - 2, argv + 2);
  if (command == "inspect")
    return runInspect(argc - 2, argv + 2);
  if (command == "bench")
    return runBench(argc - 2, argv + 2, argv[0]);
  if (command == "plan")
    return runPlan(argc - 2, argv + 2);
  if (command == "cost")
    return runCost(argc - 2, argv + 2);
  if (command == "profile")
    return runProfile(argc - 2, argv + 2, argv[0]);
  if (command == "bench-worker")
    return runBenchWorker(argc - 2, argv + 2);
  if (command == "profile-load-worker")
    return runProfileLoadWorker(argc - 2, argv + 2);
  if (command == "profile-comm-worker")
    return runProfileCommWorker(argc - 2, argv + 2);
  llvm::errs() << "cleave: error: unknown command '" << command << "'\n\n" << kUsage;
  return 1;
}

/// The compiler's commands: they hold LibTorch and MLIR, never MPI.
static bool isCompilerCommand(const std::string &command) {
  for (const char *name : {"-h", "--help", "help", "import", "compile", "plan", "cost", "verify",
                           "inspect"})
    if (command == name)
      return true;
  return false;
}

/// Leaves without running static destructors: LibTorch's deregister every
/// operator one by one, a tenth of a second of each compiler command (a
/// sixth of planning a 1T model). Output still reaches its file, and a
/// failed write still fails the command.
[[noreturn]] static void exitWithoutTeardown(int status) {
  llvm::outs().flush();
  llvm::errs().flush();
  if (llvm::outs().has_error()) {
    llvm::errs() << "cleave: error: writing the output failed: "
                 << llvm::outs().error().message() << "\n";
    llvm::outs().clear_error();
    status = 1;
  }
  if (std::fflush(nullptr) != 0)
    status = 1;
  std::_Exit(status);
}

int main(int argc, char **argv) {
  int status = cleave::guardedMain([&] { return runTool(argc, argv); });
  // Not for run, train, bench or profile: MPI finalizes at exit.
  if (argc >= 2 && isCompilerCommand(argv[1]))
    exitWithoutTeardown(status);
  return status;
}
