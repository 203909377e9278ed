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

} // namespace
