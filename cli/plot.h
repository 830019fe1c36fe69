// Self-contained SVG line plots (no scripts, no external fonts), for the cumulative margin
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

/// Escapes &, <, >, " for XML text and attributes.
std::string xml_escape(const std::string& text);

}  // namespace polymargin::cli
