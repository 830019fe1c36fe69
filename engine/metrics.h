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

/// A binary evaluation gathered a row at a time: each class's scores, 8 bytes a row (the exact AUC
/// sorts them), and the counts and margin sums of BinaryMetrics as the rows come.
class BinaryScores {
 public:
  /// Room for the rows of each class, when they are known before scoring (a data set's label
  /// counts): no vector grows past what it holds.
  void reserve(std::uint64_t positives, std::uint64_t negatives);
  void add(double score, int sign);
  /// Every metric of the rows added; sorts each class's scores in place. O(n log n) for the AUC.
  BinaryMetrics metrics();
  /// After metrics(): the margins y·s of every row, ascending (the scores are moved out).
  std::vector<double> take_sorted_margins();

 private:
  std::vector<double> positive_, negative_;
  BinaryMetrics m_;
  double sum_ = 0, sum_sq_ = 0;
};

/// Computes every metric from scores and ±1 labels (same length), as BinaryScores does.
BinaryMetrics binary_metrics(const std::vector<double>& scores, const std::vector<std::int8_t>& signs);

/// Area under the ROC curve by the rank-sum formula, average ranks for tied scores.
double auc(const std::vector<double>& scores, const std::vector<std::int8_t>& signs);

/// The cumulative margin distribution (LDM paper, Figure 1): for each of `points` thresholds θ evenly
/// spaced over [lo, hi], the fraction of rows with margin y·s ≤ θ.
struct MarginCurve {
  std::vector<double> thresholds;
  std::vector<double> cumulative;  // non-decreasing, in [0, 1]
};
/// `margins` in any order (ascending ones are used as they are, others sorted in a copy).
MarginCurve margin_curve(const std::vector<double>& margins, double lo, double hi, int points);

}  // namespace polymargin::engine
