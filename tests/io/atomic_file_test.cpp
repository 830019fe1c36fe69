#include "io/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/errors.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pm_atomic_" + name + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFile, CommitReplacesTheTargetWhole) {
  const fs::path dir = fresh_dir("commit");
  const fs::path target = dir / "out.txt";
  write_file_atomically(target, "old");
  {
    AtomicFile f(target);
    f.write("new ");
    f.write("content");
    EXPECT_EQ(slurp(target), "old");  // not visible before commit
    f.commit();
  }
  EXPECT_EQ(slurp(target), "new content");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(AtomicFile, AbandonedWriteLeavesNothing) {
  const fs::path dir = fresh_dir("abandon");
  {
    AtomicFile f(dir / "out.txt");
    f.write("partial");
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// A synced file waits under its temporary name: the target keeps its old content until commit,
// and dropping the file instead removes it (train writes its model while the final pass runs).
TEST(AtomicFile, SyncedFileAppearsOnlyOnCommitAndVanishesIfDropped) {
  const fs::path dir = fresh_dir("sync");
  const fs::path target = dir / "out.txt";
  write_file_atomically(target, "old");
  {
    AtomicFile f(target);
    f.write("synced");
    f.sync();
    EXPECT_EQ(slurp(target), "old");
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
    EXPECT_THROW(f.write("more"), std::logic_error);
  }
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  {
    AtomicFile f(target);
    f.write("new");
    f.sync();
    f.commit();
  }
  EXPECT_EQ(slurp(target), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(AtomicFile, UnwritableDirectoryIsAnIoError) {
  EXPECT_THROW(AtomicFile("/nonexistent-dir/x.txt"), IoError);
}

}  // namespace
}  // namespace polymargin::io
