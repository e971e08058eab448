// Elementwise optimizer kernels on flat fp32 buffers, written so that an element's
// result never depends on its position (compiled with -ffp-contract=off): any shard
// layout gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arith.h"  // kNormBlock, the per-element and per-block arithmetic
#include "run_config.h"

namespace sweep {

/// Sum of squares of `g` as double: each kNormBlock block summed by norm_block_sum
/// (arith.h: 8 lanes in a fixed order, then the tail), the block sums added in block
/// order. Every piece of that order is fixed, so a shard that starts on a block boundary
/// gives the same block sums.
double sum_of_squares(const float* g, size_t n);

/// g *= coef.
void scale(float* g, size_t n, float coef);

/// Clip factor for a gradient of norm `norm` (1 when clipping is off or not needed).
double clip_coefficient(double norm, double clip_norm);

/// Learning rate at 1-based `step`: linear warmup, then constant / linear / cosine decay
/// to min_lr at the last step.
double learning_rate(const TrainConfig& t, int64_t step);

/// One AdamW update (decoupled weight decay, bias-corrected moments) at 1-based `step`.
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias1, bias2;       ///< 1 - beta^step, computed once per step
  float grad_scale = 1.0f;  ///< multiplies each gradient first (the clip factor)
  static AdamWStep at(const TrainConfig& t, double lr, int64_t step);
  /// What every element's update uses (arith.h), host and device alike.
  AdamWConsts consts() const { return adamw_consts(lr, beta1, beta2, eps, weight_decay, bias1, bias2, grad_scale); }
};
void adamw(float* p, const float* g, float* m, float* v, size_t n, const AdamWStep& s);

}  // namespace sweep

namespace sweep {

/// True when every element is finite.
bool all_finite(const float* g, size_t n);

/// Dynamic loss scaling with the GradScaler algorithm: on overflow skip the step and
/// multiply the scale by `backoff`; after `interval` clean steps multiply it by `growth`.
struct LossScaler {
  double scale = 1.0;       ///< current scale (1 and never changed when disabled)
  int64_t clean_steps = 0;  ///< clean steps since the last change
  bool enabled = false;

  static LossScaler from(const TrainConfig& t);
  /// Updates after a step whose unscaled gradient was finite (`finite`) or not.
  void update(bool finite, const TrainConfig& t);
};

}  // namespace sweep
