// An upstream's answer read for Ollama's and Anthropic's routes (ipc/api/upstream_translate.h,
// ipc/api/upstream_surface_relay.h): what the reader makes of counts and durations it cannot
// trust, and how a stream that broke off ends. The fuzz target upstream_answer_fuzz checks the
// same properties over arbitrary bytes; these are the cases it found, kept.
#include <catch2/catch.hpp>
#include <climits>
#include <nlohmann/json.hpp>

#include "ipc/api/anthropic_response.h"
#include "ipc/api/ollama_response.h"
#include "ipc/api/upstream_surface_relay.h"
#include "ipc/api/upstream_translate.h"

using namespace hearth::ipc;
using json = nlohmann::ordered_json;
using Clock = OpenAiAnswerReader::Clock;

namespace {

// The Done event of a stream of these chunks.
ApiEvent done_after(const std::vector<json>& chunks) {
  OpenAiAnswerReader reader("up", Clock::time_point{});
  for (const json& c : chunks) reader.chunk(c, Clock::time_point{});
  std::vector<ApiEvent> end = reader.done(Clock::time_point{});
  REQUIRE(end.back().kind == ApiEvent::Kind::Done);
  return end.back();
}

// Ollama's streamed lines for an upstream's body, the connection broken after it or not.
std::vector<json> ollama_stream(const std::string& body, const std::string& broken) {
  std::string out;
  const StreamCall::Emit emit = [&out](std::string piece) { out += piece; };
  OllamaMeta meta;
  meta.model = "up/m";
  SurfaceRelay relay("up", ollama_writer(meta, true), emit, [] { return Clock::time_point{}; });
  relay.head(200);
  for (char c : body) relay.data(&c, 1);  // one byte at a time
  relay.finish(broken, false);
  std::vector<json> lines;
  for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(json::parse(out.substr(at, nl - at)));
  return lines;
}

}  // namespace

TEST_CASE("an upstream's token counts are clamped to 0..INT32_MAX, cached ones to the prompt", "[ipc][upstream]") {
  // Found by upstream_answer_fuzz: INT32_MIN - 1 overflowed (UBSan) computing prefilled tokens.
  const ApiEvent negative =
      done_after({json{{"usage", {{"prompt_tokens", INT32_MIN}, {"prompt_tokens_details", {{"cached_tokens", 1}}}}}}});
  CHECK(negative.usage.prompt_tokens == 0);
  CHECK(negative.usage.cached_tokens == 0);
  CHECK(negative.usage.prefilled_tokens == 0);

  const ApiEvent huge = done_after({json{{"usage",
                                          {{"prompt_tokens", 5000000000000LL},
                                           {"completion_tokens", 18446744073709551615ULL},
                                           {"prompt_tokens_details", {{"cached_tokens", 7000000000000LL}}}}}}});
  CHECK(huge.usage.prompt_tokens == INT32_MAX);
  CHECK(huge.usage.completion_tokens == INT32_MAX);
  CHECK(huge.usage.cached_tokens == INT32_MAX);
  CHECK(huge.usage.prefilled_tokens == 0);

  const ApiEvent lying =
      done_after({json{{"usage", {{"prompt_tokens", 10}, {"prompt_tokens_details", {{"cached_tokens", 50}}}}}}});
  CHECK(lying.usage.cached_tokens == 10);  // never more than the prompt
  CHECK(anthropic_usage(lying.usage)["input_tokens"] == 0);
}

TEST_CASE("an upstream's durations are clamped, so Ollama's nanoseconds are never negative", "[ipc][upstream]") {
  const ApiEvent d =
      done_after({json{{"timings", {{"prefill_ms", 1e300}, {"cache_restore_ms", -5.0}, {"queue_ms", -1e300}}}}});
  CHECK(d.timings.prefill_ms == 1e9);
  CHECK(d.timings.cache_restore_ms == 0.0);
  CHECK(d.timings.queue_ms == 0.0);
  const OllamaDurations ns = ollama_durations(d, std::chrono::nanoseconds(0), std::chrono::nanoseconds(0));
  CHECK(ns.prompt_eval_ns == 1000000000000000LL);
  CHECK(ns.eval_ns >= 0);
}

TEST_CASE("a streamed answer is done only when the upstream said so on an unbroken connection", "[ipc][upstream]") {
  const std::string text = R"(data: {"choices":[{"delta":{"content":"Hi"}}]})"
                           "\n\n";
  const std::string finish = R"(data: {"choices":[{"delta":{},"finish_reason":"stop"}]})"
                             "\n\n";
  // [DONE]: complete, whatever came after it.
  std::vector<json> lines = ollama_stream(text + finish + "data: [DONE]\n\n", "reset");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["message"]["content"] == "Hi");
  CHECK(lines[1]["done"] == true);
  // A finish_reason and the connection closed cleanly: complete.
  lines = ollama_stream(text + finish, "");
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["done"] == true);
  // A finish_reason, then the connection broke before [DONE]: an error, never done.
  lines = ollama_stream(text + finish, "reset");
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[1]["error"].get<std::string>(), Catch::Contains("'up' broke off the answer: reset"));
  // No finish at all: an error even on a clean close.
  lines = ollama_stream(text, "");
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].contains("error"));
  CHECK_FALSE(lines[1].contains("done"));
}

namespace {

// Anthropic's streamed events (name, data) for an upstream's body.
std::vector<std::pair<std::string, json>> anthropic_stream(const std::string& body) {
  std::string out;
  const StreamCall::Emit emit = [&out](std::string piece) { out += piece; };
  SurfaceRelay relay("up", anthropic_writer(new_anthropic_meta("up/m", 20), true), emit,
                     [] { return Clock::time_point{}; });
  relay.head(200);
  relay.data(body.data(), body.size());
  relay.finish("", false);
  std::vector<std::pair<std::string, json>> events;
  for (size_t at = 0, end; (end = out.find("\n\n", at)) != std::string::npos; at = end + 2) {
    const std::string ev = out.substr(at, end - at);
    const size_t nl = ev.find('\n');
    events.emplace_back(ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7)));
  }
  return events;
}

std::string sse(const json& chunk) {
  return "data: " + chunk.dump() + "\n\n";
}

}  // namespace

TEST_CASE("message_start counts the prompt when the upstream's first chunk does, else message_delta does",
          "[ipc][upstream]") {
  const json role{{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}}}}};
  const json text{{"choices", {{{"index", 0}, {"delta", {{"content", "Hi"}}}, {"finish_reason", "stop"}}}}};
  const json usage{{"choices", json::array()}, {"usage", {{"prompt_tokens", 9}, {"completion_tokens", 1}}}};
  json counted = role;
  counted["usage"] = {{"prompt_tokens", 9}, {"completion_tokens", 0}, {"total_tokens", 9}};

  auto events = anthropic_stream(sse(counted) + sse(text) + sse(usage) + "data: [DONE]\n\n");
  REQUIRE(events.size() == 7);
  CHECK(events[0].first == "message_start");
  CHECK(events[0].second["message"]["usage"]["input_tokens"] == 9);
  CHECK(events[5].second["usage"]["input_tokens"] == 9);

  // Usage only at the end (an upstream without continuous_usage_stats): message_start cannot
  // know it; message_delta carries it, as Anthropic's cumulative usage allows.
  events = anthropic_stream(sse(role) + sse(text) + sse(usage) + "data: [DONE]\n\n");
  REQUIRE(events.size() == 7);
  CHECK(events[0].second["message"]["usage"]["input_tokens"] == 0);
  CHECK(events[5].first == "message_delta");
  CHECK(events[5].second["usage"]["input_tokens"] == 9);
}

TEST_CASE("an upstream's logprobs, chat's and completions', go with the text they came with", "[ipc][upstream]") {
  OpenAiAnswerReader reader("up", Clock::time_point{});
  // Chat's shape: exact bytes win over the token's text; an entry without a logprob is dropped.
  const json lp = json::parse(R"({"content":[
      {"token":"?","logprob":-0.5,"bytes":[226,130],"top_logprobs":[{"token":"a","logprob":-0.5},{"token":"b","logprob":-2}]},
      {"token":"x","logprob":"high"},
      {"token":"c","logprob":-1e300,"bytes":[300],"top_logprobs":[]}]})");
  // First a chunk with a call's piece and no text: its logprobs wait for the next text.
  json call = json::parse(R"({"choices":[{"index":0,"delta":{"tool_calls":[
      {"index":0,"id":"c1","function":{"name":"f"}}]}}]})");
  call["choices"][0]["logprobs"] = lp;
  std::vector<ApiEvent> evs = reader.chunk(call, Clock::time_point{});
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].kind == ApiEvent::Kind::CallBegin);
  json text{{"choices", {{{"index", 0}, {"delta", {{"content", "ok"}}}, {"logprobs", nullptr}}}}};
  evs = reader.chunk(text, Clock::time_point{});
  REQUIRE(evs.size() == 2);  // the call ended, the text
  REQUIRE(evs[1].logprobs.size() == 2);
  CHECK(evs[1].logprobs[0].bytes == "\xe2\x82");
  CHECK(evs[1].logprobs[0].logprob == -0.5f);
  REQUIRE(evs[1].logprobs[0].top.size() == 2);
  CHECK(evs[1].logprobs[0].top[1].bytes == "b");
  CHECK(evs[1].logprobs[0].top[1].logprob == -2.0f);
  CHECK(evs[1].logprobs[1].bytes == "c");  // a byte over 255: the token's text
  CHECK(evs[1].logprobs[1].logprob == -3.0e38f);

  // Completions' shape: parallel arrays, alternatives a map, sorted best first here.
  OpenAiAnswerReader legacy("up", Clock::time_point{});
  const json whole = json::parse(R"({"choices":[{"index":0,"text":"ab","finish_reason":"length","logprobs":{
      "tokens":["a","b"],"token_logprobs":[-0.1,-0.2],"top_logprobs":[{"z":-3,"a":-0.1},null]}}]})");
  evs = legacy.whole(whole, Clock::time_point{}, Clock::time_point{});
  REQUIRE(evs.size() == 2);
  REQUIRE(evs[0].logprobs.size() == 2);
  REQUIRE(evs[0].logprobs[0].top.size() == 2);
  CHECK(evs[0].logprobs[0].top[0].bytes == "a");
  CHECK(evs[0].logprobs[0].top[1].bytes == "z");
  CHECK(evs[0].logprobs[1].top.empty());

  // Logprobs with no text after them at all still reach the writer, on an empty Text.
  OpenAiAnswerReader calls_only("up", Clock::time_point{});
  calls_only.chunk(call, Clock::time_point{});
  evs = calls_only.done(Clock::time_point{});
  REQUIRE(evs.size() == 3);  // CallEnd, the Text with the logprobs, Done
  CHECK(evs[1].kind == ApiEvent::Kind::Text);
  CHECK(evs[1].text.empty());
  CHECK(evs[1].logprobs.size() == 2);
}
