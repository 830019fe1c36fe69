// What every trained model is to the rest of polymargin: a description (algorithm, effective
// configuration, labels, feature space) and a const, thread-safe scorer. `predict`, `eval`,
// `export` and `experiment` work through this interface only, so each learner (linear LDM/SVM,
// CPM, kernel LDM, ...) plugs in by deriving from Classifier and giving io/model_file a loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/csr.h"

namespace polymargin::engine {

/// Maps the two raw labels of a binary data set to ±1.
struct LabelMap {
  double negative = -1;
  double positive = 1;
  /// +1 for the positive label, -1 for the negative one; any other value is not binary.
  int sign(float label) const { return label == static_cast<float>(positive) ? 1 : -1; }
  bool is_binary_label(float label) const {
    return label == static_cast<float>(positive) || label == static_cast<float>(negative);
  }
};

/// Model-specific statistics gathered while `eval` scores a data set (e.g. which face of a CPM
/// scores each row). add() sees every batch once, in data order; json() is reported under the
/// model's "details" key and printed as `key value` lines in the text report.
class EvalDetails {
 public:
  virtual ~EvalDetails() = default;
  virtual void add(const CsrView& rows) = 0;
  virtual nlohmann::json json() const = 0;
};

/// The description every model file carries, whatever the learner.
struct ModelInfo {
  std::string algorithm;        // "ldm", "svm", "cpm", ...
  nlohmann::json config;        // effective training configuration, seed included
  LabelMap labels;              // binary models: the two raw labels
  std::vector<double> classes;  // multiclass models: every raw label, ascending; empty if binary
  int index_base = 1;
  std::uint32_t max_index = 0;  // largest raw feature id the model has weights for
  std::uint64_t features = 0;   // LIBSVM feature count of the training data

  bool multiclass() const { return !classes.empty(); }
  /// A feature id the model has a weight for: from index_base to max_index (id 0 of data scored by
  /// a 1-based model is a feature it never saw, as one beyond max_index is).
  bool knows(std::uint32_t f) const {
    return f <= max_index && f >= static_cast<std::uint32_t>(index_base);
  }
};

class Classifier : public ModelInfo {
 public:
  virtual ~Classifier() = default;

  /// Binary models: the decision value f(x) of every row of `rows` into scores[0, rows.rows);
  /// f > 0 predicts labels.positive. Multiclass models: a confidence of the predicted class.
  /// Each row's score must not depend on the thread count. Returns the number of non-zeros
  /// ignored because their feature lies beyond max_index.
  virtual std::uint64_t score_batch(const CsrView& rows, double* scores) const = 0;

  /// The predicted raw label of every row (and its score, as score_batch). The default serves
  /// binary models: labels.positive where the score is > 0, else labels.negative.
  virtual std::uint64_t predict_batch(const CsrView& rows, double* scores, double* predicted) const;

  /// `polymargin export`: the whole model for people (text) and other tools (JSON).
  virtual std::string to_text() const = 0;
  virtual nlohmann::json to_json() const = 0;

  /// Statistics `eval` reports besides accuracy and margins; none by default.
  virtual std::unique_ptr<EvalDetails> eval_details() const { return nullptr; }

 protected:
  /// The ModelInfo fields as JSON / text lines, for to_json() and to_text() of derived models.
  nlohmann::json info_json() const;
  std::string info_text() const;
  /// A scaled model's divisors max|x_f| other than 1, by feature id from index_base (an absent
  /// id: 1; 0: no training row had the feature).
  nlohmann::json maxabs_json(const std::vector<float>& maxabs) const;
};

}  // namespace polymargin::engine
