// Everything the commands print goes through std::cout and std::cerr, which a host running them in
// its own process (the Python module) points elsewhere; printf-style helpers for the formatted
// lines.
#pragma once

namespace polymargin::cli {

/// printf onto std::cout.
[[gnu::format(printf, 1, 2)]] void out_printf(const char* format, ...);
/// printf onto std::cerr.
[[gnu::format(printf, 1, 2)]] void err_printf(const char* format, ...);

}  // namespace polymargin::cli
