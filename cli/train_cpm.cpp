// `polymargin train --algo cpm`: the Convex Polytope Machine (engine/cpm.h) over streamed, shuffled
// shards. Binary labels give a (by default double-sided) CPM, more labels one double-sided CPM per
// pair of classes. Every side of every machine learns from the same reader stream, in parallel.
// A nightly job's options (checkpoint, resume, stop, locks, validation, metrics) as the linear
// learner's (cli/train_jobs.h); the checkpoint file is cli/cpm_checkpoint.h's.

#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "cli/tune.h"
#include "driver/epoch_loop.h"
#include "engine/cpm.h"
#include "engine/cpm_replicas.h"
#include "engine/errors.h"
#include "io/cpm_checkpoint.h"
#include "io/cpm_model_file.h"
#include "io/memory.h"
#include "io/shards.h"

namespace polymargin::cli {

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

// One `train --algo cpm` run, a step a method, in the order they happen. The members are the run's
// options and the state the steps hand on to each other.
struct CpmRun : TrainRun {
  using TrainRun::TrainRun;

  bool parse(const std::vector<std::string>& args);  // false: --help was shown
  void open();                                       // data, classes, the problem
  void size();                                       // precision, or a refusal: memory
  void allocate();                                   // the trainer, its config, a resume
  void announce() const;                             // what is trained, on stderr
  void train();                                      // the passes: driver::run_passes
  void save();                                       // the model, from U, a side at a time
  int conclude();                                    // validation, report, summary
  engine::CpmTrainer& trainer() { return replicas->lead(); }
  const engine::CpmTrainer& trainer() const { return replicas->lead(); }
  bool replicated() const { return parallel.total() > 1; }

  // Options of the CPM.
  std::string algo, scale, sides, precision, classes_text, warm_start, cost_text, normalize;
  engine::CpmConfig config;
  std::int64_t iterations = 0;
  DataParallel parallel;  // --workers, --sync-rows, the ranks of an MPI job
  // What the steps hand on.
  // --resume: a checkpoint file's header, read as the options are; the whole checkpoint, with U
  // read straight into the trainer, once that is built. One that can be read once only (a pipe)
  // is read whole with the options.
  nlohmann::json resumed_config;  // the checkpoint's run configuration
  std::optional<io::CpmCheckpoint> resumed_stream;
  double allocate_seconds = 0, save_seconds = 0;
  engine::CpmProblem problem;
  std::uint64_t available = 0, need = 0;  // memory: MemAvailable, the run's
  std::uint64_t scale_bytes = 0;          // of it, the max |x| table and its copy in the model
  std::optional<engine::CpmReplicas> replicas;  // one in all: exactly a single CpmTrainer
  nlohmann::json run_config, run_data;
  std::uint64_t windows = 0;  // of a pass
  io::CpmPosition position;   // where training starts: the start, or the checkpoint's position
  driver::LoopResult trained;
  std::vector<int> outers;  // of every side, in order, for the summary
  std::vector<std::pair<double, double>> machine_labels;
  std::size_t machines = 0;
};

bool CpmRun::parse(const std::vector<std::string>& args) {
  po::options_description opts(
      "Memory: K x (features + 1) weights per side in double (8 bytes; float, 4 bytes, when\n"
      "double does not fit), two sides per machine, plus (with --entropy above 1) 32-64 bytes\n"
      "per outer-class row for ASSIGN's history, and 256 MiB. It is computed before anything is\n"
      "allocated; a run that would not fit is refused: use --hash-bits B (2^B slots per face).\n"
      "\n"
      "train --algo cpm options");
  opts.add_options()("algo", po::value(&algo)->default_value("cpm"), "cpm")(
      "data,d", po::value(&inputs)->multitoken(),
      "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files) or a shard directory")(
      "output,o", po::value(&output)->required(), "model file to write")(
      "faces,k", po::value(&config.faces)->default_value(10), "K, faces (sub-classifiers) per side")(
      "iterations", po::value(&iterations), "T, SGD steps per side (default: --epochs)")(
      "epochs", po::value(&config.epochs)->default_value(10),
      "T = this x the side's rows, when --iterations is not given; by default also at least "
      "50000 steps per side (a small set gets more passes)")(
      "cost,c", po::value(&cost_text)->default_value("auto"),
      "C: regularisation lambda = 1/(C T) (the paper's grid: 1, 0.1, ..., 1e-4); auto: 3/sqrt(m) "
      "within [0.01, 1] for m rows (lambda shrinks as 1/sqrt(m)), and T that of the epochs "
      "alone: the 50000-step floor does not weaken lambda")(
      "entropy", po::value(&config.perplexity)->default_value(1),
      "ASSIGN's entropy floor as a perplexity P in [1, K] (effective number of faces): the "
      "paper's h = ln P; 1 = off (h = 0). The paper's grid h = log(jK/10) is P = jK/10")(
      "cost-ratio", po::value(&config.cost_ratio)->default_value(1),
      "r: cost r/(1+r) of an inner (enclosed) row, 1/(1+r) of an outer one, on each side")(
      "sides", po::value(&sides)->default_value("double"),
      "double (D = F+ - F-) | outer=+1 (one CPM, +1 outside) | outer=-1")(
      "classes", po::value(&classes_text),
      "comma-separated labels the data must have, each with rows (multiclass check)")(
      "scale", po::value(&scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (stored in the model) | none")(
      "normalize", po::value(&normalize)->default_value("none"),
      "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
      "| none")(
      "hash-bits", po::value(&config.hash_bits)->default_value(0),
      "B: signed feature hashing into 2^B slots per face; 0 = off (as the paper)")(
      "precision", po::value(&precision)->default_value("auto"),
      "weight accumulators: auto (double when it fits in memory, else float) | double | float")(
      "seed", po::value(&config.seed)->default_value(1), "seed of shuffling and tie-breaking")(
      "threads", po::value(&threads)->default_value(0),
      "threads (0: all cores); the model does not depend on it")(
      "window-blocks", po::value(&window_blocks)->default_value(8),
      "the reader shuffles rows within windows of this many blocks")(
      "json", po::bool_switch(&json), "print the summary as JSON on stdout")(
      "warm-start", po::value(&warm_start),
      "not for the CPM (refused): use --resume FILE to continue an interrupted run");
  add_parallel_options(opts, parallel);
  add_job_options(opts, job, "pass");
  po::positional_options_description positional;
  positional.add("data", -1);
  if (!parse_options("train", "--algo cpm -d TRAIN... -o MODEL [options]", opts, positional, args,
                     vm))
    return false;
  if (inputs.empty()) throw UsageError("train: no training data given (-d TRAIN)");
  if (!warm_start.empty()) refuse_cpm_warm_start();
  check_scaling(scale, normalize);
  if (precision != "auto" && precision != "double" && precision != "float")
    throw UsageError("train: --precision must be auto, double or float (got '" + precision + "')");
  if (window_blocks == 0) throw UsageError("train: --window-blocks must be at least 1");
  if (vm.count("iterations")) {
    if (!vm["epochs"].defaulted())
      throw UsageError("train: --iterations and --epochs exclude each other");
    if (iterations < 1)
      throw UsageError("train: --iterations (T) must be at least 1 (got " +
                       std::to_string(iterations) + ")");
    config.iterations = static_cast<std::uint64_t>(iterations);
  } else if (vm["epochs"].defaulted()) {
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
  check_train_paths(vm);
  job.check();
  // Two jobs never write the same model or checkpoint: the second stops here, before any work.
  // Of an MPI job's ranks only rank 0 writes, and locks.
  if (parallel.leader) locks.emplace(output, job.checkpoint, job.metrics);
  if (!job.resume.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(job.resume, ec)) {
      resumed_config = io::read_cpm_checkpoint_header(job.resume).value("config", nlohmann::json());
    } else {
      resumed_stream = io::read_cpm_checkpoint(job.resume);
      resumed_config = resumed_stream->config;
    }
  }
  stop_signals.emplace();
  return true;
}

void CpmRun::open() {
  open_data("cpm");
  const io::Manifest& manifest = this->manifest();
  if (manifest.label_counts.size() < 2)
    throw DataError(data, 0, 0,
                    "one class only (label " + number(manifest.label_counts.begin()->first) +
                        "): the CPM needs two classes or more");
  if (vm.count("classes")) {
    const std::vector<double> wanted = parse_classes(classes_text);
    for (const double c : wanted)
      if (!manifest.label_counts.count(c))
        throw DataError(data, 0, 0, "class " + number(c) + " of --classes has no examples");
    for (const auto& [label, count] : manifest.label_counts)
      if (!std::binary_search(wanted.begin(), wanted.end(), label))
        throw DataError(data, 0, 0,
                        "label " + number(label) + " (" + std::to_string(count) +
                            " rows) is not in --classes");
  }
  if (parallel.leader) validation = open_validation(job.validation, manifest, threads);
  if (cost_text == "auto") {
    config.c = engine::cpm_default_c(manifest.rows);
    config.lambda_of_epochs = config.min_iterations > 0;  // the floor's steps keep its λ
  }
  problem.max_index = manifest.max_index;
  for (const auto& [label, count] : manifest.label_counts) problem.label_counts.emplace_back(label, count);
}

void CpmRun::size() {
  const io::Manifest& manifest = dataset->shards().manifest();
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
  const io::Manifest& manifest = dataset->shards().manifest();
  // U's pages are mapped as the trainer is built, by the --threads threads.
  const Clock::time_point allocate_start = Clock::now();
  tbb::task_arena(threads).execute([&] {
    replicas.emplace(config, problem, parallel.workers, parallel.total(), parallel.first());
  });
  allocate_seconds = seconds_since(allocate_start);

  // What decides the model besides the data: a resumed run must have exactly this.
  run_config = config.json();
  run_config["algorithm"] = "cpm";
  run_config["scale"] = scale;
  // Absent at its default, so that checkpoints written without the key still resume.
  if (normalize == "l2") run_config["normalize"] = normalize;
  run_config["window_blocks"] = window_blocks;
  parallel.plan(manifest, window_blocks, run_config, events);
  run_data = data_identity(manifest);
  report["config"] = run_config;
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
      throw DataError(job.resume, 0, 0, std::string("checkpoint does not fit the run: ") + e.what());
    }
    replicas->spread_lead();
    report["resumed_from"] = {{"checkpoint", job.resume},
                              {"pass", position.pass},
                              {"batches", position.batches},
                              {"rows", position.rows}};
  }
}

void CpmRun::announce() const {
  const io::Manifest& manifest = dataset->shards().manifest();
  const bool multi = trainer().multiclass();
  err_printf("train cpm: %s: %llu rows, %llu features, %llu non-zeros%s\n", data.c_str(),
               static_cast<unsigned long long>(manifest.rows),
               static_cast<unsigned long long>(manifest.features),
               static_cast<unsigned long long>(manifest.nnz),
               dataset->converted() ? " (converted from text)" : "");
  err_printf("%s: K %d  C %g  entropy perplexity %g (h = %.4g nats)  cost ratio %g  sides %s  "
               "hash bits %d  scale %s\n",
               multi ? ("one-vs-one over " + std::to_string(manifest.label_counts.size()) +
                        " classes, " + std::to_string(trainer().status().size()) + " sides")
                           .c_str()
                     : "binary",
               config.faces, config.c, config.perplexity, std::log(config.perplexity),
               config.cost_ratio, sides.c_str(), config.hash_bits, scale.c_str());
  err_printf("precision %s: weights + history %s%s%s + 256 MiB of %s available\n",
             config.precision == engine::CpmPrecision::kDouble ? "double" : "float",
             gib(need - scale_bytes - kRunOverheadBytes).c_str(),
             scale_bytes ? " + max |x| table " : "", scale_bytes ? gib(scale_bytes).c_str() : "",
             available ? gib(available).c_str() : "unknown");
  parallel.announce(replicas->sync_bytes(), "pass", events);
  if (report.contains("resumed_from"))
    err_printf("resuming from %s: pass %llu, %llu of its %llu windows done, %llu rows\n",
                 job.resume.c_str(), static_cast<unsigned long long>(position.pass + 1),
                 static_cast<unsigned long long>(position.batches),
                 static_cast<unsigned long long>(windows),
                 static_cast<unsigned long long>(position.rows));
}

void CpmRun::train() {
  const io::ShardSet& shards = dataset->shards();
  engine::CpmReplicas& replicas = *this->replicas;
  io::ReadOptions read = read_options(config.seed, scale == "maxabs", normalize == "l2", parallel);
  // With a side per thread or more, the sides keep every thread busy: a window is then read by all
  // threads (lockstep), its reading started by those whose sides finished the window before first
  // (scan_lending), rather than by one of them ahead of its side.
  read.lockstep = trainer().sides() * static_cast<std::size_t>(parallel.workers) >=
                  static_cast<std::size_t>(threads);
  // The epoch loop is the driver's; what the CPM does with a window, a checkpoint, a stop and the
  // end of a pass is said here. Its position: {pass, windows of it learnt, rows in all passes}.
  JobLearner learner;
  learner.on_learn = [&](const CsrView& window, const io::SpareWork& spare,
                         const driver::Position&) { replicas.learn(window, spare); };
  learner.on_done = [&] { return replicas.done(); };
  // A replicated run saves at averagings only (all replicas then agree), rank 0 alone.
  learner.on_checkpoint = [&](const driver::Position& at, bool pass_end) {
    if (!parallel.leader) return;
    io::write_cpm_checkpoint(job.checkpoint, run_config, run_data,
                             pass_end ? io::CpmPosition{at.pass + 1, 0, at.rows}
                                      : io::CpmPosition{at.pass, at.windows, at.rows},
                             trainer());
  };
  learner.on_sync = [&] { parallel.average(replicas); };
  learner.on_stop = [&](int signal, const driver::Position& at) {
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
  driver::Twentieths logged;
  learner.on_pass_end = [&](const driver::Position& at, double seconds) {
    std::uint64_t steps = 0, total = 0;
    for (const auto& s : replicas.status()) {
      steps += s.steps;
      total += s.iterations;
    }
    const bool due = logged.due(steps, total);
    if (at.pass > 0 && !due) return;
    err_printf("pass %llu: %.2f s, %llu of %llu steps\n",
                 static_cast<unsigned long long>(at.pass + 1), seconds,
                 static_cast<unsigned long long>(steps), static_cast<unsigned long long>(total));
  };
  driver::LoopOptions loop = loop_options(read, parallel, replicas.sync_bytes());
  // The passes the run will make: the most any side needs for its T steps.
  for (const auto& s : replicas.status())
    if (s.rows > 0)
      loop.expected_passes = std::max(loop.expected_passes, (s.iterations + s.rows - 1) / s.rows);
  trained = driver::run_passes(shards, learner, loop,
                               {position.pass, position.batches, 0, position.rows}, job.resume);
}

void CpmRun::save() {
  // Of an MPI job's ranks, rank 0 alone writes the model.
  if (!parallel.leader) return;
  const io::ShardSet& shards = dataset->shards();
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
  if (!tune_record().is_null()) model.config["tune"] = tune_record();
  for (const auto& m : model.machines)
    for (const auto& f : m.sides) outers.push_back(f.outer);
  for (const auto& m : model.machines) machine_labels.emplace_back(m.positive, m.negative);
  machines = model.machines.size();
  // Sides are written in order, each U given back once its last chunk is out: the file's pages
  // then reuse its memory rather than fresh pages, and the validation below finds it free.
  std::vector<std::uint64_t> side_floats;
  for (const auto& m : model.machines)
    for (const auto& f : m.sides) side_floats.push_back(f.slots * std::uint64_t(f.faces));
  io::save_cpm_model(std::move(model), output,
                     [&](std::size_t side, std::uint64_t first, std::span<float> out) {
                       trainer.export_weights(side, first, out);
                       if (first + out.size() == side_floats.at(side))
                         trainer.release_weights(side);
                     });
  save_seconds = seconds_since(save_start);  // the model built, written and synced
  remove_finished_checkpoint(job.checkpoint, events);
  report["model_checksum"] = model_file_checksum(output);
}

int CpmRun::conclude() {
  if (!parallel.leader) return kExitOk;
  const io::Manifest& manifest = dataset->shards().manifest();
  const engine::CpmTrainer& trainer = this->trainer();
  const bool multi = trainer.multiclass();
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
  const double total_seconds = seconds_since(start);

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
      {"open_seconds", open_seconds},
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
  report["reading"] = reading_json(trained);
  if (!tune_record().is_null()) summary["tune"] = report["tune"] = tune_record();
  report["passes"] = passes;
  report["seconds"] = {{"open", open_seconds},     {"allocate", allocate_seconds},
                       {"train", train_seconds},
                       {"learn", learn_seconds},   {"read_wait", wait_seconds},
                       {"save", save_seconds},     {"validation", validation_seconds},
                       {"total", total_seconds}};
  if (!validated) report["seconds"].erase("validation");  // a phase that did not run has no key
  report["checkpoints_written"] = trained.checkpoints_written;
  report["data_parallel"] = parallel.report();
  if (validated) report["validation"] = validated->metrics;
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return kExitOk;
  }
  out_printf("trained cpm (%zu machine%s, %zu sides, K = %d) in %.2f s: %llu steps, %.2f M steps/s "
              "over all sides; open/convert %.2f s\n",
              machines, machines == 1 ? "" : "s", status.size(),
              config.faces, train_seconds, static_cast<unsigned long long>(all_steps),
              static_cast<double>(all_steps) / 1e6 / std::max(train_seconds, 1e-9), open_seconds);
  if (!multi)
    for (const auto& s : side_list)
      out_printf("side outer=%+d: %llu steps, %.2f M steps/s, %llu updates, assignment perplexity "
                  "%.2f, %llu adjusted\n",
                  s["outer"].get<int>(), static_cast<unsigned long long>(s["steps"].get<std::uint64_t>()),
                  s["steps_per_second"].get<double>() / 1e6,
                  static_cast<unsigned long long>(s["updates"].get<std::uint64_t>()),
                  s["assignment_perplexity"].get<double>(),
                  static_cast<unsigned long long>(s["adjusted_assignments"].get<std::uint64_t>()));
  if (validated) {
    const nlohmann::ordered_json& v = validated->metrics;
    out_printf("validation: %llu rows, accuracy %.4f", static_cast<unsigned long long>(v["rows"].get<std::uint64_t>()),
                v["accuracy"].get<double>());
    if (v.contains("auc")) out_printf(", AUC %.4f", v["auc"].get<double>());
    out_printf("\n");
  }
  out_printf("model written to %s\n", output.c_str());
  return kExitOk;
}

int train_cpm(const std::vector<std::string>& args, MetricsFile& metrics) {
  CpmRun run(metrics);
  if (!run.parse(args)) return kHelpShown;
  run.open();
  run.size();
  run.allocate();
  run.announce();
  run.train();
  run.save();
  return run.conclude();
}

int run_cpm(const std::vector<std::string>& args) { return run_train_job(args, train_cpm); }

const TrainAlgorithmRegistration cpm_registration(
    "cpm", "Convex Polytope Machine: K faces, SGD, double-sided, one-vs-one", run_cpm);

}  // namespace
}  // namespace polymargin::cli
