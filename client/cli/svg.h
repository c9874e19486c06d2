// A small SVG writer for `hearth bench --plot`: line charts side by side, each with its
// axes (from 0 to the largest value), tick labels at the ends and a legend.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hearth::cli {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
};

// One SVG document (UTF-8 text) with the charts in a row.
std::string svg_charts(const std::vector<Chart>& charts);

}  // namespace hearth::cli
