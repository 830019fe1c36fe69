#include "io/text_reader.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "tests/io/test_files.h"

namespace polymargin::io {
namespace {

using testing::bzip2;
using testing::cut;
using testing::dump_rows;
using testing::gzip;
using testing::StdinFrom;
using testing::TempDir;
using testing::zstd;

const std::string kSharedData = std::string(POLYMARGIN_SOURCE_DIR) + "/../shared/data/";

struct Read {
  std::string rows;  // dump_rows of every batch, in order
  TextStats stats;
};

Read read(const std::vector<std::string>& inputs, const TextOptions& options = {}) {
  Read result;
  result.stats = read_libsvm_text(inputs, options,
                                  [&](const CsrView& rows) { result.rows += dump_rows(rows); });
  return result;
}

struct Failure {
  std::string what;  // "file:line:column: message"
  std::string file;
  std::uint64_t line = 0;
  std::uint64_t column = 0;
  std::string message;
  std::string rows_before;  // what the sink received before the error
};

Failure read_failure(const std::vector<std::string>& inputs, const TextOptions& options = {}) {
  Failure failure;
  try {
    read_libsvm_text(inputs, options,
                     [&](const CsrView& rows) { failure.rows_before += dump_rows(rows); });
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    failure.what = e.what();
    failure.file = e.file();
    failure.line = e.line();
    failure.column = e.column();
    failure.message = e.message();
  }
  return failure;
}

TextOptions with(std::size_t chunk_bytes, int threads, IndexBase base = IndexBase::kAuto,
                 std::uint64_t max_bad_lines = 0) {
  TextOptions options;
  options.chunk_bytes = chunk_bytes;
  options.threads = threads;
  options.index_base = base;
  options.max_bad_lines = max_bad_lines;
  return options;
}

// Varied, deterministic LIBSVM text: comments, blank lines, CRLF, tabs, qid, explicit values,
// rows without features, and one line longer than 64 KiB.
std::string varied_text(int rows, std::uint32_t seed) {
  std::mt19937 random(seed);
  const auto pick = [&](int n) { return static_cast<int>(random() % n); };
  std::string text = "# generated\n";
  for (int r = 0; r < rows; ++r) {
    if (pick(20) == 0) text += pick(2) ? "\n" : "   # a comment line\n";
    text += pick(2) ? "+1" : "-1";
    if (pick(10) == 0) text += " qid:" + std::to_string(pick(100));
    const int nnz = r == rows / 2 ? 12000 : pick(40);
    std::uint32_t index = static_cast<std::uint32_t>(pick(3));
    for (int k = 0; k < nnz; ++k) {
      index += 1 + static_cast<std::uint32_t>(pick(1000));
      text += pick(8) == 0 ? "\t" : " ";
      text += std::to_string(index) + ":";
      text += pick(3) ? "1" : std::to_string(pick(2000) - 1000) + "." + std::to_string(pick(99));
    }
    if (pick(15) == 0) text += " # trailing";
    text += pick(6) == 0 ? "\r\n" : "\n";
  }
  return text;
}

TEST(TextReader, IndexBaseNames) {
  EXPECT_EQ(parse_index_base("auto"), IndexBase::kAuto);
  EXPECT_EQ(parse_index_base("0"), IndexBase::kZero);
  EXPECT_EQ(parse_index_base("1"), IndexBase::kOne);
  EXPECT_THROW(parse_index_base("2"), UsageError);
  EXPECT_EQ(index_base_value(IndexBase::kZero), 0);
  EXPECT_EQ(index_base_value(IndexBase::kOne), 1);
  EXPECT_THROW(index_base_value(IndexBase::kAuto), std::logic_error);
}

TEST(TextReader, AcceptsBomCrLfCommentsAndNoFinalNewline) {
  TempDir dir;
  const std::string text = "\xEF\xBB\xBF# header\r\n+1 1:0.5 3:1\r\n\r\n-1\t2:1  # c\r\n0 4:2";
  const Read result = read({dir.write("a.svm", text)});
  EXPECT_EQ(result.rows, "1 1:0.5 3:1\n-1 2:1\n0 4:2\n");
  EXPECT_EQ(result.stats.rows, 3u);
  EXPECT_EQ(result.stats.nnz, 4u);
  EXPECT_EQ(result.stats.lines, 5u);
  EXPECT_EQ(result.stats.bytes, text.size());
  EXPECT_EQ(result.stats.max_index, 4u);
  EXPECT_TRUE(result.stats.any_index);
  EXPECT_EQ(result.stats.bad_lines, 0u);
  EXPECT_EQ(result.stats.resolved_base, IndexBase::kOne);
}

TEST(TextReader, BomCountsNotInColumnsAndOnlyAtTheStart) {
  TempDir dir;
  const std::string path = dir.write("bom.svm", "\xEF\xBB\xBFx 1:1\n");
  EXPECT_EQ(read_failure({path}).what, path + ":1:1: bad label 'x'");
  const std::string bom = "\xEF\xBB\xBF";
  const std::string middle = dir.write("mid.svm", "1 1:1\n" + bom + "1 1:1\n");
  EXPECT_EQ(read_failure({middle}).line, 2u);
}

TEST(TextReader, ErrorsNameFileLineAndColumn) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 18232; ++i) text += "1 1:1 2:1\n";
  text += "-1 3:1 7:2 0:1\n";
  const std::string path = dir.write("a.svm", text);
  const Failure failure = read_failure({path}, with(4096, 2, IndexBase::kOne));
  EXPECT_EQ(failure.file, path);
  EXPECT_EQ(failure.line, 18233u);
  EXPECT_EQ(failure.column, 12u);
  EXPECT_EQ(failure.what,
            path + ":18233:12: feature index 0 is not positive (indices are 1-based) in '0:1'");
  // Every row before the bad one was delivered, and nothing after it.
  EXPECT_EQ(failure.rows_before.size(), 18232 * std::string("1 1:1 2:1\n").size());
}

TEST(TextReader, ReadsSeveralFilesInSequence) {
  TempDir dir;
  const std::string a = dir.write("a.svm", "1 1:1\n-1 2:1\n");
  const std::string b = dir.write("b.svm", "# b\n1 3:1");  // no final newline between files
  const std::string c = dir.write("c.svm", "-1 4:1\n");
  const Read result = read({a, b, c}, with(3, 2));
  EXPECT_EQ(result.rows, "1 1:1\n-1 2:1\n1 3:1\n-1 4:1\n");
  EXPECT_EQ(result.stats.lines, 5u);

  // Line numbers restart with each file, and the error names the file it is in.
  const std::string bad = dir.write("bad.svm", "1 1:1\n1 2:1 x\n");
  const Failure failure = read_failure({a, b, bad, c});
  EXPECT_EQ(failure.what, bad + ":2:7: missing ':' in feature 'x'");
  EXPECT_EQ(failure.rows_before, "1 1:1\n-1 2:1\n1 3:1\n1 1:1\n");
}

TEST(TextReader, MissingFileIsAnIoErrorAfterEarlierRows) {
  TempDir dir;
  const std::string good = dir.write("good.svm", "1 1:1\n");
  const std::string missing = dir.write("x", "") + ".does-not-exist";
  std::string rows;
  EXPECT_THROW(read_libsvm_text({good, missing}, {},
                                [&](const CsrView& batch) { rows += dump_rows(batch); }),
               IoError);
  EXPECT_EQ(rows, "1 1:1\n");
  // A bad line in an earlier file is the first error, not the missing file.
  const std::string bad = dir.write("bad.svm", "1 1:1\nq\n");
  EXPECT_EQ(read_failure({bad, missing}).what, bad + ":2:1: bad label 'q'");
}

TEST(TextReader, NoRowsIsAnError) {
  TempDir dir;
  const std::string empty = dir.write("empty.svm", "");
  const std::string comments = dir.write("comments.svm", "# nothing\n\n   \n");
  EXPECT_EQ(read_failure({empty}).what, empty + ": no data rows");
  EXPECT_EQ(read_failure({comments}).message, "no data rows");
  EXPECT_EQ(read_failure({empty, comments}).message, "no data rows");
  EXPECT_EQ(read_failure({dir.write("e.zst", zstd(""))}).message, "no data rows");
  EXPECT_THROW(read_libsvm_text({}, {}, nullptr), UsageError);
}

TEST(TextReader, ResolvesTheAutomaticIndexBase) {
  TempDir dir;
  const std::string zero = dir.write("zero.svm", "1 3:1\n-1 0:1 2:1\n");
  const std::string one = dir.write("one.svm", "1 3:1\n-1 1:1 2:1\n");
  EXPECT_EQ(read({zero}).stats.resolved_base, IndexBase::kZero);
  EXPECT_TRUE(read({zero}).stats.saw_index_zero);
  EXPECT_EQ(read({one}).stats.resolved_base, IndexBase::kOne);
  EXPECT_EQ(read({zero}, with(1 << 20, 1, IndexBase::kZero)).stats.resolved_base, IndexBase::kZero);
  EXPECT_EQ(read({one}, with(1 << 20, 1, IndexBase::kZero)).stats.resolved_base, IndexBase::kZero);
  EXPECT_EQ(read_failure({zero}, with(1 << 20, 1, IndexBase::kOne)).what,
            zero + ":2:4: feature index 0 is not positive (indices are 1-based) in '0:1'");
}

TEST(TextReader, SkipsCountedBadLinesUpToTheLimit) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 30; ++i) text += i % 2 ? "1 1:1\n" : "1 x:1\n";  // 15 bad lines
  const std::string path = dir.write("bad.svm", text);
  for (std::size_t chunk : {std::size_t{7}, std::size_t{1} << 20}) {
    const Read result = read({path}, with(chunk, 2, IndexBase::kAuto, 15));
    EXPECT_EQ(result.stats.rows, 15u);
    EXPECT_EQ(result.stats.bad_lines, 15u);
    EXPECT_EQ(result.stats.lines, 30u);
    ASSERT_EQ(result.stats.bad_line_messages.size(), 10u);
    EXPECT_EQ(result.stats.bad_line_messages[0], path + ":2:3: bad feature index 'x' in 'x:1'");
    EXPECT_EQ(result.stats.bad_line_messages[9], path + ":20:3: bad feature index 'x' in 'x:1'");

    // One bad line more than allowed is an error at that line, after the rows before it.
    const Failure failure = read_failure({path}, with(chunk, 2, IndexBase::kAuto, 14));
    // The limit is named as the user set it: the flag.
    EXPECT_EQ(failure.what, path +
                                ":30:3: bad feature index 'x' in 'x:1' (more bad lines than "
                                "--max-bad-lines 14 allows)");
    EXPECT_EQ(failure.rows_before.size(), 15 * std::string("1 1:1\n").size());
  }
}

TEST(TextReader, ChunkSizeAndThreadsDoNotChangeTheRows) {
  TempDir dir;
  const std::string text = varied_text(3000, 7);
  ASSERT_GT(text.size(), std::size_t{150000});
  const std::string path = dir.write("varied.svm", text);
  const Read reference = read({path}, with(std::size_t{4} << 20, 1));
  EXPECT_EQ(reference.stats.rows, 3000u);
  for (std::size_t chunk :
       {std::size_t{1}, std::size_t{7}, std::size_t{64} << 10, std::size_t{4} << 20}) {
    for (int threads : {1, 2, 4}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", threads " + std::to_string(threads));
      const Read result = read({path}, with(chunk, threads));
      EXPECT_EQ(result.rows, reference.rows);
      EXPECT_EQ(result.stats.rows, reference.stats.rows);
      EXPECT_EQ(result.stats.nnz, reference.stats.nnz);
      EXPECT_EQ(result.stats.lines, reference.stats.lines);
      EXPECT_EQ(result.stats.bytes, text.size());
      EXPECT_EQ(result.stats.max_index, reference.stats.max_index);
      EXPECT_EQ(result.stats.resolved_base, reference.stats.resolved_base);
      // The file is parsed where it is mapped; stdin is read as a stream into chunk buffers.
      StdinFrom redirect(path);
      const Read streamed = read({"-"}, with(chunk, threads));
      EXPECT_EQ(streamed.rows, reference.rows);
      EXPECT_EQ(streamed.stats.lines, reference.stats.lines);
      EXPECT_EQ(streamed.stats.bytes, text.size());
    }
  }
}

TEST(TextReader, ChunkSizeAndThreadsDoNotChangeTheFirstError) {
  TempDir dir;
  std::string text = varied_text(2000, 11);
  // Bad lines at several places; the first one must win whatever the chunking.
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start + 1));
    start = end + 1;
  }
  for (std::size_t at : {600, 900, 1500, 1501, 1800}) lines[at] = "1 5:1 4:1\n";
  text.clear();
  for (const std::string& line : lines) text += line;
  const std::string path = dir.write("errors.svm", text);
  for (std::uint64_t max_bad : {0, 2}) {
    const Failure reference =
        read_failure({path}, with(std::size_t{4} << 20, 1, IndexBase::kAuto, max_bad));
    EXPECT_EQ(reference.line, max_bad == 0 ? 601u : 1501u);
    for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{64} << 10}) {
      for (int threads : {1, 2, 4}) {
        SCOPED_TRACE("chunk " + std::to_string(chunk) + ", threads " + std::to_string(threads));
        const Failure failure =
            read_failure({path}, with(chunk, threads, IndexBase::kAuto, max_bad));
        EXPECT_EQ(failure.what, reference.what);
        EXPECT_EQ(failure.rows_before, reference.rows_before);
      }
    }
  }
}

// A line over max_line_bytes is one bad line, at its own line number, whether it lies inside a
// chunk (the parser's case), crosses a chunk's mark by more than the limit, or is the last line
// without a line end; the same for a mapped file, a stream and a compressed file.
TEST(TextReader, LongLinesAreBadLinesWhereverTheChunksFall) {
  TempDir dir;
  std::string text, before;  // before: the rows of the lines before the first long line
  for (int i = 1; i <= 40; ++i) {
    if (i == 20) {
      text += "1 1:1 #" + std::string(293, 'x') + "\n";  // 300 bytes before its '\n'
    } else {
      text += "1 " + std::to_string(i) + ":1\n";
      if (i < 20) before += "1 " + std::to_string(i) + ":1\n";
    }
  }
  text += "-1 3:1 #" + std::string(400, 'y');  // line 41, without '\n'
  const std::string path = dir.write("long.svm", text);
  const std::string gz = dir.write("long.gz", gzip(text));
  const std::string long_line = ":201: line longer than 200 bytes (--max-line-bytes)";
  const auto options = [](std::size_t chunk, std::uint64_t max_bad) {
    TextOptions o = with(chunk, 2, IndexBase::kAuto, max_bad);
    o.max_line_bytes = 200;
    return o;
  };
  std::vector<std::size_t> chunks = {std::size_t{64} << 10};
  for (std::size_t chunk = 1; chunk < 700; chunk += 11) chunks.push_back(chunk);
  for (const std::size_t chunk : chunks) {
    for (const std::string& input : {path, gz, std::string("-")}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", " + input);
      const std::string name = input == "-" ? "<stdin>" : input;
      std::optional<StdinFrom> redirect;
      if (input == "-") redirect.emplace(path);
      const Read result = read({input}, options(chunk, 2));
      EXPECT_EQ(result.stats.rows, 39u);
      EXPECT_EQ(result.stats.bad_lines, 2u);
      EXPECT_EQ(result.stats.lines, 41u);
      EXPECT_EQ(result.stats.bytes, text.size());
      EXPECT_EQ(result.stats.bad_line_messages,
                (std::vector<std::string>{name + ":20" + long_line, name + ":41" + long_line}));
      if (input == "-") redirect.emplace(path);
      const Failure first = read_failure({input}, options(chunk, 0));
      EXPECT_EQ(first.what, name + ":20" + long_line);
      EXPECT_EQ(first.rows_before, before);
      if (input == "-") redirect.emplace(path);
      EXPECT_EQ(read_failure({input}, options(chunk, 1)).what,
                name + ":41" + long_line + " (more bad lines than --max-bad-lines 1 allows)");
    }
  }
}

// Every mapped input stays mapped until its chunks are parsed, but holds no descriptor meanwhile:
// the number of inputs is not bounded by the descriptor limit.
TEST(TextReader, ManyInputsNeedNoDescriptorEach) {
  TempDir dir;
  std::vector<std::string> inputs;
  std::string expected;
  for (int i = 1; i <= 100; ++i) {
    inputs.push_back(dir.write(std::to_string(i) + ".svm", "1 " + std::to_string(i) + ":1\n"));
    expected += "1 " + std::to_string(i) + ":1\n";
  }
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 64);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string rows;
  std::string error;
  try {
    rows = read(inputs, with(std::size_t{4} << 20, 2)).rows;
  } catch (const std::exception& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_EQ(error, "");
  EXPECT_EQ(rows, expected);
}

TEST(TextReader, ReadsCompressedInputsLikePlainOnes) {
  TempDir dir;
  const std::string a = varied_text(1500, 3), b = varied_text(700, 5);
  const std::string expected = read({dir.write("plain.svm", a + b)}).rows;
  const std::vector<std::string> files = {
      dir.write("one.gz", gzip(a + b)),       dir.write("members.gz", gzip(a) + gzip(b)),
      dir.write("one.bz2", bzip2(a + b)),     dir.write("streams.bz2", bzip2(a) + bzip2(b)),
      dir.write("one.zst", zstd(a + b)),      dir.write("frames.zst", zstd(a) + zstd(b)),
      dir.write("zst-named.gz", zstd(a + b)),
  };
  for (const std::string& file : files) {
    SCOPED_TRACE(file);
    EXPECT_EQ(read({file}, with(64 << 10, 2)).rows, expected);
  }
  // Mixed formats in one run.
  EXPECT_EQ(read({dir.write("a.gz", gzip(a)), dir.write("b.zst", zstd(b))}).rows, expected);
}

TEST(TextReader, TruncatedCompressedInputIsAnError) {
  TempDir dir;
  const std::string text = varied_text(1500, 9);
  const struct {
    std::string name;
    std::string bytes;
    std::string message;
  } cases[] = {{"t.gz", cut(gzip(text), 20), "truncated gzip stream"},
               {"t.bz2", cut(bzip2(text), 20), "truncated bzip2 stream"},
               {"t.zst", cut(zstd(text), 20), "truncated zstd frame"},
               {"second.zst", zstd(text) + cut(zstd(text), 20), "truncated zstd frame"}};
  const std::string good = dir.write("good.svm", "1 1:1\n");
  for (const auto& c : cases) {
    const std::string path = dir.write(c.name, c.bytes);
    const Failure failure = read_failure({good, path}, with(4096, 2));
    EXPECT_EQ(failure.file, path);
    EXPECT_EQ(failure.line, 0u);
    EXPECT_EQ(failure.message.rfind(c.message, 0), 0u) << failure.what;
  }
}

TEST(TextReader, DashReadsStdin) {
  TempDir dir;
  const std::string text = varied_text(500, 4);
  const std::string expected = read({dir.write("plain.svm", text)}).rows;
  {
    StdinFrom redirect(dir.write("in.svm", text));
    EXPECT_EQ(read({"-"}, with(4096, 2)).rows, expected);
  }
  {
    StdinFrom redirect(dir.write("in.bz2", bzip2(text)));
    EXPECT_EQ(read({"-"}).rows, expected);
  }
  {
    StdinFrom redirect(dir.write("bad.svm", "1 1:1\n1 2:1 2:1\n"));
    EXPECT_EQ(read_failure({"-"}).what, "<stdin>:2:7: duplicate feature index 2 in '2:1'");
  }
}

// Counts rows per label and non-zero values, and whether any batch carried a value array
// (batches whose values are all 1 should not).
struct LabelCount {
  std::map<float, std::uint64_t> labels;
  std::uint64_t non_zeros = 0;
  bool any_values = false;
};

LabelCount count_labels(const std::string& path, const TextOptions& options, TextStats& stats) {
  LabelCount count;
  stats = read_libsvm_text({path}, options, [&](const CsrView& rows) {
    for (std::size_t r = 0; r < rows.rows; ++r) ++count.labels[rows.labels[r]];
    for (std::size_t k = rows.offsets[0]; k < rows.offsets[rows.rows]; ++k)
      count.non_zeros += rows.value(k) != 0.0f;
    count.any_values |= rows.values != nullptr;
  });
  return count;
}

TEST(TextReader, ReadsA9a) {
  const std::string path = std::string(POLYMARGIN_SOURCE_DIR) + "/data/a9a.zst";  // bundled
  for (int threads : {1, 2}) {
    TextStats stats;
    const LabelCount count = count_labels(path, with(std::size_t{256} << 10, threads), stats);
    EXPECT_EQ(stats.rows, 32561u);
    EXPECT_EQ(stats.nnz, 451592u);
    EXPECT_EQ(stats.max_index, 123u);
    EXPECT_EQ(count.non_zeros, 451592u);
    EXPECT_EQ(stats.resolved_base, IndexBase::kOne);
    EXPECT_EQ(count.labels, (std::map<float, std::uint64_t>{{-1.0f, 24720}, {1.0f, 7841}}));
    EXPECT_FALSE(count.any_values);  // a9a is binary: every value is 1
  }
}

TEST(TextReader, ReadsIjcnn1FromBzip2) {
  if (!std::filesystem::exists(kSharedData + "ijcnn1/ijcnn1.trn.bz2"))
    GTEST_SKIP() << "../shared/data/ijcnn1 is missing";
  TextStats stats;
  const LabelCount count = count_labels(kSharedData + "ijcnn1/ijcnn1.trn.bz2", {}, stats);
  EXPECT_EQ(stats.rows, 49990u);
  // The file writes one explicit zero ("13:0.0" on its first line); it is stored as given, so
  // the stored entries are one more than the manifest's 649,869 non-zeros.
  EXPECT_EQ(stats.nnz, 649870u);
  EXPECT_EQ(count.non_zeros, 649869u);
  EXPECT_EQ(stats.max_index, 22u);
  EXPECT_EQ(count.labels, (std::map<float, std::uint64_t>{{-1.0f, 45137}, {1.0f, 4853}}));
  EXPECT_TRUE(count.any_values);
}

}  // namespace
}  // namespace polymargin::io
