// io/feature_order.h: the order by count, the table counted on a sample of the blocks, and the
// reader's renumbering (ReadOptions::renumber) in every reading mode.
#include "io/feature_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "io/shards.h"
#include "tests/io/shard_test_util.h"

namespace polymargin::io {
namespace {

using testing::fresh_dir;
using testing::random_rows;
using testing::Row;
using testing::scan_rows;
using testing::Values;
using testing::write_shards;

TEST(OrderByCount, MostFrequentFirstTiesInIdOrder) {
  // ids 1 and 3 (5 each), then 2 (2), 5 (1), then the unseen 0 and 4.
  EXPECT_EQ(order_by_count({0, 5, 2, 5, 0, 1}), (std::vector<std::uint32_t>{4, 0, 2, 1, 5, 3}));
  EXPECT_EQ(order_by_count({}), std::vector<std::uint32_t>{});
  EXPECT_EQ(order_by_count({0, 0, 0}), (std::vector<std::uint32_t>{0, 1, 2}));
}

bool is_permutation_of_ids(std::vector<std::uint32_t> table) {
  std::sort(table.begin(), table.end());
  std::vector<std::uint32_t> ids(table.size());
  std::iota(ids.begin(), ids.end(), 0u);
  return table == ids;
}

// Rows whose ids 900 (every row) and 17 (every other row) are the most frequent, over a
// scattering of rare ids below 5000.
CsrBuffer skewed_rows(std::size_t n) {
  CsrBuffer rows = random_rows(3, n, 6, 5000, Values::kRandom);
  CsrBuffer out;
  out.has_values = true;
  for (std::size_t r = 0; r < rows.rows(); ++r) {
    std::vector<std::pair<std::uint32_t, float>> entries;
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
      if (rows.indices[k] != 900 && rows.indices[k] != 17)
        entries.emplace_back(rows.indices[k], rows.values[k]);
    entries.emplace_back(900, 2.0f);
    if (r % 2 == 0) entries.emplace_back(17, -1.5f);
    std::sort(entries.begin(), entries.end());
    for (const auto& [i, v] : entries) {
      out.indices.push_back(i);
      out.values.push_back(v);
    }
    out.labels.push_back(rows.labels[r]);
    out.offsets.push_back(static_cast<std::uint32_t>(out.indices.size()));
  }
  return out;
}

TEST(FrequencyOrder, APermutationOfTheIdsWithTheFrequentFirst) {
  for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
    const std::string dir = fresh_dir("order") / "d.shards";
    // 200 blocks of 64 rows: the count reads one block in three (kFrequencySampleBlocks = 64).
    write_shards(skewed_rows(12800), dir, codec, 64, 2);
    const ShardSet set = ShardSet::open(dir);
    const std::vector<std::uint32_t> table = frequency_order(set, 2);
    ASSERT_EQ(table.size(), std::size_t{set.manifest().max_index} + 1);
    EXPECT_TRUE(is_permutation_of_ids(table));
    EXPECT_EQ(table[900], 0u);
    EXPECT_EQ(table[17], 1u);
    EXPECT_EQ(frequency_order(set, 1), table);  // a function of the data, not of the threads
  }
}

// The rows a scan gives with the table are those it gives without, each id replaced, entries in
// their order: shuffled and not, pipelined and lockstep, scaled and normalised or not.
TEST(FrequencyOrder, TheReaderRenumbersEveryIdInEveryMode) {
  for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
    const std::string dir = fresh_dir("renumber") / "d.shards";
    write_shards(skewed_rows(3000), dir, codec, 64, 3);
    const ShardSet set = ShardSet::open(dir);
    const std::vector<std::uint32_t> full = frequency_order(set, 2);
    // A table shorter than the id space (ids 0-999 reversed): the ids beyond it stay as they are.
    std::vector<std::uint32_t> part_ids(1000);
    for (std::uint32_t f = 0; f < 1000; ++f) part_ids[f] = 999 - f;
    const std::vector<std::uint32_t>& part = part_ids;
    for (const auto* table : {&full, &part}) {
      for (const bool shuffle : {false, true}) {
        for (const bool lockstep : {false, true}) {
          for (const bool scale : {false, true}) {
            ReadOptions o;
            o.shuffle = shuffle;
            o.lockstep = lockstep;
            o.scale_maxabs = scale;
            o.normalize_l2 = scale;
            o.window_blocks = 4;
            o.threads = 2;
            std::vector<Row> expected = scan_rows(set, o);
            for (Row& row : expected)
              for (std::uint32_t& f : row.indices)
                if (f < table->size()) f = (*table)[f];
            o.renumber = *table;
            const std::vector<float> maxabs = renumbered_maxabs(set, *table);
            if (scale) o.renumbered_maxabs = maxabs;
            EXPECT_EQ(scan_rows(set, o), expected)
                << "codec " << static_cast<int>(codec) << " shuffle " << shuffle << " lockstep "
                << lockstep << " scale " << scale << " table " << table->size();
          }
        }
      }
    }
  }
}

TEST(FrequencyOrder, RenumberedMaximaFollowTheTableAndAreRequired) {
  const std::string dir = fresh_dir("maxima") / "d.shards";
  write_shards(skewed_rows(500), dir, Codec::kZstd, 64, 1);
  const ShardSet set = ShardSet::open(dir);
  const std::vector<std::uint32_t> table = frequency_order(set, 2);
  const std::vector<float> by_new_id = renumbered_maxabs(set, table);
  ASSERT_EQ(by_new_id.size(), table.size());
  for (std::size_t f = 0; f < table.size(); ++f)
    ASSERT_EQ(by_new_id[table[f]], set.feature_maxabs()[f]) << "id " << f;
  ReadOptions o;
  o.scale_maxabs = true;
  o.renumber = table;  // without renumbered_maxabs
  EXPECT_THROW(scan_rows(set, o), std::invalid_argument);
}

}  // namespace
}  // namespace polymargin::io
