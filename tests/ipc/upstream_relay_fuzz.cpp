// libFuzzer entry point for the upstream SSE relay (ipc/upstream_relay.h; HEARTH_FUZZ,
// scripts/fuzz builds and runs it): the bytes an upstream engine sends, which hearthd reads
// but does not control. Input: byte 0 says how many chunk lengths follow (0..15), then those
// lengths (1..256 bytes each, used in turn); the rest is the upstream's body, fed in chunks
// of those lengths (all at once when there are none). Checked for every input:
//  - the output does not depend on where the body was cut: fed whole or in chunks, the same
//    bytes come out, and done() and broken() agree;
//  - the output is whole events: it ends with a blank line, and read back by the EventSource
//    rules (a reader written here, apart from the relay's framer) it has one event for each
//    whole event of the input, each with data exactly when the input's has data; [DONE] and data that is
//    not a JSON object come out as they went in; an object comes out as an object;
//  - relay_whole keeps a body that is not a JSON object as it is, and an object stays one.
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./upstream_relay_fuzz writes a few inputs into DIR and exits.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_seeds.h"
#include "ipc/upstream_relay.h"
#include "sse_events.h"

namespace {

using hearth::ipc::SseRelay;
using json = nlohmann::ordered_json;

void check(bool ok) {
  if (!ok) std::abort();
}

// One event of a stream as a plain reader sees it: its data, or nullopt when it has none.
using Event = std::optional<std::string>;

std::vector<Event> read_events(std::string_view text) {
  std::vector<Event> out;
  for (hearth::test::SseEvent& e : hearth::test::read_sse_events(text)) out.push_back(std::move(e.data));
  return out;
}

bool is_object(const std::string& data) {
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  return j.is_object();
}

// What the relay made of one input event: its data kept as it was, or still an object.
void check_event(const Event& in, const Event& out) {
  check(in.has_value() == out.has_value());
  if (!in) return;
  if (*in == "[DONE]" || !is_object(*in)) {
    check(*out == *in);
  } else {
    check(is_object(*out));
  }
}

struct Fed {
  std::string out;
  bool done;
  std::string broken;
};

Fed feed_all(std::string_view body, const std::vector<size_t>& cuts) {
  // One clock reading for every call: the timings the relay adds are then the same however
  // the body is cut.
  const SseRelay::Clock::time_point t0{};
  const auto now = t0 + std::chrono::milliseconds(5);
  SseRelay relay("front/model", "up", t0);
  Fed f;
  size_t at = 0;
  for (size_t i = 0; at < body.size(); ++i) {
    const size_t n = cuts.empty() ? body.size() : cuts[i % cuts.size()];
    const std::string piece = relay.feed(body.substr(at, n), now);
    check(piece.empty() || (piece.size() >= 2 && piece.compare(piece.size() - 2, 2, "\n\n") == 0));
    f.out += piece;
    at += n;
  }
  f.done = relay.done();
  f.broken = relay.broken();
  return f;
}

void whole(std::string_view body) {
  const std::string out = hearth::ipc::relay_whole(std::string(body), "front/model", "up", 1.0, 2.0);
  if (!is_object(std::string(body))) {
    check(out == body);
  } else {
    check(is_object(out));
  }
}

void write_seeds(const std::filesystem::path& dir) {
  auto put = [&](const std::string& file, const std::string& cuts, const std::string& body) {
    std::ofstream(dir / file, std::ios::binary) << static_cast<char>(cuts.size()) << cuts << body;
  };
  const std::string chunk =
      R"(data: {"id":"c","model":"gemma3:270m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]})";
  const std::string last =
      R"(data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":3,"completion_tokens":2},"timings":{"ttft_ms":4.5,"cached_tokens":{"memory":1}}})";
  const std::string stream = chunk + "\n\n" + chunk + "\n\n" + last + "\n\ndata: [DONE]\n\n";
  put("stream", "", stream);
  put("stream-cut", std::string("\x01\x07\x1f", 3), stream);
  put("crlf", "\x05", chunk + "\r\n\r\n: comment\r\n\r\ndata: [DONE]\r\n\r\n");
  put("multiline", "\x03", "data: {\"a\":\ndata: 1}\n\ndata: not json\ndata: two\n\nevent: x\nid: 4\n\n");
  put("error", "", "data: {\"error\":{\"message\":\"boom\",\"code\":500}}\n\n");
  put("tools", "\x09",
      R"(data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{\"x\""}}]}}]})"
      "\n\n");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t n_cuts = data[0] % 16;
  if (size < 1 + n_cuts) return 0;
  std::vector<size_t> cuts;
  for (size_t i = 0; i < n_cuts; ++i) cuts.push_back(size_t{data[1 + i]} + 1);
  const std::string_view body(reinterpret_cast<const char*>(data + 1 + n_cuts), size - 1 - n_cuts);

  const Fed at_once = feed_all(body, {});
  const Fed in_chunks = feed_all(body, cuts);
  check(at_once.out == in_chunks.out);
  check(at_once.done == in_chunks.done && at_once.broken == in_chunks.broken);

  const std::vector<Event> in = read_events(body);
  const std::vector<Event> out = read_events(at_once.out);
  check(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) check_event(in[i], out[i]);
  whole(body);
  return 0;
}
