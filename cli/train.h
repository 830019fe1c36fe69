// `polymargin train --algo NAME ...`: every learner registers here how its flags become a job of
// the training library (driver/train.h) and how its summary reads, and shares the helpers below.
// cmd_train.cpp dispatches on --algo (read from the command line or from --config).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/progress.h"
#include "driver/job.h"
#include "driver/train.h"

namespace polymargin::cli {

using driver::binary_labels;
using driver::check_train_paths;
using driver::check_warm_model;
using driver::data_name;
using driver::metrics_may_replace;
using driver::number;

/// A learner of `train --algo NAME` on the command line: how its flags become a job of the training
/// library (driver/train.h), and how the job's summary reads.
struct TrainAlgorithm {
  std::string name;
  std::string summary;  // one line for `train --help`
  /// The whole argument list of `train` (--algo included) parsed with parse_options: the job, or
  /// nullopt once --help was shown; `json` is set by --json. UsageError for a bad option.
  std::function<std::optional<driver::TrainJob>(const std::vector<std::string>& args, bool& json)>
      parse;
  /// The text summary of a finished job (--json prints the summary itself).
  std::function<void(const nlohmann::ordered_json& summary)> print;
};

/// Registers `train --algo NAME` at static-initialisation time.
struct TrainAlgorithmRegistration {
  explicit TrainAlgorithmRegistration(TrainAlgorithm algorithm);
};

/// Registered learners, sorted by name.
const std::vector<TrainAlgorithm>& train_algorithms();
/// The learner named `algo`; UsageError naming the registered ones otherwise.
const TrainAlgorithm& train_algorithm(const std::string& algo);
/// `train --algo NAME ARGS` of the learner `a`: its job trained, its summary printed (with --json
/// as JSON), its outcome in --metrics-json; the exit code.
int run_train_algorithm(const TrainAlgorithm& a, const std::vector<std::string>& args);

/// The job `train ARGS` would run (--algo from ARGS or their --config, ldm by default); nullopt
/// when ARGS ask for --help (which is then printed). UsageError for an unknown learner or a bad
/// option, as the command says it.
std::optional<driver::TrainJob> parse_train_job(const std::vector<std::string>& args);

/// The value of --NAME in `args` (`--NAME X` or `--NAME=X`), else in the --config file, else
/// `fallback`. For dispatching before the full parse.
std::string peek_option(const std::vector<std::string>& args, const std::string& name,
                        const std::string& fallback);
/// The `key = value` lines of the --config file that `args` names, in file order, as
/// read_config_entries reads them (none when it names none, or the file cannot be read or is
/// malformed: the full parse reports that).
std::vector<std::pair<std::string, std::string>> config_entries(
    const std::vector<std::string>& args);

using driver::Clock;
using driver::seconds_since;

/// --data-name NAME: how the model, the run's reports and its messages name the training data,
/// instead of the paths given (a temporary copy's, a dated file's). Its help text:
const char* data_name_help();

/// --index-base (auto | 0 | 1): how the feature ids of text input count, as convert's option; a
/// shard directory keeps the base it was converted with.
const char* index_base_help();
/// --lambda1, --lambda2 and their -rel forms (λ/(m·C)) as given, unset when not, into `params`
/// (driver::LinearParams, driver::KldmParams), which the library checks (driver::lambda_value).
template <class Params>
void take_lambda_options(const po::variables_map& vm, Params& params) {
  const auto given = [&](const char* name) {
    return vm.count(name) ? std::optional<double>(vm[name].as<double>()) : std::nullopt;
  };
  params.lambda1 = given("lambda1");
  params.lambda2 = given("lambda2");
  params.lambda1_rel = given("lambda1-rel");
  params.lambda2_rel = given("lambda2-rel");
}

/// Epoch progress: on a terminal a line rewritten at most four times a second (epoch, share,
/// rows/s, ETA); elsewhere nothing until the per-epoch log line.
class EpochProgress {
 public:
  EpochProgress(std::uint64_t rows, int epochs) : rows_(rows), epochs_(epochs) {}
  void batch(int epoch, std::uint64_t rows_done_in_epoch);
  void clear() { line_.clear(); }

 private:
  ProgressLine line_{std::chrono::milliseconds(250)};
  std::uint64_t rows_;
  int epochs_;
};

}  // namespace polymargin::cli
