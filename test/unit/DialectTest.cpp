//===- DialectTest.cpp - cleave ops built from C++ ------------------------===//
//
// Builds ops the way the importer does and checks type inference, verifier
// errors (captured, never printed) and the shape helpers.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::cleave;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() : builder(&context) {
    context.loadDialect<CleaveDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
    handler = context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
      messages.push_back(diag.str());
      return success();
    });
  }
  ~DialectTest() override { context.getDiagEngine().eraseHandler(handler); }

  Value param(ArrayRef<int64_t> shape, Type et = {}) {
    auto type = RankedTensorType::get(shape, et ? et : builder.getF32Type());
    return builder.create<ParamOp>(builder.getUnknownLoc(), type, "w", false);
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  DiagnosticEngine::HandlerID handler;
  std::vector<std::string> messages;
};

TEST_F(DialectTest, BinaryOpsBroadcast) {
  Value a = param({2, 1, 8}), b = param({4, 1});
  auto add = builder.create<AddOp>(builder.getUnknownLoc(), a, b);
  EXPECT_EQ(add.getType(), RankedTensorType::get({2, 4, 8}, builder.getF32Type()));
  EXPECT_TRUE(succeeded(verify(add)));
}

TEST_F(DialectTest, CompareYieldsBool) {
  Value a = param({3, 3}), b = param({});
  auto cmp = builder.create<CompareOp>(builder.getUnknownLoc(), ComparePredicate::eq, a, b);
  EXPECT_EQ(cmp.getType(), RankedTensorType::get({3, 3}, builder.getI1Type()));
}

TEST_F(DialectTest, InferenceReportsIncompatibleShapes) {
  Value a = param({2, 3}), b = param({4, 3});
  SmallVector<Type> types;
  EXPECT_TRUE(failed(inferBroadcastType(builder.getUnknownLoc(),
                                        {a.getType(), b.getType()}, {}, nullptr, types)));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_NE(messages[0].find("do not broadcast"), std::string::npos) << messages[0];
}

TEST_F(DialectTest, MatmulBroadcastsBatchDims) {
  Value a = param({2, 1, 8, 16}), b = param({3, 16, 4});
  auto mm = builder.create<MatmulOp>(builder.getUnknownLoc(), a, b);
  EXPECT_EQ(mm.getType(), RankedTensorType::get({2, 3, 8, 4}, builder.getF32Type()));
}

TEST_F(DialectTest, LinearUsesOutInWeightLayout) {
  Value x = param({2, 8, 128}), w = param({512, 128}), bias = param({512});
  auto linear = builder.create<LinearOp>(builder.getUnknownLoc(), x, w, bias);
  EXPECT_EQ(linear.getType(), RankedTensorType::get({2, 8, 512}, builder.getF32Type()));
}

TEST_F(DialectTest, ConvAndPoolShapesFollowPyTorch) {
  Value x = param({1, 3, 224, 224}), w = param({64, 3, 7, 7});
  auto conv = builder.create<Conv2dOp>(
      builder.getUnknownLoc(), x, w, Value(), builder.getDenseI64ArrayAttr({2, 2}),
      builder.getDenseI64ArrayAttr({3, 3}), builder.getDenseI64ArrayAttr({1, 1}), 1);
  EXPECT_EQ(conv.getType(), RankedTensorType::get({1, 64, 112, 112}, builder.getF32Type()));
  auto pool = builder.create<MaxPool2dOp>(
      builder.getUnknownLoc(), conv, builder.getDenseI64ArrayAttr({3, 3}),
      builder.getDenseI64ArrayAttr({2, 2}), builder.getDenseI64ArrayAttr({1, 1}),
      builder.getDenseI64ArrayAttr({1, 1}), false);
  EXPECT_EQ(pool.getType(), RankedTensorType::get({1, 64, 56, 56}, builder.getF32Type()));
}

TEST_F(DialectTest, WindowOutputSizeMatchesPyTorchCeilMode) {
  // torch.nn.functional.max_pool2d(torch.zeros(1, 1, 6, 6), 3, 2, ceil_mode=True) -> 3x3
  EXPECT_EQ(windowOutputSize(6, 3, 2, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(6, 3, 2, 0, 1, false), 2);
  // The last window may not start in the right padding: 5 -> 3 (not 4).
  EXPECT_EQ(windowOutputSize(5, 2, 2, 1, 1, true), 3);
  EXPECT_EQ(windowOutputSize(2, 5, 1, 0, 1, false), 0);
}

TEST_F(DialectTest, ReshapeVerifierRejectsElementCountChange) {
  Value x = param({2, 3});
  auto reshape = builder.create<ReshapeOp>(builder.getUnknownLoc(),
                                           RankedTensorType::get({7}, builder.getF32Type()), x);
  EXPECT_TRUE(failed(verify(reshape)));
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.back().find("changes the element count"), std::string::npos);
}

TEST_F(DialectTest, ReductionInference) {
  Value x = param({2, 8, 32});
  auto mean = builder.create<ReduceMeanOp>(builder.getUnknownLoc(), x,
                                           builder.getDenseI64ArrayAttr({2}), true);
  EXPECT_EQ(mean.getType(), RankedTensorType::get({2, 8, 1}, builder.getF32Type()));
  auto sum = builder.create<ReduceSumOp>(builder.getUnknownLoc(), x,
                                         builder.getDenseI64ArrayAttr({0, 2}), false);
  EXPECT_EQ(sum.getType(), RankedTensorType::get({8}, builder.getF32Type()));
}

TEST_F(DialectTest, BroadcastShapesHelper) {
  auto shape = broadcastShapes({{8, 1, 6}, {7, 1}, {}});
  ASSERT_TRUE(shape);
  EXPECT_EQ(*shape, (SmallVector<int64_t>{8, 7, 6}));
  EXPECT_FALSE(broadcastShapes({{2}, {3}}));
}

} // namespace
