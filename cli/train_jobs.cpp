#include "cli/train_jobs.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/train.h"
#include "driver/mpi_job.h"
#include "engine/errors.h"
#include "engine/stop.h"
#include "io/atomic_file.h"
#include "io/output_path.h"

namespace polymargin::cli {
namespace {

std::string differences(const nlohmann::json& saved, const nlohmann::json& now) {
  std::string out;
  for (const auto& [key, value] : now.items()) {
    const nlohmann::json before = saved.contains(key) ? saved[key] : nlohmann::json();
    if (before != value)
      out += (out.empty() ? "" : ", ") + key + " " + before.dump() + " -> " + value.dump();
  }
  for (const auto& [key, value] : saved.items())
    if (!now.contains(key)) out += (out.empty() ? "" : ", ") + key + " " + value.dump() + " -> none";
  return out;
}

}  // namespace

void JobLearner::stop(int reason, const driver::Position& at) {
  on_stop(reason, at);
  throw std::logic_error("JobLearner::on_stop returned");
}

int interrupted_exit_code(const Interrupted& stop) {
  return stop.checkpoint.empty() ? 128 + stop.signal : kExitInterrupted;
}

int stop_requested(std::uint64_t learnt, std::uint64_t stop_after_rows) {
  if (const int signal = StopSignals::received()) return signal;
  return stop_after_rows > 0 && learnt >= stop_after_rows ? kStopAfterRows : 0;
}

std::string stop_name(int signal) {
  return signal == kStopAfterRows ? "--stop-after-rows" : signal_name(signal);
}

std::string signal_name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGHUP) return "SIGHUP";
  return "signal " + std::to_string(signal);
}

namespace {
const JobLocks* g_handed_down = nullptr;  // JobLocks::hand_down()'s
}  // namespace

void MetricsFile::finish(int exit_code, const std::string& status, const std::string& error) {
  if (!enabled()) return;
  // Written whatever the outcome, also when the command was refused before any work: so never
  // over a file that is not an earlier run's metrics (it may be the input that was refused).
  if (!metrics_may_replace(path_)) {
    err_printf("warning: --metrics-json: not writing %s: it exists and is not a metrics "
                 "file\n",
                 path_.c_str());
    return;
  }
  // Its directory missing is what refused the run at its start, and that error says so.
  std::error_code missing;
  const std::filesystem::path dir =
      std::filesystem::absolute(io::rename_target(path_)).parent_path();
  if (!io::writes_in_place(path_) && !std::filesystem::is_directory(dir, missing)) return;
  json_["status"] = status;
  json_["exit_code"] = exit_code;
  if (!error.empty()) json_["error"] = error;
  try {
    io::write_file_atomically(path_, json_.dump(2) + "\n");
  } catch (const Error& e) {
    // An earlier run's file must not go on saying what this run did not (its "ok"): removed.
    std::error_code ec;
    const bool removed = !io::writes_in_place(path_) && std::filesystem::remove(path_, ec);
    err_printf("warning: --metrics-json: %s%s\n", e.what(),
               removed ? " (the earlier run's metrics file was removed)" : "");
  }
}

nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m) {
  return {{"rows", m.rows},           {"positives", m.positives},
          {"negatives", m.negatives}, {"accuracy", m.accuracy},
          {"auc", m.auc},             {"margin_mean", m.margin_mean},
          {"margin_variance", m.margin_variance}};
}

nlohmann::json model_file_checksum(const std::string& path) {
  if (io::writes_in_place(path)) return nullptr;  // a stream or device: nothing to read back
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::uint64_t sum = 0;
  if (!in || in.tellg() < 8 || !in.seekg(-8, std::ios::end) ||
      !in.read(reinterpret_cast<char*>(&sum), sizeof sum))
    throw IoError("cannot read the checksum of " + path);
  char text[32];
  std::snprintf(text, sizeof text, "xxh64:%016llx", static_cast<unsigned long long>(sum));
  return text;
}

CheckpointEvery parse_checkpoint_every(const std::string& text) {
  CheckpointEvery every;
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  const std::string unit = text.substr(std::min(used, text.size()));
  const double scale = unit.empty() ? 0 : unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (used == 0 || !(value > 0) || !std::isfinite(value) || scale < 0 ||
      (unit.empty() && (value != std::floor(value) || value > 1e18)))
    throw UsageError("train: --checkpoint-every must be a row count (e.g. 1000000) or a time "
                     "(30s, 10m, 1h) (got '" + text + "')");
  if (unit.empty())
    every.rows = static_cast<std::uint64_t>(value);
  else
    every.seconds = value * scale;
  return every;
}

void DataParallel::add_to(po::options_description& opts) {
  opts.add_options()(
      "workers", po::value(&workers)->default_value(1),
      "replicas of the learner in this process, each learning its share of every window, averaged "
      "every --sync-rows rows (1: one learner, as without the option)")(
      "sync-rows", po::value(&sync_rows)->default_value(0),
      "with several workers or MPI ranks: rows of the whole run between averagings, in whole "
      "windows (0: once an epoch); every epoch ends with one");
}

void DataParallel::check() {
  if (workers < 1 || workers > kMaxWorkers)
    throw UsageError("train: --workers must be 1 to " + std::to_string(kMaxWorkers) + " (got " +
                     std::to_string(workers) + ")");
  if (const driver::MpiJob* mpi = driver::mpi_job()) {
    peers = mpi->peers();
    leader = mpi->rank() == 0;
  }
}

void DataParallel::plan(const io::Manifest& manifest, std::uint32_t window_blocks,
                        nlohmann::json& run_config) {
  if (total() == 1) {
    if (sync_rows > 0)
      err_printf("warning: --sync-rows has no effect with one worker and one rank (ignored)\n");
    return;
  }
  const std::uint64_t windows =
      (manifest.total_blocks + window_blocks - 1) / std::max<std::uint32_t>(window_blocks, 1);
  const std::uint64_t rows_per_window = std::max<std::uint64_t>(1, manifest.rows / windows);
  const std::uint64_t every = sync_rows > 0 ? sync_rows : manifest.rows / kSyncsPerEpoch;
  // every / rows_per_window rounded to the nearest (halves up), without every + rows_per_window / 2
  // (--sync-rows may be as large as 2^64 - 1).
  const std::uint64_t rounded =
      every / rows_per_window + (every % rows_per_window >= rows_per_window - rows_per_window / 2);
  sync_windows = std::max<std::uint64_t>(1, rounded);
  this->window_blocks = window_blocks;
  run_config["workers"] = workers;
  run_config["ranks"] = peers.count;
  run_config["sync_windows"] = sync_windows;
}

bool trains_replicated(const std::string& algo) {
  return algo == "ldm" || algo == "svm" || algo == "cpm";
}

void note_rank_binding() {
  static bool noted = false;
  if (noted || !driver::launched_as_rank()) return;
  noted = true;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) == 1 &&
      online > 1)
    err_printf("note: this rank may run on 1 of this machine's %ld cores (mpirun binds each rank "
               "to a core when it starts 2 ranks or fewer); `mpirun --bind-to none` lets a "
               "rank's threads use them all\n",
               online);
}

void DataParallel::announce(std::uint64_t sync_bytes, const char* pass) const {
  note_rank_binding();
  if (total() == 1) return;
  err_printf("data-parallel: %d replicas (%d worker%s x %d rank%s), averaged every %llu windows "
               "(%.1f MB each) and at every %s's end\n",
               total(), workers, workers == 1 ? "" : "s", peers.count, peers.count == 1 ? "" : "s",
               static_cast<unsigned long long>(sync_windows), static_cast<double>(sync_bytes) / 1e6,
               pass);
  if (window_blocks < static_cast<std::uint32_t>(peers.count))
    err_printf(
        "note: a window of %u block%s reaches %u of the %d ranks in turn, the others idle "
        "while it is learnt; --window-blocks %d or more keeps every rank busy\n",
        window_blocks, window_blocks == 1 ? "" : "s", window_blocks, peers.count, peers.count);
}

nlohmann::json DataParallel::report() const {
  return {{"workers", workers},
          {"ranks", peers.count},
          {"syncs", syncs},
          {"sync_bytes", sync_bytes},
          {"sync_seconds", sync_seconds}};
}

nlohmann::json DataParallel::model_record() const {
  return {{"workers", workers},
          {"ranks", peers.count},
          {"replicas", total()},
          {"sync_windows", sync_windows}};
}

std::string rank_prefix() {
  const driver::MpiJob* mpi = driver::mpi_job();
  if (!mpi || mpi->rank() == 0) return "";
  return "rank " + std::to_string(mpi->rank()) + " of " + std::to_string(mpi->size()) + ": ";
}

int run_train_job(const std::vector<std::string>& args, TrainJob job) {
  // Of an MPI job's ranks, rank 0 reports; another rank only when it fails (it then ends the job
  // before rank 0 can: on a shared path its record is the job's), its error named with its rank.
  const driver::MpiJob* mpi = driver::mpi_job();
  const bool leads = !mpi || mpi->rank() == 0;
  const std::string rank = rank_prefix();
  MetricsFile metrics(peek_option(args, "metrics-json", ""));
  metrics.json()["command"] = "train";  // also for a run refused before its options are read
  const auto stopped = [&](const Interrupted& stop) {
    const int code = interrupted_exit_code(stop);
    const std::string message =
        (stop.signal == kStopAfterRows ? "stopped after --stop-after-rows"
                                       : "interrupted by " + signal_name(stop.signal)) +
        (stop.checkpoint.empty()
             ? ": no checkpoint written (no --checkpoint), no model written"
             : ": checkpoint written to " + stop.checkpoint + " (continue with --resume " +
                   stop.checkpoint + "), no model written");
    err_printf("%s\n", message.c_str());
    if (leads) metrics.finish(code, "interrupted", message);
    return code;
  };
  try {
    const int code = job(args, metrics);
    if (code == kHelpShown) return kExitOk;
    // The summary (--json) must have arrived before the run is recorded as ok.
    if (const std::string failed = stdout_error(); !failed.empty()) throw IoError(failed);
    if (leads) metrics.finish(code, "ok");
    return code;
  } catch (const Interrupted& stop) {
    return stopped(stop);
  } catch (const engine::Stopped&) {  // a kernel solver, asked by the signal (no checkpoint)
    return stopped(Interrupted{StopSignals::received(), ""});
  } catch (const io::OutputPathError& e) {
    // Refused before any work; not written where the refusal says it must not go.
    driver::defer_error_to_rank0();
    if (!e.involves("--metrics-json")) metrics.finish(exit_code_of(e), "error", rank + e.what());
    throw;
  } catch (const io::LockedError& e) {
    // Refused for a file another job writes: when that is the metrics file, it is that job's.
    driver::defer_error_to_rank0();
    if (!metrics.is(e.path())) metrics.finish(exit_code_of(e), "error", rank + e.what());
    throw;
  } catch (const std::exception&) {
    const Failure failure = describe_failure(std::current_exception());
    driver::defer_error_to_rank0();
    metrics.finish(failure.code, "error", rank + failure.message);
    throw;
  }
}

io::ReadOptions TrainRun::read_options(std::uint64_t seed, bool scale_maxabs, bool normalize_l2,
                                       const DataParallel& parallel) const {
  io::ReadOptions read;
  read.seed = seed;
  read.threads = threads;
  read.read_ahead_bytes = job.read_ahead_mib << 20;
  read.window_blocks = window_blocks;
  read.scale_maxabs = scale_maxabs;
  read.normalize_l2 = normalize_l2;
  read.part = static_cast<std::uint32_t>(parallel.peers.index);  // a rank reads its part
  read.parts = static_cast<std::uint32_t>(parallel.peers.count);
  return read;
}

driver::LoopOptions TrainRun::loop_options(const io::ReadOptions& read, DataParallel& parallel,
                                           std::uint64_t sync_bytes) const {
  driver::LoopOptions loop;
  loop.read = read;
  loop.checkpoints = !job.checkpoint.empty();
  loop.every = job.every;
  const bool replicated = parallel.total() > 1;
  loop.sync_windows = replicated ? parallel.sync_windows : 0;
  parallel.sync_bytes = replicated ? sync_bytes : 0;
  loop.peers = &parallel.peers;
  // Rows learnt by the run (polled at averagings when replicated; under MPI, the ranks' sum).
  loop.stop_requested = [stop_after_rows = job.stop_after_rows](std::uint64_t rows) {
    return stop_requested(rows, stop_after_rows);
  };
  return loop;
}

void TrainRun::open_data(const std::string& algorithm) {
  if (driver::mpi_job() && std::find(inputs.begin(), inputs.end(), "-") != inputs.end())
    throw UsageError(
        "train: under mpirun the data come from files, which every rank reads: not "
        "from standard input (-)");
  threads = resolve_threads(threads);
  data = job.data_name.empty() ? data_name(inputs) : job.data_name;
  start = Clock::now();
  report["command"] = "train";
  report["algorithm"] = algorithm;
  report["data"] = data_record(inputs, job.data_name);
  report["model_path"] = output;
  io::ConvertOptions convert;
  convert.text.threads = threads;
  // No task_arena around the reader: it runs its own of `threads`, and a learner's parallel work
  // (the CPM's sides) runs in it; a second, nested arena got no worker thread on two cores.
  dataset.emplace(open_training_data(inputs, convert, job.index_base, threads, data));
  open_seconds = seconds_since(start);
  const io::Manifest& m = manifest();
  report["data_checksum"] = hex64(io::data_checksum(m));
  report["rows"] = m.rows;
  report["features"] = m.features;
  report["nnz"] = m.nnz;
  if (m.rows == 0) throw DataError(data, 0, 0, "no training rows");
}

void remove_finished_checkpoint(const std::string& path) {
  std::error_code error;
  if (path.empty() || !std::filesystem::is_regular_file(std::filesystem::status(path, error)))
    return;
  std::filesystem::remove(path, error);
  if (error)
    err_printf("warning: cannot remove the checkpoint %s: %s\n", path.c_str(),
               error.message().c_str());
}

nlohmann::json data_identity(const io::Manifest& m) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [label, count] : m.label_counts) labels[io::label_text(label)] = count;
  return {{"rows", m.rows},           {"nnz", m.nnz},
          {"max_index", m.max_index}, {"index_base", m.index_base},
          {"block_rows", m.block_rows}, {"label_counts", labels},
          {"data_checksum", hex64(io::data_checksum(m))}};
}

void check_resumable(const std::string& path, const nlohmann::json& saved_config,
                     const nlohmann::json& saved_data, const nlohmann::json& config,
                     const nlohmann::json& data) {
  if (saved_data != data) {
    // The same counts, other blocks: maybe the same rows in another form, which the blocks'
    // checksums tell apart (text is converted to raw blocks, standard input to zstd ones).
    nlohmann::json saved_counts = saved_data, counts = data;
    saved_counts.erase("data_checksum");
    counts.erase("data_checksum");
    throw DataError(path, 0, 0,
                    "cannot resume: the checkpoint was written for other training data (" +
                        differences(saved_data, data) + ")" +
                        (saved_counts == counts
                             ? "; the same rows given in another form (a text file, standard "
                               "input, shards converted from it) are other data to a checkpoint: "
                               "resume with the -d of the interrupted run"
                             : ""));
  }
  if (saved_config != config)
    throw UsageError("cannot resume from " + path +
                     ": the checkpoint was written with other options (" +
                     differences(saved_config, config) +
                     "); resume with the options of the interrupted run");
}

void JobOptions::add_to(po::options_description& opts, const std::string& pass) {
  opts.add_options()(
      "checkpoint", po::value(&checkpoint),
      ("write the learner's whole state to this file (atomically) at the end of every " + pass +
       " (of a run of more than 20, at each 5 % of them), or as --checkpoint-every says, and on "
       "SIGTERM/SIGINT; removed once the model is written")
          .c_str())(
      "checkpoint-every", po::value(&checkpoint_every),
      ("with --checkpoint: every N rows (1000000) or every so long (30s, 10m, 1h) instead of "
       "every " +
       pass)
          .c_str())(
      "resume", po::value(&resume),
      "continue the run that wrote this checkpoint (same data and options); the model is "
      "bit-identical to an uninterrupted run's")(
      "stop-after-rows", po::value(&stop_after_rows)->notifier([](std::uint64_t rows) {
        if (rows == 0) throw UsageError("train: --stop-after-rows must be at least 1 (got 0)");
      }),
      ("with --checkpoint: stop as on SIGTERM (checkpoint, exit 6) once the run has learnt this "
       "many rows in all, every " +
       pass + " counted (time-boxed jobs; tests of --resume)")
          .c_str())("validation", po::value(&validation)->multitoken(),
                    "data to evaluate the model on after training (accuracy, AUC; in --json and "
                    "--metrics-json)")(
      "metrics-json", po::value(&metrics),
      "write a machine-readable summary of the run here, also when it fails")(
      "data-name", po::value(&data_name), data_name_help())(
      "index-base", po::value(&index_base)->default_value("auto"), index_base_help())(
      "read-ahead", po::value(&read_ahead_mib)->default_value(64),
      "MiB of shard blocks read from disk ahead of the learner (0: none); the model does not "
      "depend on it");
}

void JobOptions::check() {
  if (read_ahead_mib > (std::uint64_t{1} << 20))
    throw UsageError("train: --read-ahead is in MiB and at most 1048576 (1 TiB)");
  if (!checkpoint_every.empty()) {
    if (checkpoint.empty()) throw UsageError("train: --checkpoint-every needs --checkpoint FILE");
    every = parse_checkpoint_every(checkpoint_every);
  }
  if (stop_after_rows > 0 && checkpoint.empty())
    throw UsageError("train: --stop-after-rows needs --checkpoint FILE (to continue from)");
}

nlohmann::ordered_json reading_json(const driver::LoopResult& trained) {
  std::uint64_t bytes = 0;
  for (const std::uint64_t b : trained.pass_disk_bytes) bytes += b;
  return {{"disk_read_bytes", bytes},
          {"disk_read_bytes_per_epoch", trained.pass_disk_bytes},
          {"read_wait_seconds_per_epoch", trained.pass_wait_seconds}};
}

JobLocks::JobLocks(const std::string& output, const std::string& checkpoint_path,
                   const std::string& metrics)
    : output_(output), checkpoint_path_(checkpoint_path), metrics_path_(metrics) {
  // Those the search before this run holds are its already.
  const JobLocks* held = g_handed_down;
  if (!metrics.empty() && (!held || held->metrics_path_ != metrics))
    metrics_.emplace(metrics, "metrics file");
  if (!held || held->output_ != output) model_.emplace(output, "model");
  if (!checkpoint_path.empty() && (!held || held->checkpoint_path_ != checkpoint_path))
    checkpoint_.emplace(checkpoint_path, "checkpoint");
}

JobLocks::~JobLocks() {
  if (g_handed_down == this) g_handed_down = nullptr;
}

void JobLocks::hand_down() { g_handed_down = this; }

namespace {

io::Dataset open_scored(const std::vector<std::string>& data, int index_base, int threads) {
  io::ConvertOptions convert;
  convert.text.threads = threads;
  convert.text.index_base = index_base == 0 ? io::IndexBase::kZero : io::IndexBase::kOne;
  return io::Dataset::open(data, convert, threads);
}

// DataError for the first validation label that is not one of `known`, naming them.
void refuse_unknown_labels(const std::map<double, std::uint64_t>& counts,
                           const std::vector<double>& known, const std::vector<std::string>& data,
                           bool zero_is_unlabelled) {
  for (const auto& [label, count] : counts) {
    if (std::any_of(known.begin(), known.end(),
                    [&](double k) { return static_cast<float>(k) == static_cast<float>(label); }))
      continue;
    const std::string rows = std::to_string(count) + (count == 1 ? " row" : " rows");
    if (zero_is_unlabelled && label == 0)
      throw DataError(data_name(data), 0, 0,
                      "validation rows labelled 0 (" + rows +
                          ") are unlabelled to cmm, and a validation scores labelled rows only: "
                          "leave them out of the validation data");
    std::string labels;
    for (const double k : known) labels += (labels.empty() ? "" : " / ") + io::label_text(k);
    throw DataError(data_name(data), 0, 0,
                    "validation label " + io::label_text(label) + " (" + rows +
                        ") is not one of the training labels " + labels);
  }
}

Validation score_validation(const engine::Classifier& model, const io::Dataset& vdata,
                            const std::vector<std::string>& data, int threads) {
  const io::Manifest& manifest = vdata.shards().manifest();
  refuse_unknown_labels(manifest.label_counts,
                        model.multiclass()
                            ? model.classes
                            : std::vector<double>{model.labels.negative, model.labels.positive},
                        data, model.algorithm == "cmm");
  std::vector<double> scores, predicted;
  engine::BinaryScores binary;
  if (!model.multiclass()) {
    std::uint64_t positives = 0, negatives = 0;
    for (const auto& [label, count] : manifest.label_counts)
      (model.labels.sign(static_cast<float>(label)) > 0 ? positives : negatives) += count;
    binary.reserve(positives, negatives);
  }
  std::uint64_t rows = 0, correct = 0;
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  vdata.shards().scan(read, [&](const CsrView& batch) {
    scores.resize(batch.rows);
    predicted.resize(batch.rows);
    model.predict_batch(batch, scores.data(), predicted.data());
    for (std::size_t r = 0; r < batch.rows; ++r) {
      ++rows;
      correct += static_cast<float>(predicted[r]) == batch.labels[r];
      if (!model.multiclass()) binary.add(scores[r], model.labels.sign(batch.labels[r]));
    }
  });
  Validation v;
  v.data_checksum = hex64(io::data_checksum(manifest));
  if (!model.multiclass()) {
    v.metrics = metrics_json(binary.metrics());
  } else {
    const double n = static_cast<double>(rows);
    v.metrics = {{"rows", rows},
                 {"accuracy", rows ? static_cast<double>(correct) / n : 0.0},
                 {"errors", rows - correct}};
  }
  return v;
}

}  // namespace

ValidationData open_validation(const std::vector<std::string>& inputs, const io::Manifest& training,
                               int threads, bool zero_is_unlabelled) {
  ValidationData v;
  if (inputs.empty()) return v;
  v.inputs = inputs;
  v.data.emplace(open_scored(inputs, training.index_base, threads));
  const io::Manifest& manifest = v.data->shards().manifest();
  if (manifest.rows == 0)
    throw DataError(data_name(inputs), 0, 0, "no data rows: --validation needs rows to score");
  std::vector<double> known;
  for (const auto& [label, n] : training.label_counts) known.push_back(label);
  refuse_unknown_labels(manifest.label_counts, known, inputs, zero_is_unlabelled);
  return v;
}

Validation validate(const engine::Classifier& model, const ValidationData& data, int threads) {
  return score_validation(model, *data.data, data.inputs, threads);
}

}  // namespace polymargin::cli
