// The global batch is the math (issue: micro-batch invariance): with train.leaf, every
// world_size x accum x micro_batch of one global batch trains the same bits on every step
// (loss, grad norm, held-out loss, parameter checksums), power of two or not, fp32 and
// bf16, dense and MoE, ZeRO 0 and 3, across a resume; a user's model of leaf-aware layers
// too, and a model of plain layers through one pass per leaf.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e_util.h"  // E2eTest, bit_difference

namespace {

using sweep_test::bit_difference;

struct Layout {
  int micro, accum, world;
  std::string name() const { return std::to_string(micro) + "x" + std::to_string(accum) + "x" + std::to_string(world); }
};

// The table: a global batch of 16 sequences.
const std::vector<Layout> k16 = {{16, 1, 1}, {8, 2, 1}, {4, 4, 1}, {2, 8, 1},
                                 {1, 16, 1}, {8, 1, 2}, {4, 2, 2}, {2, 2, 4}};
// A global batch of 12: ranks whose leaves are not one subtree of the canonical tree.
const std::vector<Layout> k12 = {{12, 1, 1}, {2, 3, 2}, {1, 6, 2}, {2, 2, 3}, {3, 4, 1}, {6, 1, 2}};

class LeafE2E : public sweep_test::E2eTest {
 protected:
  LeafE2E() : E2eTest("sweep_leaf") {}

  /// A run of `l` with `extra_train` keys (leaf among them); evaluation after steps 2 and 3.
  static std::string config(const Layout& l, const std::string& model, const std::string& extra_train,
                            const std::string& dist = "") {
    // `model` adds to the decoder's keys, or replaces them when it names another kind.
    const std::string keys = model.rfind(", kind:", 0) == 0
                                 ? "vocab: 64, seq_len: 16"
                                 : "layers: 2, d_model: 32, heads: 2, vocab: 64, seq_len: 16";
    return "model: {" + keys + model +
           "}\n"
           "data: {eval_fraction: 0.05}\n"
           "train: {steps: 3, micro_batch: " +
           std::to_string(l.micro) + ", accum: " + std::to_string(l.accum) +
           ", lr: 3.0e-3, warmup: 1, clip_norm: 0.5, eval_every: 2, eval_batches: 1" + extra_train +
           "}\n"
           "dist: {world_size: " +
           std::to_string(l.world) + dist + "}\n";
  }

  /// Trains every layout and expects the bits of the first; returns the first's record.
  sweep::Record all_equal(const std::string& tag, const std::vector<Layout>& layouts, const std::string& model,
                          const std::string& train_extra, bool zero3_on_ranks = false) {
    sweep::Record first;
    for (size_t i = 0; i < layouts.size(); ++i) {
      const Layout& l = layouts[i];
      const std::string zero = zero3_on_ranks && l.world > 1 && i % 2 == 1 ? ", zero_stage: 3" : "";
      const std::string name = tag + "_" + l.name() + (zero.empty() ? "" : "_z3");
      auto st = train(name, config(l, model, train_extra, zero), l.world, {"--quiet"});
      EXPECT_TRUE(st.ok()) << name << ": " << log(name);
      if (!st.ok()) continue;
      if (i == 0) {
        first = record(name);
        continue;
      }
      EXPECT_EQ(bit_difference(first, record(name)), "") << tag << ": " << layouts[0].name() << " vs " << name;
    }
    return first;
  }
};

const std::string kMoe = ", moe: {experts: 4, top_k: 2, shared_experts: 1}";

TEST_F(LeafE2E, EveryLayoutOfSixteenSequencesIsBitIdenticalFp32DenseAndBf16Moe) {
  const auto dense = all_equal("fp32", k16, "", ", leaf: 1", /*zero3_on_ranks=*/true);
  EXPECT_EQ(dense.evals.size(), 2u);
  EXPECT_EQ(dense.env("leaf.path").rfind("fused", 0), 0u) << dense.env("leaf.path");
  all_equal("moe_bf16", k16, kMoe, ", leaf: 1, precision: bf16", true);
}

TEST_F(LeafE2E, EveryLayoutOfSixteenSequencesIsBitIdenticalBf16DenseAndFp32Moe) {
  all_equal("bf16", k16, "", ", leaf: 1, precision: bf16", true);
  all_equal("moe", k16, kMoe, ", leaf: 1", true);
}

TEST_F(LeafE2E, LeavesOfTwoSequencesAndFp16) {
  std::vector<Layout> even;
  for (const Layout& l : k16)
    if (l.micro % 2 == 0) even.push_back(l);
  all_equal("leaf2", even, "", ", leaf: 2", true);
  all_equal("leaf2_moe_bf16", even, kMoe, ", leaf: 2, precision: bf16");
  all_equal("leaf1_fp16", {{16, 1, 1}, {1, 16, 1}, {4, 2, 2}}, "", ", leaf: 1, precision: fp16");
}

TEST_F(LeafE2E, AnyFactorizationOfTwelveSequencesIsBitIdentical) {
  const auto r = all_equal("g12", k12, "", ", leaf: 1", true);
  all_equal("g12_moe_bf16", k12, kMoe, ", leaf: 1, precision: bf16");
  // Without a leaf the micro-batch is the leaf, and accumulations that are not a power of
  // two are one class too: W=2 x A=3 = W=1 x A=6 = W=3 x A=2 (micro-batch 2).
  all_equal("g12_noleaf", {{2, 6, 1}, {2, 3, 2}, {2, 2, 3}}, "", "");
  // A rank's leaves that are not one subtree are sent as the subtrees that cover them.
  const auto two_by_three = record("g12_noleaf_2x3x2");
  EXPECT_EQ(two_by_three.env("reduction.subtrees").rfind("2 at most per rank", 0), 0u)
      << two_by_three.env("reduction.subtrees");
}

// Teeth: without a leaf, the micro-batch size changes the bits (a weight gradient is one
// GEMM over all the micro-batch's tokens), so the tests above can fail.
TEST_F(LeafE2E, WithoutALeafTheMicroBatchSizeChangesTheBits) {
  ASSERT_TRUE(train("a", config({16, 1, 1}, "", ""), 1, {"--quiet"}).ok()) << log("a");
  ASSERT_TRUE(train("b", config({8, 2, 1}, "", ""), 1, {"--quiet"}).ok()) << log("b");
  EXPECT_NE(bit_difference(record("a"), record("b")), "");
  // And a leaf is part of the math: leaf 1 and leaf 2 are different runs.
  ASSERT_TRUE(train("c", config({8, 2, 1}, "", ", leaf: 1"), 1, {"--quiet"}).ok()) << log("c");
  ASSERT_TRUE(train("d", config({8, 2, 1}, "", ", leaf: 2"), 1, {"--quiet"}).ok()) << log("d");
  EXPECT_NE(record("c").run_id, record("d").run_id);
  EXPECT_NE(bit_difference(record("c"), record("d")), "");
}

// A checkpoint of one layout resumes on another (the math id ignores the micro-batch when
// a leaf is set), and every step after it equals the run trained straight through.
TEST_F(LeafE2E, ACheckpointResumesOnALayoutWithAnotherMicroBatch) {
  const std::string ck = ", leaf: 1, checkpoint_every: 1, keep_checkpoints: 10";
  ASSERT_TRUE(train("ref", config({16, 1, 1}, kMoe, ", leaf: 1"), 1, {"--quiet"}).ok()) << log("ref");
  ASSERT_TRUE(train("w2", config({4, 2, 2}, kMoe, ck, ", zero_stage: 3"), 2, {"--quiet"}).ok()) << log("w2");
  const std::string from = (dir_ / "w2" / "checkpoints").string();
  ASSERT_TRUE(train("w1", config({1, 16, 1}, kMoe, ", leaf: 1"), 1, {"--resume-from", from + "/step_0000000001"}).ok())
      << log("w1");
  ASSERT_TRUE(
      train("w4", config({2, 2, 4}, kMoe, ", leaf: 1"), 4, {"--quiet", "--resume-from", from + "/step_0000000002"})
          .ok())
      << log("w4");
  EXPECT_NE(log("w1").find("resumed from the checkpoint after step 1"), std::string::npos) << log("w1");
  // `sweep reproduce --micro-batch` re-runs a record on another micro-batch, bit for bit.
  auto rep = sweep_cli({"reproduce", (dir_ / "w2").string(), "--micro-batch", "8", "--world-size", "2"}, "rep.log");
  EXPECT_EQ(rep.code, 0) << read("rep.log");
  EXPECT_NE(read("rep.log").find("reproduced bit-for-bit"), std::string::npos) << read("rep.log");
  rep = sweep_cli({"reproduce", (dir_ / "w2").string(), "--micro-batch", "3"}, "rep3.log");
  EXPECT_EQ(rep.code, 2) << read("rep3.log");
  EXPECT_NE(read("rep3.log").find("which is not a multiple of 3"), std::string::npos) << read("rep3.log");
  EXPECT_EQ(bit_difference(record("ref"), record("w1")), "") << "4x2x2 ZeRO 3 -> 1x16x1 at step 1";
  EXPECT_EQ(bit_difference(record("ref"), record("w4")), "") << "4x2x2 ZeRO 3 -> 2x2x4 at step 2";
}

// A user's model: built from sweep/leaf.h it takes the fused path; of plain layers it
// takes one pass per leaf; either way the micro-batch is layout. One that says it is
// leaf-aware but is not fails, naming a parameter.
TEST_F(LeafE2E, AUsersModelIsMicroBatchInvariantFusedOrSplit) {
  trainer_ = sweep_test::bin("test-models-train");
  for (const std::string kind : {"leafy", "masked"}) {
    const std::string model = ", kind: " + kind + ", width: 16";
    const auto first = all_equal(kind, {{8, 1, 1}, {2, 4, 1}, {1, 4, 2}}, model, ", leaf: 1");
    EXPECT_EQ(first.env("leaf.path").rfind(kind == "leafy" ? "fused" : "split", 0), 0u) << first.env("leaf.path");
  }
  auto st = train("liar", config({4, 1, 1}, ", kind: leaf-liar, width: 16", ", leaf: 1"), 0, {"--quiet"});
  EXPECT_EQ(st.code, 1) << log("liar");
  EXPECT_NE(log("liar").find("got its gradient from a plain LibTorch op, but the model says it is leaf-aware"),
            std::string::npos)
      << log("liar");
}

}  // namespace
