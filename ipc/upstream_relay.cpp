#include "ipc/upstream_relay.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "ipc/errors.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
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

// data as SSE "data:" lines: one for each of its lines, so that data that came in several
// lines (and is not a JSON object to re-write) goes out as it came.
std::string data_lines(std::string_view data) {
  std::string out;
  for (;;) {
    const size_t nl = data.find('\n');
    out.append("data: ").append(data.substr(0, nl)).append("\n");
    if (nl == std::string_view::npos) return out;
    data.remove_prefix(nl + 1);
  }
}

}  // namespace

std::vector<SseFramer::Event> SseFramer::feed(std::string_view bytes) {
  std::vector<Event> out;
  for (const char c : bytes) {
    const bool lf_after_cr = skip_lf_ && c == '\n';
    skip_lf_ = c == '\r';
    if (lf_after_cr) continue;
    if (c == '\r' || c == '\n') {
      end_line(&out);
    } else if (!too_big_) {
      line_.push_back(c);
      too_big_ = ++event_bytes_ > max_event_bytes;
    }
  }
  return out;
}

void SseFramer::end_line(std::vector<Event>* out) {
  if (line_.empty()) {  // the end of an event
    if (has_line_) out->push_back(std::move(event_));
    event_ = Event{};
    has_line_ = false;
    event_bytes_ = 0;
    return;
  }
  has_line_ = true;
  if (line_.compare(0, 5, "data:") == 0) {
    std::string_view v = std::string_view(line_).substr(5);
    if (!v.empty() && v[0] == ' ') v.remove_prefix(1);
    if (event_.data) {
      event_.data->push_back('\n');
      event_.data->append(v);
    } else {
      event_.data = std::string(v);
    }
  } else {
    event_.fields.push_back(std::move(line_));
  }
  line_.clear();
}

SseRelay::SseRelay(std::string model_id, std::string upstream, Clock::time_point sent)
    : model_id_(std::move(model_id)), upstream_(std::move(upstream)), sent_(sent) {}

std::string SseRelay::feed(std::string_view bytes, Clock::time_point now) {
  std::string out;
  for (const SseFramer::Event& ev : framer_.feed(bytes)) out += event(ev, now);
  if (framer_.too_big() && broken_.empty())
    broken_ = "the upstream sent an event over " + std::to_string(SseFramer::max_event_bytes) + " bytes";
  return out;
}

// One event: its other fields (event:, id:) and comments kept; its data re-written when it is
// a JSON object (a chunk), else kept.
std::string SseRelay::event(const SseFramer::Event& ev, Clock::time_point now) {
  std::string fields;
  for (const std::string& f : ev.fields) fields.append(f).append("\n");
  if (!ev.data) return fields + "\n";
  const std::string& data = *ev.data;
  if (data == "[DONE]") {
    done_ = true;
    return fields + "data: [DONE]\n\n";
  }
  // Depth-limited: an upstream's [[[[... is neither parsed nor dumped (a recursive dump).
  json chunk;
  if (parse_json(data, &chunk)) return fields + data_lines(data) + "\n";
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
  return fields + "data: " + dump_json(chunk) + "\n\n";
}

std::string SseRelay::timings_json() const {
  json t{{"upstream", upstream_}};
  if (tokens_.empty()) return t.dump();
  const RequestTimings f = front_timings(sent_, tokens_);
  t["ttft_ms"] = f.ttft_ms;
  t["decode_ms"] = f.decode_ms;
  t["decode_tok_s"] = f.decode_tok_s;
  t["itl_ms"] = {{"mean", f.itl_mean_ms}, {"p50", f.itl_p50_ms}, {"p95", f.itl_p95_ms}, {"max", f.itl_max_ms}};
  t["content_chunks"] = tokens_.size();
  return t.dump();
}

RequestTimings front_timings(Clock::time_point sent, const std::vector<Clock::time_point>& pieces) {
  RequestTimings t;
  if (pieces.empty()) return t;
  std::vector<double> gaps;
  for (size_t i = 1; i < pieces.size(); ++i) gaps.push_back(ms_between(pieces[i - 1], pieces[i]));
  double sum = 0;
  for (double g : gaps) sum += g;
  t.ttft_ms = ms_between(sent, pieces.front());
  t.decode_ms = ms_between(pieces.front(), pieces.back());
  t.decode_tok_s = t.decode_ms > 0 ? static_cast<double>(gaps.size()) * 1000.0 / t.decode_ms : 0.0;
  t.itl_mean_ms = gaps.empty() ? 0.0 : sum / static_cast<double>(gaps.size());
  t.itl_p50_ms = percentile(gaps, 0.5);
  t.itl_p95_ms = percentile(gaps, 0.95);
  t.itl_max_ms = gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end());
  return t;
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
  json j;
  if (parse_json(body, &j)) return body;  // not a JSON object (or nested past the limit)
  if (j.contains("model")) j["model"] = model_id;
  json t{{"upstream", upstream}, {"ttft_ms", first_byte_ms}, {"total_ms", total_ms}};
  if (const auto own = j.find("timings"); own != j.end()) keep_upstream_timings(*own, &t);
  j["timings"] = std::move(t);
  return dump_json(j);
}

}  // namespace hearth::ipc
