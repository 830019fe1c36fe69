// LIBSVM text → shard directory, and Dataset (a shard directory, or text converted on the fly).
// Kept apart from the writer and the reader so that code using only those does not pull in the
// text parser.
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "engine/errors.h"
#include "io/byte_source.h"
#include "io/shard_format.h"
#include "io/shard_manifest.h"
#include "io/shards.h"

namespace polymargin::io {

namespace fs = std::filesystem;

Manifest convert_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                      const ConvertOptions& options, int threads) {
  return convert_text(inputs, out_dir, options, threads, ConvertProgress());
}

Manifest convert_text(const std::vector<std::string>& inputs, const std::string& out_dir,
                      const ConvertOptions& options, int threads, const ConvertProgress& progress) {
  if (inputs.empty()) throw UsageError("convert: no input");
  // Sources are examined before reading, so a file modified during conversion reads as stale.
  std::vector<SourceInfo> sources;
  for (const auto& input : inputs) {
    if (input == "-") {
      sources.push_back({"-", 0, 0});
      continue;
    }
    SourceInfo info;
    const std::string path = fs::absolute(input).lexically_normal().string();
    if (!shard::stat_source(path, info)) throw IoError("cannot open " + input + ": no such file");
    sources.push_back(info);
  }
  TextOptions text = options.text;
  if (text.threads == 0) text.threads = threads;
  // A longer row does not fit a block: a bad line of its file, not a failure of the writer.
  text.max_row_nnz = std::min<std::uint64_t>(text.max_row_nnz, shard::kMaxBlockNnz);
  ShardWriter writer(out_dir, options, threads);
  std::uint64_t rows = 0, nnz = 0;
  const TextStats stats = read_libsvm_text(inputs, text, [&](const CsrView& batch) {
    writer.append(batch);
    rows += batch.rows;
    nnz += batch.nnz();
    if (progress) progress(rows, nnz);
  });
  // A source that changed while it was read gives shards that every later use refuses as stale:
  // refused now, with nothing written.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == "-") continue;
    SourceInfo now;
    if (!shard::stat_source(sources[i].path, now) || now.size != sources[i].size ||
        now.mtime_ns != sources[i].mtime_ns)
      throw DataError(inputs[i], 0, 0,
                      "changed while it was converted (another program wrote or replaced it): "
                      "nothing was written; convert it again once it is complete");
  }
  writer.set_text_bytes(stats.bytes);
  return writer.finish(index_base_value(stats.resolved_base), sources, stats.bad_lines,
                       stats.bad_line_messages);
}

Codec temporary_codec(const std::vector<std::string>& inputs) {
  // Raw blocks take about 0.75 bytes per byte of text (8 bytes a non-zero against ~11 of text)
  // and a compressed input holds about 4 bytes of text per byte.
  constexpr double kRawLimit = 8.0 * (1ull << 30);
  double raw_bytes = 0;
  for (const std::string& input : inputs) {
    if (input == "-") return Codec::kZstd;  // size unknown
    std::error_code ec;
    const auto size = fs::file_size(input, ec);
    if (ec) return Codec::kZstd;
    std::ifstream in(input, std::ios::binary);
    char head[4] = {};
    in.read(head, sizeof head);
    const bool compressed = detect_compression({head, static_cast<std::size_t>(in.gcount())}) !=
                            SourceCompression::kNone;
    raw_bytes += 0.75 * static_cast<double>(size) * (compressed ? 4 : 1);
  }
  return raw_bytes <= kRawLimit ? Codec::kRaw : Codec::kZstd;
}

namespace {

// Whether `inputs` is one shard directory. Any directory is taken for one: one without a manifest
// then gets the shard reader's precise refusal instead of a text parser choking on a directory. A
// directory among several inputs is a UsageError.
bool one_shard_dir(const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (inputs.size() == 1 && (is_shard_dir(inputs[0]) || fs::is_directory(inputs[0], ec)))
    return true;
  for (const std::string& input : inputs)
    if (input != "-" && fs::is_directory(input, ec))
      throw UsageError(
          input + " is a directory among " + std::to_string(inputs.size()) +
          " data inputs: give one shard directory alone, or text files only (several text files "
          "make one shard directory with: polymargin convert FILE... -o DATA.shards)");
  return false;
}

}  // namespace

void Dataset::probe(const std::vector<std::string>& inputs) {
  if (inputs.empty()) throw UsageError("no input data given");
  if (one_shard_dir(inputs)) {
    ShardSet::open(inputs[0]);
    return;
  }
  for (const std::string& input : inputs) {
    // A stream (a FIFO, a pipe as /dev/fd/N, a device) is read once, when its rows are needed:
    // opening it now would take its first bytes (or, a FIFO, its writer) from that read.
    struct stat st {};
    if (input == "-" || (::stat(input.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) continue;
    open_byte_source(input);
  }
}

Dataset Dataset::open(const std::vector<std::string>& inputs, const ConvertOptions& options,
                      int threads) {
  if (inputs.empty()) throw UsageError("no input data given");
  Dataset data;
  if (one_shard_dir(inputs)) {
    data.shards_ = std::make_shared<const ShardSet>(ShardSet::open(inputs[0]));
    return data;
  }
  const char* tmp = std::getenv("TMPDIR");
  const fs::path tmp_dir = tmp && *tmp ? tmp : "/tmp";
  const std::string prefix = "polymargin-";
  sweep_dead_temporaries_in(tmp_dir.string(), prefix);
  data.temporary_ = TemporaryPath::create([&] {
    std::string pattern = (tmp_dir / (prefix + std::to_string(::getpid()) + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data()))
      throw IoError("cannot create a temporary directory like " + pattern + ": " +
                    std::strerror(errno));
    data.temp_dir_ = pattern;  // from here on, the destructor removes it whatever happens
    return pattern;
  });
  const std::string dir = data.temp_dir_ + "/data.shards";
  ConvertOptions temporary = options;
  temporary.codec = temporary_codec(inputs);
  temporary.durable = false;
  convert_text(inputs, dir, temporary, threads);
  data.shards_ = std::make_shared<const ShardSet>(ShardSet::open(dir));
  return data;
}

Dataset Dataset::held(std::shared_ptr<const ShardSet> shards) {
  if (!shards) throw std::invalid_argument("Dataset::held: no shard set");
  Dataset data;
  data.shards_ = std::move(shards);
  return data;
}

Dataset::~Dataset() {
  shards_.reset();  // unmap before the files go
  if (!temp_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(temp_dir_, ec);
  }
}

}  // namespace polymargin::io
