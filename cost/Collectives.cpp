#include "cost/Collectives.h"

#include <algorithm>
#include <cmath>
#include <cassert>
#include <limits>
#include <map>

namespace cleave::cost {

std::string_view collectiveName(Collective collective) {
  switch (collective) {
  case Collective::AllReduce:
    return "all-reduce";
  case Collective::AllGather:
    return "all-gather";
  case Collective::ReduceScatter:
    return "reduce-scatter";
  case Collective::AllToAll:
    return "all-to-all";
  case Collective::SendRecv:
    return "send-recv";
  }
  return "?";
}

std::optional<Collective> parseCollective(std::string_view name) {
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::AllToAll, Collective::SendRecv})
    if (collectiveName(c) == name)
      return c;
  return std::nullopt;
}

std::string_view algorithmName(Algorithm algorithm) {
  switch (algorithm) {
  case Algorithm::Ring:
    return "ring";
  case Algorithm::Tree:
    return "tree";
  case Algorithm::Hierarchical:
    return "hierarchical";
  case Algorithm::Direct:
    return "direct";
  case Algorithm::Nvls:
    return "nvls";
  }
  return "?";
}

CommGroup groupOfRanks(const std::vector<int> &ranks, int devicesPerNode, int concurrentGroups) {
  assert(devicesPerNode >= 1 && concurrentGroups >= 1);
  std::map<int, int> perNode;
  for (int rank : ranks)
    ++perNode[rank / devicesPerNode];
  CommGroup group;
  group.size = std::max<int>(1, ranks.size());
  group.nodesSpanned = std::max<int>(1, perNode.size());
  for (const auto &[node, count] : perNode)
    group.ranksPerNode = std::max(group.ranksPerNode, count);
  group.concurrentGroups = concurrentGroups;
  return group;
}

CommGroup stridedGroup(int size, int stride, int devicesPerNode, int firstRank) {
  CommGroup group;
  if (stride >= 1 && size >= 1 && devicesPerNode >= 1) {
    // Ascending ranks: each node's ranks are one run (the planner asks for
    // thousands of groups, without building a rank list each time).
    group.size = size;
    group.nodesSpanned = 0;
    int run = 0, node = -1;
    for (int i = 0; i < size; ++i) {
      int n = (firstRank + i * stride) / devicesPerNode;
      if (n != node) {
        ++group.nodesSpanned;
        node = n;
        run = 0;
      }
      group.ranksPerNode = std::max(group.ranksPerNode, ++run);
    }
  } else {
    std::vector<int> ranks;
    for (int i = 0; i < size; ++i)
      ranks.push_back(firstRank + i * stride);
    group = groupOfRanks(ranks, devicesPerNode);
  }
  group.concurrentGroups = std::max(1, devicesPerNode / group.ranksPerNode);
  return group;
}

namespace {

/// Latency and bandwidth of one hop.
struct Hop {
  double alpha;
  double bandwidth;
};

int ceilLog2(int n) {
  int steps = 0;
  for (int reach = 1; reach < n; reach *= 2)
    ++steps;
  return steps;
}

/// What the group sees of the cluster's links.
struct Links {
  Hop intra;     // device to device inside a node
  double nodeBw; // this group's share of one node's NICs
  double interAlpha;
  Hop perRank; // a hop that may cross nodes, as every rank sending at once sees it

  Links(const ClusterSpec &spec, const CommGroup &g) {
    intra = {spec.intraNode.latency, spec.intraNode.effectiveBandwidth()};
    nodeBw = spec.interNode.effectiveBandwidth() * spec.nicsPerNode /
             std::max(1, g.concurrentGroups);
    interAlpha = spec.interNode.latency;
    if (g.nodesSpanned <= 1)
      perRank = intra;
    else
      perRank = {std::max(intra.alpha, interAlpha),
                 std::min(intra.bandwidth, nodeBw / std::max(1, g.ranksPerNode))};
  }
};

double ringAllReduce(int n, Hop hop, double bytes) {
  return 2.0 * (n - 1) * hop.alpha + 2.0 * (n - 1) / n * bytes / hop.bandwidth;
}

/// All-gather and reduce-scatter move the same bytes in the same steps.
double ringGather(int n, Hop hop, double bytes) {
  return (n - 1) * hop.alpha + double(n - 1) / n * bytes / hop.bandwidth;
}

double treeAllReduce(int n, Hop hop, double bytes) {
  // Reduce up, broadcast down, pipelined: each rank sends every byte once per
  // phase, over the two trees together.
  return 2.0 * ceilLog2(n) * hop.alpha + 2.0 * bytes / hop.bandwidth;
}

/// Inside-node phases on `r` ranks plus an across-node phase on `nodes`
/// ranks in which each of the r local ranks handles 1/r of the data with 1/r
/// of the node's NICs; `passes` is 2 for all-reduce, 1 for all-gather and
/// reduce-scatter.
double hierarchical(const Links &links, const CommGroup &g, double bytes, int passes) {
  int r = g.ranksPerNode, nodes = g.nodesSpanned;
  double inside = (r - 1) * links.intra.alpha + double(r - 1) / r * bytes / links.intra.bandwidth;
  double across = (nodes - 1) * links.interAlpha + double(nodes - 1) / nodes * bytes / links.nodeBw;
  return passes * (inside + across);
}

double allToAll(const Links &links, const CommGroup &g, double bytes) {
  int n = g.size;
  if (g.nodesSpanned <= 1)
    return ringGather(n, links.intra, bytes);
  // Pairwise exchange: 1/n of the buffer to each peer; the on-node and the
  // off-node traffic flow at the same time over different links.
  int local = g.ranksPerNode - 1, remote = n - g.ranksPerNode;
  double latency = local * links.intra.alpha + remote * links.interAlpha;
  double onNode = local * bytes / n / links.intra.bandwidth;
  double offNode = remote * bytes / n / (links.nodeBw / g.ranksPerNode);
  return latency + std::max(onNode, offNode);
}

} // namespace

std::optional<double> collectiveTime(const ClusterSpec &spec, Collective collective,
                                     Algorithm algorithm, const CommGroup &group, double bytes) {
  bool pointToPoint = collective == Collective::AllToAll || collective == Collective::SendRecv;
  if (pointToPoint != (algorithm == Algorithm::Direct))
    return std::nullopt;
  if (algorithm == Algorithm::Tree && collective != Collective::AllReduce)
    return std::nullopt;
  if (algorithm == Algorithm::Hierarchical && group.nodesSpanned <= 1)
    return std::nullopt;
  if (algorithm == Algorithm::Nvls &&
      (collective != Collective::AllReduce || group.nodesSpanned > 1 || spec.nvlsBusBandwidth <= 0))
    return std::nullopt;
  if (group.size <= 1 || bytes <= 0)
    return 0.0;

  Links links(spec, group);
  int n = group.size;
  switch (collective) {
  case Collective::AllReduce:
    if (algorithm == Algorithm::Ring)
      return ringAllReduce(n, links.perRank, bytes);
    if (algorithm == Algorithm::Tree)
      return treeAllReduce(n, links.perRank, bytes);
    if (algorithm == Algorithm::Nvls)
      // The bus bandwidth is NCCL's figure: algorithm bandwidth × 2(n−1)/n.
      return 2 * links.intra.alpha + 2.0 * (n - 1) / n * bytes / spec.nvlsBusBandwidth;
    return hierarchical(links, group, bytes, 2);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    if (algorithm == Algorithm::Ring)
      return ringGather(n, links.perRank, bytes);
    return hierarchical(links, group, bytes, 1);
  case Collective::AllToAll:
    return allToAll(links, group, bytes);
  case Collective::SendRecv:
    return links.perRank.alpha + bytes / links.perRank.bandwidth;
  }
  return std::nullopt;
}

std::optional<double> measuredCollectiveTime(const ClusterSpec &spec, Collective collective,
                                             int ranks, double bytes) {
  std::vector<std::pair<double, double>> points; // (bytes, seconds)
  for (const MeasuredCollective &m : spec.measuredCollectives)
    if (m.ranks == ranks && m.collective == collectiveName(collective))
      points.push_back({m.bytes, m.seconds});
  if (points.empty())
    return std::nullopt;
  std::sort(points.begin(), points.end());
  if (bytes < points.front().first || bytes > points.back().first)
    return std::nullopt;
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    auto [b0, t0] = points[i];
    auto [b1, t1] = points[i + 1];
    if (bytes > b1)
      continue;
    if (b1 <= b0)
      return t0;
    // Straight between neighbours on log-log axes: latency-bound sizes
    // stay flat, bandwidth-bound ones grow linearly, and the bend between
    // (caches, protocol switches) is followed as measured.
    double exponent = std::log(t1 / t0) / std::log(b1 / b0);
    return t0 * std::pow(bytes / b0, exponent);
  }
  return points.back().second;
}

CommEstimate estimateCollective(const ClusterSpec &spec, Collective collective,
                                const CommGroup &group, double bytes) {
  if (group.size > 1 && bytes > 0 && group.nodesSpanned == 1 && group.concurrentGroups <= 1)
    if (auto t = measuredCollectiveTime(spec, collective, group.size, bytes)) {
      bool pointToPoint = collective == Collective::AllToAll || collective == Collective::SendRecv;
      return {*t, pointToPoint ? Algorithm::Direct : Algorithm::Ring};
    }
  std::optional<CommEstimate> best;
  for (Algorithm algorithm :
       {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Nvls,
        Algorithm::Direct}) {
    std::optional<double> t = collectiveTime(spec, collective, algorithm, group, bytes);
    if (t && (!best || *t < best->seconds))
      best = CommEstimate{*t, algorithm};
  }
  return *best; // every collective has at least one algorithm
}

double hostTransferSeconds(const ClusterSpec &spec, double bytes) {
  if (bytes <= 0)
    return 0;
  if (!spec.hasHostLink())
    return std::numeric_limits<double>::infinity();
  return spec.hostLink.latency + bytes / spec.hostLink.effectiveBandwidth();
}

} // namespace cleave::cost
