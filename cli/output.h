// Everything the commands print goes through std::cout and std::cerr, which a host running them in
// its own process (the Python module) points elsewhere; printf-style helpers for the formatted
// lines.
#pragma once

#include <string>

namespace polymargin::cli {

/// printf onto std::cout.
[[gnu::format(printf, 1, 2)]] void out_printf(const char* format, ...);
/// printf onto std::cerr.
[[gnu::format(printf, 1, 2)]] void err_printf(const char* format, ...);

/// Flushes standard output and says whether what went there arrived: "" if it did, else "cannot
/// write standard output: CAUSE" (a full disk or a closed descriptor under `> file`: exit 4, not a
/// silent loss with exit 0).
std::string stdout_error();

}  // namespace polymargin::cli
