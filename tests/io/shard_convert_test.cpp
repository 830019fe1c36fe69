// convert_text and Dataset: LIBSVM text → shards → the same rows the parser reads.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/errors.h"
#include "io/shards.h"
#include "io/text_reader.h"
#include "tests/io/shard_test_util.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;
using testing::fresh_dir;
using testing::Row;
using testing::rows_of;
using testing::scan_rows;

// A small LIBSVM file with the things a real one has: comments, blank lines, CRLF, qid, values
// that are and are not 1, an empty row.
const char* kText =
    "# header comment\n"
    "+1 1:0.5 3:1 10:2.25\n"
    "-1 2:1 3:1\r\n"
    "\n"
    "+1 qid:3 4:-1.5 7:1 # trailing comment\n"
    "-1\n"
    "+1 1:1 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1 10:1\n";

std::vector<Row> parse(const std::vector<std::string>& inputs) {
  std::vector<Row> rows;
  read_libsvm_text(inputs, TextOptions{}, [&](const CsrView& batch) {
    const auto part = rows_of(batch);
    rows.insert(rows.end(), part.begin(), part.end());
  });
  return rows;
}

class ShardConvert : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_dir("convert");
    text_ = root_ / "small.svm";
    std::ofstream(text_, std::ios::binary) << kText;
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_, text_;
};

TEST_F(ShardConvert, ShardsHoldTheRowsTheParserReads) {
  const std::vector<Row> expect = parse({text_.string()});
  ASSERT_EQ(expect.size(), 5u);
  for (const Codec codec : {Codec::kRaw, Codec::kZstd}) {
    ConvertOptions options;
    options.codec = codec;
    options.block_rows = 2;
    options.shards = 2;
    const std::string dir = (root_ / (codec_name(codec) + ".shards")).string();
    const Manifest m = convert_text({text_.string()}, dir, options, 2);
    EXPECT_EQ(m.rows, 5u);
    EXPECT_EQ(m.nnz, 17u);
    EXPECT_EQ(m.max_index, 10u);
    EXPECT_EQ(m.index_base, 1);
    EXPECT_EQ(m.features, 10u);
    EXPECT_TRUE(m.has_values);
    EXPECT_EQ(m.label_counts, (std::map<double, std::uint64_t>{{-1.0, 2}, {1.0, 3}}));
    EXPECT_EQ(m.text_bytes, std::string(kText).size());
    ASSERT_EQ(m.sources.size(), 1u);
    EXPECT_EQ(m.sources[0].path, fs::absolute(text_).string());
    EXPECT_EQ(m.sources[0].size, fs::file_size(text_));
    const ShardSet set = ShardSet::open(dir);
    ReadOptions read;
    read.shuffle = false;
    EXPECT_EQ(scan_rows(set, read), expect) << codec_name(codec);
    EXPECT_EQ(set.feature_maxabs(), (std::vector<float>{0, 1, 1, 1, 1.5f, 1, 1, 1, 1, 1, 2.25f}));
  }
}

TEST_F(ShardConvert, SeveralInputsAreReadInOrder) {
  const fs::path second = root_ / "second.svm";
  std::ofstream(second) << "-1 5:1\n+1 6:0.25\n";
  std::vector<Row> expect = parse({text_.string(), second.string()});
  ASSERT_EQ(expect.size(), 7u);
  const std::string dir = (root_ / "two.shards").string();
  const Manifest m = convert_text({text_.string(), second.string()}, dir, ConvertOptions{}, 1);
  EXPECT_EQ(m.sources.size(), 2u);
  ReadOptions read;
  read.shuffle = false;
  EXPECT_EQ(scan_rows(ShardSet::open(dir), read), expect);
}

TEST_F(ShardConvert, EditingTheTextMakesTheShardsStale) {
  const std::string dir = (root_ / "s.shards").string();
  convert_text({text_.string()}, dir, ConvertOptions{}, 1);
  EXPECT_NO_THROW(ShardSet::open(dir));
  std::ofstream(text_, std::ios::app) << "+1 11:1\n";
  EXPECT_THROW(ShardSet::open(dir), DataError);
}

// A set opened before `convert` replaced its directory keeps reading the conversion it opened:
// the scaling table too, which is read when first needed (by path, that was the new conversion's
// table with the old rows, or a size error).
TEST_F(ShardConvert, ASetKeepsItsConversionWhenTheDirectoryIsReplaced) {
  const std::string dir = (root_ / "s.shards").string();
  convert_text({text_.string()}, dir, ConvertOptions{}, 1);
  const ShardSet set = ShardSet::open(dir);
  const fs::path other = root_ / "other.svm";
  std::ofstream(other, std::ios::binary) << "+1 1:4 3:8 10:9\n-1 2:3\n";
  convert_text({other.string()}, dir, ConvertOptions{}, 1);
  EXPECT_EQ(set.feature_maxabs(), (std::vector<float>{0, 1, 1, 1, 1.5f, 1, 1, 1, 1, 1, 2.25f}));
  ReadOptions read;
  read.shuffle = false;
  EXPECT_EQ(scan_rows(set, read), parse({text_.string()}));
  EXPECT_EQ(ShardSet::open(dir).feature_maxabs(),
            (std::vector<float>{0, 4, 3, 8, 0, 0, 0, 0, 0, 0, 9}));
}

// The text changed while it is read (appended to by another program, here as the first rows
// arrive): refused, naming it, with nothing written, rather than shards that are stale at once.
TEST_F(ShardConvert, TextChangedWhileConvertedIsRefusedWithNoOutput) {
  const std::string dir = (root_ / "c.shards").string();
  bool appended = false;
  try {
    convert_text({text_.string()}, dir, ConvertOptions{}, 1, [&](std::uint64_t, std::uint64_t) {
      if (!appended) std::ofstream(text_, std::ios::app) << "+1 11:1\n";
      appended = true;
    });
    FAIL() << "a text changed while converted gave shards";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("changed while it was converted"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(text_.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(appended);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(ShardConvert, ParseErrorsLeaveNoOutput) {
  const fs::path bad = root_ / "bad.svm";
  std::ofstream(bad) << "+1 1:1\n+1 3:1 2:1\n";
  EXPECT_THROW(convert_text({bad.string()}, (root_ / "b.shards").string(), ConvertOptions{}, 1),
               DataError);
  EXPECT_FALSE(fs::exists(root_ / "b.shards"));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 2);
}

// A row with more non-zeros than a block holds (shard::kMaxBlockNnz; lowered here through the text
// options, which convert caps at that) is a bad line of its file: named by file and line, and
// skipped under max_bad_lines like any other.
TEST_F(ShardConvert, RowOverTheNonZeroLimitIsABadLineOfItsFile) {
  const fs::path wide = root_ / "wide.svm";
  std::ofstream(wide) << "# c\n1 1:1\n\n-1 1:1 2:1 3:1 4:1\n1 2:1\n";
  ConvertOptions options;
  options.text.max_row_nnz = 3;
  try {
    convert_text({wide.string()}, (root_ / "w.shards").string(), options, 1);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              wide.string() + ":4:16: row has more than 3 non-zeros, the most one row may have");
  }
  EXPECT_FALSE(fs::exists(root_ / "w.shards"));
  options.text.max_bad_lines = 1;
  const Manifest m = convert_text({wide.string()}, (root_ / "w.shards").string(), options, 1);
  EXPECT_EQ(m.rows, 2u);
  EXPECT_EQ(m.bad_lines_skipped, 1u);
}

TEST_F(ShardConvert, DatasetConvertsTextIntoATemporaryDirectoryItRemoves) {
  const fs::path tmp = root_ / "tmp";
  fs::create_directories(tmp);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  {
    const Dataset data = Dataset::open({text_.string()}, ConvertOptions{}, 1);
    EXPECT_TRUE(data.converted());
    EXPECT_EQ(data.shards().manifest().rows, 5u);
    EXPECT_EQ(data.shards().manifest().codec, Codec::kRaw);  // small text: raw temporary shards
    EXPECT_FALSE(fs::is_empty(tmp));
    ReadOptions read;
    read.shuffle = false;
    EXPECT_EQ(scan_rows(data.shards(), read), parse({text_.string()}));
  }
  ::unsetenv("TMPDIR");
  EXPECT_TRUE(fs::is_empty(tmp));
}

TEST_F(ShardConvert, TemporaryShardsAreRawUpToAnEstimated8GiB) {
  EXPECT_EQ(temporary_codec({text_.string()}), Codec::kRaw);
  EXPECT_EQ(temporary_codec({"-"}), Codec::kZstd);  // size unknown
  // 0.75 bytes of raw shards per byte of text: a sparse 11 GiB file is over the limit. A
  // compressed input counts as 4 times its size in text.
  const fs::path big = root_ / "big.svm";
  { std::ofstream(big, std::ios::binary) << kText; }
  fs::resize_file(big, std::uint64_t{11} << 30);
  EXPECT_EQ(temporary_codec({big.string()}), Codec::kZstd);
  fs::resize_file(big, std::uint64_t{10} << 30);
  EXPECT_EQ(temporary_codec({big.string()}), Codec::kRaw);
  EXPECT_EQ(temporary_codec({big.string(), text_.string()}), Codec::kRaw);
  EXPECT_EQ(temporary_codec({big.string(), big.string()}), Codec::kZstd);
  const std::string gz = (root_ / "small.svm.gz").string();
  ASSERT_EQ(std::system(("gzip -c " + text_.string() + " > " + gz).c_str()), 0);
  EXPECT_EQ(temporary_codec({gz}), Codec::kRaw);
  const fs::path big_gz = root_ / "big.gz";
  fs::copy_file(gz, big_gz);
  fs::resize_file(big_gz, std::uint64_t{3} << 30);  // 9 GiB of raw shards estimated
  EXPECT_EQ(temporary_codec({big_gz.string()}), Codec::kZstd);
}

TEST_F(ShardConvert, DatasetOpensAShardDirectoryAsIs) {
  const std::string dir = (root_ / "d.shards").string();
  convert_text({text_.string()}, dir, ConvertOptions{}, 1);
  const Dataset data = Dataset::open({dir}, ConvertOptions{});
  EXPECT_FALSE(data.converted());
  EXPECT_EQ(data.shards().dir(), dir);
  // A directory without a manifest is refused as shards, not parsed as text.
  fs::create_directories(root_ / "empty");
  try {
    Dataset::open({(root_ / "empty").string()}, ConvertOptions{});
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(e.message().find("manifest missing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace polymargin::io
