// ShardWriter: rows in, a complete directory out (or nothing at all).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/errors.h"
#include "io/shards.h"
#include "tests/io/shard_test_util.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::random_rows;
using testing::rows_of;
using testing::scan_rows;
using testing::slurp;
using testing::Values;
using testing::write_shards;

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

struct Layout {
  Codec codec;
  std::uint32_t block_rows;
  std::uint32_t shards;
  Values values;
};

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const Layout& l = info.param;
  static const char* const kValues[] = {"no_values", "ones", "random", "some_rows"};
  return codec_name(l.codec) + "_" + std::to_string(l.block_rows) + "rows_" +
         std::to_string(l.shards) + "shards_" + kValues[static_cast<int>(l.values)];
}

class ShardWriterRoundTrip : public ::testing::TestWithParam<Layout> {};

// Rows written come back unchanged and in input order from a scan without shuffle, whatever the
// codec, block size, number of shards (round robin by block) and window size.
TEST_P(ShardWriterRoundTrip, ScanWithoutShuffleGivesTheInputRowsInOrder) {
  const Layout layout = GetParam();
  const fs::path root = fresh_dir("roundtrip");
  const CsrBuffer rows = random_rows(11, 777, 40, 2'000'000, layout.values);
  const Manifest m = write_shards(rows, (root / "d.shards").string(), layout.codec,
                                  layout.block_rows, layout.shards);
  EXPECT_EQ(m.rows, 777u);
  EXPECT_EQ(m.total_blocks, (777 + layout.block_rows - 1) / layout.block_rows);
  const ShardSet set = ShardSet::open((root / "d.shards").string());
  for (const std::uint32_t window : {1u, 3u, 8u}) {
    ReadOptions read;
    read.shuffle = false;
    read.window_blocks = window;
    read.threads = 2;
    EXPECT_EQ(scan_rows(set, read), rows_of(rows.view())) << "window " << window;
  }
  fs::remove_all(root);
}

// The same rows in memory: the directory's manifest, blocks (so data checksum), scaling table and
// rows in the same order for every way of reading them, so that a model trained from either is
// the same.
TEST_P(ShardWriterRoundTrip, InMemoryTheSetIsTheDirectorysAndReadsTheSameRows) {
  const Layout layout = GetParam();
  const fs::path root = fresh_dir("in_memory");
  const CsrBuffer rows = random_rows(12, 777, 40, 2'000'000, layout.values);
  const Manifest written = write_shards(rows, (root / "d.shards").string(), layout.codec,
                                        layout.block_rows, layout.shards);
  const ShardSet dir = ShardSet::open((root / "d.shards").string());
  const ShardSet memory =
      testing::shards_in_memory(rows, layout.codec, layout.block_rows, layout.shards);
  const Manifest& m = memory.manifest();
  EXPECT_EQ(memory.dir(), "<rows>");
  EXPECT_EQ(m.rows, written.rows);
  EXPECT_EQ(m.nnz, written.nnz);
  EXPECT_EQ(m.max_index, written.max_index);
  EXPECT_EQ(m.features, written.features);
  EXPECT_EQ(m.label_counts, written.label_counts);
  EXPECT_EQ(m.has_values, written.has_values);
  EXPECT_EQ(m.total_blocks, written.total_blocks);
  ASSERT_EQ(m.shards.size(), written.shards.size());
  for (std::size_t s = 0; s < m.shards.size(); ++s) {
    EXPECT_EQ(m.shards[s].bytes, written.shards[s].bytes);
    EXPECT_EQ(m.shards[s].content_checksum, written.shards[s].content_checksum);
  }
  EXPECT_EQ(data_checksum(m), data_checksum(dir.manifest()));
  EXPECT_EQ(memory.feature_maxabs(), dir.feature_maxabs());
  for (const std::uint32_t window : {1u, 3u, 8u})
    for (const bool shuffle : {false, true})
      for (const bool lockstep : {false, true})
        for (const std::uint32_t parts : {1u, 2u}) {
          ReadOptions read;
          read.shuffle = shuffle;
          read.lockstep = lockstep;
          read.seed = 5;
          read.epoch = 2;
          read.window_blocks = window;
          read.threads = 2;
          read.scale_maxabs = true;
          read.normalize_l2 = window == 3;
          read.parts = parts;
          EXPECT_EQ(scan_rows(memory, read), scan_rows(dir, read))
              << "window " << window << " shuffle " << shuffle << " lockstep " << lockstep
              << " parts " << parts;
        }
  EXPECT_EQ(memory.verify(2).blocks_checked, written.total_blocks);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ShardWriterRoundTrip,
                         ::testing::Values(Layout{Codec::kRaw, 64, 1, Values::kNone},
                                           Layout{Codec::kRaw, 7, 3, Values::kSomeRows},
                                           Layout{Codec::kZstd, 64, 1, Values::kRandom},
                                           Layout{Codec::kZstd, 1, 4, Values::kNone},
                                           Layout{Codec::kZstd, 100, 2, Values::kSomeRows},
                                           Layout{Codec::kRaw, 4096, 1, Values::kOnes}),
                         layout_name);

TEST(ShardWriter, ManifestRecordsTheDataAndSurvivesAReopen) {
  const fs::path root = fresh_dir("manifest");
  CsrBuffer rows = random_rows(5, 300, 20, 5000, Values::kRandom);
  const std::vector<SourceInfo> sources = {{"-", 0, 0}};
  const Manifest m =
      write_shards(rows, (root / "m.shards").string(), Codec::kZstd, 32, 3, 2, sources);

  std::map<double, std::uint64_t> labels;
  std::uint32_t max_index = 0;
  for (std::size_t r = 0; r < rows.rows(); ++r) ++labels[rows.labels[r]];
  for (const auto i : rows.indices) max_index = std::max(max_index, i);
  EXPECT_EQ(m.format_version, kShardFormatVersion);
  EXPECT_EQ(m.rows, rows.rows());
  EXPECT_EQ(m.nnz, rows.nnz());
  EXPECT_EQ(m.max_index, max_index);
  EXPECT_EQ(m.index_base, 0);
  EXPECT_EQ(m.features, max_index + 1u);
  EXPECT_EQ(m.label_counts, labels);
  EXPECT_TRUE(m.has_values);
  EXPECT_EQ(m.zstd_level, 3);
  EXPECT_EQ(m.block_rows, 32u);
  EXPECT_EQ(m.total_blocks, 10u);
  ASSERT_EQ(m.shards.size(), 3u);
  EXPECT_EQ(m.shards[0].blocks, 4u);  // blocks 0, 3, 6, 9
  EXPECT_EQ(m.shards[1].blocks, 3u);
  EXPECT_EQ(m.shards[0].rows + m.shards[1].rows + m.shards[2].rows, 300u);

  const ShardSet set = ShardSet::open((root / "m.shards").string());
  const Manifest& back = set.manifest();
  EXPECT_EQ(back.rows, m.rows);
  EXPECT_EQ(back.nnz, m.nnz);
  EXPECT_EQ(back.label_counts, m.label_counts);
  EXPECT_EQ(back.created_utc, m.created_utc);
  EXPECT_EQ(back.sources.size(), 1u);
  EXPECT_EQ(back.shards.size(), 3u);
  for (std::size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(back.shards[s].bytes, fs::file_size(root / "m.shards" / back.shards[s].file));
    EXPECT_EQ(back.shards[s].index_checksum, m.shards[s].index_checksum);
  }
  // Nothing but the data: no temporary left next to the result or inside it.
  EXPECT_EQ(entries(root), 1u);
  EXPECT_EQ(entries(root / "m.shards"), 5u);  // 3 shards, manifest, feature_maxabs.bin
  fs::remove_all(root);
}

TEST(ShardWriter, FeatureMaxabsIsTheLargestMagnitudePerFeature) {
  const fs::path root = fresh_dir("maxabs");
  const CsrBuffer rows = random_rows(8, 200, 30, 3000, Values::kSomeRows);
  write_shards(rows, (root / "x.shards").string(), Codec::kRaw, 16, 1);
  std::vector<float> expect(*std::max_element(rows.indices.begin(), rows.indices.end()) + 1, 0.0f);
  for (std::size_t k = 0; k < rows.nnz(); ++k)
    expect[rows.indices[k]] = std::max(expect[rows.indices[k]], std::fabs(rows.values[k]));
  const ShardSet set = ShardSet::open((root / "x.shards").string());
  EXPECT_EQ(set.feature_maxabs(), expect);
  fs::remove_all(root);
}

TEST(ShardWriter, BytesDoNotDependOnTheThreadCount) {
  const fs::path root = fresh_dir("threads");
  const CsrBuffer rows = random_rows(21, 3000, 40, 1'000'000, Values::kSomeRows);
  for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
    write_shards(rows, (root / "t1").string(), codec, 50, 2, /*threads=*/1);
    write_shards(rows, (root / "t4").string(), codec, 50, 2, /*threads=*/4);
    for (const char* file : {"shard-00000.pms", "shard-00001.pms", "feature_maxabs.bin"})
      EXPECT_EQ(slurp(root / "t1" / file), slurp(root / "t4" / file)) << file;
  }
  fs::remove_all(root);
}

TEST(ShardWriter, UnfinishedWriterLeavesNothingAndKeepsTheOldOutput) {
  const fs::path root = fresh_dir("unfinished");
  const std::string dir = (root / "u.shards").string();
  const CsrBuffer old_rows = random_rows(1, 50, 5, 100, Values::kNone);
  write_shards(old_rows, dir, Codec::kZstd, 8, 1);
  {
    ShardWriter writer(dir, ConvertOptions{}, 2);
    const CsrBuffer more = random_rows(2, 10000, 5, 100, Values::kNone);
    writer.append(more.view());
    // destroyed without finish(), as when an exception unwinds through the caller
  }
  EXPECT_EQ(entries(root), 1u);
  const ShardSet set = ShardSet::open(dir);
  ReadOptions read;
  read.shuffle = false;
  EXPECT_EQ(scan_rows(set, read), rows_of(old_rows.view()));
  fs::remove_all(root);
}

TEST(ShardWriter, ReplacesAShardDirectoryOnSuccess) {
  const fs::path root = fresh_dir("replace");
  const std::string dir = (root / "r.shards").string();
  write_shards(random_rows(1, 50, 5, 100, Values::kNone), dir, Codec::kZstd, 8, 3);
  const CsrBuffer fresh = random_rows(2, 70, 5, 100, Values::kRandom);
  write_shards(fresh, dir, Codec::kRaw, 1000, 1);
  const ShardSet set = ShardSet::open(dir);
  ReadOptions read;
  read.shuffle = false;
  EXPECT_EQ(scan_rows(set, read), rows_of(fresh.view()));
  EXPECT_EQ(set.manifest().codec, Codec::kRaw);
  EXPECT_EQ(entries(root), 1u);
  EXPECT_EQ(entries(dir), 3u);
  fs::remove_all(root);
}

// A file written into the old directory while the new one was converted is the user's: it moves
// into the new directory (the old shard files go). It was removed with the old directory.
TEST(ShardWriter, AFileWrittenIntoTheOldDirectoryMeanwhileIsKept) {
  const fs::path root = fresh_dir("kept");
  const std::string dir = (root / "k.shards").string();
  write_shards(random_rows(1, 50, 5, 100, Values::kNone), dir, Codec::kZstd, 8, 3);
  const CsrBuffer fresh = random_rows(2, 70, 5, 100, Values::kRandom);
  {
    ShardWriter writer(dir, ConvertOptions{}, 1);
    writer.append(fresh.view());
    std::ofstream(dir + "/notes.txt") << "written during the conversion";
    writer.finish(0, {}, 0);
  }
  std::ifstream in(dir + "/notes.txt");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "written during the conversion");
  EXPECT_EQ(entries(root), 1u);     // no old directory left beside it
  EXPECT_EQ(entries(dir), 3u + 1);  // manifest, maxima, one shard, and the file
  const ShardSet set = ShardSet::open(dir);
  ReadOptions read;
  read.shuffle = false;
  EXPECT_EQ(scan_rows(set, read), rows_of(fresh.view()));
  fs::remove_all(root);
}

TEST(ShardWriter, RefusesToReplaceSomethingElse) {
  const fs::path root = fresh_dir("refuse");
  fs::create_directories(root / "precious");
  std::ofstream(root / "precious" / "thesis.tex") << "years of work";
  std::ofstream(root / "file") << "x";
  EXPECT_THROW(ShardWriter((root / "precious").string(), ConvertOptions{}), UsageError);
  EXPECT_THROW(ShardWriter((root / "file").string(), ConvertOptions{}), UsageError);
  EXPECT_TRUE(fs::exists(root / "precious" / "thesis.tex"));
  fs::remove_all(root);
}

TEST(ShardWriter, BadOptionsAreUsageErrors) {
  const fs::path root = fresh_dir("options");
  ConvertOptions o;
  o.block_rows = 0;
  EXPECT_THROW(ShardWriter((root / "a").string(), o), UsageError);
  o = ConvertOptions{};
  o.shards = 0;
  EXPECT_THROW(ShardWriter((root / "a").string(), o), UsageError);
  o = ConvertOptions{};
  o.zstd_level = 99;
  EXPECT_THROW(ShardWriter((root / "a").string(), o), UsageError);
  EXPECT_TRUE(fs::is_empty(root));
  fs::remove_all(root);
}

TEST(ShardWriter, MalformedRowsFailTheWriteAndLeaveNothing) {
  const fs::path root = fresh_dir("malformed");
  CsrBuffer rows = random_rows(3, 500, 10, 1000, Values::kNone);
  rows.labels.push_back(1);
  rows.indices.insert(rows.indices.end(), {9, 4});  // decreasing
  rows.offsets.push_back(static_cast<std::uint32_t>(rows.indices.size()));
  ConvertOptions o;
  o.block_rows = 16;
  try {
    ShardWriter writer((root / "m.shards").string(), o, 2);
    writer.append(rows.view());
    writer.finish(0, {}, 0);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(e.message().find("row 501"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(root));
  fs::remove_all(root);
}

TEST(ShardWriter, IndexZeroWithIndexBaseOneIsADataError) {
  const fs::path root = fresh_dir("base");
  CsrBuffer rows;
  rows.labels = {1};
  rows.indices = {0, 3};
  rows.offsets = {0, 2};
  ShardWriter writer((root / "b.shards").string(), ConvertOptions{}, 1);
  writer.append(rows.view());
  EXPECT_THROW(writer.finish(1, {}, 0), DataError);
  fs::remove_all(root);
}

TEST(ShardWriter, EmptyDataSetIsValid) {
  const fs::path root = fresh_dir("empty");
  ShardWriter writer((root / "e.shards").string(), ConvertOptions{}, 1);
  const Manifest m = writer.finish(1, {}, 0);
  EXPECT_EQ(m.rows, 0u);
  EXPECT_EQ(m.features, 0u);
  const ShardSet set = ShardSet::open((root / "e.shards").string());
  EXPECT_EQ(scan_rows(set, ReadOptions{}).size(), 0u);
  EXPECT_EQ(set.verify().blocks_checked, 0u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace polymargin::io
