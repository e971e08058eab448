// One fixed summation order for a dot product over floats, shared by the gradient norm
// (optimizer.cpp) and the fused kernels (fused_ops.cpp). It keeps 8 independent running
// sums, so the loop vectorizes, and its order is written here, not left to the compiler.
#pragma once

#include <cstddef>

namespace sweep {

/// Lanes of lane_dot: element i goes to lane i % kSumLanes.
inline constexpr size_t kSumLanes = 8;

/// Sum of a[i] * b[i] over n elements, products and sums in T: each lane sums its
/// elements in order, the lanes are added as ((0+1)+(2+3))+((4+5)+(6+7)), then the
/// elements past the last whole group of lanes are added in order.
template <class T>
inline T lane_dot(const float* a, const float* b, size_t n) {
  T lane[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (size_t k = 0; k < kSumLanes; ++k) lane[k] += T(a[i + k]) * T(b[i + k]);
  T s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += T(a[i]) * T(b[i]);
  return s;
}

}  // namespace sweep
