// The LIBSVM / SVMlight line parser: a block of whole lines → CSR rows, with the lines it had to
// reject. It knows nothing of files, threads or absolute line numbers (the text reader adds those),
// so that any chunk of a file can be parsed on any thread and the results put back in order.
//
// Grammar, one row a line:  label [qid:N] idx:val ... [# comment]
// Tokens are separated by spaces or tabs; a line may end in CRLF. Labels and values are finite
// floats (a leading '+' is accepted), indices unsigned decimal integers below 2^32 and strictly
// increasing within a row. qid is validated and dropped. '#' starts a comment at a token boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/csr.h"
#include "io/text_reader.h"

namespace polymargin::io {

/// How many rejected lines a chunk keeps the message of (the reader keeps as many overall).
inline constexpr std::size_t kKeptBadLineMessages = 10;

/// What the parser needs to know beyond the text.
struct ParseOptions {
  IndexBase index_base = IndexBase::kAuto;  // kOne makes index 0 an error
  /// The parser stops at the bad line after this many (0: at the first bad line).
  std::uint64_t max_bad_lines = 0;
  /// A longer line (without its '\n') is a bad line.
  std::uint64_t max_line_bytes = std::numeric_limits<std::uint64_t>::max();
  /// A row with more non-zeros is a bad line.
  std::uint64_t max_row_nnz = std::numeric_limits<std::uint64_t>::max();
};

/// A line the parser rejected. line and column are 1-based within the parsed text.
struct BadLine {
  std::uint64_t line = 0;
  std::uint64_t column = 0;
  std::string message;  // quotes the offending token
};

/// The result of parsing one block of lines.
struct ParsedChunk {
  CsrBuffer rows;               // every accepted row, in order
  std::uint64_t lines = 0;      // physical lines parsed (all of them unless `fatal` is set)
  std::uint64_t bad_lines = 0;  // lines skipped, not counting `fatal`
  std::vector<BadLine> first_bad_lines;  // the first kKeptBadLineMessages skipped lines
  /// The bad line over max_bad_lines; parsing stopped there and rows holds the rows before it.
  std::optional<BadLine> fatal;
  std::uint32_t max_index = 0;  // largest index in rows
  bool saw_index_zero = false;

  /// Empties the result, keeping the capacity of its buffers.
  void clear();
};

/// The message of a line longer than max_line_bytes (whether the parser or the text reader, which
/// cuts out a line that does not fit a chunk, finds it); its column is max_line_bytes + 1.
std::string long_line_message(std::uint64_t max_line_bytes);

/// Parses `text` (whole lines; the last one may lack its '\n') into `out`, which is cleared first.
/// Never throws for bad content: rejected lines are reported in `out`.
void parse_libsvm_lines(std::string_view text, const ParseOptions& options, ParsedChunk& out);

}  // namespace polymargin::io
