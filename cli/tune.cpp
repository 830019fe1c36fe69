#include "cli/tune.h"

#include <stdlib.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/exit_codes.h"
#include "cli/experiment_config.h"
#include "cli/experiment_runner.h"
#include "cli/output.h"
#include "cli/signals.h"
#include "cli/train.h"
#include "cli/train_jobs.h"
#include "driver/mpi_job.h"
#include "driver/train.h"
#include "engine/csr.h"
#include "engine/errors.h"
#include "io/model_file.h"
#include "io/output_path.h"
#include "io/shards.h"
#include "io/split.h"
#include "io/temporaries.h"

namespace polymargin::cli {
namespace {

namespace fs = std::filesystem;
using experiment::GridKey;
using experiment::MethodSpec;
using experiment::Setting;
using nlohmann::json;

json record;  // tune_record(): set while the final run trains

// Bumped when the meaning of a cached tuning cell changes.
constexpr int kTuneCellVersion = 2;
// The seed streams of the search's subsample and of its holdout's blocks (folds use the run's seed
// itself).
constexpr std::uint64_t kSampleStream = 0x7475'6e65;   // "tune"
constexpr std::uint64_t kHoldoutStream = 0x686f'6c64;  // "hold"
// Repeat r of the cross-validation splits with seed + r·kRepeatStream (repeat 0: the seed itself).
constexpr std::uint64_t kRepeatStream = 0x9e37'79b9'7f4a'7c15;

// The default --tune-repeats: cross-validation on few rows repeated on seeded splits until about
// 2000 rows are scored per setting, at most 5 times (on a UCI set of a few hundred rows one 5-fold
// split's choice moves with the split). Repeats steady the choice of the learners whose cells are
// exact solves or averaged SGD (bench/tune.sh: the mean gap to the best cell on the UCI half
// splits, ldm −2.21 → −1.65 points, svm −1.51 → −1.22, tldm −1.87 → −1.61, kldm −1.63 → −1.77).
// A CPM cell is a run of at least 50,000 SGD steps a side whatever the rows, whose own noise
// repeats do not average out (−2.41 → −2.40) at 7× the time: one split unless asked.
int default_repeats(const std::string& algo, std::uint64_t rows) {
  if (algo == "cpm" || rows == 0) return 1;
  return static_cast<int>(std::clamp<std::uint64_t>((2000 + rows - 1) / rows, 1, 5));
}

// A learner's grid, in `experiment`'s terms: keys are `train` flags, each key's first value is the
// learner's default (ties go to it), and the groups are the coordinate search's order.
struct Grid {
  std::string algo;
  std::vector<GridKey> keys;
  std::vector<std::vector<std::string>> groups;
};

// The learners' grids, from the option table (driver/options.h): each searched key's values.
const std::vector<Grid>& grids() {
  static const std::vector<Grid> all = [] {
    std::vector<Grid> grids;
    for (const driver::SearchPlan& plan : driver::search_plans()) {
      Grid g{plan.algo, {}, plan.groups};
      for (const std::vector<std::string>& group : plan.groups)
        for (const std::string& key : group)
          g.keys.push_back({key, driver::find_train_option(plan.algo, key)->grid});
      grids.push_back(std::move(g));
    }
    return grids;
  }();
  return all;
}

const Grid* grid_of(const std::string& algo) {
  for (const Grid& g : grids())
    if (g.algo == algo) return &g;
  return nullptr;
}

// Flags of `train` that take no value, and those that take several.
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

// The arguments of `train --tune ...` taken apart: the tuning's own options, the data, what every
// cell passes on, and what the final run gets.
struct TuneArgs {
  std::vector<std::string> data;
  std::vector<std::string> cell;   // the learner's own options (not data, output, job, --tune*)
  std::vector<std::string> final;  // everything but --tune*
  std::set<std::string> given;     // long names of the options given
  int folds = 5;
  int repeats = 0;  // --tune-repeats; 0: default_repeats(algo, rows)
  std::uint64_t search_rows = kTuneSearchRows;  // --tune-rows
  std::string budget;  // "" (the whole grid), N settings, or a time (30s, 10m, 1h)
  std::string checkpoint;
  std::string resume;  // --resume: the final run's, given only when its checkpoint exists
  std::vector<io::NamedPath> inputs;  // the files train reads (check_train_paths)
  std::string output, metrics_json;
  std::string warm_start;  // --warm-start: the final run's
  int threads = 0;
  std::uint64_t seed = 1;
};

// Options a cell does not pass on: the data and the job's files and reports are the cell's own, and
// a cell is one learner on one thread (the cells run side by side). Those the table does not know
// are passed on, for the cell's parse to refuse.
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

TuneArgs parse_tune_args(const std::vector<std::string>& args) {
  TuneArgs t;
  std::string config;  // --config FILE
  // One option, `tokens` as given (flag and values): the tuning's own are taken, the others go to
  // the final run and, unless the job's, to every cell.
  // `where`: " in FILE:LINE" for a --config file's entry.
  const auto take = [&](const std::string& name, const std::vector<std::string>& values,
                        const std::vector<std::string>& tokens, const std::string& where) {
    // An empty value, for any option (as parse_options refuses it): an empty --tune-budget would
    // be no bound, an empty --checkpoint no checkpoint.
    for (const std::string& v : values)
      if (v.empty()) refuse_empty_value("train", "--" + name, where);
    t.given.insert(name);
    if (name == "tune") return;
    if (name == "tune-folds" || name == "tune-repeats" || name == "tune-budget" ||
        name == "tune-rows") {
      if (values.empty()) throw UsageError("train: --" + name + " needs a value");
      if (name == "tune-folds")
        t.folds = positive_int("--tune-folds", values[0], 2);
      else if (name == "tune-repeats")
        t.repeats = positive_int("--tune-repeats", values[0], 1);
      else if (name == "tune-rows")
        t.search_rows = row_count("--tune-rows", values[0]);
      else
        t.budget = values[0];
      return;
    }
    if (name == "resume") {
      if (values.empty()) throw UsageError("train: --resume needs a value");
      t.resume = values[0];
      t.inputs.push_back({"--resume", t.resume});
      return;
    }
    if (name == "data" || name == "validation" || name == "unlabeled" || name == "warm-start")
      for (const std::string& v : values) t.inputs.push_back({"--" + name, v});
    if (name == "config") {  // its entries are taken below, as options given after the others
      for (const std::string& v : values) {
        t.inputs.push_back({"--config", v});
        config = v;
      }
      return;
    }
    if (name == "output" && !values.empty()) t.output = values[0];
    if (name == "metrics-json" && !values.empty()) t.metrics_json = values[0];
    if (name == "warm-start" && !values.empty()) t.warm_start = values[0];
    t.final.insert(t.final.end(), tokens.begin(), tokens.end());
    if (name == "data") t.data.insert(t.data.end(), values.begin(), values.end());
    if (name == "checkpoint" && !values.empty()) t.checkpoint = values[0];
    if (name == "threads" && !values.empty()) t.threads = positive_int("--threads", values[0], 0);
    if (name == "seed" && !values.empty()) {
      try {
        t.seed = std::stoull(values[0]);
      } catch (const std::exception&) {
      }  // the learner's parse names a bad seed
    }
    if (!job_option(name)) t.cell.insert(t.cell.end(), tokens.begin(), tokens.end());
  };
  for (std::size_t i = 0; i < args.size();) {
    const std::string& token = args[i];
    const bool is_flag = token.size() > 1 && token[0] == '-' &&
                         !(std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');
    if (!is_flag) {  // a positional argument: training data
      if (token.empty()) refuse_empty_value("train", "", "");
      t.data.push_back(token);
      t.inputs.push_back({"--data", token});
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
    take(name, values,
         std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i),
                                  args.begin() + static_cast<std::ptrdiff_t>(next)),
         "");
    i = next;
  }
  // --config FILE: its entries as options, where the command line does not give them (it wins),
  // so that the cells and the final run get them as flags and never the tuning's own keys. Its
  // lines are checked here (a [section] line, a line without '='), before the search: the final
  // run's parse would refuse them only after it.
  const std::set<std::string> on_command_line = t.given;
  for (const ConfigEntry& e :
       config.empty() ? std::vector<ConfigEntry>{} : read_config_entries("train", config)) {
    if (on_command_line.count(e.key)) continue;
    if (is_switch(e.key)) {
      if (switch_on(e.value)) take(e.key, {}, {"--" + e.key}, "");
      continue;
    }
    take(e.key, {e.value}, {"--" + e.key, e.value}, " in " + config + ":" + std::to_string(e.line));
  }
  return t;
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

// The data of the search. Up to kTuneSearchRows rows: every row in k seeded fold files, each
// setting scored on every fold (cross-validation). Above: a holdout of whole blocks and a seeded
// row subsample of the other blocks to train on, each written once as a shard directory whose
// feature ids are renumbered densely (write_holdout), each setting trained once and scored once.
struct Folds {
  std::vector<std::string> files;  // cross-validation: the fold files, k of each repeat in turn
  int repeats = 1;                 // cross-validation: seeded splits into k folds
  std::string train, holdout;      // holdout: the two shard directories
  std::uint64_t rows = 0;          // rows of the data
  std::uint64_t searched = 0;      // rows the search trains on (and, with CV, scores on)
  std::uint64_t held_out = 0;      // rows of the holdout
  std::uint64_t holdout_blocks = 0, blocks = 0;
  std::uint64_t features = 0;  // feature ids of the search's data, after renumbering
  double sample_fraction = 1;  // share of the other blocks' rows searched
  int scored = 0;              // folds a setting is scored on (k × repeats); 1: the holdout
  int index_base = 1;          // of the fold files (the data's); a holdout's ids are renumbered
};

// The rows of the data and their labels: a shard directory says them, text is counted by a first
// pass.
io::Manifest count_rows(const TuneArgs& t) {
  io::Manifest counts;
  if (t.data.size() == 1 && io::is_shard_dir(t.data[0])) {
    counts = io::ShardSet::open(t.data[0]).manifest();
  } else {
    experiment::for_each_batch(t.data, t.threads, [&](const CsrView& batch) {
      counts.rows += batch.rows;
      for (std::size_t r = 0; r < batch.rows; ++r) ++counts.label_counts[batch.labels[r]];
    });
  }
  if (counts.rows == 0) throw DataError(data_name(t.data), 0, 0, "--tune: no rows");
  return counts;
}

Folds write_folds(const TuneArgs& t, const std::string& dir, std::uint64_t rows) {
  Folds folds;
  folds.rows = rows;
  folds.repeats = t.repeats;
  // One pass over the data feeds every repeat's splitter; repeat 0's folds are those of the seed.
  std::vector<std::unique_ptr<io::Splitter>> splitters;
  for (int r = 0; r < folds.repeats; ++r) {
    io::SplitOptions options;
    options.folds = t.folds;
    options.seed = t.seed + static_cast<std::uint64_t>(r) * kRepeatStream;
    splitters.push_back(std::make_unique<io::Splitter>(
        dir + (r == 0 ? "/data" : "/data-" + std::to_string(r)), options));
  }
  folds.index_base = experiment::for_each_batch(t.data, t.threads, [&](const CsrView& batch) {
    for (const auto& splitter : splitters) splitter->append(batch);
  });
  for (const auto& splitter : splitters) {
    const io::SplitCounts counts = splitter->finish();
    folds.files.insert(folds.files.end(), counts.outputs.begin(), counts.outputs.end());
    folds.searched = counts.rows;
    for (std::size_t f = 0; f < counts.fold_rows.size(); ++f)
      if (counts.fold_rows[f] == 0)
        throw DataError(data_name(t.data), 0, 0,
                        "--tune: fold " + std::to_string(f + 1) + " of " +
                            std::to_string(t.folds) + " is empty (" +
                            std::to_string(folds.searched) + " rows): use fewer --tune-folds");
    // A class whose rows all fall in one fold is missing from the cell that holds that fold out,
    // which then cannot score it (tiny data, a rare class).
    std::map<float, std::uint64_t> label_rows;
    for (const auto& fold : counts.fold_labels)
      for (const auto& [label, n] : fold) label_rows[label] += n;
    for (std::size_t f = 0; f < counts.fold_labels.size(); ++f)
      for (const auto& [label, n] : counts.fold_labels[f]) {
        if (n == label_rows[label])
          throw DataError(
              data_name(t.data), 0, 0,
              "--tune: " + (n == 1 ? "the one row" : "all " + std::to_string(n) + " rows") +
                  " of label " + io::label_text(label) + " fall" + (n == 1 ? "s" : "") +
                  " in fold " + std::to_string(f + 1) + " of " + std::to_string(t.folds) +
                  ", so the cell that holds it out trains without that class: " +
                  (n == 1 || t.folds == 2 ? "add rows of that class, or leave it out"
                                          : "use fewer --tune-folds"));
      }
  }
  folds.scored = t.folds * folds.repeats;
  return folds;
}

// Feature ids renumbered 1, 2, … in their order (so a row's ids stay sorted): the search's cells
// then allocate weights for the features the search has, not for every id of the data (at KDD
// size 2 M of 20 M), and a cell costs what its rows cost.
struct DenseIds {
  std::vector<std::uint64_t> seen;  // a bit per raw id
  std::vector<std::uint32_t> rank;  // ids seen before each word of `seen`

  void note(const CsrBuffer& rows) {
    for (const std::uint32_t id : rows.indices) {
      if (id / 64 >= seen.size()) seen.resize(id / 64 + 1, 0);
      seen[id / 64] |= std::uint64_t{1} << (id % 64);
    }
  }
  std::uint64_t finish() {
    rank.resize(seen.size());
    std::uint32_t count = 0;
    for (std::size_t w = 0; w < seen.size(); ++w) {
      rank[w] = count;
      count += static_cast<std::uint32_t>(std::popcount(seen[w]));
    }
    return count;
  }
  void apply(CsrBuffer& rows) const {
    for (std::uint32_t& id : rows.indices) {
      const std::uint64_t below = seen[id / 64] & ((std::uint64_t{1} << (id % 64)) - 1);
      id = 1 + rank[id / 64] + static_cast<std::uint32_t>(std::popcount(below));
    }
  }
};

void write_shards(const CsrBuffer& rows, const std::string& path, int threads) {
  io::ConvertOptions options;
  options.codec = io::Codec::kRaw;  // read by every cell, several epochs each: no decode work
  options.durable = false;          // temporary: gone with the search
  io::ShardWriter writer(path, options, threads);
  writer.append(rows.view());
  writer.finish(1, {}, 0);
}

// Large data: whole blocks (a shard directory's own; of text, runs of kTuneBlockRows rows, or of
// 1/64 of the rows when that is fewer) held out, the first in a seeded order up to
// kTuneHoldoutFraction of the rows or kTuneHoldoutRows rows; of the other blocks a seeded
// subsample of about --tune-rows rows. Both are held in memory (the rows are capped, not their
// bytes), renumbered (DenseIds) and written as raw shards.
Folds write_holdout(const TuneArgs& t, const std::string& dir, std::uint64_t rows) {
  Folds folds;
  folds.rows = rows;
  folds.scored = 1;
  const bool shards = t.data.size() == 1 && io::is_shard_dir(t.data[0]);
  std::uint64_t block_rows = kTuneBlockRows;
  std::optional<io::ShardSet> set;  // opened once: its blocks count here, then are read
  if (shards) {
    set.emplace(io::ShardSet::open(t.data[0]));
    const io::Manifest& manifest = set->manifest();
    folds.blocks = manifest.total_blocks;
    block_rows = manifest.rows / std::max<std::uint64_t>(1, manifest.total_blocks);
  } else {
    block_rows = std::clamp<std::uint64_t>(rows / 64, 1, kTuneBlockRows);
    folds.blocks = (rows + block_rows - 1) / block_rows;
  }
  if (folds.blocks < 2)
    throw DataError(data_name(t.data), 0, 0,
                    "--tune: a holdout of whole blocks needs two blocks or more, and the data "
                    "have one: convert it with a smaller --block-rows, or raise --tune-rows to "
                    "its " +
                        std::to_string(rows) + " rows for cross-validation");
  const auto wanted = std::min<std::uint64_t>(
      kTuneHoldoutRows,
      static_cast<std::uint64_t>(kTuneHoldoutFraction * static_cast<double>(rows)));
  folds.holdout_blocks =
      std::clamp<std::uint64_t>((wanted + block_rows - 1) / block_rows, 1, folds.blocks - 1);
  std::vector<std::pair<double, std::uint64_t>> order(folds.blocks);
  for (std::uint64_t b = 0; b < folds.blocks; ++b)
    order[b] = {io::split_uniform(t.seed ^ kHoldoutStream, b), b};
  std::sort(order.begin(), order.end());
  std::vector<bool> held(folds.blocks, false);
  for (std::uint64_t k = 0; k < folds.holdout_blocks; ++k) held[order[k].second] = true;
  const double others =
      static_cast<double>(rows) - static_cast<double>(folds.holdout_blocks * block_rows);
  const auto search_rows = static_cast<double>(t.search_rows);
  folds.sample_fraction = others > search_rows ? search_rows / others : 1;

  CsrBuffer train, holdout;
  std::uint64_t row = 0, block = 0;
  // An in-memory set's positions are 32-bit: the rows are capped, and so must their non-zeros be.
  auto append = [&](CsrBuffer& to, const CsrView& batch, std::size_t r, bool sample) {
    if (to.indices.size() + (batch.offsets[r + 1] - batch.offsets[r]) >
        std::numeric_limits<std::uint32_t>::max())
      throw MemoryError(data_name(t.data) + ": --tune's " +
                        (sample ? "search sample" : "holdout of whole blocks") +
                        " would hold more than 4294967295 non-zeros; " +
                        (sample ? "lower --tune-rows" : "convert with a smaller --block-rows"));
    to.append_row(batch, r);
  };
  auto take = [&](const CsrView& batch, std::uint64_t b) {
    if (held[std::min(b, folds.blocks - 1)]) {
      for (std::size_t r = 0; r < batch.rows; ++r) append(holdout, batch, r, false);
      row += batch.rows;
      return;
    }
    for (std::size_t r = 0; r < batch.rows; ++r, ++row)
      if (folds.sample_fraction >= 1 ||
          io::split_uniform(t.seed ^ kSampleStream, row) < folds.sample_fraction)
        append(train, batch, r, true);
  };
  if (shards) {
    // Unshuffled, a window of one block: the sink sees each block once, in order.
    io::ReadOptions read;
    read.shuffle = false;
    read.window_blocks = 1;
    read.threads = t.threads;
    set->scan(read, [&](const CsrView& batch) { take(batch, block++); });
  } else {
    experiment::for_each_batch(t.data, t.threads, [&](const CsrView& batch) {
      for (std::size_t r = 0; r < batch.rows;) {  // cut at block boundaries
        const std::uint64_t b = row / block_rows;
        const std::size_t n = std::min<std::uint64_t>(batch.rows - r, (b + 1) * block_rows - row);
        CsrView part = batch;
        part.rows = n;
        part.labels = batch.labels + r;
        part.offsets = batch.offsets + r;
        take(part, b);
        r += n;
      }
    });
  }
  if (train.rows() == 0 || holdout.rows() == 0)
    throw DataError(data_name(t.data), 0, 0, "--tune: the holdout or the search sample is empty");
  DenseIds ids;
  ids.note(train);
  ids.note(holdout);
  folds.features = ids.finish();
  ids.apply(train);
  ids.apply(holdout);
  folds.searched = train.rows();
  folds.held_out = holdout.rows();
  folds.train = dir + "/search.shards";
  folds.holdout = dir + "/holdout.shards";
  write_shards(train, folds.train, t.threads);
  write_shards(holdout, folds.holdout, t.threads);
  return folds;
}

// The flags of a setting, as a cell's and the final run's arguments.
std::vector<std::string> setting_flags(const Setting& setting) {
  std::vector<std::string> flags;
  for (const auto& [key, value] : setting) flags.insert(flags.end(), {"--" + key, value});
  return flags;
}

json setting_json(const Setting& setting) {
  json j = json::object();
  for (const auto& [key, value] : setting) j[key] = value;
  return j;
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
// stops on a signal when the search does (polite: a signal stops the search, and keeps its
// finished cells with --checkpoint).
class CellEvents final : public driver::Events {
 public:
  explicit CellEvents(bool polite) : polite_(polite) {}
  int stop_requested() override { return polite_ ? StopSignals::received() : 0; }

 private:
  bool polite_;
};

// The search's cells, run in parallel (oneTBB) and, in an MPI job, shared out between the ranks:
// rank r runs cells r, r + R, r + 2R, ... of each batch, and one sum (Peers::sum) over the ranks
// gives every rank every cell's result, so that all make the same choices from then on. A cell's
// result does not depend on where it ran: the search is the same on any number of ranks.
class Search {
 public:
  Search(const TuneArgs& t, const std::string& algo, const Folds& folds, const std::string& dir,
         const engine::Peers& peers)
      : t_(t),
        algo_(algo),
        folds_(folds),
        dir_(dir),
        peers_(peers) {
    if (!t.checkpoint.empty()) {
      cache_dir_ = t.checkpoint + ".tune";
      cache_.emplace(cache_dir_);
      for (const std::string& d : t.data) data_checksums_.push_back(experiment::data_checksum(d));
    }
  }

  // Runs the cells of `settings` not run yet, in parallel; false when a cell failed.
  bool run(const std::vector<Setting>& settings) {
    std::vector<Cell> cells;
    for (const Setting& s : settings) {
      if (results_.count(s)) continue;
      for (int f = 0; f < folds_.scored; ++f) {
        Cell c;
        c.setting = s;
        c.fold = f;
        cells.push_back(std::move(c));
      }
    }
    const auto ranks = static_cast<std::size_t>(peers_.count),
               rank = static_cast<std::size_t>(peers_.index);
    const int parallel = resolve_threads(t_.threads);
    tbb::task_arena arena(parallel);
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
      eta0_[cells[i].setting] = cells[i].eta0;
      order_.push_back(cells[i].setting);
    }
    return true;
  }

  // Out of --tune-budget's time; in an MPI job, as soon as one rank is (every rank asks at the same
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
  // The step of a setting's first cell (on a holdout its only one); 0 when none was reported.
  double eta0(const Setting& s) const { return eta0_.at(s); }
  const Cell& failed() const { return failed_; }
  double seconds() const { return seconds_since(start_); }
  // The cache of an MPI job's cells is shared as its checkpoint is: rank 0 removes it.
  void remove_cache() const {
    if (cache_dir_.empty() || peers_.index != 0) return;
    std::error_code ignored;
    fs::remove_all(cache_dir_, ignored);
  }

  // Stops politely while a StopSignals lives (cli/signals.h): after a SIGTERM/SIGINT/SIGHUP no
  // new cell starts, running cells are stopped and not counted, and the finished ones stay in the
  // cache (with --checkpoint).
  void stop_on_signals() { polite_ = true; }
  // The signal that stopped the search, or 0; in an MPI job, as soon as one rank had one (every
  // rank asks at the same point of the search, and all stop there, naming the same signal).
  int interrupted() const {
    constexpr std::array<int, 3> kSignals = {SIGTERM, SIGINT, SIGHUP};
    std::vector<double> seen(kSignals.size(), 0.0);
    const int own = polite_ ? StopSignals::received() : 0;
    for (std::size_t k = 0; k < kSignals.size(); ++k) seen[k] = own == kSignals[k] ? 1 : 0;
    peers_.sum_in_place(seen);
    for (std::size_t k = 0; k < kSignals.size(); ++k)
      if (seen[k] > 0) return kSignals[k];
    return 0;
  }

 private:
  json key(const Cell& c) const {
    return {{"version", kTuneCellVersion},
            {"algo", algo_},
            {"args", t_.cell},
            {"data", data_checksums_},
            {"folds", t_.folds},
            {"seed", t_.seed},
            {"rows", folds_.searched},
            {"holdout", !folds_.holdout.empty()},
            {"setting", setting_json(c.setting)},
            {"fold", c.fold}};
  }

  void execute(Cell& c) {
    if (deadline_ > 0 && seconds_since(start_) > deadline_ && c.setting != first_)
      return;  // out of time: not run
    const auto stopping = [this] { return polite_ && StopSignals::received() != 0; };
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
    std::vector<std::string> args = {"--algo", algo_};
    args.insert(args.end(), t_.cell.begin(), t_.cell.end());
    const std::vector<std::string> flags = setting_flags(c.setting);
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("-d");
    if (folds_.holdout.empty()) {
      // Cell fold i of repeat r (c.fold = r·k + i): trained on that repeat's other k − 1 folds.
      const int first = c.fold / t_.folds * t_.folds;
      for (int f = first; f < first + t_.folds; ++f)
        if (f != c.fold) args.push_back(folds_.files[static_cast<std::size_t>(f)]);
      args.insert(args.end(), {"--validation", folds_.files[static_cast<std::size_t>(c.fold)]});
    } else {
      args.insert(args.end(), {folds_.train, "--validation", folds_.holdout});
    }
    args.insert(args.end(), {"-o", work + "/model", "--threads", "1"});
    // The linear learners' exact pass over the training rows only reports; a cell needs none.
    if (algo_ == "ldm" || algo_ == "svm") args.push_back("--no-final-pass");
    // The cell's job, trained in this process (a oneTBB task of the search's arena): quiet, and
    // stopped by a signal when the search is.
    CellEvents events(polite_);
    nlohmann::ordered_json summary;
    try {
      std::optional<driver::TrainJob> job = parse_train_job(args);
      // In an MPI job the ranks share the cells out: a cell is its process's alone.
      job->parallel.solo = true;
      nlohmann::ordered_json record;
      summary = driver::train(*job, events, record).summary;
    } catch (const driver::Interrupted& stop) {
      c.exit_code = interrupted_exit_code(stop);
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

  const TuneArgs& t_;
  std::string algo_;
  const Folds& folds_;
  std::string dir_, cache_dir_;
  const engine::Peers& peers_;
  std::optional<experiment::CellCache> cache_;
  std::vector<std::string> data_checksums_;
  std::atomic<std::uint64_t> next_cell_{0};
  std::map<Setting, std::vector<double>> results_;
  std::map<Setting, double> eta0_;
  std::vector<Setting> order_;  // settings in the order they were run
  Cell failed_;
  bool polite_ = false;
  Clock::time_point start_ = Clock::now();
  double deadline_ = 0;
  Setting first_;
};

std::string grid_text(const Grid& g) {
  std::string text = "  " + g.algo + ":";
  for (std::size_t i = 0; i < g.groups.size(); ++i) {
    text += i ? " |" : "";
    for (std::size_t k = 0; k < g.groups[i].size(); ++k) {
      const std::string& key = g.groups[i][k];
      text += k ? ", " : " ";
      text += key + " {";
      for (const GridKey& gk : g.keys)
        if (gk.key == key)
          for (std::size_t v = 0; v < gk.values.size(); ++v) text += (v ? "," : "") + gk.values[v];
      text += "}";
    }
  }
  return text + "\n";
}

// --metrics-json of a run that ends before its final training (which writes its own): what it was
// asked to do, and the search's record once there is one.
MetricsFile tune_metrics(const std::vector<std::string>& args, const std::string& algo) {
  MetricsFile metrics(peek_option(args, "metrics-json", ""));
  TuneArgs t;
  try {
    t = parse_tune_args(args);
  } catch (const Error&) {  // the arguments' own error is the one recorded
  }
  metrics.json() = {
      {"command", "train"}, {"algorithm", algo}, {"data", t.data}, {"model_path", t.output}};
  if (!record.is_null()) metrics.json()["tune"] = record;
  return metrics;
}

// A search stopped by `signal`, as a run stopped in its training is: with --checkpoint its finished
// cells stay in CHECKPOINT.tune for the next run with --resume (exit 6), without it nothing is kept
// (128 + signal).
int search_interrupted(const std::vector<std::string>& args, const TuneArgs& t,
                       const Search& search, const std::string& algo, int signal) {
  const bool reports = !driver::mpi_job() || driver::mpi_job()->rank() == 0;
  const std::string message =
      "interrupted by " + signal_name(signal) + " in the --tune search (" +
      std::to_string(search.order().size()) + " settings done): " +
      (t.checkpoint.empty() ? std::string("nothing kept (no --checkpoint)")
                            : "its cells are kept in " + t.checkpoint +
                                  ".tune (continue with --resume " + t.checkpoint + ")") +
      ", no model written";
  const int code = t.checkpoint.empty() ? 128 + signal : kExitInterrupted;
  if (reports) {
    err_printf("train --algo %s: %s\n", algo.c_str(), message.c_str());
    tune_metrics(args, algo).finish(code, "interrupted", message);
  }
  return code;
}

}  // namespace

const nlohmann::json& tune_record() { return record; }

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
  for (const Grid& g : grids()) text += grid_text(g);
  return text;
}

namespace {

// The final run's own options, which no cell receives (--workers, --sync-rows, --checkpoint-every,
// --stop-after-rows, --read-ahead; the CPM's --warm-start and its entropy with replicas), checked
// as the learner's parse checks them: refused before the search, not after it. Returns the replicas
// the final run will have (1 for the kernel learners).
int check_final_options(const std::vector<std::string>& args, const std::string& algo) {
  if (!trains_replicated(algo)) return 1;
  namespace po = boost::program_options;
  driver::TrainJob job;
  job.algo = algo;
  po::options_description options;
  for (const driver::TrainOption& o : driver::train_options())
    if (!(o.role & (driver::kCellParam | driver::kSearchParam)) && o.key != "output" &&
        driver::find_train_option(algo, o.key) == &o)
      add_train_option(options, o, algo);
  options.add_options()("entropy", po::value<double>());
  po::positional_options_description positional;
  positional.add("data", -1);  // and the values of the options not checked here
  po::variables_map vm;
  try {
    const po::parsed_options given = po::command_line_parser(args)
                                         .options(options)
                                         .positional(positional)
                                         .style(exact_names_style())
                                         .allow_unregistered()
                                         .run();
    refuse_out_of_range("train", options, given, "");
    po::store(given, vm);
    std::string lines;  // the --config file's entries: the command line wins
    for (const auto& [key, value] : config_entries(args)) lines += key + " = " + value + "\n";
    std::istringstream text(lines);
    const po::parsed_options file = po::parse_config_file(text, options, true);
    refuse_out_of_range("train", options, file, " in the --config file");
    po::store(file, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("train: ") + e.what() + " (see polymargin train --help)");
  }
  apply_given_options(vm, job);
  DataParallel& parallel = job.parallel;
  parallel.check();
  job.job.check();
  if (algo == "cpm") {
    if (vm.count("warm-start")) refuse_cpm_warm_start();
    if (vm.count("entropy")) check_cpm_replicas(parallel, vm["entropy"].as<double>());
  }
  return parallel.total();
}

// --resume F: the final run resumes from F. A run stopped in its search has no F yet, only the
// cells it finished (in CHECKPOINT.tune): the search continues from them, and the final run starts
// from the beginning. Neither: refused now, not after the search. True when F is there.
bool resumes_final_run(const TuneArgs& t, const std::string& cache_dir, const std::string& algo) {
  if (t.resume.empty()) return false;
  std::error_code ec;
  if (fs::exists(t.resume, ec)) return true;
  if (cache_dir.empty() || !fs::is_directory(cache_dir, ec))
    throw IoError("train: --resume " + t.resume + ": no such checkpoint, and no cells of a " +
                  "stopped --tune search in " +
                  (cache_dir.empty() ? "CHECKPOINT.tune (no --checkpoint given)" : cache_dir));
  err_printf(
      "tune %s: no checkpoint %s yet (the run was stopped in its search): the search "
      "continues from the cells kept in %s, the final run starts from the beginning\n",
      algo.c_str(), t.resume.c_str(), cache_dir.c_str());
  return false;
}

// --warm-start: the final run starts from this model, so it must be one of this learner's (checked
// with the data's labels, later), and the final run must have its bias and normalisation: the
// search keeps those (a setting the final run would refuse is no choice), added to `t`'s cell and
// final arguments. Refused now, not after the search.
std::optional<engine::LinearModel> keep_warm_start_settings(const std::vector<std::string>& args,
                                                            TuneArgs& t, const std::string& algo) {
  if (t.warm_start.empty() || (algo != "ldm" && algo != "svm")) return std::nullopt;
  engine::LinearModel warm_model = io::load_model(t.warm_start);  // DataError for another kind
  const std::pair<std::string, std::string> kept[] = {
      {"bias", number(warm_model.bias_value)},
      {"normalize", warm_model.normalize_l2 ? "l2" : "none"}};
  for (const auto& [key, value] : kept) {
    const std::string given = peek_option(args, key, "");
    if (given.empty()) {
      t.given.insert(key);
      t.cell.insert(t.cell.end(), {"--" + key, value});
      t.final.insert(t.final.end(), {"--" + key, value});
    } else if (given != value &&
               !(key == "bias" && std::strtod(given.c_str(), nullptr) == warm_model.bias_value)) {
      throw UsageError("train: --warm-start " + t.warm_start + " was trained with --" + key + " " +
                       value + ", this run has --" + key + " " + given + " (they must agree)");
    }
  }
  err_printf("tune %s: --warm-start %s: the search keeps its --bias %s and --normalize %s\n",
             algo.c_str(), t.warm_start.c_str(), kept[0].second.c_str(), kept[1].second.c_str());
  return warm_model;
}

// The learner's grid less the keys the command line (or --config) sets: those are kept as given;
// and the CPM's entropy floor when the final run has several replicas, which keep it at 1.
MethodSpec search_method(const Grid& grid, const std::vector<std::string>& args, const TuneArgs& t,
                         const std::string& algo, int replicas) {
  MethodSpec method;
  method.algo = algo;
  method.coordinate = true;
  std::set<std::string> fixed;
  for (const GridKey& k : grid.keys) {
    bool set = t.given.count(k.key) > 0 || !peek_option(args, k.key, "").empty();
    if (k.key.size() > 4 && k.key.compare(k.key.size() - 4, 4, "-rel") == 0) {
      const std::string paper = k.key.substr(0, k.key.size() - 4);
      set = set || t.given.count(paper) > 0 || !peek_option(args, paper, "").empty();
    }
    // The RBF width does nothing under another kernel or beside --gamma: not searched then.
    if (k.key == "rbf-width") {
      const std::string kernel = peek_option(args, "kernel", "");
      set = set || (!kernel.empty() && kernel != "rbf") || !peek_option(args, "gamma", "").empty();
    }
    if (set || (k.key == "entropy" && replicas > 1))
      fixed.insert(k.key);
    else
      method.grid.push_back(k);
  }
  for (const std::vector<std::string>& group : grid.groups) {
    std::vector<std::string> kept;
    for (const std::string& key : group)
      if (!fixed.count(key)) kept.push_back(key);
    if (!kept.empty()) method.groups.push_back(kept);
  }
  return method;
}

// Every option given must be one of the learner's own, asked as `experiment` asks it (its --help,
// here in this process): the job's options (--checkpoint, --workers, ...) reach the learner only
// in the final run, after the whole search.
void check_learner_options(const std::vector<std::string>& args, const TuneArgs& t,
                           const std::string& algo) {
  std::vector<std::string> names(t.given.begin(), t.given.end());
  for (const auto& [key, value] : config_entries(args)) names.push_back(key);
  const unsigned learner = driver::learner_bit(algo);
  for (const std::string& name : names) {
    const driver::TrainOption* o = driver::find_train_option(algo, name);
    const bool listed = (o && o->applies_to(learner)) || name == "json" || name == "config";
    if (!name.starts_with("tune") && !listed)
      throw UsageError("train --algo " + algo + ": --" + name +
                       " is not an option of this learner (see polymargin train --algo " + algo +
                       " --help); nothing was searched");
  }
}

// The line that says what the search trains and scores on.
void announce_search(const TuneArgs& t, const Folds& folds, const std::string& algo) {
  if (folds.holdout.empty())
    err_printf("tune %s: %d-fold cross-validation%s (seed %llu) on %llu rows\n", algo.c_str(),
               t.folds,
               folds.repeats > 1 ? (", repeated " + std::to_string(folds.repeats) + " times").c_str()
                                 : "",
               static_cast<unsigned long long>(t.seed),
               static_cast<unsigned long long>(folds.searched));
  else
    err_printf(
        "tune %s: of %llu rows, %llu held out (%llu whole blocks of %llu) and a seeded "
        "subsample of %llu of the others searched (seed %llu, %llu feature ids); each "
        "setting trained on the subsample and scored on the holdout\n",
        algo.c_str(), static_cast<unsigned long long>(folds.rows),
        static_cast<unsigned long long>(folds.held_out),
        static_cast<unsigned long long>(folds.holdout_blocks),
        static_cast<unsigned long long>(folds.blocks),
        static_cast<unsigned long long>(folds.searched), static_cast<unsigned long long>(t.seed),
        static_cast<unsigned long long>(folds.features));
}

// What the search's stages came to: the setting chosen, or the exit code of a search that ended
// the run (a cell failed, a signal came).
struct SearchOutcome {
  Setting chosen;
  bool stopped_by_budget = false;
  std::optional<int> exit_code;
};

// The search, a stage (a group of the grid's keys) at a time from the grid's first setting, each
// stage keeping the best mean of its candidates, within --tune-budget.
SearchOutcome search_stages(Search& search, const MethodSpec& method, const Budget& budget,
                            const TuneArgs& t, const std::vector<std::string>& args,
                            const std::string& algo, const Folds& folds) {
  SearchOutcome outcome;
  Setting& current = outcome.chosen;
  current = experiment::first_setting(method);
  if (budget.seconds > 0) search.set_deadline(budget.seconds, current);
  std::size_t settings_run = 0;
  for (const std::vector<std::string>& stage : experiment::search_stages(method)) {
    std::vector<Setting> candidates = experiment::settings_for_group(method, stage, current);
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
          folds.repeats > 1 ? " of repeat " + std::to_string(c.fold / t.folds + 1) : "";
      const std::string message = "train: --tune: the cell " +
                                  experiment::setting_text(c.setting, method) + ", fold " +
                                  std::to_string(c.fold % t.folds + 1) + repeat + " failed (exit " +
                                  std::to_string(c.exit_code) + "): " + c.error;
      err_printf("%s\n", message.c_str());
      if (!driver::mpi_job() || driver::mpi_job()->rank() == 0)
        tune_metrics(args, algo).finish(c.exit_code, "error", message);
      outcome.exit_code = c.exit_code;
      return outcome;
    }
    if (const int signal = search.interrupted()) {
      outcome.exit_code = search_interrupted(args, t, search, algo, signal);
      return outcome;
    }
    settings_run = search.order().size();
    double best = -1;
    for (const Setting& s : candidates)
      if (search.mean(s) > best) best = search.mean(s), current = s;
    if (search.out_of_time(budget)) {
      outcome.stopped_by_budget = true;
      break;
    }
  }
  if (method.grid.empty()) current.clear();
  return outcome;
}

// On a holdout the LDM/SVM's final run takes the step (η0) that its setting's cell calibrated:
// the step is part of what was validated, and the schedule is the same in epochs whatever the
// rows (λη0t ≤ epochs·η0/C), while a calibration on another first window can land factors of 2
// away. At KDD size (SVM, C = 10, --normalize l2, a bias) the calibration on all rows gives 0.016
// and a model of the majority's accuracy, where η0 = 1 gives 0.859 (docs/design.md). 0: none.
double carried_eta0(const Search& search, const Setting& chosen, const Folds& folds,
                    const std::vector<std::string>& args, const std::string& algo) {
  const bool searched =
      std::find(search.order().begin(), search.order().end(), chosen) != search.order().end();
  if (!folds.holdout.empty() && (algo == "ldm" || algo == "svm") && searched &&
      peek_option(args, "eta0", "auto") == "auto")
    return search.eta0(chosen);
  return 0;
}

// The table of the settings tried and the choice, printed, and the search's record (`record`,
// which the final run writes into its model and --json/--metrics-json).
void report_search(const Search& search, const MethodSpec& method, const SearchOutcome& outcome,
                   const TuneArgs& t, const Folds& folds, double eta0, double seconds,
                   const std::string& algo) {
  const Setting& chosen = outcome.chosen;
  json cells = json::array();
  err_printf("  %-56s %9s\n", "setting", folds.holdout.empty() ? "CV acc." : "holdout");
  for (const Setting& s : search.order()) {
    err_printf("  %-56s %9.4f%s\n", experiment::setting_text(s, method).c_str(), search.mean(s),
               s == chosen ? "  <- chosen" : "");
    cells.push_back({{"setting", setting_json(s)},
                     {"accuracy", search.mean(s)},
                     {"fold_accuracies", search.folds_of(s)}});
    if (!folds.holdout.empty() && search.eta0(s) > 0) cells.back()["eta0"] = search.eta0(s);
  }
  json grid_json = json::object();
  for (const GridKey& k : method.grid) grid_json[k.key] = k.values;
  // None when nothing was searched (every grid option given on the command line).
  const double chosen_accuracy = method.grid.empty() ? -1 : search.mean(chosen);
  const json chosen_json = chosen_accuracy >= 0 ? json(chosen_accuracy) : json();
  record = {{"folds", folds.holdout.empty() ? t.folds : 0},  // a holdout has none
            {"repeats", folds.holdout.empty() ? folds.repeats : 0},
            {"holdout", !folds.holdout.empty()},
            {"seed", t.seed},
            {"rows", folds.rows},
            {"rows_searched", folds.searched}};
  if (!folds.holdout.empty()) {
    record["rows_held_out"] = folds.held_out;
    record["holdout_blocks"] = folds.holdout_blocks;
  }
  if (eta0 > 0) record["eta0"] = eta0;

  record.update(json{{"grid", grid_json},
                     {"budget", t.budget.empty() ? json() : json(t.budget)},
                     {"stopped_by_budget", outcome.stopped_by_budget},
                     {"settings", cells},
                     {"chosen", setting_json(chosen)},
                     {"validation_accuracy", chosen_json}});
  char accuracy_text[48] = "";
  if (chosen_accuracy >= 0)
    std::snprintf(accuracy_text, sizeof accuracy_text, " (%s accuracy %.4f)",
                  folds.holdout.empty() ? "cross-validation" : "holdout", chosen_accuracy);
  err_printf("tune %s: %zu settings in %.1f s; chosen %s%s%s; training on all %llu rows\n",
             algo.c_str(), search.order().size(), seconds,
             method.grid.empty() ? "(nothing to search)"
                                 : experiment::setting_text(chosen, method).c_str(),
             accuracy_text, outcome.stopped_by_budget ? ", stopped by --tune-budget" : "",
             static_cast<unsigned long long>(folds.rows));
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

// The search and the final run; `final_started` is set when the final run, which reports for
// itself, begins.
int tune_then_train(const std::vector<std::string>& args, const std::string& algo,
                    const CommandFn& run, bool& final_started) {
  const Grid* grid = grid_of(algo);
  if (!grid)
    throw UsageError("train: --tune is for --algo ldm, svm, cpm, kldm, tldm (got '" + algo + "')");
  TuneArgs t = parse_tune_args(args);
  const Budget budget = parse_budget(t.budget);
  if (t.data.empty()) throw UsageError("train: no training data given (-d TRAIN)");
  if (std::find(t.data.begin(), t.data.end(), "-") != t.data.end())
    throw UsageError("train: --tune reads the data more than once: not from stdin (-)");
  // The ranks of an MPI job share the cells out and take each other's results: before any cell,
  // every rank must have been given the same search (the final run checks its data too).
  if (const driver::MpiJob* mpi = driver::mpi_job())
    driver::check_ranks_agree(mpi->peers(), nlohmann::json::object(), options_given(args),
                              data_name(t.data));
  if (t.checkpoint.empty()) t.checkpoint = peek_option(args, "checkpoint", "");  // or --config's
  const std::string cache_dir = t.checkpoint.empty() ? "" : t.checkpoint + ".tune";
  const bool resume_final = resumes_final_run(t, cache_dir, algo);

  // The outputs against the inputs, as train checks them, but before the search, not after it.
  check_train_paths(t.inputs, t.output, t.checkpoint, t.metrics_json);
  if (!cache_dir.empty()) check_cell_cache(t.inputs, cache_dir);
  // The model's and checkpoint's locks too (a second job on them is refused now, not after the
  // search; the search's cells are kept beside the checkpoint): held until the final run's end,
  // which takes them over. Of an MPI job's ranks only rank 0 writes, and locks.
  std::optional<JobLocks> locks;
  if (!driver::mpi_job() || driver::mpi_job()->rank() == 0) {
    locks.emplace(t.output, t.checkpoint, t.metrics_json);
    locks->hand_down();
  }
  const std::optional<engine::LinearModel> warm_model = keep_warm_start_settings(args, t, algo);
  const int replicas = check_final_options(args, algo);
  const MethodSpec method = search_method(*grid, args, t, algo, replicas);
  const WorkDir dir;
  check_learner_options(args, t, algo);

  const Clock::time_point start = Clock::now();
  const io::Manifest counts = count_rows(t);
  const std::uint64_t rows = counts.rows;
  // What every cell would refuse, said once about the user's data rather than a fold's.
  if (algo != "cpm") {
    const engine::LabelMap labels = binary_labels(counts, data_name(t.data));
    if (warm_model) check_warm_model(*warm_model, t.warm_start, algo, labels);
  }
  if (t.repeats == 0) t.repeats = default_repeats(algo, rows);
  const Folds folds =
      rows > t.search_rows ? write_holdout(t, dir.path, rows) : write_folds(t, dir.path, rows);
  // 0-based fold files: a cell's training folds may lack id 0 while its scored fold has it, and
  // read alone they would count from 1.
  if (folds.index_base == 0 && peek_option(args, "index-base", "").empty())
    t.cell.insert(t.cell.end(), {"--index-base", "0"});
  announce_search(t, folds, algo);

  // In an MPI job the ranks share the cells out (each writes the search's data itself, in its own
  // directory), and the final run is the job's data-parallel run (ldm, svm, cpm) or rank 0's.
  const engine::Peers peers = driver::mpi_job() ? driver::mpi_job()->peers() : engine::Peers{};
  StderrEvents events;
  note_rank_binding(events);
  Search search(t, algo, folds, dir.path, peers);
  // A signal stops the search (and keeps its finished cells with --checkpoint), as one stops a
  // training run; the final run has its own StopSignals.
  std::optional<StopSignals> polite;
  polite.emplace();
  search.stop_on_signals();
  const SearchOutcome outcome = search_stages(search, method, budget, t, args, algo, folds);
  if (outcome.exit_code) return *outcome.exit_code;
  const Setting& chosen = outcome.chosen;
  const double search_seconds = seconds_since(start);
  const double eta0 = carried_eta0(search, chosen, folds, args, algo);
  report_search(search, method, outcome, t, folds, eta0, search_seconds, algo);

  // A signal after the last stage's check (its final run would otherwise clear it unseen).
  if (const int signal = search.interrupted()) {
    record = nullptr;
    return search_interrupted(args, t, search, algo, signal);
  }
  polite.reset();
  std::vector<std::string> final_args = t.final;
  if (resume_final) final_args.insert(final_args.end(), {"--resume", t.resume});
  const std::vector<std::string> flags = setting_flags(chosen);
  final_args.insert(final_args.end(), flags.begin(), flags.end());
  if (eta0 > 0) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", eta0);
    final_args.insert(final_args.end(), {"--eta0", text});
    err_printf("tune %s: the final run takes the chosen cell's step, --eta0 %s\n", algo.c_str(),
               text);
  }
  // A kernel learner's final run holds the whole set in one process: in an MPI job, rank 0's.
  if (peers.index != 0 && !trains_replicated(algo)) {
    record = nullptr;
    return kExitOk;
  }
  int code = kExitInternal;
  final_started = true;
  try {
    code = run(final_args);
  } catch (...) {
    record = nullptr;
    throw;
  }
  record = nullptr;
  if (code == kExitOk) search.remove_cache();
  return code;
}

}  // namespace

int run_tuned(const std::vector<std::string>& args, const std::string& algo, const CommandFn& run) {
  // A run refused or failed before its final training reports in --metrics-json as train does
  // (on an MPI job's rank 0, or on the rank that failed, naming it).
  bool final_started = false;
  const auto report = [&](int code, const std::string& error) {
    record = nullptr;
    if (final_started) return;
    driver::defer_error_to_rank0();
    tune_metrics(args, algo).finish(code, "error", rank_prefix() + error);
  };
  try {
    return tune_then_train(args, algo, run, final_started);
  } catch (const io::OutputPathError& e) {
    if (!e.involves("--metrics-json")) report(exit_code_of(e), e.what());
    throw;
  } catch (const io::LockedError& e) {
    // Refused for a file another job writes: when that is the metrics file, it is that job's.
    if (e.path() != peek_option(args, "metrics-json", "")) report(exit_code_of(e), e.what());
    throw;
  } catch (const std::exception&) {
    const Failure failure = describe_failure(std::current_exception());
    report(failure.code, failure.message);
    throw;
  }
}

}  // namespace polymargin::cli
