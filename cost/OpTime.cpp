//===- OpTime.cpp - Predicted time of one op on one device ----------------===//

#include "cost/OpTime.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace cleave::cost {

namespace {

/// Distance of two GEMM shapes in log2 space. The batch counts less: a batch
/// of independent products changes efficiency less than their dims do.
double shapeDistance(const GemmShape &a, const GemmShape &b) {
  auto d = [](int64_t x, int64_t y) {
    return std::log2(std::max<int64_t>(x, 1)) - std::log2(std::max<int64_t>(y, 1));
  };
  double dm = d(a.m, b.m), dn = d(a.n, b.n), dk = d(a.k, b.k), db = 0.5 * d(a.batch, b.batch);
  return std::sqrt(dm * dm + dn * dn + dk * dk + db * db);
}

} // namespace

/// Inverse-square-distance interpolation over the samples of `samplesOf`
/// nearest `shape`, as a fraction of `peak`; nullopt when there are none.
static std::optional<double> interpolateSamples(const DeviceSpec &device, const GemmShape &shape,
                                                runtime::DType dtype, OpClass samplesOf) {
  double peak = device.peakFlopsOf(dtype);
  std::vector<std::pair<double, double>> nearest; // (distance, efficiency)
  for (const GemmSample &sample : device.gemmSamples)
    if (sample.dtype == dtype && sample.opClass == samplesOf && peak > 0)
      nearest.push_back({shapeDistance(shape, sample.shape), sample.flopsPerSecond / peak});
  if (nearest.empty())
    return std::nullopt;
  std::sort(nearest.begin(), nearest.end());
  if (nearest.front().first <= 1e-9)
    return nearest.front().second; // an exact sample is its own figure
  constexpr size_t kNeighbours = 3;
  double weights = 0, weighted = 0;
  for (size_t i = 0; i < std::min(kNeighbours, nearest.size()); ++i) {
    double w = 1.0 / (nearest[i].first * nearest[i].first);
    weights += w;
    weighted += w * nearest[i].second;
  }
  return weighted / weights;
}

double gemmEfficiency(const DeviceSpec &device, const GemmShape &shape,
                      runtime::DType dtype, OpClass opClass) {
  if (opClass == OpClass::GroupedConvolution) {
    // Grouped and depthwise convolutions are products far from any GEMM
    // sample (a depthwise 3x3 is n = 1, k = 9 per group): they interpolate
    // samples of their own. A spec without them predicts them as it did
    // before they had a class: as dense convolutions from the GEMM samples,
    // or at the class figure when there are no samples at all.
    if (auto own = interpolateSamples(device, shape, dtype, OpClass::GroupedConvolution))
      return std::min(*own, 1.0);
    if (!interpolateSamples(device, shape, dtype, OpClass::Gemm))
      return device.efficiencyOf(opClass).compute;
    opClass = OpClass::Convolution;
  }
  // Dense convolutions measured at their implicit-GEMM shapes: a 3x3 over a
  // 7x7 map runs further from a GEMM of its shape than one over 56x56 does,
  // which one class ratio cannot follow.
  if (opClass == OpClass::Convolution)
    if (auto own = interpolateSamples(device, shape, dtype, OpClass::Convolution))
      return std::min(*own, 1.0);
  double classEfficiency = device.efficiencyOf(opClass).compute;
  auto efficiency = interpolateSamples(device, shape, dtype, OpClass::Gemm);
  if (!efficiency)
    return classEfficiency;
  // Convolutions run as implicit GEMMs at their own class's efficiency
  // relative to a plain GEMM (im2col or the conv algorithm's overhead).
  if (opClass != OpClass::Gemm) {
    double gemmClass = device.efficiencyOf(OpClass::Gemm).compute;
    if (gemmClass > 0)
      *efficiency *= classEfficiency / gemmClass;
  }
  return std::min(*efficiency, 1.0);
}

double optimizerStepSeconds(const DeviceSpec &device, double parameters) {
  if (device.adamwSecondsPerParameter > 0)
    return parameters * device.adamwSecondsPerParameter;
  double bandwidth =
      device.memoryBandwidth * device.efficiency[int(OpClass::Elementwise)].memory;
  return bandwidth > 0 ? parameters * kAdamWBytesPerParameter / bandwidth : 0;
}

PassTime predictPass(const DeviceSpec &device, const OpCost &cost, const PassCost &pass,
                     runtime::DType dtype) {
  PassTime time;
  if (pass.kernels == 0)
    return time;
  const Efficiency &efficiency = device.efficiencyOf(cost.opClass);
  double computeEfficiency = cost.gemm ? gemmEfficiency(device, *cost.gemm, dtype, cost.opClass)
                                       : efficiency.compute;
  double peak = device.peakFlopsOf(dtype);
  if (pass.flops > 0 && peak > 0 && computeEfficiency > 0)
    time.compute = pass.flops / (peak * computeEfficiency);
  if (device.memoryBandwidth > 0 && efficiency.memory > 0)
    time.memory = (pass.bytesRead + pass.bytesWritten) / (device.memoryBandwidth * efficiency.memory);
  time.overhead = pass.kernels * device.kernelOverhead;
  return time;
}

} // namespace cleave::cost
