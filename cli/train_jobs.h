// What an unattended (nightly) training job needs from any learner: its options (checkpoint,
// resume, stop, validation, metrics) and locks, stopping cleanly on SIGTERM/SIGINT, when to write a
// checkpoint, the data identity and configuration check of a resume, a machine-readable metrics
// file written whatever the outcome, and the rule for the exit code of an interrupted run. The
// learners' checkpoint files are in cli/linear_checkpoint.h and cli/cpm_checkpoint.h.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/signals.h"
#include "driver/epoch_loop.h"
#include "engine/classifier.h"
#include "engine/metrics.h"
#include "io/file_lock.h"
#include "io/model_file.h"
#include "io/shard_format.h"
#include "io/shards.h"

namespace polymargin::cli {

/// A driver::Learner made of a job's own functions, on_X for driver::Learner::X: how a command
/// wires its trainer, progress line, checkpoint file and report into the driver's epoch loop
/// (driver/epoch_loop.h).
struct JobLearner final : driver::Learner {
  std::function<void(const CsrView&, const io::SpareWork&, const driver::Position&)> on_learn;
  std::function<bool()> on_done = [] { return false; };
  std::function<void(const driver::Position&, bool pass_end)> on_checkpoint;
  std::function<void(int reason, const driver::Position&)> on_stop;  // must throw
  std::function<void(const driver::Position&, double seconds)> on_pass_end;
  std::function<void()> on_sync = [] {};  // averages the replicas

  void learn(const CsrView& rows, const io::SpareWork& spare, const driver::Position& at) override {
    on_learn(rows, spare, at);
  }
  bool done() const override { return on_done(); }
  void checkpoint(const driver::Position& at, bool pass_end) override {
    on_checkpoint(at, pass_end);
  }
  [[noreturn]] void stop(int reason, const driver::Position& at) override;
  void pass_end(const driver::Position& at, double seconds) override { on_pass_end(at, seconds); }
  void sync() override { on_sync(); }
};

/// In a rank of an MPI job that the launcher bound to one core of several (Open MPI binds each
/// rank to a core when it starts two or fewer), a note on stderr naming `--bind-to none`; once.
void note_rank_binding();

/// The learners that train as averaged replicas (--workers, the ranks of an MPI job): ldm, svm,
/// cpm. The kernel learners hold the whole set in one process.
bool trains_replicated(const std::string& algo);

/// --workers and --sync-rows of a data-parallel run (docs/design.md), and the MPI job's ranks:
/// what LDM/SVM and CPM runs share about their replicas.
struct DataParallel {
  int workers = 1;              // replicas in this process
  std::uint64_t sync_rows = 0;  // rows of the whole run between averagings; 0: kSyncsPerEpoch
  // The ranks of an MPI job (one alone without mpirun); rank 0 leads: prints, writes.
  engine::Peers peers;
  bool leader = true;
  std::uint64_t sync_windows = 0;  // sync_rows in whole windows (replicated runs)
  std::uint32_t window_blocks = 0;  // blocks a window (plan()): fewer than ranks leaves some idle
  std::uint64_t syncs = 0;         // averagings made
  std::uint64_t sync_bytes = 0;    // what each hands to the all-reduce
  double sync_seconds = 0;         // their time (part of learning)

  /// Averagings an epoch (a pass) makes by default (--sync-rows 0): one, at its end. At KDD size
  /// an averaging moves the replicas' whole arrays (the LDM's (W, A), 16 bytes a feature id; the
  /// CPM's U, 8 K bytes a feature id and side), as much memory traffic as a fifth of an epoch's
  /// learning on two cores (docs/performance.md).
  static constexpr std::uint64_t kSyncsPerEpoch = 1;
  static constexpr int kMaxWorkers = 1024;

  void add_to(boost::program_options::options_description& opts);
  /// Checks --workers and joins the MPI job's ranks (if any): after parsing.
  void check();
  int total() const { return workers * peers.count; }
  int first() const { return workers * peers.index; }
  /// Sets sync_windows (whole windows of `window_blocks` blocks between averagings: every rank
  /// counts the same windows, its part of each) and records workers, ranks and sync_windows in
  /// `run_config` (a resume with other counts is another run). Nothing for one replica in all.
  void plan(const io::Manifest& manifest, std::uint32_t window_blocks, nlohmann::json& run_config);
  /// Says on stderr how the replicas are spread and averaged (nothing for one in all); `pass`
  /// names the learner's pass ("epoch").
  void announce(std::uint64_t sync_bytes, const char* pass) const;
  /// The run's figures for --json and --metrics-json.
  nlohmann::json report() const;
  /// What a replicated run's model records of it (the config's "data_parallel").
  nlohmann::json model_record() const;
  /// replicas.average(peers) (engine::LdmReplicas, engine::CpmReplicas) at a sync of the loop,
  /// counted and timed for the report.
  template <class Replicas>
  void average(Replicas& replicas) {
    const auto start = std::chrono::steady_clock::now();
    replicas.average(peers);
    sync_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++syncs;
  }
};

/// UsageError: the CPM takes no --warm-start (its state is more than its weights).
[[noreturn]] void refuse_cpm_warm_start();
/// UsageError for a CPM entropy floor above 1 with several replicas (ASSIGN's history is not
/// averaged).
void check_cpm_replicas(const DataParallel& parallel, double perplexity);

/// Thrown by a learner that stopped on a signal, after saving what it could.
struct Interrupted {
  int signal = 0;          // SIGTERM, SIGINT, or kStopAfterRows
  std::string checkpoint;  // the checkpoint written, or empty when the run had no --checkpoint
};
/// Interrupted::signal of a run that reached --stop-after-rows.
inline constexpr int kStopAfterRows = -1;

/// Polled between windows (at syncs when replicated): the signal received, else kStopAfterRows once
/// `learnt` rows reach a non-zero `stop_after_rows`, else 0.
int stop_requested(std::uint64_t learnt, std::uint64_t stop_after_rows);
/// "--stop-after-rows", "SIGTERM", ...: the `interrupted.signal` of --metrics-json.
std::string stop_name(int signal);

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

/// Accuracy, AUC and the margin distribution as --metrics-json and --json report them.
nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m);

/// "xxh64:0123456789abcdef": the checksum a model or checkpoint file carries in its last 8 bytes
/// (io/model_file.h), read without loading the file; null for a model written to a device or a
/// stream (io/output_path.h). IoError when unreadable.
nlohmann::json model_file_checksum(const std::string& path);

/// What a learner's entry point returns when it only printed --help: nothing ran, nothing is
/// recorded, and the command exits 0.
inline constexpr int kHelpShown = -1;
/// A learner's entry point that reports into --metrics-json; returns the exit code, or kHelpShown.
using TrainJob = int (*)(const std::vector<std::string>& args, MetricsFile& metrics);
/// Runs `job` with the outcome recorded in --metrics-json whatever it is: on Interrupted it says
/// so on stderr and returns interrupted_exit_code; errors are recorded and rethrown.
int run_train_job(const std::vector<std::string>& args, TrainJob job);
/// "rank r of R: " on a rank other than 0 of an MPI job (the start of its error's record), else "".
std::string rank_prefix();

/// Removes the checkpoint of a run whose model is written (none: nothing); only a regular file
/// (never a device or FIFO), and one that cannot go is only noted on stderr.
void remove_finished_checkpoint(const std::string& path);

using io::shard::hex64;
/// The data's identity as a checkpoint records it: a resumed run must see the same rows in the
/// same order, which the block-index checksum pins (with the counts, for a readable refusal).
nlohmann::json data_identity(const io::Manifest& manifest);
/// Refuses to resume from the checkpoint `path` when the data (DataError) or the configuration
/// (UsageError) differ from the saved ones, naming every key that differs with both values.
void check_resumable(const std::string& path, const nlohmann::json& saved_config,
                     const nlohmann::json& saved_data, const nlohmann::json& config,
                     const nlohmann::json& data);

/// "ROWS" (e.g. 1000000, 1e6) or "SECONDS" with a unit (30s, 10m, 1h): how often --checkpoint
/// writes. UsageError naming --checkpoint-every otherwise.
using driver::CheckpointEvery;
CheckpointEvery parse_checkpoint_every(const std::string& text);

/// The options every learner's nightly job shares: --checkpoint, --checkpoint-every, --resume,
/// --stop-after-rows, --validation, --metrics-json, --data-name.
struct JobOptions {
  std::string checkpoint, checkpoint_every, resume, metrics;
  std::string data_name;  // --data-name: see data_record (cli/train.h)
  std::string index_base = "auto";  // --index-base of text input
  std::uint64_t stop_after_rows = 0;
  std::vector<std::string> validation;
  CheckpointEvery every;  // parsed by check()
  std::uint64_t read_ahead_mib = 64;  // io::ReadOptions::read_ahead_bytes, in MiB

  /// Adds them to `opts`; `pass` names a pass over the data in the help ("epoch", "pass").
  void add_to(boost::program_options::options_description& opts, const std::string& pass);
  /// UsageError for a combination that cannot be (--checkpoint-every without --checkpoint, ...).
  /// The paths are check_train_paths' (cli/train.h).
  void check();
};

/// What a run read, for --json and --metrics-json: the bytes read from disk in all and per pass,
/// and the seconds the learner waited for data per pass.
nlohmann::ordered_json reading_json(const driver::LoopResult& trained);

/// The locks of a job: MODEL.lock and, with --checkpoint, CHECKPOINT.lock, taken at once (a second
/// job writing either is refused before any work) and held until the job ends; with
/// --metrics-json, METRICS.lock first: a job refused for it (io::LockedError naming the metrics
/// file) writes no metrics, the file being the other job's record.
class JobLocks {
 public:
  JobLocks(const std::string& output, const std::string& checkpoint,
           const std::string& metrics = "");
  ~JobLocks();
  JobLocks(const JobLocks&) = delete;
  JobLocks& operator=(const JobLocks&) = delete;
  /// For --tune, which holds the locks from before its search: the job's final run, in this
  /// process, takes them over instead of being refused by them. While these locks live, a
  /// JobLocks of the same output and checkpoint takes nothing (these still hold them).
  void hand_down();

 private:
  std::string output_, checkpoint_path_, metrics_path_;
  std::optional<io::FileLock> metrics_, model_, checkpoint_;
};

/// `--validation DATA` scored with a finished model (in data order): accuracy, AUC and margins
/// for a binary model (metrics_json), rows, accuracy and errors for a multiclass one. DataError
/// for a label the model does not know.
struct Validation {
  nlohmann::ordered_json metrics;
  std::string data_checksum;  // hex64 of io::data_checksum
};
/// --validation DATA opened (text converted) before the training, in the training data's index
/// base, so that data the model could not be scored on is refused before any work: DataError for
/// no rows or a label the training data does not have. Empty without --validation.
struct ValidationData {
  std::vector<std::string> inputs;
  std::optional<io::Dataset> data;
};
/// Opens --validation data and refuses them (DataError) without rows or with a label `training`
/// lacks; `zero_is_unlabelled` (cmm): rows labelled 0 are refused as unlabelled.
ValidationData open_validation(const std::vector<std::string>& inputs, const io::Manifest& training,
                               int threads, bool zero_is_unlabelled = false);
/// The validation data scored with a finished model.
Validation validate(const engine::Classifier& model, const ValidationData& data, int threads);

/// What every streamed learner's run (cli/cmd_train.cpp, cli/train_cpm.cpp) holds besides its own
/// options and trainer: the job's options, locks and signals, the data, and the run report. Each
/// run is a struct of steps deriving from it; open_data() is their common first step.
struct TrainRun {
  explicit TrainRun(MetricsFile& metrics) : metrics(metrics), report(metrics.json()) {}
  /// Resolves --threads, starts the report (command, algorithm, data, model path), opens the data
  /// (text is converted on the fly), reports its identity and refuses an empty set.
  void open_data(const std::string& algorithm);
  const io::Manifest& manifest() const { return dataset->shards().manifest(); }
  /// The reader's options of every streamed run: its seed, the threads, read-ahead and window,
  /// the scaling and normalisation, and this rank's part of each window.
  io::ReadOptions read_options(std::uint64_t seed, bool scale_maxabs, bool normalize_l2,
                               const DataParallel& parallel) const;
  /// The epoch loop's options of every streamed run, reading with `read`: the checkpoint schedule,
  /// the averagings of `parallel` (whose replicas hand `sync_bytes` to each) and the stop requests.
  driver::LoopOptions loop_options(const io::ReadOptions& read, DataParallel& parallel,
                                   std::uint64_t sync_bytes) const;

  MetricsFile& metrics;
  nlohmann::ordered_json& report;
  // Options every learner has.
  std::vector<std::string> inputs;
  std::string output;
  JobOptions job;
  int threads = 0;
  std::uint32_t window_blocks = 0;
  bool json = false;
  boost::program_options::variables_map vm;
  // Held from the options' check to the end: a second job on the model or checkpoint is refused,
  // and a signal stops the run politely.
  std::optional<JobLocks> locks;
  std::optional<StopSignals> stop_signals;
  // The data.
  std::string data;  // the inputs' names, for messages
  std::chrono::steady_clock::time_point start;
  double open_seconds = 0;
  std::optional<io::Dataset> dataset;
  ValidationData validation;  // --validation, opened by the learner's run before it trains
};

}  // namespace polymargin::cli
