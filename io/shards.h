// The binary training format: a directory of shard files plus manifest.json.
//
//   DATA.shards/manifest.json        format version, codec, rows, features, nnz, label counts,
//                                    index base, sources (path, size, mtime), shard list, checksums
//   DATA.shards/shard-00000.pms ...  blocks of up to block_rows rows (CSR: labels, row lengths,
//                                    indices, values; values omitted when all are 1), each block
//                                    checksummed (XXH3), the file bound to the manifest by the
//                                    XXH3 of its blocks' checksums. raw codec: plain little-endian
//                                    arrays, 8-byte aligned, used in place as read. zstd
//                                    codec: row lengths, values and labels zstd-compressed, index
//                                    gaps as varints (io/shard_format.h says why).
//   DATA.shards/feature_maxabs.bin   per-feature max |value| (float32), checksummed, for [0,1]
//                                    scaling; runs of unseen feature ids are holes of a sparse file
//
// A directory that is stale (a source changed), of another format version, truncated or corrupted
// is refused with DataError; it is never silently reused or half-read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "io/temporaries.h"
#include "io/text_reader.h"

namespace polymargin::io {

/// The on-disk format version this build writes and reads; any other version is refused.
inline constexpr std::uint32_t kShardFormatVersion = 3;

enum class Codec { kRaw, kZstd };
Codec parse_codec(const std::string& text);  // "raw" | "zstd"; UsageError otherwise
std::string codec_name(Codec codec);

/// A label as manifest.json and inspect write it: the shortest text that reads back as the same
/// float ("-1", "1", "0.5").
std::string label_text(double label);

struct SourceInfo {
  std::string path;  // absolute path, "-" for stdin
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

struct ShardInfo {
  std::string file;  // name inside the directory
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  std::uint64_t blocks = 0;
  std::uint64_t index_checksum = 0;  // XXH3 of the shard's block index, as in its trailer
  /// XXH3 of the checksums of the shard's blocks, in order, as in its file header: binds the file
  /// to this manifest whatever the codec (0: written before it was recorded, not checked).
  std::uint64_t content_checksum = 0;
};

struct Manifest {
  std::uint32_t format_version = 0;
  Codec codec = Codec::kZstd;
  std::uint32_t block_rows = 0;
  std::uint64_t rows = 0;
  std::uint64_t nnz = 0;
  std::uint32_t max_index = 0;  // ids' bound (the largest present, or above: declare_max_index);
                                // weight vectors need max_index + 1 slots
  int index_base = 1;           // 0 or 1, resolved
  std::uint64_t features = 0;   // max_index + 1 - index_base (LIBSVM's count of features)
  std::map<double, std::uint64_t> label_counts;
  bool has_values = true;  // false when every stored value is 1
  std::vector<SourceInfo> sources;
  std::vector<ShardInfo> shards;
  std::uint64_t total_blocks = 0;
  std::uint64_t bad_lines_skipped = 0;
  std::vector<std::string> bad_lines;  // the first skipped lines, "file:line:column: message"
  std::string created_utc;
  double convert_seconds = 0;
  int zstd_level = 0;            // compression level used (zstd codec only)
  std::uint64_t text_bytes = 0;  // decompressed text bytes read by convert (0 when unknown)
  bool checksummed = true;  // read from a manifest with its own checksum (false: written before it)
};

struct ConvertOptions {
  Codec codec = Codec::kZstd;
  std::uint32_t block_rows = 4096;
  std::uint32_t shards = 1;
  int zstd_level = 3;
  TextOptions text;
  /// fsync the files and directories before the directory is renamed into place (a crash then
  /// leaves the old directory or the whole new one on disk). False for a temporary directory that
  /// is removed with the process (Dataset's, the Python package's): it is still complete when it
  /// appears, and fsync would only make its writer wait for the disk.
  bool durable = true;
};

class ShardSet;

/// Appends rows and writes a shard directory: blocks are encoded and compressed in parallel, written
/// in order, memory bounded by a fixed number of blocks in flight. Everything goes to a temporary
/// directory that finish() renames into place; destroying an unfinished writer removes it.
/// Made without a directory, it keeps the shards in memory instead: finish_in_memory() hands them
/// over as a ShardSet whose blocks, block index, scaling table and data checksum are those of
/// the directory the same rows and options make, so that it reads the same rows in that order.
class ShardWriter {
 public:
  ShardWriter(const std::string& dir, const ConvertOptions& options, int threads = 0);
  /// A writer that keeps the shards in memory (options.durable is moot); `name` names the rows in
  /// messages (and the set's files: NAME/shard-00000.pms).
  ShardWriter(const ConvertOptions& options, int threads, const std::string& name);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(const CsrView& rows);
  /// Records the size of the decompressed text converted (for the manifest's compression ratio).
  void set_text_bytes(std::uint64_t bytes);
  /// Feature ids go up to at least `max_index`, whether or not a row holds it (the width of a
  /// matrix whose last columns are zero): the manifest's max_index, and so the weights and the
  /// model's feature count, are never below it.
  void declare_max_index(std::uint32_t max_index);
  /// Flushes, writes feature_maxabs.bin and manifest.json, renames into place.
  Manifest finish(int index_base, const std::vector<SourceInfo>& sources,
                  std::uint64_t bad_lines_skipped, std::vector<std::string> bad_lines = {});
  /// finish() of a writer in memory: the shards as a set (no sources), held by the set alone.
  ShardSet finish_in_memory(int index_base);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Converts LIBSVM text (any supported compression, several files, "-") into a shard directory.
Manifest convert_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                      const ConvertOptions& options, int threads = 0);

/// Called now and then during convert_text with the rows and non-zeros converted so far.
using ConvertProgress = std::function<void(std::uint64_t rows, std::uint64_t nnz)>;

/// convert_text with a progress callback (called serially, after each parsed batch).
Manifest convert_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                      const ConvertOptions& options, int threads, const ConvertProgress& progress);

struct ReadOptions {
  bool shuffle = true;             // seeded block permutation + row shuffle within a window
  std::uint64_t seed = 1;
  std::uint64_t epoch = 0;
  std::uint32_t window_blocks = 8;  // rows are shuffled within windows of this many blocks
  int threads = 0;                  // decode threads; 0: all hardware threads
  bool scale_maxabs = false;        // divide each value by its feature's max |value| (into [0,1])
  bool normalize_l2 = false;        // then divide each row by its L2 norm (engine/normalize.h)
  // Windows of the epoch's order left out: neither read nor decoded, and the later windows are
  // numbered (and shuffled) as in a full scan. A resumed run skips those it has learnt.
  std::uint64_t first_window = 0;
  // One window at a time: its blocks decoded (and its rows gathered) by all `threads` at once, then
  // the window handed to the sink; while the sink runs, the next window is read only as spare work
  // the sink takes (scan_lending). For a sink that keeps every thread busy itself (a CPM with as
  // many sides as threads): the pipelined scan would give each window's decoding to one thread,
  // which then starts its side that much later, while lockstep splits it between them. The rows
  // and their order are the same in both modes.
  bool lockstep = false;
  // This reader's part of every window, for readers that share the data (the ranks of an MPI
  // job): of each window's blocks in reading order, part `part` of `parts` reads the contiguous
  // slice [B·q/parts, B·(q+1)/parts) with q = part, and shuffles its rows by a seed stream of its
  // own. A window of fewer blocks than parts (B < parts) leaves some slices empty; there q =
  // (part + window) mod parts, so that the empty ones move from window to window. The sink is
  // still called once per window, with no rows when the slice is empty, so that every part sees
  // the same window boundaries. parts = 1: the whole window, as always.
  std::uint32_t part = 0, parts = 1;
  // The I/O stage (io/read_ahead.h): bytes of blocks asked of the disk ahead of the window being
  // learnt; 0: none (each block is then read when a decoder first touches it). Pages of consumed
  // blocks are dropped from the page cache, and the budget held to a quarter of the memory, when
  // the shards take more than half the memory the process may use (MemAvailable or its cgroup's
  // limit). Neither changes the rows or their order.
  std::uint64_t read_ahead_bytes = std::uint64_t{64} << 20;
  // Feature ids renumbered as the rows are read: an id f < renumber.size() becomes renumber[f], a
  // larger id stays. For a
  // learner that lays its weights out in an order of its own (io/feature_order.h); the entries
  // of a row keep their order, so only the ids change. Empty: the ids as stored.
  std::span<const std::uint32_t> renumber;
  // With renumber and scale_maxabs: each new id's max |value| (io::renumbered_maxabs), required.
  // The ids are then renumbered first and the values divided by this table, in which the frequent
  // features' maxima share cache lines (the table in the data's order would cost a second miss on
  // every non-zero).
  std::span<const float> renumbered_maxabs;
  // Only these blocks (global block numbers, each once) make the epoch, in this order before the
  // seeded permutation; windows are of them alone, numbered as if the others did not exist.
  // Empty: every block. For a run that holds some blocks out of training (driver/early_stopping.h)
  // and reads them alone to score on.
  std::span<const std::uint32_t> blocks;
};

/// Reading a lockstep scan lends its sink while the sink has the window: each call does one piece
/// of reading the next window (a block checked and decoded, or its row order drawn) and returns
/// false once none is left. A sink whose threads would otherwise wait for each other at its end
/// (a CPM side done before the others) calls it there; what it leaves is done after it returns.
/// Valid during the sink's call only; safe to call from several threads at once.
using SpareWork = std::function<bool()>;
using LendingRowSink = std::function<void(const CsrView& rows, const SpareWork& spare)>;

struct ScanStats {
  std::uint64_t rows = 0;
  std::uint64_t nnz = 0;
  std::uint64_t blocks = 0;
  double sink_seconds = 0;  // time spent inside the sink (learning)
  double wait_seconds = 0;  // time the sink side waited for decoded data
};

struct VerifyReport {
  std::uint64_t blocks_checked = 0;
  std::uint64_t bytes_checked = 0;
};

/// An opened, validated shard directory, or a set of shards held in memory (ShardWriter's:
/// dir() names the rows, nothing is on disk, and the scaling table is held as computed).
class ShardSet {
 public:
  /// Validates the manifest, format version, every shard file's size and block index, and (when
  /// check_sources) that each source file still has the recorded size and mtime.
  /// The files are those of one conversion: an open that a `convert` replacing the directory
  /// overlapped is made again. The scaling table is mapped now and read when first needed.
  static ShardSet open(const std::string& dir, bool check_sources = true);

  const Manifest& manifest() const;
  const std::string& dir() const;
  /// Sources recorded in the manifest that no longer exist (fine: the shards stand alone).
  const std::vector<std::string>& missing_sources() const;
  /// Per-feature max |value|, max_index + 1 entries (loaded on first use).
  const std::vector<float>& feature_maxabs() const;

  /// Streams every row once through `sink` (called serially, in an order that is a function of the
  /// data, seed and epoch only). Batches are windows of rows; views are valid during the call only.
  /// A shuffled scan hands each window over as one batch. UsageError when options.first_window
  /// lies beyond the last window.
  ScanStats scan(const ReadOptions& options, const RowSink& sink) const;
  /// scan() whose sink may do the reading of the next window (SpareWork) while it has this one. The
  /// windows are the same as scan()'s; only a shuffled lockstep scan lends work, others none.
  ScanStats scan_lending(const ReadOptions& options, const LendingRowSink& sink) const;

  /// Decodes and checks every block checksum; throws DataError naming shard and block on mismatch.
  VerifyReport verify(int threads = 0) const;

  ShardSet(ShardSet&&) noexcept;
  ShardSet& operator=(ShardSet&&) noexcept;
  ~ShardSet();

 private:
  friend class ShardWriter;
  ShardSet();
  static ShardSet open_once(const std::string& dir, bool check_sources);
  /// The set whose shard files' bytes are `files` (in shard order) and scaling table `maxabs`,
  /// checked as open() checks a directory's; `name` stands for the directory.
  static ShardSet in_memory(Manifest manifest, std::vector<std::vector<std::uint8_t>> files,
                            std::vector<float> maxabs, const std::string& name);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Windows (batches of a shuffled scan) in one epoch of `manifest` read `window_blocks` at a time.
std::uint64_t window_count(const Manifest& manifest, std::uint32_t window_blocks);

/// True if `path` is a shard directory (has a manifest.json).
bool is_shard_dir(const std::string& path);

/// One number that pins a shard directory's content and layout (the XXH3 of every shard's block
/// index, itself over the blocks' checksums): equal for the same data converted with the same
/// options, whatever the directory or the time. Checkpoints and --metrics-json record it.
std::uint64_t data_checksum(const Manifest& manifest);

/// The codec of the shards Dataset::open converts text into: raw (no compression work, and half
/// the decode work of every epoch) when the raw blocks, estimated from the inputs' sizes, take at
/// most 8 GiB, zstd otherwise (also for stdin, whose size is unknown). It depends on the inputs
/// only, never on the machine's state, so the data checksum that checkpoints and --metrics-json
/// record is the same in every run on the same text.
Codec temporary_codec(const std::vector<std::string>& inputs);

/// Opens the data argument of train/eval/predict: a shard directory as is, or LIBSVM text converted
/// on the fly (through convert_text, into a temporary directory "$TMPDIR/polymargin-<pid>-XXXXXX"
/// removed when the returned handle dies or the process is stopped by a signal, and swept by a
/// later run once its process is gone; its codec is temporary_codec's choice, whatever
/// options.codec says). A shard directory comes alone: with other inputs it is a UsageError.
/// Or a set already open (held()), such as rows in memory, shared with its other holders.
class Dataset {
 public:
  static Dataset open(const std::vector<std::string>& inputs, const ConvertOptions& options,
                      int threads = 0);
  /// The set `shards` (not null), held as long as this dataset too.
  static Dataset held(std::shared_ptr<const ShardSet> shards);
  /// What open() would refuse for want of the inputs themselves, without reading their rows: a
  /// missing or unreadable file (IoError), a shard directory open() refuses, a directory among
  /// several inputs. For data a command reads only at its end (train's --validation); a stream
  /// (FIFO, pipe, device) is left unopened, for that read.
  static void probe(const std::vector<std::string>& inputs);
  const ShardSet& shards() const { return *shards_; }
  bool converted() const { return !temp_dir_.empty(); }
  Dataset(Dataset&&) noexcept = default;
  Dataset& operator=(Dataset&&) noexcept = default;
  ~Dataset();

 private:
  Dataset() = default;
  std::shared_ptr<const ShardSet> shards_;
  std::string temp_dir_;
  TemporaryPath temporary_;  // temp_dir_, registered for removal on a signal
};

}  // namespace polymargin::io
