#include "cli/output.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace polymargin::cli {

namespace {

void print(std::ostream& stream, const char* format, std::va_list args) {
  char small[512];
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(small, sizeof small, format, args);
  if (n < 0) {
    va_end(again);
    return;
  }
  if (static_cast<std::size_t>(n) < sizeof small) {
    stream.write(small, n);
  } else {
    std::string text(static_cast<std::size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, again);
    stream.write(text.data(), n);
  }
  va_end(again);
}

}  // namespace

void out_printf(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  print(std::cout, format, args);
  va_end(args);
}

void err_printf(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  print(std::cerr, format, args);
  va_end(args);
}

std::string stdout_error() {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  if (std::cout && flushed && !std::ferror(stdout)) return "";
  const int cause = errno;
  return "cannot write standard output" +
         (cause ? std::string(": ") + std::strerror(cause) : std::string());
}

}  // namespace polymargin::cli
