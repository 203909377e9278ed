//===- PlannerFlags.h - the planner's flags, shared by plan and compile -===//
//
// `cleave plan` and `cleave compile --cluster` take the same planner flags
// (cluster, devices, batch, mode, budget, pins); they are parsed into a
// CompileRequest (compiler/CompileDriver.h) and checked here, once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_PLANNERFLAGS_H
#define CLEAVE_CLI_PLANNERFLAGS_H

#include "compiler/CompileDriver.h"
#include "cost/MemoryModel.h"
#include "passes/Planner.h"

#include <functional>
#include <optional>
#include <string>

namespace cleave {

/// The request the planner flags describe (training by default), and
/// `cleave plan`'s own output flags.
struct PlanCliOptions : CompileRequest {
  PlanCliOptions() { mode = CompileMode::Train; }
  std::string strategyPath, irPath;
  bool json = false, explain = false, splits = false;
  /// Whether --mode was given (compile --cluster tells a training step from
  /// the forward order of a training schedule by it).
  bool modeGiven = false;
};

/// What a command's own flag parser returns for a flag that is not its own.
constexpr int kNotMine = -2;

/// Parses MODEL and the planner's flags; `extra(i, arg)` sees every other
/// flag first and returns kNotMine, -1 (taken) or an exit status. Returns
/// -1 to go on, or the exit status after printing usage or an error.
int parsePlannerArguments(int argc, char **argv, PlanCliOptions &o, const char *usage,
                          const std::function<int(int &, const std::string &)> &extra);

/// Reports that no candidate fits, with the least memory any needs and its
/// largest category. Returns exit status 3.
int reportNothingFits(const CompileRequest &request, const mlir::cleave::PlannerResult &plan);

std::optional<double> parseBytes(llvm::StringRef text);
std::string memoryLine(const cost::MemoryBreakdown &m);
/// The category holding the most bytes.
std::pair<std::string, double> dominant(const cost::MemoryBreakdown &m);

} // namespace cleave

#endif // CLEAVE_CLI_PLANNERFLAGS_H
