//===- InputSpecTest.cpp - parsing --input-shape --------------------------===//

#include "compiler/InputSpec.h"

#include <gtest/gtest.h>

using namespace cleave;

namespace {

TEST(InputSpec, ParsesShapeAndDtype) {
  std::string error;
  auto spec = parseInputSpec("idx=2x64:i64", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->name, "idx");
  EXPECT_EQ(spec->shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(spec->dtype, "i64");
}

TEST(InputSpec, DefaultsToF32) {
  std::string error;
  auto spec = parseInputSpec("x=8", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(spec->dtype, "f32");
}

TEST(InputSpec, ScalarHasNoDims) {
  std::string error;
  auto spec = parseInputSpec("t=scalar:f16", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_TRUE(spec->shape.empty());
  EXPECT_EQ(spec->dtype, "f16");
}

TEST(InputSpec, RejectsBadText) {
  for (const char *text : {"2x64", "=2x64", "x=", "x=2x", "x=2xx3", "x=-1",
                           "x=2x64:f64", "x=2.5", "x=99999999999999999999"}) {
    std::string error;
    EXPECT_FALSE(parseInputSpec(text, error)) << text;
    EXPECT_NE(error.find(text), std::string::npos) << "error names the input: " << error;
  }
}

// Zero-size dims are shapes like any other (an empty batch).
TEST(InputSpec, AcceptsZeroSizeDims) {
  std::string error;
  auto spec = parseInputSpec("x=0x4", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_EQ(spec->shape, (std::vector<int64_t>{0, 4}));
}

TEST(InputSpec, KnowsDtypeSizes) {
  EXPECT_EQ(dtypeBytes("f32"), 4);
  EXPECT_EQ(dtypeBytes("bf16"), 2);
  EXPECT_EQ(dtypeBytes("i64"), 8);
  EXPECT_EQ(dtypeBytes("i1"), 1);
  EXPECT_TRUE(isKnownDtype("i32"));
  EXPECT_FALSE(isKnownDtype("f64"));
}

// Example inputs match forward's inputs by name; by position only for the
// generic names of a `forward(self, *args)` trace, and only one for one.
TEST(InputSpec, MatchesExampleInputs) {
  std::vector<InputSpec> file = {{"features", {3, 6}, "f32"}, {"tokens", {3}, "i64"}};
  auto generic = matchExampleInputs({"input", "input0"}, file);
  ASSERT_EQ(generic.size(), 2u);
  EXPECT_EQ(generic[0], &file[0]);
  EXPECT_EQ(generic[1], &file[1]);
  auto traced = matchExampleInputs({"argument_1", "argument_2"}, file);
  EXPECT_EQ(traced[1], &file[1]);

  // Meaningful names are never matched by position.
  auto named = matchExampleInputs({"x", "mask"}, file);
  EXPECT_EQ(named[0], nullptr);
  EXPECT_EQ(named[1], nullptr);
  // Nor when the counts differ.
  auto fewer = matchExampleInputs({"input"}, file);
  EXPECT_EQ(fewer[0], nullptr);
  // By name, in any order; a partial match by name stays partial.
  std::vector<InputSpec> byName = {{"tokens", {3}, "i64"}, {"x", {3, 6}, "f32"}};
  auto some = matchExampleInputs({"x", "input0"}, byName);
  EXPECT_EQ(some[0], &byName[1]);
  EXPECT_EQ(some[1], nullptr);
}

} // namespace
