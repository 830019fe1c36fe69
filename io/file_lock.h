// An exclusive advisory lock on "<path>.lock" (flock(2)), so that two jobs never write the same model
// or checkpoint at once: the second is refused at start, before any work. The kernel drops a flock
// when its holder dies, so a crashed job never blocks the next one; the lock file is removed when the
// lock is released.
#pragma once

#include <string>

#include "engine/errors.h"
#include "io/temporaries.h"

namespace polymargin::io {

/// FileLock's refusal when another process holds the lock: `path()` is the file it guards.
class LockedError : public IoError {
 public:
  LockedError(const std::string& message, std::string path)
      : IoError(message), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class FileLock {
 public:
  /// Takes the lock on `path` + ".lock" (beside the file a symbolic link points to; no lock for a
  /// path written in place, io/output_path.h) without waiting; throws IoError naming the path (and
  /// the holder's pid, as it wrote it into the lock file) when another process holds it, or when
  /// the lock file cannot be created. `what` names the file's role in messages ("model",
  /// "checkpoint"), and `named` the file or directory itself when it is not `path` (a lock on a
  /// directory's content, "DIR/experiment").
  FileLock(const std::string& path, const std::string& what, const std::string& named = "");
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  /// Opens lock_path_ and takes its lock (fd_), or throws (LockedError naming `path`).
  void take(const std::string& path, const std::string& named, const std::string& what);

  std::string lock_path_;
  int fd_ = -1;
  TemporaryPath registered_;  // a signal's exit removes the lock file too
};

}  // namespace polymargin::io
