#include "io/memory.h"

#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace polymargin::io {

namespace {

namespace fs = std::filesystem;

// The first word of `path` (a cgroup file) as a number, or nullopt (absent, "max", unreadable).
std::optional<std::uint64_t> read_number(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The value of `key` in a memory.stat file, else 0.
std::uint64_t stat_value(const fs::path& path, const std::string& key) {
  std::ifstream in(path);
  std::string name;
  std::uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

struct CgroupMemory {
  std::uint64_t limit = 0;            // the tightest limit; 0: none
  std::optional<std::uint64_t> room;  // the least room under a limit
};

// One walk over the memory cgroups that bound the process, from /proc/self/cgroup: "0::/PATH"
// (v2: that cgroup and each ancestor under the mount) or "N:...memory...:/PATH" (v1).
CgroupMemory cgroup_memory() {
  CgroupMemory out;
  const auto take = [&](std::uint64_t limit, std::uint64_t usage, std::uint64_t reclaimable) {
    if (out.limit == 0 || limit < out.limit) out.limit = limit;
    const std::uint64_t held = usage > reclaimable ? usage - reclaimable : 0;
    const std::uint64_t left = limit > held ? limit - held : 0;
    if (!out.room || left < *out.room) out.room = left;
  };
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const fs::path path = line.substr(second + 1);
    if (controllers.empty()) {
      for (fs::path p = path;; p = p.parent_path()) {
        const fs::path dir = fs::path("/sys/fs/cgroup") / p.relative_path();
        if (const auto limit = read_number(dir / "memory.max"); limit && *limit > 0)
          take(*limit, read_number(dir / "memory.current").value_or(0),
               stat_value(dir / "memory.stat", "inactive_file"));
        if (!p.has_relative_path()) break;  // the root: done
      }
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const fs::path dir = fs::path("/sys/fs/cgroup/memory") / path.relative_path();
      std::uint64_t limit = stat_value(dir / "memory.stat", "hierarchical_memory_limit");
      if (limit == 0) limit = read_number(dir / "memory.limit_in_bytes").value_or(0);
      // v1 says "no limit" with a number near 2^63.
      if (limit > 0 && limit < (std::uint64_t{1} << 62))
        take(limit, read_number(dir / "memory.usage_in_bytes").value_or(0),
             stat_value(dir / "memory.stat", "total_inactive_file"));
    }
  }
  return out;
}

}  // namespace

std::uint64_t cgroup_memory_limit() { return cgroup_memory().limit; }

std::optional<std::uint64_t> cgroup_memory_room() { return cgroup_memory().room; }

namespace {

// The line "KEY: N kB" of a /proc file, in bytes; 0 if absent.
std::uint64_t proc_kib(const char* path, const std::string& wanted) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.compare(0, wanted.size(), wanted) != 0) continue;
    std::istringstream fields(line.substr(wanted.size()));
    std::uint64_t kib = 0;
    return fields >> kib ? kib * 1024 : 0;
  }
  return 0;
}

}  // namespace

std::optional<std::uint64_t> address_space_room() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const std::uint64_t held = proc_kib("/proc/self/status", "VmSize:");
  return limit.rlim_cur > held ? limit.rlim_cur - held : 0;
}

std::uint64_t mem_available() { return proc_kib("/proc/meminfo", "MemAvailable:"); }

std::uint64_t available_memory() {
  std::uint64_t available = mem_available();
  const std::uint64_t limit = cgroup_memory_limit();
  if (limit > 0 && (available == 0 || limit < available)) available = limit;
  return available;
}

}  // namespace polymargin::io
