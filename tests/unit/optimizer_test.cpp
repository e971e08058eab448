// Optimizer kernels: schedule values, clipping, the norm, and AdamW against a double
// reference, including independence of an element's result from its position.
#include "optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <random>
#include <vector>

namespace sweep {
namespace {

TrainConfig schedule(const char* kind, int64_t steps, int64_t warmup, double lr, double min_lr) {
  TrainConfig t;
  t.schedule = kind;
  t.steps = steps;
  t.warmup = warmup;
  t.lr = lr;
  t.min_lr = min_lr;
  return t;
}

TEST(LearningRate, WarmupIsLinearFromZeroToLr) {
  for (const char* kind : {"constant", "linear", "cosine"}) {
    TrainConfig t = schedule(kind, 100, 10, 1e-3, 1e-5);
    EXPECT_DOUBLE_EQ(learning_rate(t, 1), 1e-4) << kind;
    EXPECT_DOUBLE_EQ(learning_rate(t, 5), 5e-4) << kind;
    EXPECT_EQ(learning_rate(t, 10), 1e-3) << kind;  // exactly the peak at warmup end
  }
}

TEST(LearningRate, EndsAtMinLrForDecaysAndLrForConstant) {
  TrainConfig lin = schedule("linear", 100, 10, 1e-3, 1e-5);
  TrainConfig cos = schedule("cosine", 100, 10, 1e-3, 1e-5);
  TrainConfig con = schedule("constant", 100, 10, 1e-3, 1e-5);
  EXPECT_EQ(learning_rate(lin, 100), 1e-5);
  EXPECT_EQ(learning_rate(cos, 100), 1e-5);
  EXPECT_EQ(learning_rate(con, 100), 1e-3);
  EXPECT_EQ(learning_rate(con, 50), 1e-3);
  // Without warmup as well.
  EXPECT_EQ(learning_rate(schedule("cosine", 7, 0, 0.5, 0.0), 7), 0.0);
  EXPECT_EQ(learning_rate(schedule("linear", 7, 0, 0.5, 0.1), 7), 0.1);
}

TEST(LearningRate, CosineMatchesTheFormula) {
  const double lr = 3e-3, min_lr = 1e-4;
  TrainConfig t = schedule("cosine", 110, 10, lr, min_lr);
  // Midpoint of the decay: progress 1/2, cos(pi/2) = 0, half way between lr and min_lr.
  EXPECT_NEAR(learning_rate(t, 60), (lr + min_lr) / 2, 1e-15);
  for (int64_t s : {11, 20, 35, 77, 109}) {
    double progress = double(s - 10) / 100.0;
    double want = min_lr + (lr - min_lr) * 0.5 * (1 + std::cos(3.14159265358979323846 * progress));
    EXPECT_NEAR(learning_rate(t, s), want, 1e-15) << "step " << s;
  }
  // Linear decay at a quarter of the way.
  TrainConfig l = schedule("linear", 110, 10, lr, min_lr);
  EXPECT_NEAR(learning_rate(l, 35), min_lr + (lr - min_lr) * 0.75, 1e-15);
}

TEST(LearningRate, NeverIncreasesAfterWarmupAndStaysInRange) {
  for (const char* kind : {"linear", "cosine"}) {
    TrainConfig t = schedule(kind, 50, 5, 1e-2, 1e-3);
    double prev = learning_rate(t, 5);
    for (int64_t s = 6; s <= 50; ++s) {
      double x = learning_rate(t, s);
      EXPECT_LT(x, prev) << kind << " step " << s;
      EXPECT_GE(x, 1e-3) << kind << " step " << s;
      prev = x;
    }
  }
}

TEST(LearningRate, AllWarmup) {
  TrainConfig t = schedule("cosine", 10, 10, 1e-3, 0.0);
  EXPECT_DOUBLE_EQ(learning_rate(t, 1), 1e-4);
  EXPECT_EQ(learning_rate(t, 10), 1e-3);
}

TEST(Clip, CoefficientIsOneWhenOffOrNotNeeded) {
  EXPECT_EQ(clip_coefficient(5.0, 0.0), 1.0);   // off
  EXPECT_EQ(clip_coefficient(1e30, 0.0), 1.0);  // off
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(1.0, 1.0), 1.0);  // exactly at the limit
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0);
  EXPECT_NEAR(clip_coefficient(10.0, 1.0), 0.1, 1e-7);
  EXPECT_LT(clip_coefficient(10.0, 1.0), 0.1);  // the epsilon only ever shrinks it
  // A NaN norm is not "larger than clip", so the coefficient stays 1 and the NaN shows.
  EXPECT_EQ(clip_coefficient(std::nan(""), 1.0), 1.0);
}

TEST(Clip, ScaledGradientHasNormAtMostClip) {
  // In exact arithmetic norm * coef = clip * norm / (norm + 1e-6) < clip. The fp32 scale
  // rounds coef once and every product once (each at most 2^-24 relative), so the
  // clipped norm may exceed clip by at most (1 + 2^-24)^2 - 1 ~ 1.2e-7 relative; it does
  // by a few 1e-8 in practice, exactly as torch.nn.utils.clip_grad_norm_ does.
  const double u = std::ldexp(1.0, -24), slack = (1 + u) * (1 + u) * (1 + 1e-12);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (double target : {1.5, 10.0, 1e3, 1e5}) {
    for (double clip : {0.1, 1.0, 1.4999}) {
      std::vector<float> g(10000);
      for (auto& x : g) x = normal(rng);
      float f = float(target / std::sqrt(sum_of_squares(g.data(), g.size())));
      scale(g.data(), g.size(), f);
      double norm = std::sqrt(sum_of_squares(g.data(), g.size()));
      double coef = clip_coefficient(norm, clip);
      ASSERT_LT(coef, 1.0);
      EXPECT_LT(coef * norm, clip);
      scale(g.data(), g.size(), float(coef));
      double after = std::sqrt(sum_of_squares(g.data(), g.size()));
      EXPECT_LE(after, clip * slack) << std::setprecision(17) << "norm " << norm << " clip " << clip << " after "
                                     << after;
      EXPECT_GT(after, clip * (1 - 1e-5)) << "norm " << norm << " clip " << clip;
    }
  }
  // Without fp32 rounding the bound is strict: g = {3, 4} has norm 5.
  double coef = clip_coefficient(5.0, 1.0);
  EXPECT_LT(std::sqrt(9 * coef * coef + 16 * coef * coef), 1.0);
}

TEST(Norm, SumOfSquaresByHand) {
  std::vector<float> g = {1, -2, 3, 0.5f};
  EXPECT_EQ(sum_of_squares(g.data(), g.size()), 1 + 4 + 9 + 0.25);
  EXPECT_EQ(sum_of_squares(g.data(), 0), 0.0);
  // Squares are taken in double: 1e20f squared overflows float, not double.
  float big = 1e20f;
  EXPECT_DOUBLE_EQ(sum_of_squares(&big, 1), double(big) * double(big));
}

TEST(Norm, LanesThenBlocksInTheirDocumentedOrder) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> e(-6, 6);
  std::vector<float> g(3 * kNormBlock + 17);
  for (auto& x : g) x = float(std::pow(10.0, e(rng)));
  // The order written out plainly, one element at a time.
  double want = 0;
  for (size_t lo = 0; lo < g.size(); lo += kNormBlock) {
    const size_t hi = std::min(g.size(), lo + kNormBlock), whole = lo + (hi - lo) / 8 * 8;
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = lo; i < whole; ++i) lane[(i - lo) % 8] += double(g[i]) * double(g[i]);
    double block = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (size_t i = whole; i < hi; ++i) block += double(g[i]) * double(g[i]);
    want += block;
  }
  EXPECT_EQ(sum_of_squares(g.data(), g.size()), want);
}

TEST(Norm, AllFiniteSeesEveryInfAndNaN) {
  std::vector<float> g(1000, 1.5f);
  EXPECT_TRUE(all_finite(g.data(), g.size()));
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    for (size_t at : {size_t(0), size_t(7), size_t(999)}) {
      auto h = g;
      h[at] = bad;
      EXPECT_FALSE(all_finite(h.data(), h.size())) << bad << " at " << at;
    }
  }
  g[3] = std::numeric_limits<float>::max(), g[4] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(g.data(), g.size()));
}

TEST(AdamW, GradScaleEqualsScalingTheGradientFirst) {
  TrainConfig t;
  t.weight_decay = 0.1;
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0, 1);
  const size_t n = 1031;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng), g[i] = d(rng), m[i] = 0.1f * d(rng), v[i] = std::abs(d(rng));
  auto p2 = p, m2 = m, v2 = v, g2 = g;
  AdamWStep s = AdamWStep::at(t, 1e-3, 3);
  scale(g2.data(), n, 0.37f);
  adamw(p2.data(), g2.data(), m2.data(), v2.data(), n, s);
  s.grad_scale = 0.37f;
  adamw(p.data(), g.data(), m.data(), v.data(), n, s);
  EXPECT_EQ(0, std::memcmp(p.data(), p2.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(m.data(), m2.data(), n * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(v.data(), v2.data(), n * sizeof(float)));
}

TEST(Scale, MultipliesEveryElement) {
  std::vector<float> g = {1, -2, 3, 4, 5, 6, 7, 8, 9};
  scale(g.data(), g.size(), 0.5f);
  EXPECT_EQ(g, (std::vector<float>{0.5f, -1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f}));
}

TEST(AdamWStep, BiasCorrections) {
  TrainConfig t;
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  AdamWStep s = AdamWStep::at(t, 2e-3, 3);
  EXPECT_EQ(s.lr, 2e-3f);
  EXPECT_FLOAT_EQ(s.bias1, float(1 - 0.9 * 0.9 * 0.9));
  EXPECT_FLOAT_EQ(s.bias2, float(1 - 0.95 * 0.95 * 0.95));
  EXPECT_EQ(s.eps, float(t.eps));
}

/// AdamW in double: decoupled decay, bias-corrected moments (Loshchilov & Hutter; the
/// formula PyTorch's AdamW implements).
struct RefAdamW {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, double lr, double b1, double b2, double eps, double wd, int t) {
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

TEST(AdamW, MatchesDoublePrecisionReference) {
  TrainConfig t;
  t.beta1 = 0.9;
  t.beta2 = 0.95;
  t.eps = 1e-8;
  t.weight_decay = 0.1;
  const double lr = 1e-2;
  std::vector<float> p = {1.0f, -0.5f, 2.0f, 0.25f, -3.0f, 0.75f};
  std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
  RefAdamW ref{std::vector<double>(p.begin(), p.end()), std::vector<double>(p.size()), std::vector<double>(p.size())};
  const std::vector<std::vector<float>> grads = {
      {0.1f, -0.2f, 1e-3f, 5.0f, -1e-9f, 0.0f},
      {0.3f, 0.2f, -2e-3f, 4.0f, 1e-9f, 0.0f},
      {-0.1f, -0.7f, 1e-3f, -6.0f, 3e-9f, 1e-6f},
      {0.0f, 0.1f, 5e-3f, 5.0f, -1e-9f, 0.0f},
  };
  for (int step = 1; step <= int(grads.size()); ++step) {
    const auto& g = grads[step - 1];
    adamw(p.data(), g.data(), m.data(), v.data(), p.size(), AdamWStep::at(t, lr, step));
    ref.step(std::vector<double>(g.begin(), g.end()), lr, t.beta1, t.beta2, t.eps, t.weight_decay, step);
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_NEAR(p[i], ref.p[i], 1e-6 * std::abs(ref.p[i])) << "step " << step << " element " << i;
      EXPECT_NEAR(m[i], ref.m[i], 1e-6 * std::abs(ref.m[i]) + 1e-30) << "step " << step << " element " << i;
      EXPECT_NEAR(v[i], ref.v[i], 1e-6 * std::abs(ref.v[i]) + 1e-30) << "step " << step << " element " << i;
    }
  }
  // First step, no decay: each update is lr * sign(g) (m-hat / sqrt(v-hat) = g / |g|).
  t.weight_decay = 0;
  float q = 1.0f, mq = 0, vq = 0, gq = -0.25f;
  adamw(&q, &gq, &mq, &vq, 1, AdamWStep::at(t, lr, 1));
  EXPECT_NEAR(q, 1.0 + lr, 1e-6);
}

TEST(AdamW, ResultDoesNotDependOnPosition) {
  const size_t n = 1000;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> p0(n), g(n), m0(n), v0(n);
  for (size_t i = 0; i < n; ++i) {
    p0[i] = normal(rng);
    g[i] = normal(rng) * 1e-2f;
    m0[i] = normal(rng) * 1e-2f;
    v0[i] = std::abs(normal(rng)) * 1e-4f;
  }
  TrainConfig t;
  t.weight_decay = 0.05;
  AdamWStep s = AdamWStep::at(t, 3e-3, 17);

  std::vector<float> p1 = p0, m1 = m0, v1 = v0;
  adamw(p1.data(), g.data(), m1.data(), v1.data(), n, s);

  auto sliced = [&](std::vector<size_t> cuts) {
    std::vector<float> p = p0, m = m0, v = v0;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      size_t lo = cuts[k], len = cuts[k + 1] - lo;
      adamw(p.data() + lo, g.data() + lo, m.data() + lo, v.data() + lo, len, s);
    }
    EXPECT_EQ(std::memcmp(p.data(), p1.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(m.data(), m1.data(), n * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(v.data(), v1.data(), n * sizeof(float)), 0);
  };
  sliced({0, 333, 1000});
  sliced({0, 1, 2, 3, 500, 997, 1000});
  std::vector<size_t> every(n + 1);
  for (size_t i = 0; i <= n; ++i) every[i] = i;
  sliced(every);  // each element alone: pure scalar code
  // It did update something.
  EXPECT_NE(std::memcmp(p1.data(), p0.data(), n * sizeof(float)), 0);
}

TEST(Scale, ResultDoesNotDependOnPosition) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> a(1001);
  for (auto& x : a) x = normal(rng);
  std::vector<float> b = a;
  scale(a.data(), a.size(), 0.3f);
  for (size_t i = 0; i < b.size(); ++i) scale(&b[i], 1, 0.3f);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace sweep
