// Helpers of the shard tests: random CSR data, row lists to compare, scratch directories.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "engine/random.h"
#include "io/shards.h"

namespace polymargin::io::testing {

namespace fs = std::filesystem;

/// One row, owned, for comparisons.
struct Row {
  float label = 0;
  std::vector<std::uint32_t> indices;
  std::vector<float> values;  // always explicit (ones where the source had none)
  bool operator==(const Row&) const = default;
};

enum class Values { kNone, kOnes, kRandom, kSomeRows, kMostlyOnes };

/// `rows` random rows: 0..max_nnz strictly increasing indices below max_index, labels ±1 (or a
/// few other values), values as `values` says (kOnes: explicit 1s, which the writer must drop).
inline CsrBuffer random_rows(std::uint64_t seed, std::size_t rows, std::uint32_t max_nnz,
                             std::uint32_t max_index, Values values) {
  SplitMix64 rng(seed);
  CsrBuffer out;
  out.has_values = values != Values::kNone;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint32_t n = static_cast<std::uint32_t>(rng.below(max_nnz + 1));
    std::vector<std::uint32_t> idx;
    // Mix small gaps with huge jumps so every varint length occurs.
    std::uint64_t next = rng.below(4);
    for (std::uint32_t k = 0; k < n && next < max_index; ++k) {
      idx.push_back(static_cast<std::uint32_t>(next));
      const std::uint64_t kind = rng.below(4);
      next += 1 + (kind == 0   ? rng.below(3)
                   : kind == 1 ? rng.below(300)
                               : rng.below(max_index / 8 + 1));
    }
    const std::uint64_t l = rng.below(10);
    out.labels.push_back(l < 5 ? 1.0f : l < 9 ? -1.0f : 0.5f * static_cast<float>(rng.below(7)));
    for (const std::uint32_t i : idx) {
      out.indices.push_back(i);
      if (values == Values::kOnes) out.values.push_back(1.0f);
      if (values == Values::kRandom)
        out.values.push_back(static_cast<float>(rng.below(2000)) / 100.0f - 10.0f);
      if (values == Values::kSomeRows)
        out.values.push_back(r % 7 == 3 ? static_cast<float>(rng.below(100)) / 10.0f : 1.0f);
      if (values == Values::kMostlyOnes)  // as in real sparse data; 0 and negatives included
        out.values.push_back(rng.below(4) != 0 ? 1.0f : static_cast<float>(rng.below(41)) / 4 - 5);
    }
    out.offsets.push_back(static_cast<std::uint32_t>(out.indices.size()));
  }
  return out;
}

inline std::vector<Row> rows_of(const CsrView& v) {
  std::vector<Row> rows;
  for (std::size_t r = 0; r < v.rows; ++r) {
    Row row;
    row.label = v.labels[r];
    for (std::uint32_t k = v.offsets[r]; k < v.offsets[r + 1]; ++k) {
      row.indices.push_back(v.indices[k]);
      row.values.push_back(v.value(k));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Every row a scan delivers, in order.
inline std::vector<Row> scan_rows(const ShardSet& set, const ReadOptions& options) {
  std::vector<Row> rows;
  set.scan(options, [&](const CsrView& batch) {
    const auto part = rows_of(batch);
    rows.insert(rows.end(), part.begin(), part.end());
  });
  return rows;
}

/// The bytes of a file.
inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// An empty scratch directory, unique to this process and test.
inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("pm_shard_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Appends `rows` to `writer` in uneven batches, as a parser would deliver them.
inline void append_unevenly(ShardWriter& writer, const CsrBuffer& rows) {
  const CsrView all = rows.view();
  std::size_t r = 0, step = 1;
  while (r < all.rows) {
    CsrView part = all;
    part.rows = std::min(step, all.rows - r);
    part.labels += r;
    part.offsets += r;
    writer.append(part);
    r += part.rows;
    step = step * 3 % 1000 + 1;
  }
}

inline ConvertOptions layout_options(Codec codec, std::uint32_t block_rows, std::uint32_t shards) {
  ConvertOptions options;
  options.codec = codec;
  options.block_rows = block_rows;
  options.shards = shards;
  return options;
}

/// Writes `rows` into a shard directory `dir` with the given layout.
inline Manifest write_shards(const CsrBuffer& rows, const std::string& dir, Codec codec,
                             std::uint32_t block_rows, std::uint32_t shards, int threads = 2,
                             const std::vector<SourceInfo>& sources = {}) {
  ShardWriter writer(dir, layout_options(codec, block_rows, shards), threads);
  append_unevenly(writer, rows);
  return writer.finish(/*index_base=*/0, sources, 0);  // random_rows may use index 0
}

/// `rows` as a shard set in memory with the given layout.
inline ShardSet shards_in_memory(const CsrBuffer& rows, Codec codec, std::uint32_t block_rows,
                                 std::uint32_t shards, int threads = 2) {
  ShardWriter writer(layout_options(codec, block_rows, shards), threads, "<rows>");
  append_unevenly(writer, rows);
  return writer.finish_in_memory(/*index_base=*/0);
}

}  // namespace polymargin::io::testing
