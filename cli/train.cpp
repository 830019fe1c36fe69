#include "cli/train.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/errors.h"
#include "io/memory.h"
#include "io/model_file.h"
#include "io/output_path.h"

namespace polymargin::cli {
namespace {

std::vector<Command>& algorithms() {
  static std::vector<Command> registry;
  return registry;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

TrainAlgorithmRegistration::TrainAlgorithmRegistration(std::string name, std::string summary,
                                                       CommandFn run) {
  auto& registry = algorithms();
  registry.push_back({std::move(name), std::move(summary), std::move(run)});
  std::sort(registry.begin(), registry.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
}

const std::vector<Command>& train_algorithms() { return algorithms(); }

std::vector<std::pair<std::string, std::string>> config_entries(
    const std::vector<std::string>& args) {
  std::string config;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) config = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) config = args[i].substr(9);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  if (config.empty()) return entries;
  std::ifstream in(config);  // unreadable: the full parse reports it
  bool first = true;
  for (std::string line; std::getline(in, line); first = false) {
    if (first) drop_byte_order_mark(line);
    line = line.substr(0, line.find('#'));
    const auto eq = line.find('=');
    if (eq != std::string::npos)
      entries.emplace_back(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
  return entries;
}

std::string peek_option(const std::vector<std::string>& args, const std::string& name,
                        const std::string& fallback) {
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  for (const auto& [key, value] : config_entries(args))
    if (key == name) return value;
  return fallback;
}

std::string data_name(const std::vector<std::string>& inputs) {
  std::string name;
  for (const std::string& input : inputs) name += (name.empty() ? "" : ",") + input;
  return name;
}

const char* data_name_help() {
  return "the name the model, the reports and the messages give the training data instead of its "
         "paths (e.g. for a temporary or dated copy); the model does not depend on it otherwise";
}

const char* index_base_help() {
  return "auto | 0 | 1: how text input's feature ids count (auto: 0 when some id is 0, else 1); a "
         "shard directory keeps the base it was converted with";
}

io::Dataset open_training_data(const std::vector<std::string>& inputs, io::ConvertOptions convert,
                               const std::string& base, int threads, const std::string& data) {
  try {
    convert.text.index_base = io::parse_index_base(base);
  } catch (const UsageError&) {
    throw UsageError("train: --index-base must be auto, 0 or 1 (got '" + base + "')");
  }
  io::Dataset dataset = io::Dataset::open(inputs, convert, threads);
  const int converted = dataset.shards().manifest().index_base;
  if (convert.text.index_base != io::IndexBase::kAuto &&
      io::index_base_value(convert.text.index_base) != converted)
    throw UsageError("train: --index-base " + base + ": " + data +
                     " was converted with index base " + std::to_string(converted) +
                     " (convert it again with --index-base " + base + ")");
  return dataset;
}

std::vector<std::string> data_record(const std::vector<std::string>& inputs,
                                     const std::string& name) {
  return name.empty() ? inputs : std::vector<std::string>{name};
}

std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

void check_lambda_option(const po::variables_map& vm, const std::string& name) {
  const bool paper = vm.count(name) > 0, rel = vm.count(name + "-rel") > 0;
  if (paper && rel)
    throw UsageError("train: --" + name + " and --" + name + "-rel exclude each other");
  const double value = paper ? vm[name].as<double>() : rel ? vm[name + "-rel"].as<double>() : 0;
  if (!(value >= 0) || !std::isfinite(value))
    throw UsageError("train: --" + name + (rel ? "-rel" : "") + " must be ≥ 0 (got " +
                     number(value) + ")");
}

std::optional<double> lambda_option(const po::variables_map& vm, const std::string& name,
                                    double rows, double c) {
  check_lambda_option(vm, name);
  if (vm.count(name)) return vm[name].as<double>();
  if (!vm.count(name + "-rel")) return std::nullopt;
  const double rel = vm[name + "-rel"].as<double>();
  if (!std::isfinite(rel * rows * c))
    throw UsageError("train: --" + name + "-rel " + number(rel) +
                     " × m × C overflows (m = " + number(rows) + ", C = " + number(c) + ")");
  return rel * rows * c;
}

void check_trained_model(double objective, const engine::MarginStats& margins,
                         const std::string& remedy) {
  if (std::isfinite(objective) && std::isfinite(margins.mean()) &&
      std::isfinite(margins.variance()))
    return;
  throw NumericalError("training diverged: the trained model's objective is " + number(objective) +
                       " (margin mean " + number(margins.mean()) + ", variance " +
                       number(margins.variance()) + " over the training rows); " + remedy);
}

void check_scaling(const std::string& scale, const std::string& normalize) {
  if (scale != "maxabs" && scale != "none")
    throw UsageError("train: --scale must be maxabs or none (got '" + scale + "')");
  if (normalize != "l2" && normalize != "none")
    throw UsageError("train: --normalize must be l2 or none (got '" + normalize + "')");
}

engine::LabelMap binary_labels(const io::Manifest& manifest, const std::string& data) {
  if (manifest.label_counts.size() != 2) {
    std::string found;
    int shown = 0;
    for (const auto& [label, count] : manifest.label_counts) {
      if (shown++ == 5) {
        found += ", …";
        break;
      }
      found += (found.empty() ? "" : ", ") + number(label);
    }
    throw DataError(data, 0, 0,
                    "labels are not binary: train needs exactly two distinct labels, found " +
                        std::to_string(manifest.label_counts.size()) +
                        (found.empty() ? "" : " (" + found + ")"));
  }
  engine::LabelMap labels;
  labels.negative = manifest.label_counts.begin()->first;
  labels.positive = manifest.label_counts.rbegin()->first;
  return labels;
}

void check_train_paths(const po::variables_map& vm) {
  const auto value = [&](const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string();
  };
  check_train_paths(input_paths(vm, {"data", "validation", "unlabeled", "warm-start", "resume"}),
                    value("output"), value("checkpoint"), value("metrics-json"));
}

void check_train_paths(const std::vector<io::NamedPath>& inputs, const std::string& output,
                       const std::string& checkpoint, const std::string& metrics_json) {
  io::check_outputs(inputs, {{"--output", output, false, ""},
                             {"--checkpoint", checkpoint, false, "--resume"},
                             {"--metrics-json", metrics_json, false, ""}});
  // The validation data is read after the training: a missing file (or the model's own path) is
  // refused now, not once the model is written.
  std::vector<std::string> validation;
  bool stdin_trains = false;
  for (const io::NamedPath& input : inputs) {
    if (input.option == "--validation") validation.push_back(input.path);
    stdin_trains = stdin_trains || (input.option != "--validation" && input.path == "-");
  }
  if (stdin_trains && std::find(validation.begin(), validation.end(), "-") != validation.end())
    throw UsageError(
        "train: --validation -: standard input is already the training data; give "
        "the validation data as a file");
  if (!validation.empty()) io::Dataset::probe(validation);
  if (!metrics_json.empty() && !metrics_may_replace(metrics_json))
    throw io::OutputPathError("train: --metrics-json " + metrics_json +
                                  " exists and is not an earlier run's metrics: it would be "
                                  "overwritten; choose another name",
                              {"--metrics-json"});
  if (!metrics_json.empty()) io::check_writable(metrics_json, "--metrics-json");
  std::error_code ec;
  if (checkpoint.empty()) return;
  // A checkpoint is rewritten, renamed into place and removed at the end: a device or a FIFO
  // (which outputs otherwise may be) would be removed, /dev/null itself.
  const auto status = std::filesystem::status(checkpoint, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw UsageError("train: --checkpoint " + checkpoint +
                     " is not a regular file (a device, a FIFO or a directory): a checkpoint "
                     "is a file that is replaced and removed; give a file's path");
  if (!std::filesystem::is_regular_file(status)) return;
  const std::string kind = io::model_file_kind(checkpoint);
  if (kind != "checkpoint" && kind != "cpm_checkpoint")
    throw UsageError("train: --checkpoint " + checkpoint + " exists and is not a checkpoint (" +
                     (kind.empty() ? std::string("not a polymargin file")
                                   : "a model file of kind '" + kind + "'") +
                     "): it would be overwritten, then removed once the model is written; choose "
                     "another name");
}

void check_warm_model(const engine::LinearModel& m, const std::string& path,
                      const std::string& algo, const engine::LabelMap& labels) {
  if (m.algorithm != algo)
    throw DataError(
        path, 0, 0,
        "--warm-start: an " + m.algorithm + " model cannot start a --algo " + algo + " run");
  if (static_cast<float>(m.labels.negative) != static_cast<float>(labels.negative) ||
      static_cast<float>(m.labels.positive) != static_cast<float>(labels.positive))
    throw DataError(path, 0, 0,
                    "--warm-start: the model's labels " + number(m.labels.negative) + " / " +
                        number(m.labels.positive) + " are not the data's " +
                        number(labels.negative) + " / " + number(labels.positive));
}

bool metrics_may_replace(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || io::writes_in_place(path)) return true;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return !ec;
  if (size > (std::uintmax_t{16} << 20)) return false;
  std::ifstream in(path, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() && j.contains("status");
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

void check_fits(std::uint64_t need, const std::string& what, const std::string& remedy) {
  const std::uint64_t available = io::mem_available();
  if (available != 0 && need > available)
    throw MemoryError("train: " + what + " needs " + gib(need) + " but only " + gib(available) +
                      " are available: " + remedy);
  check_hard_limit_fits(need, what, remedy);
}

std::optional<HardLimit> hard_memory_limit() {
  std::optional<HardLimit> limit;
  if (const std::optional<std::uint64_t> room = io::cgroup_memory_room())
    limit = HardLimit{*room, "the memory cgroup"};
  if (const std::optional<std::uint64_t> room = io::address_space_room())
    if (!limit || *room < limit->room)
      limit = HardLimit{*room, "the address-space limit (ulimit -v)"};
  return limit;
}

void check_hard_limit_fits(std::uint64_t need, const std::string& what, const std::string& remedy) {
  // A memory cgroup's hard limit kills the process (OOM), and an address-space limit fails an
  // allocation anywhere, instead of refusing the run: what it holds beyond its arrays is measured
  // against them at what a small run takes (kRunFloorBytes), not the margin of kRunOverheadBytes
  // kept against the machine's other users.
  const std::optional<HardLimit> limit = hard_memory_limit();
  if (!limit || fits_hard_limit(need, limit->room)) return;
  throw MemoryError("train: " + what + " needs " +
                    gib(need - std::min(need, kRunOverheadBytes) + kRunFloorBytes) + " but " +
                    limit->name + " leaves only " + gib(limit->room) + ": " + remedy);
}

std::uint64_t hard_limit_arrays_room(std::uint64_t room) {
  return room > kRunFloorBytes ? room - kRunFloorBytes : 0;
}

bool fits_hard_limit(std::uint64_t need, std::uint64_t room) {
  return need - std::min(need, kRunOverheadBytes) <= hard_limit_arrays_room(room);
}

void EpochProgress::batch(int epoch, std::uint64_t rows_done_in_epoch) {
  if (!line_.due()) return;
  const double done = static_cast<double>(epoch) * rows_ + rows_done_in_epoch;
  const double elapsed = line_.elapsed();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double left = rate > 0 ? (static_cast<double>(epochs_) * rows_ - done) / rate : 0;
  line_.show(format_line("epoch %d/%d  %5.1f%%  %.2f M rows/s  ETA %.0f s", epoch + 1, epochs_,
                         100.0 * rows_done_in_epoch / rows_, rate / 1e6, left));
}

}  // namespace polymargin::cli
