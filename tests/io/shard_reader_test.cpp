// ShardSet: refusals (corrupt, truncated, stale, foreign), scan order and determinism, scaling.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <tbb/parallel_for.h>
#include <utime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <sstream>

#include "engine/errors.h"
#include "io/shard_format.h"
#include "io/shard_manifest.h"
#include "io/shards.h"
#include "tests/io/shard_test_util.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::random_rows;
using testing::Row;
using testing::rows_of;
using testing::scan_rows;
using testing::slurp;
using testing::Values;
using testing::write_shards;

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// The block index of a shard file, read the way the format describes it.
std::vector<shard::IndexEntry> block_index(const fs::path& file) {
  const std::string bytes = slurp(file);
  shard::IndexTrailer t;
  std::memcpy(&t, bytes.data() + bytes.size() - sizeof t, sizeof t);
  std::vector<shard::IndexEntry> index(t.block_count);
  std::memcpy(index.data(), bytes.data() + t.index_offset,
              index.size() * sizeof(shard::IndexEntry));
  return index;
}

void flip_byte(const fs::path& file, std::uint64_t at) {
  std::string bytes = slurp(file);
  bytes[at] ^= 0x01;
  spit(file, bytes);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class ShardCorruption : public ::testing::TestWithParam<Codec> {
 protected:
  void SetUp() override {
    root_ = fresh_dir(std::string("corrupt_") + codec_name(GetParam()));
    dir_ = (root_ / "c.shards").string();
    write_shards(random_rows(2, 400, 20, 100000, Values::kRandom), dir_, GetParam(), 25, 2);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path shard(int s) const { return fs::path(dir_) / shard::shard_file_name(s); }
  fs::path root_;
  std::string dir_;
};

// A flipped byte in the payload of block 3 of shard 1 (global block 7): the directory still opens
// (blocks are checked when read), but scan and verify refuse it naming the file and the block.
TEST_P(ShardCorruption, FlippedByteInABlockIsRefusedNamingTheBlock) {
  const auto index = block_index(shard(1));
  flip_byte(shard(1), index[3].offset + index[3].bytes / 2);
  const ShardSet set = ShardSet::open(dir_);
  for (const bool shuffle : {false, true}) {
    ReadOptions read;
    read.shuffle = shuffle;
    const std::string e = error_of([&] { scan_rows(set, read); });
    EXPECT_TRUE(contains(e, shard(1).string())) << e;
    EXPECT_TRUE(contains(e, "block 3 (global block 7): checksum mismatch")) << e;
  }
  const std::string e = error_of([&] { set.verify(2); });
  EXPECT_TRUE(contains(e, "shard-00001.pms: block 3 (global block 7)")) << e;
}

// The same block read as a lockstep scan's spare work (by the sink, while it has the window
// before) or after the sink: the same refusal, from the scan.
TEST_P(ShardCorruption, AFlippedByteReadAsSpareWorkIsRefusedNamingTheBlock) {
  const auto index = block_index(shard(1));
  flip_byte(shard(1), index[3].offset + index[3].bytes / 2);
  const ShardSet set = ShardSet::open(dir_);
  for (const bool take : {false, true}) {
    ReadOptions read;
    read.lockstep = true;
    read.threads = 2;
    read.window_blocks = 3;
    const std::string e = error_of([&] {
      set.scan_lending(read, [&](const CsrView&, const SpareWork& spare) {
        if (take)
          while (spare()) {
          }
      });
    });
    EXPECT_TRUE(contains(e, shard(1).string())) << e;
    EXPECT_TRUE(contains(e, "block 3 (global block 7): checksum mismatch")) << e;
  }
}

TEST_P(ShardCorruption, TruncatedShardIsRefusedAtOpen) {
  const std::string bytes = slurp(shard(0));
  spit(shard(0), bytes.substr(0, bytes.size() - 1));
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "truncated")) << "cut by 1 byte";
  // The manifest edited to the new size: its own checksum gives it away.
  spit(shard(0), bytes.substr(0, bytes.size() / 2));
  std::string manifest = slurp(fs::path(dir_) / "manifest.json");
  const std::string from = "\"bytes\": " + std::to_string(bytes.size());
  ASSERT_NE(manifest.find(from), std::string::npos);
  manifest.replace(manifest.find(from), from.size(),
                   "\"bytes\": " + std::to_string(bytes.size() / 2));
  spit(fs::path(dir_) / "manifest.json", manifest);
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "manifest checksum mismatch"));
  // And in a manifest without that checksum (written before it existed), the missing trailer.
  const std::string key = ",\n  \"manifest_checksum\"";
  ASSERT_NE(manifest.find(key), std::string::npos);
  manifest.erase(manifest.find(key),
                 manifest.find('\n', manifest.find(key) + 2) - manifest.find(key));
  spit(fs::path(dir_) / "manifest.json", manifest);
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "truncated"));
}

// A shard file cut short after the directory was opened (another program truncating it in the
// middle of a run): a scan reads its blocks with pread, so the missing bytes are an I/O error that
// names the file, in every reading mode, and verify says the same.
TEST_P(ShardCorruption, AShardCutShortAfterOpeningIsAnIoErrorNamingTheFile) {
  const ShardSet set = ShardSet::open(dir_);
  fs::resize_file(shard(1), fs::file_size(shard(1)) / 2);
  const auto io_error_of = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const IoError& e) {
      return e.what();
    }
    return "(no IoError)";
  };
  for (const bool lockstep : {false, true})
    for (const bool shuffle : {false, true}) {
      ReadOptions read;
      read.shuffle = shuffle;
      read.lockstep = lockstep;
      read.threads = 2;
      const std::string e = io_error_of([&] { scan_rows(set, read); });
      EXPECT_TRUE(contains(e, shard(1).string())) << e;
      EXPECT_TRUE(contains(e, "cut short while it was being read")) << e;
    }
  const std::string e = io_error_of([&] { set.verify(2); });
  EXPECT_TRUE(contains(e, "cut short while it was being read")) << e;
}

// A shard file rewritten in place while the directory is open, with the same rows under other
// labels (whole blocks, each with a valid checksum of its own; the same sizes in the raw codec):
// read again, a block is refused as changed; rewritten before the first read, the blocks'
// checksums are not the manifest's content checksum once all were read. Never rows of two sets.
TEST_P(ShardCorruption, AShardRewrittenInPlaceWhileOpenIsRefused) {
  CsrBuffer rows = random_rows(2, 400, 20, 100000, Values::kRandom);
  for (float& label : rows.labels) label = -label;
  const fs::path other = root_ / "flipped.shards";
  write_shards(rows, other.string(), GetParam(), 25, 2);
  const auto rewrite = [&] {
    const std::string bytes = slurp(other / "shard-00001.pms");
    std::fstream out(shard(1), std::ios::in | std::ios::out | std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  const bool same_size = fs::file_size(other / "shard-00001.pms") == fs::file_size(shard(1));
  {
    const ShardSet set = ShardSet::open(dir_);
    scan_rows(set, ReadOptions{});
    rewrite();
    const std::string e = error_of([&] { scan_rows(set, ReadOptions{}); });
    EXPECT_TRUE(contains(e, shard(1).string())) << e;
    if (same_size) EXPECT_TRUE(contains(e, "changed while this run read the data")) << e;
  }
  write_shards(random_rows(2, 400, 20, 100000, Values::kRandom), dir_, GetParam(), 25, 2);
  {
    const ShardSet set = ShardSet::open(dir_);
    rewrite();
    const std::string e = error_of([&] { scan_rows(set, ReadOptions{}); });
    EXPECT_TRUE(contains(e, shard(1).string())) << e;
    if (same_size) EXPECT_TRUE(contains(e, "not those of the manifest's content checksum")) << e;
  }
}

TEST_P(ShardCorruption, CorruptBlockIndexIsRefusedAtOpen) {
  const std::string bytes = slurp(shard(1));
  flip_byte(shard(1), bytes.size() - sizeof(shard::IndexTrailer) - 5);
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "block index checksum mismatch"));
}

TEST_P(ShardCorruption, ShardFromAnotherConversionIsRefused) {
  const fs::path other = root_ / "other.shards";
  write_shards(random_rows(3, 400, 20, 100000, Values::kRandom), other.string(), GetParam(), 25, 2);
  fs::copy_file(other / "shard-00001.pms", shard(1), fs::copy_options::overwrite_existing);
  EXPECT_NE(error_of([&] { ShardSet::open(dir_); }), "(no DataError)");
}

TEST_P(ShardCorruption, MissingShardFileIsRefused) {
  fs::remove(shard(1));
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "shard file missing"));
}

TEST_P(ShardCorruption, CorruptFeatureMaxabsIsRefused) {
  const fs::path file = fs::path(dir_) / "feature_maxabs.bin";
  flip_byte(file, 100);
  const ShardSet set = ShardSet::open(dir_);
  EXPECT_TRUE(contains(error_of([&] { set.feature_maxabs(); }), "checksum mismatch"));
  EXPECT_TRUE(contains(error_of([&] { set.verify(); }), "feature_maxabs.bin"));
}

INSTANTIATE_TEST_SUITE_P(Codecs, ShardCorruption, ::testing::Values(Codec::kRaw, Codec::kZstd),
                         [](const auto& info) { return codec_name(info.param); });

class ShardRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_dir("refusal");
    dir_ = (root_ / "r.shards").string();
    source_ = root_ / "train.svm";
    spit(source_, "+1 1:1\n-1 2:1\n");
    SourceInfo info;
    info.path = fs::absolute(source_).string();
    struct stat st;
    ASSERT_EQ(::stat(info.path.c_str(), &st), 0);
    info.size = static_cast<std::uint64_t>(st.st_size);
    info.mtime_ns = st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    write_shards(random_rows(4, 50, 5, 100, Values::kNone), dir_, Codec::kZstd, 8, 1, 1, {info});
  }
  void TearDown() override { fs::remove_all(root_); }
  // The manifest as written before it carried its own checksum.
  void drop_manifest_checksum() {
    std::string m = slurp(fs::path(dir_) / "manifest.json");
    const std::string key = ",\n  \"manifest_checksum\"";
    ASSERT_NE(m.find(key), std::string::npos);
    m.erase(m.find(key), m.find('\n', m.find(key) + 2) - m.find(key));
    spit(fs::path(dir_) / "manifest.json", m);
  }
  void edit_manifest(const std::string& from, const std::string& to) {
    std::string m = slurp(fs::path(dir_) / "manifest.json");
    ASSERT_NE(m.find(from), std::string::npos) << from;
    m.replace(m.find(from), from.size(), to);
    spit(fs::path(dir_) / "manifest.json", m);
  }
  fs::path root_, source_;
  std::string dir_;
};

TEST_F(ShardRefusal, ModifiedSourceMakesTheShardsStale) {
  EXPECT_NO_THROW(ShardSet::open(dir_));
  spit(source_, "+1 1:1\n-1 2:1\n+1 3:1\n");
  const std::string e = error_of([&] { ShardSet::open(dir_); });
  EXPECT_TRUE(contains(e, "stale shards: " + fs::absolute(source_).string() +
                              " changed since conversion (re-run convert)"))
      << e;
  EXPECT_NO_THROW(ShardSet::open(dir_, /*check_sources=*/false));
}

TEST_F(ShardRefusal, TouchedSourceMakesTheShardsStale) {
  struct utimbuf times {
    1000000000, 1000000000
  };  // same size, other mtime
  ASSERT_EQ(::utime(source_.c_str(), &times), 0);
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "stale shards"));
}

TEST_F(ShardRefusal, MissingSourceIsFineAndNoted) {
  fs::remove(source_);
  const ShardSet set = ShardSet::open(dir_);
  ASSERT_EQ(set.missing_sources().size(), 1u);
  EXPECT_EQ(set.missing_sources()[0], fs::absolute(source_).string());
}

TEST_F(ShardRefusal, OtherFormatVersionIsRefused) {
  const std::string current = std::to_string(kShardFormatVersion);
  const std::string older = std::to_string(kShardFormatVersion - 1);
  edit_manifest("\"format_version\": " + current, "\"format_version\": " + older);
  const std::string e = error_of([&] { ShardSet::open(dir_); });
  EXPECT_TRUE(contains(e, "format version " + older + ", this build reads version " + current))
      << e;
}

TEST_F(ShardRefusal, MissingOrUnparseableManifestIsRefused) {
  const fs::path manifest = fs::path(dir_) / "manifest.json";
  const std::string good = slurp(manifest);
  spit(manifest, good.substr(0, good.size() / 2));
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "manifest unparseable"));
  fs::remove(manifest);
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "manifest missing"));
  EXPECT_FALSE(is_shard_dir(dir_));
}

// A count that is not an integer in range (a float far beyond 2^64 would be undefined behaviour
// to convert) is refused by name.
TEST_F(ShardRefusal, ManifestCountsMustBeIntegersInRange) {
  edit_manifest("\"rows\": 50", "\"rows\": 6.5e19");
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }),
                       "field 'rows' is not an integer in range"));
  edit_manifest("\"rows\": 6.5e19", "\"rows\": -50");
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }),
                       "field 'rows' is not an integer in range"));
}

TEST_F(ShardRefusal, ShardSizeDifferentFromManifestIsRefused) {
  std::ofstream(fs::path(dir_) / "shard-00000.pms", std::ios::app) << "extra";
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "the manifest says"));
}

// A manifest without its own checksum (written before it existed) that claims 10^10 blocks is
// refused against the shard file's block index before a table of that many blocks is allocated.
TEST_F(ShardRefusal, BlockCountBeyondTheShardFilesIsRefusedBeforeAllocating) {
  drop_manifest_checksum();
  edit_manifest("\"total_blocks\": 7", "\"total_blocks\": 10000000000");
  edit_manifest("\"blocks\": 7", "\"blocks\": 10000000000");
  const std::string e = error_of([&] { ShardSet::open(dir_); });
  EXPECT_TRUE(contains(e, "shard-00000.pms: block count does not match the manifest")) << e;
}

// Such a manifest with a lowered max_index would size the learners' weights below the ids the
// blocks hold: refused against feature_maxabs.bin, which convert sized by the true one.
TEST_F(ShardRefusal, LegacyManifestWithALoweredMaxIndexIsRefused) {
  drop_manifest_checksum();
  EXPECT_NO_THROW(ShardSet::open(dir_));  // a legacy manifest as written is read
  const std::string m = slurp(fs::path(dir_) / "manifest.json");
  const std::string field = "\"max_index\": ";
  const std::size_t at = m.find(field) + field.size();
  const std::string value = m.substr(at, m.find_first_not_of("0123456789", at) - at);
  ASSERT_GT(std::stoul(value), 5u);
  edit_manifest(field + value, field + "5");
  const std::string e = error_of([&] { ShardSet::open(dir_); });
  EXPECT_TRUE(contains(e, "max_index 5 of the manifest does not match feature_maxabs.bin")) << e;
}

// A block may not declare more rows than the manifest's block_rows (which, with kMaxBlockNnz,
// sizes the buffers a window is decoded into): shown with a legacy manifest's block_rows lowered.
TEST_F(ShardRefusal, BlockLargerThanTheManifestAllowsIsRefused) {
  drop_manifest_checksum();
  edit_manifest("\"block_rows\": 8", "\"block_rows\": 2");
  const std::string e = error_of([&] { ShardSet::open(dir_); });
  EXPECT_TRUE(contains(e, "block 0 declares 8 rows")) << e;
}

TEST_F(ShardRefusal, ManifestContradictingItselfIsRefused) {
  edit_manifest("\"rows\": 50", "\"rows\": 51");
  EXPECT_TRUE(contains(error_of([&] { ShardSet::open(dir_); }), "do not add up"));
}

// Labels are row numbers, so every delivered row says where it came from.
CsrBuffer numbered_rows(std::size_t n, Values values) {
  CsrBuffer rows = random_rows(99, n, 30, 50000, values);
  for (std::size_t r = 0; r < n; ++r) rows.labels[r] = static_cast<float>(r);
  return rows;
}

class ShardScan : public ::testing::TestWithParam<Codec> {
 protected:
  void SetUp() override {
    root_ = fresh_dir(std::string("scan_") + codec_name(GetParam()));
    rows_ = numbered_rows(5000, Values::kSomeRows);
    write_shards(rows_, (root_ / "s.shards").string(), GetParam(), 64, 3);
  }
  void TearDown() override { fs::remove_all(root_); }
  ShardSet open() const { return ShardSet::open((root_ / "s.shards").string()); }
  fs::path root_;
  CsrBuffer rows_;
};

TEST_P(ShardScan, RowSequenceIsIdenticalWithOneTwoAndFourThreads) {
  const ShardSet set = open();
  for (const bool shuffle : {true, false}) {
    for (const bool scale : {false, true}) {
      ReadOptions read;
      read.shuffle = shuffle;
      read.scale_maxabs = scale;
      read.seed = 7;
      read.epoch = 3;
      read.threads = 1;
      const std::vector<Row> one = scan_rows(set, read);
      ASSERT_EQ(one.size(), 5000u);
      for (const int threads : {2, 4}) {
        read.threads = threads;
        EXPECT_EQ(scan_rows(set, read), one) << threads << " threads, shuffle " << shuffle;
      }
    }
  }
}

// The parts of a window (ReadOptions::parts, the ranks of an MPI job) read every row once between
// them, and where a window has fewer blocks than parts, each part still reads its share of them.
TEST_P(ShardScan, PartsShareEveryWindowAndEachReadsItsShare) {
  const ShardSet set = open();
  for (const std::uint32_t parts : {2u, 3u}) {
    for (const std::uint32_t window_blocks : {1u, 2u, 4u}) {
      std::vector<int> seen(5000, 0);
      for (std::uint32_t part = 0; part < parts; ++part) {
        ReadOptions read;
        read.seed = 7;
        read.window_blocks = window_blocks;
        read.part = part;
        read.parts = parts;
        std::size_t windows = 0;
        set.scan(read, [&](const CsrView&) { ++windows; });
        EXPECT_EQ(windows, (79 + window_blocks - 1) / window_blocks);  // every part, every window
        const std::vector<Row> got = scan_rows(set, read);
        for (const Row& row : got) ++seen.at(static_cast<std::size_t>(row.label));
        // Between a third and twice an even share of the rows.
        EXPECT_GT(got.size(), 5000 / parts / 3) << part << " of " << parts << ", " << window_blocks;
        EXPECT_LT(got.size(), 2 * 5000 / parts) << part << " of " << parts << ", " << window_blocks;
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 5000)
          << parts << " parts, windows of " << window_blocks;
    }
  }
}

TEST_P(ShardScan, ShuffleIsAPermutationPerEpochAndChangesBetweenEpochs) {
  const ShardSet set = open();
  const std::vector<Row> original = rows_of(rows_.view());
  ReadOptions read;
  read.seed = 42;
  read.window_blocks = 4;
  std::vector<std::vector<float>> orders;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    read.epoch = epoch;
    const std::vector<Row> got = scan_rows(set, read);
    ASSERT_EQ(got.size(), original.size());
    std::vector<float> order;
    std::vector<bool> seen(original.size(), false);
    for (const Row& row : got) {
      const auto r = static_cast<std::size_t>(row.label);
      ASSERT_LT(r, original.size());
      EXPECT_FALSE(seen[r]) << "row " << r << " delivered twice";
      seen[r] = true;
      EXPECT_EQ(row.indices, original[r].indices);
      EXPECT_EQ(row.values, original[r].values);
      order.push_back(row.label);
    }
    orders.push_back(order);
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
  // Rows are mixed across blocks, not only blocks reordered: some window holds rows of several
  // blocks side by side.
  bool mixed = false;
  for (std::size_t i = 1; i < orders[0].size() && !mixed; ++i)
    mixed = static_cast<int>(orders[0][i]) / 64 != static_cast<int>(orders[0][i - 1]) / 64;
  EXPECT_TRUE(mixed);
  // Same seed and epoch: same order; another seed: another order.
  read.epoch = 0;
  std::vector<float> again, other;
  for (const Row& row : scan_rows(set, read)) again.push_back(row.label);
  read.seed = 43;
  for (const Row& row : scan_rows(set, read)) other.push_back(row.label);
  EXPECT_EQ(again, orders[0]);
  EXPECT_NE(other, orders[0]);
}

TEST_P(ShardScan, ScalingDividesByTheFeatureMaxabs) {
  const ShardSet set = open();
  ReadOptions read;
  read.shuffle = false;
  read.scale_maxabs = true;
  const std::vector<Row> got = scan_rows(set, read);
  const std::vector<Row> original = rows_of(rows_.view());
  const std::vector<float>& maxabs = set.feature_maxabs();
  std::vector<float> largest(maxabs.size(), 0.0f);
  ASSERT_EQ(got.size(), original.size());
  for (std::size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].indices, original[r].indices);
    for (std::size_t k = 0; k < got[r].indices.size(); ++k) {
      const std::uint32_t j = got[r].indices[k];
      // A feature whose values are all 0 has maxabs 0 and keeps its zeros.
      EXPECT_EQ(got[r].values[k], maxabs[j] > 0 ? original[r].values[k] / maxabs[j] : 0.0f);
      EXPECT_LE(std::fabs(got[r].values[k]), 1.0f);
      largest[j] = std::max(largest[j], std::fabs(got[r].values[k]));
    }
  }
  for (std::size_t j = 0; j < maxabs.size(); ++j)
    if (maxabs[j] > 0) {
      EXPECT_EQ(largest[j], 1.0f) << "feature " << j;
    }
}

// Data already within [-1, 1] (binary features, fractions, explicit zeros) takes the reader's
// shortcut that divides only the values other than 0 and 1: the result must be the same division.
TEST_P(ShardScan, ScalingOfDataWithinUnitRangeDividesExactlyTheSame) {
  CsrBuffer rows = numbered_rows(3000, Values::kMostlyOnes);
  for (float& v : rows.values) v = v == 1.0f ? 1.0f : v / 5;  // |v| <= 1; zeros stay
  const std::string dir = (root_ / "unit.shards").string();
  write_shards(rows, dir, GetParam(), 64, 2);
  const ShardSet set = ShardSet::open(dir);
  const std::vector<float>& maxabs = set.feature_maxabs();
  ASSERT_LE(*std::max_element(maxabs.begin(), maxabs.end()), 1.0f);
  ASSERT_TRUE(std::any_of(maxabs.begin(), maxabs.end(), [](float m) { return m > 0 && m < 1; }));
  const std::vector<Row> original = rows_of(rows.view());
  for (const bool shuffle : {false, true}) {
    ReadOptions read;
    read.shuffle = shuffle;
    read.scale_maxabs = true;
    read.seed = 5;
    const std::vector<Row> got = scan_rows(set, read);
    ASSERT_EQ(got.size(), original.size());
    for (const Row& row : got) {
      const Row& source = original[static_cast<std::size_t>(row.label)];
      ASSERT_EQ(row.indices, source.indices);
      for (std::size_t k = 0; k < row.indices.size(); ++k) {
        const float m = maxabs[row.indices[k]];
        EXPECT_EQ(row.values[k], m > 0 ? source.values[k] / m : 0.0f);
      }
    }
  }
}

TEST_P(ShardScan, StatsCountEverything) {
  const ShardSet set = open();
  ReadOptions read;
  read.threads = 2;
  std::uint64_t calls = 0;
  const ScanStats stats = set.scan(read, [&](const CsrView&) { ++calls; });
  EXPECT_EQ(stats.rows, 5000u);
  EXPECT_EQ(stats.nnz, rows_.nnz());
  EXPECT_EQ(stats.blocks, set.manifest().total_blocks);
  EXPECT_EQ(calls, (set.manifest().total_blocks + read.window_blocks - 1) / read.window_blocks);
  EXPECT_GE(stats.sink_seconds, 0.0);
  EXPECT_GE(stats.wait_seconds, 0.0);
  const VerifyReport report = set.verify(2);
  EXPECT_EQ(report.blocks_checked, set.manifest().total_blocks);
  EXPECT_GT(report.bytes_checked, 0u);
}

// A resumed run skips the windows it has learnt: the rest come exactly as in a full scan.
TEST_P(ShardScan, FirstWindowSkipsWholeWindowsAndKeepsTheRestAsInAFullScan) {
  const ShardSet set = open();
  ReadOptions read;
  read.seed = 5;
  read.epoch = 2;
  read.window_blocks = 3;
  read.threads = 2;
  std::vector<std::vector<Row>> windows;
  set.scan(read, [&](const CsrView& batch) { windows.push_back(rows_of(batch)); });
  const std::uint64_t count = window_count(set.manifest(), read.window_blocks);
  ASSERT_EQ(windows.size(), count);
  ASSERT_GT(count, 3u);
  for (const std::uint64_t first : {std::uint64_t{1}, count - 2, count}) {
    read.first_window = first;
    std::vector<std::vector<Row>> rest;
    set.scan(read, [&](const CsrView& batch) { rest.push_back(rows_of(batch)); });
    EXPECT_EQ(rest, std::vector<std::vector<Row>>(windows.begin() + static_cast<long>(first),
                                                  windows.end()))
        << "first window " << first;
  }
  read.first_window = count + 1;
  EXPECT_THROW(set.scan(read, [](const CsrView&) {}), UsageError);
}

// Lockstep (one window at a time, its blocks decoded and its rows gathered by all threads) hands
// over the same windows as the pipelined scan: rows, order, values and scaling, both scaling paths
// (the decoder's, on data within [-1, 1], and the pass after the gather), any thread count.
TEST_P(ShardScan, LockstepGivesTheSameWindowsAsThePipeline) {
  CsrBuffer unit = numbered_rows(3000, Values::kMostlyOnes);
  for (float& v : unit.values) v = v == 1.0f ? 1.0f : v / 5;
  const std::string unit_dir = (root_ / "unit.shards").string();
  write_shards(unit, unit_dir, GetParam(), 64, 2);
  for (const std::string& dir : {(root_ / "s.shards").string(), unit_dir}) {
    const ShardSet set = ShardSet::open(dir);
    for (const bool shuffle : {true, false}) {
      for (const bool scale : {false, true}) {
        ReadOptions read;
        read.shuffle = shuffle;
        read.scale_maxabs = scale;
        read.seed = 11;
        read.epoch = 1;
        read.window_blocks = 5;
        for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{2}}) {
          read.first_window = first;
          read.lockstep = false;
          read.threads = 2;
          std::vector<std::vector<Row>> piped;
          set.scan(read, [&](const CsrView& batch) { piped.push_back(rows_of(batch)); });
          ASSERT_GT(piped.size(), 3u);
          if (first == 0) {
            // The last window alone is a scan of one window, read on the calling thread: the same
            // batches (an unshuffled raw window is a batch per block), rows and order as the
            // pipeline's last window.
            for (const bool lockstep : {false, true}) {
              ReadOptions last = read;
              last.first_window = window_count(set.manifest(), read.window_blocks) - 1;
              last.lockstep = lockstep;
              std::vector<std::vector<Row>> alone;
              set.scan(last, [&](const CsrView& batch) { alone.push_back(rows_of(batch)); });
              ASSERT_GE(alone.size(), 1u);
              ASSERT_LE(alone.size(), piped.size());
              EXPECT_TRUE(std::equal(alone.begin(), alone.end(), piped.end() - alone.size()))
                  << dir << ": shuffle " << shuffle << ", scale " << scale << ", lockstep "
                  << lockstep;
            }
          }
          read.lockstep = true;
          for (const int threads : {1, 2, 4}) {
            read.threads = threads;
            std::vector<std::vector<Row>> locked;
            const ScanStats stats =
                set.scan(read, [&](const CsrView& batch) { locked.push_back(rows_of(batch)); });
            EXPECT_EQ(locked, piped) << dir << ": shuffle " << shuffle << ", scale " << scale
                                     << ", " << threads << " threads, first window " << first;
            if (first == 0) {
              EXPECT_EQ(stats.blocks, set.manifest().total_blocks);
            }
          }
        }
      }
    }
  }
  // And a sink's exception ends a lockstep scan too.
  ReadOptions read;
  read.lockstep = true;
  read.threads = 2;
  int calls = 0;
  EXPECT_THROW(open().scan(read,
                           [&](const CsrView&) {
                             if (++calls == 2) throw std::runtime_error("learner failed");
                           }),
               std::runtime_error);
  EXPECT_EQ(calls, 2);
}

// A lockstep window of more rows than one gather task copies is gathered, and scaled, in several
// ranges at once: the same rows and values as the pipeline's, on both scaling paths.
TEST_P(ShardScan, LockstepScalesAWindowInSeveralGatherRanges) {
  for (const float spread : {5.0f, 0.2f}) {  // maxima within [0, 1], and above 1
    CsrBuffer rows = numbered_rows(9000, Values::kMostlyOnes);
    for (float& v : rows.values) v = v == 1.0f ? 1.0f : v / spread;
    const std::string dir = (root_ / ("ranges" + std::to_string(spread) + ".shards")).string();
    write_shards(rows, dir, GetParam(), 64, 2);
    const ShardSet set = ShardSet::open(dir);
    ReadOptions read;
    read.scale_maxabs = true;
    read.seed = 3;
    read.window_blocks = 64;  // 4096 rows: two gather ranges and a part of a third
    read.threads = 2;
    std::vector<std::vector<Row>> piped, locked;
    set.scan(read, [&](const CsrView& batch) { piped.push_back(rows_of(batch)); });
    ASSERT_GE(piped.size(), 2u);
    read.lockstep = true;
    set.scan(read, [&](const CsrView& batch) { locked.push_back(rows_of(batch)); });
    EXPECT_EQ(locked, piped) << "values / " << spread;
  }
}

// A lending sink (scan_lending) may take any share of the next window's reading, from any number
// of threads at once: the windows are those of scan(), and every piece of reading is done once.
// The last window has nothing to lend, nor has a pipelined scan.
TEST_P(ShardScan, ALendingSinkGetsTheSameWindowsWhateverSpareWorkItTakes) {
  constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();  // until spare says no
  const ShardSet set = open();
  ReadOptions read;
  read.seed = 5;
  read.epoch = 2;
  read.window_blocks = 4;
  read.threads = 2;
  std::vector<std::vector<Row>> plain;
  set.scan(read, [&](const CsrView& batch) { plain.push_back(rows_of(batch)); });
  ASSERT_GT(plain.size(), 3u);
  const std::uint64_t blocks = set.manifest().total_blocks;
  ASSERT_GE(blocks, 4u);
  read.lockstep = true;
  for (const int threads : {1, 2, 4}) {
    read.threads = threads;
    for (const std::size_t wanted : {std::size_t{0}, std::size_t{1}, std::size_t{3}, kAll}) {
      std::vector<std::vector<Row>> lent;
      std::atomic<std::size_t> done{0};
      bool last_lent = false;
      set.scan_lending(read, [&](const CsrView& batch, const SpareWork& spare) {
        std::atomic<std::size_t> asked{0};
        std::size_t got = 0;
        std::mutex m;
        tbb::parallel_for(0, 4, [&](int) {
          std::size_t mine = 0;
          while (asked.fetch_add(1) < wanted && spare()) ++mine;
          std::lock_guard lock(m);
          got += mine;
        });
        done += got;
        if (lent.size() + 1 == plain.size()) last_lent = got > 0 || spare();
        lent.push_back(rows_of(batch));
      });
      EXPECT_EQ(lent, plain) << threads << " threads, " << wanted << " pieces a window";
      EXPECT_FALSE(last_lent);
      // Reading a window: a piece per block and one for its row order; all but the first lent.
      if (wanted == kAll) {
        EXPECT_EQ(done.load(), blocks - 4 + plain.size() - 1);
      }
    }
  }
  read.lockstep = false;
  std::size_t lent_by_pipeline = 0;
  set.scan_lending(read, [&](const CsrView&, const SpareWork& spare) {
    while (spare()) ++lent_by_pipeline;
  });
  EXPECT_EQ(lent_by_pipeline, 0u);
}

TEST_P(ShardScan, AnExceptionInTheSinkPropagates) {
  const ShardSet set = open();
  int calls = 0;
  EXPECT_THROW(set.scan(ReadOptions{},
                        [&](const CsrView&) {
                          if (++calls == 3) throw std::runtime_error("learner failed");
                        }),
               std::runtime_error);
}

INSTANTIATE_TEST_SUITE_P(Codecs, ShardScan, ::testing::Values(Codec::kRaw, Codec::kZstd),
                         [](const auto& info) { return codec_name(info.param); });

}  // namespace
}  // namespace polymargin::io
