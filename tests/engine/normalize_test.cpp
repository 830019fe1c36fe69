#include "engine/normalize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/linear_model.h"

namespace polymargin::engine {
namespace {

// A few sparse rows with random values (one row of all ones, one empty), as CSR.
CsrBuffer random_rows(std::uint32_t features, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  CsrBuffer b;
  b.has_values = true;
  for (int r = 0; r < 20; ++r) {
    b.labels.push_back(r % 2 ? 1.0f : -1.0f);
    if (r != 7)
      for (std::uint32_t f = 0; f < features; ++f)
        if (rng() % 3 == 0) {
          b.indices.push_back(f);
          b.values.push_back(r == 3 ? 1.0f : value(rng));
        }
    b.offsets.push_back(static_cast<std::uint32_t>(b.indices.size()));
  }
  return b;
}

TEST(Normalize, RowsHaveUnitLengthAndKeepTheirDirection) {
  const CsrBuffer original = random_rows(12, 1);
  CsrBuffer rows = original;
  normalize_rows_l2(rows);
  for (std::size_t r = 0; r < rows.rows(); ++r) {
    double squares = 0, original_squares = 0;
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
      squares += double(rows.values[k]) * rows.values[k];
      original_squares += double(original.values[k]) * original.values[k];
    }
    if (original_squares == 0) {  // the empty row stays empty
      EXPECT_EQ(rows.offsets[r], rows.offsets[r + 1]);
      continue;
    }
    EXPECT_NEAR(squares, 1.0, 1e-6) << "row " << r;
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
      EXPECT_NEAR(rows.values[k], original.values[k] / std::sqrt(original_squares), 1e-6);
  }
}

TEST(Normalize, RowsWithoutValuesGetThem) {
  CsrBuffer rows;
  rows.labels = {1.0f};
  rows.indices = {0, 2, 5, 9};
  rows.offsets = {0, 4};
  normalize_rows_l2(rows);
  ASSERT_TRUE(rows.has_values);
  for (const float v : rows.values) EXPECT_FLOAT_EQ(v, 0.5f);
}

// A normalised linear model scores w·(s∘x)/‖s∘x‖ + b·B, against a dense float64 reference; the
// features beyond max_index are neither scored nor in the norm.
TEST(Normalize, LinearModelScoresTheNormalisedRow) {
  const std::uint32_t features = 12;
  const CsrBuffer rows = random_rows(features, 2);
  LinearModel model;
  model.index_base = 0;            // ids from 0, as random_rows writes them
  model.max_index = features - 3;  // the last two features are unknown to the model
  model.normalize_l2 = true;
  model.bias_value = 1;
  model.bias_weight = -0.25;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> weight(-1, 1);
  model.weights.resize(model.max_index + 1);
  model.scale.resize(model.max_index + 1);
  for (std::uint32_t f = 0; f <= model.max_index; ++f) {
    model.weights[f] = weight(rng);
    model.scale[f] = static_cast<float>(0.5 + std::abs(weight(rng)));
  }
  const CsrView view = rows.view();
  std::vector<double> scores(view.rows);
  model.score_batch(view, scores.data());
  for (std::size_t r = 0; r < view.rows; ++r) {
    std::vector<double> x(features, 0.0);
    for (std::uint32_t k = view.offsets[r]; k < view.offsets[r + 1]; ++k)
      if (view.indices[k] <= model.max_index)
        x[view.indices[k]] = double(view.values[k]) * model.scale[view.indices[k]];
    double norm = 0, dot = 0;
    for (std::uint32_t f = 0; f <= model.max_index; ++f) norm += x[f] * x[f];
    norm = std::sqrt(norm);
    for (std::uint32_t f = 0; f <= model.max_index; ++f) dot += model.weights[f] * x[f];
    const double expected = (norm > 0 ? dot / norm : 0.0) + model.bias_weight * model.bias_value;
    EXPECT_NEAR(scores[r], expected, 1e-6) << "row " << r;
  }
}

}  // namespace
}  // namespace polymargin::engine
