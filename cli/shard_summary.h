// What `convert` and `inspect` report about a shard directory, as JSON and as text, in one place so
// that both commands use the same keys and the same words.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "io/shards.h"

namespace polymargin::cli {

/// Sizes of a shard directory on disk.
struct ShardBytes {
  std::uint64_t total = 0;    // every file of the directory
  std::uint64_t shards = 0;   // the shard files alone
  std::uint64_t sources = 0;  // the source files as recorded at conversion
};

ShardBytes shard_bytes(const io::Manifest& manifest, const std::string& dir);

/// Directory bytes per byte of text (0 when the text size is unknown).
double compression_ratio(const io::Manifest& manifest, const ShardBytes& bytes);

/// The snake_case summary both commands print with --json.
nlohmann::ordered_json summary_json(const io::Manifest& manifest, const std::string& dir);

/// The human-readable summary: one `key  value` line each for rows, features, nnz, labels, codec,
/// blocks and bytes.
void print_summary(std::ostream& out, const io::Manifest& manifest, const std::string& dir);

/// "1.23 MB".
std::string megabytes(std::uint64_t bytes);

}  // namespace polymargin::cli
