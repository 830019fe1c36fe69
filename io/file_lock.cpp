#include "io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/errors.h"
#include "io/output_path.h"

namespace polymargin::io {

FileLock::FileLock(const std::string& path, const std::string& what, const std::string& named) {
  if (writes_in_place(path)) return;  // a device or a stream: nothing is replaced, nothing to lock
  lock_path_ = rename_target(path) + ".lock";
  // Taken and registered in one step (a signal's exit then removes the lock file, never another
  // holder's, and never leaves ours behind).
  registered_ = TemporaryPath::create([&] {
    take(path, named.empty() ? path : named, what);
    return lock_path_;
  });
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

void FileLock::take(const std::string& path, const std::string& named, const std::string& what) {
  // The holder unlinks the file when it releases the lock, so a lock taken on a file that has
  // since been unlinked (or replaced) is worthless: retake it until the locked inode is the one
  // the path names.
  // A name that is not a lock file of ours (a symbolic link, a FIFO, a file of other content,
  // maybe the command's own input) is never truncated, written or removed: refused (exit 2).
  const auto not_ours = [&](const std::string& is) {
    throw UsageError(lock_path_ + " " + is + ", not the lock file of the " + what + " " + named +
                     " that polymargin takes: move it away (nothing was written)");
  };
  for (;;) {
    fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0 && errno == ELOOP) not_ours("is a symbolic link");
    if (fd_ < 0)
      throw IoError("cannot create lock file " + lock_path_ + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      char holder[32] = {};
      const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
      ::close(fd_);
      fd_ = -1;
      if (error == EWOULDBLOCK) {
        std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
        while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
        throw LockedError("the " + what + " " + named + " is being written by another job (" +
                              lock_path_ + " is locked" + (pid.empty() ? "" : " by pid " + pid) +
                              "); refusing to write it at the same time",
                          path);
      }
      throw IoError("cannot lock " + lock_path_ + ": " + std::strerror(error));
    }
    struct stat held {
    }, at_path{};
    if (::fstat(fd_, &held) == 0 && ::stat(lock_path_.c_str(), &at_path) == 0 &&
        held.st_dev == at_path.st_dev && held.st_ino == at_path.st_ino)
      break;
    ::close(fd_);  // unlinked or replaced between open and flock: try again
    fd_ = -1;
  }
  // Ours: empty (new), or the pid line of a holder that died (its lock went with it).
  struct stat held {};
  char content[32] = {};
  const ssize_t n = ::fstat(fd_, &held) == 0 && S_ISREG(held.st_mode) && held.st_size < 32
                        ? ::pread(fd_, content, sizeof content, 0)
                        : -1;
  bool pid_line = n >= 0;
  for (ssize_t i = 0; i < n && pid_line; ++i)
    pid_line = (content[i] >= '0' && content[i] <= '9') || (content[i] == '\n' && i == n - 1);
  if (!pid_line) {
    ::close(fd_);
    fd_ = -1;
    not_ours(S_ISREG(held.st_mode) ? "holds other data" : "is not a regular file");
  }
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());  // while still held: a waiting opener then sees a new inode
  ::close(fd_);
}

}  // namespace polymargin::io
