// The --tune search of the training library: a learner's settings chosen by validation inside the
// training data, then the learner trained on all of it with the chosen setting
// (tune(job, events, record)). The rows are written once into k seeded fold files (io::Splitter;
// above TuneJob::search_rows rows, a holdout of whole blocks and a seeded subsample of the others,
// as two shard directories); each setting of the learner's grid (driver/options.h) is a training
// job per fold (driver::train, in this process, on oneTBB tasks) scored on its held-out fold;
// settings are visited a group of keys at a time (coordinate search), each group's best kept; the
// final run is driver::train of the job with the chosen values. In an MPI job the ranks share the
// cells out. docs/design.md, "Tuning", says why it is built this way.
//
//   driver::TuneJob tune;
//   tune.train.algo = "svm";
//   tune.train.inputs = {"heart.shards"};
//   tune.train.output = "heart.model";
//   tune.folds = 5;
//   driver::Events quiet;
//   nlohmann::ordered_json record;
//   driver::TuneResult result = driver::tune(tune, quiet, record);
//   // result.chosen: {{"cost", "1"}, {"normalize", "none"}, {"bias", "1"}}
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "driver/failure.h"
#include "driver/grid.h"
#include "driver/job.h"
#include "driver/train.h"

namespace polymargin::driver {

/// Rows the search trains on at most (the default of --tune-rows). Up to this many rows: k-fold
/// cross-validation. Above: a holdout of whole blocks, kTuneHoldoutFraction of the rows but at
/// most kTuneHoldoutRows, and a seeded subsample of about that many of the other rows; the final
/// model is trained on all.
inline constexpr std::uint64_t kTuneSearchRows = 200000;
inline constexpr double kTuneHoldoutFraction = 0.1;
inline constexpr std::uint64_t kTuneHoldoutRows = 100000;
/// Text has no blocks: its holdout is of runs of this many rows (a shard block's default), or of
/// 1/64 of the rows when that is fewer.
inline constexpr std::uint64_t kTuneBlockRows = 4096;

/// A search: the job of the final run and the search's own options.
struct TuneJob {
  /// The final run: its learner, its data (files, or rows in memory: TrainJob::shards), its output
  /// and job options. Its learner's options are every cell's too; its checkpoint (when set) keeps
  /// the finished cells in CHECKPOINT.tune, and its resume continues a search stopped before its
  /// final run from them. The seed and threads are the search's too.
  TrainJob train;
  /// The options the caller gave (key, value as given; "" for a switch), of those a cell takes
  /// (driver::kCellParam): they are kept, not searched, and name a cached cell.
  Setting given;
  int folds = 5;    // k of the cross-validation, in [2, 1000]
  int repeats = 0;  // seeded splits into k folds; 0: ceil(2000 / rows), at most 5 (cpm: 1)
  std::uint64_t search_rows = kTuneSearchRows;  // above: a holdout and a subsample of this many
  std::string budget;  // "" (the whole search), N settings, or a time (30s, 10m, 1h)
};

/// What a search leaves besides the final model file.
struct TuneResult {
  Setting chosen;  // the grid's keys at the values chosen; empty when nothing was searched
  /// The search's record (folds, grid, every setting's mean and per-fold accuracies, the choice),
  /// which the model and the summary keep as "tune".
  nlohmann::json search;
  TrainResult final;  // the final run's (leader false on an MPI rank that did not train it)
};

/// Thrown when a stop request (Events::stop_requested) ended the search before its final run; with
/// a checkpoint (`checkpoint` set) the finished cells are kept for a run with --resume. `message`
/// says so ("interrupted by SIGTERM in the --tune search (4 settings done): ...").
struct SearchInterrupted : Interrupted {
  std::string message;
};

/// The learners' grids (driver/options.h): each searched key with its values, in the coordinate
/// search's groups. Null for a learner the search does not take.
struct SearchGrid {
  std::string algo;
  std::vector<GridKey> keys;
  std::vector<std::vector<std::string>> groups;
};
const SearchGrid* search_grid(const std::string& algo);

/// Runs the search of `job` and then its final run (driver::train, with the choice; its
/// TrainJob::tune the search's record). Checks the job first (UsageError; paths, the cell cache,
/// the warm-start model) and takes the final run's locks, held until it ends. The search's notes
/// (what it searches, the table of settings, the choice) go to `events`, whose stop_requested is
/// polled from the cells' threads at once; its cells say nothing. `record` is the final run's (what
/// --metrics-json writes): before it, {command, algorithm, data, model_path} and, once the search
/// is done, "tune". CellFailed, SearchInterrupted, or the final run's own errors.
TuneResult tune(const TuneJob& job, Events& events, nlohmann::ordered_json& record);

}  // namespace polymargin::driver
