// The canonical pairwise tree of docs/design.md: the sum of M leaves is
// tree(lo,hi) = tree(lo, lo+P) + tree(lo+P, hi), P the largest power of two < hi-lo.
// Its result depends only on the leaves and M, never on how they were produced.
#pragma once

#include <cstddef>
#include <vector>

namespace sweep {

/// Sums equal-length float vectors pushed in leaf order with the canonical tree, holding
/// O(log M) partial sums (a binary-counter stack).
class TreeAccumulator {
 public:
  explicit TreeAccumulator(size_t n) : n_(n) {}
  /// Adds leaf number `count()`; `g` has n elements.
  void push(const float* g);
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
};

/// Canonical tree sum of scalars (the per-micro-batch losses).
double canonical_sum(const std::vector<double>& leaves);

}  // namespace sweep
