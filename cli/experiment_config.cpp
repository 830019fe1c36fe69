#include "cli/experiment_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/command.h"
#include "engine/errors.h"

namespace polymargin::cli::experiment {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parse_bool(const std::string& value, const std::string& where) {
  if (value == "yes" || value == "true" || value == "1") return true;
  if (value == "no" || value == "false" || value == "0") return false;
  throw UsageError(where + ": expected yes or no (got '" + value + "')");
}

template <typename T>
T parse_number(const std::string& value, const std::string& where) {
  std::istringstream in(value);
  T x{};
  in >> x;
  if (!in || !in.eof()) throw UsageError(where + ": not a number: '" + value + "'");
  return x;
}

// "B^E" → (B, E) with an integer E; false when `text` is not of that form.
bool parse_power(const std::string& text, double& base, int& exponent) {
  const auto caret = text.find('^');
  if (caret == std::string::npos) return false;
  try {
    std::size_t used = 0;
    base = std::stod(text.substr(0, caret), &used);
    if (used != caret) return false;
    const std::string e = text.substr(caret + 1);
    exponent = std::stoi(e, &used);
    return used == e.size();
  } catch (const std::exception&) {
    return false;
  }
}

// B^E as the shortest text that reads back to it (10^-1: "0.1"); UsageError when it is not a
// positive finite double.
std::string power_value(double base, int exponent, const std::string& where) {
  const auto shortest = [](double x) {
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof text, x).ptr);
  };
  const double value = std::pow(base, exponent);
  if (!std::isnormal(value))  // 0, a denormal or infinity
    throw UsageError(where + ": " + shortest(base) + "^" + std::to_string(exponent) +
                     " is out of a double's range");
  return shortest(value);
}

}  // namespace

std::vector<std::string> split_list(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) items.push_back(trim(item));
  if (!text.empty() && text.back() == separator) items.emplace_back();
  return items;
}

std::vector<std::string> parse_value_list(const std::string& text, const std::string& where) {
  if (trim(text).empty()) throw UsageError(where + ": no value (a key takes one or a list)");
  std::vector<std::string> values;
  for (const std::string& item : split_list(text, ',')) {
    if (item.empty()) throw UsageError(where + ": empty value in list '" + text + "'");
    const auto dots = item.find("..");
    double base = 0, base2 = 0;
    int from = 0, to = 0;
    if (dots != std::string::npos) {
      if (!parse_power(trim(item.substr(0, dots)), base, from) ||
          !parse_power(trim(item.substr(dots + 2)), base2, to) || base != base2 || !(base > 0) ||
          from > to)
        throw UsageError(where + ": a range is written B^FROM..B^TO with FROM ≤ TO (got '" + item +
                         "')");
      for (int e = from; e <= to; ++e) values.push_back(power_value(base, e, where));
    } else if (parse_power(item, base, from)) {
      values.push_back(power_value(base, from, where));
    } else {
      values.push_back(item);
    }
  }
  std::set<std::string> seen;
  for (const std::string& v : values)
    if (!seen.insert(v).second) throw UsageError(where + ": value '" + v + "' is listed twice");
  return values;
}

ExperimentConfig read_config(const std::string& path, const ProtocolOverrides& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open experiment config " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, overrides);
}

// A key of a [method NAME] section: the method's own keys, or a learner option, fixed (one value)
// or searched (a list).
void set_method_key(MethodSpec& m, const std::string& key, const std::string& value,
                    const std::string& at) {
  if (key == "algo") {
    m.algo = value;
  } else if (key == "external") {
    if (value != "liblinear")
      throw UsageError(at + ": the only external method is liblinear (got '" + value + "')");
    m.external = value;
  } else if (key == "search") {
    if (value != "product" && value != "coordinate")
      throw UsageError(at + ": search is product or coordinate (got '" + value + "')");
    m.coordinate = value == "coordinate";
  } else if (key == "order") {
    for (const std::string& group : split_list(value, '|')) {
      m.groups.push_back({});
      for (const std::string& k : split_list(group, ','))
        if (!k.empty()) m.groups.back().push_back(k);
      if (m.groups.back().empty()) throw UsageError(at + ": empty group in '" + value + "'");
    }
  } else if (key == "rounds") {
    m.rounds = parse_number<int>(value, at);
    if (m.rounds < 1) throw UsageError(at + ": rounds must be at least 1");
  } else if (key == "data" || key == "output" || key == "json" || key == "config" || key == "d" ||
             key == "o") {
    throw UsageError(at + ": set by the experiment for every cell; not a method key");
  } else {
    std::vector<std::string> values = parse_value_list(value, at);
    if (values.size() == 1)
      m.fixed.emplace_back(key, values[0]);
    else
      m.grid.push_back({key, std::move(values)});
  }
}

// What holds across sections once the file is read: ranges, every data set and method complete,
// a coordinate search's order covering its grid, the baseline and plotted methods defined.
void check_sections(ExperimentConfig& config, const std::string& path, int line_number) {
  const auto fail = [&](int line, const std::string& message) {
    throw UsageError(path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " +
                     message);
  };
  if (config.repeats < 1) fail(config.repeats_line, "repeats must be at least 1");
  if (config.folds < 2) fail(config.folds_line, "folds must be at least 2");
  if (!(config.test_fraction > 0 && config.test_fraction < 1))
    fail(config.fraction_line, "test-fraction must lie strictly between 0 and 1");
  if (config.datasets.empty()) fail(line_number, "no [dataset NAME] section");
  if (config.methods.empty()) fail(line_number, "no [method NAME] section");
  for (const DatasetSpec& d : config.datasets) {
    if (d.data.empty() && d.generate.empty())
      fail(d.line, "dataset " + d.name + " needs data = PATH (or generate = GEN-ARGS)");
    if (!d.data.empty() && !d.generate.empty())
      fail(d.line, "dataset " + d.name + ": data and generate exclude each other");
    if (!d.generate.empty() && !d.test.empty())
      fail(d.line, "dataset " + d.name +
                       ": a generated set takes its test part from gen's "
                       "--test-rows, not test =");
  }
  for (MethodSpec& m : config.methods) {
    // A message about one key names that key's line; one about the section as a whole its header.
    const auto line_of = [&](const std::string& key) {
      const auto it = m.key_lines.find(key);
      return it == m.key_lines.end() ? m.line : it->second;
    };
    if (m.external.empty() && m.algo.empty())
      fail(m.line, "method " + m.name +
                       " needs algo = NAME (a `train --algo` learner) or "
                       "external = liblinear");
    if (!m.external.empty() && !m.algo.empty())
      fail(std::max(line_of("algo"), line_of("external")),
           "method " + m.name + ": algo and external exclude each other");
    std::set<std::string> grid_keys;
    for (const GridKey& g : m.grid) grid_keys.insert(g.key);
    if (!m.coordinate && !m.groups.empty())
      fail(line_of("order"), "method " + m.name + ": order is for search = coordinate");
    if (m.coordinate) {
      if (m.groups.empty())  // default: one key at a time, in the order written
        for (const GridKey& g : m.grid) m.groups.push_back({g.key});
      std::set<std::string> covered;
      for (const auto& group : m.groups)
        for (const std::string& k : group) {
          if (!grid_keys.count(k))
            fail(line_of("order"), "method " + m.name + ": order names '" + k +
                                       "', which is not a key with a list of values");
          if (!covered.insert(k).second)
            fail(line_of("order"), "method " + m.name + ": order names '" + k + "' twice");
        }
      for (const std::string& k : grid_keys)
        if (!covered.count(k))
          fail(line_of("order"),
               "method " + m.name + ": order leaves out the grid key '" + k + "'");
    }
  }
  const auto has_method = [&](const std::string& name) {
    return std::any_of(config.methods.begin(), config.methods.end(),
                       [&](const MethodSpec& m) { return m.name == name; });
  };
  if (config.baseline.empty() && has_method("svm")) config.baseline = "svm";
  if (!config.baseline.empty() && !has_method(config.baseline))
    fail(0, "baseline '" + config.baseline + "' is not a [method] of this config");
  for (const std::string& name : config.margin_methods) {
    if (!has_method(name)) fail(0, "margin-plot names '" + name + "', which is not a [method]");
    for (const MethodSpec& m : config.methods)
      if (m.name == name && !m.external.empty())
        fail(0, "margin-plot names '" + name + "', an external method: margins are drawn for " +
                    "polymargin's learners only");
  }
}

ExperimentConfig parse_config(const std::string& text, const std::string& path,
                              const ProtocolOverrides& overrides) {
  ExperimentConfig config;
  config.path = path;
  enum class Section { kGlobal, kDataset, kMethod } section = Section::kGlobal;
  std::set<std::string> names;
  std::istringstream in(text);
  std::string raw;
  int line_number = 0;
  std::set<std::string> keys_seen;
  while (std::getline(in, raw)) {
    ++line_number;
    if (line_number == 1) drop_byte_order_mark(raw);
    const std::string where = path + ":" + std::to_string(line_number);
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line.back() != ']') throw UsageError(where + ": a section header ends with ']'");
      std::istringstream header(line.substr(1, line.size() - 2));
      std::string kind, name, extra;
      header >> kind >> name >> extra;
      keys_seen.clear();
      if (kind == "experiment" && name.empty()) {
        section = Section::kGlobal;
        continue;
      }
      if ((kind != "dataset" && kind != "method") || name.empty() || !extra.empty())
        throw UsageError(where + ": expected [experiment], [dataset NAME] or [method NAME], got " +
                         line);
      if (name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
          std::string::npos)
        throw UsageError(where + ": names use letters, digits, '.', '_' and '-' only (got '" +
                         name + "')");
      if (!names.insert(kind + " " + name).second)
        throw UsageError(where + ": " + kind + " '" + name + "' is defined twice");
      if (kind == "dataset") {
        section = Section::kDataset;
        config.datasets.push_back({});
        config.datasets.back().name = name;
        config.datasets.back().line = line_number;
      } else {
        section = Section::kMethod;
        config.methods.push_back({});
        config.methods.back().name = name;
        config.methods.back().line = line_number;
      }
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw UsageError(where + ": expected 'key = value', got " + line);
    const std::string key = trim(line.substr(0, eq));
    const std::string value = trim(line.substr(eq + 1));
    if (key.empty()) throw UsageError(where + ": missing key before '='");
    if (!keys_seen.insert(key).second) throw UsageError(where + ": key '" + key + "' is set twice");
    const std::string at = where + ": " + key;
    if (section == Section::kGlobal) {
      if (key == "title") {
        config.title = value;
      } else if (key == "repeats") {
        config.repeats = parse_number<int>(value, at);
        config.repeats_line = line_number;
      } else if (key == "test-fraction") {
        config.test_fraction = parse_number<double>(value, at);
        config.fraction_line = line_number;
      } else if (key == "folds") {
        config.folds = parse_number<int>(value, at);
        config.folds_line = line_number;
      } else if (key == "seed") {
        config.seed = parse_number<std::uint64_t>(value, at);
      } else if (key == "baseline") {
        config.baseline = value;
      } else if (key == "margin-plot") {
        config.margin_methods = split_list(value, ',');
      } else {
        throw UsageError(at + ": unknown experiment key (title, repeats, test-fraction, folds, "
                              "seed, baseline, margin-plot)");
      }
    } else if (section == Section::kDataset) {
      DatasetSpec& d = config.datasets.back();
      // Files relative to the config file's folder, as a --config file's.
      const auto files = [&](const std::string& list) {
        std::vector<std::string> named = split_list(list, ',');
        for (std::string& f : named) f = config_relative(path, f);
        return named;
      };
      if (key == "data") {
        d.data = files(value);
        d.data_line = line_number;
      } else if (key == "test") {
        d.test = files(value);
        d.test_line = line_number;
      } else if (key == "generate") {
        d.generate = value;
      } else if (key == "optional") {
        d.optional = parse_bool(value, at);
      } else {
        throw UsageError(at + ": unknown dataset key (data, test, generate, optional)");
      }
    } else {
      config.methods.back().key_lines[key] = line_number;
      set_method_key(config.methods.back(), key, value, at);
    }
  }

  if (overrides.repeats > 0) config.repeats = overrides.repeats, config.repeats_line = 0;
  if (overrides.folds > 0) config.folds = overrides.folds, config.folds_line = 0;
  check_sections(config, path, line_number);
  return config;
}

Setting first_setting(const MethodSpec& method) { return driver::first_setting(method.grid); }

std::vector<std::vector<std::string>> search_stages(const MethodSpec& method) {
  std::vector<std::vector<std::string>> stages;
  if (method.grid.empty()) return stages;
  if (!method.coordinate) {
    stages.push_back({});
    for (const GridKey& g : method.grid) stages.back().push_back(g.key);
    return stages;
  }
  for (int r = 0; r < method.rounds; ++r)
    for (const auto& group : method.groups) stages.push_back(group);
  return stages;
}

std::vector<Setting> settings_for_group(const MethodSpec& method,
                                        const std::vector<std::string>& group,
                                        const Setting& current) {
  return driver::settings_for_group(method.grid, method.fixed, group, current);
}

std::string setting_text(const Setting& setting, const MethodSpec& method) {
  return driver::setting_text(setting, method.grid);
}

}  // namespace polymargin::cli::experiment
