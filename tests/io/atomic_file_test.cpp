#include "io/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

// A temporary name that a live process of this pid in another PID namespace holds (its flock) is
// passed over; a dead one's leftover under the next name is replaced. (Each test runs in a process
// of its own under ctest, so the names start at counter 0.)
TEST(AtomicFile, ATemporaryNameHeldElsewhereIsPassedOver) {
  const fs::path dir = fresh_dir("held");
  const std::string target = (dir / "m.model").string();
  const std::string prefix = target + ".tmp-" + std::to_string(::getpid()) + "-";
  std::vector<int> held;
  for (int k = 0; k < 40; ++k) {
    std::ofstream(prefix + std::to_string(k)) << "live";
    held.push_back(::open((prefix + std::to_string(k)).c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_EQ(::flock(held.back(), LOCK_EX | LOCK_NB), 0);
  }
  write_file_atomically(target, "new");
  EXPECT_EQ(slurp(target), "new");
  for (int k = 0; k < 40; ++k) EXPECT_EQ(slurp(prefix + std::to_string(k)), "live") << k;
  for (const int fd : held) ::close(fd);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace polymargin::io
