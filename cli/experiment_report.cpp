#include "cli/experiment_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/stats.h"
#include "io/atomic_file.h"

namespace polymargin::cli::experiment {
namespace {

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2f" : s < 100 ? "%.1f" : "%.0f", s);
  return buf;
}

// The repeats of one method on one data set that finished.
struct Summary {
  std::vector<double> accuracy, wall, cpu;
  std::vector<int> repeats;  // which repeats, for pairing
  int total = 0;
};

Summary summarise(const std::vector<RepeatResult>& results) {
  Summary s;
  s.total = static_cast<int>(results.size());
  for (std::size_t r = 0; r < results.size(); ++r)
    if (results[r].ok) {
      s.accuracy.push_back(results[r].accuracy);
      s.wall.push_back(results[r].train_wall_seconds);
      s.cpu.push_back(results[r].train_cpu_seconds);
      s.repeats.push_back(static_cast<int>(r));
    }
  return s;
}

int method_index(const Report& report, const std::string& name) {
  for (std::size_t m = 0; m < report.methods.size(); ++m)
    if (report.methods[m].name == name) return static_cast<int>(m);
  return -1;
}

bool usable(const Report& report, const ReportDataset& d, std::size_t m) {
  return d.status == "ok" && report.methods[m].status == "ok" && m < d.results.size();
}

// The paired t-test of method m against the baseline over the repeats both finished.
engine::PairedTTest versus_baseline(const ReportDataset& d, std::size_t m, int baseline) {
  std::vector<double> a, b;
  for (std::size_t r = 0; r < d.results[m].size(); ++r)
    if (d.results[m][r].ok && d.results[baseline][r].ok) {
      a.push_back(d.results[m][r].accuracy);
      b.push_back(d.results[baseline][r].accuracy);
    }
  return engine::paired_t_test(a, b);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string html_escape(const std::string& text) { return xml_escape(text); }

// Markdown **bold** → <b>bold</b> for the HTML table.
std::string html_cell(const std::string& text) {
  std::string escaped = html_escape(text), out;
  bool open = false;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped.compare(i, 2, "**") == 0) {
      out += open ? "</b>" : "<b>";
      open = !open;
      ++i;
    } else {
      out += escaped[i];
    }
  }
  return out;
}

}  // namespace

Table accuracy_table(const Report& report) {
  Table t;
  t.title = report.repeats == 1
                ? std::string("Test accuracy (one repeat)")
                : "Test accuracy (mean ± std over " + std::to_string(report.repeats) + " repeats)";
  const int baseline = method_index(report, report.baseline);
  t.note = report.split_description + "; best in bold" +
           (baseline >= 0 ? "; • / ◦: significantly better / worse than " + report.baseline +
                                " (paired t-test, 95%)"
                          : "");
  t.header = {"data set", "#inst", "#feat"};
  for (const auto& m : report.methods) t.header.push_back(m.name);
  t.csv.push_back({"dataset", "method", "accuracy_mean", "accuracy_std", "repeats_ok", "repeats",
                   "p_value_vs_baseline", "mark", "best"});
  t.json = nlohmann::json::array();
  // Each method's mean on each data set run (NaN: failed there), for the average row.
  std::vector<std::vector<double>> means(report.methods.size());
  std::vector<int> wins(report.methods.size()), ties(report.methods.size()),
      losses(report.methods.size());
  for (const ReportDataset& d : report.datasets) {
    std::vector<std::string> row = {d.name, d.status == "ok" ? std::to_string(d.rows) : "",
                                    d.status == "ok" ? std::to_string(d.features) : ""};
    if (d.status != "ok") {
      row.push_back("not run: " + d.status);
      row.resize(t.header.size(), "");
      t.rows.push_back(row);
      t.json.push_back({{"dataset", d.name}, {"status", d.status}});
      continue;
    }
    for (auto& m : means) m.push_back(NAN);  // set below where the method finished
    double best = -1;
    for (std::size_t m = 0; m < report.methods.size(); ++m)
      if (usable(report, d, m)) {
        const Summary s = summarise(d.results[m]);
        if (!s.accuracy.empty()) best = std::max(best, engine::mean(s.accuracy));
      }
    for (std::size_t m = 0; m < report.methods.size(); ++m) {
      if (!usable(report, d, m)) {
        row.push_back("n/a");
        continue;
      }
      const Summary s = summarise(d.results[m]);
      if (s.accuracy.empty()) {
        row.push_back("failed");
        std::string error;
        for (const auto& r : d.results[m]) error = r.error.empty() ? error : r.error;
        t.json.push_back({{"dataset", d.name}, {"method", report.methods[m].name},
                          {"status", "failed"}, {"error", error}});
        t.csv.push_back({d.name, report.methods[m].name, "", "", "0", std::to_string(s.total), "",
                         "", ""});
        continue;
      }
      const double mean = engine::mean(s.accuracy), sd = engine::sample_std(s.accuracy);
      std::string mark;
      double p = NAN;
      // No test on fewer than two pairs (one repeat): neither a p-value nor a tie.
      const engine::PairedTTest test =
          baseline >= 0 && static_cast<int>(m) != baseline && usable(report, d, baseline)
              ? versus_baseline(d, m, baseline)
              : engine::PairedTTest{};
      if (test.n >= 2) {
        p = test.p_value;
        if (test.significant()) {
          mark = test.mean_difference > 0 ? "•" : "◦";
          ++(test.mean_difference > 0 ? wins : losses)[m];
        } else {
          ++ties[m];
        }
      }
      const bool is_best = mean == best;
      const bool spread = s.accuracy.size() >= 2;  // one value has no standard deviation
      std::string cell = fixed(mean, 4) + (spread ? " ± " + fixed(sd, 4) : "");
      if (is_best) cell = "**" + cell + "**";
      if (!mark.empty()) cell += " " + mark;
      if (static_cast<int>(s.accuracy.size()) < s.total)
        cell += " (" + std::to_string(s.accuracy.size()) + "/" + std::to_string(s.total) + ")";
      row.push_back(cell);
      means[m].back() = mean;
      t.csv.push_back({d.name, report.methods[m].name, fixed(mean, 6), spread ? fixed(sd, 6) : "",
                       std::to_string(s.accuracy.size()), std::to_string(s.total),
                       std::isnan(p) ? "" : fixed(p, 6), mark, is_best ? "1" : "0"});
      nlohmann::json j = {{"dataset", d.name},
                          {"method", report.methods[m].name},
                          {"accuracy_mean", mean},
                          {"accuracy_std", spread ? nlohmann::json(sd) : nlohmann::json()},
                          {"accuracies", s.accuracy},
                          {"repeats_ok", s.accuracy.size()},
                          {"repeats", s.total},
                          {"best", is_best}};
      if (!std::isnan(p)) {
        j["p_value_vs_baseline"] = p;
        j["mark"] = mark.empty() ? "tie" : mark == "•" ? "better" : "worse";
      }
      t.json.push_back(std::move(j));
    }
    t.rows.push_back(std::move(row));
  }
  // The average over the data sets where every method that ran finished: a method that failed on
  // a set is not averaged over easier ones than the others.
  const std::size_t sets = means.empty() ? 0 : means[0].size();
  std::vector<bool> common(sets, true);
  for (std::size_t m = 0; m < report.methods.size(); ++m)
    if (report.methods[m].status == "ok")
      for (std::size_t k = 0; k < sets; ++k) common[k] = common[k] && !std::isnan(means[m][k]);
  const auto shared = static_cast<std::size_t>(std::count(common.begin(), common.end(), true));
  std::vector<std::string> average = {shared == sets ? "average"
                                                     : "average (the " + std::to_string(shared) +
                                                           " of " + std::to_string(sets) +
                                                           " sets every method finished)",
                                      "", ""};
  for (std::size_t m = 0; m < report.methods.size(); ++m) {
    std::vector<double> kept;
    for (std::size_t k = 0; k < sets; ++k)
      if (common[k] && report.methods[m].status == "ok") kept.push_back(means[m][k]);
    average.push_back(kept.empty() ? "" : fixed(engine::mean(kept), 4));
  }
  t.rows.push_back(std::move(average));
  if (baseline >= 0) {
    std::vector<std::string> wtl = {"win/tie/loss vs " + report.baseline, "", ""};
    for (std::size_t m = 0; m < report.methods.size(); ++m)
      wtl.push_back(static_cast<int>(m) == baseline || report.methods[m].status != "ok"
                        ? ""
                        : std::to_string(wins[m]) + "/" + std::to_string(ties[m]) + "/" +
                              std::to_string(losses[m]));
    t.rows.push_back(std::move(wtl));
  }
  return t;
}

Table timing_table(const Report& report) {
  Table t;
  t.title = "Training time of the final model (mean over repeats; seconds)";
  t.note = "wall: the learner's process from start to exit (text conversion included); CPU: its "
           "user + system time. Model selection and testing are not included.";
  t.header = {"data set"};
  for (const auto& m : report.methods) t.header.push_back(m.name);
  t.csv.push_back({"dataset", "method", "train_wall_mean", "train_wall_std", "train_cpu_mean",
                   "train_cpu_std", "repeats_ok"});
  t.json = nlohmann::json::array();
  for (const ReportDataset& d : report.datasets) {
    if (d.status != "ok") continue;
    std::vector<std::string> row = {d.name};
    for (std::size_t m = 0; m < report.methods.size(); ++m) {
      const Summary s = usable(report, d, m) ? summarise(d.results[m]) : Summary{};
      if (s.wall.empty()) {
        row.push_back("n/a");
        continue;
      }
      const double wall = engine::mean(s.wall), cpu = engine::mean(s.cpu);
      row.push_back(seconds_text(wall) + " (CPU " + seconds_text(cpu) + ")");
      t.csv.push_back({d.name, report.methods[m].name, fixed(wall, 4),
                       fixed(engine::sample_std(s.wall), 4), fixed(cpu, 4),
                       fixed(engine::sample_std(s.cpu), 4), std::to_string(s.wall.size())});
      t.json.push_back({{"dataset", d.name},
                        {"method", report.methods[m].name},
                        {"train_wall_seconds_mean", wall},
                        {"train_wall_seconds_std", engine::sample_std(s.wall)},
                        {"train_cpu_seconds_mean", cpu},
                        {"train_cpu_seconds_std", engine::sample_std(s.cpu)},
                        {"train_wall_seconds", s.wall},
                        {"train_cpu_seconds", s.cpu}});
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

Table settings_table(const Report& report) {
  Table t;
  t.title = "Parameters chosen by cross-validation on the training part";
  t.note = "the setting chosen most often over the repeats (times chosen / repeats)";
  t.header = {"data set"};
  for (const auto& m : report.methods) t.header.push_back(m.name);
  t.csv.push_back({"dataset", "method", "repeat", "setting"});
  t.json = nlohmann::json::array();
  for (const ReportDataset& d : report.datasets) {
    if (d.status != "ok") continue;
    std::vector<std::string> row = {d.name};
    for (std::size_t m = 0; m < report.methods.size(); ++m) {
      if (!usable(report, d, m)) {
        row.push_back("n/a");
        continue;
      }
      std::map<std::string, int> count;
      std::vector<std::string> order;
      nlohmann::json chosen = nlohmann::json::array();
      for (std::size_t r = 0; r < d.results[m].size(); ++r) {
        const RepeatResult& res = d.results[m][r];
        if (res.setting.empty()) continue;
        if (count[res.setting]++ == 0) order.push_back(res.setting);
        chosen.push_back(res.setting);
        t.csv.push_back({d.name, report.methods[m].name, std::to_string(r), res.setting});
      }
      std::string most;
      for (const std::string& s : order)
        if (most.empty() || count[s] > count[most]) most = s;
      row.push_back(most.empty() ? "n/a"
                                 : most + " (" + std::to_string(count[most]) + "/" +
                                       std::to_string(d.results[m].size()) + ")");
      t.json.push_back({{"dataset", d.name}, {"method", report.methods[m].name}, {"settings", chosen}});
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string table_markdown(const Table& table) {
  std::ostringstream out;
  out << "### " << table.title << "\n\n";
  if (!table.note.empty()) out << table.note << "\n\n";
  out << "|";
  for (const auto& h : table.header) out << " " << h << " |";
  out << "\n|";
  for (std::size_t i = 0; i < table.header.size(); ++i) out << "---|";
  out << "\n";
  for (const auto& row : table.rows) {
    out << "|";
    for (const auto& cell : row) out << " " << cell << " |";
    out << "\n";
  }
  return out.str();
}

std::string table_csv(const Table& table) {
  std::ostringstream out;
  for (const auto& row : table.csv) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(row[i]);
    out << "\n";
  }
  return out.str();
}

std::string table_html(const Table& table) {
  std::ostringstream out;
  out << "<h2>" << html_escape(table.title) << "</h2>\n";
  if (!table.note.empty()) out << "<p class=\"note\">" << html_escape(table.note) << "</p>\n";
  out << "<table>\n<tr>";
  for (const auto& h : table.header) out << "<th>" << html_escape(h) << "</th>";
  out << "</tr>\n";
  for (const auto& row : table.rows) {
    out << "<tr>";
    for (const auto& cell : row) out << "<td>" << html_cell(cell) << "</td>";
    out << "</tr>\n";
  }
  out << "</table>\n";
  return out.str();
}

// The timing bar chart: wall seconds of the final training, log scale when they span decades.
std::string timing_chart(const Report& report) {
  BarData bars;
  for (const auto& m : report.methods)
    if (m.status == "ok") bars.series.push_back(m.name);
  double lo = INFINITY, hi = 0;
  for (const ReportDataset& d : report.datasets) {
    if (d.status != "ok") continue;
    bars.groups.push_back(d.name);
  }
  bars.values.assign(bars.series.size(), std::vector<double>(bars.groups.size(), NAN));
  {
    std::size_t g = 0;
    for (const ReportDataset& d : report.datasets) {
      if (d.status != "ok") continue;
      std::size_t s = 0;
      for (std::size_t m = 0; m < report.methods.size(); ++m) {
        if (report.methods[m].status != "ok") continue;
        const Summary sum = summarise(d.results[m]);
        if (!sum.wall.empty()) {
          bars.values[s][g] = engine::mean(sum.wall);
          lo = std::min(lo, bars.values[s][g]);
          hi = std::max(hi, bars.values[s][g]);
        }
        ++s;
      }
      ++g;
    }
  }
  const bool log_scale = lo > 0 && hi / lo > 30;
  return svg_bar_chart(bars,
                       {"Training time of the final model", "data set",
                        log_scale ? "wall seconds (log scale)" : "wall seconds"},
                       log_scale);
}

std::vector<std::string> write_report(const Report& report, const std::string& directory) {
  std::vector<std::string> written;
  const auto write = [&](const std::string& name, const std::string& content) {
    io::write_file_atomically(directory + "/" + name, content);
    written.push_back(directory + "/" + name);
  };
  const Table tables[] = {accuracy_table(report), timing_table(report), settings_table(report)};
  const char* names[] = {"accuracy", "timing", "settings"};
  for (int i = 0; i < 3; ++i) {
    write(std::string(names[i]) + ".md", table_markdown(tables[i]));
    write(std::string(names[i]) + ".csv", table_csv(tables[i]));
    write(std::string(names[i]) + ".json", tables[i].json.dump(2) + "\n");
  }

  std::vector<std::pair<std::string, std::string>> svgs;  // file name, content
  svgs.emplace_back("timing.svg", timing_chart(report));
  for (const ReportDataset& d : report.datasets)
    if (d.status == "ok" && !d.margins.empty())
      svgs.emplace_back("margins-" + d.name + ".svg",
                        svg_line_plot(d.margins, {"Cumulative margin distribution: " + d.name +
                                                      " (test part, repeat 1)",
                                                  "margin y·f(x)", "fraction of rows with margin ≤ x"}));
  for (const auto& [name, content] : svgs) write(name, content);

  // One HTML page: the tables and the SVGs inline, no scripts, nothing fetched.
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
       << html_escape(report.title) << "</title>\n<style>body{font-family:sans-serif;margin:2em;"
          "max-width:80em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;"
          "padding:.3em .6em;text-align:right}td:first-child,th:first-child{text-align:left}"
          ".note{color:#555}figure{display:inline-block;margin:1em}</style></head><body>\n"
       << "<h1>" << html_escape(report.title) << "</h1>\n<p>Config <code>"
       << html_escape(report.config_path) << "</code>; " << html_escape(report.split_description)
       << "; model selection by " << report.folds << "-fold cross-validation on the training part."
       << "</p>\n<ul>\n";
  for (const auto& m : report.methods)
    html << "<li><b>" << html_escape(m.name) << "</b>: " << html_escape(m.description)
         << (m.status == "ok" ? "" : " — <i>not run: " + html_escape(m.status) + "</i>") << "</li>\n";
  for (const ReportDataset& d : report.datasets)
    if (d.status != "ok")
      html << "<li>data set <b>" << html_escape(d.name) << "</b> skipped: " << html_escape(d.status)
           << "</li>\n";
  html << "</ul>\n";
  for (const Table& t : tables) html << table_html(t);
  html << "<h2>Plots</h2>\n";
  for (const auto& [name, content] : svgs)
    html << "<figure>" << content << "<figcaption><a href=\"" << html_escape(name) << "\">"
         << html_escape(name) << "</a></figcaption></figure>\n";
  html << "</body></html>\n";
  write("report.html", html.str());

  nlohmann::json results = {{"title", report.title},
                            {"config", report.config_path},
                            {"repeats", report.repeats},
                            {"folds", report.folds},
                            {"split", report.split_description},
                            {"baseline", report.baseline},
                            {"run", report.run}};
  results["methods"] = nlohmann::json::array();
  for (const auto& m : report.methods)
    results["methods"].push_back(
        {{"name", m.name}, {"description", m.description}, {"status", m.status}});
  results["datasets"] = nlohmann::json::array();
  for (const ReportDataset& d : report.datasets) {
    nlohmann::json j = {{"name", d.name},
                        {"status", d.status},
                        {"rows", d.rows},
                        {"features", d.features},
                        {"train_rows", d.train_rows},
                        {"test_rows", d.test_rows}};
    nlohmann::json per_method = nlohmann::json::object();
    for (std::size_t m = 0; m < report.methods.size() && m < d.results.size(); ++m) {
      nlohmann::json repeats = nlohmann::json::array();
      for (const RepeatResult& r : d.results[m]) {
        nlohmann::json one = {{"ok", r.ok}, {"setting", r.setting}};
        if (r.ok) {
          one["accuracy"] = r.accuracy;
          one["train_wall_seconds"] = r.train_wall_seconds;
          one["train_cpu_seconds"] = r.train_cpu_seconds;
        } else {
          one["error"] = r.error;
        }
        repeats.push_back(std::move(one));
      }
      per_method[report.methods[m].name] = std::move(repeats);
    }
    j["results"] = std::move(per_method);
    results["datasets"].push_back(std::move(j));
  }
  write("results.json", results.dump(2) + "\n");
  return written;
}

}  // namespace polymargin::cli::experiment
