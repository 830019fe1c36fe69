// What an exception that ends a job says, and the exit code it ends the command with (the README's
// "Exit codes" table): the library throws typed errors (engine/errors.h), and this is where each
// type becomes a code, the same for the command line, --metrics-json, Python and a --tune search's
// failed cell (whose code the ranks of an MPI job share, and the search ends with).
#pragma once

#include <exception>
#include <string>

#include "engine/errors.h"

namespace polymargin::driver {

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

/// A cell of a --tune search that failed (driver/tune.h): the search ends with the cell's exit
/// code, and what() names the cell ("train: --tune: the cell cost=10, fold 2 failed (exit 3):
/// error: ...").
class CellFailed : public Error {
 public:
  CellFailed(int code, const std::string& message) : Error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

/// The exit code of an error of the library.
inline int exit_code_of(const Error& e) {
  if (const auto* cell = dynamic_cast<const CellFailed*>(&e)) return cell->code();
  if (dynamic_cast<const MemoryError*>(&e)) return kExitMemory;
  if (dynamic_cast<const DataError*>(&e)) return kExitData;
  if (dynamic_cast<const IoError*>(&e)) return kExitIo;
  if (dynamic_cast<const NumericalError*>(&e)) return kExitNumerical;
  return kExitUsage;  // UsageError, and any other Error: the request cannot be carried out
}

/// What an exception that ends a command says and exits with.
struct Failure {
  int code = kExitInternal;
  bool out_of_memory = false;  // std::bad_alloc (exit 4, as other failures to get resources)
  /// A ConfigError's with its flag ("--cost must be > 0 (got -1)"), an Error's own, "out of
  /// memory" (std::bad_alloc: exit 4), "internal error: ..." (anything else: a bug).
  std::string message;
};
/// `error` (not null) described.
Failure describe_failure(std::exception_ptr error);

}  // namespace polymargin::driver
