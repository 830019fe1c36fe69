// Files that appear whole or not at all: written under a temporary name in the target's directory,
// flushed, fsync'ed and renamed into place by commit(). An uncommitted AtomicFile removes its
// temporary file when destroyed, so an error never leaves a partial output behind; the temporary is
// registered (io/temporaries.h), so a signal does not leave it either. Paths that are not regular
// files (devices, FIFOs, /dev/stdout: io/output_path.h) are written in place instead, never
// renamed over; through a symbolic link the file it points to is replaced.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "io/temporaries.h"

namespace polymargin::io {

class AtomicFile {
 public:
  /// Opens "<path>.tmp-<pid>-<n>" for writing (or the path itself, see above); throws IoError.
  /// Not `durable`: no fsync (a file of a temporary directory, gone with the process), still
  /// renamed into place whole.
  explicit AtomicFile(std::string path, bool durable = true);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Appends bytes; throws IoError (disk full included).
  void write(std::string_view bytes);
  /// Appends `bytes` zeros: a hole in a regular file (which must be written to after it), written
  /// zeros when written in place.
  void skip(std::uint64_t bytes);
  /// Flushes, fsyncs and closes the temporary file, which stays under its temporary name until
  /// commit(); throws IoError. Lets the slow part of a write overlap other work.
  void sync();
  /// Syncs (if not yet done) and renames into place; throws IoError.
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temp_path_;  // empty when written in place
  std::string target_;     // what the temporary file is renamed to
  std::FILE* file_ = nullptr;
  bool durable_ = true;
  bool pending_ = false;  // the temporary file exists and is not yet renamed
  TemporaryPath temporary_;
};

/// Gives the file or directory open as `fd`, which replaces one whose stat is `old`, that one's
/// permission bits within `bits` and, where the process may give them, its owner and group; where
/// the group cannot be carried over, the old bits apply only as far as `fd`'s own allow too (never
/// wider than either: a 0640 file of another group is not made readable to this process's). Best
/// effort: a file system without permissions (vfat) leaves them as they are.
void keep_access(int fd, const struct stat& old, mode_t bits);

/// open(path, flags) of a FIFO, which may wait for the other end (an output's reader, an input's
/// writer): meanwhile waiting_in_open() says so, so that a signal ends the process at once. When
/// the open is known to wait (`will_wait`: an output whose non-blocking open found no reader), a
/// stop signal taken before as a polite request, which nothing polls any more, is sent again too.
/// (An input's open cannot tell beforehand: a signal taken before it is left as it was.) Returns
/// the descriptor, or -1 with errno.
int open_waiting(const std::string& path, int flags, bool will_wait);
/// True while a thread waits in open_waiting(): nothing polls a stop request meanwhile, so a
/// signal's handler ends the process at once. Async-signal-safe.
bool waiting_in_open();
/// Records a stop signal that was taken as a polite request: should a FIFO output then have to
/// wait for its reader, the signal is sent again (see open_waiting). Async-signal-safe.
void note_stop_signal(int signal);

/// Writes `content` to `path` atomically (`durable`: as AtomicFile's).
void write_file_atomically(const std::string& path, std::string_view content, bool durable = true);

}  // namespace polymargin::io
