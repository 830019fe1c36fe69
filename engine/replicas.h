// What data-parallel training shares between learners: the peers a replica's state is averaged
// with, and the share of a window each replica of a process steps through.
//
// A run trains `total` replicas of one model, spread over one or more processes (the ranks of an
// MPI job, docs/design.md). Each process holds some of them; every so many rows all replicas are
// averaged (iterative parameter mixing): each process sums its own replicas' arrays (in parallel),
// the processes sum their sums (Peers::sum: nothing for one process, an MPI_Allreduce for ranks),
// and every replica continues from the mean. The learners see only Peers, never how the sum is
// made.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "engine/csr.h"

namespace polymargin::engine {

/// The processes of a run, from one of them.
struct Peers {
  int index = 0;  // this process
  int count = 1;  // processes in the run
  /// Element-wise sum over every process, in place, the same result on each; called by all
  /// processes at the same points of a run. Unset: one process (the sum is the array itself).
  std::function<void(std::span<double>)> sum;

  bool alone() const { return count == 1; }
  void sum_in_place(std::span<double> values) const {
    if (!alone()) sum(values);
  }
};

/// Replica `k` of `n`'s share of a window: the contiguous rows [rows·k/n, rows·(k+1)/n). The
/// window comes shuffled, so a contiguous share is a random sample of it.
inline CsrView share_of(const CsrView& window, std::size_t k, std::size_t n) {
  const std::size_t begin = window.rows * k / n, end = window.rows * (k + 1) / n;
  CsrView share = window;
  share.rows = end - begin;
  share.labels = window.labels + begin;
  share.offsets = window.offsets + begin;
  return share;
}

/// learn(k, share_of(window, k, n)) for k < n, in parallel (oneTBB, one task a replica): how
/// replicas step through their shares of a window.
template <class Learn>
void learn_shares(const CsrView& window, std::size_t n, const Learn& learn) {
  tbb::parallel_for(
      tbb::blocked_range<std::size_t>(0, n, 1),
      [&](const tbb::blocked_range<std::size_t>& range) {
        for (std::size_t k = range.begin(); k != range.end(); ++k) learn(k, share_of(window, k, n));
      },
      tbb::simple_partitioner());
}

}  // namespace polymargin::engine
