// polymargin gen: KDD Cup 2010-like synthetic data with a planted rule, as LIBSVM text (plain,
// .zst, .gz, or "-" for stdout) or straight into a shard directory (OUT ending in .shards).
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command.h"
#include "engine/errors.h"
#include "io/generator.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

bool is_shards_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path.ends_with(".shards");
}

struct Output {
  std::string path;
  io::GenStats stats;  // text: text_bytes and file_bytes set; shards: file_bytes = shard files
};

// Writes rows [0, rows) of `stream` to `path`: a shard directory or a text file.
Output write_stream(const io::Generator& generator, std::uint64_t stream, std::uint64_t rows,
                    const std::string& path, const io::GenRunOptions& run,
                    const io::ConvertOptions& shard_options) {
  if (!is_shards_path(path)) return {path, io::generate_text(generator, stream, rows, path, run)};
  io::ShardWriter writer(path, shard_options, run.threads);
  Output out{path, io::generate_stream(generator, stream, rows, run, {},
                                       [&](io::GenBlock& b) { writer.append(b.rows.view()); })};
  const io::Manifest manifest = writer.finish(/*index_base=*/1, {}, 0);
  for (const auto& shard : manifest.shards) out.stats.file_bytes += shard.bytes;
  return out;
}

double per_second(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

nlohmann::json output_json(const Output& o) {
  const io::GenStats& s = o.stats;
  return {{"output", o.path},
          {"rows", s.rows},
          {"nnz", s.nnz},
          {"positives", s.positives},
          {"max_index", s.max_index},
          {"text_bytes", s.text_bytes},
          {"file_bytes", s.file_bytes},
          {"seconds", s.seconds},
          {"rows_per_second", per_second(static_cast<double>(s.rows), s.seconds)},
          {"text_mb_per_second", per_second(static_cast<double>(s.text_bytes) / 1e6, s.seconds)}};
}

std::string output_line(const Output& o) {
  const io::GenStats& s = o.stats;
  const double rows = static_cast<double>(s.rows);
  const double text_mb = static_cast<double>(s.text_bytes) / 1e6;
  std::ostringstream line;
  line << std::fixed << std::setprecision(1) << o.path << ": " << s.rows << " rows ("
       << 100.0 * static_cast<double>(s.positives) / rows << "% positive), "
       << static_cast<double>(s.nnz) / rows << " nnz/row, max index " << s.max_index << "; ";
  if (s.text_bytes > 0) line << text_mb << " MB text, ";
  line << static_cast<double>(s.file_bytes) / 1e6 << " MB written in " << std::setprecision(2)
       << s.seconds << " s (" << std::setprecision(0) << per_second(rows, s.seconds) << " rows/s";
  if (s.text_bytes > 0) line << ", " << per_second(text_mb, s.seconds) << " MB/s of text";
  line << ")";
  return line.str();
}

int run_gen(const std::vector<std::string>& args) {
  po::options_description options("gen options");
  auto add = options.add_options();
  add("output,o", po::value<std::string>()->required(),
      "output: LIBSVM text (.zst / .gz compressed by name, - for stdout) or DIR.shards");
  add("like", po::value<std::string>()->default_value("kdda"),
      "statistics to imitate: kdda (KDD Cup 2010 algebra)");
  add("rows", po::value<std::uint64_t>(), "rows (kdda: 8407752)");
  add("features", po::value<std::uint64_t>(), "features (kdda: 20216830)");
  add("nnz", po::value<double>(),
      "mean non-zeros a row (kdda: 36); features are drawn by frequency (Zipf) and a row keeps "
      "each once, so a mean near --features is not reached (the summary says the mean made)");
  add("model", po::value<std::string>()->default_value("linear"),
      "planted rule: linear | polytope (negatives inside a K-face polytope)");
  add("faces", po::value<int>(), "polytope faces K (default 5)");
  add("noise", po::value<double>(), "label flip probability (default 0.05)");
  add("positive-fraction", po::value<double>(), "share of +1 labels (kdda: 0.85)");
  add("signal-features", po::value<std::uint64_t>(),
      "the planted rule weighs only this many most frequent features (default: features / 200)");
  add("feature-order", po::value<std::string>()->default_value("scattered"),
      "scattered: feature ids unrelated to frequency (as hashed features) | frequency: the most "
      "frequent feature first (the same rows relabelled)");
  add("seed", po::value<std::uint64_t>()->default_value(1), "random seed");
  add("test-rows", po::value<std::uint64_t>(), "also write this many test rows (same rule)");
  add("test-output", po::value<std::string>(), "where to write the test rows");
  add("codec", po::value<std::string>()->default_value("zstd"), "shard codec: zstd | raw");
  add("block-rows", po::value<std::uint32_t>()->default_value(4096), "rows per shard block");
  add("threads", po::value<int>()->default_value(0), "worker threads (0: all cores)");
  add("json", "print the summary as JSON");
  po::variables_map vm;
  if (!parse_options("gen", "--like kdda [options] -o OUT", options, {}, args, vm)) return kExitOk;

  io::GeneratorSpec spec;
  try {
    spec = io::generator_preset(vm["like"].as<std::string>());
    if (vm.count("rows")) spec.rows = vm["rows"].as<std::uint64_t>();
    if (vm.count("features")) spec.features = vm["features"].as<std::uint64_t>();
    if (vm.count("nnz")) spec.nnz = vm["nnz"].as<double>();
    if (vm.count("faces")) spec.faces = vm["faces"].as<int>();
    if (vm.count("noise")) spec.noise = vm["noise"].as<double>();
    if (vm.count("positive-fraction"))
      spec.positive_fraction = vm["positive-fraction"].as<double>();
    if (vm.count("signal-features")) {
      spec.signal_features = vm["signal-features"].as<std::uint64_t>();
      if (spec.signal_features == 0)
        throw UsageError("gen: --signal-features must be at least 1 (got 0)");
    }
    spec.model = io::parse_planted_model(vm["model"].as<std::string>());
    if (vm.count("faces") && spec.model != io::PlantedModelKind::kPolytope)
      throw UsageError("--faces is for --model polytope (a linear rule has no faces)");
    spec.feature_order = io::parse_feature_order(vm["feature-order"].as<std::string>());
    spec.seed = vm["seed"].as<std::uint64_t>();
    io::validate_spec(spec);
  } catch (const ConfigError& e) {  // a field that is a flag: said with it
    throw UsageError("gen: " + flag_of(e.field()) + " " + e.rule());
  } catch (const UsageError& e) {
    throw UsageError(std::string("gen: ") + e.what());
  }
  const std::uint64_t test_rows = vm.count("test-rows") ? vm["test-rows"].as<std::uint64_t>() : 0;
  if (vm.count("test-rows") != vm.count("test-output"))
    throw UsageError("gen: --test-rows and --test-output go together");
  if (vm.count("test-rows") && (test_rows == 0 || test_rows > io::kMaxRows))
    throw UsageError("gen: --test-rows must be between 1 and " + std::to_string(io::kMaxRows));
  io::ConvertOptions shard_options;
  shard_options.codec = io::parse_codec(vm["codec"].as<std::string>());
  shard_options.block_rows = vm["block-rows"].as<std::uint32_t>();
  if (shard_options.block_rows == 0) throw UsageError("gen: --block-rows must be at least 1");
  const auto output = [&](const char* name) {
    const std::string path = vm.count(name) ? vm[name].as<std::string>() : "";
    return io::OutputPath{std::string("--") + name, path, is_shards_path(path), ""};
  };
  io::check_outputs(input_paths(vm, {}), {output("output"), output("test-output")});
  io::GenRunOptions run;
  run.threads = resolve_threads(vm["threads"].as<int>());

  const io::Generator generator(spec);
  std::vector<Output> outputs;
  outputs.push_back(write_stream(generator, io::kTrainStream, spec.rows,
                                 vm["output"].as<std::string>(), run, shard_options));
  if (test_rows > 0)
    outputs.push_back(write_stream(generator, io::kTestStream, test_rows,
                                   vm["test-output"].as<std::string>(), run, shard_options));

  // With the data on stdout, the summary goes to stderr.
  std::ostream& out = outputs.front().path == "-" ? std::cerr : std::cout;
  if (vm.count("json")) {
    nlohmann::json j = {{"like", vm["like"].as<std::string>()},
                        {"model", io::planted_model_name(spec.model)},
                        {"features", spec.features},
                        {"feature_order", io::feature_order_name(spec.feature_order)},
                        {"seed", spec.seed},
                        {"threshold", generator.model().threshold()},
                        {"train", output_json(outputs.front())}};
    if (outputs.size() > 1) j["test"] = output_json(outputs.back());
    out << j.dump(2) << "\n";
  } else {
    for (const Output& o : outputs) out << "gen: " << output_line(o) << "\n";
  }
  return kExitOk;
}

const CommandRegistration registration("gen",
                                       "generate KDD Cup 2010-like data with a planted signal",
                                       run_gen);

}  // namespace
}  // namespace polymargin::cli
