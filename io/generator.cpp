#include "io/generator.h"

#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include "engine/errors.h"

namespace polymargin::io {


namespace {

// Stream of the rows that calibrate θ; never written.
constexpr std::uint64_t kCalibrationStream = 0x63616C6962726174ULL;
constexpr std::uint64_t kCalibrationRows = std::uint64_t{1} << 16;
// Rounds of redrawing duplicate features before a row is accepted shorter (only matters when the
// row length is close to the number of features).
constexpr int kRedrawRounds = 8;

std::uint64_t inverse_mod_2_64(std::uint64_t m) {
  std::uint64_t inv = m;  // correct to 3 bits for odd m; each Newton step doubles that
  for (int i = 0; i < 5; ++i) inv *= 2 - m * inv;
  return inv;
}

// Noiseless positive rate that gives positive_fraction after flipping with probability noise.
double noiseless_positive_rate(const GeneratorSpec& spec) {
  return (spec.positive_fraction - spec.noise) / (1 - 2 * spec.noise);
}

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

std::uint64_t signal_features(const GeneratorSpec& spec) {
  if (spec.signal_features > 0) return spec.signal_features;
  return std::min(spec.features, std::max<std::uint64_t>(1000, spec.features / 200));
}

// Sorts a row's entries (id << 32 | rank) by id: a counting pass on the id's top 6 bits, then an
// insertion sort of the nearly sorted result; twice as fast as std::sort at ~36 entries.
void sort_entries(std::vector<std::uint64_t>& entries, std::vector<std::uint64_t>& buffer,
                  int id_bits) {
  constexpr int kBucketBits = 6;
  const int shift = 32 + std::max(0, id_bits - kBucketBits);
  std::size_t start[(1 << kBucketBits) + 1] = {};
  for (const std::uint64_t e : entries) ++start[(e >> shift) + 1];
  for (int b = 0; b < (1 << kBucketBits); ++b) start[b + 1] += start[b];
  buffer.resize(entries.size());
  for (const std::uint64_t e : entries) buffer[start[e >> shift]++] = e;
  for (std::size_t i = 1; i < buffer.size(); ++i) {
    const std::uint64_t x = buffer[i];
    std::size_t j = i;
    for (; j > 0 && buffer[j - 1] > x; --j) buffer[j] = buffer[j - 1];
    buffer[j] = x;
  }
  entries.swap(buffer);
}

double uniform(SplitMix64& rng) { return unit_interval(rng.next()); }

// Standard normal deviate (Box–Muller, one of the pair).
double normal(SplitMix64& rng) {
  const double u1 = 1.0 - uniform(rng);  // (0, 1]
  const double u2 = uniform(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

PlantedModelKind parse_planted_model(const std::string& text) {
  if (text == "linear") return PlantedModelKind::kLinear;
  if (text == "polytope") return PlantedModelKind::kPolytope;
  throw UsageError("unknown model '" + text + "' (expected linear or polytope)");
}

std::string planted_model_name(PlantedModelKind kind) {
  return kind == PlantedModelKind::kLinear ? "linear" : "polytope";
}

FeatureOrder parse_feature_order(const std::string& text) {
  if (text == "scattered") return FeatureOrder::kScattered;
  if (text == "frequency") return FeatureOrder::kFrequency;
  throw UsageError("unknown feature order '" + text + "' (expected scattered or frequency)");
}

std::string feature_order_name(FeatureOrder order) {
  return order == FeatureOrder::kScattered ? "scattered" : "frequency";
}

GeneratorSpec generator_preset(const std::string& like) {
  // The defaults of GeneratorSpec are KDD Cup 2010 algebra (kdda): 8,407,752 rows, 20,216,830
  // features, 36.3 non-zeros a row, 85.3% positive.
  if (like == "kdda") return GeneratorSpec{};
  throw UsageError("unknown data set '" + like + "' for --like (expected kdda)");
}

void validate_spec(const GeneratorSpec& s) {
  // A field gen takes as a flag: ConfigError, which the command line says with the flag.
  auto field = [](bool ok, const char* name, const std::string& rule) {
    if (!ok) throw ConfigError(name, rule);
  };
  // A negative number on the command line wraps around to a huge one: refuse that too.
  field(s.rows >= 1 && s.rows <= kMaxRows, "rows",
        "must be between 1 and " + std::to_string(kMaxRows) + " (got " + std::to_string(s.rows) +
            ")");
  field(s.features >= 1 && s.features <= std::numeric_limits<std::uint32_t>::max(), "features",
        "must be between 1 and 4294967295 (got " + std::to_string(s.features) + ")");
  field(std::isfinite(s.nnz) && s.nnz >= 1 && s.nnz <= static_cast<double>(s.features), "nnz",
        "must be between 1 and the feature count " + std::to_string(s.features) + " (got " +
            message_number(s.nnz) + ")");
  require(std::isfinite(s.nnz_sigma) && s.nnz_sigma >= 0 && s.nnz_sigma <= 3,
          "nnz_sigma must be between 0 and 3 (got " + message_number(s.nnz_sigma) + ")");
  require(s.max_nnz <= s.features, "max_nnz must not exceed features");
  require(std::isfinite(s.zipf_exponent) && s.zipf_exponent >= 0 && s.zipf_exponent <= 4,
          "zipf exponent must be between 0 and 4 (got " + message_number(s.zipf_exponent) + ")");
  require(s.real_fraction >= 0 && s.real_fraction <= 1,
          "real_fraction must be between 0 and 1 (got " + message_number(s.real_fraction) + ")");
  field(s.noise >= 0 && s.noise < 0.5, "noise",
        "must be in [0, 0.5) (got " + message_number(s.noise) + ")");
  field(s.positive_fraction >= s.noise && s.positive_fraction <= 1 - s.noise, "positive_fraction",
        "must be between the noise and 1 - the noise (got " + message_number(s.positive_fraction) +
            " with noise " + message_number(s.noise) + ")");
  field(s.faces >= 1 && s.faces <= PlantedModel::kMaxFaces, "faces",
        "must be between 1 and " + std::to_string(PlantedModel::kMaxFaces) + " (got " +
            std::to_string(s.faces) + ")");
  field(s.signal_features <= s.features, "signal_features",
        "must not exceed the feature count " + std::to_string(s.features) + " (got " +
            std::to_string(s.signal_features) + ")");
}

// ---------------------------------------------------------------------------------------------
// FeaturePermutation

FeaturePermutation::FeaturePermutation(std::uint64_t n, std::uint64_t key) : n_(n) {
  bits_ = 1;
  while (bits_ < 64 && (std::uint64_t{1} << bits_) < n) ++bits_;
  mask_ = bits_ == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits_) - 1;
  shift_ = std::max(1, bits_ / 2);
  for (int i = 0; i < kRounds; ++i) {
    keys_[i] = derive_seed(key, 2 * i);
    multipliers_[i] = derive_seed(key, 2 * i + 1) | 1;
    inverses_[i] = inverse_mod_2_64(multipliers_[i]);
  }
}

std::uint64_t FeaturePermutation::step(std::uint64_t x) const {
  for (int i = 0; i < kRounds; ++i) {
    x = ((x ^ keys_[i]) * multipliers_[i]) & mask_;
    x ^= x >> shift_;
  }
  return x;
}

std::uint64_t FeaturePermutation::unstep(std::uint64_t x) const {
  for (int i = kRounds - 1; i >= 0; --i) {
    std::uint64_t y = x;  // invert x ^= x >> shift: each pass fixes shift_ more high bits
    for (int done = shift_; done < bits_; done += shift_) y = x ^ (y >> shift_);
    x = ((y * inverses_[i]) & mask_) ^ (keys_[i] & mask_);
  }
  return x;
}

std::uint32_t FeaturePermutation::forward(std::uint32_t rank) const {
  std::uint64_t x = rank;
  do x = step(x);
  while (x >= n_);
  return static_cast<std::uint32_t>(x);
}

std::uint32_t FeaturePermutation::inverse(std::uint32_t id) const {
  std::uint64_t x = id;
  do x = unstep(x);
  while (x >= n_);
  return static_cast<std::uint32_t>(x);
}

// ---------------------------------------------------------------------------------------------
// PlantedModel

PlantedModel::PlantedModel(const GeneratorSpec& spec, const FeaturePermutation& permutation)
    : faces_(spec.model == PlantedModelKind::kPolytope ? spec.faces : 1),
      signal_(signal_features(spec)),
      permutation_(&permutation),
      ids_are_ranks_(spec.feature_order == FeatureOrder::kFrequency) {
  const std::uint64_t key = derive_seed(spec.seed, 0x776569676874ULL);  // "weight"
  weights_.resize(static_cast<std::size_t>(faces_) * signal_);
  for (int k = 0; k < faces_; ++k) {
    for (std::uint64_t rank = 0; rank < signal_; ++rank) {
      SplitMix64 rng(derive_seed(key, static_cast<std::uint64_t>(k), rank));
      weights_[k * signal_ + rank] = static_cast<float>(normal(rng));
    }
  }
}

template <typename RankOf>
double PlantedModel::max_face_score(std::size_t n, const RankOf& rank_of,
                                    const float* values) const {
  double acc[kMaxFaces] = {};
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint64_t rank = rank_of(j);
    if (rank >= signal_) continue;
    const double v = values ? values[j] : 1.0;
    for (int k = 0; k < faces_; ++k) acc[k] += v * weights_[k * signal_ + rank];
  }
  return *std::max_element(acc, acc + faces_);
}

double PlantedModel::score_ranks(const std::uint32_t* ranks, const float* values,
                                 std::size_t n) const {
  return max_face_score(
      n, [ranks](std::size_t j) { return ranks[j]; }, values);
}

double PlantedModel::score(const CsrView& rows, std::size_t r) const {
  const std::uint32_t b = rows.offsets[r];
  const std::uint32_t* indices = rows.indices + b;
  const auto rank_of = [&](std::size_t j) -> std::uint64_t {
    const std::uint64_t id = std::uint64_t{indices[j]} - 1;  // index 0 wraps to a huge id
    if (id >= permutation_->size()) return signal_;
    return ids_are_ranks_ ? id : permutation_->inverse(static_cast<std::uint32_t>(id));
  };
  return max_face_score(rows.row_nnz(r), rank_of, rows.values ? rows.values + b : nullptr);
}

float PlantedModel::noiseless_label(const CsrView& rows, std::size_t r) const {
  return score(rows, r) >= threshold_ ? 1.0f : -1.0f;
}

// ---------------------------------------------------------------------------------------------
// Generator

struct Generator::Scratch {
  std::vector<std::uint64_t> entries;  // id << 32 | rank, sorted by id, distinct
  std::vector<std::uint64_t> buffer;
  std::vector<std::uint32_t> ranks;
  std::vector<float> values;
};

Generator::Generator(const GeneratorSpec& spec)
    : spec_((validate_spec(spec), spec)),
      permutation_(spec.features, derive_seed(spec.seed, 0x7065726DULL)),  // "perm"
      model_(spec_, permutation_) {
  max_nnz_ = spec_.max_nnz > 0
                 ? spec_.max_nnz
                 : static_cast<std::uint32_t>(std::min<double>(static_cast<double>(spec_.features),
                                                               std::ceil(8 * spec_.nnz)));
  log_mean_ = std::log(spec_.nnz) - 0.5 * spec_.nnz_sigma * spec_.nnz_sigma;
  const double n1 = static_cast<double>(spec_.features) + 1;
  zipf_log_n1_ = std::log(n1);
  zipf_scale_ = std::pow(n1, 1 - spec_.zipf_exponent) - 1;
  real_key_ = derive_seed(spec_.seed, 0x7265616CULL);  // "real"
  model_.set_threshold(calibrate_threshold());
}

std::uint32_t Generator::zipf_rank(double u) const {
  // Inverse CDF of the density ∝ x^-s on [1, n + 1); rank = floor(x) − 1.
  const double s = spec_.zipf_exponent;
  const double x =
      s == 1.0 ? std::exp(u * zipf_log_n1_) : std::pow(1 + u * zipf_scale_, 1 / (1 - s));
  const double rank = std::floor(x) - 1;
  if (!(rank > 0)) return 0;
  return static_cast<std::uint32_t>(std::min(rank, static_cast<double>(spec_.features - 1)));
}

double Generator::draw_row(SplitMix64& rng, Scratch& s) const {
  const double len = std::round(std::exp(log_mean_ + spec_.nnz_sigma * normal(rng)));
  const std::size_t n = static_cast<std::size_t>(std::clamp(len, 1.0, double(max_nnz_)));
  s.entries.clear();
  for (int round = 0; round < kRedrawRounds && s.entries.size() < n; ++round) {
    for (std::size_t j = s.entries.size(); j < n; ++j) {
      const std::uint32_t rank = zipf_rank(uniform(rng));
      s.entries.push_back(std::uint64_t{permutation_.forward(rank)} << 32 | rank);
    }
    sort_entries(s.entries, s.buffer, permutation_.bits());
    s.entries.erase(std::unique(s.entries.begin(), s.entries.end()), s.entries.end());
  }
  s.ranks.resize(s.entries.size());
  s.values.resize(s.entries.size());
  for (std::size_t j = 0; j < s.entries.size(); ++j) {
    const std::uint64_t id = s.entries[j] >> 32;
    s.ranks[j] = static_cast<std::uint32_t>(s.entries[j]);
    const bool real = unit_interval(SplitMix64(id ^ real_key_).next()) < spec_.real_fraction;
    s.values[j] = real ? static_cast<float>(1 + rng.below(1000)) / 1000.0f : 1.0f;
  }
  return model_.score_ranks(s.ranks.data(), s.values.data(), s.entries.size());
}

double Generator::calibrate_threshold() const {
  const double q = noiseless_positive_rate(spec_);
  if (q >= 1) return -std::numeric_limits<double>::infinity();
  if (q <= 0) return std::numeric_limits<double>::infinity();
  std::vector<double> scores(kCalibrationRows);
  tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, kCalibrationRows, 1024),
                    [&](const tbb::blocked_range<std::uint64_t>& range) {
                      Scratch scratch;
                      for (std::uint64_t row = range.begin(); row < range.end(); ++row) {
                        SplitMix64 rng(derive_seed(spec_.seed, kCalibrationStream, row));
                        scores[row] = draw_row(rng, scratch);
                      }
                    });
  // θ leaves a fraction q of the sample at or above it.
  const auto at = static_cast<std::size_t>(std::floor((1 - q) * kCalibrationRows));
  std::nth_element(scores.begin(), scores.begin() + at, scores.end());
  return scores[at];
}

void Generator::generate_rows(std::uint64_t stream, std::uint64_t first, std::uint64_t count,
                              CsrBuffer& out) const {
  const bool with_values = spec_.real_fraction > 0;
  if (with_values) out.ensure_values();
  const bool by_frequency = spec_.feature_order == FeatureOrder::kFrequency;
  Scratch s;
  std::vector<std::uint32_t> order;  // by_frequency: the row's entries by rank
  for (std::uint64_t row = first; row < first + count; ++row) {
    SplitMix64 rng(derive_seed(spec_.seed, stream, row));
    const double score = draw_row(rng, s);
    float label = score >= model_.threshold() ? 1.0f : -1.0f;
    if (uniform(rng) < spec_.noise) label = -label;
    out.labels.push_back(label);
    if (by_frequency) {
      // The row drawn as for scattered ids (the same ranks, values and label), written by rank.
      order.resize(s.ranks.size());
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(),
                [&](std::uint32_t a, std::uint32_t b) { return s.ranks[a] < s.ranks[b]; });
      for (const std::uint32_t j : order) {
        out.indices.push_back(s.ranks[j] + 1);
        if (with_values) out.values.push_back(s.values[j]);
      }
    } else {
      for (const std::uint64_t e : s.entries)
        out.indices.push_back(static_cast<std::uint32_t>(e >> 32) + 1);  // 1-based raw index
      if (with_values) out.values.insert(out.values.end(), s.values.begin(), s.values.end());
    }
    out.offsets.push_back(static_cast<std::uint32_t>(out.indices.size()));
  }
}

// ---------------------------------------------------------------------------------------------
// Streaming

GenStats generate_stream(const Generator& generator, std::uint64_t stream, std::uint64_t rows,
                         const GenRunOptions& run, const GenBlockFn& transform,
                         const GenBlockFn& consume) {
  const auto start = std::chrono::steady_clock::now();
  // More threads than cores would only make oneTBB warn; the bytes do not depend on it anyway.
  const int cores = tbb::info::default_concurrency();
  const int threads = run.threads > 0 ? std::min(run.threads, cores) : cores;
  const std::uint64_t block_rows = std::max<std::uint32_t>(1, run.block_rows);
  const std::uint64_t blocks = (rows + block_rows - 1) / block_rows;
  // Block j reuses slot j % tokens: with at most `tokens` blocks in flight and in-order
  // consumption, block j − tokens has left the pipeline before block j enters it.
  const std::size_t tokens = 2 * static_cast<std::size_t>(threads) + 1;
  std::vector<GenBlock> slots(tokens);
  std::uint64_t next = 0;
  GenStats stats;
  const auto emit = [&](tbb::flow_control& fc) -> GenBlock* {
    if (next == blocks) {
      fc.stop();
      return nullptr;
    }
    GenBlock* b = &slots[next % tokens];
    b->index = next;
    b->first_row = next * block_rows;
    ++next;
    return b;
  };
  const auto generate = [&](GenBlock* b) {
    b->rows.clear();
    generator.generate_rows(stream, b->first_row, std::min(block_rows, rows - b->first_row),
                            b->rows);
    if (transform) transform(*b);
    return b;
  };
  const auto sink = [&](GenBlock* b) {
    const CsrBuffer& data = b->rows;
    stats.rows += data.rows();
    stats.nnz += data.nnz();
    for (const float y : data.labels) stats.positives += y > 0;
    if (!data.indices.empty())
      stats.max_index =
          std::max(stats.max_index, *std::max_element(data.indices.begin(), data.indices.end()));
    if (consume) consume(*b);
  };
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens, tbb::make_filter<void, GenBlock*>(tbb::filter_mode::serial_in_order, emit) &
                    tbb::make_filter<GenBlock*, GenBlock*>(tbb::filter_mode::parallel, generate) &
                    tbb::make_filter<GenBlock*, void>(tbb::filter_mode::serial_in_order, sink));
  });
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

GenStats generate_text(const Generator& generator, std::uint64_t stream, std::uint64_t rows,
                       const std::string& path, const GenRunOptions& run) {
  TextWriter writer(path);
  GenStats stats = generate_stream(
      generator, stream, rows, run, [&](GenBlock& b) { writer.encode(b.rows.view(), b.text); },
      [&](GenBlock& b) { writer.write_encoded(b.text); });
  writer.finish();
  stats.text_bytes = writer.text_bytes();
  stats.file_bytes = writer.file_bytes();
  return stats;
}

}  // namespace polymargin::io
