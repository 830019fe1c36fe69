// Synthetic LIBSVM data with the statistics of KDD Cup 2010 (algebra, "kdda") and a planted,
// noisy decision rule, generated out of core and deterministically.
//
// Every row is a pure function of (spec, stream, row number): its random numbers come from the
// project's SplitMix64 (engine/random.h) seeded by derive_seed(seed, stream, row), so blocks can
// be generated in any order, on any number of threads, and the output is byte-identical. Nothing
// proportional to the number of rows is held; memory is a weight table of the signal features plus
// a fixed number of blocks.
//
// Row model:
//   length   n ~ round(LogNormal(mu, sigma)) clamped to [1, max_nnz], with mu chosen so E[n] = nnz;
//   features n distinct ranks drawn from a Zipf(s) law over [0, features) by inverse CDF of its
//            continuous approximation (O(1) per draw; duplicates are redrawn), each mapped to a
//            feature id by a keyed bijection, so frequency is not monotone in id; index = id + 1.
//            With FeatureOrder::kFrequency the written index is rank + 1 instead (the most
//            frequent feature first) and each row is re-sorted by it: the same rows, labels and
//            values as the scattered data, relabelled;
//   values   1, except on "real" features (a hashed real_fraction of ids): k/1000, k in [1, 1000];
//   label    planted rule on the row, then flipped with probability noise.
// Planted rules (weights w_k[rank] ~ N(0, 1) hashed from the seed for the signal_features most
// frequent ranks, 0 for the rest, so the rule is learnable from the data):
//   linear    +1 iff w·x ≥ θ;
//   polytope  −1 iff w_k·x < θ for all K faces (the negative class is a convex polytope).
// θ is the quantile of the rule's score on a fixed calibration sample that makes the noiseless
// positive rate q = (positive_fraction − noise) / (1 − 2 noise), so labels are positive_fraction
// positive after noise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "engine/random.h"
#include "io/text_writer.h"

namespace polymargin::io {

/// Top 53 bits of a random 64-bit word as a double in [0, 1).
inline double unit_interval(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

enum class PlantedModelKind { kLinear, kPolytope };

/// How feature ids relate to feature frequency: kScattered (ids by a keyed bijection of the
/// frequency ranks, as hashed or arbitrarily numbered features are) or kFrequency (id = rank: the
/// most frequent features first, as ids given in order of first appearance mostly are).
enum class FeatureOrder { kScattered, kFrequency };

/// "scattered" | "frequency" → FeatureOrder; throws UsageError otherwise.
FeatureOrder parse_feature_order(const std::string& text);
/// The name parse_feature_order accepts.
std::string feature_order_name(FeatureOrder order);

/// "linear" | "polytope" → PlantedModelKind; throws UsageError otherwise.
PlantedModelKind parse_planted_model(const std::string& text);
/// The name parse_planted_model accepts.
std::string planted_model_name(PlantedModelKind kind);

/// Everything that determines the generated data (together with the stream and row number).
struct GeneratorSpec {
  std::uint64_t rows = 8'407'752;
  std::uint64_t features = 20'216'830;
  double nnz = 36.0;           // mean non-zeros a row (before the max_nnz cap)
  double nnz_sigma = 0.55;     // log-normal shape of row lengths
  std::uint32_t max_nnz = 0;   // 0: min(features, 8 × nnz)
  double zipf_exponent = 1.0;  // feature frequency ∝ rank^-s
  double real_fraction = 0.1;  // share of features with real values in (0, 1]
  double positive_fraction = 0.85;
  PlantedModelKind model = PlantedModelKind::kLinear;
  int faces = 5;                      // polytope faces K
  double noise = 0.05;                // label flip probability
  std::uint64_t signal_features = 0;  // 0: min(features, max(1000, features / 200))
  FeatureOrder feature_order = FeatureOrder::kScattered;
  std::uint64_t seed = 1;
};

/// Most rows a spec may ask for (2^40).
inline constexpr std::uint64_t kMaxRows = std::uint64_t{1} << 40;

/// Statistics of a named data set: "kdda" (KDD Cup 2010 algebra). Throws UsageError otherwise.
GeneratorSpec generator_preset(const std::string& like);
/// Throws UsageError naming the first invalid field.
void validate_spec(const GeneratorSpec& spec);

/// Row streams of one spec: same planted model, independent rows.
inline constexpr std::uint64_t kTrainStream = 0;
inline constexpr std::uint64_t kTestStream = 1;

/// Keyed bijection of [0, n): three rounds of xor-key, odd multiply and xorshift on the smallest
/// power-of-two domain, cycle-walked back into [0, n). O(1): under 2 steps per call on average.
class FeaturePermutation {
 public:
  FeaturePermutation(std::uint64_t n, std::uint64_t key);
  /// The id of `rank` (< n).
  std::uint32_t forward(std::uint32_t rank) const;
  /// The rank of `id` (< n).
  std::uint32_t inverse(std::uint32_t id) const;
  /// n, the size of the permuted range.
  std::uint64_t size() const { return n_; }
  /// Bits of the power-of-two domain (ids are < 2^bits).
  int bits() const { return bits_; }

 private:
  std::uint64_t step(std::uint64_t x) const;
  std::uint64_t unstep(std::uint64_t x) const;
  static constexpr int kRounds = 3;
  std::uint64_t n_;
  int bits_;
  int shift_;
  std::uint64_t mask_;
  std::uint64_t keys_[kRounds];
  std::uint64_t multipliers_[kRounds];
  std::uint64_t inverses_[kRounds];
};

/// The hidden rule: K = 1 (linear) or K faces of weights over the signal ranks, and θ. Refers to
/// its Generator's permutation: valid while that Generator lives.
class PlantedModel {
 public:
  PlantedModel() = default;
  PlantedModel(const GeneratorSpec& spec, const FeaturePermutation& permutation);

  /// The rule's score of entries given by rank and value (values == nullptr: all ones).
  double score_ranks(const std::uint32_t* ranks, const float* values, std::size_t n) const;
  /// The rule's score of row r of `rows` (raw 1-based indices as generated; others weigh 0): w·x
  /// for linear, max_k w_k·x for polytope; positive iff score ≥ threshold().
  double score(const CsrView& rows, std::size_t r) const;
  /// The noiseless label (+1 / −1) of row r.
  float noiseless_label(const CsrView& rows, std::size_t r) const;

  int faces() const { return faces_; }
  double threshold() const { return threshold_; }
  void set_threshold(double threshold) { threshold_ = threshold; }

  /// Most faces a polytope may have.
  static constexpr int kMaxFaces = 64;

 private:
  // Adds each entry's weights into acc[0..faces) and returns max_k acc[k].
  template <typename RankOf>
  double max_face_score(std::size_t n, const RankOf& rank_of, const float* values) const;

  int faces_ = 1;
  std::uint64_t signal_ = 0;
  std::vector<float> weights_;  // faces × signal, by rank
  double threshold_ = 0;
  const FeaturePermutation* permutation_ = nullptr;
  bool ids_are_ranks_ = false;  // FeatureOrder::kFrequency: a written index is rank + 1
};

/// Generates rows of a spec. Immutable after construction; generate_rows is thread-safe.
class Generator {
 public:
  /// Validates the spec, builds the planted model and calibrates its threshold.
  explicit Generator(const GeneratorSpec& spec);
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  /// Appends rows [first, first + count) of `stream` to `out` (with explicit values when the spec
  /// has real features).
  void generate_rows(std::uint64_t stream, std::uint64_t first, std::uint64_t count,
                     CsrBuffer& out) const;

  const GeneratorSpec& spec() const { return spec_; }
  const PlantedModel& model() const { return model_; }
  const FeaturePermutation& permutation() const { return permutation_; }
  /// Largest raw index that can occur (= features, indices being 1-based).
  std::uint32_t max_index() const { return static_cast<std::uint32_t>(spec_.features); }

 private:
  struct Scratch;
  // Draws the content of one row (ids, ranks, values) into `scratch` and returns its rule score.
  double draw_row(SplitMix64& rng, Scratch& scratch) const;
  // Zipf rank of a uniform deviate.
  std::uint32_t zipf_rank(double u) const;
  double calibrate_threshold() const;

  GeneratorSpec spec_;
  FeaturePermutation permutation_;
  PlantedModel model_;
  std::uint32_t max_nnz_;
  double log_mean_;         // mu of the log-normal row length
  double zipf_log_n1_;      // ln(features + 1), exponent 1
  double zipf_scale_;       // (features + 1)^(1 - s) − 1, other exponents
  std::uint64_t real_key_;  // id is real iff unit_interval(SplitMix64(id ^ real_key_)) < fraction
};

/// One block of generated rows on its way through generate_stream.
struct GenBlock {
  std::uint64_t index = 0;      // block number within the stream
  std::uint64_t first_row = 0;  // row number of its first row
  CsrBuffer rows;
  EncodedText text;  // filled by the caller's parallel stage, if it has one
};

struct GenRunOptions {
  std::uint32_t block_rows = 4096;  // rows a parallel task generates
  int threads = 0;                  // 0: all hardware threads
};

struct GenStats {
  std::uint64_t rows = 0;
  std::uint64_t nnz = 0;
  std::uint64_t positives = 0;
  std::uint32_t max_index = 0;   // largest raw index written
  std::uint64_t text_bytes = 0;  // LIBSVM text produced (generate_text only)
  std::uint64_t file_bytes = 0;  // bytes written, after compression (generate_text only)
  double seconds = 0;
};

using GenBlockFn = std::function<void(GenBlock& block)>;

/// Generates rows [0, rows) of `stream` in blocks, in parallel (a oneTBB pipeline with a fixed
/// number of recycled blocks in flight): `transform` runs on each block on any thread (may be
/// empty), then `consume` serially in block order.
GenStats generate_stream(const Generator& generator, std::uint64_t stream, std::uint64_t rows,
                         const GenRunOptions& run, const GenBlockFn& transform,
                         const GenBlockFn& consume);

/// Generates rows [0, rows) of `stream` into a LIBSVM text file (compression by its name; "-" for
/// standard output). Formatting and compression run in parallel; bytes do not depend on threads.
GenStats generate_text(const Generator& generator, std::uint64_t stream, std::uint64_t rows,
                       const std::string& path, const GenRunOptions& run);

}  // namespace polymargin::io
