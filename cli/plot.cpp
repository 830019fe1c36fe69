#include "cli/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace polymargin::cli {

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

namespace {

// "Nice" tick step (1, 2 or 5 × 10^k) giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double residual = raw / magnitude;
  return magnitude * (residual < 1.5 ? 1 : residual < 3.5 ? 2 : residual < 7.5 ? 5 : 10);
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

}  // namespace

std::string svg_line_plot(const std::vector<Series>& series, const PlotLabels& labels, int width,
                          int height) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c",
                                         "#ff7f0e", "#9467bd", "#8c564b"};
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  if (!(x_hi > x_lo)) x_lo -= 1, x_hi += 1;
  if (!(y_hi > y_lo)) y_lo -= 1, y_hi += 1;
  const double left = 60, right = width - 20, top = 40, bottom = height - 50;
  const auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * (right - left); };
  const auto py = [&](double y) { return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top); };

  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
      << xml_escape(labels.title) << "</text>\n";
  // Axes and ticks.
  svg << "<g stroke=\"#444\" fill=\"none\"><path d=\"M" << left << " " << top << " V" << bottom
      << " H" << right << "\"/></g>\n<g fill=\"#444\">\n";
  const double xs = tick_step(x_hi - x_lo, 6), ys = tick_step(y_hi - y_lo, 5);
  for (double t = std::ceil(x_lo / xs) * xs; t <= x_hi + 1e-9 * xs; t += xs)
    svg << "<text x=\"" << px(t) << "\" y=\"" << bottom + 16 << "\" text-anchor=\"middle\">"
        << format_number(t) << "</text><path stroke=\"#ddd\" d=\"M" << px(t) << " " << top << " V"
        << bottom << "\"/>\n";
  for (double t = std::ceil(y_lo / ys) * ys; t <= y_hi + 1e-9 * ys; t += ys)
    svg << "<text x=\"" << left - 6 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">"
        << format_number(t) << "</text><path stroke=\"#ddd\" d=\"M" << left << " " << py(t) << " H"
        << right << "\"/>\n";
  svg << "</g>\n<text x=\"" << (left + right) / 2 << "\" y=\"" << height - 12
      << "\" text-anchor=\"middle\">" << xml_escape(labels.x_label) << "</text>\n"
      << "<text transform=\"translate(16 " << (top + bottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(labels.y_label) << "</text>\n";
  // One polyline and one legend entry per series.
  for (std::size_t k = 0; k < series.size(); ++k) {
    const char* colour = kColours[k % (sizeof kColours / sizeof *kColours)];
    svg << "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" << colour << "\" points=\"";
    for (std::size_t i = 0; i < series[k].x.size(); ++i) {
      if (!std::isfinite(series[k].x[i]) || !std::isfinite(series[k].y[i])) continue;
      svg << px(series[k].x[i]) << "," << py(series[k].y[i]) << " ";
    }
    svg << "\"/>\n<rect x=\"" << left + 10 << "\" y=\"" << top + 8 + 18 * k
        << "\" width=\"14\" height=\"4\" fill=\"" << colour << "\"/><text x=\"" << left + 30
        << "\" y=\"" << top + 14 + 18 * k << "\">" << xml_escape(series[k].name) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string svg_bar_chart(const BarData& data, const PlotLabels& labels, bool log_scale, int width,
                          int height) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c",
                                         "#ff7f0e", "#9467bd", "#8c564b"};
  const auto shown = [&](double v) { return std::isfinite(v) && (!log_scale || v > 0); };
  double hi = -std::numeric_limits<double>::infinity(), lo = -hi;
  for (const auto& row : data.values)
    for (double v : row)
      if (shown(v)) hi = std::max(hi, v), lo = std::min(lo, v);
  // Linear: from 0. Log: whole decades around the data.
  double y_lo = 0, y_hi = hi > 0 ? hi * 1.05 : 1;
  if (log_scale) {
    y_lo = std::isfinite(lo) ? std::floor(std::log10(lo)) : 0;
    y_hi = std::isfinite(hi) ? std::ceil(std::log10(hi)) : 1;
    if (!(y_hi > y_lo)) y_hi = y_lo + 1;
  }
  const double left = 70, right = width - 20, top = 40 + 18.0 * ((data.series.size() + 2) / 3),
               bottom = height - 60;
  const auto py = [&](double v) {
    const double y = log_scale ? std::log10(v) : v;
    return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top);
  };
  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">"
      << xml_escape(labels.title) << "</text>\n";
  svg << "<g stroke=\"#444\" fill=\"none\"><path d=\"M" << left << " " << top << " V" << bottom
      << " H" << right << "\"/></g>\n<g fill=\"#444\">\n";
  if (log_scale) {
    for (double e = y_lo; e <= y_hi + 1e-9; e += 1)
      svg << "<text x=\"" << left - 6 << "\" y=\"" << py(std::pow(10.0, e)) + 4
          << "\" text-anchor=\"end\">" << format_number(std::pow(10.0, e))
          << "</text><path stroke=\"#ddd\" d=\"M" << left << " " << py(std::pow(10.0, e)) << " H"
          << right << "\"/>\n";
  } else {
    const double step = tick_step(y_hi - y_lo, 5);
    for (double t = 0; t <= y_hi + 1e-9 * step; t += step)
      svg << "<text x=\"" << left - 6 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">"
          << format_number(t) << "</text><path stroke=\"#ddd\" d=\"M" << left << " " << py(t)
          << " H" << right << "\"/>\n";
  }
  const std::size_t groups = std::max<std::size_t>(1, data.groups.size());
  const double group_width = (right - left) / static_cast<double>(groups);
  const double bar_width =
      group_width * 0.8 / static_cast<double>(std::max<std::size_t>(1, data.series.size()));
  for (std::size_t g = 0; g < data.groups.size(); ++g) {
    const double x0 = left + group_width * (static_cast<double>(g) + 0.1);
    svg << "<text x=\"" << left + group_width * (g + 0.5) << "\" y=\"" << bottom + 16
        << "\" text-anchor=\"middle\">" << xml_escape(data.groups[g]) << "</text>\n";
    for (std::size_t s = 0; s < data.series.size(); ++s) {
      const double v = g < data.values[s].size() ? data.values[s][g] : NAN;
      if (!shown(v)) continue;
      const double y = std::min(bottom, py(v));
      svg << "<rect x=\"" << x0 + bar_width * s << "\" y=\"" << y << "\" width=\""
          << bar_width * 0.95 << "\" height=\"" << bottom - y << "\" fill=\""
          << kColours[s % (sizeof kColours / sizeof *kColours)] << "\"><title>"
          << xml_escape(data.series[s] + " on " + data.groups[g] + ": " + format_number(v))
          << "</title></rect>\n";
    }
  }
  svg << "</g>\n<text x=\"" << (left + right) / 2 << "\" y=\"" << height - 12
      << "\" text-anchor=\"middle\">" << xml_escape(labels.x_label) << "</text>\n"
      << "<text transform=\"translate(16 " << (top + bottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">" << xml_escape(labels.y_label) << "</text>\n";
  for (std::size_t s = 0; s < data.series.size(); ++s) {
    const double x = left + 10 + 200.0 * (s % 3), y = 36 + 18.0 * (s / 3);
    svg << "<rect x=\"" << x << "\" y=\"" << y - 9 << "\" width=\"14\" height=\"10\" fill=\""
        << kColours[s % (sizeof kColours / sizeof *kColours)] << "\"/><text x=\"" << x + 20
        << "\" y=\"" << y << "\">" << xml_escape(data.series[s]) << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace polymargin::cli
