// `polymargin train --algo kldm|tldm|cmm`: the regular-scale learners (hundreds to ~20,000 rows),
// whose cost grows with m² (memory) and m³ (time). The whole training set is loaded into memory
// once (text or shards, unshuffled), scaled into [0, 1] by each feature's max |value| as the
// papers do, and handed to the engine's dense solvers; the model keeps the rows it needs.

#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "cli/tune.h"
#include "engine/cmm.h"
#include "engine/errors.h"
#include "engine/kernel.h"
#include "engine/kernel_model.h"
#include "engine/kldm.h"
#include "engine/ldm.h"
#include "engine/normalize.h"
#include "engine/tldm.h"
#include "io/file_lock.h"
#include "io/kernel_model_file.h"
#include "io/memory.h"
#include "io/shards.h"

namespace polymargin::cli {
namespace {

// The training rows in memory: scaled, with ±1 labels (0: unlabelled, CMM only).
struct TrainingSet {
  engine::RowSet x;
  Eigen::VectorXd y;
  engine::LabelMap labels;
  std::vector<float> maxabs;  // empty when --scale none
  std::uint64_t features = 0, nnz = 0;
  std::uint32_t max_index = 0;
  int index_base = 1;
  std::uint64_t unlabelled = 0;
  double open_seconds = 0;
  std::string data_checksum, unlabelled_checksum;  // hex64 of the block indices (--metrics-json)
  ValidationData validation;                       // --validation, opened before the training
};

// Options every kernel learner shares.
struct CommonOptions {
  std::vector<std::string> inputs, validation;
  std::string output, scale = "maxabs", normalize = "none", kernel = "rbf", max_memory_text,
                      metrics_path, data_name, index_base = "auto";
  double rbf_width = 1, gamma = 0, coef0 = 0, bias = 0;
  int degree = 3, threads = 0;
  std::uint64_t seed = 1;
  bool json = false;
};

void add_common_options(po::options_description& opts, CommonOptions& o, const std::string& kernels,
                        double default_bias, double default_width, bool poly,
                        bool bias_applies = true) {
  opts.add_options()("data,d", po::value(&o.inputs)->multitoken(),
                     "training data: LIBSVM text (plain, gzip, bzip2, zstd; several files) or a "
                     "shard directory; held in memory (regular-scale data)")(
      "output,o", po::value(&o.output)->required(), "model file to write")(
      "kernel", po::value(&o.kernel)->default_value("rbf"), kernels.c_str())(
      "rbf-width", po::value(&o.rbf_width)->default_value(default_width),
      "RBF width σ as a multiple of δ, the mean distance between training rows (the LDM paper's "
      "grid: 0.25, 0.5, 1, 2, 4); k = exp(−‖u−v‖²/(2σ²))")(
      "gamma", po::value(&o.gamma)->default_value(0),
      poly ? "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width; poly: γ of (γu·v + "
             "c0)^degree (0: 1)"
           : "RBF: γ of exp(−γ‖u−v‖²) directly, instead of --rbf-width");
  if (poly)
    opts.add_options()("degree", po::value(&o.degree)->default_value(3), "poly: degree")(
        "coef0", po::value(&o.coef0)->default_value(0), "poly: c0");
  opts.add_options()(
      "bias", po::value(&o.bias)->default_value(default_bias),
      bias_applies
          ? "value B of a constant (regularised) bias feature: adds B² to the kernel; 0: none"
          : "not for this learner, which has intercepts of its own (only 0)")(
      "scale", po::value(&o.scale)->default_value("maxabs"),
      "maxabs: divide each feature by its max |value| (the papers' [0,1] protocol) | none")(
      "normalize", po::value(&o.normalize)->default_value("none"),
      "l2: divide each row by its Euclidean norm after --scale (the model does it when it scores) "
      "| none")(
      "max-memory", po::value(&o.max_memory_text)->default_value("auto"),
      "refuse to train when the m² matrices would need more than this many bytes (suffixes K, "
      "M, G; auto: half of the RAM, or less in a memory cgroup: what it leaves)")(
      "seed", po::value(&o.seed)->default_value(1), "seed of the coordinate order and δ's sample")(
      "threads", po::value(&o.threads)->default_value(0),
      "threads for the kernel matrix and the factorisation (0: all cores); the model does not "
      "depend on it")("json", po::bool_switch(&o.json), "print the summary as JSON on stdout")(
      "validation", po::value(&o.validation)->multitoken(),
      "holdout data scored with the written model: accuracy and AUC in the summary and in "
      "--metrics-json")("metrics-json", po::value(&o.metrics_path),
                        "write one JSON object of the run (data checksums, phase times, "
                        "objective, training and validation accuracy/AUC, model checksum, exit "
                        "status) to this file, whatever the outcome")(
      "data-name", po::value(&o.data_name), data_name_help())(
      "index-base", po::value(&o.index_base)->default_value("auto"), index_base_help());
}

// A size in the unit that reads best: 512 B, 30.3 KiB, 1.15 GiB.
std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  // From 999.5 on, three digits would print as 1e+03: the next unit (0.977 MiB).
  for (; u < 5 && bytes >= 999.5; ++u) bytes /= 1024;
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return text;
}

// MemoryError (exit 7) when `bytes` exceed --max-memory's `limit`, saying what needs how much and
// what to change; called before anything of that size is allocated.
void check_max_memory(
    double bytes, double limit, const std::string& what,
    const std::string& remedy = "use fewer training rows (memory grows with m²)") {
  if (bytes <= limit) return;
  throw MemoryError("train: " + what + " needs about " + bytes_text(bytes) +
                    ", more than --max-memory " + bytes_text(limit) + "; " + remedy +
                    " or raise --max-memory");
}

double parse_bytes(const std::string& text) {
  if (text == "auto") {  // half the RAM, or what a memory cgroup leaves beyond a run's floor
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    double limit =
        pages > 0 && page > 0 ? 0.5 * static_cast<double>(pages) * page : 4.0 * (1ull << 30);
    if (const std::optional<HardLimit> hard = hard_memory_limit())  // a cgroup, ulimit -v
      limit = std::min(limit, static_cast<double>(hard_limit_arrays_room(hard->room)));
    return limit;
  }
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  double unit = 1;
  if (used + 1 == text.size()) {
    switch (text[used]) {
      case 'k': case 'K': unit = 1024.0; break;
      case 'm': case 'M': unit = 1024.0 * 1024; break;
      case 'g': case 'G': unit = 1024.0 * 1024 * 1024; break;
      case 't': case 'T': unit = 1024.0 * 1024 * 1024 * 1024; break;
      default: unit = 0;
    }
    ++used;
  }
  if (used != text.size() || !(value > 0) || !(unit > 0) || !std::isfinite(value))
    throw UsageError("train: --max-memory must be 'auto' or a positive size such as 512M or 4G "
                     "(got '" + text + "')");
  return value * unit;
}

// An option given that changes nothing is named in a warning: the model is the one trained
// without it.
void warn_unused(const po::variables_map& vm, const char* name, const char* why) {
  if (vm.count(name) > 0 && !vm[name].defaulted())
    err_printf("warning: --%s has no effect %s (ignored)\n", name, why);
}

// The common options checked before the data are read; a kernel option given that the chosen
// kernel does not use is named in a warning.
void check_common(const CommonOptions& o, const po::variables_map& vm) {
  if (o.inputs.empty()) throw UsageError("train: no training data given (-d TRAIN)");
  check_scaling(o.scale, o.normalize);
  if (!(o.rbf_width > 0) || !std::isfinite(o.rbf_width))
    throw UsageError("train: --rbf-width must be > 0 (got " + number(o.rbf_width) + ")");
  if (!(o.gamma >= 0) || !std::isfinite(o.gamma))
    throw UsageError("train: --gamma must be ≥ 0 (got " + number(o.gamma) + ")");
  const engine::KernelType type = engine::parse_kernel(o.kernel);
  if (type == engine::KernelType::kPolynomial && (o.degree < 1 || o.degree > 20))
    throw UsageError("train: --degree must be in 1..20 (got " + std::to_string(o.degree) + ")");
  if (!std::isfinite(o.coef0))
    throw UsageError("train: --coef0 must be finite (got " + number(o.coef0) + ")");
  auto unused = [&](const char* name, const char* why) { warn_unused(vm, name, why); };
  if (type == engine::KernelType::kLinear)
    for (const char* name : {"rbf-width", "gamma", "degree", "coef0"})
      unused(name, "with --kernel linear");
  if (type == engine::KernelType::kRbf) {
    for (const char* name : {"degree", "coef0"}) unused(name, "with --kernel rbf");
    if (o.gamma > 0) unused("rbf-width", "beside --gamma, which sets the RBF width itself");
  }
  if (type == engine::KernelType::kPolynomial) unused("rbf-width", "with --kernel poly");
}

// Loads every row (unshuffled, in file order) and scales it as the reader's --scale maxabs does.
// Labels: the two values of a binary set become ±1; with `allow_unlabelled`, rows labelled 0 are
// unlabelled (y = 0) and the other two values the classes.
TrainingSet load_training_set(const CommonOptions& o, bool allow_unlabelled,
                              const std::vector<std::string>& unlabelled_inputs) {
  const Clock::time_point start = Clock::now();
  TrainingSet t;
  const int threads = resolve_threads(o.threads);
  io::ConvertOptions convert;
  convert.text.threads = threads;
  const std::string data = o.data_name.empty() ? data_name(o.inputs) : o.data_name;
  const io::Dataset dataset = open_training_data(o.inputs, convert, o.index_base, threads, data);
  const io::Manifest& manifest = dataset.shards().manifest();
  if (manifest.rows == 0) throw DataError(data, 0, 0, "no training rows");
  std::optional<io::Dataset> extra;
  if (!unlabelled_inputs.empty()) {
    convert.text.index_base = manifest.index_base == 0 ? io::IndexBase::kZero : io::IndexBase::kOne;
    extra.emplace(io::Dataset::open(unlabelled_inputs, convert, threads));
  }
  const std::uint64_t rows = manifest.rows + (extra ? extra->shards().manifest().rows : 0);

  // Labels.
  io::Manifest labelled = manifest;
  if (allow_unlabelled) labelled.label_counts.erase(0.0);
  if (allow_unlabelled && labelled.label_counts.size() < 2)
    throw DataError(data, 0, 0,
                    "labels are not binary: cmm needs two class labels besides 0 (unlabelled)");
  t.labels = binary_labels(labelled, data);
  if (allow_unlabelled && manifest.label_counts.count(0.0))
    t.unlabelled = manifest.label_counts.at(0.0);

  // Scaling: the max |value| over every training row, labelled or not.
  t.max_index = manifest.max_index;
  if (extra) t.max_index = std::max(t.max_index, extra->shards().manifest().max_index);
  // The rows are held as one in-memory set, its positions 32-bit.
  const std::uint64_t nnz = manifest.nnz + (extra ? extra->shards().manifest().nnz : 0);
  if (nnz > std::numeric_limits<std::uint32_t>::max())
    throw MemoryError(data + ": " + std::to_string(nnz) +
                      " non-zeros; the kernel learners hold the rows in memory, at most "
                      "4294967295 non-zeros (ldm, svm and cpm stream them)");
  // A slot per feature id up to the largest, before any exists: the scaling tables (floats: the
  // shards', the merged one, the model's) and a dense row of doubles per thread; and the rows
  // (an id and a value a non-zero, an offset and a label a row).
  const double per_feature = (o.scale == "maxabs" ? 12.0 : 0.0) + 8.0 * threads;
  const double feature_bytes = per_feature * (t.max_index + 1.0),
               row_bytes = 8.0 * static_cast<double>(nnz) + 16.0 * static_cast<double>(rows);
  check_max_memory(feature_bytes + row_bytes, parse_bytes(o.max_memory_text),
                   "the rows and feature ids up to " + std::to_string(t.max_index) + " (" +
                       number(per_feature) + " bytes each: scaling, a dense row per thread)",
                   feature_bytes > row_bytes
                       ? "renumber the features densely (the dense rows are indexed by feature id)"
                       : "use fewer training rows");
  if (o.scale == "maxabs") {
    t.maxabs.assign(std::size_t{t.max_index} + 1, 0.0f);
    const std::vector<float>& m0 = dataset.shards().feature_maxabs();
    std::copy(m0.begin(), m0.end(), t.maxabs.begin());
    if (extra)
      for (std::size_t f = 0; f < extra->shards().feature_maxabs().size(); ++f)
        t.maxabs[f] = std::max(t.maxabs[f], extra->shards().feature_maxabs()[f]);
  }
  io::ReadOptions read;
  read.shuffle = false;
  read.threads = threads;
  CsrBuffer& buffer = t.x.rows;
  std::vector<double> y;
  y.reserve(rows);
  auto append = [&](const CsrView& batch, bool unlabelled) {
    for (std::size_t r = 0; r < batch.rows; ++r) {
      buffer.append_row(batch, r);
      const float label = batch.labels[r];
      y.push_back(unlabelled || (allow_unlabelled && label == 0.0f) ? 0.0 : t.labels.sign(label));
    }
  };
  dataset.shards().scan(read, [&](const CsrView& batch) { append(batch, false); });
  if (extra) {
    extra->shards().scan(read, [&](const CsrView& batch) { append(batch, true); });
    t.unlabelled += extra->shards().manifest().rows;
  }
  buffer.ensure_values();
  if (!t.maxabs.empty())  // v / max|v| in float, exactly as the reader and the model do it
    for (std::size_t k = 0; k < buffer.indices.size(); ++k) {
      const float m = t.maxabs[buffer.indices[k]];
      if (m > 0) buffer.values[k] /= m;
    }
  if (o.normalize == "l2") engine::normalize_rows_l2(buffer);
  t.x.finish();
  t.x.max_index = t.max_index;
  t.y = Eigen::Map<const Eigen::VectorXd>(y.data(), static_cast<Eigen::Index>(y.size()));
  t.features = std::max(manifest.features, extra ? extra->shards().manifest().features : 0);
  t.nnz = buffer.indices.size();
  t.index_base = manifest.index_base;
  t.validation = open_validation(o.validation, labelled, threads, allow_unlabelled);
  t.data_checksum = hex64(io::data_checksum(manifest));
  if (extra) t.unlabelled_checksum = hex64(io::data_checksum(extra->shards().manifest()));
  t.open_seconds = seconds_since(start);
  err_printf("train: %s: %llu rows (%llu unlabelled), %llu features, %llu non-zeros%s\n",
               data.c_str(), static_cast<unsigned long long>(rows),
               static_cast<unsigned long long>(t.unlabelled),
               static_cast<unsigned long long>(t.features), static_cast<unsigned long long>(t.nnz),
               dataset.converted() ? " (converted from text)" : "");
  return t;
}

// The kernel with RBF width resolved against δ (measured on the training rows).
struct ResolvedKernel {
  engine::KernelSpec spec;
  double mean_distance = 0;  // δ; 0 when not needed
};

ResolvedKernel resolve_kernel(const CommonOptions& o, const engine::RowSet& x) {
  ResolvedKernel r;
  r.spec.type = engine::parse_kernel(o.kernel);
  r.spec.bias = o.bias;
  r.spec.degree = o.degree;
  r.spec.coef0 = o.coef0;
  if (r.spec.type == engine::KernelType::kRbf) {
    if (o.gamma > 0) {
      r.spec.gamma = o.gamma;
    } else {
      r.mean_distance = engine::mean_pairwise_distance(x, o.seed);
      if (!(r.mean_distance > 0))
        throw DataError(data_name(o.inputs), 0, 0,
                        "all training rows are identical: δ = 0, no RBF width can be derived "
                        "(give --gamma)");
      r.spec.gamma = engine::rbf_gamma_for_width(o.rbf_width * r.mean_distance);
      if (!(r.spec.gamma > 0 && std::isfinite(r.spec.gamma)))
        throw UsageError("train: --rbf-width " + number(o.rbf_width) +
                         " gives σ = " + number(o.rbf_width * r.mean_distance) +
                         " (δ = " + number(r.mean_distance) + "), whose γ = 1/(2σ²) = " +
                         number(r.spec.gamma) + " is not a positive finite number");
    }
  } else if (r.spec.type == engine::KernelType::kPolynomial) {
    r.spec.gamma = o.gamma > 0 ? o.gamma : 1.0;
  }
  check_config(r.spec);
  return r;
}

// Everything a kernel model shares, from the training set and the options.
void describe_model(engine::KernelModel& model, const std::string& algo, const TrainingSet& t,
                    const CommonOptions& o, const ResolvedKernel& k) {
  model.algorithm = algo;
  model.labels = t.labels;
  model.index_base = t.index_base;
  model.max_index = t.max_index;
  model.features = t.features;
  model.kernel = k.spec;
  model.maxabs = t.maxabs;
  model.normalize_l2 = o.normalize == "l2";
  if (model.normalize_l2) model.config["normalize"] = o.normalize;
  model.config["kernel"] = k.spec.json();
  if (k.mean_distance > 0) {
    model.config["rbf_width"] = o.rbf_width;
    model.config["mean_distance"] = k.mean_distance;
  }
  model.config["scale"] = o.scale;
  model.config["seed"] = o.seed;
  if (!tune_record().is_null()) model.config["tune"] = tune_record();
  model.config["rows"] = t.y.size();
  model.config["data"] = data_record(o.inputs, o.data_name);
  model.config["label_map"] = {{"negative", t.labels.negative}, {"positive", t.labels.positive}};
}

// Margin statistics and accuracy of a model's scores on labelled training rows.
engine::MarginStats training_margins(const Eigen::VectorXd& scores, const Eigen::VectorXd& y) {
  engine::MarginStats s;
  for (Eigen::Index i = 0; i < y.size(); ++i)
    if (y(i) != 0) s.add(y(i), scores(i));
  return s;
}

nlohmann::ordered_json common_summary(const std::string& algo, const TrainingSet& t,
                                      const CommonOptions& o, const ResolvedKernel& k) {
  nlohmann::ordered_json j = {{"algorithm", algo},
                              {"rows", t.y.size()},
                              {"features", t.features},
                              {"nnz", t.nnz},
                              {"kernel", engine::kernel_name(k.spec.type)}};
  if (k.spec.type != engine::KernelType::kLinear) j["gamma"] = k.spec.gamma;
  j["bias"] = k.spec.bias;
  j["scale"] = o.scale;
  j["normalize"] = o.normalize;
  j["seed"] = o.seed;
  if (k.mean_distance > 0) {
    j["rbf_width"] = o.rbf_width;
    j["mean_distance"] = k.mean_distance;
  }
  if (k.spec.type == engine::KernelType::kPolynomial) {
    j["degree"] = k.spec.degree;
    j["coef0"] = k.spec.coef0;
  }
  j["label_map"] = {{"negative", t.labels.negative}, {"positive", t.labels.positive}};
  return j;
}

// --metrics-json: what the run is, recorded before any work (so a failed run says it too).
void start_report(MetricsFile& metrics, const std::string& algo, const CommonOptions& o) {
  nlohmann::ordered_json& report = metrics.json();
  report["command"] = "train";
  report["algorithm"] = algo;
  report["data"] = data_record(o.inputs, o.data_name);
  report["model_path"] = o.output;
}

// What a kernel learner's run holds from its checked options to its end: the paths checked, the
// model's lock (a second job on this model stops here), the thread limit, the start time, the
// memory limit; the report started.
struct KernelJob {
  KernelJob(const po::variables_map& vm, const CommonOptions& o, MetricsFile& metrics,
            const std::string& algo)
      : max_memory(parse_bytes(o.max_memory_text)),
        locks((check_train_paths(vm), o.output), "", o.metrics_path),
        threads(tbb::global_control::max_allowed_parallelism,
                static_cast<std::size_t>(resolve_threads(o.threads))),
        start(Clock::now()) {
    start_report(metrics, algo, o);
  }
  /// For the solvers: a signal received since the job began (they then throw engine::Stopped).
  static bool stop_requested() { return StopSignals::received() != 0; }

  double max_memory;
  JobLocks locks;
  tbb::global_control threads;
  Clock::time_point start;
  StopSignals signals;  // SIGTERM, SIGINT, SIGHUP: the solver stops at its next sweep
};

// --metrics-json: the training data, once loaded.
void record_data(MetricsFile& metrics, const TrainingSet& t) {
  nlohmann::ordered_json& report = metrics.json();
  report["data_checksum"] = t.data_checksum;
  if (!t.unlabelled_checksum.empty()) report["unlabeled_data_checksum"] = t.unlabelled_checksum;
  report["rows"] = t.y.size();
  report["unlabelled_rows"] = t.unlabelled;
  report["features"] = t.features;
  report["nnz"] = t.nnz;
}

// Phase times of a regular-scale run, seconds.
struct Phases {
  double open = 0, gram = 0, setup = 0, solve = 0;
};

// The tail every regular-scale learner shares: the model is written (atomically), --validation
// is scored with it, and the run is reported: the summary (text or JSON on stdout) with the
// training accuracy and margins of `scores` (the model's decision values on the training rows;
// unlabelled rows, y = 0, left out), and the --metrics-json record.
void save_and_report(const engine::KernelModel& model, nlohmann::ordered_json& summary,
                     const Eigen::VectorXd& scores, const Eigen::VectorXd& y, const Phases& phases,
                     Clock::time_point start, const CommonOptions& o,
                     const ValidationData& validation, MetricsFile& metrics) {
  check_trained_model(summary["objective"].get<double>(), training_margins(scores, y),
                      "a setting is far beyond the data's scale (C, the λs, the kernel's width)");
  Clock::time_point phase = Clock::now();
  io::save_kernel_model(model, o.output);
  const double save_seconds = seconds_since(phase);
  nlohmann::ordered_json& report = metrics.json();
  report["config"] = model.config;
  report["model_checksum"] = model_file_checksum(o.output);

  phase = Clock::now();
  std::optional<Validation> validated;
  if (validation.data) {
    validated = validate(model, validation, resolve_threads(o.threads));
    report["validation_data"] = o.validation;
    report["validation_data_checksum"] = validated->data_checksum;
  }
  const double validation_seconds = seconds_since(phase);

  const engine::MarginStats margins = training_margins(scores, y);
  std::vector<double> train_scores;
  std::vector<std::int8_t> train_signs;
  for (Eigen::Index i = 0; i < y.size(); ++i)
    if (y(i) != 0) {
      train_scores.push_back(scores(i));
      train_signs.push_back(static_cast<std::int8_t>(y(i)));
    }
  summary["margin_mean"] = margins.mean();
  summary["margin_variance"] = margins.variance();
  summary["train_accuracy"] = margins.accuracy();
  if (validated) summary["validation"] = validated->metrics;
  if (!tune_record().is_null()) summary["tune"] = report["tune"] = tune_record();
  summary["open_seconds"] = phases.open;
  summary["gram_seconds"] = phases.gram;
  summary["setup_seconds"] = phases.setup;
  summary["solve_seconds"] = phases.solve;
  summary["save_seconds"] = save_seconds;
  if (validated) summary["validation_seconds"] = validation_seconds;
  summary["total_seconds"] = seconds_since(start);
  summary["model_path"] = o.output;

  report["seconds"] = {{"open", phases.open},   {"gram", phases.gram},
                       {"setup", phases.setup}, {"solve", phases.solve},
                       {"save", save_seconds},  {"validation", validation_seconds},
                       {"total", summary["total_seconds"]}};
  if (!validated) report["seconds"].erase("validation");  // a phase that did not run has no key
  report["objective"] = summary["objective"];
  report["converged"] = summary["converged"];
  report["train"] = metrics_json(engine::binary_metrics(train_scores, train_signs));
  if (validated) report["validation"] = validated->metrics;

  if (o.json) {
    std::cout << summary.dump(2) << "\n";
    return;
  }
  out_printf("trained %s on %s rows in %.2f s (load %.2f s, kernel matrix %.2f s, set-up %.2f s, "
              "solve %.2f s, save %.2f s)\n",
              summary["algorithm"].get<std::string>().c_str(), summary["rows"].dump().c_str(),
              summary["total_seconds"].get<double>(), phases.open, phases.gram, phases.setup,
              phases.solve, save_seconds);
  out_printf("objective %.6g, margin mean %.4g, margin variance %.4g, training accuracy %.4f\n",
              summary["objective"].get<double>(), margins.mean(), margins.variance(),
              margins.accuracy());
  if (validated)
    out_printf("validation: %s rows, accuracy %.4f, AUC %.4f\n",
                validated->metrics["rows"].dump().c_str(),
                validated->metrics["accuracy"].get<double>(), validated->metrics["auc"].get<double>());
  out_printf("model written to %s\n", o.output.c_str());
}

// ---------------------------------------------------------------------------------------------
// Kernel LDM.

int train_kldm(const std::vector<std::string>& args, MetricsFile& metrics) {
  CommonOptions o;
  engine::KldmConfig config;
  std::string algo;
  bool no_shrinking = false;
  po::options_description opts("train --algo kldm options");
  opts.add_options()("algo", po::value(&algo)->default_value("kldm"), "kldm");
  add_common_options(opts, o, "linear | rbf | poly", 0, 1, /*poly=*/true);
  opts.add_options()(
      "lambda1", po::value<double>(),
      "weight of the margin variance (paper units, eq. 8); default 1e-4·m·C")(
      "lambda2", po::value<double>(), "weight of the margin mean (paper units); default 3e-3·m·C")(
      "lambda1-rel", po::value<double>(), "λ1/(m·C) instead of --lambda1 (scale-free)")(
      "lambda2-rel", po::value<double>(), "λ2/(m·C) instead of --lambda2 (scale-free)")(
      "cost,c", po::value(&config.c)->default_value(engine::kDefaultC),
      "C, weight of the hinge loss (the dual box [0, C])")(
      "tolerance", po::value(&config.tolerance)->default_value(0.01),
      "stop when the spread of the projected gradient is at most this (LDM-ref: 0.01)")(
      "max-sweeps", po::value(&config.max_sweeps)->default_value(1000),
      "at most this many passes of coordinate descent")(
      "no-shrinking", po::bool_switch(&no_shrinking), "visit every coordinate in every sweep");
  po::positional_options_description positional;
  positional.add("data", -1);
  po::variables_map vm;
  if (!parse_options("train", "--algo kldm -d TRAIN -o MODEL [options]", opts, positional, args, vm))
    return kHelpShown;
  check_common(o, vm);
  config.shrinking = !no_shrinking;
  config.seed = o.seed;
  check_lambda_option(vm, "lambda1");
  check_lambda_option(vm, "lambda2");
  check_config(config, {{"c", "--cost"}});  // C first: the λs below are computed from it
  const KernelJob job(vm, o, metrics, algo);
  config.stop = KernelJob::stop_requested;

  TrainingSet t = load_training_set(o, false, {});
  record_data(metrics, t);
  const double m = static_cast<double>(t.y.size());
  // Before anything of size m² exists: will it fit?
  check_max_memory(engine::kldm_peak_bytes(t.y.size()), job.max_memory,
                   "kernel LDM on " + std::to_string(t.y.size()) +
                       " rows (G, the Cholesky factor and A: three m × m matrices of doubles)");
  config.lambda1 =
      lambda_option(vm, "lambda1", m, config.c).value_or(engine::kDefaultLambda1Rel * m * config.c);
  config.lambda2 =
      lambda_option(vm, "lambda2", m, config.c).value_or(engine::kDefaultLambda2Rel * m * config.c);
  check_config(config, {{"c", "--cost"}});
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  err_printf("kernel %s (gamma %g%s)  lambda1 %g  lambda2 %g  C %g  tolerance %g\n",
               engine::kernel_name(kernel.spec.type).c_str(), kernel.spec.gamma,
               kernel.mean_distance > 0
                   ? (", width " + number(o.rbf_width) + "·δ, δ = " + number(kernel.mean_distance))
                         .c_str()
                   : "",
               config.lambda1, config.lambda2, config.c, config.tolerance);

  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd g = engine::gram_matrix(t.x, kernel.spec);
  const double gram_seconds = seconds_since(phase);
  engine::poll(config.stop);
  phase = Clock::now();
  const engine::LdmDualOperator op = engine::ldm_dual_operator(g, t.y, config.lambda1);
  const double setup_seconds = seconds_since(phase);
  phase = Clock::now();
  const engine::KldmResult result = engine::solve_kldm(g, t.y, config, op);
  const double solve_seconds = seconds_since(phase);
  if (!result.converged)
    err_printf("warning: not converged after %d sweeps (gap %g > tolerance %g)\n",
                 result.sweeps, result.pg_gap, config.tolerance);

  engine::KernelModel model;
  describe_model(model, "kldm", t, o, kernel);
  model.config["lambda1"] = config.lambda1;
  model.config["lambda2"] = config.lambda2;
  model.config["c"] = config.c;
  model.config["tolerance"] = config.tolerance;
  model.config["max_sweeps"] = config.max_sweeps;
  model.config["shrinking"] = config.shrinking;
  model.vectors = std::move(t.x);  // α is dense: every training row is a support vector
  model.coefficients = {std::vector<double>(result.alpha.data(),
                                            result.alpha.data() + result.alpha.size())};
  model.intercepts = {0.0};

  nlohmann::ordered_json summary = common_summary("kldm", t, o, kernel);
  summary["lambda1"] = config.lambda1;
  summary["lambda2"] = config.lambda2;
  summary["c"] = config.c;
  summary["tolerance"] = config.tolerance;
  summary["sweeps"] = result.sweeps;
  summary["converged"] = result.converged;
  summary["pg_gap"] = result.pg_gap;
  summary["free_vectors"] = result.free_vectors;
  summary["bound_vectors"] = result.bound_vectors;
  summary["support_vectors"] = model.vectors.size();
  summary["objective"] = result.primal_objective;
  summary["dual_objective"] = result.dual_objective;
  summary["memory_bytes"] = static_cast<std::uint64_t>(engine::kldm_peak_bytes(t.y.size()));
  save_and_report(model, summary, result.scores, t.y,
                  {t.open_seconds, gram_seconds, setup_seconds, solve_seconds}, job.start, o,
                  t.validation, metrics);
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// Twin LDM.

// The basis of the planes: the scaled rows as dense columns (linear, q features) or the kernel
// matrix (rbf).
Eigen::MatrixXd tldm_basis(const TrainingSet& t, bool linear, std::uint64_t q,
                           const ResolvedKernel& kernel) {
  if (!linear) return engine::gram_matrix(t.x, kernel.spec);
  Eigen::MatrixXd basis =
      Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(t.y.size()), static_cast<Eigen::Index>(q));
  const CsrView v = t.x.rows.view();
  for (std::size_t i = 0; i < v.rows; ++i)
    for (std::uint32_t k = v.offsets[i]; k < v.offsets[i + 1]; ++k)
      basis(static_cast<Eigen::Index>(i), v.indices[k]) = v.value(k);
  return basis;
}

// A linear Twin LDM's planes in feature space, as the model's vectors: unit rows e_f with the
// coefficients w_f of each plane (exact doubles), for every feature either plane weighs.
void set_feature_planes(engine::KernelModel& model, const engine::TldmResult& result,
                        std::uint64_t q, std::uint32_t max_index) {
  engine::RowSet units;
  units.rows.has_values = true;
  model.coefficients.assign(2, {});
  for (std::uint64_t f = 0; f < q; ++f) {
    const auto fi = static_cast<Eigen::Index>(f);
    if (result.plane[0].w(fi) == 0 && result.plane[1].w(fi) == 0) continue;
    units.rows.labels.push_back(0);
    units.rows.indices.push_back(static_cast<std::uint32_t>(f));
    units.rows.values.push_back(1.0f);
    units.rows.offsets.push_back(static_cast<std::uint32_t>(units.rows.indices.size()));
    for (int k = 0; k < 2; ++k) model.coefficients[k].push_back(result.plane[k].w(fi));
  }
  units.finish();
  units.max_index = max_index;
  model.vectors = std::move(units);
}

int train_tldm(const std::vector<std::string>& args, MetricsFile& metrics) {
  CommonOptions o;
  engine::TldmConfig config;
  std::string algo;
  po::options_description opts("train --algo tldm options");
  opts.add_options()("algo", po::value(&algo)->default_value("tldm"), "tldm");
  // The defaults: width 4·δ and C = 1/8, the setting within 2 points of the best on the most of
  // 19 UCI sets (docs/accuracy.md, "The Twin LDM's defaults").
  add_common_options(opts, o, "linear (planes in feature space, eqs. 9-12) | rbf (eqs. 13-16)", 0,
                     4, /*poly=*/false, /*bias_applies=*/false);
  opts.add_options()("cost,c", po::value(&config.c)->default_value(0.125),
                     "c1 = c2, weight of the slacks (the paper's grid: 2^-8 … 2^8)")(
      "lambda1", po::value(&config.lambda1)->default_value(1),
      "λ1 = λ3, weight of the margin variance (paper's grid: 2^-8 … 2^8)")(
      "lambda2", po::value(&config.lambda2)->default_value(1),
      "λ2 = λ4, weight of the margin mean (paper's grid: 2^-8 … 2^8)")(
      "epsilon", po::value(&config.epsilon)->default_value(1e-6, "1e-06"),
      "ε of the ε·I that keeps P and S invertible (TWSVM: 1e-6)")(
      "sor-omega", po::value(&config.omega)->default_value(1.0),
      "relaxation factor of the SOR solver, in (0, 2)")(
      "tolerance", po::value(&config.tolerance)->default_value(1e-4),
      "stop when every projected gradient of the dual is at most this")(
      "max-sweeps", po::value(&config.max_sweeps)->default_value(5000),
      "at most this many SOR sweeps");
  po::positional_options_description positional;
  positional.add("data", -1);
  po::variables_map vm;
  if (!parse_options("train", "--algo tldm -d TRAIN -o MODEL [options]", opts, positional, args, vm))
    return kHelpShown;
  check_common(o, vm);
  if (engine::parse_kernel(o.kernel) == engine::KernelType::kPolynomial)
    throw UsageError("train: --algo tldm takes --kernel linear or rbf (got 'poly')");
  if (o.bias != 0)
    throw UsageError("train: --algo tldm has its own intercepts b1, b2; --bias does not apply");
  check_config(config, {{"c", "--cost"}, {"omega", "--sor-omega"}});
  const KernelJob job(vm, o, metrics, algo);
  config.stop = KernelJob::stop_requested;

  TrainingSet t = load_training_set(o, false, {});
  record_data(metrics, t);
  const auto l = static_cast<std::uint64_t>(t.y.size());
  const bool linear = engine::parse_kernel(o.kernel) == engine::KernelType::kLinear;
  const std::uint64_t q = linear ? std::uint64_t{t.max_index} + 1 : l;
  check_max_memory(engine::tldm_peak_bytes(l, q) + (linear ? 0.0 : engine::square_matrix_bytes(l)),
                   job.max_memory,
                   "Twin LDM on " + std::to_string(l) + " rows and " + std::to_string(q) +
                       " basis columns (its (q+1)² matrices P, S and the duals' Hessians)");
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  err_printf("kernel %s%s  c %g  lambda1 %g  lambda2 %g  epsilon %g  omega %g\n",
               engine::kernel_name(kernel.spec.type).c_str(),
               linear ? "" : (" (gamma " + number(kernel.spec.gamma) + ")").c_str(), config.c,
               config.lambda1, config.lambda2, config.epsilon, config.omega);

  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd basis = tldm_basis(t, linear, q, kernel);
  const double gram_seconds = seconds_since(phase);
  engine::poll(config.stop);
  phase = Clock::now();
  const engine::TldmResult result = engine::solve_tldm(basis, t.y, config);
  const double solve_seconds = seconds_since(phase);
  for (int k = 0; k < 2; ++k)
    if (!result.plane[k].solver.converged)
      err_printf("warning: plane %d not converged after %d sweeps (violation %g)\n",
                   k + 1, result.plane[k].solver.sweeps, result.plane[k].solver.max_violation);

  engine::KernelModel model;
  describe_model(model, "tldm", t, o, kernel);
  model.config["c"] = config.c;
  model.config["lambda1"] = config.lambda1;
  model.config["lambda2"] = config.lambda2;
  model.config["epsilon"] = config.epsilon;
  model.config["sor_omega"] = config.omega;
  model.config["tolerance"] = config.tolerance;
  model.decision = engine::KernelModel::Decision::kNearerPlane;
  Eigen::VectorXd training_f[2];
  for (int k = 0; k < 2; ++k) {
    const engine::TldmPlane& plane = result.plane[k];
    const double norm2 = linear ? plane.w.squaredNorm() : plane.w.dot(basis * plane.w);
    if (!(norm2 > 0))
      throw NumericalError("Twin LDM: plane " + std::to_string(k + 1) +
                           " has zero weights (no direction to measure distances along)");
    model.plane_norms.push_back(std::sqrt(norm2));
    model.intercepts.push_back(plane.b);
    training_f[k] = (basis * plane.w).array() + plane.b;
  }
  if (linear) {
    set_feature_planes(model, result, q, t.max_index);
  } else {
    for (int k = 0; k < 2; ++k)
      model.coefficients.emplace_back(result.plane[k].w.data(),
                                      result.plane[k].w.data() + result.plane[k].w.size());
    model.vectors = std::move(t.x);
  }

  const Eigen::VectorXd scores = training_f[1].cwiseAbs() / model.plane_norms[1] -
                                 training_f[0].cwiseAbs() / model.plane_norms[0];
  nlohmann::ordered_json summary = common_summary("tldm", t, o, kernel);
  summary["c"] = config.c;
  summary["lambda1"] = config.lambda1;
  summary["lambda2"] = config.lambda2;
  summary["epsilon"] = config.epsilon;
  summary["sor_omega"] = config.omega;
  summary["tolerance"] = config.tolerance;
  summary["sweeps"] = {result.plane[0].solver.sweeps, result.plane[1].solver.sweeps};
  summary["converged"] = result.plane[0].solver.converged && result.plane[1].solver.converged;
  summary["plane_norms"] = model.plane_norms;
  summary["intercepts"] = model.intercepts;
  summary["support_vectors"] = model.vectors.size();
  const double objectives[2] = {
      engine::tldm_primal_objective(basis, t.y, result.plane[0].w, result.plane[0].b, 0, config),
      engine::tldm_primal_objective(basis, t.y, result.plane[1].w, result.plane[1].b, 1, config)};
  summary["plane_objectives"] = {objectives[0], objectives[1]};
  summary["objective"] = objectives[0] + objectives[1];
  summary["memory_bytes"] = static_cast<std::uint64_t>(engine::tldm_peak_bytes(l, q));
  save_and_report(model, summary, scores, t.y, {t.open_seconds, gram_seconds, 0.0, solve_seconds},
                  job.start, o, t.validation, metrics);
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// Compact Margin Machine.

int train_cmm(const std::vector<std::string>& args, MetricsFile& metrics) {
  CommonOptions o;
  engine::CmmConfig config;
  std::string algo, variant;
  std::vector<std::string> unlabelled;
  bool no_balance = false;
  po::options_description opts("train --algo cmm options");
  opts.add_options()("algo", po::value(&algo)->default_value("cmm"), "cmm");
  add_common_options(opts, o, "linear | rbf | poly", 1, 1, /*poly=*/true);
  opts.add_options()(
      "unlabeled", po::value(&unlabelled)->multitoken(),
      "unlabelled rows (their labels are ignored); rows labelled 0 in --data are unlabelled too")(
      "c1", po::value(&config.c1)->default_value(10), "C1, weight of the labelled hinge loss")(
      "c2", po::value(&config.c2)->default_value(1),
      "C2, weight of the unlabelled symmetric hinge loss (variant rmm: of the compactness)")(
      "c3", po::value(&config.c3)->default_value(1),
      "C3, weight of the compactness [|f| − ε]_+ on every row (variant cmm; rmm takes C2)")(
      "epsilon", po::value(&config.epsilon)->default_value(1), "ε, half-width of the compact tube")(
      "delta", po::value(&config.delta)->default_value(-0.3, "-0.3"),
      "δ ∈ (-1, 0], the ramp threshold of the CCCP split of the symmetric hinge")(
      "variant", po::value(&variant)->default_value("cmm"),
      "cmm: relaxed CMM (8) by CCCP | rmm: the special variant (9), C3 = C2 and no unlabelled "
      "hinge (semi-supervised relative margin machine), one convex problem")(
      "balance-mean", po::value(&config.balance_mean),
      "r of the class-balance constraint mean_unlabelled f = r kept in every CCCP round (default: "
      "the mean label of the labelled rows)")("no-balance", po::bool_switch(&no_balance),
                                              "drop the class-balance constraint")(
      "max-rounds", po::value(&config.max_rounds)->default_value(30),
      "at most this many CCCP rounds")(
      "tolerance", po::value(&config.tolerance)->default_value(1e-3),
      "a round stops when no coordinate step moves the dual by more than this")(
      "max-sweeps", po::value(&config.max_sweeps)->default_value(5000),
      "at most this many coordinate-descent sweeps per round");
  po::positional_options_description positional;
  positional.add("data", -1);
  po::variables_map vm;
  if (!parse_options("train", "--algo cmm -d TRAIN -o MODEL [--unlabeled FILE] [options]", opts,
                     positional, args, vm))
    return kHelpShown;
  check_common(o, vm);
  if (variant != "cmm" && variant != "rmm")
    throw UsageError("train: --variant must be cmm or rmm (got '" + variant + "')");
  config.rmm_variant = variant == "rmm";
  if (config.rmm_variant) {
    warn_unused(vm, "c3", "with --variant rmm, which takes C3 = C2");
    config.c3 = config.c2;  // the variant's C3, as recorded and printed
  }
  // Unset, balance_mean is NaN (the labelled rows' mean label): a NaN given is refused.
  if (vm.count("balance-mean") && !std::isfinite(config.balance_mean))
    throw UsageError("train: --balance-mean must be in (-1, 1) (got " +
                     number(config.balance_mean) + ")");
  if (no_balance) warn_unused(vm, "balance-mean", "with --no-balance");
  config.balance = !no_balance;
  config.seed = o.seed;
  check_config(config);
  const KernelJob job(vm, o, metrics, algo);
  config.stop = KernelJob::stop_requested;

  TrainingSet t = load_training_set(o, true, unlabelled);
  record_data(metrics, t);
  const auto n = static_cast<std::uint64_t>(t.y.size());
  check_max_memory(engine::square_matrix_bytes(n) + 64.0 * n, job.max_memory,
                   "CMM on " + std::to_string(n) +
                       " rows (the kernel matrix over labelled and unlabelled rows)");
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  err_printf("kernel %s (gamma %g, bias %g)  variant %s  C1 %g  C2 %g  C3 %g  epsilon %g  "
               "delta %g\n",
               engine::kernel_name(kernel.spec.type).c_str(), kernel.spec.gamma, kernel.spec.bias,
               variant.c_str(), config.c1, config.c2, config.c3, config.epsilon, config.delta);

  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd k = engine::gram_matrix(t.x, kernel.spec);
  const double gram_seconds = seconds_since(phase);
  engine::poll(config.stop);
  phase = Clock::now();
  const engine::CmmResult result = engine::solve_cmm(k, t.y, config);
  const double solve_seconds = seconds_since(phase);
  if (!result.converged)
    err_printf("warning: CCCP stopped after %d rounds before β settled\n", result.rounds);

  engine::KernelModel model;
  describe_model(model, "cmm", t, o, kernel);
  model.config["variant"] = variant;
  model.config["c1"] = config.c1;
  model.config["c2"] = config.c2;
  model.config["c3"] = config.c3;
  model.config["epsilon"] = config.epsilon;
  model.config["delta"] = config.delta;
  model.config["balance"] = config.balance;
  if (config.balance) model.config["balance_mean"] = engine::cmm_balance_target(t.y, config);
  model.config["unlabelled_rows"] = t.unlabelled;
  if (!unlabelled.empty()) model.config["unlabeled_data"] = unlabelled;
  // Only the rows with a non-zero coefficient are needed for prediction.
  engine::RowSet vectors;
  std::vector<double> coefficients;
  const CsrView all = t.x.rows.view();
  for (Eigen::Index p = 0; p < result.c.size(); ++p)
    if (result.c(p) != 0) {
      vectors.rows.append_row(all, static_cast<std::size_t>(p));
      coefficients.push_back(result.c(p));
    }
  vectors.rows.ensure_values();
  vectors.finish();
  model.vectors = std::move(vectors);
  model.coefficients = {std::move(coefficients)};
  model.intercepts = {0.0};

  nlohmann::ordered_json summary = common_summary("cmm", t, o, kernel);
  summary["unlabelled_rows"] = t.unlabelled;
  summary["variant"] = variant;
  summary["c1"] = config.c1;
  summary["c2"] = config.c2;
  summary["c3"] = config.c3;
  summary["epsilon"] = config.epsilon;
  summary["delta"] = config.delta;
  summary["balance"] = config.balance;
  if (config.balance) summary["balance_mean"] = engine::cmm_balance_target(t.y, config);
  summary["rounds"] = result.rounds;
  summary["sweeps"] = result.sweeps;
  summary["converged"] = result.converged;
  summary["support_vectors"] = model.vectors.size();
  summary["objective"] = result.objectives.back();
  summary["objectives"] = result.objectives;
  summary["memory_bytes"] = static_cast<std::uint64_t>(engine::square_matrix_bytes(n));
  save_and_report(model, summary, result.scores, t.y,
                  {t.open_seconds, gram_seconds, 0.0, solve_seconds}, job.start, o, t.validation,
                  metrics);
  return kExitOk;
}

int run_kldm(const std::vector<std::string>& args) {
  return run_train_job(args, train_kldm);
}
int run_tldm(const std::vector<std::string>& args) {
  return run_train_job(args, train_tldm);
}
int run_cmm(const std::vector<std::string>& args) {
  return run_train_job(args, train_cmm);
}

const TrainAlgorithmRegistration kldm_registration(
    "kldm", "kernel LDM (linear, RBF, polynomial), dual coordinate descent; regular scale",
    run_kldm);
const TrainAlgorithmRegistration cmm_registration(
    "cmm", "Compact Margin Machine, semi-supervised (label 0 = unlabelled), CCCP", run_cmm);
const TrainAlgorithmRegistration tldm_registration(
    "tldm", "Twin LDM: two non-parallel planes (linear, RBF), SOR; regular scale", run_tldm);

}  // namespace
}  // namespace polymargin::cli
