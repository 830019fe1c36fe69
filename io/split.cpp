#include "io/split.h"

#include <algorithm>
#include <cmath>

#include "engine/errors.h"
#include "io/generator.h"
#include "engine/random.h"

namespace polymargin::io {

double split_uniform(std::uint64_t seed, std::uint64_t row) {
  return unit_interval(derive_seed(seed, row));
}

int fold_of(std::uint64_t seed, std::uint64_t row, int k) {
  const int fold = static_cast<int>(split_uniform(seed, row) * k);
  return std::min(fold, k - 1);  // guards against rounding of u · k up to k
}

void validate_split_options(const SplitOptions& options) {
  if (options.folds == 0) {
    if (!(options.test_fraction >= 0 && options.test_fraction <= 1))
      throw ConfigError("test_fraction", "must be between 0 and 1 (got " +
                                             message_number(options.test_fraction) + ")");
  } else if (options.folds < 2 || options.folds > 1000) {
    throw ConfigError("folds",
                      "must be between 2 and 1000 (got " + std::to_string(options.folds) + ")");
  }
}

std::vector<std::string> split_output_paths(const std::string& prefix,
                                            const SplitOptions& options) {
  const std::string ext = ".svm" + compression_extension(options.compression);
  if (options.folds == 0) return {prefix + ".train" + ext, prefix + ".test" + ext};
  std::vector<std::string> paths;
  paths.reserve(static_cast<std::size_t>(options.folds));
  for (int i = 0; i < options.folds; ++i)
    paths.push_back(prefix + ".fold" + std::to_string(i) + ext);
  return paths;
}

Splitter::Splitter(const std::string& prefix, const SplitOptions& options) : options_(options) {
  validate_split_options(options_);
  TextWriterOptions text;
  text.compression = options_.compression;
  counts_.outputs = split_output_paths(prefix, options_);
  for (const std::string& path : counts_.outputs)
    writers_.push_back(std::make_unique<TextWriter>(path, text));
  if (options_.folds > 0) {
    counts_.fold_rows.assign(static_cast<std::size_t>(options_.folds), 0);
    counts_.fold_labels.resize(static_cast<std::size_t>(options_.folds));
  }
}

Splitter::~Splitter() = default;

void Splitter::append(const CsrView& rows) {
  for (std::size_t r = 0; r < rows.rows; ++r) {
    const std::uint64_t row = counts_.rows++;
    if (options_.folds > 0) {
      const int fold = fold_of(options_.seed, row, options_.folds);
      ++counts_.fold_rows[static_cast<std::size_t>(fold)];
      ++counts_.fold_labels[static_cast<std::size_t>(fold)][rows.labels[r]];
      writers_[static_cast<std::size_t>(fold)]->write_row(rows, r);
    } else if (split_uniform(options_.seed, row) < options_.test_fraction) {
      ++counts_.test_rows;
      writers_[1]->write_row(rows, r);
    } else {
      ++counts_.train_rows;
      writers_[0]->write_row(rows, r);
    }
  }
}

SplitCounts Splitter::finish() {
  for (auto& w : writers_) w->finish();
  return counts_;
}

}  // namespace polymargin::io
