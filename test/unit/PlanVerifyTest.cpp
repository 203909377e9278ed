//===- PlanVerifyTest.cpp - the rank simulation of verifyPlan -------------===//
//
// Plans built in memory (no files): each test gives every (stage, tp index)
// program a list of instructions and checks what the simulation of all ranks
// through the schedule concludes.
//
//===----------------------------------------------------------------------===//

#include "runtime/PlanVerify.h"

#include <gtest/gtest.h>

#include <functional>

using namespace cleave::runtime;

namespace {

/// A plan of pp x tp x dp ranks, each program one forward phase over one
/// 2x4xf32 buffer per instruction, scheduled microbatch by microbatch.
class PlanBuilder {
public:
  PlanBuilder(int64_t pp, int64_t tp, int64_t dp, int64_t microbatches) {
    plan.pp = pp;
    plan.tp = tp;
    plan.dp = dp;
    plan.microbatches = microbatches;
    plan.schedule = "1f1b";
    plan.stageSlots.resize(pp);
    for (int64_t s = 0; s < pp; ++s) {
      for (int64_t m = 0; m < microbatches; ++m)
        plan.stageSlots[s].push_back({"forward", s, m});
      for (int64_t t = 0; t < tp; ++t) {
        ProgramSpec &p = plan.programs["stage" + std::to_string(s) + "_tp" + std::to_string(t)];
        p.name = "stage" + std::to_string(s) + "_tp" + std::to_string(t);
        p.stage = s;
        p.tp = t;
        p.phases.push_back({"forward", s, {}, {}, {}});
      }
    }
    for (int64_t r = 0; r < pp * tp * dp; ++r) {
      int64_t s = r / (dp * tp), d = (r / tp) % dp, t = r % tp;
      plan.devices.push_back(
          {r, "cpu", s, t, d, "stage" + std::to_string(s) + "_tp" + std::to_string(t)});
    }
    // Groups in the tp-fastest, then dp, then stage rank order.
    for (int64_t s = 0; s < pp; ++s) {
      for (int64_t d = 0; d < dp; ++d) {
        plan.groups.tp.emplace_back();
        for (int64_t t = 0; t < tp; ++t)
          plan.groups.tp.back().push_back(s * dp * tp + d * tp + t);
      }
      for (int64_t t = 0; t < tp; ++t) {
        plan.groups.dp.emplace_back();
        for (int64_t d = 0; d < dp; ++d)
          plan.groups.dp.back().push_back(s * dp * tp + d * tp + t);
      }
    }
  }

  /// Appends an instruction to program (stage, tp) and returns it.
  InstructionSpec &add(int64_t stage, int64_t tp, const std::string &kernel, Shape in = {2, 4},
                       Shape out = {2, 4}) {
    ProgramSpec &p = plan.programs["stage" + std::to_string(stage) + "_tp" + std::to_string(tp)];
    InstructionSpec inst;
    inst.kernel = kernel;
    if (kernel != "recv")
      inst.inputs.push_back(buffer(p, in));
    if (kernel != "send")
      inst.outputs.push_back(buffer(p, out));
    p.phases[0].instructions.push_back(inst);
    return p.phases[0].instructions.back();
  }
  InstructionSpec &send(int64_t stage, int64_t tp, int64_t to, int64_t tag) {
    InstructionSpec &i = add(stage, tp, "send");
    i.attrs.set("peer_stage", to);
    i.attrs.set("peer_chunk", to);
    i.attrs.set("tag", tag);
    return i;
  }
  InstructionSpec &recv(int64_t stage, int64_t tp, int64_t from, int64_t tag) {
    InstructionSpec &i = add(stage, tp, "recv");
    i.attrs.set("peer_stage", from);
    i.attrs.set("peer_chunk", from);
    i.attrs.set("tag", tag);
    return i;
  }
  InstructionSpec &collective(int64_t stage, int64_t tp, const std::string &kernel, Shape in,
                              Shape out, const std::string &group = "tp") {
    InstructionSpec &i = add(stage, tp, kernel, in, out);
    i.attrs.set("group", group);
    return i;
  }

  Plan plan;

private:
  int64_t buffer(ProgramSpec &p, Shape shape) {
    BufferSpec b;
    b.id = static_cast<int64_t>(p.buffers.size());
    b.name = "v" + std::to_string(b.id);
    b.desc = {DType::F32, shape};
    b.arenaOffset = 0;
    p.buffers.push_back(b);
    return b.id;
  }
};

std::string allErrors(const VerifyResult &r) {
  std::string text;
  for (const std::string &e : r.errors)
    text += e + "\n";
  return text;
}

TEST(PlanVerifyTest, SendsMeetTheirRecvs) {
  PlanBuilder b(2, 1, 2, 3);
  b.add(0, 0, "relu");
  b.send(0, 0, 1, 0);
  b.recv(1, 0, 0, 0);
  b.add(1, 0, "relu");
  VerifyResult r = verifyPlan(b.plan);
  EXPECT_TRUE(r.ok()) << allErrors(r);
  EXPECT_EQ(r.ranks, 4);
  EXPECT_EQ(r.transfers, 6); // 2 dp ranks x 3 microbatches
  EXPECT_EQ(r.collectives, 0);
}

// Sends are buffered: receiving in another order than sent is no deadlock.
TEST(PlanVerifyTest, BufferedSendsAllowAnyReceiveOrder) {
  PlanBuilder b(2, 1, 1, 2);
  b.send(0, 0, 1, 0);
  b.send(0, 0, 1, 1);
  b.recv(1, 0, 0, 1);
  b.recv(1, 0, 0, 0);
  VerifyResult r = verifyPlan(b.plan);
  EXPECT_TRUE(r.ok()) << allErrors(r);
  EXPECT_EQ(r.transfers, 4);
}

TEST(PlanVerifyTest, RecvOfATagNobodySendsDeadlocks) {
  PlanBuilder b(2, 1, 1, 1);
  b.send(0, 0, 1, 0);
  b.recv(1, 0, 0, 7).loc = "model.py:40 (in blocks.2)";
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 1u) << allErrors(r);
  EXPECT_EQ(r.errors[0], "rank 1 (stage1_tp0), forward chunk 1 microbatch 0, instruction 0 "
                         "(recv at model.py:40 (in blocks.2)): waits for tag 7 from stage 0, "
                         "which never sends it");
}

// Two stages each waiting for the other's send before sending their own.
TEST(PlanVerifyTest, CrossedRecvsDeadlockAndNameTheBlockedPeer) {
  PlanBuilder b(2, 1, 1, 1);
  b.recv(0, 0, 1, 1);
  b.send(0, 0, 1, 0);
  b.recv(1, 0, 0, 0);
  b.send(1, 0, 0, 1);
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 2u) << allErrors(r);
  EXPECT_NE(r.errors[0].find("rank 0 (stage0_tp0), forward chunk 0 microbatch 0, instruction 0 "
                             "(recv): waits for tag 1 from stage 1 (rank 1), which has not sent "
                             "it: rank 1 is at forward chunk 1 microbatch 0, instruction 0 (recv)"),
            std::string::npos)
      << allErrors(r);
}

TEST(PlanVerifyTest, UnreceivedSendIsReported) {
  PlanBuilder b(2, 1, 1, 1);
  b.send(0, 0, 1, 3);
  b.add(1, 0, "relu");
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 1u) << allErrors(r);
  EXPECT_EQ(r.errors[0], "rank 0 (stage0_tp0), forward chunk 0 microbatch 0, instruction 0 "
                         "(send): tag 3 to stage 1 is never received");
}

TEST(PlanVerifyTest, RecvShapeMustMatchTheSend) {
  PlanBuilder b(2, 1, 1, 1);
  b.send(0, 0, 1, 0);
  b.recv(1, 0, 0, 0);
  b.plan.programs["stage1_tp0"].buffers[0].desc.shape = {1, 4};
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 1u) << allErrors(r);
  EXPECT_NE(r.errors[0].find("receives tag 0 as 1x4xf32, but rank 0 (stage0_tp0), forward chunk "
                             "0 microbatch 0, instruction 0 (send) sends 2x4xf32"),
            std::string::npos)
      << allErrors(r);
}

TEST(PlanVerifyTest, TpGroupCompletesCollectives) {
  PlanBuilder b(1, 2, 2, 2);
  for (int64_t t = 0; t < 2; ++t) {
    b.collective(0, t, "all_reduce", {2, 4}, {2, 4});
    b.collective(0, t, "all_gather", {2, 4}, {2, 8}).attrs.set("dim", int64_t(1));
    b.collective(0, t, "reduce_scatter", {2, 8}, {2, 4}).attrs.set("dim", int64_t(1));
    InstructionSpec &a2a = b.collective(0, t, "all_to_all", {2, 4}, {4, 2});
    a2a.attrs.set("from_dim", int64_t(0));
    a2a.attrs.set("to_dim", int64_t(1));
    b.collective(0, t, "all_reduce", {2, 4}, {2, 4}, "dp");
  }
  VerifyResult r = verifyPlan(b.plan);
  EXPECT_TRUE(r.ok()) << allErrors(r);
  // 5 collectives x 2 microbatches x 2 groups (tp or dp) of each kind.
  EXPECT_EQ(r.collectives, 20);
}

TEST(PlanVerifyTest, TpGroupThatDisagreesIsNamed) {
  PlanBuilder b(1, 2, 1, 1);
  b.collective(0, 0, "all_reduce", {2, 4}, {2, 4});
  b.collective(0, 1, "all_gather", {2, 4}, {2, 8}).attrs.set("dim", int64_t(1));
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 1u) << allErrors(r);
  EXPECT_EQ(r.errors[0], "rank 1 (stage0_tp1), forward chunk 0 microbatch 0, instruction 0 "
                         "(all_gather): tp group [0, 1] disagrees: rank 0 enters all_reduce of "
                         "2x4xf32, rank 1 all_gather of 2x4xf32");
}

TEST(PlanVerifyTest, CollectiveOneRankSkipsWaitsForever) {
  PlanBuilder b(1, 2, 1, 1);
  b.collective(0, 0, "all_reduce", {2, 4}, {2, 4});
  b.add(0, 1, "relu");
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_EQ(r.errors.size(), 1u) << allErrors(r);
  EXPECT_NE(r.errors[0].find("waits in all_reduce for tp group [0, 1]: rank 1 finished its "
                             "schedule"),
            std::string::npos)
      << allErrors(r);
}

TEST(PlanVerifyTest, CollectiveShapesFollowTheGroupSize) {
  PlanBuilder b(1, 2, 1, 1);
  for (int64_t t = 0; t < 2; ++t)
    b.collective(0, t, "all_gather", {2, 4}, {2, 4}).attrs.set("dim", int64_t(1));
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0], "rank 0 (stage0_tp0), forward chunk 0, instruction 0 (all_gather): "
                         "output 2x4xf32 should be 2x8xf32: input 2x4xf32 gathered along dim 1 "
                         "over a tp group of 2");
}

// A hand-built plan with a dangling buffer id is an error, never a crash.
TEST(PlanVerifyTest, DanglingBufferIsAnError) {
  PlanBuilder b(1, 1, 1, 1);
  b.add(0, 0, "relu").inputs[0] = 42;
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.errors[0].find("missing buffer 42"), std::string::npos) << allErrors(r);
}

TEST(PlanVerifyTest, WeightShardNames) {
  WeightShard w;
  ASSERT_TRUE(parseWeightShard("blocks.0.attn.qkv.weight[split(0, blocks=3) 1/2]", &w));
  EXPECT_EQ(w.parameter, "blocks.0.attn.qkv.weight");
  EXPECT_TRUE(w.split);
  EXPECT_EQ(w.dim, 0);
  EXPECT_EQ(w.blocks, 3);
  EXPECT_EQ(w.part, 1);
  EXPECT_EQ(w.parts, 2);
  ASSERT_TRUE(parseWeightShard("head.weight[split(1) 0/4]", &w));
  EXPECT_EQ(w.dim, 1);
  EXPECT_EQ(w.blocks, 1);
  EXPECT_EQ(w.parts, 4);
  ASSERT_TRUE(parseWeightShard("tok_emb.weight", &w));
  EXPECT_FALSE(w.split);
  EXPECT_EQ(w.parameter, "tok_emb.weight");
  EXPECT_FALSE(parseWeightShard("x[split(1) 2/2]", &w)); // part past the count
  EXPECT_FALSE(parseWeightShard("x[shard 0]", &w));
  // Names come from files: numbers past 64 bits, signs, spaces, trailing
  // text and very long names are refused, not thrown on or recursed into.
  EXPECT_FALSE(parseWeightShard("x[split(0) 99999999999999999999/1]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) 0/99999999999999999999]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0, blocks=99999999999999999999) 0/2]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(-1) 0/2]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) 0/2] ", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) 0/2]]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) /2]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) 0/0]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0, blocks=0) 0/2]", &w));
  EXPECT_FALSE(parseWeightShard("x[split(0) " + std::string(1000000, '9') + "/1]", &w));
  ASSERT_TRUE(parseWeightShard("x[split(0,blocks=2) 1/2]", &w));
  EXPECT_EQ(w.blocks, 2);
  ASSERT_TRUE(parseWeightShard("x[split(0) 999999999999999998/999999999999999999]", &w));
  EXPECT_EQ(w.parts, 999999999999999999);
}

TEST(PlanVerifyTest, ParametersMustBeCoveredOncePerStage) {
  PlanBuilder b(1, 2, 1, 1);
  b.plan.parameters["fc.weight"] = {DType::F32, {8, 4}};
  for (int64_t t = 0; t < 2; ++t) {
    ProgramSpec &p = b.plan.programs["stage0_tp" + std::to_string(t)];
    BufferSpec w;
    w.id = static_cast<int64_t>(p.buffers.size());
    w.name = "fc.weight";
    w.desc = {DType::F32, {4, 4}};
    w.weight = "fc.weight[split(0) 0/2]"; // both hold part 0
    p.buffers.push_back(w);
  }
  VerifyResult r = verifyPlan(b.plan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors[0], "stage 0: parameter 'fc.weight' (8x4xf32): part 0/2 is held by "
                         "stage0_tp0 and stage0_tp1");
  b.plan.programs["stage0_tp1"].buffers.back().weight = "fc.weight[split(0) 1/2]";
  r = verifyPlan(b.plan);
  EXPECT_TRUE(r.ok()) << allErrors(r);
}

} // namespace
