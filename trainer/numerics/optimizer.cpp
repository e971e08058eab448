#include "optimizer.h"

#include <cmath>
#include <cstring>

#include "arith.h"          // norm_block_sum, adamw_element: one definition for host and device
#include "vector_clones.h"  // SWEEP_VECTOR_CLONES

namespace sweep {

SWEEP_VECTOR_CLONES double sum_of_squares(const float* g, size_t n) {
  // sum_in_order over the block sums, without storing them.
  double total = 0;
  for (size_t b = 0, blocks = norm_blocks(n); b < blocks; ++b) total += norm_block_sum(g, n, b);
  return total;
}

SWEEP_VECTOR_CLONES void scale(float* g, size_t n, float coef) {
  for (size_t i = 0; i < n; ++i) g[i] = scaled(g[i], coef);
}

double clip_coefficient(double norm, double clip_norm) {
  if (clip_norm <= 0 || !(norm > clip_norm)) return 1.0;
  return clip_norm / (norm + 1e-6);
}

double learning_rate(const TrainConfig& t, int64_t step) {
  // Up to train.lr_switch_step the schedule of its own peak, after it train.lr's.
  const double lr = t.lr_switch_step > 0 && step <= t.lr_switch_step ? t.lr_before_switch : t.lr;
  if (t.warmup > 0 && step <= t.warmup) return lr * double(step) / double(t.warmup);
  if (t.schedule == "constant" || t.steps == t.warmup) return lr;
  double progress = double(step - t.warmup) / double(t.steps - t.warmup);
  if (t.schedule == "linear") return t.min_lr + (lr - t.min_lr) * (1.0 - progress);
  return t.min_lr + 0.5 * (lr - t.min_lr) * (1.0 + std::cos(M_PI * progress));
}

AdamWStep AdamWStep::at(const TrainConfig& t, double lr, int64_t step) {
  return {float(lr),
          float(t.beta1),
          float(t.beta2),
          float(t.eps),
          float(t.weight_decay),
          float(1.0 - std::pow(t.beta1, double(step))),
          float(1.0 - std::pow(t.beta2, double(step)))};
}

SWEEP_VECTOR_CLONES void adamw(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                               size_t n, const AdamWStep& s) {
  const AdamWConsts k = s.consts();
  for (size_t i = 0; i < n; ++i) adamw_element(p[i], g[i], m[i], v[i], k);
}

}  // namespace sweep

namespace sweep {

SWEEP_VECTOR_CLONES bool all_finite(const float* g, size_t n) {
  // Inf and NaN are the floats whose exponent bits are all ones. An integer OR over the
  // elements keeps the loop branch-free and vectorizable (a float sum would not be).
  uint32_t seen = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, g + i, sizeof bits);
    seen |= uint32_t(!finite_bits(bits));
  }
  return seen == 0;
}

LossScaler LossScaler::from(const TrainConfig& t) {
  LossScaler s;
  s.enabled = t.precision == "fp16";
  s.scale = s.enabled ? t.loss_scale_init : 1.0;
  return s;
}

void LossScaler::update(bool finite, const TrainConfig& t) {
  if (!enabled) return;
  if (!finite) {
    scale *= t.loss_scale_backoff;
    clean_steps = 0;
  } else if (++clean_steps == t.loss_scale_interval) {
    scale *= t.loss_scale_growth;
    clean_steps = 0;
  }
}

}  // namespace sweep
