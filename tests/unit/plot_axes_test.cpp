// The report charts' axes (results/report/plot_axes.h): nice ticks, decades, robust limits,
// labels and a palette that keeps twelve curves apart.
#include "plot_axes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace sweep::plot {
namespace {

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * std::abs(want[i]) + 1e-15) << i;
}

TEST(NiceTicks, SmallLossRangeGetsTicksEveryTwoHundredths) {
  expect_near_all(nice_ticks(0.0123, 0.0871), {0.02, 0.04, 0.06, 0.08});
}

TEST(NiceTicks, StepsAreOneTwoOrFiveTimesAPowerOfTenWithFourToSevenTicks) {
  for (auto [lo, hi] : std::vector<std::pair<double, double>>{
           {0, 1}, {2.9, 10.8}, {0, 40}, {0, 1999}, {-3.5, 7.25}, {1e-6, 9e-6}, {123456, 987654}, {0.5, 0.51}}) {
    std::vector<double> t = nice_ticks(lo, hi);
    EXPECT_GE(t.size(), 4u) << lo << ".." << hi;
    EXPECT_LE(t.size(), 7u) << lo << ".." << hi;
    const double step = tick_step(t);
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9)
        << step;
    for (double v : t) EXPECT_TRUE(v >= lo - 1e-12 && v <= hi + 1e-12) << v;
  }
}

TEST(NiceTicks, IntegerAxisNeverStepsBelowOneAndDegenerateRangesAreSafe) {
  for (double v : nice_ticks(0, 3, true)) EXPECT_EQ(v, std::floor(v));
  EXPECT_EQ(nice_ticks(5, 5), std::vector<double>{5});
  EXPECT_TRUE(nice_ticks(NAN, 1).empty());
  EXPECT_TRUE(nice_ticks(2, 1).empty());
}

TEST(LogTicks, OneToNineThousandGetsDecades) { expect_near_all(log_ticks(1, 9251), {1, 10, 100, 1000}); }

TEST(LogTicks, ManyDecadesAreThinnedAndNonPositiveHasNone) {
  EXPECT_LE(log_ticks(1e-10, 1e10).size(), 7u);
  EXPECT_TRUE(log_ticks(0, 10).empty());
}

TEST(RobustLimits, OneOutlierCurveDoesNotSetTheScale) {
  std::vector<std::vector<double>> curves;
  for (int c = 0; c < 11; ++c) {
    std::vector<double> loss;
    for (int s = 0; s < 40; ++s) loss.push_back(2.0 + 0.01 * c + 8.0 / (1 + s));  // 10 .. ~2.2
    curves.push_back(loss);
  }
  curves.push_back({10.0, 50.0, 900.0, 9251.0});  // blew up
  Limits l = robust_limits(curves);
  EXPECT_FALSE(l.log);
  EXPECT_LT(l.hi, 12.0);  // the bulk's first steps are in ...
  EXPECT_GE(l.hi, 10.1);  // ... with their padding
  EXPECT_LT(l.lo, 2.2);
  EXPECT_GT(l.lo, 1.5);
}

TEST(RobustLimits, BulkSpanningDecadesIsLogAndFlatLineGetsABand) {
  Limits l = robust_limits({{1000, 100, 10, 1}, {2000, 200, 20, 2}});
  EXPECT_TRUE(l.log);
  EXPECT_LT(l.lo, 1);
  EXPECT_GT(l.hi, 2000);
  Limits flat = robust_limits({{3, 3, 3}});
  EXPECT_LT(flat.lo, 3);
  EXPECT_GT(flat.hi, 3);
  Limits none = robust_limits({{NAN}});
  EXPECT_LT(none.lo, none.hi);
}

// A loss scale: 1 for every run without fp16, 65536 and its halvings for fp16. The robust
// limits call fp16 an outlier and clip it (one flat line at 1, padded 0.9..1.1); a log
// axis over every value holds both, off the edges, with a tick per decade.
TEST(LogLimits, EveryPositiveValueIsInsideAndOffTheEdges) {
  const std::vector<std::vector<double>> scale = {{1, 1, 1}, {1, 1}, {1, 1, 1}, {65536, 32768, 65536}};
  EXPECT_FALSE(robust_limits(scale).hi >= 65536);
  const Limits l = log_limits(scale);
  EXPECT_TRUE(l.log);
  EXPECT_LT(l.lo, 1);
  EXPECT_GT(l.hi, 65536);
  EXPECT_NEAR(std::log10(l.lo), -0.25, 1e-12);  // decades 1..1e5, padded by 5% of 5
  EXPECT_NEAR(std::log10(l.hi), 5.25, 1e-12);
  expect_near_all(log_ticks(l.lo, l.hi), {1, 10, 100, 1000, 10000, 100000});
  // One value: a decade around it, so the axis still has two ticks.
  const Limits one = log_limits({{65536, 65536}});
  EXPECT_LT(one.lo, 65536);
  EXPECT_GT(one.hi, 65536);
  EXPECT_EQ(log_ticks(one.lo, one.hi).size(), 2u);
  // Non-positive and non-finite values set nothing; none at all: the robust limits.
  const Limits some = log_limits({{0, -1, NAN, 2, 300}});
  EXPECT_NEAR(std::log10(some.lo), -0.15, 1e-12);
  EXPECT_NEAR(std::log10(some.hi), 3.15, 1e-12);
  EXPECT_FALSE(log_limits({{0, -2}}).log);
}

TEST(TickLabel, UsesTheStepsDecimalsAndThousandsSeparators) {
  EXPECT_EQ(tick_label(0.04, 0.02), "0.04");
  EXPECT_EQ(tick_label(2.5, 0.5), "2.5");
  EXPECT_EQ(tick_label(10000, 2000), "10,000");
  EXPECT_EQ(tick_label(0, 0.02), "0");
  EXPECT_EQ(number_label(9251), "9,251");
  EXPECT_EQ(number_label(-1234567.8), "-1,234,568");
  EXPECT_EQ(number_label(0.01234), "0.01234");
}

// CIE76 distance in L*a*b* of two "#rrggbb" colours.
double lab_distance(const std::string& x, const std::string& y) {
  auto lab = [](const std::string& h) {
    double c[3];
    for (int i = 0; i < 3; ++i) {
      double v = std::stoi(h.substr(1 + 2 * i, 2), nullptr, 16) / 255.0;
      c[i] = v > 0.04045 ? std::pow((v + 0.055) / 1.055, 2.4) : v / 12.92;
    }
    auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
    double X = f((0.4124 * c[0] + 0.3576 * c[1] + 0.1805 * c[2]) / 0.95047);
    double Y = f(0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]);
    double Z = f((0.0193 * c[0] + 0.1192 * c[1] + 0.9505 * c[2]) / 1.08883);
    return std::vector<double>{116 * Y - 16, 500 * (X - Y), 200 * (Y - Z)};
  };
  auto a = lab(x), b = lab(y);
  return std::hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}

TEST(Palette, TwelveGroupsGetTwelveClearlyDifferentColours) {
  std::set<std::string> seen;
  for (size_t i = 0; i < 12; ++i) {
    seen.insert(series_colour(i));
    EXPECT_STREQ(series_dash(i), "") << i;
    for (size_t j = 0; j < i; ++j)
      EXPECT_GT(lab_distance(series_colour(i), series_colour(j)), 20.0) << series_colour(i) << " " << series_colour(j);
  }
  EXPECT_EQ(seen.size(), 12u);
}

TEST(Palette, PastTwelveTheDashTellsCurvesOfOneColourApart) {
  std::set<std::pair<std::string, std::string>> styles;
  for (size_t i = 0; i < 48; ++i) styles.insert({series_colour(i), series_dash(i)});
  EXPECT_EQ(styles.size(), 48u);
}

}  // namespace
}  // namespace sweep::plot
