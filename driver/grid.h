// Grids of settings, as `experiment`'s methods and a --tune search walk them: each key (an option
// of `train`) with the values it takes, a setting being one value of every key.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace polymargin::driver {

/// One grid dimension: an option of `train` and the values it takes, in the order written (a
/// --tune grid's first value is the learner's default: ties go to it).
struct GridKey {
  std::string key;
  std::vector<std::string> values;
};

/// A parameter setting: (key, value) pairs in the grid's key order.
using Setting = std::vector<std::pair<std::string, std::string>>;

/// The settings of one coordinate-descent step (or a whole product search, `group` = all keys):
/// `fixed` first, then every key of `grid` in its order, those of `group` taking each of their
/// values (the product, the last key fastest), the others their value in `current` (or their first).
std::vector<Setting> settings_for_group(const std::vector<GridKey>& grid, const Setting& fixed,
                                        const std::vector<std::string>& group,
                                        const Setting& current);
/// The starting point of a search: every key at its first value.
Setting first_setting(const std::vector<GridKey>& grid);
/// "cost=10 lambda1=0.5" (the grid's keys only), or "(fixed)", for tables.
std::string setting_text(const Setting& setting, const std::vector<GridKey>& grid);

}  // namespace polymargin::driver
