//===- OpTime.h - Predicted time of one op on one device -------*- C++ -*-===//
//
// A roofline per op: the op takes the longer of its compute time (FLOPs at
// the device's peak for its dtype times its class's compute efficiency) and
// its memory time (bytes at the device's bandwidth times its class's memory
// efficiency), plus the per-kernel overhead for each kernel it launches.
// GEMM-like ops take their compute efficiency from the measured GEMM samples
// of the spec when it has them, interpolated by shape; otherwise from the
// class.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost/ClusterSpec.h"

namespace cleave::cost {

struct PassTime {
  double compute = 0;  // seconds at the achievable FLOP rate
  double memory = 0;   // seconds at the achievable bandwidth
  double overhead = 0; // kernel launches
  double seconds() const { return (compute > memory ? compute : memory) + overhead; }
  bool computeBound() const { return compute >= memory; }
};

/// Achievable fraction of peak for a GEMM of this shape: interpolated from
/// the spec's samples of the same dtype (inverse-distance in log-shape
/// space), or the class's compute efficiency when there are none.
double gemmEfficiency(const DeviceSpec &device, const GemmShape &shape,
                      runtime::DType dtype, OpClass opClass);

/// Time of one direction (forward or backward) of an op.
PassTime predictPass(const DeviceSpec &device, const OpCost &cost, const PassCost &pass,
                     runtime::DType dtype);

/// Bytes AdamW moves per parameter: it reads and writes the f32 master
/// weight and both moments and reads the gradient.
inline constexpr double kAdamWBytesPerParameter = 28.0;

/// One AdamW step over `parameters` parameters on one device: at the rate a
/// profile measured when the spec has one, else memory-bound, at the
/// device's bandwidth times its elementwise memory efficiency.
double optimizerStepSeconds(const DeviceSpec &device, double parameters);

} // namespace cleave::cost
