// The config file of `polymargin experiment`: an INI-like text for people. Keys before any section
// (or under [experiment]) set the protocol; [dataset NAME] sections name data; [method NAME]
// sections name a `train` configuration whose keys are `train`'s own long flags, a comma list
// making a grid dimension. See README.md, "Experiments", for the full format.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "driver/grid.h"

namespace polymargin::cli::experiment {

struct DatasetSpec {
  std::string name;
  std::vector<std::string> data;  // training data (or the whole set, for random splits)
  std::vector<std::string> test;  // the set's own test part; empty: R seeded random splits
  std::string generate;           // `polymargin gen` arguments: the data are generated into -o DIR
  bool optional = false;          // missing data: reported and skipped instead of an error
  int line = 0;                   // of the section header, for messages
  int data_line = 0, test_line = 0;  // of the data = and test = keys
};

using driver::GridKey;
using driver::Setting;

struct MethodSpec {
  std::string name;
  std::string algo;                // `train --algo` value
  std::string external;            // "liblinear" for the external LIBLINEAR; empty: polymargin
  Setting fixed;                   // single-valued keys
  std::vector<GridKey> grid;       // multi-valued keys
  bool coordinate = false;         // search = coordinate (else the full product)
  std::vector<std::vector<std::string>> groups;  // coordinate order: groups of grid keys
  int rounds = 1;                  // coordinate-descent rounds over the groups
  int line = 0;                    // of the section header, for messages
  std::map<std::string, int> key_lines;  // of each key, for messages about that key
};

struct ExperimentConfig {
  std::string path;
  std::string title;
  int repeats = 10;            // random splits (or learner seeds, with a given test part)
  double test_fraction = 0.5;  // random split: share of rows in the test part
  int folds = 5;               // k of the k-fold model selection
  std::uint64_t seed = 1;
  int repeats_line = 0, fraction_line = 0, folds_line = 0;  // where the file set them, or 0
  std::string baseline;  // the method the t-test compares against; unset: "svm" if there is one
  std::vector<std::string> margin_methods;  // methods drawn in the margin plot (empty: all ours)
  std::vector<DatasetSpec> datasets;
  std::vector<MethodSpec> methods;
};

/// What the command line overrides in a config (0: the config's own).
struct ProtocolOverrides {
  int repeats = 0, folds = 0;
};

/// Parses a config file, the overrides applied before its values are checked; throws UsageError
/// naming FILE:LINE and the problem, IoError when it cannot be read.
ExperimentConfig read_config(const std::string& path, const ProtocolOverrides& overrides = {});
/// Parses config text (`path` only names it in messages).
ExperimentConfig parse_config(const std::string& text, const std::string& path,
                              const ProtocolOverrides& overrides = {});

/// "a, b ,c" → {"a", "b", "c"} (items trimmed).
std::vector<std::string> split_list(const std::string& text, char separator);

/// Expands one value list: "a, b, c" and the power range "2^-8..2^-2" (every integer power of the
/// base in between, written as numbers). Throws UsageError (with `where` in the message).
std::vector<std::string> parse_value_list(const std::string& text, const std::string& where);

/// The settings of one coordinate-descent step (or the whole product search, `group` = all grid
/// keys): the product of the values of `group`, the other grid keys at `current`, fixed keys
/// first. `current` holds one value for every grid key.
std::vector<Setting> settings_for_group(const MethodSpec& method, const std::vector<std::string>& group,
                                        const Setting& current);
/// The starting point of a search: every grid key at its first value.
Setting first_setting(const MethodSpec& method);
/// The search's stages (groups of grid keys), in order: one stage with every key for a product
/// search, groups × rounds for coordinate descent, none without a grid.
std::vector<std::vector<std::string>> search_stages(const MethodSpec& method);
/// "cost=10 lambda1=0.5" (grid keys only), for tables.
std::string setting_text(const Setting& setting, const MethodSpec& method);

}  // namespace polymargin::cli::experiment
