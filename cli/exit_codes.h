// The process's exit codes, shared by every subcommand (the README's "Exit codes" table): the
// library throws typed errors (engine/errors.h), and this is where each type becomes a code.
#pragma once

#include <exception>
#include <string>

#include "engine/errors.h"

namespace polymargin::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitInternal = 1,     // a bug: an exception that is not one of ours
  kExitUsage = 2,        // bad command line or config value
  kExitData = 3,         // malformed or corrupt input data, shards or model file
  kExitIo = 4,           // cannot open, read, write, rename, disk full
  kExitNumerical = 5,    // NaN/Inf in weights, divergence
  kExitInterrupted = 6,  // stopped by a signal after writing a checkpoint
  kExitMemory = 7,       // the run would not fit in memory: refused before allocating
};

/// The exit code of an error of the library.
inline int exit_code_of(const Error& e) {
  if (dynamic_cast<const MemoryError*>(&e)) return kExitMemory;
  if (dynamic_cast<const DataError*>(&e)) return kExitData;
  if (dynamic_cast<const IoError*>(&e)) return kExitIo;
  if (dynamic_cast<const NumericalError*>(&e)) return kExitNumerical;
  return kExitUsage;  // UsageError, and any other Error: the request cannot be carried out
}

/// What an exception that ends a command says and exits with, the same for the command line,
/// --metrics-json and Python.
struct Failure {
  int code = kExitInternal;
  bool out_of_memory = false;  // std::bad_alloc (exit 4, as other failures to get resources)
  /// A ConfigError's with its flag ("--cost must be > 0 (got -1)"), an Error's own, "out of
  /// memory" (std::bad_alloc: exit 4), "internal error: ..." (anything else: a bug).
  std::string message;
};
/// `error` (not null) described.
Failure describe_failure(std::exception_ptr error);

}  // namespace polymargin::cli
