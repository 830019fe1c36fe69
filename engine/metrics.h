// Evaluation of a binary classifier from its scores: accuracy, AUC, confusion matrix and the
// margin distribution (γ_i = y_i·s_i), whose mean and variance are what LDM optimises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace polymargin::engine {

struct BinaryMetrics {
  std::uint64_t rows = 0;
  std::uint64_t positives = 0;  // rows with y = +1
  std::uint64_t negatives = 0;
  // Confusion matrix; predicted +1 iff score > 0.
  std::uint64_t true_positives = 0;
  std::uint64_t false_positives = 0;
  std::uint64_t true_negatives = 0;
  std::uint64_t false_negatives = 0;
  double accuracy = 0;
  double error_rate = 0;
  double auc = 0;  // area under the ROC curve, ties counted one half; 0.5 when a class is absent
  double precision = 0;
  double recall = 0;
  double f1 = 0;
  double margin_mean = 0;      // mean of y·s
  double margin_variance = 0;  // population variance of y·s (the paper's γ̂ is twice this)
};

/// Computes every metric from scores and ±1 labels (same length). O(n log n) for the AUC.
BinaryMetrics binary_metrics(const std::vector<double>& scores, const std::vector<std::int8_t>& signs);

/// Area under the ROC curve by the rank-sum formula, average ranks for tied scores.
double auc(const std::vector<double>& scores, const std::vector<std::int8_t>& signs);

/// The cumulative margin distribution (LDM paper, Figure 1): for each of `points` thresholds θ evenly
/// spaced over [lo, hi], the fraction of rows with margin y·s ≤ θ.
struct MarginCurve {
  std::vector<double> thresholds;
  std::vector<double> cumulative;  // non-decreasing, in [0, 1]
};
MarginCurve margin_curve(const std::vector<double>& margins, double lo, double hi, int points);

}  // namespace polymargin::engine
