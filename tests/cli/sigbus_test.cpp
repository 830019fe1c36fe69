// A memory-mapped input cut short under the reader: the process ends with a message and the I/O
// exit code, not with "Bus error".
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/command.h"
#include "cli/signals.h"
#include "io/byte_source.h"
#include "io/temporaries.h"
#include "tests/io/test_files.h"

namespace polymargin::cli {
namespace {

// A megabyte of LIBSVM text in `dir`; its path.
std::string mapped_input(io::testing::TempDir& dir) {
  std::string text;
  while (text.size() < (1u << 20)) text += "1 3:0.5 17:1 400:2\n";
  return dir.write("cut.svm", text);
}

// Maps `path`, cuts it to nothing and reads a page beyond its new end: SIGBUS. Exits 1 when the
// file is not mapped (nothing to test) or cannot be cut, 0 if the read passes.
[[noreturn]] void fault_on(const std::string& path) {
  auto source = io::open_byte_source(path);
  const std::string_view mapped = source->mapped();
  if (mapped.size() != std::filesystem::file_size(path)) std::_Exit(1);
  if (::truncate(path.c_str(), 0) != 0) std::_Exit(1);
  volatile char c = mapped[mapped.size() / 2];
  (void)c;
  std::_Exit(0);
}

TEST(SigbusDeathTest, TruncatedMappedInputEndsAsAnIoError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  io::testing::TempDir dir;
  const std::string path = mapped_input(dir);
  EXPECT_EXIT(
      {
        report_sigbus_as_io_error();
        fault_on(path);
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
  const std::string path = mapped_input(dir);
  const std::string unfinished = dir / "out.shards.tmp-1";
  EXPECT_EXIT(
      {
        start_signal_thread();
        report_sigbus_as_io_error();
        const io::TemporaryPath registered = io::TemporaryPath::create([&] {
          std::ofstream(unfinished) << "partial";
          return unfinished;
        });
        fault_on(path);
      },
      ::testing::ExitedWithCode(4),
      "cut short while it was being read(.|\n)*unfinished output removed");
  EXPECT_FALSE(std::filesystem::exists(unfinished));
}

}  // namespace
}  // namespace polymargin::cli
