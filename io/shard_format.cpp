#include "io/shard_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "engine/errors.h"

namespace polymargin::io::shard {

static_assert(std::endian::native == std::endian::little,
              "the shard format is little-endian and read in place");

namespace {

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte sizes of the raw payload's arrays, each padded so that the next one stays 8-byte aligned.
struct RawLayout {
  std::size_t labels, offsets, indices, values;
  RawLayout(std::size_t rows, std::size_t nnz, bool has_values)
      : labels(pad8(4 * rows)),
        offsets(pad8(4 * (rows + 1))),
        indices(pad8(4 * nnz)),
        values(has_values ? pad8(4 * nnz) : 0) {}
  std::size_t total() const { return labels + offsets + indices + values; }
};

// Copies n bytes to p and zero-fills up to `padded`; returns p + padded.
std::uint8_t* put_padded(std::uint8_t* p, const void* src, std::size_t n, std::size_t padded) {
  if (n > 0) std::memcpy(p, src, n);
  std::memset(p + n, 0, padded - n);
  return p + padded;
}

// One pass over the rows before encoding: the writer's only guard of the CSR contract (strictly
// increasing indices, which the gap coding relies on). Returns whether any value differs from 1.
bool check_rows(const CsrView& rows, std::uint64_t first_row, const std::string& name) {
  for (std::size_t r = 0; r < rows.rows; ++r) {
    for (std::uint32_t k = rows.offsets[r] + 1; k < rows.offsets[r + 1]; ++k)
      if (rows.indices[k] <= rows.indices[k - 1])
        throw DataError(name, 0, 0,
                        "row " + std::to_string(first_row + r + 1) +
                            ": feature indices are not strictly increasing (" +
                            std::to_string(rows.indices[k - 1]) + " then " +
                            std::to_string(rows.indices[k]) + ")");
  }
  if (!rows.values) return false;
  const float* v = rows.values + rows.offsets[0];
  return std::any_of(v, v + rows.nnz(), [](float x) { return x != 1.0f; });
}

// Decoding `count` LEB128 varints from [p, end) into out: both variants return the end of the last
// one and set `bad` for values of 2^32 or more, varints longer than 5 bytes and running past `end`.
// They read ahead of p, so kVarintSlack bytes past `end` must be readable (BlockDecoder keeps that
// much zeroed slack after its stream).
//
// Index gaps of sparse data take 1 to 4 bytes in no predictable order, so a byte loop mispredicts
// about once a value; both variants are branch-free within a value.
// Portable: one 8-byte load a value, the 7-bit groups gathered with shifts and masks. The next
// load waits for this one's length, so this runs at about load latency (3–4 ns a value).
const std::uint8_t* decode_varints_portable(const std::uint8_t* p, const std::uint8_t* end,
                                            std::size_t count, std::uint32_t* out, bool& bad) {
  std::uint64_t invalid = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (p >= end) {
      bad = true;
      return p;
    }
    const std::uint64_t x = load<std::uint64_t>(p);
    // High bit clear marks a varint's last byte; the sentinel at byte 5 flags one that is longer.
    const std::uint64_t stops = (~x & 0x0000008080808080ull) | 0x0000800000000000ull;
    const unsigned len = static_cast<unsigned>(std::countr_zero(stops)) / 8 + 1;
    const std::uint64_t v = ((x & 0x7f) | ((x >> 1) & 0x3f80) | ((x >> 2) & 0x1fc000) |
                             ((x >> 3) & 0xfe00000) | ((x >> 4) & 0x7f0000000ull)) &
                            ((std::uint64_t{1} << (7 * len)) - 1);
    invalid |= (v >> 32) | (len > 5);
    out[k] = static_cast<std::uint32_t>(v);
    p += len;
  }
  bad |= invalid != 0;
  return p;
}

#if defined(__x86_64__) && defined(__GNUC__)
// BMI2: the last bytes of all varints in a 64-byte window are found at once (pext of the high
// bits), so the values of a window no longer wait on each other's loads, and pext gathers the 7-bit
// groups in one instruction. About 1.6x the portable speed where pext is fast.
__attribute__((target("bmi2"))) const std::uint8_t* decode_varints_bmi2(const std::uint8_t* p,
                                                                        const std::uint8_t* end,
                                                                        std::size_t count,
                                                                        std::uint32_t* out,
                                                                        bool& bad) {
  std::uint64_t invalid = 0;
  std::size_t k = 0;
  while (k < count) {
    if (p >= end) {
      bad = true;
      return p;
    }
    std::uint64_t stops = 0;  // bit i: byte p[i] ends a varint
    for (int w = 0; w < 8; ++w)
      stops |= _pext_u64(~load<std::uint64_t>(p + 8 * w), 0x8080808080808080ull) << (8 * w);
    if (stops == 0) {  // no varint ends within 64 bytes
      bad = true;
      return p;
    }
    unsigned begin = 0;  // byte offset of the current varint in the window
    do {
      const unsigned stop = static_cast<unsigned>(std::countr_zero(stops)) + 1;
      const unsigned bits = (stop - begin) * 8;
      invalid |= bits > 40;
      const std::uint64_t v =
          _pext_u64(_bzhi_u64(load<std::uint64_t>(p + begin), bits), 0x7f7f7f7f7full);
      invalid |= v >> 32;
      out[k++] = static_cast<std::uint32_t>(v);
      begin = stop;
      stops &= stops - 1;
    } while (stops != 0 && k < count);
    p += begin;
  }
  bad |= invalid != 0;
  return p;
}

// pext is fast on Intel since Haswell and on AMD since Zen 3, but microcoded (hundreds of cycles)
// on earlier AMD and Hygon parts, where the portable form wins.
bool use_bmi2() {
  static const bool fast = [] {
    if (!__builtin_cpu_supports("bmi2")) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
    if (ebx == 0x6f677948 /* "Hygo"n: Zen 1 based */) return false;
    if (ebx != 0x68747541 /* "Auth"enticAMD */) return true;
    __get_cpuid(1, &eax, &ebx, &ecx, &edx);
    const unsigned family = ((eax >> 8) & 0xf) + ((eax >> 20) & 0xff);
    return family >= 0x19;
  }();
  return fast;
}
#endif

const std::uint8_t* decode_varints(const std::uint8_t* p, const std::uint8_t* end,
                                   std::size_t count, std::uint32_t* out, bool& bad) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (use_bmi2()) return decode_varints_bmi2(p, end, count, out, bad);
#endif
  return decode_varints_portable(p, end, count, out, bad);
}

}  // namespace

std::vector<VarintDecoder> varint_decoders() {
  std::vector<VarintDecoder> all = {&decode_varints_portable};
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("bmi2")) all.push_back(&decode_varints_bmi2);
#endif
  return all;
}

std::uint64_t checksum(const void* data, std::size_t size) { return XXH3_64bits(data, size); }

void block_error(const BlockName& name, const std::string& message) {
  throw DataError(name.file, 0, 0,
                  "block " + std::to_string(name.local) + " (global block " +
                      std::to_string(name.global) + "): " + message);
}

std::string hex64(std::uint64_t checksum) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(checksum));
  return text;
}

BlockEncoder::BlockEncoder(Codec codec, int zstd_level, std::string name)
    : codec_(codec), level_(zstd_level), name_(std::move(name)) {
  if (codec_ == Codec::kZstd) {
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) throw std::bad_alloc();
  }
}

BlockEncoder::~BlockEncoder() { ZSTD_freeCCtx(cctx_); }

void BlockEncoder::encode(const CsrView& rows, std::uint64_t block_index, std::uint64_t first_row,
                          std::vector<std::uint8_t>& out) {
  const std::size_t n_rows = rows.rows, nnz = rows.nnz();
  const bool has_values = check_rows(rows, first_row, name_);
  const std::uint32_t base = n_rows == 0 ? 0 : rows.offsets[0];
  const std::uint32_t* indices = rows.indices + base;
  const float* values = rows.values ? rows.values + base : nullptr;

  BlockHeader header{};
  std::memcpy(header.magic, kBlockMagic, sizeof header.magic);
  header.flags = has_values ? kBlockHasValues : 0;
  header.rows = static_cast<std::uint32_t>(n_rows);
  header.nnz = static_cast<std::uint32_t>(nnz);
  header.block_index = block_index;
  header.first_row = first_row;

  std::size_t payload = 0;
  if (codec_ == Codec::kRaw) {
    const RawLayout layout(n_rows, nnz, has_values);
    payload = layout.total();
    out.resize(block_bytes(payload));
    std::uint8_t* p = out.data() + sizeof(BlockHeader);
    p = put_padded(p, rows.labels, 4 * n_rows, layout.labels);
    auto* offsets = reinterpret_cast<std::uint32_t*>(p);
    for (std::size_t r = 0; r <= n_rows; ++r)
      offsets[r] = (n_rows == 0 ? 0 : rows.offsets[r]) - base;
    std::memset(p + 4 * (n_rows + 1), 0, layout.offsets - 4 * (n_rows + 1));
    p += layout.offsets;
    p = put_padded(p, indices, 4 * nnz, layout.indices);
    if (has_values) put_padded(p, values, 4 * nnz, layout.values);
    header.decoded_bytes = payload;
  } else {
    // The compressed part: row lengths, values, labels. The index gaps go after it as they are.
    stream_.resize(5 * n_rows + 5 * nnz + 8);
    std::uint8_t* p = stream_.data();
    for (std::size_t r = 0; r < n_rows; ++r)
      p = put_varint(p, rows.offsets[r + 1] - rows.offsets[r]);
    if (has_values) {  // a bitmap of the entries whose value is not 1, then those values
      const std::size_t bitmap = (nnz + 7) / 8;
      std::memset(p, 0, bitmap);
      float* other = reinterpret_cast<float*>(p + bitmap);  // memcpy'd: may be unaligned
      std::size_t count = 0;
      for (std::size_t k = 0; k < nnz; ++k)
        if (values[k] != 1.0f) {
          p[k / 8] |= static_cast<std::uint8_t>(1u << (k % 8));
          std::memcpy(other + count++, values + k, 4);
        }
      p += bitmap + 4 * count;
    }
    if (n_rows > 0) std::memcpy(p, rows.labels, 4 * n_rows);
    p += 4 * n_rows;
    const std::uint64_t packed_bytes = static_cast<std::uint64_t>(p - stream_.data());

    gaps_.resize(5 * nnz);
    std::uint8_t* g = gaps_.data();
    for (std::size_t r = 0; r < n_rows; ++r) {
      std::uint32_t next = 0;  // smallest index the next entry may have
      for (std::uint32_t k = rows.offsets[r]; k < rows.offsets[r + 1]; ++k) {
        g = put_varint(g, rows.indices[k] - next);
        next = rows.indices[k] + 1;
      }
    }
    const std::size_t gap_bytes = static_cast<std::size_t>(g - gaps_.data());

    const std::size_t bound = ZSTD_compressBound(packed_bytes);
    out.resize(block_bytes(kPackedPrefix + bound + gap_bytes));
    std::uint8_t* const body = out.data() + sizeof(BlockHeader);
    const std::size_t size = ZSTD_compressCCtx(cctx_, body + kPackedPrefix, bound, stream_.data(),
                                               packed_bytes, level_);
    if (ZSTD_isError(size))
      throw IoError(std::string("zstd compression failed: ") + ZSTD_getErrorName(size));
    const std::uint64_t prefix[2] = {packed_bytes, size};
    std::memcpy(body, prefix, kPackedPrefix);
    if (gap_bytes > 0) std::memcpy(body + kPackedPrefix + size, gaps_.data(), gap_bytes);
    header.decoded_bytes = packed_bytes + gap_bytes;
    const std::size_t total = kPackedPrefix + size + gap_bytes;
    payload = total;
    out.resize(block_bytes(payload));
    std::memset(out.data() + sizeof(BlockHeader) + payload, 0, pad8(payload) - payload);
  }
  header.payload_bytes = payload;
  std::memcpy(out.data(), &header, sizeof header);
  const std::size_t checked = out.size() - sizeof(std::uint64_t);
  const std::uint64_t sum = checksum(out.data(), checked);
  std::memcpy(out.data() + checked, &sum, sizeof sum);
}

BlockHeader check_block(const std::uint8_t* data, const IndexEntry& entry, Codec codec,
                        const BlockName& name) {
  if (entry.bytes < block_bytes(0) || entry.bytes % 8 != 0)
    block_error(name, "impossible size " + std::to_string(entry.bytes) + " in the block index");
  const std::size_t checked = entry.bytes - sizeof(std::uint64_t);
  const std::uint64_t stored = load<std::uint64_t>(data + checked);
  const std::uint64_t actual = checksum(data, checked);
  if (stored != actual)
    block_error(name, "checksum mismatch (stored " + hex64(stored) + ", computed " + hex64(actual) +
                          "): the shard is corrupt");
  const BlockHeader h = load<BlockHeader>(data);
  // A block whose checksum holds but whose header disagrees with the index was not written by the
  // index's writer (e.g. spliced in from another file): refuse it just the same.
  if (std::memcmp(h.magic, kBlockMagic, sizeof h.magic) != 0 || (h.flags & ~kBlockHasValues) != 0)
    block_error(name, "not a block header");
  // (payload_bytes is compared first: block_bytes of a value near 2^64 wraps around.)
  if (h.block_index != name.global || h.rows != entry.rows || h.nnz != entry.nnz ||
      h.payload_bytes > entry.bytes || block_bytes(h.payload_bytes) != entry.bytes)
    block_error(name, "header does not match the block index");
  const bool has_values = h.flags & kBlockHasValues;
  if (codec == Codec::kRaw && (h.payload_bytes != RawLayout(h.rows, h.nnz, has_values).total() ||
                               h.decoded_bytes != h.payload_bytes))
    block_error(name, "raw payload size does not match its rows and non-zeros");
  // Largest stream: 5-byte varints, a full bitmap and every value stored, the labels.
  if (codec == Codec::kZstd &&
      h.decoded_bytes > std::uint64_t{9} * h.rows + std::uint64_t{10} * h.nnz + 1)
    block_error(name, "implausible decoded size " + std::to_string(h.decoded_bytes));
  return h;
}

CsrView raw_block_view(const std::uint8_t* data, const BlockName& name) {
  const BlockHeader h = load<BlockHeader>(data);
  const RawLayout layout(h.rows, h.nnz, h.flags & kBlockHasValues);
  const std::uint8_t* p = data + sizeof(BlockHeader);
  CsrView v;
  v.rows = h.rows;
  v.labels = reinterpret_cast<const float*>(p);
  v.offsets = reinterpret_cast<const std::uint32_t*>(p + layout.labels);
  v.indices = reinterpret_cast<const std::uint32_t*>(p + layout.labels + layout.offsets);
  v.values =
      layout.values
          ? reinterpret_cast<const float*>(p + layout.labels + layout.offsets + layout.indices)
          : nullptr;
  // Offsets are trusted by every consumer to index the arrays: check them once, O(rows).
  bool ok = v.offsets[0] == 0 && v.offsets[h.rows] == h.nnz;
  for (std::size_t r = 0; ok && r < h.rows; ++r) ok = v.offsets[r] <= v.offsets[r + 1];
  if (!ok) block_error(name, "row offsets are inconsistent");
  return v;
}

namespace {

// Divides values[k] by m[indices[k]] for the positions k it is given, each kAhead positions after
// its maximum was requested: the table is tens of MB at KDD size and read at random, so the
// misses overlap instead of each stalling the loop.
class LaggedDivider {
 public:
  LaggedDivider(float* values, const std::uint32_t* indices, const float* m)
      : values_(values), indices_(indices), m_(m) {}
  void add(std::uint32_t k) {
    __builtin_prefetch(m_ + indices_[k]);
    if (n_ >= kAhead) divide(pending_[n_ % kAhead]);
    pending_[n_ % kAhead] = k;
    ++n_;
  }
  void finish() {
    for (std::size_t i = n_ > kAhead ? n_ - kAhead : 0; i < n_; ++i) divide(pending_[i % kAhead]);
    n_ = 0;
  }

 private:
  static constexpr std::size_t kAhead = 16;
  void divide(std::uint32_t k) { values_[k] /= m_[indices_[k]]; }
  float* values_;
  const std::uint32_t* indices_;
  const float* m_;
  std::uint32_t pending_[kAhead];
  std::size_t n_ = 0;
};

}  // namespace

BlockDecoder::BlockDecoder() = default;

BlockDecoder::~BlockDecoder() { ZSTD_freeDCtx(dctx_); }

void BlockDecoder::decode(const std::uint8_t* data, Codec codec, const BlockName& name,
                          const BlockDestination& dest) {
  const BlockHeader h = load<BlockHeader>(data);
  const std::uint32_t rows = h.rows, nnz = h.nnz;
  const bool has_values = h.flags & kBlockHasValues;
  if (codec == Codec::kRaw) {
    const CsrView v = raw_block_view(data, name);
    if (rows > 0) std::memcpy(dest.labels, v.labels, 4 * std::size_t{rows});
    for (std::uint32_t r = 0; r <= rows; ++r) dest.offsets[r] = dest.nnz_base + v.offsets[r];
    if (nnz > 0) std::memcpy(dest.indices, v.indices, 4 * std::size_t{nnz});
    if (dest.values && has_values) std::memcpy(dest.values, v.values, 4 * std::size_t{nnz});
    if (dest.values && !has_values) std::fill_n(dest.values, nnz, 1.0f);
    if (dest.values && has_values && dest.divide_by) {
      LaggedDivider divider(dest.values, dest.indices, dest.divide_by);
      for (std::uint32_t k = 0; k < nnz; ++k)
        if (dest.values[k] != 1.0f && dest.values[k] != 0.0f) divider.add(k);
      divider.finish();
    }
    return;
  }

  if (!dctx_) {
    dctx_ = ZSTD_createDCtx();
    if (!dctx_) throw std::bad_alloc();
  }
  // The payload: packed size, compressed size, the zstd frame of row lengths | values | labels,
  // then the index gaps as stored. Both land in stream_, the gaps last, with zeroed slack after
  // them for decode_varints' read-ahead.
  const std::uint8_t* const body = data + sizeof(BlockHeader);
  if (h.payload_bytes < kPackedPrefix) block_error(name, "payload too short");
  std::uint64_t prefix[2];
  std::memcpy(prefix, body, kPackedPrefix);
  const std::uint64_t packed_bytes = prefix[0], frame_bytes = prefix[1];
  if (frame_bytes > h.payload_bytes - kPackedPrefix || packed_bytes > h.decoded_bytes ||
      h.decoded_bytes - packed_bytes != h.payload_bytes - kPackedPrefix - frame_bytes)
    block_error(name, "section sizes do not match the block header");
  const std::uint64_t gap_bytes = h.decoded_bytes - packed_bytes;
  stream_.resize(h.decoded_bytes + kVarintSlack);
  std::memset(stream_.data() + h.decoded_bytes, 0, kVarintSlack);
  const std::size_t got = ZSTD_decompressDCtx(dctx_, stream_.data(), packed_bytes,
                                              body + kPackedPrefix, frame_bytes);
  if (ZSTD_isError(got)) block_error(name, std::string("zstd: ") + ZSTD_getErrorName(got));
  if (got != packed_bytes) block_error(name, "zstd frame decodes to the wrong size");
  if (gap_bytes > 0)
    std::memcpy(stream_.data() + packed_bytes, body + kPackedPrefix + frame_bytes, gap_bytes);

  const std::uint8_t* const packed_end = stream_.data() + packed_bytes;
  const std::uint8_t* const labels = packed_end - 4 * std::size_t{rows};
  const std::size_t bitmap = has_values ? (std::size_t{nnz} + 7) / 8 : 0;
  if (packed_bytes < 4 * std::size_t{rows} + bitmap) block_error(name, "decoded stream too short");

  // Row lengths land in offsets[1..rows] and are summed in place.
  bool bad = false;
  const std::uint8_t* p = decode_varints(stream_.data(), labels - bitmap, rows, dest.offsets + 1, bad);
  if (bad || p > labels - bitmap) block_error(name, "malformed row lengths");
  std::uint64_t total = 0;
  dest.offsets[0] = dest.nnz_base;
  for (std::uint32_t r = 1; r <= rows; ++r) {
    total += dest.offsets[r];
    if (total > nnz) block_error(name, "row lengths exceed the block's non-zeros");
    dest.offsets[r] = dest.nnz_base + static_cast<std::uint32_t>(total);
  }
  if (total != nnz) block_error(name, "row lengths do not add up to the block's non-zeros");
  const std::uint8_t* const value_bits = p;

  // Gaps first, for the whole block in one pass; then each row's running sum turns gaps into
  // indices (a row's first gap is its first index; later ones are index - previous - 1).
  p = decode_varints(packed_end, packed_end + gap_bytes, nnz, dest.indices, bad);
  if (bad || p != packed_end + gap_bytes) block_error(name, "malformed feature indices");
  for (std::uint32_t r = 0; r < rows; ++r) {
    std::uint32_t* idx = dest.indices + (dest.offsets[r] - dest.nnz_base);
    const std::uint32_t n = dest.offsets[r + 1] - dest.offsets[r];
    std::uint64_t prev = ~std::uint64_t{0};  // -1, so the first index is the first gap
    for (std::uint32_t k = 0; k < n; ++k) {
      prev += std::uint64_t{idx[k]} + 1;
      idx[k] = static_cast<std::uint32_t>(prev);
    }
    // Gaps are below 2^32 and at most kMaxBlockNnz a row, so 64 bits cannot overflow and the last
    // (largest) index bounds the row.
    if (n > 0 && prev > UINT32_MAX)
      block_error(name, "feature index beyond 2^32 in row " + std::to_string(r));
  }
  // Values: the bitmap of entries that are not 1, then their values in entry order; every byte of
  // the packed section must be accounted for.
  p = value_bits;
  // Bits counted by table: without -mpopcnt, std::popcount is a libgcc call per byte.
  static constexpr auto kBits = [] {
    std::array<std::uint8_t, 256> bits{};
    for (unsigned b = 1; b < 256; ++b) bits[b] = static_cast<std::uint8_t>((b & 1) + bits[b / 2]);
    return bits;
  }();
  std::size_t others = 0;
  for (std::size_t b = 0; b < bitmap; ++b) others += kBits[p[b]];
  if (has_values && nnz % 8 != 0 && (p[bitmap - 1] >> (nnz % 8)) != 0)
    block_error(name, "value bitmap has bits past the last non-zero");
  if (static_cast<std::size_t>(labels - p) != bitmap + 4 * others)
    block_error(name, "sections of the decoded stream do not add up");
  if (dest.values) {
    std::fill_n(dest.values, nnz, 1.0f);
    const std::uint8_t* other = p + bitmap;
    if (!dest.divide_by) {
      for (std::size_t b = 0; b < bitmap; ++b)
        for (unsigned bits = p[b]; bits != 0; bits &= bits - 1) {
          std::memcpy(dest.values + 8 * b + std::countr_zero(bits), other, 4);
          other += 4;
        }
    } else {  // the bitmap lists exactly the values that may need dividing
      LaggedDivider divider(dest.values, dest.indices, dest.divide_by);
      for (std::size_t b = 0; b < bitmap; ++b)
        for (unsigned bits = p[b]; bits != 0; bits &= bits - 1) {
          const std::uint32_t k = static_cast<std::uint32_t>(8 * b + std::countr_zero(bits));
          std::memcpy(dest.values + k, other, 4);
          other += 4;
          if (dest.values[k] != 0.0f) divider.add(k);
        }
      divider.finish();
    }
  }
  p = labels;
  if (rows > 0) std::memcpy(dest.labels, p, 4 * std::size_t{rows});
}

void decode_block_append(BlockDecoder& decoder, const std::uint8_t* data, Codec codec,
                         const BlockName& name, CsrBuffer& out) {
  const BlockHeader h = load<BlockHeader>(data);
  const std::size_t rows0 = out.rows(), nnz0 = out.nnz();
  if ((h.flags & kBlockHasValues) && !out.has_values) out.ensure_values();
  out.labels.resize(rows0 + h.rows);
  out.offsets.resize(rows0 + h.rows + 1);
  out.indices.resize(nnz0 + h.nnz);
  if (out.has_values) out.values.resize(nnz0 + h.nnz);
  decoder.decode(
      data, codec, name,
      {out.labels.data() + rows0, out.offsets.data() + rows0, out.indices.data() + nnz0,
       out.has_values ? out.values.data() + nnz0 : nullptr, static_cast<std::uint32_t>(nnz0)});
}

MappedFile::MappedFile(const std::string& path, bool map) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError("cannot stat " + path + ": " + std::strerror(err));
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0 && map) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw IoError("cannot map " + path + ": " + std::strerror(err));
    }
    data_ = static_cast<const std::uint8_t*>(p);
  }
  fd_ = fd;
}

MappedFile::MappedFile(std::vector<std::uint8_t> bytes)
    : data_(bytes.data()), size_(bytes.size()), held_(std::move(bytes)) {}

void MappedFile::release() {
  if (data_ && fd_ >= 0) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  held_ = {};
}

MappedFile::~MappedFile() { release(); }

// A vector's move keeps its buffer where it is, so data_ stays valid in the new owner.
MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)),
      held_(std::move(other.held_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::move(other.held_);
  }
  return *this;
}

void MappedFile::read(std::size_t offset, std::size_t size, void* into,
                      const std::string& path) const {
  if (fd_ < 0) {  // in memory
    if (offset > size_ || size > size_ - offset)
      throw IoError("cannot read " + path + " at byte " + std::to_string(offset) +
                    ": past its end");
    if (size > 0) std::memcpy(into, data_ + offset, size);
    return;
  }
  auto* out = static_cast<std::uint8_t*>(into);
  while (size > 0) {
    const ssize_t got = ::pread(fd_, out, size, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw IoError("cannot read " + path + " at byte " + std::to_string(offset) + ": " +
                    std::strerror(errno));
    }
    if (got == 0)
      throw IoError("cannot read " + path + " at byte " + std::to_string(offset) +
                    ": the file was cut short while it was being read");
    out += got;
    offset += static_cast<std::size_t>(got);
    size -= static_cast<std::size_t>(got);
  }
}

// Advisory: a failure leaves the page cache as it was.
void MappedFile::will_need(std::size_t offset, std::size_t size) const {
  if (fd_ >= 0 && size > 0)
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_WILLNEED);
}

void MappedFile::drop_cached(std::size_t offset, std::size_t size) const {
  if (fd_ >= 0 && size > 0)
    ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_DONTNEED);
}

}  // namespace polymargin::io::shard
