#include "driver/mpi_job.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#ifdef POLYMARGIN_HAVE_MPI
#include <mpi.h>
#endif

namespace polymargin::driver {

namespace {
std::optional<MpiJob> joined;
}  // namespace

bool launched_as_rank() {
  // Open MPI's launcher sets OMPI_COMM_WORLD_SIZE; PMI_SIZE and PMIX_RANK cover other launchers
  // (srun, hydra) of an MPI library the binary may be linked against.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

#ifdef POLYMARGIN_HAVE_MPI

MpiJob::MpiJob() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    throw std::runtime_error("MPI_Init_thread failed");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw std::runtime_error("the MPI library does not allow calls from more than one thread");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiJob::~MpiJob() {
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 may still be writing the model
  MPI_Finalize();
}

engine::Peers MpiJob::peers() const {
  engine::Peers peers{rank_, size_, {}};
  peers.sum = [](std::span<double> values) {
    // In pieces of kPiece doubles (8 MiB). A reduction's scratch is the size of its message, and
    // glibc maps a block that large afresh at every call and unmaps it after: one all-reduce of the
    // 323.5 MB of a KDD-size LDM faulted in ~160 MB of zeroed pages each time (0.15 s between two
    // ranks of one machine, against 0.065 s in pieces, whose scratch the heap keeps). A piece is
    // still large enough for the all-reduce to run at the link's bandwidth across machines.
    constexpr std::size_t kPiece = std::size_t{1} << 20;
    static_assert(kPiece <= INT_MAX);  // MPI counts are int
    for (std::size_t at = 0; at < values.size(); at += kPiece) {
      const int count = static_cast<int>(std::min(kPiece, values.size() - at));
      if (MPI_Allreduce(MPI_IN_PLACE, values.data() + at, count, MPI_DOUBLE, MPI_SUM,
                        MPI_COMM_WORLD) != MPI_SUCCESS)
        throw std::runtime_error("MPI_Allreduce failed");
    }
  };
  return peers;
}

void MpiJob::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; should it, the rank still ends
}

#else

MpiJob::MpiJob() {
  throw std::runtime_error(
      "started by an MPI launcher, but this build has no MPI (install libopenmpi-dev and rebuild)");
}
MpiJob::~MpiJob() = default;
engine::Peers MpiJob::peers() const { return {}; }
void MpiJob::abort(int code) { std::_Exit(code); }

#endif

MpiJob* mpi_job() { return joined ? &*joined : nullptr; }

void defer_error_to_rank0() {
  static std::once_flag waited;
  if (joined && joined->rank() != 0)
    std::call_once(waited, [] { std::this_thread::sleep_for(std::chrono::seconds(1)); });
}

MpiJob& join_mpi_job() {
  if (!joined) joined.emplace();
  return *joined;
}

void leave_mpi_job() { joined.reset(); }

}  // namespace polymargin::driver
