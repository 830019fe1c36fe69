// What an unattended (nightly) training job needs from any learner: stopping cleanly on
// SIGTERM/SIGINT, a machine-readable metrics file written whatever the outcome, and the rule for the
// exit code of an interrupted run. The linear learner's checkpoints are in cli/linear_checkpoint.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/classifier.h"
#include "engine/metrics.h"
#include "io/shards.h"

namespace polymargin::cli {

/// While one lives, the first SIGTERM or SIGINT only sets a flag, which the learner polls between
/// batches (it then finishes the batch, writes its checkpoint and stops); a second signal of the
/// same kind acts as usual (kills). The previous handlers come back on destruction.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// The signal received (SIGTERM, SIGINT), or 0.
  static int received();
};

/// Thrown by a learner that stopped on a signal, after saving what it could.
struct Interrupted {
  int signal = 0;
  std::string checkpoint;  // the checkpoint written, or empty when the run had no --checkpoint
};

/// Interrupted::signal of a run that reached --stop-after-rows.
inline constexpr int kStopAfterRows = -1;

/// 6 (kExitInterrupted) when a checkpoint was written, else 128 + signal as a shell reports a
/// killed command (nothing to resume from).
int interrupted_exit_code(const Interrupted& stop);
/// "SIGTERM", "SIGINT", ...
std::string signal_name(int signal);

/// `--metrics-json FILE`: one JSON object, written atomically once the command ends, successful or
/// not ("status", "exit_code", "error" are set by finish()).
class MetricsFile {
 public:
  explicit MetricsFile(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }
  nlohmann::ordered_json& json() { return json_; }
  /// Records the outcome and writes the file; a failure to write it is reported on stderr and
  /// does not change the command's exit code (the metrics describe the run, they are not it).
  void finish(int exit_code, const std::string& status, const std::string& error = "");

 private:
  std::string path_;
  nlohmann::ordered_json json_ = nlohmann::ordered_json::object();
};

/// Runs a learner's `train` (its whole command, given the job's MetricsFile to fill) and records
/// the outcome in --metrics-json whatever it is: "ok", "interrupted" (a stop on a signal or
/// --stop-after-rows becomes its exit code, with a message saying how to continue) or "error"
/// (the exception goes on to main, which prints it and picks the exit code). `train` returns a
/// negative value when it only printed --help: no metrics file then.
int run_training_job(const std::vector<std::string>& args,
                     const std::function<int(MetricsFile&)>& train);

/// "0123456789abcdef".
std::string hex64(std::uint64_t x);

/// The data's identity as a checkpoint and --metrics-json record it: rows, non-zeros, features,
/// labels and the block-index checksum (which pins the rows and their order).
nlohmann::json data_identity(const io::Manifest& m);

/// `--validation DATA`: scores every row of `inputs` (text or shards, converted with the model's
/// index base) with the binary `model` and returns accuracy, AUC and margins; every label must be
/// one of the model's two (DataError otherwise). Records the data and its checksum in `report`.
engine::BinaryMetrics validate_model(const engine::Classifier& model,
                                     const std::vector<std::string>& inputs, int threads,
                                     nlohmann::ordered_json& report);

/// Accuracy, AUC and the margin distribution as --metrics-json and --json report them.
nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m);

/// "xxh64:0123456789abcdef": the checksum a model or checkpoint file carries in its last 8 bytes
/// (io/model_file.h), read without loading the file. IoError when unreadable.
std::string model_file_checksum(const std::string& path);

/// "ROWS" (e.g. 1000000, 1e6) or "SECONDS" with a unit (30s, 10m, 1h): how often --checkpoint
/// writes. UsageError naming --checkpoint-every otherwise.
struct CheckpointEvery {
  std::uint64_t rows = 0;  // 0: not by rows
  double seconds = 0;      // 0: not by time
};
CheckpointEvery parse_checkpoint_every(const std::string& text);

}  // namespace polymargin::cli
