// The wire format over a real socket: OpenAI's response and stream-chunk shapes on both
// generation routes, tokenize/detokenize, /v1/models, /health, /metrics, keep-alive.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "http_client.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;

const char* kChat = R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],
                       "max_tokens":12,"temperature":0})";

json parse(const std::string& s) {
  return json::parse(s);
}

void require_usage(const json& u) {
  REQUIRE(u.at("prompt_tokens").get<int>() > 0);
  REQUIRE(u.at("completion_tokens").get<int>() >= 0);
  REQUIRE(u.at("total_tokens").get<int>() == u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  REQUIRE(u.at("prompt_tokens_details").at("cached_tokens").is_number_integer());
}

void require_timings(const json& t) {
  for (const char* k : {"ttft_ms", "prefill_ms", "decode_ms", "prefill_tok_s", "decode_tok_s", "queue_ms"}) {
    INFO(k);
    REQUIRE(t.at(k).is_number());
  }
  for (const char* k : {"mean", "p50", "p95"}) REQUIRE(t.at("itl_ms").at(k).is_number());
  REQUIRE(t.at("draft_tokens").is_number_integer());
  REQUIRE(t.at("accepted_tokens").get<int64_t>() <= t.at("draft_tokens").get<int64_t>());
}

// The SSE body's JSON chunks (without the final [DONE], which is checked).
std::vector<json> stream_chunks(const HttpReply& r) {
  REQUIRE(r.status == 200);
  REQUIRE(r.header("content-type") == "text/event-stream");
  REQUIRE(r.header("transfer-encoding") == "chunked");
  std::vector<std::string> payloads = sse_payloads(r.body);
  REQUIRE(payloads.size() >= 2);
  REQUIRE(payloads.back() == "[DONE]");
  REQUIRE(r.body.size() >= 14);
  REQUIRE(r.body.substr(r.body.size() - 14) == "data: [DONE]\n\n");
  std::vector<json> chunks;
  for (size_t i = 0; i + 1 < payloads.size(); ++i) chunks.push_back(parse(payloads[i]));
  return chunks;
}

bool is_name_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

// Consumes a metric (or label) name at s[*i]; false when there is none.
bool take_name(const std::string& s, size_t* i) {
  const size_t start = *i;
  while (*i < s.size() && is_name_char(s[*i], *i == start)) ++*i;
  return *i > start;
}

// "# HELP name text" or "# TYPE name type".
bool is_prometheus_comment(const std::string& line) {
  if (line.rfind("# HELP ", 0) != 0 && line.rfind("# TYPE ", 0) != 0) return false;
  size_t i = 7;
  return take_name(line, &i) && i + 1 < line.size() && line[i] == ' ';
}

// name{label="value",...} number
bool is_prometheus_sample(const std::string& line) {
  size_t i = 0;
  if (!take_name(line, &i)) return false;
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      if (!take_name(line, &i) || line.compare(i, 2, "=\"") != 0) return false;
      const size_t close = line.find('"', i + 2);
      if (close == std::string::npos) return false;
      i = close + 1;
      if (i < line.size() && line[i] == ',') {
        ++i;
        continue;
      }
      if (i >= line.size() || line[i] != '}') return false;
      ++i;
      break;
    }
  }
  if (i >= line.size() || line[i] != ' ') return false;
  const std::string value = line.substr(i + 1);
  if (value == "+Inf" || value == "-Inf" || value == "NaN") return true;
  char* end = nullptr;
  std::strtod(value.c_str(), &end);
  return !value.empty() && end == value.c_str() + value.size();
}

}  // namespace

TEST_CASE("A chat completion has OpenAI's shape, with usage and timings") {
  TestServer s;
  auto r = http_call(s.socket_path(), "POST", "/v1/chat/completions", kChat);
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(r->header("content-type") == "application/json");
  const json j = parse(r->body);
  REQUIRE(j.at("id").get<std::string>().rfind("chatcmpl-", 0) == 0);
  REQUIRE(j.at("object") == "chat.completion");
  REQUIRE(j.at("created").is_number_integer());
  REQUIRE(j.at("model") == s.model().id);
  REQUIRE(j.at("choices").size() == 1);
  const json& c = j["choices"][0];
  REQUIRE(c.at("index") == 0);
  REQUIRE(c.at("message").at("role") == "assistant");
  REQUIRE(c.at("message").at("content").is_string());
  REQUIRE(c.at("logprobs").is_null());
  const std::string reason = c.at("finish_reason");
  REQUIRE((reason == "stop" || reason == "length"));
  require_usage(j.at("usage"));
  REQUIRE(j["usage"]["completion_tokens"].get<int>() <= 12);
  if (reason == "length") REQUIRE(j["usage"]["completion_tokens"].get<int>() == 12);
  require_timings(j.at("timings"));
}

TEST_CASE("A streamed chat sends a role chunk, content chunks, a finish chunk, usage and [DONE]") {
  TestServer s;
  json req = parse(kChat);
  auto whole = http_call(s.socket_path(), "POST", "/v1/chat/completions", req.dump());
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = http_call(s.socket_path(), "POST", "/v1/chat/completions", req.dump());
  REQUIRE(r);
  const std::vector<json> chunks = stream_chunks(*r);
  REQUIRE(chunks.size() >= 3);
  const std::string id = chunks[0].at("id");
  REQUIRE(id.rfind("chatcmpl-", 0) == 0);
  for (const json& c : chunks) {
    REQUIRE(c.at("id") == id);
    REQUIRE(c.at("object") == "chat.completion.chunk");
    REQUIRE(c.at("model") == s.model().id);
    REQUIRE(c.at("created").is_number_integer());
  }
  REQUIRE(chunks[0]["choices"][0]["delta"] == json({{"role", "assistant"}, {"content", ""}}));
  REQUIRE(chunks[0]["choices"][0]["finish_reason"].is_null());
  REQUIRE(chunks[0].at("usage").is_null());
  std::string text;
  size_t i = 1;
  for (; i < chunks.size() && chunks[i]["choices"].size() == 1 && chunks[i]["choices"][0]["finish_reason"].is_null();
       ++i) {
    REQUIRE(chunks[i]["choices"][0]["delta"].size() == 1);
    text += chunks[i]["choices"][0]["delta"].at("content").get<std::string>();
  }
  REQUIRE(i + 2 == chunks.size());  // then the finish chunk and the usage chunk
  const json& fin = chunks[i];
  REQUIRE(fin["choices"][0]["delta"] == json::object());
  REQUIRE(fin["choices"][0]["finish_reason"] == parse(whole->body)["choices"][0]["finish_reason"]);
  require_timings(fin.at("timings"));
  const json& usage = chunks[i + 1];
  REQUIRE(usage.at("choices") == json::array());
  require_usage(usage.at("usage"));
  require_timings(usage.at("timings"));
  // Greedy: the stream says what the whole answer said.
  REQUIRE(text == parse(whole->body)["choices"][0]["message"]["content"].get<std::string>());
  REQUIRE(usage["usage"]["completion_tokens"] == parse(whole->body)["usage"]["completion_tokens"]);
}

TEST_CASE("continuous_usage_stats: the stream's role chunk counts the prompt before the answer") {
  TestServer s;
  json req = parse(kChat);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  auto r = http_call(s.socket_path(), "POST", "/v1/chat/completions", req.dump());
  REQUIRE(r);
  const std::vector<json> chunks = stream_chunks(*r);
  REQUIRE(chunks.size() >= 3);
  const json& last = chunks.back().at("usage");
  REQUIRE(last.at("prompt_tokens").get<int>() > 0);
  REQUIRE(chunks[0].at("usage") == json({{"prompt_tokens", last["prompt_tokens"]},
                                         {"completion_tokens", 0},
                                         {"total_tokens", last["prompt_tokens"]}}));
  REQUIRE(chunks[1].at("usage").is_null());  // counted again only at the end
  req["stream_options"] = {{"continuous_usage_stats", "yes"}};
  auto bad = http_call(s.socket_path(), "POST", "/v1/chat/completions", req.dump());
  REQUIRE(bad);
  REQUIRE(bad->status == 400);
  REQUIRE(parse(bad->body)["error"]["param"] == "stream_options.continuous_usage_stats");
}

TEST_CASE("A text completion has OpenAI's shape, streamed and not") {
  TestServer s;
  const std::string body =
      R"({"model":"synthetic-gemma3","prompt":"Once upon a time","max_tokens":10,"temperature":0})";
  auto r = http_call(s.socket_path(), "POST", "/v1/completions", body);
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json j = parse(r->body);
  REQUIRE(j.at("id").get<std::string>().rfind("cmpl-", 0) == 0);
  REQUIRE(j.at("object") == "text_completion");
  REQUIRE(j.at("model") == s.model().id);
  const json& c = j.at("choices").at(0);
  REQUIRE(c.at("text").is_string());
  REQUIRE(c.at("index") == 0);
  REQUIRE(c.at("logprobs").is_null());
  REQUIRE(c.at("finish_reason").is_string());
  require_usage(j.at("usage"));
  require_timings(j.at("timings"));

  json sreq = parse(body);
  sreq["stream"] = true;
  auto sr = http_call(s.socket_path(), "POST", "/v1/completions", sreq.dump());
  REQUIRE(sr);
  const std::vector<json> chunks = stream_chunks(*sr);
  std::string text;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    REQUIRE(chunks[i].at("object") == "text_completion");
    REQUIRE(chunks[i].count("usage") == 0);  // no include_usage: no usage key at all
    REQUIRE(chunks[i]["choices"][0]["finish_reason"].is_null());
    text += chunks[i]["choices"][0].at("text").get<std::string>();
  }
  const json& fin = chunks.back();
  REQUIRE(fin["choices"][0]["text"] == "");
  REQUIRE(fin["choices"][0]["finish_reason"] == c["finish_reason"]);
  require_timings(fin.at("timings"));
  REQUIRE(text == c["text"].get<std::string>());
}

TEST_CASE("Content given as text parts is rendered as the model's template renders parts") {
  // The synthetic model is a Gemma: Gemma 3's template trims each text part and writes them
  // with nothing between (ChatML templates get the parts joined with newlines instead; see
  // tests/tokenizer/chat_template_fixture_test.cpp).
  TestServer s;
  const std::string a = R"({"messages":[{"role":"user","content":"onetwo"}],"max_tokens":6,"temperature":0})";
  const std::string b =
      R"({"messages":[{"role":"user","content":[{"type":"text","text":" one\n"},{"type":"text","text":"two "}]}],
          "max_tokens":6,"temperature":0,"n":1,"stop":null,"logit_bias":{},"user":"x","unknown_field":[1,2]})";
  auto ra = http_call(s.socket_path(), "POST", "/v1/chat/completions", a);
  auto rb = http_call(s.socket_path(), "POST", "/v1/chat/completions", b);
  REQUIRE(ra);
  REQUIRE(rb);
  REQUIRE(ra->status == 200);
  REQUIRE(rb->status == 200);
  REQUIRE(parse(ra->body)["choices"] == parse(rb->body)["choices"]);
  REQUIRE(parse(ra->body)["usage"]["prompt_tokens"] == parse(rb->body)["usage"]["prompt_tokens"]);
}

TEST_CASE("Tools offered to a model whose template has no tool-call syntax get a 400 that says so") {
  TestServer s;
  const std::string tools =
      R"({"messages":[{"role":"user","content":"What is the weather in Paris?"}],"max_tokens":4,
          "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]})";
  for (bool stream : {false, true}) {
    std::string body = tools;
    if (stream) body.insert(1, R"("stream":true,)");
    auto r = http_call(s.socket_path(), "POST", "/v1/chat/completions", body);
    REQUIRE(r);
    REQUIRE(r->status == 400);
    const json e = parse(r->body).at("error");
    CHECK(e.at("type") == "invalid_request_error");
    CHECK(e.at("param") == "tools");
    CHECK(e.at("message").get<std::string>().find("has no tool-call syntax") != std::string::npos);
  }
  auto functions = http_call(s.socket_path(), "POST", "/v1/chat/completions",
                             R"({"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]})");
  REQUIRE(functions);
  REQUIRE(functions->status == 400);
  CHECK(parse(functions->body)["error"]["param"] == "functions");
  // No tools offered (null or an empty list): answered as usual.
  for (const char* none : {"null", "[]"}) {
    auto r =
        http_call(s.socket_path(), "POST", "/v1/chat/completions",
                  std::string(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":)") + none + "}");
    REQUIRE(r);
    CHECK(r->status == 200);
  }
}

TEST_CASE("Tokenize and detokenize round-trip, and detokenize refuses ids outside the vocabulary") {
  TestServer s;
  auto r = http_call(s.socket_path(), "POST", "/api/tokenize", R"({"content":"Hello world, once upon a time"})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json tokens = parse(r->body).at("tokens");
  REQUIRE(tokens.is_array());
  REQUIRE(!tokens.empty());
  auto d = http_call(s.socket_path(), "POST", "/api/detokenize", json{{"tokens", tokens}}.dump());
  REQUIRE(d);
  REQUIRE(d->status == 200);
  REQUIRE(parse(d->body).at("content") == "Hello world, once upon a time");

  auto with_bos = http_call(s.socket_path(), "POST", "/api/tokenize", R"({"content":"Hello","add_special":true})");
  REQUIRE(with_bos);
  const json wt = parse(with_bos->body).at("tokens");
  REQUIRE(
      wt.size() ==
      parse(http_call(s.socket_path(), "POST", "/api/tokenize", R"({"content":"Hello"})")->body).at("tokens").size() +
          1);
  REQUIRE(wt[0] == synthetic_engine().tokenizer->bos_id());

  for (const char* bad : {R"({"tokens":[-1]})", R"({"tokens":[320]})", R"({"tokens":[1,2,99999999999]})"}) {
    auto b = http_call(s.socket_path(), "POST", "/api/detokenize", bad);
    REQUIRE(b);
    REQUIRE(b->status == 400);
    REQUIRE(parse(b->body)["error"]["param"] == "tokens");
  }
}

TEST_CASE("/v1/models lists the loaded model and /v1/models/<id> describes it") {
  TestServer s;
  auto r = http_call(s.socket_path(), "GET", "/v1/models");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json j = parse(r->body);
  REQUIRE(j.at("object") == "list");
  REQUIRE(j.at("data").size() == 1);
  REQUIRE(j["data"][0].at("id") == s.model().id);
  REQUIRE(j["data"][0].at("object") == "model");
  REQUIRE(j["data"][0].at("created") == s.model().created);
  REQUIRE(j["data"][0].at("owned_by").is_string());
  auto one = http_call(s.socket_path(), "GET", "/v1/models/" + s.model().id);
  REQUIRE(one);
  REQUIRE(one->status == 200);
  REQUIRE(parse(one->body) == j["data"][0]);
  auto other = http_call(s.socket_path(), "GET", "/v1/models/gpt-4");
  REQUIRE(other);
  REQUIRE(other->status == 404);
  REQUIRE(parse(other->body)["error"]["code"] == "model_not_found");
}

TEST_CASE("/api/models lists the models folder's files, the loaded model and the catalog, also while loading") {
  TempDir models("hearth-api-models");
  const std::vector<uint8_t>& bytes = synthetic_engine().bytes;
  {
    std::ofstream good(models.path() / "tiny.gguf", std::ios::binary);
    good.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    std::ofstream bad(models.path() / "cut.gguf", std::ios::binary);
    bad.write(reinterpret_cast<const char*>(bytes.data()), 64);
  }
  for (const bool loaded : {false, true}) {
    INFO("engine set: " << loaded);
    TestServerOptions o;
    o.server.models_dir = models.path().string();
    o.set_engine = loaded;
    TestServer s(o);
    auto r = http_call(s.socket_path(), "GET", "/api/models");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const json j = parse(r->body);
    REQUIRE(j.at("dir") == models.path().string());
    const json& ms = j.at("models");
    // The folder's two files, sorted by id; with the engine set, the served model too (its
    // file lies outside the folder, and the synthetic one is not on disk at all).
    REQUIRE(ms.size() == (loaded ? 3u : 2u));
    REQUIRE(ms[0].at("id") == "cut");
    REQUIRE(ms[0].at("available") == false);
    REQUIRE(ms[0].at("error").get<std::string>().size() > 0);
    REQUIRE(ms[0].at("bytes") == 64);
    REQUIRE(ms[1].at("id") == "tiny");
    REQUIRE(ms[1].at("available") == true);
    REQUIRE(ms[1].at("loaded") == false);
    REQUIRE(ms[1].at("architecture") == "gemma3");
    REQUIRE(ms[1].at("bytes") == bytes.size());
    REQUIRE(ms[1].at("parameters").get<int64_t>() > 0);
    REQUIRE_FALSE(ms[1].contains("error"));
    if (loaded) {
      REQUIRE(ms[2].at("loaded") == true);
      REQUIRE(ms[2].at("file") == "synthetic-gemma3.gguf");
      REQUIRE(ms[2].at("available") == false);  // no such file
    }
    REQUIRE(j.at("catalog").size() >= 1);
    for (const json& c : j["catalog"]) {
      REQUIRE(c.at("name").is_string());
      REQUIRE(c.at("installed") == false);  // none of the catalog's files is in this folder
    }
    auto post = http_call(s.socket_path(), "POST", "/api/models", "{}");
    REQUIRE(post);
    REQUIRE(post->status == 405);
  }
}

TEST_CASE("/health says loading (503) until the engine is set, then ok (200)") {
  TestServerOptions o;
  o.set_engine = false;
  TestServer s(o);
  auto r = http_call(s.socket_path(), "GET", "/health");
  REQUIRE(r);
  REQUIRE(r->status == 503);
  REQUIRE(parse(r->body).at("status") == "loading");
  auto gen = http_call(s.socket_path(), "POST", "/v1/chat/completions", kChat);
  REQUIRE(gen);
  REQUIRE(gen->status == 503);
  REQUIRE(parse(gen->body)["error"]["code"] == "loading");
  auto metrics = http_call(s.socket_path(), "GET", "/metrics");
  REQUIRE(metrics);
  REQUIRE(metrics->status == 200);
  REQUIRE(metrics->body.find("hearth_engine_ready 0") != std::string::npos);
  s.set_engine();
  r = http_call(s.socket_path(), "GET", "/health");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(parse(r->body) == json{{"status", "ok"}});
}

TEST_CASE("/metrics is Prometheus text with requests by status, tokens, histograms and gauges") {
  TestServer s;
  REQUIRE(http_call(s.socket_path(), "POST", "/v1/completions", R"({"prompt":"hi","max_tokens":4})")->status == 200);
  REQUIRE(http_call(s.socket_path(), "GET", "/nope")->status == 404);
  REQUIRE(http_call(s.socket_path(), "POST", "/v1/completions", R"({"prompt":5})")->status == 400);
  HttpConn held = HttpConn::unix_socket(s.socket_path());  // one more open connection
  REQUIRE(held.send(http_request("GET", "/health")));
  REQUIRE(held.read_reply()->status == 200);
  auto r = http_call(s.socket_path(), "GET", "/metrics");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(r->header("content-type").rfind("text/plain; version=0.0.4", 0) == 0);

  std::map<std::string, double> values;
  std::map<std::string, std::vector<double>> buckets;  // histogram name -> bucket counts in order
  std::istringstream in(r->body);
  std::string line;
  int n_lines = 0;
  while (std::getline(in, line)) {
    ++n_lines;
    INFO(line);
    if (line.rfind("#", 0) == 0) {
      REQUIRE(is_prometheus_comment(line));
      continue;
    }
    REQUIRE(is_prometheus_sample(line));
    const size_t sp = line.rfind(' ');
    const double v = std::stod(line.substr(sp + 1));
    values[line.substr(0, sp)] = v;
    if (const size_t b = line.find("_bucket{"); b != std::string::npos) buckets[line.substr(0, b)].push_back(v);
  }
  REQUIRE(n_lines > 40);
  REQUIRE(values.at("hearth_requests_total{status=\"200\"}") >= 2);
  REQUIRE(values.at("hearth_requests_total{status=\"404\"}") == 1);
  REQUIRE(values.at("hearth_requests_total{status=\"400\"}") == 1);
  REQUIRE(values.at("hearth_prompt_tokens_total") > 0);
  REQUIRE(values.at("hearth_generated_tokens_total") > 0);
  REQUIRE(values.count("hearth_cached_tokens_total") == 1);
  REQUIRE(values.count("hearth_cancelled_total") == 1);
  REQUIRE(values.at("hearth_accepted_tokens_total") <= values.at("hearth_draft_tokens_total"));
  // By drafter: together the totals.
  REQUIRE(values.at("hearth_draft_tokens_by_drafter_total{drafter=\"ngram\"}") +
              values.at("hearth_draft_tokens_by_drafter_total{drafter=\"model\"}") ==
          values.at("hearth_draft_tokens_total"));
  REQUIRE(values.at("hearth_accepted_tokens_by_drafter_total{drafter=\"ngram\"}") +
              values.at("hearth_accepted_tokens_by_drafter_total{drafter=\"model\"}") ==
          values.at("hearth_accepted_tokens_total"));
  REQUIRE(values.at("hearth_queue_depth") == 0);
  REQUIRE(values.at("hearth_running_sequences") == 0);
  REQUIRE(values.count("hearth_kv_blocks_used") == 1);
  REQUIRE(values.at("hearth_kv_blocks_free") > 0);
  REQUIRE(values.at("hearth_open_connections") >= 2);
  REQUIRE(values.at("hearth_engine_ready") == 1);
#if defined(__GLIBC__)
  // The heap split that tells a leak from memory malloc keeps (bench/soak.py judges it);
  // the model's weights are mapped, not allocated, but the engine's buffers are. Under ASan
  // the allocations go to its own allocator, not to the glibc heap that mallinfo2 reads.
  REQUIRE(values.count("hearth_heap_free_bytes") == 1);
  if (!test::kSanitized) REQUIRE(values.at("hearth_heap_in_use_bytes") > 1 << 20);
#endif
  REQUIRE(buckets.size() == 3);
  for (const std::string name : {"hearth_ttft_seconds", "hearth_itl_seconds", "hearth_step_seconds"}) {
    const std::vector<double>& b = buckets.at(name);
    REQUIRE(b.size() == 15);  // 14 bounds and +Inf
    REQUIRE(std::is_sorted(b.begin(), b.end()));
    REQUIRE(values.at(name + "_count") == b.back());
    REQUIRE(values.at(name + "_bucket{le=\"+Inf\"}") == b.back());
    REQUIRE(values.count(name + "_bucket{le=\"0.001\"}") == 1);  // bounds in seconds
    REQUIRE(values.count(name + "_sum") == 1);
  }
  REQUIRE(values.at("hearth_ttft_seconds_count") >= 1);
  REQUIRE(values.at("hearth_step_seconds_count") >= 1);
}

TEST_CASE("One keep-alive connection serves answers, errors and streams in turn") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.connected());
  const std::string stream = R"({"prompt":"abc","max_tokens":5,"stream":true})";
  const std::vector<std::pair<std::string, int>> steps = {
      {http_request("GET", "/health"), 200},
      {http_request("POST", "/v1/completions", R"({"prompt":"abc","max_tokens":3})"), 200},
      {http_request("POST", "/v1/completions", R"({"prompt":"abc","max_tokens":-3})"), 400},
      {http_request("POST", "/v1/completions", stream), 200},
      {http_request("GET", "/v1/models"), 200},
      {http_request("GET", "/missing"), 404},
      {http_request("POST", "/v1/chat/completions", kChat), 200},
  };
  for (const auto& [req, status] : steps) {
    INFO(req);
    REQUIRE(c.send(req));
    auto r = c.read_reply();
    REQUIRE(r);
    REQUIRE(r->status == status);
    REQUIRE(r->header("connection") != "close");
  }
  // Two requests written at once (pipelined) are answered in order.
  REQUIRE(c.send(http_request("GET", "/health") + http_request("GET", "/nope")));
  REQUIRE(c.read_reply()->status == 200);
  REQUIRE(c.read_reply()->status == 404);
}

TEST_CASE("Expect: 100-continue gets an interim response and the body is then read") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  const std::string body = R"({"content":"abc"})";
  std::string head =
      "POST /api/tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nExpect: 100-continue\r\n\r\n";
  REQUIRE(c.send(head));
  auto interim = c.read_head();
  REQUIRE(interim);
  REQUIRE(interim->status == 100);
  REQUIRE(c.send(body));
  auto r = c.read_reply();
  REQUIRE(r);
  REQUIRE(r->status == 200);
}

TEST_CASE("An HTTP/1.0 client gets a streamed answer without chunked encoding, then a close") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  const std::string body = R"({"prompt":"abc","max_tokens":4,"stream":true})";
  REQUIRE(
      c.send("POST /v1/completions HTTP/1.0\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  auto r = c.read_reply();
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(r->header("transfer-encoding").empty());
  const std::vector<std::string> p = sse_payloads(r->body);
  REQUIRE(!p.empty());
  REQUIRE(p.back() == "[DONE]");
}

TEST_CASE("HEAD on a GET route answers the headers only, and the connection goes on") {
  TestServer s;
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.send(http_request("HEAD", "/health")));
  auto head = c.read_head();
  REQUIRE(head);
  REQUIRE(head->status == 200);
  REQUIRE(head->header("content-length") == "15");  // {"status":"ok"}
  REQUIRE(c.send(http_request("GET", "/v1/models")));
  auto r = c.read_reply();
  REQUIRE(r);
  REQUIRE(r->status == 200);
  REQUIRE(parse(r->body)["object"] == "list");
}

TEST_CASE("Concurrent streaming clients on two io threads all get whole, well-formed streams") {
  TestServerOptions o;
  o.server.io_threads = 2;
  o.scheduler.n_parallel = 3;
  TestServer s(o);
  constexpr int kClients = 6;
  std::vector<std::string> texts(kClients), errors(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const std::string body = R"({"messages":[{"role":"user","content":"Count to ten"}],"max_tokens":16,)"
                               R"("temperature":0,"stream":true})";
      HttpConn c = HttpConn::unix_socket(s.socket_path());
      if (!c.send(http_request("POST", "/v1/chat/completions", body))) {
        errors[i] = "send failed";
        return;
      }
      auto r = c.read_reply();
      if (!r || r->status != 200) {
        errors[i] = "no 200";
        return;
      }
      const std::vector<std::string> p = sse_payloads(r->body);
      if (p.empty() || p.back() != "[DONE]") {
        errors[i] = "no [DONE]";
        return;
      }
      for (size_t k = 1; k + 2 < p.size(); ++k)
        texts[i] += json::parse(p[k])["choices"][0]["delta"]["content"].get<std::string>();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i);
    REQUIRE(errors[i].empty());
    REQUIRE(texts[i] == texts[0]);  // greedy: the same answer whatever ran beside it
  }
  REQUIRE(s.server().open_connections() >= 0);
}
