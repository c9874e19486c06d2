#include "ipc/upstream_relay.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ipc/errors.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxEventBytes = 1 << 20;

double ms_between(SseRelay::Clock::time_point a, SseRelay::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool non_empty_string(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// Whether a chunk carries generated content (a token's text, reasoning or a call's piece),
// and whether it finishes the answer.
void read_chunk(const json& chunk, bool* content, bool* finishes) {
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array()) {
    for (const json& c : *choices) {
      if (!c.is_object()) continue;
      if (non_empty_string(c, "text")) *content = true;
      if (const auto d = c.find("delta"); d != c.end() && d->is_object()) {
        if (non_empty_string(*d, "content") || non_empty_string(*d, "reasoning_content") ||
            (d->contains("tool_calls") && !(*d)["tool_calls"].is_null()))
          *content = true;
      }
      if (const auto f = c.find("finish_reason"); f != c.end() && !f->is_null()) *finishes = true;
    }
  }
  if (const auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) *finishes = true;
}

// An upstream hearthd's own timings go under "upstream_timings"; where its prompt's tokens
// came from (its cache) is the answer's, so those fields are copied up as hearth's own.
void keep_upstream_timings(const json& own, json* t) {
  (*t)["upstream_timings"] = own;
  if (!own.is_object()) return;
  for (const char* key : {"cached_tokens", "prefilled_tokens"})
    if (const auto it = own.find(key); it != own.end()) (*t)[key] = *it;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

SseRelay::SseRelay(std::string model_id, std::string upstream, Clock::time_point sent)
    : model_id_(std::move(model_id)), upstream_(std::move(upstream)), sent_(sent) {}

std::string SseRelay::feed(std::string_view bytes, Clock::time_point now) {
  pending_.append(bytes);
  std::string out;
  for (;;) {
    size_t end = pending_.find("\n\n");
    size_t sep = 2;
    if (const size_t crlf = pending_.find("\r\n\r\n"); crlf < end) {
      end = crlf;
      sep = 4;
    }
    if (end == std::string::npos) break;
    out += event(std::string_view(pending_).substr(0, end), now);
    pending_.erase(0, end + sep);
  }
  if (pending_.size() > kMaxEventBytes && broken_.empty())
    broken_ = "the upstream sent an event over " + std::to_string(kMaxEventBytes) + " bytes";
  return out;
}

// One event: its data lines joined; comments and other fields pass as they came.
std::string SseRelay::event(std::string_view text, Clock::time_point now) {
  std::string data;
  bool has_data = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.substr(0, 5) == "data:") {
      std::string_view v = line.substr(5);
      if (!v.empty() && v[0] == ' ') v.remove_prefix(1);
      if (has_data) data += '\n';
      data.append(v);
      has_data = true;
    }
    start = nl + 1;
  }
  if (!has_data) return std::string(text) + "\n\n";
  if (data == "[DONE]") {
    done_ = true;
    return "data: [DONE]\n\n";
  }
  json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) return "data: " + data + "\n\n";
  if (chunk.contains("error")) done_ = true;
  bool content = false, finishes = false;
  read_chunk(chunk, &content, &finishes);
  if (content) tokens_.push_back(now);
  if (chunk.contains("model")) chunk["model"] = model_id_;
  if (finishes) {
    json t = json::parse(timings_json());
    if (const auto own = chunk.find("timings"); own != chunk.end()) keep_upstream_timings(*own, &t);
    chunk["timings"] = std::move(t);
  }
  return "data: " + chunk.dump() + "\n\n";
}

std::string SseRelay::timings_json() const {
  json t{{"upstream", upstream_}};
  if (tokens_.empty()) return t.dump();
  std::vector<double> gaps;
  for (size_t i = 1; i < tokens_.size(); ++i) gaps.push_back(ms_between(tokens_[i - 1], tokens_[i]));
  const double decode_ms = ms_between(tokens_.front(), tokens_.back());
  double mean = 0;
  for (double g : gaps) mean += g;
  t["ttft_ms"] = ms_between(sent_, tokens_.front());
  t["decode_ms"] = decode_ms;
  t["decode_tok_s"] = decode_ms > 0 ? static_cast<double>(gaps.size()) * 1000.0 / decode_ms : 0.0;
  t["itl_ms"] = {{"mean", gaps.empty() ? 0.0 : mean / static_cast<double>(gaps.size())},
                 {"p50", percentile(gaps, 0.5)},
                 {"p95", percentile(gaps, 0.95)},
                 {"max", gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end())}};
  t["content_chunks"] = tokens_.size();
  return t.dump();
}

std::string SseRelay::broken_event(const std::string& message) {
  ApiError e;
  e.status = 502;
  e.type = "upstream_error";
  e.code = "upstream_broken";
  e.message = message;
  return "data: " + error_body(e) + "\n\ndata: [DONE]\n\n";
}

std::string relay_whole(const std::string& body, const std::string& model_id, const std::string& upstream,
                        double first_byte_ms, double total_ms) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return body;
  if (j.contains("model")) j["model"] = model_id;
  json t{{"upstream", upstream}, {"ttft_ms", first_byte_ms}, {"total_ms", total_ms}};
  if (const auto own = j.find("timings"); own != j.end()) keep_upstream_timings(*own, &t);
  j["timings"] = std::move(t);
  return j.dump();
}

}  // namespace hearth::ipc
