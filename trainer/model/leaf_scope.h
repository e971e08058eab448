// The trainer's side of the leaf-aware layers (sweep/leaf.h): what one micro-batch of a
// leaf step tells them while its forward and backward run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "canonical_reduce.h"  // TreeNode

namespace sweep {

struct LeafScope {
  int64_t leaves = 1;             ///< leaves in this micro-batch
  std::vector<TreeNode> nodes;    ///< the micro-batch's canonical cover, leaf numbers relative to its first leaf
  std::vector<float*> bufs;       ///< node j's flat gradient (n floats, zero on entry)
  const float* params = nullptr;  ///< the flat parameter buffer the module's parameters view
  int64_t n = 0;
  std::vector<int64_t> offsets;  ///< each parameter tensor's offset in the flat buffer, in table order
  std::vector<int64_t> numels;
  std::vector<int64_t>* used = nullptr;  ///< set to 1 for each parameter a layer wrote
  std::vector<uint8_t> written;          ///< this micro-batch: the parameters written so far

  /// Index of the parameter tensor `t` views, or throws naming what is wrong.
  size_t param_index(const float* data, int64_t numel) const;
};

/// Makes `scope` the running leaf step for as long as it lives (one thread: the trainer's).
class LeafScopeGuard {
 public:
  explicit LeafScopeGuard(LeafScope* scope);
  ~LeafScopeGuard();
  LeafScopeGuard(const LeafScopeGuard&) = delete;
  LeafScopeGuard& operator=(const LeafScopeGuard&) = delete;

 private:
  LeafScope* prev_;
};

}  // namespace sweep
