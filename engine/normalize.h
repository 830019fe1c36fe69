// Row normalisation (--normalize l2): each row divided by its Euclidean norm, after the per-feature
// scaling, so every row has length 1. The reader applies it to the rows it hands a learner (no pass
// of its own); the models apply the same rule to the rows they score.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/csr.h"

namespace polymargin::engine {

/// A value as the per-feature scaling hands it to the learners: x / max|x_f| over the training
/// rows; a feature those rows never had (max 0) counts for nothing. Empty `maxabs`: no scaling.
inline float maxabs_scaled(float x, const std::vector<float>& maxabs, std::uint32_t f) {
  if (maxabs.empty()) return x;
  return maxabs[f] > 0 ? x / maxabs[f] : 0.0f;
}

/// The norm a row is divided by: sqrt(Σ v²) summed in double; 0 for a row of no non-zero.
inline double l2_norm(const float* values, std::size_t n) {
  double sum = 0;
  for (std::size_t k = 0; k < n; ++k) sum += static_cast<double>(values[k]) * values[k];
  return std::sqrt(sum);
}

/// Divides the values of every row of `rows` by the row's L2 norm (rows of norm 0 stay as they
/// are). Rows without explicit values (all ones) get them first.
void normalize_rows_l2(CsrBuffer& rows);

}  // namespace polymargin::engine
