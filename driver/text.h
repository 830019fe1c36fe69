// printf into a std::string: the library's notes (driver::Events) and the command line's lines.
#pragma once

#include <string>

namespace polymargin::driver {

/// printf into a std::string, however long.
[[gnu::format(printf, 1, 2)]] std::string strprintf(const char* format, ...);

}  // namespace polymargin::driver
