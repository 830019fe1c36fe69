#include "io/libsvm_parser.h"

#include <fast_float/fast_float.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace polymargin::io {

namespace {

// Indices saturate here while digits are read, so that any number of digits cannot overflow.
constexpr std::uint64_t kIndexTooLarge = std::uint64_t{1} << 32;
// Longest token quoted in a message; binary garbage can form very long "tokens".
constexpr std::size_t kMaxQuoted = 48;

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_control(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}
// A number must be followed by a separator, the end of the line or a comment.
bool ends_token(const char* p, const char* end) { return p == end || is_blank(*p) || *p == '#'; }
const char* token_end(const char* p, const char* end) {
  while (p < end && !is_blank(*p)) ++p;
  return p;
}
bool starts_with(const char* p, const char* end, std::string_view prefix) {
  return static_cast<std::size_t>(end - p) >= prefix.size() &&
         std::memcmp(p, prefix.data(), prefix.size()) == 0;
}

std::string quote(const char* begin, const char* end) {
  const std::size_t n = static_cast<std::size_t>(end - begin);
  if (n <= kMaxQuoted) return "'" + std::string(begin, n) + "'";
  return "'" + std::string(begin, kMaxQuoted) + "...'";
}

// Reads the decimal digits at p (advancing p past them) as an index, saturating at kIndexTooLarge.
// Eight bytes at a time where the line has them: indices of large data sets are 6 to 8 digits, and
// a digit-by-digit loop is a chain of dependent multiply-adds that dominates the parse.
std::uint64_t parse_index_digits(const char*& p, const char* end) {
  std::uint64_t index = 0;
  if (end - p >= 8) {
    std::uint64_t bytes;
    std::memcpy(&bytes, p, 8);  // little-endian: the first character is the lowest byte
    // A byte is a digit iff its high nibble is 3 and adding 6 keeps it 3 (0x30..0x39). Carries
    // between bytes only disturb bytes after the first non-digit, which are not used.
    constexpr std::uint64_t kHigh = 0xF0F0F0F0F0F0F0F0, kSix = 0x0606060606060606;
    const std::uint64_t non_digit =
        ((bytes & kHigh) | (((bytes + kSix) & kHigh) >> 4)) ^ 0x3333333333333333;
    const int digits = non_digit ? __builtin_ctzll(non_digit) / 8 : 8;
    if (digits == 0) return 0;
    // Digit values, shifted so that the missing leading digits read as zeros; then pairs, quads
    // and the octet are combined by three multiply-shift-mask steps.
    std::uint64_t v = (bytes - 0x3030303030303030) << (8 * (8 - digits));
    v = ((v * (1 + (10 << 8))) >> 8) & 0x00FF00FF00FF00FF;
    v = ((v * (1 + (100 << 16))) >> 16) & 0x0000FFFF0000FFFF;
    index = (v * (1 + (std::uint64_t{10000} << 32))) >> 32;
    p += digits;
    if (digits < 8) return index;
  }
  while (p < end) {
    const unsigned digit = static_cast<unsigned>(*p) - '0';
    if (digit > 9) break;
    index = std::min(index * 10 + digit, kIndexTooLarge);
    ++p;
  }
  return index;
}

// Parses a float the way the grammar allows: fast_float, plus an optional leading '+', which
// LIBSVM files use for labels ("+1") and fast_float (like std::from_chars) rejects.
const char* parse_float(const char* p, const char* end, float& value) {
  const char* digits = p;
  if (p < end && *p == '+' && p + 1 < end && p[1] != '-' && p[1] != '+') ++digits;
  const auto result = fast_float::from_chars(digits, end, value);
  return result.ec == std::errc() ? result.ptr : nullptr;
}

// A number written with digits that did not fit a float parses as ±inf; say so rather than
// calling it "not finite", which would puzzle whoever wrote 1e39.
std::string non_finite_problem(const char* begin) {
  const char* p = begin;
  if (*p == '+' || *p == '-') ++p;
  const bool digits = (*p >= '0' && *p <= '9') || *p == '.';
  return digits ? "is out of float range" : "is not finite";
}

// Parses one line after another into a ParsedChunk. A rejected line leaves no trace in the rows.
class LineParser {
 public:
  LineParser(const ParseOptions& options, ParsedChunk& out)
      : one_based_(options.index_base == IndexBase::kOne),
        max_row_nnz_(options.max_row_nnz),
        out_(out) {}

  // Parses [begin, end) (no '\n'); false when the line is rejected (see error_column/message).
  bool parse(const char* begin, const char* end) {
    line_ = begin;
    if (end > begin && end[-1] == '\r') --end;  // CRLF
    const char* p = begin;
    while (p < end && is_blank(*p)) ++p;
    if (p == end) return true;  // blank line
    if (*p == '#') return check_comment(p, end);

    float label;
    const char* after = parse_float(p, end, label);
    if (!after || !ends_token(after, end)) return label_error(p, end);
    if (!std::isfinite(label))
      return fail(p, "label " + quote(p, token_end(p, end)) + " " + non_finite_problem(p));
    // Labels are floats: a class id (an integer, however written: 16777217, 16777217.0,
    // 1.6777217e7) beyond 2^24 that no float holds exactly would share its float with a
    // neighbour, silently one class with it. From 2^53 on not even its double tells an integer
    // from its neighbours (9007199254740993 reads as ...992), so no label is taken there. (Other
    // labels are rounded to a float, as any value is: 2.5, 0.1.)
    if (std::fabs(label) >= 16777216.0f) {
      double exact = 0;
      fast_float::from_chars(p + (*p == '+'), after, exact);
      if (std::fabs(exact) >= 9007199254740992.0)
        return fail(p, "label " + quote(p, token_end(p, end)) +
                           " is 2^53 or more, where a double no longer tells integers apart "
                           "(labels are stored as floats: class ids up to 16777216)");
      if (exact == std::trunc(exact) && exact != static_cast<double>(label))
        return fail(p, "label " + quote(p, token_end(p, end)) +
                           " is an integer no float holds exactly (labels are stored as floats: "
                           "class ids up to 16777216)");
    }
    if (label == 0) label = 0;  // -0 is the class 0
    p = after;

    CsrBuffer& rows = out_.rows;
    const std::size_t row_begin = rows.indices.size();
    bool saw_qid = false;
    std::int64_t previous = -1;  // the row's last index; -1 before its first
    for (;;) {
      while (p < end && is_blank(*p)) ++p;
      if (p == end) break;
      if (*p == '#') {
        if (!check_comment(p, end)) return rollback(row_begin);
        break;
      }
      const char* token = p;
      if (previous < 0 && !saw_qid && starts_with(p, end, "qid:")) {
        saw_qid = true;
        if (!parse_qid(p, end)) return rollback(row_begin);
        continue;
      }
      const std::uint64_t index = parse_index_digits(p, end);
      if (p == token || p == end || *p != ':') {
        feature_syntax_error(token, end);
        return rollback(row_begin);
      }
      if (index >= kIndexTooLarge || (index == 0 && one_based_) ||
          static_cast<std::int64_t>(index) <= previous) {
        index_error(token, end, index, previous);
        return rollback(row_begin);
      }
      if (rows.indices.size() - row_begin == max_row_nnz_) {
        fail(token, "row has more than " + std::to_string(max_row_nnz_) +
                        " non-zeros, the most one row may have");
        return rollback(row_begin);
      }
      ++p;  // ':'

      float value;
      if (p < end && *p == '1' && ends_token(p + 1, end)) {
        value = 1.0f;  // the common case of binary features, without a general float parse
        ++p;
      } else {
        const char* value_end = parse_float(p, end, value);
        if (!value_end || !ends_token(value_end, end) || !std::isfinite(value)) {
          value_error(token, p, value_end, end);
          return rollback(row_begin);
        }
        p = value_end;
      }
      if (value != 1.0f && !rows.has_values) rows.ensure_values();
      rows.indices.push_back(static_cast<std::uint32_t>(index));
      if (rows.has_values) rows.values.push_back(value);
      previous = static_cast<std::int64_t>(index);
    }
    if (rows.indices.size() > std::numeric_limits<std::uint32_t>::max()) {
      fail(begin, "too many non-zeros in one block of rows");
      return rollback(row_begin);
    }
    rows.labels.push_back(label);
    rows.offsets.push_back(static_cast<std::uint32_t>(rows.indices.size()));
    if (previous >= 0) {
      out_.max_index = std::max(out_.max_index, static_cast<std::uint32_t>(previous));
      out_.saw_index_zero |= rows.indices[row_begin] == 0;
    }
    return true;
  }

  std::uint64_t error_column() const { return static_cast<std::uint64_t>(error_at_ - line_) + 1; }
  std::string& error_message() { return error_message_; }

 private:
  bool fail(const char* at, std::string message) {
    error_at_ = at;
    error_message_ = std::move(message);
    return false;
  }
  // Control bytes anywhere in the token mean the input is not text at all; say that first.
  bool binary_in(const char* begin, const char* end) {
    for (const char* q = begin; q < end; ++q) {
      if (!is_control(*q)) continue;
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(*q));
      if (*q == '\r') return !fail(q, "stray carriage return (byte 0x0d) inside a line");
      return !fail(q, std::string("binary data (byte ") + hex + ")");
    }
    return false;
  }
  bool rollback(std::size_t row_begin) {
    out_.rows.indices.resize(row_begin);
    if (out_.rows.has_values) out_.rows.values.resize(row_begin);
    return false;
  }
  bool check_comment(const char* p, const char* end) { return !binary_in(p, end); }

  bool label_error(const char* p, const char* end) {
    const char* tok_end = token_end(p, end);
    if (binary_in(p, tok_end)) return false;
    if (std::find(p, tok_end, ':') != tok_end)
      return fail(p, "missing label: the line starts with feature " + quote(p, tok_end));
    return fail(p, "bad label " + quote(p, tok_end));
  }

  bool parse_qid(const char*& p, const char* end) {
    const char* token = p;
    const char* digits = p + 4;
    const char* q = digits;
    std::uint64_t qid = 0;
    bool overflow = false;
    for (; q < end && *q >= '0' && *q <= '9'; ++q) {
      const unsigned digit = static_cast<unsigned>(*q - '0');
      overflow |= qid > (std::numeric_limits<std::uint64_t>::max() - digit) / 10;
      qid = qid * 10 + digit;
    }
    if (q == digits || !ends_token(q, end) || overflow) {
      const char* tok_end = token_end(token, end);
      if (!binary_in(token, tok_end)) fail(token, "bad qid " + quote(token, tok_end));
      return false;
    }
    p = q;
    return true;
  }

  // The token at `token` did not read as digits followed by ':'.
  void feature_syntax_error(const char* token, const char* end) {
    const char* tok_end = token_end(token, end);
    if (binary_in(token, tok_end)) return;
    const std::string quoted = quote(token, tok_end);
    const char* colon = std::find(token, tok_end, ':');
    if (starts_with(token, end, "qid:")) {
      fail(token, "unexpected qid " + quoted + " (a qid comes once, right after the label)");
    } else if (*token == '-') {
      fail(token, "negative feature index in " + quoted);
    } else if (colon == tok_end) {
      fail(token, "missing ':' in feature " + quoted);
    } else {
      fail(token, "bad feature index " + quote(token, colon) + " in " + quoted);
    }
  }

  // The index in `token` is too large, 0 in a 1-based file, or not above the previous one.
  void index_error(const char* token, const char* end, std::uint64_t index, std::int64_t previous) {
    const std::string quoted = quote(token, token_end(token, end));
    if (index >= kIndexTooLarge) {
      fail(token, "feature index in " + quoted + " is larger than 4294967295");
    } else if (index == 0 && one_based_) {
      fail(token, "feature index 0 is not positive (indices are 1-based) in " + quoted);
    } else if (static_cast<std::int64_t>(index) == previous) {
      fail(token, "duplicate feature index " + std::to_string(index) + " in " + quoted);
    } else {
      fail(token, "unsorted feature index " + std::to_string(index) + " after " +
                      std::to_string(previous) + " in " + quoted +
                      " (indices must increase within a row)");
    }
  }

  // The value at `value` (after ':') did not parse, or parsed to `value_end` but was followed by
  // something other than a separator, or was not finite.
  void value_error(const char* token, const char* value, const char* value_end, const char* end) {
    const char* tok_end = token_end(token, end);
    if (binary_in(token, tok_end)) return;
    const std::string quoted = quote(token, tok_end);
    if (value == tok_end || *value == '#') {
      fail(value, "missing feature value in " + quoted);
    } else if (value_end && ends_token(value_end, end)) {
      fail(value, "feature value " + quote(value, tok_end) + " " + non_finite_problem(value) +
                      " in " + quoted);
    } else {
      fail(value, "bad feature value " + quote(value, tok_end) + " in " + quoted);
    }
  }

  const bool one_based_;
  const std::uint64_t max_row_nnz_;
  ParsedChunk& out_;
  const char* line_ = nullptr;
  const char* error_at_ = nullptr;
  std::string error_message_;
};

}  // namespace

void ParsedChunk::clear() {
  rows.clear();
  lines = 0;
  bad_lines = 0;
  first_bad_lines.clear();
  fatal.reset();
  max_index = 0;
  saw_index_zero = false;
}

std::string long_line_message(std::uint64_t max_line_bytes) {
  return "line longer than " + std::to_string(max_line_bytes) + " bytes (--max-line-bytes)";
}

void parse_libsvm_lines(std::string_view text, const ParseOptions& options, ParsedChunk& out) {
  out.clear();
  LineParser parser(options, out);
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (!eol) eol = end;
    ++out.lines;
    const bool too_long = static_cast<std::uint64_t>(eol - p) > options.max_line_bytes;
    if (too_long || !parser.parse(p, eol)) {
      BadLine bad =
          too_long ? BadLine{out.lines, options.max_line_bytes + 1,
                             long_line_message(options.max_line_bytes)}
                   : BadLine{out.lines, parser.error_column(), std::move(parser.error_message())};
      if (out.bad_lines == options.max_bad_lines) {
        out.fatal = std::move(bad);
        return;
      }
      ++out.bad_lines;
      if (out.first_bad_lines.size() < kKeptBadLineMessages)
        out.first_bad_lines.push_back(std::move(bad));
    }
    p = eol + 1;
  }
}

}  // namespace polymargin::io
