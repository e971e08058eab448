// The canonical pairwise tree of docs/design.md: the sum of M leaves is
// tree(lo,hi) = tree(lo, lo+P) + tree(lo+P, hi), P the largest power of two < hi-lo.
// Its result depends only on the leaves and M, never on how they were produced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sweep {

/// Sums equal-length float vectors pushed in leaf order with the canonical tree, holding
/// O(log M) partial sums (a binary-counter stack).
class TreeAccumulator {
 public:
  explicit TreeAccumulator(size_t n) : n_(n) {}
  /// Adds leaf number `count()`; `g` has n elements.
  void push(const float* g);
  /// A buffer of n floats for the next leaf, to be written and then added by push_next()
  /// without a copy (valid until then).
  float* next();
  /// Adds the leaf written into next()'s buffer.
  void push_next();
  /// Leaves pushed so far.
  size_t count() const { return count_; }
  /// Canonical tree sum of all leaves into `out` (n elements); the accumulator is reset.
  void finish(float* out);
  /// The same bits as push(inout) then finish(inout), without copying that last leaf:
  /// pushing merges it as (left + it) with the subtrees above, and finishing folds the
  /// rest as (left + sum), so either way the sum is s_1 + (s_2 + (... + (s_m + last))).
  void finish_with_last(float* inout);

 private:
  struct Node {
    size_t leaves;
    std::vector<float> sum;
  };
  size_t n_;
  size_t count_ = 0;
  std::vector<Node> stack_;
  std::vector<std::vector<float>> spare_;  // recycled buffers, so steady state allocates nothing
  std::vector<float> next_;                // next()'s buffer
};

/// Canonical tree sum of scalars (the per-leaf losses).
double canonical_sum(const std::vector<double>& leaves);

/// A subtree of the canonical tree over some number of leaves: leaves [lo, lo + count).
struct TreeNode {
  int64_t lo = 0, count = 0;
  int64_t end() const { return lo + count; }
  bool operator==(const TreeNode& o) const { return lo == o.lo && count == o.count; }
};

/// The fewest subtrees of the canonical tree over `leaves` leaves that together are the
/// range [a, b), in leaf order: the tree's nodes inside the range whose parents are not.
/// At most about 2 log2(leaves) of them; one when the range is itself a subtree (a rank's
/// power-of-two accumulation in an aligned place). Throws std::invalid_argument when the
/// range is empty or not inside [0, leaves).
std::vector<TreeNode> canonical_cover(int64_t leaves, int64_t a, int64_t b);

/// Whether `left` and `right` (adjacent) are the two children of one node of the canonical
/// tree over `leaves` leaves.
bool canonical_siblings(int64_t leaves, TreeNode left, TreeNode right);

/// Sums of canonical subtrees pushed in leaf order (the first anywhere, each next one
/// starting where the last ended), merged as (left + right) whenever the top two are
/// siblings. What it holds is then the canonical cover of the pushed range, each node's
/// sum with the bits of the canonical tree over that node's leaves, however the pushes cut
/// the range: one leaf at a time, a micro-batch's cover at a time, or a rank's.
class NodeAccumulator {
 public:
  NodeAccumulator(size_t n, int64_t leaves) : n_(n), leaves_(leaves) {}
  /// Adds the sum (n floats) of subtree `node`. Throws std::invalid_argument when the node
  /// does not start where the last one ended.
  void push(TreeNode node, const float* sum);
  /// The nodes held, in leaf order, and their sums.
  size_t size() const { return stack_.size(); }
  TreeNode node(size_t i) const { return stack_[i].node; }
  const float* sum(size_t i) const { return stack_[i].sum.data(); }
  float* sum(size_t i) { return stack_[i].sum.data(); }
  /// Forgets everything (buffers are kept for reuse).
  void clear();

 private:
  struct Held {
    TreeNode node;
    std::vector<float> sum;
  };
  size_t n_;
  int64_t leaves_;
  std::vector<Held> stack_;
  std::vector<std::vector<float>> spare_;
};

/// The canonical tree sum over `pieces` (n floats each), the sums of subtrees `nodes` that
/// partition leaves [0, leaves) in order, into `out`: bit-identical to TreeAccumulator over
/// all the leaves. `scratch` holds at least nodes.size() buffers of n floats; a piece may
/// be its own scratch buffer (it is overwritten only after it is read). `out` may be a
/// piece or scratch buffer.
void tree_over_nodes(const std::vector<TreeNode>& nodes, const float* const* pieces, float* const* scratch, size_t n,
                     int64_t leaves, float* out);

}  // namespace sweep
