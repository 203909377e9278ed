//===- TrainingFlags.cpp - compile's flags for a training step ------------===//

#include "cli/TrainingFlags.h"
#include "cli/Commands.h"
#include "cli/PlannerFlags.h"

#include "llvm/ADT/StringRef.h"

namespace cleave {
namespace {

bool parseReal(const char *text, double &out) {
  if (!text)
    return false;
  llvm::StringRef s(text);
  return !s.empty() && !s.getAsDouble(out) && out >= 0;
}

} // namespace

int parseTrainingFlag(int argc, char **argv, int &i, TrainingFlags &flags, const char *usage) {
  mlir::cleave::TrainingOptions &o = flags.options;
  std::string arg = argv[i];
  const char *value = nullptr;
  auto note = [&](const char *flag) {
    if (flags.firstFlag.empty())
      flags.firstFlag = flag;
  };
  auto real = [&](const char *flag, double &out) -> int {
    note(flag);
    if (!parseReal(value, out))
      return usageError(std::string(flag) + " needs a non-negative number" +
                            (value ? std::string(", got '") + value + "'" : std::string()),
                        usage);
    return -1;
  };
  auto choice = [&](const char *flag, std::string &out,
                    std::initializer_list<const char *> allowed) -> int {
    note(flag);
    std::string v = value ? value : "";
    for (const char *a : allowed)
      if (v == a) {
        out = v;
        return -1;
      }
    std::string list;
    for (const char *a : allowed)
      list += (list.empty() ? "" : ", ") + std::string(a);
    return usageError(std::string(flag) + " must be one of " + list +
                          (v.empty() ? std::string() : ", got '" + v + "'"),
                      usage);
  };
  auto count = [&](const char *flag, int64_t &out) -> int {
    note(flag);
    if (!parseCount(value, out, 0, INT64_MAX))
      return usageError(std::string(flag) + " needs a count >= 0", usage);
    return -1;
  };
  if (optionValue(argc, argv, i, "--loss", &value))
    return choice("--loss", o.loss, {"model", "cross_entropy", "mse"});
  if (optionValue(argc, argv, i, "--optimizer", &value))
    return choice("--optimizer", o.optimizer, {"adamw", "sgd", "none"});
  if (optionValue(argc, argv, i, "--lr", &value))
    return real("--lr", o.lr);
  if (optionValue(argc, argv, i, "--weight-decay", &value))
    return real("--weight-decay", o.weightDecay);
  if (optionValue(argc, argv, i, "--eps", &value))
    return real("--eps", o.eps);
  if (optionValue(argc, argv, i, "--momentum", &value))
    return real("--momentum", o.momentum);
  if (optionValue(argc, argv, i, "--dampening", &value))
    return real("--dampening", o.dampening);
  if (optionValue(argc, argv, i, "--clip-grad-norm", &value)) {
    if (int status = real("--clip-grad-norm", o.clipGradNorm); status >= 0)
      return status;
    if (o.clipGradNorm == 0)
      return usageError("--clip-grad-norm needs a norm > 0", usage);
    return -1;
  }
  if (optionValue(argc, argv, i, "--betas", &value)) {
    note("--betas");
    llvm::StringRef text = value ? value : "";
    auto [first, second] = text.split(',');
    double b1 = -1, b2 = -1;
    if (first.getAsDouble(b1) || second.getAsDouble(b2) || !(b1 >= 0 && b1 < 1) ||
        !(b2 >= 0 && b2 < 1))
      return usageError("--betas needs two numbers in [0, 1) as B1,B2, e.g. 0.9,0.95", usage);
    o.beta1 = b1;
    o.beta2 = b2;
    return -1;
  }
  if (optionValue(argc, argv, i, "--lr-schedule", &value))
    return choice("--lr-schedule", o.lrSchedule, {"constant", "linear", "cosine"});
  if (optionValue(argc, argv, i, "--warmup-steps", &value))
    return count("--warmup-steps", o.warmupSteps);
  if (optionValue(argc, argv, i, "--decay-steps", &value))
    return count("--decay-steps", o.decaySteps);
  if (optionValue(argc, argv, i, "--seed", &value))
    return count("--seed", flags.seed);
  if (arg == "--nesterov") {
    note("--nesterov");
    o.nesterov = true;
    return -1;
  }
  return kNotMine;
}

int checkTrainingFlags(const TrainingFlags &flags, const char *usage) {
  const mlir::cleave::TrainingOptions &o = flags.options;
  if (o.optimizer == "adamw" && (o.momentum != 0 || o.dampening != 0 || o.nesterov))
    return usageError("--momentum, --dampening and --nesterov are SGD's: add --optimizer sgd", usage);
  if (o.optimizer == "sgd" && o.lr < 0)
    return usageError("--optimizer sgd needs --lr (torch.optim.SGD has no default learning rate)",
                      usage);
  if (o.optimizer == "sgd" && (o.beta1 != 0.9 || o.beta2 != 0.999 || o.eps != 1e-8))
    return usageError("--betas and --eps are AdamW's; SGD has none", usage);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    return usageError("--nesterov needs --momentum > 0 and no --dampening (as torch.optim.SGD)",
                      usage);
  if (o.lrSchedule != "constant" && o.decaySteps == 0)
    return usageError("--lr-schedule " + o.lrSchedule +
                          " needs --decay-steps N: the step where the learning rate reaches 0",
                      usage);
  if (o.optimizer == "none" && (o.lr >= 0 || o.weightDecay >= 0 || o.clipGradNorm > 0 ||
                                o.lrSchedule != "constant" || o.warmupSteps > 0))
    return usageError("--optimizer none returns the gradients: it takes no optimizer options",
                      usage);
  return -1;
}

} // namespace cleave
