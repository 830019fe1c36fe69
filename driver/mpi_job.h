// The MPI job a process is a rank of, when `mpirun` started it (Open MPI; docs/design.md, ranks).
// Ranks are peers of a data-parallel run (engine/replicas.h): Peers::sum is one MPI_Allreduce on
// the plain array, in place. Started alone, a process never calls MPI at all: the library is
// linked, not initialised, and the binary behaves as without it.
#pragma once

#include <optional>

#include "engine/replicas.h"

namespace polymargin::driver {

/// True when the launcher of an MPI job started this process (its environment says so).
bool launched_as_rank();

class MpiJob {
 public:
  /// Joins the job (MPI_Init_thread, calls from any one thread at a time). std::runtime_error
  /// when this build has no MPI or MPI cannot start.
  MpiJob();
  ~MpiJob();  // MPI_Finalize, after every rank has arrived
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The ranks as a run's peers.
  engine::Peers peers() const;
  /// Ends every rank of the job with `code` (MPI_Abort): a rank that failed alone must not leave
  /// the others waiting in a collective call.
  [[noreturn]] static void abort(int code);

 private:
  int rank_ = 0, size_ = 1;
};

/// The job joined by join_mpi_job(), if any.
MpiJob* mpi_job();
/// Called by a rank about to report an error (print it, write --metrics-json): a rank other than
/// 0 first waits a second, once, so that an error every rank meets (the options, a missing file)
/// is reported by rank 0, whose abort ends the others first. Nothing outside an MPI job.
void defer_error_to_rank0();
/// Joins once (launched_as_rank() must be true).
MpiJob& join_mpi_job();
/// Leaves the job cleanly (MPI_Finalize) if one was joined.
void leave_mpi_job();

}  // namespace polymargin::driver
