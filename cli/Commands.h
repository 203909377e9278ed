//===- Commands.h - the subcommands of cleave ------------------*- C++ -*-===//
//
// Each subcommand parses its own arguments (argv after the command name) and
// returns the process exit status; errors print one line and never crash.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_COMMANDS_H
#define CLEAVE_CLI_COMMANDS_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include "cli/Args.h"
#include "compiler/InputSpec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

int runImport(int argc, char **argv);
int runCompile(int argc, char **argv);
/// `cleave train`: starts cleave-runtime, the runtime-only tool beside this
/// binary (it loads neither MLIR nor LibTorch, so training processes stay
/// small).
int runTrainTool(int argc, char **argv);
int runPlan(int argc, char **argv);
int runCost(int argc, char **argv);
int runProfile(int argc, char **argv, const char *argv0);
/// Load for `cleave profile`'s contention measurement (not for users).
int runProfileLoadWorker(int argc, char **argv);
int runBench(int argc, char **argv, const char *argv0);
int runBenchWorker(int argc, char **argv);
int runVerify(int argc, char **argv);
int runInspect(int argc, char **argv);
/// Multi-model jobs: `cleave plan --job`, `cleave compile --job`
/// (cli/JobCommand.cpp); isJobCommand says whether the arguments name one.
bool isJobCommand(int argc, char **argv);
int runJobPlan(int argc, char **argv);
int runJobCompile(int argc, char **argv);

/// Writes `text` to `path` through a temporary file and a rename, so a
/// failed write never leaves a truncated output.
bool writeAtomically(const std::string &path,
                     llvm::function_ref<void(llvm::raw_ostream &)> write);

/// `--input-shape VALUE`: parses VALUE and appends it. Returns -1, or the
/// exit status after a usage error.
int addInputShape(const char *value, std::vector<InputSpec> &shapes, const char *usage);

/// `--example-inputs FILE`: the safetensors file whose tensors give the
/// inputs' shapes. Returns -1, or the exit status after a usage error.
int setExampleInputs(const char *value, std::string &path, const char *usage);

/// The last branch of an option loop: an unknown option is an error, the
/// first positional argument is the model, a second one an error. Returns
/// -1 when `arg` became the model, or the exit status after a usage error.
int takeModelArgument(const std::string &arg, std::string &model, const char *usage);


} // namespace cleave

#endif // CLEAVE_CLI_COMMANDS_H
