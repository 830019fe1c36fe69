// Data-parallel training of the Convex Polytope Machine (docs/algorithms.md §2.8): replicas of one
// CpmTrainer, each stepping through its own share of every window, averaged every so often.
//
// A run has `total` replicas spread over the processes of engine/replicas.h's Peers; this object
// holds the `local` ones of one process (global numbers first … first + local − 1). A replica is a
// whole CpmTrainer (every side of every machine): learn() gives local replica k the rows
// share_of(window, k, local) and runs the replicas in parallel (oneTBB), each training its sides in
// parallel as one trainer does. average() then makes every replica the mean of all, face by face
// (CpmTrainer::average): the faces keep their identity because every replica starts each interval
// from the same averaged faces.
//
// Each side of a replica makes its own steps (its σ_t = 1/(t + 1) and Pegasos steps 1/(λ_s (t + 2))
// follow its own t, with λ_s = 1/(C·T) of the whole run): all its rows of an interval while T
// reaches the end of the pass the run is in, else at most its share (1/total, to a step) of the
// steps still to make; after an average all continue from t = ⌊Σt/total⌋, and the steps made by
// all are counted up: the run is done when they reach T. done() changes at averages only, so
// every process of a job stops at the same one; in T's last pass a replica whose shares have
// fewer rows (a rank with a smaller part of the windows) leaves its steps to the others.
//
// One replica in one process is exactly CpmTrainer: the whole window goes to it, average() does
// nothing, the model is the same byte for byte. With more, the run is a function of (data, config,
// seed, local, total): sums are taken in replica order, never in thread order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/cpm.h"
#include "engine/replicas.h"

namespace polymargin::engine {

class CpmReplicas {
 public:
  /// `local` replicas of this process (≥ 1), numbered from `first` among `total` in the run; each
  /// allocates its U in the caller's task arena (CpmTrainer's constructor). ConfigError
  /// (perplexity) for an entropy floor with total > 1 (CpmTrainer::make_replica).
  CpmReplicas(const CpmConfig& config, const CpmProblem& problem, int local, int total, int first);

  /// One window, its rows shared out between the local replicas; `spare` as CpmTrainer::learn.
  void learn(const CsrView& window, const std::function<bool()>& spare = {});
  /// Every replica (of every process) replaced by their mean; a collective call. Nothing with
  /// one replica in all.
  void average(const Peers& peers);
  /// True once the run has made its steps: with several replicas, as decided at the last average
  /// (or restore), the same in every process.
  bool done() const;

  /// Replica 0 of this process: after average(), the state of every replica (its counters, in
  /// process 0, those of all); what a checkpoint saves and the model is built from.
  CpmTrainer& lead() { return *replicas_.front(); }
  const CpmTrainer& lead() const { return *replicas_.front(); }
  /// Every local replica takes the lead's state (after lead().restore()).
  void spread_lead();
  /// The lead's status, its steps those of all replicas (at the last average).
  std::vector<CpmTrainer::SideStatus> status() const;

  int local() const { return static_cast<int>(replicas_.size()); }
  int total() const { return total_; }
  std::uint64_t sync_bytes() const { return lead().sync_bytes(); }

 private:
  // Decided from the steps of all replicas, the same in every process: a replica's own interval
  // may hold no steps (in T's pass, fewer steps left than replicas) while others still make theirs.
  bool lead_done() const { return total_ == 1 ? lead().done() : lead().run_done(); }

  std::vector<std::unique_ptr<CpmTrainer>> replicas_;
  int total_, first_;
  bool done_ = false;
};

}  // namespace polymargin::engine
