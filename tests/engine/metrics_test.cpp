#include "engine/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace polymargin::engine {
namespace {

// AUC by its definition: the fraction of (positive, negative) pairs ordered right, ties ½.
double brute_force_auc(const std::vector<double>& s, const std::vector<std::int8_t>& y) {
  double good = 0, pairs = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = 0; j < s.size(); ++j)
      if (y[i] > 0 && y[j] < 0) {
        pairs += 1;
        good += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
  return good / pairs;
}

TEST(Metrics, HandComputedExample) {
  // scores  0.9 -0.2 0.4 -0.7 0.1 ; labels + + - - -
  const std::vector<double> s{0.9, -0.2, 0.4, -0.7, 0.1};
  const std::vector<std::int8_t> y{1, 1, -1, -1, -1};
  const BinaryMetrics m = binary_metrics(s, y);
  EXPECT_EQ(m.true_positives, 1u);
  EXPECT_EQ(m.false_negatives, 1u);
  EXPECT_EQ(m.false_positives, 2u);
  EXPECT_EQ(m.true_negatives, 1u);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.4);
  EXPECT_DOUBLE_EQ(m.error_rate, 0.6);
  // Pairs (pos, neg): 0.9 beats all 3; -0.2 beats only -0.7 ⇒ 4 / 6.
  EXPECT_DOUBLE_EQ(m.auc, 4.0 / 6.0);
  // Margins: 0.9, -0.2, -0.4, 0.7, -0.1 ⇒ mean 0.18, variance mean(γ²) − 0.18².
  EXPECT_NEAR(m.margin_mean, 0.18, 1e-15);
  EXPECT_NEAR(m.margin_variance, (0.81 + 0.04 + 0.16 + 0.49 + 0.01) / 5 - 0.18 * 0.18, 1e-15);
  EXPECT_DOUBLE_EQ(m.precision, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.recall, 0.5);
}

TEST(Metrics, AucMatchesBruteForceWithTies) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> level(0, 9);  // few distinct scores ⇒ many ties
  std::vector<double> s(300);
  std::vector<std::int8_t> y(300);
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i] = level(rng) * 0.5;
    y[i] = (level(rng) + s[i] > 6) ? 1 : -1;
  }
  EXPECT_NEAR(auc(s, y), brute_force_auc(s, y), 1e-12);
}

// Gathered a row at a time, reserved or not: the same metrics as from whole arrays, and the margins
// y·s of every row, ascending.
TEST(Metrics, BinaryScoresGiveTheMetricsAndTheSortedMargins) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> score(0, 1);
  std::vector<double> s(1000);
  std::vector<std::int8_t> y(1000);
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i] = std::round(score(rng) * 8) / 8;  // ties
    y[i] = score(rng) + s[i] > 0 ? 1 : -1;
  }
  const BinaryMetrics whole = binary_metrics(s, y);
  EXPECT_NEAR(whole.auc, brute_force_auc(s, y), 1e-12);
  for (const bool reserved : {false, true}) {
    BinaryScores rows;
    if (reserved) rows.reserve(whole.positives, whole.negatives);
    for (std::size_t i = 0; i < s.size(); ++i) rows.add(s[i], y[i]);
    const BinaryMetrics m = rows.metrics();
    EXPECT_EQ(m.rows, whole.rows);
    EXPECT_EQ(m.true_positives, whole.true_positives);
    EXPECT_EQ(m.false_positives, whole.false_positives);
    EXPECT_EQ(m.auc, whole.auc);
    EXPECT_EQ(m.margin_mean, whole.margin_mean);
    EXPECT_EQ(m.margin_variance, whole.margin_variance);
    std::vector<double> margins(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) margins[i] = y[i] * s[i];
    std::sort(margins.begin(), margins.end());
    EXPECT_EQ(rows.take_sorted_margins(), margins);
  }
}

TEST(Metrics, AucOfOneClassIsHalf) {
  EXPECT_DOUBLE_EQ(auc({1, 2, 3}, {1, 1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(binary_metrics({}, {}).auc, 0.5);  // no rows: no class either
}

TEST(Metrics, MarginCurveIsCumulative) {
  const MarginCurve c = margin_curve({-1, 0, 0.5, 2}, -1, 2, 4);  // θ = -1, 0, 1, 2
  ASSERT_EQ(c.cumulative.size(), 4u);
  EXPECT_DOUBLE_EQ(c.cumulative[0], 0.25);
  EXPECT_DOUBLE_EQ(c.cumulative[1], 0.5);
  EXPECT_DOUBLE_EQ(c.cumulative[2], 0.75);
  EXPECT_DOUBLE_EQ(c.cumulative[3], 1.0);
  EXPECT_THROW(margin_curve({1}, 1, 1, 4), std::invalid_argument);
}

}  // namespace
}  // namespace polymargin::engine
