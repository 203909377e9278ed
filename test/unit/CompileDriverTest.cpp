//===- CompileDriverTest.cpp - the compile driver without the CLI ---------===//
//
// Calls compiler/CompileDriver.h the way a library user would: cleave IR
// loaded and prepared, costed on a cluster's device, memory-planned for one
// device; errors come back as a DriverStatus kind and a diagnostic.
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileDriver.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace cleave;

namespace {

constexpr const char *kModel = R"(
func.func @forward(%x: tensor<4x32xf32> {cleave.name = "x"}) -> tensor<4x32xf32> {
  %w = cleave.param "w" : tensor<4x32xf32>
  %a = cleave.relu %x : tensor<4x32xf32>
  %b = cleave.add %a, %w : tensor<4x32xf32>, tensor<4x32xf32> -> tensor<4x32xf32>
  %c = cleave.exp %b : tensor<4x32xf32>
  return %c : tensor<4x32xf32>
}
)";

class CompileDriverTest : public ::testing::Test {
protected:
  CompileDriverTest() {
    context.disableMultithreading();
    handler = context.getDiagEngine().registerHandler([this](mlir::Diagnostic &diag) {
      messages.push_back(diag.str());
      return mlir::success();
    });
  }
  ~CompileDriverTest() override {
    context.getDiagEngine().eraseHandler(handler);
    for (const std::string &path : files)
      llvm::sys::fs::remove(path);
  }

  /// Writes `text` to a temporary .mlir file and returns its path.
  std::string writeModel(const std::string &text) {
    llvm::SmallString<128> path;
    int fd;
    EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("driver", "mlir", fd, path));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
    files.push_back(path.str().str());
    return files.back();
  }

  mlir::MLIRContext context;
  mlir::DiagnosticEngine::HandlerID handler;
  std::vector<std::string> messages, files;
};

TEST_F(CompileDriverTest, LoadsCostsAndLowersCleaveIR) {
  CompileRequest request;
  request.model = writeModel(kModel);
  request.cluster = CLEAVE_CLUSTERS_DIR "/cpu-2core.json";
  cost::ClusterSpec spec;
  ASSERT_TRUE(setUpCluster(context, request, spec).ok());
  EXPECT_EQ(request.planner.search.devices, spec.deviceCount());
  EXPECT_FALSE(request.planner.search.training);

  LoadedModel model;
  ASSERT_TRUE(loadModel(context, request, model).ok());
  ASSERT_TRUE(model.forward());
  EXPECT_TRUE(model.params.empty());

  mlir::cleave::ModelEstimate estimate;
  ASSERT_TRUE(costModel(model, spec, estimate).ok());
  EXPECT_GT(estimate.total.forwardSeconds, 0);

  ASSERT_TRUE(lowerForOneDevice(*model.module).ok());
  EXPECT_TRUE(model.forward()->hasAttr("cleave.arena_bytes"));
  EXPECT_TRUE(messages.empty());
}

TEST_F(CompileDriverTest, ReportsErrorsAsDiagnostics) {
  CompileRequest request;
  request.model = writeModel(kModel);
  request.import.batchSize = 8;
  LoadedModel model;
  DriverStatus status = loadModel(context, request, model);
  EXPECT_EQ(status.error(), DriverError::BadInput);
  EXPECT_EQ(status.exitCode(), 1);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], "--batch and --input-shape need a TorchScript model: the shapes of "
                         "cleave IR are fixed");

  messages.clear();
  request.import.batchSize.reset();
  request.model = writeModel("func.func @other() { return }");
  EXPECT_EQ(loadModel(context, request, model).exitCode(), 1);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0], request.model + ": no function @forward");

  messages.clear();
  request.cluster = "/nonexistent/cluster.json";
  cost::ClusterSpec spec;
  EXPECT_EQ(setUpCluster(context, request, spec).error(), DriverError::BadInput);
  EXPECT_EQ(messages.size(), 1u);
}

TEST_F(CompileDriverTest, TrainingModeSetsUpTheSearch) {
  CompileRequest request;
  request.cluster = CLEAVE_CLUSTERS_DIR "/dgx-a100-80gb.json";
  request.mode = CompileMode::Train;
  request.devices = 4;
  cost::ClusterSpec spec;
  ASSERT_TRUE(setUpCluster(context, request, spec).ok());
  EXPECT_TRUE(request.planner.search.training);
  EXPECT_EQ(request.planner.search.devices, 4);
  // Training defaults to mixed precision.
  EXPECT_TRUE(request.planner.search.mixedPrecision);
  EXPECT_EQ(request.planner.computeDType, runtime::DType::BF16);
}

} // namespace
