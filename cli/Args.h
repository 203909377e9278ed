//===- Args.h - Argument helpers without LLVM -----------------*- C++ -*-===//
//
// What the runtime-only tools (cleave-train) share with the subcommands of
// `cleave`: option parsing and usage errors, in plain C++, so that a tool
// that links only the runtime loads neither LLVM nor LibTorch.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_ARGS_H
#define CLEAVE_CLI_ARGS_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave {

/// Prints `cleave: error: MESSAGE` and the command's usage; returns 1.
int usageError(const std::string &message, const char *usage);

/// "--name VALUE" or "--name=VALUE" at argv[i]; advances i past a separate
/// value. Returns false if argv[i] is not the option; sets *value to null if
/// the value is absent.
bool optionValue(int argc, char **argv, int &i, const char *name, const char **value);

/// A decimal integer in [min, max]; false when absent, malformed or out of
/// range.
bool parseInteger(const char *text, int64_t &out, int64_t min, int64_t max);

/// The path of the running executable (for starting it, or a tool beside
/// it).
std::string selfPath();

/// The first executable named `program` on PATH, or "".
std::string findOnPath(const std::string &program);
/// The `mpirun` in the directory of the running executable (a runtime
/// bundle's relocated launcher) if there is one, else the first on PATH, or
/// "".
std::string findMpirun();
/// This environment plus Open MPI settings a container needs, unless the
/// user set them: running as root, and launching ranks locally without ssh.
std::vector<std::string> mpirunEnvironment();

/// True under mpirun (or another launcher that sets a world size above 1).
bool launchedAsRanks();
/// This process's index among the ranks on its machine, and their number
/// (0 and 1 outside mpirun).
int localRank();
int localRanks();

/// `--local N`: runs `mpirun -np N <this executable> ARGS...` in its own
/// process group with stdio passed through. Ctrl-C reaches every rank; a
/// rank that dies makes mpirun end the others, and its status is ours.
int launchLocal(int ranks, const std::vector<std::string> &args);

/// `cleave COMMAND --local N PLAN_DIR ...`: checks that N is the plan's
/// device count and that no launcher started this process, then runs
/// `COMMAND RANK_ARGS...` on N ranks through launchLocal. Returns the exit
/// status (errors printed).
int launchPlanRanks(int ranks, const std::string &planDir, const std::string &command,
                    const std::vector<std::string> &rankArgs, const char *usage);

/// `cleave train` (cli/TrainCommand.cpp, in the runtime-only cleave-train).
int runTrain(int argc, char **argv);

} // namespace cleave

#endif // CLEAVE_CLI_ARGS_H
