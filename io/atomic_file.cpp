#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "engine/errors.h"
#include "io/output_path.h"

namespace polymargin::io {

namespace {
std::atomic<unsigned> temp_counter{0};
std::atomic<int> waiting_openers{0};
std::atomic<int> stop_signal{0};  // note_stop_signal()

// open() of an output written in place. A FIFO with a reader opens at once; without one the call
// waits for a reader (open_waiting).
int open_in_place(const std::string& path) {
  struct stat s {};
  if (::stat(path.c_str(), &s) != 0 || !S_ISFIFO(s.st_mode))
    return ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
  }
  if (errno != ENXIO) return -1;  // ENXIO: no reader yet
  return open_waiting(path, O_WRONLY | O_CLOEXEC, true);
}

std::string errno_text() { return std::strerror(errno); }

// A rename is on disk only once the directory that holds the name is: without this, a crash soon
// after a commit could leave the old file (or none) under the name, although the data were synced.
// A directory that cannot be opened for reading, or a file system that cannot sync directories
// (EINVAL, EROFS...), is left as it is; a failed write-back is an error.
void sync_directory_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0 && error != EINVAL && error != EROFS && error != ENOTSUP && error != EBADF)
    throw IoError("cannot sync directory " + (dir.empty() ? std::string(".") : dir) + " after " +
                  "renaming " + path + " into place: " + std::strerror(error));
}
}  // namespace

AtomicFile::AtomicFile(std::string path, bool durable) : path_(std::move(path)), durable_(durable) {
  if (writes_in_place(path_)) {
    const int stream = stream_descriptor(path_);
    const int fd = stream >= 0 ? ::fcntl(stream, F_DUPFD_CLOEXEC, 3) : open_in_place(path_);
    if (fd < 0 || !(file_ = ::fdopen(fd, "wb"))) {
      const std::string error = errno_text();
      if (fd >= 0) ::close(fd);
      throw IoError("cannot write " + path_ + ": " + error);
    }
    return;
  }
  target_ = rename_target(path_);
  struct stat s {};
  const bool exists = ::stat(target_.c_str(), &s) == 0;
  if (exists && S_ISDIR(s.st_mode)) throw IoError("cannot write " + path_ + ": it is a directory");
  const bool replaces = exists && S_ISREG(s.st_mode);
  temporary_ = TemporaryPath::create([&] {
    // A new file, never one found under the name (the registry is locked meanwhile: opening a FIFO
    // put there would wait, and a signal's removal with it). A name taken by a live process of
    // this pid in another PID namespace (it holds its temporary, io/temporaries.h) is passed over
    // for the next; a leftover of a dead process of this pid goes.
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = -1;
    for (int tries = 0; tries < 100; ++tries) {
      temp_path_ =
          target_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
      fd = ::open(temp_path_.c_str(), flags, 0666);
      if (fd >= 0 || errno != EEXIST) break;
      if (temporary_in_use(temp_path_)) continue;  // another namespace's: the next name
      if (::unlink(temp_path_.c_str()) != 0 && errno != ENOENT) break;
      fd = ::open(temp_path_.c_str(), flags, 0666);
      if (fd >= 0 || errno != EEXIST) break;
    }
    if (fd < 0 || !(file_ = ::fdopen(fd, "wb"))) {
      const std::string error = errno_text();
      if (fd >= 0) {
        ::close(fd);
        ::unlink(temp_path_.c_str());
      }
      throw IoError("cannot create " + temp_path_ + ": " + error);
    }
    return temp_path_;
  });
  pending_ = true;
  // A file that replaces another keeps its access (a private 0600 model stays private), the
  // special bits aside; a new file gets the umask's.
  if (replaces) keep_access(::fileno(file_), s, 0777);
}

void keep_access(int fd, const struct stat& old, mode_t bits) {
  struct stat fresh {};
  if (::fstat(fd, &fresh) != 0) return;
  const bool group_kept = ::fchown(fd, old.st_uid, old.st_gid) == 0 ||
                          ::fchown(fd, static_cast<uid_t>(-1), old.st_gid) == 0 ||
                          old.st_gid == fresh.st_gid;
  (void)::fchmod(fd, old.st_mode & (group_kept ? bits : bits & fresh.st_mode));
}

AtomicFile::~AtomicFile() {
  if (file_) std::fclose(file_);
  if (pending_) std::remove(temp_path_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  if (bytes.empty()) return;
  if (!file_) throw std::logic_error("AtomicFile::write after sync()");
  if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    throw IoError("cannot write " + path_ + ": " + errno_text());
}

void AtomicFile::skip(std::uint64_t bytes) {
  if (!file_) throw std::logic_error("AtomicFile::skip after sync()");
  if (temp_path_.empty()) {
    static const char zeros[4096] = {};
    for (; bytes > 0; bytes -= std::min<std::uint64_t>(bytes, sizeof zeros))
      write({zeros, static_cast<std::size_t>(std::min<std::uint64_t>(bytes, sizeof zeros))});
    return;
  }
  if (::fseeko(file_, static_cast<off_t>(bytes), SEEK_CUR) != 0)
    throw IoError("cannot write " + path_ + ": " + errno_text());
}

void AtomicFile::sync() {
  if (!file_) return;
  if (std::fflush(file_) != 0) throw IoError("cannot write " + path_ + ": " + errno_text());
  // A stream written in place need not support fsync (a pipe, a terminal): its writes are what
  // count.
  const bool in_place = temp_path_.empty();
  if (durable_ && ::fsync(::fileno(file_)) != 0 &&
      !(in_place && (errno == EINVAL || errno == EROFS)))
    throw IoError("cannot write " + path_ + ": " + errno_text());
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) throw IoError("cannot write " + path_ + ": " + errno_text());
}

void AtomicFile::commit() {
  sync();
  if (!pending_) return;  // written in place, or already committed
  temporary_.publish([&] {
    if (std::rename(temp_path_.c_str(), target_.c_str()) != 0)
      throw IoError("cannot rename " + temp_path_ + " to " + target_ + ": " + errno_text());
  });
  pending_ = false;
  if (durable_) sync_directory_of(target_);
}

int open_waiting(const std::string& path, int flags, bool will_wait) {
  ++waiting_openers;
  if (const int signal = stop_signal.load(); signal && will_wait) ::kill(::getpid(), signal);
  const int fd = ::open(path.c_str(), flags);
  const int error = errno;
  --waiting_openers;
  errno = error;
  return fd;
}

bool waiting_in_open() { return waiting_openers.load() > 0; }

void note_stop_signal(int signal) { stop_signal.store(signal); }

void write_file_atomically(const std::string& path, std::string_view content, bool durable) {
  AtomicFile file(path, durable);
  file.write(content);
  file.commit();
}

}  // namespace polymargin::io
