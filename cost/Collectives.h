//===- Collectives.h - What a collective costs on a cluster ----*- C++ -*-===//
//
// Alpha-beta estimates of NCCL-style collectives on a group of ranks of a
// ClusterSpec: each step of an algorithm pays the link's latency (alpha) and
// each byte the link's per-direction bandwidth (beta = 1/B). Formulas are in
// docs/cluster-spec.md, "Communication cost".
//
// What `bytes` means, per collective (NCCL's convention):
//   all-reduce      the full buffer every rank holds (unsharded)
//   all-gather      the gathered output (size × one rank's shard)
//   reduce-scatter  the input (size × one rank's output shard)
//   all-to-all      one rank's whole send buffer (split evenly over the group)
//   send/recv       the message
//
// The same model prices a copy between host memory and a device over the
// spec's host link (model spilling): hostTransferSeconds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "cost/ClusterSpec.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace cleave::cost {

enum class Collective : uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };
/// "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv".
std::string_view collectiveName(Collective collective);
/// The collective of that name; nullopt for any other.
std::optional<Collective> parseCollective(std::string_view name);

/// Ring, Tree (double binary tree) and Hierarchical (inside nodes, then across
/// them) serve the reducing and gathering collectives; all-to-all and
/// send/recv are Direct exchanges. Nvls is an all-reduce inside one node
/// whose switch does the sums (NVLink SHARP), where the spec has it.
enum class Algorithm : uint8_t { Ring, Tree, Hierarchical, Direct, Nvls };
/// "ring", "tree", "hierarchical", "direct", "nvls".
std::string_view algorithmName(Algorithm algorithm);

/// The shape of a group of ranks that communicate together.
struct CommGroup {
  int size = 1;         // ranks in the group
  int nodesSpanned = 1; // distinct nodes those ranks are on
  int ranksPerNode = 1; // most ranks of the group on any one node
  /// Groups of the same kind that cross the network at the same time from the
  /// same nodes (the data-parallel groups of a mesh all-reduce gradients
  /// together): they split each node's NICs evenly.
  int concurrentGroups = 1;
};

/// The group of these global ranks, with ranks numbered node by node
/// (rank / devicesPerNode is the node).
CommGroup groupOfRanks(const std::vector<int> &ranks, int devicesPerNode, int concurrentGroups = 1);
/// The group {first, first + stride, …} of `size` ranks in a mesh whose groups
/// of this kind partition all ranks and communicate together: a tensor-parallel
/// group is stride 1, a data-parallel group stride tp·pp. concurrentGroups is
/// devicesPerNode / ranksPerNode, the groups of this kind sharing a node.
CommGroup stridedGroup(int size, int stride, int devicesPerNode, int firstRank = 0);

struct CommEstimate {
  double seconds = 0;
  Algorithm algorithm = Algorithm::Ring;
};

/// Time of `collective` on `group` with one algorithm; nullopt when the
/// algorithm does not implement that collective (tree all-gather, ring
/// send/recv) or does not apply (hierarchical inside one node). A group of
/// one rank, or zero bytes, costs 0.
std::optional<double> collectiveTime(const ClusterSpec &spec, Collective collective,
                                     Algorithm algorithm, const CommGroup &group, double bytes);

/// The time of `collective` on `ranks` ranks inside one node interpolated
/// from the spec's measured samples (log-log between the two sizes around
/// `bytes`); nullopt without samples of that collective and group size, or
/// outside their sizes.
std::optional<double> measuredCollectiveTime(const ClusterSpec &spec, Collective collective,
                                             int ranks, double bytes);

/// The fastest applicable algorithm and its time (ties go to the earlier of
/// ring, tree, hierarchical, nvls). A lone group inside one node takes the
/// measured time where the spec has samples of its size around `bytes`.
CommEstimate estimateCollective(const ClusterSpec &spec, Collective collective,
                                const CommGroup &group, double bytes);

/// Time to copy `bytes` one way between host memory and one device over the
/// spec's host link, as a device copying alone sees it (the two directions
/// do not share it): latency + bytes / (bandwidth × efficiency). Zero bytes
/// cost 0; a spec without a host link (!spec.hasHostLink()) has no way to the
/// host, and any bytes cost +infinity.
double hostTransferSeconds(const ClusterSpec &spec, double bytes);

} // namespace cleave::cost
