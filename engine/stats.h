// Summary statistics and the paired t-test of the experiment tables (the papers mark a method •/◦
// when it is significantly better/worse than the SVM by a paired t-test at 95%). The Student t
// distribution is computed here from the regularized incomplete beta function, so the test needs no
// statistics library.
#pragma once

#include <vector>

namespace polymargin::engine {

/// Arithmetic mean; 0 for no values.
double mean(const std::vector<double>& values);
/// Sample standard deviation (divisor n − 1); 0 for fewer than two values.
double sample_std(const std::vector<double>& values);

/// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x in [0, 1].
double regularized_incomplete_beta(double a, double b, double x);
/// P(T ≤ t) for T Student-t distributed with `df` > 0 degrees of freedom.
double student_t_cdf(double t, double df);

struct PairedTTest {
  int n = 0;                 // pairs
  double mean_difference = 0;  // mean of a[i] − b[i]
  double t = 0;              // mean_difference / (sd / √n); ±inf when sd = 0 and the mean is not
  double df = 0;             // n − 1
  double p_value = 1;        // two-sided
  /// True when p < alpha (two-sided); never with fewer than two pairs.
  bool significant(double alpha = 0.05) const { return n >= 2 && p_value < alpha; }
};

/// Two-sided paired t-test of a against b (equal lengths, pairs matched by index). With fewer than
/// two pairs, or all differences zero, p = 1.
PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace polymargin::engine
