// The tables and the HTML report of `polymargin experiment`: accuracy (mean ± std, best in bold,
// •/◦ by a paired t-test against the baseline, win/tie/loss), training time (wall and CPU) with a
// bar chart, the chosen parameters, and the margin distribution plots. Every table is written as
// Markdown, CSV and JSON from one structure, so the three cannot disagree.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/plot.h"

namespace polymargin::cli::experiment {

/// One repeat's final result of a method on a data set.
struct RepeatResult {
  bool ok = false;
  double accuracy = 0;
  double train_wall_seconds = 0;
  double train_cpu_seconds = 0;
  std::string setting;  // the chosen parameters, "key=value ..."
  std::string error;    // when !ok
};

struct ReportDataset {
  std::string name;
  std::string status;  // "ok", or why it was skipped
  std::uint64_t rows = 0, features = 0, train_rows = 0, test_rows = 0;
  std::vector<std::vector<RepeatResult>> results;  // [method][repeat]
  std::vector<Series> margins;                     // cumulative margin curves, repeat 0
};

struct ReportMethod {
  std::string name;
  std::string description;  // "ldm", "liblinear -s 3"
  std::string status;       // "ok", or why it did not run
};

struct Report {
  std::string title;
  std::string config_path;
  int repeats = 0, folds = 0;
  std::string split_description;
  std::string baseline;  // method name; empty: no significance marks
  std::vector<ReportMethod> methods;
  std::vector<ReportDataset> datasets;
  nlohmann::json run;  // counters and timings of the run, for results.json
};

/// A rendered table: header, rows of cells (text for people), and the same data as JSON.
struct Table {
  std::string title;
  std::string note;  // one line under the title
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // Markdown cell text (may hold **bold**)
  std::vector<std::vector<std::string>> csv;   // plain values, header first
  nlohmann::json json;
};

Table accuracy_table(const Report& report);
Table timing_table(const Report& report);
Table settings_table(const Report& report);

std::string table_markdown(const Table& table);
std::string table_csv(const Table& table);
std::string table_html(const Table& table);

/// Writes every table (md, csv, json), timing.svg, margins-NAME.svg, report.html and results.json
/// into `directory`; returns the paths written.
std::vector<std::string> write_report(const Report& report, const std::string& directory);

}  // namespace polymargin::cli::experiment
