#include "cost/ClusterSpec.h"
#include "cost/Collectives.h"
#include "runtime/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <unistd.h>

namespace cleave::cost {

using runtime::DType;
using runtime::Status;

double DeviceSpec::peakFlopsOf(DType dtype) const {
  auto it = peakFlops.find(dtype);
  if (it != peakFlops.end())
    return it->second;
  it = peakFlops.find(DType::F32);
  return it != peakFlops.end() ? it->second : 0.0;
}

namespace {

// Ordered, so that "measurements" keeps the key order people wrote and the
// formatted spec lists fields in the documented order.
using Json = nlohmann::ordered_json;

constexpr const char *kFormat = "cleave-cluster";
constexpr DType kComputeDTypes[] = {DType::F32, DType::BF16, DType::F16};

/// A JSON value and the path that leads to it, for errors such as
/// "dgx.json: device.efficiency.gemm.compute: must be in (0, 1], got 1.4".
struct Node {
  const Json &json;
  const std::string &origin;
  std::string path;

  Node child(const std::string &key) const {
    return {json.at(key), origin, path.empty() ? key : path + "." + key};
  }
  Node element(size_t i) const {
    return {json.at(i), origin, path + "[" + std::to_string(i) + "]"};
  }
  bool has(const std::string &key) const { return json.contains(key); }
  std::string where(const std::string &key = "") const {
    std::string p = key.empty() ? path : path.empty() ? key : path + "." + key;
    return origin + ": " + (p.empty() ? "top level" : p);
  }
};

std::string describe(const Json &value) {
  std::string text = value.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

/// Rejects keys outside `known`: a misspelt optional field must not pass as
/// absent.
Status checkKeys(const Node &node, std::initializer_list<const char *> known) {
  for (auto it = node.json.begin(); it != node.json.end(); ++it) {
    bool found = false;
    for (const char *k : known)
      found |= it.key() == k;
    if (found)
      continue;
    std::string list;
    for (const char *k : known)
      list += (list.empty() ? "" : ", ") + std::string(k);
    return CLEAVE_ERROR(node.where(it.key()), ": unknown field (expected one of ", list, ")");
  }
  return {};
}

Status getObject(const Node &node, const std::string &key, std::optional<Node> *out) {
  if (!node.has(key))
    return CLEAVE_ERROR(node.where(key), ": missing");
  Node child = node.child(key);
  if (!child.json.is_object())
    return CLEAVE_ERROR(child.where(), ": expected an object, got ", describe(child.json));
  out->emplace(child);
  return {};
}

Status getString(const Node &node, const std::string &key, std::string *out) {
  if (!node.has(key))
    return CLEAVE_ERROR(node.where(key), ": missing");
  Node child = node.child(key);
  if (!child.json.is_string())
    return CLEAVE_ERROR(child.where(), ": expected a string, got ", describe(child.json));
  *out = child.json.get<std::string>();
  return {};
}

Status getInt(const Node &node, const std::string &key, int64_t min, int64_t *out) {
  if (!node.has(key))
    return CLEAVE_ERROR(node.where(key), ": missing");
  Node child = node.child(key);
  const Json &v = child.json;
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    return CLEAVE_ERROR(child.where(), ": expected an integer, got ", describe(v));
  *out = v.get<int64_t>();
  if (*out < min)
    return CLEAVE_ERROR(child.where(), ": must be at least ", min, ", got ", *out);
  return {};
}

Status getInt(const Node &node, const std::string &key, int64_t min, int *out) {
  int64_t value = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(node, key, min, &value));
  if (value > INT32_MAX)
    return CLEAVE_ERROR(node.where(key), ": too large, got ", value);
  *out = static_cast<int>(value);
  return {};
}

enum class Range { Positive, NonNegative, Fraction, Any };

Status getNumber(const Node &node, const std::string &key, Range range, double *out) {
  if (!node.has(key))
    return CLEAVE_ERROR(node.where(key), ": missing");
  Node child = node.child(key);
  if (!child.json.is_number())
    return CLEAVE_ERROR(child.where(), ": expected a number, got ", describe(child.json));
  double v = child.json.get<double>();
  if (!std::isfinite(v))
    return CLEAVE_ERROR(child.where(), ": must be finite");
  switch (range) {
  case Range::Positive:
    if (!(v > 0))
      return CLEAVE_ERROR(child.where(), ": must be positive, got ", v);
    break;
  case Range::NonNegative:
    if (v < 0)
      return CLEAVE_ERROR(child.where(), ": must be non-negative, got ", v);
    break;
  case Range::Fraction:
    if (!(v > 0 && v <= 1))
      return CLEAVE_ERROR(child.where(), ": must be in (0, 1], got ", v);
    break;
  case Range::Any:
    break;
  }
  *out = v;
  return {};
}

std::optional<DType> parseComputeDType(std::string_view name) {
  for (DType d : kComputeDTypes)
    if (name == runtime::dtypeName(d))
      return d;
  return std::nullopt;
}

Status parseDTypeField(const Node &node, const std::string &key, DType *out) {
  std::string name;
  CLEAVE_RETURN_IF_ERROR(getString(node, key, &name));
  std::optional<DType> dtype = parseComputeDType(name);
  if (!dtype)
    return CLEAVE_ERROR(node.where(key), ": unknown dtype '", name,
                        "' (expected f32, bf16 or f16)");
  *out = *dtype;
  return {};
}

Status parsePeakFlops(const Node &device, DeviceSpec &spec) {
  std::optional<Node> peak;
  CLEAVE_RETURN_IF_ERROR(getObject(device, "peak_flops", &peak));
  for (auto it = peak->json.begin(); it != peak->json.end(); ++it) {
    std::optional<DType> dtype = parseComputeDType(it.key());
    if (!dtype)
      return CLEAVE_ERROR(peak->where(it.key()), ": unknown dtype (expected f32, bf16 or f16)");
    CLEAVE_RETURN_IF_ERROR(getNumber(*peak, it.key(), Range::Positive, &spec.peakFlops[*dtype]));
  }
  // Every device computes in f32; other dtypes fall back to it.
  if (!peak->has("f32"))
    return CLEAVE_ERROR(peak->where("f32"), ": missing");
  return {};
}

/// The class a class's ops were costed as before it had its own; nullopt
/// for the classes every spec gives.
std::optional<OpClass> classBefore(OpClass opClass) {
  switch (opClass) {
  case OpClass::GroupedConvolution:
    return OpClass::Convolution;
  case OpClass::Pooling:
    return OpClass::Reduction;
  case OpClass::Normalization:
  case OpClass::Layout:
    return OpClass::Elementwise;
  default:
    return std::nullopt;
  }
}

Status parseEfficiency(const Node &device, DeviceSpec &spec) {
  std::optional<Node> table;
  CLEAVE_RETURN_IF_ERROR(getObject(device, "efficiency", &table));
  for (auto it = table->json.begin(); it != table->json.end(); ++it)
    if (!parseOpClass(it.key())) {
      std::string expected;
      for (int i = 0; i < kNumOpClasses; ++i)
        expected += std::string(i == 0 ? "" : i + 1 == kNumOpClasses ? " or " : ", ") +
                    std::string(kOpClassNames[i]);
      return CLEAVE_ERROR(table->where(it.key()), ": unknown op class (expected ", expected, ")");
    }
  for (int i = 0; i < kNumOpClasses; ++i) {
    // Specs written before a class existed give it the figures of the class
    // its ops were in before.
    std::optional<OpClass> before = classBefore(OpClass(i));
    if (before && !table->has(std::string(kOpClassNames[i]))) {
      spec.efficiency[i] = spec.efficiency[int(*before)];
      continue;
    }
    std::optional<Node> entry;
    CLEAVE_RETURN_IF_ERROR(getObject(*table, std::string(kOpClassNames[i]), &entry));
    CLEAVE_RETURN_IF_ERROR(checkKeys(*entry, {"compute", "memory"}));
    CLEAVE_RETURN_IF_ERROR(
        getNumber(*entry, "compute", Range::Fraction, &spec.efficiency[i].compute));
    CLEAVE_RETURN_IF_ERROR(
        getNumber(*entry, "memory", Range::Fraction, &spec.efficiency[i].memory));
  }
  return {};
}

/// Calls `parse` on each object of the optional list `key` of `node`.
template <typename Parse>
Status forEachListedObject(const Node &node, const std::string &key, Parse parse) {
  if (!node.has(key))
    return {};
  Node list = node.child(key);
  if (!list.json.is_array())
    return CLEAVE_ERROR(list.where(), ": expected a list, got ", describe(list.json));
  for (size_t i = 0; i < list.json.size(); ++i) {
    Node item = list.element(i);
    if (!item.json.is_object())
      return CLEAVE_ERROR(item.where(), ": expected an object, got ", describe(item.json));
    CLEAVE_RETURN_IF_ERROR(parse(item));
  }
  return {};
}

Status parseGemmSamples(const Node &device, DeviceSpec &spec) {
  return forEachListedObject(device, "gemm_samples", [&](const Node &item) -> Status {
    CLEAVE_RETURN_IF_ERROR(
        checkKeys(item, {"batch", "m", "n", "k", "dtype", "flops_per_s", "op_class"}));
    GemmSample sample;
    if (item.has("op_class")) {
      std::string name;
      CLEAVE_RETURN_IF_ERROR(getString(item, "op_class", &name));
      if (name != "gemm" && name != "convolution" && name != "grouped_convolution")
        return CLEAVE_ERROR(item.where("op_class"),
                            ": expected gemm, convolution or grouped_convolution, got '", name,
                            "'");
      sample.opClass = *parseOpClass(name);
    }
    CLEAVE_RETURN_IF_ERROR(getInt(item, "batch", 1, &sample.shape.batch));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "m", 1, &sample.shape.m));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "n", 1, &sample.shape.n));
    CLEAVE_RETURN_IF_ERROR(getInt(item, "k", 1, &sample.shape.k));
    CLEAVE_RETURN_IF_ERROR(parseDTypeField(item, "dtype", &sample.dtype));
    CLEAVE_RETURN_IF_ERROR(getNumber(item, "flops_per_s", Range::Positive, &sample.flopsPerSecond));
    spec.gemmSamples.push_back(sample);
    return {};
  });
}

Status parseDevice(const Node &top, DeviceSpec &spec) {
  std::optional<Node> device;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "device", &device));
  CLEAVE_RETURN_IF_ERROR(
      checkKeys(*device, {"name", "kind", "memory_bytes", "memory_reserve_bytes", "peak_flops",
                          "memory_bandwidth", "kernel_overhead_s", "adamw_seconds_per_parameter",
                          "efficiency", "gemm_samples"}));
  CLEAVE_RETURN_IF_ERROR(getString(*device, "name", &spec.name));
  CLEAVE_RETURN_IF_ERROR(getString(*device, "kind", &spec.kind));
  if (spec.kind != "gpu" && spec.kind != "cpu")
    return CLEAVE_ERROR(device->where("kind"), ": expected 'gpu' or 'cpu', got '", spec.kind, "'");
  CLEAVE_RETURN_IF_ERROR(getNumber(*device, "memory_bytes", Range::Positive, &spec.memoryBytes));
  CLEAVE_RETURN_IF_ERROR(
      getNumber(*device, "memory_reserve_bytes", Range::NonNegative, &spec.memoryReserveBytes));
  if (spec.memoryReserveBytes >= spec.memoryBytes)
    return CLEAVE_ERROR(device->where("memory_reserve_bytes"),
                        ": must be less than device.memory_bytes (", spec.memoryBytes, "), got ",
                        spec.memoryReserveBytes);
  CLEAVE_RETURN_IF_ERROR(parsePeakFlops(*device, spec));
  CLEAVE_RETURN_IF_ERROR(
      getNumber(*device, "memory_bandwidth", Range::Positive, &spec.memoryBandwidth));
  CLEAVE_RETURN_IF_ERROR(
      getNumber(*device, "kernel_overhead_s", Range::NonNegative, &spec.kernelOverhead));
  if (device->has("adamw_seconds_per_parameter"))
    CLEAVE_RETURN_IF_ERROR(getNumber(*device, "adamw_seconds_per_parameter", Range::Positive,
                                     &spec.adamwSecondsPerParameter));
  CLEAVE_RETURN_IF_ERROR(parseEfficiency(*device, spec));
  return parseGemmSamples(*device, spec);
}

/// A link object: `bandwidthKey` (> 0), `latency_s` (>= 0) and an optional
/// `efficiency` in (0, 1]; `known` lists every key the object may hold.
Status parseLink(const Node &node, const char *bandwidthKey,
                 std::initializer_list<const char *> known, LinkSpec &link) {
  CLEAVE_RETURN_IF_ERROR(checkKeys(node, known));
  CLEAVE_RETURN_IF_ERROR(getNumber(node, bandwidthKey, Range::Positive, &link.bandwidth));
  if (node.has("efficiency"))
    CLEAVE_RETURN_IF_ERROR(getNumber(node, "efficiency", Range::Fraction, &link.efficiency));
  return getNumber(node, "latency_s", Range::NonNegative, &link.latency);
}

Status parseLinks(const Node &top, ClusterSpec &spec) {
  std::optional<Node> intra, inter;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "intra_node", &intra));
  CLEAVE_RETURN_IF_ERROR(
      parseLink(*intra, "bandwidth", {"bandwidth", "latency_s", "efficiency", "nvls_bus_bandwidth"},
                spec.intraNode));
  if (intra->has("nvls_bus_bandwidth"))
    CLEAVE_RETURN_IF_ERROR(
        getNumber(*intra, "nvls_bus_bandwidth", Range::Positive, &spec.nvlsBusBandwidth));
  CLEAVE_RETURN_IF_ERROR(getObject(top, "inter_node", &inter));
  CLEAVE_RETURN_IF_ERROR(
      parseLink(*inter, "bandwidth_per_nic",
                {"bandwidth_per_nic", "nics_per_node", "latency_s", "efficiency"}, spec.interNode));
  CLEAVE_RETURN_IF_ERROR(getInt(*inter, "nics_per_node", 1, &spec.nicsPerNode));
  // Host memory and the host link are optional: specs written before model
  // spilling have none of them.
  if (top.has("host_memory_bytes"))
    CLEAVE_RETURN_IF_ERROR(
        getNumber(top, "host_memory_bytes", Range::Positive, &spec.hostMemoryBytes));
  if (top.has("host_memory_bandwidth"))
    CLEAVE_RETURN_IF_ERROR(
        getNumber(top, "host_memory_bandwidth", Range::Positive, &spec.hostMemoryBandwidth));
  if (top.has("host_link")) {
    std::optional<Node> host;
    CLEAVE_RETURN_IF_ERROR(getObject(top, "host_link", &host));
    CLEAVE_RETURN_IF_ERROR(
        parseLink(*host, "bandwidth", {"bandwidth", "latency_s", "efficiency"}, spec.hostLink));
  }
  return {};
}

/// "contention": {"devices": N >= 2, at most devices_per_node,
/// "memory_bandwidth": > 0, "compute_scale": in (0, 1]}.
Status parseContention(const Node &top, ClusterSpec &spec) {
  if (!top.has("contention"))
    return {};
  std::optional<Node> node;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "contention", &node));
  CLEAVE_RETURN_IF_ERROR(checkKeys(*node, {"devices", "memory_bandwidth", "compute_scale"}));
  NodeContention &c = spec.contention;
  CLEAVE_RETURN_IF_ERROR(getInt(*node, "devices", 2, &c.devices));
  if (c.devices > spec.devicesPerNode)
    return CLEAVE_ERROR(node->where("devices"), ": more than devices_per_node (",
                        spec.devicesPerNode, "), got ", c.devices);
  CLEAVE_RETURN_IF_ERROR(getNumber(*node, "memory_bandwidth", Range::Positive, &c.memoryBandwidth));
  return getNumber(*node, "compute_scale", Range::Fraction, &c.computeScale);
}

/// "collective_samples": [{"collective": NAME, "ranks": >= 2, "bytes": > 0,
/// "seconds": > 0}, ...].
Status parseMeasuredCollectives(const Node &top, ClusterSpec &spec) {
  return forEachListedObject(top, "collective_samples", [&](const Node &item) -> Status {
    CLEAVE_RETURN_IF_ERROR(checkKeys(item, {"collective", "ranks", "bytes", "seconds"}));
    MeasuredCollective sample;
    CLEAVE_RETURN_IF_ERROR(getString(item, "collective", &sample.collective));
    if (!parseCollective(sample.collective))
      return CLEAVE_ERROR(item.where("collective"),
                          ": expected all-reduce, all-gather, reduce-scatter, all-to-all or "
                          "send-recv, got '",
                          sample.collective, "'");
    CLEAVE_RETURN_IF_ERROR(getInt(item, "ranks", 2, &sample.ranks));
    CLEAVE_RETURN_IF_ERROR(getNumber(item, "bytes", Range::Positive, &sample.bytes));
    CLEAVE_RETURN_IF_ERROR(getNumber(item, "seconds", Range::Positive, &sample.seconds));
    spec.measuredCollectives.push_back(sample);
    return {};
  });
}

/// "prediction_error": {"mean_abs_error": >= 0, "mean_signed_error": a
/// number, "runs": >= 1, "source": a string}.
Status parsePredictionError(const Node &top, ClusterSpec &spec) {
  if (!top.has("prediction_error"))
    return {};
  std::optional<Node> node;
  CLEAVE_RETURN_IF_ERROR(getObject(top, "prediction_error", &node));
  CLEAVE_RETURN_IF_ERROR(
      checkKeys(*node, {"mean_abs_error", "mean_signed_error", "runs", "source"}));
  PredictionError &e = spec.predictionError;
  CLEAVE_RETURN_IF_ERROR(getNumber(*node, "mean_abs_error", Range::NonNegative, &e.meanAbs));
  CLEAVE_RETURN_IF_ERROR(getNumber(*node, "mean_signed_error", Range::Any, &e.meanSigned));
  if (std::abs(e.meanSigned) > e.meanAbs * (1 + 1e-12))
    return CLEAVE_ERROR(node->where("mean_signed_error"), ": larger than mean_abs_error (",
                        e.meanAbs, "), got ", e.meanSigned);
  CLEAVE_RETURN_IF_ERROR(getInt(*node, "runs", 1, &e.runs));
  return getString(*node, "source", &e.source);
}

Status parseTop(const Node &top, ClusterSpec &spec) {
  if (!top.json.is_object())
    return CLEAVE_ERROR(top.origin, ": expected a JSON object");
  CLEAVE_RETURN_IF_ERROR(
      checkKeys(top, {"format", "version", "name", "description", "source", "nodes",
                      "devices_per_node", "device", "intra_node", "inter_node",
                      "host_memory_bytes", "host_memory_bandwidth", "host_link",
                      "contention", "collective_samples", "prediction_error",
                      "measurements"}));
  std::string format;
  CLEAVE_RETURN_IF_ERROR(getString(top, "format", &format));
  if (format != kFormat)
    return CLEAVE_ERROR(top.where("format"), ": expected '", kFormat, "', got '", format, "'");
  int64_t version = 0;
  CLEAVE_RETURN_IF_ERROR(getInt(top, "version", 0, &version));
  if (version != kClusterSpecVersion)
    return CLEAVE_ERROR(top.where("version"), ": unsupported version ", version,
                        " (this build reads version ", kClusterSpecVersion, ")");
  CLEAVE_RETURN_IF_ERROR(getString(top, "name", &spec.name));
  if (top.has("description"))
    CLEAVE_RETURN_IF_ERROR(getString(top, "description", &spec.description));
  CLEAVE_RETURN_IF_ERROR(getString(top, "source", &spec.source));
  CLEAVE_RETURN_IF_ERROR(getInt(top, "nodes", 1, &spec.nodes));
  CLEAVE_RETURN_IF_ERROR(getInt(top, "devices_per_node", 1, &spec.devicesPerNode));
  CLEAVE_RETURN_IF_ERROR(parseDevice(top, spec.device));
  CLEAVE_RETURN_IF_ERROR(parseLinks(top, spec));
  CLEAVE_RETURN_IF_ERROR(parseContention(top, spec));
  CLEAVE_RETURN_IF_ERROR(parseMeasuredCollectives(top, spec));
  CLEAVE_RETURN_IF_ERROR(parsePredictionError(top, spec));
  if (top.has("measurements")) {
    std::optional<Node> measurements;
    CLEAVE_RETURN_IF_ERROR(getObject(top, "measurements", &measurements));
    spec.measurementsJson = measurements->json.dump();
  }
  return {};
}

Json formatEfficiency(const Efficiency &e) {
  Json j = Json::object();
  j["compute"] = e.compute;
  j["memory"] = e.memory;
  return j;
}

} // namespace

Status parseClusterSpec(const std::string &text, const std::string &origin, ClusterSpec &spec) {
  try {
    Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded())
      return CLEAVE_ERROR(origin, ": not valid JSON");
    // Fill a fresh spec so a failed parse leaves the caller's untouched.
    ClusterSpec parsed;
    CLEAVE_RETURN_IF_ERROR(parseTop(Node{json, origin, ""}, parsed));
    spec = std::move(parsed);
    return {};
  } catch (const std::exception &e) {
    return CLEAVE_ERROR(origin, ": ", e.what());
  }
}

Status loadClusterSpec(const std::string &path, ClusterSpec &spec, int nodesOverride) {
  if (nodesOverride < 0)
    return CLEAVE_ERROR("--nodes must be at least 1, got ", nodesOverride);
  std::ifstream in(path);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  CLEAVE_RETURN_IF_ERROR(parseClusterSpec(text.str(), path, spec));
  if (nodesOverride > 0)
    spec.nodes = nodesOverride;
  return {};
}

std::string formatClusterSpec(const ClusterSpec &spec) {
  const DeviceSpec &d = spec.device;
  Json device = Json::object();
  device["name"] = d.name;
  device["kind"] = d.kind;
  device["memory_bytes"] = d.memoryBytes;
  device["memory_reserve_bytes"] = d.memoryReserveBytes;
  Json peak = Json::object();
  for (DType dtype : kComputeDTypes)
    if (auto it = d.peakFlops.find(dtype); it != d.peakFlops.end())
      peak[runtime::dtypeName(dtype)] = it->second;
  device["peak_flops"] = peak;
  device["memory_bandwidth"] = d.memoryBandwidth;
  device["kernel_overhead_s"] = d.kernelOverhead;
  if (d.adamwSecondsPerParameter > 0)
    device["adamw_seconds_per_parameter"] = d.adamwSecondsPerParameter;
  Json efficiency = Json::object();
  for (int i = 0; i < kNumOpClasses; ++i)
    efficiency[std::string(kOpClassNames[i])] = formatEfficiency(d.efficiency[i]);
  device["efficiency"] = efficiency;
  if (!d.gemmSamples.empty()) {
    Json samples = Json::array();
    for (const GemmSample &s : d.gemmSamples) {
      Json j = Json::object();
      j["batch"] = s.shape.batch;
      j["m"] = s.shape.m;
      j["n"] = s.shape.n;
      j["k"] = s.shape.k;
      j["dtype"] = runtime::dtypeName(s.dtype);
      j["flops_per_s"] = s.flopsPerSecond;
      if (s.opClass != OpClass::Gemm)
        j["op_class"] = std::string(opClassName(s.opClass));
      samples.push_back(j);
    }
    device["gemm_samples"] = samples;
  }

  Json top = Json::object();
  top["format"] = kFormat;
  top["version"] = kClusterSpecVersion;
  top["name"] = spec.name;
  top["description"] = spec.description;
  top["source"] = spec.source;
  top["nodes"] = spec.nodes;
  top["devices_per_node"] = spec.devicesPerNode;
  top["device"] = device;
  top["intra_node"] = {{"bandwidth", spec.intraNode.bandwidth},
                       {"latency_s", spec.intraNode.latency}};
  top["inter_node"] = {{"bandwidth_per_nic", spec.interNode.bandwidth},
                       {"nics_per_node", spec.nicsPerNode},
                       {"latency_s", spec.interNode.latency}};
  if (spec.intraNode.efficiency != 1)
    top["intra_node"]["efficiency"] = spec.intraNode.efficiency;
  if (spec.nvlsBusBandwidth > 0)
    top["intra_node"]["nvls_bus_bandwidth"] = spec.nvlsBusBandwidth;
  if (spec.interNode.efficiency != 1)
    top["inter_node"]["efficiency"] = spec.interNode.efficiency;
  if (spec.hostMemoryBytes > 0)
    top["host_memory_bytes"] = spec.hostMemoryBytes;
  if (spec.hostMemoryBandwidth > 0)
    top["host_memory_bandwidth"] = spec.hostMemoryBandwidth;
  if (spec.hasHostLink()) {
    top["host_link"] = {{"bandwidth", spec.hostLink.bandwidth},
                        {"latency_s", spec.hostLink.latency}};
    if (spec.hostLink.efficiency != 1)
      top["host_link"]["efficiency"] = spec.hostLink.efficiency;
  }
  if (spec.contention.measured())
    top["contention"] = {{"devices", spec.contention.devices},
                         {"memory_bandwidth", spec.contention.memoryBandwidth},
                         {"compute_scale", spec.contention.computeScale}};
  if (!spec.measuredCollectives.empty()) {
    Json samples = Json::array();
    for (const MeasuredCollective &c : spec.measuredCollectives)
      samples.push_back(Json{{"collective", c.collective},
                             {"ranks", c.ranks},
                             {"bytes", c.bytes},
                             {"seconds", c.seconds}});
    top["collective_samples"] = samples;
  }
  if (spec.predictionError.known())
    top["prediction_error"] = {{"mean_abs_error", spec.predictionError.meanAbs},
                               {"mean_signed_error", spec.predictionError.meanSigned},
                               {"runs", spec.predictionError.runs},
                               {"source", spec.predictionError.source}};
  if (!spec.measurementsJson.empty())
    top["measurements"] = Json::parse(spec.measurementsJson, nullptr, false);
  return top.dump(2) + "\n";
}

DeviceSpec deviceSharingNode(const ClusterSpec &spec, int activeDevices) {
  DeviceSpec device = spec.device;
  const NodeContention &c = spec.contention;
  if (!c.measured() || activeDevices < 2)
    return device;
  int active = std::min(activeDevices, std::max(spec.devicesPerNode, c.devices));
  // The node's memory moved c.devices * c.memoryBandwidth with all busy;
  // fewer busy devices share the same channels, each no faster than alone.
  double nodeBandwidth = c.devices * c.memoryBandwidth;
  device.memoryBandwidth = std::min(device.memoryBandwidth, nodeBandwidth / active);
  // Compute slows with each busy neighbour, to the measured scale with all.
  double fraction = std::min(1.0, double(active - 1) / double(c.devices - 1));
  double scale = 1.0 - (1.0 - c.computeScale) * fraction;
  for (auto &[dtype, flops] : device.peakFlops)
    flops *= scale;
  for (GemmSample &sample : device.gemmSamples)
    sample.flopsPerSecond *= scale;
  return device;
}

Status saveClusterSpec(const ClusterSpec &spec, const std::string &path) {
  std::string text = formatClusterSpec(spec);
  ClusterSpec check;
  CLEAVE_RETURN_IF_ERROR(parseClusterSpec(text, path, check).prepend("refusing to write"));
  return runtime::writeFileAtomically(path, text);
}

} // namespace cleave::cost
