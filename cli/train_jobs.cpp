#include "cli/train_jobs.h"

#include <signal.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cli/train.h"
#include "engine/errors.h"
#include "io/atomic_file.h"

namespace polymargin::cli {
namespace {

std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void on_stop_signal(int signal) { g_received.store(signal, std::memory_order_relaxed); }

struct sigaction g_previous_term, g_previous_int;

}  // namespace

StopSignals::StopSignals() {
  g_received.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;  // the second signal kills as usual
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGINT, &action, &g_previous_int);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
}

int StopSignals::received() { return g_received.load(std::memory_order_relaxed); }

int interrupted_exit_code(const Interrupted& stop) {
  return stop.checkpoint.empty() ? 128 + stop.signal : kExitInterrupted;
}

std::string signal_name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGINT) return "SIGINT";
  return "signal " + std::to_string(signal);
}

void MetricsFile::finish(int exit_code, const std::string& status, const std::string& error) {
  if (!enabled()) return;
  json_["status"] = status;
  json_["exit_code"] = exit_code;
  if (!error.empty()) json_["error"] = error;
  try {
    io::write_file_atomically(path_, json_.dump(2) + "\n");
  } catch (const Error& e) {
    std::fprintf(stderr, "warning: --metrics-json: %s\n", e.what());
  }
}

int run_training_job(const std::vector<std::string>& args,
                     const std::function<int(MetricsFile&)>& train) {
  MetricsFile metrics(peek_option(args, "metrics-json", ""));
  try {
    const int code = train(metrics);
    if (code < 0) return kExitOk;  // --help: nothing ran
    metrics.finish(code, "ok");
    return code;
  } catch (const Interrupted& stop) {
    const int code = interrupted_exit_code(stop);
    const std::string message =
        (stop.signal == kStopAfterRows ? "stopped after --stop-after-rows"
                                       : "interrupted by " + signal_name(stop.signal)) +
        (stop.checkpoint.empty()
             ? ": no checkpoint written (no --checkpoint), no model written"
             : ": checkpoint written to " + stop.checkpoint + " (continue with --resume " +
                   stop.checkpoint + "), no model written");
    std::fprintf(stderr, "%s\n", message.c_str());
    metrics.finish(code, "interrupted", message);
    return code;
  } catch (const Error& e) {
    metrics.finish(e.exit_code(), "error", e.what());
    throw;
  } catch (const std::bad_alloc&) {
    metrics.finish(kExitIo, "error", "out of memory");
    throw;
  } catch (const std::exception& e) {
    metrics.finish(1, "error", std::string("internal error: ") + e.what());
    throw;
  }
}

std::string hex64(std::uint64_t x) {
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(x));
  return text;
}

nlohmann::json data_identity(const io::Manifest& m) {
  nlohmann::json labels = nlohmann::json::object();
  for (const auto& [label, count] : m.label_counts) labels[io::label_text(label)] = count;
  return {{"rows", m.rows},           {"nnz", m.nnz},
          {"max_index", m.max_index}, {"index_base", m.index_base},
          {"block_rows", m.block_rows}, {"label_counts", labels},
          {"data_checksum", hex64(io::data_checksum(m))}};
}

engine::BinaryMetrics validate_model(const engine::Classifier& model,
                                     const std::vector<std::string>& inputs, int threads,
                                     nlohmann::ordered_json& report) {
  io::ConvertOptions convert;
  convert.text.threads = threads;
  convert.text.index_base = model.index_base == 0 ? io::IndexBase::kZero : io::IndexBase::kOne;
  const io::Dataset data = io::Dataset::open(inputs, convert, threads);
  const io::Manifest& manifest = data.shards().manifest();
  const engine::LabelMap& labels = model.labels;
  for (const auto& [label, count] : manifest.label_counts)
    if (!labels.is_binary_label(static_cast<float>(label)))
      throw DataError(data_name(inputs), 0, 0,
                      "validation label " + number(label) + " (" + std::to_string(count) +
                          " rows) is not one of the training labels " + number(labels.negative) +
                          " / " + number(labels.positive));
  std::vector<double> scores, all_scores;
  std::vector<std::int8_t> signs;
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  data.shards().scan(read, [&](const CsrView& batch) {
    scores.resize(batch.rows);
    model.score_batch(batch, scores.data());
    for (std::size_t r = 0; r < batch.rows; ++r) {
      all_scores.push_back(scores[r]);
      signs.push_back(static_cast<std::int8_t>(labels.sign(batch.labels[r])));
    }
  });
  report["validation_data"] = inputs;
  report["validation_data_checksum"] = hex64(io::data_checksum(manifest));
  return engine::binary_metrics(all_scores, signs);
}

nlohmann::ordered_json metrics_json(const engine::BinaryMetrics& m) {
  return {{"rows", m.rows},           {"positives", m.positives},
          {"negatives", m.negatives}, {"accuracy", m.accuracy},
          {"auc", m.auc},             {"margin_mean", m.margin_mean},
          {"margin_variance", m.margin_variance}};
}

std::string model_file_checksum(const std::string& path) {
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

}  // namespace polymargin::cli
