// `polymargin experiment CONFIG -o DIR`: runs a whole protocol of the papers (seeded splits, k-fold
// model selection over a grid on the training part, retraining, testing) and writes the accuracy
// and timing tables, the margin plots and an HTML report.
//
// Every cell (one training and its test, for one data set, split, fold, method and setting) runs as
// a child process of this same binary (`train ... --json`, then `eval ... --json`), for three
// reasons: the learner's wall and CPU seconds come from the child's rusage and cover exactly its
// work; a crash or an exit code in one cell is contained and reported; and any learner registered
// with `train --algo` runs with no change here. Cells run `--jobs` at a time on plain threads that
// each block in wait4() on their child (oneTBB tasks are for computing, not for waiting). Each cell
// is fully determined by its key, and results are assembled in a fixed order, so the tables do not
// depend on --jobs or on the order in which cells finish.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli/command.h"
#include "cli/experiment_config.h"
#include "cli/experiment_report.h"
#include "cli/experiment_runner.h"
#include "cli/output.h"
#include "cli/progress.h"
#include "cli/signals.h"
#include "cli/train.h"
#include "driver/options.h"
#include "engine/errors.h"
#include "engine/random.h"
#include "io/atomic_file.h"
#include "io/file_lock.h"
#include "io/output_path.h"
#include "io/temporaries.h"

namespace polymargin::cli {
namespace {

using namespace experiment;
namespace fs = std::filesystem;
using nlohmann::json;

// Bumped when the meaning of a cell's result changes, so old caches are not served.
constexpr int kCellVersion = 1;

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

// A data set ready to run: its files, checksums and splits.
struct PreparedDataset {
  const DatasetSpec* spec = nullptr;
  std::string status = "ok";
  std::vector<std::string> data, test;  // resolved (generated sets: the generated files)
  json checksum;  // {"train": [...], "test": [...]}: content checksums, in order (not paths)
  std::vector<SplitFiles> splits;       // one per repeat
  std::vector<json> split_keys;
  DataSummary summary;
};

struct PreparedMethod {
  const MethodSpec* spec = nullptr;
  std::string status = "ok";
  std::string description;
  std::string program;  // liblinear-train path, for external methods
  std::set<std::string> switches;  // the keys that are switches of `train` (true or false)
};

struct Cell {
  std::size_t dataset = 0, method = 0;
  int repeat = 0;
  int fold = -1;  // -1: the final training on the whole training part, tested on the test part
  Setting setting;
  bool margins = false;  // also write the test margin distribution (final cells of repeat 0)
  json key;
  json result;  // {"accuracy", ...} or {"error", "exit_code"}
  bool cached = false;
};

class Experiment {
 public:
  Experiment(ExperimentConfig config, const std::string& out, int jobs, int threads)
      : config_(std::move(config)),
        out_(fs::absolute(out).lexically_normal().string()),
        jobs_(jobs),
        threads_(threads),
        self_(self_executable()),
        cache_(out_ + "/cells") {}

  void check_methods();
  void prepare_datasets();
  int run();

 private:
  // Per (data set, method, repeat): the search state.
  struct Search {
    std::size_t dataset, method;
    int repeat;
    std::vector<std::vector<std::string>> stages;
    Setting current;  // grid keys only
    bool failed = false;
    std::string error;
  };
  std::vector<Search> plan_searches();
  void select_settings(std::vector<Search>& searches);
  std::vector<Cell> final_cells(const std::vector<Search>& searches);
  Report assemble_report(const std::vector<Search>& searches, const std::vector<Cell>& finals);

  void prepare_one(PreparedDataset& d);
  json cell_key(const Cell& cell) const;
  void run_cells(std::vector<Cell>& cells, const std::string& stage);
  void execute(Cell& cell);
  json run_polymargin(const Cell& cell, const std::string& work);
  json run_liblinear(const Cell& cell, const std::string& work);
  std::vector<std::string> train_files(const Cell& cell) const;
  std::vector<std::string> eval_files(const Cell& cell) const;

  ExperimentConfig config_;
  std::string out_;
  int jobs_, threads_;
  std::string self_;
  CellCache cache_;
  // DIR/work, the children's working directories: removed at the end, and by a signal's exit.
  io::TemporaryPath work_;
  std::vector<PreparedDataset> datasets_;
  std::vector<PreparedMethod> methods_;
  // Progress over the whole run.
  std::mutex progress_mutex_;
  ProgressLine progress_{std::chrono::milliseconds(500)};
  std::size_t planned_ = 0, done_ = 0, computed_ = 0, from_cache_ = 0, failed_ = 0;
  double computed_seconds_ = 0;  // wall time of the computed cells, for the ETA
  std::string first_failure_;
  int failure_exit_ = 0;
};

void Experiment::check_methods() {
  std::string learners;
  for (const TrainAlgorithm& a : train_algorithms()) learners += (learners.empty() ? "" : ", ") + a.name;
  work_ = io::TemporaryPath::create([&] {
    fs::create_directories(out_ + "/work");
    return out_ + "/work";
  });
  for (const MethodSpec& m : config_.methods) {
    PreparedMethod p;
    p.spec = &m;
    const std::string where = config_.path + ":" + std::to_string(m.line) + ": method " + m.name;
    // A message about one key names that key's line (the header's when the key was not read from
    // the file).
    const auto where_key = [&](const std::string& k) {
      const auto it = m.key_lines.find(k);
      return config_.path + ":" + std::to_string(it == m.key_lines.end() ? m.line : it->second) +
             ": method " + m.name;
    };
    std::vector<std::string> keys;
    for (const auto& [k, v] : m.fixed) keys.push_back(k);
    for (const GridKey& g : m.grid) keys.push_back(g.key);
    if (!m.external.empty()) {
      p.description = "LIBLINEAR (liblinear-train)";
      for (const std::string& k : keys)
        if (k != "cost" && k != "bias" && k != "solver" && k != "epsilon")
          throw UsageError(where_key(k) +
                           ": LIBLINEAR takes cost, bias, solver and epsilon (got '" + k + "')");
      p.program = find_in_path("liblinear-train");
      if (p.program.empty() || find_in_path("liblinear-predict").empty()) {
        p.status = "liblinear-train/liblinear-predict not found in PATH (Debian package "
                   "liblinear-tools)";
        err_printf("experiment: method %s not run: %s\n", m.name.c_str(), p.status.c_str());
      }
    } else {
      const auto& algos = train_algorithms();
      if (std::none_of(algos.begin(), algos.end(), [&](const TrainAlgorithm& a) { return a.name == m.algo; }))
        throw UsageError(where + ": algo '" + m.algo +
                         "' is not a learner of this polymargin (learners: " + learners + ")");
      p.description = "train --algo " + m.algo;
      // Every key must be one of the learner's own options (driver/options.h).
      for (const std::string& k : keys) {
        const driver::TrainOption* o = driver::find_train_option(m.algo, k);
        if (!o || !o->applies_to(driver::learner_bit(m.algo)))
          throw UsageError(where_key(k) + ": '" + k + "' is not an option of `train --algo " +
                           m.algo + "` (see polymargin train --algo " + m.algo + " --help)");
        if (o->type == driver::OptionType::kSwitch) p.switches.insert(k);
      }
      // A switch is given or not; any other key's value goes to train as it is written.
      const auto check_switch = [&](const std::string& k, const std::string& v) {
        if (p.switches.count(k) && v != "true" && v != "false")
          throw UsageError(where_key(k) + ": '" + k + "' is a switch of `train --algo " + m.algo +
                           "`: its values are true and false (got '" + v + "')");
      };
      for (const auto& [k, v] : m.fixed) check_switch(k, v);
      for (const GridKey& g : m.grid)
        for (const std::string& v : g.values) check_switch(g.key, v);
    }
    methods_.push_back(std::move(p));
  }
}

void Experiment::prepare_datasets() {
  // Existence first, for every data set, so a typo stops the run before any work.
  for (const DatasetSpec& d : config_.datasets) {
    PreparedDataset p;
    p.spec = &d;
    for (const auto& [list, line] :
         {std::pair{&d.data, d.data_line}, std::pair{&d.test, d.test_line}})
      for (const std::string& path : *list)
        if (!fs::exists(path)) {
          const std::string message = "data file " + path + " does not exist";
          if (!d.optional)
            throw IoError(config_.path + ":" + std::to_string(line) + ": dataset " + d.name + ": " +
                          message + " (mark the data set 'optional = yes' to skip it)");
          p.status = message;
        }
    datasets_.push_back(std::move(p));
  }
  for (PreparedDataset& d : datasets_) {
    if (d.status != "ok") {
      err_printf("experiment: skipping data set %s: %s\n", d.spec->name.c_str(),
                   d.status.c_str());
      continue;
    }
    prepare_one(d);
  }
}

void Experiment::prepare_one(PreparedDataset& d) {
  const DatasetSpec& spec = *d.spec;
  d.data = spec.data;
  d.test = spec.test;
  if (!spec.generate.empty()) {
    // `polymargin gen` into DIR/data, once: a stamp records the arguments it was made with.
    fs::create_directories(out_ + "/data");
    const std::vector<std::string> args = split_words(spec.generate);
    const bool with_test = std::find(args.begin(), args.end(), "--test-rows") != args.end();
    const std::string train = out_ + "/data/" + spec.name + ".train.svm";
    const std::string test = out_ + "/data/" + spec.name + ".test.svm";
    const std::string stamp = out_ + "/data/" + spec.name + ".gen.json";
    const json wanted = {{"generate", args}};
    json old;
    if (std::ifstream in(stamp); in) try {
        old = json::parse(in);
      } catch (const json::exception&) {
      }
    if (old != wanted || !fs::exists(train) || (with_test && !fs::exists(test))) {
      err_printf("experiment: generating %s: polymargin gen %s\n", spec.name.c_str(),
                   spec.generate.c_str());
      std::vector<std::string> argv = {self_, "gen"};
      argv.insert(argv.end(), args.begin(), args.end());
      argv.insert(argv.end(), {"-o", train});
      if (with_test) argv.insert(argv.end(), {"--test-output", test});
      const std::string work = out_ + "/work/gen-" + spec.name;
      fs::create_directory(work);  // in DIR/work, which a signal's exit may have removed
      const ChildResult r = run_child(argv, work);
      if (r.exit_code != 0)
        throw UsageError(config_.path + ":" + std::to_string(spec.line) + ": dataset " + spec.name +
                         ": polymargin gen failed (exit " + std::to_string(r.exit_code) +
                         "): " + r.stderr_tail);
      fs::remove_all(work);
      io::write_file_atomically(stamp, wanted.dump());
    }
    d.data = {train};
    if (with_test) d.test = {test};
  }
  d.checksum = {{"train", json::array()}, {"test", json::array()}};
  for (const std::string& path : d.data) d.checksum["train"].push_back(data_checksum(path));
  for (const std::string& path : d.test) d.checksum["test"].push_back(data_checksum(path));
  const std::string prefix_dir = out_ + "/splits/" + spec.name + "-" +
                                 hash_text(d.checksum.dump()).substr(0, 12);
  for (int r = 0; r < config_.repeats; ++r) {
    const std::uint64_t split_seed = derive_seed(config_.seed, static_cast<std::uint64_t>(r), 1);
    const std::uint64_t fold_seed = derive_seed(config_.seed, static_cast<std::uint64_t>(r), 2);
    const std::string prefix = prefix_dir + "/r" + std::to_string(r);
    d.splits.push_back(make_split(d.data, d.test, config_.test_fraction, split_seed, config_.folds,
                                  fold_seed, prefix, threads_, &d.summary));
    json key = {{"folds", config_.folds}, {"fold_seed", fold_seed}};
    if (d.test.empty()) {
      key["mode"] = "random";
      key["test_fraction"] = config_.test_fraction;
      key["split_seed"] = split_seed;
    } else {
      key["mode"] = "given";
    }
    d.split_keys.push_back(std::move(key));
  }
  err_printf("experiment: %s: %llu rows (%llu train / %llu test), %d splits ready\n",
               spec.name.c_str(), static_cast<unsigned long long>(d.summary.rows),
               static_cast<unsigned long long>(d.splits[0].train_rows),
               static_cast<unsigned long long>(d.splits[0].test_rows), config_.repeats);
}

std::uint64_t learner_seed(const ExperimentConfig& config, int repeat) {
  return config.seed + static_cast<std::uint64_t>(repeat);
}

json Experiment::cell_key(const Cell& cell) const {
  const PreparedDataset& d = datasets_[cell.dataset];
  const MethodSpec& m = *methods_[cell.method].spec;
  json setting = json::array();
  for (const auto& [k, v] : cell.setting) setting.push_back({k, v});
  return {{"version", kCellVersion},
          {"data", d.checksum},
          {"split", d.split_keys[cell.repeat]},
          {"fold", cell.fold < 0 ? json("final") : json(cell.fold)},
          {"method", m.external.empty() ? json{{"algo", m.algo}} : json{{"external", m.external}}},
          {"setting", setting},
          {"seed", learner_seed(config_, cell.repeat)},
          {"margins", cell.margins}};
}

std::vector<std::string> Experiment::train_files(const Cell& cell) const {
  const SplitFiles& s = datasets_[cell.dataset].splits[cell.repeat];
  std::vector<std::string> files;
  for (int f = 0; f < static_cast<int>(s.folds.size()); ++f)
    if (f != cell.fold) files.push_back(s.folds[f]);
  return files;
}

std::vector<std::string> Experiment::eval_files(const Cell& cell) const {
  const SplitFiles& s = datasets_[cell.dataset].splits[cell.repeat];
  return cell.fold < 0 ? s.test : std::vector<std::string>{s.folds[cell.fold]};
}

json failure(const std::string& what, const ChildResult& r) {
  return {{"error", what + " exited with " + std::to_string(r.exit_code) + ": " + r.stderr_tail},
          {"exit_code", r.exit_code}};
}

json Experiment::run_polymargin(const Cell& cell, const std::string& work) {
  const MethodSpec& m = *methods_[cell.method].spec;
  const std::string model = work + "/model";
  std::vector<std::string> argv = {self_, "train", "--algo", m.algo, "-d"};
  for (const std::string& f : train_files(cell)) argv.push_back(f);
  argv.insert(argv.end(), {"-o", model, "--json"});
  bool seeded = false;
  const std::set<std::string>& switches = methods_[cell.method].switches;
  for (const auto& [k, v] : cell.setting) {
    seeded = seeded || k == "seed";
    if (!switches.count(k)) {
      argv.insert(argv.end(), {"--" + k, v});
    } else if (v == "true") {
      argv.push_back("--" + k);
    }
  }
  if (!seeded) argv.insert(argv.end(), {"--seed", std::to_string(learner_seed(config_, cell.repeat))});
  // 0-based split files: a cell's training folds may lack id 0 while its scored fold has it, and
  // read alone they would count from 1.
  const bool base_given = std::any_of(cell.setting.begin(), cell.setting.end(),
                                      [](const auto& kv) { return kv.first == "index-base"; });
  if (datasets_[cell.dataset].splits[cell.repeat].index_base == 0 && !base_given)
    argv.insert(argv.end(), {"--index-base", "0"});
  const ChildResult train = run_child(argv, work);
  if (train.exit_code != 0) return failure("train", train);
  const json summary = json::parse(train.stdout_text, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object()) return {{"error", "train --json printed no JSON"}, {"exit_code", 1}};

  std::vector<std::string> eval = {self_, "eval", "-m", model, "--json", "-d"};
  for (const std::string& f : eval_files(cell)) eval.push_back(f);
  const std::string margins = cache_.side_file(cell.key, ".margins.csv");
  if (cell.margins) eval.insert(eval.end(), {"--margins", margins});
  const ChildResult tested = run_child(eval, work);
  if (tested.exit_code != 0) return failure("eval", tested);
  const json metrics = json::parse(tested.stdout_text, nullptr, /*allow_exceptions=*/false);
  if (!metrics.is_object() || !metrics.contains("accuracy"))
    return {{"error", "eval --json printed no accuracy"}, {"exit_code", 1}};
  json result = {{"accuracy", metrics.at("accuracy")},
                 {"test_rows", metrics.value("rows", 0)},
                 {"train_wall_seconds", train.wall_seconds},
                 {"train_cpu_seconds", train.cpu_seconds},
                 {"eval_wall_seconds", tested.wall_seconds},
                 {"train_summary", summary}};
  if (cell.margins) result["margins_csv"] = fs::path(margins).filename().string();
  return result;
}

json Experiment::run_liblinear(const Cell& cell, const std::string& work) {
  // LIBLINEAR reads text: the rows scaled into [0, 1] by the training part's max |value|, which
  // polymargin's learners do themselves (--scale maxabs).
  const std::string train = work + "/train.svm", test = work + "/test.svm";
  write_scaled_text(train_files(cell), eval_files(cell), train, test, 1);
  std::string solver = "3", cost, bias, epsilon;  // -s 3: L2-regularised hinge loss (dual)
  for (const auto& [k, v] : cell.setting) {
    if (k == "solver") solver = v;
    if (k == "cost") cost = v;
    if (k == "bias") bias = v;
    if (k == "epsilon") epsilon = v;
  }
  std::vector<std::string> argv = {methods_[cell.method].program, "-q", "-s", solver};
  if (!cost.empty()) argv.insert(argv.end(), {"-c", cost});
  if (!bias.empty() && bias != "0") argv.insert(argv.end(), {"-B", bias});
  if (!epsilon.empty()) argv.insert(argv.end(), {"-e", epsilon});
  argv.insert(argv.end(), {train, work + "/model"});
  const ChildResult trained = run_child(argv, work);
  if (trained.exit_code != 0) return failure("liblinear-train", trained);
  const ChildResult predicted =
      run_child({"liblinear-predict", test, work + "/model", work + "/predictions"}, work);
  if (predicted.exit_code != 0) return failure("liblinear-predict", predicted);
  // "Accuracy = 84.9764% (13835/16281)"
  const std::string& text = predicted.stdout_text;
  const auto open = text.find('('), slash = text.find('/', open), close = text.find(')', slash);
  if (text.find("Accuracy") == std::string::npos || open == std::string::npos ||
      slash == std::string::npos || close == std::string::npos)
    return {{"error", "liblinear-predict printed no accuracy: " + text}, {"exit_code", 1}};
  const double correct = std::stod(text.substr(open + 1, slash - open - 1));
  const double total = std::stod(text.substr(slash + 1, close - slash - 1));
  return {{"accuracy", total > 0 ? correct / total : 0.0},
          {"test_rows", total},
          {"train_wall_seconds", trained.wall_seconds},
          {"train_cpu_seconds", trained.cpu_seconds},
          {"eval_wall_seconds", predicted.wall_seconds}};
}

void Experiment::execute(Cell& cell) {
  cell.key = cell_key(cell);
  cell.result = cache_.find(cell.key);
  if (!cell.result.is_null()) {
    cell.cached = true;
    return;
  }
  const std::string work = out_ + "/work/" + hash_text(cell.key.dump());
  try {
    fs::remove_all(work);
    // Not create_directories: DIR/work is not made again once a signal's exit has removed it.
    fs::create_directory(work);
    cell.result = methods_[cell.method].spec->external.empty() ? run_polymargin(cell, work)
                                                               : run_liblinear(cell, work);
  } catch (const Error& e) {
    wait_if_ending();  // a failure the signal's removal caused is no cell's
    cell.result = {{"error", e.what()}, {"exit_code", exit_code_of(e)}};
  } catch (const std::exception& e) {
    wait_if_ending();
    cell.result = {{"error", e.what()}, {"exit_code", 1}};
  }
  std::error_code ignored;
  fs::remove_all(work, ignored);
  // Failures are not cached: a rerun tries them again.
  if (!cell.result.contains("error")) cache_.store(cell.key, cell.result);
}

void Experiment::run_cells(std::vector<Cell>& cells, const std::string& stage) {
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i = next++; i < cells.size(); i = next++) {
      const auto start = std::chrono::steady_clock::now();
      execute(cells[i]);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(progress_mutex_);
      ++done_;
      if (cells[i].cached) {
        ++from_cache_;
      } else {
        ++computed_;
        computed_seconds_ += seconds;
      }
      if (cells[i].result.contains("error")) {
        ++failed_;
        if (first_failure_.empty()) {
          first_failure_ = datasets_[cells[i].dataset].spec->name + " / " +
                           methods_[cells[i].method].spec->name + ": " +
                           cells[i].result["error"].get<std::string>();
          failure_exit_ = cells[i].result.value("exit_code", 1);
          progress_.clear();
          err_printf("experiment: cell failed: %s\n", first_failure_.c_str());
        }
      }
      if (progress_.due()) {
        // Computed cells so far set the pace; cached ones cost nothing.
        const double per_cell = computed_ ? computed_seconds_ / static_cast<double>(computed_) : 0;
        const double left =
            per_cell * static_cast<double>(planned_ > done_ ? planned_ - done_ : 0) / jobs_;
        progress_.show(strprintf("experiment: %s  %zu/%zu cells (%zu from cache)  ETA %s",
                                   stage.c_str(), done_, planned_, from_cache_,
                                   computed_ ? clock_text(left).c_str() : "?"));
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const std::size_t computed_before = computed_;
  std::vector<std::thread> threads;
  const int n = std::min<int>(jobs_, static_cast<int>(cells.size()));
  for (int t = 0; t < n; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  progress_.clear();
  err_printf("experiment: %s: %zu cells (%zu computed) in %s; %zu/%zu cells done\n",
               stage.c_str(), cells.size(), computed_ - computed_before,
               clock_text(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
                   .c_str(),
               done_, planned_);
}

// Every search, planned: each (data set, method, repeat) with its grid stages; counts the cells.
std::vector<Experiment::Search> Experiment::plan_searches() {
  std::vector<Search> searches;
  for (std::size_t d = 0; d < datasets_.size(); ++d) {
    if (datasets_[d].status != "ok") continue;
    for (std::size_t m = 0; m < methods_.size(); ++m) {
      if (methods_[m].status != "ok") continue;
      for (int r = 0; r < config_.repeats; ++r)
        searches.push_back({d, m, r, search_stages(*methods_[m].spec),
                            first_setting(*methods_[m].spec), false, ""});
    }
  }
  for (const Search& s : searches) {
    for (const auto& group : s.stages)
      planned_ += settings_for_group(*methods_[s.method].spec, group, s.current).size() *
                  static_cast<std::size_t>(config_.folds);
    planned_ += 1;
  }
  err_printf("experiment: %zu cells planned (%zu searches, %d jobs)\n", planned_,
               searches.size(), jobs_);
  return searches;
}

// The grid search, stage by stage over every search at once: each stage's cells run together,
// then each search keeps the setting of best mean CV accuracy.
void Experiment::select_settings(std::vector<Search>& searches) {
  std::size_t max_stages = 0;
  for (const Search& s : searches) max_stages = std::max(max_stages, s.stages.size());
  for (std::size_t stage = 0; stage < max_stages; ++stage) {
    std::vector<Cell> cells;
    std::vector<std::pair<std::size_t, std::size_t>> range;  // per search: [first, last) cell
    std::vector<std::vector<Setting>> candidates(searches.size());
    for (std::size_t i = 0; i < searches.size(); ++i) {
      Search& s = searches[i];
      const std::size_t first = cells.size();
      if (stage < s.stages.size() && !s.failed) {
        candidates[i] = settings_for_group(*methods_[s.method].spec, s.stages[stage], s.current);
        for (const Setting& setting : candidates[i])
          for (int f = 0; f < config_.folds; ++f) {
            Cell c;
            c.dataset = s.dataset;
            c.method = s.method;
            c.repeat = s.repeat;
            c.fold = f;
            c.setting = setting;
            cells.push_back(std::move(c));
          }
      } else if (stage < s.stages.size()) {
        std::lock_guard<std::mutex> lock(progress_mutex_);
        done_ += settings_for_group(*methods_[s.method].spec, s.stages[stage], s.current).size() *
                 static_cast<std::size_t>(config_.folds);
      }
      range.emplace_back(first, cells.size());
    }
    run_cells(cells, "selection step " + std::to_string(stage + 1) + "/" + std::to_string(max_stages));
    // Each search keeps the setting of best mean CV accuracy; ties go to the one listed first.
    for (std::size_t i = 0; i < searches.size(); ++i) {
      Search& s = searches[i];
      if (range[i].first == range[i].second) continue;
      const MethodSpec& m = *methods_[s.method].spec;
      double best = -1;
      std::size_t best_index = 0;
      for (std::size_t c = 0; c < candidates[i].size(); ++c) {
        double sum = 0;
        bool ok = true;
        for (int f = 0; f < config_.folds; ++f) {
          const Cell& cell = cells[range[i].first + c * config_.folds + f];
          if (cell.result.contains("error")) {
            ok = false;
            s.error = cell.result["error"];
            break;
          }
          sum += cell.result["accuracy"].get<double>();
        }
        if (ok && sum / config_.folds > best) best = sum / config_.folds, best_index = c;
      }
      if (best < 0) {
        s.failed = true;
        continue;
      }
      Setting chosen;
      for (const auto& [k, v] : candidates[i][best_index])
        if (std::any_of(m.grid.begin(), m.grid.end(), [&](const GridKey& g) { return g.key == k; }))
          chosen.emplace_back(k, v);
      s.current = chosen;
    }
  }
}

// Retraining on the whole training part with the chosen setting, and the test.
std::vector<Cell> Experiment::final_cells(const std::vector<Search>& searches) {
  const auto with_fixed = [&](const MethodSpec& m, const Setting& grid_values) {
    Setting s = m.fixed;
    s.insert(s.end(), grid_values.begin(), grid_values.end());
    return s;
  };
  std::vector<Cell> finals;
  for (const Search& s : searches) {
    if (s.failed) {
      std::lock_guard<std::mutex> lock(progress_mutex_);
      ++done_;
      continue;
    }
    Cell c;
    c.dataset = s.dataset;
    c.method = s.method;
    c.repeat = s.repeat;
    c.setting = with_fixed(*methods_[s.method].spec, s.current);
    const std::string& name = methods_[s.method].spec->name;
    const bool plotted =
        config_.margin_methods.empty()
            ? methods_[s.method].spec->external.empty()
            : std::find(config_.margin_methods.begin(), config_.margin_methods.end(), name) !=
                  config_.margin_methods.end();
    c.margins = s.repeat == 0 && plotted && methods_[s.method].spec->external.empty();
    finals.push_back(std::move(c));
  }
  return finals;
}

// The report in config order.
Report Experiment::assemble_report(const std::vector<Search>& searches,
                                   const std::vector<Cell>& finals) {
  Report report;
  report.title = config_.title.empty() ? "polymargin experiment " + config_.path : config_.title;
  report.config_path = config_.path;
  report.repeats = config_.repeats;
  report.folds = config_.folds;
  const bool any_random = std::any_of(config_.datasets.begin(), config_.datasets.end(),
                                      [](const DatasetSpec& d) { return d.test.empty() && d.generate.find("--test-rows") == std::string::npos; });
  report.split_description =
      any_random ? std::to_string(config_.repeats) + " seeded random splits (" +
                       std::to_string(static_cast<int>(std::lround(100 * (1 - config_.test_fraction)))) +
                       "% train / " +
                       std::to_string(static_cast<int>(std::lround(100 * config_.test_fraction))) +
                       "% test; a set's own test part where given)"
                 : std::to_string(config_.repeats) + " runs (learner seeds) on each set's own train/test parts";
  report.baseline = config_.baseline;
  for (const PreparedMethod& m : methods_) {
    std::string description = m.description;
    for (const auto& [k, v] : m.spec->fixed) description += " --" + k + " " + v;
    for (const GridKey& g : m.spec->grid) {
      description += " --" + g.key + " {";
      for (std::size_t i = 0; i < g.values.size(); ++i) description += (i ? "," : "") + g.values[i];
      description += "}";
    }
    if (m.spec->coordinate) description += " (coordinate descent)";
    report.methods.push_back({m.spec->name, description, m.status});
  }
  for (const PreparedDataset& d : datasets_) {
    ReportDataset rd;
    rd.name = d.spec->name;
    rd.status = d.status;
    if (d.status == "ok") {
      rd.rows = d.summary.rows;
      rd.features = d.summary.max_index;
      rd.train_rows = d.splits[0].train_rows;
      rd.test_rows = d.splits[0].test_rows;
    }
    rd.results.assign(methods_.size(), std::vector<RepeatResult>(config_.repeats));
    report.datasets.push_back(std::move(rd));
  }
  for (const Search& s : searches)
    if (s.failed) report.datasets[s.dataset].results[s.method][s.repeat].error = s.error;
  for (const Cell& c : finals) {
    ReportDataset& rd = report.datasets[c.dataset];
    RepeatResult& r = rd.results[c.method][c.repeat];
    r.setting = setting_text(c.setting, *methods_[c.method].spec);
    if (c.result.contains("error")) {
      r.error = c.result["error"];
      continue;
    }
    r.ok = true;
    r.accuracy = c.result["accuracy"];
    r.train_wall_seconds = c.result["train_wall_seconds"];
    r.train_cpu_seconds = c.result["train_cpu_seconds"];
    if (c.margins && c.result.contains("margins_csv")) {
      std::ifstream in(out_ + "/cells/" + c.result["margins_csv"].get<std::string>());
      Series series;
      series.name = methods_[c.method].spec->name;
      std::string line;
      std::getline(in, line);  // header
      while (std::getline(in, line)) {
        const auto comma = line.find(',');
        if (comma == std::string::npos) continue;
        series.x.push_back(std::stod(line.substr(0, comma)));
        series.y.push_back(std::stod(line.substr(comma + 1)));
      }
      if (!series.x.empty()) rd.margins.push_back(std::move(series));
    }
  }
  return report;
}

int Experiment::run() {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Search> searches = plan_searches();
  select_settings(searches);
  std::vector<Cell> finals = final_cells(searches);
  run_cells(finals, "final training and test");
  progress_.clear();
  Report report = assemble_report(searches, finals);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.run = {{"cells_planned", planned_},   {"cells_computed", computed_},
                {"cells_from_cache", from_cache_}, {"cells_failed", failed_},
                {"jobs", jobs_},                {"seconds", seconds}};
  const std::vector<std::string> written = write_report(report, out_);
  fs::remove_all(out_ + "/work");
  err_printf("experiment: %zu cells: %zu computed, %zu from cache, %zu failed, in %s\n", done_,
               computed_, from_cache_, failed_, clock_text(seconds).c_str());
  out_printf("%s", table_markdown(accuracy_table(report)).c_str());
  out_printf("\nreport: %s/report.html (%zu files in %s)\n", out_.c_str(), written.size(),
              out_.c_str());
  if (failed_ > 0) {
    err_printf("experiment: %zu cells failed; the first: %s\n", failed_,
                 first_failure_.c_str());
    return failure_exit_ != 0 ? failure_exit_ : 1;
  }
  // Every data set skipped (optional and absent) or every method unable to run (its program
  // missing): the report says so, and a script must not take it for a result.
  if (planned_ == 0) {
    err_printf("experiment: nothing ran: no data set and method could run (the report says "
               "why)\n");
    return kExitIo;
  }
  return kExitOk;
}

int run_experiment(const std::vector<std::string>& args) {
  std::string config_path, out, only;
  int jobs = 0, threads = 0, repeats = 0, folds = 0;
  po::options_description opts("experiment options");
  opts.add_options()("experiment-config", po::value(&config_path)->required(),
                     "the experiment's config file (see README, Experiments)")(
      "output,o", po::value(&out)->required(),
      "directory of the report, the cell cache and the split files (created)")(
      "jobs,j", po::value(&jobs)->default_value(0),
      "cells run at once (0: the number of cores)")(
      "repeats", po::value(&repeats)->default_value(0), "override the config's repeats")(
      "folds", po::value(&folds)->default_value(0), "override the config's folds")(
      "threads", po::value(&threads)->default_value(0),
      "threads for splitting the data (0: all cores)")(
      "only", po::value(&only),
      "run only these data sets (comma list of [dataset] names); the cache is shared");
  po::positional_options_description positional;
  positional.add("experiment-config", 1);
  po::variables_map vm;
  if (!parse_options("experiment", "CONFIG -o DIR [--jobs N]", opts, positional, args, vm))
    return kExitOk;
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw UsageError("experiment: -o " + out +
                     " exists and is not a directory (the report, the "
                     "cell cache and the split files go in a directory)");
  if (repeats < 0 || folds < 0 || jobs < 0)
    throw UsageError("experiment: --repeats, --folds and --jobs must not be negative");
  if (folds == 1) throw UsageError("experiment: --folds must be at least 2");
  ExperimentConfig config = read_config(config_path, {.repeats = repeats, .folds = folds});
  // DIR gets the report, the cells and the splits: it must not be, hold or lie inside an input.
  {
    std::vector<io::NamedPath> inputs = {{"CONFIG", config_path}};
    for (const DatasetSpec& d : config.datasets) {
      for (const std::string& f : d.data) inputs.push_back({"data (" + d.name + ")", f});
      for (const std::string& f : d.test) inputs.push_back({"test (" + d.name + ")", f});
    }
    io::check_outputs(inputs, {{"-o", out, true, "", true}});
  }
  if (!only.empty()) {
    std::vector<std::string> names = split_list(only, ',');
    for (const std::string& name : names)
      if (std::none_of(config.datasets.begin(), config.datasets.end(),
                       [&](const DatasetSpec& d) { return d.name == name; }))
        throw UsageError("experiment: --only names '" + name + "', which is not a [dataset] of " +
                         config_path);
    std::erase_if(config.datasets, [&](const DatasetSpec& d) {
      return std::find(names.begin(), names.end(), d.name) == names.end();
    });
  }
  // DIR is made with its missing parents. A run refused before its first cell (a missing data
  // set, an unknown key) leaves none of them behind.
  fs::path made = fs::absolute(fs::path(out)).lexically_normal();
  if (made.filename().empty()) made = made.parent_path();  // "out/"
  if (fs::exists(made, ec)) {
    made.clear();
  } else {
    while (made.has_parent_path() && !fs::exists(made.parent_path(), ec))
      made = made.parent_path();
  }
  fs::create_directories(out, ec);
  if (ec) throw IoError("experiment: cannot create -o " + out + ": " + ec.message());
  // One run at a time in DIR: a second one would share its cells, work files and report. A run
  // refused here made nothing, so it removes nothing.
  const io::FileLock lock(out + "/experiment", "experiment directory", out);
  Experiment experiment(std::move(config), out, resolve_threads(jobs), resolve_threads(threads));
  try {
    experiment.check_methods();
    experiment.prepare_datasets();
  } catch (...) {
    if (!made.empty()) fs::remove_all(made, ec);
    throw;
  }
  return experiment.run();
}

const CommandRegistration registration(
    "experiment", "run a papers' protocol from a config: accuracy/timing tables, plots, HTML report",
    run_experiment);

}  // namespace
}  // namespace polymargin::cli
