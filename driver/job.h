// What every training job shares around its learner, whoever calls it (the command line, Python,
// --tune's cells): the job's options (checkpoint, resume, stop, validation, metrics) as plain
// values, the events it reports to its caller and the stop requests it takes from it, its locks,
// opening its data, the memory it plans for, the identity and configuration check of a resume, a
// data-parallel run's replicas and ranks, and the validation of the finished model.
//
// Nothing here reads argv or prints: a job says what it does through Events, which the command
// line prints on stderr (cli/train_jobs.h) and a library caller may log or ignore. The learners'
// checkpoint files are io/linear_checkpoint.h and io/cpm_checkpoint.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/config_check.h"
#include "driver/epoch_loop.h"
#include "driver/text.h"
#include "engine/classifier.h"
#include "engine/errors.h"
#include "engine/ldm.h"
#include "engine/linear_model.h"
#include "engine/metrics.h"
#include "engine/replicas.h"
#include "io/file_lock.h"
#include "io/output_path.h"
#include "io/shard_format.h"
#include "io/shards.h"

namespace polymargin::driver {

/// What a job tells its caller while it runs, and the one thing it asks: whether to stop. Every
/// call comes from the thread that called the job. The defaults say nothing and never stop.
class Events {
 public:
  virtual ~Events() = default;
  /// A line for the user (the command line's stderr), without its newline.
  virtual void note(const std::string& line) { (void)line; }
  /// Progress inside a pass, after each window: `done` of the `rows` rows of pass `pass`
  /// (0-based) of `passes`.
  virtual void progress(std::uint64_t pass, std::uint64_t passes, std::uint64_t done,
                        std::uint64_t rows) {
    (void)pass, (void)passes, (void)done, (void)rows;
  }
  /// A stop request (the number of the signal the caller received), or 0 to go on: polled before
  /// the first window and after each (at averagings when replicated).
  virtual int stop_requested() { return 0; }
};

/// A Learner made of a job's own functions, on_X for Learner::X: how a job wires its trainer,
/// progress, checkpoint file and record into the epoch loop (driver/epoch_loop.h).
struct JobLearner final : Learner {
  std::function<void(const CsrView&, const io::SpareWork&, const Position&)> on_learn;
  std::function<bool()> on_done = [] { return false; };
  std::function<void(const Position&, bool pass_end)> on_checkpoint;
  std::function<void(int reason, const Position&)> on_stop;  // must throw
  std::function<void(const Position&, double seconds)> on_pass_end;
  std::function<void()> on_sync = [] {};  // averages the replicas

  void learn(const CsrView& rows, const io::SpareWork& spare, const Position& at) override {
    on_learn(rows, spare, at);
  }
  bool done() const override { return on_done(); }
  void checkpoint(const Position& at, bool pass_end) override { on_checkpoint(at, pass_end); }
  [[noreturn]] void stop(int reason, const Position& at) override;
  void pass_end(const Position& at, double seconds) override { on_pass_end(at, seconds); }
  void sync() override { on_sync(); }
};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


/// Thrown by a job that stopped on its caller's request or its row budget, after saving what it
/// could.
struct Interrupted {
  int signal = 0;          // SIGTERM, SIGINT, or kStopAfterRows
  std::string checkpoint;  // the checkpoint written, or empty when the run had no checkpoint
};
/// Interrupted::signal of a run that reached its JobOptions::stop_after_rows.
inline constexpr int kStopAfterRows = -1;
/// "SIGTERM", "SIGINT", ...
std::string signal_name(int signal);
/// "--stop-after-rows", "SIGTERM", ...: the `interrupted.signal` of a run's record.
std::string stop_name(int signal);

/// "ROWS" (e.g. 1000000, 1e6) or "SECONDS" with a unit (30s, 10m, 1h): how often a checkpoint is
/// written. UsageError naming --checkpoint-every otherwise.
CheckpointEvery parse_checkpoint_every(const std::string& text);

/// The options every learner's unattended (nightly) job shares.
struct JobOptions {
  std::string checkpoint;           // write the learner's state here (empty: no checkpoints)
  std::string checkpoint_every;     // "" (every pass), ROWS, or a time (30s, 10m, 1h)
  std::string resume;               // continue the run that wrote this checkpoint
  std::string metrics;              // the run's record goes here (its lock is the job's; the AUC of
                                    // the training rows is counted in the memory plan)
  std::string data_name;            // how the model, reports and messages name the training data
  std::string index_base = "auto";  // of text input: auto, 0 or 1
  std::uint64_t stop_after_rows = 0;    // stop as on a signal once this many rows are learnt
  std::vector<std::string> validation;  // data to score the finished model on
  std::uint64_t read_ahead_mib = 64;    // io::ReadOptions::read_ahead_bytes, in MiB
  CheckpointEvery every;                // parsed from checkpoint_every by check()
  /// The job's locks (JobLocks) are its caller's, taken before the job and held past its end (a
  /// --tune search's, from before its search): the job takes none.
  bool locks_held = false;

  /// UsageError for a combination that cannot be (checkpoint_every without checkpoint, ...);
  /// parses checkpoint_every.
  void check();
};

/// Polled between windows (at syncs when replicated): `events`' stop request, else kStopAfterRows
/// once `learnt` rows reach a non-zero `stop_after_rows`, else 0.
int stop_requested(Events& events, std::uint64_t learnt, std::uint64_t stop_after_rows);

/// The learners that train as averaged replicas (workers, the ranks of an MPI job): ldm, svm,
/// cpm. The kernel learners hold the whole set in one process.
bool trains_replicated(const std::string& algo);

/// In a rank of an MPI job that the launcher bound to one core of several (Open MPI binds each
/// rank to a core when it starts two or fewer), a note naming `--bind-to none`; once a process.
void note_rank_binding(Events& events);

/// The workers and sync rows of a data-parallel run (docs/design.md), and the MPI job's ranks:
/// what LDM/SVM and CPM runs share about their replicas.
struct DataParallel {
  int workers = 1;              // replicas in this process
  std::uint64_t sync_rows = 0;  // rows of the whole run between averagings; 0: kSyncsPerEpoch
  /// This process alone, also in an MPI job (a --tune cell: the ranks share the cells out).
  bool solo = false;
  // The ranks of an MPI job (one alone without mpirun); rank 0 leads: prints, writes.
  engine::Peers peers;
  bool leader = true;
  std::uint64_t sync_windows = 0;   // sync_rows in whole windows (replicated runs)
  std::uint32_t window_blocks = 0;  // blocks a window (plan()): fewer than ranks leaves some idle
  std::uint64_t syncs = 0;          // averagings made
  std::uint64_t sync_bytes = 0;     // what each hands to the all-reduce
  double sync_seconds = 0;          // their time (part of learning)

  /// Averagings an epoch (a pass) makes by default (sync_rows 0): one, at its end. At KDD size
  /// an averaging moves the replicas' whole arrays (the LDM's (W, A), 16 bytes a feature id; the
  /// CPM's U, 8 K bytes a feature id and side), as much memory traffic as a fifth of an epoch's
  /// learning on two cores (docs/performance.md).
  static constexpr std::uint64_t kSyncsPerEpoch = 1;
  static constexpr int kMaxWorkers = 1024;

  /// Checks the workers and joins the MPI job's ranks (if any, unless solo): before any work.
  void check();
  int total() const { return workers * peers.count; }
  int first() const { return workers * peers.index; }
  /// Sets sync_windows (whole windows of `window_blocks` blocks between averagings: every rank
  /// counts the same windows, its part of each) and records workers, ranks and sync_windows in
  /// `run_config` (a resume with other counts is another run). Nothing for one replica in all.
  void plan(const io::Manifest& manifest, std::uint32_t window_blocks, nlohmann::json& run_config,
            Events& events);
  /// check_ranks_agree over the ranks of a run, before its first averaging: `config` (the run's
  /// config, as a resume checks it) with `job`'s and `output`'s paths, and `data` (data_identity).
  /// Nothing for one rank, or a solo job.
  void agree(nlohmann::json config, const nlohmann::json& data, const JobOptions& job,
             const std::string& output, const std::string& data_name) const;
  /// Says how the replicas are spread and averaged (nothing for one in all); `pass` names the
  /// learner's pass ("epoch").
  void announce(std::uint64_t sync_bytes, const char* pass, Events& events) const;
  /// The run's figures for its summary and record.
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

/// Refuses, on every rank, a job whose ranks were given different jobs (mpirun's `-np 1 A : -np 1
/// B`): each rank's `data` and `config` must be every rank's. One sum of a digest of both (16 bytes
/// a rank); only when they differ, two more carry rank 0's and the first other rank's, so that every
/// rank says the same: DataError naming `data_name` for other data (exit 3), else UsageError (exit
/// 2), each with every differing key. Called by every rank at the same point; nothing alone.
void check_ranks_agree(const engine::Peers& peers, const nlohmann::json& data,
                       const nlohmann::json& config, const std::string& data_name);

/// UsageError: the CPM takes no warm start (its state is more than its weights).
[[noreturn]] void refuse_cpm_warm_start();
/// UsageError for a CPM entropy floor above 1 with several replicas (ASSIGN's history is not
/// averaged).
void check_cpm_replicas(const DataParallel& parallel, double perplexity);

/// Number of worker threads to use: `requested` if > 0, else the cores this process may run on
/// (its affinity mask: `taskset`, a cpuset, or a rank that mpirun bound), as the reader counts
/// them.
int resolve_threads(int requested);

/// "a,b,c" for the list of inputs, for messages.
std::string data_name(const std::vector<std::string>& inputs);
/// The data as a model's config and a run's report record it: [NAME] with a data name, else the
/// inputs as given.
std::vector<std::string> data_record(const std::vector<std::string>& inputs,
                                     const std::string& name);
/// A double printed as people write it (no trailing zeros).
std::string number(double x);

/// The training data, their text read with index base `base` (auto, 0, 1: UsageError for another
/// value, and for an explicit base that a shard directory's disagrees with; `data` names them);
/// or `shards` (TrainJob::shards) when set, whose base `base` must not contradict either.
io::Dataset open_training_data(const std::vector<std::string>& inputs,
                               const std::shared_ptr<const io::ShardSet>& shards,
                               io::ConvertOptions convert, const std::string& base, int threads,
                               const std::string& data);

/// λ from `paper` (the paper's units) or `rel` (λ/(mC)), for m = `rows` and C = `c`; neither:
/// nullopt (the engine's default ratio). UsageError naming --NAME or --NAME-rel when both are
/// given, when the value is negative or not finite, or when λ/(mC) × m × C overflows.
std::optional<double> lambda_value(const std::string& name, std::optional<double> paper,
                                   std::optional<double> rel, double rows, double c);

/// NumericalError (exit 5, nothing written) unless the trained model's objective and its margins'
/// mean and variance over the training rows are finite: a setting far beyond the data's scale (a
/// huge λ) gives weights whose margins overflow, a model of no use. `remedy`: what to change.
void check_trained_model(double objective, const engine::MarginStats& margins,
                         const std::string& remedy);

/// UsageError unless `scale` is maxabs or none and `normalize` l2 or none.
void check_scaling(const std::string& scale, const std::string& normalize);

/// Exactly two distinct labels, else a DataError naming `data` and the labels found; the larger
/// becomes +1 (so ±1, 0/1 and any other pair work).
engine::LabelMap binary_labels(const io::Manifest& manifest, const std::string& data);
/// A warm-start model (at `path`) for a run of `algo` on data of `labels`: DataError naming the
/// file when it is another learner's or has other labels.
void check_warm_model(const engine::LinearModel& model, const std::string& path,
                      const std::string& algo, const engine::LabelMap& labels);

/// io::check_outputs for a training job, before any work: `inputs` named by their options
/// ("--data", "--resume", ...) are inputs; the model, the checkpoint (which may be the resumed
/// file) and the metrics file are outputs ("" when not given). An existing checkpoint file must be
/// a checkpoint (a model or any other file would be overwritten, then removed once the model is
/// written), an existing metrics file an earlier run's metrics (metrics_may_replace). The
/// validation data must be there to be opened (io::Dataset::probe).
void check_train_paths(const std::vector<io::NamedPath>& inputs, const std::string& output,
                       const std::string& checkpoint, const std::string& metrics_json);
/// check_train_paths for a job's own files: its data, validation data, unlabelled rows (cmm),
/// warm-start model and resumed checkpoint (then the caller's `other_inputs`) are inputs; `output`,
/// the checkpoint and the metrics file outputs.
void check_job_paths(const std::vector<std::string>& inputs, const JobOptions& job,
                     const std::string& warm_start, const std::vector<io::NamedPath>& other_inputs,
                     const std::string& output, const std::vector<std::string>& unlabeled = {});
/// The files a job reads, each named by its option, as check_job_paths checks them.
std::vector<io::NamedPath> job_inputs(const std::vector<std::string>& inputs, const JobOptions& job,
                                      const std::string& warm_start,
                                      const std::vector<io::NamedPath>& other_inputs,
                                      const std::vector<std::string>& unlabeled = {});
/// True when `path` may be written as a run's metrics: it does not exist, is written in place, is
/// empty, or holds an earlier run's metrics (a JSON object with a "status").
bool metrics_may_replace(const std::string& path);

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

/// Accuracy, AUC and the margin distribution as a run's summary and record report them.
nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m);

/// "xxh64:0123456789abcdef": the checksum a model or checkpoint file carries in its last 8 bytes
/// (io/model_file.h), read without loading the file; null for a model written to a device or a
/// stream (io/output_path.h). IoError when unreadable.
nlohmann::json model_file_checksum(const std::string& path);

/// Removes the checkpoint of a run whose model is written (none: nothing); only a regular file
/// (never a device or FIFO), and one that cannot go is only noted.
void remove_finished_checkpoint(const std::string& path, Events& events);

using io::shard::hex64;
/// The data's identity as a checkpoint records it: a resumed run must see the same rows in the
/// same order, which the block-index checksum pins (with the counts, for a readable refusal).
nlohmann::json data_identity(const io::Manifest& manifest);
/// Refuses to resume from the checkpoint `path` when the data (DataError) or the configuration
/// (UsageError) differ from the saved ones, naming every key that differs with both values.
void check_resumable(const std::string& path, const nlohmann::json& saved_config,
                     const nlohmann::json& saved_data, const nlohmann::json& config,
                     const nlohmann::json& data);

/// What a run read, for its summary and record: the bytes read from disk in all and per pass, and
/// the seconds the learner waited for data per pass.
nlohmann::ordered_json reading_json(const LoopResult& trained);

/// The locks of a job: MODEL.lock and, with a checkpoint, CHECKPOINT.lock, taken at once (a second
/// job writing either is refused before any work) and held until the job ends; with a metrics
/// file, METRICS.lock first: a job refused for it (io::LockedError naming the metrics file) writes
/// no metrics, the file being the other job's record. `held` (JobOptions::locks_held): the caller
/// holds them, and these take nothing.
class JobLocks {
 public:
  JobLocks(const std::string& output, const std::string& checkpoint,
           const std::string& metrics = "", bool held = false);
  JobLocks(const JobLocks&) = delete;
  JobLocks& operator=(const JobLocks&) = delete;

 private:
  std::optional<io::FileLock> metrics_, model_, checkpoint_;
};

/// Whether a streamed run converged, as scikit-learn's SGD judges it: a pass converged when it did
/// not lower the (progressive) training objective below the best of the passes before by more than
/// `tol` of it. The progressive objective (margins at the pre-step weights) moves by a few tenths of
/// a percent from pass to pass once learning has settled, so a rise counts as no progress, not as
/// a change to wait out. Reported, not acted on: the run makes its passes.
struct Convergence {
  double tol = 1e-3;
  std::optional<double> best;                // the lowest objective of the passes so far
  std::optional<double> change;              // (F_t − F_{t−1}) / |F_{t−1}| of the last pass
  std::optional<double> gain;                // (best before − F_t) / |best before|, of the last
  std::optional<std::uint64_t> since;  // the first pass (1-based) of the last run of passes
                                       // that converged, to the last: where a run could stop

  /// The objective at the end of pass `pass` (0-based); returns its relative change from the pass
  /// before (negative when it fell), unknown for the first pass the run makes (a resumed run
  /// judges the passes it makes).
  std::optional<double> pass_end(std::uint64_t pass, double objective);
  /// Whether the last pass converged; unknown (null) before two passes were made.
  std::optional<bool> converged() const;
  /// {tol, converged, objective_change, objective_gain, converged_since_pass} for --json and
  /// --metrics-json.
  nlohmann::ordered_json json() const;

 private:
  std::optional<double> last_;
};

/// Validation data scored with a finished model (in data order): accuracy, AUC and margins for a
/// binary model (metrics_json), rows, accuracy and errors for a multiclass one. DataError for a
/// label the model does not know.
struct Validation {
  nlohmann::ordered_json metrics;
  std::string data_checksum;  // hex64 of io::data_checksum
};
/// Validation data opened (text converted) before the training, in the training data's index
/// base, so that data the model could not be scored on is refused before any work: DataError for
/// no rows or a label the training data does not have. Empty without validation data.
struct ValidationData {
  std::vector<std::string> inputs;
  std::optional<io::Dataset> data;
};
/// Opens validation data and refuses them (DataError) without rows or with a label `training`
/// lacks; `zero_is_unlabelled` (cmm): rows labelled 0 are refused as unlabelled.
ValidationData open_validation(const std::vector<std::string>& inputs, const io::Manifest& training,
                               int threads, bool zero_is_unlabelled = false);
/// The validation data scored with a finished model.
Validation validate(const engine::Classifier& model, const ValidationData& data, int threads);

/// A job's training data, opened.
struct OpenedData {
  int threads = 0;   // the threads asked for, resolved (resolve_threads)
  std::string data;  // the inputs' names (or the data name), for messages
  std::chrono::steady_clock::time_point start;  // of the job, for its total time
  double open_seconds = 0;
  std::optional<io::Dataset> dataset;
};
/// What every job's record says from its start (so a refused or failed run's says it too): the
/// command, the algorithm, the data (as data_record names them) and the model's path.
void start_record(nlohmann::ordered_json& record, const std::string& algorithm,
                  const std::vector<std::string>& inputs, const JobOptions& job,
                  const std::string& output);
/// Resolves `threads`, starts `record` (command, algorithm, data, model path), opens the data
/// (text is converted on the fly; `shards`, when set, is the data instead of `inputs`), records
/// its identity and refuses an empty set.
OpenedData open_job_data(const std::string& algorithm, const std::vector<std::string>& inputs,
                         const std::shared_ptr<const io::ShardSet>& shards,
                         const std::string& output, const JobOptions& job, int threads,
                         nlohmann::ordered_json& record);
/// UsageError unless a job has training data: `inputs` or `shards`.
void check_has_data(const std::vector<std::string>& inputs,
                    const std::shared_ptr<const io::ShardSet>& shards);

/// The reader's options of every streamed run: its seed, the threads, read-ahead and window, the
/// scaling and normalisation, and this rank's part of each window.
io::ReadOptions read_options(std::uint64_t seed, int threads, const JobOptions& job,
                             std::uint32_t window_blocks, bool scale_maxabs, bool normalize_l2,
                             const DataParallel& parallel);
/// The epoch loop's options of every streamed run, reading with `read`: the checkpoint schedule,
/// the averagings of `parallel` (whose replicas hand `sync_bytes` to each) and the stop requests
/// (`stop`, polled with the rows the run learnt).
LoopOptions loop_options(const io::ReadOptions& read, const JobOptions& job, DataParallel& parallel,
                         std::uint64_t sync_bytes, std::function<int(std::uint64_t rows)> stop);

}  // namespace polymargin::driver
