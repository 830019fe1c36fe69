// A memory-mapped input cut short under the reader: the process ends with a message and the I/O
// exit code, not with "Bus error".
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "cli/command.h"
#include "io/byte_source.h"
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

}  // namespace
}  // namespace polymargin::cli
