// What a search over settings (`experiment`, a --tune search) keeps between runs: finished cells,
// one JSON file each, named by the hash of the cell's key; the checksums that say a data argument
// is still the one a cell ran on; and the rows of its data streamed in data order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/text_reader.h"

namespace polymargin::io {

/// Streams every row of `inputs` (LIBSVM text, or one shard directory) in data order. Returns their
/// index base (text: 0 when some feature id is 0).
int for_each_batch(const std::vector<std::string>& inputs, int threads, const RowSink& sink);

/// Hex XXH3-128 of a string.
std::string hash_text(const std::string& text);
/// Checksum of a data argument: the XXH3 of a text file's bytes, or of a shard directory's
/// manifest.json (which holds the shards' checksums). Throws IoError when it cannot be read.
std::string data_checksum(const std::string& path);

/// Finished cells, one JSON file each in a directory, named by the hash of the cell's key; the key
/// is stored in the file too, so a hash collision is detected rather than served.
class CellCache {
 public:
  explicit CellCache(std::string directory);
  /// The cached result of `key`, or null.
  nlohmann::json find(const nlohmann::json& key) const;
  /// Stores a finished cell atomically.
  void store(const nlohmann::json& key, const nlohmann::json& result) const;
  /// Path of an extra file belonging to the cell (e.g. its margin distribution).
  std::string side_file(const nlohmann::json& key, const std::string& suffix) const;

 private:
  std::string file_for(const nlohmann::json& key) const;
  std::string directory_;
};

}  // namespace polymargin::io
