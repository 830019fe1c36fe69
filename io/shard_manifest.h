// manifest.json and feature_maxabs.bin: reading, writing and validating the small files of a shard
// directory. Internal to io/ (the public contract is io/shards.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/shard_format.h"
#include "io/shards.h"

namespace polymargin::io::shard {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kMaxabsFile = "feature_maxabs.bin";

/// The size and modification time of a file as recorded for a source (0 and 0 for a stream: a FIFO,
/// a device), false when it does not exist.
/// Throws IoError when it exists but cannot be examined.
bool stat_source(const std::string& path, SourceInfo& info);

/// "shard-00003.pms".
std::string shard_file_name(std::uint32_t shard);

/// XXH3 over the shards' index checksums in shard order: one number that pins the whole layout.
std::uint64_t combined_index_checksum(const std::vector<ShardInfo>& shards);

/// manifest.json's text for `manifest`.
std::string manifest_json(const Manifest& manifest);

/// Reads and validates `dir`/manifest.json. Throws DataError when it is missing, unparseable, of
/// another format version, lacks a field or contradicts itself.
Manifest read_manifest(const std::string& dir);

/// Writes feature_maxabs.bin (header, float32[count], checksum) atomically; the floats come in
/// pieces so that the writer never needs a second contiguous copy of a 20 M-entry table.
void write_maxabs(const std::string& path, const std::vector<std::span<const float>>& pieces,
                  bool durable = true);

/// Opens feature_maxabs.bin at `path` (not mapped: it is read piece by piece, and a sparse table
/// may be gigabytes; nothing is read yet); DataError when it is missing.
MappedFile open_maxabs(const std::string& path);
/// Reads feature_maxabs.bin, opened by open_maxabs (`path` names it in errors); throws DataError
/// when it is short, foreign, of another size than `expected_count` entries or fails its checksum.
std::vector<float> read_maxabs(const MappedFile& file, const std::string& path,
                               std::uint64_t expected_count);
/// The same checks without keeping the values (a buffer's memory, whatever the count).
void check_maxabs(const MappedFile& file, const std::string& path, std::uint64_t expected_count);
/// The entries feature_maxabs.bin's header declares (convert writes max_index + 1), read alone.
std::uint64_t maxabs_count(const MappedFile& file, const std::string& path);

}  // namespace polymargin::io::shard
