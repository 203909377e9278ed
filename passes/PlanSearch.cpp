//===- PlanSearch.cpp - The inter-layer search of the planner -------------===//

#include "passes/PlanSearch.h"

#include "cost/OpCost.h"
#include "cost/OpTime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>

namespace cleave::planner {

using cost::Collective;
using cost::Schedule;
using cost::ShardingLevel;

double tpCollectiveSeconds(const cost::ClusterSpec &cluster, int tp, Collective collective,
                           double bytes) {
  if (tp <= 1 || bytes <= 0)
    return 0;
  auto group = cost::stridedGroup(tp, 1, cluster.devicesPerNode);
  return cost::estimateCollective(cluster, collective, group, bytes).seconds;
}

std::string Candidate::label() const {
  std::ostringstream os;
  os << "tp=" << tp << " pp=" << pp << " dp=" << dp << " microbatch=" << microbatchSize << "x"
     << microbatches << " " << cost::scheduleName(schedule);
  if (schedule == Schedule::Interleaved)
    os << "(v=" << virtualStages << ")";
  os << " zero=" << cost::shardingLevelName(sharding);
  if (spilledLayers > 0)
    os << " spill=" << spilledLayers << (spilledLayers == 1 ? " layer" : " layers");
  return os.str();
}

double pipelineSeconds(Schedule schedule, const std::vector<double> &stageSeconds,
                       int64_t microbatches, int virtualStages) {
  if (stageSeconds.empty())
    return 0;
  double slowest = *std::max_element(stageSeconds.begin(), stageSeconds.end());
  double sum = 0;
  for (double t : stageSeconds)
    sum += t;
  double m = double(std::max<int64_t>(1, microbatches));
  if (schedule == Schedule::Interleaved && virtualStages > 1)
    return (m + double(stageSeconds.size() - 1) / virtualStages) * slowest;
  // Fill and drain pass every stage once; the steady state runs at the
  // slowest stage's pace.
  return (m - 1) * slowest + sum;
}

std::vector<int> tpCandidates(const cost::ClusterSpec &cluster, const SearchOptions &options) {
  if (options.tp)
    return {*options.tp};
  std::vector<int> out;
  for (int tp = 1; tp <= cluster.devicesPerNode; ++tp)
    if (cluster.devicesPerNode % tp == 0 && options.devices % tp == 0)
      out.push_back(tp);
  return out;
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

/// A layer kind's costs at one tp degree and microbatch size.
struct LayerTime {
  double forward = 0, backward = 0; // compute
  double tpForward = 0, tpBackward = 0;
  double activation = 0, input = 0, output = 0;
  double parameters = 0, buffers = 0;
  double total() const { return forward + backward + tpForward + tpBackward; }
};

struct Config {
  int tp, pp, dp, v;
  int64_t mb, m;
  Schedule schedule;
  ShardingLevel sharding;
  double lowerBound;
  /// Layers may spill to host memory (SearchOptions::spill).
  bool spill = false;
};

class Searcher {
public:
  Searcher(const ModelProfile &model, const cost::ClusterSpec &cluster,
           const SearchOptions &options)
      : model(model), cluster(cluster), options(options),
        layers(int(model.layerKind.size())) {
    int kinds = 0;
    for (int k : model.layerKind)
      kinds = std::max(kinds, k + 1);
    kindCount.assign(kinds, 0);
    for (int k : model.layerKind)
      ++kindCount[k];
  }

  bool run(SearchResult &result, std::string &error);

private:
  /// The search asks for the same (tp, microbatch) thousands of times in a
  /// row: the last row of times is kept at hand.
  const LayerTime &layerTime(int tp, int kind, int64_t mb) {
    if (!lastRow || tp != lastTp || mb != lastMb) {
      lastRow = &timesRow(tp, mb);
      lastTp = tp;
      lastMb = mb;
    }
    return (*lastRow)[kind];
  }
  /// Every layer kind's times at one tp degree and microbatch size, cached.
  const std::vector<LayerTime> &timesRow(int tp, int64_t mb);
  double dpCommSeconds(const Config &c, double parameters) const;
  double optimizerSeconds(const Config &c, double parameters) const;
  std::vector<int> recomputeOrder(int tp, int64_t mb);
  /// Host DRAM bandwidth one device's host-side optimizer gets: the spec's
  /// host memory bandwidth shared by the node's devices; a CPU device's
  /// own memory bandwidth when the spec gives none; 0 when unknown.
  double hostMemoryBandwidth() const;
  /// Why spilling cannot be considered at all, or "" when it can.
  std::string spillUnavailable() const;
  /// Spills layers of the stage (all of them with `all`, else in order of
  /// least exposed copy time per byte saved until `memory` fits), updating
  /// the plan's spill fields; `memory` recomputes the stage's memory.
  void spillLayers(const Config &c, const std::vector<std::pair<int, int>> &chunks, bool all,
                   StagePlan &plan, const std::function<cost::MemoryBreakdown()> &memory);
  /// Evaluates a config: stage boundaries and recomputation. With
  /// `ignoreBudget`, the partition balances time only and every layer
  /// recomputes where allowed (the least memory the config can take).
  bool evaluate(const Config &c, Candidate &out, bool ignoreBudget);
  bool partition(const Config &c, double limit, bool ignoreBudget,
                 std::vector<StagePlan> *stages);
  /// Interleaved: the pp·v chunks, each taking layers while its time stays
  /// within `limit`; false when they do not cover the model.
  bool interleavedChunks(const Config &c, double limit, std::vector<std::pair<int, int>> &chunks);
  bool fillStage(const Config &c, int stage, const std::vector<std::pair<int, int>> &chunks,
                 bool ignoreBudget, StagePlan &plan);

  const ModelProfile &model;
  const cost::ClusterSpec &cluster;
  const SearchOptions &options;
  int layers;
  std::vector<int> kindCount;
  std::map<std::pair<int, int64_t>, std::vector<LayerTime>> rows;
  const std::vector<LayerTime> *lastRow = nullptr;
  int lastTp = 0;
  int64_t lastMb = 0;
  std::map<std::pair<int, int64_t>, std::vector<int>> orderCache;
};

const std::vector<LayerTime> &Searcher::timesRow(int tp, int64_t mb) {
  auto key = std::make_pair(tp, mb);
  auto it = rows.find(key);
  if (it != rows.end())
    return it->second;
  const std::vector<LayerSplitCost> &costs = model.costs.at(tp);
  double scale = double(mb) / double(model.tracedBatch);
  std::vector<LayerTime> row(costs.size());
  for (size_t kind = 0; kind < costs.size(); ++kind) {
    const LayerSplitCost &c = costs[kind];
    LayerTime &t = row[kind];
    t.forward = c.forwardOverhead + (c.forwardCompute - c.forwardOverhead) * scale;
    if (options.training)
      t.backward = c.backwardOverhead + (c.backwardCompute - c.backwardOverhead) * scale;
    for (const LayerCollective &coll : c.collectives) {
      if (coll.backward && !options.training)
        continue;
      double s = tpCollectiveSeconds(cluster, tp, coll.collective, coll.bytes * scale);
      (coll.backward ? t.tpBackward : t.tpForward) += s;
    }
    t.activation = c.activationBytes * scale;
    t.input = c.inputBytes * scale;
    t.output = c.outputBytes * scale;
    t.parameters = c.parameters;
    t.buffers = c.bufferBytes;
  }
  return rows.emplace(key, std::move(row)).first->second;
}

/// Kinds in the order recomputation should take them: most memory saved per
/// second of extra forward first.
std::vector<int> Searcher::recomputeOrder(int tp, int64_t mb) {
  auto key = std::make_pair(tp, mb);
  auto it = orderCache.find(key);
  if (it != orderCache.end())
    return it->second;
  std::vector<int> order;
  for (int k = 0; k < int(kindCount.size()); ++k)
    if (kindCount[k] > 0 && layerTime(tp, k, mb).activation > layerTime(tp, k, mb).input)
      order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const LayerTime &x = layerTime(tp, a, mb), &y = layerTime(tp, b, mb);
    return (x.activation - x.input) * (y.forward + 1e-12) >
           (y.activation - y.input) * (x.forward + 1e-12);
  });
  return orderCache.emplace(key, order).first->second;
}

double Searcher::dpCommSeconds(const Config &c, double parameters) const {
  if (!options.training || c.dp <= 1)
    return 0;
  auto group = cost::stridedGroup(c.dp, c.tp, cluster.devicesPerNode);
  double bytes = parameters * double(runtime::dtypeBytes(options.paramDType));
  auto time = [&](Collective coll) {
    return cost::estimateCollective(cluster, coll, group, bytes).seconds;
  };
  double m = double(c.m);
  switch (c.sharding) {
  case ShardingLevel::None:
  case ShardingLevel::OptimizerState:
    // One all-reduce of the accumulated gradients (ZeRO-1: its reduce-scatter
    // half, then an all-gather of the updated parameters: the same bytes).
    return time(Collective::AllReduce);
  case ShardingLevel::Gradients:
    // Sharded gradients cannot accumulate whole: each microbatch's are
    // reduce-scattered, and the updated parameters gathered once.
    return m * time(Collective::ReduceScatter) + time(Collective::AllGather);
  case ShardingLevel::Parameters:
    // Parameters gathered for every microbatch's forward and backward.
    return m * (2 * time(Collective::AllGather) + time(Collective::ReduceScatter));
  }
  return 0;
}

double Searcher::hostMemoryBandwidth() const {
  if (cluster.hostMemoryBandwidth > 0)
    return cluster.hostMemoryBandwidth / double(std::max(1, cluster.devicesPerNode));
  return cluster.device.kind == "cpu" ? cluster.device.memoryBandwidth : 0;
}

std::string Searcher::spillUnavailable() const {
  if (!options.training)
    return "spilling keeps training state in host memory: it plans training only";
  if (!cluster.hasHostLink())
    return "the cluster spec gives no host_link (host-device bandwidth and latency), which "
           "spilling needs";
  if (hostMemoryBandwidth() <= 0)
    return "the cluster spec gives no host_memory_bandwidth, which the optimizer of spilled "
           "layers runs at";
  return "";
}

void Searcher::spillLayers(const Config &c, const std::vector<std::pair<int, int>> &chunks,
                           bool all, StagePlan &plan,
                           const std::function<cost::MemoryBreakdown()> &memory) {
  double paramBytes = double(runtime::dtypeBytes(options.paramDType));
  std::vector<double> forward(layers, 0), backward(layers, 0);
  for (auto [begin, end] : chunks)
    for (int l = begin; l < end; ++l) {
      const LayerTime &t = layerTime(c.tp, model.layerKind[l], c.mb);
      forward[l] = t.forward;
      backward[l] = t.backward;
    }
  // What may move to the host: a layer's parameters (with their gradient
  // and optimizer state), or its saved activations. Each copy hides behind
  // the neighbouring layer's compute (docs/planner.md, "Spilling"):
  // parameters are copied in a layer ahead of the layer's forward and of its
  // backward and the gradient out right after; activations out while the
  // next layer runs forward and back in while it runs backward.
  struct Item {
    int layer;
    bool activations;
    double bytes, exposed;
  };
  std::vector<Item> items;
  for (auto [begin, end] : chunks)
    for (int l = begin; l < end; ++l) {
      const LayerTime &t = layerTime(c.tp, model.layerKind[l], c.mb);
      double before = l > begin ? forward[l - 1] : 0;
      double next = l + 1 < end ? forward[l + 1] : 0;
      double after = l + 1 < end ? backward[l + 1] : 0;
      if (t.parameters > 0) {
        double copy = cost::hostTransferSeconds(cluster, t.parameters * paramBytes);
        items.push_back({l, false, 4 * t.parameters * paramBytes,
                         std::max(0.0, copy - before) + std::max(0.0, 2 * copy - after)});
      }
      // The pass spills what a layer's backward reads by the layer's name:
      // a name that recurs (`(root)`, `name#2`) would not say which run.
      const std::string &name = model.layerNames[l];
      if (t.activation >= 4096 && name.find('#') == std::string::npos && name != "(root)") {
        double copy = cost::hostTransferSeconds(cluster, t.activation);
        items.push_back({l, true, t.activation,
                         std::max(0.0, copy - next) + std::max(0.0, copy - after)});
      }
    }
  // Least exposed time per byte saved first; parameters before activations
  // (`all` spills every layer's parameters, activations only as needed).
  std::stable_sort(items.begin(), items.end(), [&](const Item &a, const Item &b) {
    if (all && a.activations != b.activations)
      return !a.activations;
    if (a.exposed / a.bytes != b.exposed / b.bytes)
      return a.exposed / a.bytes < b.exposed / b.bytes;
    return a.bytes > b.bytes;
  });
  for (const Item &item : items) {
    if (!(all && !item.activations) && memory().total() <= options.memoryBudget)
      break;
    const LayerTime &t = layerTime(c.tp, model.layerKind[item.layer], c.mb);
    if (item.activations) {
      plan.activationsSpilled.push_back(item.layer);
      plan.spilledActivationBytes += t.activation;
      plan.largestSpilledActivation = std::max(plan.largestSpilledActivation, t.activation);
    } else {
      plan.spilled.push_back(item.layer);
      plan.spilledParameters += t.parameters;
    }
    plan.spillSeconds += item.exposed;
  }
  std::sort(plan.spilled.begin(), plan.spilled.end());
  std::sort(plan.activationsSpilled.begin(), plan.activationsSpilled.end());
  // AdamW on the host, at the host memory's bandwidth.
  plan.hostOptimizerSeconds =
      plan.spilledParameters * cost::kAdamWBytesPerParameter / hostMemoryBandwidth();
}

double Searcher::optimizerSeconds(const Config &c, double parameters) const {
  if (!options.training)
    return 0;
  double shard = c.sharding >= ShardingLevel::OptimizerState ? c.dp : 1;
  return cost::optimizerStepSeconds(cluster.device, parameters / shard);
}

bool Searcher::fillStage(const Config &c, int stage,
                         const std::vector<std::pair<int, int>> &chunks, bool ignoreBudget,
                         StagePlan &plan) {
  plan = StagePlan();
  plan.chunks = chunks;
  std::vector<int> count(kindCount.size(), 0);
  double buffers = 0, activation = 0, largestLayerParams = 0, working = 0;
  for (auto [begin, end] : chunks) {
    for (int l = begin; l < end; ++l) {
      const LayerTime &t = layerTime(c.tp, model.layerKind[l], c.mb);
      ++count[model.layerKind[l]];
      plan.forwardSeconds += t.forward;
      plan.backwardSeconds += t.backward;
      plan.tpCommSeconds += t.tpForward + t.tpBackward;
      plan.parameters += t.parameters;
      largestLayerParams = std::max(largestLayerParams, t.parameters);
      buffers += t.buffers;
      activation += t.activation;
      working = std::max(working, t.input + t.activation);
      for (const ModelProfile::Borrowed &b : model.borrowed[l]) {
        bool own = false;
        for (auto [ob, oe] : chunks)
          own |= b.owner >= ob && b.owner < oe;
        if (!own)
          plan.parameters += b.parameters / c.tp; // split with the layer, as its owner's is
      }
    }
  }
  // Activations sent to the next stage and gradients back, per chunk.
  if (c.pp > 1) {
    auto group = cost::stridedGroup(2, c.tp * c.dp, cluster.devicesPerNode);
    for (auto [begin, end] : chunks) {
      double out = layerTime(c.tp, model.layerKind[end - 1], c.mb).output;
      double in = begin > 0 ? layerTime(c.tp, model.layerKind[begin - 1], c.mb).output : 0;
      if (end < layers)
        plan.p2pSeconds += cost::estimateCollective(cluster, Collective::SendRecv, group, out).seconds;
      if (begin > 0 && options.training)
        plan.p2pSeconds += cost::estimateCollective(cluster, Collective::SendRecv, group, in).seconds;
    }
  }

  double paramBytes = double(runtime::dtypeBytes(options.paramDType));
  cost::MemoryInputs in;
  in.training = options.training;
  in.parameters = int64_t(plan.parameters);
  in.paramDType = options.paramDType;
  in.mixedPrecision = options.mixedPrecision;
  in.dp = c.dp;
  in.sharding = c.sharding;
  in.schedule = c.schedule;
  in.pp = c.pp;
  in.stage = stage;
  in.microbatches = int(std::min<int64_t>(c.m, std::numeric_limits<int>::max()));
  in.virtualStages = c.v;
  if (c.sharding == ShardingLevel::Parameters)
    in.commBufferBytes = 2 * largestLayerParams * paramBytes; // one layer gathered, and the next
  if (!options.training) {
    // Inference keeps no activations for backward: the largest layer's
    // working set, for the microbatch computing and the one arriving.
    in.inferenceActivationBytes = 2 * working;
    in.parameterBytes = plan.parameters * paramBytes;
    plan.memory = cost::predictMemory(in);
    plan.memory.parameters += buffers;
    return ignoreBudget || plan.memory.total() <= options.memoryBudget;
  }

  const double residentParameters = plan.parameters;
  auto memoryWith = [&](double kept, double checkpoints, double work) {
    in.activationBytesPerMicrobatch = kept;
    in.checkpointBytesPerMicrobatch = checkpoints;
    in.recomputeWorkingBytes = work;
    in.parameters = int64_t(residentParameters - plan.spilledParameters);
    cost::MemoryBreakdown m = cost::predictMemory(in);
    m.parameters += buffers;
    if (!plan.activationsSpilled.empty()) {
      // One spilled activation on its way out, one prefetched for backward.
      m.prefetched += 2 * plan.largestSpilledActivation;
      m.host += plan.spilledActivationBytes;
    }
    if (!plan.spilled.empty()) {
      // The layer computing and the one prefetched, and a gradient on its
      // way out; on the host, the spilled layers' whole training state.
      double largest = 0;
      for (int l : plan.spilled)
        largest = std::max(largest, layerTime(c.tp, model.layerKind[l], c.mb).parameters);
      m.prefetched += 3 * largest * paramBytes;
      cost::MemoryInputs spilled = in;
      spilled.parameters = int64_t(plan.spilledParameters);
      spilled.activationBytesPerMicrobatch = spilled.checkpointBytesPerMicrobatch = 0;
      spilled.recomputeWorkingBytes = 0;
      cost::MemoryBreakdown h = cost::predictMemory(spilled);
      m.host += h.parameters + h.gradients + h.optimizerState;
    }
    return m;
  };
  if (c.spill) {
    // Spilling alone: its plans run on one device's step, which
    // recomputation (a partitioned step) does not take yet.
    auto kept = [&] { return memoryWith(activation - plan.spilledActivationBytes, 0, 0); };
    spillLayers(c, chunks, ignoreBudget || options.spill == SpillMode::All, plan, kept);
    plan.memory = kept();
    return ignoreBudget || plan.memory.total() <= options.memoryBudget;
  }
  // ZeRO-3's per-slot gathers with recomputation do not train yet.
  const bool mayRecompute = options.untrainedCombinations || c.dp == 1 ||
                            c.sharding != ShardingLevel::Parameters;
  bool recomputeAll = options.recompute == RecomputeMode::Full ||
                      (ignoreBudget && options.recompute == RecomputeMode::Auto);
  if (recomputeAll && !mayRecompute && !ignoreBudget)
    return false;
  if (!recomputeAll || !mayRecompute) {
    plan.memory = memoryWith(activation, 0, 0);
    if (ignoreBudget || plan.memory.total() <= options.memoryBudget ||
        options.recompute == RecomputeMode::None || !mayRecompute)
      return ignoreBudget || plan.memory.total() <= options.memoryBudget;
  }
  // Recompute the layers that save the most memory per extra second until
  // the stage fits. (Where no layer saves anything by recomputing, the
  // stage keeps every activation.)
  if (recomputeAll)
    plan.memory = memoryWith(activation, 0, 0);
  double kept = activation, checkpoints = 0, work = 0;
  std::vector<int> take(kindCount.size(), 0);
  double inFlight = cost::inFlightMicrobatches(c.schedule, c.pp, stage, in.microbatches, c.v);
  for (int k : recomputeOrder(c.tp, c.mb)) {
    if (count[k] == 0)
      continue;
    const LayerTime &t = layerTime(c.tp, k, c.mb);
    int n = count[k];
    if (!recomputeAll) {
      double excess = plan.memory.total() - options.memoryBudget;
      double perLayer = inFlight * (t.activation - t.input);
      double extraWork = std::max(0.0, t.activation - work);
      n = std::min<int>(count[k], int(std::ceil((excess + extraWork) / perLayer)));
      n = std::max(n, 1);
    }
    take[k] = n;
    kept -= n * t.activation;
    checkpoints += n * t.input;
    work = std::max(work, t.activation);
    plan.recomputeSeconds += n * (t.forward + t.tpForward);
    plan.memory = memoryWith(std::max(0.0, kept), checkpoints, work);
    if (!recomputeAll && plan.memory.total() <= options.memoryBudget)
      break;
  }
  // Name the layers: the first `take[k]` of each kind in the stage.
  for (auto [begin, end] : chunks)
    for (int l = begin; l < end; ++l)
      if (take[model.layerKind[l]] > 0) {
        --take[model.layerKind[l]];
        plan.recomputed.push_back(l);
      }
  return ignoreBudget || plan.memory.total() <= options.memoryBudget;
}

bool Searcher::partition(const Config &c, double limit, bool ignoreBudget,
                         std::vector<StagePlan> *stages) {
  int chunksTotal = c.pp * c.v;
  std::vector<std::pair<int, int>> chunks;
  if (c.v == 1) {
    // Each stage takes as many layers as fit in time and memory, leaving one
    // for every later stage: a stage that could take more only eases the
    // stages after it.
    int begin = 0;
    std::vector<StagePlan> built;
    for (int s = 0; s < c.pp; ++s) {
      int maxEnd = s == c.pp - 1 ? layers : layers - (c.pp - 1 - s);
      auto fits = [&](int end, StagePlan &plan) {
        return fillStage(c, s, {{begin, end}}, ignoreBudget, plan) && plan.seconds() <= limit;
      };
      StagePlan plan, trial;
      if (s == c.pp - 1) {
        if (!fits(layers, plan))
          return false;
      } else if (!fits(begin + 1, plan)) {
        return false;
      }
      // The largest end that fits: growing steps, then bisection (fitting is
      // monotone: more layers never take less time or memory).
      int good = s == c.pp - 1 ? layers : begin + 1, bad = maxEnd + 1;
      for (int step = 1; good + step < bad; step *= 2) {
        if (fits(good + step, trial)) {
          good += step;
          plan = std::move(trial);
        } else {
          bad = good + step;
          break;
        }
      }
      while (bad - good > 1) {
        int mid = (good + bad) / 2;
        if (fits(mid, trial)) {
          good = mid;
          plan = std::move(trial);
        } else {
          bad = mid;
        }
      }
      int end = good;
      if (s == c.pp - 1 && end != layers)
        return false;
      built.push_back(std::move(plan));
      begin = end;
    }
    if (stages)
      *stages = std::move(built);
    return true;
  }
  // Interleaved: pp·v chunks balanced by time (chunk c runs on device c % pp);
  // recomputation then fits each device's memory.
  if (!interleavedChunks(c, limit, chunks))
    return false;
  std::vector<StagePlan> built(c.pp);
  for (int d = 0; d < c.pp; ++d) {
    std::vector<std::pair<int, int>> mine;
    for (int ch = d; ch < chunksTotal; ch += c.pp)
      mine.push_back(chunks[ch]);
    if (!fillStage(c, d, mine, ignoreBudget, built[d]))
      return false;
  }
  if (stages)
    *stages = std::move(built);
  return true;
}

bool Searcher::interleavedChunks(const Config &c, double limit,
                                 std::vector<std::pair<int, int>> &chunks) {
  int chunksTotal = c.pp * c.v;
  chunks.clear();
  int begin = 0;
  for (int ch = 0; ch < chunksTotal; ++ch) {
    int maxEnd = layers - (chunksTotal - 1 - ch);
    int end = begin;
    double time = 0;
    while (end < maxEnd) {
      double t = layerTime(c.tp, model.layerKind[end], c.mb).total();
      if (end > begin && time + t > limit)
        break;
      time += t;
      ++end;
    }
    if (time > limit || (ch == chunksTotal - 1 && end != layers))
      return false;
    chunks.push_back({begin, end});
    begin = end;
  }
  return true;
}

bool Searcher::evaluate(const Config &c, Candidate &out, bool ignoreBudget) {
  // Bisection on the slowest stage's (chunk's) time, from the average layer
  // load (a lower bound) to a limit that admits any partition: failing there
  // means the memory budget, not time, rules the config out.
  double sum = 0, slowestLayer = 0, everything = 0;
  for (int l = 0; l < layers; ++l) {
    const LayerTime &t = layerTime(c.tp, model.layerKind[l], c.mb);
    sum += t.total();
    everything += t.total() + t.forward + t.tpForward;
    slowestLayer = std::max(slowestLayer, t.total());
  }
  // Interleaved chunks are filled by time alone, so a looser limit only
  // loads the first chunks more and can break a memory budget a tighter one
  // meets: bisect on covering the model, and check memory once, at the
  // tightest limit. Stages without interleaving fill by time and memory
  // together, and a looser limit never hurts them.
  std::vector<std::pair<int, int>> chunks;
  auto feasible = [&](double limit) {
    return c.v > 1 ? interleavedChunks(c, limit, chunks)
                   : partition(c, limit, ignoreBudget, nullptr);
  };
  double hi = 2 * everything + 1.0;
  if (!feasible(hi)) {
    hi *= 1e3;
    if (!feasible(hi))
      return false;
  }
  double lo = std::max(slowestLayer, sum / double(c.pp * c.v)) * (1 - 1e-9);
  for (int i = 0; i < 64 && hi - lo > 1e-4 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    if (feasible(mid))
      hi = mid;
    else
      lo = mid;
  }
  out = Candidate();
  out.tp = c.tp;
  out.pp = c.pp;
  out.dp = c.dp;
  out.virtualStages = c.v;
  out.microbatchSize = c.mb;
  out.microbatches = c.m;
  out.schedule = c.schedule;
  out.sharding = c.sharding;
  if (!partition(c, hi, ignoreBudget, &out.stages))
    return false;

  std::vector<double> times;
  double maxParams = 0, maxTp = 0, sumTimes = 0;
  for (size_t s = 0; s < out.stages.size(); ++s) {
    const StagePlan &stage = out.stages[s];
    double t = options.training ? stage.seconds()
                                : stage.forwardSeconds + stage.tpCommSeconds + stage.p2pSeconds;
    times.push_back(t);
    sumTimes += t;
    maxParams = std::max(maxParams, stage.parameters);
    maxTp = std::max(maxTp, stage.tpCommSeconds);
    if (s == 0 || stage.memory.total() > out.memory.total()) {
      out.memory = stage.memory;
      out.worstStage = int(s);
    }
  }
  out.pipelineSeconds = pipelineSeconds(c.schedule, times, c.m, c.v);
  double busy = double(c.m) * sumTimes / double(c.pp);
  out.bubbleFraction = out.pipelineSeconds > 0 ? 1.0 - busy / out.pipelineSeconds : 0;
  out.tpCommSeconds = double(c.m) * maxTp;
  out.dpCommSeconds = dpCommSeconds(c, maxParams);
  // Spilling runs on one stage (pp = 1): the spilled layers' updates run on
  // the host, the rest on the device.
  double spilledParams = 0, hostOptimizer = 0;
  for (const StagePlan &stage : out.stages) {
    spilledParams = std::max(spilledParams, stage.spilledParameters);
    hostOptimizer = std::max(hostOptimizer, stage.hostOptimizerSeconds);
    out.spillSeconds = std::max(out.spillSeconds, double(c.m) * stage.spillSeconds);
    std::vector<int> any = stage.spilled;
    any.insert(any.end(), stage.activationsSpilled.begin(), stage.activationsSpilled.end());
    std::sort(any.begin(), any.end());
    any.erase(std::unique(any.begin(), any.end()), any.end());
    out.spilledLayers = std::max(out.spilledLayers, int(any.size()));
  }
  out.optimizerSeconds = optimizerSeconds(c, maxParams - spilledParams) + hostOptimizer;
  out.stepSeconds = out.pipelineSeconds + out.dpCommSeconds + out.optimizerSeconds;
  out.objective = out.stepSeconds;
  if (!options.training && options.objective == Objective::Throughput)
    out.objective = double(c.m) * *std::max_element(times.begin(), times.end());
  out.fits = out.memory.total() <= options.memoryBudget;
  return true;
}

bool Searcher::run(SearchResult &result, std::string &error) {
  auto start = std::chrono::steady_clock::now();
  if (layers == 0) {
    error = "the model has no layers to place";
    return false;
  }
  std::vector<Config> configs;
  double totalParams = 0;
  for (int l = 0; l < layers; ++l)
    totalParams += model.costs.begin()->second[model.layerKind[l]].parameters *
                   model.costs.begin()->first;
  // When nothing is left, the reason given is the one from the deepest
  // filter any combination reached: the most specific.
  std::string why = "no tp degree divides both the devices per node and the device count";
  const std::string spillWhy = options.spill == SpillMode::None ? "" : spillUnavailable();
  int whyDepth = 0;
  auto reject = [&](int depth, std::string reason) {
    if (depth > whyDepth) {
      why = std::move(reason);
      whyDepth = depth;
    }
  };
  for (int tp : tpCandidates(cluster, options)) {
    if (!model.costs.count(tp))
      continue;
    if (options.devices % tp != 0) {
      reject(1, "--tp " + std::to_string(tp) + " does not divide the " +
                    std::to_string(options.devices) + " devices");
      continue;
    }
    std::vector<int64_t> pps = divisors(options.devices / tp);
    if (options.pp && *options.pp > layers)
      reject(2, "--pp " + std::to_string(*options.pp) + " is more stages than the model's " +
                    std::to_string(layers) + " layers");
    else if (options.pp && std::find(pps.begin(), pps.end(), *options.pp) == pps.end())
      reject(2, "--pp " + std::to_string(*options.pp) + " does not divide the " +
                    std::to_string(options.devices / tp) + " devices left after tp=" +
                    std::to_string(tp));
    for (int64_t pp : pps) {
      if ((options.pp && pp != *options.pp) || pp > layers)
        continue;
      int dp = int(options.devices / tp / pp);
      if (options.dp && dp != *options.dp) {
        reject(3, "no tp and pp leave --dp " + std::to_string(*options.dp) + " of the " +
                      std::to_string(options.devices) + " devices");
        continue;
      }
      if (options.globalBatch % dp != 0) {
        reject(4, "the global batch " + std::to_string(options.globalBatch) +
                      " does not divide over dp=" + std::to_string(dp) +
                      " data-parallel replicas");
        continue;
      }
      int64_t perReplica = options.globalBatch / dp;
      if (options.microbatchSize && perReplica % *options.microbatchSize != 0)
        reject(5, "--microbatch " + std::to_string(*options.microbatchSize) +
                      " does not divide the " + std::to_string(perReplica) +
                      " samples per replica");
      if (options.batchStatistics && options.training && options.microbatchSize &&
          *options.microbatchSize != perReplica)
        reject(5, "--microbatch " + std::to_string(*options.microbatchSize) +
                      ": batch norm trains on the statistics of each replica's whole batch, so "
                      "its microbatch is the " + std::to_string(perReplica) +
                      " samples per replica (dp=" + std::to_string(dp) + ")");
      for (int64_t mb : divisors(perReplica)) {
        if (options.microbatchSize && mb != *options.microbatchSize)
          continue;
        if (options.batchStatistics && options.training && mb != perReplica)
          continue;
        int64_t m = perReplica / mb;
        std::vector<std::pair<Schedule, int>> schedules;
        if (!options.training) {
          schedules.push_back({Schedule::GPipe, 1});
        } else {
          // With one stage GPipe only holds more activations than 1F1B;
          // it is there for a pin.
          schedules.push_back({Schedule::OneFOneB, 1});
          schedules.push_back({Schedule::GPipe, 1});
          if (pp > 1)
            for (int v : {2, 3, 4, 6, 8})
              if (pp * v <= layers && m % pp == 0)
                schedules.push_back({Schedule::Interleaved, v});
        }
        for (auto [schedule, v] : schedules) {
          if (options.schedule && schedule != *options.schedule) {
            if (*options.schedule == Schedule::Interleaved)
              reject(6, "--schedule interleaved needs pp > 1, a microbatch count that is a "
                        "multiple of pp, and pp x v layers at least; no mesh and microbatch "
                        "size left one");
            continue;
          }
          if (options.virtualStages && v != *options.virtualStages) {
            reject(6, "--virtual-stages " + std::to_string(*options.virtualStages) +
                          " needs an interleaved schedule with pp x v layers at least and a "
                          "microbatch count that is a multiple of pp");
            continue;
          }
          // Spilling runs on one replica's whole step, one microbatch, no
          // ZeRO (SearchOptions::spill).
          const bool spillable = spillWhy.empty() && tp == 1 && pp == 1 && dp == 1 && m == 1;
          if (options.spill == SpillMode::All && !spillable)
            reject(7, spillWhy.empty()
                          ? "--spill all spills one device's whole step: it needs tp=1, pp=1, "
                            "dp=1 and one microbatch, which no candidate left"
                          : "--spill all: " + spillWhy);
          std::vector<ShardingLevel> levels = {ShardingLevel::None};
          if (options.training && dp > 1)
            levels = {ShardingLevel::None, ShardingLevel::OptimizerState,
                      ShardingLevel::Gradients, ShardingLevel::Parameters};
          for (ShardingLevel level : levels) {
            if (options.sharding && level != *options.sharding)
              continue;
            if (!options.untrainedCombinations && (tp > 1 || pp > 1) &&
                level >= ShardingLevel::Gradients) {
              reject(7, "--zero " + std::string(cost::shardingLevelName(level)) +
                            " with pipeline stages or tensor splits does not train yet: pin "
                            "--zero optimizer or --zero none, or --pp 1 --tp 1");
              continue;
            }
            if (!options.untrainedCombinations && level == ShardingLevel::Parameters &&
                options.recompute == RecomputeMode::Full) {
              reject(7, "--zero parameters with --recompute full does not train yet: pin "
                        "--zero gradients or --recompute none");
              continue;
            }
            Config c{tp, int(pp), dp, v, mb, m, schedule, level, 0};
            const bool spillHere = spillable && level == ShardingLevel::None;
            if (options.spill == SpillMode::All && !spillHere)
              continue;
            c.spill = spillHere && options.spill == SpillMode::All;
            // Lower bound: stages perfectly balanced, nothing recomputed.
            double sum = 0;
            for (int k = 0; k < int(kindCount.size()); ++k)
              if (kindCount[k])
                sum += kindCount[k] * (options.training ? layerTime(tp, k, mb).total()
                                                        : layerTime(tp, k, mb).forward +
                                                              layerTime(tp, k, mb).tpForward);
            double avg = sum / double(pp);
            double pipe = schedule == Schedule::Interleaved
                              ? (double(m) + double(pp - 1) / v) * avg
                              : (double(m) + double(pp) - 1) * avg;
            if (!options.training && options.objective == Objective::Throughput)
              pipe = double(m) * avg;
            double params = totalParams / double(tp * pp);
            c.lowerBound = pipe + dpCommSeconds(c, params) + optimizerSeconds(c, params);
            configs.push_back(c);
            // Auto: the same config with spilling, for when it does not fit
            // otherwise (spilling only adds time, so the bound holds).
            if (spillHere && options.spill == SpillMode::Auto) {
              c.spill = true;
              configs.push_back(c);
            }
          }
        }
      }
    }
  }
  result = SearchResult();
  result.candidatesConsidered = int64_t(configs.size());
  if (configs.empty()) {
    error = why;
    return false;
  }
  std::stable_sort(configs.begin(), configs.end(),
                   [](const Config &a, const Config &b) { return a.lowerBound < b.lowerBound; });
  int top = std::max(1, options.top);
  std::map<std::pair<int, int>, size_t> overBudgetIndex;
  std::map<std::pair<int, int>, size_t> meshIndex;
  size_t next = 0;
  for (; next < configs.size(); ++next) {
    const Config &c = configs[next];
    if (options.prune && int(result.best.size()) >= top &&
        c.lowerBound >= result.best.back().objective)
      break;
    ++result.candidatesEvaluated;
    Candidate cand;
    // Over budget however the layers are placed: record the least memory
    // this config needs, for the error and for --explain. (Should the
    // least-memory placement fit after all, it is a plan like any other.)
    if (!evaluate(c, cand, false) && !evaluate(c, cand, true))
      continue;
    // Auto's spilling twin of a config that fits without spilling.
    if (c.spill && options.spill == SpillMode::Auto && cand.fits && cand.spilledLayers == 0)
      continue;
    if (!cand.fits) {
      auto key = std::make_pair(c.tp, c.pp);
      auto it = overBudgetIndex.find(key);
      if (it == overBudgetIndex.end()) {
        overBudgetIndex[key] = result.overBudget.size();
        result.overBudget.push_back(cand);
      } else if (cand.memory.total() < result.overBudget[it->second].memory.total()) {
        result.overBudget[it->second] = cand;
      }
      if (!result.leastMemory || cand.memory.total() < result.leastMemory->memory.total())
        result.leastMemory = cand;
      continue;
    }
    auto better = [](const Candidate &a, const Candidate &b) {
      if (a.objective != b.objective)
        return a.objective < b.objective;
      return a.memory.total() < b.memory.total();
    };
    auto mesh = std::make_pair(c.tp, c.pp);
    if (auto it = meshIndex.find(mesh); it == meshIndex.end()) {
      meshIndex[mesh] = result.bestPerMesh.size();
      result.bestPerMesh.push_back(cand);
    } else if (better(cand, result.bestPerMesh[it->second])) {
      result.bestPerMesh[it->second] = cand;
    }
    auto pos = std::upper_bound(result.best.begin(), result.best.end(), cand, better);
    result.best.insert(pos, cand);
    if (int(result.best.size()) > top)
      result.best.pop_back();
  }
  for (; next < configs.size(); ++next) {
    auto mesh = std::make_pair(configs[next].tp, configs[next].pp);
    if (!meshIndex.count(mesh))
      result.prunedMeshBound.try_emplace(mesh, configs[next].lowerBound);
  }
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return true;
}

} // namespace

bool searchPlan(const ModelProfile &model, const cost::ClusterSpec &cluster,
                const SearchOptions &options, SearchResult &result, std::string &error) {
  return Searcher(model, cluster, options).run(result, error);
}

} // namespace cleave::planner
