#include "cli/tune.h"

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "driver/mpi_job.h"
#include "driver/options.h"
#include "driver/tune.h"
#include "engine/errors.h"

namespace polymargin::cli {
namespace {

// Options of `train` that take no value, and those that take several.
bool is_switch(const std::string& name) {
  const driver::TrainOption* o = driver::find_train_option(name);
  return name == "json" || name == "help" || (o && o->type == driver::OptionType::kSwitch);
}
bool is_multitoken(const std::string& name) {
  const driver::TrainOption* o = driver::find_train_option(name);
  return o && o->type == driver::OptionType::kTexts;
}
std::string long_name(const std::string& flag) {
  if (flag == "h") return "help";
  for (const driver::TrainOption& o : driver::train_options())
    if (o.short_name && flag == std::string(1, o.short_name)) return o.key;
  return flag;
}

// Options a cell does not take: the data and the job's files and reports are the cell's own, and
// a cell is one learner on one thread (the cells run side by side).
bool job_option(const std::string& name) {
  const driver::TrainOption* o = driver::find_train_option(name);
  return name == "json" || name == "help" || (o && !(o->role & driver::kCellParam));
}

int positive_int(const std::string& flag, const std::string& text, int least) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < least || value > 1000)
    throw UsageError("train: " + flag + " must be an integer in [" + std::to_string(least) +
                     ", 1000] (got '" + text + "')");
  return static_cast<int>(value);
}

std::uint64_t row_count(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = text.empty() || text[0] == '-' ? 0 : std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 100)
    throw UsageError("train: " + flag + " must be a number of rows, at least 100 (got '" + text +
                     "')");
  return value;
}

// A config file's switch value: true, 1, yes or on (as Boost reads it).
bool switch_on(const std::string& value) {
  return value == "true" || value == "1" || value == "yes" || value == "on";
}

// The arguments of `train --tune ...` taken apart: the search's own options, what the final run
// gets, and the options a cell takes as given.
struct TuneArgs {
  driver::TuneJob search;          // its own options (the job comes from `final`)
  std::vector<std::string> final;  // everything but --tune*, --config (its entries are in it)
  std::set<std::string> given;     // long names of the options given
  std::string config;              // --config FILE
};

// One option, `tokens` as given (flag and values): the search's own are taken, the others go to the
// final run and, unless the job's, to every cell. `where`: " in FILE:LINE" for a --config entry.
void take_option(TuneArgs& t, const std::string& name, const std::vector<std::string>& values,
                 const std::vector<std::string>& tokens, const std::string& where) {
  // An empty value, for any option (as parse_options refuses it): an empty --tune-budget would be
  // no bound, an empty --checkpoint no checkpoint.
  for (const std::string& v : values)
    if (v.empty()) refuse_empty_value("train", "--" + name, where);
  t.given.insert(name);
  if (name == "tune") return;
  if (name == "tune-folds" || name == "tune-repeats" || name == "tune-budget" ||
      name == "tune-rows") {
    if (values.empty()) throw UsageError("train: --" + name + " needs a value");
    if (name == "tune-folds")
      t.search.folds = positive_int("--tune-folds", values[0], 2);
    else if (name == "tune-repeats")
      t.search.repeats = positive_int("--tune-repeats", values[0], 1);
    else if (name == "tune-rows")
      t.search.search_rows = row_count("--tune-rows", values[0]);
    else
      t.search.budget = values[0];
    return;
  }
  if (name == "config") {  // its entries are taken below, as options given after the others
    if (!values.empty()) t.config = values.back();
    return;
  }
  if (name == "threads" && !values.empty()) positive_int("--threads", values[0], 0);
  t.final.insert(t.final.end(), tokens.begin(), tokens.end());
  if (!job_option(name)) {
    std::string value;
    for (const std::string& v : values) value += (value.empty() ? "" : " ") + v;
    t.search.given.emplace_back(name, value);
  }
}

TuneArgs parse_tune_args(const std::vector<std::string>& args) {
  TuneArgs t;
  for (std::size_t i = 0; i < args.size();) {
    const std::string& token = args[i];
    const bool is_flag = token.size() > 1 && token[0] == '-' &&
                         !(std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');
    if (!is_flag) {  // a positional argument: training data
      if (token.empty()) refuse_empty_value("train", "", "");
      t.final.push_back(token);
      ++i;
      continue;
    }
    std::string name = token.substr(token[1] == '-' ? 2 : 1);
    std::vector<std::string> values;
    bool inline_value = false;
    if (const std::size_t eq = name.find('='); eq != std::string::npos) {
      values.push_back(name.substr(eq + 1));
      name.resize(eq);
      inline_value = true;
    }
    name = long_name(name);
    std::size_t next = i + 1;
    if (!inline_value && !is_switch(name)) {
      if (is_multitoken(name)) {
        while (next < args.size() &&
               (args[next] == "-" || args[next].empty() || args[next][0] != '-'))
          values.push_back(args[next++]);
      } else if (next < args.size()) {
        values.push_back(args[next++]);
      }
    }
    take_option(t, name, values,
                std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i),
                                         args.begin() + static_cast<std::ptrdiff_t>(next)),
                "");
    i = next;
  }
  // --config FILE: its entries as options, where the command line does not give them (it wins),
  // so that the cells and the final run get them as flags and never the search's own keys. Its
  // lines are checked here (a [section] line, a line without '='), before the search.
  const std::set<std::string> on_command_line = t.given;
  for (const ConfigEntry& e :
       t.config.empty() ? std::vector<ConfigEntry>{} : read_config_entries("train", t.config)) {
    if (on_command_line.count(e.key)) continue;
    if (is_switch(e.key)) {
      if (switch_on(e.value)) take_option(t, e.key, {}, {"--" + e.key}, "");
      continue;
    }
    take_option(t, e.key, {e.value}, {"--" + e.key, e.value},
                " in " + t.config + ":" + std::to_string(e.line));
  }
  return t;
}

// Every option given must be one of the learner's own: the job's options (--checkpoint,
// --workers, ...) reach the learner only in the final run, after the whole search.
void check_learner_options(const TuneArgs& t, const std::string& algo) {
  const unsigned learner = driver::learner_bit(algo);
  for (const std::string& name : t.given) {
    const driver::TrainOption* o = driver::find_train_option(algo, name);
    const bool listed = (o && o->applies_to(learner)) || name == "json" || name == "config";
    if (!name.starts_with("tune") && !listed)
      throw UsageError("train --algo " + algo + ": --" + name +
                       " is not an option of this learner (see polymargin train --algo " + algo +
                       " --help); nothing was searched");
  }
}

// The command line as its options' values ({"--epochs": ["2"]}; words before the first option
// under ""): what every rank of an MPI job's search must be given alike.
nlohmann::json options_given(const std::vector<std::string>& args) {
  nlohmann::json options = nlohmann::json::object();
  std::string option;
  for (const std::string& arg : args) {
    const bool is_option = arg.size() > 1 && arg[0] == '-' &&
                           !std::isdigit(static_cast<unsigned char>(arg[1])) && arg[1] != '.';
    if (is_option) option = arg;
    if (!options.contains(option)) options[option] = nlohmann::json::array();
    if (!is_option) options[option].push_back(arg);
  }
  return options;
}

std::string grid_text(const driver::SearchGrid& g) {
  std::string text = "  " + g.algo + ":";
  for (std::size_t i = 0; i < g.groups.size(); ++i) {
    text += i ? " |" : "";
    for (std::size_t k = 0; k < g.groups[i].size(); ++k) {
      const std::string& key = g.groups[i][k];
      text += k ? ", " : " ";
      text += key + " {";
      for (const driver::GridKey& gk : g.keys)
        if (gk.key == key)
          for (std::size_t v = 0; v < gk.values.size(); ++v) text += (v ? "," : "") + gk.values[v];
      text += "}";
    }
  }
  return text + "\n";
}

}  // namespace

bool tune_requested(const std::vector<std::string>& args) {
  bool tune = false, options = false;
  for (const std::string& a : args) {
    tune = tune || a == "--tune";
    options = options || a.rfind("--tune-folds", 0) == 0 || a.rfind("--tune-repeats", 0) == 0 ||
              a.rfind("--tune-budget", 0) == 0 || a.rfind("--tune-rows", 0) == 0;
  }
  for (const auto& [key, value] : config_entries(args)) {  // --config's keys, as the flags
    tune = tune || (key == "tune" && switch_on(value));
    options = options || key == "tune-folds" || key == "tune-repeats" || key == "tune-budget" ||
              key == "tune-rows";
  }
  if (options && !tune)
    throw UsageError(
        "train: --tune-folds, --tune-repeats, --tune-budget and --tune-rows need --tune");
  return tune;
}

std::string tune_help() {
  std::string text =
      "tuning (--algo ldm|svm|cpm|kldm|tldm):\n"
      "  --tune               choose the settings below by seeded k-fold cross-validation on the\n"
      "                       training data, then train on all of it with the choice; options\n"
      "                       given on the command line are kept and not searched. Above\n"
      "                       --tune-rows rows: each setting trained once, on a seeded subsample\n"
      "                       of that many rows, and scored on a seeded holdout of whole blocks\n"
      "                       (10 % of the rows, at most 100000); the ldm/svm's final run\n"
      "                       then takes the step (--eta0) its setting's cell calibrated\n"
      "  --tune-folds K       folds (default 5)\n"
      "  --tune-repeats R     the cross-validation repeated on R seeded splits, each setting\n"
      "                       scored by the mean of its R·K folds; default ceil(2000 / rows),\n"
      "                       at most 5 (cpm: 1)\n"
      "  --tune-rows N        rows the search trains on at most (default 200000)\n"
      "  --tune-budget B      at most B settings (e.g. 8), or no new setting after a time (30s,\n"
      "                       10m, 1h); default: the whole search\n"
      "  grids (first value: the default; searched one group at a time, each group's best kept):\n";
  for (const driver::SearchPlan& plan : driver::search_plans())
    text += grid_text(*driver::search_grid(plan.algo));
  return text;
}

driver::TuneJob parse_tune_job(const std::vector<std::string>& args, bool& json) {
  const std::string algo = peek_option(args, "algo", "ldm");
  if (!driver::search_grid(algo))
    throw UsageError("train: --tune is for --algo ldm, svm, cpm, kldm, tldm (got '" + algo + "')");
  TuneArgs t = parse_tune_args(args);
  check_learner_options(t, algo);
  std::optional<driver::TrainJob> job = parse_train_options(train_algorithm(algo), t.final, json);
  if (!job) throw UsageError("train: --help is not a training job");
  if (!t.config.empty()) job->other_inputs.push_back({"--config", t.config});
  t.search.train = std::move(*job);
  return std::move(t.search);
}

int run_tuned(const std::vector<std::string>& args, const TrainAlgorithm& a) {
  return run_train_job(args, [&a](const std::vector<std::string>& args, MetricsFile& metrics) {
    // What a run refused before its search says in --metrics-json (the search fills it in).
    metrics.json()["algorithm"] = a.name;
    metrics.json()["data"] = nlohmann::json::array();
    metrics.json()["model_path"] = "";
    bool json = false;
    const driver::TuneJob job = parse_tune_job(args, json);
    // The ranks of an MPI job share the cells out and take each other's results: before any cell,
    // every rank must have been given the same search (the final run checks its data too).
    if (const driver::MpiJob* mpi = driver::mpi_job())
      driver::check_ranks_agree(mpi->peers(), nlohmann::json::object(), options_given(args),
                                data_name(job.train.inputs));
    // A signal stops the search (and keeps its finished cells with --checkpoint), as it stops a
    // training run.
    StopSignals stop_signals;
    StderrEvents events;
    const driver::TuneResult result = driver::tune(job, events, metrics.json());
    if (result.final.leader) print_train_summary(a, result.final.summary, json);
    return kExitOk;
  });
}

}  // namespace polymargin::cli
