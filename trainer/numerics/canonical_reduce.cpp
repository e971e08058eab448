#include "canonical_reduce.h"

#include <algorithm>
#include <cstring>

namespace sweep {

void TreeAccumulator::push(const float* g) {
  std::vector<float> buf;
  if (!spare_.empty()) {
    buf = std::move(spare_.back());
    spare_.pop_back();
  }
  buf.assign(g, g + n_);
  stack_.push_back({1, std::move(buf)});
  ++count_;
  // Merge equal-sized neighbours: each completed power-of-two block becomes one subtree.
  while (stack_.size() >= 2 && stack_[stack_.size() - 2].leaves == stack_.back().leaves) {
    Node right = std::move(stack_.back());
    stack_.pop_back();
    Node& left = stack_.back();
    float* l = left.sum.data();
    const float* r = right.sum.data();
    for (size_t i = 0; i < n_; ++i) l[i] = l[i] + r[i];
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
  size_t p = 1;
  while (p * 2 < n) p *= 2;
  return tree(v, p) + tree(v + p, n - p);
}
}  // namespace

double canonical_sum(const std::vector<double>& leaves) {
  return leaves.empty() ? 0.0 : tree(leaves.data(), leaves.size());
}

}  // namespace sweep
