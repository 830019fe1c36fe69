// A trained linear classifier: score(x) = w·(s∘x) + bias_weight·bias_value, where s is the optional
// per-feature scaling learnt from the training data (1 / max|x_f|, the papers' [0,1] protocol).
// With --normalize l2 the scaled row is divided by its length: w·(s∘x)/‖s∘x‖ + bias (the norm over
// the features the model knows, the bias not in it).
// Immutable once trained; score() is const and thread-safe.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/classifier.h"
#include "engine/csr.h"
#include "engine/sparse.h"

namespace polymargin::engine {

/// algorithm "ldm" or "svm"; weights.size() == max_index + 1 (raw feature ids).
struct LinearModel : Classifier {
  std::vector<float> scale;      // empty: no scaling; else max_index + 1 multipliers
  sparse::WeightVector weights;  // on 2 MB pages: scoring gathers at random over hundreds of MB
  double bias_value = 0;         // B of --bias (0: no bias feature)
  double bias_weight = 0;
  bool normalize_l2 = false;  // rows divided by ‖s∘x‖ before the dot product

  /// Score of row r. Features the model does not know (knows()) are ignored and counted in
  /// *ignored if given.
  double score(const CsrView& rows, std::size_t r, std::uint64_t* ignored = nullptr) const {
    return normalize_l2 ? row_score<true>(rows, r, ignored) : row_score<false>(rows, r, ignored);
  }

  /// Scores every row of `rows` into scores[0, rows.rows), in parallel (oneTBB); each score is
  /// computed exactly as score() does, so the result does not depend on the thread count.
  /// Returns the number of ignored non-zeros (features the model does not know).
  std::uint64_t score_batch(const CsrView& rows, double* scores) const override;

  /// Non-zero weights by raw feature id (with their scale, if any).
  std::string to_text() const override;
  nlohmann::json to_json() const override;

 private:
  template <bool kNormalize>
  double row_score(const CsrView& rows, std::size_t r, std::uint64_t* ignored) const {
    const std::uint32_t b = rows.offsets[r], e = rows.offsets[r + 1];
    double s = kNormalize ? 0.0 : bias_weight * bias_value, squares = 0;
    std::uint64_t skipped = 0;
    for (std::uint32_t k = b; k < e; ++k) {
      const std::uint32_t f = rows.indices[k];
      if (!knows(f)) {
        ++skipped;
        continue;
      }
      if constexpr (kNormalize) {  // as the reader does it: the scaled value in float
        float x = rows.values ? rows.values[k] : 1.0f;
        if (!scale.empty()) x *= scale[f];
        s += weights[f] * x;
        squares += static_cast<double>(x) * x;
      } else {
        double x = rows.values ? rows.values[k] : 1.0;
        if (!scale.empty()) x *= scale[f];
        s += weights[f] * x;
      }
    }
    if (ignored) *ignored += skipped;
    if constexpr (kNormalize)
      return (squares > 0 ? s / std::sqrt(squares) : s) + bias_weight * bias_value;
    return s;
  }
};

}  // namespace polymargin::engine
