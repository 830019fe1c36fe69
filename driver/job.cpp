#include "driver/job.h"

#include <oneapi/tbb/info.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "driver/mpi_job.h"
#include "io/memory.h"
#include "io/model_file.h"

namespace polymargin::driver {
namespace {

std::string differences(const nlohmann::json& saved, const nlohmann::json& now) {
  std::string out;
  for (const auto& [key, value] : now.items()) {
    const nlohmann::json before = saved.contains(key) ? saved[key] : nlohmann::json();
    if (before != value)
      out += (out.empty() ? "" : ", ") + key + " " + before.dump() + " -> " + value.dump();
  }
  for (const auto& [key, value] : saved.items())
    if (!now.contains(key))
      out += (out.empty() ? "" : ", ") + key + " " + value.dump() + " -> none";
  return out;
}

}  // namespace

void JobLearner::stop(int reason, const Position& at) {
  on_stop(reason, at);
  throw std::logic_error("JobLearner::on_stop returned");
}

int stop_requested(Events& events, std::uint64_t learnt, std::uint64_t stop_after_rows) {
  if (const int signal = events.stop_requested()) return signal;
  return stop_after_rows > 0 && learnt >= stop_after_rows ? kStopAfterRows : 0;
}

std::string flag_of(const std::string& field, const FlagNames& names) {
  if (const auto it = names.find(field); it != names.end()) return it->second;
  std::string flag = "--" + field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

int resolve_threads(int requested) {
  return requested > 0 ? requested : tbb::info::default_concurrency();
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

nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m) {
  return {{"rows", m.rows},
          {"positives", m.positives},
          {"negatives", m.negatives},
          {"accuracy", m.accuracy},
          {"auc", m.auc},
          {"margin_mean", m.margin_mean},
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
  const double scale = unit.empty()  ? 0
                       : unit == "s" ? 1
                       : unit == "m" ? 60
                       : unit == "h" ? 3600
                                     : -1;
  if (used == 0 || !(value > 0) || !std::isfinite(value) || scale < 0 ||
      (unit.empty() && (value != std::floor(value) || value > 1e18)))
    throw UsageError(
        "train: --checkpoint-every must be a row count (e.g. 1000000) or a time "
        "(30s, 10m, 1h) (got '" +
        text + "')");
  if (unit.empty())
    every.rows = static_cast<std::uint64_t>(value);
  else
    every.seconds = value * scale;
  return every;
}

void DataParallel::check() {
  if (workers < 1 || workers > kMaxWorkers)
    throw UsageError("train: --workers must be 1 to " + std::to_string(kMaxWorkers) + " (got " +
                     std::to_string(workers) + ")");
  if (const driver::MpiJob* mpi = driver::mpi_job(); mpi && !solo) {
    peers = mpi->peers();
    leader = mpi->rank() == 0;
  }
}

void DataParallel::plan(const io::Manifest& manifest, std::uint32_t window_blocks,
                        nlohmann::json& run_config, Events& events) {
  if (total() == 1) {
    if (sync_rows > 0)
      events.note("warning: --sync-rows has no effect with one worker and one rank (ignored)");
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

void DataParallel::agree(nlohmann::json config, const nlohmann::json& data, const JobOptions& job,
                         const std::string& output, const std::string& data_name) const {
  if (peers.alone()) return;
  // Where the run writes, and when it stops or checkpoints (a checkpoint is a point every rank
  // reaches together), as the run's record names them.
  config["model_path"] = output;
  config["checkpoint"] = job.checkpoint;
  config["checkpoint_every"] = job.checkpoint_every;
  config["resume"] = job.resume;
  config["stop_after_rows"] = job.stop_after_rows;
  config["metrics"] = job.metrics;
  check_ranks_agree(peers, data, config, data_name);
}

void check_ranks_agree(const engine::Peers& peers, const nlohmann::json& data,
                       const nlohmann::json& config, const std::string& data_name) {
  if (peers.alone()) return;
  const std::string text = nlohmann::json::array({data, config}).dump();
  // A rank's digest as two exact doubles of 32 bits in its own place, the others' zeros: after the
  // sum every rank holds every rank's.
  const std::uint64_t digest = XXH3_64bits(text.data(), text.size());
  const auto ranks = static_cast<std::size_t>(peers.count);
  const auto rank = static_cast<std::size_t>(peers.index);
  std::vector<double> digests(2 * ranks, 0.0);
  digests[2 * rank] = static_cast<double>(digest >> 32);
  digests[2 * rank + 1] = static_cast<double>(digest & 0xffffffffu);
  peers.sum(digests);
  std::size_t other = 1;
  while (other < ranks && digests[2 * other] == digests[0] && digests[2 * other + 1] == digests[1])
    ++other;
  if (other == ranks) return;
  // Rank 0's text and the first other rank's, to every rank: their lengths, then their bytes.
  std::vector<double> lengths(2, 0.0);
  if (rank == 0) lengths[0] = static_cast<double>(text.size());
  if (rank == other) lengths[1] = static_cast<double>(text.size());
  peers.sum(lengths);
  const auto first = static_cast<std::size_t>(lengths[0]);
  std::vector<double> bytes(first + static_cast<std::size_t>(lengths[1]), 0.0);
  if (rank == 0 || rank == other)
    for (std::size_t k = 0; k < text.size(); ++k)
      bytes[(rank == 0 ? 0 : first) + k] = static_cast<unsigned char>(text[k]);
  peers.sum(bytes);
  std::string texts(bytes.size(), '\0');
  for (std::size_t k = 0; k < bytes.size(); ++k) texts[k] = static_cast<char>(bytes[k]);
  const nlohmann::json lead = nlohmann::json::parse(texts.substr(0, first));
  const nlohmann::json differs = nlohmann::json::parse(texts.substr(first));
  const std::string ranks_named = "rank " + std::to_string(other) + " of " +
                                  std::to_string(ranks) + " was given other ";
  const std::string rule =
      ": every rank of an MPI job must run the same command on the same data; no model written";
  // A --tune search compares no data identity (empty): a rank of one against a rank of a run has
  // other options.
  if (lead[0] != differs[0] && !lead[0].empty() && !differs[0].empty())
    throw DataError(data_name, 0, 0,
                    ranks_named + "data than rank 0 (rank 0 -> rank " + std::to_string(other) +
                        ": " + differences(lead[0], differs[0]) + ")" + rule);
  throw UsageError("train: " + ranks_named + "options than rank 0 (rank 0 -> rank " +
                   std::to_string(other) + ": " + differences(lead[1], differs[1]) + ")" + rule);
}

bool trains_replicated(const std::string& algo) {
  return algo == "ldm" || algo == "svm" || algo == "cpm";
}

void note_rank_binding(Events& events) {
  static bool noted = false;
  if (noted || !driver::launched_as_rank()) return;
  noted = true;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) == 1 &&
      online > 1)
    events.note(
        strprintf("note: this rank may run on 1 of this machine's %ld cores (mpirun binds "
                  "each rank to a core when it starts 2 ranks or fewer); `mpirun "
                  "--bind-to none` lets a rank's threads use them all",
                  online));
}

void DataParallel::announce(std::uint64_t sync_bytes, const char* pass, Events& events) const {
  note_rank_binding(events);
  if (total() == 1) return;
  events.note(strprintf(
      "data-parallel: %d replicas (%d worker%s x %d rank%s), averaged every %llu windows (%.1f MB "
      "each) and at every %s's end",
      total(), workers, workers == 1 ? "" : "s", peers.count, peers.count == 1 ? "" : "s",
      static_cast<unsigned long long>(sync_windows), static_cast<double>(sync_bytes) / 1e6, pass));
  if (window_blocks < static_cast<std::uint32_t>(peers.count))
    events.note(strprintf(
        "note: a window of %u block%s reaches %u of the %d ranks in turn, the others idle "
        "while it is learnt; --window-blocks %d or more keeps every rank busy",
        window_blocks, window_blocks == 1 ? "" : "s", window_blocks, peers.count, peers.count));
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

void remove_finished_checkpoint(const std::string& path, Events& events) {
  std::error_code error;
  if (path.empty() || !std::filesystem::is_regular_file(std::filesystem::status(path, error)))
    return;
  std::filesystem::remove(path, error);
  if (error) events.note("warning: cannot remove the checkpoint " + path + ": " + error.message());
}

nlohmann::json data_identity(const io::Manifest& m) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [label, count] : m.label_counts) labels[io::label_text(label)] = count;
  return {{"rows", m.rows},
          {"nnz", m.nnz},
          {"max_index", m.max_index},
          {"index_base", m.index_base},
          {"block_rows", m.block_rows},
          {"label_counts", labels},
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
    throw UsageError(
        "cannot resume from " + path + ": the checkpoint was written with other options (" +
        differences(saved_config, config) + "); resume with the options of the interrupted run");
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
                   const std::string& metrics, bool held) {
  if (held) return;  // the caller's
  if (!metrics.empty()) metrics_.emplace(metrics, "metrics file");
  model_.emplace(output, "model");
  if (!checkpoint_path.empty()) checkpoint_.emplace(checkpoint_path, "checkpoint");
}

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

std::optional<double> Convergence::pass_end(std::uint64_t pass, double now) {
  change.reset();
  gain.reset();
  if (!std::isfinite(now)) {  // no progress to speak of; a later finite pass starts afresh
    last_.reset();
    return change;
  }
  const auto relative = [](double from, double to) {
    return (to - from) / std::max(std::abs(from), 1e-300);
  };
  if (last_) change = relative(*last_, now);
  if (best) gain = -relative(*best, now);
  last_ = now;
  if (!best || now < *best) best = now;
  if (gain && *gain >= tol) since.reset();
  if (gain && *gain < tol && !since) since = pass + 1;
  return change;
}

std::optional<bool> Convergence::converged() const {
  if (!gain) return std::nullopt;
  return *gain < tol;
}

nlohmann::ordered_json Convergence::json() const {
  const auto known = [](const auto& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json();
  };
  return {{"tol", tol},
          {"converged", known(converged())},
          {"objective_change", known(change)},
          {"objective_gain", known(gain)},
          {"converged_since_pass", known(since)}};
}

Validation validate(const engine::Classifier& model, const ValidationData& data, int threads) {
  return score_validation(model, *data.data, data.inputs, threads);
}

std::string data_name(const std::vector<std::string>& inputs) {
  std::string name;
  for (const std::string& input : inputs) name += (name.empty() ? "" : ",") + input;
  return name;
}

io::Dataset open_training_data(const std::vector<std::string>& inputs,
                               const std::shared_ptr<const io::ShardSet>& shards,
                               io::ConvertOptions convert, const std::string& base, int threads,
                               const std::string& data) {
  try {
    convert.text.index_base = io::parse_index_base(base);
  } catch (const UsageError&) {
    throw UsageError("train: --index-base must be auto, 0 or 1 (got '" + base + "')");
  }
  io::Dataset dataset =
      shards ? io::Dataset::held(shards) : io::Dataset::open(inputs, convert, threads);
  const int converted = dataset.shards().manifest().index_base;
  if (convert.text.index_base != io::IndexBase::kAuto &&
      io::index_base_value(convert.text.index_base) != converted)
    throw UsageError("train: --index-base " + base + ": " + data +
                     " was converted with index base " + std::to_string(converted) +
                     " (convert it again with --index-base " + base + ")");
  return dataset;
}

std::vector<std::string> data_record(const std::vector<std::string>& inputs,
                                     const std::string& name) {
  return name.empty() ? inputs : std::vector<std::string>{name};
}

std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

std::optional<double> lambda_value(const std::string& name, std::optional<double> paper,
                                   std::optional<double> rel, double rows, double c) {
  if (paper && rel)
    throw UsageError("train: --" + name + " and --" + name + "-rel exclude each other");
  const double value = paper ? *paper : rel ? *rel : 0;
  if (!(value >= 0) || !std::isfinite(value))
    throw UsageError("train: --" + name + (rel ? "-rel" : "") + " must be ≥ 0 (got " +
                     number(value) + ")");
  if (paper || !rel) return paper;
  if (!std::isfinite(*rel * rows * c))
    throw UsageError("train: --" + name + "-rel " + number(*rel) +
                     " × m × C overflows (m = " + number(rows) + ", C = " + number(c) + ")");
  return *rel * rows * c;
}

void check_trained_model(double objective, const engine::MarginStats& margins,
                         const std::string& remedy) {
  if (std::isfinite(objective) && std::isfinite(margins.mean()) &&
      std::isfinite(margins.variance()))
    return;
  throw NumericalError("training diverged: the trained model's objective is " + number(objective) +
                       " (margin mean " + number(margins.mean()) + ", variance " +
                       number(margins.variance()) + " over the training rows); " + remedy);
}

void check_scaling(const std::string& scale, const std::string& normalize) {
  if (scale != "maxabs" && scale != "none")
    throw UsageError("train: --scale must be maxabs or none (got '" + scale + "')");
  if (normalize != "l2" && normalize != "none")
    throw UsageError("train: --normalize must be l2 or none (got '" + normalize + "')");
}

engine::LabelMap binary_labels(const io::Manifest& manifest, const std::string& data) {
  if (manifest.label_counts.size() != 2) {
    std::string found;
    int shown = 0;
    for (const auto& [label, count] : manifest.label_counts) {
      if (shown++ == 5) {
        found += ", …";
        break;
      }
      found += (found.empty() ? "" : ", ") + number(label);
    }
    throw DataError(data, 0, 0,
                    "labels are not binary: train needs exactly two distinct labels, found " +
                        std::to_string(manifest.label_counts.size()) +
                        (found.empty() ? "" : " (" + found + ")"));
  }
  engine::LabelMap labels;
  labels.negative = manifest.label_counts.begin()->first;
  labels.positive = manifest.label_counts.rbegin()->first;
  return labels;
}

void check_train_paths(const std::vector<io::NamedPath>& inputs, const std::string& output,
                       const std::string& checkpoint, const std::string& metrics_json) {
  io::check_outputs(inputs, {{"--output", output, false, ""},
                             {"--checkpoint", checkpoint, false, "--resume"},
                             {"--metrics-json", metrics_json, false, ""}});
  // The validation data is read after the training: a missing file (or the model's own path) is
  // refused now, not once the model is written.
  std::vector<std::string> validation;
  bool stdin_trains = false;
  for (const io::NamedPath& input : inputs) {
    if (input.option == "--validation") validation.push_back(input.path);
    stdin_trains = stdin_trains || (input.option != "--validation" && input.path == "-");
  }
  if (stdin_trains && std::find(validation.begin(), validation.end(), "-") != validation.end())
    throw UsageError(
        "train: --validation -: standard input is already the training data; give "
        "the validation data as a file");
  if (!validation.empty()) io::Dataset::probe(validation);
  if (!metrics_json.empty() && !metrics_may_replace(metrics_json))
    throw io::OutputPathError("train: --metrics-json " + metrics_json +
                                  " exists and is not an earlier run's metrics: it would be "
                                  "overwritten; choose another name",
                              {"--metrics-json"});
  if (!metrics_json.empty()) io::check_writable(metrics_json, "--metrics-json");
  std::error_code ec;
  if (checkpoint.empty()) return;
  // A checkpoint is rewritten, renamed into place and removed at the end: a device or a FIFO
  // (which outputs otherwise may be) would be removed, /dev/null itself.
  const auto status = std::filesystem::status(checkpoint, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw UsageError("train: --checkpoint " + checkpoint +
                     " is not a regular file (a device, a FIFO or a directory): a checkpoint "
                     "is a file that is replaced and removed; give a file's path");
  if (!std::filesystem::is_regular_file(status)) return;
  const std::string kind = io::model_file_kind(checkpoint);
  if (kind != "checkpoint" && kind != "cpm_checkpoint")
    throw UsageError("train: --checkpoint " + checkpoint + " exists and is not a checkpoint (" +
                     (kind.empty() ? std::string("not a polymargin file")
                                   : "a model file of kind '" + kind + "'") +
                     "): it would be overwritten, then removed once the model is written; choose "
                     "another name");
}

void check_warm_model(const engine::LinearModel& m, const std::string& path,
                      const std::string& algo, const engine::LabelMap& labels) {
  if (m.algorithm != algo)
    throw DataError(
        path, 0, 0,
        "--warm-start: an " + m.algorithm + " model cannot start a --algo " + algo + " run");
  if (static_cast<float>(m.labels.negative) != static_cast<float>(labels.negative) ||
      static_cast<float>(m.labels.positive) != static_cast<float>(labels.positive))
    throw DataError(path, 0, 0,
                    "--warm-start: the model's labels " + number(m.labels.negative) + " / " +
                        number(m.labels.positive) + " are not the data's " +
                        number(labels.negative) + " / " + number(labels.positive));
}

void check_job_paths(const std::vector<std::string>& inputs, const JobOptions& job,
                     const std::string& warm_start, const std::vector<io::NamedPath>& other_inputs,
                     const std::string& output, const std::vector<std::string>& unlabeled) {
  check_train_paths(job_inputs(inputs, job, warm_start, other_inputs, unlabeled), output,
                    job.checkpoint, job.metrics);
}

std::vector<io::NamedPath> job_inputs(const std::vector<std::string>& inputs, const JobOptions& job,
                                      const std::string& warm_start,
                                      const std::vector<io::NamedPath>& other_inputs,
                                      const std::vector<std::string>& unlabeled) {
  std::vector<io::NamedPath> paths;
  for (const std::string& input : inputs) paths.push_back({"--data", input});
  for (const std::string& input : job.validation) paths.push_back({"--validation", input});
  for (const std::string& input : unlabeled) paths.push_back({"--unlabeled", input});
  if (!warm_start.empty()) paths.push_back({"--warm-start", warm_start});
  if (!job.resume.empty()) paths.push_back({"--resume", job.resume});
  paths.insert(paths.end(), other_inputs.begin(), other_inputs.end());
  return paths;
}

bool metrics_may_replace(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || io::writes_in_place(path)) return true;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return !ec;
  if (size > (std::uintmax_t{16} << 20)) return false;
  std::ifstream in(path, std::ios::binary);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() && j.contains("status");
}

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return buf;
}

void check_fits(std::uint64_t need, const std::string& what, const std::string& remedy) {
  const std::uint64_t available = io::mem_available();
  if (available != 0 && need > available)
    throw MemoryError("train: " + what + " needs " + gib(need) + " but only " + gib(available) +
                      " are available: " + remedy);
  check_hard_limit_fits(need, what, remedy);
}

std::optional<HardLimit> hard_memory_limit() {
  std::optional<HardLimit> limit;
  if (const std::optional<std::uint64_t> room = io::cgroup_memory_room())
    limit = HardLimit{*room, "the memory cgroup"};
  if (const std::optional<std::uint64_t> room = io::address_space_room())
    if (!limit || *room < limit->room)
      limit = HardLimit{*room, "the address-space limit (ulimit -v)"};
  return limit;
}

void check_hard_limit_fits(std::uint64_t need, const std::string& what, const std::string& remedy) {
  // A memory cgroup's hard limit kills the process (OOM), and an address-space limit fails an
  // allocation anywhere, instead of refusing the run: what it holds beyond its arrays is measured
  // against them at what a small run takes (kRunFloorBytes), not the margin of kRunOverheadBytes
  // kept against the machine's other users.
  const std::optional<HardLimit> limit = hard_memory_limit();
  if (!limit || fits_hard_limit(need, limit->room)) return;
  throw MemoryError("train: " + what + " needs " +
                    gib(need - std::min(need, kRunOverheadBytes) + kRunFloorBytes) + " but " +
                    limit->name + " leaves only " + gib(limit->room) + ": " + remedy);
}

std::uint64_t hard_limit_arrays_room(std::uint64_t room) {
  return room > kRunFloorBytes ? room - kRunFloorBytes : 0;
}

bool fits_hard_limit(std::uint64_t need, std::uint64_t room) {
  return need - std::min(need, kRunOverheadBytes) <= hard_limit_arrays_room(room);
}

void start_record(nlohmann::ordered_json& report, const std::string& algorithm,
                  const std::vector<std::string>& inputs, const JobOptions& job,
                  const std::string& output) {
  report["command"] = "train";
  report["algorithm"] = algorithm;
  report["data"] = data_record(inputs, job.data_name);
  report["model_path"] = output;
}

void check_has_data(const std::vector<std::string>& inputs,
                    const std::shared_ptr<const io::ShardSet>& shards) {
  if (inputs.empty() && !shards) throw UsageError("train: no training data given (-d TRAIN)");
}

OpenedData open_job_data(const std::string& algorithm, const std::vector<std::string>& inputs,
                         const std::shared_ptr<const io::ShardSet>& shards,
                         const std::string& output, const JobOptions& job, int threads,
                         nlohmann::ordered_json& report) {
  OpenedData opened;
  if (driver::mpi_job() && std::find(inputs.begin(), inputs.end(), "-") != inputs.end())
    throw UsageError(
        "train: under mpirun the data come from files, which every rank reads: not "
        "from standard input (-)");
  threads = opened.threads = resolve_threads(threads);
  const std::string& data = opened.data = job.data_name.empty() ? data_name(inputs) : job.data_name;
  opened.start = std::chrono::steady_clock::now();
  start_record(report, algorithm, inputs, job, output);
  io::ConvertOptions convert;
  convert.text.threads = threads;
  // No task_arena around the reader: it runs its own of `threads`, and a learner's parallel work
  // (the CPM's sides) runs in it; a second, nested arena got no worker thread on two cores.
  opened.dataset.emplace(
      open_training_data(inputs, shards, convert, job.index_base, threads, data));
  opened.open_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - opened.start).count();
  const io::Manifest& m = opened.dataset->shards().manifest();
  report["data_checksum"] = hex64(io::data_checksum(m));
  report["rows"] = m.rows;
  report["features"] = m.features;
  report["nnz"] = m.nnz;
  if (m.rows == 0) throw DataError(data, 0, 0, "no training rows");
  return opened;
}

io::ReadOptions read_options(std::uint64_t seed, int threads, const JobOptions& job,
                             std::uint32_t window_blocks, bool scale_maxabs, bool normalize_l2,
                             const DataParallel& parallel) {
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

LoopOptions loop_options(const io::ReadOptions& read, const JobOptions& job, DataParallel& parallel,
                         std::uint64_t sync_bytes, std::function<int(std::uint64_t rows)> stop) {
  LoopOptions loop;
  loop.read = read;
  loop.checkpoints = !job.checkpoint.empty();
  loop.every = job.every;
  const bool replicated = parallel.total() > 1;
  loop.sync_windows = replicated ? parallel.sync_windows : 0;
  parallel.sync_bytes = replicated ? sync_bytes : 0;
  loop.peers = &parallel.peers;
  // Rows learnt by the run (polled at averagings when replicated; under MPI, the ranks' sum).
  loop.stop_requested = std::move(stop);
  return loop;
}

}  // namespace polymargin::driver
