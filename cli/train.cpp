#include "cli/train.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/train_jobs.h"
#include "engine/errors.h"
#include "io/memory.h"
#include "io/model_file.h"
#include "io/output_path.h"

namespace polymargin::cli {
namespace {

struct Registry {
  std::vector<TrainAlgorithm> algorithms;
  std::vector<Command> commands;  // the same, as commands
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

TrainAlgorithmRegistration::TrainAlgorithmRegistration(TrainAlgorithm algorithm) {
  Registry& r = registry();
  const TrainAlgorithm& a = r.algorithms.emplace_back(std::move(algorithm));
  const auto train = [parse = a.parse, print = a.print](const std::vector<std::string>& args,
                                                        MetricsFile& metrics) {
    bool json = false;
    const std::optional<driver::TrainJob> job = parse(args, json);
    if (!job) return kHelpShown;
    return train_in_library(*job, metrics, [&](const nlohmann::ordered_json& summary) {
      if (json)
        std::cout << summary.dump(2) << "\n";
      else
        print(summary);
    });
  };
  r.commands.push_back(
      {a.name, a.summary, [train](const std::vector<std::string>& args) {
         return run_train_job(args, train);
       }});
  const auto by_name = [](const auto& x, const auto& y) { return x.name < y.name; };
  std::sort(r.algorithms.begin(), r.algorithms.end(), by_name);
  std::sort(r.commands.begin(), r.commands.end(), by_name);
}

const std::vector<Command>& train_algorithms() { return registry().commands; }

std::optional<driver::TrainJob> parse_train_job(const std::vector<std::string>& args) {
  const std::string algo = peek_option(args, "algo", "ldm");
  for (const TrainAlgorithm& a : registry().algorithms)
    if (a.name == algo) {
      bool json = false;
      return a.parse(args, json);
    }
  std::string list;
  for (const TrainAlgorithm& a : registry().algorithms) list += (list.empty() ? "" : "|") + a.name;
  throw UsageError("train: --algo must be one of " + list + " (got '" + algo + "')");
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

const char* data_name_help() {
  return "the name the model, the reports and the messages give the training data instead of its "
         "paths (e.g. for a temporary or dated copy); the model does not depend on it otherwise";
}

const char* index_base_help() {
  return "auto | 0 | 1: how text input's feature ids count (auto: 0 when some id is 0, else 1); a "
         "shard directory keeps the base it was converted with";
}

void check_train_paths(const po::variables_map& vm) {
  const auto value = [&](const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string();
  };
  check_train_paths(input_paths(vm, {"data", "validation", "unlabeled", "warm-start", "resume"}),
                    value("output"), value("checkpoint"), value("metrics-json"));
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
