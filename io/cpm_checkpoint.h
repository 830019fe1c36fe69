// Checkpoints of `train --algo cpm`: every side's learner state (U in the run's precision, the
// intercept sums, the step, update and adjustment counters, ASSIGN's face counts and history), the
// trainer's batch counter, and where the reader stood: pass p, b batches (reader windows) of it
// learnt. A window's rows and each side's order in it depend only on (data, seed, pass, window
// number) and the batch counter, so a resumed run re-scans pass p from window b on and writes a
// model bit-identical to an uninterrupted run's. Stored in the model container (io/model_file.h)
// under the kind "cpm_checkpoint", written atomically, with the run's configuration and the data's
// identity for the resume check (cli/train_jobs.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cpm.h"
#include "io/model_file.h"

namespace polymargin::io {

/// Version of the CPM checkpoint header and arrays; another version is refused.
inline constexpr int kCpmCheckpointVersion = 1;

/// Where the reader stood: `batches` windows of pass `pass` (0-based) learnt, `rows` rows learnt
/// in all passes together (what --stop-after-rows counts).
struct CpmPosition {
  std::uint64_t pass = 0;
  std::uint64_t batches = 0;
  std::uint64_t rows = 0;
};

struct CpmCheckpoint {
  nlohmann::json config;  // the options that decide the model (checked on resume)
  nlohmann::json data;    // the data's identity (data_identity)
  CpmPosition position;
  std::uint64_t batches = 0;  // the trainer's batch counter
  std::vector<engine::CpmTrainer::SideState> sides;
  std::vector<std::string> weights;  // each side's U, bytes as CpmTrainer::side_weights gives;
                                     // empty for a side whose U went where the reader placed it
  std::vector<bool> weights_placed;  // per side: its U went where the reader's place said
};

/// Where a side's U goes as the checkpoint is read: a buffer of exactly `bytes` bytes for side
/// `side`'s weights of `dtype` ("f64", "f32"), or an empty span to have them read into
/// CpmCheckpoint::weights. A resumed run reads U straight into its trainer: held once, not twice.
using CpmWeightsPlace =
    std::function<std::span<char>(std::size_t side, const std::string& dtype, std::uint64_t bytes)>;

/// Writes `trainer`'s state at `position` to `path` atomically, U straight from the trainer.
void write_cpm_checkpoint(const std::string& path, const nlohmann::json& config,
                          const nlohmann::json& data, CpmPosition position,
                          const engine::CpmTrainer& trainer);

/// Reads a checkpoint; DataError naming the file for anything that is not a version-1 CPM
/// checkpoint (a model or a linear checkpoint included), IoError when unreadable.
CpmCheckpoint read_cpm_checkpoint(const std::string& path, const CpmWeightsPlace& place = {});
/// The header of a CPM checkpoint (its "config": what the run decides before it allocates), after
/// the file's checksum, its kind and version checked as read_cpm_checkpoint checks them.
nlohmann::json read_cpm_checkpoint_header(const std::string& path);

}  // namespace polymargin::io
