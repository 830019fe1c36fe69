// driver::tune: the search's cells, its stages, its record, and the final run (the search's data,
// folds or a holdout: driver/tune_data.h).

#include "driver/tune.h"

#include <stdlib.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "driver/failure.h"
#include "driver/mpi_job.h"
#include "driver/options.h"
#include "driver/text.h"
#include "driver/tune_data.h"
#include "engine/errors.h"
#include "io/cell_cache.h"
#include "io/model_file.h"
#include "io/output_path.h"
#include "io/shards.h"
#include "io/temporaries.h"

namespace polymargin::driver {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Bumped when the meaning of a cached tuning cell changes (3: a cell is named by the options
// given, no longer by its argument list).
constexpr int kTuneCellVersion = 3;

// The default repeats: cross-validation on few rows repeated on seeded splits until about 2000
// rows are scored per setting, at most 5 times (on a UCI set of a few hundred rows one 5-fold
// split's choice moves with the split). Repeats steady the choice of the learners whose cells are
// exact solves or averaged SGD (bench/tune.sh: the mean gap to the best cell on the UCI half
// splits, ldm −2.21 → −1.65 points, svm −1.51 → −1.22, tldm −1.87 → −1.61, kldm −1.63 → −1.77).
// A CPM cell is a run of at least 50,000 SGD steps a side whatever the rows, whose own noise
// repeats do not average out (−2.41 → −2.40) at 7× the time: one split unless asked.
int default_repeats(const std::string& algo, std::uint64_t rows) {
  if (algo == "cpm" || rows == 0) return 1;
  return static_cast<int>(std::clamp<std::uint64_t>((2000 + rows - 1) / rows, 1, 5));
}

// The value given for `key`, or null.
const std::string* given_value(const Setting& given, const std::string& key) {
  for (const auto& [k, v] : given)
    if (k == key) return &v;
  return nullptr;
}

// The seed of the job's learner: of its folds, holdout and subsample too.
std::uint64_t learner_seed(const TrainJob& job) {
  if (job.algo == "ldm" || job.algo == "svm") return job.linear.seed;
  if (job.algo == "cpm") return job.cpm.seed;
  if (job.algo == "tldm") return job.tldm.kernel.seed;
  if (job.algo == "cmm") return job.cmm.kernel.seed;
  return job.kldm.kernel.seed;
}

// How messages name the search's data: its files, or the rows in memory.
std::string search_data_name(const TrainJob& job) {
  if (job.shards) return job.job.data_name.empty() ? "<memory>" : job.job.data_name;
  return data_name(job.inputs);
}

// --tune-budget: a number of settings, or a time.
struct Budget {
  std::size_t settings = 0;  // 0: no limit
  double seconds = 0;        // 0: no limit
};

Budget parse_budget(const std::string& text) {
  Budget b;
  if (text.empty()) return b;
  std::size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = used ? text.substr(used) : "";
  const double scale = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (used > 0 && unit.empty() && value >= 1 && value == std::floor(value) && value <= 1e6) {
    b.settings = static_cast<std::size_t>(value);
  } else if (used > 0 && scale > 0 && value > 0 && std::isfinite(value)) {
    b.seconds = value * scale;
  } else {
    throw UsageError(
        "train: --tune-budget must be a number of settings (e.g. 8) or a time (30s, 10m, 1h); got "
        "'" +
        text + "'");
  }
  return b;
}

// The search's working directory in $TMPDIR, named as the on-the-fly conversions are (swept by a
// later run once this process is gone), removed when it dies or the process is stopped.
struct WorkDir {
  std::string path;
  io::TemporaryPath temporary;
  WorkDir() {
    temporary = io::TemporaryPath::create([&] {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/polymargin-" +
                            std::to_string(::getpid()) + "-tune-XXXXXX";
      if (!::mkdtemp(pattern.data()))
        throw IoError("train: --tune: cannot create a directory " + pattern + ": " +
                      std::strerror(errno));
      path = pattern;
      return path;
    });
  }
  ~WorkDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

json setting_json(const Setting& setting) {
  json j = json::object();
  for (const auto& [key, value] : setting) j[key] = value;
  return j;
}

// A value of the grid (or a carried step), as the option `key` of `algo` takes it.
OptionValue option_value(const TrainOption& o, const std::string& text) {
  std::size_t used = 0;
  try {
    switch (o.type) {
      case OptionType::kSwitch: return text.empty() || text == "true" || text == "1";
      case OptionType::kInt: return std::stoi(text, &used);
      case OptionType::kInt64: return static_cast<std::int64_t>(std::stoll(text, &used));
      case OptionType::kUInt32: return static_cast<std::uint32_t>(std::stoul(text, &used));
      case OptionType::kUInt64: return static_cast<std::uint64_t>(std::stoull(text, &used));
      case OptionType::kReal: return std::stod(text, &used);
      case OptionType::kText: return text;
      case OptionType::kTexts: return std::vector<std::string>{text};
    }
  } catch (const std::exception&) {
  }
  throw UsageError("train: --" + o.key + ": the value '" + text + "' is not valid");
}

// The values of `setting` put into `job` through the option table.
void apply_setting(TrainJob& job, const Setting& setting) {
  for (const auto& [key, value] : setting) {
    const TrainOption* o = find_train_option(job.algo, key);
    if (!o || !o->apply) throw UsageError("train: --tune: no option --" + key + " of " + job.algo);
    o->apply(job, option_value(*o, value));
  }
}

// A cell's job: the final run's learner options (those a cell takes), on `inputs`, scored on
// `validation`, one learner on one thread, its model in `output`, no job files of its own.
TrainJob cell_job(const TrainJob& final_job, const Setting& given, int index_base) {
  TrainJob cell;
  cell.algo = final_job.algo;
  cell.window_blocks = final_job.window_blocks;
  cell.linear = final_job.linear;
  cell.cpm = final_job.cpm;
  cell.kldm = final_job.kldm;
  cell.tldm = final_job.tldm;
  cell.cmm = final_job.cmm;
  // Not a cell's: the run's warm start and unlabelled files, and (ldm, svm) the exact pass over
  // the training rows, which only reports.
  cell.linear.warm_start.clear();
  cell.cpm.warm_start.clear();
  cell.cmm.unlabeled.clear();
  if (cell.algo == "ldm" || cell.algo == "svm") cell.linear.final_pass = false;
  cell.job.data_name = final_job.job.data_name;
  cell.job.read_ahead_mib = final_job.job.read_ahead_mib;
  cell.job.index_base = final_job.job.index_base;
  // 0-based fold files: a cell's training folds may lack id 0 while its scored fold has it, and
  // read alone they would count from 1.
  if (index_base == 0 && !given_value(given, "index-base")) cell.job.index_base = "0";
  cell.threads = 1;
  cell.parallel.solo = true;  // in an MPI job the ranks share the cells out
  cell.durable_output = false;  // removed once scored
  return cell;
}

// A cell: one setting trained on k - 1 folds, scored on the other.
struct Cell {
  Setting setting;
  int fold = 0;
  double accuracy = -1;  // < 0: not run (out of time)
  double eta0 = 0;       // the step the cell's learner took (ldm, svm); 0: none reported
  int exit_code = 0;
  std::string error;
};

// The step of a setting's `n` cells from `first`: the lower median of those reported (an odd
// count's middle one: a step one of its cells took), 0 when none was.
double middle_step(std::vector<Cell>::const_iterator first, int n) {
  std::vector<double> steps;
  for (int f = 0; f < n; ++f)
    if (first[f].eta0 > 0) steps.push_back(first[f].eta0);
  if (steps.empty()) return 0;
  const auto middle = steps.begin() + static_cast<std::ptrdiff_t>((steps.size() - 1) / 2);
  std::nth_element(steps.begin(), middle, steps.end());
  return *middle;
}

// CHECKPOINT.tune, the search's cells, is removed once the run ends well: it must not be or hold an
// input, and a directory there must be a cell cache already (each entry a cell's file, named by the
// 32 hex digits of its key's hash), not the user's (refused, exit 2, before any work).
void check_cell_cache(const std::vector<io::NamedPath>& inputs, const std::string& cache_dir) {
  io::check_outputs(inputs, {{"--checkpoint's cell cache", cache_dir, true, ""}});
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(cache_dir, ec);
  if (!fs::exists(status)) return;
  const auto cell_file = [](const fs::directory_entry& entry) {
    const std::string name = entry.path().filename().string();
    return entry.is_regular_file() && name.size() > 33 && name[32] == '.' &&
           std::all_of(name.begin(), name.begin() + 32,
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
  };
  bool cells = fs::is_directory(status);
  try {
    if (cells)
      cells = std::all_of(fs::directory_iterator(cache_dir), fs::directory_iterator(), cell_file);
  } catch (const fs::filesystem_error&) {
    cells = false;
  }
  if (!cells)
    throw io::OutputPathError("train: " + cache_dir +
                                  " exists and is not the cell cache of a --tune run with "
                                  "--checkpoint (it would be removed when the run ends): move it "
                                  "away or choose another --checkpoint",
                              {"--checkpoint"});
}

// A cell's job says nothing (its messages are the search's to give: a failed cell's error), and
// stops when the search's caller asks the search to (polite: then no new cell starts, and the
// finished ones stay in the cache).
class CellEvents final : public Events {
 public:
  explicit CellEvents(Events* search) : search_(search) {}
  int stop_requested() override { return search_ ? search_->stop_requested() : 0; }

 private:
  Events* search_;
};

// The stop request of any rank (SIGTERM, SIGINT, SIGHUP), given this rank's `own` (0: none): every
// rank asks at the same point, and all stop there, naming the same signal.
int agreed_stop(const engine::Peers& peers, int own) {
  constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGHUP};
  std::vector<double> seen(kSignals.size(), 0.0);
  for (std::size_t k = 0; k < kSignals.size(); ++k) seen[k] = own == kSignals[k] ? 1 : 0;
  peers.sum_in_place(seen);
  for (std::size_t k = 0; k < kSignals.size(); ++k)
    if (seen[k] > 0) return kSignals[k];
  return 0;
}

// What the search is: its learner, its data, the seed and threads, the cells' job and cache.
struct SearchSpec {
  const TrainJob* final_job = nullptr;
  Setting given;
  std::uint64_t seed = 1;
  int threads = 0;
  std::string cache_dir;  // CHECKPOINT.tune, or "" without a checkpoint
  std::vector<std::string> data_checksums;
};

// The search's cells, run in parallel (oneTBB) and, in an MPI job, shared out between the ranks:
// rank r runs cells r, r + R, r + 2R, ... of each batch, and one sum (Peers::sum) over the ranks
// gives every rank every cell's result, so that all make the same choices from then on. A cell's
// result does not depend on where it ran: the search is the same on any number of ranks.
class Search {
 public:
  Search(const SearchSpec& spec, const Folds& folds, const std::string& dir,
         const engine::Peers& peers)
      : spec_(spec), folds_(folds), dir_(dir), peers_(peers),
        cell_(cell_job(*spec.final_job, spec.given, folds.index_base)) {
    if (!spec.cache_dir.empty()) cache_.emplace(spec.cache_dir);
  }

  // Runs the cells of `settings` not run yet, in parallel; false when a cell failed.
  bool run(const std::vector<Setting>& settings) {
    std::vector<Cell> cells;
    for (const Setting& s : settings) {
      if (results_.count(s)) continue;
      for (int f = 0; f < folds_.scored; ++f) {
        cells.emplace_back();
        cells.back().setting = s;
        cells.back().fold = f;
      }
    }
    const auto ranks = static_cast<std::size_t>(peers_.count),
               rank = static_cast<std::size_t>(peers_.index);
    tbb::task_arena arena(resolve_threads(spec_.threads));
    arena.execute([&] {
      tbb::parallel_for(std::size_t{0}, (cells.size() + ranks - 1 - rank) / ranks,
                        [&](std::size_t i) { execute(cells[rank + i * ranks]); });
    });
    if (!peers_.alone()) share_results(cells);
    for (std::size_t i = 0; i < cells.size(); i += static_cast<std::size_t>(folds_.scored)) {
      std::vector<double> accuracies;
      for (int f = 0; f < folds_.scored; ++f) {
        const Cell& c = cells[i + static_cast<std::size_t>(f)];
        if (c.exit_code != 0) {
          failed_ = c;
          return false;
        }
        if (c.accuracy >= 0) accuracies.push_back(c.accuracy);
      }
      if (static_cast<int>(accuracies.size()) != folds_.scored)
        continue;  // out of time: not counted
      results_[cells[i].setting] = accuracies;
      eta0_[cells[i].setting] = middle_step(cells.begin() + static_cast<std::ptrdiff_t>(i),
                                            folds_.scored);
      order_.push_back(cells[i].setting);
    }
    return true;
  }

  // Out of the budget's time; in an MPI job, as soon as one rank is (every rank asks at the same
  // point of the search, and all stop there).
  bool out_of_time(const Budget& budget) const {
    std::vector<double> late{budget.seconds > 0 && seconds_since(start_) > budget.seconds ? 1.0
                                                                                         : 0.0};
    peers_.sum_in_place(late);
    return late[0] > 0;
  }
  // No cell starts after `seconds` of the search, but those of `first` (the setting the search
  // starts from): a time budget spent before the first cell still scores one setting.
  void set_deadline(double seconds, const Setting& first) {
    deadline_ = seconds;
    first_ = first;
  }

  // The mean accuracy of a setting run on every fold; < 0 when it was not.
  double mean(const Setting& s) const {
    const auto it = results_.find(s);
    if (it == results_.end()) return -1;
    double sum = 0;
    for (const double a : it->second) sum += a;
    return sum / static_cast<double>(it->second.size());
  }
  const std::vector<Setting>& order() const { return order_; }
  const std::vector<double>& folds_of(const Setting& s) const { return results_.at(s); }
  // The step of a setting's cells (on a holdout its only one, in cross-validation the median of
  // its folds'); 0 when none was reported.
  double eta0(const Setting& s) const { return eta0_.at(s); }
  const Cell& failed() const { return failed_; }
  // The cache of an MPI job's cells is shared as its checkpoint is: rank 0 removes it.
  void remove_cache() const {
    if (spec_.cache_dir.empty() || peers_.index != 0) return;
    std::error_code ignored;
    fs::remove_all(spec_.cache_dir, ignored);
  }

  // Stops politely on `events`' stop requests: no new cell starts, running cells are stopped and
  // not counted, and the finished ones stay in the cache.
  void stop_on(Events& events) { stop_ = &events; }
  // The stop request that stopped the search (SIGTERM, SIGINT, SIGHUP), or 0; in an MPI job, as
  // soon as one rank had one (every rank asks at the same point of the search, and all stop
  // there, naming the same signal).
  int interrupted() const { return agreed_stop(peers_, stopping()); }

 private:
  int stopping() const { return stop_ ? stop_->stop_requested() : 0; }

  json key(const Cell& c) const {
    json given = json::array();
    for (const auto& [k, v] : spec_.given) given.push_back({k, v});
    return {{"version", kTuneCellVersion},
            {"algo", cell_.algo},
            {"given", given},
            {"data", spec_.data_checksums},
            {"folds", folds_.folds},
            {"seed", spec_.seed},
            {"rows", folds_.searched},
            {"holdout", !folds_.holdout.empty()},
            {"setting", setting_json(c.setting)},
            {"fold", c.fold}};
  }

  // The cell's job: the search's, with its setting, on its folds.
  TrainJob job_of(const Cell& c, const std::string& work) const {
    TrainJob job = cell_;
    apply_setting(job, c.setting);
    if (folds_.holdout.empty()) {
      // Cell fold i of repeat r (c.fold = r·k + i): trained on that repeat's other k − 1 folds.
      const int first = c.fold / folds_.folds * folds_.folds;
      for (int f = first; f < first + folds_.folds; ++f)
        if (f != c.fold) job.inputs.push_back(folds_.files[static_cast<std::size_t>(f)]);
      job.job.validation = {folds_.files[static_cast<std::size_t>(c.fold)]};
    } else {
      job.inputs = {folds_.train};
      job.job.validation = {folds_.holdout};
    }
    job.output = work + "/model";
    return job;
  }

  void execute(Cell& c);

  // Every rank's cells in every rank: accuracy, step and exit code of each, summed over the ranks
  // from the rank that ran it (the others add zeros); then the error text of the first failed cell,
  // its bytes carried the same way.
  void share_results(std::vector<Cell>& cells) const {
    const auto ranks = static_cast<std::size_t>(peers_.count),
               rank = static_cast<std::size_t>(peers_.index);
    std::vector<double> results(3 * cells.size(), 0.0);
    for (std::size_t i = rank; i < cells.size(); i += ranks) {
      results[3 * i] = cells[i].accuracy;
      results[3 * i + 1] = cells[i].eta0;
      results[3 * i + 2] = cells[i].exit_code;
    }
    peers_.sum(results);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      cells[i].accuracy = results[3 * i];
      cells[i].eta0 = results[3 * i + 1];
      cells[i].exit_code = static_cast<int>(results[3 * i + 2]);
    }
    const auto failed = std::find_if(cells.begin(), cells.end(),
                                     [](const Cell& c) { return c.exit_code != 0; });
    if (failed == cells.end()) return;
    constexpr std::size_t kErrorBytes = 2048;
    std::vector<double> text(kErrorBytes, 0.0);
    if (static_cast<std::size_t>(failed - cells.begin()) % ranks == rank)
      for (std::size_t k = 0; k < std::min(kErrorBytes, failed->error.size()); ++k)
        text[k] = static_cast<unsigned char>(failed->error[k]);
    peers_.sum(text);
    failed->error.clear();
    for (std::size_t k = 0; k < kErrorBytes && text[k] != 0; ++k)
      failed->error.push_back(static_cast<char>(text[k]));
  }

  const SearchSpec& spec_;
  const Folds& folds_;
  std::string dir_;
  const engine::Peers& peers_;
  TrainJob cell_;  // every cell's job before its setting and folds
  std::optional<io::CellCache> cache_;
  std::atomic<std::uint64_t> next_cell_{0};
  std::map<Setting, std::vector<double>> results_;
  std::map<Setting, double> eta0_;
  std::vector<Setting> order_;  // settings in the order they were run
  Cell failed_;
  Events* stop_ = nullptr;
  Clock::time_point start_ = Clock::now();
  double deadline_ = 0;
  Setting first_;
};

void Search::execute(Cell& c) {
  if (deadline_ > 0 && seconds_since(start_) > deadline_ && c.setting != first_)
    return;  // out of time: not run
  if (stopping()) return;  // interrupted: not run
  json cell_key;
  if (cache_) {
    cell_key = key(c);
    const json cached = cache_->find(cell_key);
    if (cached.is_object() && cached.contains("accuracy")) {
      c.accuracy = cached["accuracy"].get<double>();
      c.eta0 = cached.value("eta0", 0.0);
      return;
    }
  }
  const std::string work = dir_ + "/cell-" + std::to_string(next_cell_++);
  fs::create_directory(work);  // not again once a signal's exit has removed the search's dir_
  // The cell's job, trained in this process (a oneTBB task of the search's arena): quiet, and
  // stopped when the search is.
  CellEvents events(stop_);
  nlohmann::ordered_json summary;
  try {
    const TrainJob job = job_of(c, work);
    nlohmann::ordered_json record;
    summary = train(job, events, record).summary;
  } catch (const Interrupted& stop) {
    c.exit_code = stop.checkpoint.empty() ? 128 + stop.signal : kExitInterrupted;
    c.error = "interrupted by " + signal_name(stop.signal);
  } catch (...) {
    const Failure failure = describe_failure(std::current_exception());
    c.exit_code = failure.code;
    c.error = (failure.code == kExitInternal ? "" : "error: ") + failure.message;
  }
  std::error_code ignored;
  fs::remove_all(work, ignored);
  if (c.exit_code != 0 && stopping()) {  // stopped by the interruption: not run
    c.exit_code = 0;
    return;
  }
  if (c.exit_code != 0) return;
  if (!summary.contains("validation") || !summary["validation"].contains("accuracy")) {
    c.exit_code = kExitInternal;
    c.error = "the cell's job reported no validation accuracy";
    return;
  }
  c.accuracy = summary["validation"]["accuracy"].get<double>();
  if (summary.contains("eta0") && summary["eta0"].is_number())
    c.eta0 = summary["eta0"].get<double>();
  if (cache_) cache_->store(cell_key, {{"accuracy", c.accuracy}, {"eta0", c.eta0}});
}

// What the search's stages came to: the setting chosen, and whether the budget stopped them.
struct SearchOutcome {
  Setting chosen;
  bool stopped_by_budget = false;
};

// The message and code of a search stopped by `signal`, as a run stopped in its training is: with
// a checkpoint its finished cells stay in CHECKPOINT.tune for the next run with --resume, without
// it nothing is kept.
SearchInterrupted search_interrupted(std::size_t settings_done, const std::string& checkpoint,
                                     int signal) {
  SearchInterrupted stop;
  stop.signal = signal;
  stop.checkpoint = checkpoint;
  stop.message = "interrupted by " + signal_name(signal) + " in the --tune search (" +
                 std::to_string(settings_done) + " settings done): " +
                 (checkpoint.empty() ? std::string("nothing kept (no --checkpoint)")
                                     : "its cells are kept in " + checkpoint +
                                           ".tune (continue with --resume " + checkpoint + ")") +
                 ", no model written";
  return stop;
}

// The search, a stage (a group of the grid's keys) at a time from the grid's first setting, each
// stage keeping the best mean of its candidates, within the budget. CellFailed for a failed cell,
// SearchInterrupted for a stop request.
SearchOutcome search_stages(Search& search, const SearchGrid& grid, const Budget& budget,
                            const Folds& folds, const std::string& checkpoint) {
  SearchOutcome outcome;
  Setting& current = outcome.chosen;
  current = first_setting(grid.keys);
  if (budget.seconds > 0) search.set_deadline(budget.seconds, current);
  std::size_t settings_run = 0;
  for (const std::vector<std::string>& stage : grid.groups) {
    std::vector<Setting> candidates = settings_for_group(grid.keys, {}, stage, current);
    if (budget.settings > 0) {
      std::vector<Setting> kept;
      for (const Setting& s : candidates)
        if (search.mean(s) >= 0 || settings_run + kept.size() < budget.settings) kept.push_back(s);
      outcome.stopped_by_budget = outcome.stopped_by_budget || kept.size() < candidates.size();
      candidates = kept;
    }
    if (!search.run(candidates)) {
      const Cell& c = search.failed();
      const std::string repeat =
          folds.repeats > 1 ? " of repeat " + std::to_string(c.fold / folds.folds + 1) : "";
      throw CellFailed(c.exit_code, "train: --tune: the cell " + setting_text(c.setting, grid.keys) +
                                        ", fold " + std::to_string(c.fold % folds.folds + 1) +
                                        repeat + " failed (exit " + std::to_string(c.exit_code) +
                                        "): " + c.error);
    }
    if (const int signal = search.interrupted())
      throw search_interrupted(search.order().size(), checkpoint, signal);
    settings_run = search.order().size();
    double best = -1;
    for (const Setting& s : candidates)
      if (search.mean(s) > best) best = search.mean(s), current = s;
    if (search.out_of_time(budget)) {
      outcome.stopped_by_budget = true;
      break;
    }
  }
  if (grid.keys.empty()) current.clear();
  return outcome;
}

// The LDM/SVM's final run takes the step (η0) its setting's cells calibrated (on a holdout its
// cell's, in cross-validation the median of its folds'): the step is part of what was validated,
// and the schedule is the same in epochs whatever the rows (λη0t ≤ epochs·η0/C), while a
// calibration on another first window can land factors of 2 away. At KDD size (SVM, C = 10,
// --normalize l2, a bias) the calibration on all rows gives 0.016 and a model of the majority's
// accuracy, where η0 = 1 gives 0.859 (docs/design.md). 0: none.
double carried_eta0(const Search& search, const Setting& chosen, const TrainJob& job) {
  const bool searched =
      std::find(search.order().begin(), search.order().end(), chosen) != search.order().end();
  if ((job.algo == "ldm" || job.algo == "svm") && searched && job.linear.eta0 == "auto")
    return search.eta0(chosen);
  return 0;
}

// The search's record (which the final run writes into its model and reports), and the table of
// the settings tried and the choice, noted.
json report_search(const Search& search, const SearchGrid& grid, const SearchOutcome& outcome,
                   const TuneJob& job, std::uint64_t seed, const Folds& folds, double eta0,
                   double seconds, Events& events) {
  const Setting& chosen = outcome.chosen;
  const std::string& algo = job.train.algo;
  json cells = json::array();
  events.note(strprintf("  %-56s %9s", "setting", folds.holdout.empty() ? "CV acc." : "holdout"));
  for (const Setting& s : search.order()) {
    events.note(strprintf("  %-56s %9.4f%s", setting_text(s, grid.keys).c_str(), search.mean(s),
                          s == chosen ? "  <- chosen" : ""));
    cells.push_back({{"setting", setting_json(s)},
                     {"accuracy", search.mean(s)},
                     {"fold_accuracies", search.folds_of(s)}});
    if (search.eta0(s) > 0) cells.back()["eta0"] = search.eta0(s);
  }
  json grid_json = json::object();
  for (const GridKey& k : grid.keys) grid_json[k.key] = k.values;
  // None when nothing was searched (every grid option given).
  const double chosen_accuracy = grid.keys.empty() ? -1 : search.mean(chosen);
  const json chosen_json = chosen_accuracy >= 0 ? json(chosen_accuracy) : json();
  json record = {{"folds", folds.holdout.empty() ? folds.folds : 0},  // a holdout has none
                 {"repeats", folds.holdout.empty() ? folds.repeats : 0},
                 {"holdout", !folds.holdout.empty()},
                 {"seed", seed},
                 {"rows", folds.rows},
                 {"rows_searched", folds.searched}};
  if (!folds.holdout.empty()) {
    record["rows_held_out"] = folds.held_out;
    record["holdout_blocks"] = folds.holdout_blocks;
  }
  if (eta0 > 0) record["eta0"] = eta0;
  record.update(json{{"grid", grid_json},
                     {"budget", job.budget.empty() ? json() : json(job.budget)},
                     {"stopped_by_budget", outcome.stopped_by_budget},
                     {"settings", cells},
                     {"chosen", setting_json(chosen)},
                     {"validation_accuracy", chosen_json}});
  char accuracy_text[48] = "";
  if (chosen_accuracy >= 0)
    std::snprintf(accuracy_text, sizeof accuracy_text, " (%s accuracy %.4f)",
                  folds.holdout.empty() ? "cross-validation" : "holdout", chosen_accuracy);
  events.note(strprintf("tune %s: %zu settings in %.1f s; chosen %s%s%s; training on all %llu rows",
                        algo.c_str(), search.order().size(), seconds,
                        grid.keys.empty() ? "(nothing to search)"
                                          : setting_text(chosen, grid.keys).c_str(),
                        accuracy_text, outcome.stopped_by_budget ? ", stopped by --tune-budget" : "",
                        static_cast<unsigned long long>(folds.rows)));
  return record;
}

// The line that says what the search trains and scores on.
void announce_search(const Folds& folds, std::uint64_t seed, const std::string& algo,
                     Events& events) {
  if (folds.holdout.empty())
    events.note(strprintf(
        "tune %s: %d-fold cross-validation%s (seed %llu) on %llu rows", algo.c_str(), folds.folds,
        folds.repeats > 1 ? (", repeated " + std::to_string(folds.repeats) + " times").c_str() : "",
        static_cast<unsigned long long>(seed), static_cast<unsigned long long>(folds.searched)));
  else
    events.note(strprintf(
        "tune %s: of %llu rows, %llu held out (%llu whole blocks of %llu) and a seeded "
        "subsample of %llu of the others searched (seed %llu, %llu feature ids); each "
        "setting trained on the subsample and scored on the holdout",
        algo.c_str(), static_cast<unsigned long long>(folds.rows),
        static_cast<unsigned long long>(folds.held_out),
        static_cast<unsigned long long>(folds.holdout_blocks),
        static_cast<unsigned long long>(folds.blocks),
        static_cast<unsigned long long>(folds.searched), static_cast<unsigned long long>(seed),
        static_cast<unsigned long long>(folds.features)));
}

// The grid less the keys given (kept as given); and the CPM's entropy floor when the final run has
// several replicas, which keep it at 1.
SearchGrid search_method(const SearchGrid& grid, const Setting& given, int replicas) {
  SearchGrid method{grid.algo, {}, {}};
  std::set<std::string> fixed;
  for (const GridKey& k : grid.keys) {
    bool set = given_value(given, k.key) != nullptr;
    if (k.key.size() > 4 && k.key.compare(k.key.size() - 4, 4, "-rel") == 0)
      set = set || given_value(given, k.key.substr(0, k.key.size() - 4));
    // The RBF width does nothing under another kernel or beside --gamma: not searched then.
    if (k.key == "rbf-width") {
      const std::string* kernel = given_value(given, "kernel");
      set = set || (kernel && !kernel->empty() && *kernel != "rbf") || given_value(given, "gamma");
    }
    if (set || (k.key == "entropy" && replicas > 1))
      fixed.insert(k.key);
    else
      method.keys.push_back(k);
  }
  for (const std::vector<std::string>& group : grid.groups) {
    std::vector<std::string> kept;
    for (const std::string& key : group)
      if (!fixed.count(key)) kept.push_back(key);
    if (!kept.empty()) method.groups.push_back(kept);
  }
  return method;
}

// The final run's own options, which no cell receives (--workers, --sync-rows, --checkpoint-every,
// --stop-after-rows, --read-ahead; the CPM's --warm-start and its entropy with replicas), checked
// as its job checks them: refused before the search, not after it. Returns the replicas the final
// run will have (1 for the kernel learners).
int check_final_options(const TuneJob& job) {
  if (!trains_replicated(job.train.algo)) return 1;
  DataParallel parallel = job.train.parallel;
  parallel.check();
  JobOptions options = job.train.job;
  options.check();
  if (job.train.algo == "cpm") {
    if (!job.train.cpm.warm_start.empty()) refuse_cpm_warm_start();
    if (given_value(job.given, "entropy")) check_cpm_replicas(parallel, job.train.cpm.entropy);
  }
  return parallel.total();
}

// The resume of the final run: from its checkpoint when it is there. A run stopped in its search
// has none yet, only the cells it finished (in CHECKPOINT.tune): the search continues from them,
// and the final run starts from the beginning. Neither: refused now, not after the search. True
// when the checkpoint is there.
bool resumes_final_run(const std::string& resume, const std::string& cache_dir,
                       const std::string& algo, Events& events) {
  if (resume.empty()) return false;
  std::error_code ec;
  if (fs::exists(resume, ec)) return true;
  if (cache_dir.empty() || !fs::is_directory(cache_dir, ec))
    throw IoError("train: --resume " + resume + ": no such checkpoint, and no cells of a " +
                  "stopped --tune search in " +
                  (cache_dir.empty() ? "CHECKPOINT.tune (no --checkpoint given)" : cache_dir));
  events.note(strprintf(
      "tune %s: no checkpoint %s yet (the run was stopped in its search): the search "
      "continues from the cells kept in %s, the final run starts from the beginning",
      algo.c_str(), resume.c_str(), cache_dir.c_str()));
  return false;
}

// A warm start: the final run starts from this model, so it must be one of this learner's (checked
// with the data's labels, later), and the final run must have its bias and normalisation: the
// search keeps those (a setting the final run would refuse is no choice), put into the final job
// and among the options given. Refused now, not after the search.
std::optional<engine::LinearModel> keep_warm_start_settings(TuneJob& job, Events& events) {
  TrainJob& final_job = job.train;
  const std::string& path = final_job.linear.warm_start;
  if (path.empty() || (final_job.algo != "ldm" && final_job.algo != "svm")) return std::nullopt;
  engine::LinearModel warm_model = io::load_model(path);  // DataError for another kind
  const std::pair<std::string, std::string> kept[] = {
      {"bias", number(warm_model.bias_value)},
      {"normalize", warm_model.normalize_l2 ? "l2" : "none"}};
  for (const auto& [key, value] : kept) {
    const std::string* given = given_value(job.given, key);
    if (!given) {
      job.given.emplace_back(key, value);
      apply_setting(final_job, {{key, value}});
    } else if (*given != value &&
               !(key == "bias" && std::strtod(given->c_str(), nullptr) == warm_model.bias_value)) {
      throw UsageError("train: --warm-start " + path + " was trained with --" + key + " " + value +
                       ", this run has --" + key + " " + *given + " (they must agree)");
    }
  }
  events.note(strprintf("tune %s: --warm-start %s: the search keeps its --bias %s and --normalize %s",
                        final_job.algo.c_str(), path.c_str(), kept[0].second.c_str(),
                        kept[1].second.c_str()));
  return warm_model;
}

// What tune() checks and holds before the search: the job as the search runs it (the warm start's
// settings added), its grid, budget and replicas, the locks, whether the final run resumes.
struct Prepared {
  TuneJob job;
  SearchGrid method;
  Budget budget;
  std::string cache_dir;
  bool resume_final = false;
  std::optional<JobLocks> locks;
  std::optional<engine::LinearModel> warm_model;
};

void prepare(Prepared& p, Events& events) {
  const TrainJob& train = p.job.train;
  const SearchGrid* grid = search_grid(train.algo);
  if (!grid)
    throw UsageError("train: --tune is for --algo ldm, svm, cpm, kldm, tldm (got '" + train.algo +
                     "')");
  p.budget = parse_budget(p.job.budget);
  check_has_data(train.inputs, train.shards);
  if (train.shards && !train.inputs.empty())
    throw UsageError("train: the job's rows are held in memory and given as files (-d) at once");
  if (std::find(train.inputs.begin(), train.inputs.end(), "-") != train.inputs.end())
    throw UsageError("train: --tune reads the data more than once: not from stdin (-)");
  const std::string& checkpoint = train.job.checkpoint;
  p.cache_dir = checkpoint.empty() ? "" : checkpoint + ".tune";
  p.resume_final = resumes_final_run(train.job.resume, p.cache_dir, train.algo, events);
  // The outputs against the inputs, as train checks them, but before the search, not after it.
  const std::string warm_start = train.algo == "cpm" ? train.cpm.warm_start : train.linear.warm_start;
  const std::vector<io::NamedPath> inputs =
      job_inputs(train.inputs, train.job, warm_start, train.other_inputs, train.cmm.unlabeled);
  check_train_paths(inputs, train.output, checkpoint, train.job.metrics);
  if (!p.cache_dir.empty()) check_cell_cache(inputs, p.cache_dir);
  // The model's and checkpoint's locks too (a second job on them is refused now, not after the
  // search; the search's cells are kept beside the checkpoint): held until the final run's end.
  // Of an MPI job's ranks only rank 0 writes, and locks.
  if (!mpi_job() || mpi_job()->rank() == 0)
    p.locks.emplace(train.output, checkpoint, train.job.metrics);
  p.warm_model = keep_warm_start_settings(p.job, events);
  p.method = search_method(*grid, p.job.given, check_final_options(p.job));
}

// The final run: the job with the chosen setting (and the carried step), the search's record.
TrainResult train_final(const Prepared& p, const Setting& chosen, double eta0,
                        const json& search_record, Events& events,
                        nlohmann::ordered_json& record) {
  TrainJob final_job = p.job.train;
  if (!p.resume_final) final_job.job.resume.clear();
  apply_setting(final_job, chosen);
  if (eta0 > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", eta0);
    apply_setting(final_job, {{"eta0", text}});
    events.note(strprintf("tune %s: the final run takes the chosen setting's step, --eta0 %s",
                          final_job.algo.c_str(), text));
  }
  final_job.tune = search_record;
  final_job.job.locks_held = p.locks.has_value();
  // As a run of its own starts its record.
  record = nlohmann::ordered_json::object();
  record["command"] = "train";
  return train(final_job, events, record);
}

}  // namespace

const SearchGrid* search_grid(const std::string& algo) {
  static const std::vector<SearchGrid> all = [] {
    std::vector<SearchGrid> grids;
    for (const SearchPlan& plan : search_plans()) {
      SearchGrid g{plan.algo, {}, plan.groups};
      for (const std::vector<std::string>& group : plan.groups)
        for (const std::string& key : group)
          g.keys.push_back({key, find_train_option(plan.algo, key)->grid});
      grids.push_back(std::move(g));
    }
    return grids;
  }();
  for (const SearchGrid& g : all)
    if (g.algo == algo) return &g;
  return nullptr;
}

TuneResult tune(const TuneJob& given, Events& events, nlohmann::ordered_json& record) {
  const TrainJob& train_job = given.train;
  start_record(record, train_job.algo, train_job.inputs, train_job.job, train_job.output);
  Prepared p;
  p.job = given;
  prepare(p, events);
  const TrainJob& job = p.job.train;
  const std::uint64_t seed = learner_seed(job);
  const SearchData data{job.inputs, job.shards, job.threads, search_data_name(job)};
  const WorkDir dir;

  const Clock::time_point start = Clock::now();
  const io::Manifest counts = count_rows(data);
  // What every cell would refuse, said once about the user's data rather than a fold's.
  if (job.algo != "cpm") {
    const engine::LabelMap labels = binary_labels(counts, data.name);
    if (p.warm_model) check_warm_model(*p.warm_model, job.linear.warm_start, job.algo, labels);
  }
  const int repeats = p.job.repeats ? p.job.repeats : default_repeats(job.algo, counts.rows);
  Folds folds = counts.rows > p.job.search_rows
                    ? write_holdout(data, seed, p.job.search_rows, dir.path, counts.rows)
                    : write_folds(data, p.job.folds, repeats, seed, dir.path, counts.rows);
  folds.folds = p.job.folds;
  // In an MPI job the ranks share the cells out (each writes the search's data itself, in its own
  // directory), and the final run is the job's data-parallel run (ldm, svm, cpm) or rank 0's.
  const engine::Peers peers = mpi_job() ? mpi_job()->peers() : engine::Peers{};
  announce_search(folds, seed, job.algo, events);
  note_rank_binding(events);
  SearchSpec spec{&job, p.job.given, seed, job.threads, p.cache_dir, {}};
  if (!p.cache_dir.empty()) {  // what the cells ran on, for their cache
    for (const std::string& d : job.inputs) spec.data_checksums.push_back(io::data_checksum(d));
    if (job.shards)
      spec.data_checksums.push_back(io::shard::hex64(io::data_checksum(job.shards->manifest())));
  }
  Search search(spec, folds, dir.path, peers);
  // A stop request stops the search (and keeps its finished cells with a checkpoint).
  search.stop_on(events);
  // One while the search's data were written: no cell starts.
  if (const int signal = search.interrupted())
    throw search_interrupted(0, job.job.checkpoint, signal);
  const SearchOutcome outcome =
      search_stages(search, p.method, p.budget, folds, job.job.checkpoint);
  TuneResult result;
  result.chosen = outcome.chosen;
  const double eta0 = carried_eta0(search, result.chosen, job);
  result.search = report_search(search, p.method, outcome, p.job, seed, folds, eta0,
                                seconds_since(start), events);
  // A stop request after the last stage's check.
  if (const int signal = search.interrupted())
    throw search_interrupted(search.order().size(), job.job.checkpoint, signal);
  // A kernel learner's final run holds the whole set in one process: in an MPI job, rank 0's.
  if (peers.index != 0 && !trains_replicated(job.algo)) {
    result.final.leader = false;
    return result;
  }
  result.final = train_final(p, result.chosen, eta0, result.search, events, record);
  search.remove_cache();
  return result;
}

}  // namespace polymargin::driver
