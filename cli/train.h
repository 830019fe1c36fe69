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
#include "driver/options.h"
#include "driver/train.h"

namespace polymargin::cli {

using driver::binary_labels;
using driver::check_train_paths;
using driver::check_warm_model;
using driver::data_name;
using driver::metrics_may_replace;
using driver::number;

/// A learner of `train --algo NAME` on the command line: its options are those of the option
/// table (driver/options.h) that apply to it; how its summary reads is its own.
struct TrainAlgorithm {
  std::string name;
  std::string summary;   // one line for `train --help`
  std::string usage;     // what follows `train --algo NAME` in its help's usage line
  std::string preamble;  // help text before its options (the CPM's memory plan), or ""
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

/// A finished job's summary as `train` prints it: `a`'s text (and a tuned model's check), or with
/// `json` the summary as JSON.
/// Whether the passes converged (driver::Convergence's json): the last `pass`'s gain on the best
/// objective of those before, against --tol; `more` says what to give for a better model.
void print_convergence(const nlohmann::ordered_json& c, const char* pass, const char* more);
void print_train_summary(const TrainAlgorithm& a, const nlohmann::ordered_json& summary, bool json);

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

/// The whole argument list of `train` (--algo included) for the learner `a`: its job, or nullopt
/// once --help was shown; `json` is set by --json. UsageError for a bad option.
std::optional<driver::TrainJob> parse_train_options(const TrainAlgorithm& a,
                                                    const std::vector<std::string>& args,
                                                    bool& json);
/// The option `o` of the table added to `desc` as the command line takes it (--KEY, -S, its type,
/// its default, its help); `algo`, the learner, is the default of --algo.
void add_train_option(po::options_description& desc, const driver::TrainOption& o,
                      const std::string& algo);
/// Every option of `job.algo`'s that `vm` holds, given (not left at its default), put into `job`
/// by the table's apply (UsageError for a value the option refuses).
void apply_given_options(const po::variables_map& vm, driver::TrainJob& job);

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
