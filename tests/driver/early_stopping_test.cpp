// --epochs auto's parts (driver/early_stopping.h): the held-out blocks and the rows trained on
// partition the data whatever its layout (whole blocks of the data's own, or of a copy cut into
// smaller blocks when it has too few), the counts of the rows trained on are theirs, the choice is
// a function of the seed, and the stopping rule stops after `patience` passes without progress.
#include "driver/early_stopping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "../io/shard_test_util.h"
#include "engine/errors.h"

namespace polymargin::driver {
namespace {

using io::testing::Row;

std::vector<Row> rows_of_blocks(const io::ShardSet& set, const std::vector<std::uint32_t>& blocks) {
  io::ReadOptions read;
  read.shuffle = false;
  read.window_blocks = 1;
  read.threads = 2;
  read.blocks = blocks;
  return io::testing::scan_rows(set, read);
}

bool before(const Row& a, const Row& b) {
  return std::tie(a.label, a.indices, a.values) < std::tie(b.label, b.indices, b.values);
}

void expect_partition(const io::ShardSet& all, const HeldOut& held, double fraction) {
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = 2;
  std::vector<Row> every = io::testing::scan_rows(all, read);
  std::vector<Row> trained = rows_of_blocks(held.set(), held.train_blocks());
  std::vector<Row> out = rows_of_blocks(held.set(), held.held_blocks());
  EXPECT_EQ(out.size(), held.held_rows());
  EXPECT_EQ(trained.size(), held.train_manifest().rows);
  EXPECT_EQ(trained.size() + out.size(), every.size());
  // About the fraction: within half of it.
  const double share = static_cast<double>(out.size()) / static_cast<double>(every.size());
  EXPECT_GT(share, fraction / 2);
  EXPECT_LT(share, fraction * 1.5);
  std::map<double, std::uint64_t> labels;
  std::uint64_t nnz = 0;
  for (const Row& r : trained) {
    ++labels[r.label];
    nnz += r.indices.size();
  }
  EXPECT_EQ(labels, held.train_manifest().label_counts);
  EXPECT_EQ(nnz, held.train_manifest().nnz);
  EXPECT_EQ(held.train_blocks().size(), held.train_manifest().total_blocks);
  trained.insert(trained.end(), out.begin(), out.end());
  std::sort(trained.begin(), trained.end(), before);
  std::sort(every.begin(), every.end(), before);
  EXPECT_TRUE(trained == every) << "held-out and trained rows are not the data's rows";
}

TEST(HeldOut, WholeBlocksOfTheDataPartitionItsRows) {
  const CsrBuffer rows = io::testing::random_rows(5, 2000, 6, 40, io::testing::Values::kSomeRows);
  const io::ShardSet set = io::testing::shards_in_memory(rows, io::Codec::kZstd, 50, 3);
  const HeldOut held(set, 0.1, 7, 2, "d");
  EXPECT_EQ(held.parts(), 1u);  // 40 blocks: 4 of the data's own
  EXPECT_EQ(&held.set(), &set);
  EXPECT_EQ(held.held_blocks().size(), 4u);
  expect_partition(set, held, 0.1);
  // Seeded: the same seed the same blocks, another seed others.
  EXPECT_EQ(HeldOut(set, 0.1, 7, 1, "d").held_blocks(), held.held_blocks());
  EXPECT_NE(HeldOut(set, 0.1, 8, 1, "d").held_blocks(), held.held_blocks());
}

TEST(HeldOut, FewBlocksAreCutIntoSmallerOnesInMemory) {
  const CsrBuffer rows = io::testing::random_rows(6, 700, 6, 40, io::testing::Values::kRandom);
  const io::ShardSet set = io::testing::shards_in_memory(rows, io::Codec::kRaw, 4096, 1);
  const HeldOut held(set, 0.1, 1, 2, "d");
  EXPECT_NE(&held.set(), &set);
  EXPECT_GT(held.parts(), 1u);
  EXPECT_EQ(held.set().manifest().rows, 700u);
  EXPECT_EQ(held.set().feature_maxabs(), set.feature_maxabs());  // scaled as the data are
  expect_partition(set, held, 0.1);
}

TEST(HeldOut, TooFewRowsAreRefusedNamingTheOption) {
  const CsrBuffer rows = io::testing::random_rows(6, 4, 6, 40, io::testing::Values::kRandom);
  const io::ShardSet set = io::testing::shards_in_memory(rows, io::Codec::kRaw, 4096, 1);
  try {
    HeldOut(set, 0.1, 1, 2, "tiny");
    FAIL() << "4 rows held out at 0.1";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--validation-fraction"), std::string::npos) << e.what();
  }
}

TEST(StoppingRule, StopsAfterPatiencePassesWithoutProgressAndKeepsTheBest) {
  StoppingRule rule;
  rule.tol = 0.01;
  rule.patience = 2;
  rule.max_passes = 10;
  EXPECT_TRUE(rule.pass_end(1.0));
  EXPECT_TRUE(rule.pass_end(0.5));    // progress
  EXPECT_TRUE(rule.pass_end(0.499));  // better, but by less than tol: no progress
  EXPECT_EQ(rule.without_progress, 1);
  EXPECT_FALSE(rule.stop());
  EXPECT_FALSE(rule.pass_end(0.6));  // worse
  EXPECT_TRUE(rule.stop());
  EXPECT_TRUE(rule.stopped_early());
  EXPECT_EQ(rule.best_pass, 3u);
  EXPECT_EQ(rule.scores.size(), 4u);
}

TEST(StoppingRule, RunsToMaxPassesWhileImproving) {
  StoppingRule rule;
  rule.patience = 1;
  rule.max_passes = 4;
  for (int p = 0; p < 4; ++p) {
    EXPECT_FALSE(rule.stop());
    EXPECT_TRUE(rule.pass_end(1.0 / (p + 1)));
  }
  EXPECT_TRUE(rule.stop());
  EXPECT_FALSE(rule.stopped_early());
  EXPECT_EQ(rule.best_pass, 4u);
}

TEST(StoppingRule, PassesBeforeTheFirstJudgedAreNeitherBestNorCounted) {
  StoppingRule rule;
  rule.patience = 1;
  rule.first_judged = 3;
  EXPECT_FALSE(rule.pass_end(0.1));  // the lowest score, but not judged
  EXPECT_FALSE(rule.pass_end(0.2));
  EXPECT_FALSE(rule.stop());
  EXPECT_TRUE(rule.pass_end(0.3));
  EXPECT_EQ(rule.best_pass, 3u);
  EXPECT_FALSE(rule.stop());
  EXPECT_FALSE(rule.pass_end(0.3));
  EXPECT_TRUE(rule.stop());
  EXPECT_EQ(rule.scores.size(), 4u);
}

TEST(StoppingRule, ANonFiniteScoreIsNoProgress) {
  StoppingRule rule;
  rule.patience = 1;
  EXPECT_FALSE(rule.pass_end(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_TRUE(rule.stop());
  EXPECT_EQ(rule.best_pass, 0u);
}

}  // namespace
}  // namespace polymargin::driver
