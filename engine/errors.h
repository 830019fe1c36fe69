// Typed errors of the polymargin library. Library code throws; only cli/ catches, prints and picks
// the exit code (driver/failure.h, and the README's "Exit codes" table).
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace polymargin {

/// A number as error messages write it (printf's %g: 0.001, 1e+30, inf).
inline std::string message_number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

/// Base of every polymargin error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A command-line option or config value is invalid.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A learner's configuration value is out of range. It names the configuration field (`max_sweeps`
/// of KldmConfig), not a command-line flag: the engine knows no flags. what() reads "FIELD RULE";
/// cli/ says it with the flag instead (cli/train.h, flag_of).
class ConfigError : public UsageError {
 public:
  ConfigError(std::string field, const std::string& rule)
      : UsageError(field + " " + rule), field_(std::move(field)), rule_(rule) {}
  const std::string& field() const { return field_; }
  /// "must be > 0 (got -1)".
  const std::string& rule() const { return rule_; }

 private:
  std::string field_;
  std::string rule_;
};

/// Input data are malformed or corrupt. what() reads "file:line:column: message"; line and column are
/// 1-based and 0 when they do not apply (binary files: the message then names the block or offset).
class DataError : public Error {
 public:
  DataError(std::string file, std::uint64_t line, std::uint64_t column, const std::string& message)
      : Error(format(file, line, column, message)),
        file_(std::move(file)),
        line_(line),
        column_(column),
        message_(message) {}
  const std::string& file() const { return file_; }
  std::uint64_t line() const { return line_; }
  std::uint64_t column() const { return column_; }
  /// The message without the location prefix.
  const std::string& message() const { return message_; }

 private:
  static std::string format(const std::string& file, std::uint64_t line, std::uint64_t column,
                            const std::string& message) {
    std::string s = file;
    if (line > 0) {
      s.push_back(':');
      s.append(std::to_string(line));
      if (column > 0) {
        s.push_back(':');
        s.append(std::to_string(column));
      }
    }
    s.append(": ");
    s.append(message);
    return s;
  }
  std::string file_;
  std::uint64_t line_;
  std::uint64_t column_;
  std::string message_;
};

/// The operating system refused a read, write, open or rename.
class IoError : public Error {
 public:
  using Error::Error;
};

/// The run as configured would not fit in memory: refused before the allocation, with the amount
/// and what to change.
class MemoryError : public Error {
 public:
  using Error::Error;
};

/// Training diverged or produced a non-finite value.
class NumericalError : public Error {
 public:
  using Error::Error;
};

}  // namespace polymargin
