//===- CostTest.cpp - cluster specs, collectives and the memory model -----===//

#include "cost/ClusterSpec.h"
#include "cost/Collectives.h"
#include "cost/MemoryModel.h"
#include "cost/OpTime.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

using namespace cleave::cost;
using cleave::runtime::DType;
using cleave::runtime::Status;
using Json = nlohmann::ordered_json;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string a100Text() { return readFile(CLEAVE_CLUSTERS_DIR "/dgx-a100-80gb.json"); }

//===----------------------------------------------------------------------===//
// Cluster specs
//===----------------------------------------------------------------------===//

TEST(OpClassTest, NamesRoundTrip) {
  for (int i = 0; i < kNumOpClasses; ++i) {
    OpClass c = static_cast<OpClass>(i);
    EXPECT_EQ(parseOpClass(opClassName(c)), c);
  }
  EXPECT_EQ(opClassName(OpClass::Convolution), "convolution");
  EXPECT_FALSE(parseOpClass("matmul"));
}

TEST(ClusterSpecTest, RoundTripsExactly) {
  Json json = Json::parse(a100Text());
  json["device"]["gemm_samples"] = Json::parse(
      R"([{"batch": 1, "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "flops_per_s": 2.7e14},
          {"batch": 8, "m": 128, "n": 64, "k": 3, "dtype": "f32", "flops_per_s": 1.234567890123e11},
          {"batch": 96, "m": 6272, "n": 1, "k": 9, "dtype": "f32", "flops_per_s": 3.5e9,
           "op_class": "grouped_convolution"}])");
  json["measurements"] = Json::parse(R"({"zeta": [1, 2.5, "x"], "alpha": {"nested": null}})");
  json["device"]["kernel_overhead_s"] = 1.0 / 3.0; // needs all 17 digits
  json["device"]["adamw_seconds_per_parameter"] = 8.1e-10;
  json["intra_node"]["nvls_bus_bandwidth"] = 4.8e11;

  ClusterSpec first;
  Status s = parseClusterSpec(json.dump(), "a.json", first);
  ASSERT_TRUE(s.ok()) << s.message();
  std::string text = formatClusterSpec(first);
  ClusterSpec second;
  s = parseClusterSpec(text, "b.json", second);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(formatClusterSpec(second), text);

  EXPECT_EQ(second.name, "dgx-a100-80gb");
  EXPECT_EQ(second.device.kernelOverhead, 1.0 / 3.0);
  EXPECT_EQ(second.device.adamwSecondsPerParameter, 8.1e-10);
  EXPECT_EQ(second.device.peakFlops.at(DType::BF16), 3.12e14);
  EXPECT_EQ(second.device.memoryBytes, 85899345920.0);
  EXPECT_EQ(second.device.efficiencyOf(OpClass::Gemm).compute, 0.87);
  EXPECT_EQ(second.intraNode.efficiency, 0.77);
  EXPECT_EQ(second.interNode.efficiency, 0.96);
  EXPECT_EQ(second.nvlsBusBandwidth, 4.8e11);
  ASSERT_EQ(second.device.gemmSamples.size(), 3u);
  EXPECT_EQ(second.device.gemmSamples[1].opClass, OpClass::Gemm);
  EXPECT_EQ(second.device.gemmSamples[2].opClass, OpClass::GroupedConvolution);
  EXPECT_EQ(second.device.gemmSamples[1].shape.k, 3);
  EXPECT_EQ(second.device.gemmSamples[1].dtype, DType::F32);
  EXPECT_EQ(second.device.gemmSamples[1].flopsPerSecond, 1.234567890123e11);
  EXPECT_EQ(second.nicsPerNode, 8);
  // Measurements stay verbatim, in the order they were written.
  EXPECT_EQ(second.measurementsJson, R"({"zeta":[1,2.5,"x"],"alpha":{"nested":null}})");
  EXPECT_EQ(second.measurementsJson, first.measurementsJson);
}

TEST(ClusterSpecTest, PeakFlopsFallBackToF32) {
  ClusterSpec spec;
  ASSERT_TRUE(loadClusterSpec(CLEAVE_CLUSTERS_DIR "/aws-p3.16xlarge.json", spec).ok());
  EXPECT_EQ(spec.device.peakFlopsOf(DType::F16), 1.25e14);
  EXPECT_EQ(spec.device.peakFlopsOf(DType::BF16), 1.57e13); // V100: no bf16 units
}

struct BadSpec {
  const char *pointer; // JSON pointer of the field to change
  const char *value;   // new JSON value, or nullptr to remove the field
  const char *error;   // expected message
};

class ClusterSpecErrorTest : public ::testing::TestWithParam<BadSpec> {};

TEST_P(ClusterSpecErrorTest, NamesFileAndField) {
  const BadSpec &bad = GetParam();
  Json json = Json::parse(a100Text());
  json["device"]["gemm_samples"] = Json::parse(
      R"([{"batch": 1, "m": 64, "n": 64, "k": 64, "dtype": "f32", "flops_per_s": 1e12},
          {"batch": 1, "m": 64, "n": 64, "k": 64, "dtype": "bf16", "flops_per_s": 1e12}])");
  Json::json_pointer pointer(bad.pointer);
  if (bad.value)
    json[pointer] = Json::parse(bad.value);
  else
    json[pointer.parent_pointer()].erase(pointer.back());

  ClusterSpec spec;
  spec.name = "untouched";
  Status s = parseClusterSpec(json.dump(), "dgx.json", spec);
  ASSERT_FALSE(s.ok()) << bad.pointer;
  EXPECT_EQ(s.message(), bad.error);
  EXPECT_EQ(spec.name, "untouched"); // a failed parse leaves the spec alone
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ClusterSpecErrorTest,
    ::testing::Values(
        BadSpec{"/device/efficiency/gemm/compute", "1.4",
                "dgx.json: device.efficiency.gemm.compute: must be in (0, 1], got 1.4"},
        BadSpec{"/device/efficiency/attention/memory", "0",
                "dgx.json: device.efficiency.attention.memory: must be in (0, 1], got 0"},
        BadSpec{"/format", "\"cleave-plan\"",
                "dgx.json: format: expected 'cleave-cluster', got 'cleave-plan'"},
        BadSpec{"/version", "2",
                "dgx.json: version: unsupported version 2 (this build reads version 1)"},
        BadSpec{"/device/memory_bandwidth", nullptr, "dgx.json: device.memory_bandwidth: missing"},
        BadSpec{"/source", nullptr, "dgx.json: source: missing"},
        BadSpec{"/nodes", "\"4\"", "dgx.json: nodes: expected an integer, got \"4\""},
        BadSpec{"/nodes", "2.5", "dgx.json: nodes: expected an integer, got 2.5"},
        BadSpec{"/nodes", "0", "dgx.json: nodes: must be at least 1, got 0"},
        BadSpec{"/devices_per_node", "-8",
                "dgx.json: devices_per_node: must be at least 1, got -8"},
        BadSpec{"/intra_node/bandwidth", "0",
                "dgx.json: intra_node.bandwidth: must be positive, got 0"},
        BadSpec{"/intra_node/efficiency", "1.2",
                "dgx.json: intra_node.efficiency: must be in (0, 1], got 1.2"},
        BadSpec{"/inter_node/efficiency", "0",
                "dgx.json: inter_node.efficiency: must be in (0, 1], got 0"},
        BadSpec{"/intra_node/nvls_bus_bandwidth", "-1",
                "dgx.json: intra_node.nvls_bus_bandwidth: must be positive, got -1"},
        BadSpec{"/inter_node/bandwidth_per_nic", "-1",
                "dgx.json: inter_node.bandwidth_per_nic: must be positive, got -1"},
        BadSpec{"/inter_node/nics_per_node", "0",
                "dgx.json: inter_node.nics_per_node: must be at least 1, got 0"},
        BadSpec{"/inter_node/latency_s", "-1e-6",
                "dgx.json: inter_node.latency_s: must be non-negative, got -1e-06"},
        BadSpec{"/device/memory_bytes", "\"80GB\"",
                "dgx.json: device.memory_bytes: expected a number, got \"80GB\""},
        BadSpec{"/device/memory_reserve_bytes", "85899345920",
                "dgx.json: device.memory_reserve_bytes: must be less than device.memory_bytes "
                "(8.58993e+10), got 8.58993e+10"},
        BadSpec{"/device/efficiency/gemmm", R"({"compute": 0.5, "memory": 0.5})",
                "dgx.json: device.efficiency.gemmm: unknown op class (expected gemm, "
                "convolution, elementwise, reduction, attention, grouped_convolution, "
                "pooling, normalization or layout)"},
        BadSpec{"/device/efficiency/reduction", nullptr,
                "dgx.json: device.efficiency.reduction: missing"},
        BadSpec{"/device/efficiency/gemm/flops", "0.5",
                "dgx.json: device.efficiency.gemm.flops: unknown field (expected one of "
                "compute, memory)"},
        BadSpec{"/device/peak_flops/fp8", "1e15",
                "dgx.json: device.peak_flops.fp8: unknown dtype (expected f32, bf16 or f16)"},
        BadSpec{"/device/peak_flops/f32", nullptr, "dgx.json: device.peak_flops.f32: missing"},
        BadSpec{"/device/kind", "\"tpu\"",
                "dgx.json: device.kind: expected 'gpu' or 'cpu', got 'tpu'"},
        BadSpec{"/device/gemm_samples/1/dtype", "\"i64\"",
                "dgx.json: device.gemm_samples[1].dtype: unknown dtype 'i64' (expected f32, "
                "bf16 or f16)"},
        BadSpec{"/device/gemm_samples/0/m", "0",
                "dgx.json: device.gemm_samples[0].m: must be at least 1, got 0"},
        BadSpec{"/device/gemm_samples", "{}",
                "dgx.json: device.gemm_samples: expected a list, got {}"},
        BadSpec{"/node", "2",
                "dgx.json: node: unknown field (expected one of format, version, name, "
                "description, source, nodes, devices_per_node, device, intra_node, "
                "inter_node, host_memory_bytes, host_memory_bandwidth, host_link, "
                "contention, collective_samples, prediction_error, measurements)"},
        BadSpec{"/device/memory_bandwith", "1e12",
                "dgx.json: device.memory_bandwith: unknown field (expected one of name, kind, "
                "memory_bytes, memory_reserve_bytes, peak_flops, memory_bandwidth, "
                "kernel_overhead_s, adamw_seconds_per_parameter, efficiency, gemm_samples)"},
        BadSpec{"/device/adamw_seconds_per_parameter", "0",
                "dgx.json: device.adamw_seconds_per_parameter: must be positive, got 0"},
        BadSpec{"/host_memory_bytes", "0", "dgx.json: host_memory_bytes: must be positive, got 0"},
        BadSpec{"/host_memory_bytes", "\"2TB\"",
                "dgx.json: host_memory_bytes: expected a number, got \"2TB\""},
        BadSpec{"/host_memory_bandwidth", "-4e11",
                "dgx.json: host_memory_bandwidth: must be positive, got -4e+11"},
        BadSpec{"/host_link/bandwidth", "-1",
                "dgx.json: host_link.bandwidth: must be positive, got -1"},
        BadSpec{"/host_link/bandwidth", nullptr, "dgx.json: host_link.bandwidth: missing"},
        BadSpec{"/host_link/latency_s", "-1e-6",
                "dgx.json: host_link.latency_s: must be non-negative, got -1e-06"},
        BadSpec{"/host_link/efficiency", "1.5",
                "dgx.json: host_link.efficiency: must be in (0, 1], got 1.5"},
        BadSpec{"/host_link/latency", "1e-5",
                "dgx.json: host_link.latency: unknown field (expected one of bandwidth, "
                "latency_s, efficiency)"},
        BadSpec{"/host_link", "6.3e10",
                "dgx.json: host_link: expected an object, got 63000000000.0"},
        BadSpec{"/contention", R"({"devices": 1, "memory_bandwidth": 1e12, "compute_scale": 0.9})",
                "dgx.json: contention.devices: must be at least 2, got 1"},
        BadSpec{"/contention", R"({"devices": 16, "memory_bandwidth": 1e12, "compute_scale": 0.9})",
                "dgx.json: contention.devices: more than devices_per_node (8), got 16"},
        BadSpec{"/contention", R"({"devices": 8, "memory_bandwidth": 0, "compute_scale": 0.9})",
                "dgx.json: contention.memory_bandwidth: must be positive, got 0"},
        BadSpec{"/contention", R"({"devices": 8, "memory_bandwidth": 1e12, "compute_scale": 1.2})",
                "dgx.json: contention.compute_scale: must be in (0, 1], got 1.2"},
        BadSpec{"/contention", R"({"devices": 8, "memory_bandwidth": 1e12})",
                "dgx.json: contention.compute_scale: missing"},
        BadSpec{"/contention", R"({"devices": 8, "bandwidth": 1e12, "compute_scale": 1})",
                "dgx.json: contention.bandwidth: unknown field (expected one of devices, "
                "memory_bandwidth, compute_scale)"},
        BadSpec{"/collective_samples", R"([{"collective": "broadcast", "ranks": 2, "bytes": 4096, "seconds": 1e-6}])",
                "dgx.json: collective_samples[0].collective: expected all-reduce, all-gather, "
                "reduce-scatter, all-to-all or send-recv, got 'broadcast'"},
        BadSpec{"/collective_samples", R"([{"collective": "all-reduce", "ranks": 1, "bytes": 4096, "seconds": 1e-6}])",
                "dgx.json: collective_samples[0].ranks: must be at least 2, got 1"},
        BadSpec{"/collective_samples", R"([{"collective": "all-reduce", "ranks": 2, "bytes": 4096, "seconds": 0}])",
                "dgx.json: collective_samples[0].seconds: must be positive, got 0"},
        BadSpec{"/collective_samples", R"({"collective": "all-reduce"})",
                "dgx.json: collective_samples: expected a list, got {\"collective\":\"all-reduce\"}"},
        BadSpec{"/prediction_error/runs", "0",
                "dgx.json: prediction_error.runs: must be at least 1, got 0"},
        BadSpec{"/prediction_error/mean_abs_error", "-0.1",
                "dgx.json: prediction_error.mean_abs_error: must be non-negative, got -0.1"},
        BadSpec{"/prediction_error/mean_signed_error", "-0.5",
                "dgx.json: prediction_error.mean_signed_error: larger than mean_abs_error "
                "(0.1689), got -0.5"},
        BadSpec{"/prediction_error/source", nullptr, "dgx.json: prediction_error.source: missing"},
        BadSpec{"/measurements", "[1]", "dgx.json: measurements: expected an object, got [1]"},
        BadSpec{"/intra_node", "300e9",
                "dgx.json: intra_node: expected an object, got 300000000000.0"}));

TEST(ClusterSpecTest, HostMemoryAndLinkAreOptional) {
  Json json = Json::parse(a100Text());
  ClusterSpec spec;
  Status s = parseClusterSpec(json.dump(), "a.json", spec);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(spec.hostMemoryBytes, 2199023255552.0); // 2 TiB
  EXPECT_EQ(spec.hostMemoryBandwidth, 4.096e11);      // 2 x 8 channels of DDR4-3200
  ASSERT_TRUE(spec.hasHostLink());
  EXPECT_EQ(spec.hostLink.bandwidth, 3.15e10); // PCIe 4.0 x16
  EXPECT_EQ(spec.hostLink.efficiency, 0.8);
  EXPECT_EQ(spec.hostLink.latency, 1e-5);

  // Formatted and read back: the same figures.
  spec.hostLink.latency = 1.0 / 3.0 * 1e-5; // needs all 17 digits
  std::string text = formatClusterSpec(spec);
  Json written = Json::parse(text);
  EXPECT_EQ(written["host_memory_bytes"], 2199023255552.0);
  EXPECT_EQ(written["host_memory_bandwidth"], 4.096e11);
  EXPECT_EQ(written["host_link"]["bandwidth"], 3.15e10);
  EXPECT_EQ(written["host_link"]["efficiency"], 0.8);
  ClusterSpec back;
  s = parseClusterSpec(text, "b.json", back);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(back.hostMemoryBytes, spec.hostMemoryBytes);
  EXPECT_EQ(back.hostMemoryBandwidth, spec.hostMemoryBandwidth);
  EXPECT_EQ(back.hostLink.bandwidth, spec.hostLink.bandwidth);
  EXPECT_EQ(back.hostLink.efficiency, spec.hostLink.efficiency);
  EXPECT_EQ(back.hostLink.latency, spec.hostLink.latency);
  EXPECT_EQ(formatClusterSpec(back), text);

  // A measured link (efficiency 1) is written without an efficiency.
  back.hostLink.efficiency = 1;
  written = Json::parse(formatClusterSpec(back));
  EXPECT_FALSE(written["host_link"].contains("efficiency"));

  // A spec written before spilling has neither, and none is written back.
  json.erase("host_memory_bytes");
  json.erase("host_memory_bandwidth");
  json.erase("host_link");
  s = parseClusterSpec(json.dump(), "old.json", spec);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(spec.hostMemoryBytes, 0);
  EXPECT_EQ(spec.hostMemoryBandwidth, 0);
  EXPECT_FALSE(spec.hasHostLink());
  written = Json::parse(formatClusterSpec(spec));
  EXPECT_FALSE(written.contains("host_memory_bytes"));
  EXPECT_FALSE(written.contains("host_memory_bandwidth"));
  EXPECT_FALSE(written.contains("host_link"));
}

TEST(ClusterSpecTest, ContentionSharesTheNodeAmongBusyDevices) {
  Json json = Json::parse(a100Text());
  ClusterSpec spec;
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a.json", spec).ok());
  EXPECT_FALSE(spec.contention.measured()); // GPUs with their own memory: none
  DeviceSpec alone = deviceSharingNode(spec, 8);
  EXPECT_EQ(alone.memoryBandwidth, spec.device.memoryBandwidth);
  EXPECT_EQ(alone.peakFlopsOf(DType::BF16), spec.device.peakFlopsOf(DType::BF16));

  // Four devices that each streamed 25 GB/s with all four busy (100 GB/s
  // for the node) and kept 0.7 of their GEMM rate; alone each did 40 GB/s.
  json["devices_per_node"] = 4;
  json["device"]["memory_bandwidth"] = 40e9;
  json["device"]["gemm_samples"] = Json::parse(
      R"([{"batch": 1, "m": 1024, "n": 1024, "k": 1024, "dtype": "f32", "flops_per_s": 1e11}])");
  json["contention"] = Json::parse(
      R"({"devices": 4, "memory_bandwidth": 25e9, "compute_scale": 0.7})");
  ASSERT_TRUE(parseClusterSpec(json.dump(), "c.json", spec).ok());
  ASSERT_TRUE(spec.contention.measured());
  double f32 = spec.device.peakFlopsOf(DType::F32);

  DeviceSpec one = deviceSharingNode(spec, 1);
  EXPECT_EQ(one.memoryBandwidth, 40e9);
  EXPECT_EQ(one.peakFlopsOf(DType::F32), f32);
  // Two busy: 100 GB/s over two is 50, more than one device alone moves.
  DeviceSpec two = deviceSharingNode(spec, 2);
  EXPECT_EQ(two.memoryBandwidth, 40e9);
  EXPECT_NEAR(two.peakFlopsOf(DType::F32), f32 * 0.9, f32 * 1e-12);
  EXPECT_NEAR(two.gemmSamples[0].flopsPerSecond, 1e11 * 0.9, 1);
  // Four busy: what was measured.
  DeviceSpec four = deviceSharingNode(spec, 4);
  EXPECT_DOUBLE_EQ(four.memoryBandwidth, 25e9);
  EXPECT_NEAR(four.peakFlopsOf(DType::F32), f32 * 0.7, f32 * 1e-12);
  EXPECT_NEAR(four.peakFlopsOf(DType::BF16), spec.device.peakFlopsOf(DType::BF16) * 0.7,
              spec.device.peakFlopsOf(DType::BF16) * 1e-12);
  // GEMM efficiency (a fraction of peak) is unchanged: the rate scales.
  GemmShape shape{1, 1024, 1024, 1024};
  EXPECT_NEAR(gemmEfficiency(four, shape, DType::F32, OpClass::Gemm),
              gemmEfficiency(spec.device, shape, DType::F32, OpClass::Gemm), 1e-12);

  // Written and read back.
  std::string text = formatClusterSpec(spec);
  ClusterSpec back;
  ASSERT_TRUE(parseClusterSpec(text, "b.json", back).ok());
  EXPECT_EQ(back.contention.devices, 4);
  EXPECT_EQ(back.contention.memoryBandwidth, 25e9);
  EXPECT_EQ(back.contention.computeScale, 0.7);
  EXPECT_EQ(formatClusterSpec(back), text);
}

TEST(ClusterSpecTest, PredictionErrorIsReadAndWrittenBack) {
  ClusterSpec spec;
  ASSERT_TRUE(parseClusterSpec(a100Text(), "a.json", spec).ok());
  ASSERT_TRUE(spec.predictionError.known());
  EXPECT_EQ(spec.predictionError.meanAbs, 0.1689);
  EXPECT_EQ(spec.predictionError.meanSigned, -0.1672);
  EXPECT_EQ(spec.predictionError.runs, 14);
  ClusterSpec back;
  ASSERT_TRUE(parseClusterSpec(formatClusterSpec(spec), "b.json", back).ok());
  EXPECT_EQ(back.predictionError.meanAbs, spec.predictionError.meanAbs);
  EXPECT_EQ(back.predictionError.source, spec.predictionError.source);
  // Absent: not validated, and not written.
  Json json = Json::parse(a100Text());
  json.erase("prediction_error");
  ASSERT_TRUE(parseClusterSpec(json.dump(), "c.json", spec).ok());
  EXPECT_FALSE(spec.predictionError.known());
  EXPECT_FALSE(Json::parse(formatClusterSpec(spec)).contains("prediction_error"));
}

TEST(ClusterSpecTest, RejectsTextThatIsNotAnObject) {
  ClusterSpec spec;
  EXPECT_EQ(parseClusterSpec("{\"format\": ", "x.json", spec).message(), "x.json: not valid JSON");
  EXPECT_EQ(parseClusterSpec("[]", "x.json", spec).message(), "x.json: expected a JSON object");
}

class ClusterSpecFileTest : public ::testing::Test {
protected:
  std::string path =
      ::testing::TempDir() + "/cleave-cluster-" + std::to_string(::getpid()) + ".json";
  void TearDown() override { std::remove(path.c_str()); }
};

TEST_F(ClusterSpecFileTest, NodesOverride) {
  std::ofstream(path) << a100Text();
  ClusterSpec spec;
  ASSERT_TRUE(loadClusterSpec(path, spec).ok());
  EXPECT_EQ(spec.nodes, 1);
  EXPECT_EQ(spec.deviceCount(), 8);
  ASSERT_TRUE(loadClusterSpec(path, spec, 4).ok());
  EXPECT_EQ(spec.nodes, 4);
  EXPECT_EQ(spec.deviceCount(), 32);
  Status s = loadClusterSpec(path, spec, -2);
  EXPECT_EQ(s.message(), "--nodes must be at least 1, got -2");
  s = loadClusterSpec(path + ".missing", spec);
  EXPECT_EQ(s.message(), path + ".missing: cannot open: No such file or directory");
}

TEST_F(ClusterSpecFileTest, SaveWritesWhatLoadReads) {
  ClusterSpec spec;
  ASSERT_TRUE(parseClusterSpec(a100Text(), "a100", spec).ok());
  spec.nodes = 3;
  spec.measurementsJson = R"({"gemm": [1, 2]})";
  Status s = saveClusterSpec(spec, path);
  ASSERT_TRUE(s.ok()) << s.message();
  ClusterSpec loaded;
  s = loadClusterSpec(path, loaded);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(formatClusterSpec(loaded), formatClusterSpec(spec));
  EXPECT_EQ(loaded.nodes, 3);

  // A spec that would not load back is refused, and the old file stays.
  spec.device.efficiency[0].compute = 2;
  s = saveClusterSpec(spec, path);
  EXPECT_EQ(s.message(), "refusing to write: " + path +
                             ": device.efficiency.gemm.compute: must be in (0, 1], got 2");
  ASSERT_TRUE(loadClusterSpec(path, loaded).ok());
  EXPECT_EQ(loaded.device.efficiency[0].compute, 0.87);
}

TEST(ClusterSpecTest, ExampleSpecsLoad) {
  int count = 0;
  for (const auto &entry : std::filesystem::directory_iterator(CLEAVE_CLUSTERS_DIR)) {
    if (entry.path().extension() != ".json")
      continue;
    ClusterSpec spec;
    Status s = loadClusterSpec(entry.path().string(), spec);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(spec.name, entry.path().stem().string());
    EXPECT_EQ(spec.nodes, 1);
    EXPECT_FALSE(spec.source.empty());
    // Every shipped spec says where spilled state lives and how fast it
    // moves: at least one device's memory, its bandwidth, and a host link.
    EXPECT_GE(spec.hostMemoryBytes, spec.device.memoryBytes) << spec.name;
    EXPECT_GT(spec.hostMemoryBandwidth, 0) << spec.name;
    EXPECT_TRUE(spec.hasHostLink()) << spec.name;
    ++count;
  }
  EXPECT_GE(count, 4);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// 4 nodes of 4 devices; round numbers so the formulas can be checked by hand.
ClusterSpec toyCluster() {
  ClusterSpec spec;
  spec.nodes = 4;
  spec.devicesPerNode = 4;
  spec.intraNode = {1e11, 1e-6};
  spec.interNode = {1e10, 1e-5};
  spec.nicsPerNode = 2;
  return spec;
}

ClusterSpec loadExample(const char *name) {
  ClusterSpec spec;
  Status s = loadClusterSpec(std::string(CLEAVE_CLUSTERS_DIR "/") + name, spec, 8);
  EXPECT_TRUE(s.ok()) << s.message();
  return spec;
}

double time(const ClusterSpec &spec, Collective c, Algorithm a, const CommGroup &g, double bytes) {
  std::optional<double> t = collectiveTime(spec, c, a, g, bytes);
  EXPECT_TRUE(t.has_value());
  return t.value_or(-1);
}

TEST(CommGroupTest, FromRanksAndStrides) {
  CommGroup tp = stridedGroup(8, 1, 8);
  EXPECT_EQ(tp.size, 8);
  EXPECT_EQ(tp.nodesSpanned, 1);
  EXPECT_EQ(tp.ranksPerNode, 8);
  EXPECT_EQ(tp.concurrentGroups, 1);

  CommGroup dp = stridedGroup(8, 8, 8); // tp = 8: one rank per node
  EXPECT_EQ(dp.nodesSpanned, 8);
  EXPECT_EQ(dp.ranksPerNode, 1);
  EXPECT_EQ(dp.concurrentGroups, 8);

  CommGroup even = stridedGroup(8, 2, 8); // ranks 0, 2, …, 14
  EXPECT_EQ(even.nodesSpanned, 2);
  EXPECT_EQ(even.ranksPerNode, 4);
  EXPECT_EQ(even.concurrentGroups, 2);

  CommGroup uneven = groupOfRanks({3, 4, 5, 6, 7, 8}, 4);
  EXPECT_EQ(uneven.size, 6);
  EXPECT_EQ(uneven.nodesSpanned, 3);
  EXPECT_EQ(uneven.ranksPerNode, 4);
}

TEST(CollectivesTest, InsideOneNodeMatchesHandComputedFormulas) {
  ClusterSpec spec = toyCluster();
  CommGroup node = stridedGroup(4, 1, 4);
  double s = 1e9;
  // 2(n-1)α + 2(n-1)/n · S/B
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Ring, node, s), 6e-6 + 0.015);
  // 2⌈log2 n⌉α + 2 S/B
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Tree, node, s), 4e-6 + 0.02);
  // (n-1)α + (n-1)/n · S/B
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllGather, Algorithm::Ring, node, s), 3e-6 + 0.0075);
  EXPECT_DOUBLE_EQ(time(spec, Collective::ReduceScatter, Algorithm::Ring, node, s), 3e-6 + 0.0075);
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllToAll, Algorithm::Direct, node, s), 3e-6 + 0.0075);
  EXPECT_DOUBLE_EQ(
      time(spec, Collective::SendRecv, Algorithm::Direct, groupOfRanks({0, 1}, 4), 1e8),
      1e-6 + 0.001);

  CommEstimate best = estimateCollective(spec, Collective::AllReduce, node, s);
  EXPECT_EQ(best.algorithm, Algorithm::Ring);
  EXPECT_DOUBLE_EQ(best.seconds, 6e-6 + 0.015);
}

TEST(CollectivesTest, AcrossNodesMatchesHandComputedFormulas) {
  ClusterSpec spec = toyCluster();
  CommGroup all = stridedGroup(16, 1, 4); // 4 nodes x 4 ranks, the node's 2 NICs to itself
  double s = 1e9;
  // Flat ring: every hop as slow as a rank's share of the NICs, 2e10 / 4.
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Ring, all, s),
                   30 * 1e-5 + 2.0 * 15 / 16 * s / 5e9);
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Tree, all, s),
                   8 * 1e-5 + 2 * s / 5e9);
  // Inside: 3α_i + 3/4 S/B_i; across: 3α_e + 3/4 S/(2 NICs · 1e10).
  double inside = 3e-6 + 0.75 * s / 1e11, across = 3e-5 + 0.75 * s / 2e10;
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Hierarchical, all, s),
                   2 * (inside + across));
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllGather, Algorithm::Hierarchical, all, s),
                   inside + across);
  // All-to-all: 3 peers on the node, 12 off it, 1/16 of the buffer each.
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllToAll, Algorithm::Direct, all, 1.6e9),
                   3e-6 + 12e-5 + 12 * 1e8 / 5e9);
  // A pipeline send between nodes while the 3 other ranks of the node send too.
  EXPECT_DOUBLE_EQ(time(spec, Collective::SendRecv, Algorithm::Direct, stridedGroup(2, 4, 4), 1e8),
                   1e-5 + 1e8 / 5e9);

  CommEstimate best = estimateCollective(spec, Collective::AllReduce, all, s);
  EXPECT_EQ(best.algorithm, Algorithm::Hierarchical);
  EXPECT_DOUBLE_EQ(best.seconds, 2 * (inside + across));
}

TEST(CollectivesTest, AlgorithmsOnlyWhereTheyApply) {
  ClusterSpec spec = toyCluster();
  CommGroup node = stridedGroup(4, 1, 4), all = stridedGroup(16, 1, 4);
  EXPECT_FALSE(collectiveTime(spec, Collective::AllReduce, Algorithm::Hierarchical, node, 1e6));
  EXPECT_FALSE(collectiveTime(spec, Collective::AllGather, Algorithm::Tree, all, 1e6));
  EXPECT_FALSE(collectiveTime(spec, Collective::AllToAll, Algorithm::Ring, all, 1e6));
  EXPECT_FALSE(collectiveTime(spec, Collective::AllReduce, Algorithm::Direct, all, 1e6));
  EXPECT_EQ(estimateCollective(spec, Collective::SendRecv, all, 1e6).algorithm, Algorithm::Direct);
}

TEST(CollectivesTest, LinksMovePayloadAtTheirEfficiency) {
  ClusterSpec spec = toyCluster();
  spec.intraNode.efficiency = 0.5;
  spec.interNode.efficiency = 0.8;
  double s = 1e9;
  // Inside a node: the ring at half of 1e11.
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Ring, stridedGroup(4, 1, 4), s),
                   6e-6 + 2.0 * 3 / 4 * s / 5e10);
  // Between nodes: one rank per node, 4 groups share the 2 NICs at 0.8 · 1e10.
  EXPECT_DOUBLE_EQ(time(spec, Collective::SendRecv, Algorithm::Direct, stridedGroup(2, 4, 4), s),
                   1e-5 + s / (2 * 0.8e10 / 4));
}

TEST(CollectivesTest, InSwitchAllReduceWhereTheSpecHasIt) {
  ClusterSpec spec = toyCluster();
  CommGroup node = stridedGroup(4, 1, 4), all = stridedGroup(16, 1, 4);
  EXPECT_FALSE(collectiveTime(spec, Collective::AllReduce, Algorithm::Nvls, node, 1e6));
  spec.nvlsBusBandwidth = 2e11; // twice the link's rate
  double s = 1e9;
  EXPECT_DOUBLE_EQ(time(spec, Collective::AllReduce, Algorithm::Nvls, node, s),
                   2e-6 + 2.0 * 3 / 4 * s / 2e11);
  CommEstimate best = estimateCollective(spec, Collective::AllReduce, node, s);
  EXPECT_EQ(best.algorithm, Algorithm::Nvls);
  // Only all-reduce, only inside one node.
  EXPECT_FALSE(collectiveTime(spec, Collective::AllGather, Algorithm::Nvls, node, s));
  EXPECT_FALSE(collectiveTime(spec, Collective::AllReduce, Algorithm::Nvls, all, s));
}

TEST(CollectivesTest, MeasuredSamplesInsideANodeAreInterpolated) {
  ClusterSpec spec = toyCluster();
  CommGroup pair = stridedGroup(2, 1, 2);
  double formula = estimateCollective(spec, Collective::AllReduce, pair, 1 << 20).seconds;
  // 64 KiB in 10 us, 1 MiB in 40 us, 16 MiB in 2 ms: in cache, then not.
  spec.measuredCollectives = {{"all-reduce", 2, 65536, 1e-5},
                              {"all-reduce", 2, 16777216, 2e-3},
                              {"all-reduce", 2, 1048576, 4e-5},
                              {"send-recv", 2, 65536, 3e-6}};
  EXPECT_DOUBLE_EQ(estimateCollective(spec, Collective::AllReduce, pair, 1 << 20).seconds, 4e-5);
  // Between sizes: straight on log-log axes (4 MiB is half way from 1 to 16).
  EXPECT_NEAR(estimateCollective(spec, Collective::AllReduce, pair, 4 << 20).seconds,
              std::sqrt(4e-5 * 2e-3), 1e-12);
  EXPECT_NEAR(measuredCollectiveTime(spec, Collective::AllReduce, 2, 262144).value(),
              std::sqrt(1e-5 * 4e-5), 1e-15);
  // Outside the sizes, another group size or collective, or across nodes: the formulas.
  EXPECT_FALSE(measuredCollectiveTime(spec, Collective::AllReduce, 2, 1 << 30));
  EXPECT_FALSE(measuredCollectiveTime(spec, Collective::AllReduce, 4, 1 << 20));
  EXPECT_FALSE(measuredCollectiveTime(spec, Collective::AllGather, 2, 1 << 20));
  EXPECT_DOUBLE_EQ(estimateCollective(spec, Collective::SendRecv, pair, 65536).seconds, 3e-6);
  CommGroup acrossNodes = pair;
  acrossNodes.nodesSpanned = 2;
  ClusterSpec without = toyCluster();
  EXPECT_DOUBLE_EQ(estimateCollective(spec, Collective::AllReduce, acrossNodes, 1 << 20).seconds,
                   estimateCollective(without, Collective::AllReduce, acrossNodes, 1 << 20).seconds);
  CommGroup shared = pair;
  shared.concurrentGroups = 4;
  EXPECT_DOUBLE_EQ(estimateCollective(spec, Collective::AllReduce, shared, 1 << 20).seconds,
                   estimateCollective(without, Collective::AllReduce, shared, 1 << 20).seconds);
  EXPECT_NE(formula, 4e-5);
  // Written and read back.
  ClusterSpec a, back;
  ASSERT_TRUE(parseClusterSpec(a100Text(), "a.json", a).ok());
  a.measuredCollectives = spec.measuredCollectives;
  ASSERT_TRUE(parseClusterSpec(formatClusterSpec(a), "b.json", back).ok());
  ASSERT_EQ(back.measuredCollectives.size(), 4u);
  EXPECT_EQ(back.measuredCollectives[1].bytes, 16777216);
  EXPECT_EQ(back.measuredCollectives[3].collective, "send-recv");
}

TEST(CollectivesTest, OneRankOrNoBytesCostNothing) {
  ClusterSpec spec = toyCluster();
  CommGroup one = groupOfRanks({5}, 4);
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::AllToAll, Collective::SendRecv})
    EXPECT_EQ(estimateCollective(spec, c, one, 1e9).seconds, 0.0) << collectiveName(c);
  EXPECT_EQ(estimateCollective(spec, Collective::AllReduce, stridedGroup(16, 1, 4), 0).seconds, 0);
}

TEST(CollectivesTest, TensorParallelGroupBelongsInsideANode) {
  ClusterSpec spec = loadExample("dgx-a100-80gb.json");
  double s = 64e6; // one layer's activations, bf16
  CommEstimate inside = estimateCollective(spec, Collective::AllReduce, stridedGroup(8, 1, 8), s);
  CommEstimate across = estimateCollective(spec, Collective::AllReduce, stridedGroup(8, 8, 8), s);
  EXPECT_GT(across.seconds, 8 * inside.seconds);
}

TEST(CollectivesTest, HierarchicalWinsAcrossManyNodesForLargeMessages) {
  ClusterSpec spec = loadExample("dgx-a100-80gb.json");
  CommGroup all = stridedGroup(64, 1, 8);
  double s = 1e9;
  double ring = time(spec, Collective::AllReduce, Algorithm::Ring, all, s);
  double hier = time(spec, Collective::AllReduce, Algorithm::Hierarchical, all, s);
  EXPECT_LT(2 * hier, ring);
  EXPECT_EQ(estimateCollective(spec, Collective::AllReduce, all, s).algorithm,
            Algorithm::Hierarchical);
  EXPECT_EQ(estimateCollective(spec, Collective::ReduceScatter, all, s).algorithm,
            Algorithm::Hierarchical);
}

TEST(CollectivesTest, TreeWinsForTinyMessagesOnManyRanks) {
  ClusterSpec spec = loadExample("dgx-a100-80gb.json");
  CommGroup all = stridedGroup(64, 1, 8);
  double s = 1024;
  double ring = time(spec, Collective::AllReduce, Algorithm::Ring, all, s);
  double tree = time(spec, Collective::AllReduce, Algorithm::Tree, all, s);
  EXPECT_LT(3 * tree, ring);
  EXPECT_EQ(estimateCollective(spec, Collective::AllReduce, all, s).algorithm, Algorithm::Tree);
  // With large messages the ring's smaller bandwidth term wins inside a node.
  EXPECT_EQ(estimateCollective(spec, Collective::AllReduce, stridedGroup(8, 1, 8), 1e9).algorithm,
            Algorithm::Ring);
}

TEST(CollectivesTest, ConcurrentGroupsShareTheNics) {
  ClusterSpec spec = loadExample("dgx-a100-80gb.json");
  CommGroup alone = groupOfRanks({0, 8, 16, 24}, 8); // the only group talking
  CommGroup shared = stridedGroup(4, 8, 8);          // with 7 others: one NIC each
  double a = time(spec, Collective::AllReduce, Algorithm::Ring, alone, 1e9);
  double b = time(spec, Collective::AllReduce, Algorithm::Ring, shared, 1e9);
  EXPECT_NEAR(b / a, 8, 0.1);
}

TEST(HostTransferTest, LatencyPlusBytesOverEffectiveBandwidth) {
  ClusterSpec spec = toyCluster();
  // No host link: nothing is free but nothing.
  EXPECT_FALSE(spec.hasHostLink());
  EXPECT_EQ(hostTransferSeconds(spec, 0), 0);
  EXPECT_EQ(hostTransferSeconds(spec, 1e6), std::numeric_limits<double>::infinity());

  spec.hostLink = {2e10, 1e-5, 0.8};
  ASSERT_TRUE(spec.hasHostLink());
  EXPECT_EQ(hostTransferSeconds(spec, 0), 0);
  EXPECT_DOUBLE_EQ(hostTransferSeconds(spec, 1.6e9), 1e-5 + 1.6e9 / 1.6e10);
  EXPECT_DOUBLE_EQ(hostTransferSeconds(spec, 1), 1e-5 + 1 / 1.6e10);

  // 1 GiB over a DGX H100's PCIe 5.0 x16: 10 us + 2^30 / (0.85 · 63e9), about 20 ms.
  ClusterSpec h100 = loadExample("dgx-h100.json");
  double gib = double(1 << 30);
  EXPECT_DOUBLE_EQ(hostTransferSeconds(h100, gib), 1e-5 + gib / (0.85 * 6.3e10));
  EXPECT_NEAR(hostTransferSeconds(h100, gib), 20.06e-3, 0.01e-3);
}

//===----------------------------------------------------------------------===//
// Memory model
//===----------------------------------------------------------------------===//

TEST(MemoryModelTest, NamesRoundTrip) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
    EXPECT_EQ(parseSchedule(scheduleName(s)), s);
  EXPECT_EQ(scheduleName(Schedule::OneFOneB), "1f1b");
  for (ShardingLevel l : {ShardingLevel::None, ShardingLevel::OptimizerState,
                          ShardingLevel::Gradients, ShardingLevel::Parameters})
    EXPECT_EQ(parseShardingLevel(shardingLevelName(l)), l);
  EXPECT_EQ(shardingLevelName(ShardingLevel::OptimizerState), "optimizer");
  EXPECT_FALSE(parseSchedule("pipedream"));
  EXPECT_FALSE(parseShardingLevel("zero3"));
}

TEST(MemoryModelTest, ZeroLevelsShardWhatTheyName) {
  MemoryInputs in;
  in.parameters = 1'000'000'000;
  in.paramDType = DType::BF16;
  in.mixedPrecision = true;
  in.dp = 8;
  struct Expected {
    ShardingLevel level;
    double parameters, gradients, optimizer;
  };
  for (Expected e : {Expected{ShardingLevel::None, 2e9, 2e9, 12e9},
                     Expected{ShardingLevel::OptimizerState, 2e9, 2e9, 1.5e9},
                     Expected{ShardingLevel::Gradients, 2e9, 0.25e9, 1.5e9},
                     Expected{ShardingLevel::Parameters, 0.25e9, 0.25e9, 1.5e9}}) {
    in.sharding = e.level;
    MemoryBreakdown m = predictMemory(in);
    EXPECT_DOUBLE_EQ(m.parameters, e.parameters) << shardingLevelName(e.level);
    EXPECT_DOUBLE_EQ(m.gradients, e.gradients) << shardingLevelName(e.level);
    EXPECT_DOUBLE_EQ(m.optimizerState, e.optimizer) << shardingLevelName(e.level);
  }

  in.mixedPrecision = false;
  in.paramDType = DType::F32;
  in.sharding = ShardingLevel::None;
  MemoryBreakdown f32 = predictMemory(in);
  EXPECT_DOUBLE_EQ(f32.parameters, 4e9);
  EXPECT_DOUBLE_EQ(f32.gradients, 4e9);
  EXPECT_DOUBLE_EQ(f32.optimizerState, 8e9);
}

TEST(MemoryModelTest, InferenceHoldsParametersAndLiveActivations) {
  MemoryInputs in;
  in.training = false;
  in.parameters = 1000;
  in.paramDType = DType::F16;
  in.dp = 4;
  in.sharding = ShardingLevel::Parameters;
  in.activationBytesPerMicrobatch = 1e9; // training-only: ignored
  in.inferenceActivationBytes = 300;
  in.commBufferBytes = 10;
  in.workspaceBytes = 20;
  MemoryBreakdown m = predictMemory(in);
  EXPECT_EQ(m.parameters, 2000);
  EXPECT_EQ(m.gradients, 0);
  EXPECT_EQ(m.optimizerState, 0);
  EXPECT_EQ(m.activations, 300);
  EXPECT_EQ(m.total(), 2330);
}

TEST(MemoryModelTest, InFlightMicrobatchesPerSchedule) {
  // GPipe keeps every microbatch until the backward.
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(inFlightChunks(Schedule::GPipe, 4, s, 8, 1), 8);
  // 1F1B: the first stage holds pp, the last one.
  EXPECT_EQ(inFlightChunks(Schedule::OneFOneB, 4, 0, 8, 1), 4);
  EXPECT_EQ(inFlightChunks(Schedule::OneFOneB, 4, 1, 8, 1), 3);
  EXPECT_EQ(inFlightChunks(Schedule::OneFOneB, 4, 3, 8, 1), 1);
  EXPECT_EQ(inFlightChunks(Schedule::OneFOneB, 4, 0, 2, 1), 2);
  // Interleaved, pp 4, v 2: 2·(4−s−1) + 4 + 1 chunks of half a microbatch each.
  EXPECT_EQ(inFlightChunks(Schedule::Interleaved, 4, 0, 8, 2), 11);
  EXPECT_EQ(inFlightChunks(Schedule::Interleaved, 4, 3, 8, 2), 5);
  EXPECT_DOUBLE_EQ(inFlightMicrobatches(Schedule::Interleaved, 4, 0, 8, 2), 5.5);
  EXPECT_EQ(inFlightChunks(Schedule::Interleaved, 4, 0, 2, 2), 4); // capped at m·v
  EXPECT_EQ(inFlightChunks(Schedule::Interleaved, 4, 1, 8, 1),
            inFlightChunks(Schedule::OneFOneB, 4, 1, 8, 1));
  EXPECT_DOUBLE_EQ(inFlightMicrobatches(Schedule::GPipe, 4, 0, 8, 2), 8);
}

TEST(MemoryModelTest, ActivationsFollowScheduleAndRecompute) {
  MemoryInputs in;
  in.parameters = 0;
  in.schedule = Schedule::OneFOneB;
  in.pp = 4;
  in.stage = 1;
  in.microbatches = 16;
  in.activationBytesPerMicrobatch = 100;
  EXPECT_EQ(predictMemory(in).activations, 300);
  // Some layers recompute: the others' activations, their checkpoints, and
  // one recomputing layer's working set.
  in.checkpointBytesPerMicrobatch = 10;
  in.recomputeWorkingBytes = 7;
  EXPECT_EQ(predictMemory(in).activations, 3 * (100 + 10) + 7);
  in.recompute = true;
  EXPECT_EQ(predictMemory(in).activations, 37);
  in.schedule = Schedule::Interleaved;
  in.virtualStages = 2;
  in.stage = 0;
  EXPECT_EQ(predictMemory(in).activations, 5.5 * 10 + 7);
  in.commBufferBytes = 1;
  in.workspaceBytes = 2;
  EXPECT_EQ(predictMemory(in).total(), 5.5 * 10 + 7 + 3);
}

} // namespace

//===----------------------------------------------------------------------===//
// Op time: the roofline and GEMM efficiency by shape.
//===----------------------------------------------------------------------===//

namespace {
DeviceSpec rooflineDevice() {
  DeviceSpec d;
  d.peakFlops = {{DType::F32, 100e9}};
  d.memoryBandwidth = 10e9;
  d.kernelOverhead = 1e-6;
  d.efficiency[int(OpClass::Gemm)] = {0.5, 1.0};
  d.efficiency[int(OpClass::Convolution)] = {0.25, 1.0};
  d.efficiency[int(OpClass::Elementwise)] = {0.1, 0.5};
  return d;
}
} // namespace

TEST(OpTimeTest, RooflineTakesTheSlowerSideAndAddsOverhead) {
  DeviceSpec d = rooflineDevice();
  OpCost map;
  map.opClass = OpClass::Elementwise;
  // 1e6 FLOPs at 10 GFLOP/s = 100 us; 1e6 bytes at 5 GB/s = 200 us.
  PassCost pass{1e6, 6e5, 4e5, 2};
  PassTime t = predictPass(d, map, pass, DType::F32);
  EXPECT_DOUBLE_EQ(t.compute, 1e-4);
  EXPECT_DOUBLE_EQ(t.memory, 2e-4);
  EXPECT_DOUBLE_EQ(t.overhead, 2e-6);
  EXPECT_DOUBLE_EQ(t.seconds(), 2e-4 + 2e-6);
  EXPECT_FALSE(t.computeBound());
  // No kernel, no time (a view).
  EXPECT_EQ(predictPass(d, map, PassCost{}, DType::F32).seconds(), 0);
}

TEST(OpTimeTest, OptimizerStepAtTheMeasuredRateOrItsBytes) {
  DeviceSpec d = rooflineDevice();
  // 1e6 parameters x 28 bytes at 10 GB/s x 0.5 (elementwise memory).
  EXPECT_DOUBLE_EQ(optimizerStepSeconds(d, 1e6), 28e6 / 5e9);
  d.adamwSecondsPerParameter = 2e-9; // a profile's measurement wins
  EXPECT_DOUBLE_EQ(optimizerStepSeconds(d, 1e6), 2e-3);
  EXPECT_EQ(optimizerStepSeconds(d, 0), 0);
}

TEST(OpTimeTest, GemmEfficiencyFromSamplesOrClass) {
  DeviceSpec d = rooflineDevice();
  GemmShape square{1, 1024, 1024, 1024};
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::Gemm), 0.5);
  d.gemmSamples = {{{1, 1024, 1024, 1024}, DType::F32, 80e9},
                   {{1, 64, 64, 64}, DType::F32, 20e9}};
  // An exact sample is its own efficiency.
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::Gemm), 0.8);
  // Between samples: between their efficiencies, nearer the closer one.
  double mid = gemmEfficiency(d, {1, 512, 512, 512}, DType::F32, OpClass::Gemm);
  EXPECT_GT(mid, 0.2);
  EXPECT_LT(mid, 0.8);
  EXPECT_GT(mid, 0.5);
  // Samples of another dtype do not apply.
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::BF16, OpClass::Gemm), 0.5);
  // A convolution runs at the GEMM figure scaled by its class's ratio.
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::Convolution), 0.8 * 0.5);
}

TEST(OpTimeTest, GroupedConvolutionsInterpolateTheirOwnSamples) {
  DeviceSpec d = rooflineDevice();
  d.efficiency[int(OpClass::GroupedConvolution)] = {0.03, 1.0};
  GemmShape square{1, 1024, 1024, 1024};
  GemmShape depthwise{96, 25088, 1, 9};
  // No samples at all: the class figure.
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, depthwise, DType::F32, OpClass::GroupedConvolution), 0.03);
  // GEMM samples only (a spec from before the class): as a dense convolution.
  d.gemmSamples = {{{1, 1024, 1024, 1024}, DType::F32, 80e9}};
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::GroupedConvolution),
                   gemmEfficiency(d, square, DType::F32, OpClass::Convolution));
  // Samples of its own: those, which GEMMs and convolutions ignore.
  GemmSample grouped{depthwise, DType::F32, 2e9, OpClass::GroupedConvolution};
  d.gemmSamples.push_back(grouped);
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, depthwise, DType::F32, OpClass::GroupedConvolution), 0.02);
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, {32, 4096, 4, 36}, DType::F32, OpClass::GroupedConvolution),
                   0.02);
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::Gemm), 0.8);
  EXPECT_DOUBLE_EQ(gemmEfficiency(d, square, DType::F32, OpClass::Convolution), 0.8 * 0.5);
}

TEST(OpTimeTest, DenseConvolutionsInterpolateTheirOwnSamplesWhenGiven) {
  DeviceSpec device;
  device.peakFlops[DType::F32] = 1e11;
  device.efficiency[int(OpClass::Gemm)] = {0.9, 1};
  device.efficiency[int(OpClass::Convolution)] = {0.45, 1}; // half a GEMM's rate
  device.gemmSamples = {{{1, 392, 512, 4608}, DType::F32, 8e10, OpClass::Gemm}};
  GemmShape shape{1, 392, 512, 4608};
  // Without convolution samples: the GEMM sample scaled by the class ratio.
  EXPECT_NEAR(gemmEfficiency(device, shape, DType::F32, OpClass::Convolution), 0.8 * 0.5, 1e-12);
  // With them: their own figure, whatever the class ratio says; GEMMs keep theirs.
  device.gemmSamples.push_back({{1, 392, 512, 4608}, DType::F32, 6e10, OpClass::Convolution});
  EXPECT_NEAR(gemmEfficiency(device, shape, DType::F32, OpClass::Convolution), 0.6, 1e-12);
  EXPECT_NEAR(gemmEfficiency(device, shape, DType::F32, OpClass::Gemm), 0.8, 1e-12);
  // Grouped convolutions without samples of their own run as dense ones.
  EXPECT_NEAR(gemmEfficiency(device, shape, DType::F32, OpClass::GroupedConvolution), 0.6, 1e-12);
  device.gemmSamples.push_back({{1, 392, 512, 4608}, DType::F32, 1e10, OpClass::GroupedConvolution});
  EXPECT_NEAR(gemmEfficiency(device, shape, DType::F32, OpClass::GroupedConvolution), 0.1, 1e-12);
  device.gemmSamples.pop_back();
  // Written and read back with their class.
  ClusterSpec spec;
  ASSERT_TRUE(parseClusterSpec(a100Text(), "a.json", spec).ok());
  spec.device.gemmSamples = device.gemmSamples;
  ClusterSpec back;
  ASSERT_TRUE(parseClusterSpec(formatClusterSpec(spec), "b.json", back).ok());
  ASSERT_EQ(back.device.gemmSamples.size(), 2u);
  EXPECT_EQ(back.device.gemmSamples[1].opClass, OpClass::Convolution);
}

TEST(ClusterSpecTest, PoolingDefaultsToReduction) {
  // Specs written before windowed pools had a class: their figures are
  // reduction's, the class pools were in.
  Json json = Json::parse(a100Text());
  ASSERT_FALSE(json["device"]["efficiency"].contains("pooling"));
  ClusterSpec cluster;
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  const Efficiency &reduction = cluster.device.efficiencyOf(OpClass::Reduction);
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Pooling).compute, reduction.compute);
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Pooling).memory, reduction.memory);
  json["device"]["efficiency"]["pooling"] = {{"compute", 0.002}, {"memory", 1.0}};
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Pooling).compute, 0.002);
  // Written back, and read again the same.
  ClusterSpec again;
  ASSERT_TRUE(parseClusterSpec(formatClusterSpec(cluster), "again", again).ok());
  EXPECT_EQ(again.device.efficiencyOf(OpClass::Pooling).compute, 0.002);
  json["device"]["efficiency"]["pooling"]["memory"] = 0;
  EXPECT_FALSE(parseClusterSpec(json.dump(), "a100", cluster).ok());
}

TEST(ClusterSpecTest, NormalizationDefaultsToElementwise) {
  // Batch norm was an elementwise map before it had a class: a spec without
  // the class gives it elementwise's figures.
  Json json = Json::parse(a100Text());
  ASSERT_FALSE(json["device"]["efficiency"].contains("normalization"));
  ClusterSpec cluster;
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  const Efficiency &elementwise = cluster.device.efficiencyOf(OpClass::Elementwise);
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Normalization).compute, elementwise.compute);
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Normalization).memory, elementwise.memory);
  json["device"]["efficiency"]["normalization"] = {{"compute", 1.0}, {"memory", 0.4}};
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Normalization).memory, 0.4);
  // Strided permutes were elementwise too.
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Layout).memory, elementwise.memory);
  json["device"]["efficiency"]["layout"] = {{"compute", 1.0}, {"memory", 0.3}};
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::Layout).memory, 0.3);
}

TEST(ClusterSpecTest, GroupedConvolutionDefaultsToConvolution) {
  // Specs written before the class existed: its figures are convolution's.
  Json json = Json::parse(a100Text());
  ASSERT_FALSE(json["device"]["efficiency"].contains("grouped_convolution"));
  ClusterSpec cluster;
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  const Efficiency &conv = cluster.device.efficiencyOf(OpClass::Convolution);
  const Efficiency &grouped = cluster.device.efficiencyOf(OpClass::GroupedConvolution);
  EXPECT_EQ(grouped.compute, conv.compute);
  EXPECT_EQ(grouped.memory, conv.memory);
  // Given, it is read, and checked like every class.
  json["device"]["efficiency"]["grouped_convolution"] = {{"compute", 0.05}, {"memory", 0.9}};
  ASSERT_TRUE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  EXPECT_EQ(cluster.device.efficiencyOf(OpClass::GroupedConvolution).compute, 0.05);
  json["device"]["efficiency"]["grouped_convolution"]["compute"] = 1.5;
  EXPECT_FALSE(parseClusterSpec(json.dump(), "a100", cluster).ok());
  // A sample's class is gemm, convolution or grouped_convolution.
  json["device"]["efficiency"]["grouped_convolution"]["compute"] = 0.05;
  json["device"]["gemm_samples"] = Json::parse(
      R"([{"batch": 1, "m": 8, "n": 8, "k": 8, "dtype": "f32", "flops_per_s": 1e9,
           "op_class": "attention"}])");
  Status s = parseClusterSpec(json.dump(), "a100", cluster);
  EXPECT_EQ(s.message(), "a100: device.gemm_samples[0].op_class: expected gemm, "
                         "convolution or grouped_convolution, got 'attention'");
}
