#include "io/text_writer.h"

#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "engine/errors.h"

namespace polymargin::io {

namespace {

// Two-digit table: writing digits in pairs halves the divisions.
constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

std::size_t decimal_digits(std::uint64_t v) {
  std::size_t n = 1;
  for (; v >= 10000; v /= 10000) n += 4;
  return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

// Writes v's digits backwards from their end, two at a time.
char* write_unsigned(char* p, std::uint64_t v) {
  char* const end = p + decimal_digits(v);
  char* q = end;
  while (v >= 100) {
    const std::size_t pair = static_cast<std::size_t>(v % 100) * 2;
    v /= 100;
    q -= 2;
    std::memcpy(q, kDigitPairs + pair, 2);
  }
  if (v >= 10) {
    std::memcpy(q - 2, kDigitPairs + v * 2, 2);
  } else {
    q[-1] = static_cast<char>('0' + v);
  }
  return end;
}

// Integral values print as integers ("1", "-1", "3"); anything else in the shortest form that
// reads back to the same float.
char* write_number(char* p, float v) {
  if (v == 1.0f) {
    *p = '1';
    return p + 1;
  }
  if (std::floor(v) == v && std::fabs(v) < 1e15f) {
    const double d = v;
    if (d < 0) *p++ = '-';
    return write_unsigned(p, static_cast<std::uint64_t>(std::fabs(d)));
  }
  return std::to_chars(p, p + 48, v).ptr;
}

// Upper bound of a row's text: label, then per entry ' ' index ':' and a value of "1" or at most
// kMaxValueChars; the bound stays close to the real size, so buffers are not over-filled.
constexpr std::size_t kMaxValueChars = 48;
constexpr std::size_t kMaxEntryChars = 1 + 10 + 1 + 1;

char* write_row(const CsrView& rows, std::size_t r, char* p) {
  p = write_number(p, rows.labels[r]);
  const std::uint32_t b = rows.offsets[r], e = rows.offsets[r + 1];
  for (std::uint32_t k = b; k < e; ++k) {
    *p++ = ' ';
    p = write_unsigned(p, rows.indices[k]);
    *p++ = ':';
    if (rows.values) {
      p = write_number(p, rows.values[k]);
    } else {
      *p++ = '1';
    }
  }
  *p++ = '\n';
  return p;
}

std::size_t row_bound(const CsrView& rows, std::size_t r) {
  std::size_t bound = kMaxValueChars + 1 + rows.row_nnz(r) * kMaxEntryChars;
  if (rows.values) {
    for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k)
      bound += rows.values[k] == 1.0f ? 0 : kMaxValueChars;
  }
  return bound;
}

struct CctxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

// Appends `text` to `out` as one standalone zstd frame.
void append_zstd_frame(int level, std::string_view text, std::string& out,
                       const std::string& path) {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) throw std::bad_alloc();
  const std::size_t start = out.size();
  out.resize(start + ZSTD_compressBound(text.size()));
  const std::size_t n = ZSTD_compressCCtx(cctx.get(), out.data() + start, out.size() - start,
                                          text.data(), text.size(), level);
  if (ZSTD_isError(n)) throw IoError("cannot compress " + path + ": zstd: " + ZSTD_getErrorName(n));
  out.resize(start + n);
}

// Appends `text` to `out` as one standalone gzip member. zlib writes a zero mtime, so the bytes
// are reproducible.
void append_gzip_member(int level, std::string_view text, std::string& out,
                        const std::string& path) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw IoError("cannot compress " + path + ": gzip initialisation failed");
  const std::size_t start = out.size();
  out.resize(start + deflateBound(&z, static_cast<uLong>(text.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());  // blocks stay far below 4 GiB
  z.next_out = reinterpret_cast<Bytef*>(out.data() + start);
  z.avail_out = static_cast<uInt>(out.size() - start);
  const int rc = deflate(&z, Z_FINISH);
  out.resize(start + z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw IoError("cannot compress " + path + ": gzip deflate failed");
}

}  // namespace

Compression compression_for_path(const std::string& path) {
  if (path.ends_with(".zst")) return Compression::kZstd;
  if (path.ends_with(".gz")) return Compression::kGzip;
  return Compression::kNone;
}

Compression parse_compression(const std::string& text) {
  if (text == "none") return Compression::kNone;
  if (text == "zstd") return Compression::kZstd;
  if (text == "gzip") return Compression::kGzip;
  throw UsageError("unknown compression '" + text + "' (expected none, zstd or gzip)");
}

std::string compression_extension(Compression compression) {
  switch (compression) {
    case Compression::kZstd:
      return ".zst";
    case Compression::kGzip:
      return ".gz";
    case Compression::kNone:
      break;
  }
  return "";
}

void append_libsvm_row(const CsrView& rows, std::size_t r, std::string& out) {
  const std::size_t start = out.size();
  out.resize(start + row_bound(rows, r));
  char* const end = write_row(rows, r, out.data() + start);
  out.resize(static_cast<std::size_t>(end - out.data()));
}

void append_libsvm_text(const CsrView& rows, std::string& out) {
  std::size_t bound = 0;
  for (std::size_t r = 0; r < rows.rows; ++r) bound += row_bound(rows, r);
  const std::size_t start = out.size();
  out.resize(start + bound);
  char* p = out.data() + start;
  for (std::size_t r = 0; r < rows.rows; ++r) p = write_row(rows, r, p);
  out.resize(static_cast<std::size_t>(p - out.data()));
}

TextWriter::TextWriter(std::string path, const TextWriterOptions& options)
    : path_(std::move(path)),
      options_(options),
      compression_(options.compression.value_or(compression_for_path(path_))) {
  if (path_ != "-") file_ = std::make_unique<AtomicFile>(path_);
}

TextWriter::~TextWriter() = default;

void TextWriter::write(const CsrView& rows) {
  for (std::size_t r = 0; r < rows.rows; ++r) write_row(rows, r);
}

void TextWriter::write_row(const CsrView& rows, std::size_t r) {
  const std::size_t before = pending_.size();
  append_libsvm_row(rows, r, pending_);
  text_bytes_ += pending_.size() - before;
  ++rows_;
  // Checked per row, so frame boundaries depend on the content only, not on batch sizes.
  if (pending_.size() >= options_.frame_bytes) flush_pending();
}

void TextWriter::encode(const CsrView& rows, EncodedText& out) const {
  out.rows = rows.rows;
  out.bytes.clear();
  if (compression_ == Compression::kNone) {
    append_libsvm_text(rows, out.bytes);
    out.text_bytes = out.bytes.size();
    return;
  }
  thread_local std::string text;
  text.clear();
  append_libsvm_text(rows, text);
  out.text_bytes = text.size();
  append_frame(text, out.bytes);
}

void TextWriter::append_frame(std::string_view text, std::string& out) const {
  if (text.empty()) return;
  if (compression_ == Compression::kZstd)
    append_zstd_frame(options_.zstd_level, text, out, path_);
  else if (compression_ == Compression::kGzip)
    append_gzip_member(options_.gzip_level, text, out, path_);
  else
    out.append(text);
}

void TextWriter::write_encoded(const EncodedText& block) {
  flush_pending();
  write_file(block.bytes.data(), block.bytes.size());
  rows_ += block.rows;
  text_bytes_ += block.text_bytes;
}

void TextWriter::flush_pending() {
  if (pending_.empty()) return;
  if (compression_ == Compression::kNone) {
    write_file(pending_.data(), pending_.size());
  } else {
    scratch_.clear();
    append_frame(pending_, scratch_);
    write_file(scratch_.data(), scratch_.size());
  }
  pending_.clear();
}

void TextWriter::write_file(const char* data, std::size_t size) {
  if (file_) {
    file_->write(std::string_view(data, size));
  } else if (std::fwrite(data, 1, size, stdout) != size) {
    throw IoError("cannot write to standard output: " + std::string(std::strerror(errno)));
  }
  file_bytes_ += size;
}

void TextWriter::finish() {
  if (finished_) return;
  flush_pending();
  if (file_) {
    file_->commit();
  } else if (std::fflush(stdout) != 0) {
    throw IoError("cannot write to standard output: " + std::string(std::strerror(errno)));
  }
  finished_ = true;
}

}  // namespace polymargin::io
