// Self-contained SVG line plots and bar charts (no scripts, no external fonts), for the cumulative margin
// distribution of `eval --plot` and the experiment reports.
#pragma once

#include <string>
#include <vector>

namespace polymargin::cli {

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;
};

struct PlotLabels {
  std::string title;
  std::string x_label;
  std::string y_label;
};

/// An SVG document with one polyline per series, axes with ticks, and a legend.
std::string svg_line_plot(const std::vector<Series>& series, const PlotLabels& labels,
                          int width = 640, int height = 420);

/// One bar per (group, series): values[s][g] is series s in group g; NaN leaves the bar out.
struct BarData {
  std::vector<std::string> groups;  // categories along the x axis (data sets)
  std::vector<std::string> series;  // bars within a group, with a legend (methods)
  std::vector<std::vector<double>> values;
};

/// An SVG grouped bar chart. `log_scale`: a log10 y axis (for times spanning decades; values ≤ 0
/// are left out).
std::string svg_bar_chart(const BarData& data, const PlotLabels& labels, bool log_scale,
                          int width = 720, int height = 420);

/// Escapes &, <, >, " for XML text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace polymargin::cli
