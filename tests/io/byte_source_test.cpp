#include "io/byte_source.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/errors.h"
#include "tests/io/test_files.h"

namespace polymargin::io {
namespace {

using testing::bzip2;
using testing::cut;
using testing::gzip;
using testing::StdinFrom;
using testing::TempDir;
using testing::zstd;

// Text long enough to span several input blocks of the decoders once compressed.
std::string sample_text(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i)
    text += std::to_string(i % 2 ? 1 : -1) + " " + std::to_string(i % 97 + 1) + ":0." +
            std::to_string(i) + " 200:1\n";
  return text;
}

// Reads the whole source with reads of `step` bytes.
std::string read_all(ByteSource& source, std::size_t step = 65536) {
  std::string out, block(step, '\0');
  for (;;) {
    const std::size_t n = source.read(block.data(), step);
    if (n == 0) return out;
    out.append(block.data(), n);
  }
}

std::string read_file(const std::string& path, std::size_t step = 65536) {
  auto source = open_byte_source(path);
  return read_all(*source, step);
}

// Expects reading `path` to fail with a DataError naming it and containing `text`.
void expect_data_error(const std::string& path, const std::string& text) {
  try {
    read_file(path);
    ADD_FAILURE() << "no error reading " << path;
  } catch (const DataError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), 0u);
    EXPECT_NE(e.message().find(text), std::string::npos) << e.what();
  }
}

TEST(DetectCompression, RecognisesMagicBytes) {
  EXPECT_EQ(detect_compression("\x1f\x8b\x08\x00"), SourceCompression::kGzip);
  EXPECT_EQ(detect_compression("BZh9"), SourceCompression::kBzip2);
  EXPECT_EQ(detect_compression("\x28\xb5\x2f\xfd"), SourceCompression::kZstd);
  EXPECT_EQ(detect_compression("\x50\x2a\x4d\x18"), SourceCompression::kZstd);  // skippable frame
  EXPECT_EQ(detect_compression("+1 3:1"), SourceCompression::kNone);
  EXPECT_EQ(detect_compression(""), SourceCompression::kNone);
  EXPECT_EQ(detect_compression("\x1f"), SourceCompression::kNone);
  EXPECT_EQ(detect_compression("BZ"), SourceCompression::kNone);
  EXPECT_EQ(detect_compression("\x28\xb5\x2f"), SourceCompression::kNone);
  EXPECT_STREQ(compression_name(SourceCompression::kZstd), "zstd");
  EXPECT_STREQ(compression_name(SourceCompression::kNone), "plain");
}

TEST(ByteSource, ReadsEveryFormatWhateverTheName) {
  TempDir dir;
  const std::string text = sample_text(20000);
  // The names lie on purpose: detection goes by content only.
  const struct {
    std::string name;
    std::string bytes;
    SourceCompression compression;
  } cases[] = {{"plain.gz", text, SourceCompression::kNone},
               {"gz.txt", gzip(text), SourceCompression::kGzip},
               {"bz2.zst", bzip2(text), SourceCompression::kBzip2},
               {"zst", zstd(text), SourceCompression::kZstd}};
  for (const auto& c : cases) {
    const std::string path = dir.write(c.name, c.bytes);
    auto source = open_byte_source(path);
    EXPECT_EQ(source->compression(), c.compression) << c.name;
    EXPECT_EQ(source->name(), path);
    EXPECT_EQ(read_all(*source), text) << c.name;
    EXPECT_EQ(read_file(path, 1).size(), text.size()) << c.name << " read a byte at a time";
  }
}

TEST(ByteSource, DecodesConcatenatedMembersFramesAndStreams) {
  TempDir dir;
  const std::string a = sample_text(3000), b = "1 1:1\n", c = sample_text(50);
  EXPECT_EQ(read_file(dir.write("a.gz", gzip(a) + gzip(b) + gzip(c))), a + b + c);
  EXPECT_EQ(read_file(dir.write("a.bz2", bzip2(a) + bzip2(b) + bzip2(c))), a + b + c);
  EXPECT_EQ(read_file(dir.write("a.zst", zstd(a) + zstd(b) + zstd(c))), a + b + c);
  // An empty member in the middle is still a complete member.
  EXPECT_EQ(read_file(dir.write("e.gz", gzip(a) + gzip("") + gzip(b))), a + b);
  EXPECT_EQ(read_file(dir.write("e.zst", zstd(a) + zstd("") + zstd(b))), a + b);
}

TEST(ByteSource, TruncatedCompressedInputIsAnError) {
  TempDir dir;
  const std::string text = sample_text(20000);
  for (std::size_t n : {1, 9, 100}) {
    expect_data_error(dir.write("t.gz", cut(gzip(text), n)), "truncated gzip stream");
    expect_data_error(dir.write("t.bz2", cut(bzip2(text), n)), "truncated bzip2 stream");
    expect_data_error(dir.write("t.zst", cut(zstd(text), n)), "truncated zstd frame");
  }
  // Cut inside the second of two frames: the first must not pass for the whole.
  expect_data_error(dir.write("two.zst", zstd(text) + cut(zstd(text), 50)), "truncated zstd frame");
  expect_data_error(dir.write("two.gz", gzip(text) + cut(gzip(text), 50)), "truncated gzip stream");
  // Nothing but a magic.
  expect_data_error(dir.write("magic.zst", "\x28\xb5\x2f\xfd"), "truncated zstd frame");
  expect_data_error(dir.write("magic.gz", "\x1f\x8b"), "truncated gzip stream");
  expect_data_error(dir.write("magic.bz2", "BZh"), "truncated bzip2 stream");
}

TEST(ByteSource, CorruptCompressedInputIsAnError) {
  TempDir dir;
  const std::string text = sample_text(2000);
  std::string gz = gzip(text), bz = bzip2(text);
  gz[gz.size() / 2] ^= 0x55;  // caught at the latest by the member's CRC
  bz[bz.size() / 2] ^= 0x55;  // caught by the block CRC
  // zstd frames carry no checksum by default; damage the frame header instead.
  const std::string zs = "\x28\xb5\x2f\xfd" + std::string(32, '\xff');
  expect_data_error(dir.write("c.gz", gz), "gzip");
  expect_data_error(dir.write("c.bz2", bz), "bzip2");
  expect_data_error(dir.write("c.zst", zs), "zstd");
  // Bytes after a complete member that are not another member.
  expect_data_error(dir.write("tail.gz", gzip(text) + "garbage!"), "corrupt gzip data");
}

TEST(ByteSource, EmptyFileIsPlainAndEmpty) {
  TempDir dir;
  auto source = open_byte_source(dir.write("empty", ""));
  EXPECT_EQ(source->compression(), SourceCompression::kNone);
  EXPECT_EQ(read_all(*source), "");
}

TEST(ByteSource, MapsUncompressedRegularFilesOnly) {
  TempDir dir;
  const std::string text = sample_text(3000);
  auto plain = open_byte_source(dir.write("plain.svm", text));
  EXPECT_EQ(plain->mapped(), text);
  EXPECT_EQ(read_all(*plain), text);  // read() still works on a mapped source
  EXPECT_TRUE(open_byte_source(dir.write("t.gz", gzip(text)))->mapped().empty());
  EXPECT_TRUE(open_byte_source(dir.write("empty", ""))->mapped().empty());
  {
    StdinFrom redirect(dir.write("in.txt", text));  // stdin is a stream even from a file
    EXPECT_TRUE(open_byte_source("-")->mapped().empty());
  }
}

TEST(ByteSource, MissingFileIsAnIoError) {
  TempDir dir;
  EXPECT_THROW(open_byte_source("/nonexistent/polymargin/x.svm"), IoError);
}

TEST(ByteSource, DashReadsStdinPlainOrCompressed) {
  TempDir dir;
  const std::string text = sample_text(5000);
  {
    StdinFrom redirect(dir.write("in.txt", text));
    auto source = open_byte_source("-");
    EXPECT_EQ(source->name(), "<stdin>");
    EXPECT_EQ(read_all(*source), text);
  }
  {
    StdinFrom redirect(dir.write("in.zst", zstd(text)));
    auto source = open_byte_source("-");
    EXPECT_EQ(source->compression(), SourceCompression::kZstd);
    EXPECT_EQ(read_all(*source), text);
  }
  {
    StdinFrom redirect(dir.write("cut.zst", cut(zstd(text), 5)));
    try {
      auto source = open_byte_source("-");
      read_all(*source);
      ADD_FAILURE() << "truncated stdin was accepted";
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), "<stdin>");
      EXPECT_EQ(e.message(), "truncated zstd frame");
    }
  }
}

}  // namespace
}  // namespace polymargin::io
