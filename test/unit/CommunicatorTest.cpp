//===- CommunicatorTest.cpp - Communicators on 2 and 4 ranks -------------===//
//
// Runs under `mpirun -np N` (ctest runs N = 2 and 4). Every rank checks its
// own results against values computed from the rank numbers; after each test
// the ranks agree on the outcome, so a failure on any rank fails the test on
// every rank and mpirun exits non-zero. Bodies use EXPECT (not ASSERT) around
// communication so that no rank leaves a test early while others still wait
// in a collective.
//
// The suite is instantiated per implementation: "mpi" (host buffers),
// "nccl" (device buffers of a CUDA backend, one GPU per rank; skipped, with
// the reason, where the CUDA backend cannot start) and "staged" (MPI with
// device buffers staged through host memory: on the CUDA backend where it
// starts, ranks sharing GPUs, else on the CPU backend's buffers). Tests of what only MPI
// offers (tags that reorder messages, size mismatches it detects, its error
// texts) skip on NCCL, which matches transfers between two ranks in issue
// order and has no tags.
//
//===----------------------------------------------------------------------===//

#include "runtime/BFloat16.h"
#include "runtime/DeviceBackends.h"
#include "runtime/comm/HostStagedCommunicator.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cuda/CudaPlugin.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <vector>

using namespace cleave::runtime;

namespace {

Communicator *gWorld = nullptr; // MPI: the job, and how ranks agree on results
Communicator *gNccl = nullptr;  // the NCCL world, when a GPU per rank exists
Backend *gGpu = nullptr;        // its CUDA backend
std::string gNcclWhy;           // why there is none
Communicator *gStaged = nullptr; // MPI staged through gStagedDevice's memory
Backend *gStagedDevice = nullptr;

class CommTest : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    if (nccl() && !gNccl)
      GTEST_SKIP() << "nccl cannot start here: " << gNcclWhy;
  }

  bool nccl() const { return GetParam() == "nccl"; }
  bool staged() const { return GetParam() == "staged"; }
  /// Whether the communicator sees device buffers, and whose.
  bool onDevice() const { return nccl() || staged(); }
  Backend *device() const { return nccl() ? gGpu : gStagedDevice; }
  Communicator &world() { return nccl() ? *gNccl : staged() ? *gStaged : *gWorld; }
  int rank() { return gWorld->rank(); }
  int size() { return gWorld->size(); }

  /// The buffer the communicator sees for host data `v`: `v` itself for
  /// MPI; for NCCL a device copy made now (the same one for the same host
  /// data, so in-place calls stay in place), copied back by sync().
  template <typename T> T *dev(std::vector<T> &v) {
    return static_cast<T *>(mirror(v.data(), v.size() * sizeof(T)));
  }
  template <typename T> T *dev(T &x) { return static_cast<T *>(mirror(&x, sizeof(T))); }

  /// NCCL: waits for the device and copies every device buffer back.
  Status sync() {
    if (!onDevice())
      return {};
    CLEAVE_RETURN_IF_ERROR(device()->synchronize());
    for (auto &[host, d] : mirrors_)
      CLEAVE_RETURN_IF_ERROR(device()->copyToHost(host, d.first, d.second));
    return {};
  }

  // Every rank learns which ranks failed this test (over MPI, host memory).
  void TearDown() override {
    if (onDevice() && device()) {
      (void)device()->synchronize();
      for (auto &[host, d] : mirrors_)
        device()->deallocate(d.first);
    }
    int32_t failed = HasFailure() ? 1 : 0;
    std::vector<int32_t> all(size());
    Status s = gWorld->allGather(&failed, all.data(), 1, DType::I32);
    ASSERT_TRUE(s.ok()) << s.message();
    for (int r = 0; r < size(); ++r)
      if (all[r])
        ADD_FAILURE() << "rank " << r << " failed this test";
  }

private:
  void *mirror(void *host, size_t bytes) {
    if (!onDevice())
      return host;
    auto it = mirrors_.find(host);
    if (it == mirrors_.end()) {
      void *d = nullptr;
      Status s = device()->allocate(bytes, &d);
      EXPECT_TRUE(s.ok()) << s.message();
      it = mirrors_.emplace(host, std::make_pair(d, bytes)).first;
    }
    Status s = device()->copyToDevice(it->second.first, host, bytes);
    EXPECT_TRUE(s.ok()) << s.message();
    return it->second.first;
  }

  std::map<void *, std::pair<void *, size_t>> mirrors_;
};

/// Skips a test of behaviour only the MPI communicator has.
#define MPI_ONLY(why)                                                                              \
  do {                                                                                             \
    if (nccl())                                                                                    \
      GTEST_SKIP() << "MPI only: " << why;                                                         \
  } while (0)

/// Checks a call and, on NCCL, brings its results back to the host.
#define EXPECT_OK(expr)                                                                            \
  do {                                                                                             \
    Status s_ = (expr);                                                                            \
    if (s_.ok())                                                                                   \
      s_ = sync();                                                                                 \
    EXPECT_TRUE(s_.ok()) << s_.message() << " (" << s_.origin() << ")";                            \
  } while (0)

TEST_P(CommTest, RanksAreDistinctAndComplete) {
  EXPECT_GE(size(), 2) << "run under mpirun -np 2 or more";
  int32_t me = rank();
  std::vector<int32_t> ranks(size(), -1);
  EXPECT_OK(world().allGather(dev(me), dev(ranks), 1, DType::I32));
  for (int r = 0; r < size(); ++r)
    EXPECT_EQ(ranks[r], r);
  EXPECT_EQ(world().name(), "world");
}

TEST_P(CommTest, AllReduceSumF32) {
  const int n = size();
  std::vector<float> in(1000), out(1000, -1);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = rank() + 0.5f * i;
  EXPECT_OK(world().allReduce(dev(in), dev(out), in.size(), DType::F32, ReduceOp::Sum));
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(out[i], n * (n - 1) / 2 + n * 0.5f * i) << "element " << i;
}

TEST_P(CommTest, AllReduceSumIntegersInPlace) {
  const int n = size();
  // Above 2^32, so a 32-bit path would lose it.
  std::vector<int64_t> big = {(int64_t(1) << 40) + rank(), -rank()};
  EXPECT_OK(world().allReduce(dev(big), dev(big), big.size(), DType::I64, ReduceOp::Sum));
  EXPECT_EQ(big[0], n * (int64_t(1) << 40) + n * (n - 1) / 2);
  EXPECT_EQ(big[1], -n * (n - 1) / 2);

  std::vector<int32_t> small = {rank() + 1, 7};
  EXPECT_OK(world().allReduce(dev(small), dev(small), small.size(), DType::I32, ReduceOp::Sum));
  EXPECT_EQ(small[0], n * (n + 1) / 2);
  EXPECT_EQ(small[1], 7 * n);
}

// bf16 sums accumulate in f32 and round once. Element 0 tells the two apart
// on 4 ranks: 1 + 3 * 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 and rounds
// to the even 1 + 2^-6, while bf16 partial sums stay at 1 (1 + 2^-8 is a tie
// that rounds down to 1, every time).
TEST_P(CommTest, AllReduceSumBf16AccumulatesInF32) {
  MPI_ONLY("NCCL sums bf16 in its own order, rounding each step");
  const int n = size();
  std::vector<uint16_t> in(64), out(64, 0xffff);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = floatToBf16(i == 0 ? (rank() == 0 ? 1.0f : 1.0f / 256) : rank() * 0.75f - 2.0f * i);
  EXPECT_OK(world().allReduce(dev(in), dev(out), in.size(), DType::BF16, ReduceOp::Sum));
  for (size_t i = 0; i < in.size(); ++i) {
    float sum = 0; // exact in f32: a few bf16 values of similar scale
    for (int r = 0; r < n; ++r)
      sum += i == 0 ? (r == 0 ? 1.0f : 1.0f / 256) : bf16ToFloat(floatToBf16(r * 0.75f - 2.0f * i));
    EXPECT_EQ(out[i], floatToBf16(sum)) << "element " << i;
  }
  if (n == 4) {
    EXPECT_EQ(bf16ToFloat(out[0]), 1.0f + 1.0f / 64);
  }
  // In place, as the all_reduce kernel may call it.
  EXPECT_OK(world().allReduce(dev(in), dev(in), in.size(), DType::BF16, ReduceOp::Sum));
  EXPECT_EQ(in, out);
}

TEST_P(CommTest, ReduceScatterSumBf16) {
  MPI_ONLY("NCCL sums bf16 in its own order, rounding each step");
  const int n = size(), count = 5;
  std::vector<uint16_t> in(n * count), out(count, 0xffff);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < count; ++i)
      in[p * count + i] = floatToBf16(100.0f * rank() + 10.0f * p + i + 0.25f);
  EXPECT_OK(world().reduceScatter(dev(in), dev(out), count, DType::BF16, ReduceOp::Sum));
  for (int i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r)
      sum += bf16ToFloat(floatToBf16(100.0f * r + 10.0f * rank() + i + 0.25f));
    EXPECT_EQ(out[i], floatToBf16(sum)) << "element " << i;
  }
}

TEST_P(CommTest, SumOfF16IsAClearError) {
  MPI_ONLY("NCCL sums f16");
  std::vector<uint16_t> in(4), out(4);
  Status s = world().allReduce(dev(in), dev(out), 4, DType::F16, ReduceOp::Sum);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("all-reduce on group 'world'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("sum of f16 is not supported yet"), std::string::npos) << s.message();
  EXPECT_FALSE(world().reduceScatter(dev(in), dev(out), 1, DType::F16, ReduceOp::Sum).ok());
}

TEST_P(CommTest, AllGatherMovesEveryDType) {
  const int n = size();
  // bf16 only moves: its bit patterns must arrive unchanged.
  std::vector<uint16_t> in = {uint16_t(0x3f80 + rank()), uint16_t(0xc000)};
  std::vector<uint16_t> out(2 * n);
  EXPECT_OK(world().allGather(dev(in), dev(out), 2, DType::BF16));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(out[2 * r], 0x3f80 + r);
    EXPECT_EQ(out[2 * r + 1], 0xc000);
  }

  std::vector<uint8_t> flags(n, 0);
  flags[rank()] = rank() % 2; // in place: this rank's block is its input
  EXPECT_OK(world().allGather(dev(flags) + (rank()), dev(flags), 1, DType::I1));
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(flags[r], r % 2);
}

TEST_P(CommTest, ReduceScatterSumsEachBlock) {
  const int n = size(), count = 3;
  std::vector<float> in(n * count);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < count; ++i)
      in[p * count + i] = 100.0f * rank() + 10.0f * p + i;
  std::vector<float> out(count, -1);
  EXPECT_OK(world().reduceScatter(dev(in), dev(out), count, DType::F32, ReduceOp::Sum));
  for (int i = 0; i < count; ++i)
    EXPECT_EQ(out[i], 100.0f * n * (n - 1) / 2 + n * (10.0f * rank() + i));
}

TEST_P(CommTest, AllToAllTransposesBlocks) {
  const int n = size(), count = 2;
  std::vector<int32_t> in(n * count), out(n * count, -1);
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < count; ++i)
      in[p * count + i] = 1000 * rank() + 10 * p + i;
  EXPECT_OK(world().allToAll(dev(in), dev(out), count, DType::I32));
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < count; ++i)
      EXPECT_EQ(out[q * count + i], 1000 * q + 10 * rank() + i);
}

TEST_P(CommTest, BroadcastFromLastRank) {
  const int root = size() - 1;
  std::vector<int64_t> buffer(5, rank() == root ? 42 : 0);
  EXPECT_OK(world().broadcast(dev(buffer), buffer.size(), DType::I64, root));
  for (int64_t v : buffer)
    EXPECT_EQ(v, 42);
}

// Pipeline pairs (0,1), (2,3): the even stage sends activations forward, the
// odd one sends gradients back.
TEST_P(CommTest, SendRecvBetweenPipelineStages) {
  const bool even = rank() % 2 == 0;
  const int peer = even ? rank() + 1 : rank() - 1;
  if (peer >= size())
    return; // odd world size: the last rank has no pair
  std::vector<float> activation(4096), gradient(4096);
  if (even) {
    std::iota(activation.begin(), activation.end(), float(rank()));
    EXPECT_OK(world().send(dev(activation), activation.size(), DType::F32, peer, /*tag=*/1));
    EXPECT_OK(world().recv(dev(gradient), gradient.size(), DType::F32, peer,
                           /*tag=*/2));
    for (size_t i = 0; i < gradient.size(); ++i)
      EXPECT_EQ(gradient[i], -float(peer + i)) << "element " << i;
  } else {
    EXPECT_OK(world().recv(dev(activation), activation.size(), DType::F32, peer, /*tag=*/1));
    for (size_t i = 0; i < activation.size(); ++i) {
      EXPECT_EQ(activation[i], float(peer + i)) << "element " << i;
      gradient[i] = -float(rank() + i);
    }
    EXPECT_OK(world().send(dev(gradient), gradient.size(), DType::F32, peer,
                           /*tag=*/2));
  }
}

// A ring where every rank sends to the next and receives from the previous,
// two messages with different tags received in the opposite order: the
// non-blocking calls must not deadlock and must match by tag.
TEST_P(CommTest, IsendIrecvRingMatchesTags) {
  MPI_ONLY("NCCL has no tags: it matches transfers in issue order");
  const int n = size();
  const int next = (rank() + 1) % n, previous = (rank() + n - 1) % n;
  std::vector<int32_t> first(1000, rank()), second(10, 100 + rank());
  std::vector<int32_t> gotFirst(1000, -1), gotSecond(10, -1);
  std::vector<Request> requests(4);
  EXPECT_OK(world().irecv(dev(gotSecond), gotSecond.size(), DType::I32, previous, /*tag=*/8,
                          &requests[0]));
  EXPECT_OK(
      world().irecv(dev(gotFirst), gotFirst.size(), DType::I32, previous, /*tag=*/7, &requests[1]));
  EXPECT_OK(world().isend(dev(first), first.size(), DType::I32, next,
                          /*tag=*/7, &requests[2]));
  EXPECT_OK(world().isend(dev(second), second.size(), DType::I32, next,
                          /*tag=*/8, &requests[3]));
  EXPECT_TRUE(requests[0].pending());
  EXPECT_OK(waitAll(requests));
  EXPECT_FALSE(requests[0].pending());
  EXPECT_OK(requests[0].wait()); // a completed request waits as ok
  for (int32_t v : gotFirst)
    EXPECT_EQ(v, previous);
  for (int32_t v : gotSecond)
    EXPECT_EQ(v, 100 + previous);
}

TEST_P(CommTest, IsendIrecvToSelf) {
  MPI_ONLY("on NCCL a receive from itself waits on its stream for a send issued after it");
  int64_t sent = 1234 + rank(), got = 0;
  Request receive, send;
  EXPECT_OK(world().irecv(dev(got), 1, DType::I64, rank(), 0, &receive));
  EXPECT_OK(world().isend(dev(sent), 1, DType::I64, rank(), 0, &send));
  EXPECT_OK(send.wait());
  EXPECT_OK(receive.wait());
  EXPECT_EQ(got, sent);
}

// The world as tp groups of 2 (consecutive ranks) and dp groups across them:
// 4 ranks give tp {0,1} {2,3} and dp {0,2} {1,3}.
TEST_P(CommTest, SplitIntoTpAndDpGroups) {
  const int n = size();
  if (n % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  std::unique_ptr<Communicator> tp, dp;
  const int tpIndex = rank() / 2;
  EXPECT_OK(world().split(tpIndex, rank(), "tp" + std::to_string(tpIndex), &tp));
  EXPECT_OK(world().split(rank() % 2, rank(), "", &dp));
  ASSERT_TRUE(tp && dp);
  EXPECT_EQ(tp->size(), 2);
  EXPECT_EQ(tp->rank(), rank() % 2);
  EXPECT_EQ(tp->name(), "tp" + std::to_string(tpIndex));
  EXPECT_EQ(dp->size(), n / 2);
  EXPECT_EQ(dp->rank(), rank() / 2);
  EXPECT_EQ(dp->name(), "world/" + std::to_string(rank() % 2));

  // Sums stay inside each group.
  int64_t worldRank = rank(), tpSum = 0, dpSum = 0;
  EXPECT_OK(tp->allReduce(dev(worldRank), dev(tpSum), 1, DType::I64, ReduceOp::Sum));
  EXPECT_EQ(tpSum, 2 * tpIndex + 2 * tpIndex + 1);
  EXPECT_OK(dp->allReduce(dev(worldRank), dev(dpSum), 1, DType::I64, ReduceOp::Sum));
  int64_t expected = 0;
  for (int r = rank() % 2; r < n; r += 2)
    expected += r;
  EXPECT_EQ(dpSum, expected);

  // Peers are numbered within the group: the tp partner is peer 1 - rank.
  // (MPI: on NCCL both partners' receives would wait for sends behind them.)
  if (nccl())
    return;
  int32_t mine = rank(), partner = -1;
  Request receive, send;
  EXPECT_OK(tp->irecv(dev(partner), 1, DType::I32, 1 - tp->rank(), 3, &receive));
  EXPECT_OK(tp->isend(dev(mine), 1, DType::I32, 1 - tp->rank(), 3, &send));
  EXPECT_OK(receive.wait());
  EXPECT_OK(send.wait());
  EXPECT_EQ(partner, rank() ^ 1);
}

TEST_P(CommTest, SplitWithNegativeColorJoinsNoGroup) {
  std::unique_ptr<Communicator> group;
  const bool member = rank() != 0;
  EXPECT_OK(world().split(member ? 0 : -1, -rank(), "rest", &group));
  if (!member) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), size() - 1);
  EXPECT_EQ(group->rank(), size() - 1 - rank()); // keys reverse the order
}

TEST_P(CommTest, InvalidPeerIsAClearError) {
  MPI_ONLY("the error texts are MPI's");
  float x = 1;
  Status s = world().send(dev(x), 1, DType::F32, size(), 0);
  ASSERT_FALSE(s.ok());
  std::string expected = "send to peer " + std::to_string(size()) + " on group 'world' (rank " +
                         std::to_string(rank()) + " of " + std::to_string(size()) + "): peer " +
                         std::to_string(size()) + " is not in the group (ranks 0.." +
                         std::to_string(size() - 1) + ")";
  EXPECT_EQ(s.message(), expected);
  EXPECT_NE(s.origin().find("MpiCommunicator.cpp"), std::string::npos);

  Request request;
  EXPECT_FALSE(world().irecv(dev(x), 1, DType::F32, -1, 0, &request).ok());
  EXPECT_FALSE(request.pending());
  EXPECT_FALSE(world().send(dev(x), 1, DType::F32, 0, -5).ok()); // bad tag
  EXPECT_FALSE(world().broadcast(dev(x), 1, DType::F32, size()).ok());
  Status self = world().recv(dev(x), 1, DType::F32, rank(), 0);
  EXPECT_NE(self.message().find("would deadlock"), std::string::npos) << self.message();

  // The communicator still works afterwards.
  float sum = 0;
  EXPECT_OK(world().allReduce(dev(x), dev(sum), 1, DType::F32, ReduceOp::Sum));
  EXPECT_EQ(sum, float(size()));
}

// What MPI itself rejects (a message longer than the receive buffer) comes
// back as a Status with MPI's error string; a shorter one is caught by the
// element count check.
TEST_P(CommTest, MismatchedMessageSizesAreErrors) {
  MPI_ONLY("NCCL cannot detect a size mismatch");
  if (size() < 2)
    GTEST_SKIP() << "needs 2 ranks";
  if (rank() > 1)
    return;
  std::vector<int32_t> buffer(8, 5);
  if (rank() == 0) {
    EXPECT_OK(world().send(dev(buffer), 8, DType::I32, 1, 11));
    EXPECT_OK(world().send(dev(buffer), 2, DType::I32, 1, 12));
  } else {
    Status longer = world().recv(dev(buffer), 4, DType::I32, 0, 11);
    ASSERT_FALSE(longer.ok());
    EXPECT_NE(longer.message().find("recv from peer 0 on group 'world'"), std::string::npos)
        << longer.message();
    EXPECT_NE(longer.message().find("MPI_ERR_TRUNCATE"), std::string::npos) << longer.message();
    Request request;
    EXPECT_OK(world().irecv(dev(buffer), 4, DType::I32, 0, 12, &request));
    Status shorter = request.wait();
    EXPECT_NE(shorter.message().find("expected 4 elements, received 2"), std::string::npos)
        << shorter.message();
  }
}

/// Ranks other than 0 print only their failures, prefixed with the rank, so
/// the log reads like one run.
INSTANTIATE_TEST_SUITE_P(Communicators, CommTest,
                         ::testing::Values(std::string("mpi"), std::string("nccl"),
                                           std::string("staged")),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param;
                         });

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   result.summary());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<Communicator> world;
  Status s = createMpiWorld(&world);
  if (!s.ok()) {
    std::fprintf(stderr, "CommunicatorTest: %s\n", s.message().c_str());
    return 1;
  }
  gWorld = world.get();
  // NCCL over the same ranks, when each rank here gets a GPU.
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<Communicator> ncclWorld;
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  const char *locals = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  Status started = createBackend(BackendChoice::Cuda, local ? std::atoi(local) : 0,
                                 locals ? std::atoi(locals) : 1, BackendOptions(), &gpu);
  const CudaPluginApi *api = nullptr;
  if (started.ok())
    started = loadCudaPlugin(&api);
  if (started.ok())
    started = api->createNcclCommunicator(*world, *gpu, "world", &ncclWorld);
  // The ranks must agree: a collective suite cannot run on some ranks only.
  int32_t ok = started.ok() ? 1 : 0, all = 0;
  world->allReduce(&ok, &all, 1, DType::I32, ReduceOp::Sum);
  if (all == world->size()) {
    gGpu = gpu.get();
    gNccl = ncclWorld.get();
  } else {
    gNcclWhy = started.ok() ? "another rank cannot start it" : started.message();
  }
  // Staged MPI: on the CUDA backend where every rank starts it (ranks may
  // share a GPU), else on the CPU backend's buffers.
  BackendOptions shared;
  shared.gpuComm = GpuComm::HostMpi;
  std::unique_ptr<Backend> stagedDevice;
  Status stagedCuda = createBackend(BackendChoice::Cuda, local ? std::atoi(local) : 0,
                                    locals ? std::atoi(locals) : 1, shared, &stagedDevice);
  ok = stagedCuda.ok() ? 1 : 0;
  world->allReduce(&ok, &all, 1, DType::I32, ReduceOp::Sum);
  if (all != world->size())
    (void)createBackend(BackendChoice::Cpu, 0, 1, BackendOptions(), &stagedDevice);
  if (world->rank() == 0)
    std::fprintf(stderr, "CommunicatorTest: staged through the %s backend's memory\n",
                 stagedDevice->name());
  HostStagedCommunicator stagedWorld(*world, *stagedDevice, "world");
  gStagedDevice = stagedDevice.get();
  gStaged = &stagedWorld;
  if (world->rank() != 0) {
    ::testing::TestEventListeners &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world->rank()));
  }
  int result = RUN_ALL_TESTS();
  gStaged = nullptr;
  ncclWorld.reset();
  gpu.reset();
  world.reset();
  return result;
}
