// A trained kernel classifier (kernel LDM, Twin LDM, CMM): the training rows it needs ("vectors",
// in the scaled space the learner saw) and one or two kernel expansions
//   f_k(x) = Σ_i coefficients[k][i] · k(v_i, s∘x) + intercepts[k],
// where s∘x divides each feature by its training max |value| exactly as the reader does (and, with
// normalize_l2, the result by its Euclidean length, as engine::normalize_rows_l2 does).
// Decision rules:
//   kSign          score = f_0(x)                                   (kernel LDM, CMM)
//   kNearerPlane   score = |f_1(x)|/n_1 − |f_0(x)|/n_0,  n_k = plane_norms[k]
//                  (Twin LDM: +1 iff x is nearer plane 0, the positive class's plane)
// A linear-kernel model may hold unit rows e_f as vectors, so that f_0 = Σ_f w_f x_f is an exact
// double-precision linear function (Twin LDM's primal planes). Immutable; scoring is const and
// thread-safe, and a row's score does not depend on the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/classifier.h"
#include "engine/kernel.h"

namespace polymargin::engine {

struct KernelModel : Classifier {
  enum class Decision { kSign, kNearerPlane };

  KernelSpec kernel;
  std::vector<float> maxabs;  // empty: rows are used as they are; else max_index + 1 divisors
  bool normalize_l2 = false;  // then each row divided by its L2 norm (engine/normalize.h)
  RowSet vectors;
  std::vector<std::vector<double>> coefficients;  // one per expansion, vectors.size() each
  std::vector<double> intercepts;                 // one per expansion
  Decision decision = Decision::kSign;
  std::vector<double> plane_norms;  // kNearerPlane: n_0, n_1

  /// Score of row r; features beyond max_index are ignored and counted in *ignored.
  double score(const CsrView& rows, std::size_t r, std::vector<double>& dense,
               std::uint64_t* ignored) const;
  std::uint64_t score_batch(const CsrView& rows, double* scores) const override;

  std::string to_text() const override;
  nlohmann::json to_json() const override;

  /// Throws std::invalid_argument when the parts do not fit together (used by the loader).
  void check() const;
};

std::string decision_name(KernelModel::Decision decision);

}  // namespace polymargin::engine
