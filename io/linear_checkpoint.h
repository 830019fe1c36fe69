// Checkpoints of `train --algo ldm|svm`: the whole learner state (W and A, the scalars a, b, c, the
// step counter, the pairing RNG, η0, the progressive margins of the running epoch) plus where the
// reader stood ("epoch e, n rows of it consumed": an epoch's row order depends only on data, seed
// and epoch, so resuming re-scans epoch e and skips n rows) and what the run was (its configuration
// and the data checksum). Stored in the model container (io/model_file.h) under the kind
// "checkpoint", written atomically; a resumed run produces a model bit-identical to an
// uninterrupted one.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "engine/ldm.h"

namespace polymargin::io {

/// Version of the checkpoint header and arrays; a checkpoint of another version is refused.
inline constexpr int kCheckpointVersion = 1;

/// Where the reader stood: `rows` rows of epoch `epoch` (0-based) were learnt (0 ≤ rows ≤ m), and
/// in a data-parallel run (workers, ranks) its first `windows` windows: each rank's rows are those
/// of its own part, so such a run resumes by windows.
struct TrainPosition {
  std::uint64_t epoch = 0;
  std::uint64_t rows = 0;
  std::uint64_t windows = 0;  // 0: resumed by rows
};

struct LinearCheckpoint {
  nlohmann::json config;  // the options that decide the model (checked on resume)
  nlohmann::json data;    // the data's identity: rows, non-zeros, features, labels, checksum
  TrainPosition position;
  engine::LdmState state;
  engine::MarginStats progress;
  bool eta0_clamped = false;
};

/// Writes `trainer`'s state at `position` to `path` atomically (temporary file, fsync, rename).
void write_linear_checkpoint(const std::string& path, const nlohmann::json& config,
                             const nlohmann::json& data, TrainPosition position,
                             const engine::LdmTrainer& trainer);

/// Where W and A go as the checkpoint is read: a buffer of exactly `doubles` doubles (the
/// trainer's own: engine::LdmTrainer::weights_to_restore), or an empty span to have them read into
/// LinearCheckpoint::state.wa. When placed, state.wa stays empty, which LdmTrainer::restore takes
/// as "in place".
using LinearWeightsPlace = std::function<std::span<double>(std::size_t doubles)>;

/// Reads a checkpoint; DataError naming the file for anything that is not a version-1 linear
/// checkpoint (a model file included), IoError when unreadable.
LinearCheckpoint read_linear_checkpoint(const std::string& path,
                                        const LinearWeightsPlace& place = {});
/// The header of a linear checkpoint, after the file's checksum, its kind and version checked as
/// read_linear_checkpoint checks them: a damaged or wrong file refused before the data are opened.
nlohmann::json read_linear_checkpoint_header(const std::string& path);

}  // namespace polymargin::io
