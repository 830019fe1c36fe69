// Out-of-core train/test and k-fold splits of a row stream. Row r (0-based, counted over the whole
// input) goes to the test part iff split_uniform(seed, r) < test_fraction, and to fold
// fold_of(seed, r, k) = floor(split_uniform(seed, r) · k); both are hashes of (seed, r), so the
// split needs no memory, no second pass, and is the same whatever the batch sizes or threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "io/text_writer.h"

namespace polymargin::io {

/// A uniform deviate in [0, 1) that is a fixed function of (seed, row).
double split_uniform(std::uint64_t seed, std::uint64_t row);
/// The fold (in [0, k)) of `row`: floor(split_uniform(seed, row) · k). Requires k ≥ 1.
int fold_of(std::uint64_t seed, std::uint64_t row, int k);

struct SplitOptions {
  double test_fraction = 0.2;  // train/test mode: share of rows sent to the test file
  int folds = 0;               // ≥ 2: write this many fold files instead of train/test
  std::uint64_t seed = 1;
  Compression compression = Compression::kNone;
};

/// Throws UsageError naming the first invalid field.
void validate_split_options(const SplitOptions& options);

/// Files a split writes for `prefix`: PREFIX.train.svm and PREFIX.test.svm, or PREFIX.fold<i>.svm,
/// each followed by the compression's extension (".zst", ".gz").
std::vector<std::string> split_output_paths(const std::string& prefix, const SplitOptions& options);

struct SplitCounts {
  std::uint64_t rows = 0;
  std::uint64_t train_rows = 0;          // train/test mode
  std::uint64_t test_rows = 0;           // train/test mode
  std::vector<std::uint64_t> fold_rows;  // fold mode, one count per fold
  std::vector<std::map<float, std::uint64_t>> fold_labels;  // fold mode: each fold's label counts
  std::vector<std::string> outputs;      // paths written, in split_output_paths order
};

/// Streams rows into the split's files. Rows are numbered in append order across calls.
class Splitter {
 public:
  /// Creates the output files (under temporary names until finish()).
  Splitter(const std::string& prefix, const SplitOptions& options);
  ~Splitter();
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  /// Appends every row of `rows` to its part.
  void append(const CsrView& rows);
  /// Flushes and renames every file into place; returns the counts.
  SplitCounts finish();

 private:
  SplitOptions options_;
  std::vector<std::unique_ptr<TextWriter>> writers_;  // train, test; or one per fold
  SplitCounts counts_;
};

}  // namespace polymargin::io
