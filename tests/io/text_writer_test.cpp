#include "io/text_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/errors.h"
#include "tests/io/decoded_file.h"

namespace polymargin::io {
namespace {

using testing::decoded_file;
using testing::file_bytes;
using testing::TempDir;

// Three rows: binary, real-valued and empty.
CsrBuffer sample_rows() {
  CsrBuffer b;
  b.ensure_values();
  b.labels = {1.0f, -1.0f, 2.5f};
  b.indices = {3, 17, 4294967295u, 1, 20216830};
  b.values = {1.0f, 1.0f, 0.347f, -2.0f, 1e-7f};
  b.offsets = {0, 3, 5, 5};
  return b;
}

const char kSampleText[] = "1 3:1 17:1 4294967295:0.347\n-1 1:-2 20216830:1e-07\n2.5\n";

TEST(LibsvmFormat, IntegersPlainFloatsShortest) {
  std::string out;
  append_libsvm_text(sample_rows().view(), out);
  EXPECT_EQ(out, kSampleText);
}

TEST(LibsvmFormat, ImplicitOnesAndSingleRows) {
  CsrBuffer b;
  b.labels = {-1.0f, 0.0f};
  b.indices = {5, 100000};
  b.offsets = {0, 1, 2};
  std::string out;
  append_libsvm_row(b.view(), 1, out);
  append_libsvm_row(b.view(), 0, out);
  EXPECT_EQ(out, "0 100000:1\n-1 5:1\n");
}

TEST(LibsvmFormat, ShortestFormRoundTrips) {
  for (const float v : {0.1f, 0.333333343f, 1e-30f, 123456.789f, 3e20f, -0.5f}) {
    CsrBuffer b;
    b.ensure_values();
    b.labels = {1.0f};
    b.indices = {1};
    b.values = {v};
    b.offsets = {0, 1};
    std::string out;
    append_libsvm_text(b.view(), out);
    const std::string value = out.substr(out.find(':') + 1, out.size() - out.find(':') - 2);
    EXPECT_EQ(std::stof(value), v) << out;
  }
}

TEST(Compression, ChosenByName) {
  EXPECT_EQ(compression_for_path("a.svm.zst"), Compression::kZstd);
  EXPECT_EQ(compression_for_path("a.gz"), Compression::kGzip);
  EXPECT_EQ(compression_for_path("a.svm"), Compression::kNone);
  EXPECT_EQ(parse_compression("zstd"), Compression::kZstd);
  EXPECT_THROW(parse_compression("lz4"), UsageError);
}

class TextWriterTest : public ::testing::TestWithParam<std::string> {};

// Buffered rows, tiny frames and encoded blocks interleave and come back in order.
TEST_P(TextWriterTest, EveryPathRoundTrips) {
  TempDir dir;
  const std::string path = dir / ("out.svm" + GetParam());
  const CsrBuffer rows = sample_rows();
  TextWriterOptions options;
  options.frame_bytes = 16;  // several zstd frames / flushes
  TextWriter w(path, options);
  w.write(rows.view());
  EncodedText block;
  w.encode(rows.view(), block);
  w.write_encoded(block);
  w.write_row(rows.view(), 1);
  w.encode(CsrBuffer().view(), block);  // an empty block writes nothing
  w.write_encoded(block);
  EXPECT_FALSE(std::filesystem::exists(path));  // invisible until finished
  w.finish();
  EXPECT_EQ(w.compression(), compression_for_path(path));
  EXPECT_EQ(w.rows(), 7u);
  const std::string expected = std::string(kSampleText) + kSampleText + "-1 1:-2 20216830:1e-07\n";
  EXPECT_EQ(w.text_bytes(), expected.size());
  EXPECT_EQ(w.file_bytes(), file_bytes(path).size());
  EXPECT_EQ(decoded_file(path), expected);
  EXPECT_EQ(dir.entries(), 1u);  // no temporary file left
}

INSTANTIATE_TEST_SUITE_P(Compressions, TextWriterTest, ::testing::Values("", ".zst", ".gz"));

TEST(TextWriter, UnfinishedWriterLeavesNothing) {
  TempDir dir;
  {
    TextWriter w(dir / "out.svm.zst");
    w.write(sample_rows().view());
  }
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(TextWriter, UnwritableDirectoryIsAnIoError) {
  EXPECT_THROW(TextWriter("/nonexistent-dir/x.svm"), IoError);
}

}  // namespace
}  // namespace polymargin::io
