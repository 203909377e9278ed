//===- Roofline.h - Measured time against the device's two roofs ----------===//
//
// How far a run is from the hardware: the measured seconds of each
// instruction (Executor::setProfiling) set against the FLOPs and bytes the
// compiler's cost model gave it (the instruction's "cost",
// docs/plan-format.md) and the device's peaks (a cluster spec's peak FLOP/s
// and memory bandwidth). The whole run gets its achieved FLOP/s and bytes/s
// as fractions of both peaks; each op class (and each kernel in it) its share
// of the time, its arithmetic intensity, which roof bounds it (compute at or
// above the ridge, peak FLOP/s over bandwidth; memory below) and its
// efficiency against that roof. No formulas of its own: every FLOP and byte
// comes from the plan.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"
#include "runtime/Status.h"

#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

/// The device's roofs.
struct RooflinePeaks {
  double flopsPerSecond = 0; ///< peak GEMM FLOP/s at the plan's dtype
  double bytesPerSecond = 0; ///< memory bandwidth
  /// Where the figures come from, for the report ("cpu-2core (spec.json)").
  std::string source;
  /// FLOPs per byte at which the two roofs meet.
  double ridge() const { return flopsPerSecond / bytesPerSecond; }
};

enum class Bound : uint8_t { Compute, Memory };

/// Instructions measured together: one op class, one kernel of it, or the
/// whole run.
struct RooflineRow {
  /// The op class or kernel name; "uncosted" for instructions the plan
  /// gives no cost (collectives, send, recv; plans from before the field).
  std::string name;
  bool costed = true;
  int64_t calls = 0;
  double seconds = 0;
  double share = 0; ///< of the whole run's seconds
  double flops = 0, bytes = 0;
  /// Derived from the above and the peaks (meaningless when !costed).
  double flopsPerSecond = 0, bytesPerSecond = 0;
  /// FLOPs per byte; absent when the row moves no bytes.
  std::optional<double> intensity;
  Bound bound = Bound::Memory;
  /// Achieved rate over the bounding roof's peak: FLOP/s over peak FLOP/s
  /// when compute-bound, bytes/s over bandwidth when memory-bound.
  double efficiency = 0;
  /// Per kernel within a class row, most time first.
  std::vector<RooflineRow> kernels;
};

struct RooflineReport {
  RooflinePeaks peaks;
  /// The phases measured ("forward"; "forward+backward+optimizer").
  std::string phases;
  /// How many runs each instruction's seconds are the median of.
  int runs = 1;
  /// The whole run: every instruction's time, the costed ones' FLOPs and
  /// bytes; `computeFraction` and `memoryFraction` are its achieved FLOP/s
  /// and bytes/s over the two peaks.
  RooflineRow total;
  double computeFraction = 0, memoryFraction = 0;
  /// One row per op class, and "uncosted", most time first; shares sum to 1.
  std::vector<RooflineRow> classes;
};

/// One phase's instructions and each one's measured seconds, in order.
struct TimedPhase {
  const Phase *phase = nullptr;
  std::vector<double> seconds;
};

/// The report of `phases` against `peaks` (`report->runs`, the caller's
/// count, is kept). Errors: peaks not positive, a phase whose seconds do
/// not match its instructions, a negative time.
Status buildRoofline(const std::vector<TimedPhase> &phases, const RooflinePeaks &peaks,
                     RooflineReport *report);

/// Each instruction's median over `runs` (each a run's lastRunSeconds):
/// one noisy run moves a small kernel's time by more than its own length.
/// Runs of different lengths are an error.
Status medianSeconds(const std::vector<std::vector<double>> &runs, std::vector<double> *median);

/// The float dtype the run computes in, to pick the peak FLOP/s: the
/// output dtype of the instruction with the most FLOPs (f32 when none has
/// a cost).
DType computeDType(const ProgramSpec &program, const std::vector<const Phase *> &phases);

/// A table for people: the whole run, then a row per class with its
/// kernels indented below.
std::string formatRooflineTable(const RooflineReport &report);
/// The same as JSON (docs/cli.md, "cleave run --roofline").
std::string formatRooflineJson(const RooflineReport &report);

} // namespace cleave::runtime
