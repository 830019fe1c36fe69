#include "cli/train_jobs.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/train.h"
#include "driver/mpi_job.h"
#include "driver/tune.h"
#include "engine/errors.h"
#include "io/atomic_file.h"
#include "io/file_lock.h"
#include "io/output_path.h"

namespace polymargin::cli {

int interrupted_exit_code(const Interrupted& stop) {
  return stop.checkpoint.empty() ? 128 + stop.signal : kExitInterrupted;
}

void StderrEvents::note(const std::string& line) {
  if (progress_) progress_->clear();
  err_printf("%s\n", line.c_str());
}

void StderrEvents::progress(std::uint64_t pass, std::uint64_t passes, std::uint64_t done,
                            std::uint64_t rows) {
  if (!progress_) progress_.emplace(rows, static_cast<int>(passes));
  progress_->batch(static_cast<int>(pass), done);
}

void MetricsFile::finish(int exit_code, const std::string& status, const std::string& error) {
  if (!enabled()) return;
  // Written whatever the outcome, also when the command was refused before any work: so never
  // over a file that is not an earlier run's metrics (it may be the input that was refused).
  if (!metrics_may_replace(path_)) {
    err_printf("warning: --metrics-json: not writing %s: it exists and is not a metrics "
                 "file\n",
                 path_.c_str());
    return;
  }
  // Its directory missing is what refused the run at its start, and that error says so.
  std::error_code missing;
  const std::filesystem::path dir =
      std::filesystem::absolute(io::rename_target(path_)).parent_path();
  if (!io::writes_in_place(path_) && !std::filesystem::is_directory(dir, missing)) return;
  json_["status"] = status;
  json_["exit_code"] = exit_code;
  if (!error.empty()) json_["error"] = error;
  try {
    io::write_file_atomically(path_, json_.dump(2) + "\n");
  } catch (const Error& e) {
    // An earlier run's file must not go on saying what this run did not (its "ok"): removed.
    std::error_code ec;
    const bool removed = !io::writes_in_place(path_) && std::filesystem::remove(path_, ec);
    err_printf("warning: --metrics-json: %s%s\n", e.what(),
               removed ? " (the earlier run's metrics file was removed)" : "");
  }
}

std::string rank_prefix() {
  const driver::MpiJob* mpi = driver::mpi_job();
  if (!mpi || mpi->rank() == 0) return "";
  return "rank " + std::to_string(mpi->rank()) + " of " + std::to_string(mpi->size()) + ": ";
}

int run_train_job(const std::vector<std::string>& args, const TrainEntry& job) {
  // Of an MPI job's ranks, rank 0 reports; another rank only when it fails (it then ends the job
  // before rank 0 can: on a shared path its record is the job's), its error named with its rank.
  const driver::MpiJob* mpi = driver::mpi_job();
  const bool leads = !mpi || mpi->rank() == 0;
  const std::string rank = rank_prefix();
  MetricsFile metrics(peek_option(args, "metrics-json", ""));
  metrics.json()["command"] = "train";  // also for a run refused before its options are read
  const auto stopped = [&](const Interrupted& stop) {
    const int code = interrupted_exit_code(stop);
    const std::string message =
        (stop.signal == kStopAfterRows ? "stopped after --stop-after-rows"
                                       : "interrupted by " + signal_name(stop.signal)) +
        (stop.checkpoint.empty()
             ? ": no checkpoint written (no --checkpoint), no model written"
             : ": checkpoint written to " + stop.checkpoint + " (continue with --resume " +
                   stop.checkpoint + "), no model written");
    err_printf("%s\n", message.c_str());
    if (leads) metrics.finish(code, "interrupted", message);
    return code;
  };
  try {
    const int code = job(args, metrics);
    if (code == kHelpShown) return kExitOk;
    // The summary (--json) must have arrived before the run is recorded as ok.
    if (const std::string failed = stdout_error(); !failed.empty()) throw IoError(failed);
    if (leads) metrics.finish(code, "ok");
    return code;
  } catch (const driver::SearchInterrupted& stop) {  // a --tune search's, before its final run
    const int code = interrupted_exit_code(stop);
    if (leads) {
      err_printf("train --algo %s: %s\n", peek_option(args, "algo", "ldm").c_str(),
                 stop.message.c_str());
      metrics.finish(code, "interrupted", stop.message);
    }
    return code;
  } catch (const driver::CellFailed& e) {  // every rank has its message and code
    err_printf("%s\n", e.what());
    if (leads) metrics.finish(e.code(), "error", e.what());
    return e.code();
  } catch (const Interrupted& stop) {  // a kernel job's too (no checkpoint)
    return stopped(stop);
  } catch (const io::OutputPathError& e) {
    // Refused before any work; not written where the refusal says it must not go.
    driver::defer_error_to_rank0();
    if (!e.involves("--metrics-json")) metrics.finish(exit_code_of(e), "error", rank + e.what());
    throw;
  } catch (const io::LockedError& e) {
    // Refused for a file another job writes: when that is the metrics file, it is that job's.
    driver::defer_error_to_rank0();
    if (!metrics.is(e.path())) metrics.finish(exit_code_of(e), "error", rank + e.what());
    throw;
  } catch (const std::exception&) {
    const Failure failure = describe_failure(std::current_exception());
    driver::defer_error_to_rank0();
    metrics.finish(failure.code, "error", rank + failure.message);
    throw;
  }
}

int train_in_library(const driver::TrainJob& job, MetricsFile& metrics,
                     const std::function<void(const nlohmann::ordered_json& summary)>& print) {
  StopSignals stop_signals;
  StderrEvents events;
  const driver::TrainResult result = driver::train(job, events, metrics.json());
  if (result.leader) print(result.summary);
  return kExitOk;
}

}  // namespace polymargin::cli
