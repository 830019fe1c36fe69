// The block codec alone: round trips, checksums, malformed content, the shuffle generator.
#include "io/shard_format.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "engine/errors.h"
#include "engine/random.h"
#include "tests/io/shard_test_util.h"

namespace polymargin::io::shard {
namespace {

using testing::random_rows;
using testing::rows_of;
using testing::Values;

const std::string kFile = "test.pms";

IndexEntry entry_of(const std::vector<std::uint8_t>& block) {
  BlockHeader h;
  std::memcpy(&h, block.data(), sizeof h);
  return {0, block.size(), h.rows, h.nnz};
}

CsrBuffer decode(const std::vector<std::uint8_t>& block, Codec codec, std::uint64_t global = 0) {
  const BlockName name{kFile, 0, global};
  check_block(block.data(), entry_of(block), codec, name);
  BlockDecoder decoder;
  CsrBuffer out;
  decode_block_append(decoder, block.data(), codec, name, out);
  return out;
}

class ShardBlockRoundTrip : public ::testing::TestWithParam<Codec> {};

// Property: decode(encode(rows)) == rows for random rows of every shape, with and without values.
TEST_P(ShardBlockRoundTrip, RandomRowsComeBackExactly) {
  const Codec codec = GetParam();
  BlockEncoder encoder(codec, 3);
  std::vector<std::uint8_t> block;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    for (const Values values : {Values::kNone, Values::kOnes, Values::kRandom, Values::kSomeRows,
                                Values::kMostlyOnes}) {
      const std::size_t n_rows = seed % 5 == 0 ? 1 : seed * 37 % 700;
      const std::uint32_t max_index = seed % 3 == 0 ? 50 : seed % 3 == 1 ? 20'200'000 : UINT32_MAX;
      const CsrBuffer rows = random_rows(seed, n_rows, seed % 4 == 0 ? 0 : 80, max_index, values);
      encoder.encode(rows.view(), seed, 1000 * seed, block);
      ASSERT_EQ(block.size() % 8, 0u);
      const CsrBuffer back = decode(block, codec, seed);
      EXPECT_EQ(rows_of(back.view()), rows_of(rows.view())) << "seed " << seed;
      BlockHeader h;
      std::memcpy(&h, block.data(), sizeof h);
      const bool non_unit = values == Values::kRandom || values == Values::kSomeRows ||
                            values == Values::kMostlyOnes;
      // Values equal to 1 everywhere are not stored (unless no row has any entry with another).
      if (!non_unit) {
        EXPECT_EQ(h.flags & kBlockHasValues, 0u);
      }
      EXPECT_EQ(back.has_values, (h.flags & kBlockHasValues) != 0);
      EXPECT_EQ(h.first_row, 1000 * seed);
    }
  }
}

TEST_P(ShardBlockRoundTrip, ViewWithNonZeroFirstOffsetIsRebased) {
  const CsrBuffer rows = random_rows(7, 50, 20, 1000, Values::kRandom);
  CsrView tail = rows.view();
  tail.rows -= 10;
  tail.labels += 10;
  tail.offsets += 10;  // offsets[0] > 0: indices and values stay based at the buffer's start
  BlockEncoder encoder(GetParam(), 1);
  std::vector<std::uint8_t> block;
  encoder.encode(tail, 0, 0, block);
  EXPECT_EQ(rows_of(decode(block, GetParam()).view()), rows_of(tail));
}

TEST_P(ShardBlockRoundTrip, EveryCorruptByteIsCaughtAndNamesTheBlock) {
  const Codec codec = GetParam();
  const CsrBuffer rows = random_rows(3, 40, 12, 100000, Values::kRandom);
  BlockEncoder encoder(codec, 3);
  std::vector<std::uint8_t> block;
  encoder.encode(rows.view(), 17, 0, block);
  for (std::size_t at = 0; at < block.size(); at += 1 + at / 16) {
    auto bad = block;
    bad[at] ^= 0x20;
    try {
      check_block(bad.data(), entry_of(block), codec, {kFile, 5, 17});
      ADD_FAILURE() << "flipped byte " << at << " was not detected";
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), kFile);
      EXPECT_NE(e.message().find("block 5 (global block 17)"), std::string::npos) << e.what();
    }
  }
}

TEST_P(ShardBlockRoundTrip, BlockPassedOffAsAnotherIsRefused) {
  const CsrBuffer rows = random_rows(4, 10, 5, 100, Values::kNone);
  BlockEncoder encoder(GetParam(), 3);
  std::vector<std::uint8_t> block;
  encoder.encode(rows.view(), 2, 0, block);
  EXPECT_THROW(check_block(block.data(), entry_of(block), GetParam(), {kFile, 0, 3}), DataError);
}

// Found by fuzz/block_decoder_fuzz: a payload size near 2^64 made block_bytes() wrap around to
// the block's true length, so the header passed and the decoder read past the block.
TEST_P(ShardBlockRoundTrip, PayloadSizeThatWrapsAroundIsRefused) {
  const CsrBuffer rows = random_rows(4, 10, 5, 100, Values::kNone);
  BlockEncoder encoder(GetParam(), 3);
  std::vector<std::uint8_t> block;
  encoder.encode(rows.view(), 0, 0, block);
  for (const std::uint64_t payload : {~std::uint64_t{0}, ~std::uint64_t{0} - 7}) {
    std::vector<std::uint8_t> forged(block_bytes(0), 0);  // header and checksum only
    BlockHeader h;
    std::memcpy(&h, block.data(), sizeof h);
    h.payload_bytes = payload;
    std::memcpy(forged.data(), &h, sizeof h);
    const std::uint64_t sum = checksum(forged.data(), forged.size() - 8);
    std::memcpy(forged.data() + forged.size() - 8, &sum, 8);
    const IndexEntry entry{0, forged.size(), h.rows, h.nnz};
    EXPECT_THROW(check_block(forged.data(), entry, GetParam(), {kFile, 0, 0}), DataError)
        << payload;
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, ShardBlockRoundTrip, ::testing::Values(Codec::kRaw, Codec::kZstd),
                         [](const auto& info) { return codec_name(info.param); });

TEST(ShardBlockEncoder, IndicesNotIncreasingAreADataError) {
  CsrBuffer rows;
  rows.labels = {1};
  rows.indices = {5, 5};
  rows.offsets = {0, 2};
  BlockEncoder encoder(Codec::kZstd, 3, "out.shards");
  std::vector<std::uint8_t> block;
  try {
    encoder.encode(rows.view(), 0, 41, block);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(e.file(), "out.shards");
    EXPECT_NE(e.message().find("row 42"), std::string::npos) << e.what();
  }
}

TEST(ShardBlockEncoder, RawArraysAreAlignedForZeroCopy) {
  const CsrBuffer rows = random_rows(9, 33, 7, 1000, Values::kRandom);  // odd sizes
  BlockEncoder encoder(Codec::kRaw, 0);
  std::vector<std::uint8_t> block;
  encoder.encode(rows.view(), 0, 0, block);
  const CsrView v = raw_block_view(block.data(), {kFile, 0, 0});
  for (const void* p : {static_cast<const void*>(v.labels), static_cast<const void*>(v.offsets),
                        static_cast<const void*>(v.indices), static_cast<const void*>(v.values)})
    EXPECT_EQ(
        (reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(block.data())) % 8,
        0u);
  EXPECT_EQ(rows_of(v), rows_of(rows.view()));
}

// A zstd block with a valid checksum but a malformed stream (as a buggy writer could produce) is
// refused by the decoder, not read out of bounds.
// A zstd block rebuilt from its two sections (and the prefix's sizes, when `frame_bytes` is given
// they replace the true one), with a valid checksum: only the decoder's own checks can refuse it.
std::vector<std::uint8_t> zstd_block(const BlockHeader& h, const std::vector<std::uint8_t>& packed,
                                     const std::vector<std::uint8_t>& gaps,
                                     std::int64_t frame_bytes_delta = 0) {
  std::vector<std::uint8_t> frame(ZSTD_compressBound(packed.size()));
  frame.resize(ZSTD_compress(frame.data(), frame.size(), packed.data(), packed.size(), 1));
  BlockHeader bh = h;
  bh.payload_bytes = kPackedPrefix + frame.size() + gaps.size();
  bh.decoded_bytes = packed.size() + gaps.size();
  std::vector<std::uint8_t> block(block_bytes(bh.payload_bytes), 0);
  std::memcpy(block.data(), &bh, sizeof bh);
  const std::uint64_t prefix[2] = {packed.size(), frame.size() + frame_bytes_delta};
  std::uint8_t* body = block.data() + sizeof bh;
  std::memcpy(body, prefix, kPackedPrefix);
  std::memcpy(body + kPackedPrefix, frame.data(), frame.size());
  if (!gaps.empty()) std::memcpy(body + kPackedPrefix + frame.size(), gaps.data(), gaps.size());
  const std::uint64_t sum = checksum(block.data(), block.size() - 8);
  std::memcpy(block.data() + block.size() - 8, &sum, 8);
  return block;
}

TEST(ShardBlockDecoder, MalformedStreamWithValidChecksumIsRefused) {
  const CsrBuffer rows = random_rows(5, 20, 10, 5000, Values::kMostlyOnes);
  BlockEncoder encoder(Codec::kZstd, 3);
  std::vector<std::uint8_t> block;
  encoder.encode(rows.view(), 0, 0, block);
  BlockHeader h;
  std::memcpy(&h, block.data(), sizeof h);
  const std::uint8_t* body = block.data() + sizeof h;
  std::uint64_t prefix[2];
  std::memcpy(prefix, body, kPackedPrefix);
  std::vector<std::uint8_t> packed(prefix[0]);
  ASSERT_EQ(ZSTD_decompress(packed.data(), packed.size(), body + kPackedPrefix, prefix[1]),
            packed.size());
  const std::vector<std::uint8_t> gaps(body + kPackedPrefix + prefix[1],
                                       body + h.payload_bytes);
  // The sections as they are decode back to the rows: the rebuild itself is sound.
  EXPECT_EQ(rows_of(decode(zstd_block(h, packed, gaps), Codec::kZstd).view()),
            rows_of(rows.view()));
  // A row length that never ends or is huge, a bitmap bit too many, a gap that never ends, a
  // section cut short, sizes in the prefix that contradict the header.
  // (A byte inside a value or a label, or a continuation byte, changes a number, not the
  // structure: only the checksum can catch that, and does, in the test above.)
  for (const std::size_t at : {std::size_t{0}, std::size_t{1}}) {
    auto broken = packed;
    broken[at] = 0xff;
    EXPECT_THROW(decode(zstd_block(h, broken, gaps), Codec::kZstd), DataError) << "packed " << at;
  }
  const auto first_end = static_cast<std::size_t>(
      std::find_if(gaps.begin(), gaps.end(), [](std::uint8_t b) { return b < 0x80; }) -
      gaps.begin());
  for (const std::size_t at : {first_end, gaps.size() - 1}) {
    auto broken = gaps;
    broken[at] = 0xff;  // the varint that ended here runs on
    EXPECT_THROW(decode(zstd_block(h, packed, broken), Codec::kZstd), DataError) << "gaps " << at;
  }
  EXPECT_THROW(decode(zstd_block(h, packed, {gaps.begin(), gaps.end() - 1}), Codec::kZstd),
               DataError);
  EXPECT_THROW(decode(zstd_block(h, {packed.begin(), packed.end() - 1}, gaps), Codec::kZstd),
               DataError);
  EXPECT_THROW(decode(zstd_block(h, packed, gaps, 1), Codec::kZstd), DataError);
  EXPECT_THROW(decode(zstd_block(h, packed, gaps, -1), Codec::kZstd), DataError);
}

// Every LEB128 decoder this CPU runs agrees with put_varint on values of every length, and refuses
// overlong varints, values of 2^32 or more and streams that end early.
TEST(ShardVarint, EveryDecoderRoundTripsAndRefusesMalformedInput) {
  SplitMix64 rng(12);
  std::vector<std::uint32_t> values;
  // Shifts of 32..63 give values of 32 bits down to 1 (a shift by 64 would be undefined); 0 below.
  for (int i = 0; i < 5000; ++i)
    values.push_back(static_cast<std::uint32_t>(rng.next() >> (32 + rng.below(32))));
  values.push_back(0);
  values.push_back(UINT32_MAX);
  std::vector<std::uint8_t> stream(values.size() * 5 + kVarintSlack, 0);
  std::uint8_t* p = stream.data();
  for (const auto v : values) p = put_varint(p, v);
  const std::uint8_t* const end = p;
  ASSERT_GE(varint_decoders().size(), 1u);
  for (const VarintDecoder decode : varint_decoders()) {
    std::vector<std::uint32_t> out(values.size());
    bool bad = false;
    EXPECT_EQ(decode(stream.data(), end, values.size(), out.data(), bad), end);
    EXPECT_FALSE(bad);
    EXPECT_EQ(out, values);
    for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{77}}) {  // prefixes
      bad = false;
      decode(stream.data(), end, n, out.data(), bad);
      EXPECT_FALSE(bad);
      EXPECT_TRUE(std::equal(out.begin(), out.begin() + n, values.begin()));
    }
    bad = false;
    decode(stream.data(), stream.data() + 3, values.size(), out.data(), bad);
    EXPECT_TRUE(bad) << "ran past the end";
    const std::vector<std::vector<std::uint8_t>> malformed = {
        {0x80, 0x80, 0x80, 0x80, 0x80, 0x01},  // 6 bytes
        {0xff, 0xff, 0xff, 0xff, 0x1f},        // 2^36 - 1
        {0x80, 0x80, 0x80, 0x80, 0x10},        // 2^32
    };
    for (auto bytes : malformed) {
      bytes.resize(bytes.size() + kVarintSlack, 0);
      bad = false;
      decode(bytes.data(), bytes.data() + bytes.size() - kVarintSlack, 1, out.data(), bad);
      EXPECT_TRUE(bad);
    }
    std::vector<std::uint8_t> endless(64 + kVarintSlack, 0x80);  // no last byte in sight
    bad = false;
    decode(endless.data(), endless.data() + 64, 1, out.data(), bad);
    EXPECT_TRUE(bad);
  }
}

TEST(ShardSplitMix64, MatchesTheReferenceSequence) {
  // First outputs of the reference splitmix64.c with state 0.
  SplitMix64 g(0);
  EXPECT_EQ(g.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(g.next(), 0x6e789e6aa1b965f4ull);
}

TEST(ShardSeededShuffle, IsAPermutationAndDependsOnTheSeed) {
  std::vector<std::uint32_t> a(1000), b(1000);
  std::iota(a.begin(), a.end(), 0u);
  std::iota(b.begin(), b.end(), 0u);
  SplitMix64 ra(derive_seed(1, 0, 0)), rb(derive_seed(1, 1, 0));
  seeded_shuffle(a.data(), a.size(), ra);
  seeded_shuffle(b.data(), b.size(), rb);
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  for (std::uint32_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], i);
  SplitMix64 g(5);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(g.below(7), 7u);
}

}  // namespace
}  // namespace polymargin::io::shard
