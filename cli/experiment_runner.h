// The machinery under `polymargin experiment`: child processes timed by their rusage, the cell
// cache that makes a run resumable, data checksums, and the split/fold files made once per data set.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/cell_cache.h"
#include "io/text_reader.h"

namespace polymargin::cli::experiment {

/// What a finished child process cost and said.
struct ChildResult {
  int exit_code = 0;           // the child's exit status; 128 + N when killed by signal N
  double wall_seconds = 0;     // from spawn to exit
  double cpu_seconds = 0;      // user + system time of the child (and its threads)
  std::string stdout_text;     // whole standard output
  std::string stderr_tail;     // the last lines of standard error, for messages
};

/// Runs `argv` (argv[0] a path, or a name looked up in PATH) with stdout and stderr captured in
/// files under `work_dir`, and waits for it. The child dies with the experiment (PR_SET_PDEATHSIG),
/// so a killed run leaves no learner running. It has this process's environment less what an MPI
/// launcher sets for its ranks (a child of a rank is no rank). With `stop`, polled while the
/// child runs (at most 20 ms apart): once it returns true the child is sent SIGTERM and waited for (its
/// result then says it was stopped: 143). Throws IoError when it cannot be started.
ChildResult run_child(const std::vector<std::string>& argv, const std::string& work_dir,
                      const std::function<bool()>& stop = {});

/// The path of the polymargin program, for running it as a child: this program (/proc/self/exe),
/// or the one set_self_executable() named (a host that runs the commands in its own process, the
/// Python module, is not polymargin). IoError when unknown.
std::string self_executable();
void set_self_executable(const std::string& path);
/// For a host that is not polymargin: until set_self_executable names the program,
/// self_executable() throws IoError with `message` (how to name it) instead of naming the host.
void set_self_executable_missing(const std::string& message);

/// The path of an executable named `name` in PATH, or "" when there is none.
std::string find_in_path(const std::string& name);

using io::CellCache;
using io::data_checksum;
using io::for_each_batch;
using io::hash_text;

/// A data set's files for one split: the training part as its k fold files (their union is the
/// training part) and the test part.
struct SplitFiles {
  std::vector<std::string> folds;  // k files
  std::vector<std::string> test;   // one file, or the set's own test files
  std::uint64_t train_rows = 0, test_rows = 0;
  int index_base = 1;  // the data's, which the files keep
};

struct DataSummary {
  std::uint64_t rows = 0;       // training + test rows
  std::uint64_t max_index = 0;  // largest feature id
};

/// Writes, once, the files of a random split (test share `test_fraction`, seed `split_seed`) of
/// `data` and the k folds of its training part (seed `fold_seed`) under `prefix`; or, when `test`
/// is given, only the folds of `data`. Reuses the files when a stamp beside them says they were made
/// from the same inputs. Out of core: rows stream through io::Splitter.
SplitFiles make_split(const std::vector<std::string>& data, const std::vector<std::string>& test,
                      double test_fraction, std::uint64_t split_seed, int folds,
                      std::uint64_t fold_seed, const std::string& prefix, int threads,
                      DataSummary* summary);

/// Writes `train` and `test` rows scaled by the training part's max |value| per feature (the
/// papers' [0, 1] protocol) as LIBSVM text, for external learners that read text.
void write_scaled_text(const std::vector<std::string>& train, const std::vector<std::string>& test,
                       const std::string& train_out, const std::string& test_out, int threads);

}  // namespace polymargin::cli::experiment
