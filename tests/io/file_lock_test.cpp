// io::FileLock: one holder at a time for a path, the holder named in the refusal, the lock file gone
// on release, and a lock file left behind by a dead holder blocks nothing.
#include "io/file_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "engine/errors.h"

namespace polymargin::io {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("pm_lock_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(FileLock, SecondHolderIsRefusedNamingTheFirst) {
  const std::string path = temp_path("model");
  std::optional<FileLock> first;
  first.emplace(path, "model");
  EXPECT_TRUE(std::filesystem::exists(path + ".lock"));
  try {
    FileLock second(path, "model");
    FAIL() << "the second lock was granted";
  } catch (const IoError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is being written by another job"), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
  }
  first.reset();
  EXPECT_FALSE(std::filesystem::exists(path + ".lock"));
  FileLock third(path, "model");  // free again
}

TEST(FileLock, StaleLockFileBlocksNothing) {
  const std::string path = temp_path("stale");
  std::ofstream(path + ".lock") << "99999999\n";  // left by a job that was killed
  {
    FileLock lock(path, "checkpoint");
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".lock"));
}

TEST(FileLock, UncreatableLockFileIsAnIoError) {
  EXPECT_THROW(FileLock("/nonexistent-dir/x.model", "model"), IoError);
}

}  // namespace
}  // namespace polymargin::io
