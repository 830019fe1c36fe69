#include "io/shard_manifest.h"

#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <type_traits>

#include "engine/errors.h"
#include "io/atomic_file.h"
#include "io/json_integer.h"
#include "io/shard_format.h"

namespace polymargin::io {

Codec parse_codec(const std::string& text) {
  if (text == "raw") return Codec::kRaw;
  if (text == "zstd") return Codec::kZstd;
  throw UsageError("unknown codec '" + text + "' (expected zstd or raw)");
}

std::string codec_name(Codec codec) { return codec == Codec::kRaw ? "raw" : "zstd"; }

std::string label_text(double label) {
  // Labels are stored as float32, so the float's shortest round-trip text is exact and short.
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(label));
  return std::string(buf, r.ptr);
}

namespace shard {
namespace {

using Json = nlohmann::ordered_json;

// Reads manifest fields with one error shape: the file and the field that is wrong.
class Fields {
 public:
  Fields(const Json& json, std::string path) : json_(json), path_(std::move(path)) {}

  template <class T>
  T get(const Json& object, const char* key) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(std::string("field '") + key + "' is missing");
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (const std::optional<T> v = json_integer<T>(*it)) return *v;
      fail(std::string("field '") + key + "' is not an integer in range");
    } else {
      try {
        return it->template get<T>();
      } catch (const nlohmann::json::exception&) {
        fail(std::string("field '") + key + "' has the wrong type");
      }
    }
  }
  template <class T>
  T get(const char* key) const {
    return get<T>(json_, key);
  }
  std::uint64_t get_hex(const Json& object, const char* key) const {
    const std::string text = get<std::string>(object, key);
    std::uint64_t v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v, 16);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size())
      fail(std::string("field '") + key + "' is not a hexadecimal checksum");
    return v;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw DataError(path_, 0, 0, message + " (re-run convert)");
  }

 private:
  const Json& json_;
  std::string path_;
};

// The manifest's own checksum: over its fields as compact JSON, in the file's order, without the
// checksum itself, so that a changed value (a label count, the index base, max_index: nothing
// else pins them) is caught, and a change of layout or spacing is not.
std::uint64_t manifest_checksum(Json j) {
  j.erase("manifest_checksum");
  const std::string text = j.dump();
  return checksum(text.data(), text.size());
}

// The fields a manifest has; any other is a damaged name (or a newer build's field).
constexpr std::array kManifestFields = {"format",
                                        "format_version",
                                        "codec",
                                        "zstd_level",
                                        "block_rows",
                                        "rows",
                                        "nnz",
                                        "max_index",
                                        "index_base",
                                        "features",
                                        "has_values",
                                        "label_counts",
                                        "text_bytes",
                                        "bad_lines_skipped",
                                        "bad_lines",
                                        "created_utc",
                                        "convert_seconds",
                                        "sources",
                                        "total_blocks",
                                        "shards",
                                        "block_index_checksum",
                                        "manifest_checksum"};

}  // namespace

bool stat_source(const std::string& path, SourceInfo& info) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    throw IoError("cannot examine " + path + ": " + std::strerror(errno));
  }
  info.path = path;
  if (!S_ISREG(st.st_mode)) {  // a stream (a FIFO, /dev/stdin): nothing to compare later
    info.size = 0;
    info.mtime_ns = 0;
    return true;
  }
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

std::string shard_file_name(std::uint32_t shard) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "shard-%05u.pms", shard);
  return buf;
}

std::uint64_t combined_index_checksum(const std::vector<ShardInfo>& shards) {
  std::vector<std::uint64_t> sums;
  sums.reserve(shards.size());
  for (const auto& s : shards) sums.push_back(s.index_checksum);
  return checksum(sums.data(), sums.size() * sizeof(std::uint64_t));
}

}  // namespace shard

std::uint64_t data_checksum(const Manifest& manifest) {
  return shard::combined_index_checksum(manifest.shards);
}

namespace shard {

std::string manifest_json(const Manifest& m) {
  Json j;
  j["format"] = "polymargin shards";
  j["format_version"] = m.format_version;
  j["codec"] = codec_name(m.codec);
  j["zstd_level"] = m.zstd_level;
  j["block_rows"] = m.block_rows;
  j["rows"] = m.rows;
  j["nnz"] = m.nnz;
  j["max_index"] = m.max_index;
  j["index_base"] = m.index_base;
  j["features"] = m.features;
  j["has_values"] = m.has_values;
  Json labels = Json::object();
  for (const auto& [label, count] : m.label_counts) labels[label_text(label)] = count;
  j["label_counts"] = labels;
  j["text_bytes"] = m.text_bytes;
  j["bad_lines_skipped"] = m.bad_lines_skipped;
  if (!m.bad_lines.empty()) j["bad_lines"] = m.bad_lines;
  j["created_utc"] = m.created_utc;
  j["convert_seconds"] = m.convert_seconds;
  Json sources = Json::array();
  for (const auto& s : m.sources)
    sources.push_back({{"path", s.path}, {"size", s.size}, {"mtime_ns", s.mtime_ns}});
  j["sources"] = sources;
  j["total_blocks"] = m.total_blocks;
  Json shards = Json::array();
  for (const auto& s : m.shards)
    shards.push_back({{"file", s.file},
                      {"bytes", s.bytes},
                      {"rows", s.rows},
                      {"blocks", s.blocks},
                      {"index_checksum", hex64(s.index_checksum)},
                      {"content_checksum", hex64(s.content_checksum)}});
  j["shards"] = shards;
  j["block_index_checksum"] = hex64(combined_index_checksum(m.shards));
  j["manifest_checksum"] = hex64(manifest_checksum(j));
  return j.dump(2) + "\n";
}

Manifest read_manifest(const std::string& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (!std::filesystem::exists(status))
    throw IoError("cannot open " + dir + ": " +
                  (ec && ec != std::errc::no_such_file_or_directory ? ec.message()
                                                                    : "no such file or directory"));
  if (!std::filesystem::is_directory(status))
    throw DataError(dir, 0, 0,
                    "not a shard directory but a file (convert text into shards with `polymargin "
                    "convert`)");
  const std::string path = dir + "/" + kManifestFile;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw DataError(path, 0, 0,
                    "manifest missing: not a shard directory, or an unfinished one (re-run "
                    "convert)");
  std::stringstream text;
  text << in.rdbuf();
  Json j;
  try {
    j = Json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path, 0, 0, std::string("manifest unparseable (") + e.what() + ")");
  }
  if (!j.is_object()) throw DataError(path, 0, 0, "manifest unparseable (not a JSON object)");
  const Fields f(j, path);
  for (const auto& [key, value] : j.items())
    if (std::find(kManifestFields.begin(), kManifestFields.end(), key) == kManifestFields.end())
      f.fail("unknown field '" + key + "'");

  Manifest m;
  m.format_version = f.get<std::uint32_t>("format_version");
  if (m.format_version != kShardFormatVersion)
    throw DataError(path, 0, 0,
                    "shard format version " + std::to_string(m.format_version) +
                        ", this build reads version " + std::to_string(kShardFormatVersion) +
                        " (re-run convert)");
  try {
    m.codec = parse_codec(f.get<std::string>("codec"));
  } catch (const UsageError&) {
    f.fail("unknown codec");
  }
  m.zstd_level = f.get<int>("zstd_level");
  m.block_rows = f.get<std::uint32_t>("block_rows");
  m.rows = f.get<std::uint64_t>("rows");
  m.nnz = f.get<std::uint64_t>("nnz");
  m.max_index = f.get<std::uint32_t>("max_index");
  m.index_base = f.get<int>("index_base");
  m.features = f.get<std::uint64_t>("features");
  m.has_values = f.get<bool>("has_values");
  const Json labels = f.get<Json>("label_counts");  // named: items() only refers to it
  for (const auto& [key, count] : labels.items()) {
    float label = 0;
    const auto r = std::from_chars(key.data(), key.data() + key.size(), label);
    if (r.ec != std::errc() || r.ptr != key.data() + key.size() || !count.is_number_unsigned())
      f.fail("bad label count '" + key + "'");
    m.label_counts[label] = count.get<std::uint64_t>();
  }
  m.text_bytes = f.get<std::uint64_t>("text_bytes");
  m.bad_lines_skipped = f.get<std::uint64_t>("bad_lines_skipped");
  if (j.contains("bad_lines")) {  // the first skipped lines' messages (none before they were kept)
    const Json lines = f.get<Json>("bad_lines");
    if (!lines.is_array()) f.fail("bad_lines is not a list");
    for (const Json& line : lines) {
      if (!line.is_string()) f.fail("bad_lines holds a non-string");
      m.bad_lines.push_back(line.get<std::string>());
    }
  }
  m.created_utc = f.get<std::string>("created_utc");
  m.convert_seconds = f.get<double>("convert_seconds");
  for (const auto& s : f.get<Json>("sources"))
    m.sources.push_back({f.get<std::string>(s, "path"), f.get<std::uint64_t>(s, "size"),
                         f.get<std::int64_t>(s, "mtime_ns")});
  m.total_blocks = f.get<std::uint64_t>("total_blocks");
  for (const auto& s : f.get<Json>("shards"))
    m.shards.push_back({f.get<std::string>(s, "file"), f.get<std::uint64_t>(s, "bytes"),
                        f.get<std::uint64_t>(s, "rows"), f.get<std::uint64_t>(s, "blocks"),
                        f.get_hex(s, "index_checksum"),
                        s.contains("content_checksum") ? f.get_hex(s, "content_checksum") : 0});

  // Internal consistency: a hand-edited or spliced manifest is refused before any shard is read.
  std::uint64_t rows = 0, blocks = 0, labelled = 0;
  for (const auto& s : m.shards) {
    if (s.file.find('/') != std::string::npos || s.file.empty() || s.file[0] == '.')
      f.fail("shard file name '" + s.file + "' is not a plain name");
    rows += s.rows;
    blocks += s.blocks;
  }
  for (const auto& [label, count] : m.label_counts) labelled += count;
  if (m.shards.empty()) f.fail("no shards listed");
  if (rows != m.rows || blocks != m.total_blocks || labelled != m.rows)
    f.fail("row, block or label counts do not add up");
  if (m.index_base != 0 && m.index_base != 1) f.fail("index_base must be 0 or 1");
  if (m.block_rows == 0) f.fail("block_rows must be positive");
  if (f.get_hex(j, "block_index_checksum") != combined_index_checksum(m.shards))
    f.fail("block index checksum mismatch");
  // Last, what no check above can see: a changed value that keeps the manifest consistent (a
  // label count's label, the index base, max_index). Manifests written before the checksum was
  // added have none.
  if (j.contains("manifest_checksum") && f.get_hex(j, "manifest_checksum") != manifest_checksum(j))
    f.fail("manifest checksum mismatch: a field was changed after convert wrote it");
  m.checksummed = j.contains("manifest_checksum");
  return m;
}

void write_maxabs(const std::string& path, const std::vector<std::span<const float>>& pieces,
                  bool durable) {
  MaxabsHeader header{};
  std::memcpy(header.magic, kMaxabsMagic, sizeof header.magic);
  header.format_version = kShardFormatVersion;
  for (const auto& piece : pieces) header.count += piece.size();
  // The checksum runs over the bytes as they lie in the file, streamed piece by piece.
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  AtomicFile file(path, durable);
  const auto put = [&](const void* data, std::size_t size) {
    XXH3_64bits_update(state.get(), data, size);
    file.write({static_cast<const char*>(data), size});
  };
  put(&header, sizeof header);
  // Pieces of zeros (features never seen: a few ids near 2^32 make gigabytes of them) become holes
  // of a sparse file instead of written pages; they read back as zeros.
  std::span<const float> zeros;  // a piece found to be all zeros (the writer shares one)
  for (const auto& piece : pieces) {
    XXH3_64bits_update(state.get(), piece.data(), piece.size_bytes());
    const bool zero = (piece.data() == zeros.data() && piece.size() <= zeros.size()) ||
                      std::all_of(piece.begin(), piece.end(), [](float v) { return v == 0.0f; });
    if (zero) {
      if (piece.size() > zeros.size()) zeros = piece;
      file.skip(piece.size_bytes());
    } else {
      file.write({reinterpret_cast<const char*>(piece.data()), piece.size_bytes()});
    }
  }
  const std::uint64_t sum = XXH3_64bits_digest(state.get());
  file.write({reinterpret_cast<const char*>(&sum), sizeof sum});
  file.commit();
}

namespace {

// feature_maxabs.bin read through its checksum a piece at a time (pread, the mapping left
// untouched): into `out` when given, else only checked (verify), so that memory stays a buffer's
// whatever the largest feature id (the file is sparse: ids near 2^32 make gigabytes of holes).
void scan_maxabs(const MappedFile& file, const std::string& path, std::uint64_t expected_count,
                 std::vector<float>* out) {
  const std::uint64_t expected_bytes =
      sizeof(MaxabsHeader) + expected_count * sizeof(float) + sizeof(std::uint64_t);
  if (file.size() != expected_bytes)
    throw DataError(path, 0, 0,
                    "size " + std::to_string(file.size()) + " bytes, expected " +
                        std::to_string(expected_bytes) + " (truncated or foreign; re-run convert)");
  MaxabsHeader header;
  file.read(0, sizeof header, &header, path);
  if (std::memcmp(header.magic, kMaxabsMagic, sizeof header.magic) != 0 ||
      header.format_version != kShardFormatVersion || header.count != expected_count)
    throw DataError(path, 0, 0, "not a feature_maxabs file of this format (re-run convert)");
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                       &XXH3_freeState);
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  XXH3_64bits_update(state.get(), &header, sizeof header);
  constexpr std::uint64_t kPiece = std::uint64_t{1} << 20;  // floats a read: 4 MiB
  std::vector<float> buffer;
  if (out) {
    out->resize(expected_count);
  } else {
    buffer.resize(std::min(expected_count, kPiece));
  }
  for (std::uint64_t first = 0; first < expected_count; first += kPiece) {
    const std::uint64_t count = std::min(kPiece, expected_count - first);
    float* into = out ? out->data() + first : buffer.data();
    file.read(sizeof header + first * sizeof(float), count * sizeof(float), into, path);
    XXH3_64bits_update(state.get(), into, count * sizeof(float));
  }
  std::uint64_t stored;
  file.read(expected_bytes - sizeof stored, sizeof stored, &stored, path);
  if (XXH3_64bits_digest(state.get()) != stored)
    throw DataError(path, 0, 0, "checksum mismatch: the file is corrupt (re-run convert)");
}

}  // namespace

MappedFile open_maxabs(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec)
    throw DataError(path, 0, 0, "missing: the shard directory is incomplete (re-run convert)");
  return MappedFile(path, false);  // read with pread: a sparse table may be gigabytes
}

std::uint64_t maxabs_count(const MappedFile& file, const std::string& path) {
  MaxabsHeader header;
  if (file.size() < sizeof header)
    throw DataError(path, 0, 0, "truncated (re-run convert)");
  file.read(0, sizeof header, &header, path);
  if (std::memcmp(header.magic, kMaxabsMagic, sizeof header.magic) != 0)
    throw DataError(path, 0, 0, "not a feature_maxabs file of this format (re-run convert)");
  return header.count;
}

std::vector<float> read_maxabs(const MappedFile& file, const std::string& path,
                               std::uint64_t expected_count) {
  std::vector<float> maxabs;
  scan_maxabs(file, path, expected_count, &maxabs);
  return maxabs;
}

void check_maxabs(const MappedFile& file, const std::string& path, std::uint64_t expected_count) {
  scan_maxabs(file, path, expected_count, nullptr);
}

}  // namespace shard
}  // namespace polymargin::io
