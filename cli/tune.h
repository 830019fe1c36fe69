// `train --tune`: hyper-parameters chosen by validation inside the training data, then the learner
// trained on all of it with the chosen setting. The search is the training library's
// (driver/tune.h: driver::tune); this is its command line: the arguments taken apart into a
// driver::TuneJob, the search's notes on stderr, the final run's summary printed as `train`
// prints it. docs/design.md, "Tuning", says why it is built this way.
#pragma once

#include <string>
#include <vector>

#include "cli/train.h"
#include "driver/tune.h"

namespace polymargin::cli {

/// True when the arguments of `train` hold --tune. UsageError for --tune-folds, --tune-repeats,
/// --tune-budget or --tune-rows without it.
bool tune_requested(const std::vector<std::string>& args);

/// The search the arguments of `train --tune` ask for (--config's entries read as options given
/// after the others): the final run's job, the options given, the search's own. `json` is set by
/// --json. UsageError for a learner --tune does not take, an option that is not the learner's, or
/// a bad value.
driver::TuneJob parse_tune_job(const std::vector<std::string>& args, bool& json);

/// `train --algo NAME --tune ...` of the learner `a`: the search (its table on stderr), then the
/// final run, whose summary is printed; its outcome in --metrics-json. The exit code: a failed
/// cell's, with its error on stderr; a stopped search's as a stopped run's.
int run_tuned(const std::vector<std::string>& args, const TrainAlgorithm& a);

/// The help of --tune: its options and the grid of every learner.
std::string tune_help();

}  // namespace polymargin::cli
