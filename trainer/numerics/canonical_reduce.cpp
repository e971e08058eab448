#include "canonical_reduce.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "arith.h"          // canonical_split
#include "vector_clones.h"  // SWEEP_VECTOR_CLONES

namespace sweep {

namespace {

// dst[i] = a[i] + b[i]; dst may be a or b (same index), never otherwise overlapping.
SWEEP_VECTOR_CLONES void add(float* dst, const float* a, const float* b, size_t len) {
  for (size_t i = 0; i < len; ++i) dst[i] = a[i] + b[i];
}

}  // namespace

void TreeAccumulator::push(const float* g) {
  std::copy(g, g + n_, next());
  push_next();
}

float* TreeAccumulator::next() {
  if (next_.size() != n_) {
    if (!spare_.empty()) {
      next_ = std::move(spare_.back());
      spare_.pop_back();
    }
    next_.resize(n_);
  }
  return next_.data();
}

void TreeAccumulator::push_next() {
  if (next_.size() != n_) throw std::logic_error("TreeAccumulator::push_next without next()");
  stack_.push_back({1, std::move(next_)});
  next_.clear();
  ++count_;
  // Merge equal-sized neighbours: each completed power-of-two block becomes one subtree.
  while (stack_.size() >= 2 && stack_[stack_.size() - 2].leaves == stack_.back().leaves) {
    Node right = std::move(stack_.back());
    stack_.pop_back();
    Node& left = stack_.back();
    add(left.sum.data(), left.sum.data(), right.sum.data(), n_);
    left.leaves += right.leaves;
    spare_.push_back(std::move(right.sum));
  }
}

void TreeAccumulator::finish(float* out) {
  // The stack holds subtrees of strictly decreasing power-of-two sizes; folding them
  // right to left gives tree(lo,hi) = tree(lo,lo+P) + tree(lo+P,hi) at every level.
  if (stack_.empty()) {
    std::fill(out, out + n_, 0.0f);
    return;
  }
  std::memcpy(out, stack_.back().sum.data(), n_ * sizeof(float));
  for (size_t k = stack_.size() - 1; k-- > 0;) {
    const float* l = stack_[k].sum.data();
    for (size_t i = 0; i < n_; ++i) out[i] = l[i] + out[i];
  }
  for (auto& node : stack_) spare_.push_back(std::move(node.sum));
  stack_.clear();
  count_ = 0;
}

void TreeAccumulator::finish_with_last(float* inout) {
  for (size_t k = stack_.size(); k-- > 0;) {
    const float* l = stack_[k].sum.data();
    for (size_t i = 0; i < n_; ++i) inout[i] = l[i] + inout[i];
  }
  for (auto& node : stack_) spare_.push_back(std::move(node.sum));
  stack_.clear();
  count_ = 0;
}

namespace {
double tree(const double* v, size_t n) {
  if (n == 1) return v[0];
  const size_t p = size_t(canonical_split(int64_t(n)));
  return tree(v, p) + tree(v + p, n - p);
}
}  // namespace

double canonical_sum(const std::vector<double>& leaves) {
  return leaves.empty() ? 0.0 : tree(leaves.data(), leaves.size());
}

namespace {

void cover(TreeNode node, int64_t a, int64_t b, std::vector<TreeNode>& out) {
  if (node.end() <= a || node.lo >= b) return;
  if (node.lo >= a && node.end() <= b) {
    out.push_back(node);
    return;
  }
  const int64_t p = canonical_split(node.count);
  cover({node.lo, p}, a, b, out);
  cover({node.lo + p, node.count - p}, a, b, out);
}

// Canonical tree over the pieces of nodes[first..] that make up leaves [lo, lo + count):
// returns where the sum is (a piece itself when one node is the whole range, else the
// scratch buffer of the range's first node) and advances `first` past them.
const float* tree_nodes(const std::vector<TreeNode>& nodes, const float* const* pieces, float* const* scratch, size_t n,
                        TreeNode range, size_t& first, float* dst) {
  if (first >= nodes.size() || nodes[first].lo != range.lo || nodes[first].count > range.count)
    throw std::invalid_argument("tree_over_nodes: the nodes are not canonical subtrees partitioning the leaves");
  if (nodes[first] == range) {
    const float* p = pieces[first++];
    if (dst && dst != p && n) std::memcpy(dst, p, n * sizeof(float));
    return dst ? dst : p;
  }
  const size_t mine = first;
  const int64_t p = canonical_split(range.count);
  const float* left = tree_nodes(nodes, pieces, scratch, n, {range.lo, p}, first, nullptr);
  const float* right = tree_nodes(nodes, pieces, scratch, n, {range.lo + p, range.count - p}, first, nullptr);
  float* out = dst ? dst : scratch[mine];
  add(out, left, right, n);
  return out;
}

}  // namespace

std::vector<TreeNode> canonical_cover(int64_t leaves, int64_t a, int64_t b) {
  if (a < 0 || b > leaves || a >= b)
    throw std::invalid_argument("canonical_cover: range [" + std::to_string(a) + ", " + std::to_string(b) +
                                ") is empty or outside the " + std::to_string(leaves) + " leaves");
  std::vector<TreeNode> out;
  cover({0, leaves}, a, b, out);
  return out;
}

bool canonical_siblings(int64_t leaves, TreeNode left, TreeNode right) {
  if (left.end() != right.lo || left.count < 1 || right.count < 1) return false;
  TreeNode node{0, leaves};
  const TreeNode parent{left.lo, left.count + right.count};
  while (node.count > 1 && node.lo <= parent.lo && node.end() >= parent.end()) {
    if (node == parent) return canonical_split(node.count) == left.count;
    const int64_t p = canonical_split(node.count);
    node = parent.lo < node.lo + p ? TreeNode{node.lo, p} : TreeNode{node.lo + p, node.count - p};
  }
  return false;
}

void NodeAccumulator::push(TreeNode node, const float* sum) {
  if (!stack_.empty() && stack_.back().node.end() != node.lo)
    throw std::invalid_argument("NodeAccumulator: leaves [" + std::to_string(node.lo) + ", " +
                                std::to_string(node.end()) + ") do not follow leaf " +
                                std::to_string(stack_.back().node.end() - 1));
  std::vector<float> buf;
  if (!spare_.empty()) {
    buf = std::move(spare_.back());
    spare_.pop_back();
  }
  buf.assign(sum, sum + n_);
  stack_.push_back({node, std::move(buf)});
  while (stack_.size() >= 2 && canonical_siblings(leaves_, stack_[stack_.size() - 2].node, stack_.back().node)) {
    Held right = std::move(stack_.back());
    stack_.pop_back();
    Held& left = stack_.back();
    add(left.sum.data(), left.sum.data(), right.sum.data(), n_);
    left.node.count += right.node.count;
    spare_.push_back(std::move(right.sum));
  }
}

void NodeAccumulator::clear() {
  for (auto& h : stack_) spare_.push_back(std::move(h.sum));
  stack_.clear();
}

void tree_over_nodes(const std::vector<TreeNode>& nodes, const float* const* pieces, float* const* scratch, size_t n,
                     int64_t leaves, float* out) {
  size_t first = 0;
  tree_nodes(nodes, pieces, scratch, n, {0, leaves}, first, out);
  if (first != nodes.size())
    throw std::invalid_argument("tree_over_nodes: the nodes are not canonical subtrees partitioning the leaves");
}

}  // namespace sweep
