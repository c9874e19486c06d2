// An upstream's answer re-framed for hearth's clients (ipc/upstream_relay.h): whole events
// passed on as they arrive, the model renamed, hearth's timings (measured at the front) on
// the finishing chunk, and an error event for a stream that broke off.
#include "ipc/upstream_relay.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace hearth::ipc;
using json = nlohmann::json;
using Clock = SseRelay::Clock;

namespace {

std::string chunk(const std::string& content, const char* finish = nullptr) {
  json c{{"id", "x"},
         {"model", "gemma3:270m"},
         {"choices", json::array({{{"index", 0}, {"delta", {{"content", content}}}, {"finish_reason", nullptr}}})}};
  if (finish) c["choices"][0]["finish_reason"] = finish;
  return "data: " + c.dump() + "\n\n";
}

json payload(const std::string& event) {
  REQUIRE(event.rfind("data: ", 0) == 0);
  return json::parse(event.substr(6));
}

}  // namespace

TEST_CASE("the relay passes whole events on as they come, split anywhere", "[ipc][upstream]") {
  const Clock::time_point t0 = Clock::now();
  SseRelay relay("up/gemma3:270m", "up", t0);
  const std::string a = chunk("Hel"), b = chunk("lo");
  // The first event cut in two: nothing goes out before its end.
  CHECK(relay.feed(a.substr(0, 10), t0 + std::chrono::milliseconds(20)).empty());
  const std::string first = relay.feed(a.substr(10) + b.substr(0, 5), t0 + std::chrono::milliseconds(25));
  CHECK(payload(first)["model"] == "up/gemma3:270m");
  CHECK(payload(first)["choices"][0]["delta"]["content"] == "Hel");
  CHECK(payload(relay.feed(b.substr(5), t0 + std::chrono::milliseconds(35)))["choices"][0]["delta"]["content"] == "lo");
  CHECK_FALSE(relay.done());
  CHECK(relay.feed(": keep-alive comment\n\n", t0 + std::chrono::milliseconds(36)) == ": keep-alive comment\n\n");
}

TEST_CASE("the finishing chunk carries timings measured at the front, the upstream's own kept apart",
          "[ipc][upstream]") {
  const Clock::time_point t0 = Clock::now();
  SseRelay relay("up/m", "gpu-box", t0);
  relay.feed(chunk("a"), t0 + std::chrono::milliseconds(100));
  relay.feed(chunk("b"), t0 + std::chrono::milliseconds(110));
  relay.feed(chunk("c"), t0 + std::chrono::milliseconds(130));
  json last = payload(chunk("", "stop"));
  last["timings"] = {{"ttft_ms", 5.0}, {"cached_tokens", {{"memory", 7}, {"disk", 0}}}};
  const json out = payload(relay.feed("data: " + last.dump() + "\n\n", t0 + std::chrono::milliseconds(131)));
  const json& t = out["timings"];
  CHECK(t["upstream"] == "gpu-box");
  CHECK(t["ttft_ms"].get<double>() == Approx(100.0));
  CHECK(t["decode_ms"].get<double>() == Approx(30.0));
  CHECK(t["decode_tok_s"].get<double>() == Approx(2 * 1000.0 / 30.0));
  CHECK(t["itl_ms"]["max"].get<double>() == Approx(20.0));
  CHECK(t["itl_ms"]["p50"].get<double>() == Approx(20.0));
  CHECK(t["content_chunks"] == 3);
  CHECK(t["upstream_timings"]["ttft_ms"] == 5.0);
  CHECK(t["cached_tokens"]["memory"] == 7);
  CHECK(relay.feed("data: [DONE]\n\n", t0) == "data: [DONE]\n\n");
  CHECK(relay.done());
}

TEST_CASE("a stream that breaks off ends with an error event, never a finished-looking answer", "[ipc][upstream]") {
  const std::string end = SseRelay::broken_event("the upstream 'up' broke off the answer");
  const json e = payload(end.substr(0, end.find("\n\n")));
  CHECK(e["error"]["code"] == "upstream_broken");
  CHECK_THAT(e["error"]["message"].get<std::string>(), Catch::Contains("'up'"));
  CHECK(end.substr(end.size() - 14) == "data: [DONE]\n\n");

  SseRelay relay("m", "up", Clock::now());
  relay.feed("data: " + std::string((1 << 20) + 10, 'x'), Clock::now());
  CHECK_THAT(relay.broken(), Catch::Contains("over"));
  // An upstream's own error event ends the stream too.
  SseRelay errs("m", "up", Clock::now());
  errs.feed("data: {\"error\": {\"message\": \"boom\"}}\n\n", Clock::now());
  CHECK(errs.done());
}

TEST_CASE("a whole answer gets hearth's model name and timings, other bodies pass as they are", "[ipc][upstream]") {
  const json out =
      json::parse(relay_whole(R"({"model":"m","choices":[],"timings":{"ttft_ms":3}})", "up/m", "up", 12.5, 40.0));
  CHECK(out["model"] == "up/m");
  CHECK(out["timings"]["upstream"] == "up");
  CHECK(out["timings"]["ttft_ms"] == 12.5);
  CHECK(out["timings"]["total_ms"] == 40.0);
  CHECK(out["timings"]["upstream_timings"]["ttft_ms"] == 3);
  CHECK(relay_whole("not json", "up/m", "up", 1, 2) == "not json");
}

TEST_CASE("events are framed by the EventSource rules: CRLF, LF or CR, cut anywhere", "[ipc][upstream]") {
  const std::string stream = "data: a\r\rid: 7\rdata: b\r\ndata: c\n\n: comment\r\n\r\ndata: [DONE]\r";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseFramer f;
    std::vector<SseFramer::Event> got = f.feed(stream.substr(0, cut));
    for (SseFramer::Event& e : f.feed(stream.substr(cut))) got.push_back(std::move(e));
    REQUIRE(got.size() == 3);  // the last event has no empty line yet
    CHECK(got[0].data == "a");
    CHECK(got[1].fields == std::vector<std::string>{"id: 7"});
    CHECK(got[1].data == "b\nc");
    CHECK(got[2].fields == std::vector<std::string>{": comment"});
    CHECK_FALSE(got[2].data.has_value());
  }
}

TEST_CASE("data that is not a JSON object goes on as it came, every line of it", "[ipc][upstream]") {
  SseRelay relay("m", "up", Clock::now());
  CHECK(relay.feed("event: note\ndata: not json\ndata: two\n\n", Clock::now()) ==
        "event: note\ndata: not json\ndata: two\n\n");
  // Nested past the JSON depth limit: passed as is, never parsed nor dumped.
  const std::string deep = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  CHECK(relay.feed("data: " + deep + "\n\n", Clock::now()) == "data: " + deep + "\n\n");
  CHECK(relay_whole(deep, "m", "up", 1, 2) == deep);
}
