// polymargin: one binary, many subcommands. Errors from the library arrive here as typed
// exceptions and leave as a one-line message and a documented exit code.
#include <fcntl.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "cli/train.h"
#include "driver/mpi_job.h"
#include "engine/errors.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: polymargin <command> [options]   (polymargin <command> --help for details)\n\n"
         "commands:\n";
  for (const auto& c : polymargin::cli::commands())
    out << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ')
        << c.summary << "\n";
  out << "\nexit codes: 0 ok, 1 internal error, 2 usage, 3 data, 4 I/O, 5 numerical failure,\n"
         "6 interrupted (resume it), 7 would not fit in memory, 128 + signal stopped by a signal\n";
}

// The exit of a command that only prints (usage, version): 4 if that could not be written.
int printed(int code) {
  const std::string error = polymargin::cli::stdout_error();
  if (error.empty()) return code;
  std::cerr << "error: " << error << "\n";
  return polymargin::cli::kExitIo;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace polymargin;
  if (argc < 2) {
    print_usage(std::cerr);
    return cli::kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    print_usage(std::cout);
    return printed(cli::kExitOk);
  }
  if (name == "--version") {
    std::cout << "polymargin 0.1.0\n";
    return printed(cli::kExitOk);
  }
  // Before MPI starts its threads: they inherit the mask that leaves the stop signals to ours.
  cli::start_signal_thread();
  cli::report_sigbus_as_io_error();
  // A rank of an MPI job (mpirun): only `train` runs so. Rank 0 speaks for the job; the other
  // ranks print nothing but an error of their own, which names them.
  int error_fd = STDERR_FILENO;
  std::string error_prefix;
  if (driver::launched_as_rank()) {
    if (name != "train") {
      std::cerr << "error: only `polymargin train` runs as an MPI job (started by mpirun)\n";
      return cli::kExitUsage;
    }
    try {
      const driver::MpiJob& job = driver::join_mpi_job();
      error_prefix =
          "rank " + std::to_string(job.rank()) + " of " + std::to_string(job.size()) + ": ";
      if (job.rank() != 0) {
        error_fd = dup(STDERR_FILENO);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
      }
    } catch (const std::exception& e) {
      std::cerr << "error: cannot join the MPI job: " << e.what() << "\n";
      return cli::kExitInternal;
    }
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  // `--threads N` above the core count is the user's to ask: oneTBB's default limit (the cores)
  // would refuse the extra workers with a warning on stderr. The limit is raised to N here; an
  // invalid value is left to the command's own parse, which refuses it.
  std::size_t workers = static_cast<std::size_t>(tbb::info::default_concurrency());
  try {
    const long requested = std::stol(cli::peek_option(args, "threads", "0"));
    if (requested > 0 && requested <= 1024)
      workers = std::max(workers, static_cast<std::size_t>(requested));
  } catch (const std::exception&) {
  }
  const tbb::global_control thread_limit(tbb::global_control::max_allowed_parallelism, workers);
  for (const auto& c : cli::commands()) {
    if (c.name != name) continue;
    std::string error;
    int code = cli::kExitOk;
    try {
      code = c.run(args);
    } catch (...) {
      const cli::Failure failure = cli::describe_failure(std::current_exception());
      error = (failure.code == cli::kExitInternal ? "" : "error: ") + failure.message;
      code = failure.code;
    }
    cli::wait_if_ending();
    if (error.empty()) {
      if (const std::string failed = cli::stdout_error(); !failed.empty()) {
        error = "error: " + failed;
        code = cli::kExitIo;
      }
    }
    if (!error.empty()) {
      std::cerr.flush();
      driver::defer_error_to_rank0();  // an error every rank meets is said once, by rank 0
      const std::string line = error_prefix + error + "\n";
      (void)!write(error_fd, line.data(), line.size());
      // A rank that failed alone ends the whole job: the others may be waiting for it.
      if (driver::mpi_job()) driver::MpiJob::abort(code);
    }
    driver::leave_mpi_job();
    return code;
  }
  std::cerr << "error: unknown command '" << name << "'\n\n";
  print_usage(std::cerr);
  return cli::kExitUsage;
}
