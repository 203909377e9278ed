//===- CheckedTest.cpp - overflow-safe sizes and bounded JSON from files ---===//

#include "runtime/Checked.h"
#include "runtime/JsonFile.h"

#include <gtest/gtest.h>

#include <climits>

using namespace cleave::runtime;

TEST(CheckedTest, ProductsAndSumsThatWrapAreRefused) {
  EXPECT_EQ(checkedMul(3, 4), 12);
  EXPECT_EQ(checkedMul(INT64_MAX, 1), INT64_MAX);
  EXPECT_FALSE(checkedMul(INT64_MAX, 2));
  EXPECT_FALSE(checkedMul(int64_t(1) << 32, int64_t(1) << 31));
  EXPECT_FALSE(checkedMul(-1, 5)); // a count from a file is never negative
  EXPECT_EQ(checkedAdd(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checkedAdd(INT64_MAX, 1));
  // tp = dp = 2^63 - 1 wraps to 1 in plain arithmetic.
  EXPECT_EQ(static_cast<int64_t>(static_cast<uint64_t>(INT64_MAX) * INT64_MAX), 1);
  EXPECT_FALSE(checkedProduct(std::vector<int64_t>{1, INT64_MAX, INT64_MAX}));
  EXPECT_EQ(checkedProduct(std::vector<int64_t>{2, 2, 2}), 8);
  EXPECT_EQ(checkedProduct(std::vector<int64_t>{}), 1);
  EXPECT_EQ(checkedProduct(std::vector<int64_t>{0, INT64_MAX, INT64_MAX}), 0); // empty: exact
}

TEST(CheckedTest, SpansAreBoundedWithoutWrapping) {
  EXPECT_TRUE(spanWithin(int64_t(0), int64_t(64), int64_t(64)));
  EXPECT_FALSE(spanWithin(int64_t(1), int64_t(64), int64_t(64)));
  // offset + length wraps to a small number in 64 bits: still past the limit.
  EXPECT_FALSE(spanWithin(int64_t(1) << 62, INT64_MAX, int64_t(4096)));
  EXPECT_FALSE(spanWithin(uint64_t(18446744073709551610ull), uint64_t(16), uint64_t(4096)));
  EXPECT_FALSE(spanWithin(int64_t(-8), int64_t(16), int64_t(4096)));
}

TEST(CheckedTest, TensorSizesFromFiles) {
  EXPECT_TRUE(checkTensorSize({DType::F32, {2, 3}}, "t").ok());
  EXPECT_TRUE(checkTensorSize({DType::F32, {}}, "t").ok());
  // [2^62] f32 is 2^64 bytes: 0 once wrapped. It must not "fit".
  Status s = checkTensorSize({DType::F32, {int64_t(1) << 62}}, "w.safetensors: tensor 'x'");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("w.safetensors: tensor 'x'"), std::string::npos) << s.message();
  EXPECT_FALSE(checkTensorSize({DType::F32, {int64_t(1) << 32, int64_t(1) << 32, 4}}, "t").ok());
  EXPECT_FALSE(checkTensorSize({DType::F32, {-1}}, "t").ok());
  EXPECT_FALSE(checkTensorSize({DType::F32, Shape(kMaxRank + 1, 1)}, "t").ok());
  // A zero dimension makes any other dimension harmless.
  EXPECT_TRUE(checkTensorSize({DType::F32, {0, INT64_MAX}}, "t").ok());
}

TEST(CheckedTest, DecimalsAreBounded) {
  EXPECT_EQ(parseDecimal("0"), 0);
  EXPECT_EQ(parseDecimal("999999999999999999"), 999999999999999999);
  EXPECT_FALSE(parseDecimal("9999999999999999999")); // 19 digits
  EXPECT_FALSE(parseDecimal(""));
  EXPECT_FALSE(parseDecimal("-1"));
  EXPECT_FALSE(parseDecimal("1e3"));
  EXPECT_FALSE(parseDecimal(" 1"));
}

TEST(CheckedTest, JsonNestingIsBoundedBeforeParsing) {
  nlohmann::json j;
  std::string shallow = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parseJson(shallow, "f.json", &j).ok());
  std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  Status s = parseJson(deep, "f.json", &j);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("f.json: nested deeper than"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at byte 32"), std::string::npos) << s.message();
  // Brackets inside strings (escaped quotes too) do not count.
  std::string inString = "{\"k\": \"" + std::string(1000, '[') + "\\\"" + "\"}";
  EXPECT_TRUE(parseJson(inString, "f.json", &j).ok());
  // Objects count as arrays do.
  std::string objects;
  for (int i = 0; i < 100; ++i)
    objects += "{\"a\":";
  objects += "1" + std::string(100, '}');
  EXPECT_FALSE(parseJson(objects, "f.json", &j).ok());
  Status bad = parseJson("{ not json", "f.json", &j);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), "f.json: not valid JSON");
}

TEST(CheckedTest, ErrorsQuoteBoundedExcerpts) {
  nlohmann::json big = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i)
    big.push_back(i);
  std::string quoted = jsonExcerpt(big, 80);
  EXPECT_LT(quoted.size(), 120u);
  EXPECT_NE(quoted.find("characters)"), std::string::npos);
  // Invalid UTF-8 in a string is quoted, not thrown on.
  nlohmann::json bytes = std::string("\xff\xfe", 2);
  EXPECT_NO_THROW(jsonExcerpt(bytes));
  EXPECT_EQ(excerpt("short"), "short");
}

TEST(CheckedTest, EscapingExceptionsBecomeStatuses) {
  Status s = catchExceptions("plan/manifest.json", []() -> Status {
    throw std::out_of_range("stoll");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "plan/manifest.json: internal error: stoll");
  Status oom = catchExceptions("x", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(oom.message(), "x: out of memory");
  EXPECT_TRUE(catchExceptions("x", [] { return Status(); }).ok());
}
