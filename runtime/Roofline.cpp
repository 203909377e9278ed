//===- Roofline.cpp - Measured time against the device's two roofs --------===//

#include "runtime/Roofline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>

namespace cleave::runtime {
namespace {

constexpr const char *kUncosted = "uncosted";

/// Sums of a row before the peaks are applied.
struct Tally {
  int64_t calls = 0;
  double seconds = 0, flops = 0, bytes = 0;
  void add(double s, const InstructionCost *cost) {
    ++calls;
    seconds += s;
    if (cost) {
      flops += cost->flops;
      bytes += cost->bytes;
    }
  }
};

/// A row's rates, intensity, bound and efficiency from its tally.
RooflineRow finish(const std::string &name, bool costed, const Tally &t, double totalSeconds,
                   const RooflinePeaks &peaks) {
  RooflineRow row;
  row.name = name;
  row.costed = costed;
  row.calls = t.calls;
  row.seconds = t.seconds;
  row.share = totalSeconds > 0 ? t.seconds / totalSeconds : 0;
  row.flops = t.flops;
  row.bytes = t.bytes;
  if (!costed)
    return row;
  if (t.seconds > 0) {
    row.flopsPerSecond = t.flops / t.seconds;
    row.bytesPerSecond = t.bytes / t.seconds;
  }
  if (t.bytes > 0)
    row.intensity = t.flops / t.bytes;
  // No bytes but FLOPs: as far right of the ridge as it gets.
  bool compute = row.intensity ? *row.intensity >= peaks.ridge() : t.flops > 0;
  row.bound = compute ? Bound::Compute : Bound::Memory;
  row.efficiency = compute ? row.flopsPerSecond / peaks.flopsPerSecond
                           : row.bytesPerSecond / peaks.bytesPerSecond;
  return row;
}

/// Most time first; names break ties so reports are stable.
void sortByTime(std::vector<RooflineRow> &rows) {
  std::sort(rows.begin(), rows.end(), [](const RooflineRow &a, const RooflineRow &b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
}

const char *boundName(Bound bound) { return bound == Bound::Compute ? "compute" : "memory"; }

} // namespace

Status buildRoofline(const std::vector<TimedPhase> &phases, const RooflinePeaks &peaks,
                     RooflineReport *report) {
  if (!(peaks.flopsPerSecond > 0) || !(peaks.bytesPerSecond > 0) ||
      !std::isfinite(peaks.flopsPerSecond) || !std::isfinite(peaks.bytesPerSecond))
    return CLEAVE_ERROR("roofline: peak FLOP/s and memory bandwidth must be positive, got ",
                        peaks.flopsPerSecond, " and ", peaks.bytesPerSecond);
  // Class -> (its tally, kernel -> tally); the uncosted under kUncosted.
  struct ClassTally {
    Tally all;
    std::map<std::string, Tally> kernels;
  };
  std::map<std::string, ClassTally> classes;
  Tally total, costedTotal;
  std::string names;
  for (const TimedPhase &timed : phases) {
    if (!timed.phase)
      return CLEAVE_ERROR("roofline: no phase");
    const std::vector<InstructionSpec> &instructions = timed.phase->instructions;
    if (timed.seconds.size() != instructions.size())
      return CLEAVE_ERROR("roofline: phase ", timed.phase->name, " has ", instructions.size(),
                          " instructions but ", timed.seconds.size(), " times (was profiling on?)");
    names += (names.empty() ? "" : "+") + timed.phase->name;
    for (size_t i = 0; i < instructions.size(); ++i) {
      double s = timed.seconds[i];
      if (!(s >= 0) || !std::isfinite(s))
        return CLEAVE_ERROR("roofline: phase ", timed.phase->name, " instruction ", i, " took ", s,
                            " s");
      const InstructionSpec &inst = instructions[i];
      const InstructionCost *cost = inst.cost ? &*inst.cost : nullptr;
      ClassTally &c = classes[cost ? cost->opClass : kUncosted];
      c.all.add(s, cost);
      c.kernels[inst.kernel].add(s, cost);
      total.add(s, cost);
    }
  }

  RooflineReport out;
  out.peaks = peaks;
  out.phases = names;
  out.runs = report->runs;
  out.total = finish("total", true, total, total.seconds, peaks);
  if (total.seconds > 0) {
    out.computeFraction = out.total.flopsPerSecond / peaks.flopsPerSecond;
    out.memoryFraction = out.total.bytesPerSecond / peaks.bytesPerSecond;
  }
  for (const auto &[name, c] : classes) {
    bool costed = name != kUncosted;
    RooflineRow row = finish(name, costed, c.all, total.seconds, peaks);
    for (const auto &[kernel, t] : c.kernels)
      row.kernels.push_back(finish(kernel, costed, t, total.seconds, peaks));
    sortByTime(row.kernels);
    out.classes.push_back(std::move(row));
  }
  sortByTime(out.classes);
  *report = std::move(out);
  return {};
}

Status medianSeconds(const std::vector<std::vector<double>> &runs, std::vector<double> *median) {
  median->clear();
  if (runs.empty())
    return {};
  size_t n = runs.front().size();
  for (const std::vector<double> &run : runs)
    if (run.size() != n)
      return CLEAVE_ERROR("roofline: runs timed ", n, " and ", run.size(), " instructions");
  median->resize(n);
  std::vector<double> column(runs.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t r = 0; r < runs.size(); ++r)
      column[r] = runs[r][i];
    std::sort(column.begin(), column.end());
    size_t mid = column.size() / 2;
    (*median)[i] = column.size() % 2 ? column[mid] : (column[mid - 1] + column[mid]) / 2;
  }
  return {};
}

DType computeDType(const ProgramSpec &program, const std::vector<const Phase *> &phases) {
  DType dtype = DType::F32;
  double most = -1;
  for (const Phase *phase : phases)
    for (const InstructionSpec &inst : phase->instructions) {
      if (!inst.cost || inst.cost->flops <= most || inst.outputs.empty())
        continue;
      DType out = program.buffers[inst.outputs[0]].desc.dtype;
      if (out == DType::F32 || out == DType::BF16 || out == DType::F16) {
        most = inst.cost->flops;
        dtype = out;
      }
    }
  return dtype;
}

namespace {

__attribute__((format(printf, 1, 2))) std::string strformat(const char *format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(n > 0 ? n : 0, '\0');
  if (n > 0)
    std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  return text;
}

std::string tableRow(const RooflineRow &row, int indent) {
  std::string name = std::string(indent, ' ') + row.name;
  std::string head =
      strformat("%-24s %6lld %9.3f %6.1f%%", name.c_str(), static_cast<long long>(row.calls),
                row.seconds * 1e3, row.share * 100);
  if (!row.costed)
    return head + "   (no cost in the plan: time only)\n";
  std::string intensity = row.intensity ? strformat("%8.1f", *row.intensity) : "       -";
  return head + strformat(" %9.3f %9.2f %s  %-7s %9.1f %8.2f %6.1f%%\n", row.flops / 1e9,
                          row.bytes / 1e6, intensity.c_str(), boundName(row.bound),
                          row.flopsPerSecond / 1e9, row.bytesPerSecond / 1e9, row.efficiency * 100);
}

nlohmann::ordered_json rowJson(const RooflineRow &row, const char *key) {
  using Json = nlohmann::ordered_json;
  Json json{{key, row.name}, {"calls", row.calls}, {"seconds", row.seconds}, {"share", row.share}};
  if (!row.costed) {
    json["costed"] = false;
  } else {
    json["costed"] = true;
    json["flops"] = row.flops;
    json["bytes"] = row.bytes;
    json["intensity"] = row.intensity ? Json(*row.intensity) : Json(nullptr);
    json["bound"] = boundName(row.bound);
    json["flops_per_s"] = row.flopsPerSecond;
    json["bytes_per_s"] = row.bytesPerSecond;
    json["efficiency"] = row.efficiency;
  }
  if (!row.kernels.empty()) {
    Json kernels = Json::array();
    for (const RooflineRow &k : row.kernels)
      kernels.push_back(rowJson(k, "kernel"));
    json["kernels"] = std::move(kernels);
  }
  return json;
}

} // namespace

std::string formatRooflineTable(const RooflineReport &report) {
  const RooflinePeaks &p = report.peaks;
  const RooflineRow &t = report.total;
  std::string text =
      "roofline of " + report.phases +
      (report.runs > 1 ? " (each instruction's median of " + std::to_string(report.runs) + " runs)"
                       : std::string(" (one run)")) +
      (p.source.empty() ? "" : " against " + p.source) + "\n";
  text += strformat("peaks: %.1f GFLOP/s, %.1f GB/s; ridge %.1f FLOP/byte\n",
                    p.flopsPerSecond / 1e9, p.bytesPerSecond / 1e9, p.ridge());
  text +=
      strformat("whole: %.3f ms, %.3f GFLOP, %.2f MB: %.1f GFLOP/s = %.1f%% of peak, "
                "%.2f GB/s = %.1f%% of bandwidth\n",
                t.seconds * 1e3, t.flops / 1e9, t.bytes / 1e6, t.flopsPerSecond / 1e9,
                report.computeFraction * 100, t.bytesPerSecond / 1e9, report.memoryFraction * 100);
  text += "class / kernel            calls        ms   share     GFLOP        MB   FLOP/B"
          "  bound     GFLOP/s     GB/s   eff.\n";
  for (const RooflineRow &row : report.classes) {
    text += tableRow(row, 0);
    for (const RooflineRow &kernel : row.kernels)
      text += tableRow(kernel, 2);
  }
  text += "(eff.: achieved over the bounding roof, GFLOP/s over peak when compute-bound, "
          "GB/s over bandwidth when memory-bound; FLOPs and bytes are the plan's)\n";
  return text;
}

std::string formatRooflineJson(const RooflineReport &report) {
  using Json = nlohmann::ordered_json;
  const RooflinePeaks &p = report.peaks;
  const RooflineRow &t = report.total;
  Json classes = Json::array();
  for (const RooflineRow &row : report.classes)
    classes.push_back(rowJson(row, "class"));
  Json json{{"phases", report.phases},
            {"runs", report.runs},
            {"peaks", Json{{"source", p.source},
                           {"flops_per_s", p.flopsPerSecond},
                           {"bytes_per_s", p.bytesPerSecond},
                           {"ridge_flops_per_byte", p.ridge()}}},
            {"total", Json{{"calls", t.calls},
                           {"seconds", t.seconds},
                           {"flops", t.flops},
                           {"bytes", t.bytes},
                           {"intensity", t.intensity ? Json(*t.intensity) : Json(nullptr)},
                           {"flops_per_s", t.flopsPerSecond},
                           {"bytes_per_s", t.bytesPerSecond},
                           {"compute_fraction", report.computeFraction},
                           {"memory_fraction", report.memoryFraction}}},
            {"classes", std::move(classes)}};
  return json.dump(2) + "\n";
}

} // namespace cleave::runtime
