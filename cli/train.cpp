#include "cli/train.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/train_jobs.h"
#include "engine/errors.h"

namespace polymargin::cli {
namespace {

std::vector<TrainAlgorithm>& registry() {
  static std::vector<TrainAlgorithm> r;
  return r;
}

}  // namespace

TrainAlgorithmRegistration::TrainAlgorithmRegistration(TrainAlgorithm algorithm) {
  std::vector<TrainAlgorithm>& r = registry();
  r.push_back(std::move(algorithm));
  std::sort(r.begin(), r.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
}

const std::vector<TrainAlgorithm>& train_algorithms() { return registry(); }

const TrainAlgorithm& train_algorithm(const std::string& algo) {
  std::string list;
  for (const TrainAlgorithm& a : registry()) {
    if (a.name == algo) return a;
    list += (list.empty() ? "" : "|") + a.name;
  }
  throw UsageError("train: --algo must be one of " + list + " (got '" + algo + "')");
}

int run_train_algorithm(const TrainAlgorithm& a, const std::vector<std::string>& args) {
  return run_train_job(args, [&a](const std::vector<std::string>& args, MetricsFile& metrics) {
    bool json = false;
    const std::optional<driver::TrainJob> job = a.parse(args, json);
    if (!job) return kHelpShown;
    return train_in_library(*job, metrics, [&](const nlohmann::ordered_json& summary) {
      if (json)
        std::cout << summary.dump(2) << "\n";
      else
        a.print(summary);
    });
  });
}

std::optional<driver::TrainJob> parse_train_job(const std::vector<std::string>& args) {
  bool json = false;
  return train_algorithm(peek_option(args, "algo", "ldm")).parse(args, json);
}

std::vector<std::pair<std::string, std::string>> config_entries(
    const std::vector<std::string>& args) {
  std::string config;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) config = args[i + 1];
    if (args[i].rfind("--config=", 0) == 0) config = args[i].substr(9);
  }
  std::vector<std::pair<std::string, std::string>> entries;
  if (config.empty()) return entries;
  try {
    for (ConfigEntry& e : read_config_entries("train", config))
      entries.emplace_back(std::move(e.key), std::move(e.value));
  } catch (const Error&) {  // unreadable or malformed: the full parse reports it
    entries.clear();
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

const char* data_name_help() {
  return "the name the model, the reports and the messages give the training data instead of its "
         "paths (e.g. for a temporary or dated copy); the model does not depend on it otherwise";
}

const char* index_base_help() {
  return "auto | 0 | 1: how text input's feature ids count (auto: 0 when some id is 0, else 1); a "
         "shard directory keeps the base it was converted with";
}

void EpochProgress::batch(int epoch, std::uint64_t rows_done_in_epoch) {
  if (!line_.due()) return;
  const double done = static_cast<double>(epoch) * rows_ + rows_done_in_epoch;
  const double elapsed = line_.elapsed();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double left = rate > 0 ? (static_cast<double>(epochs_) * rows_ - done) / rate : 0;
  line_.show(strprintf("epoch %d/%d  %5.1f%%  %.2f M rows/s  ETA %.0f s", epoch + 1, epochs_,
                         100.0 * rows_done_in_epoch / rows_, rate / 1e6, left));
}

}  // namespace polymargin::cli
