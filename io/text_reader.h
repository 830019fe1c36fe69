// LIBSVM / SVMlight text → CSR rows, streamed. Inputs may be plain, gzip, bzip2 or zstd (detected by
// magic bytes, never by name), several files in sequence, or "-" for stdin. Parsing runs in parallel
// over line-aligned chunks (a oneTBB pipeline: serial read → parallel parse → serial in-order sink);
// the rows delivered, and the first error reported, never depend on thread count or chunk size.
//
// Grammar, one row a line:  label [qid:N] idx:val ... [# comment]
// Blank lines and comment-only lines are skipped; CRLF, a UTF-8 BOM and a missing final newline are
// accepted. Indices are stored raw (as written in the file); the index base only decides whether
// index 0 is an error. Strict by default: any malformed line throws DataError naming file, line,
// column and the offending token, unless max_bad_lines allows skipping whole lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "engine/csr.h"

namespace polymargin::io {

enum class IndexBase { kAuto, kZero, kOne };

/// "auto" | "0" | "1" → IndexBase; throws UsageError otherwise.
IndexBase parse_index_base(const std::string& text);
/// 0 or 1 (kAuto must be resolved first).
int index_base_value(IndexBase base);

struct TextOptions {
  IndexBase index_base = IndexBase::kAuto;
  std::size_t chunk_bytes = std::size_t{4} << 20;  // bytes per parallel parse task
  std::uint64_t max_bad_lines = 0;                 // 0: the first bad line is an error
  int threads = 0;                                 // 0: all hardware threads
  /// A longer line is a bad line like any other (file:line, skipped under max_bad_lines), wherever
  /// the chunks fall and whatever the input; no more of it than about this many bytes (or a chunk)
  /// is held, so memory stays bounded on a stream without line ends. Default: room for a row of
  /// about 10 M non-zeros; a block holds at most 16.7 M.
  std::uint64_t max_line_bytes = std::uint64_t{256} << 20;
  /// A row with more non-zeros is a bad line (convert lowers it to what a shard block holds).
  std::uint64_t max_row_nnz = std::numeric_limits<std::uint64_t>::max();
};

/// Text with a NUL byte in its first line, within its first 4 KiB, is binary, not LIBSVM: a
/// DataError at 1:COLUMN before anything else is read (/dev/zero at 1:1).
inline constexpr std::size_t kBinarySniffBytes = 4096;

struct TextStats {
  std::uint64_t rows = 0;
  std::uint64_t nnz = 0;
  std::uint64_t lines = 0;      // physical lines read, blank and comment lines included
  std::uint64_t bytes = 0;      // decompressed bytes read
  std::uint64_t bad_lines = 0;  // skipped under max_bad_lines
  std::vector<std::string> bad_line_messages;  // the first few, "file:line:col: message"
  bool any_index = false;        // at least one non-zero entry was read
  std::uint32_t max_index = 0;   // largest raw index seen
  bool saw_index_zero = false;
  IndexBase resolved_base = IndexBase::kOne;  // kAuto resolved as scikit-learn does: 0 if any index is 0
};

using RowSink = std::function<void(const CsrView& rows)>;

/// Streams every row of `inputs` in order into `sink`, called serially in input order. Throws
/// DataError (bad content, empty input), IoError (cannot open/read). Returns totals.
TextStats read_libsvm_text(const std::vector<std::string>& inputs, const TextOptions& options,
                           const RowSink& sink);

}  // namespace polymargin::io
