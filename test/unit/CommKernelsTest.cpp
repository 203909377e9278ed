//===- CommKernelsTest.cpp - The layout-change kernels on real ranks ------===//
//
// Runs under `mpirun -np N` (ctest runs N = 2 and 3). Every rank builds the
// same whole tensor, takes its own part of the layout the kernel reads, runs
// the CommBackend kernel, and compares with its part of the layout the
// kernel writes, computed locally. Blocked layouts (a fused QKV split in
// three blocks) and inner dims are what the rank-major buffers of MPI do not
// give directly, so they are the cases here.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommKernels.h"
#include "runtime/comm/MpiCommunicator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

using namespace cleave::runtime;

namespace {

Communicator *gWorld = nullptr;

#define EXPECT_OK(expr)                                                                            \
  do {                                                                                             \
    Status s_ = (expr);                                                                            \
    EXPECT_TRUE(s_.ok()) << s_.message() << " (" << s_.origin() << ")";                            \
  } while (0)

/// A plan of one stage whose tp group is the world.
Plan tpPlan(int n) {
  Plan plan;
  plan.tp = n;
  for (int r = 0; r < n; ++r)
    plan.devices.push_back({r, "cpu", 0, r, 0, "stage0_tp" + std::to_string(r)});
  return plan;
}

std::vector<float> iota(int64_t n, float scale = 1) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(i + 1);
  return v;
}

std::vector<float> part(const std::vector<float> &whole, const Shape &shape, int64_t dim,
                        int64_t blocks, int64_t parts, int64_t index) {
  std::vector<float> out(whole.size() / parts);
  extractPart(whole.data(), shape, dim, blocks, parts, index, sizeof(float), out.data());
  return out;
}

Shape divided(Shape shape, int64_t dim, int64_t n) {
  shape[dim] /= n;
  return shape;
}

/// Runs one comm kernel of `attrs` from `in` (shape inShape) to an output of
/// outShape.
std::vector<float> runKernel(const std::string &kernel, Attributes attrs, const Shape &inShape,
                             const std::vector<float> &in, const Shape &outShape) {
  int n = gWorld->size();
  Plan plan = tpPlan(n);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  CommBackend backend(*cpu, plan, gWorld->rank(), {gWorld, gWorld, gWorld});
  KernelSignature sig;
  sig.kernel = kernel;
  sig.inputs.push_back(TensorDesc{DType::F32, inShape});
  sig.outputs.push_back(TensorDesc{DType::F32, outShape});
  sig.attrs = std::move(attrs);
  KernelFn fn;
  Status prepared = backend.prepareKernel(sig, &fn);
  EXPECT_OK(prepared);
  std::vector<float> out(numElements(outShape), -1);
  if (!prepared.ok())
    return out;
  KernelCall call;
  call.inputs.push_back(in.data());
  call.outputs.push_back(out.data());
  EXPECT_OK(fn(call));
  return out;
}

Attributes attrsOf(std::initializer_list<std::pair<std::string, AttrValue>> values) {
  Attributes a;
  a.set("group", std::string("tp"));
  for (const auto &[k, v] : values)
    a.set(k, v);
  return a;
}

TEST(PartLayout, ExtractAndInsertAreInverse) {
  const Shape shape = {2, 12, 3}; // dim 1: 3 blocks of 2 parts of 2 rows
  std::vector<float> whole = iota(numElements(shape)), rebuilt(whole.size(), 0);
  for (int64_t p = 0; p < 2; ++p) {
    std::vector<float> piece = part(whole, shape, 1, 3, 2, p);
    insertPart(piece.data(), shape, 1, 3, 2, p, sizeof(float), rebuilt.data());
  }
  EXPECT_EQ(rebuilt, whole);
  // Part 1 of block 0 is rows 2..3 of the 12: elements [6, 12) of outer 0.
  std::vector<float> p1 = part(whole, shape, 1, 3, 2, 1);
  EXPECT_EQ(p1[0], whole[6]);
}

TEST(CommKernels, AllGatherOfABlockedInnerDim) {
  const int n = gWorld->size();
  const Shape whole = {2, 3 * n * 2, 2};
  std::vector<float> full = iota(numElements(whole));
  std::vector<float> mine = part(full, whole, 1, 3, n, gWorld->rank());
  EXPECT_EQ(runKernel("all_gather", attrsOf({{"dim", int64_t{1}}, {"blocks", int64_t{3}}}),
                      divided(whole, 1, n), mine, whole),
            full);
}

TEST(CommKernels, ReduceScatterOfABlockedInnerDim) {
  const int n = gWorld->size(), r = gWorld->rank();
  const Shape whole = {2, 3 * n * 2, 2};
  // Rank r holds (r + 1) x the tensor: the sum is n(n+1)/2 x it.
  std::vector<float> partial = iota(numElements(whole), static_cast<float>(r + 1));
  std::vector<float> sum = iota(numElements(whole), n * (n + 1) / 2.0f);
  EXPECT_EQ(runKernel("reduce_scatter", attrsOf({{"dim", int64_t{1}}, {"blocks", int64_t{3}}}),
                      whole, partial, divided(whole, 1, n)),
            part(sum, whole, 1, 3, n, r));
}

TEST(CommKernels, ShardKeepsThisRanksPartOfABlockedDim) {
  const int n = gWorld->size(), r = gWorld->rank();
  const Shape whole = {2, 3 * n * 2, 2};
  std::vector<float> full = iota(numElements(whole));
  EXPECT_EQ(runKernel("shard", attrsOf({{"dim", int64_t{1}}, {"blocks", int64_t{3}}}), whole,
                      full, divided(whole, 1, n)),
            part(full, whole, 1, 3, n, r));
}

TEST(CommKernels, ShardRefusesADimTheGroupDoesNotDivide) {
  const int n = gWorld->size();
  if (n == 1)
    GTEST_SKIP() << "every dim divides one rank";
  Plan plan = tpPlan(n);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  CommBackend backend(*cpu, plan, gWorld->rank(), {gWorld, gWorld, gWorld});
  KernelSignature sig;
  sig.kernel = "shard";
  sig.inputs.push_back(TensorDesc{DType::F32, {2, n * 3 + 1}});
  sig.outputs.push_back(TensorDesc{DType::F32, {2, 3}});
  sig.attrs = attrsOf({{"dim", int64_t{1}}});
  KernelFn fn;
  Status s = backend.prepareKernel(sig, &fn);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not split into"), std::string::npos) << s.message();
}

TEST(ZeroParts, EachRankGetsItsRunAndZerosPastTheEnd) {
  // 10 floats over 4 ranks: parts of 3, the last holds one value and padding.
  std::vector<float> whole = iota(10);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<float> mine(3, -1);
    copyZeroPart(whole.data(), whole.size() * sizeof(float), r, mine.data(),
                 mine.size() * sizeof(float));
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(mine[i], r * 3 + i < 10 ? whole[r * 3 + i] : 0.0f) << "rank " << r << " [" << i
                                                                    << "]";
  }
}

TEST(CommKernels, AllReduceSums) {
  const int n = gWorld->size(), r = gWorld->rank();
  std::vector<float> mine = iota(10, static_cast<float>(r + 1));
  EXPECT_EQ(runKernel("all_reduce", attrsOf({}), {10}, mine, {10}), iota(10, n * (n + 1) / 2.0f));
}

TEST(CommKernels, AllToAllTradesOneBlockedSplitForAnother) {
  const int n = gWorld->size(), r = gWorld->rank();
  // From split(0, blocks=2) to split(2, blocks=3).
  const Shape whole = {2 * n, 3, 3 * n * 2};
  std::vector<float> full = iota(numElements(whole));
  std::vector<float> in = part(full, whole, 0, 2, n, r);
  std::vector<float> want = part(full, whole, 2, 3, n, r);
  EXPECT_EQ(runKernel("all_to_all",
                      attrsOf({{"from_dim", int64_t{0}},
                               {"from_blocks", int64_t{2}},
                               {"to_dim", int64_t{2}},
                               {"to_blocks", int64_t{3}}}),
                      divided(whole, 0, n), in, divided(whole, 2, n)),
            want);
}

TEST(CommKernels, SendIsBufferedAndRecvGetsItInOrder) {
  const int n = gWorld->size(), r = gWorld->rank();
  if (n < 2)
    GTEST_SKIP() << "needs 2 ranks";
  if (r > 1)
    return;
  // Two stages of one rank each: stage 0 sends three microbatches before
  // stage 1 receives any (the sends must not wait for the receiver).
  Plan plan;
  plan.pp = 2;
  plan.devices = {{0, "cpu", 0, 0, 0, "stage0_tp0"}, {1, "cpu", 1, 0, 0, "stage1_tp0"}};
  std::unique_ptr<Backend> cpu = createCpuBackend();
  CommBackend backend(*cpu, plan, r, {gWorld, nullptr, nullptr});
  KernelSignature sig;
  sig.kernel = r == 0 ? "send" : "recv";
  if (r == 0)
    sig.inputs.push_back(TensorDesc{DType::F32, {4}});
  else
    sig.outputs.push_back(TensorDesc{DType::F32, {4}});
  sig.attrs.set("peer_stage", int64_t{1 - r});
  sig.attrs.set("peer_chunk", int64_t{1 - r});
  sig.attrs.set("tag", int64_t{7});
  KernelFn fn;
  ASSERT_TRUE(backend.prepareKernel(sig, &fn).ok());
  for (int m = 0; m < 3; ++m) {
    std::vector<float> data = iota(4, static_cast<float>(m + 1)), got(4, 0);
    KernelCall call;
    if (r == 0)
      call.inputs.push_back(data.data());
    else
      call.outputs.push_back(got.data());
    EXPECT_OK(fn(call));
    data.assign(4, -1); // the sender may reuse its buffer at once
    if (r == 1)
      EXPECT_EQ(got, iota(4, static_cast<float>(m + 1))) << "microbatch " << m;
  }
  EXPECT_OK(backend.finishSends());
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<Communicator> world;
  Status s = createMpiWorld(&world);
  if (!s.ok()) {
    std::fprintf(stderr, "CommKernelsTest: %s\n", s.message().c_str());
    return 1;
  }
  gWorld = world.get();
  int result = RUN_ALL_TESTS();
  // Every rank's verdict decides: a failure on any rank fails the job.
  int32_t failed = result != 0, anyFailed = 0;
  if (!world->allReduce(&failed, &anyFailed, 1, DType::I32, ReduceOp::Sum).ok())
    return 1;
  world.reset();
  return anyFailed ? 1 : 0;
}
