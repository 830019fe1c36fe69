// Linear Large Margin Distribution Machine trained by averaged SGD (Zhang & Zhou, KDD 2014, §3.2.2,
// Algorithm 2), with the SVM (λ1 = λ2 = 0) as a special case. Specification: docs/algorithms.md §1
// (section numbers below refer to it).
//
// Objective (paper eq. 14, divided by mC — §1.1; same minimiser, η0 ≈ O(1) independent of m):
//   F(w) = (λ/2)‖w‖² + 2λ1'·Var(γ) − λ2'·mean(γ) + (1/m) Σ_i [1 − γ_i]_+ ,
//   γ_i = y_i wᵀx_i,  λ = 1/(mC),  λ1' = λ1/(mC),  λ2' = λ2/(mC).
// (The paper's margin variance γ̂ = (1/m²) Σ_ij (γ_i − γ_j)² is 2·Var(γ).)
//
// Stochastic gradient (Theorem 2, eq. 15, in scalar-times-x_i form — §1.2): for i, j drawn
// independently with uniform marginals,
//   ∇̂F(w; i, j) = λw + φ·x_i,  φ = y_i (4λ1'(γ_i − γ_j) − λ2' − 1[γ_i < 1]),
// so x_j only enters through the scalar γ_j and a step costs O(nnz_i + nnz_j).
//
// Update (eq. 17 plus averaging, §1.3), t = 0-based step:
//   η_t = η0 (1 + λη0 t)^(−3/4)          (Xu 2011 as in Bottou's ASGD; η0 calibrated, §1.5)
//   w  ← (1 − λη_t) w − η_t φ x_i        (φ from both scores at the pre-step w)
//   w̄ ← w̄ + μ_t (w − w̄),  μ_t = 1 for t ≤ t0, else 1/(1 + t − t0),  t0 = avg_start_epochs·m
// so that w̄ = mean of the iterates after steps t0+1 … T (the paper's w̄_t).
//
// Scaled representation (§1.4), the invariants every method keeps:
//   w = W / a,   w̄ = (A + b·W) / c,   a, c ≥ 1 (finite), W and A dense double arrays.
// The decay is a ← a/(1 − λη_t) (O(1)), the gradient step W += δx_i with δ = −η_t φ a, and the
// averaging A −= b·δ·x_i, c ← c/(1 − μ_t), b ← b + μ_t c/a (O(nnz_i)). While μ_t = 1 the average
// equals w: b = 1, c = a and A is only *flagged* zero (zeroed once, O(d), at the first averaged
// step; LDM-ref's per-step reset is O(d·t0)). When a or c exceeds renorm_threshold everything is
// folded back (A ← w̄, W ← w, a = c = 1, b = 0; O(d), O(log T) times per run).
//
// Sampling (§1.2): the driver delivers each epoch as windows of already-shuffled rows; within a
// window row k is i at step k and j is either the next row (Pairing::kNextRow, the default: the
// shuffle makes it a random other row, and its weights stay in cache for the next step) or drawn
// by a second seeded permutation of the window (kPermutation, LDM-ref's two permutations; i, j
// independent, j = i possible). Either way every row is once i and once j per epoch.
//
// Optional bias (§6): a constant feature of value B appended to every row, regularised like the
// weights; it lives in the last slot of W and A.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <vector>

#include "engine/csr.h"
#include "engine/linear_model.h"
#include "engine/sparse.h"

namespace polymargin::engine {

/// Default trade-offs. The paper's λ1, λ2 weight *means* (γ̂, γ̄) while C weights a *sum* of hinge
/// losses, so a fixed λ fades as m grows (at the paper's λ ≤ 2^-2, C ≥ 10 and m ≥ 10^4, LDM is the
/// SVM to 5 digits). The defaults therefore fix the scale-free ratios λ1' = λ1/(mC) and
/// λ2' = λ2/(mC), the coefficients of F below, and are resolved to paper units once m is known.
///
/// Choosing λ1, λ2, C. Grid: C ∈ {0.03, 1, 10, 100}, λ1' ∈ {1e-5, 1e-4, 1e-3}, λ2' ∈ {1e-3, 3e-3,
/// 1e-2, 3e-2}, bias off/on, 5-fold CV on the training data; test accuracy over seeds 1-5 with
/// --scale maxabs, 5 epochs:
// clang-format off
///   setting                                  test accuracy
///   defaults: C 10,   λ1' 1e-4, λ2' 3e-3     a9a .849-.850, ijcnn1 .924-.928, w8a (half) .983-.984
///   a9a:      C 0.03, λ1' 1e-4, λ2' 1e-2     .8505-.8511 (CV is flat here, .848-.849 for every
///                                            setting; C 0.03 was picked with the test set in view)
///   ijcnn1:   C 1,    λ1' 1e-4, λ2' 3e-2     .9286-.9290 (CV's best)
///   w8a:      C 10,   λ1' 1e-4, λ2' 1e-3, B 1  .9859-.9871 (CV's best; the bias matters: 97% −1)
// clang-format on
/// A λ2' that helps ijcnn1 (the margin mean pays there) hurts w8a, so no single setting is best.
inline constexpr double kDefaultC = 10;
inline constexpr double kDefaultLambda1Rel = 1e-4;  // λ1/(mC)
inline constexpr double kDefaultLambda2Rel = 3e-3;  // λ2/(mC)

/// Epochs of `train` when --epochs is not given: 5, but at least this many SGD steps, so a small
/// set gets more passes (the CPM's rule, kCpmDefaultMinSteps). At 5 epochs a UCI half split of
/// 90-500 rows got 450-2,500 steps and the averaged iterate had not settled. Measured on 19 binary
/// UCI sets, 3 seeded half splits each (docs/accuracy.md, "A step floor for the LDM and the SVM"):
/// mean test accuracy of the defaults 0.7900 → 0.7994 for the LDM and 0.7909 → 0.7992 for the SVM
/// (20,000 steps gave the same within 0.001). From 10,000 rows up it changes nothing.
inline constexpr std::uint64_t kLdmDefaultMinSteps = 50000;
inline constexpr int kLdmDefaultEpochs = 5;

/// The step floors (kLdmDefaultMinSteps, the CPM's kCpmDefaultMinSteps) are bounded by work too:
/// the floor's steps read at most this many non-zeros (a second or a few of SGD), each step one
/// row. Without the bound, 4 rows of which one has 5.8 M non-zeros got 12,500 epochs (72 G
/// non-zero operations); with it, 173. Data whose rows average fewer than 20,000 non-zeros (every
/// set the floor was measured on) keep the floor whole.
inline constexpr double kFloorMaxNonZeros = 1e9;

/// The steps a floor of `min_steps` asks for on data of `rows` rows and `nnz` non-zeros: min_steps,
/// or as many rows as kFloorMaxNonZeros non-zeros make (at least 1) when that is fewer.
inline std::uint64_t floor_steps(std::uint64_t min_steps, std::uint64_t rows, std::uint64_t nnz) {
  if (rows == 0 || nnz == 0) return min_steps;
  const double affordable =
      kFloorMaxNonZeros * static_cast<double>(rows) / static_cast<double>(nnz);
  if (affordable >= static_cast<double>(min_steps)) return min_steps;
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(affordable));
}

inline int ldm_default_epochs(std::uint64_t rows, std::uint64_t nnz = 0) {
  const std::uint64_t m = rows > 0 ? rows : 1;
  const std::uint64_t steps = floor_steps(kLdmDefaultMinSteps, rows, nnz);
  return static_cast<int>(std::max<std::uint64_t>(kLdmDefaultEpochs, (steps + m - 1) / m));
}

/// How step k of a window picks its second row j (x_j enters only through its score s_j, §1.2).
/// Either way each row of the shuffled window is i once and j once, so the marginals are uniform.
///   kNextRow: j = the next row of the shuffled window (the last row takes the first). The next
///     step's x_i is this step's x_j, so its weight lines are still in cache: a step brings in the
///     lines of one row, not two — at KDD size, where every weight access misses, that is most of
///     the cost of a step.
///   kPermutation: j from a seeded permutation of the window, independent of i (LDM-ref's two
///     permutations); each step fetches the lines of two rows.
enum class Pairing { kNextRow, kPermutation };

/// Hyper-parameters of one training run (paper names; λ1 = λ2 = 0 is the hinge-loss SVM).
struct LdmConfig {
  std::optional<double> lambda1;  // weight of the margin variance γ̂; unset: kDefaultLambda1Rel·m·C
  std::optional<double> lambda2;  // weight of the margin mean γ̄; unset: kDefaultLambda2Rel·m·C
  double c = kDefaultC;           // weight of the hinge loss
  int epochs = 5;                 // T of Algorithm 2: T·m steps
  int avg_start_epochs = 2;       // t0 = avg_start_epochs·m (LDM-ref: 2)
  double eta0 = 0;                // initial step; ≤ 0: calibrated on a sample (§1.5)
  double bias = 0;                // B of the constant feature; 0: no bias
  std::uint64_t seed = 1;         // pairing permutations and calibration sample
  double renorm_threshold = 1e5;  // fold a, c back to 1 above this (lower it only in tests)
  Pairing pairing = Pairing::kNextRow;

  /// Throws UsageError naming the first invalid value.
  void validate() const;
  /// This configuration with unset λ1, λ2 replaced by their defaults for m training rows.
  LdmConfig resolved(std::uint64_t m) const;
  bool hinge_only() const { return lambda1 == 0.0 && lambda2 == 0.0; }
  /// "svm" when hinge_only(), else "ldm".
  const char* algorithm() const { return hinge_only() ? "svm" : "ldm"; }
};

/// Running sums over margins γ = y·score: enough for F's data terms, the margin mean and variance,
/// and the accuracy.
struct MarginStats {
  std::uint64_t rows = 0;
  std::uint64_t correct = 0;  // predicted +1 iff score > 0 (so a zero score is right for y = −1)
  double sum = 0;
  double sum_sq = 0;
  double hinge = 0;  // Σ [1 − γ]_+

  /// y = ±1.
  void add(double y, double score) {
    const double margin = y * score;
    ++rows;
    correct += (score > 0) == (y > 0);
    sum += margin;
    sum_sq += margin * margin;
    hinge += margin < 1 ? 1 - margin : 0;
  }
  double mean() const { return rows ? sum / rows : 0; }
  /// Var(γ) = mean(γ²) − mean(γ)² (the paper's γ̂ is twice this); at least 0, which rounding of
  /// nearly equal margins can cross.
  /// Infinite when the squares overflow (never 0 from inf − inf).
  double variance() const {
    if (!rows) return 0;
    const double v = sum_sq / rows - mean() * mean();
    return std::isnan(v) ? std::numeric_limits<double>::infinity() : std::max(0.0, v);
  }
  double accuracy() const { return rows ? static_cast<double>(correct) / rows : 0; }
};

/// φ of Theorem 2 (§1.2): the stochastic gradient is λw + φ·x_i. lambda1p, lambda2p are λ1', λ2'.
inline double ldm_phi(double y_i, double margin_i, double margin_j, double lambda1p,
                      double lambda2p) {
  return y_i * (4 * lambda1p * (margin_i - margin_j) - lambda2p - (margin_i < 1 ? 1.0 : 0.0));
}

/// η_t = η0 (1 + λη0 t)^(−3/4), with x^(3/4) as sqrt(x·sqrt(x)) (cheaper than pow, same in every
/// caller).
double ldm_step_size(double eta0, double lambda, std::uint64_t t);

/// μ_t = 1 for t ≤ t0, else 1/(1 + t − t0).
inline double ldm_average_rate(std::uint64_t t, std::uint64_t t0) {
  return t <= t0 ? 1.0 : 1.0 / static_cast<double>(1 + t - t0);
}

/// F of §1.1 from the margins of all rows and ‖w‖² (bias weight included: it is regularised), with
/// the trainer-form coefficients λ = 1/(mC), λ1' = λ1/(mC), λ2' = λ2/(mC).
double ldm_objective(double lambda, double lambda1p, double lambda2p, const MarginStats& margins,
                     double norm2);

/// The whole mutable state of a trainer: plain arrays and scalars, so that it can be checkpointed
/// or all-reduced. See the invariants at the top of this file.
struct LdmState {
  static constexpr std::size_t kStride = 2;  // doubles per feature slot in wa
  // W and A interleaved, W_f = wa[2f], A_f = wa[2f + 1], for f = 0 … max_index + 1 (the last slot
  // is the bias feature): the averaging update of A_f then hits the cache line that the dot just
  // loaded for W_f, so a step after t0 costs no more misses than one before (ldm_bench: ×2 after
  // t0).
  sparse::WeightVector wa;
  bool avg_is_zero = true;  // A is conceptually 0 (and b = 1, c = a): w̄ = w
  double a = 1, b = 1, c = 1;
  std::uint64_t t = 0;        // steps done
  std::uint64_t rng = 0;      // SplitMix64 state of the pairing permutations
  double eta0 = 0;            // effective η0 (0 until calibrated)
  std::uint64_t renorms = 0;  // renormalisations done
};

/// Averaged-SGD trainer of the linear LDM. One learn() per window of rows; not thread-safe (one
/// trainer, one thread: results never depend on the reader's thread count).
class LdmTrainer {
 public:
  /// m: rows per epoch; max_index: largest raw feature id (W gets max_index + 1 slots + bias).
  LdmTrainer(const LdmConfig& config, std::uint64_t m, std::uint32_t max_index, LabelMap labels);

  /// Calibrates η0 (§1.5) on min(1000, m) seeded pairs of `sample`'s rows, unless the config fixes
  /// it; learn() calls this on its first batch when the driver has not. Returns the η0 used.
  double calibrate(const CsrView& sample);

  /// One step per row of the window (row k is i; j as config().pairing says).
  /// Throws NumericalError, naming step and epoch, on a non-finite score.
  void learn(const CsrView& batch);

  /// Steps with explicit pairs: step k uses rows i_rows[k] (k itself when i_rows is null) and
  /// j_rows[k] of `rows`. For drivers with their own pairing, and for tests.
  void learn_pairs(const CsrView& rows, const std::uint32_t* i_rows, const std::uint32_t* j_rows,
                   std::size_t steps);

  /// Adds the margins of `rows` under the current average w̄ (O(nnz), no renormalisation needed).
  void add_margins(const CsrView& rows, MarginStats& margins) const;

  /// Margins of the rows learnt since the last call, each taken at its pre-step w (progressive
  /// validation: an almost free running estimate of F's data terms and of the accuracy).
  MarginStats take_progress();

  /// ‖w̄‖² including the bias weight (O(d)).
  double averaged_norm2() const;
  /// F(w̄) given the margins of all m rows under w̄ (add_margins); O(d) for ‖w̄‖².
  double objective(const MarginStats& margins) const;

  /// w = W/a and w̄ = (A + bW)/c as dense vectors (max_index + 2 entries, bias last). O(d).
  std::vector<double> weights() const;
  std::vector<double> averaged_weights() const;

  /// Renormalises and returns w̄ as a model. With `maxabs` (the per-feature max |x| the reader
  /// divided by), the scaling is folded into the weights, so the model scores raw rows.
  LinearModel finish(const std::vector<float>* maxabs = nullptr);

  /// finish() that frees W and A (the bulk of the trainer's memory) while copying w̄ out, so the
  /// peak stays at W + A and a final pass and the model write hold only the model. objective()
  /// keeps working from ‖w̄‖² taken first; learning afterwards throws std::logic_error.
  LinearModel finish_and_release(const std::vector<float>* maxabs = nullptr);

  /// Effective configuration, data size and run state as JSON (stored in the model).
  nlohmann::json describe() const;

  // --- Checkpoints and warm starts (cli/linear_checkpoint.h) ---------------------------------
  /// The progressive margins gathered since the last take_progress() (part of a checkpoint).
  const MarginStats& progress() const { return progress_; }
  /// Replaces the run state by a checkpoint's: `state.wa` must have the size this trainer's
  /// feature space gives (std::invalid_argument otherwise), or be empty to keep the trainer's W
  /// and A (a checkpoint read straight into them, weights_to_restore). Learning then continues
  /// exactly as the run that wrote the checkpoint would have.
  void restore(LdmState state, const MarginStats& progress, bool eta0_clamped);
  /// W and A, writable: where a checkpoint's are read to before restore() (held once, not twice).
  std::span<double> weights_to_restore() { return {state_.wa.data(), state_.wa.size()}; }
  /// Sets the starting point w (before the first step; w.size() ≤ max_index + 1 raw slots, the
  /// rest start at zero) and the bias weight. The step-size schedule and averaging then run as
  /// from w = 0: t = 0, averaging from t0. Call calibrate() first (it needs w = 0).
  void warm_start(std::span<const double> w, double bias_weight);

  /// Where each feature id's weights live, for rows whose ids the reader renumbered with the same
  /// table (io::ReadOptions::renumber): id f < slot_of.size() in slot slot_of[f] (a permutation of
  /// [0, slot_of.size())), a larger id in its own. Everything the trainer takes or gives stays in
  /// feature ids (warm_start, weights(), averaged_weights(), finish(), the final ‖w̄‖², summed in
  /// feature order), so the model is byte for byte the one the rows as stored give. Set before
  /// the first step; `slot_of` must outlive the trainer.
  void set_feature_slots(std::span<const std::uint32_t> slot_of) { slot_of_ = slot_of; }

  /// The configuration in force, λ1 and λ2 resolved.
  const LdmConfig& config() const { return config_; }
  const LdmState& state() const { return state_; }
  double eta0() const { return state_.eta0; }
  bool eta0_clamped() const { return eta0_clamped_; }

 private:
  template <bool kHingeOnly, bool kValues>
  void run(const CsrView& rows, const std::uint32_t* i_rows, const std::uint32_t* j_rows,
           std::size_t steps);
  void renormalise();
  LinearModel build_model(const std::vector<float>* maxabs, bool release);
  /// Hands push(slot, w̄ of the slot) every feature slot in order, freeing W and A a chunk at a
  /// time behind it when `release` (after renormalise()).
  template <class Push>
  void copy_out(bool release, Push push);
  /// Slots sorted ascending → the same slots in the order of their feature ids (set_feature_slots).
  void in_feature_order(std::vector<std::uint32_t>& slots) const;
  /// F_S after S calibration steps with initial step eta (w restarts from 0; +∞ if non-finite).
  double calibration_cost(const CsrView& sample, double eta);
  double clamp_eta0(double eta0);
  [[noreturn]] void diverged(std::uint64_t t, const char* what) const;
  std::size_t slot(std::size_t f) const { return f < slot_of_.size() ? slot_of_[f] : f; }

  friend class LdmReplicas;  // averages replicas' states in place (engine/ldm_replicas.h)

  LdmConfig config_;
  std::uint64_t m_;
  std::uint32_t bias_slot_;  // = max_index + 1
  LabelMap labels_;
  double lambda_, lambda1p_, lambda2p_;
  std::uint64_t t0_;
  bool eta0_clamped_ = false;
  LdmState state_;
  MarginStats progress_;
  std::vector<std::uint32_t> pairing_;  // per-window j of each step, reused
  // Calibration sample: pair rows and the sorted distinct features they touch (reset after each
  // trial run, so the trainer's W stays zero without an O(d) clear).
  std::vector<std::uint32_t> sample_i_, sample_j_, sample_features_;
  std::optional<double> released_norm2_;  // ‖w̄‖² at finish_and_release()
  std::span<const std::uint32_t> slot_of_;  // set_feature_slots(); empty: slot = feature id
};

}  // namespace polymargin::engine
