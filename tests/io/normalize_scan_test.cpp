// ReadOptions::normalize_l2: every row the reader hands over is the row of the same scan without
// it, after the scaling, divided by its length; in every reading mode (raw or zstd blocks,
// shuffled or not, pipelined or lockstep), whatever the thread count.
#include <gtest/gtest.h>

#include "engine/normalize.h"
#include "shard_test_util.h"

namespace polymargin::io::testing {
namespace {

std::vector<Row> normalised(std::vector<Row> rows) {
  for (Row& row : rows) {
    const double norm = engine::l2_norm(row.values.data(), row.values.size());
    if (norm > 0)
      for (float& v : row.values) v = static_cast<float>(v / norm);
  }
  return rows;
}

TEST(NormalizeScan, RowsAreTheScaledRowsDividedByTheirLength) {
  for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
    for (const Values values : {Values::kNone, Values::kMostlyOnes, Values::kRandom}) {
      const fs::path root = fresh_dir("normalize_scan");
      const CsrBuffer rows = random_rows(11, 3000, 30, 5000, values);
      write_shards(rows, (root / "s.shards").string(), codec, 256, 2);
      const ShardSet set = ShardSet::open((root / "s.shards").string());
      for (const bool shuffle : {false, true})
        for (const bool lockstep : {false, true})
          for (const bool scale : {false, true}) {
            ReadOptions read;
            read.shuffle = shuffle;
            read.lockstep = lockstep;
            read.scale_maxabs = scale;
            read.seed = 5;
            read.threads = 2;
            const std::vector<Row> expected = normalised(scan_rows(set, read));
            read.normalize_l2 = true;
            EXPECT_EQ(scan_rows(set, read), expected)
                << "codec " << codec_name(codec) << " shuffle " << shuffle << " lockstep "
                << lockstep << " scale " << scale;
            read.threads = 1;
            EXPECT_EQ(scan_rows(set, read), expected) << "one thread";
          }
      fs::remove_all(root);
    }
  }
}

}  // namespace
}  // namespace polymargin::io::testing
