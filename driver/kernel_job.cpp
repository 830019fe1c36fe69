// The regular-scale learners' jobs (kldm, tldm, cmm: hundreds to ~20,000 rows) as the library
// runs them, behind driver::train (driver/train.h). Their cost grows with m² (memory) and m³
// (time). The whole training set is loaded into memory once (text or shards, unshuffled), scaled
// into [0, 1] by each feature's max |value| as the papers do, and handed to the engine's dense
// solvers; the model keeps the rows it needs.

#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/job.h"
#include "driver/learner_jobs.h"
#include "driver/train.h"
#include "engine/cmm.h"
#include "engine/errors.h"
#include "engine/kernel.h"
#include "engine/kernel_model.h"
#include "engine/kldm.h"
#include "engine/ldm.h"
#include "engine/normalize.h"
#include "engine/setup.h"
#include "engine/stop.h"
#include "engine/tldm.h"
#include "io/kernel_model_file.h"
#include "io/memory.h"
#include "io/shards.h"

namespace polymargin::driver {
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

// What every kernel learner's job takes, resolved: the job's files and the kernel's options with
// the learner's defaults.
struct CommonOptions {
  std::vector<std::string> inputs, validation;
  std::shared_ptr<const io::ShardSet> shards;  // or the rows in memory
  bool durable_output = true;
  std::string output, scale, normalize, kernel, max_memory_text, data_name, index_base;
  double rbf_width = 1, gamma = 0, coef0 = 0, bias = 0;
  int degree = 3, threads = 0;
  std::uint64_t seed = 1;
  const nlohmann::json& tune;
  // Which of the kernel's options were given (a given one the kernel does not use is warned of).
  bool rbf_width_given = false, gamma_given = false, degree_given = false, coef0_given = false;
};

// The common options of `job`, whose kernel options are `k`, with the learner's defaults of the
// RBF width and the bias.
CommonOptions common_options(const TrainJob& job, const KernelOptions& k, double default_width,
                             double default_bias) {
  CommonOptions o{.inputs = job.inputs,
                  .validation = job.job.validation,
                  .shards = job.shards,
                  .durable_output = job.durable_output,
                  .output = job.output,
                  .scale = k.scale,
                  .normalize = k.normalize,
                  .kernel = k.kernel,
                  .max_memory_text = k.max_memory,
                  .data_name = job.job.data_name,
                  .index_base = job.job.index_base,
                  .rbf_width = k.rbf_width.value_or(default_width),
                  .gamma = k.gamma.value_or(0),
                  .coef0 = k.coef0.value_or(0),
                  .bias = k.bias.value_or(default_bias),
                  .degree = k.degree.value_or(3),
                  .threads = job.threads,
                  .seed = k.seed,
                  .tune = job.tune};
  o.rbf_width_given = k.rbf_width.has_value();
  o.gamma_given = k.gamma.has_value();
  o.degree_given = k.degree.has_value();
  o.coef0_given = k.coef0.has_value();
  return o;
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
      case 'k':
      case 'K':
        unit = 1024.0;
        break;
      case 'm':
      case 'M':
        unit = 1024.0 * 1024;
        break;
      case 'g':
      case 'G':
        unit = 1024.0 * 1024 * 1024;
        break;
      case 't':
      case 'T':
        unit = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        unit = 0;
    }
    ++used;
  }
  if (used != text.size() || !(value > 0) || !(unit > 0) || !std::isfinite(value))
    throw UsageError(
        "train: --max-memory must be 'auto' or a positive size such as 512M or 4G "
        "(got '" +
        text + "')");
  return value * unit;
}

// An option given that changes nothing is named in a warning: the model is the one trained
// without it.
void warn_unused(bool given, const char* name, const char* why, Events& events) {
  if (given) events.note(strprintf("warning: --%s has no effect %s (ignored)", name, why));
}

// The common options checked before the data are read; a kernel option given that the chosen
// kernel does not use is named in a warning.
void check_common(const CommonOptions& o, Events& events) {
  check_has_data(o.inputs, o.shards);
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
  const auto unused = [&](bool given, const char* name, const char* why) {
    warn_unused(given, name, why, events);
  };
  if (type == engine::KernelType::kLinear) {
    unused(o.rbf_width_given, "rbf-width", "with --kernel linear");
    unused(o.gamma_given, "gamma", "with --kernel linear");
    unused(o.degree_given, "degree", "with --kernel linear");
    unused(o.coef0_given, "coef0", "with --kernel linear");
  }
  if (type == engine::KernelType::kRbf) {
    unused(o.degree_given, "degree", "with --kernel rbf");
    unused(o.coef0_given, "coef0", "with --kernel rbf");
    if (o.gamma > 0)
      unused(o.rbf_width_given, "rbf-width", "beside --gamma, which sets the RBF width itself");
  }
  if (type == engine::KernelType::kPolynomial)
    unused(o.rbf_width_given, "rbf-width", "with --kernel poly");
}

// Loads every row (unshuffled, in file order) and scales it as the reader's --scale maxabs does.
// Labels: the two values of a binary set become ±1; with `allow_unlabelled`, rows labelled 0 are
// unlabelled (y = 0) and the other two values the classes.
TrainingSet load_training_set(const CommonOptions& o, bool allow_unlabelled,
                              const std::vector<std::string>& unlabelled_inputs, Events& events) {
  const Clock::time_point start = Clock::now();
  TrainingSet t;
  const int threads = resolve_threads(o.threads);
  io::ConvertOptions convert;
  convert.text.threads = threads;
  const std::string data = o.data_name.empty() ? data_name(o.inputs) : o.data_name;
  const io::Dataset dataset =
      open_training_data(o.inputs, o.shards, convert, o.index_base, threads, data);
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
  events.note(strprintf(
      "train: %s: %llu rows (%llu unlabelled), %llu features, %llu non-zeros%s", data.c_str(),
      static_cast<unsigned long long>(rows), static_cast<unsigned long long>(t.unlabelled),
      static_cast<unsigned long long>(t.features), static_cast<unsigned long long>(t.nnz),
      dataset.converted() ? " (converted from text)" : ""));
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
  if (!o.tune.is_null()) model.config["tune"] = o.tune;
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

// The basis of the planes: the scaled rows as dense columns (linear, q features) or the kernel
// matrix (rbf).
Eigen::MatrixXd tldm_basis(const TrainingSet& t, bool linear, std::uint64_t q,
                           const ResolvedKernel& kernel, const engine::Watch& watch) {
  if (!linear) return engine::gram_matrix(t.x, kernel.spec, watch);
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

// What a kernel learner's job holds from its checked options to its end: the paths checked, the
// model's lock (a second job on this model stops here), the start time, the memory limit; the
// record started.
struct KernelJob {
  KernelJob(const TrainJob& given, const CommonOptions& o,
            const std::vector<std::string>& unlabeled, nlohmann::ordered_json& report)
      : max_memory(parse_bytes(o.max_memory_text)),
        locks((check_job_paths(given.inputs, given.job, "", given.other_inputs, given.output,
                               unlabeled),
               given.output),
              "", given.job.metrics, given.job.locks_held),
        start(Clock::now()) {
    start_record(report, given.algo, given.inputs, given.job, given.output);
  }

  double max_memory;
  JobLocks locks;
  Clock::time_point start;
};

// The solvers' stop request: the caller's, polled once a sweep (they then throw engine::Stopped).
engine::StopRequest stop_request(Events& events) {
  return [&events] { return events.stop_requested() != 0; };
}

// A set-up's progress as notes: none in its first 5 seconds (a short set-up says nothing), then
// one every 10 seconds, naming the step and its share done. Its watch also carries the stop
// request, polled between the set-up's pieces of work.
class SetupNotes {
 public:
  explicit SetupNotes(Events& events) : events_(events), start_(Clock::now()) {}

  engine::Watch watch() {
    return {stop_request(events_), [this](const char* step, double done) { report(step, done); }};
  }
  engine::SetupProgress progress() {
    return [this](const char* step, double done) { report(step, done); };
  }

 private:
  void report(const char* step, double done) {
    const double elapsed = seconds_since(start_);
    if (elapsed < 5 || elapsed < last_ + 10) return;
    last_ = elapsed;
    events_.note(strprintf("set-up: %s %.0f %% done (%.0f s so far)", step, 100 * done, elapsed));
  }

  Events& events_;
  Clock::time_point start_;
  double last_ = -10;  // seconds since start_ of the last note
};

// Seconds one floating-point operation of the set-up's dense work takes here (one thread):
// measured on a Cholesky factorisation of 512 × 512 (45 M operations, the same blocked code, whose
// rate the triangular solves share) and on a product of two 256 × 256 matrices (34 M operations:
// Eigen's products run several times faster), each in about 10 ms.
struct DenseRates {
  double factor = 0, product = 0;  // seconds an operation
};

DenseRates measure_dense_rates() {
  constexpr Eigen::Index n = 512, p = 256;
  Eigen::MatrixXd a = Eigen::MatrixXd::Constant(n, n, 0.5);
  a.diagonal().array() += n;
  DenseRates rates;
  Clock::time_point start = Clock::now();
  engine::cholesky_in_place(a, {}, "");
  rates.factor = seconds_since(start) / (static_cast<double>(n) * n * n / 3);
  const Eigen::MatrixXd b = a.topLeftCorner(p, p);
  Eigen::MatrixXd c(p, p);
  start = Clock::now();
  c.noalias() = b * b;
  rates.product = seconds_since(start) / (2.0 * p * p * p);
  return rates;
}

// Seconds the kernel matrix of `x` will take, from the time of the kernel matrix of its first
// 256 rows (scaled by the number of entries).
double estimated_gram_seconds(const engine::RowSet& x, const engine::KernelSpec& kernel) {
  const std::size_t m = x.size(), s = std::min<std::size_t>(m, 256);
  engine::RowSet sample;
  const CsrView all = x.rows.view();
  for (std::size_t i = 0; i < s; ++i) sample.rows.append_row(all, i);
  sample.rows.ensure_values();
  sample.finish();
  const Clock::time_point start = Clock::now();
  engine::gram_matrix(sample, kernel);
  const double scale = static_cast<double>(m) / static_cast<double>(s);
  return seconds_since(start) * scale * scale;
}

// What a set-up does, for its estimate: the kernel matrix (if any), and its dense work in
// floating-point operations: factorisations and triangular solves on one thread and spread over
// the job's threads, and products (one thread).
struct SetupWork {
  const engine::KernelSpec* gram = nullptr;
  double factor_flops = 0, parallel_factor_flops = 0, product_flops = 0;
  const char* steps = "";
};

// A note with the set-up's estimated length before it starts, when that is more than a few
// seconds (a set-up worth waiting for: its progress follows every 10 s). Rough work counts
// decide first whether to measure anything at all.
void note_setup_estimate(const engine::RowSet& x, const SetupWork& work, Events& events) {
  const double m = static_cast<double>(x.size());
  const double gram_ops = work.gram ? m * static_cast<double>(x.rows.indices.size()) : 0;
  if (gram_ops + work.factor_flops + work.parallel_factor_flops + work.product_flops < 5e9) return;
  const double threads = std::max(1, tbb::this_task_arena::max_concurrency());
  const DenseRates rates = measure_dense_rates();
  const double seconds = (work.gram ? estimated_gram_seconds(x, *work.gram) : 0) +
                         rates.factor * (work.factor_flops + work.parallel_factor_flops / threads) +
                         rates.product * work.product_flops;
  if (seconds < 3) return;
  events.note(strprintf("set-up: %.0f rows, about %.0f s (%s)", m, seconds, work.steps));
}

// The record: the training data, once loaded.
void record_data(nlohmann::ordered_json& report, const TrainingSet& t) {
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

// The tail every regular-scale learner shares: the model is written (atomically), the validation
// data are scored with it, and the run is reported: the summary with the training accuracy and
// margins of `scores` (the model's decision values on the training rows; unlabelled rows, y = 0,
// left out), and the record.
TrainResult save_and_report(engine::KernelModel model, nlohmann::ordered_json summary,
                            const Eigen::VectorXd& scores, const Eigen::VectorXd& y,
                            const Phases& phases, Clock::time_point start, const CommonOptions& o,
                            const ValidationData& validation, nlohmann::ordered_json& report) {
  check_trained_model(summary["objective"].get<double>(), training_margins(scores, y),
                      "a setting is far beyond the data's scale (C, the λs, the kernel's width)");
  Clock::time_point phase = Clock::now();
  io::save_kernel_model(model, o.output, o.durable_output);
  const double save_seconds = seconds_since(phase);
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
  if (!o.tune.is_null()) summary["tune"] = report["tune"] = o.tune;
  summary["open_seconds"] = phases.open;
  summary["gram_seconds"] = phases.gram;
  summary["setup_seconds"] = phases.setup;
  summary["solve_seconds"] = phases.solve;
  summary["save_seconds"] = save_seconds;
  if (validated) summary["validation_seconds"] = validation_seconds;
  summary["total_seconds"] = seconds_since(start);
  summary["model_path"] = o.output;

  report["seconds"] = {{"open", phases.open},
                       {"gram", phases.gram},
                       {"setup", phases.setup},
                       {"solve", phases.solve},
                       {"save", save_seconds},
                       {"validation", validation_seconds},
                       {"total", summary["total_seconds"]}};
  if (!validated) report["seconds"].erase("validation");  // a phase that did not run has no key
  report["objective"] = summary["objective"];
  report["converged"] = summary["converged"];
  report["train"] = metrics_json(engine::binary_metrics(train_scores, train_signs));
  if (validated) report["validation"] = validated->metrics;

  TrainResult result;
  result.summary = std::move(summary);
  result.model = std::make_unique<engine::KernelModel>(std::move(model));
  return result;
}

// ---------------------------------------------------------------------------------------------
// Kernel LDM.

TrainResult kldm_job(const TrainJob& given, Events& events, nlohmann::ordered_json& report) {
  const KldmParams& p = given.kldm;
  const CommonOptions o = common_options(given, p.kernel, 1, 0);
  engine::KldmConfig config;
  config.c = p.c;
  config.tolerance = p.tolerance;
  config.max_sweeps = p.max_sweeps;
  const bool no_shrinking = !p.shrinking;
  check_common(o, events);
  config.shrinking = !no_shrinking;
  config.seed = o.seed;
  lambda_value("lambda1", p.lambda1, p.lambda1_rel, 0, 0);
  lambda_value("lambda2", p.lambda2, p.lambda2_rel, 0, 0);
  check_config(config, {{"c", "--cost"}});  // C first: the λs below are computed from it
  const KernelJob job(given, o, {}, report);
  config.stop = stop_request(events);

  TrainingSet t = load_training_set(o, false, {}, events);
  record_data(report, t);
  const double m = static_cast<double>(t.y.size());
  // Before anything of size m² exists: will it fit?
  check_max_memory(engine::kldm_peak_bytes(t.y.size()), job.max_memory,
                   "kernel LDM on " + std::to_string(t.y.size()) +
                       " rows (G, the Cholesky factor and A: three m × m matrices of doubles)");
  config.lambda1 = lambda_value("lambda1", p.lambda1, p.lambda1_rel, m, config.c)
                       .value_or(engine::kDefaultLambda1Rel * m * config.c);
  config.lambda2 = lambda_value("lambda2", p.lambda2, p.lambda2_rel, m, config.c)
                       .value_or(engine::kDefaultLambda2Rel * m * config.c);
  check_config(config, {{"c", "--cost"}});
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  events.note(strprintf(
      "kernel %s (gamma %g%s)  lambda1 %g  lambda2 %g  C %g  tolerance %g",
      engine::kernel_name(kernel.spec.type).c_str(), kernel.spec.gamma,
      kernel.mean_distance > 0
          ? (", width " + number(o.rbf_width) + "·δ, δ = " + number(kernel.mean_distance)).c_str()
          : "",
      config.lambda1, config.lambda2, config.c, config.tolerance));

  // The set-up: G (m²/2 kernel values), B's factor (m³/3) and the solves for A (4m³/3).
  const double cube = m * m * m;
  note_setup_estimate(
      t.x,
      {&kernel.spec, config.lambda1 > 0 ? cube / 3 : 0, config.lambda1 > 0 ? 4 * cube / 3 : 0, 0,
       "the kernel matrix, its Cholesky factor, the solves"},
      events);
  SetupNotes notes(events);
  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd g = engine::gram_matrix(t.x, kernel.spec, notes.watch());
  const double gram_seconds = seconds_since(phase);
  phase = Clock::now();
  const engine::LdmDualOperator op =
      engine::ldm_dual_operator(g, t.y, config.lambda1, notes.watch());
  const double setup_seconds = seconds_since(phase);
  phase = Clock::now();
  const engine::KldmResult result = engine::solve_kldm(g, t.y, config, op);
  const double solve_seconds = seconds_since(phase);
  if (!result.converged)
    events.note(strprintf("warning: not converged after %d sweeps (gap %g > tolerance %g)",
                          result.sweeps, result.pg_gap, config.tolerance));

  engine::KernelModel model;
  describe_model(model, "kldm", t, o, kernel);
  model.config["lambda1"] = config.lambda1;
  model.config["lambda2"] = config.lambda2;
  model.config["c"] = config.c;
  model.config["tolerance"] = config.tolerance;
  model.config["max_sweeps"] = config.max_sweeps;
  model.config["shrinking"] = config.shrinking;
  model.vectors = std::move(t.x);  // α is dense: every training row is a support vector
  model.coefficients = {
      std::vector<double>(result.alpha.data(), result.alpha.data() + result.alpha.size())};
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
  return save_and_report(std::move(model), std::move(summary), result.scores, t.y,
                         {t.open_seconds, gram_seconds, setup_seconds, solve_seconds}, job.start, o,
                         t.validation, report);
}

// ---------------------------------------------------------------------------------------------
// Twin LDM.

TrainResult tldm_job(const TrainJob& given, Events& events, nlohmann::ordered_json& report) {
  const TldmParams& p = given.tldm;
  // The defaults: width 4·δ and C = 1/8, the setting within 2 points of the best on the most of
  // 19 UCI sets (docs/accuracy.md, "The Twin LDM's defaults").
  const CommonOptions o = common_options(given, p.kernel, 4, 0);
  engine::TldmConfig config;
  config.c = p.c;
  config.lambda1 = p.lambda1;
  config.lambda2 = p.lambda2;
  config.epsilon = p.epsilon;
  config.omega = p.sor_omega;
  config.tolerance = p.tolerance;
  config.max_sweeps = p.max_sweeps;
  check_common(o, events);
  if (engine::parse_kernel(o.kernel) == engine::KernelType::kPolynomial)
    throw UsageError("train: --algo tldm takes --kernel linear or rbf (got 'poly')");
  if (o.bias != 0)
    throw UsageError("train: --algo tldm has its own intercepts b1, b2; --bias does not apply");
  check_config(config, {{"c", "--cost"}, {"omega", "--sor-omega"}});
  const KernelJob job(given, o, {}, report);
  config.stop = stop_request(events);

  TrainingSet t = load_training_set(o, false, {}, events);
  record_data(report, t);
  const auto l = static_cast<std::uint64_t>(t.y.size());
  const bool linear = engine::parse_kernel(o.kernel) == engine::KernelType::kLinear;
  const std::uint64_t q = linear ? std::uint64_t{t.max_index} + 1 : l;
  check_max_memory(engine::tldm_peak_bytes(l, q) + (linear ? 0.0 : engine::square_matrix_bytes(l)),
                   job.max_memory,
                   "Twin LDM on " + std::to_string(l) + " rows and " + std::to_string(q) +
                       " basis columns (its (q+1)² matrices P, S and the duals' Hessians)");
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  events.note(strprintf("kernel %s%s  c %g  lambda1 %g  lambda2 %g  epsilon %g  omega %g",
                        engine::kernel_name(kernel.spec.type).c_str(),
                        linear ? "" : (" (gamma " + number(kernel.spec.gamma) + ")").c_str(),
                        config.c, config.lambda1, config.lambda2, config.epsilon, config.omega));

  // The set-up: the basis (rbf: the kernel matrix), then on one thread MᵀM and, for each plane,
  // the near rows' product, the factor of P (S), the solve for the far rows and their Hessian.
  const double rows = static_cast<double>(l), cols = static_cast<double>(q) + 1;
  const double positives = static_cast<double>((t.y.array() > 0).count());
  const double far_squares = positives * positives + (rows - positives) * (rows - positives);
  note_setup_estimate(
      t.x,
      {linear ? nullptr : &kernel.spec, 2 * cols * cols * cols / 3 + 2 * cols * cols * rows, 0,
       4 * rows * cols * cols + 2 * far_squares * cols,
       linear ? "the planes' products and Cholesky factors"
              : "the kernel matrix, the planes' products and Cholesky factors"},
      events);
  SetupNotes notes(events);
  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd basis = tldm_basis(t, linear, q, kernel, notes.watch());
  const double gram_seconds = seconds_since(phase);
  phase = Clock::now();
  const engine::TldmResult result = engine::solve_tldm(basis, t.y, config, notes.progress());
  const double solve_seconds = seconds_since(phase);
  for (int k = 0; k < 2; ++k)
    if (!result.plane[k].solver.converged)
      events.note(strprintf("warning: plane %d not converged after %d sweeps (violation %g)", k + 1,
                            result.plane[k].solver.sweeps, result.plane[k].solver.max_violation));

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
  return save_and_report(std::move(model), std::move(summary), scores, t.y,
                         {t.open_seconds, gram_seconds, 0.0, solve_seconds}, job.start, o,
                         t.validation, report);
}

// ---------------------------------------------------------------------------------------------
// Compact Margin Machine.

TrainResult cmm_job(const TrainJob& given, Events& events, nlohmann::ordered_json& report) {
  const CmmParams& p = given.cmm;
  const CommonOptions o = common_options(given, p.kernel, 1, 1);
  const std::vector<std::string>& unlabelled = p.unlabeled;
  const std::string& variant = p.variant;
  const bool no_balance = !p.balance;
  engine::CmmConfig config;
  config.c1 = p.c1;
  config.c2 = p.c2;
  config.c3 = p.c3.value_or(1);
  config.epsilon = p.epsilon;
  config.delta = p.delta;
  if (p.balance_mean) config.balance_mean = *p.balance_mean;
  config.max_rounds = p.max_rounds;
  config.tolerance = p.tolerance;
  config.max_sweeps = p.max_sweeps;
  check_common(o, events);
  if (variant != "cmm" && variant != "rmm")
    throw UsageError("train: --variant must be cmm or rmm (got '" + variant + "')");
  config.rmm_variant = variant == "rmm";
  if (config.rmm_variant) {
    warn_unused(p.c3.has_value(), "c3", "with --variant rmm, which takes C3 = C2", events);
    config.c3 = config.c2;  // the variant's C3, as recorded and printed
  }
  // Unset, balance_mean is NaN (the labelled rows' mean label): a NaN given is refused.
  if (p.balance_mean && !std::isfinite(config.balance_mean))
    throw UsageError("train: --balance-mean must be in (-1, 1) (got " +
                     number(config.balance_mean) + ")");
  if (no_balance)
    warn_unused(p.balance_mean.has_value(), "balance-mean", "with --no-balance", events);
  config.balance = !no_balance;
  config.seed = o.seed;
  check_config(config);
  const KernelJob job(given, o, unlabelled, report);
  config.stop = stop_request(events);

  TrainingSet t = load_training_set(o, true, unlabelled, events);
  record_data(report, t);
  const auto n = static_cast<std::uint64_t>(t.y.size());
  check_max_memory(engine::square_matrix_bytes(n) + 64.0 * n, job.max_memory,
                   "CMM on " + std::to_string(n) +
                       " rows (the kernel matrix over labelled and unlabelled rows)");
  const ResolvedKernel kernel = resolve_kernel(o, t.x);
  events.note(
      strprintf("kernel %s (gamma %g, bias %g)  variant %s  C1 %g  C2 %g  C3 %g  epsilon %g  "
                "delta %g",
                engine::kernel_name(kernel.spec.type).c_str(), kernel.spec.gamma, kernel.spec.bias,
                variant.c_str(), config.c1, config.c2, config.c3, config.epsilon, config.delta));

  note_setup_estimate(t.x, {&kernel.spec, 0, 0, 0, "the kernel matrix"}, events);
  SetupNotes notes(events);
  Clock::time_point phase = Clock::now();
  const Eigen::MatrixXd k = engine::gram_matrix(t.x, kernel.spec, notes.watch());
  const double gram_seconds = seconds_since(phase);
  phase = Clock::now();
  const engine::CmmResult result = engine::solve_cmm(k, t.y, config);
  const double solve_seconds = seconds_since(phase);
  if (!result.converged)
    events.note(strprintf("warning: CCCP stopped after %d rounds before β settled", result.rounds));

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
  return save_and_report(std::move(model), std::move(summary), result.scores, t.y,
                         {t.open_seconds, gram_seconds, 0.0, solve_seconds}, job.start, o,
                         t.validation, report);
}

}  // namespace

TrainResult train_kernel(const TrainJob& job, Events& events, nlohmann::ordered_json& record) {
  // The job's threads: an arena of its own (the kernel matrix and the solvers' parallel loops run
  // in it), not a cap on the whole process, which other jobs in it (--tune's cells) share.
  tbb::task_arena arena(resolve_threads(job.threads));
  try {
    return arena.execute([&] {
      if (job.algo == "kldm") return kldm_job(job, events, record);
      if (job.algo == "tldm") return tldm_job(job, events, record);
      return cmm_job(job, events, record);
    });
  } catch (const engine::Stopped&) {                 // a solver asked by the caller's stop request
    throw Interrupted{events.stop_requested(), ""};  // nothing to resume from
  }
}

}  // namespace polymargin::driver
