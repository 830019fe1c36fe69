#include "io/temporaries.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <string_view>

namespace polymargin::io {

namespace fs = std::filesystem;

namespace {

// A registered temporary: its path, and a descriptor of it that holds a flock for as long as the
// temporary is this process's, so that a sweep from another PID namespace (a container sharing
// $TMPDIR or the output's directory), where this pid names no process, leaves it alone.
struct Entry {
  std::string path;
  int fd = -1;
};

struct Registry {
  std::mutex mutex;
  std::map<std::uint64_t, Entry> paths;
  std::uint64_t next_id = 1;
};

// The flock of a temporary just made, or -1 (best effort: a file system without locks, or a path
// this process has locked otherwise, a lock file, goes without).
int hold(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
  ::close(fd);
  return -1;
}

// Forgets entry `id` (the registry locked), letting go of its flock.
void forget(Registry& r, std::uint64_t id) {
  const auto it = r.paths.find(id);
  if (it == r.paths.end()) return;
  if (it->second.fd >= 0) ::close(it->second.fd);
  r.paths.erase(it);
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: the signal thread may use it at exit
  return *r;
}

// The pid of "<pid>" or "<pid>-<digits>" at the start of `rest` (whatever follows when `exact` is
// false), or 0.
pid_t leading_pid(std::string_view rest, bool exact) {
  std::int64_t pid = 0;
  std::size_t i = 0;
  for (; i < rest.size() && i < 10 && rest[i] >= '0' && rest[i] <= '9'; ++i)
    pid = pid * 10 + (rest[i] - '0');
  if (i == 0 || (i < rest.size() && rest[i] != '-') || pid > std::numeric_limits<pid_t>::max())
    return 0;
  if (exact && i < rest.size()) {
    if (i + 1 == rest.size()) return 0;
    for (std::size_t j = i + 1; j < rest.size(); ++j)
      if (rest[j] < '0' || rest[j] > '9') return 0;
  }
  return static_cast<pid_t>(pid);
}

bool dead(pid_t pid) {
  return pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

void sweep(const fs::path& directory, const std::string& prefix, bool exact) {
  std::error_code ec;
  fs::directory_iterator it(directory.empty() ? fs::path(".") : directory, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (dead(leading_pid(std::string_view(name).substr(prefix.size()), exact)) &&
        !temporary_in_use(it->path().string())) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

}  // namespace

bool temporary_in_use(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

TemporaryPath TemporaryPath::create(const std::function<std::string()>& make) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  TemporaryPath made;
  std::string path = make();
  made.id_ = r.next_id++;
  const int fd = hold(path);
  r.paths.emplace(made.id_, Entry{std::move(path), fd});
  return made;
}

TemporaryPath::~TemporaryPath() { release(); }

TemporaryPath::TemporaryPath(TemporaryPath&& other) noexcept : id_(other.id_) { other.id_ = 0; }

TemporaryPath& TemporaryPath::operator=(TemporaryPath&& other) noexcept {
  if (this != &other) {
    release();
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void TemporaryPath::publish(const std::function<void()>& rename_into_place) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  rename_into_place();
  forget(r, id_);
  id_ = 0;
}

void TemporaryPath::release() {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  forget(r, id_);
  id_ = 0;
}

int remove_temporaries() {
  Registry& r = registry();
  r.mutex.lock();  // never unlocked: the process is about to die, and nothing may publish first
  int removed = 0;
  for (const auto& [id, entry] : r.paths) {
    const std::string& path = entry.path;
    // The process's other threads run on meanwhile: a file they create in a directory being
    // removed (after remove_all listed it) keeps the directory; a few more rounds take it.
    std::error_code ec;
    bool any = false;
    for (int round = 0; round < 20; ++round) {
      const std::uintmax_t gone = fs::remove_all(path, ec);
      any = any || (!ec && gone > 0);
      if (!ec) break;
    }
    removed += any ? 1 : 0;
  }
  r.paths.clear();
  return removed;
}

void sweep_dead_temporaries(const std::string& path) {
  const fs::path p = fs::path(path).lexically_normal();
  const fs::path name = p.has_filename() ? p.filename() : p.parent_path().filename();
  if (name.empty()) return;
  const fs::path parent = p.has_filename() ? p.parent_path() : p.parent_path().parent_path();
  sweep(parent, name.string() + ".tmp-", true);
}

void sweep_dead_temporaries_in(const std::string& directory, const std::string& prefix) {
  sweep(directory, prefix, false);
}

}  // namespace polymargin::io
