// LIBSVM text → shard directory, and Dataset (a shard directory, or text converted on the fly).
// Kept apart from the writer and the reader so that code using only those does not pull in the
// text parser.
#include <stdlib.h>  // mkdtemp

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/errors.h"
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
  ShardWriter writer(out_dir, options, threads);
  std::uint64_t rows = 0, nnz = 0;
  const TextStats stats = read_libsvm_text(inputs, text, [&](const CsrView& batch) {
    writer.append(batch);
    rows += batch.rows;
    nnz += batch.nnz();
    if (progress) progress(rows, nnz);
  });
  writer.set_text_bytes(stats.bytes);
  return writer.finish(index_base_value(stats.resolved_base), sources, stats.bad_lines);
}

Dataset Dataset::open(const std::vector<std::string>& inputs, const ConvertOptions& options,
                      int threads) {
  if (inputs.empty()) throw UsageError("no input data given");
  Dataset data;
  // Any directory is taken for a shard directory: one without a manifest then gets the shard
  // reader's precise refusal instead of a text parser choking on a directory.
  std::error_code ec;
  if (inputs.size() == 1 && (is_shard_dir(inputs[0]) || fs::is_directory(inputs[0], ec))) {
    data.shards_ = std::make_unique<ShardSet>(ShardSet::open(inputs[0]));
    return data;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (fs::path(tmp && *tmp ? tmp : "/tmp") / "polymargin-convert-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw IoError("cannot create a temporary directory like " + pattern + ": " +
                  std::strerror(errno));
  data.temp_dir_ = pattern;  // from here on, the destructor removes it whatever happens
  const std::string dir = data.temp_dir_ + "/data.shards";
  convert_text(inputs, dir, options, threads);
  data.shards_ = std::make_unique<ShardSet>(ShardSet::open(dir));
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
