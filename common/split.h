// Comma-separated lists as people type them in flags, variables and config values.
#pragma once

#include <string>
#include <vector>

namespace hearth {

// "a, b,,c" -> {"a", "b", "c"}: items trimmed of spaces and tabs, empty ones dropped.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(std::move(item));
    start = end + 1;
  }
  return out;
}

}  // namespace hearth
