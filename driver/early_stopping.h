// `--epochs auto` (ldm, svm): the number of passes judged on rows the learner has not trained on,
// as scikit-learn's SGD does with early_stopping=True (docs/algorithms.md §1.10).
//
// A seeded set of whole blocks, about --validation-fraction of the rows, is held out of training
// (HeldOut); after every pass the current averaged model is scored on them, and the run stops once
// --n-iter-no-change passes in a row have not lowered the held-out loss below the best so far by
// more than --tol of it, or at --max-epochs (StoppingRule). The model of the best pass is kept.
// Data of too few blocks for the fraction (a UCI set is one block) are re-blocked in memory first,
// each block cut into equal parts, so that whole blocks still make the fraction.
//
// With --no-early-stopping nothing is held out: the passes go on until the training objective's
// own convergence test (driver::Convergence) has held for --n-iter-no-change passes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/shards.h"

namespace polymargin::driver {

/// The defaults of the options of `--epochs auto`.
inline constexpr double kDefaultValidationFraction = 0.1;
inline constexpr int kDefaultNoChangePasses = 3;
inline constexpr int kDefaultMaxEpochs = 50;

/// The rows held out of a run's training: whole blocks of the job's set, or of a copy of it in
/// memory cut into smaller blocks (data of too few blocks for the fraction).
class HeldOut {
 public:
  /// Chooses the blocks: with B blocks, k = round(fraction · B) of them in a seeded order (by
  /// `seed`), when 1 ≤ k < B and k/B lies within half the fraction of it; else the rows are first
  /// re-blocked in memory, each block cut into `parts()` equal parts, so that it does. `data`
  /// names the rows in messages; UsageError naming --validation-fraction when no part of the rows
  /// can be held out (fewer rows than it takes).
  HeldOut(const io::ShardSet& all, double fraction, std::uint64_t seed, int threads,
          const std::string& data);

  /// The set both parts' blocks belong to: the job's, or its copy in smaller blocks.
  const io::ShardSet& set() const { return copy_ ? *copy_ : *all_; }
  /// The blocks trained on and the blocks held out (global block numbers of set()).
  const std::vector<std::uint32_t>& train_blocks() const { return train_blocks_; }
  const std::vector<std::uint32_t>& held_blocks() const { return held_blocks_; }
  /// The counts of the rows trained on: set()'s manifest less the held-out rows (rows, nnz, label
  /// counts, blocks).
  const io::Manifest& train_manifest() const { return train_manifest_; }
  std::uint64_t held_rows() const { return held_rows_; }
  /// Each block of the data cut into this many (1: the data's own blocks); a window then takes
  /// that many times --window-blocks blocks, to hold the rows it holds without a hold-out.
  std::uint32_t parts() const { return parts_; }
  /// {validation_fraction, held_out_rows, held_out_blocks, blocks, reblocked} for the reports.
  nlohmann::ordered_json json() const;

 private:
  const io::ShardSet* all_;
  std::optional<io::ShardSet> copy_;
  std::vector<std::uint32_t> train_blocks_, held_blocks_;
  io::Manifest train_manifest_;
  std::uint64_t held_rows_ = 0;
  std::uint32_t parts_ = 1;
  double fraction_ = 0;
};

/// When an auto run stops: after each pass, its score (a loss: lower is better) on the held-out
/// rows, or with --no-early-stopping its training objective. From `first_judged` on, a pass
/// improves when it lowers the best score so far by more than `tol` of it; the run stops once
/// `patience` passes in a row did not, or after `max_passes`. The best pass is the judged one of
/// the lowest score (the first of equals), improving or not.
struct StoppingRule {
  double tol = 1e-3;
  int patience = kDefaultNoChangePasses;
  std::uint64_t max_passes = kDefaultMaxEpochs;
  /// The first pass (1-based) judged: the passes before it are scored and recorded but are
  /// neither the best nor counted without progress (the first averaged pass, or the step floor's).
  std::uint64_t first_judged = 1;

  std::optional<double> best;     // the lowest score so far
  std::uint64_t best_pass = 0;    // its pass, 1-based (0: none yet)
  std::uint64_t passes = 0;       // passes judged
  int without_progress = 0;       // passes in a row that did not improve
  std::vector<double> scores;     // every pass's score
  std::vector<double> accuracies; // and its held-out accuracy (early stopping only)

  /// The score of the next pass; returns true when that pass is the best so far (keep its model).
  bool pass_end(double score, std::optional<double> accuracy = std::nullopt);
  /// Whether the run stops now: `patience` passes without progress, or max_passes made.
  bool stop() const;
  /// Whether it stopped on its own test rather than at max_passes.
  bool stopped_early() const { return passes < max_passes && stop(); }
};

}  // namespace polymargin::driver
