// Training the Convex Polytope Machine (Kantchelian et al., NIPS 2014; docs/algorithms.md §2; the
// model, its faces and its decision are engine/cpm_model.h). Trained by SGD on problem (6) in
// unconstrained form,
//   min_W  Σ_{inner} Σ_k c₋ [1 + W_k x + b_k]_+  +  Σ_{outer} c₊ [1 − W_z(x) x − b_z(x)]_+  +  λ_s
//   ‖(W, b)‖²
// with Pegasos steps η_t = 1/(λ_s (t + 2)), λ_s = 1/(C·T), shrink after the gradient step, costs
// c₋ = r/(1 + r), c₊ = 1/(1 + r), regularised intercepts, W = b = 0 at the start, and the face z(x)
// of an outer example chosen by ASSIGN (engine/cpm_assign.h). The last iterate is the model.
// The two sides of a double-sided CPM and the machines of a one-vs-one one train independently.
//
// Sparse form (§2.3): every face shares one shrink factor σ_t = 1/(t + 1) (exact, closed form), so
// the trainer stores U = W/σ feature-major (U[f·K + k]: one row's scores read K contiguous values
// per non-zero) and an update is O(K·nnz). U grows like C·T, so increments are rounded against a
// large accumulator: U is double when memory allows and float otherwise (CpmPrecision).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cpm_model.h"
#include "engine/csr.h"
#include "engine/replicas.h"

namespace polymargin::engine {

class AssignHistory;  // engine/cpm_assign.h

enum class CpmSides { kDouble, kOuterPositive, kOuterNegative };
enum class CpmPrecision { kDouble, kFloat };

struct CpmConfig {
  int faces = 10;                  // K
  std::uint64_t iterations = 0;    // T, SGD steps per side; 0: epochs × the side's rows
  double epochs = 0;               // used when iterations == 0
  std::uint64_t min_iterations = 0;  // with epochs: T at least this many steps per side
  // With min_iterations: λ_s = 1/(C·epochs·rows), that of the epochs' T, however many steps the
  // floor adds (they converge further instead of weakening the regulariser); -c auto sets it.
  bool lambda_of_epochs = false;
  double c = 1e-2;                 // C: λ_s = 1/(C·T)
  double perplexity = 1;           // P ∈ [1, K]: ASSIGN's entropy floor h = ln P nats; 1: off
  double cost_ratio = 1;           // r: c₋ = r/(1 + r), c₊ = 1/(1 + r), per side's own classes
  CpmSides sides = CpmSides::kDouble;
  std::uint64_t seed = 1;
  int hash_bits = 0;               // 0: no hashing
  CpmPrecision precision = CpmPrecision::kDouble;

  /// Throws UsageError naming the bad field (K < 1, C ≤ 0, P outside [1, K], ...).
  void validate() const;
  nlohmann::json json() const;
};

/// C of `train --algo cpm` when none is given: 3/√m within [0.01, 1] for m training rows. The
/// regulariser is λ = 1/(C·T) with T = epochs × m, so λ = 1/(3·epochs·√m): it shrinks as 1/√m, the
/// rate at which the estimation error of a linear rule shrinks, rather than as 1/m (a fixed C),
/// which under-regularises nothing at KDD size but over-regularises small sets. Measured
/// (docs/accuracy.md, "Defaults"): 0.017 on a9a (32 k rows, where 0.01 is the paper's best), 0.07
/// to 0.3 on the UCI sets, 0.01 (the clamp) at KDD size. Where kCpmDefaultMinSteps raises T above
/// epochs × m, λ stays that of epochs × m (CpmConfig::lambda_of_epochs): on 19 binary UCI sets the
/// floor's extra steps had weakened λ up to 37-fold (docs/accuracy.md, "The CPM's λ under the
/// step floor").
/// T of `train --algo cpm` when neither --epochs nor --iterations is given: 10 epochs, but at
/// least this many steps per side. On a small set 10 epochs are a few thousand steps, too few for
/// the faces to settle (docs/accuracy.md, "Defaults": on 8 UCI sets the mean test accuracy went
/// from 0.681 to 0.750). From 5,000 rows a side up it changes nothing.
inline constexpr std::uint64_t kCpmDefaultMinSteps = 50000;

inline double cpm_default_c(std::uint64_t rows) {
  const double c = 3 / std::sqrt(static_cast<double>(rows > 0 ? rows : 1));
  return c < 0.01 ? 0.01 : c > 1 ? 1 : c;
}

/// What the trainer needs to know of the data before the first row.
struct CpmProblem {
  std::uint32_t max_index = 0;
  std::vector<std::pair<double, std::uint64_t>> label_counts;  // ascending labels, rows each
};

/// Bytes the trainer holds: U of every side, the per-face state and the ASSIGN histories. A model
/// saved from export_weights (as `train` does) needs nothing more; finish() adds one side's float
/// model at a time (it gives each side's U back once that side's model is built).
std::uint64_t cpm_training_bytes(const CpmConfig& config, const CpmProblem& problem,
                                 CpmPrecision precision);
std::string sides_name(CpmSides sides);

/// Trains every side of every machine on the same stream of batches: learn() runs the sides in
/// parallel (oneTBB), each over its own rows of the batch in its own seeded order, so the result
/// depends on the data, the configuration and the seed only, never on the thread count.
class CpmTrainer {
 public:
  /// Allocates every side's U and maps all of its pages, in parallel over the caller's task arena
  /// (run it inside an arena of --threads threads).
  CpmTrainer(const CpmConfig& config, const CpmProblem& problem);
  ~CpmTrainer();
  CpmTrainer(const CpmTrainer&) = delete;
  CpmTrainer& operator=(const CpmTrainer&) = delete;

  /// One batch (e.g. a reader window). Sides that have made their T steps skip it. With `spare`,
  /// a thread with no side left to train calls it until it returns false (io::SpareWork: the
  /// reading of the next batch) instead of waiting for the other sides.
  void learn(const CsrView& batch, const std::function<bool()>& spare = {});
  /// True once every side has made its T steps (a replica: its steps of the interval).
  bool done() const;
  /// A replica's: true once the steps of all replicas, counted at the last average, reach T on
  /// every side; the same in every replica (one with no steps left in its interval is not done
  /// with the run while others make theirs).
  bool run_done() const;

  const CpmConfig& config() const { return config_; }
  bool multiclass() const;
  /// Per side (machines × sides, in order): its T, steps made, and rows of its two classes.
  struct SideStatus {
    std::uint64_t iterations = 0, steps = 0, rows = 0, outer_rows = 0, updates = 0;
    std::uint64_t run_steps = 0;  // a replica's: the steps of all replicas (engine/cpm_replicas.h)
    double seconds = 0;  // time spent in this side's steps
    double assignment_entropy = 0;  // of the assignment counts (nats)
    std::uint64_t assignments = 0;  // entries counted: distinct outer rows with an entropy floor
                                    // (its history), outer-row steps without one
    std::uint64_t adjusted = 0;     // ASSIGN picks that differed from the natural face
    // Progressive estimates of the run (not of a checkpoint's steps before it): steps whose row
    // was misclassified before the step learnt from it, and their hinge loss max(0, 1 − y·max_k
    // s_k) summed. A replicated run's lead holds all replicas' after an average.
    std::uint64_t mistakes = 0;
    double hinge = 0;
    // The objective's data term at the same pre-step scores, summed over those steps: an outer
    // row's c₊ [1 − s_z]_+ at the face ASSIGN gave it, an inner row's c₋ Σ_k [1 + s_k]_+.
    double loss = 0;
  };
  std::vector<SideStatus> status() const;
  /// Per side, the objective's regulariser at the current weights, (λ_s/2) ‖(W, b)‖²: kept up to
  /// date by the steps from their scores (exact up to rounding and to hash collisions within a
  /// row), counted afresh after an average or a restore.
  std::vector<double> penalties() const;

  /// The current weights W = σ·U of a side (slots × K, feature-major) and its intercepts, in
  /// double: what the step-by-step tests compare.
  std::vector<double> weights(std::size_t side) const;
  std::vector<double> intercepts(std::size_t side) const;

  /// Sides (machines × sides per machine) and batches learnt so far: a batch's number seeds each
  /// side's row order in it.
  std::size_t sides() const { return sides_.size(); }
  std::uint64_t batches() const { return batches_; }

  /// A side's learner state besides U, as plain arrays and scalars: with U and the batch count,
  /// everything the next batches depend on (a checkpoint's content).
  struct SideState {
    std::uint64_t steps = 0, updates = 0, adjusted = 0;
    std::uint64_t run_steps = 0;  // a replica's: the steps of all replicas at the last average
    double seconds = 0;
    std::vector<double> intercept_sums;       // B = b/σ per face (exact for float sides too)
    std::vector<std::int64_t> face_counts;    // ASSIGN's n_k
    std::uint64_t history_capacity = 0;       // slots of the UNADJ table
    std::vector<std::uint64_t> history_keys;  // its entries: row key → last natural face
    std::vector<std::int32_t> history_faces;
  };
  /// With `history` false the ASSIGN entries are left out (history_keys/faces empty): a
  /// checkpoint takes them a chunk at a time from side_history instead of as a copy.
  SideState side_state(std::size_t side, bool history = true) const;
  /// A side's ASSIGN history (UNADJ), valid until finish().
  const AssignHistory& side_history(std::size_t side) const;
  /// U of a side as bytes: slots × K accumulators in config().precision (8 or 4 bytes each), for
  /// writing without a copy. Valid until finish().
  std::string_view side_weights(std::size_t side) const;
  /// The same bytes, writable: where a checkpoint's U is read straight to before restore() (which
  /// then takes a view of them, side_weights, as in place). Valid until finish().
  std::span<char> side_weights_to_restore(std::size_t side);
  /// Continues a run from its saved state (`sides` and `weights` one per side, as side_state and
  /// side_weights gave them; a view of the trainer's own U is taken as already in place): the
  /// following batches give what they gave the saved trainer, bit
  /// for bit. std::invalid_argument when a size or count does not fit this trainer (which is then
  /// not to be used: sides checked before the misfit may be restored already).
  void restore(std::uint64_t batches, const std::vector<SideState>& sides,
               const std::vector<std::string_view>& weights);

  /// The model (weights rounded to float); `maxabs` (or nullptr) is stored for raw-data scoring.
  /// Gives each side's U back as soon as its model is built: the trainer cannot learn afterwards.
  CpmModel finish(const std::vector<float>* maxabs);
  /// The model as finish() gives it but with every side's weights left empty (slots and faces
  /// set): for writing the weights straight from U with export_weights. The trainer is unchanged.
  CpmModel model_without_weights(const std::vector<float>* maxabs) const;
  /// Floats [first, first + out.size()) of side `side`'s model weights W = σU (feature-major, as
  /// CpmFaces::weights), rounded to float: a model file is written a chunk at a time from U, with
  /// no second copy of the weights in memory.
  void export_weights(std::size_t side, std::uint64_t first, std::span<float> out) const;
  /// Gives side `side`'s U (and ASSIGN history) back: it cannot learn or export afterwards.
  void release_weights(std::size_t side);

  /// Data parallelism (engine/cpm_replicas.h): this trainer becomes replica `global` of `total`.
  /// Each side then makes, in each interval between averages, a step for each of its rows while T
  /// reaches the end of the pass the run is in, else its share (1/total, to a step) of the run's
  /// steps still to make (λ_s stays 1/(C·T) of the whole run), and orders its rows from the
  /// replica's own seed stream. Nothing for total = 1. ConfigError
  /// (perplexity) with an entropy floor: ASSIGN's history is per training row and is not averaged.
  void make_replica(int global, int total);
  /// Every side of every replica (`local` of this process, of every process of `peers`) replaced
  /// by their mean, face by face: W = σU and b = σB averaged over all replicas, the steps set to
  /// t = ⌊Σt / total⌋ and U, B rescaled to σ = 1/(t + 1), the run's steps (all replicas') counted
  /// up; the face counts become those at the last
  /// average plus every replica's increments since. The counters (updates, adjustments, seconds)
  /// are summed into `local[0]` when `holds_totals`, zeroed elsewhere. A collective call.
  static void average(const std::vector<CpmTrainer*>& local, bool holds_totals, const Peers& peers);
  /// Takes `lead`'s state (U, intercepts, steps, counts, batches; its counters when
  /// `with_totals`, else zeros): a resumed replicated run continues from one averaged state.
  void take_state(const CpmTrainer& lead, bool with_totals);
  /// Bytes average() hands to Peers::sum.
  std::uint64_t sync_bytes() const;

  struct Side;  // one CPM being trained (engine/cpm_train.cpp)

 private:
  CpmConfig config_;
  CpmProblem problem_;
  std::vector<double> classes_;
  std::vector<std::unique_ptr<Side>> sides_;
  std::uint64_t batches_ = 0;
  int replicas_ = 1;  // replicas in the run (make_replica)

  void commit_weights();
};

}  // namespace polymargin::engine
