// A caller's request that a long solver stop early (the command line's signal, Python's Ctrl-C).
// The kernel solvers poll it once a sweep and, when it says yes, throw Stopped: they hold nothing
// that a later run could continue from.
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

}  // namespace polymargin::engine
