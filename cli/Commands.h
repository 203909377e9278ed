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

#include <cstdint>

#include <string>

namespace cleave {

int runImport(int argc, char **argv);
int runCompile(int argc, char **argv);
int runRun(int argc, char **argv);
int runPlan(int argc, char **argv);
int runCost(int argc, char **argv);
int runProfile(int argc, char **argv, const char *argv0);
int runBench(int argc, char **argv, const char *argv0);
int runBenchWorker(int argc, char **argv);

/// Prints `cleave: error: MESSAGE` and the command's usage; returns 1.
int usageError(const std::string &message, const char *usage);

/// Writes `text` to `path` through a temporary file and a rename, so a
/// failed write never leaves a truncated output.
bool writeAtomically(const std::string &path,
                     llvm::function_ref<void(llvm::raw_ostream &)> write);

/// "--name VALUE" or "--name=VALUE" at argv[i]; advances i past a separate
/// value. Returns false if argv[i] is not the option; sets *value to null if
/// the value is absent.
bool optionValue(int argc, char **argv, int &i, const char *name, const char **value);

/// An integer option value in [min, max]; false when absent, malformed or
/// out of range (then `out` is unspecified).
template <typename Int>
bool parseCount(const char *text, Int &out, int64_t min, int64_t max = INT32_MAX) {
  int64_t value;
  if (!text || llvm::StringRef(text).getAsInteger(10, value) || value < min || value > max)
    return false;
  out = static_cast<Int>(value);
  return true;
}

/// Wall time since `start` and this process's peak memory, for --timing.
void printTiming(const char *what, double seconds);

} // namespace cleave

#endif // CLEAVE_CLI_COMMANDS_H
