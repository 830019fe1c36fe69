// Signals, handled the same way by every command. main() blocks SIGTERM, SIGINT and SIGHUP before
// any other thread starts, and one thread waits for them:
// - while a StopSignals lives (a training job), the first one only sets a flag, which the learner
//   polls between batches (it then writes its checkpoint and stops);
// - otherwise, and for a second signal, the temporaries the process registered (io/temporaries.h:
//   unfinished outputs, on-the-fly conversions) are removed, a line on stderr says so, and the
//   process dies of the signal as it would have (a shell reports 128 + N: 130 for SIGINT, 143 for
//   SIGTERM). A finished output is renamed into place whole or not at all.
#pragma once

namespace polymargin::cli {

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (and so in every thread started after
/// it) and starts the thread that handles them. Call first thing in main().
void start_signal_thread();

/// A child process (an experiment's or a --tune search's cell) registered while it runs: a signal
/// that ends this process first sends it SIGTERM and waits for it (up to 10 s) to remove its own
/// unfinished outputs and end, since it would otherwise die of SIGKILL with this process
/// (PR_SET_PDEATHSIG) and leave them. Construct before the fork, call started() after it, destroy
/// once the child is reaped. Once the process is ending, neither the constructor nor the
/// destructor returns: their thread starts and writes nothing more.
class RunningChild {
 public:
  RunningChild();
  void started(int pid);
  ~RunningChild();
  RunningChild(const RunningChild&) = delete;
  RunningChild& operator=(const RunningChild&) = delete;

 private:
  int pid_ = -1;
};

/// For a SIGBUS handler (an input file cut short under its memory map), in the thread that took the
/// fault: has the signal thread remove the registered temporaries and end the process with exit 4,
/// and waits for it (the faulting read is never resumed). Async-signal-safe; returns only when no
/// signal thread runs.
void relay_fatal_io_error();

/// For main(), once a command has returned or failed: when a signal is ending the process (its
/// temporaries being removed), waits for the end instead of returning, so that a failure the
/// removal caused (a file that vanished under a writer) is not reported and the process still dies
/// of the signal. Returns at once otherwise.
void wait_if_ending();

/// While one lives, the first SIGTERM, SIGINT or SIGHUP only sets a flag (see above).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  /// The signal received (SIGTERM, SIGINT, SIGHUP), or 0.
  static int received();
  /// For a host that handles signals itself instead of start_signal_thread (the Python module):
  /// records `signal` as received when a StopSignals lives, and says whether it did.
  /// Async-signal-safe.
  static bool request(int signal);
};

}  // namespace polymargin::cli
