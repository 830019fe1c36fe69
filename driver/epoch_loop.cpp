#include "driver/epoch_loop.h"

#include <array>
#include <vector>

#include "engine/errors.h"
#include "io/read_ahead.h"

namespace polymargin::driver {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Thrown through the reader when the learner is done: the pass ends at once.
struct StopScan {};

}  // namespace

bool CheckpointSchedule::due() const {
  return (every_.rows > 0 && rows_ >= every_.rows) ||
         (every_.seconds > 0 &&
          std::chrono::duration<double>(Clock::now() - last_).count() >= every_.seconds);
}

void CheckpointSchedule::written() {
  last_ = Clock::now();
  rows_ = 0;
  ++count_;
}

LoopResult run_passes(const io::ShardSet& shards, Learner& learner, const LoopOptions& options,
                      const Position& start, const std::string& resume_name) {
  const std::uint64_t rows_per_pass =
      options.rows_per_pass ? options.rows_per_pass : shards.manifest().rows;
  CheckpointSchedule schedule(options.every);
  LoopResult result;
  const auto save = [&](const Position& at, bool pass_end) {
    learner.checkpoint(at, pass_end);
    schedule.written();
  };
  const bool replicated = options.sync_windows > 0;
  // With several processes each counts the rows of its own part of the windows; the run's
  // position (for --stop-after-rows, the checkpoint and the reports) is their sum, taken at every
  // poll, which all processes reach together. A resumed run's counts are the run's: rank 0
  // carries them.
  const bool shared = options.peers && !options.peers->alone();
  Position job;  // the run's position at the last poll
  const auto take_position = [&](const Position& at) {
    job = at;
    if (!shared) return;
    std::array<double, 2> rows = {static_cast<double>(at.pass_rows), static_cast<double>(at.rows)};
    options.peers->sum(rows);
    job.pass_rows = static_cast<std::uint64_t>(rows[0]);
    job.rows = static_cast<std::uint64_t>(rows[1]);
  };
  // Between windows (at syncs when replicated): a stop request saves (with checkpoints) and ends
  // the run; with several processes, the first process's non-zero reason is everybody's.
  const auto stop_if_requested = [&](const Position& at) {
    take_position(at);
    // After the run's last step there is nothing left to stop: the run ends as without a request
    // (the same on every process: done() is decided at syncs, the position summed).
    if (learner.done() || (job.pass + 1 >= options.passes && job.pass_rows >= rows_per_pass))
      return;
    int reason = options.stop_requested ? options.stop_requested(job.rows) : 0;
    if (shared) {
      std::vector<double> reasons(static_cast<std::size_t>(options.peers->count), 0.0);
      reasons[static_cast<std::size_t>(options.peers->index)] = reason;
      options.peers->sum(reasons);
      reason = 0;
      for (const double r : reasons)
        if (reason == 0) reason = static_cast<int>(r);
    }
    if (reason == 0) return;
    if (options.checkpoints) save(job, false);
    learner.stop(reason, job);
  };

  const Clock::time_point train_start = Clock::now();
  Position at = start;
  if (shared && options.peers->index != 0) at.pass_rows = at.rows = 0;
  if (!learner.done()) stop_if_requested(at);
  io::ReadOptions read = options.read;
  // The disk counter at a pass's start: the previous pass's end (one read of it a pass).
  std::uint64_t disk_before = io::disk_read_bytes();
  // Pass-end checkpoints of the default schedule: every pass up to 20 expected, else about 20
  // (every pass when the number is not known).
  const std::uint64_t expected = options.expected_passes ? options.expected_passes : options.passes;
  const bool known = expected != std::numeric_limits<std::uint64_t>::max();
  Twentieths pass_ends;
  for (; at.pass < options.passes && !learner.done(); at = {at.pass + 1, 0, 0, at.rows}) {
    read.epoch = at.pass;
    read.first_window = at.windows;  // the windows learnt before a resume are not read again
    // A resume that knows only the rows of its pass learnt reads those windows and passes over
    // them.
    std::uint64_t skip = at.windows == 0 ? at.pass_rows : 0;
    const Clock::time_point pass_start = Clock::now();
    double pass_learn = 0;  // timed here too: a pass cut short loses its ScanStats
    std::uint64_t pass_windows = 0;
    bool cut = false;
    std::uint64_t synced = at.windows;  // the window count at the last sync
    const double wait_before = result.wait_seconds;
    if (skip < rows_per_pass) {
      try {
        const io::ScanStats stats =
            shards.scan_lending(read, [&](const CsrView& window, const io::SpareWork& spare) {
              if (skip > 0) {
                if (window.rows > skip)
                  throw DataError(resume_name, 0, 0,
                                  "checkpoint position is not on a window boundary of this data");
                skip -= window.rows;
                ++at.windows;
                return;
              }
              const Clock::time_point learn_start = Clock::now();
              learner.learn(window, spare, at);
              pass_learn += seconds_since(learn_start);
              ++at.windows;
              ++pass_windows;
              at.pass_rows += window.rows;
              at.rows += window.rows;
              schedule.learnt(window.rows);
              if (learner.done()) throw StopScan{};
              if (replicated) {
                if (at.windows % options.sync_windows != 0) return;
                learner.sync();
                synced = at.windows;
              }
              stop_if_requested(at);
              if (options.checkpoints && schedule.due()) save(job, false);
            });
        result.learn_seconds += stats.sink_seconds;
        result.wait_seconds += stats.wait_seconds;
      } catch (const StopScan&) {
        cut = true;
        result.learn_seconds += pass_learn;
        result.wait_seconds +=
            seconds_since(pass_start) - pass_learn;  // the pass's time not learning
      }
    }
    const std::uint64_t disk_after = io::disk_read_bytes();
    result.pass_disk_bytes.push_back(disk_after - disk_before);
    disk_before = disk_after;
    result.pass_wait_seconds.push_back(result.wait_seconds - wait_before);
    if (replicated && !cut && synced != at.windows) {  // the pass's end is a sync
      learner.sync();
      stop_if_requested(at);
    }
    if (!cut && options.checkpoints && schedule.per_pass() && pass_windows > 0 &&
        (!known || pass_ends.due(at.pass + 1, expected)))
      save(shared ? job : at, true);  // a replicated pass ends with a poll
    learner.pass_end(at, seconds_since(pass_start));
    if (cut) break;  // the pass the run ended in stays in `at`
  }
  result.end = at;
  result.train_seconds = seconds_since(train_start);
  result.checkpoints_written = schedule.count();
  return result;
}

}  // namespace polymargin::driver
