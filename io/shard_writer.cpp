// ShardWriter: rows in, a shard directory out.
//
// Flow: append() (the caller's thread) copies rows into a free block slot; a full slot goes to a
// queue read by a oneTBB parallel_pipeline on the writer's own thread: serial_in_order take →
// parallel encode/compress → serial_in_order write, which appends the block to shard
// (block number mod shards) and hands the slot back. Memory is the fixed pool of slots, never the
// input size; the bytes written depend only on the rows, never on the thread count, because
// blocks are cut by the caller and written in block order.
//
// Block-wise round robin: global block b lives in shard b % shards at position b / shards, so a
// reader that takes blocks in global order reads the rows in input order.
//
// In memory (ShardWriter(options, threads, name)): the same bytes go into a buffer per shard
// instead of a file, and finish_in_memory() opens them as a ShardSet; no directory, no manifest
// or scaling file. A set written either way reads the same rows in the same order and has the
// same data checksum.
#include <fcntl.h>
#include <sys/stat.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>

#include "engine/errors.h"
#include "engine/sparse.h"
#include "io/atomic_file.h"
#include "io/output_path.h"
#include "io/shard_format.h"
#include "io/shard_manifest.h"
#include "io/shards.h"
#include "io/temporaries.h"

namespace polymargin::io {

namespace fs = std::filesystem;

namespace {

// A block on its way through the writer: filled by append(), encoded by a worker, written in order.
struct Slot {
  CsrBuffer rows;
  std::vector<std::uint8_t> bytes;  // the encoded block
  std::uint64_t block_index = 0;
  std::uint64_t first_row = 0;
  // Set by the encode worker, merged by the serial write stage.
  std::uint32_t max_index = 0;
  bool saw_index_zero = false;
};

// A blocking queue of slots whose close() is sticky: once closed, pop() drains what is left and
// then returns nullptr. (tbb::concurrent_bounded_queue::abort only wakes the current waiters, which
// leaves a window for a later pop to block forever after a failure.)
class SlotQueue {
 public:
  void push(Slot* slot) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(slot);
    }
    cv_.notify_one();
  }
  Slot* pop() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return nullptr;
    Slot* slot = items_.front();
    items_.pop_front();
    return slot;
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Slot*> items_;
  bool closed_ = false;
};

// One output shard file, or its bytes in memory.
struct ShardOut {
  std::string path;
  int fd = -1;
  bool in_memory = false;
  std::vector<std::uint8_t> bytes;  // in memory: the file
  std::uint64_t offset = 0;
  std::uint64_t rows = 0;
  std::vector<shard::IndexEntry> index;
  std::vector<std::uint64_t> block_checksums;  // each block's trailing checksum, in order
  shard::FileHeader header{};                  // as written first, without the content checksum

  /// Appends `size` bytes to the file.
  void put(const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    if (in_memory) {
      bytes.insert(bytes.end(), p, p + size);
      return;
    }
    while (size > 0) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw IoError("cannot write " + path + ": " + std::strerror(errno));
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  /// Writes the file header over the first bytes.
  void put_header(const shard::FileHeader& h) {
    if (in_memory) {
      std::memcpy(bytes.data(), &h, sizeof h);
      return;
    }
    if (::pwrite(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h))
      throw IoError("cannot write " + path + ": " + std::strerror(errno));
  }
};

// "out/a.shards/" and "out//a.shards" name the same directory as "out/a.shards"; the temporary
// sibling must be derived from the latter.
std::string normalize_dir(const std::string& path) {
  std::string dir = fs::path(path).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: durability of the directory entry, not correctness
  ::fsync(fd);
  ::close(fd);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Per-feature max |value|, raised by the encode workers concurrently. Chunks of 1 Mi entries are
// allocated on first touch (a fixed array of chunk pointers covers every u32 index), so the table
// grows with the largest index without ever copying; entries only ever go up, by compare-and-swap,
// and a maximum does not depend on the order of updates, so the table is the same for any thread
// count. Once a feature has seen its largest value an update is a read: no cache line is dirtied.
class MaxabsTable {
 public:
  static constexpr std::size_t kChunk = std::size_t{1} << 20;
  static constexpr std::size_t kChunks = (std::size_t{1} << 32) / kChunk;

  MaxabsTable() : chunks_(new std::atomic<float*>[kChunks]) {
    for (std::size_t c = 0; c < kChunks; ++c) chunks_[c].store(nullptr, std::memory_order_relaxed);
  }

  /// Thread-safe.
  void raise(std::uint32_t index, float value) {
    std::atomic_ref<float> m(chunk(index / kChunk)[index % kChunk]);
    const float v = std::fabs(value);
    float current = m.load(std::memory_order_relaxed);
    while (v > current && !m.compare_exchange_weak(current, v, std::memory_order_relaxed)) {
    }
  }

  /// Hints the entry of `index` into cache ahead of its raise(); nothing if its chunk is new.
  void prefetch(std::uint32_t index) const {
    const float* c = chunks_[index / kChunk].load(std::memory_order_acquire);
    if (c) __builtin_prefetch(c + index % kChunk, 0);
  }

  /// The first `count` entries as pieces; an untouched chunk is a view of one shared chunk of
  /// zeros (one feature id near 2^32 must not allocate the 16 GiB below it). Call once the workers
  /// are done.
  std::vector<std::span<const float>> pieces(std::size_t count) {
    std::vector<std::span<const float>> out;
    for (std::size_t c = 0; c * kChunk < count; ++c) {
      const float* p = chunks_[c].load(std::memory_order_acquire);
      if (!p) {
        if (zeros_.empty()) zeros_.assign(kChunk, 0.0f);
        p = zeros_.data();
      }
      out.emplace_back(p, std::min(kChunk, count - c * kChunk));
    }
    return out;
  }

 private:
  float* chunk(std::size_t c) {
    float* p = chunks_[c].load(std::memory_order_acquire);
    if (p) return p;
    std::lock_guard lock(grow_);
    p = chunks_[c].load(std::memory_order_relaxed);
    if (!p) {
      // 4 MB chunks on 2 MB pages: updates land at random all over the table, and with 4 KB pages
      // nearly every one would also miss the TLB.
      owned_.emplace_back(kChunk, 0.0f);
      p = owned_.back().data();
      chunks_[c].store(p, std::memory_order_release);
    }
    return p;
  }

  std::unique_ptr<std::atomic<float*>[]> chunks_;
  std::mutex grow_;
  std::deque<std::vector<float, engine::sparse::HugePageAllocator<float>>> owned_;
  std::vector<float> zeros_;
};

}  // namespace

struct ShardWriter::Impl {
  std::string dir;  // in memory: the rows' name, for messages
  bool in_memory = false;
  std::string temp_dir;
  TemporaryPath temporary;  // temp_dir, removed on a signal
  ConvertOptions options;
  int threads = 1;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  std::vector<ShardOut> shards;
  std::vector<std::unique_ptr<Slot>> slots;
  SlotQueue free_slots;
  SlotQueue filled;
  Slot* current = nullptr;
  std::uint64_t blocks_submitted = 0;
  std::uint64_t rows_appended = 0;
  std::uint64_t text_bytes = 0;
  bool finished = false;

  tbb::enumerable_thread_specific<shard::BlockEncoder> encoders;
  std::thread pipeline;
  std::mutex error_mutex;
  std::exception_ptr error;
  std::atomic<bool> failed{false};

  // Totals, touched only by the serial write stage until the pipeline has been joined.
  std::uint64_t rows = 0;
  std::uint64_t nnz = 0;
  std::uint32_t max_index = 0;
  bool any_index = false;
  bool saw_index_zero = false;
  std::optional<std::uint32_t> declared_max_index;  // set by the caller, taken in finish()
  bool has_values = false;
  std::map<double, std::uint64_t> label_counts;
  MaxabsTable maxabs;

  // Writes into the directory `out_dir`, or, `in_memory`, into buffers (out_dir then names the
  // rows in messages).
  Impl(const std::string& out_dir, const ConvertOptions& opts, int requested_threads, bool memory)
      // Through a symbolic link, the directory it points to is replaced, as a file's would be.
      : dir(memory ? out_dir : normalize_dir(rename_target(normalize_dir(out_dir)))),
        in_memory(memory),
        temp_dir(memory ? "" : dir + ".tmp-" + std::to_string(::getpid())),
        options(opts),
        threads(requested_threads > 0 ? requested_threads : tbb::info::default_concurrency()),
        encoders(opts.codec, opts.zstd_level, dir) {
    check_options();
    if (in_memory) {
      for (std::uint32_t s = 0; s < options.shards; ++s) open_shard(s);
    } else {
      open_directory();
    }
    // Four blocks in flight per thread: the text reader's in-order stage hands rows over here and
    // blocks while no slot is free, holding one of its own workers. At 2 per thread, converting the
    // KDD-size text to raw shards took 5.85 s (median of 3, 2 cores) against 5.47 s at 4, for
    // ~10 MB more memory (165 MiB peak).
    const int tokens = std::max(2, 4 * threads);
    for (int i = 0; i < tokens + 2; ++i) {
      slots.push_back(std::make_unique<Slot>());
      free_slots.push(slots.back().get());
    }
    pipeline = std::thread([this, tokens] { run_pipeline(tokens); });
  }

  // The temporary directory and its shard files.
  void open_directory() {
    std::error_code ec;
    fs::remove_all(temp_dir, ec);  // left over by a crashed run that had our pid
    sweep_dead_temporaries(dir);   // and those of runs that no longer exist
    temporary = TemporaryPath::create([&] {
      if (!fs::create_directories(temp_dir, ec) || ec)
        throw IoError("cannot create " + temp_dir + ": " + ec.message());
      return temp_dir;
    });
    try {
      for (std::uint32_t s = 0; s < options.shards; ++s) open_shard(s);
    } catch (...) {
      close_files();
      fs::remove_all(temp_dir, ec);
      throw;
    }
  }

  void check_options() const {
    if (!in_memory && (dir.empty() || dir == "." || dir == "/"))
      throw UsageError("invalid output directory '" + dir + "'");
    if (options.block_rows == 0 || options.block_rows > (1u << 24))
      throw ConfigError("block_rows", "must be in [1, 16777216] (got " +
                                          std::to_string(options.block_rows) + ")");
    if (options.shards == 0 || options.shards > 4096)
      throw ConfigError("shards",
                        "must be in [1, 4096] (got " + std::to_string(options.shards) + ")");
    if (options.codec == Codec::kZstd &&
        (options.zstd_level < ZSTD_minCLevel() || options.zstd_level > ZSTD_maxCLevel()))
      throw UsageError("zstd level must be in [" + std::to_string(ZSTD_minCLevel()) + ", " +
                       std::to_string(ZSTD_maxCLevel()) + "], got " +
                       std::to_string(options.zstd_level));
    if (in_memory) return;
    // An existing output is replaced only when it is empty or a shard directory, nothing else in
    // it: a mistyped -o must never wipe somebody's data.
    std::error_code ec;
    const auto status = fs::status(dir, ec);
    if (fs::exists(status)) {
      if (!fs::is_directory(status))
        throw UsageError("output " + dir + " exists and is not a directory");
      check_replaceable();
    }
  }

  // The files a shard directory holds: the manifest, the maxima and shard-NNNNN.pms.
  static bool shard_directory_file(const fs::directory_entry& entry) {
    const std::string name = entry.path().filename().string();
    std::error_code ec;
    if (!entry.is_regular_file(ec) || entry.is_symlink(ec)) return false;
    if (name == shard::kManifestFile || name == shard::kMaxabsFile) return true;
    constexpr std::string_view kPrefix = "shard-", kSuffix = ".pms";
    if (name.size() != kPrefix.size() + 5 + kSuffix.size() || !name.starts_with(kPrefix) ||
        !name.ends_with(kSuffix))
      return false;
    return std::all_of(name.begin() + kPrefix.size(), name.end() - kSuffix.size(),
                       [](char c) { return c >= '0' && c <= '9'; });
  }

  // UsageError unless `dir` is empty or a shard directory: a readable manifest, and no file that
  // a shard directory does not hold.
  void check_replaceable() const {
    const std::string refusal = "refusing to replace " + dir + ": ";
    const std::string remedy = "; choose another output, or remove it first if it is to go";
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) throw IoError("cannot read the directory " + dir + ": " + ec.message());
    bool empty = true;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) throw IoError("cannot read the directory " + dir + ": " + ec.message());
      empty = false;
      if (!shard_directory_file(*it))
        throw UsageError(refusal + "it holds " + it->path().filename().string() +
                         ", which is not part of a shard directory" + remedy);
    }
    if (empty) return;
    try {
      shard::read_manifest(dir);
    } catch (const std::exception& e) {
      throw UsageError(refusal + "it is not a readable shard directory (" + e.what() + ")" +
                       remedy);
    }
  }

  void open_shard(std::uint32_t s) {
    ShardOut out;
    if (in_memory) {
      out.path = dir + "/" + shard::shard_file_name(s);
      out.in_memory = true;
    } else {
      out.path = temp_dir + "/" + shard::shard_file_name(s);
      out.fd = ::open(out.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (out.fd < 0) throw IoError("cannot create " + out.path + ": " + std::strerror(errno));
    }
    shards.push_back(std::move(out));
    shard::FileHeader h{};
    std::memcpy(h.magic, shard::kFileMagic, sizeof h.magic);
    h.format_version = kShardFormatVersion;
    h.codec = options.codec == Codec::kRaw ? 0 : 1;
    h.shard_index = s;
    h.shard_count = options.shards;
    h.block_rows = options.block_rows;
    h.checksum = shard::checksum(&h, offsetof(shard::FileHeader, checksum));
    shards.back().put(&h, sizeof h);
    shards.back().header = h;
    shards.back().offset = sizeof h;
  }

  void close_files() {
    for (auto& s : shards)
      if (s.fd >= 0) {
        ::close(s.fd);
        s.fd = -1;
      }
  }

  // Records the first failure and unblocks both sides: the pipeline's input stage and an
  // append() waiting for a free slot.
  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::move(e);
    }
    failed = true;
    filled.close();
    free_slots.close();
  }

  [[noreturn]] void rethrow_failure() {
    std::lock_guard lock(error_mutex);
    if (error) std::rethrow_exception(error);
    throw IoError("shard writer for " + dir + " was stopped");
  }

  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      fail(std::current_exception());
    }
  }

  void run_pipeline(int tokens) {
    guarded([&] {
      tbb::task_arena arena(threads);
      arena.execute([&] {
        tbb::parallel_pipeline(
            static_cast<std::size_t>(tokens),
            tbb::make_filter<void, Slot*>(tbb::filter_mode::serial_in_order,
                                          [&](tbb::flow_control& fc) -> Slot* {
                                            Slot* s = failed ? nullptr : filled.pop();
                                            if (!s || failed) fc.stop();
                                            return s;
                                          }) &
                tbb::make_filter<Slot*, Slot*>(tbb::filter_mode::parallel,
                                               [&](Slot* s) -> Slot* {
                                                 if (!s || failed) return nullptr;
                                                 bool ok = false;
                                                 guarded([&] {
                                                   encoders.local().encode(s->rows.view(),
                                                                           s->block_index,
                                                                           s->first_row, s->bytes);
                                                   raise_maxabs(*s);
                                                   ok = true;
                                                 });
                                                 return ok ? s : nullptr;
                                               }) &
                tbb::make_filter<Slot*, void>(tbb::filter_mode::serial_in_order, [&](Slot* s) {
                  if (!s || failed) return;
                  guarded([&] {
                    write_block(*s);
                    free_slots.push(s);
                  });
                }));
      });
    });
  }

  // Serial, in block order.
  void write_block(const Slot& s) {
    ShardOut& out = shards[s.block_index % shards.size()];
    out.put(s.bytes.data(), s.bytes.size());
    std::uint64_t block_checksum = 0;
    std::memcpy(&block_checksum, s.bytes.data() + s.bytes.size() - sizeof block_checksum,
                sizeof block_checksum);
    out.block_checksums.push_back(block_checksum);
    const CsrView v = s.rows.view();
    out.index.push_back({out.offset, s.bytes.size(), static_cast<std::uint32_t>(v.rows),
                         static_cast<std::uint32_t>(v.nnz())});
    out.offset += s.bytes.size();
    out.rows += v.rows;
    accumulate(v, s.first_row, s.max_index, s.saw_index_zero);
    shard::BlockHeader h;
    std::memcpy(&h, s.bytes.data(), sizeof h);
    has_values |= (h.flags & shard::kBlockHasValues) != 0;
  }

  // Worker side, in parallel: a random look-up in an 80 MB table per non-zero (KDD size), each
  // entry prefetched 16 non-zeros ahead so that the misses overlap instead of queueing. (In the
  // serial write stage this was 20-40 % of convert's CPU and held the whole pipeline back.)
  void raise_maxabs(Slot& s) {
    const CsrView v = s.rows.view();
    constexpr std::size_t kAhead = 16;
    const std::size_t end = v.offsets[v.rows];
    std::uint32_t top = 0;
    bool zero = false;
    for (std::size_t k = v.offsets[0]; k < end; ++k) {
      if (k + kAhead < end) maxabs.prefetch(v.indices[k + kAhead]);
      const std::uint32_t index = v.indices[k];
      top = std::max(top, index);
      zero |= index == 0;
      maxabs.raise(index, v.value(k));
    }
    s.max_index = top;
    s.saw_index_zero = zero;
  }

  // Serial, in block order: the totals that need no random access.
  void accumulate(const CsrView& v, std::uint64_t first_row, std::uint32_t s_max_index,
                  bool s_saw_index_zero) {
    rows += v.rows;
    nnz += v.nnz();
    double last_label = std::nan("");
    std::uint64_t* last_count = nullptr;
    for (std::size_t r = 0; r < v.rows; ++r) {
      const float label = v.labels[r];
      if (std::isnan(label))
        throw DataError(dir, 0, 0, "row " + std::to_string(first_row + r + 1) + ": label is NaN");
      if (label != last_label) {
        last_label = label;
        last_count = &label_counts[label];
      }
      ++*last_count;
    }
    max_index = std::max(max_index, s_max_index);
    saw_index_zero |= s_saw_index_zero;
    any_index |= v.nnz() > 0;
  }

  void take_row(const CsrView& in, std::size_t r) {
    const std::size_t row_nnz = in.row_nnz(r);
    if (row_nnz > shard::kMaxBlockNnz)
      throw DataError(dir, 0, 0,
                      "row " + std::to_string(rows_appended + 1) + " has " +
                          std::to_string(row_nnz) + " non-zeros; at most " +
                          std::to_string(shard::kMaxBlockNnz) + " are supported");
    if (current && current->rows.nnz() + row_nnz > shard::kMaxBlockNnz) submit();
    if (!current) {
      current = free_slots.pop();
      if (!current || failed) {
        current = nullptr;
        rethrow_failure();
      }
      current->rows.clear();
      current->first_row = rows_appended;
    }
    current->rows.append_row(in, r);
    ++rows_appended;
    if (current->rows.rows() == options.block_rows) submit();
  }

  void submit() {
    current->block_index = blocks_submitted++;
    filled.push(current);
    current = nullptr;
  }

  // Ends the pipeline (draining it unless it failed) and joins its thread.
  void stop_pipeline() {
    filled.close();
    if (pipeline.joinable()) pipeline.join();
  }

  void write_indexes() {
    for (auto& s : shards) {
      const std::uint64_t index_offset = s.offset;
      const std::size_t index_bytes = s.index.size() * sizeof(shard::IndexEntry);
      shard::IndexTrailer t{};
      t.index_offset = index_offset;
      t.block_count = s.index.size();
      std::memcpy(t.magic, shard::kTrailerMagic, sizeof t.magic);
      std::vector<std::uint8_t> bytes(index_bytes + sizeof t);
      if (index_bytes > 0) std::memcpy(bytes.data(), s.index.data(), index_bytes);
      std::memcpy(bytes.data() + index_bytes, &t, sizeof t);
      t.checksum = shard::checksum(bytes.data(), bytes.size() - sizeof t.checksum);
      std::memcpy(bytes.data() + bytes.size() - sizeof t.checksum, &t.checksum, sizeof t.checksum);
      s.put(bytes.data(), bytes.size());
      s.offset += bytes.size();
      content_checksums.push_back(write_content_checksum(s));
      index_checksums.push_back(t.checksum);
      s.index.shrink_to_fit();
      if (s.in_memory) continue;
      if (options.durable && ::fsync(s.fd) != 0)
        throw IoError("cannot write " + s.path + ": " + std::strerror(errno));
      if (::close(s.fd) != 0) {
        s.fd = -1;
        throw IoError("cannot write " + s.path + ": " + std::strerror(errno));
      }
      s.fd = -1;
    }
  }
  std::vector<std::uint64_t> index_checksums;
  std::vector<std::uint64_t> content_checksums;

  // The file header again, now with the content checksum; returns it.
  static std::uint64_t write_content_checksum(ShardOut& s) {
    shard::FileHeader h = s.header;
    h.content_checksum =
        shard::checksum(s.block_checksums.data(), s.block_checksums.size() * sizeof(std::uint64_t));
    h.checksum = shard::checksum(&h, offsetof(shard::FileHeader, checksum));
    s.put_header(h);
    s.block_checksums = {};
    return h.content_checksum;
  }

  // Puts the finished temporary directory where `dir` was; an old directory is removed only after
  // the new one is in place. A signal meanwhile waits until both are done.
  void move_into_place() {
    temporary.publish([this] { replace_dir(); });
  }
  void replace_dir() {
    std::error_code ec;
    // Moved aside under a temporary's name (the pid, then 1), which a later run sweeps.
    const std::string old = temp_dir + "-1";
    const bool replacing = fs::exists(dir);
    // The new directory keeps the old one's access, as a replaced file does; of the special bits,
    // setgid and sticky, which say how entries are made in it, are kept too.
    struct stat old_dir {};
    if (replacing && ::stat(dir.c_str(), &old_dir) == 0) {
      const int fd = ::open(temp_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd >= 0) {
        keep_access(fd, old_dir, 03777);
        ::close(fd);
      }
    }
    // An old directory is exchanged with the new one in one step where the file system can
    // (renameat2): `dir` is never missing, and the old data then lies under the temporary's name,
    // which the next run sweeps if this one is killed before removing it.
    if (replacing &&
        ::renameat2(AT_FDCWD, temp_dir.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      if (options.durable)
        fsync_path(fs::path(dir).parent_path().empty() ? "."
                                                       : fs::path(dir).parent_path().string());
      remove_old(temp_dir);
      return;
    }
    if (replacing) {
      fs::remove_all(old, ec);
      fs::rename(dir, old, ec);
      if (ec) throw IoError("cannot move " + dir + " aside: " + ec.message());
    }
    fs::rename(temp_dir, dir, ec);
    if (ec) {
      const std::string reason = ec.message();
      if (replacing) fs::rename(old, dir, ec);
      throw IoError("cannot rename " + temp_dir + " to " + dir + ": " + reason);
    }
    if (options.durable)
      fsync_path(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path().string());
    if (replacing) remove_old(old);
  }
  // Removes the replaced directory `old`. It held shard files alone when the conversion began
  // (check_replaceable), but a file written into it since (`predict -o DIR/notes.txt` while DIR
  // was converted) is the user's: it moves into the new directory, at the path it was written to.
  void remove_old(const std::string& old) {
    std::error_code ec;
    for (fs::directory_iterator it(old, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      if (shard_directory_file(*it)) continue;
      const fs::path kept = fs::path(dir) / it->path().filename();
      std::error_code exists;
      if (!fs::exists(fs::symlink_status(kept, exists))) {
        std::error_code moved;
        fs::rename(it->path(), kept, moved);
      }
    }
    fs::remove_all(old, ec);
  }

  // What finish() and finish_in_memory() share: the last block written, the pipeline ended, the
  // block indexes written, and the manifest of the blocks (no sources).
  Manifest finish_blocks(int index_base) {
    if (finished) throw std::logic_error("ShardWriter finished twice");
    if (index_base != 0 && index_base != 1)
      throw UsageError("index base must be 0 or 1, got " + std::to_string(index_base));
    if (current && !failed) submit();
    stop_pipeline();
    if (failed) rethrow_failure();
    if (index_base == 1 && saw_index_zero)
      throw DataError(dir, 0, 0, "feature index 0 present but the index base is 1");
    write_indexes();
    if (declared_max_index) {
      max_index = std::max(max_index, *declared_max_index);
      any_index = true;
    }
    Manifest m;
    m.format_version = kShardFormatVersion;
    m.codec = options.codec;
    m.zstd_level = options.codec == Codec::kZstd ? options.zstd_level : 0;
    m.block_rows = options.block_rows;
    m.rows = rows;
    m.nnz = nnz;
    m.max_index = max_index;
    m.index_base = index_base;
    m.features = any_index ? std::uint64_t{max_index} + 1 - index_base : 0;
    m.label_counts = label_counts;
    m.has_values = has_values;
    for (std::size_t s = 0; s < shards.size(); ++s)
      m.shards.push_back({shard::shard_file_name(static_cast<std::uint32_t>(s)), shards[s].offset,
                          shards[s].rows, shards[s].index.size(), index_checksums[s],
                          content_checksums[s]});
    m.total_blocks = blocks_submitted;
    m.created_utc = utc_now();
    m.text_bytes = text_bytes;
    return m;
  }

  ~Impl() {
    if (pipeline.joinable()) {
      failed = true;
      free_slots.close();
      stop_pipeline();
    }
    close_files();
    if (!finished && !in_memory) {
      std::error_code ec;
      fs::remove_all(temp_dir, ec);
    }
  }
};

ShardWriter::ShardWriter(const std::string& dir, const ConvertOptions& options, int threads)
    : impl_(std::make_unique<Impl>(dir, options, threads, false)) {}

ShardWriter::ShardWriter(const ConvertOptions& options, int threads, const std::string& name)
    : impl_(std::make_unique<Impl>(name, options, threads, true)) {}

ShardWriter::~ShardWriter() = default;

void ShardWriter::append(const CsrView& rows) {
  if (impl_->finished) throw std::logic_error("ShardWriter::append after finish");
  if (impl_->failed) impl_->rethrow_failure();
  for (std::size_t r = 0; r < rows.rows; ++r) impl_->take_row(rows, r);
}

void ShardWriter::set_text_bytes(std::uint64_t bytes) { impl_->text_bytes = bytes; }

void ShardWriter::declare_max_index(std::uint32_t max_index) {
  impl_->declared_max_index = max_index;
}

Manifest ShardWriter::finish(int index_base, const std::vector<SourceInfo>& sources,
                             std::uint64_t bad_lines_skipped, std::vector<std::string> bad_lines) {
  Impl& w = *impl_;
  if (w.in_memory) throw std::logic_error("ShardWriter::finish of a writer in memory");
  Manifest m = w.finish_blocks(index_base);
  m.sources = sources;
  m.bad_lines_skipped = bad_lines_skipped;
  m.bad_lines = std::move(bad_lines);
  shard::write_maxabs(w.temp_dir + "/" + shard::kMaxabsFile,
                      w.maxabs.pieces(w.any_index ? std::size_t{w.max_index} + 1 : 0),
                      w.options.durable);
  m.convert_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - w.start).count();
  // The manifest goes last: a directory with a manifest is complete by construction.
  write_file_atomically(w.temp_dir + "/" + shard::kManifestFile, shard::manifest_json(m),
                        w.options.durable);
  if (w.options.durable) fsync_path(w.temp_dir);
  w.move_into_place();
  w.finished = true;
  return m;
}

ShardSet ShardWriter::finish_in_memory(int index_base) {
  Impl& w = *impl_;
  if (!w.in_memory) throw std::logic_error("ShardWriter::finish_in_memory of a directory's writer");
  Manifest m = w.finish_blocks(index_base);
  std::vector<float> maxabs;
  for (const std::span<const float> piece :
       w.maxabs.pieces(w.any_index ? std::size_t{w.max_index} + 1 : 0))
    maxabs.insert(maxabs.end(), piece.begin(), piece.end());
  m.convert_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - w.start).count();
  std::vector<std::vector<std::uint8_t>> files;
  for (ShardOut& s : w.shards) files.push_back(std::move(s.bytes));
  w.finished = true;
  return ShardSet::in_memory(std::move(m), std::move(files), std::move(maxabs), w.dir);
}

}  // namespace polymargin::io
