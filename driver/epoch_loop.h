// The one epoch loop of polymargin: every streamed learner (the linear LDM/SVM, the CPM) trains
// through run_passes(), with one replica or several (workers, MPI ranks: averaged at the syncs),
// as do --tune's cells. It reads the shards pass after pass in the reader's seeded window order,
// hands each window to the learner, and keeps what every job needs around it: where a resumed run
// starts (windows of a pass already learnt are not read again), when a checkpoint is due (by rows,
// time, or at the end of every pass), the stop requests between windows (a signal, the
// --stop-after-rows budget), and the time spent learning and waiting for data.
//
// The driver knows nothing of flags, files or printing (docs/design.md, where the epoch loop
// lives): what a learner does with a window, how it writes a checkpoint and what it reports at the
// end of a pass are behind the Learner interface below, implemented in cli/ for the command line.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/csr.h"
#include "engine/replicas.h"
#include "io/shards.h"

namespace polymargin::driver {

/// Where a run is: the pass (epoch) it is in and what of that pass has been learnt.
struct Position {
  std::uint64_t pass = 0;       // 0-based pass over the data
  std::uint64_t windows = 0;    // windows of this pass learnt (0 with pass_rows > 0: not known)
  std::uint64_t pass_rows = 0;  // rows of this pass learnt
  std::uint64_t rows = 0;       // rows learnt in all passes, for --stop-after-rows
};

/// How often a run with a checkpoint writes it: every `rows` rows learnt, or every `seconds`, or
/// (neither set) at the end of every pass.
struct CheckpointEvery {
  std::uint64_t rows = 0;  // 0: not by rows
  double seconds = 0;      // 0: not by time
};

/// When a checkpoint is due: after the window that reaches CheckpointEvery's rows or time since
/// the last write, or (without either) at the end of every pass.
class CheckpointSchedule {
 public:
  explicit CheckpointSchedule(CheckpointEvery every) : every_(every) {}
  bool per_pass() const { return every_.rows == 0 && every_.seconds == 0; }
  void learnt(std::uint64_t rows) { rows_ += rows; }
  /// Due by rows or time (never when per_pass()).
  bool due() const;
  void written();
  int count() const { return count_; }

 private:
  CheckpointEvery every_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::uint64_t rows_ = 0;
  int count_ = 0;
};

/// Thins a run's per-pass events (progress lines, checkpoints) to about 20: due(done, total) is
/// true for the first call to reach each further twentieth of `total` and once done ≥ total, so
/// every call when total ≤ 20. A small set under a step floor makes hundreds of passes.
class Twentieths {
 public:
  bool due(std::uint64_t done, std::uint64_t total) {
    const std::uint64_t reached = total == 0 ? 20 : std::min(done, total) * 20 / total;
    if (reached <= reached_ && done < total) return false;
    reached_ = reached;
    return true;
  }

 private:
  std::uint64_t reached_ = 0;
};

/// What the loop needs from a learner.
class Learner {
 public:
  virtual ~Learner() = default;
  /// Learns one window of rows, in the reader's order; `at` is the position before it. `spare`
  /// hands out pieces of reading the next window (io::SpareWork): a learner whose threads would
  /// otherwise wait at the window's end takes them; one that ignores it loses nothing.
  virtual void learn(const CsrView& window, const io::SpareWork& spare, const Position& at) = 0;
  /// True once the run has learnt all it will before its passes run out (the CPM's T steps): the
  /// pass then ends at once.
  virtual bool done() const { return false; }
  /// Writes the learner's checkpoint at `at`; `pass_end` when `at` is the end of its pass.
  virtual void checkpoint(const Position& at, bool pass_end) = 0;
  /// The stop request `reason` (a signal, or the row budget) reached the run at `at`, after the
  /// checkpoint (if any) was written: ends the run by throwing.
  [[noreturn]] virtual void stop(int reason, const Position& at) = 0;
  /// A pass ended at `at` after `seconds` (whole, or cut short by done()).
  virtual void pass_end(const Position& at, double seconds) = 0;
  /// A data-parallel learner averages its replicas (LoopOptions::sync_windows): with several
  /// processes, a collective call that every process makes at the same window.
  virtual void sync() {}
};

struct LoopOptions {
  io::ReadOptions read;  // seed, threads, window_blocks, scaling, lockstep; epoch and first_window
                         // are the loop's
  /// Passes to make at most (the LDM's epochs); the CPM stops on done() instead.
  std::uint64_t passes = std::numeric_limits<std::uint64_t>::max();
  /// The rows of a pass: 0 for the shards' rows; fewer when `read.blocks` leaves some blocks out.
  std::uint64_t rows_per_pass = 0;
  bool checkpoints = false;  // the learner writes checkpoints (as `every` says)
  CheckpointEvery every;
  /// The passes the run is expected to make (0: `passes`): with more than 20, the pass-end
  /// checkpoints of the default schedule come at the first pass to reach each further 5 % of them
  /// and at the last, not at every pass (a small set under a step floor makes hundreds of passes,
  /// each ending in a write of the whole state).
  std::uint64_t expected_passes = 0;
  /// Polled before the first window and after each: a non-zero reason stops the run (given the
  /// rows the run learnt in all passes: with several processes, their sum).
  std::function<int(std::uint64_t rows)> stop_requested;
  /// A data-parallel run (docs/design.md, workers and ranks): the learner's replicas are averaged
  /// (Learner::sync) after every `sync_windows` windows of a pass and at its end. Stop requests
  /// are then polled, and checkpoints written, at syncs only: the model does not depend on when
  /// a checkpoint was due, and a resumed run starts from one averaged state. 0: no syncs.
  std::uint64_t sync_windows = 0;
  /// The processes of the run (MPI ranks), which must stop at the same sync: a stop request of
  /// any of them stops all. Null: this process alone.
  const engine::Peers* peers = nullptr;
};

struct LoopResult {
  Position end;              // where the last pass ended
  double learn_seconds = 0;  // inside the learner
  double wait_seconds = 0;   // waiting for data
  double train_seconds = 0;  // the whole loop
  // Per pass made: bytes read from disk (io::disk_read_bytes) and seconds waiting for data.
  std::vector<std::uint64_t> pass_disk_bytes;
  std::vector<double> pass_wait_seconds;
  int checkpoints_written = 0;
};

/// Runs passes from `start` (a resumed run's position; windows of its pass already learnt are not
/// read, or, when only their rows are known, read and passed over) until `options.passes` are made
/// or the learner is done. DataError naming `resume_name` when the start is not on a window
/// boundary of these shards.
LoopResult run_passes(const io::ShardSet& shards, Learner& learner, const LoopOptions& options,
                      const Position& start, const std::string& resume_name);

}  // namespace polymargin::driver
