// LIBSVM text output. Rows are formatted with hand-written integer printing and shortest
// round-trip floats (raw indices exactly as given, `1` for a value of 1, labels as integers when
// integral), optionally compressed, and written through an AtomicFile: a temporary name that
// finish() fsyncs and renames into place.
//
// Compression is chosen by the output name unless given: `.zst` → zstd, `.gz` → gzip, else plain.
// A compressed file is a sequence of standalone zstd frames or gzip members (one per encoded block,
// or per ~frame_bytes of buffered text), so blocks can be compressed in parallel by encode() and
// the bytes never depend on the thread count; zstd, gzip -d and io/'s readers decode concatenated
// frames and members in full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/csr.h"
#include "io/atomic_file.h"

namespace polymargin::io {

enum class Compression { kNone, kGzip, kZstd };

/// Compression implied by a file name: ".zst" → zstd, ".gz" → gzip, anything else → none.
Compression compression_for_path(const std::string& path);
/// "none" | "zstd" | "gzip" → Compression; throws UsageError otherwise.
Compression parse_compression(const std::string& text);
/// File-name extension of a compression: "", ".zst" or ".gz".
std::string compression_extension(Compression compression);

/// Appends row r of `rows` to `out` as one LIBSVM line, "\n" included.
void append_libsvm_row(const CsrView& rows, std::size_t r, std::string& out);
/// Appends every row of `rows` to `out` as LIBSVM lines.
void append_libsvm_text(const CsrView& rows, std::string& out);

struct TextWriterOptions {
  std::optional<Compression> compression;  // unset: chosen by the output name
  int zstd_level = 3;
  int gzip_level = 1;  // gzip -6 is 4.7× slower here for 14% less; zstd beats both
  std::size_t frame_bytes = std::size_t{1} << 20;  // text buffered by write() before it is flushed
};

/// A block of rows already formatted (and, for zstd, compressed as a standalone frame) by
/// TextWriter::encode, ready for TextWriter::write_encoded.
struct EncodedText {
  std::string bytes;
  std::uint64_t rows = 0;
  std::uint64_t text_bytes = 0;  // uncompressed size
};

/// Writes one LIBSVM text file. Not thread-safe, except encode(), which may run concurrently.
class TextWriter {
 public:
  /// Opens a temporary file beside `path` ("-": standard output, written directly, uncompressed
  /// unless options say otherwise). Throws IoError when it cannot be created.
  explicit TextWriter(std::string path, const TextWriterOptions& options = {});
  /// Removes the temporary file unless finish() succeeded.
  ~TextWriter();
  TextWriter(const TextWriter&) = delete;
  TextWriter& operator=(const TextWriter&) = delete;

  /// Appends every row of `rows` (buffered).
  void write(const CsrView& rows);
  /// Appends row r of `rows` (buffered).
  void write_row(const CsrView& rows, std::size_t r);
  /// Formats (and for zstd compresses) `rows` into `out`, reusing its storage, independently of the
  /// writer's state; thread-safe.
  void encode(const CsrView& rows, EncodedText& out) const;
  /// Appends a block produced by encode(), after everything written before.
  void write_encoded(const EncodedText& block);
  /// Flushes, closes and renames the file into place. Throws IoError on any failure.
  void finish();

  Compression compression() const { return compression_; }
  const std::string& path() const { return path_; }
  std::uint64_t rows() const { return rows_; }
  /// Uncompressed bytes of text written so far.
  std::uint64_t text_bytes() const { return text_bytes_; }
  /// Bytes written to the file so far (compressed size).
  std::uint64_t file_bytes() const { return file_bytes_; }

 private:
  void flush_pending();
  // Appends `text` to `out` as one standalone frame of the output's compression (as is if none).
  void append_frame(std::string_view text, std::string& out) const;
  void write_file(const char* data, std::size_t size);  // raw bytes to the file or stdout

  std::string path_;
  TextWriterOptions options_;
  Compression compression_;
  std::unique_ptr<AtomicFile> file_;  // null: standard output
  bool finished_ = false;
  std::string pending_;
  std::string scratch_;
  std::uint64_t rows_ = 0;
  std::uint64_t text_bytes_ = 0;
  std::uint64_t file_bytes_ = 0;
};

}  // namespace polymargin::io
