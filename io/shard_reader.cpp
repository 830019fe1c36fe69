// ShardSet: opens, validates, scans and verifies a shard directory.
//
// Scan: a oneTBB parallel_pipeline inside a task_arena of `threads`:
//   serial_in_order  take the next window of `window_blocks` blocks of the block order (seeded
//                    permutation of all blocks, a function of (seed, epoch); file order without
//                    shuffle) and a recycled Window buffer
//   parallel         read every block into the window's buffers, check its checksum, decode, and
//                    with shuffle gather the window's rows in a seeded order (a function of
//                    (seed, epoch, window number)); scale
//   serial_in_order  hand the window to the sink, recycle the buffer
// A fixed pool of Window buffers (one per pipeline token) bounds memory; the order of rows is a
// function of (data, seed, epoch, window_blocks) only, never of the thread count or timing.
// Lockstep scan (ReadOptions::lockstep, for sinks that keep every thread busy): one window at a
// time, read by all threads; the next window's reading is lent to the sink as spare work
// (scan_lending) and what it leaves is done once the sink returns. The same windows.
#include <fcntl.h>
#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>

#include "engine/errors.h"
#include "engine/normalize.h"
#include "engine/random.h"
#include "engine/sparse.h"
#include "io/memory.h"
#include "io/read_ahead.h"
#include "io/shard_format.h"
#include "io/shard_manifest.h"
#include "io/shards.h"

namespace polymargin::io {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The seed stream of the block order; window streams use the window number instead.
constexpr std::uint64_t kBlockOrderStream = ~std::uint64_t{0};

int resolve(int threads) { return threads > 0 ? threads : tbb::info::default_concurrency(); }

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Sizes a recycled buffer for `rows` rows and `nnz` non-zeros. resize() only zero-fills growth,
// and a recycled buffer has usually grown already, so this costs nothing in the steady state.
void size_buffer(CsrBuffer& b, std::size_t rows, std::size_t nnz, bool values) {
  b.labels.resize(rows);
  b.offsets.resize(rows + 1);
  b.indices.resize(nnz);
  b.has_values = values;
  if (values) b.values.resize(nnz);
}

// Row `row` of part `part` of a window's rows (raw blocks as read, or one decoded buffer).
struct RowRef {
  std::uint32_t part;
  std::uint32_t row;
};

// The first cache lines of a row's indices and values (most rows fit in three).
void prefetch_row(const CsrView& v, std::uint32_t r) {
  const std::uint32_t b = v.offsets[r];
  for (int line = 0; line < 3; ++line) {
    __builtin_prefetch(reinterpret_cast<const char*>(v.indices + b) + 64 * line);
    if (v.values) __builtin_prefetch(reinterpret_cast<const char*>(v.values + b) + 64 * line);
  }
}

// ReadOptions::renumber on entries [begin, end) of `out`. The table is as large as the id space
// (81 MB at KDD size) and read at random: its entries are prefetched a few ids ahead.
void renumber_ids(CsrBuffer& out, std::size_t begin, std::size_t end,
                  std::span<const std::uint32_t> table) {
  constexpr std::size_t kAhead = 16;
  std::uint32_t* const idx = out.indices.data();
  const std::uint32_t* const to = table.data();
  const std::size_t size = table.size();
  for (std::size_t k = begin; k < end; ++k) {
    if (k + kAhead < end && idx[k + kAhead] < size) __builtin_prefetch(to + idx[k + kAhead]);
    if (idx[k] < size) idx[k] = to[idx[k]];
  }
}

// Rows are short (tens of entries). GCC compiles this loop to a memmove call anyway; keeping it
// inline with no-tree-loop-distribute-patterns measured the same (1M-row scans, 3 runs each).
template <class T>
void copy_short(const T* __restrict src, std::uint32_t n, T* __restrict dst) {
  for (std::uint32_t k = 0; k < n; ++k) dst[k] = src[k];
}

// Labels and offsets of the rows `order[0..n)` in `out` (sized beforehand): where gather_entries
// puts each row.
void gather_offsets(const std::vector<CsrView>& parts, const RowRef* order, std::size_t n,
                    CsrBuffer& out) {
  std::uint32_t* const offsets = out.offsets.data();
  std::uint32_t pos = 0;
  offsets[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const CsrView& v = parts[order[i].part];
    const std::uint32_t r = order[i].row;
    out.labels[i] = v.labels[r];
    pos += v.offsets[r + 1] - v.offsets[r];
    offsets[i + 1] = pos;
  }
}

// Copies the entries of rows `order[begin..end)` to their places in `out` (gather_offsets first).
// A shuffled window is several MB read in random order, so each row would wait on cache misses;
// prefetching the rows a few steps ahead roughly halves the time of this loop.
void gather_entries(const std::vector<CsrView>& parts, const RowRef* order, std::size_t begin,
                    std::size_t end, CsrBuffer& out) {
  constexpr std::size_t kAhead = 8;
  const std::uint32_t* const offsets = out.offsets.data();
  std::uint32_t* const indices = out.indices.data();
  float* const values = out.has_values ? out.values.data() : nullptr;
  for (std::size_t i = begin; i < end; ++i) {
    if (i + 2 * kAhead < end) {
      const RowRef far = order[i + 2 * kAhead];
      __builtin_prefetch(parts[far.part].offsets + far.row);
    }
    if (i + kAhead < end) prefetch_row(parts[order[i + kAhead].part], order[i + kAhead].row);
    const CsrView& v = parts[order[i].part];
    const std::uint32_t r = order[i].row;
    const std::uint32_t b = v.offsets[r], len = v.offsets[r + 1] - b, pos = offsets[i];
    copy_short(v.indices + b, len, indices + pos);
    if (values) {
      if (v.values)
        copy_short(v.values + b, len, values + pos);
      else
        std::fill_n(values + pos, len, 1.0f);
    }
  }
}

// The rows of a window's parts in reading order, then shuffled in place: the order is a function
// of (seed, epoch, window number) and of the window's row count only (rows_of(p): part p's rows).
template <class RowsOf>
void shuffled_rows(std::size_t parts, RowsOf rows_of, const ReadOptions& o, std::uint64_t window,
                   std::vector<RowRef>& order) {
  order.clear();
  for (std::uint32_t p = 0; p < parts; ++p)
    for (std::uint32_t r = 0, n = rows_of(p); r < n; ++r) order.push_back({p, r});
  SplitMix64 rng(derive_seed(o.seed, o.epoch, window));
  seeded_shuffle(order.data(), order.size(), rng);
}

// Copies the rows `order[0..n)` into `out`, sized beforehand.
void gather(const std::vector<CsrView>& parts, const RowRef* order, std::size_t n, CsrBuffer& out) {
  gather_offsets(parts, order, n, out);
  gather_entries(parts, order, 0, n, out);
}

// What --scale maxabs does to a row: each value divided by its feature's max |value|, which puts it
// in [-1, 1] (exactly: |v| <= m implies |v / m| <= 1 in floating point, which multiplying by 1/m
// would not guarantee). Looking the maximum up for every non-zero, a random read of an 80 MB table
// at KDD size, doubled the CPU of an epoch scan, and most of it is useless: a value 0 stays 0, and
// when no maximum exceeds 1 (data already in [-1, 1], binary features) a value 1 has maximum 1.
// So in that common case only the other values are divided. Otherwise a bit per feature (2.5 MB
// at KDD size, mostly cache resident) says which features have a maximum other than 0 and 1.
struct Scaling {
  std::span<const float> maxabs;
  std::vector<std::uint64_t> divide;  // bit f: maxabs[f] is neither 0 nor 1
  bool any = false;                   // some feature needs dividing
  bool at_most_one = true;            // no maximum exceeds 1
  bool renumbered = false;            // maxabs is in the new ids' order (ReadOptions::renumber)

  Scaling(std::span<const float> m, bool in_new_order) : maxabs(m), renumbered(in_new_order) {
    for (const float x : m) {
      at_most_one = at_most_one && x <= 1;
      any = any || (x > 0 && x != 1);
    }
    if (at_most_one) return;  // the bits are not needed
    divide.assign((m.size() + 63) / 64, 0);
    for (std::size_t f = 0; f < m.size(); ++f)
      if (m[f] > 0 && m[f] != 1) divide[f / 64] |= std::uint64_t{1} << (f % 64);
  }

  /// The table the block decoder divides by as it places values (BlockDestination::divide_by),
  /// when that is the whole of the scaling; nullptr when apply() has to run (also after the ids
  /// are renumbered: the decoder places the ids of the data).
  const float* decoder_table() const {
    return at_most_one && !renumbered ? maxabs.data() : nullptr;
  }

  /// Scales the values of entries [begin, end) of `out`; `todo` is scratch. The entries to divide
  /// are listed first, without a branch, then divided with their maxima prefetched a few entries
  /// ahead: the misses on the table overlap instead of each stalling the loop.
  void apply(CsrBuffer& out, std::size_t begin, std::size_t end,
             std::vector<std::uint32_t>& todo) const {
    // In slices of kSlice entries, so the list stays small (cache resident, no window-sized
    // scratch on top of a trainer's weights).
    constexpr std::size_t kSlice = 8192, kAhead = 16;
    const float* m = maxabs.data();
    todo.resize(kSlice);
    std::uint32_t* list = todo.data();
    for (; begin < end; begin += kSlice) {
      const std::size_t count = std::min(kSlice, end - begin);
      const std::uint32_t* idx = out.indices.data() + begin;
      float* v = out.values.data() + begin;
      std::size_t n = 0;
      if (at_most_one) {
        for (std::size_t k = 0; k < count; ++k) {  // v ≠ 0 implies m ≥ |v| > 0
          list[n] = static_cast<std::uint32_t>(k);
          n += v[k] != 1.0f && v[k] != 0.0f;
        }
      } else {
        const std::uint64_t* bits = divide.data();
        for (std::size_t k = 0; k < count; ++k) {
          list[n] = static_cast<std::uint32_t>(k);
          n += (bits[idx[k] / 64] >> (idx[k] % 64)) & 1;
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (i + kAhead < n) __builtin_prefetch(m + idx[list[i + kAhead]]);
        v[list[i]] /= m[idx[list[i]]];
      }
    }
  }
};

// Which blocks a window holds.
struct WindowPlace {
  std::uint64_t number = 0;
  std::uint64_t stream = 0;               // seed stream of its row order
  const std::uint32_t* blocks = nullptr;  // global block numbers, in reading order
  std::size_t block_count = 0;

  // Window n of an epoch's block order, `window_blocks` blocks a window (the last may be short),
  // or this reader's part of it (ReadOptions::parts): a contiguous slice of its blocks, possibly
  // none. A window of fewer blocks than parts leaves some parts without any: which ones turns
  // with the window, so that every part reads its share of the windows. A part's rows are
  // shuffled by a stream of their own, (window, part).
  void place(const std::vector<std::uint32_t>& order, const ReadOptions& o, std::uint64_t n) {
    number = n;
    const std::uint64_t first = n * o.window_blocks;
    const std::uint64_t count = std::min<std::uint64_t>(o.window_blocks, order.size() - first);
    const std::uint64_t slice = count < o.parts ? (o.part + n) % o.parts : o.part;
    const std::uint64_t begin = count * slice / o.parts, end = count * (slice + 1) / o.parts;
    blocks = order.data() + first + begin;
    block_count = end - begin;
    stream = o.parts == 1 ? n : n * o.parts + o.part;
  }
};

// Rows are addressed by 32-bit offsets within a window.
void check_window_nnz(std::size_t block_count, std::uint64_t nnz) {
  if (nnz > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("a window of " + std::to_string(block_count) +
                     " blocks holds more than 2^32 non-zeros: use a smaller window");
}

// A block's bytes as read from its shard file, in 8-byte words (blocks are padded to 8 bytes, and
// a raw block's arrays are read in place). Grown as needed and never shrunk: a window's buffers
// are reused by the next.
using BlockBytes = std::vector<std::uint64_t>;
const std::uint8_t* bytes_of(const BlockBytes& b) {
  return reinterpret_cast<const std::uint8_t*>(b.data());
}

// One pipeline token: a window of blocks and the buffer its rows are delivered in.
struct Window : WindowPlace {
  std::vector<BlockBytes> bytes;  // per block, as read
  CsrBuffer out;
  std::vector<CsrView> views;  // what the sink gets: views into `out`, or into `bytes`
};

// Per-thread decoding state of the parallel stage.
struct Scratch {
  shard::BlockDecoder decoder;
  CsrBuffer concat;  // a window's zstd blocks decoded back to back, before shuffle
  std::vector<CsrView> parts;
  std::vector<RowRef> order;
  std::vector<std::uint32_t> scale_todo;  // entries Scaling::apply divides
};

}  // namespace

struct ShardSet::Impl {
  struct Block {
    std::uint32_t shard;
    std::uint64_t local;  // position in its shard's index
    shard::IndexEntry entry;
  };

  std::string dir;         // in memory: the rows' name
  bool in_memory = false;  // the shard files' bytes held in `files`, the scaling table in maxabs
  Manifest manifest;
  std::vector<std::string> missing_sources;
  std::vector<std::string> paths;  // per shard
  std::vector<shard::MappedFile> files;
  std::vector<Block> blocks;  // global block order
  // feature_maxabs.bin, opened (not mapped) with the set (a directory replaced since cannot lend
  // another conversion's table; not opened: the file was missing, an error once it is needed).
  shard::MappedFile maxabs_file;
  bool maxabs_mapped = false;
  mutable std::once_flag maxabs_once, scaling_once;
  mutable std::vector<float> maxabs;
  mutable std::unique_ptr<Scaling> scaling;
  // Each block's checksum as this set first read it (0: not read yet), and how many were read.
  mutable std::unique_ptr<std::atomic<std::uint64_t>[]> first_read;
  mutable std::atomic<std::uint64_t> blocks_read{0};

  // check_block, and block b holds the bytes it held when this set first read it. A shard file
  // rewritten in place during a run (with whole blocks of other data, each with a checksum of its
  // own) is then an error, never a model of two data sets: a block read again with other bytes,
  // or, once every block was read, checksums that are not the manifest's content checksum (blocks
  // rewritten before their first read).
  shard::BlockHeader check(std::uint64_t b, const std::uint8_t* data) const {
    const shard::BlockHeader h = shard::check_block(data, blocks[b].entry, manifest.codec, name(b));
    std::uint64_t sum;
    std::memcpy(&sum, data + blocks[b].entry.bytes - sizeof sum, sizeof sum);
    const std::uint64_t mark = sum == 0 ? 1 : sum;  // 0 means "not read yet"
    std::uint64_t first = 0;
    if (first_read[b].compare_exchange_strong(first, mark, std::memory_order_relaxed)) {
      if (blocks_read.fetch_add(1, std::memory_order_acq_rel) + 1 == blocks.size()) check_content();
    } else if (first != mark) {
      throw DataError(paths[blocks[b].shard], 0, 0,
                      "block " + std::to_string(blocks[b].local) +
                          " changed while this run read the data (the shard file was rewritten "
                          "in place): nothing was written; re-run convert, then the command");
    }
    return h;
  }
  void check_content() const {
    const std::optional<std::size_t> s = shard_off_content([&](std::uint64_t b) {
      const std::uint64_t mark = first_read[b].load(std::memory_order_relaxed);
      return mark == 1 ? 0 : mark;
    });
    if (s)
      throw DataError(paths[*s], 0, 0,
                      "its blocks are not those of the manifest's content checksum: the shard "
                      "file was rewritten in place while this run read it; nothing was written; "
                      "re-run convert, then the command");
  }
  // The first shard whose blocks' checksums (`checksum_of(b)`, by global block) do not give the
  // content checksum its manifest entry was written with; blocks go round robin, so walking the
  // global order gathers each shard's checksums in its own order.
  std::optional<std::size_t> shard_off_content(
      const std::function<std::uint64_t(std::uint64_t)>& checksum_of) const {
    std::vector<std::vector<std::uint64_t>> per_shard(manifest.shards.size());
    for (std::uint64_t b = 0; b < blocks.size(); ++b)
      per_shard[blocks[b].shard].push_back(checksum_of(b));
    for (std::size_t s = 0; s < per_shard.size(); ++s) {
      const std::uint64_t expected = manifest.shards[s].content_checksum;
      if (expected != 0 &&
          shard::checksum(per_shard[s].data(), per_shard[s].size() * 8) != expected)
        return s;
    }
    return std::nullopt;
  }

  shard::BlockName name(std::uint64_t b) const {
    return {paths[blocks[b].shard], blocks[b].local, b};
  }
  // Block b's bytes, copied from the page cache into `into` (pread). A scan does not read blocks
  // through the shards' memory maps: a mapped page costs a fault at its first touch in every pass
  // (pages unmapped after their window, to keep the resident set to the data in flight, are
  // mapped again the next pass), and in a virtual machine whose page tables the hypervisor
  // shadows such a fault costs more than copying the page. Checking a cached 2.49 GB raw shard
  // block by block on one thread took 1.6 s mapped, populated and unmapped, 0.4 s copied into a
  // reused buffer (the shared 2-core VM). The buffers are the window's own, so the resident set
  // stays the data in flight.
  const std::uint8_t* load(std::uint64_t b, BlockBytes& into) const {
    const Block& k = blocks[b];
    const std::size_t words = k.entry.bytes / sizeof(std::uint64_t);
    if (into.size() < words) into.resize(words);
    files[k.shard].read(k.entry.offset, k.entry.bytes, into.data(), paths[k.shard]);
    return bytes_of(into);
  }
  // load() in a scan: with the I/O stage on, a block the stage has not reached yet (the first
  // windows of a scan) is first asked for as one read of exactly the block, as the stage asks.
  const std::uint8_t* fetch(std::uint64_t b, const ReadOptions& o, BlockBytes& into) const {
    if (o.read_ahead_bytes > 0)
      files[blocks[b].shard].will_need(blocks[b].entry.offset, blocks[b].entry.bytes);
    return load(b, into);
  }

  // The I/O stage of a scan of windows [first, end) of `order`. Data that takes more than half the
  // memory the process may use would not be found cached by the next pass anyway: the pages of
  // consumed windows are then dropped, and what is read ahead is at most a quarter of that memory
  // (read-ahead beyond what the page cache can hold is evicted before it is used, and read again).
  std::unique_ptr<ReadAhead> read_ahead(const ReadOptions& o,
                                        const std::vector<std::uint32_t>& order,
                                        std::uint64_t end) const {
    // Nothing to ask of a disk (and no thread to start) for shards in memory.
    if (in_memory)
      return std::make_unique<ReadAhead>(WindowExtents(), o.first_window, end, 0, false);
    std::uint64_t data_bytes = 0;
    for (const ShardInfo& s : manifest.shards) data_bytes += s.bytes;
    const std::uint64_t memory = available_memory();
    const bool drop = memory > 0 && data_bytes > memory / 2;
    const std::uint64_t budget =
        drop ? std::min(o.read_ahead_bytes, memory / 4) : o.read_ahead_bytes;
    // Only this reader's part of each window (ReadOptions::parts): the other parts' blocks are
    // other readers' to read.
    const WindowExtents extents = [this, &order, &o](std::uint64_t n,
                                                     std::vector<BlockExtent>& out) {
      WindowPlace place;
      place.place(order, o, n);
      for (std::size_t i = 0; i < place.block_count; ++i) {
        const Block& b = blocks[place.blocks[i]];
        out.push_back({&files[b.shard], b.entry.offset, b.entry.bytes});
      }
    };
    return std::make_unique<ReadAhead>(extents, o.first_window, end, budget, drop);
  }

  const std::vector<float>& feature_maxabs() const {
    std::call_once(maxabs_once, [&] {
      maxabs = shard::read_maxabs(mapped_maxabs(), maxabs_path(),
                                  manifest.nnz > 0 ? std::uint64_t{manifest.max_index} + 1 : 0);
      // --scale maxabs looks up a random entry per value that is not 1 (an 80 MB table at KDD
      // size): on 4 KB pages nearly every look-up would also miss the TLB.
      engine::sparse::collapse_to_huge_pages(maxabs.data(), maxabs.size() * sizeof(float));
    });
    return maxabs;
  }

  std::string maxabs_path() const { return dir + "/" + shard::kMaxabsFile; }
  // The mapped scaling table; DataError when the file was missing at open.
  const shard::MappedFile& mapped_maxabs() const {
    if (!maxabs_mapped)
      throw DataError(maxabs_path(), 0, 0,
                      "missing: the shard directory is incomplete (re-run convert)");
    return maxabs_file;
  }

  /// The scaling of `--scale maxabs`; nullptr when no feature needs it (all maxima 0 or 1).
  const Scaling* maxabs_scaling() const {
    std::call_once(scaling_once,
                   [&] { scaling = std::make_unique<Scaling>(feature_maxabs(), false); });
    return scaling->any ? scaling.get() : nullptr;
  }

  void check_sources(bool refuse_stale) {
    for (const auto& source : manifest.sources) {
      if (source.path == "-") continue;  // stdin cannot be re-examined
      SourceInfo now;
      if (!shard::stat_source(source.path, now)) {
        missing_sources.push_back(source.path);
        continue;
      }
      if (refuse_stale && (now.size != source.size || now.mtime_ns != source.mtime_ns))
        throw DataError(
            dir, 0, 0,
            "stale shards: " + source.path + " changed since conversion (re-run convert)");
    }
  }

  // Opens shard s and checks its header and block index against the manifest (the block count
  // included, which the file's size bounds); returns the index's trailer.
  shard::IndexTrailer open_shard(std::uint32_t s) {
    const std::string path = dir + "/" + manifest.shards[s].file;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw DataError(path, 0, 0, "shard file missing (re-run convert)");
    return check_shard(s, shard::MappedFile(path), path);
  }

  // Checks shard s, whose file `path` is `file` (mapped, or its bytes in memory), against the
  // manifest and enters it in `files`; returns the index's trailer.
  shard::IndexTrailer check_shard(std::uint32_t s, shard::MappedFile file,
                                  const std::string& path) {
    const ShardInfo& info = manifest.shards[s];
    const auto fail = [&](const std::string& message) -> void {
      throw DataError(path, 0, 0, message + " (re-run convert)");
    };
    if (file.size() != info.bytes)
      fail("size " + std::to_string(file.size()) + " bytes, the manifest says " +
           std::to_string(info.bytes) + ": truncated or modified");
    if (file.size() < sizeof(shard::FileHeader) + sizeof(shard::IndexTrailer))
      fail("too short to be a shard file");
    shard::FileHeader h;
    std::memcpy(&h, file.data(), sizeof h);
    if (std::memcmp(h.magic, shard::kFileMagic, sizeof h.magic) != 0) fail("not a shard file");
    if (h.checksum != shard::checksum(&h, offsetof(shard::FileHeader, checksum)))
      fail("file header checksum mismatch");
    if (h.format_version != kShardFormatVersion)
      fail("shard format version " + std::to_string(h.format_version) + ", this build reads " +
           std::to_string(kShardFormatVersion));
    if (h.codec != (manifest.codec == Codec::kRaw ? 0u : 1u) || h.shard_index != s ||
        h.shard_count != manifest.shards.size())
      fail("file header does not match the manifest");
    if (h.content_checksum != info.content_checksum)
      fail("content checksum does not match the manifest's: a shard file of another conversion");

    shard::IndexTrailer t;
    const std::size_t trailer_at = file.size() - sizeof t;
    std::memcpy(&t, file.data() + trailer_at, sizeof t);
    if (std::memcmp(t.magic, shard::kTrailerMagic, sizeof t.magic) != 0)
      fail("no block index at the end: truncated");
    if (t.block_count > (trailer_at - sizeof h) / sizeof(shard::IndexEntry) ||
        t.index_offset != trailer_at - t.block_count * sizeof(shard::IndexEntry))
      fail("block index out of place");
    const std::uint64_t sum = shard::checksum(file.data() + t.index_offset,
                                              file.size() - t.index_offset - sizeof t.checksum);
    if (sum != t.checksum) fail("block index checksum mismatch: the index is corrupt");
    if (sum != info.index_checksum) fail("block index does not match the manifest's checksum");
    if (t.block_count != info.blocks) fail("block count does not match the manifest");
    paths.push_back(path);
    files.push_back(std::move(file));
    return t;
  }

  // Enters the blocks of shard s, opened by open_shard, in `blocks`.
  void index_shard(std::uint32_t s, const shard::IndexTrailer& t) {
    const ShardInfo& info = manifest.shards[s];
    const std::string& path = paths[s];
    const shard::MappedFile& file = files[s];
    const auto fail = [&](const std::string& message) -> void {
      throw DataError(path, 0, 0, message + " (re-run convert)");
    };
    // Blocks must tile the file between the header and the index, so every entry is in bounds.
    std::uint64_t expect = sizeof(shard::FileHeader), rows = 0;
    for (std::uint64_t i = 0; i < t.block_count; ++i) {
      shard::IndexEntry e;
      std::memcpy(&e, file.data() + t.index_offset + i * sizeof e, sizeof e);
      if (e.offset != expect || e.bytes < shard::block_bytes(0) || e.bytes % 8 != 0 ||
          e.bytes > t.index_offset - e.offset || e.rows == 0)
        fail("block index entry " + std::to_string(i) + " is inconsistent");
      // What a block may hold (convert's --block-rows, kMaxBlockNnz) bounds the buffers a window
      // is decoded into: a block may not say more.
      if (e.rows > manifest.block_rows || e.nnz > shard::kMaxBlockNnz)
        fail("block " + std::to_string(i) + " declares " + std::to_string(e.rows) + " rows and " +
             std::to_string(e.nnz) + " non-zeros, more than a block holds (" +
             std::to_string(manifest.block_rows) + " rows, " + std::to_string(shard::kMaxBlockNnz) +
             " non-zeros)");
      expect += e.bytes;
      rows += e.rows;
      const std::uint64_t global = i * manifest.shards.size() + s;
      if (global >= blocks.size()) fail("more blocks than the manifest lists");
      blocks[global] = {s, i, e};
    }
    if (expect != t.index_offset || rows != info.rows) fail("block index does not add up");
  }

  // The table of every block, from the shards' trailers (open_shard's, check_shard's).
  void index_blocks(const std::vector<shard::IndexTrailer>& trailers) {
    blocks.resize(manifest.total_blocks);
    for (std::uint32_t s = 0; s < manifest.shards.size(); ++s) index_shard(s, trailers[s]);
    first_read = std::make_unique<std::atomic<std::uint64_t>[]>(blocks.size());
  }

  // Shard s must hold exactly the blocks b with b % shards == s (a gap shows up as an empty
  // entry), and the blocks the manifest's non-zeros.
  void check_blocks() const {
    std::uint64_t nnz = 0;
    for (const auto& b : blocks) {
      if (b.entry.bytes == 0)
        throw DataError(dir, 0, 0, "the block indexes do not cover every block (re-run convert)");
      nnz += b.entry.nnz;
    }
    if (nnz != manifest.nnz)
      throw DataError(dir, 0, 0,
                      "non-zeros of the block indexes do not match the manifest (re-run convert)");
  }

  // Decodes blocks [0, count) of `w` back to back into `out` (sized beforehand).
  void decode_into(const Window& w, Scratch& s, CsrBuffer& out, const float* divide_by) const {
    std::uint32_t row = 0, nnz = 0;
    for (std::size_t i = 0; i < w.block_count; ++i) {
      const std::uint32_t b = w.blocks[i];
      s.decoder.decode(bytes_of(w.bytes[i]), manifest.codec, name(b),
                       {out.labels.data() + row, out.offsets.data() + row, out.indices.data() + nnz,
                        out.has_values ? out.values.data() + nnz : nullptr, nnz, divide_by});
      row += blocks[b].entry.rows;
      nnz += blocks[b].entry.nnz;
    }
  }

  void prepare(Window& w, Scratch& s, const ReadOptions& o, const Scaling* scale) const {
    const bool raw = manifest.codec == Codec::kRaw;
    std::uint64_t rows = 0, nnz = 0;
    bool any_values = false;
    if (w.bytes.size() < w.block_count) w.bytes.resize(w.block_count);
    for (std::size_t i = 0; i < w.block_count; ++i) {
      const std::uint32_t b = w.blocks[i];
      const std::uint8_t* data = fetch(b, o, w.bytes[i]);
      const shard::BlockHeader h = check(b, data);
      rows += h.rows;
      nnz += h.nnz;
      any_values |= (h.flags & shard::kBlockHasValues) != 0;
    }
    check_window_nnz(w.block_count, nnz);
    w.views.clear();
    // No further copy: the sink reads the blocks as read.
    if (raw && !o.shuffle && !scale && !o.normalize_l2 && o.renumber.empty()) {
      for (std::size_t i = 0; i < w.block_count; ++i)
        w.views.push_back(shard::raw_block_view(bytes_of(w.bytes[i]), name(w.blocks[i])));
      if (w.views.empty()) w.views.emplace_back();  // an empty part still marks its window
      return;
    }
    const bool values = any_values || scale != nullptr || o.normalize_l2;
    size_buffer(w.out, rows, nnz, values);
    // Scaled while decoding where the decoder can (it then visits only the values that are not 1),
    // else by a pass over the window's values at the end.
    const float* divide_by = scale ? scale->decoder_table() : nullptr;
    bool scaled = false;
    if (!o.shuffle) {
      decode_into(w, s, w.out, divide_by);
      scaled = divide_by != nullptr;
    } else {
      s.parts.clear();
      if (raw) {  // gather straight from the blocks as read
        for (std::size_t i = 0; i < w.block_count; ++i)
          s.parts.push_back(shard::raw_block_view(bytes_of(w.bytes[i]), name(w.blocks[i])));
      } else {
        size_buffer(s.concat, rows, nnz, values);
        decode_into(w, s, s.concat, divide_by);
        scaled = divide_by != nullptr;
        s.parts.push_back(s.concat.view());
      }
      shuffled_rows(
          s.parts.size(), [&](std::size_t p) { return s.parts[p].rows; }, o, w.stream, s.order);
      gather(s.parts, s.order.data(), rows, w.out);
    }
    if (!o.renumber.empty()) renumber_ids(w.out, 0, nnz, o.renumber);
    if (scale && !scaled) scale->apply(w.out, 0, nnz, s.scale_todo);
    if (o.normalize_l2) engine::normalize_rows_l2(w.out);
    w.views.push_back(w.out.view());
  }

  // The reading of a shuffled window in a lockstep scan, in tasks that any thread may take, in any
  // order: task i < block_count checks block i (a zstd block is also decoded, into its own buffer:
  // a block's decoder uses its destination's offsets as scratch, so blocks cannot share one), task
  // block_count draws the window's row order (from the block index's row counts, which
  // check_block holds the blocks to). finish_reading() then gathers the rows. The sink of the
  // window before takes tasks as spare work (SpareWork), finish_reading() what it left.
  struct Reading : WindowPlace {
    std::vector<BlockBytes> bytes;   // per block, as read
    std::vector<CsrBuffer> buffers;  // zstd: one per block
    std::vector<CsrView> parts;      // per block: its decoded rows, or its rows as read (raw)
    std::vector<RowRef> order;
    std::atomic<std::size_t> next{0};  // the next task to take
    std::atomic<bool> any_values{false};
    std::mutex error_mutex;
    std::size_t error_task = 0;  // the failed task of lowest number: the error reported
    std::exception_ptr error;
    std::size_t tasks() const { return block_count + 1; }
  };

  void start_reading(Reading& r, const ReadOptions& o, const std::vector<std::uint32_t>& order,
                     std::uint64_t n) const {
    r.place(order, o, n);
    r.parts.assign(r.block_count, CsrView{});
    if (r.bytes.size() < r.block_count) r.bytes.resize(r.block_count);
    if (manifest.codec != Codec::kRaw && r.buffers.size() < r.block_count)
      r.buffers.resize(r.block_count);
    r.any_values.store(false, std::memory_order_relaxed);
    r.error = nullptr;
    r.error_task = r.tasks();
    r.next.store(0, std::memory_order_relaxed);
  }

  void read_task(Reading& r, std::size_t i, Scratch& s, const ReadOptions& o,
                 const float* divide_by) const {
    try {
      if (i == r.block_count) {
        shuffled_rows(
            r.block_count, [&](std::size_t p) { return blocks[r.blocks[p]].entry.rows; }, o,
            r.stream, r.order);
        return;
      }
      const std::uint32_t b = r.blocks[i];
      const std::uint8_t* data = fetch(b, o, r.bytes[i]);
      const shard::BlockHeader h = check(b, data);
      const bool values = (h.flags & shard::kBlockHasValues) != 0;
      if (values) r.any_values.store(true, std::memory_order_relaxed);
      if (manifest.codec == Codec::kRaw) {
        r.parts[i] = shard::raw_block_view(data, name(b));
        return;
      }
      CsrBuffer& part = r.buffers[i];
      size_buffer(part, h.rows, h.nnz, values);
      s.decoder.decode(data, manifest.codec, name(b),
                       {part.labels.data(), part.offsets.data(), part.indices.data(),
                        values ? part.values.data() : nullptr, 0, divide_by});
      r.parts[i] = part.view();
    } catch (...) {
      std::lock_guard lock(r.error_mutex);
      if (i < r.error_task) {
        r.error_task = i;
        r.error = std::current_exception();
      }
    }
  }

  // One task of `r` for whichever thread asks (SpareWork); false when all are taken.
  bool lend(Reading& r, tbb::enumerable_thread_specific<Scratch>& scratch, const ReadOptions& o,
            const float* divide_by) const {
    const std::size_t i = r.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= r.tasks()) return false;
    read_task(r, i, scratch.local(), o, divide_by);
    return true;
  }

  // The tasks of `r` nobody took, by every thread of the arena; then the window's rows gathered
  // into w.out in parallel ranges. The rows are those prepare() gives; raw blocks are gathered
  // straight from their bytes as read.
  void finish_reading(Reading& r, Window& w, tbb::enumerable_thread_specific<Scratch>& scratch,
                      const ReadOptions& o, const Scaling* scale, const float* divide_by) const {
    const std::size_t from = std::min(r.next.exchange(r.tasks()), r.tasks());
    tbb::parallel_for(from, r.tasks(),
                      [&](std::size_t i) { read_task(r, i, scratch.local(), o, divide_by); });
    if (r.error) std::rethrow_exception(r.error);
    std::uint64_t rows = 0, nnz = 0;
    for (const CsrView& v : r.parts) {
      rows += v.rows;
      nnz += v.nnz();
    }
    check_window_nnz(r.block_count, nnz);
    static_cast<WindowPlace&>(w) = r;
    w.views.clear();
    size_buffer(w.out, rows, nnz, r.any_values.load() || scale != nullptr || o.normalize_l2);
    // Each range's values are scaled by the task that gathered them (when the decoder did not).
    const Scaling* scale_here = divide_by ? nullptr : scale;
    gather_offsets(r.parts, r.order.data(), rows, w.out);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, rows, kGatherGrain),
                      [&](const tbb::blocked_range<std::size_t>& range) {
                        gather_entries(r.parts, r.order.data(), range.begin(), range.end(), w.out);
                        const std::size_t begin = w.out.offsets[range.begin()];
                        const std::size_t end = w.out.offsets[range.end()];
                        if (!o.renumber.empty()) renumber_ids(w.out, begin, end, o.renumber);
                        if (scale_here)
                          scale_here->apply(w.out, begin, end, scratch.local().scale_todo);
                      });
    if (o.normalize_l2) engine::normalize_rows_l2(w.out);
    w.views.push_back(w.out.view());
  }

  static constexpr std::size_t kGatherGrain = 2048;  // rows a gather task copies (≈ 600 KB)

  // One window at a time, read by every thread of the arena. A shuffled window's reading starts
  // while the sink has the window before: the sink's threads take its tasks as they run out of
  // their own work (SpareWork), and the rest are done once the sink returns. An unshuffled window
  // is read by prepare() after the sink returns.
  ScanStats scan_lockstep(const ReadOptions& o, const LendingRowSink& sink, int threads,
                          const std::vector<std::uint32_t>& order, std::uint64_t window_count,
                          const Scaling* scale) const {
    Window w;
    Reading reading;
    tbb::enumerable_thread_specific<Scratch> scratch;
    const float* divide_by =
        scale && manifest.codec != Codec::kRaw ? scale->decoder_table() : nullptr;
    const SpareWork lent = [&] { return lend(reading, scratch, o, divide_by); };
    const SpareWork none = [] { return false; };
    ScanStats stats;
    const std::unique_ptr<ReadAhead> ahead_of_reader = read_ahead(o, order, window_count);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      Clock::time_point begin = Clock::now();
      if (o.shuffle && o.first_window < window_count)
        start_reading(reading, o, order, o.first_window);
      for (std::uint64_t n = o.first_window; n < window_count; ++n) {
        if (o.shuffle) {
          finish_reading(reading, w, scratch, o, scale, divide_by);
        } else {
          w.place(order, o, n);
          prepare(w, scratch.local(), o, scale);
        }
        const Clock::time_point ready = Clock::now();
        stats.wait_seconds += seconds(ready - begin);
        const bool ahead = o.shuffle && n + 1 < window_count;
        if (ahead) start_reading(reading, o, order, n + 1);
        for (const CsrView& v : w.views) {
          sink(v, ahead ? lent : none);
          stats.rows += v.rows;
          stats.nnz += v.nnz();
        }
        begin = Clock::now();
        stats.sink_seconds += seconds(begin - ready);
        stats.blocks += w.block_count;
        ahead_of_reader->consumed(n);
      }
    });
    return stats;
  }

  // A scan of one window (the last window of a pass, or all of a small set, which a learner with a
  // step floor passes over hundreds of times) on the calling thread. A pipeline or a lockstep scan
  // reads the same window in the same row order, but starts a task arena and wakes its workers
  // for it, which cost several times what the reading does (heart_scale, 371 passes of 136 rows:
  // most of the CPU went to waking and yielding threads). The sink's own tasks (the CPM's sides)
  // still run on at most `threads` threads: in an arena of that many when it is fewer than all.
  ScanStats scan_one(const ReadOptions& o, const LendingRowSink& sink, int threads,
                     const std::vector<std::uint32_t>& order, const Scaling* scale) const {
    Window w;
    Scratch scratch;
    ScanStats stats;
    const Clock::time_point begin = Clock::now();
    w.place(order, o, o.first_window);
    prepare(w, scratch, o, scale);
    const Clock::time_point ready = Clock::now();
    stats.wait_seconds = seconds(ready - begin);
    const auto hand_over = [&] {
      const SpareWork none = [] { return false; };
      for (const CsrView& v : w.views) {
        sink(v, none);
        stats.rows += v.rows;
        stats.nnz += v.nnz();
      }
    };
    if (threads < tbb::info::default_concurrency()) {
      tbb::task_arena arena(threads);
      arena.execute(hand_over);
    } else {
      hand_over();
    }
    stats.sink_seconds = seconds(Clock::now() - ready);
    stats.blocks = w.block_count;
    return stats;
  }

  ScanStats scan(const ReadOptions& o, const LendingRowSink& sink) const {
    if (o.window_blocks == 0) throw UsageError("window_blocks must be at least 1");
    const int threads = resolve(o.threads);
    const Scaling* scale = o.scale_maxabs && o.renumber.empty() ? maxabs_scaling() : nullptr;
    std::unique_ptr<Scaling> renumbered;  // the scaling in the new ids' order
    if (o.scale_maxabs && !o.renumber.empty()) {
      if (o.renumbered_maxabs.size() < o.renumber.size())
        throw std::invalid_argument("ReadOptions: renumber with scale_maxabs needs the maxima "
                                    "of the new ids (renumbered_maxabs)");
      renumbered = std::make_unique<Scaling>(o.renumbered_maxabs, true);
      if (renumbered->any) scale = renumbered.get();
    }
    std::vector<std::uint32_t> order(blocks.size());
    std::iota(order.begin(), order.end(), 0u);
    if (!o.blocks.empty()) {
      for (const std::uint32_t b : o.blocks)
        if (b >= blocks.size())
          throw std::invalid_argument("ReadOptions::blocks: block " + std::to_string(b) +
                                      " of " + std::to_string(blocks.size()));
      order.assign(o.blocks.begin(), o.blocks.end());
    }
    if (o.shuffle) {
      SplitMix64 rng(derive_seed(o.seed, o.epoch, kBlockOrderStream));
      seeded_shuffle(order.data(), order.size(), rng);
    }
    const std::uint64_t window_count = (order.size() + o.window_blocks - 1) / o.window_blocks;
    if (o.parts == 0 || o.part >= o.parts)
      throw UsageError("reader part " + std::to_string(o.part) + " of " + std::to_string(o.parts) +
                       " does not exist");
    if (o.first_window > window_count)
      throw UsageError("first window " + std::to_string(o.first_window) + " lies beyond the " +
                       std::to_string(window_count) + " windows of an epoch");

    if (window_count - o.first_window == 1) return scan_one(o, sink, threads, order, scale);
    if (o.lockstep) return scan_lockstep(o, sink, threads, order, window_count, scale);

    // One window per thread being decoded plus one held by the sink keep every thread busy.
    // Measured side by side on a KDD-size scan (2 threads, 3 runs): 2.21 s median with 2·threads+1
    // tokens, 2.31 s with threads+1, within the noise, while each token costs a window of memory
    // (~10 MB at 8 blocks) that a trainer's peak RSS has to carry.
    // Memory is the pool: tokens windows + one scratch per thread.
    const std::size_t tokens = static_cast<std::size_t>(threads) + 1;
    std::vector<std::unique_ptr<Window>> pool;
    std::vector<Window*> free_windows;
    std::mutex free_mutex;
    for (std::size_t i = 0; i < tokens; ++i) {
      pool.push_back(std::make_unique<Window>());
      free_windows.push_back(pool.back().get());
    }
    tbb::enumerable_thread_specific<Scratch> scratch;

    const SpareWork no_spare = [] { return false; };
    ScanStats stats;
    const std::unique_ptr<ReadAhead> ahead_of_reader = read_ahead(o, order, window_count);
    std::uint64_t next = o.first_window;
    Clock::time_point last = Clock::now();
    tbb::task_arena arena(threads);
    arena.execute([&] {
      tbb::parallel_pipeline(
          tokens,
          tbb::make_filter<void, Window*>(tbb::filter_mode::serial_in_order,
                                          [&](tbb::flow_control& fc) -> Window* {
                                            if (next == window_count) {
                                              fc.stop();
                                              return nullptr;
                                            }
                                            Window* w;
                                            {
                                              std::lock_guard lock(free_mutex);
                                              w = free_windows.back();
                                              free_windows.pop_back();
                                            }
                                            w->place(order, o, next++);
                                            return w;
                                          }) &
              tbb::make_filter<Window*, Window*>(tbb::filter_mode::parallel,
                                                 [&](Window* w) {
                                                   prepare(*w, scratch.local(), o, scale);
                                                   return w;
                                                 }) &
              tbb::make_filter<Window*, void>(tbb::filter_mode::serial_in_order, [&](Window* w) {
                const Clock::time_point begin = Clock::now();
                stats.wait_seconds += seconds(begin - last);
                for (const CsrView& v : w->views) {
                  sink(v, no_spare);
                  stats.rows += v.rows;
                  stats.nnz += v.nnz();
                }
                last = Clock::now();
                stats.sink_seconds += seconds(last - begin);
                stats.blocks += w->block_count;
                ahead_of_reader->consumed(w->number);
                std::lock_guard lock(free_mutex);
                free_windows.push_back(w);
              }));
    });
    return stats;
  }

  VerifyReport verify(int requested_threads) const {
    struct Checker {
      BlockBytes bytes;
      shard::BlockDecoder decoder;
      CsrBuffer rows;
      std::map<double, std::uint64_t> labels;  // of the rows decoded
      std::uint32_t max_index = 0;
    };
    tbb::enumerable_thread_specific<Checker> checkers;
    std::vector<std::uint64_t> block_checksums(blocks.size());  // each block's trailing checksum
    std::mutex mutex;
    std::uint64_t first_bad = std::numeric_limits<std::uint64_t>::max();
    std::exception_ptr error;
    tbb::task_arena arena(resolve(requested_threads));
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, blocks.size()),
                        [&](const tbb::blocked_range<std::uint64_t>& range) {
                          Checker& c = checkers.local();
                          for (std::uint64_t b = range.begin(); b != range.end(); ++b) {
                            try {
                              const std::uint8_t* data = load(b, c.bytes);
                              const shard::BlockHeader h = shard::check_block(
                                  data, blocks[b].entry, manifest.codec, name(b));
                              std::memcpy(&block_checksums[b],
                                          data + blocks[b].entry.bytes - sizeof(std::uint64_t),
                                          sizeof(std::uint64_t));
                              const bool values = h.flags & shard::kBlockHasValues;
                              size_buffer(c.rows, h.rows, h.nnz, values);
                              c.decoder.decode(data, manifest.codec, name(b),
                                               {c.rows.labels.data(), c.rows.offsets.data(),
                                                c.rows.indices.data(),
                                                values ? c.rows.values.data() : nullptr, 0});
                              for (std::size_t r = 0; r < h.rows; ++r) ++c.labels[c.rows.labels[r]];
                              for (std::size_t k = 0; k < h.nnz; ++k)
                                c.max_index = std::max(c.max_index, c.rows.indices[k]);
                            } catch (const DataError&) {
                              // Report the first bad block in block order, whatever the timing.
                              std::lock_guard lock(mutex);
                              if (b < first_bad) {
                                first_bad = b;
                                error = std::current_exception();
                              }
                            }
                          }
                        });
    });
    if (error) std::rethrow_exception(error);
    // Each shard's blocks must be those its manifest entry was written with.
    if (const std::optional<std::size_t> s =
            shard_off_content([&](std::uint64_t b) { return block_checksums[b]; }))
      throw DataError(dir + "/" + manifest.shards[*s].file, 0, 0,
                      "the blocks do not match the manifest's content checksum: blocks of "
                      "another conversion (re-run convert)");
    // The manifest's counts, which the blocks' checksums do not cover, against the rows decoded.
    std::map<double, std::uint64_t> labels;
    std::uint32_t max_index = 0;
    for (const Checker& c : checkers) {
      for (const auto& [label, n] : c.labels) labels[label] += n;
      max_index = std::max(max_index, c.max_index);
    }
    if (labels != manifest.label_counts)
      throw DataError(dir + "/" + shard::kManifestFile, 0, 0,
                      "its label counts do not match the blocks' rows (the manifest was edited "
                      "or is of another conversion: re-run convert)");
    // max_index bounds the ids (a matrix's width may declare it above the largest present).
    if (max_index > manifest.max_index)
      throw DataError(dir + "/" + shard::kManifestFile, 0, 0,
                      "its max_index " + std::to_string(manifest.max_index) +
                          " is below the blocks' largest feature id " + std::to_string(max_index) +
                          " (re-run convert)");
    VerifyReport report;
    report.blocks_checked = blocks.size();
    for (const auto& b : blocks) report.bytes_checked += b.entry.bytes;
    // The scaling table is data too: its checksum checked as it is read, a piece at a time (one
    // in memory was never written: it is the one computed).
    if (in_memory) return report;
    const std::uint64_t entries = manifest.nnz > 0 ? std::uint64_t{manifest.max_index} + 1 : 0;
    shard::check_maxabs(mapped_maxabs(), maxabs_path(), entries);
    report.bytes_checked += entries * sizeof(float);
    return report;
  }
};

ShardSet::ShardSet() : impl_(std::make_unique<Impl>()) {}
ShardSet::ShardSet(ShardSet&&) noexcept = default;
ShardSet& ShardSet::operator=(ShardSet&&) noexcept = default;
ShardSet::~ShardSet() = default;

namespace {

// The directory `path` names: device, inode and, where the file system records it, its birth
// time (an inode number that a later directory reuses then still differs), or nullopt.
std::optional<std::tuple<std::uint64_t, std::uint64_t, std::int64_t>> directory_identity(
    const std::string& path) {
  struct statx st {};
  if (::statx(AT_FDCWD, path.c_str(), 0, STATX_INO | STATX_BTIME, &st) != 0) {
    // statx refused (an old kernel, a container's seccomp profile): stat, without a birth time.
    struct stat plain {};
    if (::stat(path.c_str(), &plain) != 0) return std::nullopt;
    return std::tuple{std::uint64_t{plain.st_dev}, std::uint64_t{plain.st_ino}, std::int64_t{0}};
  }
  const std::int64_t born =
      st.stx_mask & STATX_BTIME ? st.stx_btime.tv_sec * 1'000'000'000 + st.stx_btime.tv_nsec : 0;
  return std::tuple{(std::uint64_t{st.stx_dev_major} << 32) | st.stx_dev_minor,
                    std::uint64_t{st.stx_ino}, born};
}

}  // namespace

ShardSet ShardSet::open(const std::string& dir, bool check_sources) {
  // `convert` replaces a shard directory whole (a new directory renamed over the path, the old one
  // then removed), and the set's files are opened one after the other (the scaling table is
  // mapped with them, for later): a replacement meanwhile could give one conversion's manifest
  // with another's files, and an error about data that was never damaged. An open that the
  // directory was replaced during is made again, from the directory the path names now.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    const auto before = directory_identity(dir);
    try {
      ShardSet set = open_once(dir, check_sources);
      if (directory_identity(dir) == before) return set;
    } catch (const Error&) {
      if (directory_identity(dir) == before) throw;
    }
    if (attempt == kAttempts)
      throw IoError("cannot open " + dir + ": it was replaced while it was being opened, " +
                    std::to_string(kAttempts) + " times in a row (another convert writing it?)");
  }
}

ShardSet ShardSet::open_once(const std::string& dir, bool check_sources) {
  ShardSet set;
  Impl& impl = *set.impl_;
  impl.dir = dir;
  while (impl.dir.size() > 1 && impl.dir.back() == '/') impl.dir.pop_back();
  impl.manifest = shard::read_manifest(impl.dir);
  impl.check_sources(check_sources);
  // Every shard's block count is checked against its file before the table of all blocks is sized:
  // a manifest without its own checksum (written before it) may claim any number.
  std::vector<shard::IndexTrailer> trailers;
  for (std::uint32_t s = 0; s < impl.manifest.shards.size(); ++s)
    trailers.push_back(impl.open_shard(s));
  impl.index_blocks(trailers);
  std::error_code ec;
  if (fs::exists(impl.maxabs_path(), ec)) {
    impl.maxabs_file = shard::open_maxabs(impl.maxabs_path());
    impl.maxabs_mapped = true;
  }
  // A manifest without its own checksum may also misstate max_index, which sizes the learners'
  // weights while the blocks hold the ids (a lowered one made --scale none write past them): it is
  // checked against the scaling table convert sized by the same max_index, a header's read.
  if (!impl.manifest.checksummed && impl.manifest.nnz > 0 &&
      shard::maxabs_count(impl.mapped_maxabs(), impl.maxabs_path()) !=
          std::uint64_t{impl.manifest.max_index} + 1)
    throw DataError(impl.dir, 0, 0,
                    "max_index " + std::to_string(impl.manifest.max_index) +
                        " of the manifest does not match " + shard::kMaxabsFile +
                        " (re-run convert)");
  impl.check_blocks();
  return set;
}

ShardSet ShardSet::in_memory(Manifest manifest, std::vector<std::vector<std::uint8_t>> files,
                             std::vector<float> maxabs, const std::string& name) {
  ShardSet set;
  Impl& impl = *set.impl_;
  impl.dir = name;
  impl.in_memory = true;
  impl.manifest = std::move(manifest);
  if (files.size() != impl.manifest.shards.size())
    throw std::invalid_argument("ShardSet::in_memory: one file a shard of the manifest");
  std::vector<shard::IndexTrailer> trailers;
  for (std::uint32_t s = 0; s < impl.manifest.shards.size(); ++s)
    trailers.push_back(impl.check_shard(s, shard::MappedFile(std::move(files[s])),
                                        name + "/" + impl.manifest.shards[s].file));
  impl.index_blocks(trailers);
  impl.check_blocks();
  // The table feature_maxabs() reads from a directory: max_index + 1 entries (none without a
  // non-zero).
  if (impl.manifest.nnz == 0) maxabs.clear();
  if (maxabs.size() != (impl.manifest.nnz > 0 ? std::uint64_t{impl.manifest.max_index} + 1 : 0))
    throw std::invalid_argument("ShardSet::in_memory: the scaling table has max_index + 1 entries");
  std::call_once(impl.maxabs_once, [&] {
    impl.maxabs = std::move(maxabs);
    engine::sparse::collapse_to_huge_pages(impl.maxabs.data(), impl.maxabs.size() * sizeof(float));
  });
  return set;
}

const Manifest& ShardSet::manifest() const { return impl_->manifest; }
const std::string& ShardSet::dir() const { return impl_->dir; }
const std::vector<std::string>& ShardSet::missing_sources() const { return impl_->missing_sources; }
const std::vector<float>& ShardSet::feature_maxabs() const { return impl_->feature_maxabs(); }

std::uint64_t window_count(const Manifest& manifest, std::uint32_t window_blocks) {
  return window_blocks ? (manifest.total_blocks + window_blocks - 1) / window_blocks : 0;
}

ScanStats ShardSet::scan(const ReadOptions& options, const RowSink& sink) const {
  return impl_->scan(options, [&](const CsrView& rows, const SpareWork&) { sink(rows); });
}

ScanStats ShardSet::scan_lending(const ReadOptions& options, const LendingRowSink& sink) const {
  return impl_->scan(options, sink);
}

VerifyReport ShardSet::verify(int threads) const { return impl_->verify(threads); }

bool is_shard_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / shard::kManifestFile, ec);
}

}  // namespace polymargin::io
