// A one-line progress report on stderr, rewritten in place, for long commands. Only on a terminal,
// so logs and pipes stay clean; at most one update per interval, so it costs nothing per row.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/output.h"
#include "driver/text.h"

namespace polymargin::cli {

/// False in a host that reports progress its own way (the Python module logs the commands' lines
/// and wants no line rewritten on its terminal): no ProgressLine shows anything.
inline std::atomic<bool> g_terminal_progress{true};

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ProgressLine(std::chrono::milliseconds interval)
      : enabled_(g_terminal_progress.load() && ::isatty(STDERR_FILENO) == 1),
        interval_(interval),
        start_(Clock::now()),
        last_(start_) {}

  /// True when a terminal is attached and `interval` has passed since the start or the last line
  /// shown (so quick commands show none).
  bool due() {
    if (!enabled_) return false;
    const Clock::time_point now = Clock::now();
    if (now - last_ < interval_) return false;
    last_ = now;
    return true;
  }
  /// Seconds since construction.
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  /// Overwrites the line with `text`.
  void show(const std::string& text) {
    err_printf("\r%s   ", text.c_str());
    width_ = text.size() + 3;
    shown_ = true;
  }
  /// Erases the line; call before printing anything else to stderr.
  void clear() {
    if (shown_) err_printf("\r%*s\r", static_cast<int>(width_), "");
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::size_t width_ = 0;
  std::chrono::milliseconds interval_;
  Clock::time_point start_, last_;
};

/// printf into a std::string (for ProgressLine::show).
using driver::strprintf;

}  // namespace polymargin::cli
