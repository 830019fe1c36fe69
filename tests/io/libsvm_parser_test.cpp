#include "io/libsvm_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/io/test_files.h"

namespace polymargin::io {
namespace {

using testing::dump_rows;

ParsedChunk parse(std::string_view text, IndexBase base = IndexBase::kAuto,
                  std::uint64_t max_bad_lines = 0) {
  ParsedChunk out;
  parse_libsvm_lines(text, ParseOptions{base, max_bad_lines}, out);
  return out;
}

// The rows of `text`, expecting no bad line.
std::string rows_of(std::string_view text, IndexBase base = IndexBase::kAuto) {
  const ParsedChunk out = parse(text, base);
  EXPECT_FALSE(out.fatal) << out.fatal->message;
  EXPECT_EQ(out.bad_lines, 0u);
  return dump_rows(out.rows.view());
}

TEST(LibsvmParser, ParsesLabelsIndicesAndValues) {
  const ParsedChunk out = parse("1 1:0.5 3:1 10:-2e-3\n-1 2:2\n");
  EXPECT_EQ(out.lines, 2u);
  ASSERT_EQ(out.rows.rows(), 2u);
  EXPECT_EQ(out.rows.nnz(), 4u);
  EXPECT_TRUE(out.rows.has_values);
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:0.5 3:1 10:-0.002\n-1 2:2\n");
  EXPECT_EQ(out.max_index, 10u);
  EXPECT_FALSE(out.saw_index_zero);
}

TEST(LibsvmParser, AllUnitValuesStoreNoValues) {
  const ParsedChunk out = parse("1 1:1 2:1.0 7:1e0\n0 3:1\n");
  EXPECT_FALSE(out.rows.has_values);
  EXPECT_TRUE(out.rows.values.empty());
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1 2:1 7:1\n0 3:1\n");
}

TEST(LibsvmParser, ExplicitZeroValueIsKept) {
  const ParsedChunk out = parse("1 1:1 2:0 3:1\n");
  ASSERT_TRUE(out.rows.has_values);
  EXPECT_EQ(out.rows.values, (std::vector<float>{1, 0, 1}));
}

TEST(LibsvmParser, AcceptsAnyFiniteLabel) {
  EXPECT_EQ(rows_of("+1 1:1\n-1 1:1\n0 1:1\n3 1:1\n2.5 1:1\n1e3 1:1\n-.5 1:1\n"),
            "1 1:1\n-1 1:1\n0 1:1\n3 1:1\n2.5 1:1\n1000 1:1\n-0.5 1:1\n");
}

// Labels are floats: class ids up to 2^24, below 2^53 integers beyond it that a float holds, and
// other values rounded to a float (16777216.5 is 16777216); -0 is class 0.
TEST(LibsvmParser, KeepsLabelsAFloatHoldsAndMakesMinusZeroZero) {
  EXPECT_EQ(rows_of("16777216 1:1\n-16777216 1:1\n33554432 1:1\n4503599627370496 1:1\n"
                    "16777216.5 1:1\n"),
            "16777216 1:1\n-16777216 1:1\n33554432 1:1\n4.5035996e+15 1:1\n16777216 1:1\n");
  const ParsedChunk out = parse("-0 1:1\n");
  ASSERT_EQ(out.rows.rows(), 1u);
  EXPECT_FALSE(std::signbit(out.rows.labels[0]));
}

TEST(LibsvmParser, AcceptsSignedAndExponentValues) {
  EXPECT_EQ(rows_of("1 1:+0.5 2:-3 3:1E2 4:.25 5:7.\n"), "1 1:0.5 2:-3 3:100 4:0.25 5:7\n");
}

TEST(LibsvmParser, QidIsValidatedAndDropped) {
  EXPECT_EQ(rows_of("2 qid:17 1:1 4:0.5\n1 qid:0 2:1\n"), "2 1:1 4:0.5\n1 2:1\n");
}

TEST(LibsvmParser, SkipsBlankAndCommentLinesButCountsThem) {
  const ParsedChunk out =
      parse("# header\n\n   \t\n1 1:1 # trailing\n-1 2:1#tight\n1# no features\n");
  EXPECT_EQ(out.lines, 6u);
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1\n-1 2:1\n1\n");
}

TEST(LibsvmParser, HandlesCrLfTabsSpacesAndNoFinalNewline) {
  EXPECT_EQ(rows_of("1 1:1\r\n-1\t2:0.5\r\n"), "1 1:1\n-1 2:0.5\n");
  EXPECT_EQ(rows_of("  1 \t 1:1    3:2\t\t\n"), "1 1:1 3:2\n");
  EXPECT_EQ(rows_of("1 1:1\n-1 2:1"), "1 1:1\n-1 2:1\n");
  EXPECT_EQ(rows_of("1 1:1\r"), "1 1:1\n");
  EXPECT_EQ(parse("1 1:1\n-1 2:1").lines, 2u);
  EXPECT_EQ(parse("").lines, 0u);
}

TEST(LibsvmParser, RowWithoutFeaturesIsARow) {
  const ParsedChunk out = parse("1\n-1 \n");
  EXPECT_EQ(out.rows.rows(), 2u);
  EXPECT_EQ(out.rows.nnz(), 0u);
}

TEST(LibsvmParser, IndicesAreStoredRaw) {
  EXPECT_EQ(rows_of("1 007:1 4294967295:2\n"), "1 7:1 4294967295:2\n");
  EXPECT_EQ(parse("1 007:1 4294967295:2\n").max_index, 4294967295u);
}

TEST(LibsvmParser, ReadsIndicesOfEveryLength) {
  // Lengths around the 8-byte word read, with and without 8 bytes left on the line.
  std::uint64_t number = 0;
  for (int digits = 1; digits <= 10; ++digits) {
    number = number * 10 + static_cast<std::uint64_t>(digits % 10);
    const std::string index = std::to_string(number);
    for (const std::string& tail : {std::string(":1"), std::string(":1 4294967295:0.5 # pad")}) {
      const std::string line = "1 " + index + tail + "\n";
      SCOPED_TRACE(line);
      const ParsedChunk out = parse(line);
      ASSERT_FALSE(out.fatal) << out.fatal->message;
      ASSERT_GE(out.rows.nnz(), 1u);
      EXPECT_EQ(out.rows.indices[0], number);
    }
  }
  EXPECT_EQ(rows_of("1 00000000012:1 0000000013:1\n"), "1 12:1 13:1\n");
  EXPECT_EQ(rows_of("1 12345678:1\n"), "1 12345678:1\n");
  EXPECT_EQ(rows_of("1 20000000:1 123456789:1\n"), "1 20000000:1 123456789:1\n");
}

TEST(LibsvmParser, IndexZeroDependsOnTheBase) {
  for (IndexBase base : {IndexBase::kZero, IndexBase::kAuto}) {
    const ParsedChunk out = parse("1 0:1 5:1\n", base);
    EXPECT_FALSE(out.fatal);
    EXPECT_TRUE(out.saw_index_zero);
    EXPECT_EQ(dump_rows(out.rows.view()), "1 0:1 5:1\n");
  }
  const ParsedChunk out = parse("1 0:1 5:1\n", IndexBase::kOne);
  ASSERT_TRUE(out.fatal);
  EXPECT_EQ(out.fatal->column, 3u);
  EXPECT_EQ(out.fatal->message, "feature index 0 is not positive (indices are 1-based) in '0:1'");
  EXPECT_FALSE(parse("1 3:1\n", IndexBase::kAuto).saw_index_zero);
}

using namespace std::string_view_literals;

struct ErrorCase {
  std::string_view text;
  std::uint64_t line;
  std::uint64_t column;
  const char* message;
};

TEST(LibsvmParser, ReportsEveryErrorWithColumnAndToken) {
  const ErrorCase cases[] = {
      {"abc 1:1", 1, 1, "bad label 'abc'"},
      {"1.5.3 1:1", 1, 1, "bad label '1.5.3'"},
      {"1a 1:1", 1, 1, "bad label '1a'"},
      {"+-1 1:1", 1, 1, "bad label '+-1'"},
      {"nan 1:1", 1, 1, "label 'nan' is not finite"},
      {"-inf 1:1", 1, 1, "label '-inf' is not finite"},
      {"1e39 1:1", 1, 1, "label '1e39' is out of float range"},
      {"16777217 1:1", 1, 1,
       "label '16777217' is an integer no float holds exactly (labels are stored as floats: class "
       "ids up to 16777216)"},
      {"+16777217 1:1", 1, 1,
       "label '+16777217' is an integer no float holds exactly (labels are stored as floats: class "
       "ids up to 16777216)"},
      {"16777217.0 1:1", 1, 1,
       "label '16777217.0' is an integer no float holds exactly (labels are stored as floats: "
       "class ids up to 16777216)"},
      {"1.6777217e7 1:1", 1, 1,
       "label '1.6777217e7' is an integer no float holds exactly (labels are stored as floats: "
       "class ids up to 16777216)"},
      {"9007199254740993 1:1", 1, 1,
       "label '9007199254740993' is 2^53 or more, where a double no longer tells integers apart "
       "(labels are stored as floats: class ids up to 16777216)"},
      {"9007199254740992 1:1", 1, 1,
       "label '9007199254740992' is 2^53 or more, where a double no longer tells integers apart "
       "(labels are stored as floats: class ids up to 16777216)"},
      {"1e30 1:1", 1, 1,
       "label '1e30' is 2^53 or more, where a double no longer tells integers apart (labels are "
       "stored as floats: class ids up to 16777216)"},
      {"1:1 2:1", 1, 1, "missing label: the line starts with feature '1:1'"},
      {"1 a:1", 1, 3, "bad feature index 'a' in 'a:1'"},
      {"1 1.5:1", 1, 3, "bad feature index '1.5' in '1.5:1'"},
      {"1 :1", 1, 3, "bad feature index '' in ':1'"},
      {"1 +3:1", 1, 3, "bad feature index '+3' in '+3:1'"},
      {"1 -3:1", 1, 3, "negative feature index in '-3:1'"},
      {"1 4294967296:1", 1, 3, "feature index in '4294967296:1' is larger than 4294967295"},
      {"1 99999999999999999999999:1", 1, 3,
       "feature index in '99999999999999999999999:1' is larger than 4294967295"},
      {"1 0:1", 1, 3, "feature index 0 is not positive (indices are 1-based) in '0:1'"},
      {"1 3:1 3:2", 1, 7, "duplicate feature index 3 in '3:2'"},
      {"1 5:1 3:1", 1, 7,
       "unsorted feature index 3 after 5 in '3:1' (indices must increase within a row)"},
      {"1 5 3:1", 1, 3, "missing ':' in feature '5'"},
      {"1 5:1 7", 1, 7, "missing ':' in feature '7'"},
      {"1 5:abc", 1, 5, "bad feature value 'abc' in '5:abc'"},
      {"1 5:1.2.3", 1, 5, "bad feature value '1.2.3' in '5:1.2.3'"},
      {"1 5:1,5", 1, 5, "bad feature value '1,5' in '5:1,5'"},
      {"1 5:", 1, 5, "missing feature value in '5:'"},
      {"1 5: 7:1", 1, 5, "missing feature value in '5:'"},
      {"1 5:nan", 1, 5, "feature value 'nan' is not finite in '5:nan'"},
      {"1 5:-inf", 1, 5, "feature value '-inf' is not finite in '5:-inf'"},
      {"1 5:1e39", 1, 5, "feature value '1e39' is out of float range in '5:1e39'"},
      {"1 5:1\x01", 1, 6, "binary data (byte 0x01)"},
      {"1 5:1\0 6:1"sv, 1, 6, "binary data (byte 0x00)"},
      {"\x7f 1:1", 1, 1, "binary data (byte 0x7f)"},
      {"1 1:1 # a\x02z", 1, 10, "binary data (byte 0x02)"},
      {"1 1:1\r2:1", 1, 6, "stray carriage return (byte 0x0d) inside a line"},
      {"1 qid:x 1:1", 1, 3, "bad qid 'qid:x'"},
      {"1 qid: 1:1", 1, 3, "bad qid 'qid:'"},
      {"1 1:1 qid:2", 1, 7, "unexpected qid 'qid:2' (a qid comes once, right after the label)"},
      {"1 qid:1 qid:2", 1, 9, "unexpected qid 'qid:2' (a qid comes once, right after the label)"},
      {"1 3:1\t\t5:x", 1, 10, "bad feature value 'x' in '5:x'"},
      {"1 1:1\n# ok\n-1 2:1 2:1\n", 3, 8, "duplicate feature index 2 in '2:1'"},
      {"1 1:1\r\n\r\n-1 x:1\r\n", 3, 4, "bad feature index 'x' in 'x:1'"},
  };
  for (const ErrorCase& c : cases) {
    const std::string_view text = c.text;
    const ParsedChunk out = parse(text, IndexBase::kOne);
    ASSERT_TRUE(out.fatal) << text;
    EXPECT_EQ(out.fatal->line, c.line) << text;
    EXPECT_EQ(out.fatal->column, c.column) << text;
    EXPECT_EQ(out.fatal->message, c.message) << text;
  }
}

TEST(LibsvmParser, QuotesLongTokensShortened) {
  const std::string token(100, 'a');
  const ParsedChunk out = parse("1 " + token + ":1\n");
  ASSERT_TRUE(out.fatal);
  EXPECT_EQ(out.fatal->message, "bad feature index '" + std::string(48, 'a') + "...' in '" +
                                    std::string(48, 'a') + "...'");
}

TEST(LibsvmParser, StopsAtTheFirstBadLineByDefault) {
  const ParsedChunk out = parse("1 1:1\n-1 2:x\n1 3:1\n");
  ASSERT_TRUE(out.fatal);
  EXPECT_EQ(out.fatal->line, 2u);
  EXPECT_EQ(out.bad_lines, 0u);
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1\n");  // never half a row
}

constexpr const char* kMixed =
    "1 1:1\n"
    "1 2:0.5 3:x\n"  // bad after a value that made values explicit
    "-1 4:1\n"
    "1 5:1 5:1\n"
    "1 6:2\n";

TEST(LibsvmParser, SkipsBadLinesUpToTheLimit) {
  const ParsedChunk out = parse(kMixed, IndexBase::kOne, 5);
  EXPECT_FALSE(out.fatal);
  EXPECT_EQ(out.lines, 5u);
  EXPECT_EQ(out.bad_lines, 2u);
  ASSERT_EQ(out.first_bad_lines.size(), 2u);
  EXPECT_EQ(out.first_bad_lines[0].line, 2u);
  EXPECT_EQ(out.first_bad_lines[0].column, 11u);
  EXPECT_EQ(out.first_bad_lines[1].line, 4u);
  EXPECT_EQ(out.first_bad_lines[1].message, "duplicate feature index 5 in '5:1'");
  // The rejected lines left nothing behind, not even half a row.
  EXPECT_EQ(out.rows.values.size(), out.rows.nnz());
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1\n-1 4:1\n1 6:2\n");
  EXPECT_EQ(out.max_index, 6u);
}

TEST(LibsvmParser, StopsAtTheBadLineOverTheLimit) {
  const ParsedChunk out = parse(kMixed, IndexBase::kOne, 1);
  ASSERT_TRUE(out.fatal);
  EXPECT_EQ(out.fatal->line, 4u);
  EXPECT_EQ(out.bad_lines, 1u);
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1\n-1 4:1\n");
}

// A row with more non-zeros than max_row_nnz is a bad line at the first feature over the limit.
TEST(LibsvmParser, RowOverTheNonZeroLimitIsABadLine) {
  ParsedChunk out;
  ParseOptions options{IndexBase::kOne, 1};
  options.max_row_nnz = 3;
  parse_libsvm_lines("1 1:1 2:1 3:1\n-1 1:1 2:5 3:1 4:1\n1 7:1\n", options, out);
  EXPECT_FALSE(out.fatal);
  EXPECT_EQ(out.bad_lines, 1u);
  ASSERT_EQ(out.first_bad_lines.size(), 1u);
  EXPECT_EQ(out.first_bad_lines[0].line, 2u);
  EXPECT_EQ(out.first_bad_lines[0].column, 16u);
  EXPECT_EQ(out.first_bad_lines[0].message,
            "row has more than 3 non-zeros, the most one row may have");
  EXPECT_EQ(dump_rows(out.rows.view()), "1 1:1 2:1 3:1\n1 7:1\n");
  EXPECT_EQ(out.rows.values.size(), out.rows.has_values ? out.rows.nnz() : 0u);
}

TEST(LibsvmParser, KeepsTheFirstTenMessages) {
  std::string text;
  for (int i = 0; i < 15; ++i) text += "x 1:1\n1 1:1\n";
  const ParsedChunk out = parse(text, IndexBase::kOne, 100);
  EXPECT_EQ(out.bad_lines, 15u);
  EXPECT_EQ(out.rows.rows(), 15u);
  ASSERT_EQ(out.first_bad_lines.size(), kKeptBadLineMessages);
  EXPECT_EQ(out.first_bad_lines[9].line, 19u);
}

TEST(LibsvmParser, ClearKeepsNothingOfTheLastChunk) {
  ParsedChunk out;
  parse_libsvm_lines("1 0:2\nx\n", ParseOptions{IndexBase::kAuto, 3}, out);
  parse_libsvm_lines("1 4:1\n", ParseOptions{IndexBase::kAuto, 0}, out);
  EXPECT_EQ(out.lines, 1u);
  EXPECT_EQ(out.bad_lines, 0u);
  EXPECT_TRUE(out.first_bad_lines.empty());
  EXPECT_FALSE(out.saw_index_zero);
  EXPECT_FALSE(out.rows.has_values);
  EXPECT_EQ(dump_rows(out.rows.view()), "1 4:1\n");
}

}  // namespace
}  // namespace polymargin::io
