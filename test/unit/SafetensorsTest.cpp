//===- SafetensorsTest.cpp - the runtime's safetensors reader and writer --===//

#include "runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace cleave::runtime;

namespace {

class SafetensorsTest : public ::testing::Test {
protected:
  std::string path = ::testing::TempDir() + "/cleave-st-" + std::to_string(::getpid()) + ".safetensors";
  void TearDown() override { std::remove(path.c_str()); }

  /// Writes a file with the given JSON header and `dataBytes` zero bytes of data.
  void writeRaw(const std::string &header, size_t dataBytes) {
    std::ofstream out(path, std::ios::binary);
    uint64_t n = header.size();
    out.write(reinterpret_cast<const char *>(&n), 8);
    out << header << std::string(dataBytes, '\0');
  }
  std::string readError() {
    SafetensorsIndex index;
    Status s = readSafetensorsIndex(path, &index);
    return s.ok() ? "ok" : s.message();
  }
};

TEST_F(SafetensorsTest, RoundTripKeepsDataAndAlignsWideTypesFirst) {
  std::vector<char> flags = {1, 0, 1};
  std::vector<float> floats = {1.5f, -2.0f};
  std::vector<int64_t> ids = {7, 8, 9, 10};
  ASSERT_TRUE(writeSafetensors(path, {{"flags", {DType::I1, {3}}, flags.data()},
                                      {"floats", {DType::F32, {2}}, floats.data()},
                                      {"ids", {DType::I64, {2, 2}}, ids.data()}},
                               {{"program", "p"}})
                  .ok());
  SafetensorsIndex index;
  ASSERT_TRUE(readSafetensorsIndex(path, &index).ok());
  EXPECT_EQ(index.metadata.at("program"), "p");
  EXPECT_EQ(index.dataOffset % 8, 0u);
  ASSERT_EQ(index.entries.size(), 3u);
  EXPECT_EQ(index.entries[0].name, "ids"); // i64 first: every tensor is aligned
  for (const SafetensorsEntry &e : index.entries)
    EXPECT_EQ(e.begin % dtypeBytes(e.desc.dtype), 0u) << e.name;
  std::vector<float> back(2);
  ASSERT_TRUE(readSafetensorsTensor(index, *index.find("floats"), back.data()).ok());
  EXPECT_EQ(back, floats);
}

TEST_F(SafetensorsTest, RejectsHolesOverlapsAndSizeMismatches) {
  writeRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_NE(readError().find("a hole of 4 bytes precedes tensor 'a'"), std::string::npos)
      << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
           R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8);
  EXPECT_NE(readError().find("overlaps"), std::string::npos) << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(readError().find("needs 12 bytes but data_offsets [0, 8) give 8"), std::string::npos)
      << readError();
  writeRaw(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_NE(readError().find("unsupported dtype 'U8'"), std::string::npos) << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2);
  EXPECT_NE(readError().find("truncated"), std::string::npos) << readError();
  writeRaw("not json", 0);
  EXPECT_NE(readError().find("header is not a JSON object"), std::string::npos) << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  EXPECT_EQ(readError(), "ok");
}

TEST_F(SafetensorsTest, ManyTensorsAreFoundByName) {
  // A file may list very many tensors: lookups by name must stay fast and
  // right (the index sorts entries by offset, not by name).
  std::vector<float> data(20000, 1.0f);
  std::vector<SafetensorsTensor> tensors;
  std::vector<std::string> names;
  for (int i = 0; i < 20000; ++i)
    names.push_back("t" + std::to_string((i * 7919) % 20000));
  for (int i = 0; i < 20000; ++i)
    tensors.push_back({names[i], {DType::F32, {1}}, &data[i]});
  ASSERT_TRUE(writeSafetensors(path, tensors, {}).ok());
  SafetensorsIndex index;
  ASSERT_TRUE(readSafetensorsIndex(path, &index).ok());
  ASSERT_EQ(index.entries.size(), 20000u);
  for (const std::string &name : names) {
    const SafetensorsEntry *e = index.find(name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->name, name);
  }
  EXPECT_EQ(index.find("t20000"), nullptr);
  // An index assembled by hand is searched too.
  SafetensorsIndex manual;
  manual.entries.push_back(index.entries.front());
  EXPECT_EQ(manual.find(index.entries.front().name), &manual.entries.front());
}

TEST_F(SafetensorsTest, HostileHeadersAreRefused) {
  // Nesting past the limit, a size that wraps to 0 bytes, offsets past 2^64.
  writeRaw("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0);
  EXPECT_NE(readError().find("nested deeper than"), std::string::npos) << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(readError().find("is larger than"), std::string::npos) << readError();
  writeRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551616]}})", 0);
  EXPECT_NE(readError().find("bad data_offsets"), std::string::npos) << readError();
}

TEST_F(SafetensorsTest, WriteFailureLeavesNothing) {
  std::string bad = ::testing::TempDir() + "/no-such-dir-cleave/x.safetensors";
  float v = 1;
  Status s = writeSafetensors(bad, {{"v", {DType::F32, {1}}, &v}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot create"), std::string::npos) << s.message();
}

} // namespace
