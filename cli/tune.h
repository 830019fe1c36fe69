// `train --tune`: hyper-parameters chosen by validation inside the training data, then the learner
// trained on all of it with the chosen setting. The search is `experiment`'s machinery run inside
// one `train`: the rows are written once into k seeded fold files (io::Splitter; above
// kTuneSearchRows rows, a holdout of whole blocks and a seeded subsample of the others, as two
// shard directories), each setting of the learner's grid is a `train` child per fold (the same
// epoch loop as any run) scored on its held-out fold, settings are
// visited by experiment's coordinate search, and the final run is the learner's own entry point
// with the chosen flags added. docs/design.md, "Tuning", says why it is built this way.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"

namespace polymargin::cli {

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

/// True when the arguments of `train` hold --tune. UsageError for --tune-folds, --tune-repeats,
/// --tune-budget or --tune-rows without it.
bool tune_requested(const std::vector<std::string>& args);

/// The search for `algo` (ldm, svm, cpm, kldm, tldm; UsageError for another), a table of it on
/// stderr, then `run` (the learner's entry point) on all the data with the chosen setting: its exit
/// code. A failed cell stops the search with the cell's exit code and its error on stderr.
int run_tuned(const std::vector<std::string>& args, const std::string& algo, const CommandFn& run);

/// While the final run of --tune trains: the search's record (folds, grid, every setting's
/// validation accuracy, the choice), which the learner stores in its model's config ("tune") and in
/// its --json and --metrics-json reports; null otherwise.
const nlohmann::json& tune_record();

/// The help of --tune: its options and the grid of every learner.
std::string tune_help();

}  // namespace polymargin::cli
