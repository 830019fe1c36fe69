// A memory-mapped input cut short under the reader: the process ends with a message and the I/O
// exit code, not with "Bus error".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/command.h"
#include "cli/signals.h"
#include "io/byte_source.h"
#include "io/temporaries.h"
#include "tests/io/test_files.h"

namespace polymargin::cli {
namespace {

TEST(SigbusDeathTest, TruncatedMappedInputEndsAsAnIoError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  io::testing::TempDir dir;
  std::string text;
  while (text.size() < (1u << 20)) text += "1 3:0.5 17:1 400:2\n";
  const std::string path = dir.write("cut.svm", text);
  EXPECT_EXIT(
      {
        report_sigbus_as_io_error();
        auto source = io::open_byte_source(path);
        const std::string_view mapped = source->mapped();
        if (mapped.size() != text.size()) std::_Exit(1);  // not mapped: nothing to test
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(1);
        volatile char c = mapped[mapped.size() / 2];  // a page beyond the new end of the file
        (void)c;
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(4), "cut short while it was being read");
}

// With the signal thread running (as in every command), the unfinished outputs go too: the
// faulting thread hands over to the signal thread, which removes them and ends the process.
TEST(SigbusDeathTest, TruncatedMappedInputRemovesTheUnfinishedOutputs) {
  // "fast": the child is a fork of this test (no threads yet), so the file is the one checked
  // below ("threadsafe" runs the test again from the start, in another temporary directory).
  GTEST_FLAG_SET(death_test_style, "fast");
  io::testing::TempDir dir;
  std::string text;
  while (text.size() < (1u << 20)) text += "1 3:0.5 17:1 400:2\n";
  const std::string path = dir.write("cut.svm", text);
  const std::string unfinished = dir.write("out.shards.tmp-1", "partial");
  EXPECT_EXIT(
      {
        start_signal_thread();
        report_sigbus_as_io_error();
        const io::TemporaryPath registered(unfinished);
        auto source = io::open_byte_source(path);
        const std::string_view mapped = source->mapped();
        if (mapped.size() != text.size()) std::_Exit(1);  // not mapped: nothing to test
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(1);
        volatile char c = mapped[mapped.size() / 2];
        (void)c;
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(4),
      "cut short while it was being read(.|\n)*unfinished output removed");
  EXPECT_FALSE(std::filesystem::exists(unfinished));
}

}  // namespace
}  // namespace polymargin::cli
