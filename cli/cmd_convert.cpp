// `polymargin convert`: LIBSVM text → shard directory, one streaming pass.

#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/shard_summary.h"
#include "engine/errors.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Rows and non-zeros so far, at most twice a second.
class Progress {
 public:
  void update(std::uint64_t rows, std::uint64_t nnz) {
    if (!line_.due()) return;
    const double s = line_.elapsed();
    line_.show(strprintf("converting: %.2f M rows, %.1f M non-zeros, %.1f s, %.2f M rows/s",
                           rows / 1e6, nnz / 1e6, s, rows / 1e6 / s));
  }
  void clear() { line_.clear(); }

 private:
  ProgressLine line_{std::chrono::milliseconds(500)};
};

int run_convert(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string output, codec, index_base;
  std::uint32_t block_rows = 0, shards = 0;
  std::uint64_t max_bad_lines = 0, max_line_bytes = 0;
  int threads = 0, zstd_level = 0;
  bool json = false;
  po::options_description opts("convert options");
  opts.add_options()("input", po::value(&inputs)->multitoken(),
                     "LIBSVM text files (plain, gzip, bzip2 or zstd; '-' = stdin), in order")(
      "output,o", po::value(&output)->required(),
      "shard directory to write (an existing shard directory is replaced once the new one is "
      "complete)")("codec", po::value(&codec)->default_value("zstd"), "zstd | raw")(
      "block-rows", po::value(&block_rows)->default_value(4096), "rows per block")(
      "shards", po::value(&shards)->default_value(1), "shard files (blocks go round robin)")(
      "index-base", po::value(&index_base)->default_value("auto"),
      "auto | 0 | 1: auto is 0 when some index is 0, else 1")(
      "max-bad-lines", po::value(&max_bad_lines)->default_value(0),
      "skip up to N malformed lines (counted) instead of stopping at the first")(
      "max-line-bytes", po::value(&max_line_bytes)->default_value(io::TextOptions{}.max_line_bytes),
      "a longer line is a bad line (see --max-bad-lines; text without line ends is not LIBSVM); "
      "bounds memory")(
      "threads", po::value(&threads)->default_value(0), "worker threads (0: all cores)")(
      "zstd-level", po::value(&zstd_level)->default_value(3), "zstd compression level")(
      "json", po::bool_switch(&json), "print the summary as JSON");
  po::positional_options_description positional;
  positional.add("input", -1);
  po::variables_map vm;
  if (!parse_options("convert", "INPUT... -o DATA.shards [options]", opts, positional, args, vm))
    return kExitOk;
  if (inputs.empty()) throw UsageError("convert: no INPUT given (see polymargin convert --help)");
  io::check_outputs(input_paths(vm, {"input"}), {{"--output", output, true, ""}});

  io::ConvertOptions options;
  options.codec = io::parse_codec(codec);
  options.block_rows = block_rows;
  options.shards = shards;
  options.zstd_level = zstd_level;
  if (options.codec != io::Codec::kZstd && !vm["zstd-level"].defaulted())
    err_printf("warning: --zstd-level has no effect with --codec %s (ignored)\n", codec.c_str());
  options.text.index_base = io::parse_index_base(index_base);
  options.text.max_bad_lines = max_bad_lines;
  options.text.max_line_bytes = max_line_bytes;
  if (max_line_bytes == 0) throw UsageError("convert: --max-line-bytes must be at least 1");
  options.text.threads = resolve_threads(threads);

  Progress progress;
  const Clock::time_point start = Clock::now();
  io::Manifest manifest;
  try {
    manifest = io::convert_text(
        inputs, output, options, resolve_threads(threads),
        [&](std::uint64_t rows, std::uint64_t nnz) { progress.update(rows, nnz); });
  } catch (...) {
    progress.clear();
    throw;
  }
  progress.clear();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double mb_per_second = seconds > 0 ? manifest.text_bytes / 1e6 / seconds : 0.0;

  if (json) {
    nlohmann::ordered_json j = summary_json(manifest, output);
    j["seconds"] = seconds;
    j["mb_per_second"] = mb_per_second;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  const ShardBytes bytes = shard_bytes(manifest, output);
  out_printf("converted %llu rows, %llu features, %llu non-zeros into %s\n",
              static_cast<unsigned long long>(manifest.rows),
              static_cast<unsigned long long>(manifest.features),
              static_cast<unsigned long long>(manifest.nnz), output.c_str());
  out_printf("text %s in, shards %s out (ratio %.3f), %.2f s, %.1f MB/s\n",
              megabytes(manifest.text_bytes).c_str(), megabytes(bytes.total).c_str(),
              compression_ratio(manifest, bytes), seconds, mb_per_second);
  if (manifest.bad_lines_skipped > 0) {
    out_printf("skipped %llu malformed line%s%s\n",
               static_cast<unsigned long long>(manifest.bad_lines_skipped),
               manifest.bad_lines_skipped == 1 ? "" : "s",
               manifest.bad_lines.size() < manifest.bad_lines_skipped ? ", the first:" : ":");
    for (const std::string& bad : manifest.bad_lines) out_printf("  %s\n", bad.c_str());
  }
  return kExitOk;
}

const CommandRegistration registration("convert", "LIBSVM text -> checksummed binary shards",
                                       run_convert);

}  // namespace
}  // namespace polymargin::cli
