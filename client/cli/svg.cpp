#include "svg.h"

#include <algorithm>
#include <cstdio>

namespace hearth::cli {
namespace {

// Each chart's box and the plot area inside it (SVG user units, i.e. pixels).
constexpr double kWidth = 340, kHeight = 260;
constexpr double kLeft = 56, kRight = 12, kTop = 30, kBottom = 44;
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle", const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) +
         "</text>\n";
}

std::string chart(const Chart& c, double x0) {
  double max_x = 0, max_y = 0;
  for (const Series& s : c.series)
    for (const auto& [x, y] : s.points) max_x = std::max(max_x, x), max_y = std::max(max_y, y);
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  const double left = x0 + kLeft, bottom = kTop + h;
  auto px = [&](double x) { return left + x / max_x * w; };
  auto py = [&](double y) { return bottom - y / max_y * h; };
  std::string out = "<g>\n";
  out += text(x0 + kWidth / 2, 18, c.title, "middle", " font-weight=\"bold\"");
  out += "<path d=\"M" + num(left) + " " + num(kTop) + " V" + num(bottom) + " H" + num(left + w) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  out += text(left, bottom + 14, "0") + text(left + w, bottom + 14, num(max_x));
  out += text(left - 4, bottom + 4, "0", "end") + text(left - 4, kTop + 4, num(max_y), "end");
  out += text(left + w / 2, bottom + 32, c.x_label);
  out += text(x0 + 14, kTop + h / 2, c.y_label, "middle",
              (" transform=\"rotate(-90 " + num(x0 + 14) + " " + num(kTop + h / 2) + ")\"").c_str());
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    std::string points;
    for (const auto& [x, y] : s.points) points += num(px(x)) + "," + num(py(y)) + " ";
    if (!points.empty())
      out += "<polyline points=\"" + points + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\"/>\n";
    for (const auto& [x, y] : s.points)
      out += "<circle cx=\"" + num(px(x)) + "\" cy=\"" + num(py(y)) + "\" r=\"3\" fill=\"" + colour + "\"/>\n";
    out += text(left + 8, kTop + 12 + 14 * static_cast<double>(i), s.name, "start",
                (std::string(" fill=\"") + colour + "\"").c_str());
  }
  return out + "</g>\n";
}

}  // namespace

std::string svg_charts(const std::vector<Chart>& charts) {
  const double width = kWidth * static_cast<double>(std::max<size_t>(1, charts.size()));
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    num(width) + "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(width) + " " + num(kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t i = 0; i < charts.size(); ++i) out += chart(charts[i], kWidth * static_cast<double>(i));
  return out + "</svg>\n";
}

}  // namespace hearth::cli
