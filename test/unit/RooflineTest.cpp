//===- RooflineTest.cpp - measured time against the device's roofs --------===//
//
// runtime/Roofline on hand-built phases: the arithmetic of rates, shares and
// efficiencies, which roof bounds a row, the uncosted row, the median over
// runs, the dtype of the peak, and the JSON's fields.
//
//===----------------------------------------------------------------------===//

#include "runtime/Roofline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace cleave::runtime {
namespace {

InstructionSpec instruction(const std::string &kernel, std::optional<InstructionCost> cost,
                            int64_t output = 0) {
  InstructionSpec inst;
  inst.kernel = kernel;
  inst.outputs = {output};
  inst.cost = std::move(cost);
  return inst;
}

InstructionCost cost(const std::string &opClass, double flops, double bytes) {
  return {opClass, flops, bytes};
}

/// 100 GFLOP/s and 10 GB/s: the ridge at 10 FLOP/byte.
RooflinePeaks peaks() {
  RooflinePeaks p;
  p.flopsPerSecond = 100e9;
  p.bytesPerSecond = 10e9;
  p.source = "test";
  return p;
}

/// A convolution far right of the ridge, three maps far left of it, and a
/// collective the plan gives no cost.
Phase forward() {
  Phase phase;
  phase.name = "forward";
  phase.instructions = {
      instruction("conv2d", cost("convolution", 8e9, 1e8)), // 80 FLOP/B
      instruction("relu", cost("elementwise", 1e6, 4e8)),
      instruction("all_reduce", std::nullopt),
      instruction("relu", cost("elementwise", 1e6, 4e8)),
      instruction("add", cost("elementwise", 1e6, 1.2e8)),
  };
  return phase;
}

const std::vector<double> kSeconds = {0.1, 0.05, 0.03, 0.05, 0.02}; // 0.25 in all

const RooflineRow *findRow(const std::vector<RooflineRow> &rows, const std::string &name) {
  for (const RooflineRow &row : rows)
    if (row.name == name)
      return &row;
  return nullptr;
}

TEST(RooflineTest, WholeRunAgainstBothPeaks) {
  Phase phase = forward();
  RooflineReport report;
  ASSERT_TRUE(buildRoofline({{&phase, kSeconds}}, peaks(), &report).ok());
  EXPECT_EQ(report.phases, "forward");
  EXPECT_EQ(report.total.calls, 5);
  EXPECT_DOUBLE_EQ(report.total.seconds, 0.25);
  // The uncosted collective counts in the time, not in FLOPs or bytes.
  EXPECT_DOUBLE_EQ(report.total.flops, 8e9 + 3e6);
  EXPECT_DOUBLE_EQ(report.total.bytes, 1e8 + 9.2e8);
  EXPECT_DOUBLE_EQ(report.total.flopsPerSecond, (8e9 + 3e6) / 0.25);
  EXPECT_DOUBLE_EQ(report.computeFraction, (8e9 + 3e6) / 0.25 / 100e9);
  EXPECT_DOUBLE_EQ(report.memoryFraction, (1e8 + 9.2e8) / 0.25 / 10e9);
}

TEST(RooflineTest, ClassesByTimeWithTheirBoundAndEfficiency) {
  Phase phase = forward();
  RooflineReport report;
  ASSERT_TRUE(buildRoofline({{&phase, kSeconds}}, peaks(), &report).ok());
  ASSERT_EQ(report.classes.size(), 3u);
  // Most time first: the maps (0.12 s), the convolution (0.1 s), the rest.
  EXPECT_EQ(report.classes[0].name, "elementwise");
  EXPECT_EQ(report.classes[1].name, "convolution");
  EXPECT_EQ(report.classes[2].name, "uncosted");
  double shares = 0;
  for (const RooflineRow &row : report.classes)
    shares += row.share;
  EXPECT_NEAR(shares, 1.0, 1e-12);

  const RooflineRow &conv = report.classes[1];
  EXPECT_EQ(conv.calls, 1);
  EXPECT_DOUBLE_EQ(conv.share, 0.4);
  ASSERT_TRUE(conv.intensity);
  EXPECT_DOUBLE_EQ(*conv.intensity, 80);
  EXPECT_EQ(conv.bound, Bound::Compute);
  EXPECT_DOUBLE_EQ(conv.efficiency, 0.8); // 80 GFLOP/s of 100

  const RooflineRow &maps = report.classes[0];
  EXPECT_EQ(maps.calls, 3);
  EXPECT_DOUBLE_EQ(maps.share, 0.48);
  EXPECT_EQ(maps.bound, Bound::Memory);
  EXPECT_DOUBLE_EQ(maps.bytesPerSecond, 9.2e8 / 0.12);
  EXPECT_DOUBLE_EQ(maps.efficiency, 9.2e8 / 0.12 / 10e9);
  // Its kernels, most time first, each against its own roof.
  ASSERT_EQ(maps.kernels.size(), 2u);
  EXPECT_EQ(maps.kernels[0].name, "relu");
  EXPECT_EQ(maps.kernels[0].calls, 2);
  EXPECT_DOUBLE_EQ(maps.kernels[0].efficiency, 0.8); // 8 GB/s of 10
  EXPECT_EQ(maps.kernels[1].name, "add");
  EXPECT_DOUBLE_EQ(maps.kernels[1].efficiency, 0.6);

  const RooflineRow &rest = report.classes[2];
  EXPECT_FALSE(rest.costed);
  EXPECT_EQ(rest.calls, 1);
  EXPECT_DOUBLE_EQ(rest.seconds, 0.03);
  EXPECT_DOUBLE_EQ(rest.flops, 0);
  ASSERT_EQ(rest.kernels.size(), 1u);
  EXPECT_EQ(rest.kernels[0].name, "all_reduce");
}

TEST(RooflineTest, TheRidgeDecidesTheBound) {
  Phase phase;
  phase.name = "forward";
  phase.instructions = {
      instruction("matmul", cost("gemm", 10e6, 1e6)),      // at the ridge: compute
      instruction("linear", cost("gemm", 9.99e6, 1e6)),    // just left: memory
      instruction("attention", cost("attention", 1e6, 0)), // no bytes: compute
      instruction("assign", cost("elementwise", 0, 0)),    // nothing: memory, 0
  };
  RooflineReport report;
  ASSERT_TRUE(buildRoofline({{&phase, {1e-3, 1e-3, 1e-3, 1e-3}}}, peaks(), &report).ok());
  const RooflineRow *gemm = findRow(report.classes, "gemm");
  ASSERT_TRUE(gemm);
  EXPECT_EQ(findRow(gemm->kernels, "matmul")->bound, Bound::Compute);
  EXPECT_EQ(findRow(gemm->kernels, "linear")->bound, Bound::Memory);
  const RooflineRow *attention = findRow(report.classes, "attention");
  ASSERT_TRUE(attention);
  EXPECT_FALSE(attention->intensity);
  EXPECT_EQ(attention->bound, Bound::Compute);
  EXPECT_DOUBLE_EQ(attention->efficiency, 1e6 / 1e-3 / 100e9);
  const RooflineRow *copy = findRow(report.classes, "elementwise");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->bound, Bound::Memory);
  EXPECT_DOUBLE_EQ(copy->efficiency, 0);
}

TEST(RooflineTest, PhasesAddUp) {
  Phase first = forward(), second = forward();
  second.name = "backward";
  RooflineReport report;
  ASSERT_TRUE(buildRoofline({{&first, kSeconds}, {&second, kSeconds}}, peaks(), &report).ok());
  EXPECT_EQ(report.phases, "forward+backward");
  EXPECT_EQ(report.total.calls, 10);
  EXPECT_DOUBLE_EQ(report.total.seconds, 0.5);
  EXPECT_DOUBLE_EQ(findRow(report.classes, "convolution")->flops, 16e9);
}

TEST(RooflineTest, RefusesWhatItCannotMeasure) {
  Phase phase = forward();
  RooflineReport report;
  Status wrongCount = buildRoofline({{&phase, {0.1, 0.2}}}, peaks(), &report);
  ASSERT_FALSE(wrongCount.ok());
  EXPECT_NE(wrongCount.message().find("5 instructions but 2 times"), std::string::npos)
      << wrongCount.message();
  RooflinePeaks noBandwidth = peaks();
  noBandwidth.bytesPerSecond = 0;
  EXPECT_FALSE(buildRoofline({{&phase, kSeconds}}, noBandwidth, &report).ok());
  std::vector<double> negative = kSeconds;
  negative[3] = -1;
  EXPECT_FALSE(buildRoofline({{&phase, negative}}, peaks(), &report).ok());
}

TEST(RooflineTest, MedianPerInstruction) {
  std::vector<double> median;
  ASSERT_TRUE(medianSeconds({{3, 10}, {1, 30}, {2, 20}}, &median).ok());
  EXPECT_EQ(median, (std::vector<double>{2, 20}));
  ASSERT_TRUE(medianSeconds({{1, 10}, {3, 30}}, &median).ok());
  EXPECT_EQ(median, (std::vector<double>{2, 20}));
  EXPECT_FALSE(medianSeconds({{1, 10}, {3}}, &median).ok());
}

TEST(RooflineTest, PeakDTypeIsTheHeaviestInstructionsOutput) {
  ProgramSpec program;
  program.buffers.resize(3);
  program.buffers[0].desc.dtype = DType::F32;
  program.buffers[1].desc.dtype = DType::BF16;
  program.buffers[2].desc.dtype = DType::I64;
  Phase phase;
  phase.instructions = {instruction("cast", cost("elementwise", 1e3, 1e3), 0),
                        instruction("matmul", cost("gemm", 1e9, 1e6), 1),
                        instruction("argmax", cost("reduction", 2e9, 1e6), 2),
                        instruction("all_reduce", std::nullopt, 0)};
  EXPECT_EQ(computeDType(program, {&phase}), DType::BF16); // argmax's i64 is no float
  Phase uncosted;
  uncosted.instructions = {instruction("send", std::nullopt, 1)};
  EXPECT_EQ(computeDType(program, {&uncosted}), DType::F32);
}

TEST(RooflineTest, JsonHasTheReportsFields) {
  Phase phase = forward();
  RooflineReport report;
  report.runs = 4;
  ASSERT_TRUE(buildRoofline({{&phase, kSeconds}}, peaks(), &report).ok());
  EXPECT_EQ(report.runs, 4);
  nlohmann::json json = nlohmann::json::parse(formatRooflineJson(report));
  EXPECT_EQ(json["phases"], "forward");
  EXPECT_EQ(json["runs"], 4);
  EXPECT_DOUBLE_EQ(json["peaks"]["ridge_flops_per_byte"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(json["total"]["compute_fraction"].get<double>(), report.computeFraction);
  ASSERT_EQ(json["classes"].size(), 3u);
  EXPECT_EQ(json["classes"][1]["class"], "convolution");
  EXPECT_EQ(json["classes"][1]["bound"], "compute");
  EXPECT_DOUBLE_EQ(json["classes"][1]["efficiency"].get<double>(), 0.8);
  EXPECT_EQ(json["classes"][0]["kernels"][0]["kernel"], "relu");
  EXPECT_EQ(json["classes"][2]["costed"], false);
  EXPECT_FALSE(json["classes"][2].contains("efficiency"));
  // The table names every class and kernel.
  std::string table = formatRooflineTable(report);
  for (const char *name : {"convolution", "conv2d", "elementwise", "relu", "uncosted"})
    EXPECT_NE(table.find(name), std::string::npos) << name;
}

} // namespace
} // namespace cleave::runtime
