// libFuzzer target: the shard block checker and decoder (raw and zstd codecs) on arbitrary bytes.
// Byte 0: bit 0 picks the codec, bit 1 makes the target write the block's true checksum into its
// last 8 bytes, bit 2 makes the header's payload size agree with the block's length (and, raw, the
// decoded size with it), so that the fuzzer reaches the decoders rather than stopping at the
// checksum and the size checks. A block that passes must decode into consistent rows or be refused with
// DataError; nothing else (crash, sanitizer report, other exception) is allowed.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "io/shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace polymargin::io;
  using namespace polymargin::io::shard;
  if (size < 1) return 0;
  const Codec codec = (data[0] & 1) ? Codec::kZstd : Codec::kRaw;
  const bool fix_checksum = data[0] & 2, fix_sizes = data[0] & 4;
  // The block as a reader sees it: a multiple of 8 bytes (the writer pads), at least a header.
  std::vector<std::uint8_t> block(data + 1, data + size);
  block.resize(std::max(pad8(block.size()), block_bytes(0)), 0);
  BlockHeader h;
  std::memcpy(&h, block.data(), sizeof h);
  if (h.rows > (1u << 16) || h.nnz > (1u << 20)) return 0;  // keep one input's memory bounded
  if (fix_sizes) {
    h.payload_bytes = block.size() - block_bytes(0);
    if (codec == Codec::kRaw) h.decoded_bytes = h.payload_bytes;
    std::memcpy(block.data(), &h, sizeof h);
  }
  if (fix_checksum) {
    const std::uint64_t sum = checksum(block.data(), block.size() - 8);
    std::memcpy(block.data() + block.size() - 8, &sum, 8);
  }
  IndexEntry entry{0, block.size(), h.rows, h.nnz};
  const std::string file = "fuzz.pms";
  const BlockName name{file, 0, h.block_index};
  try {
    check_block(block.data(), entry, codec, name);
    BlockDecoder decoder;
    polymargin::CsrBuffer rows;
    decode_block_append(decoder, block.data(), codec, name, rows);
    if (rows.rows() != h.rows || rows.nnz() != h.nnz || rows.offsets.front() != 0 ||
        rows.offsets.back() != h.nnz)
      std::abort();
    for (std::size_t r = 0; r < rows.rows(); ++r)
      if (rows.offsets[r] > rows.offsets[r + 1]) std::abort();
  } catch (const polymargin::DataError&) {
  }
  return 0;
}
