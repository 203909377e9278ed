//===- VerifyCommand.cpp - cleave verify ----------------------------------===//
//
// Loads a plan and checks that its programs compose back into one
// computation (runtime/PlanVerify.h). Uses only the runtime library.
//
//===----------------------------------------------------------------------===//

#include "cli/Commands.h"
#include "runtime/Plan.h"
#include "runtime/PlanVerify.h"

namespace cleave {
namespace {

namespace rt = cleave::runtime;

constexpr const char *kVerifyUsage = R"(usage: cleave verify PLAN_DIR [options]

Loads the plan (every file, as 'cleave run' does) and checks that its programs
compose back into one computation: the shapes of every layout change (all_reduce,
all_gather, reduce_scatter, all_to_all) agree with its group's size; every
parameter's weight shards cover it exactly once in each stage that reads it;
and, simulating every rank through its stage's schedule slots, every recv meets
the send of its tag and microbatch, every collective is entered by its whole tp
or dp group with the same kernel, attributes and input, nothing waits forever
and nothing sent is left unreceived. A failure names the rank, its program, the
slot (forward chunk 1 microbatch 0) and the instruction.

options:
  --max-errors N    report up to N failures (default 5)
  -h, --help        show this help

exit status: 0 the plan verifies (one summary line), 1 bad arguments, a plan
that does not load, or a plan that does not verify.
)";

} // namespace

int runVerify(int argc, char **argv) {
  std::string planDir;
  size_t maxErrors = 5;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    const char *value = nullptr;
    if (arg == "-h" || arg == "--help") {
      llvm::outs() << kVerifyUsage;
      return 0;
    } else if (optionValue(argc, argv, i, "--max-errors", &value)) {
      if (!parseCount(value, maxErrors, 1))
        return usageError("--max-errors needs a positive integer", kVerifyUsage);
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown option '" + arg + "'", kVerifyUsage);
    } else if (planDir.empty()) {
      planDir = arg;
    } else {
      return usageError("more than one plan given ('" + planDir + "', '" + arg + "')",
                        kVerifyUsage);
    }
  }
  if (planDir.empty())
    return usageError("no plan directory given", kVerifyUsage);

  rt::Plan plan;
  if (rt::Status s = rt::loadPlan(planDir, &plan); !s.ok()) {
    llvm::errs() << "cleave: error: " << s.prepend(planDir).message() << "\n";
    return 1;
  }
  rt::VerifyResult result = rt::verifyPlan(plan, maxErrors);
  for (const std::string &error : result.errors)
    llvm::errs() << "cleave: error: " << planDir << ": " << error << "\n";
  if (!result.ok())
    return 1;
  auto count = [](int64_t n, const char *what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  llvm::outs() << "cleave: " << planDir << " verified: " << count(result.ranks, "rank") << ", "
               << count(result.programs, "program") << ", " << count(result.transfers, "transfer")
               << ", " << count(result.collectives, "collective") << "\n";
  return 0;
}

} // namespace cleave
