#include "cli/plot.h"

#include <gtest/gtest.h>

namespace polymargin::cli {
namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Plot, OnePolylinePerSeriesAndEscapedLabels) {
  const std::string svg =
      svg_line_plot({{"svm", {0, 1, 2}, {0, 0.5, 1}}, {"ldm <a&b>", {0, 1, 2}, {0.2, 0.4, 1}}},
                    {"title", "x", "y"});
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("ldm &lt;a&amp;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<a&b>"), std::string::npos);
  EXPECT_EQ(count(svg, "<svg"), 1u);
}

TEST(Plot, DegenerateRangesStillDraw) {
  const std::string svg = svg_line_plot({{"flat", {1, 1}, {3, 3}}}, {"t", "x", "y"});
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

}  // namespace
}  // namespace polymargin::cli
