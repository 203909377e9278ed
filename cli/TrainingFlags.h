//===- TrainingFlags.h - compile's flags for a training step ---*- C++ -*-===//
//
// `cleave compile --mode train` takes the loss, the optimizer and its
// hyper-parameters (docs/cli.md); they are parsed and checked here, once.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_TRAININGFLAGS_H
#define CLEAVE_CLI_TRAININGFLAGS_H

#include "passes/Passes.h"

#include <optional>
#include <string>

namespace cleave {

struct TrainingFlags {
  mlir::cleave::TrainingOptions options;
  int64_t seed = 0;
  /// The first training flag given, for "needs --mode train" errors.
  std::string firstFlag;
};

/// Parses argv[i] if it is a training flag (--loss, --optimizer, --lr,
/// --weight-decay, --betas, --eps, --momentum, --dampening, --nesterov,
/// --clip-grad-norm, --lr-schedule, --warmup-steps, --decay-steps, --seed).
/// Returns kNotMine (PlannerFlags.h) when it is not one, -1 when taken, or
/// the exit status after a usage error.
int parseTrainingFlag(int argc, char **argv, int &i, TrainingFlags &flags, const char *usage);

/// Checks the flags together (what each optimizer accepts); -1 or the exit
/// status after a usage error.
int checkTrainingFlags(const TrainingFlags &flags, const char *usage);

} // namespace cleave

#endif // CLEAVE_CLI_TRAININGFLAGS_H
