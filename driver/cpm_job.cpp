// The Convex Polytope Machine's job (engine/cpm.h) as the library runs it, behind driver::train
// (driver/train.h): binary labels give a (by default double-sided) CPM, more labels one
// double-sided CPM per pair of classes. Every side of every machine learns from the same reader
// stream, in parallel.

#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "driver/epoch_loop.h"
#include "driver/job.h"
#include "driver/learner_jobs.h"
#include "driver/train.h"
#include "engine/cpm.h"
#include "engine/cpm_replicas.h"
#include "engine/errors.h"
#include "io/cpm_checkpoint.h"
#include "io/cpm_model_file.h"
#include "io/memory.h"
#include "io/shards.h"

namespace polymargin::driver {

void refuse_cpm_warm_start() {
  throw UsageError(
      "train: --warm-start is not supported for --algo cpm: the CPM's state is more than its "
      "weights (ASSIGN's history of each training row's face, and the Pegasos schedule "
      "1/(lambda (t + 2)) with lambda = 1/(C T) of this run's T), and neither carries over to "
      "new data; train afresh, or continue an interrupted run with --resume CHECKPOINT");
}

void check_cpm_replicas(const DataParallel& parallel, double perplexity) {
  if (parallel.total() > 1 && perplexity > 1)
    throw UsageError(
        "train: --entropy above 1 is for one learner only: ASSIGN's history (each training row's "
        "last face) is not averaged between --workers or MPI ranks; use --entropy 1, or one "
        "worker");
}

namespace {

engine::CpmSides parse_sides(const std::string& text) {
  if (text == "double") return engine::CpmSides::kDouble;
  if (text == "outer=+1" || text == "outer=1") return engine::CpmSides::kOuterPositive;
  if (text == "outer=-1") return engine::CpmSides::kOuterNegative;
  throw UsageError("train: --sides must be double, outer=+1 or outer=-1 (got '" + text + "')");
}

// --classes "a,b,c": the classes the data must have, each with at least one row.
std::vector<double> parse_classes(const std::string& text) {
  std::vector<double> classes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    double c = 0;
    try {
      c = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw UsageError("train: --classes must be a comma-separated list of labels (got '" + text +
                       "')");
    classes.push_back(c);
  }
  std::sort(classes.begin(), classes.end());
  const auto twice = std::adjacent_find(classes.begin(), classes.end());
  if (twice != classes.end())
    throw UsageError("train: --classes names " + number(*twice) + " twice (got '" + text + "')");
  return classes;
}

// The sides' step counters summed: steps made and to make, and the progressive estimates.
struct PassTally {
  std::uint64_t steps = 0, total = 0, mistakes = 0;
  double hinge = 0;

  PassTally operator-(const PassTally& earlier) const {
    return {steps - earlier.steps, total, mistakes - earlier.mistakes, hinge - earlier.hinge};
  }
  double accuracy() const {
    return 1.0 - static_cast<double>(mistakes) / static_cast<double>(steps);
  }
  double mean_hinge() const { return hinge / static_cast<double>(steps); }
};

PassTally tally(const std::vector<engine::CpmTrainer::SideStatus>& sides) {
  PassTally t;
  for (const auto& s : sides) {
    t.steps += s.steps;
    t.total += s.iterations;
    t.mistakes += s.mistakes;
    t.hinge += s.hinge;
  }
  return t;
}

// The progressive objective of a pass, the mean over the sides of each side's mean loss over its
// steps in the pass (SideStatus::loss; a side done with its T keeps its last) plus its regulariser
// at the pass's end (CpmTrainer::penalties): what the passes' convergence test compares. Unknown
// until every side has made a step.
class PassObjective {
 public:
  explicit PassObjective(const std::vector<engine::CpmTrainer::SideStatus>& start)
      : before_(start), mean_(start.size(), -1) {}

  std::optional<double> pass_end(const std::vector<engine::CpmTrainer::SideStatus>& now,
                                 const std::vector<double>& penalties) {
    double sum = 0;
    for (std::size_t i = 0; i < now.size(); ++i) {
      const std::uint64_t steps = now[i].steps - before_[i].steps;
      if (steps > 0) mean_[i] = (now[i].loss - before_[i].loss) / static_cast<double>(steps);
      if (mean_[i] < 0) return std::nullopt;
      sum += mean_[i] + penalties[i];
    }
    before_ = now;
    return sum / static_cast<double>(std::max<std::size_t>(now.size(), 1));
  }

 private:
  std::vector<engine::CpmTrainer::SideStatus> before_;
  std::vector<double> mean_;  // per side, < 0 before its first step
};

// One cpm job, a step a method, in the order they happen. The members are the job's options and
// the state the steps hand on to each other.
struct CpmRun {
  CpmRun(const TrainJob& given, Events& events, nlohmann::ordered_json& report);

  void check();            // the options, the paths, the locks, a resumed checkpoint's header
  void open();             // data, classes, the problem
  void size();             // precision, or a refusal: memory
  void allocate();         // the trainer, its config, a resume
  void announce();         // what is trained
  void note_step_floor();  // whether the step floor raised a side's steps
  void train();            // the passes: run_passes
  void save();             // the model, from U, a side at a time
  TrainResult conclude();  // validation, report, summary
  engine::CpmTrainer& trainer() { return replicas->lead(); }
  const engine::CpmTrainer& trainer() const { return replicas->lead(); }
  bool replicated() const { return parallel.total() > 1; }

  const CpmParams& params;
  Events& events;
  nlohmann::ordered_json& report;
  // The job's options.
  std::vector<std::string> inputs;
  std::shared_ptr<const io::ShardSet> shards;  // or the rows in memory
  std::string output;
  bool durable_output = true;
  JobOptions job;
  int threads = 0;
  std::uint32_t window_blocks = 0;
  std::string scale, sides, precision, cost_text, normalize;
  engine::CpmConfig config;
  DataParallel parallel;  // workers, sync rows, the ranks of an MPI job
  const nlohmann::json& tune;
  const std::vector<io::NamedPath>& other_inputs;
  // Held from the options' check to the end: a second job on the model or checkpoint is refused.
  std::optional<JobLocks> locks;
  // What the steps hand on.
  // A resume: a checkpoint file's header, read as the options are; the whole checkpoint, with U
  // read straight into the trainer, once that is built. One that can be read once only (a pipe)
  // is read whole with the options.
  nlohmann::json resumed_config;  // the checkpoint's run configuration
  std::optional<io::CpmCheckpoint> resumed_stream;
  OpenedData opened;
  std::string data;           // the inputs' names (or the data name), for messages
  ValidationData validation;  // opened before training
  double allocate_seconds = 0, save_seconds = 0;
  engine::CpmProblem problem;
  std::uint64_t available = 0, need = 0;  // memory: MemAvailable, the run's
  std::uint64_t scale_bytes = 0;          // of it, the max |x| table and its copy in the model
  std::optional<engine::CpmReplicas> replicas;  // one in all: exactly a single CpmTrainer
  nlohmann::json run_config, run_data;
  std::uint64_t windows = 0;  // of a pass
  io::CpmPosition position;   // where training starts: the start, or the checkpoint's position
  LoopResult trained;
  std::vector<int> outers;  // of every side, in order, for the summary
  std::vector<std::pair<double, double>> machine_labels;
  std::size_t machines = 0;
  nlohmann::ordered_json step_floor;  // set when the step floor raised a side's steps
  Convergence convergence;            // of the passes' progressive objectives
};

CpmRun::CpmRun(const TrainJob& given, Events& events, nlohmann::ordered_json& report)
    : params(given.cpm),
      events(events),
      report(report),
      inputs(given.inputs),
      shards(given.shards),
      output(given.output),
      durable_output(given.durable_output),
      job(given.job),
      threads(given.threads),
      window_blocks(given.window_blocks),
      scale(given.cpm.scale),
      sides(given.cpm.sides),
      precision(given.cpm.precision),
      cost_text(given.cpm.cost),
      normalize(given.cpm.normalize),
      parallel(given.parallel),
      tune(given.tune),
      other_inputs(given.other_inputs) {}

void CpmRun::check() {
  check_has_data(inputs, shards);
  if (!params.warm_start.empty()) refuse_cpm_warm_start();
  check_scaling(scale, normalize);
  if (precision != "auto" && precision != "double" && precision != "float")
    throw UsageError("train: --precision must be auto, double or float (got '" + precision + "')");
  if (window_blocks == 0) throw UsageError("train: --window-blocks must be at least 1");
  config.faces = params.faces;
  config.epochs = params.epochs.value_or(kCpmDefaultEpochs);
  config.perplexity = params.entropy;
  config.cost_ratio = params.cost_ratio;
  config.hash_bits = params.hash_bits;
  config.seed = params.seed;
  if (params.iterations) {
    if (params.epochs) throw UsageError("train: --iterations and --epochs exclude each other");
    if (*params.iterations < 1)
      throw UsageError("train: --iterations (T) must be at least 1 (got " +
                       std::to_string(*params.iterations) + ")");
    config.iterations = static_cast<std::uint64_t>(*params.iterations);
  } else if (!params.epochs) {
    config.min_iterations = engine::kCpmDefaultMinSteps;
  } else if (!(config.epochs > 0) || !std::isfinite(config.epochs)) {
    throw UsageError("train: --epochs must be a positive number of passes (got " +
                     number(config.epochs) + ")");
  }
  config.sides = parse_sides(sides);
  if (cost_text != "auto") {
    // strtod, not stod: a C out of range (1e-320) is named by the range check below.
    char* end = nullptr;
    config.c = std::strtod(cost_text.c_str(), &end);
    if (cost_text.empty() || end != cost_text.c_str() + cost_text.size())
      throw UsageError("train: -c (C) must be auto or a number (got '" + cost_text + "')");
  }
  check_config(
      config,
      {{"faces", "-k (faces K)"}, {"c", "-c (C)"}, {"perplexity", "--entropy (a perplexity)"}});
  parallel.check();
  check_cpm_replicas(parallel, config.perplexity);
  check_job_paths(inputs, job, {}, other_inputs, output);
  job.check();
  // Two jobs never write the same model or checkpoint: the second stops here, before any work.
  // Of an MPI job's ranks only rank 0 writes, and locks.
  if (parallel.leader && !job.locks_held) locks.emplace(output, job.checkpoint, job.metrics);
  if (!job.resume.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(job.resume, ec)) {
      resumed_config = io::read_cpm_checkpoint_header(job.resume).value("config", nlohmann::json());
    } else {
      resumed_stream = io::read_cpm_checkpoint(job.resume);
      resumed_config = resumed_stream->config;
    }
  }
}

void CpmRun::open() {
  opened = open_job_data("cpm", inputs, shards, output, job, threads, report);
  threads = opened.threads;
  data = opened.data;
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  if (manifest.label_counts.size() < 2)
    throw DataError(data, 0, 0,
                    "one class only (label " + number(manifest.label_counts.begin()->first) +
                        "): the CPM needs two classes or more");
  if (params.classes) {
    const std::vector<double> wanted = parse_classes(*params.classes);
    for (const double c : wanted)
      if (!manifest.label_counts.count(c))
        throw DataError(data, 0, 0, "class " + number(c) + " of --classes has no examples");
    for (const auto& [label, count] : manifest.label_counts)
      if (!std::binary_search(wanted.begin(), wanted.end(), label))
        throw DataError(
            data, 0, 0,
            "label " + number(label) + " (" + std::to_string(count) + " rows) is not in --classes");
  }
  if (parallel.leader) validation = open_validation(job.validation, manifest, threads);
  // The step floor, bounded by the non-zeros its steps read (engine::floor_steps).
  if (config.min_iterations > 0)
    config.min_iterations = engine::floor_steps(config.min_iterations, manifest.rows, manifest.nnz);
  if (cost_text == "auto") {
    config.c = engine::cpm_default_c(manifest.rows);
    config.lambda_of_epochs = config.min_iterations > 0;  // the floor's steps keep its λ
  }
  problem.max_index = manifest.max_index;
  for (const auto& [label, count] : manifest.label_counts)
    problem.label_counts.emplace_back(label, count);
}

void CpmRun::size() {
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  // Memory: decided before the first weight is allocated.
  available = io::mem_available();
  // Every worker holds a whole trainer (its U and state); a replicated float run sums its average
  // through a 32 MiB double copy, within the overhead. With --scale maxabs, the reader's table of
  // every feature id's max |x| and the model's copy of it: 8 bytes a feature id, whatever
  // --hash-bits makes of the weights.
  const auto workers = static_cast<std::uint64_t>(parallel.workers);
  scale_bytes = scale == "maxabs" ? 2 * sizeof(float) * (std::uint64_t{manifest.max_index} + 1) : 0;
  const auto bytes_of = [&](const engine::CpmConfig& c, engine::CpmPrecision p,
                            std::uint64_t table) {
    return engine::cpm_training_bytes(c, problem, p) * workers + table + kRunOverheadBytes;
  };
  const std::uint64_t need_double = bytes_of(config, engine::CpmPrecision::kDouble, scale_bytes);
  const std::uint64_t need_float = bytes_of(config, engine::CpmPrecision::kFloat, scale_bytes);
  // Against a hard limit (a memory cgroup, ulimit -v) the run's own part is counted at
  // kRunFloorBytes (check_hard_limit_fits).
  const std::optional<HardLimit> limit = hard_memory_limit();
  const auto within_hard_limit = [&](std::uint64_t need) {
    return !limit || fits_hard_limit(need, limit->room);
  };
  const auto fits = [&](std::uint64_t need) {
    return (available == 0 || need <= available) && within_hard_limit(need);
  };
  // A resumed run keeps the precision its checkpoint was written in, whatever memory says now.
  if (precision == "auto" && resumed_config.is_object() && resumed_config.contains("precision") &&
      resumed_config["precision"].is_string())
    precision = resumed_config["precision"].get<std::string>();
  if (precision == "double" || (precision == "auto" && fits(need_double)))
    config.precision = engine::CpmPrecision::kDouble;
  else
    config.precision = engine::CpmPrecision::kFloat;
  need = config.precision == engine::CpmPrecision::kDouble ? need_double : need_float;
  if (!fits(need)) {
    // The remedy offered must fit itself: --scale none when the max |x| table alone does not fit
    // (the weights' remedy then sized without it); the largest --hash-bits that does (when hashing
    // has fewer slots than the feature ids), else the most faces that fit.
    std::vector<std::string> remedies;
    const bool table_fits = fits(scale_bytes + kRunOverheadBytes);
    if (!table_fits)
      remedies.push_back("--scale none (the max |x| table of " +
                         std::to_string(std::uint64_t{manifest.max_index} + 1) +
                         " feature ids and its copy in the model need " + gib(scale_bytes) +
                         " alone)");
    const auto fits_as = [&](const engine::CpmConfig& c) {
      return fits(bytes_of(c, c.precision, table_fits ? scale_bytes : 0));
    };
    if (!fits_as(config)) {
      engine::CpmConfig smaller = config;
      smaller.precision = engine::CpmPrecision::kFloat;
      const std::uint64_t slots = std::uint64_t{manifest.max_index} + 1;
      int bits = std::min(31, static_cast<int>(std::bit_width(slots)) - 1);
      for (; bits >= 10; --bits) {
        smaller.hash_bits = bits;
        if (fits_as(smaller)) break;
      }
      if (bits >= 10) {
        remedies.push_back("--hash-bits " + std::to_string(bits) + " or less, or fewer faces");
      } else {
        smaller.hash_bits = slots > 1024 ? 10 : 0;
        int low = 0, high = config.faces;  // low fits (0: none), high does not
        while (high - low > 1) {
          smaller.faces = low + (high - low) / 2;
          smaller.perplexity = std::min(config.perplexity, static_cast<double>(smaller.faces));
          (fits_as(smaller) ? low : high) = smaller.faces;
        }
        if (low > 0)
          remedies.push_back("at most " + std::to_string(low) + " faces (-k)" +
                             (smaller.hash_bits ? " with --hash-bits 10" : ""));
      }
    }
    std::string remedy = remedies.empty()
                             ? "not even one face fits: free memory, or run on a larger machine"
                             : "use " + remedies.front();
    if (remedies.size() > 1) remedy += ", and " + remedies.back();
    if (workers > 1) remedy = "use fewer --workers, or " + remedy;
    throw MemoryError("train: the CPM needs " + gib(need) +
                      " (K = " + std::to_string(config.faces) + " faces x " +
                      std::to_string(config.hash_bits ? std::uint64_t{1} << config.hash_bits
                                                      : std::uint64_t{manifest.max_index} + 1) +
                      " weight slots per side, + ASSIGN history" +
                      (workers > 1 ? ", x " + std::to_string(workers) + " workers" : "") +
                      (scale_bytes ? ", + the max |x| table " + gib(scale_bytes) : "") +
                      " + 256 MiB) but only " +
                      (within_hard_limit(need) ? gib(available) + " are available"
                                               : gib(limit->room) + " are left by " + limit->name) +
                      ": " + remedy);
  }
}

void CpmRun::allocate() {
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  // What decides the model besides the data: a resumed run must have exactly this, and every rank
  // of an MPI job before U's pages are mapped.
  run_config = config.json();
  run_config["algorithm"] = "cpm";
  run_config["scale"] = scale;
  // Absent at its default, so that checkpoints written without the key still resume.
  if (normalize == "l2") run_config["normalize"] = normalize;
  run_config["window_blocks"] = window_blocks;
  parallel.plan(manifest, window_blocks, run_config, events);
  run_data = data_identity(manifest);
  parallel.agree(run_config, run_data, job, output, data);
  report["config"] = run_config;

  // U's pages are mapped as the trainer is built, by the --threads threads.
  const Clock::time_point allocate_start = Clock::now();
  tbb::task_arena(threads).execute([&] {
    replicas.emplace(config, problem, parallel.workers, parallel.total(), parallel.first());
  });
  allocate_seconds = seconds_since(allocate_start);
  windows = io::window_count(manifest, window_blocks);
  if (!job.resume.empty()) {
    // U goes straight into the trainer's (the run holds it once, as an uninterrupted run does)
    // when it has the trainer's size and precision; else it is read aside, and restore() says
    // why it does not fit.
    const char* dtype = config.precision == engine::CpmPrecision::kDouble ? "f64" : "f32";
    const io::CpmCheckpoint resumed =
        resumed_stream ? std::move(*resumed_stream)
                       : io::read_cpm_checkpoint(job.resume,
                                                 [&](std::size_t side, const std::string& saved,
                                                     std::uint64_t bytes) -> std::span<char> {
                                                   if (side >= trainer().sides() || saved != dtype)
                                                     return {};
                                                   const std::span<char> u =
                                                       trainer().side_weights_to_restore(side);
                                                   return u.size() == bytes ? u : std::span<char>{};
                                                 });
    resumed_stream.reset();
    check_resumable(job.resume, resumed.config, resumed.data, run_config, run_data);
    if (resumed.position.batches > windows)
      throw DataError(job.resume, 0, 0, "checkpoint position lies beyond a pass over the data");
    position = resumed.position;
    std::vector<std::string_view> weights;
    for (std::size_t i = 0; i < resumed.weights.size(); ++i)
      weights.push_back(resumed.weights_placed[i] ? trainer().side_weights(i)
                                                  : std::string_view(resumed.weights[i]));
    try {
      trainer().restore(resumed.batches, resumed.sides, weights);
    } catch (const std::invalid_argument& e) {
      throw DataError(job.resume, 0, 0,
                      std::string("checkpoint does not fit the run: ") + e.what());
    }
    replicas->spread_lead();
    report["resumed_from"] = {{"checkpoint", job.resume},
                              {"pass", position.pass},
                              {"batches", position.batches},
                              {"rows", position.rows}};
  }
}

// The default epochs' steps, raised by the step floor for a small set, are said, since a run of
// 50,000 steps a side on a few hundred rows makes hundreds of passes.
void CpmRun::note_step_floor() {
  if (config.min_iterations == 0) return;
  bool raised = false;
  std::uint64_t most = 0;  // the most steps the default epochs give a raised side
  for (const auto& s : replicas->status()) {
    const auto epoch_steps = static_cast<std::uint64_t>(std::ceil(config.epochs * double(s.rows)));
    if (s.iterations <= epoch_steps) continue;
    raised = true;
    most = std::max(most, epoch_steps);
  }
  if (!raised) return;
  const bool bounded = config.min_iterations < engine::kCpmDefaultMinSteps;
  step_floor = {{"default_epochs", config.epochs},
                {"min_steps", engine::kCpmDefaultMinSteps},
                {"steps", config.min_iterations},
                {"bounded_by_nnz", bounded}};
  events.note(strprintf(
      "steps raised from %g epochs (%llu a side) to %llu a side %s %llu SGD steps%s (--epochs or "
      "--iterations sets them)",
      config.epochs, static_cast<unsigned long long>(most),
      static_cast<unsigned long long>(config.min_iterations),
      bounded ? "by the step floor of" : "so that each side makes at least",
      static_cast<unsigned long long>(engine::kCpmDefaultMinSteps),
      bounded ? (", bounded at " + number(engine::kFloorMaxNonZeros) + " non-zeros read").c_str()
              : ""));
}

void CpmRun::announce() {
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  const bool multi = trainer().multiclass();
  events.note(strprintf("train cpm: %s: %llu rows, %llu features, %llu non-zeros%s", data.c_str(),
                        static_cast<unsigned long long>(manifest.rows),
                        static_cast<unsigned long long>(manifest.features),
                        static_cast<unsigned long long>(manifest.nnz),
                        opened.dataset->converted() ? " (converted from text)" : ""));
  events.note(
      strprintf("%s: K %d  C %g  entropy perplexity %g (h = %.4g nats)  cost ratio %g  sides %s  "
                "hash bits %d  scale %s",
                multi ? ("one-vs-one over " + std::to_string(manifest.label_counts.size()) +
                         " classes, " + std::to_string(trainer().status().size()) + " sides")
                            .c_str()
                      : "binary",
                config.faces, config.c, config.perplexity, std::log(config.perplexity),
                config.cost_ratio, sides.c_str(), config.hash_bits, scale.c_str()));
  events.note(strprintf(
      "precision %s: weights + history %s%s%s + 256 MiB of %s available",
      config.precision == engine::CpmPrecision::kDouble ? "double" : "float",
      gib(need - scale_bytes - kRunOverheadBytes).c_str(), scale_bytes ? " + max |x| table " : "",
      scale_bytes ? gib(scale_bytes).c_str() : "", available ? gib(available).c_str() : "unknown"));
  note_step_floor();
  parallel.announce(replicas->sync_bytes(), "pass", events);
  if (report.contains("resumed_from"))
    events.note(strprintf("resuming from %s: pass %llu, %llu of its %llu windows done, %llu rows",
                          job.resume.c_str(), static_cast<unsigned long long>(position.pass + 1),
                          static_cast<unsigned long long>(position.batches),
                          static_cast<unsigned long long>(windows),
                          static_cast<unsigned long long>(position.rows)));
}

void CpmRun::train() {
  const io::ShardSet& shards = opened.dataset->shards();
  engine::CpmReplicas& replicas = *this->replicas;
  io::ReadOptions read = read_options(config.seed, threads, job, window_blocks, scale == "maxabs",
                                      normalize == "l2", parallel);
  // With a side per thread or more, the sides keep every thread busy: a window is then read by all
  // threads (lockstep), its reading started by those whose sides finished the window before first
  // (scan_lending), rather than by one of them ahead of its side.
  read.lockstep = trainer().sides() * static_cast<std::size_t>(parallel.workers) >=
                  static_cast<std::size_t>(threads);
  // The epoch loop is the driver's; what the CPM does with a window, a checkpoint, a stop and the
  // end of a pass is said here. Its position: {pass, windows of it learnt, rows in all passes}.
  JobLearner learner;
  std::uint64_t passes = 0;  // the passes the run will make (below), for the live progress line
  learner.on_learn = [&](const CsrView& window, const io::SpareWork& spare, const Position& at) {
    replicas.learn(window, spare);
    events.progress(at.pass, passes, at.pass_rows + window.rows, shards.manifest().rows);
  };
  learner.on_done = [&] { return replicas.done(); };
  // A replicated run saves at averagings only (all replicas then agree), rank 0 alone.
  learner.on_checkpoint = [&](const Position& at, bool pass_end) {
    if (!parallel.leader) return;
    io::write_cpm_checkpoint(job.checkpoint, run_config, run_data,
                             pass_end ? io::CpmPosition{at.pass + 1, 0, at.rows}
                                      : io::CpmPosition{at.pass, at.windows, at.rows},
                             trainer());
  };
  learner.on_sync = [&] { parallel.average(replicas); };
  learner.on_stop = [&](int signal, const Position& at) {
    Interrupted stop{signal, job.checkpoint};
    report["interrupted"] = {
        {"signal", stop_name(signal)},
        {"pass", at.pass},
        {"batches", at.windows},
        {"rows", at.rows},
        {"checkpoint", job.checkpoint.empty() ? nlohmann::json() : nlohmann::json(job.checkpoint)}};
    throw stop;
  };
  // A line for the first pass, the first to reach each further 5 % of the steps, and the last: a
  // small set that the step floor passes over thousands of times logs about 20 lines, not one a
  // pass.
  // Each line also gives the pass's progressive estimates, over the steps since the pass before:
  // the share of rows classified right before the step learnt from them, and their mean hinge.
  // The estimates count the steps of this run: a resumed one's from its checkpoint on.
  Twentieths logged;
  PassTally before = tally(replicas.status());
  PassObjective objective(replicas.status());
  convergence.tol = params.tol;
  learner.on_pass_end = [&](const Position& at, double seconds) {
    const std::vector<engine::CpmTrainer::SideStatus> status = replicas.status();
    const PassTally now = tally(status);
    const PassTally pass = now - before;
    before = now;
    if (pass.steps > 0) {
      report["progressive_accuracy"] = pass.accuracy();
      report["progressive_hinge"] = pass.mean_hinge();
    }
    const std::optional<double> f = objective.pass_end(status, trainer().penalties());
    std::optional<double> change;
    if (f) {
      change = convergence.pass_end(at.pass, *f);
      report["progressive_objective"] = *f;
    }
    const bool due = logged.due(now.steps, now.total);
    if (at.pass > 0 && !due) return;
    std::string estimates;
    if (f)
      estimates = strprintf(", objective ≈ %.6g%s", *f,
                            change ? strprintf(" (%+.2f %%)", 100 * *change).c_str() : "");
    if (pass.steps > 0)
      estimates += strprintf(", progressive accuracy ≈ %.4f, hinge ≈ %.4g", pass.accuracy(),
                             pass.mean_hinge());
    events.note(strprintf("pass %llu: %.2f s, %llu of %llu steps%s",
                          static_cast<unsigned long long>(at.pass + 1), seconds,
                          static_cast<unsigned long long>(now.steps),
                          static_cast<unsigned long long>(now.total), estimates.c_str()));
  };
  LoopOptions loop = loop_options(
      read, job, parallel, replicas.sync_bytes(),
      [&](std::uint64_t rows) { return stop_requested(events, rows, job.stop_after_rows); });
  // The passes the run will make: the most any side needs for its T steps.
  for (const auto& s : replicas.status())
    if (s.rows > 0)
      loop.expected_passes = std::max(loop.expected_passes, (s.iterations + s.rows - 1) / s.rows);
  passes = std::max<std::uint64_t>(loop.expected_passes, 1);
  trained = run_passes(shards, learner, loop, {position.pass, position.batches, 0, position.rows},
                       job.resume);
}

void CpmRun::save() {
  // Of an MPI job's ranks, rank 0 alone writes the model.
  if (!parallel.leader) return;
  const io::ShardSet& shards = opened.dataset->shards();
  const io::Manifest& manifest = shards.manifest();
  engine::CpmTrainer& trainer = this->trainer();
  const bool scale_maxabs = scale == "maxabs";
  const Clock::time_point save_start = Clock::now();
  // The weights go to the file straight from U, a chunk at a time: no float copy of the model is
  // built (0.8 GB a side at KDD size), so the run's peak is U and the histories.
  engine::CpmModel model =
      trainer.model_without_weights(scale_maxabs ? &shards.feature_maxabs() : nullptr);
  model.index_base = manifest.index_base;
  model.features = manifest.features;
  model.config["scale"] = scale;
  model.normalize_l2 = normalize == "l2";
  if (model.normalize_l2) model.config["normalize"] = normalize;
  model.config["window_blocks"] = window_blocks;
  model.config["index_base"] = manifest.index_base;
  model.config["max_index"] = manifest.max_index;
  model.config["features"] = manifest.features;
  model.config["data"] = data_record(inputs, job.data_name);
  if (replicated()) model.config["data_parallel"] = parallel.model_record();
  if (!tune.is_null()) model.config["tune"] = tune;
  for (const auto& m : model.machines)
    for (const auto& f : m.sides) outers.push_back(f.outer);
  for (const auto& m : model.machines) machine_labels.emplace_back(m.positive, m.negative);
  machines = model.machines.size();
  // Sides are written in order, each U given back once its last chunk is out: the file's pages
  // then reuse its memory rather than fresh pages, and the validation below finds it free.
  std::vector<std::uint64_t> side_floats;
  for (const auto& m : model.machines)
    for (const auto& f : m.sides) side_floats.push_back(f.slots * std::uint64_t(f.faces));
  io::save_cpm_model(
      std::move(model), output,
      [&](std::size_t side, std::uint64_t first, std::span<float> out) {
        trainer.export_weights(side, first, out);
        if (first + out.size() == side_floats.at(side)) trainer.release_weights(side);
      },
      durable_output);
  save_seconds = seconds_since(save_start);  // the model built, written and synced
  remove_finished_checkpoint(job.checkpoint, events);
  report["model_checksum"] = model_file_checksum(output);
}

TrainResult CpmRun::conclude() {
  TrainResult result;
  result.leader = parallel.leader;
  if (!parallel.leader) return result;
  const io::Manifest& manifest = opened.dataset->shards().manifest();
  // A replicated run can be done at a pass's end (an average): the loop then stands at the next
  // pass, not begun.
  const std::uint64_t passes = trained.end.pass + (trained.end.windows > 0 ? 1 : 0);
  const double learn_seconds = trained.learn_seconds, wait_seconds = trained.wait_seconds;
  const double train_seconds = trained.train_seconds;
  const Clock::time_point validation_start = Clock::now();
  std::optional<Validation> validated;
  if (validation.data) {
    // The file just written, read back: the model as it will serve, one copy in memory at a time.
    validated = validate(io::load_cpm_model(output), validation, threads);
    report["validation_data"] = job.validation;
    report["validation_data_checksum"] = validated->data_checksum;
  }
  const double validation_seconds = seconds_since(validation_start);
  const double total_seconds = seconds_since(opened.start);

  nlohmann::ordered_json side_list = nlohmann::ordered_json::array();
  const std::vector<engine::CpmTrainer::SideStatus> status = replicas->status();
  std::uint64_t all_steps = 0;
  {
    const std::size_t per_machine = status.size() / machines;
    for (std::size_t i = 0; i < status.size(); ++i) {
      const auto& s = status[i];
      all_steps += s.steps;
      side_list.push_back(
          {{"positive_label", machine_labels[i / per_machine].first},
           {"negative_label", machine_labels[i / per_machine].second},
           {"outer", outers[i]},
           {"rows", s.rows},
           {"outer_rows", s.outer_rows},
           {"iterations", s.iterations},
           {"steps", s.steps},
           {"updates", s.updates},
           {"adjusted_assignments", s.adjusted},
           {"assignment_entropy", s.assignment_entropy},
           {"assignment_perplexity", std::exp(s.assignment_entropy)},
           {"learn_seconds", s.seconds},
           {"steps_per_second", s.seconds > 0 ? static_cast<double>(s.steps) / s.seconds : 0.0}});
    }
  }
  nlohmann::ordered_json summary = {
      {"algorithm", "cpm"},
      {"rows", manifest.rows},
      {"features", manifest.features},
      {"nnz", manifest.nnz},
      {"classes", manifest.label_counts.size()},
      {"machines", machines},
      {"faces", config.faces},
      {"iterations", status.front().iterations},
      {"passes", passes},
      {"c", config.c},
      {"normalize", normalize},
      {"entropy_perplexity", config.perplexity},
      {"entropy_nats", std::log(config.perplexity)},
      {"cost_ratio", config.cost_ratio},
      {"sides", sides},
      {"seed", config.seed},
      {"hash_bits", config.hash_bits},
      {"scale", scale},
      {"precision", config.precision == engine::CpmPrecision::kDouble ? "double" : "float"},
      {"threads", threads},
      {"memory_needed_bytes", need},
      {"memory_available_bytes", available},
      {"open_seconds", opened.open_seconds},
      {"allocate_seconds", allocate_seconds},
      {"train_seconds", train_seconds},
      {"learn_seconds", learn_seconds},
      {"read_wait_seconds", wait_seconds},
      {"steps_per_second",
       train_seconds > 0 ? static_cast<double>(all_steps) / train_seconds : 0.0},
      {"save_seconds", save_seconds},
      {"total_seconds", total_seconds},
      {"workers", parallel.workers},
      {"ranks", parallel.peers.count},
      {"syncs", parallel.syncs},
      {"sync_bytes", parallel.sync_bytes},
      {"sync_seconds", parallel.sync_seconds},
      {"side_details", side_list},
      {"model_path", output}};
  summary.update(reading_json(trained));
  if (validated) summary["validation"] = validated->metrics;
  if (!step_floor.is_null()) summary["step_floor"] = report["step_floor"] = step_floor;
  for (const char* key : {"progressive_accuracy", "progressive_hinge", "progressive_objective"})
    if (report.contains(key)) summary[key] = report[key];  // of the last pass
  summary["convergence"] = report["convergence"] = convergence.json();
  report["reading"] = reading_json(trained);
  if (!tune.is_null()) summary["tune"] = report["tune"] = tune;
  report["passes"] = passes;
  report["seconds"] = {{"open", opened.open_seconds},      {"allocate", allocate_seconds},
                       {"train", train_seconds},           {"learn", learn_seconds},
                       {"read_wait", wait_seconds},        {"save", save_seconds},
                       {"validation", validation_seconds}, {"total", total_seconds}};
  if (!validated) report["seconds"].erase("validation");  // a phase that did not run has no key
  report["checkpoints_written"] = trained.checkpoints_written;
  report["data_parallel"] = parallel.report();
  if (validated) report["validation"] = validated->metrics;
  result.summary = std::move(summary);
  return result;
}

}  // namespace

TrainResult train_cpm(const TrainJob& job, Events& events, nlohmann::ordered_json& record) {
  CpmRun run(job, events, record);
  run.check();
  run.open();
  run.size();
  run.allocate();
  run.announce();
  run.train();
  run.save();
  return run.conclude();
}

}  // namespace polymargin::driver
