// The synthetic Markov source and the per-epoch permutation: determinism, structure, and
// the entropy floor the loss curves are compared against.
#include "synthetic_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace sweep {
namespace {

std::vector<int64_t> seq(const MarkovSource& src, uint64_t sample, int64_t len) {
  std::vector<int64_t> out(len, -1);
  src.sequence(sample, len, out.data());
  return out;
}

/// next-token counts per token, from `n` sequences of `len` tokens.
std::map<int64_t, std::map<int64_t, int64_t>> transitions(const MarkovSource& src, uint64_t n, int64_t len) {
  std::map<int64_t, std::map<int64_t, int64_t>> t;
  for (uint64_t s = 0; s < n; ++s) {
    auto x = seq(src, s, len);
    for (int64_t i = 1; i < len; ++i) ++t[x[i - 1]][x[i]];
  }
  return t;
}

TEST(MarkovSource, DeterministicForEqualSeed) {
  MarkovSource a(7, 64, 4), b(7, 64, 4);
  for (uint64_t s : {0ull, 1ull, 12345ull, ~0ull}) EXPECT_EQ(seq(a, s, 50), seq(b, s, 50)) << s;
  // A sequence does not depend on what was generated before it.
  auto x = seq(a, 99, 50);
  (void)seq(a, 3, 50);
  EXPECT_EQ(seq(a, 99, 50), x);
  // A prefix is a prefix.
  auto shorter = seq(a, 99, 20);
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), x.begin()));
}

TEST(MarkovSource, DiffersForDifferentSeedOrSample) {
  MarkovSource a(7, 64, 4), b(8, 64, 4);
  int same = 0;
  for (uint64_t s = 0; s < 20; ++s) same += seq(a, s, 50) == seq(b, s, 50);
  EXPECT_EQ(same, 0);
  EXPECT_NE(seq(a, 0, 50), seq(a, 1, 50));
  // Different seeds give different chains, not only different starts.
  auto ta = transitions(a, 200, 50), tb = transitions(b, 200, 50);
  EXPECT_NE(ta, tb);
}

TEST(MarkovSource, TokensAreInRange) {
  MarkovSource src(3, 50, 5);
  for (uint64_t s = 0; s < 100; ++s)
    for (int64_t t : seq(src, s, 64)) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, 50);
    }
  // len 0 writes nothing; len 1 writes one token.
  std::vector<int64_t> out = {-7, -7};
  src.sequence(0, 0, out.data());
  EXPECT_EQ(out[0], -7);
  src.sequence(0, 1, out.data());
  EXPECT_GE(out[0], 0);
  EXPECT_EQ(out[1], -7);
}

TEST(MarkovSource, EveryTokenHasExactlyBranchingEquallyLikelySuccessors) {
  // A small vocabulary makes repeated successors likely if the chain allowed them; a
  // repeat would make the chain's entropy less than ln(branching).
  for (uint64_t seed : {0, 1, 2, 3}) {
    MarkovSource src(seed, 16, 4);
    auto t = transitions(src, 2000, 64);
    ASSERT_EQ(t.size(), 16u) << "seed " << seed;
    for (const auto& [tok, next] : t) {
      EXPECT_EQ(next.size(), 4u) << "seed " << seed << " token " << tok;
      int64_t total = 0;
      for (const auto& kv : next) total += kv.second;
      for (const auto& [succ, count] : next) {
        double f = double(count) / double(total);
        EXPECT_GT(f, 0.2) << "seed " << seed << " token " << tok << " -> " << succ;
        EXPECT_LT(f, 0.3) << "seed " << seed << " token " << tok << " -> " << succ;
      }
    }
  }
}

TEST(MarkovSource, BranchingEqualToVocabReachesEveryToken) {
  MarkovSource src(5, 8, 8);
  auto t = transitions(src, 500, 64);
  for (const auto& [tok, next] : t) EXPECT_EQ(next.size(), 8u) << tok;
}

TEST(MarkovSource, BranchingOneIsADeterministicChain) {
  MarkovSource src(5, 32, 1);
  auto t = transitions(src, 200, 32);
  for (const auto& [tok, next] : t) EXPECT_EQ(next.size(), 1u) << tok;
}

TEST(MarkovSource, AtMostBranchingSuccessorsWithALargeVocab) {
  MarkovSource src(11, 256, 4);
  auto t = transitions(src, 3000, 32);
  EXPECT_GT(t.size(), 200u);  // most tokens were visited
  for (const auto& [tok, next] : t) EXPECT_LE(next.size(), 4u) << tok;
}

TEST(MarkovSource, EntropyFloorIsLnBranching) {
  EXPECT_DOUBLE_EQ(MarkovSource(0, 256, 4).entropy_floor(), std::log(4.0));
  EXPECT_EQ(MarkovSource(0, 256, 1).entropy_floor(), 0.0);
  EXPECT_DOUBLE_EQ(MarkovSource(0, 256, 7).entropy_floor(), std::log(7.0));
}

TEST(EpochPermutation, IsAPermutation) {
  for (int64_t n : {1, 2, 3, 10, 1000}) {
    auto p = epoch_permutation(42, 0, n);
    ASSERT_EQ(int64_t(p.size()), n);
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> iota(n);
    std::iota(iota.begin(), iota.end(), int64_t(0));
    EXPECT_EQ(sorted, iota) << n;
  }
  EXPECT_TRUE(epoch_permutation(42, 0, 0).empty());
}

TEST(EpochPermutation, DeterministicAndDifferentAcrossEpochsAndSeeds) {
  auto a = epoch_permutation(42, 3, 1000);
  EXPECT_EQ(epoch_permutation(42, 3, 1000), a);
  EXPECT_NE(epoch_permutation(42, 4, 1000), a);
  EXPECT_NE(epoch_permutation(43, 3, 1000), a);
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), int64_t(0));
  EXPECT_NE(a, iota);  // it does shuffle
  // Roughly uniform: element 0 lands in each half about equally often over epochs.
  int low = 0;
  for (uint64_t e = 0; e < 400; ++e) low += epoch_permutation(1, e, 10)[0] < 5;
  EXPECT_GT(low, 150);
  EXPECT_LT(low, 250);
}

TEST(Mix, KeysAreOrderSensitive) {
  EXPECT_NE(mix_keys(1, 2, 3), mix_keys(1, 3, 2));
  EXPECT_NE(mix_keys(1, 2), mix_keys(2, 1));
  EXPECT_EQ(mix_keys(9, 8, 7, 6), mix_keys(9, 8, 7, 6));
  EXPECT_NE(mix64(0), 0u);
}

}  // namespace
}  // namespace sweep
