// Byte sources: one input (a file or "-" for stdin) as a stream of decompressed bytes. The
// compression is recognised by the first bytes of the input, never by the file name, so a
// misnamed or extension-less file still reads correctly. Every decoder treats an input that ends
// inside a compressed stream as an error: a short read of training data must never look like a
// smaller, valid data set.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace polymargin::io {

/// How an input is compressed. (Not io/text_writer.h's Compression: inputs may also be bzip2.)
enum class SourceCompression { kNone, kGzip, kBzip2, kZstd };

/// Recognises gzip (1f 8b), bzip2 ("BZh"), zstd (28 b5 2f fd, or a skippable frame) from the
/// first bytes of an input; kNone when none matches (also for fewer bytes than a magic needs).
SourceCompression detect_compression(std::string_view head);

/// "plain", "gzip", "bzip2" or "zstd".
const char* compression_name(SourceCompression compression);

/// The name used for `path` in messages: "<stdin>" for "-", the path itself otherwise.
std::string display_name(const std::string& path);

/// A sequential reader of one input's decompressed bytes.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  /// Reads up to `size` bytes into `out`; returns 0 only at the end of the input. Throws IoError
  /// when the system refuses the read, DataError when the compressed data are corrupt or truncated.
  virtual std::size_t read(char* out, std::size_t size) = 0;

  /// The whole input, when it is an uncompressed regular file mapped into memory (then read() is
  /// not used and the text is parsed where the page cache holds it, with no copy); empty
  /// otherwise. Valid while the source lives.
  virtual std::string_view mapped() const { return {}; }

  /// The input's name as used in messages (see display_name).
  const std::string& name() const { return name_; }
  /// The compression detected from the input's magic bytes.
  SourceCompression compression() const { return compression_; }

 protected:
  ByteSource(std::string name, SourceCompression compression)
      : name_(std::move(name)), compression_(compression) {}

 private:
  std::string name_;
  SourceCompression compression_;
};

/// Opens `path` ("-" is stdin), detects its compression and returns the matching decoder. Throws
/// IoError when the input cannot be opened or read.
std::unique_ptr<ByteSource> open_byte_source(const std::string& path);

}  // namespace polymargin::io
