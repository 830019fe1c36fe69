// Data-parallel averaged SGD for the linear LDM/SVM (docs/algorithms.md §1.9): replicas of one
// LdmTrainer, each stepping through its own share of every window, averaged every so often.
//
// A run has `total` replicas spread over the processes of engine/replicas.h's Peers; this object
// holds the `local` ones of one process (global numbers first … first + local − 1). learn() gives
// local replica k the rows share_of(window, k, local) and runs the replicas in parallel (oneTBB).
// average() then makes every replica the mean of all, each weighted by the steps it made since the
// last average (a replica whose shares were empty counts for nothing):
//   w  ← mean over replicas of W/a            (the iterate)
//   w̄  ← mean over replicas of (A + b·W)/c    (the running average; = w where A is flagged zero)
// written back renormalised (W = w, A = w̄, a = c = 1, b = 0; or A flagged zero while no replica
// averages yet). The plain arrays are what is summed: each process sums its replicas slot by slot
// into replica 0's array (in parallel over slots), Peers::sum adds the processes' sums in place,
// and the mean is copied to every local replica. Besides the weights, a few scalars are summed: the
// steps (every replica continues from t = Σt / total, so that all agree and a checkpoint needs one
// state), the renormalisations and the progressive margins (kept by replica 0 of process 0, the
// one a checkpoint and the epoch log read).
//
// One replica in one process is exactly LdmTrainer: the whole window goes to it, average() does
// nothing, the model is the same byte for byte. With more, the run is a function of (data, config,
// seed, local, total): slot sums are taken in replica order, never in thread order.
//
// Each replica makes about 1/total of the steps, so its schedule counts its own steps: averaging
// starts after avg_start_epochs · m / total of them (the same point of the data as one replica's
// t0), and η_t follows its own t. λ, λ1', λ2' stay those of all m rows: every replica descends the
// same objective.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/ldm.h"
#include "engine/replicas.h"

namespace polymargin::engine {

class LdmReplicas {
 public:
  /// `local` replicas of this process (≥ 1), numbered from `first` among `total` in the run.
  LdmReplicas(const LdmConfig& config, std::uint64_t m, std::uint32_t max_index, LabelMap labels,
              int local, int total, int first);

  /// η0 calibrated on `sample` by the lead replica (LdmTrainer::calibrate), then shared: with
  /// several processes, the first process with rows in its sample decides (a collective call: every
  /// process calls it at the same point). 0 while nobody had rows.
  double calibrate(const CsrView& sample, const Peers& peers);
  /// One step per row of the window, the rows shared out between the local replicas. A replica
  /// done with its share calls `spare` until it returns false (the reading of the next window,
  /// io::SpareWork), instead of waiting for the others; unset: none.
  void learn(const CsrView& window, const std::function<bool()>& spare = {});
  /// Every replica (of every process) replaced by their mean; a collective call. Nothing with
  /// one replica in all.
  void average(const Peers& peers);

  /// Replica 0 of this process: after average(), the state of every replica (its progressive
  /// margins, in process 0, those of all); what a checkpoint saves and finish() builds from.
  LdmTrainer& lead() { return *replicas_.front(); }
  const LdmTrainer& lead() const { return *replicas_.front(); }
  /// Local replica k (0: the lead).
  const LdmTrainer& replica(int k) const { return *replicas_.at(static_cast<std::size_t>(k)); }
  /// Every local replica takes the lead's state (after lead().restore() or warm_start()): a
  /// resumed or warm-started run continues from one averaged state. `run_steps`: the steps the
  /// run's replicas made before it, all together (its rows learnt; 0 for a warm start).
  void spread_lead(std::uint64_t run_steps);
  /// Takes and clears the progressive margins of every local replica (summed). After average(),
  /// on process 0, those of the whole run.
  MarginStats take_progress();

  /// LdmTrainer::set_feature_slots on every replica (the averaging is slot by slot either way).
  void set_feature_slots(std::span<const std::uint32_t> slot_of) {
    for (auto& r : replicas_) r->set_feature_slots(slot_of);
  }

  int local() const { return static_cast<int>(replicas_.size()); }
  int total() const { return total_; }
  /// Bytes that average() hands to Peers::sum: the interleaved (W, A) array and the scalars.
  std::uint64_t sync_bytes() const;

 private:
  void set_rng(LdmTrainer& replica, int global) const;

  std::vector<std::unique_ptr<LdmTrainer>> replicas_;
  std::uint64_t synced_t_ = 0;  // every replica's t at the last average (or the lead's, spread)
  // The steps of every replica of the run, all together (the rows it learnt): after an average,
  // t = run_steps_ / total, so that no remainder is lost from one average to the next.
  std::uint64_t run_steps_ = 0;
  int total_, first_;
};

}  // namespace polymargin::engine
