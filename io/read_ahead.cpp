#include "io/read_ahead.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <deque>
#include <string_view>

#include "io/shards.h"

namespace polymargin::io {

std::uint64_t disk_read_bytes() {
  // Read at every pass of a training run, hundreds of times a second on a small set: the file is
  // opened once and read again from its start (procfs renders it anew at offset 0), not opened,
  // parsed by a stream and closed each time (six system calls a pass, most of a small pass's cost).
  static const int fd = ::open("/proc/self/io", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[512];
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return 0;
  const std::string_view io(text, static_cast<std::size_t>(n));
  constexpr std::string_view key = "read_bytes: ";
  const std::size_t at = io.find(key);
  if (at == std::string_view::npos) return 0;
  std::uint64_t value = 0;
  const char* begin = io.data() + at + key.size();
  std::from_chars(begin, io.data() + io.size(), value);
  return value;
}

ReadAhead::ReadAhead(WindowExtents extents, std::uint64_t first, std::uint64_t end,
                     std::uint64_t budget_bytes, bool drop)
    : extents_(std::move(extents)),
      end_(end),
      budget_(budget_bytes),
      drop_(drop),
      consumed_(first) {
  if ((budget_ > 0 || drop_) && first < end_) thread_ = std::thread([this, first] { run(first); });
}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ReadAhead::consumed(std::uint64_t n) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    consumed_ = std::max(consumed_, n + 1);
  }
  wake_.notify_one();
}

namespace {

// A window's extents in file-offset order, neighbours merged: one request per run of adjacent
// blocks, each request as large as the blocks allow.
void merge_extents(std::vector<BlockExtent>& extents) {
  std::sort(extents.begin(), extents.end(), [](const BlockExtent& a, const BlockExtent& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const BlockExtent e = extents[i];
    BlockExtent* last = kept > 0 ? &extents[kept - 1] : nullptr;
    if (last && last->file == e.file && last->offset + last->bytes == e.offset)
      last->bytes += e.bytes;
    else
      extents[kept++] = e;
  }
  extents.resize(kept);
}

std::uint64_t total_bytes(const std::vector<BlockExtent>& extents) {
  std::uint64_t bytes = 0;
  for (const BlockExtent& e : extents) bytes += e.bytes;
  return bytes;
}

}  // namespace

// Windows [dropped, issued) have been asked for and not yet consumed; `ahead` holds their bytes.
// The reads go out a window at a time while the bytes ahead stay within the budget; the windows up
// to the one after the window being consumed always go, however large, so that even a budget
// below a window's size overlaps the next window's reading with this one's learning. It starts
// from `first`, not from consumed_, which the scan may already be moving under the mutex.
void ReadAhead::run(std::uint64_t first) {
  std::vector<BlockExtent> extents;
  std::deque<std::uint64_t> ahead;
  std::uint64_t issued = first, dropped = first, ahead_bytes = 0;
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const std::uint64_t consumed = consumed_;
    lock.unlock();
    for (; dropped < consumed; ++dropped) {
      if (dropped < issued) {
        ahead_bytes -= ahead.front();
        ahead.pop_front();
      }
      if (!drop_) continue;
      extents.clear();
      extents_(dropped, extents);
      for (const BlockExtent& e : extents) e.file->drop_cached(e.offset, e.bytes);
    }
    issued = std::max(issued, consumed);
    bool sent = false;
    if (budget_ > 0 && issued < end_) {
      extents.clear();
      extents_(issued, extents);
      const std::uint64_t bytes = total_bytes(extents);
      if (issued <= consumed + 1 || ahead_bytes + bytes <= budget_) {
        merge_extents(extents);
        for (const BlockExtent& e : extents) e.file->will_need(e.offset, e.bytes);
        ahead.push_back(bytes);
        ahead_bytes += bytes;
        ++issued;
        sent = true;
      }
    }
    lock.lock();
    if (!sent) wake_.wait(lock, [&] { return stop_ || consumed_ != consumed; });
  }
}

}  // namespace polymargin::io
