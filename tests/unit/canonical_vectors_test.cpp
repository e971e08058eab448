// The canonical tree against the vectors it shares with python/sweep/invariant.py
// (tests/data/canonical_tree_vectors.json, written from docs/design.md's definition by
// tests/python/test_invariant.py): the same leaves give the same bits in C++ and in
// Python, for the whole tree, the covers of rank ranges and uneven ranges, the sums of
// their nodes, the tree over every layout's nodes, the sibling test and the loss sum.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>  // JSON is YAML: the parser the config layer already links

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "canonical_reduce.h"

namespace sweep {
namespace {

using Vec = std::vector<float>;

Vec floats(const YAML::Node& words) {
  Vec out;
  for (const auto& w : words) {
    const auto bits = static_cast<uint32_t>(std::stoul(w.as<std::string>(), nullptr, 16));
    float f = 0;
    std::memcpy(&f, &bits, sizeof f);
    out.push_back(f);
  }
  return out;
}

double float64(const YAML::Node& word) {
  const uint64_t bits = std::stoull(word.as<std::string>(), nullptr, 16);
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

bool same_bits(const Vec& a, const Vec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TreeNode node_of(const YAML::Node& n) { return {n[0].as<int64_t>(), n[1].as<int64_t>()}; }

class CanonicalVectors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vectors_ = YAML::LoadFile(SWEEP_SOURCE_DIR "/tests/data/canonical_tree_vectors.json");
  }
  static YAML::Node vectors_;
  size_t length() const { return vectors_["length"].as<size_t>(); }
};
YAML::Node CanonicalVectors::vectors_;

TEST_F(CanonicalVectors, FileHoldsTheLeafCountsOfTheIssue) {
  std::vector<int64_t> counts;
  for (const auto& c : vectors_["cases"]) counts.push_back(c["leaves"].as<int64_t>());
  for (int64_t n : {1, 2, 3, 5, 6, 7, 12}) EXPECT_NE(std::find(counts.begin(), counts.end(), n), counts.end()) << n;
}

TEST_F(CanonicalVectors, TreeAccumulatorGivesTheTotal) {
  for (const auto& c : vectors_["cases"]) {
    TreeAccumulator acc(length());
    for (const auto& leaf : c["values"]) acc.push(floats(leaf).data());
    Vec out(length());
    acc.finish(out.data());
    EXPECT_TRUE(same_bits(out, floats(c["total"]))) << c["leaves"].as<int>() << " leaves";
  }
}

TEST_F(CanonicalVectors, CoversAndTheirNodeSums) {
  for (const auto& c : vectors_["cases"]) {
    const auto n = c["leaves"].as<int64_t>();
    std::vector<Vec> leaves;
    for (const auto& leaf : c["values"]) leaves.push_back(floats(leaf));
    for (const auto& cover : c["covers"]) {
      const auto a = cover["range"][0].as<int64_t>(), b = cover["range"][1].as<int64_t>();
      std::vector<TreeNode> want;
      for (const auto& node : cover["nodes"]) want.push_back(node_of(node));
      EXPECT_EQ(canonical_cover(n, a, b), want) << "[" << a << ", " << b << ") of " << n;
      // One leaf at a time, as a rank folds its leaves.
      NodeAccumulator acc(length(), n);
      for (int64_t j = a; j < b; ++j) acc.push({j, 1}, leaves[size_t(j)].data());
      ASSERT_EQ(acc.size(), want.size()) << "[" << a << ", " << b << ") of " << n;
      for (size_t i = 0; i < acc.size(); ++i) {
        EXPECT_EQ(acc.node(i), want[i]);
        EXPECT_TRUE(same_bits(Vec(acc.sum(i), acc.sum(i) + length()), floats(cover["sums"][i])))
            << "node " << i << " of [" << a << ", " << b << ") of " << n;
      }
    }
  }
}

TEST_F(CanonicalVectors, TreeOverEveryLayoutsNodesGivesTheTotal) {
  for (const auto& c : vectors_["cases"]) {
    const auto n = c["leaves"].as<int64_t>();
    std::map<std::pair<int64_t, int64_t>, YAML::Node> covers;
    for (const auto& cover : c["covers"])
      covers[{cover["range"][0].as<int64_t>(), cover["range"][1].as<int64_t>()}] = YAML::Node(cover);
    for (const auto& layout : c["layouts"]) {
      const auto w = layout.as<int64_t>();
      std::vector<TreeNode> nodes;
      std::vector<Vec> sums;
      for (int64_t r = 0; r < w; ++r) {
        const auto& cover = covers.at({r * n / w, (r + 1) * n / w});
        for (size_t i = 0; i < cover["nodes"].size(); ++i) {
          nodes.push_back(node_of(cover["nodes"][i]));
          sums.push_back(floats(cover["sums"][i]));
        }
      }
      std::vector<const float*> pieces;
      std::vector<float*> scratch;
      for (auto& s : sums) {
        pieces.push_back(s.data());
        scratch.push_back(s.data());  // a piece may be its own scratch buffer
      }
      Vec out(length());
      tree_over_nodes(nodes, pieces.data(), scratch.data(), length(), n, out.data());
      EXPECT_TRUE(same_bits(out, floats(c["total"]))) << w << " ranks of " << n << " leaves";
    }
  }
}

TEST_F(CanonicalVectors, Siblings) {
  for (const auto& c : vectors_["cases"]) {
    const auto n = c["leaves"].as<int64_t>();
    for (const auto& s : c["siblings"]) {
      const TreeNode left{s[0].as<int64_t>(), s[1].as<int64_t>()}, right{s[2].as<int64_t>(), s[3].as<int64_t>()};
      EXPECT_EQ(canonical_siblings(n, left, right), s[4].as<bool>())
          << "[" << left.lo << ", +" << left.count << ") [" << right.lo << ", +" << right.count << ") of " << n;
    }
  }
}

TEST_F(CanonicalVectors, LossSum) {
  for (const auto& c : vectors_["cases"]) {
    std::vector<double> losses;
    for (const auto& x : c["losses"]) losses.push_back(float64(x));
    const double got = canonical_sum(losses);
    uint64_t bits = 0;
    std::memcpy(&bits, &got, sizeof bits);
    EXPECT_EQ(bits, std::stoull(c["loss_total"].as<std::string>(), nullptr, 16)) << c["leaves"].as<int>() << " leaves";
  }
}

}  // namespace
}  // namespace sweep
