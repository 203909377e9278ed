//===- cleave-opt.cpp - mlir-opt with the cleave dialect and passes -------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::cleave::CleaveDialect, mlir::func::FuncDialect>();
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  mlir::cleave::registerCleavePipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "cleave optimizer: runs cleave passes on cleave IR\n", registry));
}
