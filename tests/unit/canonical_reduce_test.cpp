// The canonical pairwise tree: bit-for-bit equal to its recursive definition, and
// provably not the left-to-right sum.
#include "canonical_reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace sweep {
namespace {

using Vec = std::vector<float>;

/// Values whose float sums depend on order: random sign, magnitude 1e-8..1e8.
template <class T>
std::vector<T> mixed(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> exp10(-8, 8), mant(1, 2);
  std::vector<T> v(n);
  for (auto& x : v) x = T((rng() & 1 ? -1 : 1) * mant(rng) * std::pow(10.0, exp10(rng)));
  return v;
}

/// docs/design.md, literally: tree(lo,hi) = tree(lo,lo+P) + tree(lo+P,hi), P the largest
/// power of two < hi-lo.
Vec reference_tree(const std::vector<Vec>& leaves, size_t lo, size_t hi) {
  if (hi - lo == 1) return leaves[lo];
  size_t p = 1;
  while (p * 2 < hi - lo) p *= 2;
  Vec a = reference_tree(leaves, lo, lo + p), b = reference_tree(leaves, lo + p, hi);
  for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] + b[i];
  return a;
}

double reference_tree(const std::vector<double>& v, size_t lo, size_t hi) {
  if (hi - lo == 1) return v[lo];
  size_t p = 1;
  while (p * 2 < hi - lo) p *= 2;
  return reference_tree(v, lo, lo + p) + reference_tree(v, lo + p, hi);
}

Vec sequential(const std::vector<Vec>& leaves) {
  Vec s = leaves[0];
  for (size_t j = 1; j < leaves.size(); ++j)
    for (size_t i = 0; i < s.size(); ++i) s[i] = s[i] + leaves[j][i];
  return s;
}

Vec accumulate(const std::vector<Vec>& leaves, size_t lo, size_t hi) {
  const size_t n = leaves.empty() ? 0 : leaves[0].size();
  TreeAccumulator acc(n);
  for (size_t j = lo; j < hi; ++j) acc.push(leaves[j].data());
  Vec out(n, -1.0f);
  acc.finish(out.data());
  return out;
}

std::vector<Vec> make_leaves(size_t m, size_t n, uint32_t seed) {
  std::vector<Vec> leaves;
  for (size_t j = 0; j < m; ++j) leaves.push_back(mixed<float>(n, seed * 100 + uint32_t(j)));
  return leaves;
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr size_t kN = 257;  // odd, so any vectorized loop has a tail

TEST(CanonicalReduce, MatchesRecursiveDefinitionBitForBit) {
  for (size_t m = 1; m <= 17; ++m) {
    auto leaves = make_leaves(m, kN, uint32_t(m));
    EXPECT_TRUE(same_bits(accumulate(leaves, 0, m), reference_tree(leaves, 0, m))) << "M = " << m;
  }
}

TEST(CanonicalReduce, FinishWithLastLeafInPlaceMatchesTheDefinition) {
  for (size_t m = 1; m <= 17; ++m) {
    auto leaves = make_leaves(m, kN, uint32_t(50 + m));
    TreeAccumulator acc(kN);
    for (size_t j = 0; j + 1 < m; ++j) acc.push(leaves[j].data());
    Vec inout = leaves[m - 1];
    acc.finish_with_last(inout.data());
    EXPECT_TRUE(same_bits(inout, reference_tree(leaves, 0, m))) << "M = " << m;
    EXPECT_EQ(acc.count(), 0u);
  }
}

TEST(CanonicalReduce, IsNotTheLeftToRightSum) {
  // For M <= 3 the tree and the sequential sum coincide; from 4 on they must not, or a
  // sequential implementation would pass the test above.
  for (size_t m = 4; m <= 9; ++m) {
    auto leaves = make_leaves(m, kN, uint32_t(m));
    EXPECT_FALSE(same_bits(accumulate(leaves, 0, m), sequential(leaves))) << "M = " << m;
  }
  auto leaves = make_leaves(3, kN, 3);
  EXPECT_TRUE(same_bits(accumulate(leaves, 0, 3), sequential(leaves)));
}

TEST(CanonicalReduce, PowerOfTwoSplits) {
  auto leaves = make_leaves(8, kN, 42);
  Vec all = accumulate(leaves, 0, 8);
  // tree(0,8) == tree(0,4) + tree(4,8)
  std::vector<Vec> halves = {accumulate(leaves, 0, 4), accumulate(leaves, 4, 8)};
  EXPECT_TRUE(same_bits(all, accumulate(halves, 0, 2)));
  // == tree of the four pair sums
  std::vector<Vec> pairs;
  for (size_t j = 0; j < 8; j += 2) pairs.push_back(accumulate(leaves, j, j + 2));
  EXPECT_TRUE(same_bits(all, accumulate(pairs, 0, 4)));
  // and a pair sum is the plain sum of its two leaves
  Vec p0 = leaves[0];
  for (size_t i = 0; i < kN; ++i) p0[i] = p0[i] + leaves[1][i];
  EXPECT_TRUE(same_bits(pairs[0], p0));
}

TEST(CanonicalReduce, RankPartialsCombineToTheGlobalTree) {
  // docs/design.md: with A a power of two, each rank's block of A leaves is a subtree, so
  // summing per rank and then over ranks (same tree shape over r) gives the global tree,
  // for any world size W.
  for (size_t a : {1, 2, 4, 8}) {
    for (size_t w = 1; w <= 6; ++w) {
      auto leaves = make_leaves(w * a, kN, uint32_t(w * 10 + a));
      std::vector<Vec> partials;
      for (size_t r = 0; r < w; ++r) partials.push_back(accumulate(leaves, r * a, (r + 1) * a));
      EXPECT_TRUE(same_bits(accumulate(partials, 0, w), accumulate(leaves, 0, w * a))) << "W = " << w << ", A = " << a;
    }
  }
}

TEST(CanonicalReduce, FinishResetsForTheNextStep) {
  auto first = make_leaves(3, kN, 7), second = make_leaves(5, kN, 8);
  TreeAccumulator acc(kN);
  for (auto& l : first) acc.push(l.data());
  EXPECT_EQ(acc.count(), 3u);
  Vec out(kN);
  acc.finish(out.data());
  EXPECT_EQ(acc.count(), 0u);
  EXPECT_TRUE(same_bits(out, reference_tree(first, 0, 3)));
  for (auto& l : second) acc.push(l.data());
  EXPECT_EQ(acc.count(), 5u);
  acc.finish(out.data());
  EXPECT_TRUE(same_bits(out, reference_tree(second, 0, 5)));
  // Nothing pushed: zeros.
  acc.finish(out.data());
  EXPECT_TRUE(same_bits(out, Vec(kN, 0.0f)));
}

TEST(CanonicalReduce, LeafIsCopiedAtPush) {
  TreeAccumulator acc(4);
  Vec g = {1, 2, 3, 4};
  acc.push(g.data());
  g = {10, 20, 30, 40};  // the caller reuses its gradient buffer
  acc.push(g.data());
  Vec out(4);
  acc.finish(out.data());
  EXPECT_EQ(out, (Vec{11, 22, 33, 44}));
}

TEST(CanonicalSum, MatchesRecursiveDefinitionBitForBit) {
  for (size_t m = 1; m <= 17; ++m) {
    auto v = mixed<double>(m, uint32_t(1000 + m));
    double got = canonical_sum(v), want = reference_tree(v, 0, m);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "M = " << m << ": " << got << " vs " << want;
  }
  EXPECT_EQ(canonical_sum({}), 0.0);
  EXPECT_EQ(canonical_sum({2.5}), 2.5);
}

TEST(CanonicalSum, IsNotTheLeftToRightSum) {
  // The ulp of 1e16 is 2, so 1e16 + 1 rounds back to 1e16 (ties to even).
  // Sequentially every 1 is lost; the tree adds the two ones first.
  EXPECT_EQ(canonical_sum({1e16, 1.0, 1.0, 1.0}), 1e16 + 2.0);
  // M = 5 is tree(0,4) + leaf 4 = ((1 + 1e16) + (-1e16 + 1)) + 1 = 1; sequentially 2.
  EXPECT_EQ(canonical_sum({1.0, 1e16, -1e16, 1.0, 1.0}), 1.0);
  // M = 3 is (a + b) + c: the tree's first split is at P = 2.
  EXPECT_EQ(canonical_sum({1e16, 1.0, 1.0}), 1e16);
  EXPECT_EQ(canonical_sum({1.0, 1.0, 1e16}), 1e16 + 2.0);
}

}  // namespace
}  // namespace sweep
