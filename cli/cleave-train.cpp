//===- cleave-train.cpp - The runtime-only training tool ------------------===//
//
// `cleave train` runs this: it links the runtime alone, so a training
// process holds the plan's memory and the kernels' libraries, not the
// compiler's (MLIR, LLVM, LibTorch: about 200 MiB of resident memory).
//
//===----------------------------------------------------------------------===//

#include "cli/Args.h"

int main(int argc, char **argv) {
  // Called as `cleave-train train ARGS` by `cleave train`, or directly as
  // `cleave-train ARGS`.
  if (argc > 1 && std::string(argv[1]) == "train")
    return cleave::runTrain(argc - 2, argv + 2);
  return cleave::runTrain(argc - 1, argv + 1);
}
