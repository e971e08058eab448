// The canonical pairwise tree: bit-for-bit equal to its recursive definition, and
// provably not the left-to-right sum.
#include "canonical_reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
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

// ------------------------------------------------------------- subtrees of the tree

/// Whether `n` is a node of the canonical tree over `leaves`, by the definition.
bool is_node(int64_t lo, int64_t hi, int64_t a, int64_t b) {
  if (a == lo && b == hi) return true;
  if (hi - lo == 1) return false;
  int64_t p = 1;
  while (p * 2 < hi - lo) p *= 2;
  return b <= lo + p ? is_node(lo, lo + p, a, b) : a >= lo + p && is_node(lo + p, hi, a, b);
}

TEST(CanonicalCover, IsTheFewestCanonicalSubtreesThatMakeTheRange) {
  for (int64_t leaves = 1; leaves <= 40; ++leaves)
    for (int64_t a = 0; a < leaves; ++a)
      for (int64_t b = a + 1; b <= leaves; ++b) {
        const auto nodes = canonical_cover(leaves, a, b);
        int64_t at = a;
        for (size_t i = 0; i < nodes.size(); ++i) {
          ASSERT_EQ(nodes[i].lo, at) << leaves << " [" << a << "," << b << ")";
          ASSERT_TRUE(is_node(0, leaves, nodes[i].lo, nodes[i].end()));
          // Maximal: no two neighbours are siblings (they would be one node).
          if (i > 0) {
            ASSERT_FALSE(canonical_siblings(leaves, nodes[i - 1], nodes[i]));
          }
          at = nodes[i].end();
        }
        ASSERT_EQ(at, b);
        ASSERT_LE(nodes.size(), size_t(2 * std::log2(double(leaves)) + 2));
      }
  EXPECT_EQ(canonical_cover(8, 2, 4), (std::vector<TreeNode>{{2, 2}}));
  EXPECT_EQ(canonical_cover(6, 0, 3), (std::vector<TreeNode>{{0, 2}, {2, 1}}));  // W=2 x A=3 of 6
  EXPECT_EQ(canonical_cover(6, 3, 6), (std::vector<TreeNode>{{3, 1}, {4, 2}}));
  EXPECT_THROW(canonical_cover(6, 3, 3), std::invalid_argument);
  EXPECT_THROW(canonical_cover(6, 3, 7), std::invalid_argument);
}

TEST(CanonicalCover, SiblingsAreExactlyTheChildrenOfOneNode) {
  EXPECT_TRUE(canonical_siblings(6, {0, 4}, {4, 2}));
  EXPECT_TRUE(canonical_siblings(6, {4, 1}, {5, 1}));
  EXPECT_FALSE(canonical_siblings(6, {2, 2}, {4, 2}));  // equal sizes, but not one node's children
  EXPECT_FALSE(canonical_siblings(6, {0, 2}, {2, 1}));  // inside [0,4): [0,3) is no node
  EXPECT_FALSE(canonical_siblings(7, {4, 1}, {5, 2}));  // [4,7) splits as [4,6) + [6,7)
  EXPECT_TRUE(canonical_siblings(7, {4, 2}, {6, 1}));
}

/// Pushes leaves [0, leaves) cut at random into pieces, each pushed as its canonical
/// cover (or leaf by leaf), and ranks' covers combined with tree_over_nodes: every way
/// gives the bits of one TreeAccumulator over all the leaves.
TEST(NodeAccumulator, AnyCutOfTheLeavesGivesTheBitsOfTheWholeTree) {
  std::mt19937 rng(7);
  const size_t n = 37;
  for (int64_t leaves : {1, 2, 3, 5, 6, 7, 12, 16, 24, 31}) {
    std::vector<Vec> g;
    for (int64_t i = 0; i < leaves; ++i) g.push_back(mixed<float>(n, uint32_t(1000 + i + 100 * leaves)));
    const Vec want = reference_tree(g, 0, size_t(leaves));
    for (int trial = 0; trial < 20; ++trial) {
      // Ranks: cut [0, leaves) into up to 5 ranges; each rank's range is cut again into
      // micro-batches pushed as their covers.
      std::vector<int64_t> cuts{0, leaves};
      for (int c = 0; c < 4; ++c) cuts.push_back(int64_t(rng() % uint32_t(leaves + 1)));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<TreeNode> all;
      std::vector<Vec> sums;
      for (size_t r = 0; r + 1 < cuts.size(); ++r) {
        NodeAccumulator acc(n, leaves);
        for (int64_t lo = cuts[r]; lo < cuts[r + 1];) {
          const int64_t hi = std::min(cuts[r + 1], lo + 1 + int64_t(rng() % 4));
          for (const TreeNode& node : canonical_cover(leaves, lo, hi))
            acc.push(node, reference_tree(g, size_t(node.lo), size_t(node.end())).data());
          lo = hi;
        }
        ASSERT_EQ(acc.size(), canonical_cover(leaves, cuts[r], cuts[r + 1]).size());
        for (size_t i = 0; i < acc.size(); ++i) {
          ASSERT_EQ(acc.node(i), canonical_cover(leaves, cuts[r], cuts[r + 1])[i]);
          all.push_back(acc.node(i));
          sums.emplace_back(acc.sum(i), acc.sum(i) + n);
        }
      }
      std::vector<Vec> scratch(all.size(), Vec(n));
      std::vector<const float*> pieces;
      std::vector<float*> slots;
      for (size_t i = 0; i < all.size(); ++i) pieces.push_back(sums[i].data()), slots.push_back(scratch[i].data());
      Vec got(n);
      tree_over_nodes(all, pieces.data(), slots.data(), n, leaves, got.data());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << leaves << " leaves, trial " << trial;
      // In place: each piece its own scratch, the result into the first piece.
      for (size_t i = 0; i < all.size(); ++i) slots[i] = sums[i].data();
      tree_over_nodes(all, pieces.data(), slots.data(), n, leaves, sums[0].data());
      ASSERT_EQ(std::memcmp(sums[0].data(), want.data(), n * sizeof(float)), 0);
    }
  }
}

TEST(NodeAccumulator, RefusesAGapAndTreeOverNodesRefusesNodesThatAreNotAPartition) {
  NodeAccumulator acc(1, 8);
  const float one = 1;
  acc.push({0, 2}, &one);
  EXPECT_THROW(acc.push({3, 1}, &one), std::invalid_argument);
  Vec a(1, 1), b(1, 2);
  const float* p[2] = {a.data(), b.data()};
  float* s[2] = {a.data(), b.data()};
  float out = 0;
  EXPECT_THROW(tree_over_nodes({{0, 3}, {3, 1}}, p, s, 1, 4, &out), std::invalid_argument);  // [0,3) is no node of 4
  EXPECT_THROW(tree_over_nodes({{0, 2}}, p, s, 1, 4, &out), std::invalid_argument);          // leaves 2..3 missing
}

}  // namespace
}  // namespace sweep
