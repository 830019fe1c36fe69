#include "engine/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace polymargin::engine {

double auc(const std::vector<double>& scores, const std::vector<std::int8_t>& signs) {
  const std::size_t n = scores.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return scores[a] < scores[b]; });
  // Rank-sum (Mann–Whitney U): sum of the 1-based ranks of the positives, ties get their average rank.
  double positive_rank_sum = 0;
  std::uint64_t positives = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of i+1 .. j
    for (std::size_t k = i; k < j; ++k) {
      if (signs[order[k]] > 0) {
        positive_rank_sum += average_rank;
        ++positives;
      }
    }
    i = j;
  }
  const std::uint64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

BinaryMetrics binary_metrics(const std::vector<double>& scores,
                             const std::vector<std::int8_t>& signs) {
  if (scores.size() != signs.size())
    throw std::invalid_argument("binary_metrics: scores and labels differ in length");
  BinaryMetrics m;
  m.rows = scores.size();
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const bool positive = signs[i] > 0;
    const bool predicted_positive = scores[i] > 0;
    (positive ? m.positives : m.negatives)++;
    if (positive)
      (predicted_positive ? m.true_positives : m.false_negatives)++;
    else
      (predicted_positive ? m.false_positives : m.true_negatives)++;
    const double margin = positive ? scores[i] : -scores[i];
    sum += margin;
    sum_sq += margin * margin;
  }
  if (m.rows == 0) return m;
  const double n = static_cast<double>(m.rows);
  m.accuracy = static_cast<double>(m.true_positives + m.true_negatives) / n;
  m.error_rate = 1 - m.accuracy;
  m.auc = auc(scores, signs);
  const auto ratio = [](std::uint64_t a, std::uint64_t b) {
    return b == 0 ? 0.0 : static_cast<double>(a) / static_cast<double>(b);
  };
  m.precision = ratio(m.true_positives, m.true_positives + m.false_positives);
  m.recall = ratio(m.true_positives, m.positives);
  m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : 0;
  m.margin_mean = sum / n;
  m.margin_variance = std::max(0.0, sum_sq / n - m.margin_mean * m.margin_mean);
  return m;
}

MarginCurve margin_curve(const std::vector<double>& margins, double lo, double hi, int points) {
  if (points < 2 || !(hi > lo)) throw std::invalid_argument("margin_curve: need points ≥ 2, hi > lo");
  std::vector<double> sorted = margins;
  std::sort(sorted.begin(), sorted.end());
  MarginCurve curve;
  curve.thresholds.resize(points);
  curve.cumulative.resize(points);
  const double n = sorted.empty() ? 1.0 : static_cast<double>(sorted.size());
  for (int p = 0; p < points; ++p) {
    const double theta = lo + (hi - lo) * p / (points - 1);
    const auto count = std::upper_bound(sorted.begin(), sorted.end(), theta) - sorted.begin();
    curve.thresholds[p] = theta;
    curve.cumulative[p] = static_cast<double>(count) / n;
  }
  return curve;
}

}  // namespace polymargin::engine
