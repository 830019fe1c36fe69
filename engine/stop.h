// A caller's request that a long solver stop early (the command line's signal, Python's Ctrl-C).
// The kernel solvers poll it once a sweep, and their O(m³) set-ups (the kernel matrix, the
// Cholesky factor, the solves) between pieces of about a second of work at most, and when it says
// yes, throw Stopped: they hold nothing that a later run could continue from. The set-ups also
// report how far they have come, so that a caller can say so during a set-up of minutes.
#pragma once

#include <functional>

namespace polymargin::engine {

/// Empty: never stop.
using StopRequest = std::function<bool()>;

/// Thrown by a solver whose StopRequest said yes.
struct Stopped {};

/// Throws Stopped when `stop` is set and says yes.
inline void poll(const StopRequest& stop) {
  if (stop && stop()) throw Stopped{};
}

/// A set-up step's progress: `step` names it ("kernel matrix", "Cholesky factor"), `done` is the
/// share of its work done, in [0, 1].
using SetupProgress = std::function<void(const char* step, double done)>;

/// What a long set-up takes from its caller: the stop request and where its progress goes (either
/// may be empty). Called only on the thread that called the engine, between two pieces of work,
/// so that neither needs to be thread-safe.
struct Watch {
  StopRequest stop;
  SetupProgress progress;

  /// Polls the stop request (throws Stopped), then reports `done` of `step`.
  void at(const char* step, double done) const {
    poll(stop);
    if (progress) progress(step, done);
  }
};

}  // namespace polymargin::engine
