//===- ClusterSpec.h - The machines a plan runs on -------------*- C++ -*-===//
//
// A cluster spec (docs/cluster-spec.md) describes nodes of identical devices:
// each device's memory, peak FLOP/s per dtype, achievable efficiency per op
// class, memory bandwidth and per-kernel overhead, the links inside a node
// and between nodes, and optionally each node's host memory and the link
// between it and a device (for spilling). All quantities are in SI base
// units: bytes, bytes/s, FLOP/s, seconds. Specs are shipped for known
// machines (examples/clusters/) or measured on this machine by `cleave
// profile`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost/OpCost.h"
#include "runtime/DType.h"
#include "runtime/Status.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace cleave::cost {

inline constexpr int kClusterSpecVersion = 1;

/// Achievable fraction of the device's peak compute and memory bandwidth for
/// one op class, each in (0, 1].
struct Efficiency {
  double compute = 1.0;
  double memory = 1.0;
};

/// One measured GEMM: `cleave profile` records several shapes; the cost model
/// interpolates between them for shape-dependent efficiency.
struct GemmSample {
  GemmShape shape;
  runtime::DType dtype = runtime::DType::F32;
  double flopsPerSecond = 0;
  /// Gemm; Convolution, a dense conv2d measured at its implicit-GEMM shape,
  /// which only dense convolutions interpolate; or GroupedConvolution, a
  /// grouped or depthwise conv2d at its implicit-GEMM shape (batch = groups),
  /// which only grouped convolutions interpolate.
  OpClass opClass = OpClass::Gemm;
};

struct DeviceSpec {
  std::string name;           // "A100-SXM4-80GB", "AMD EPYC (2 cores)"
  std::string kind;           // "gpu" or "cpu"
  double memoryBytes = 0;     // capacity
  double memoryReserveBytes = 0; // kept back from planning (runtime, fragmentation)
  std::map<runtime::DType, double> peakFlops; // per compute dtype (f32, bf16, f16)
  double memoryBandwidth = 0; // bytes/s
  double kernelOverhead = 0;  // seconds per kernel launch
  /// One AdamW step's seconds per parameter as `cleave profile` measured
  /// the runtime's kernel; 0: not measured (the bytes at the elementwise
  /// memory rate stand for it).
  double adamwSecondsPerParameter = 0;
  std::array<Efficiency, kNumOpClasses> efficiency;
  std::vector<GemmSample> gemmSamples; // optional, from `cleave profile`

  const Efficiency &efficiencyOf(OpClass c) const {
    return efficiency[static_cast<int>(c)];
  }
  /// Peak FLOP/s for `dtype`; a dtype the device has no figure for (bf16 on a
  /// V100) runs at the f32 rate, which every spec gives.
  double peakFlopsOf(runtime::DType dtype) const;
};

/// A point-to-point link: per-direction bandwidth each device (or NIC) gets,
/// and the latency of one message.
struct LinkSpec {
  double bandwidth = 0; // bytes/s: the line rate, or what a profile measured
  double latency = 0;   // seconds
  /// The fraction of `bandwidth` collectives and copies move payload at: a
  /// datasheet's line rate less the protocol's overhead. 1 for measured
  /// bandwidths.
  double efficiency = 1;
  /// Payload bytes/s.
  double effectiveBandwidth() const { return bandwidth * efficiency; }
};

/// What the devices of one node lose when they run at once: CPU devices
/// (cores of one machine) share its memory channels and last-level cache, and
/// may clock lower with every core busy. Measured by `cleave profile --ranks
/// N` with all N devices running the same kernel; GPUs with their own memory
/// have none (devices 0).
struct NodeContention {
  int devices = 0;            // how many ran at once (the node's devices)
  double memoryBandwidth = 0; // bytes/s each of them streamed
  double computeScale = 1;    // each one's GEMM rate over its rate alone, in (0, 1]
  bool measured() const { return devices >= 2; }
};

/// One collective measured inside a node: `ranks` ranks, S = `bytes` as the
/// collective formulas count it, the median time. `cleave profile` records
/// them by size; the cost model interpolates between them for a group of
/// that many ranks inside one node.
struct MeasuredCollective {
  std::string collective; // "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"
  int ranks = 2;
  double bytes = 0;
  double seconds = 0;
};

/// How far whole-plan predictions on this spec landed from measured or
/// published step times in a validation (bench/planner_validation.py's
/// held-out half for the shipped GPU specs): the band `cleave plan
/// --explain` quotes, inside which two plans cannot be told apart.
struct PredictionError {
  double meanAbs = 0;    // mean |predicted / measured - 1|
  double meanSigned = 0; // mean (predicted / measured - 1): < 0, predictions short
  int runs = 0;          // how many runs it was measured on; 0: not validated
  std::string source;    // which validation, when
  bool known() const { return runs > 0; }
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::string source; // where the figures come from: datasheet or measurement
  int nodes = 1;
  int devicesPerNode = 1;
  DeviceSpec device;
  LinkSpec intraNode; // device to device inside a node (per device)
  LinkSpec interNode; // per NIC
  int nicsPerNode = 1;
  /// All-reduce bus bandwidth inside a node with in-switch reduction (NVLink
  /// SHARP), as NCCL's tests report it; 0: the switch does not reduce.
  double nvlsBusBandwidth = 0;
  /// Host memory of one node, where spilled parameters, gradients and
  /// optimizer state live; 0: the spec does not say.
  double hostMemoryBytes = 0;
  /// Bandwidth of one node's host memory, all its channels together
  /// (bytes/s), which its devices share: what a host-side optimizer step
  /// over spilled state streams at; 0: the spec does not say.
  double hostMemoryBandwidth = 0;
  /// One device's own link to host memory (PCIe, NVLink-C2C; the same memory
  /// for a CPU device), per direction; bandwidth 0: the spec does not say.
  /// Its latency is that of one copy (a cudaMemcpyAsync, a copy thread's
  /// hand-off).
  LinkSpec hostLink;
  /// Optional: the slowdown of devices that run at once on one node.
  NodeContention contention;
  /// Optional: collectives measured inside a node, by size.
  std::vector<MeasuredCollective> measuredCollectives;
  /// Optional: the validated error of whole-plan predictions on this spec.
  PredictionError predictionError;
  /// The optional "measurements" object as compact JSON text ("" if absent):
  /// raw profile data for people, kept verbatim and never interpreted.
  std::string measurementsJson;

  int deviceCount() const { return nodes * devicesPerNode; }
  bool hasHostLink() const { return hostLink.bandwidth > 0; }
};

/// The device as it runs with `activeDevices` of its node's devices busy at
/// once (a plan's devices compute together: data and tensor parallel ranks,
/// pipeline stages in their steady state): memory bandwidth shared as the
/// spec's contention measured it (the node's total divided among them, never
/// above the device's own), FLOP rates scaled between 1 (alone) and the
/// measured scale (all devices). The device unchanged when the spec has no
/// contention or one device is busy.
DeviceSpec deviceSharingNode(const ClusterSpec &spec, int activeDevices);

/// Reads and validates a spec; every error names the file and the field.
/// `nodesOverride` > 0 replaces the spec's node count (`--nodes N`); 0 keeps
/// it; a negative count is an error.
runtime::Status loadClusterSpec(const std::string &path, ClusterSpec &spec,
                                int nodesOverride = 0);
/// Parses a spec from JSON text; `origin` names it in errors.
runtime::Status parseClusterSpec(const std::string &text,
                                 const std::string &origin, ClusterSpec &spec);
/// The spec as JSON text (the format loadClusterSpec reads).
std::string formatClusterSpec(const ClusterSpec &spec);
/// Writes the spec atomically (temporary file + rename). A spec that would not
/// load back is refused and nothing is written.
runtime::Status saveClusterSpec(const ClusterSpec &spec, const std::string &path);

} // namespace cleave::cost
