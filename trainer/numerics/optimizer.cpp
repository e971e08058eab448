#include "optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lane_sum.h"       // lane_dot
#include "vector_clones.h"  // SWEEP_VECTOR_CLONES

namespace sweep {

SWEEP_VECTOR_CLONES double sum_of_squares(const float* g, size_t n) {
  double total = 0;
  for (size_t lo = 0; lo < n; lo += kNormBlock) total += lane_dot<double>(g + lo, g + lo, std::min(n - lo, kNormBlock));
  return total;
}

SWEEP_VECTOR_CLONES void scale(float* g, size_t n, float coef) {
  for (size_t i = 0; i < n; ++i) g[i] = g[i] * coef;
}

double clip_coefficient(double norm, double clip_norm) {
  if (clip_norm <= 0 || !(norm > clip_norm)) return 1.0;
  return clip_norm / (norm + 1e-6);
}

double learning_rate(const TrainConfig& t, int64_t step) {
  if (t.warmup > 0 && step <= t.warmup) return t.lr * double(step) / double(t.warmup);
  if (t.schedule == "constant" || t.steps == t.warmup) return t.lr;
  double progress = double(step - t.warmup) / double(t.steps - t.warmup);
  if (t.schedule == "linear") return t.min_lr + (t.lr - t.min_lr) * (1.0 - progress);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * progress));
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
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float c1 = 1.0f - s.beta1, c2 = 1.0f - s.beta2;
  const float step_size = s.lr / s.bias1;
  const float sqrt_bias2 = std::sqrt(s.bias2);
  const float gscale = s.grad_scale, beta1 = s.beta1, beta2 = s.beta2, eps = s.eps;
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * gscale;  // the clip factor, as `scale` would have applied it
    float mi = beta1 * m[i] + c1 * gi;
    float vi = beta2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) / sqrt_bias2 + eps;
    p[i] = p[i] * decay - step_size * (mi / denom);
  }
}

}  // namespace sweep

namespace sweep {

SWEEP_VECTOR_CLONES bool all_finite(const float* g, size_t n) {
  // Inf and NaN are the floats whose exponent bits are all ones. An integer OR over the
  // elements keeps the loop branch-free and vectorizable (a float sum would not be).
  constexpr uint32_t kExp = 0x7f800000u;
  uint32_t seen = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, g + i, sizeof bits);
    seen |= uint32_t((bits & kExp) == kExp);
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
