// The I/O stage of a scan: a thread that keeps the disk busy ahead of the decoders. A scan reads
// the windows of its block order one after the other; from a cold page cache each block would be
// read when a decoder first touches it, one block at a time, in the window's shuffled order, while
// nothing is read during the learner's turn. This thread instead asks the kernel for the blocks of
// the windows ahead (posix_fadvise WILLNEED: queued reads, several in flight, large requests),
// each window's blocks in file-offset order, as long as the bytes asked for and not yet consumed
// stay within a budget. With data larger than memory it also drops the page cache's copy of each
// consumed window, so that streamed shards never push anything else out.
//
// It only moves pages between disk and page cache: which rows a window holds and their order are
// the reader's alone, so the models do not depend on it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "io/shard_format.h"

namespace polymargin::io {

/// Where one block lies.
struct BlockExtent {
  const shard::MappedFile* file = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// Appends the extents of window `n`'s blocks to `out`.
using WindowExtents = std::function<void(std::uint64_t n, std::vector<BlockExtent>& out)>;

/// Bytes the process has caused to be read from storage so far (read_bytes of /proc/self/io: the
/// reads of its page faults, read-ahead and read calls that missed the page cache); 0 if unknown.
std::uint64_t disk_read_bytes();

class ReadAhead {
 public:
  /// Reads ahead windows [first, end) within `budget_bytes` (at least the window after the one
  /// being consumed, whatever its size); `drop`: drop each consumed window's pages. budget 0 and
  /// no drop: no thread at all.
  ReadAhead(WindowExtents extents, std::uint64_t first, std::uint64_t end,
            std::uint64_t budget_bytes, bool drop);
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  /// Window `n` has been consumed and its pages unmapped (called in window order).
  void consumed(std::uint64_t n);

 private:
  void run(std::uint64_t first);

  WindowExtents extents_;
  const std::uint64_t end_;
  const std::uint64_t budget_;
  const bool drop_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::uint64_t consumed_;  // windows before this one are done
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace polymargin::io
