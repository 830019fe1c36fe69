#include "driver/grid.h"

#include <algorithm>

namespace polymargin::driver {

std::vector<Setting> settings_for_group(const std::vector<GridKey>& grid, const Setting& fixed,
                                        const std::vector<std::string>& group,
                                        const Setting& current) {
  // Odometer over the group's keys, the last key fastest, so the order is the order written.
  std::vector<const GridKey*> varying;
  for (const GridKey& g : grid)
    if (std::find(group.begin(), group.end(), g.key) != group.end()) varying.push_back(&g);
  std::vector<std::size_t> at(varying.size(), 0);
  std::vector<Setting> settings;
  while (true) {
    Setting s = fixed;
    for (const GridKey& g : grid) {
      const auto v = std::find(varying.begin(), varying.end(), &g);
      if (v != varying.end()) {
        s.emplace_back(g.key, g.values[at[v - varying.begin()]]);
      } else {
        const auto c = std::find_if(current.begin(), current.end(),
                                    [&](const auto& kv) { return kv.first == g.key; });
        s.emplace_back(g.key, c != current.end() ? c->second : g.values.front());
      }
    }
    settings.push_back(std::move(s));
    std::size_t k = varying.size();
    while (k > 0 && ++at[k - 1] == varying[k - 1]->values.size()) at[--k] = 0;
    if (k == 0) break;
  }
  return settings;
}

Setting first_setting(const std::vector<GridKey>& grid) {
  Setting s;
  for (const GridKey& g : grid) s.emplace_back(g.key, g.values.front());
  return s;
}

std::string setting_text(const Setting& setting, const std::vector<GridKey>& grid) {
  std::string text;
  for (const auto& [key, value] : setting)
    if (std::any_of(grid.begin(), grid.end(), [&](const GridKey& g) { return g.key == key; }))
      text += (text.empty() ? "" : " ") + key + "=" + value;
  return text.empty() ? "(fixed)" : text;
}

}  // namespace polymargin::driver
