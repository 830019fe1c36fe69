// A trained Convex Polytope Machine (Kantchelian et al., NIPS 2014; docs/algorithms.md §2): K
// linear faces f(x) = max_k (W_k·x + b_k); the "outer" class lies outside the polytope {f ≤ 0},
// the other class inside. Double-sided (the paper's Table 1): one CPM with outer class +1 (score
// F₊) and one with outer class −1 (F₋); the decision is D(x) = F₊(x) − F₋(x). Multiclass: one
// double-sided CPM per pair of classes a < b (a ↦ +1), majority vote with seeded tie-breaking.
// The model alone: what scoring, model files and `eval` need. Its trainer is engine/cpm.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/classifier.h"
#include "engine/csr.h"

namespace polymargin::engine {

/// Signed feature hashing (off when bits == 0): raw feature id f → bucket and sign ±1, both from
/// one splitmix64 mix of f, so colliding features tend to cancel rather than add up.
struct FeatureHash {
  int bits = 0;
  std::uint32_t bucket(std::uint32_t f) const;
  float sign(std::uint32_t f) const;
  /// The weight slot of feature f; with hashing on, also multiplies the value v by f's sign.
  std::uint64_t slot(std::uint32_t f, double& v) const {
    if (bits == 0) return f;
    v *= sign(f);
    return bucket(f);
  }
};

/// One trained CPM (one side): K faces over `slots` weight slots (max_index + 1, or 2^bits hashed).
struct CpmFaces {
  int outer = 1;  // the raw-label sign (+1 / −1) of this side's outer class
  int faces = 0;
  std::uint64_t slots = 0;
  std::vector<float> weights;      // feature-major: weights[slot·faces + k]
  std::vector<double> intercepts;  // faces entries
};

/// A trained CPM: binary (one or two sides) or one-vs-one multiclass (one binary machine per pair).
struct CpmModel : Classifier {
  struct Binary {
    double positive = 1, negative = -1;  // raw labels: positive ↦ +1 of the sides
    std::vector<CpmFaces> sides;         // outer = +1 and/or outer = −1
  };
  FeatureHash hash;
  // Empty: no scaling; else the training data's max |x_f| (max_index + 1 entries): values are
  // divided by it exactly as the reader divided them in training (float division).
  std::vector<float> maxabs;
  bool normalize_l2 = false;     // rows divided by their length after the maxabs scaling
  std::vector<Binary> machines;  // binary: one; multiclass: pairs (a < b) in lexicographic order
  std::uint64_t vote_seed = 1;   // multiclass tie-breaking

  /// Binary: D(x) = F₊ − F₋ (one side only: F₊, or −F₋). Multiclass: the predicted class's share
  /// of the votes.
  std::uint64_t score_batch(const CsrView& rows, double* scores) const override;
  std::uint64_t predict_batch(const CsrView& rows, double* scores,
                              double* predicted) const override;
  std::string to_text() const override;
  nlohmann::json to_json() const override;
  /// Per side, the entropy (nats) and perplexity of the faces' assignment of the side's
  /// outer-class rows, and each face's share of them; one-vs-one models: per pair, and the mean
  /// and minimum entropy over the pairs.
  std::unique_ptr<EvalDetails> eval_details() const override;

  /// F(x) = max_k(W_k·x + b_k) of side `side` of machine `m` for row r; *face gets the argmax.
  double side_score(std::size_t m, std::size_t side, const CsrView& rows, std::size_t r,
                    double* work, int* face = nullptr) const;
  /// The binary decision value of machine m for row r.
  double machine_score(std::size_t m, const CsrView& rows, std::size_t r, double* work) const;
  int max_faces() const;
};

}  // namespace polymargin::engine
