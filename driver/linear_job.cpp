// The linear learners' job (ldm, svm) as the library runs it, behind driver::train
// (driver/train.h).

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/early_stopping.h"
#include "driver/epoch_loop.h"
#include "driver/job.h"
#include "driver/learner_jobs.h"
#include "driver/train.h"
#include "engine/errors.h"
#include "engine/ldm.h"
#include "engine/ldm_replicas.h"
#include "engine/metrics.h"
#include "io/atomic_file.h"
#include "io/feature_order.h"
#include "io/linear_checkpoint.h"
#include "io/model_file.h"
#include "io/shards.h"

namespace polymargin::driver {
namespace {

double eta0_option(const std::string& text) {
  if (text == "auto") return 0;
  std::size_t used = 0;
  double eta0 = -1;
  try {
    eta0 = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || !(eta0 > 0) || !std::isfinite(eta0))
    throw UsageError("train: --eta0 must be 'auto' or a positive number (got '" + text + "')");
  return eta0;
}

// A warm-start model: its weights mapped into this run's feature space.
struct WarmStart {
  std::string path;
  engine::LinearModel model;
  nlohmann::json record;  // stored in the new model's config
};

WarmStart load_warm_start(const std::string& path, const std::string& algo,
                          const engine::LabelMap& labels, const io::Manifest& manifest, double bias,
                          bool normalize_l2) {
  WarmStart warm;
  warm.path = path;
  warm.model = io::load_model(path);  // DataError for a model of another kind
  const engine::LinearModel& m = warm.model;
  check_warm_model(m, path, algo, labels);
  if (m.index_base != manifest.index_base)
    throw DataError(path, 0, 0,
                    "--warm-start: the model has index base " + std::to_string(m.index_base) +
                        ", the data " + std::to_string(manifest.index_base));
  if (m.bias_value != bias)
    throw UsageError("train: --warm-start " + path + " was trained with --bias " +
                     number(m.bias_value) + ", this run has --bias " + number(bias) +
                     " (they must agree)");
  if (m.normalize_l2 != normalize_l2)
    throw UsageError("train: --warm-start " + path + " was trained with --normalize " +
                     (m.normalize_l2 ? "l2" : "none") + ", this run has --normalize " +
                     (normalize_l2 ? "l2" : "none") + " (they must agree)");
  const std::uint32_t max_index = std::max(m.max_index, manifest.max_index);
  warm.record = {
      {"model", path},
      {"model_checksum", model_file_checksum(path)},
      {"model_max_index", m.max_index},
      {"max_index", max_index},
      {"features_added", max_index - m.max_index},
      {"feature_mapping", "identity on raw feature ids; ids above model_max_index start at 0"},
      {"schedule", "eta0 calibrated and step counter restarted at 0; averaging from t0"}};
  return warm;
}

// The warm model's weights in the space the trainer learns in (rows divided by `maxabs` when
// scaling): w_trained_f = w_raw_f · maxabs_f, so the first step scores every row as the old model.
std::vector<double> warm_weights(const WarmStart& warm, const std::vector<float>* maxabs) {
  const engine::LinearModel& m = warm.model;
  std::vector<double> w(m.weights.size());
  for (std::size_t f = 0; f < w.size(); ++f) {
    double x = m.weights[f] * (m.scale.empty() ? 1.0 : m.scale[f]);
    if (maxabs && f < maxabs->size() && (*maxabs)[f] > 0) x *= (*maxabs)[f];
    w[f] = x;
  }
  return w;
}

// One ldm or svm job, a step a method, in the order they happen. The members are the job's
// options and the state the steps hand on to each other.
struct LinearRun {
  LinearRun(const TrainJob& given, Events& events, nlohmann::ordered_json& report);

  void check();            // the options, the paths, the locks, a resumed checkpoint's header
  void open();             // data, λ, warm start, trainer, resume
  void announce();         // what is trained
  void train();            // the epochs: run_passes
  void finish();           // the model, the final pass, the write
  TrainResult conclude();  // validation, report, summary
  void check_majority(const io::Manifest& manifest, nlohmann::ordered_json& summary);
  void apply_warm_start();
  engine::LdmTrainer& trainer() { return replicas->lead(); }
  const engine::LdmTrainer& trainer() const { return replicas->lead(); }
  bool replicated() const { return replicas->total() > 1; }

  const LinearParams& params;
  Events& events;
  nlohmann::ordered_json& report;
  // The job's options.
  std::string algo;
  std::vector<std::string> inputs;
  std::shared_ptr<const io::ShardSet> shards;  // or the rows in memory
  std::string output;
  bool durable_output = true;
  JobOptions job;
  int threads = 0;
  std::uint32_t window_blocks = 0;
  std::string eta0_text, scale, normalize, pairing, warm_start_path, feature_order;
  engine::LdmConfig config;
  bool no_final_pass = false;
  DataParallel parallel;  // workers, sync rows, the ranks of an MPI job
  const nlohmann::json& tune;
  const std::vector<io::NamedPath>& other_inputs;
  // Held from the options' check to the end: a second job on the model or checkpoint is refused.
  std::optional<JobLocks> locks;
  // What the steps hand on.
  // A resume: a checkpoint file's header is read with the options, the whole checkpoint (W and A
  // straight into the trainer) once that is built; one that can be read once only (a pipe) is
  // read whole with the options.
  std::optional<io::LinearCheckpoint> resumed_stream;
  OpenedData opened;
  std::string data;           // the inputs' names (or the data name), for messages
  ValidationData validation;  // opened before training
  engine::LabelMap labels;
  double rows = 0;
  // Set when the step floor raised the default epochs: what it did, for the note and the summary.
  nlohmann::ordered_json step_floor;
  std::optional<WarmStart> warm;
  std::uint32_t max_index = 0;
  std::optional<engine::LdmReplicas> replicas;  // one in all: exactly a single LdmTrainer
  nlohmann::json run_config, run_data;
  io::TrainPosition position;  // where training starts: (0, 0), or the checkpoint's position
  std::uint64_t run_rows = 0;  // rows the run learnt before it starts (a resumed run's)
  io::ReadOptions read;
  std::vector<float> maxabs;  // a warm start's scaling (see open())
  // feature_order frequency: the slot of each feature id's weights, the table the reader
  // renumbers the rows by (io/feature_order.h); empty: the ids as stored.
  std::vector<std::uint32_t> slot_of;
  std::vector<float> maxabs_by_slot;  // with maxabs scaling: the maxima in the slots' order
  double feature_order_seconds = 0;
  bool warm_pending = false;
  engine::MarginStats margins;  // the last epoch's progressive margins, then the final pass's
  Convergence convergence;      // of the epochs' progressive objectives
  // --epochs auto: the rows held out (with early stopping), when to stop, and the state of the
  // best pass (kept by rank 0 when it is not the last).
  std::optional<HeldOut> held;
  std::optional<StoppingRule> stopping;
  std::optional<engine::LdmState> best_state;
  bool stop_now = false;
  // The set trained on (the data's, or the held-out run's copy in smaller blocks) and the counts
  // of its rows trained on.
  const io::ShardSet& training_set() const {
    return held ? held->set() : opened.dataset->shards();
  }
  const io::Manifest& training_manifest() const {
    return held ? held->train_manifest() : opened.dataset->shards().manifest();
  }
  void score_held_out();
  nlohmann::ordered_json auto_record() const;
  std::uint64_t epochs_run() const { return trained.end.pass + (trained.end.pass_rows > 0); }
  LoopResult trained;
  engine::LinearModel model;
  double finish_seconds = 0, eval_seconds = 0, save_seconds = 0, objective = 0;
  // The training scores, for the AUC of the record: 8 bytes a row (counted in the memory check).
  std::optional<engine::BinaryScores> train_scores;
};

LinearRun::LinearRun(const TrainJob& given, Events& events, nlohmann::ordered_json& report)
    : params(given.linear),
      events(events),
      report(report),
      algo(given.algo),
      inputs(given.inputs),
      shards(given.shards),
      output(given.output),
      durable_output(given.durable_output),
      job(given.job),
      threads(given.threads),
      window_blocks(given.window_blocks),
      eta0_text(given.linear.eta0),
      scale(given.linear.scale),
      normalize(given.linear.normalize),
      pairing(given.linear.pairing.empty() ? "next" : given.linear.pairing),
      warm_start_path(given.linear.warm_start),
      feature_order(given.linear.feature_order),
      no_final_pass(!given.linear.final_pass),
      parallel(given.parallel),
      tune(given.tune),
      other_inputs(given.other_inputs) {}

void LinearRun::check() {
  check_has_data(inputs, shards);
  check_scaling(scale, normalize);
  if (window_blocks == 0) throw UsageError("train: --window-blocks must be at least 1");
  if (feature_order != "frequency" && feature_order != "given")
    throw UsageError("train: --feature-order must be given or frequency (got '" + feature_order +
                     "')");
  if (pairing != "next" && pairing != "permuted")
    throw UsageError("train: --pairing must be next or permuted (got '" + pairing + "')");
  config.c = params.c;
  config.epochs = params.epochs.value_or(5);
  if (params.epochs_auto) {
    config.epochs = params.max_epochs.value_or(kDefaultMaxEpochs);
    // The held-out run's best state and its stopping rule are not in a checkpoint yet.
    if (!job.checkpoint.empty() || !job.resume.empty())
      throw UsageError("train: --epochs auto takes no --checkpoint or --resume (yet): give "
                       "--epochs N for a run that checkpoints");
    stopping.emplace();
    stopping->tol = params.tol;
    stopping->patience = params.n_iter_no_change.value_or(kDefaultNoChangePasses);
    stopping->max_passes = static_cast<std::uint64_t>(config.epochs);
  } else {
    for (const auto& [given, key] :
         {std::pair{params.validation_fraction.has_value(), "--validation-fraction"},
          std::pair{params.n_iter_no_change.has_value(), "--n-iter-no-change"},
          std::pair{params.max_epochs.has_value(), "--max-epochs"},
          std::pair{!params.early_stopping, "--no-early-stopping"}})
      if (given)
        events.note(std::string("warning: ") + key +
                    " has no effect without --epochs auto (ignored)");
  }
  config.bias = params.bias;
  config.seed = params.seed;
  config.pairing = pairing == "next" ? engine::Pairing::kNextRow : engine::Pairing::kPermutation;
  config.eta0 = eta0_option(eta0_text);
  // The papers' t0 is two epochs; a shorter run averages its last epoch, so that 1 or 2 epochs
  // need no avg_start_epochs beside them. Given explicitly, it is checked as given.
  config.avg_start_epochs = params.avg_start_epochs.value_or(std::clamp(config.epochs - 1, 0, 2));
  if (algo == "svm" &&
      (params.lambda1 || params.lambda2 || params.lambda1_rel || params.lambda2_rel))
    throw UsageError("train: --algo svm takes no λ1, λ2 (it is LDM with λ1 = λ2 = 0)");
  if (algo == "svm" && !params.pairing.empty())
    throw UsageError(
        "train: --algo svm takes no --pairing (its steps use one row: only the LDM "
        "pairs rows)");
  check_config(config, {{"c", "C"}});
  parallel.check();
  check_job_paths(inputs, job, warm_start_path, other_inputs, output);
  job.check();
  // Two jobs never write the same model or checkpoint: the second stops here, before any work.
  // Of an MPI job's ranks only rank 0 writes, and locks.
  if (parallel.leader && !job.locks_held) locks.emplace(output, job.checkpoint, job.metrics);
  if (!job.resume.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(job.resume, ec))
      io::read_linear_checkpoint_header(job.resume);
    else
      resumed_stream = io::read_linear_checkpoint(job.resume);
  }
}

void LinearRun::open() {
  opened = open_job_data(algo, inputs, shards, output, job, threads, report);
  threads = opened.threads;
  data = opened.data;
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  labels = binary_labels(manifest, data);
  if (parallel.leader) validation = open_validation(job.validation, manifest, threads);
  // --epochs auto judges the passes from the first averaged one (before it w̄ is w), and not
  // before the step floor's passes: on a small set the floor's 50,000 steps come first (its
  // held-out rows, a few dozen, cannot tell the passes apart: docs/accuracy.md, epochs auto).
  // Where that reaches --max-epochs, nothing is held out: the run makes --max-epochs on all rows.
  if (stopping) {
    const std::uint64_t all = std::max<std::uint64_t>(manifest.rows, 1);
    const std::uint64_t floor_passes =
        (engine::floor_steps(engine::kLdmDefaultMinSteps, all, manifest.nnz) + all - 1) / all;
    stopping->first_judged =
        std::max<std::uint64_t>(static_cast<std::uint64_t>(config.avg_start_epochs) + 1,
                                floor_passes);
  }
  // Early stopping holds whole blocks out (every rank alike: seeded); the run trains on the rest.
  if (params.epochs_auto && params.early_stopping &&
      stopping->first_judged < stopping->max_passes)
    held.emplace(opened.dataset->shards(),
                 params.validation_fraction.value_or(kDefaultValidationFraction), config.seed,
                 threads, data);
  const io::ShardSet& shards = training_set();
  rows = static_cast<double>(training_manifest().rows);
  if (!params.epochs && !params.epochs_auto) {
    config.epochs = engine::ldm_default_epochs(manifest.rows, manifest.nnz);
    if (config.epochs > engine::kLdmDefaultEpochs)
      step_floor = {
          {"default_epochs", engine::kLdmDefaultEpochs},
          {"epochs", config.epochs},
          {"min_steps", engine::kLdmDefaultMinSteps},
          {"bounded_by_nnz", engine::floor_steps(engine::kLdmDefaultMinSteps, manifest.rows,
                                                 manifest.nnz) < engine::kLdmDefaultMinSteps}};
  }
  if (algo == "svm") {
    config.lambda1 = config.lambda2 = 0;
  } else {
    config.lambda1 = lambda_value("lambda1", params.lambda1, params.lambda1_rel, rows, config.c);
    config.lambda2 = lambda_value("lambda2", params.lambda2, params.lambda2_rel, rows, config.c);
  }
  if (!warm_start_path.empty())
    warm = load_warm_start(warm_start_path, algo, labels, manifest, config.bias, normalize == "l2");
  max_index = manifest.max_index;
  if (warm) max_index = std::max(max_index, warm->model.max_index);
  // The bias has the slot after the largest id, itself an id (32 bits).
  if (max_index == std::numeric_limits<std::uint32_t>::max())
    throw DataError(data, 0, 0,
                    "feature id 4294967295: --algo " + algo +
                        " keeps the slot after the largest id for the bias; ids up to "
                        "4294967294 (renumber the features, or hash them into fewer ids)");
  // Memory, before the first weight exists: W and A (doubles) of every worker, the scaling table
  // (float) and, with a warm start, its model (double), a slot per feature id up to the largest.
  const std::uint64_t slots = std::uint64_t{max_index} + 2;
  // --feature-order frequency: most of a step's misses fall on a few hot lines instead of one
  // line a feature, for a look-up a non-zero in the reader (docs/performance.md, "Feature ids and
  // memory").
  const bool renumber = feature_order == "frequency" && manifest.nnz > 0;
  // (And with early stopping, rank 0's copy of the best pass's W and A.)
  const std::uint64_t per_slot = 16 * static_cast<std::uint64_t>(parallel.workers) +
                                 (held && parallel.leader ? 16 : 0) +
                                 (scale == "maxabs" ? 4 : 0) + (warm ? 8 : 0) +
                                 (renumber ? (scale == "maxabs" ? 8 : 4) : 0);
  // And 8 bytes a row for the exact AUCs: of the training rows with --metrics-json, of the
  // validation rows with --validation.
  const std::uint64_t auc_rows = (!job.metrics.empty() ? manifest.rows : 0) +
                                 (validation.data ? validation.data->shards().manifest().rows : 0);
  check_fits(slots * per_slot + 8 * auc_rows + kRunOverheadBytes,
             "--algo " + algo +
                 (parallel.workers > 1 ? " --workers " + std::to_string(parallel.workers) : "") +
                 " on feature ids up to " + std::to_string(max_index) + " (" +
                 std::to_string(per_slot) + " bytes a feature id" +
                 (auc_rows > 0 ? ", 8 bytes a row of the AUCs" : "") + ", + 256 MiB)",
             parallel.workers > 1
                 ? "use fewer --workers, or renumber the features densely"
                 : "the weights are indexed by feature id: renumber the features densely "
                   "(or hash them into fewer ids)");
  if (renumber) {
    // Before the weights exist: the counts (4 bytes an id) become the table in their place.
    const Clock::time_point order_start = Clock::now();
    // The data's ids; a warm start's further ids keep their own slots (beyond the table).
    slot_of = io::frequency_order(shards, threads);
    if (scale == "maxabs") maxabs_by_slot = io::renumbered_maxabs(shards, slot_of);
    feature_order_seconds = seconds_since(order_start);
  }
  replicas.emplace(config, training_manifest().rows, max_index, labels, parallel.workers,
                   parallel.total(), parallel.first());
  if (!slot_of.empty()) replicas->set_feature_slots(slot_of);
  const engine::LdmConfig& used = trainer().config();

  // What decides the model besides the data: a resumed run must have exactly this.
  run_config = {{"algorithm", algo},
                {"lambda1", *used.lambda1},
                {"lambda2", *used.lambda2},
                {"c", used.c},
                {"epochs", used.epochs},
                {"avg_start_epochs", used.avg_start_epochs},
                {"eta0", eta0_text},
                {"bias", used.bias},
                {"seed", used.seed},
                {"scale", scale},
                {"window_blocks", window_blocks},
                {"pairing", pairing},
                {"max_index", max_index},
                {"warm_start", warm ? warm->record["model_checksum"] : nlohmann::json()}};
  // A held-out run's copy in smaller blocks reads as many rows a window as the data's blocks.
  const std::uint32_t read_window_blocks = window_blocks * (held ? held->parts() : 1);
  parallel.plan(training_manifest(), read_window_blocks, run_config, events);
  if (stopping) {
    run_config["epochs"] = "auto";
    run_config["max_epochs"] = used.epochs;
    run_config["n_iter_no_change"] = stopping->patience;
    run_config["tol"] = stopping->tol;
    if (held) run_config["early_stopping"] = held->json();
  }
  // Keys absent at their defaults, so that checkpoints written without them still resume.
  if (normalize == "l2") run_config["normalize"] = normalize;
  // A checkpoint holds the weights in slot order: it resumes only with the same table, which the
  // same data and this key give (absent: by id).
  if (!slot_of.empty()) run_config["feature_order"] = "frequency";
  run_data = data_identity(manifest);
  parallel.agree(run_config, run_data, job, output, data);
  report["config"] = run_config;
  if (!job.resume.empty()) {
    const std::string& resume = job.resume;
    // W and A go straight into the trainer's when they have its size (the run holds them once,
    // as an uninterrupted run does); else they are read aside, and restore() says why they do
    // not fit.
    io::LinearCheckpoint saved =
        resumed_stream ? std::move(*resumed_stream)
                       : io::read_linear_checkpoint(resume, [&](std::size_t doubles) {
                           const std::span<double> wa = trainer().weights_to_restore();
                           return wa.size() == doubles ? wa : std::span<double>{};
                         });
    resumed_stream.reset();
    check_resumable(resume, saved.config, saved.data, run_config, run_data);
    if (saved.position.epoch > static_cast<std::uint64_t>(used.epochs) ||
        saved.position.rows > manifest.rows)
      throw DataError(resume, 0, 0, "checkpoint position lies beyond the run");
    position = saved.position;
    run_rows = position.epoch * manifest.rows + position.rows;
    try {
      trainer().restore(std::move(saved.state), saved.progress, saved.eta0_clamped);
    } catch (const std::invalid_argument& e) {
      throw DataError(resume, 0, 0, std::string("checkpoint does not fit the data: ") + e.what());
    }
    replicas->spread_lead(run_rows);
    report["resumed_from"] = {
        {"checkpoint", resume}, {"epoch", position.epoch}, {"rows", position.rows}};
  }

  read = read_options(config.seed, threads, job, read_window_blocks, scale == "maxabs",
                      normalize == "l2", parallel);
  if (held) read.blocks = held->train_blocks();
  read.renumber = slot_of;
  read.renumbered_maxabs = maxabs_by_slot;
  // With a replica per thread or more, the replicas keep every thread busy: a window is then read
  // by all threads between two windows' learning (lockstep), its blocks' checks and decoding
  // started by replicas done with their share (scan_lending), rather than by a thread that a
  // replica's share then waits for. Two workers on two cores, KDD size from raw shards: 1.16× one
  // worker's wall in lockstep, 0.95× pipelined (docs/performance.md, "Two cores").
  read.lockstep = parallel.workers > 1 && parallel.workers >= threads;
  // With a warm start the trained space may hold features today's data lacks (max|x| = 0): they
  // keep a scale of 1, so their old weights decay under the regulariser instead of vanishing.
  // Warm start only: the data's maxima widened to the model's features (a copy: 81 MB at KDD
  // size, which a cold run must not carry on top of its weights).
  if (read.scale_maxabs && warm) {
    maxabs = shards.feature_maxabs();
    maxabs.resize(std::size_t{max_index} + 1, 0.0f);
    for (std::size_t f = 0; f < warm->model.weights.size(); ++f)
      if (maxabs[f] == 0 && warm->model.weights[f] != 0) maxabs[f] = 1;
  }
  // A resumed run has its warm start in the checkpoint, unless it stopped before the first step.
  warm_pending = warm.has_value() && trainer().state().t == 0;
}

void LinearRun::apply_warm_start() {
  trainer().warm_start(warm_weights(*warm, read.scale_maxabs ? &maxabs : nullptr),
                       warm->model.bias_weight);
  replicas->spread_lead(0);
  warm_pending = false;
  events.note(strprintf("warm start from %s: %u feature slots, %llu new", warm->path.c_str(),
                        max_index + 1,
                        static_cast<unsigned long long>(max_index - warm->model.max_index)));
}

// The current averaged model's margins on the held-out rows (each rank scores its part of every
// window, and the sums are everybody's), as a loss: the data terms of F (§1.1), lower is better.
// The pass that lowers it most is kept (rank 0 copies its state).
void LinearRun::score_held_out() {
  io::ReadOptions scoring = read;
  scoring.shuffle = false;
  scoring.lockstep = false;
  scoring.blocks = held->held_blocks();
  engine::MarginStats m;
  held->set().scan(scoring, [&](const CsrView& batch) { trainer().add_margins(batch, m); });
  if (!parallel.peers.alone()) {
    std::array<double, 5> sums = {static_cast<double>(m.rows), static_cast<double>(m.correct),
                                  m.sum, m.sum_sq, m.hinge};
    parallel.peers.sum(sums);
    m.rows = static_cast<std::uint64_t>(sums[0]);
    m.correct = static_cast<std::uint64_t>(sums[1]);
    m.sum = sums[2];
    m.sum_sq = sums[3];
    m.hinge = sums[4];
  }
  const engine::LdmConfig& used = trainer().config();
  const double mc = rows * used.c;  // λ' = λ/(mC), m the rows trained on
  const double loss = m.hinge / static_cast<double>(std::max<std::uint64_t>(m.rows, 1)) +
                      2 * (*used.lambda1 / mc) * m.variance() - (*used.lambda2 / mc) * m.mean();
  if (stopping->pass_end(loss, m.accuracy()) && parallel.leader) best_state = trainer().state();
}

// What --epochs auto did, for the summary, the record and the model.
nlohmann::ordered_json LinearRun::auto_record() const {
  nlohmann::ordered_json r = {{"early_stopping", held.has_value()}};
  if (held) r.update(held->json());
  r["judged_from_epoch"] = stopping->first_judged;
  r["n_iter_no_change"] = stopping->patience;
  r["tol"] = stopping->tol;
  r["max_epochs"] = stopping->max_passes;
  r["epochs_run"] = epochs_run();
  r["best_epoch"] = held ? stopping->best_pass : epochs_run();
  r["stopped"] = stopping->stopped_early();
  r[held ? "scores" : "objectives"] = stopping->scores;
  if (held) r["accuracies"] = stopping->accuracies;
  return r;
}

void LinearRun::announce() {
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  const engine::LdmConfig& used = trainer().config();
  const std::string& resume = job.resume;
  events.note(strprintf("train %s: %s: %llu rows, %llu features, %llu non-zeros%s", algo.c_str(),
                        data.c_str(), static_cast<unsigned long long>(manifest.rows),
                        static_cast<unsigned long long>(manifest.features),
                        static_cast<unsigned long long>(manifest.nnz),
                        opened.dataset->converted() ? " (converted from text)" : ""));
  events.note(strprintf("labels: %s -> -1 (%llu rows), %s -> +1 (%llu rows)",
                        number(labels.negative).c_str(),
                        static_cast<unsigned long long>(manifest.label_counts.begin()->second),
                        number(labels.positive).c_str(),
                        static_cast<unsigned long long>(manifest.label_counts.rbegin()->second)));
  events.note(
      strprintf("lambda1 %g  lambda2 %g  C %g  epochs %d  avg-start %d  bias %g  scale %s  "
                "normalize %s",
                *used.lambda1, *used.lambda2, used.c, used.epochs, used.avg_start_epochs, used.bias,
                scale.c_str(), normalize.c_str()));
  if (!step_floor.is_null())
    events.note(strprintf(
        "epochs raised from %d to %d %s %llu SGD steps%s (--epochs sets them)",
        engine::kLdmDefaultEpochs, used.epochs,
        step_floor["bounded_by_nnz"].get<bool>() ? "by the step floor of"
                                                 : "so that the run makes at least",
        static_cast<unsigned long long>(engine::kLdmDefaultMinSteps),
        step_floor["bounded_by_nnz"].get<bool>()
            ? (", bounded at " + number(engine::kFloorMaxNonZeros) + " non-zeros read").c_str()
            : ""));
  if (held)
    events.note(strprintf(
        "epochs auto: %llu rows held out (%zu of %llu blocks%s, --validation-fraction %g); stop "
        "after %d epochs without lowering their loss by more than --tol %g %%, at most %d",
        static_cast<unsigned long long>(held->held_rows()), held->held_blocks().size(),
        static_cast<unsigned long long>(held->set().manifest().total_blocks),
        held->parts() > 1 ? ", the data re-blocked in memory" : "",
        params.validation_fraction.value_or(kDefaultValidationFraction), stopping->patience,
        100 * stopping->tol, used.epochs));
  else if (stopping && stopping->first_judged >= stopping->max_passes)
    events.note(strprintf("epochs auto: the step floor's %llu epochs reach --max-epochs: %d "
                          "epochs on all rows, nothing held out",
                          static_cast<unsigned long long>(stopping->first_judged), used.epochs));
  else if (stopping)
    events.note(strprintf("epochs auto, no early stopping: stop after %d epochs without lowering "
                          "the training objective by more than --tol %g %%, at most %d",
                          stopping->patience, 100 * stopping->tol, used.epochs));
  if (stopping && stopping->first_judged > 1 && stopping->first_judged < stopping->max_passes)
    events.note(strprintf("epochs auto: epochs judged from epoch %llu (%s)",
                          static_cast<unsigned long long>(stopping->first_judged),
                          stopping->first_judged > static_cast<std::uint64_t>(
                                                       used.avg_start_epochs) + 1
                              ? "the step floor"
                              : "the first averaged epoch"));
  if (!slot_of.empty())
    events.note(strprintf("feature order: weights laid out most frequent first (sampled in %.2f s)",
                          feature_order_seconds));
  if (trainer().eta0() > 0)
    events.note(strprintf("eta0 %g%s", trainer().eta0(),
                          trainer().eta0_clamped() ? " (clamped to 0.5/λ)" : ""));
  parallel.announce(replicas->sync_bytes(), "epoch", events);
  if (!job.resume.empty())
    events.note(strprintf("resuming from %s: epoch %llu, %llu rows of it done, step %llu",
                          resume.c_str(), static_cast<unsigned long long>(position.epoch + 1),
                          static_cast<unsigned long long>(position.rows),
                          static_cast<unsigned long long>(trainer().state().t)));
}

void LinearRun::train() {
  const io::ShardSet& shards = training_set();
  const io::Manifest& manifest = training_manifest();
  const engine::LdmConfig& used = trainer().config();
  const std::string& checkpoint = job.checkpoint;
  engine::LdmReplicas& replicas = *this->replicas;
  if (warm_pending && trainer().eta0() > 0) apply_warm_start();
  // The epoch loop is the driver's; what an LDM does with a window, a checkpoint, a stop and the
  // end of an epoch is said here.
  JobLearner learner;
  learner.on_learn = [&](const CsrView& window, const io::SpareWork& spare, const Position& at) {
    if (trainer().eta0() <= 0) {  // calibrate on the first window, and say what was found
      replicas.calibrate(window, parallel.peers);
      if (trainer().eta0() <= 0) return;  // no rank had rows: every rank passes over this window
      events.note(strprintf("eta0 %g (calibrated)", trainer().eta0()));
    }
    if (warm_pending) apply_warm_start();
    replicas.learn(window, spare);
    events.progress(at.pass, static_cast<std::uint64_t>(used.epochs), at.pass_rows + window.rows,
                    manifest.rows);
  };
  // An epoch's end is {epoch, all its rows}, as a checkpoint within it: the same record. A
  // replicated run saves at averagings only (all replicas then agree), rank 0 alone, and records
  // the windows (its rows are its own part's).
  learner.on_checkpoint = [&](const Position& at, bool) {
    if (!parallel.leader) return;
    io::write_linear_checkpoint(checkpoint, run_config, run_data,
                                {at.pass, at.pass_rows, replicated() ? at.windows : 0}, trainer());
  };
  learner.on_sync = [&] { parallel.average(replicas); };
  learner.on_stop = [&](int signal, const Position& at) {
    Interrupted stop{signal, checkpoint};  // written by rank 0, the same exit everywhere
    report["interrupted"] = {
        {"signal", stop_name(signal)},
        {"epoch", at.pass},
        {"rows", at.pass_rows},
        {"checkpoint", checkpoint.empty() ? nlohmann::json() : nlohmann::json(checkpoint)}};
    throw stop;
  };
  // A line for the first epoch, the first to reach each further 5 % of the epochs, and the last:
  // every epoch up to 20, about 20 lines for a small set that the step floor passes over hundreds
  // of times.
  Twentieths logged;
  convergence.tol = params.tol;
  learner.on_pass_end = [&](const Position& at, double seconds) {
    // Progressive estimate: each row's margin at its pre-step w, plus ‖w̄‖²; the exact F(w̄)
    // comes from the final pass.
    margins = replicas.take_progress();
    const double progressive = trainer().objective(margins);
    const std::optional<double> change = convergence.pass_end(at.pass, progressive);
    std::string held_out;  // the epoch line's held-out score
    if (stopping) {
      if (held) {
        score_held_out();
        held_out = strprintf(", held-out loss %.6g, accuracy %.4f%s", stopping->scores.back(),
                             stopping->accuracies.back(),
                             stopping->best_pass == at.pass + 1 ? " (best)" : "");
      } else {
        stopping->pass_end(progressive);  // the training objective's own test
      }
      stop_now = stopping->stop();
    }
    const bool due = logged.due(at.pass + 1, static_cast<std::uint64_t>(used.epochs)) || stop_now;
    // The rows this run learnt in the pass: a resumed run's first pass lacks those learnt before
    // its checkpoint, and one resumed at a pass's end learnt none of it (no line then).
    const double learnt =
        rows - (at.pass == position.epoch ? static_cast<double>(position.rows) : 0.0);
    if ((at.pass > 0 && !due) || learnt <= 0) return;
    const std::string changed = change ? strprintf(" (%+.2f %%)", 100 * *change) : "";
    events.note(strprintf(
        "epoch %d/%d: %.2f s, %.2f M rows/s, objective ≈ %.6g%s, accuracy ≈ %.4f%s",
        static_cast<int>(at.pass) + 1, used.epochs, seconds, learnt / 1e6 / std::max(seconds, 1e-9),
        progressive, changed.c_str(), margins.accuracy(), held_out.c_str()));
  };
  learner.on_done = [&] { return stop_now; };
  LoopOptions loop = loop_options(
      read, job, parallel, replicas.sync_bytes(),
      [&](std::uint64_t rows) { return stop_requested(events, rows, job.stop_after_rows); });
  loop.passes = static_cast<std::uint64_t>(used.epochs);
  loop.rows_per_pass = manifest.rows;
  trained = run_passes(shards, learner, loop,
                       {position.epoch, position.windows, position.rows, run_rows}, job.resume);
}

void LinearRun::finish() {
  // From here on a signal no longer stops the run: the model is a final pass and a write away.
  // Of an MPI job's ranks, rank 0 alone finishes the model and writes it.
  if (!parallel.leader) return;
  const io::ShardSet& shards = training_set();
  const io::Manifest& manifest = training_manifest();
  const std::string& checkpoint = job.checkpoint;
  // Early stopping keeps the model of the best pass.
  if (best_state) trainer().restore(std::move(*best_state), {}, trainer().eta0_clamped());
  best_state.reset();
  std::vector<float>().swap(maxabs_by_slot);  // read no more; the fold takes the data's order
  read.renumbered_maxabs = {};
  const std::vector<float>* fold = nullptr;
  if (read.scale_maxabs) fold = warm ? &maxabs : &shards.feature_maxabs();
  if (fold && fold->empty()) fold = nullptr;  // rows without features: nothing was scaled
  // A normalised model cannot fold the scaling into its weights (the norm is of the scaled row):
  // it keeps the scaling as multipliers and applies both when it scores.
  const std::vector<float>* kept = read.normalize_l2 ? fold : nullptr;
  if (kept) fold = nullptr;
  const Clock::time_point finish_start = Clock::now();
  model = trainer().finish_and_release(fold);
  finish_seconds = seconds_since(finish_start);
  model.normalize_l2 = read.normalize_l2;
  if (kept) {
    model.scale.assign(kept->size(), 0.0f);
    for (std::size_t f = 0; f < kept->size(); ++f)
      if ((*kept)[f] > 0) model.scale[f] = 1.0f / (*kept)[f];
    model.scale.resize(std::size_t{max_index} + 1, 0.0f);
  }
  if (read.normalize_l2) model.config["normalize"] = normalize;

  model.index_base = manifest.index_base;
  model.features = std::uint64_t{max_index} + 1 - static_cast<std::uint64_t>(manifest.index_base);
  model.config["scale"] = scale;
  model.config["window_blocks"] = window_blocks;
  model.config["label_map"] = {{"negative", labels.negative}, {"positive", labels.positive}};
  model.config["index_base"] = manifest.index_base;
  model.config["max_index"] = max_index;
  model.config["features"] = model.features;
  model.config["data"] = data_record(inputs, job.data_name);
  if (warm) model.config["warm_start"] = warm->record;
  if (replicated()) model.config["data_parallel"] = parallel.model_record();
  if (!tune.is_null()) model.config["tune"] = tune;
  if (stopping) model.config["epochs_auto"] = auto_record();

  // One unshuffled pass for F(w̄), the margin distribution and the training accuracy. The model
  // has the scaling folded in, so it reads the rows raw (no scaling work) with one dense dot each.
  // The model file is written and synced meanwhile (the pass only reads the model), under a
  // temporary name: it takes its place only once the pass has succeeded, and an error in
  // either leaves nothing behind. save_seconds: the write's own time (on its thread), then the
  // rename.
  std::future<std::unique_ptr<io::AtomicFile>> staged = std::async(std::launch::async, [&] {
    const Clock::time_point save_start = Clock::now();
    std::unique_ptr<io::AtomicFile> file = io::stage_model(model, output, durable_output);
    save_seconds = seconds_since(save_start);
    return file;
  });
  const Clock::time_point eval_start = Clock::now();
  if (!no_final_pass) {
    if (!job.metrics.empty()) {
      std::uint64_t positives = 0, negatives = 0;
      for (const auto& [label, count] : manifest.label_counts)
        (labels.sign(static_cast<float>(label)) > 0 ? positives : negatives) += count;
      train_scores.emplace().reserve(positives, negatives);
    }
    margins = {};
    read.shuffle = false;
    read.epoch = 0;
    read.scale_maxabs = false;
    read.normalize_l2 = false;  // the model scales and normalises as it scores
    read.renumber = {};         // and is indexed by the data's ids
    read.part = 0;              // rank 0 alone, over every row (not its part of each window)
    read.parts = 1;
    std::vector<double> scores;
    shards.scan(read, [&](const CsrView& batch) {
      scores.resize(batch.rows);
      model.score_batch(batch, scores.data());  // parallel; the sums below stay in row order
      for (std::size_t r = 0; r < batch.rows; ++r) {
        const int sign = labels.sign(batch.labels[r]);
        margins.add(sign, scores[r]);
        if (train_scores) train_scores->add(scores[r], sign);
      }
    });
  }
  objective = trainer().objective(margins);  // ‖w̄‖² in the trained (scaled) space
  check_trained_model(objective, margins,
                      "lower --lambda1/--lambda2 (or their -rel forms) or --bias next to C");
  eval_seconds = seconds_since(eval_start);

  std::unique_ptr<io::AtomicFile> written = staged.get();  // rethrows the write's error
  const Clock::time_point commit_start = Clock::now();
  written->commit();
  save_seconds += seconds_since(commit_start);
  remove_finished_checkpoint(checkpoint, events);
  report["model_checksum"] = model_file_checksum(output);
}

// A model that classifies no more of its training rows right than the majority class does (most
// often one that predicts that class for every row: a step too small for the weights of features
// seen a few times to grow past the bias's, docs/design.md) is said, not left to be found in the
// predictions. `majority_share` in the summary and the record.
void LinearRun::check_majority(const io::Manifest& manifest, nlohmann::ordered_json& summary) {
  double majority = 0, count = 0;
  for (const auto& [label, rows] : manifest.label_counts) {
    count += static_cast<double>(rows);
    if (static_cast<double>(rows) > majority) majority = static_cast<double>(rows);
  }
  const double share = count > 0 ? majority / count : 0;
  summary["majority_share"] = report["majority_share"] = share;
  if (static_cast<double>(margins.correct) > majority) return;
  events.note(strprintf(
      "warning: the model is no better on its training rows than predicting the majority class "
      "(accuracy %.4f, the majority's share %.4f): it may predict one class for every row. A "
      "step too small for these rows does this (eta0 %g): try --eta0 1, --epochs auto or --tune",
      margins.accuracy(), share, trainer().eta0()));
}

TrainResult LinearRun::conclude() {
  TrainResult result;
  result.leader = parallel.leader;
  if (!parallel.leader) return result;
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  const engine::LdmConfig& used = trainer().config();
  const engine::LdmTrainer& trainer = this->trainer();
  const double learn_seconds = trained.learn_seconds, wait_seconds = trained.wait_seconds;
  const double train_seconds = trained.train_seconds;
  // Validation data: scored with the finished model, in data order.
  const Clock::time_point validation_start = Clock::now();
  std::optional<Validation> validated;
  if (validation.data) {
    validated = validate(model, validation, threads);
    report["validation_data"] = job.validation;
    report["validation_data_checksum"] = validated->data_checksum;
  }
  const double validation_seconds = seconds_since(validation_start);
  const double total_seconds = seconds_since(opened.start);
  // The rows this run learnt: a resumed run's train_seconds are its own, not the whole run's.
  const int epochs = stopping ? static_cast<int>(epochs_run()) : used.epochs;
  const double learnt_rows = rows * epochs - (static_cast<double>(position.epoch) * rows +
                                                   static_cast<double>(position.rows));
  const double rows_per_second = train_seconds > 0 ? learnt_rows / train_seconds : 0.0;

  nlohmann::ordered_json summary = {
      {"algorithm", algo},
      {"rows", manifest.rows},
      {"features", manifest.features},
      {"nnz", manifest.nnz},
      {"epochs", epochs},
      {"lambda1", *used.lambda1},
      {"lambda2", *used.lambda2},
      {"c", used.c},
      {"bias", used.bias},
      {"seed", used.seed},
      {"scale", scale},
      {"normalize", normalize},
      {"feature_order", slot_of.empty() ? "given" : "frequency"},
      {"eta0", trainer.eta0()},
      {"label_map", {{"negative", labels.negative}, {"positive", labels.positive}}},
      {"open_seconds", opened.open_seconds},
      {"feature_order_seconds", feature_order_seconds},
      {"train_seconds", train_seconds},
      {"learn_seconds", learn_seconds},
      {"read_wait_seconds", wait_seconds},
      {"rows_per_second", rows_per_second},
      {"finish_seconds", finish_seconds},
      {"eval_seconds", eval_seconds},
      {"save_seconds", save_seconds},
      {"total_seconds", total_seconds},
      {"objective", objective},
      {"objective_kind", no_final_pass ? "progressive" : "exact"},
      {"margin_mean", margins.mean()},
      {"margin_variance", margins.variance()},
      {"train_accuracy", margins.accuracy()},
      {"renormalisations", trainer.state().renorms},
      {"workers", parallel.workers},
      {"ranks", parallel.peers.count},
      {"syncs", parallel.syncs},
      {"sync_bytes", parallel.sync_bytes},
      {"sync_seconds", parallel.sync_seconds},
      {"model_path", output}};
  summary.update(reading_json(trained));
  summary["convergence"] = report["convergence"] = convergence.json();
  if (!no_final_pass) check_majority(manifest, summary);
  if (stopping) summary["epochs_auto"] = report["epochs_auto"] = auto_record();
  if (validated) summary["validation"] = validated->metrics;
  // A resumed run's times and speed are its own part's: where that part began.
  if (!job.resume.empty())
    summary["resumed_from"] = {{"epoch", position.epoch}, {"rows", position.rows}};
  if (!step_floor.is_null()) summary["step_floor"] = report["step_floor"] = step_floor;
  report["reading"] = reading_json(trained);
  if (!tune.is_null()) summary["tune"] = report["tune"] = tune;

  report["seconds"] = {{"open", opened.open_seconds}, {"train", train_seconds},
                       {"learn", learn_seconds},      {"read_wait", wait_seconds},
                       {"finish", finish_seconds},    {"final_pass", eval_seconds},
                       {"save", save_seconds},        {"validation", validation_seconds},
                       {"total", total_seconds}};
  // A phase that did not run has no key.
  if (no_final_pass) {
    summary.erase("eval_seconds");
    report["seconds"].erase("final_pass");
  }
  if (!validated) report["seconds"].erase("validation");
  report["checkpoints_written"] = trained.checkpoints_written;
  report["data_parallel"] = parallel.report();
  report["objective"] = objective;
  report["objective_kind"] = no_final_pass ? "progressive" : "exact";
  nlohmann::ordered_json train_report = {{"rows", margins.rows},
                                         {"accuracy", margins.accuracy()},
                                         {"margin_mean", margins.mean()},
                                         {"margin_variance", margins.variance()}};
  if (train_scores) {
    const engine::BinaryMetrics m = train_scores->metrics();
    if (m.rows > 0) train_report = metrics_json(m);
  }
  report["train"] = train_report;
  if (validated) report["validation"] = validated->metrics;
  if (warm) report["warm_start"] = warm->record;

  result.summary = std::move(summary);
  result.model = std::make_unique<engine::LinearModel>(std::move(model));
  return result;
}

}  // namespace

TrainResult train_linear(const TrainJob& job, Events& events, nlohmann::ordered_json& record) {
  LinearRun run(job, events, record);
  run.check();
  run.open();
  run.announce();
  run.train();
  run.finish();
  return run.conclude();
}

}  // namespace polymargin::driver
