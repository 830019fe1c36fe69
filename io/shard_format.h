// The bytes of one shard file and the block codec, shared by the writer, the reader, the tests and
// the benchmark. The public contract is io/shards.h; nothing outside io/ includes this header.
//
// Shard file (little-endian; every section starts at a multiple of 8 bytes):
//   FileHeader     64 bytes: "PMSHARD\0", format version, codec, shard index and count, block rows,
//                  the content checksum (XXH3 of the blocks' checksums in order, also in the
//                  manifest: a shard of another conversion is refused even when its size and block
//                  index match), XXH3 of the header's other bytes
//   block 0..n-1   BlockHeader (48 bytes) | payload, zero-padded to 8 | u64 XXH3 of header + padded
//                  payload. A block is self-describing and self-checking, so a reader can verify it
//                  alone, in any thread, without trusting anything else in the file.
//   block index    IndexEntry[n] (offset, bytes, rows, nnz of each block)
//   IndexTrailer   offset of the index, n, "PMSHEND\0", u64 XXH3 of the index and the trailer's
//                  other fields. It sits at the very end, so a truncated file has no valid trailer.
//
// Raw payload (used in place as read, hence the 8-byte alignment of every array):
//   f32 labels[rows] | u32 offsets[rows + 1] (offsets[0] = 0) | u32 indices[nnz] | f32 values[nnz]
//   (values only when the block has a value other than 1), each array zero-padded to 8 bytes.
// Zstd payload: u64 packed bytes | u64 frame bytes | one zstd frame of the packed section
//     LEB128 row lengths[rows] | values (same rule) | f32 labels[rows]
//   | LEB128 index gaps[nnz], stored as they are.
//   A row's first gap is its first index, each further gap is index - previous - 1 (indices are
//   strictly increasing within a row, so gaps are >= 0 and mostly small). Values are a bitmap of
//   ceil(nnz / 8) bytes (bit k of byte k / 8 set: entry k is not 1) followed by the f32 values of
//   the set entries in order.
//   Why this layout (format version 3): most values of sparse data are 1, and in version 1 a dense
//   f32 array of them was 57% of the decoded bytes and most of zstd's work; and with ids spread
//   over millions of features the gap varints are close to random bytes, which zstd shrank by only
//   10% at KDD size while decoding them took a quarter of an epoch scan's CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "io/shards.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace polymargin::io::shard {

inline constexpr char kFileMagic[8] = {'P', 'M', 'S', 'H', 'A', 'R', 'D', '\0'};
inline constexpr char kBlockMagic[4] = {'P', 'M', 'B', 'K'};
inline constexpr char kTrailerMagic[8] = {'P', 'M', 'S', 'H', 'E', 'N', 'D', '\0'};
inline constexpr char kMaxabsMagic[8] = {'P', 'M', 'M', 'A', 'X', 'A', 'B', 'S'};
inline constexpr std::uint32_t kBlockHasValues = 1;  // BlockHeader::flags
/// Bytes before the zstd frame of a zstd payload: the packed section's size, the frame's size.
inline constexpr std::size_t kPackedPrefix = 16;
/// Largest number of non-zeros a block holds: keeps u32 offsets valid inside windows of blocks and
/// the memory of one block bounded even when rows are huge.
inline constexpr std::uint32_t kMaxBlockNnz = std::uint32_t{1} << 24;

struct FileHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t codec;  // 0 raw, 1 zstd
  std::uint32_t shard_index;
  std::uint32_t shard_count;
  std::uint32_t block_rows;
  std::uint32_t reserved0;
  std::uint64_t content_checksum;  // ShardInfo::content_checksum, set once the blocks are written
  std::uint64_t reserved[2];
  std::uint64_t checksum;  // XXH3 of the 56 bytes before it
};
static_assert(sizeof(FileHeader) == 64);

struct BlockHeader {
  char magic[4];
  std::uint32_t flags;
  std::uint32_t rows;
  std::uint32_t nnz;
  std::uint64_t payload_bytes;  // stored payload, without padding (zstd: compressed frame)
  std::uint64_t decoded_bytes;  // zstd: size of the decompressed stream; raw: payload_bytes
  std::uint64_t block_index;    // global block number, so a block cannot pass for another
  std::uint64_t first_row;      // global row number of the block's first row
};
static_assert(sizeof(BlockHeader) == 48);

struct IndexEntry {
  std::uint64_t offset;  // of the BlockHeader in the file
  std::uint64_t bytes;   // header + padded payload + checksum
  std::uint32_t rows;
  std::uint32_t nnz;
};
static_assert(sizeof(IndexEntry) == 24);

struct IndexTrailer {
  std::uint64_t index_offset;
  std::uint64_t block_count;
  char magic[8];
  std::uint64_t checksum;  // XXH3 of the index entries and the 24 bytes before it
};
static_assert(sizeof(IndexTrailer) == 32);

/// Header of feature_maxabs.bin; followed by f32[count] and a u64 XXH3 of everything before it.
struct MaxabsHeader {
  char magic[8];
  std::uint32_t format_version;
  std::uint32_t reserved;
  std::uint64_t count;
};
static_assert(sizeof(MaxabsHeader) == 24);

/// XXH3-64 of a byte range: every checksum of the format.
std::uint64_t checksum(const void* data, std::size_t size);
/// A checksum as messages and JSON write it: 16 lower-case hex digits.
std::string hex64(std::uint64_t checksum);

constexpr std::size_t pad8(std::size_t n) { return (n + 7) & ~std::size_t{7}; }

/// Total bytes of a block whose payload has `payload_bytes` bytes.
constexpr std::size_t block_bytes(std::size_t payload_bytes) {
  return sizeof(BlockHeader) + pad8(payload_bytes) + sizeof(std::uint64_t);
}

/// Writes v as LEB128 (7 bits a byte, low first); returns the end. Needs 5 bytes of room.
inline std::uint8_t* put_varint(std::uint8_t* p, std::uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}

/// Bytes past the end of a varint section that the decoders may read (and that must be readable).
inline constexpr std::size_t kVarintSlack = 80;

/// A LEB128 decoder: `count` values from [p, end) into out; returns the end of the last value and
/// sets `bad` on values of 2^32 or more, varints over 5 bytes, or running past `end`.
using VarintDecoder = const std::uint8_t* (*)(const std::uint8_t* p, const std::uint8_t* end,
                                              std::size_t count, std::uint32_t* out, bool& bad);

/// Every decoder this CPU can run (portable first); BlockDecoder uses the fastest. For tests.
std::vector<VarintDecoder> varint_decoders();

/// Names a block in error messages: "<file>: block L (global G): ...".
struct BlockName {
  const std::string& file;
  std::uint64_t local;
  std::uint64_t global;
};

/// Throws DataError naming the shard file and the block.
[[noreturn]] void block_error(const BlockName& name, const std::string& message);

/// Encodes blocks; one per thread, reused so that the steady state allocates nothing per block.
class BlockEncoder {
 public:
  /// `name` (the output's name) prefixes the DataError of a malformed row.
  BlockEncoder(Codec codec, int zstd_level, std::string name = "<rows>");
  ~BlockEncoder();
  BlockEncoder(const BlockEncoder&) = delete;
  BlockEncoder& operator=(const BlockEncoder&) = delete;

  /// Encodes `rows` as one complete block (header, payload, checksum) into `out`, resized to fit.
  /// Throws DataError naming `first_row + r` when row r's indices are not strictly increasing.
  void encode(const CsrView& rows, std::uint64_t block_index, std::uint64_t first_row,
              std::vector<std::uint8_t>& out);

 private:
  Codec codec_;
  int level_;
  std::string name_;
  ZSTD_CCtx_s* cctx_ = nullptr;
  std::vector<std::uint8_t> stream_;  // zstd: the packed section before compression
  std::vector<std::uint8_t> gaps_;    // zstd: the index gaps
};

/// Checks a block's checksum and header against its index entry; returns the header. `data` points
/// at the block's first byte and `entry.bytes` bytes are readable.
BlockHeader check_block(const std::uint8_t* data, const IndexEntry& entry, Codec codec,
                        const BlockName& name);

/// Raw codec: the block's rows as a view into its own bytes (no copy). Call check_block first.
CsrView raw_block_view(const std::uint8_t* data, const BlockName& name);

/// Where a decoded block lands: `rows` labels, rows + 1 offsets (the first is written too) and the
/// block's non-zeros. values == nullptr drops the values; otherwise a block without values is
/// written as ones.
struct BlockDestination {
  float* labels;
  std::uint32_t* offsets;
  std::uint32_t* indices;
  float* values;
  std::uint32_t nnz_base;  // added to every offset, so blocks concatenate into one CSR
  /// When set (with values), each value other than 0 and 1 is divided by divide_by[its index]:
  /// --scale maxabs when no feature's max |value| exceeds 1, so that a value 1 is its feature's
  /// maximum and stays 1. The zstd codec divides as it places the stored values, which spares a
  /// pass over every non-zero.
  const float* divide_by = nullptr;
};

/// Decodes checked blocks of either codec; one per thread (owns a ZSTD_DCtx and scratch).
class BlockDecoder {
 public:
  BlockDecoder();
  ~BlockDecoder();
  BlockDecoder(const BlockDecoder&) = delete;
  BlockDecoder& operator=(const BlockDecoder&) = delete;

  /// Decodes the block at `data` (already passed check_block) into `dest`. Throws DataError naming
  /// the block when its content is inconsistent.
  void decode(const std::uint8_t* data, Codec codec, const BlockName& name,
              const BlockDestination& dest);

 private:
  ZSTD_DCtx_s* dctx_ = nullptr;
  std::vector<std::uint8_t> stream_;
};

/// Appends the rows of block `data` to `out` (sized to fit); a convenience over BlockDecoder for
/// tests and verification.
void decode_block_append(BlockDecoder& decoder, const std::uint8_t* data, Codec codec,
                         const BlockName& name, CsrBuffer& out);

/// A read-only memory map of a whole file (its header and block index are parsed in place), and
/// its descriptor, through which a scan reads the blocks and advises the page cache; or the bytes
/// of a file that was never written, held in memory (a shard set in memory: ShardWriter's), which
/// read() copies and the page cache advice leaves alone.
class MappedFile {
 public:
  MappedFile() = default;
  /// Maps `path` (`map` false: only opens it, for read(); data() is then null); throws IoError.
  explicit MappedFile(const std::string& path, bool map = true);
  /// The file whose bytes are `bytes`, held by this object.
  explicit MappedFile(std::vector<std::uint8_t> bytes);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  /// Copies [offset, offset + size) into `into` (pread, no mapping; `path` names the file in
  /// errors); throws IoError, also when the file ends first (it was cut short after it was opened).
  void read(std::size_t offset, std::size_t size, void* into, const std::string& path) const;
  /// Starts reading [offset, offset + size) into the page cache and returns without waiting for
  /// it (posix_fadvise WILLNEED: the kernel queues the reads, up to its read-ahead size a request).
  void will_need(std::size_t offset, std::size_t size) const;
  /// Drops the page cache's clean pages of [offset, offset + size) that no process maps
  /// (posix_fadvise DONTNEED): pages a streaming pass is done with stop competing with the memory
  /// of the weights.
  void drop_cached(std::size_t offset, std::size_t size) const;

 private:
  void release();

  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;                     // kept open for the page cache advice above; -1 in memory
  std::vector<std::uint8_t> held_;  // in memory: the bytes data_ points at
};

}  // namespace polymargin::io::shard
