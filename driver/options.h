// The options of a training job, each once: its key (the command line's --KEY, a --config file's
// KEY, the Python estimators' parameter KEY with '_' for '-'), the learners it applies to, its type,
// its default, its help text, its --tune grid, and how its value goes into a driver::TrainJob.
// The command line's parser and help, --config's keys, `--tune`'s cells and grids, `experiment`'s
// checks and the Python estimators' parameters are all made from this one table
// (docs/design.md, "One option table"). Adding an option is one entry in options.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace polymargin::driver {

struct TrainJob;

/// The learners, as bits of a set.
enum LearnerBit : unsigned {
  kLdm = 1u << 0,
  kSvm = 1u << 1,
  kCpm = 1u << 2,
  kKldm = 1u << 3,
  kTldm = 1u << 4,
  kCmm = 1u << 5,
  kLinear = kLdm | kSvm,
  kStreamed = kLdm | kSvm | kCpm,  // read a window at a time, as replicas (workers, ranks)
  kKernel = kKldm | kTldm | kCmm,  // the whole set in memory
  kTuned = kStreamed | kKldm | kTldm,  // the learners --tune searches (a grid of their own)
  kAllLearners = kStreamed | kKernel,
};

/// The bit of the learner named `algo` (ldm, svm, cpm, kldm, tldm, cmm), or 0 for no learner.
unsigned learner_bit(const std::string& algo);
/// The learners' names, in the order of their bits.
const std::vector<std::string>& learner_names();

/// What an option's value is: a switch (given or not), a number or a word, or several words.
enum class OptionType { kSwitch, kInt, kInt64, kUInt32, kUInt64, kReal, kText, kTexts };
using OptionValue = std::variant<bool, int, std::int64_t, std::uint32_t, std::uint64_t, double,
                                 std::string, std::vector<std::string>>;

/// Who takes an option besides a job of its learners (bits of TrainOption::role).
enum OptionRole : unsigned {
  /// The Python estimators: a parameter of theirs (its key with '_' for '-').
  kEstimatorParam = 1u << 0,
  /// A --tune cell: it gets the option as the user gave it. Not one: the run's own files, reports,
  /// threads and replicas (a cell is one learner on one thread), which the final run alone gets.
  kCellParam = 1u << 1,
  /// The --tune search's own (--tune, --tune-folds, ...): read by the search, never by a job.
  kSearchParam = 1u << 2,
  /// What the model learns: both of the first two.
  kModelParam = kEstimatorParam | kCellParam,
};

/// One option of `train`.
struct TrainOption {
  std::string key{};            // "cost": --cost, `cost = ` in a --config file, cost= in Python
  char short_name = 0;          // 'c': -c; 0: none
  unsigned learners = 0;        // the learners whose help shows it and who take it (LearnerBit bits)
  unsigned hidden = 0;          // learners that take it unlisted, to refuse it with their reason
  OptionType type = OptionType::kText;
  std::string default_text{};   // the default as its help shows it; "" when none is shown
  std::string help{};
  /// The values --tune searches, the default first (ties go to it); empty: not searched.
  std::vector<std::string> grid{};
  bool required = false;        // the command refuses to run without it (--output)
  unsigned role = kModelParam;  // OptionRole bits
  /// The Python estimators' other name for it, scikit-learn's (C, n_jobs, random_state, tol,
  /// max_iter): a parameter beside the key's, either given; "" when none.
  std::string estimator_alias{};
  /// Puts a value given by the user into the job (whose algo is set); UsageError for a value the
  /// option refuses. Null for the --tune search's own options.
  std::function<void(TrainJob& job, const OptionValue& value)> apply{};

  bool applies_to(unsigned learner) const { return (learners & learner) != 0; }
  bool taken_by(unsigned learner) const { return ((learners | hidden) & learner) != 0; }
};

/// Every option of `train`, in the order the help lists them.
const std::vector<TrainOption>& train_options();
/// The option `key` of `algo` (listed or hidden), or null.
const TrainOption* find_train_option(const std::string& algo, const std::string& key);
/// The first option `key` of any learner (its type and roles are the key's for every learner that
/// takes it), or null.
const TrainOption* find_train_option(const std::string& key);

/// A learner's --tune search: its grid's keys in the groups the coordinate search takes in turn,
/// each group's best kept (the values are the options' grids).
struct SearchPlan {
  std::string algo;
  std::vector<std::vector<std::string>> groups;
};
/// The searches of the learners --tune takes (kTuned), in learner order.
const std::vector<SearchPlan>& search_plans();
/// The search of `algo`, or null for a learner --tune does not take.
const SearchPlan* search_plan(const std::string& algo);

}  // namespace polymargin::driver
