#include "io/split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "engine/errors.h"
#include "io/generator.h"
#include "tests/io/decoded_file.h"

namespace polymargin::io {
namespace {

using testing::decoded_file;
using testing::file_bytes;
using testing::TempDir;

CsrBuffer sample(std::uint64_t rows) {
  GeneratorSpec spec = generator_preset("kdda");
  spec.rows = rows;
  spec.features = 100'000;
  spec.nnz = 8;
  const Generator g(spec);
  CsrBuffer b;
  g.generate_rows(kTrainStream, 0, rows, b);
  return b;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Checks that the files of a split, read back, are the lines of `rows` dealt out in input order:
// row r in part part_of(r). Returns the line count of each part.
template <typename PartOf>
std::vector<std::uint64_t> expect_dealt_in_order(const CsrBuffer& rows, const SplitCounts& counts,
                                                 const PartOf& part_of) {
  std::string input;
  append_libsvm_text(rows.view(), input);
  const std::vector<std::string> in = lines_of(input);
  std::vector<std::vector<std::string>> parts;
  for (const std::string& path : counts.outputs) parts.push_back(lines_of(decoded_file(path)));
  std::vector<std::uint64_t> next(parts.size(), 0);
  for (std::uint64_t r = 0; r < in.size(); ++r) {
    const auto p = static_cast<std::size_t>(part_of(r));
    EXPECT_LT(next[p], parts[p].size()) << "part " << p << " is short at row " << r;
    if (next[p] >= parts[p].size()) break;
    EXPECT_EQ(parts[p][next[p]++], in[r]) << "row " << r;
  }
  for (std::size_t p = 0; p < parts.size(); ++p)
    EXPECT_EQ(next[p], parts[p].size()) << "part " << p << " has extra lines";
  return next;
}

// Feeds `rows` to a splitter in batches of `batch` rows.
SplitCounts run_split(const CsrBuffer& rows, const std::string& prefix, const SplitOptions& options,
                      std::size_t batch) {
  Splitter splitter(prefix, options);
  const CsrView all = rows.view();
  for (std::size_t first = 0; first < all.rows; first += batch) {
    CsrView part = all;
    part.rows = std::min(batch, all.rows - first);
    part.labels += first;
    part.offsets += first;
    splitter.append(part);
  }
  return splitter.finish();
}

TEST(SplitUniform, IsAFixedUniformFunctionOfSeedAndRow) {
  EXPECT_EQ(split_uniform(3, 17), split_uniform(3, 17));
  EXPECT_NE(split_uniform(3, 17), split_uniform(4, 17));
  int below_quarter = 0;
  std::vector<int> folds(7, 0);
  for (std::uint64_t r = 0; r < 100'000; ++r) {
    const double u = split_uniform(9, r);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    below_quarter += u < 0.25;
    const int f = fold_of(9, r, 7);
    ASSERT_EQ(f, static_cast<int>(u * 7));
    ++folds[static_cast<std::size_t>(f)];
  }
  EXPECT_NEAR(below_quarter / 1e5, 0.25, 0.005);
  for (const int n : folds) EXPECT_NEAR(n / 1e5, 1.0 / 7, 0.005);
  EXPECT_EQ(fold_of(1, 5, 1), 0);
}

// Train and test together are the input exactly, in order, and the test rows are those with
// u < fraction.
TEST(Splitter, TrainAndTestPartitionTheInputInOrder) {
  TempDir dir;
  const CsrBuffer rows = sample(20'000);
  SplitOptions options;
  options.test_fraction = 0.25;
  options.seed = 11;
  const SplitCounts c = run_split(rows, dir / "s", options, 999);
  ASSERT_EQ(c.outputs, (std::vector<std::string>{dir / "s.train.svm", dir / "s.test.svm"}));
  EXPECT_EQ(c.rows, 20'000u);
  EXPECT_NEAR(static_cast<double>(c.test_rows) / c.rows, 0.25, 0.01);
  const auto lines = expect_dealt_in_order(rows, c, [&](std::uint64_t r) {
    return split_uniform(options.seed, r) < options.test_fraction ? 1 : 0;
  });
  EXPECT_EQ(lines, (std::vector<std::uint64_t>{c.train_rows, c.test_rows}));
}

TEST(Splitter, BytesDependOnSeedOnlyNotOnBatches) {
  TempDir dir;
  const CsrBuffer rows = sample(5000);
  SplitOptions options;
  options.compression = Compression::kZstd;
  const SplitCounts a = run_split(rows, dir / "a", options, 5000);
  const SplitCounts b = run_split(rows, dir / "b", options, 1);
  const SplitCounts c = run_split(rows, dir / "c", options, 7);
  EXPECT_EQ(a.outputs[0], dir / "a.train.svm.zst");
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(file_bytes(a.outputs[i]), file_bytes(b.outputs[i]));
    EXPECT_EQ(file_bytes(a.outputs[i]), file_bytes(c.outputs[i]));
  }
  options.seed = 2;
  const SplitCounts d = run_split(rows, dir / "d", options, 5000);
  EXPECT_NE(file_bytes(a.outputs[1]), file_bytes(d.outputs[1]));
  EXPECT_EQ(d.train_rows + d.test_rows, 5000u);
}

TEST(Splitter, FoldsPartitionTheRows) {
  TempDir dir;
  const CsrBuffer rows = sample(10'000);
  SplitOptions options;
  options.folds = 5;
  options.seed = 3;
  options.compression = Compression::kGzip;
  const SplitCounts c = run_split(rows, dir / "k", options, 333);
  ASSERT_EQ(c.outputs.size(), 5u);
  EXPECT_EQ(c.outputs[4], dir / "k.fold4.svm.gz");
  const auto lines =
      expect_dealt_in_order(rows, c, [&](std::uint64_t r) { return fold_of(options.seed, r, 5); });
  EXPECT_EQ(lines, c.fold_rows);
  for (const std::uint64_t n : c.fold_rows) EXPECT_NEAR(static_cast<double>(n) / 10'000, 0.2, 0.02);
}

TEST(Splitter, ExtremeFractions) {
  TempDir dir;
  const CsrBuffer rows = sample(300);
  SplitOptions options;
  options.test_fraction = 0;
  EXPECT_EQ(run_split(rows, dir / "none", options, 300).train_rows, 300u);
  options.test_fraction = 1;
  const SplitCounts all = run_split(rows, dir / "all", options, 300);
  EXPECT_EQ(all.test_rows, 300u);
  EXPECT_EQ(file_bytes(all.outputs[0]), "");  // an empty train file still exists
}

TEST(Splitter, InvalidOptionsAreUsageErrors) {
  SplitOptions options;
  options.test_fraction = 1.5;
  EXPECT_THROW(validate_split_options(options), UsageError);
  options.test_fraction = 0.1;
  options.folds = 1;
  EXPECT_THROW(validate_split_options(options), UsageError);
  TempDir dir;
  EXPECT_THROW(Splitter(dir / "x", options), UsageError);
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(Splitter, UnfinishedSplitLeavesNoFiles) {
  TempDir dir;
  {
    Splitter splitter(dir / "p", SplitOptions{});
    splitter.append(sample(100).view());
  }
  EXPECT_EQ(dir.entries(), 0u);
}

}  // namespace
}  // namespace polymargin::io
