// The command line's side of a training job (driver/job.h holds what the library does): the job's
// options as flags, stopping cleanly on SIGTERM/SIGINT, the notes and progress on stderr, a
// machine-readable metrics file written whatever the outcome, and the rule for the exit code of an
// interrupted run.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/signals.h"
#include "cli/train.h"
#include "driver/job.h"
#include "driver/train.h"

namespace polymargin::cli {

using driver::DataParallel;
using driver::Interrupted;
using driver::JobLocks;
using driver::JobOptions;
using driver::kStopAfterRows;
using driver::metrics_json;
using driver::note_rank_binding;
using driver::signal_name;
using driver::trains_replicated;

/// The command line's driver::Events: notes on stderr (clearing a live progress line first), the
/// epoch progress line on a terminal (EpochProgress), and the signals StopSignals took.
class StderrEvents final : public driver::Events {
 public:
  void note(const std::string& line) override;
  void progress(std::uint64_t pass, std::uint64_t passes, std::uint64_t done,
                std::uint64_t rows) override;
  int stop_requested() override { return StopSignals::received(); }

 private:
  std::optional<EpochProgress> progress_;
};

using driver::check_cpm_replicas;
using driver::refuse_cpm_warm_start;

/// 6 (kExitInterrupted) when a checkpoint was written, else 128 + signal as a shell reports a
/// killed command (nothing to resume from).
int interrupted_exit_code(const Interrupted& stop);
/// `--metrics-json FILE`: one JSON object, written atomically once the command ends, successful or
/// not ("status", "exit_code", "error" are set by finish()).
class MetricsFile {
 public:
  explicit MetricsFile(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }
  /// Whether `path` is this file (as given).
  bool is(const std::string& path) const { return enabled() && path == path_; }
  nlohmann::ordered_json& json() { return json_; }
  /// Records the outcome and writes the file; a failure to write it is reported on stderr and
  /// does not change the command's exit code (the metrics describe the run, they are not it). An
  /// existing file that is not an earlier run's metrics is never replaced (the command was then
  /// refused: the path is an input, or some other file).
  void finish(int exit_code, const std::string& status, const std::string& error = "");

 private:
  std::string path_;
  nlohmann::ordered_json json_ = nlohmann::ordered_json::object();
};

/// What a learner's entry point returns when it only printed --help: nothing ran, nothing is
/// recorded, and the command exits 0.
inline constexpr int kHelpShown = -1;
/// A learner's entry point that reports into --metrics-json; returns the exit code, or kHelpShown.
using TrainEntry = std::function<int(const std::vector<std::string>& args, MetricsFile& metrics)>;
/// Runs `job` with the outcome recorded in --metrics-json whatever it is: on Interrupted it says
/// so on stderr and returns interrupted_exit_code; errors are recorded and rethrown.
int run_train_job(const std::vector<std::string>& args, const TrainEntry& job);
/// "rank r of R: " on a rank other than 0 of an MPI job (the start of its error's record), else "".
std::string rank_prefix();

/// `job` trained by the library (driver::train) for the command line: its notes on stderr, a
/// signal stopping it at its next window (StopSignals from here on), its record into --metrics-json;
/// `print` shows the summary it returns (rank 0 of an MPI job alone). Returns the exit code.
int train_in_library(const driver::TrainJob& job, MetricsFile& metrics,
                     const std::function<void(const nlohmann::ordered_json& summary)>& print);

}  // namespace polymargin::cli
