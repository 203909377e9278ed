//===- Args.h - Argument helpers without LLVM -----------------*- C++ -*-===//
//
// What the runtime-only tool (cleave-runtime) share with the subcommands of
// `cleave`: option parsing and usage errors, in plain C++, so that a tool
// that links only the runtime loads neither LLVM nor LibTorch.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_ARGS_H
#define CLEAVE_CLI_ARGS_H

#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
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

/// An integer option value in [min, max]; false when absent, malformed or
/// out of range (then `out` is unchanged).
template <typename Int>
bool parseCount(const char *text, Int &out, int64_t min, int64_t max = INT32_MAX) {
  int64_t value;
  if (!parseInteger(text, value, min, max))
    return false;
  out = static_cast<Int>(value);
  return true;
}

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

/// `cleave train` (cli/TrainCommand.cpp) and `cleave run`
/// (cli/RunCommand.cpp): both are in the runtime-only cleave-runtime too.
int runTrain(int argc, char **argv);
int runRun(int argc, char **argv);

/// printf into a std::string.
std::string strprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));

/// `cleave: WHAT took S s, peak memory M MiB` on stderr (--timing).
void printTiming(const char *what, double seconds);

/// The last resort of a tool's main: an exception that escaped every status
/// check (a bug, memory exhausted) is one `cleave: error:` line and exit 1,
/// never an abort with a core dump.
template <typename Main> int guardedMain(Main &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    std::fflush(stdout);
    std::fprintf(stderr, "cleave: error: out of memory\n");
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "cleave: error: internal error: %s\n", e.what());
  } catch (...) {
    std::fflush(stdout);
    std::fprintf(stderr, "cleave: error: internal error: unknown exception\n");
  }
  return 1;
}

} // namespace cleave

#endif // CLEAVE_CLI_ARGS_H
