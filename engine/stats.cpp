#include "engine/stats.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace polymargin::engine {

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double sample_std(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = mean(values);
  double squares = 0;
  for (double v : values) squares += (v - m) * (v - m);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

namespace {

// The continued fraction of I_x(a, b) (the form that converges fast for x < (a + 1)/(a + b + 2)),
// evaluated by the modified Lentz method; returns the fraction without the prefactor.
double beta_continued_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEpsilon = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::abs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    // Even step: d_{2m} = m(b − m)x / ((a + 2m − 1)(a + 2m)).
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    // Odd step: d_{2m+1} = −(a + m)(a + b + m)x / ((a + 2m)(a + 2m + 1)).
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::abs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < kEpsilon) return h;
  }
  return h;  // not reached for the a, b of a t-test; the last convergent is the best estimate
}

}  // namespace

double regularized_incomplete_beta(double a, double b, double x) {
  if (!(a > 0) || !(b > 0) || !(x >= 0 && x <= 1))
    throw std::domain_error("regularized_incomplete_beta: needs a, b > 0 and 0 ≤ x ≤ 1");
  if (x == 0) return 0;
  if (x == 1) return 1;
  // x^a (1 − x)^b / B(a, b), through log-gamma to stay finite for large a, b.
  const double log_front = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                           b * std::log1p(-x);
  const double front = std::exp(log_front);
  // Use the symmetry I_x(a, b) = 1 − I_{1−x}(b, a) where the fraction converges faster.
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

double student_t_cdf(double t, double df) {
  if (!(df > 0)) throw std::domain_error("student_t_cdf: needs df > 0");
  if (std::isnan(t)) return t;
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  // P(|T| > |t|) = I_{df/(df + t²)}(df/2, 1/2).
  const double tail = regularized_incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail / 2 : tail / 2;
}

PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("paired_t_test: samples differ in length");
  PairedTTest test;
  test.n = static_cast<int>(a.size());
  std::vector<double> differences(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) differences[i] = a[i] - b[i];
  test.mean_difference = mean(differences);
  if (test.n < 2) return test;
  test.df = test.n - 1;
  const double sd = sample_std(differences);
  if (sd == 0) {
    // Identical differences: no spread to test against. Equal samples are a tie; a constant
    // non-zero difference is as significant as a test can say.
    if (test.mean_difference == 0) return test;
    test.t = std::copysign(std::numeric_limits<double>::infinity(), test.mean_difference);
    test.p_value = 0;
    return test;
  }
  test.t = test.mean_difference / (sd / std::sqrt(static_cast<double>(test.n)));
  // Two-sided p = P(|T| > |t|) = I_{df/(df + t²)}(df/2, 1/2), without the cancellation of 1 − cdf.
  test.p_value = regularized_incomplete_beta(test.df / 2, 0.5, test.df / (test.df + test.t * test.t));
  return test;
}

}  // namespace polymargin::engine
