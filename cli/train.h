// `polymargin train --algo NAME ...`: every learner registers its own entry point here, with its
// own options and help, and shares the helpers below. cmd_train.cpp dispatches on --algo (read from
// the command line or from --config) and serves ldm/svm itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/command.h"
#include "cli/progress.h"
#include "engine/classifier.h"
#include "engine/errors.h"
#include "engine/ldm.h"
#include "engine/linear_model.h"
#include "io/shards.h"

namespace polymargin::cli {

/// Registers `train --algo name` at static-initialisation time. `run` gets the whole argument list
/// of `train` (--algo included) and parses it with parse_options, like a subcommand.
struct TrainAlgorithmRegistration {
  TrainAlgorithmRegistration(std::string name, std::string summary, CommandFn run);
};

/// Registered learners, sorted by name.
const std::vector<Command>& train_algorithms();

/// The value of --NAME in `args` (`--NAME X` or `--NAME=X`), else in the --config file, else
/// `fallback`. For dispatching before the full parse.
std::string peek_option(const std::vector<std::string>& args, const std::string& name,
                        const std::string& fallback);
/// The `key = value` lines of the --config file that `args` names, in file order (none when it
/// names none, or the file cannot be read: the full parse reports that).
std::vector<std::pair<std::string, std::string>> config_entries(
    const std::vector<std::string>& args);

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// "a,b,c" for the list of inputs, for messages.
std::string data_name(const std::vector<std::string>& inputs);
/// --data-name NAME: how the model, the run's reports and its messages name the training data,
/// instead of the paths given (a temporary copy's, a dated file's). Its help text:
const char* data_name_help();

/// --index-base (auto | 0 | 1): how the feature ids of text input count, as convert's option; a
/// shard directory keeps the base it was converted with.
const char* index_base_help();
/// The training data, their text read with --index-base `base` (UsageError for another value,
/// and for an explicit base that a shard directory's disagrees with; `data` names them).
io::Dataset open_training_data(const std::vector<std::string>& inputs, io::ConvertOptions convert,
                               const std::string& base, int threads, const std::string& data);
/// The data as a model's config and a run's report record it: [NAME] with --data-name, else the
/// inputs as given.
std::vector<std::string> data_record(const std::vector<std::string>& inputs,
                                     const std::string& name);
/// A double printed as people write it (no trailing zeros).
std::string number(double x);

/// UsageError unless at most one of --NAME (λ in the paper's units) and --NAME-rel (λ/(mC)) is
/// given, and it is finite and ≥ 0 (what can be checked before the data are read).
void check_lambda_option(const po::variables_map& vm, const std::string& name);
/// λ from --NAME or --NAME-rel (checked as above; UsageError when λ/(mC) × m × C overflows), for
/// m = `rows` and C = `c`; unset: nullopt (the engine's default ratio).
std::optional<double> lambda_option(const po::variables_map& vm, const std::string& name,
                                    double rows, double c);

/// NumericalError (exit 5, nothing written) unless the trained model's objective and its margins'
/// mean and variance over the training rows are finite: a setting far beyond the data's scale (a
/// huge λ) gives weights whose margins overflow, a model of no use. `remedy`: what to change.
void check_trained_model(double objective, const engine::MarginStats& margins,
                         const std::string& remedy);

/// UsageError unless --scale is maxabs or none and --normalize l2 or none.
void check_scaling(const std::string& scale, const std::string& normalize);

/// Exactly two distinct labels, else a DataError naming `data` and the labels found; the larger
/// becomes +1 (so ±1, 0/1 and any other pair work).
engine::LabelMap binary_labels(const io::Manifest& manifest, const std::string& data);
/// A --warm-start model (at `path`) for a run of `algo` on data of `labels`: DataError naming the
/// file when it is another learner's or has other labels.
void check_warm_model(const engine::LinearModel& model, const std::string& path,
                      const std::string& algo, const engine::LabelMap& labels);

/// io::check_outputs for `train`, before any work: the data, --validation, --unlabeled,
/// --warm-start, --resume and --config files are inputs; -o, --checkpoint (which may be the
/// --resume file) and --metrics-json are outputs. An existing --checkpoint file must be a
/// checkpoint (a model or any other file would be overwritten, then removed once the model is
/// written), an existing --metrics-json file an earlier run's metrics (metrics_may_replace). The
/// --validation data must be there to be opened (io::Dataset::probe).
void check_train_paths(const po::variables_map& vm);
/// The same from the paths themselves (`train --tune`, before its search): `inputs` named by
/// their options ("--data", "--resume", ...), and the outputs' paths ("" when not given).
void check_train_paths(const std::vector<io::NamedPath>& inputs, const std::string& output,
                       const std::string& checkpoint, const std::string& metrics_json);
/// True when `path` may be written by --metrics-json: it does not exist, is written in place, is
/// empty, or holds an earlier run's metrics (a JSON object with a "status").
bool metrics_may_replace(const std::string& path);

/// config.validate(), its refusal said as `train`'s, with the flag of the field it names
/// (flag_of).
template <class Config>
void check_config(const Config& config, const FlagNames& names = {}) {
  try {
    config.validate();
  } catch (const ConfigError& e) {
    throw UsageError("train: " + flag_of(e.field(), names) + " " + e.rule());
  } catch (const UsageError& e) {
    throw UsageError(std::string("train: ") + e.what());
  }
}

/// What besides its weights a training run holds: reader windows, decode buffers, the process.
inline constexpr std::uint64_t kRunOverheadBytes = std::uint64_t{256} << 20;
/// What a small run holds besides its arrays (a9a: 15-20 MiB peak): checked against a memory
/// cgroup's hard limit.
inline constexpr std::uint64_t kRunFloorBytes = std::uint64_t{32} << 20;
/// "1.25 GiB".
std::string gib(std::uint64_t bytes);
/// MemoryError unless `need` bytes fit in the memory available (io::mem_available) and in what the
/// process's memory cgroup leaves (check_hard_limit_fits): "train: WHAT needs N GiB but only M GiB
/// are available: REMEDY".
void check_fits(std::uint64_t need, const std::string& what, const std::string& remedy);
/// A limit that ends the process rather than refusing an allocation politely, and what it leaves:
/// the memory cgroup's, or the address-space limit (`ulimit -v`, less the address space already
/// held), whichever leaves less; `name` says which in a message.
struct HardLimit {
  std::uint64_t room = 0;
  std::string name;  // "the memory cgroup", "the address-space limit (ulimit -v)"
};
std::optional<HardLimit> hard_memory_limit();
/// The part of check_fits against the hard limit (need counted with kRunOverheadBytes, which is
/// replaced by kRunFloorBytes there).
void check_hard_limit_fits(std::uint64_t need, const std::string& what, const std::string& remedy);
/// What a hard limit (a memory cgroup, ulimit -v) that leaves `room` bytes lets a run's arrays
/// take: room less kRunFloorBytes (0 when less is left).
std::uint64_t hard_limit_arrays_room(std::uint64_t room);
/// Whether a run needing `need` bytes (its arrays + kRunOverheadBytes, as check_fits counts them)
/// fits under a hard limit that leaves `room` bytes.
bool fits_hard_limit(std::uint64_t need, std::uint64_t room);

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
