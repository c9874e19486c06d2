// libFuzzer entry point for the reader of upstream answers on Ollama's and Anthropic's
// routes (ipc/api/upstream_surface_relay.h: SseFramer -> OpenAiAnswerReader ->
// the surface's ResponseWriter; HEARTH_FUZZ, scripts/fuzz builds and runs it): the bytes an
// upstream engine sends, which hearthd reads but does not control.
// Input: byte 0 picks the case — bits 0-1 the surface (Ollama chat, Ollama generate,
// Anthropic), bit 2 a streamed request, bit 3 the connection breaks after the body, bit 4 the
// client left, bit 5 the upstream answered 500 instead of 200, bit 6 Ollama's request asked
// for logprobs; byte 1 says how many chunk
// lengths follow (0..15), then those lengths (1..256 bytes each, used in turn); the rest is
// the upstream's body, fed in chunks of those lengths (all at once when there are none).
// Checked for every input:
//  - the output does not depend on where the body was cut (the clock held still; Ollama's
//    wall-clock fields set aside);
//  - streamed, every piece is whole lines of the surface's shape: NDJSON objects with "done"
//    (Ollama; its durations counts of ns, never negative; asked for logprobs, each text line's
//    "logprobs" entries a token, its bytes (0..255), a logprob <= 0 and at most 20
//    alternatives), or SSE events whose data is an object of the event's "type" (Anthropic;
//    message_start's input_tokens a count >= 0), its content blocks opened, filled and closed
//    in order;
//  - a stream ends with exactly one end, last — Ollama's "done": true line or error line,
//    Anthropic's message_stop or error event — unless the client left; it is a complete
//    answer only when the upstream said so: a [DONE] event, or a finish_reason on a
//    connection that did not break;
//  - a whole answer (or any answer that is not a 200 stream) emits nothing and is one JSON
//    object: the surface's message on 200, its error object otherwise.
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./upstream_answer_fuzz writes a few inputs into DIR and exits.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "fuzz_seeds.h"
#include "ipc/api/anthropic_response.h"
#include "ipc/api/ollama_response.h"
#include "ipc/api/upstream_surface_relay.h"
#include "sse_events.h"

namespace {

using namespace hearth::ipc;
using json = nlohmann::ordered_json;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Case {
  int surface;  // 0 Ollama chat, 1 Ollama generate, 2 Anthropic
  bool stream, broken, cancelled;
  int status;
  bool logprobs;  // Ollama: the request asked for them
  bool anthropic() const { return surface == 2; }
};

struct Answer {
  std::string emitted;
  HttpResponse response;
};

std::unique_ptr<ResponseWriter> writer_for(const Case& c) {
  if (c.anthropic()) {
    AnthropicMeta meta{"msg_fuzz", "up/model", 0, 100};
    return anthropic_writer(meta, c.stream);
  }
  OllamaMeta meta;
  meta.endpoint = c.surface == 0 ? OllamaEndpoint::Chat : OllamaEndpoint::Generate;
  meta.model = "up/model";
  meta.logprobs = c.logprobs;
  return ollama_writer(meta, c.stream);
}

Answer answer(const Case& c, std::string_view body, const std::vector<size_t>& cuts) {
  Answer a;
  const StreamCall::Emit emit = [&a](std::string piece) {
    check(!piece.empty());
    a.emitted += piece;
  };
  const SurfaceRelay::Clock::time_point t0{};
  SurfaceRelay relay("up", writer_for(c), emit, [t0] { return t0 + std::chrono::milliseconds(7); });
  relay.head(c.status);
  std::string broken = c.broken ? "the connection broke" : "";
  for (size_t at = 0, i = 0; at < body.size(); ++i) {
    const size_t n = std::min(body.size() - at, cuts.empty() ? body.size() : cuts[i % cuts.size()]);
    if (!relay.data(body.data() + at, n)) {
      broken = "stopped";
      break;
    }
    at += n;
  }
  a.response = relay.finish(broken, c.cancelled);
  return a;
}

// j's member k, null when j has none (a const json's operator[] may not look for a missing key).
json get(const json& j, const char* k) {
  return j.is_object() && j.contains(k) ? j.at(k) : json();
}

// A JSON object, or a discarded value.
json object_of(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json();
}

// One token of Ollama's logprobs (or one of its alternatives).
bool logprob_entry(const json& e) {
  if (!e.is_object() || !get(e, "token").is_string() || !get(e, "logprob").is_number()) return false;
  if (get(e, "logprob").get<double>() > 0 || !get(e, "bytes").is_array()) return false;
  for (const json& b : e.at("bytes"))
    if (!b.is_number_unsigned() || b.get<uint64_t>() > 255) return false;
  return true;
}

bool logprobs_shape(const json& lps) {
  if (!lps.is_array()) return false;
  for (const json& t : lps) {
    const json top = get(t, "top_logprobs");
    if (!logprob_entry(t) || !top.is_array() || top.size() > 20) return false;
    for (const json& a : top)
      if (!logprob_entry(a)) return false;
  }
  return true;
}

// Ollama's NDJSON: objects with "done" or an error line; wall-clock fields dropped.
std::vector<json> ollama_lines(const std::string& text) {
  check(text.empty() || text.back() == '\n');
  std::vector<json> out;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    json j = object_of(std::string_view(text).substr(at, nl - at));
    check(j.is_object() && (j.contains("error") ? get(j, "error").is_string() : get(j, "done").is_boolean()));
    if (j.contains("logprobs")) check(logprobs_shape(j.at("logprobs")));
    for (const char* k : {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"}) {
      const json d = get(j, k);  // nanoseconds: counts, set aside after this check
      check(d.is_null() || (d.is_number_integer() && d.get<int64_t>() >= 0));
      j.erase(k);
    }
    j.erase("created_at");
    out.push_back(std::move(j));
    at = nl + 1;
  }
  return out;
}

bool ollama_end(const json& j) {
  return j.contains("error") || get(j, "done") == true;
}

// Anthropic's events: an object of the event's type each, content blocks in order.
std::vector<json> anthropic_events(const std::string& text) {
  check(text.empty() || text.compare(text.size() - 2, 2, "\n\n") == 0);
  std::vector<json> out;
  int open = -1, next = 0;  // the open block's index; the next block's
  for (const hearth::test::SseEvent& e : hearth::test::read_sse_events(text)) {
    check(e.data.has_value());
    json j = object_of(*e.data);
    check(j.is_object() && get(j, "type") == e.type);
    if (e.type == "message_start") {
      const json n = get(get(get(j, "message"), "usage"), "input_tokens");
      check(n.is_number_integer() && n.get<int64_t>() >= 0);
    }
    if (e.type == "content_block_start") {
      check(open < 0 && get(j, "index") == next);
      open = next++;
    } else if (e.type == "content_block_delta" || e.type == "content_block_stop") {
      check(open >= 0 && get(j, "index") == open);
      if (e.type == "content_block_stop") open = -1;
    } else if (e.type == "message_delta" || e.type == "message_stop") {
      check(open < 0);
    }
    out.push_back(std::move(j));
  }
  return out;
}

bool anthropic_end(const json& j) {
  return get(j, "type") == "message_stop" || get(j, "type") == "error";
}

// What the upstream said of its end: a [DONE] event; a finish_reason somewhere.
bool said_done(std::string_view body) {
  for (const hearth::test::SseEvent& e : hearth::test::read_sse_events(body))
    if (e.data == "[DONE]") return true;
  return false;
}

void check_stream(const Case& c, std::string_view body, const Answer& a, const std::vector<json>& out) {
  check(a.response.status == 200 && a.response.body.empty());
  size_t ends = 0;
  for (const json& j : out) ends += c.anthropic() ? anthropic_end(j) : ollama_end(j);
  check(ends <= 1);
  if (ends == 0) {
    check(c.cancelled);
    return;
  }
  const json& last = out.back();
  check(c.anthropic() ? anthropic_end(last) : ollama_end(last));
  if (c.anthropic()) check(get(out.front(), "type") == "message_start");
  const bool complete = c.anthropic() ? get(last, "type") == "message_stop" : !last.contains("error");
  if (complete) check(said_done(body) || (!c.broken && body.find("finish_reason") != std::string_view::npos));
}

void check_whole(const Case& c, const Answer& a) {
  check(a.emitted.empty());
  const json j = object_of(a.response.body);
  check(j.is_object());
  if (a.response.status == 200) {
    check(c.anthropic() ? get(j, "type") == "message" : get(j, "done") == true);
  } else {
    check(a.response.status >= 400);
    check(c.anthropic() ? get(j, "type") == "error" && get(get(j, "error"), "message").is_string()
                        : get(j, "error").is_string());
  }
}

void write_seeds(const std::filesystem::path& dir) {
  auto put = [&](const std::string& file, char mode, const std::string& cuts, const std::string& body) {
    std::ofstream(dir / file, std::ios::binary) << mode << static_cast<char>(cuts.size()) << cuts << body;
  };
  const std::string text = R"(data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})";
  const std::string think = R"(data: {"choices":[{"delta":{"reasoning_content":"hm"}}]})";
  const std::string call0 =
      R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"x\""}}]}}]})";
  const std::string call1 =
      R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"name":"g"}}]}}]})";
  const std::string last =
      R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"}],)"
      R"("usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}},"timings":{"prefill_ms":2}})";
  const std::string counted =
      R"(data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":3}})";
  const std::string with_logprobs =
      R"(data: {"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,)"
      R"("bytes":[72,105],"top_logprobs":[{"token":"Hi","logprob":-0.5,"bytes":[72,105]}]}]}}]})";
  const std::string stream =
      think + "\n\n" + text + "\n\n" + call0 + "\n\n" + call1 + "\n\n" + last + "\n\ndata: [DONE]\n\n";
  for (char surface : {0, 1, 2}) {
    const std::string s(1, static_cast<char>('0' + surface));
    put("stream-" + s, static_cast<char>(surface | 4), "", stream);
    put("stream-cut-" + s, static_cast<char>(surface | 4), std::string("\x01\x07\x1f", 3), stream);
    put("broken-" + s, static_cast<char>(surface | 4 | 8), "\x05", text + "\n\n" + last + "\n\n");
    put("error-" + s, static_cast<char>(surface | 4), "",
        text + "\r\n\r\ndata: {\"error\":{\"message\":\"boom\"}}\r\n\r\n");
    put("whole-" + s, static_cast<char>(surface), "",
        R"({"choices":[{"message":{"content":"Hi","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}],"usage":{"completion_tokens":1}})");
    put("500-" + s, static_cast<char>(surface | 4 | 32), "", R"({"error":{"message":"overloaded"}})");
    put("logprobs-" + s, static_cast<char>(surface | 4 | 64), "\x09", counted + "\n\n" + with_logprobs + "\n\n" + last);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::set_log_level(hearth::LogLevel::Off);  // a broken stream's warning, once an input
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Case c{std::min(data[0] & 3, 2),        (data[0] & 4) != 0, (data[0] & 8) != 0, (data[0] & 16) != 0,
               (data[0] & 32) != 0 ? 500 : 200, (data[0] & 64) != 0};
  const size_t n_cuts = data[1] % 16;
  if (size < 2 + n_cuts) return 0;
  std::vector<size_t> cuts;
  for (size_t i = 0; i < n_cuts; ++i) cuts.push_back(size_t{data[2 + i]} + 1);
  const std::string_view body(reinterpret_cast<const char*>(data + 2 + n_cuts), size - 2 - n_cuts);

  const Answer at_once = answer(c, body, {});
  const Answer in_chunks = answer(c, body, cuts);
  check(at_once.response.status == in_chunks.response.status);
  if (!c.stream || c.status != 200) {
    check_whole(c, at_once);
    check_whole(c, in_chunks);
    return 0;
  }
  auto read = [&c](const std::string& text) { return c.anthropic() ? anthropic_events(text) : ollama_lines(text); };
  const std::vector<json> out = read(at_once.emitted);
  check(out == read(in_chunks.emitted));
  check_stream(c, body, at_once, out);
  return 0;
}
