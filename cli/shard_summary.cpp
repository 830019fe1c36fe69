#include "cli/shard_summary.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace polymargin::cli {

namespace fs = std::filesystem;

ShardBytes shard_bytes(const io::Manifest& manifest, const std::string& dir) {
  ShardBytes b;
  std::error_code ec;
  // What the files hold on disk: a sparse file (the max |x| table of a few ids near 2^32) counts
  // its allocated blocks, not its length.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    std::uint64_t bytes = entry.file_size(ec);
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) == 0)
      bytes = std::min<std::uint64_t>(bytes, static_cast<std::uint64_t>(st.st_blocks) * 512);
    b.total += bytes;
  }
  for (const auto& s : manifest.shards) b.shards += s.bytes;
  for (const auto& s : manifest.sources) b.sources += s.size;
  return b;
}

double compression_ratio(const io::Manifest& manifest, const ShardBytes& bytes) {
  return manifest.text_bytes > 0
             ? static_cast<double>(bytes.total) / static_cast<double>(manifest.text_bytes)
             : 0.0;
}

nlohmann::ordered_json summary_json(const io::Manifest& m, const std::string& dir) {
  const ShardBytes bytes = shard_bytes(m, dir);
  nlohmann::ordered_json labels = nlohmann::ordered_json::object();
  for (const auto& [label, count] : m.label_counts) labels[io::label_text(label)] = count;
  nlohmann::ordered_json j;
  j["path"] = dir;
  j["rows"] = m.rows;
  j["features"] = m.features;
  j["nnz"] = m.nnz;
  j["max_index"] = m.max_index;
  j["index_base"] = m.index_base;
  j["has_values"] = m.has_values;
  j["label_counts"] = labels;
  j["codec"] = io::codec_name(m.codec);
  j["zstd_level"] = m.zstd_level;
  j["block_rows"] = m.block_rows;
  j["blocks"] = m.total_blocks;
  j["shards"] = m.shards.size();
  j["bytes"] = bytes.total;
  j["shard_bytes"] = bytes.shards;
  j["text_bytes"] = m.text_bytes;
  j["source_bytes"] = bytes.sources;
  j["compression_ratio"] = compression_ratio(m, bytes);
  j["format_version"] = m.format_version;
  j["bad_lines_skipped"] = m.bad_lines_skipped;
  if (!m.bad_lines.empty()) j["bad_lines"] = m.bad_lines;
  j["created_utc"] = m.created_utc;
  j["convert_seconds"] = m.convert_seconds;
  return j;
}

std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

void print_summary(std::ostream& out, const io::Manifest& m, const std::string& dir) {
  const ShardBytes bytes = shard_bytes(m, dir);
  const auto line = [&](const char* key, const std::string& value) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%-10s ", key);
    out << buf << value << "\n";
  };
  char buf[160];
  line("path", dir);
  line("rows", std::to_string(m.rows));
  std::snprintf(buf, sizeof buf, "%llu (max index %u, index base %d)",
                static_cast<unsigned long long>(m.features), m.max_index, m.index_base);
  line("features", buf);
  std::snprintf(buf, sizeof buf, "%llu (%.2f per row; values: %s)",
                static_cast<unsigned long long>(m.nnz),
                m.rows ? static_cast<double>(m.nnz) / static_cast<double>(m.rows) : 0.0,
                m.has_values ? "stored" : "all 1, not stored");
  line("nnz", buf);
  std::string labels;
  for (const auto& [label, count] : m.label_counts)
    labels += (labels.empty() ? "" : ", ") + io::label_text(label) + ": " + std::to_string(count);
  line("labels", labels.empty() ? "(none)" : labels);
  line("codec", io::codec_name(m.codec) +
                    (m.codec == io::Codec::kZstd ? " (level " + std::to_string(m.zstd_level) + ")"
                                                 : std::string()) +
                    ", format version " + std::to_string(m.format_version));
  std::snprintf(buf, sizeof buf, "%llu of up to %u rows in %zu shard%s",
                static_cast<unsigned long long>(m.total_blocks), m.block_rows, m.shards.size(),
                m.shards.size() == 1 ? "" : "s");
  line("blocks", buf);
  std::string size = megabytes(bytes.total) + " (shards " + megabytes(bytes.shards) + ")";
  if (m.text_bytes > 0) {
    std::snprintf(buf, sizeof buf, "; text %s, ratio %.3f", megabytes(m.text_bytes).c_str(),
                  compression_ratio(m, bytes));
    size += buf;
  }
  line("bytes", size);
  if (m.bad_lines_skipped > 0) line("skipped", std::to_string(m.bad_lines_skipped) + " bad lines");
  for (const std::string& bad : m.bad_lines) line("", bad);
}

}  // namespace polymargin::cli
