// The arithmetic whose bits a record promises, written once for the host and the device.
// Each function here is what one device thread computes, and what the host loops call for
// each element (optimizer.cpp, canonical_reduce.cpp, fused_ops.cpp): the CUDA kernels in
// cuda/device_numerics.cu are one call of these per thread, so the two can only agree.
//
// What makes the bits equal on both sides, besides one source:
//  - no FMA contraction: -ffp-contract=off on the host, --fmad=false on the device;
//  - correctly rounded division and square root on both: the device build never uses
//    --use_fast_math, and square roots go through sqrt_rn below;
//  - every sum's order is written here (fixed lanes, fixed blocks, the canonical tree),
//    never left to a vector width, a thread count or an atomic.
// tests/unit/arith_test.cpp runs each kernel body over every thread index on the CPU and
// checks it against the host's vectorized loops, bit for bit.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define SWEEP_HD __host__ __device__ inline
#else
#define SWEEP_HD inline
#endif

namespace sweep {

/// Lanes of lane_dot: element i goes to lane i % kSumLanes.
inline constexpr size_t kSumLanes = 8;

/// Elements per block of the gradient-norm reduction; fixed so the sum order is fixed.
inline constexpr size_t kNormBlock = 4096;

/// Correctly rounded float square root on either side.
SWEEP_HD float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

/// Sum of a[i] * b[i] over n elements, products and sums in T: each lane sums its
/// elements in order, the lanes are added as ((0+1)+(2+3))+((4+5)+(6+7)), then the
/// elements past the last whole group of lanes are added in order.
template <class T>
SWEEP_HD T lane_dot(const float* a, const float* b, size_t n) {
  T lane[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (size_t k = 0; k < kSumLanes; ++k) lane[k] += T(a[i + k]) * T(b[i + k]);
  T s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += T(a[i]) * T(b[i]);
  return s;
}

/// Blocks of kNormBlock elements in n (the last one may be short).
SWEEP_HD size_t norm_blocks(size_t n) { return (n + kNormBlock - 1) / kNormBlock; }

/// Sum of squares of block `b` of g[0, n), in double: one device thread's work.
SWEEP_HD double norm_block_sum(const float* g, size_t n, size_t b) {
  const size_t lo = b * kNormBlock, len = n - lo < kNormBlock ? n - lo : kNormBlock;
  return lane_dot<double>(g + lo, g + lo, len);
}

/// v[0] + v[1] + ... + v[n-1], added in index order from 0: how block sums become a total.
SWEEP_HD double sum_in_order(const double* v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += v[i];
  return s;
}

/// The left child's size of a canonical tree node over `count` leaves: the largest power
/// of two below count (docs/design.md, "Canonical reduction").
SWEEP_HD int64_t canonical_split(int64_t count) {
  int64_t p = 1;
  while (p * 2 < count) p *= 2;
  return p;
}

/// Element i of the canonical tree sum over leaves [lo, hi) of `pieces` (leaf k's n
/// elements at pieces + k * n): one device thread's work. Depth log2(hi - lo).
SWEEP_HD float tree_element(const float* pieces, size_t n, size_t i, int64_t lo, int64_t hi) {
  if (hi - lo == 1) return pieces[size_t(lo) * n + i];
  const int64_t mid = lo + canonical_split(hi - lo);
  return tree_element(pieces, n, i, lo, mid) + tree_element(pieces, n, i, mid, hi);
}

/// g scaled by coef (the clip factor): how `scale` and AdamW apply it, so both agree.
SWEEP_HD float scaled(float g, float coef) { return g * coef; }

/// Whether x is finite, from its bits (inf and NaN have every exponent bit set).
SWEEP_HD bool finite_bits(uint32_t bits) { return (bits & 0x7f800000u) != 0x7f800000u; }

/// The per-step constants of one AdamW update, computed once (on the host) and handed to
/// every element.
struct AdamWConsts {
  float decay;       ///< 1 - lr * weight_decay
  float c1, c2;      ///< 1 - beta1, 1 - beta2
  float step_size;   ///< lr / (1 - beta1^step)
  float sqrt_bias2;  ///< sqrt(1 - beta2^step)
  float gscale;      ///< multiplies each gradient first (the clip factor)
  float beta1, beta2, eps;
};

/// The constants from the step's learning rate, betas, eps, weight decay, bias corrections
/// and gradient scale, all already rounded to float.
SWEEP_HD AdamWConsts adamw_consts(float lr, float beta1, float beta2, float eps, float weight_decay, float bias1,
                                  float bias2, float grad_scale) {
  return {
      1.0f - lr * weight_decay, 1.0f - beta1, 1.0f - beta2, lr / bias1, sqrt_rn(bias2), grad_scale, beta1, beta2, eps};
}

/// One element of AdamW (decoupled weight decay, bias-corrected moments).
SWEEP_HD void adamw_element(float& p, float g, float& m, float& v, const AdamWConsts& k) {
  const float gi = scaled(g, k.gscale);  // the clip factor, as `scale` applies it
  const float mi = k.beta1 * m + k.c1 * gi;
  const float vi = k.beta2 * v + k.c2 * (gi * gi);
  m = mi;
  v = vi;
  const float denom = sqrt_rn(vi) / k.sqrt_bias2 + k.eps;
  p = p * k.decay - k.step_size * (mi / denom);
}

}  // namespace sweep
