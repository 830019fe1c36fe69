// The output-path policy (io/output_path.h) and the temporaries registry (io/temporaries.h): an
// output that is an input under another name is refused, streams are recognised, links are
// followed, and only the leftovers of processes that are gone are swept.
#include "io/output_path.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/errors.h"
#include "io/temporaries.h"

namespace polymargin::io {
namespace {

namespace fs = std::filesystem;

class OutputPath : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pm_output_path_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path("in.svm")) << "1 1:1\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(OutputPath, StreamsAreTheirDescriptors) {
  EXPECT_EQ(stream_descriptor("/dev/stdout"), 1);
  EXPECT_EQ(stream_descriptor("/dev/stderr"), 2);
  EXPECT_EQ(stream_descriptor("/dev/fd/7"), 7);
  EXPECT_EQ(stream_descriptor("/proc/self/fd/3"), 3);
  EXPECT_EQ(stream_descriptor("/dev/fd/x"), -1);
  EXPECT_EQ(stream_descriptor("/dev/fd/"), -1);
  EXPECT_EQ(stream_descriptor(path("in.svm")), -1);
  EXPECT_TRUE(writes_in_place("/dev/null"));
  EXPECT_TRUE(writes_in_place("/dev/stdout"));
  EXPECT_FALSE(writes_in_place(path("in.svm")));
  EXPECT_FALSE(writes_in_place(path("new.model")));
}

TEST_F(OutputPath, LinksAreFollowedToTheFileTheyNameExistingOrNot) {
  fs::create_symlink("real.model", path("link.model"));  // relative, to a file not yet written
  fs::create_symlink(path("link.model"), path("chain.model"));
  EXPECT_EQ(fs::path(rename_target(path("chain.model"))).lexically_normal(),
            fs::path(path("real.model")));
  EXPECT_EQ(rename_target(path("in.svm")), path("in.svm"));
}

TEST_F(OutputPath, AnOutputThatIsAnInputUnderAnyNameIsRefused) {
  fs::create_hard_link(path("in.svm"), path("hard.svm"));
  fs::create_symlink(path("in.svm"), path("soft.svm"));
  for (const char* name : {"in.svm", "hard.svm", "soft.svm", "./in.svm"}) {
    try {
      check_outputs({{"--data", path("in.svm")}}, {{"-o", (dir_ / name).string(), false, ""}});
      FAIL() << name << " was accepted";
    } catch (const OutputPathError& e) {
      EXPECT_TRUE(e.involves("-o"));
      EXPECT_TRUE(e.involves("--data"));
      EXPECT_FALSE(e.involves("--metrics-json"));
    }
  }
  // The checkpoint may be the file it resumes from.
  EXPECT_NO_THROW(check_outputs({{"--resume", path("in.svm")}},
                                {{"--checkpoint", path("in.svm"), false, "--resume"}}));
  // Two outputs, one file (one of them not there yet).
  EXPECT_THROW(
      check_outputs({}, {{"-o", path("m"), false, ""}, {"--metrics-json", path("m"), false, ""}}),
      OutputPathError);
  // Devices may be named twice.
  EXPECT_NO_THROW(
      check_outputs({}, {{"-o", "/dev/null", false, ""}, {"--plot", "/dev/null", false, ""}}));
}

TEST_F(OutputPath, DirectoriesAreCheckedForWhatTheyAreAndHold) {
  fs::create_directories(path("d.shards"));
  std::ofstream(path("d.shards/part.svm")) << "1 1:1\n";
  EXPECT_THROW(check_outputs({}, {{"-o", path("d.shards"), false, ""}}), OutputPathError);
  EXPECT_THROW(
      check_outputs({{"INPUT", path("d.shards/part.svm")}}, {{"-o", path("d.shards"), true, ""}}),
      OutputPathError);
  EXPECT_NO_THROW(check_outputs({{"INPUT", path("in.svm")}}, {{"-o", path("d.shards"), true, ""}}));
  EXPECT_NO_THROW(check_outputs({}, {{"-o", path("new.shards/"), true, ""}}));
  EXPECT_THROW(check_outputs({}, {{"-o", path("nodir/m.model"), false, ""}}), IoError);
}

TEST_F(OutputPath, OnlyTheTemporariesOfProcessesThatAreGoneAreSwept) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // now a pid no process has (unless reused at once)
  const std::string dead = path("m.model.tmp-" + std::to_string(child) + "-0");
  const std::string alive = path("m.model.tmp-" + std::to_string(::getpid()) + "-0");
  const std::string dead_dir = path("d.shards.tmp-" + std::to_string(child));
  const std::string other = path("m.model.tmp-notapid");
  const std::string unrelated = path("n.model.tmp-" + std::to_string(child) + "-0");
  for (const std::string& p : {dead, alive, other, unrelated}) std::ofstream(p) << "x";
  fs::create_directories(dead_dir + "/sub");
  sweep_dead_temporaries(path("m.model"));
  sweep_dead_temporaries(path("d.shards/"));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(dead_dir));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(unrelated));
}

// A temporary whose pid names no process here but whose maker holds it (a process of another PID
// namespace sharing the directory: a container, here a flock of this process's) is not swept; once
// let go, it is.
TEST_F(OutputPath, ATemporaryItsMakerHoldsIsNotSwept) {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string file = path("h.model.tmp-" + std::to_string(child) + "-0");
  const std::string dir = path("polymargin-" + std::to_string(child) + "-abcdef");
  std::ofstream(file) << "x";
  fs::create_directories(dir + "/data.shards");
  std::vector<int> held;
  for (const std::string& p : {file, dir}) {
    held.push_back(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_GE(held.back(), 0);
    ASSERT_EQ(::flock(held.back(), LOCK_EX | LOCK_NB), 0);
  }
  sweep_dead_temporaries(path("h.model"));
  sweep_dead_temporaries_in(path(""), "polymargin-");
  EXPECT_TRUE(fs::exists(file));
  EXPECT_TRUE(fs::exists(dir));
  for (const int fd : held) ::close(fd);
  sweep_dead_temporaries(path("h.model"));
  sweep_dead_temporaries_in(path(""), "polymargin-");
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(dir));
}

// A temporary made through TemporaryPath::create is held so while it is registered.
TEST_F(OutputPath, MadeTemporariesAreHeldWhileRegistered) {
  const std::string file = path("r.model.tmp-1-0");
  {
    const TemporaryPath made = TemporaryPath::create([&] {
      std::ofstream(file) << "x";
      return file;
    });
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
    ::close(fd);
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::close(fd);
}

TEST_F(OutputPath, RegisteredTemporariesAreRemovedWhenTheProcessIsStopped) {
  const std::string file = path("x.tmp-1-0"), tree = path("t.tmp-1");
  const std::string kept = path("published");
  const pid_t child = ::fork();
  if (child == 0) {  // the registry's lock is taken for good: only in a process about to end
    const TemporaryPath registered_file = TemporaryPath::create([&] {
      std::ofstream(file) << "x";
      return file;
    });
    const TemporaryPath registered_tree = TemporaryPath::create([&] {
      fs::create_directories(tree + "/a/b");
      return tree;
    });
    TemporaryPath published = TemporaryPath::create([&] {
      std::ofstream(kept) << "whole";
      return kept;
    });
    published.publish([] {});
    ::_exit(remove_temporaries() == 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(kept));
}

// A temporary that a thread is about to make as the signal's removal runs is never made: create()
// waits for the end, so nothing is created that the removal has missed (registering the path
// before creating it, or after, left such a gap).
TEST_F(OutputPath, NoTemporaryIsMadeOnceTheyAreRemoved) {
  const std::string late = path("late.tmp-1");
  const pid_t child = ::fork();
  if (child == 0) {
    remove_temporaries();
    std::thread([&] {
      const TemporaryPath made = TemporaryPath::create([&] {
        fs::create_directories(late);
        return late;
      });
    }).detach();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::_exit(fs::exists(late) ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(fs::exists(late));
}

}  // namespace
}  // namespace polymargin::io
