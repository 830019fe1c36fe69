// engine/stats: mean ± std, the Student t CDF and the paired t-test against closed forms, printed
// tables and a hand-worked example.
#include "engine/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace polymargin::engine {
namespace {

TEST(Stats, MeanAndSampleStdByHand) {
  // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, sample variance 32/7.
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_DOUBLE_EQ(sample_std(v), std::sqrt(32.0 / 7.0));
  EXPECT_EQ(mean({}), 0.0);
  EXPECT_EQ(sample_std({0.3}), 0.0);
}

TEST(Stats, IncompleteBetaClosedForms) {
  for (double x : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    EXPECT_NEAR(regularized_incomplete_beta(1, 1, x), x, 1e-14);
    EXPECT_NEAR(regularized_incomplete_beta(3, 1, x), x * x * x, 1e-14);
    EXPECT_NEAR(regularized_incomplete_beta(1, 4, x), 1 - std::pow(1 - x, 4), 1e-14);
  }
  EXPECT_NEAR(regularized_incomplete_beta(7.5, 7.5, 0.5), 0.5, 1e-14);
  EXPECT_THROW(regularized_incomplete_beta(0, 1, 0.5), std::domain_error);
  EXPECT_THROW(regularized_incomplete_beta(1, 1, 1.5), std::domain_error);
}

TEST(Stats, StudentTCdfClosedForms) {
  // df = 1 is the Cauchy distribution: 1/2 + atan(t)/π.
  for (double t : {-3.0, -1.0, 0.0, 0.4, 1.0, 12.0})
    EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / std::numbers::pi, 1e-13) << t;
  // df = 2: 1/2 + t / (2√(2 + t²)).
  for (double t : {-2.5, 0.3, 1.5, 8.0})
    EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-13) << t;
  EXPECT_DOUBLE_EQ(student_t_cdf(0, 17), 0.5);
  EXPECT_EQ(student_t_cdf(INFINITY, 3), 1.0);
  EXPECT_EQ(student_t_cdf(-INFINITY, 3), 0.0);
}

TEST(Stats, StudentTCdfMatchesPrintedQuantiles) {
  // Critical values as printed in t tables (6 decimals).
  EXPECT_NEAR(student_t_cdf(2.262157, 9), 0.975, 1e-7);
  EXPECT_NEAR(student_t_cdf(1.812461, 10), 0.95, 1e-7);
  EXPECT_NEAR(student_t_cdf(4.604095, 4), 0.995, 1e-7);
  EXPECT_NEAR(student_t_cdf(2.045230, 29), 0.975, 1e-7);
  EXPECT_NEAR(student_t_cdf(-2.776445, 4), 0.025, 1e-7);
}

TEST(Stats, PairedTTestWorkedExample) {
  // Differences 0.01, 0.01, 0, 0.02, 0.02: mean 0.012, sample sd √(2.8e-4/4) = √7e-5,
  // t = 0.012 / (√7e-5 / √5) = 3.20713…, df 4; the closed form of the df = 4 CDF gives the
  // two-sided p = 0.0326779…
  const std::vector<double> a = {0.85, 0.86, 0.84, 0.87, 0.85};
  const std::vector<double> b = {0.84, 0.85, 0.84, 0.85, 0.83};
  const PairedTTest test = paired_t_test(a, b);
  EXPECT_EQ(test.n, 5);
  EXPECT_DOUBLE_EQ(test.df, 4);
  EXPECT_NEAR(test.mean_difference, 0.012, 1e-15);
  EXPECT_NEAR(test.t, 0.012 / (std::sqrt(7e-5) / std::sqrt(5.0)), 1e-9);
  EXPECT_NEAR(test.p_value, 0.0326779233368, 1e-9);
  EXPECT_TRUE(test.significant());
  EXPECT_FALSE(test.significant(0.01));
  // Reversed, the same p and the opposite sign.
  const PairedTTest back = paired_t_test(b, a);
  EXPECT_NEAR(back.t, -test.t, 1e-12);
  EXPECT_NEAR(back.p_value, test.p_value, 1e-15);
}

TEST(Stats, PairedTTestDegenerateCases) {
  EXPECT_EQ(paired_t_test({0.9, 0.8}, {0.9, 0.8}).p_value, 1.0);  // identical: a tie
  const PairedTTest constant = paired_t_test({1.5, 2.5, 3.5}, {1, 2, 3});
  EXPECT_EQ(constant.p_value, 0.0);  // the same gain every time
  EXPECT_TRUE(std::isinf(constant.t) && constant.t > 0);
  EXPECT_FALSE(paired_t_test({0.9}, {0.1}).significant());  // one pair: no test
  EXPECT_THROW(paired_t_test({0.9, 0.8}, {0.9}), std::invalid_argument);
}

}  // namespace
}  // namespace polymargin::engine
