#include "sse.h"

#include <cstring>

namespace hearth::client {

Outcome SseParser::feed(const char* bytes, size_t size) {
  const char* end = bytes + size;
  while (bytes < end) {
    const char* nl = static_cast<const char*>(std::memchr(bytes, '\n', static_cast<size_t>(end - bytes)));
    if (nl == nullptr) {
      line_.append(bytes, end);
      if (line_.size() > kMaxEventBytes) return Outcome::failure(HEARTH_ERR_PROTOCOL, "server-sent event too long");
      return Outcome::success();
    }
    std::string_view line;
    if (line_.empty()) {
      line = std::string_view(bytes, static_cast<size_t>(nl - bytes));
    } else {
      line_.append(bytes, nl);
      line = line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    Outcome o = process_line(line);
    line_.clear();
    if (!o.ok()) return o;
    bytes = nl + 1;
  }
  return Outcome::success();
}

Outcome SseParser::process_line(std::string_view line) {
  if (line.empty()) {  // end of event
    if (!has_data_) return Outcome::success();
    has_data_ = false;
    std::string data = std::move(data_);
    data_.clear();
    return on_event_(data);
  }
  if (line.front() == ':') return Outcome::success();  // comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return Outcome::success();
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  if (data_.size() > kMaxEventBytes) return Outcome::failure(HEARTH_ERR_PROTOCOL, "server-sent event too long");
  return Outcome::success();
}

Outcome SseParser::finish() {
  if (!line_.empty()) {
    std::string last = std::move(line_);
    line_.clear();
    if (!last.empty() && last.back() == '\r') last.pop_back();
    if (Outcome o = process_line(last); !o.ok()) return o;
  }
  return process_line("");
}

}  // namespace hearth::client
