// The prompt cache's routes over a real socket (GET/DELETE /api/cache, POST /api/cache/warm),
// the cache fields of generation responses and the hearth_cache_* metrics; and the pure
// parts (chat prefix rendering, query strings).
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "http_client.h"
#include "ipc/api/hearth_cache.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::ipc;
using namespace hearth::test;
using json = nlohmann::json;

// About 40 words: a few blocks of 16 tokens on the synthetic tokenizer.
const char* kSystem =
    "You are a careful assistant for a small workshop. Answer in plain words, name the tool "
    "that fits, say what could go wrong and how to avoid it, and never guess a measurement you "
    "were not given. Keep every answer short.";

json call_json(const TestServer& s, const std::string& method, const std::string& target, const std::string& body,
               int want_status) {
  auto r = http_call(s.socket_path(), method, target, body);
  REQUIRE(r);
  INFO(method << " " << target << " " << body << " -> " << r->body);
  REQUIRE(r->status == want_status);
  REQUIRE(r->header("content-type") == "application/json");
  return json::parse(r->body);
}

void require_error(const json& j, const std::string& code) {
  REQUIRE(j.at("error").at("message").is_string());
  REQUIRE(j["error"].at("type").is_string());
  if (!code.empty()) REQUIRE(j["error"].at("code") == code);
}

std::vector<int32_t> tokenize(const TestServer& s, const std::string& text, bool add_special, bool parse_special) {
  json req{{"content", text}, {"add_special", add_special}, {"parse_special", parse_special}};
  return call_json(s, "POST", "/api/tokenize", req.dump(), 200).at("tokens").get<std::vector<int32_t>>();
}

void require_stats_shape(const json& j, const std::string& model) {
  REQUIRE(j.at("model") == model);
  REQUIRE(j.at("fingerprint").is_string());
  REQUIRE(j.at("prefilled_tokens").is_number_unsigned());
  const json& m = j.at("memory");
  for (const char* k : {"blocks", "tokens", "bytes", "capacity_bytes", "lookups", "hits", "hit_tokens", "evictions"}) {
    INFO(k);
    REQUIRE(m.at(k).is_number_integer());
  }
  REQUIRE(m.at("hit_rate").is_number());
  const json& d = j.at("disk");
  REQUIRE(d.at("enabled").is_boolean());
  REQUIRE(d.at("dir").is_string());
  for (const char* k : {"lookups", "hit_tokens", "entries", "bytes", "budget_bytes", "model_entries", "model_bytes",
                        "hits", "misses", "restored_bytes", "written_chunks", "written_bytes", "evictions",
                        "checksum_failures", "dropped_writes", "write_errors", "queue_depth"}) {
    INFO(k);
    REQUIRE(d.at(k).is_number_integer());
  }
  REQUIRE(d.at("hit_rate").is_number());
  REQUIRE(d.at("writing").is_boolean());
  REQUIRE((d.at("stopped_reason").is_null() || d["stopped_reason"].is_string()));
}

void require_warm_shape(const json& j, const std::string& model) {
  REQUIRE(j.at("object") == "cache.warm");
  REQUIRE(j.at("model") == model);
  REQUIRE(j.at("tokens").get<int>() > 0);
  REQUIRE(j.at("cached_tokens").at("memory").is_number_integer());
  REQUIRE(j["cached_tokens"].at("disk").is_number_integer());
  REQUIRE(j.at("prefilled_tokens").is_number_integer());
  REQUIRE(j.at("chunks_written").is_number_integer());
  REQUIRE(j.at("timings").at("cache_restore_ms").is_number());
  REQUIRE(j["timings"].at("cache_restore_bytes").is_number_integer());
  REQUIRE(j["timings"].at("prefill_ms").is_number());
}

int cached(const json& warm) {
  return warm["cached_tokens"]["memory"].get<int>() + warm["cached_tokens"]["disk"].get<int>();
}

}  // namespace

TEST_CASE("GET /api/cache reports both tiers with hit rates, other methods get 405 with Allow") {
  TestServer s;
  const json j = call_json(s, "GET", "/api/cache", "", 200);
  require_stats_shape(j, s.model().id);
  REQUIRE(j["memory"]["capacity_bytes"].get<uint64_t>() > 0);
  if (j["memory"]["lookups"] == 0) REQUIRE(j["memory"]["hit_rate"] == 0.0);
  // The KV's type and cost per token; on disk a little more (each chunk file's header and
  // token ids), or null without a disk tier.
  const json& kv = j.at("kv");
  CHECK(kv.at("type") == "f16");
  const double memory = kv.at("bytes_per_token").at("memory").get<double>();
  CHECK(memory > 0);
  const json& disk = kv["bytes_per_token"].at("disk");
  if (j["disk"]["enabled"].get<bool>())
    CHECK(disk.get<double>() > memory);
  else
    CHECK(disk.is_null());

  auto r = http_call(s.socket_path(), "PUT", "/api/cache", "{}");
  REQUIRE(r);
  REQUIRE(r->status == 405);
  REQUIRE(r->header("allow") == "GET, DELETE");
  r = http_call(s.socket_path(), "GET", "/api/cache/warm");
  REQUIRE(r);
  REQUIRE(r->status == 405);
  REQUIRE(r->header("allow") == "POST");
}

TEST_CASE("The cache routes answer 503 while the model loads") {
  TestServerOptions o;
  o.set_engine = false;
  TestServer s(o);
  require_error(call_json(s, "GET", "/api/cache", "", 503), "loading");
  require_error(call_json(s, "DELETE", "/api/cache", "", 503), "loading");
  require_error(call_json(s, "POST", "/api/cache/warm", R"({"prompt":"hi"})", 503), "loading");
}

TEST_CASE("DELETE /api/cache clears all models, or the loaded model by query or body, unknown models get 404") {
  TestServer s;
  const std::string id = s.model().id;
  json j = call_json(s, "DELETE", "/api/cache", "", 200);
  REQUIRE(j.at("cleared") == "all");
  require_stats_shape(j, id);
  REQUIRE(call_json(s, "DELETE", "/api/cache?model=" + id, "", 200).at("cleared") == "model");
  REQUIRE(call_json(s, "DELETE", "/api/cache?model=synthetic%2Dgemma3", "", 200).at("cleared") == "model");
  REQUIRE(call_json(s, "DELETE", "/api/cache", json{{"model", id}}.dump(), 200).at("cleared") == "model");
  REQUIRE(call_json(s, "DELETE", "/api/cache", R"({"model":null})", 200).at("cleared") == "all");
  REQUIRE(call_json(s, "DELETE", "/api/cache?other=1", "", 200).at("cleared") == "all");

  require_error(call_json(s, "DELETE", "/api/cache?model=nope", "", 404), "model_not_found");
  require_error(call_json(s, "DELETE", "/api/cache", R"({"model":"nope"})", 404), "model_not_found");
  require_error(call_json(s, "DELETE", "/api/cache", R"({"model":5})", 400), "invalid_type");
  require_error(call_json(s, "DELETE", "/api/cache", "{not json", 400), "invalid_json");
  require_error(call_json(s, "DELETE", "/api/cache?model=" + id, R"({"model":"other"})", 400), "");
}

TEST_CASE("Clearing while a request streams neither blocks other clients nor breaks the stream") {
  TestServer s;
  HttpConn streaming = HttpConn::unix_socket(s.socket_path());
  REQUIRE(streaming.send(http_request(
      "POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0,"stream":true})")));
  REQUIRE(call_json(s, "DELETE", "/api/cache", "", 200).at("cleared") == "all");
  REQUIRE(call_json(s, "GET", "/health", "", 200).at("status") == "ok");
  auto whole = streaming.read_reply();
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  REQUIRE(whole->body.find("data: [DONE]") != std::string::npos);
}

TEST_CASE("POST /api/cache/warm validates its body like the generation routes") {
  TestServer s;
  const auto bad = [&s](const std::string& body, int status, const std::string& code) {
    INFO(body);
    require_error(call_json(s, "POST", "/api/cache/warm", body, status), code);
  };
  bad("", 400, "invalid_json");
  bad("[1]", 400, "invalid_json");
  bad("{}", 400, "missing_required_parameter");
  bad(R"({"prompt":null,"messages":null})", 400, "missing_required_parameter");
  bad(R"({"prompt":"a","messages":[{"role":"system","content":"b"}]})", 400, "invalid_value");
  bad(R"({"prompt":5})", 400, "invalid_type");
  bad(R"({"messages":"hi"})", 400, "invalid_type");
  bad(R"({"messages":[]})", 400, "invalid_value");
  bad(R"({"messages":[{"role":"tool","content":"x"}]})", 400, "missing_required_parameter");  // answers no call
  bad(R"({"messages":[{"role":"system"}]})", 400, "missing_required_parameter");
  bad(R"({"messages":[{"role":"assistant","content":"first"}]})", 400, "invalid_value");  // Gemma: user first
  bad(R"({"prompt":"hi","model":"nope"})", 404, "model_not_found");
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += "word ";
  bad(json{{"prompt", long_prompt}}.dump(), 400, "context_length_exceeded");
}

TEST_CASE("Warming a prompt answers its token counts, and warming it again finds it cached") {
  TestServer s;
  const std::string id = s.model().id;
  const std::string prompt = std::string(kSystem) + " Question: which saw cuts plywood?";
  // Sampling and streaming fields mean nothing to a warm request and are ignored.
  const json req{{"prompt", prompt}, {"stream", true}, {"temperature", 0.5}, {"model", id}};
  const json first = call_json(s, "POST", "/api/cache/warm", req.dump(), 200);
  require_warm_shape(first, id);
  const int n = static_cast<int>(tokenize(s, prompt, true, false).size());
  REQUIRE(first["tokens"] == n);
  REQUIRE(cached(first) + first["prefilled_tokens"].get<int>() == n);

  const json second = call_json(s, "POST", "/api/cache/warm", req.dump(), 200);
  REQUIRE(second["tokens"] == n);
  // All whole blocks of the prompt (16 tokens each) come from the first warm.
  REQUIRE(cached(second) >= (n - 1) / 16 * 16);
  REQUIRE(cached(second) + second["prefilled_tokens"].get<int>() == n);
  const json stats = call_json(s, "GET", "/api/cache", "", 200);
  REQUIRE(stats["memory"]["hits"].get<int>() >= 1);
  REQUIRE(stats["memory"]["hit_rate"].get<double>() > 0);
}

TEST_CASE("Warming a system prompt as a chat prefix serves the chats that start with it") {
  TestServer s;
  const json messages = json::array({{{"role", "system"}, {"content", kSystem}}});
  const json warm = call_json(s, "POST", "/api/cache/warm", json{{"messages", messages}}.dump(), 200);
  require_warm_shape(warm, s.model().id);
  // Gemma folds the system message into the first user turn: the prefix stops where the
  // user's own words would begin.
  const std::vector<int32_t> expected =
      tokenize(s, std::string("<bos><start_of_turn>user\n") + kSystem + "\n\n", false, true);
  REQUIRE(warm["tokens"] == expected.size());

  json chat{{"messages", messages}, {"max_tokens", 2}, {"temperature", 0}};
  chat["messages"].push_back({{"role", "user"}, {"content", "Which saw cuts plywood?"}});
  const json answer = call_json(s, "POST", "/v1/chat/completions", chat.dump(), 200);
  const int n = static_cast<int>(expected.size());
  REQUIRE(answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() >= n / 16 * 16);
  const json& t = answer.at("timings");
  REQUIRE(t.at("cached_tokens").at("memory").get<int>() + t["cached_tokens"].at("disk").get<int>() ==
          answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
  REQUIRE(t.at("prefilled_tokens").get<int>() ==
          answer["usage"]["prompt_tokens"].get<int>() -
              answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());

  // A prefix that ends with the user's turn stops where the model's answer begins.
  json with_user = chat;
  with_user.erase("max_tokens");
  const json warm_user = call_json(s, "POST", "/api/cache/warm", with_user.dump(), 200);
  REQUIRE(warm_user["tokens"] == answer["usage"]["prompt_tokens"]);
}

TEST_CASE("Generation responses carry the cache split in timings, streamed and not") {
  TestServer s;
  const std::string body = R"({"prompt":"Once upon a time","max_tokens":3,"temperature":0})";
  for (int round = 0; round < 2; ++round) {
    const json j = call_json(s, "POST", "/v1/completions", body, 200);
    const json& t = j.at("timings");
    REQUIRE(t.at("cache_restore_ms").is_number());
    REQUIRE(t.at("cache_restore_bytes").get<int64_t>() >= 0);
    const int memory = t.at("cached_tokens").at("memory"), disk = t["cached_tokens"].at("disk");
    REQUIRE(memory + disk == j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
    REQUIRE(t.at("prefilled_tokens").get<int>() + memory + disk == j["usage"]["prompt_tokens"].get<int>());
  }
  json sreq = json::parse(body);
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  auto r = http_call(s.socket_path(), "POST", "/v1/completions", sreq.dump());
  REQUIRE(r);
  const std::vector<std::string> payloads = sse_payloads(r->body);
  REQUIRE(payloads.size() >= 2);
  const json usage = json::parse(payloads[payloads.size() - 2]);
  REQUIRE(usage.at("usage").at("prompt_tokens_details").at("cached_tokens").is_number_integer());
  REQUIRE(usage.at("timings").at("cached_tokens").at("memory").is_number_integer());
  REQUIRE(usage["timings"].at("prefilled_tokens").is_number_integer());
}

TEST_CASE("/metrics exposes the prompt cache's counters and gauges") {
  TestServer s;
  REQUIRE(call_json(s, "POST", "/api/cache/warm", R"({"prompt":"hello there"})", 200).at("tokens") > 0);
  auto r = http_call(s.socket_path(), "GET", "/metrics");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  std::map<std::string, double> values;
  std::istringstream in(r->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    values[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  for (const char* name : {"hearth_cache_lookups_total{tier=\"memory\"}",
                           "hearth_cache_lookups_total{tier=\"disk\"}",
                           "hearth_cache_hits_total{tier=\"memory\"}",
                           "hearth_cache_hits_total{tier=\"disk\"}",
                           "hearth_cache_misses_total{tier=\"disk\"}",
                           "hearth_cache_hit_tokens_total{tier=\"memory\"}",
                           "hearth_cache_hit_tokens_total{tier=\"disk\"}",
                           "hearth_cache_prefilled_tokens_total",
                           "hearth_cache_restored_bytes_total",
                           "hearth_cache_written_bytes_total",
                           "hearth_cache_written_chunks_total",
                           "hearth_cache_evictions_total{tier=\"memory\"}",
                           "hearth_cache_evictions_total{tier=\"disk\"}",
                           "hearth_cache_checksum_failures_total",
                           "hearth_cache_dropped_writes_total",
                           "hearth_cache_write_errors_total",
                           "hearth_cache_bytes{tier=\"memory\"}",
                           "hearth_cache_bytes{tier=\"disk\"}",
                           "hearth_cache_entries",
                           "hearth_cache_budget_bytes",
                           "hearth_cache_writing"}) {
    INFO(name);
    REQUIRE(values.count(name) == 1);
  }
  REQUIRE(values.at("hearth_cache_lookups_total{tier=\"memory\"}") >= 1);
  REQUIRE(values.at("hearth_cache_prefilled_tokens_total") >= 1);
  for (const char* family : {"hearth_cache_hits_total", "hearth_cache_bytes", "hearth_cache_writing"}) {
    INFO(family);
    REQUIRE(r->body.find(std::string("# TYPE ") + family + " ") != std::string::npos);
  }
}

// What a soak checks after the load: no block held by a sequence, every other one free,
// and the cached ones among the free ones until the cache is cleared.
TEST_CASE("/metrics splits the KV pool into used, free and cached blocks, and a clear frees the cached ones") {
  TestServer s;
  auto gauges = [&] {
    auto r = http_call(s.socket_path(), "GET", "/metrics");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    std::map<std::string, double> v;
    std::istringstream in(r->body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.rfind(' ');
      v[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
    }
    return v;
  };
  std::map<std::string, double> v = gauges();
  const double total = v.at("hearth_kv_blocks_total");
  REQUIRE(total > 0);
  REQUIRE(v.at("hearth_kv_blocks_used") == 0);
  REQUIRE(v.at("hearth_kv_blocks_free") == total);
  REQUIRE(v.at("hearth_kv_blocks_cached") == 0);

  const json done = call_json(s, "POST", "/v1/completions", json{{"prompt", kSystem}, {"max_tokens", 4}}.dump(), 200);
  REQUIRE(done.at("usage").at("prompt_tokens").get<int>() > 2 * 16);  // at least two full blocks
  v = gauges();
  REQUIRE(v.at("hearth_kv_blocks_used") == 0);
  REQUIRE(v.at("hearth_kv_blocks_free") == total);
  REQUIRE(v.at("hearth_kv_blocks_cached") >= 2);
  REQUIRE(v.at("hearth_kv_blocks_cached") <= v.at("hearth_kv_blocks_free"));

  // A request in flight holds its blocks: used while it runs, back to free after. It is
  // held running on the engine thread (its event callback waits from the 3rd event on until
  // it is cancelled), so /metrics is read while it surely runs: a stream over HTTP could
  // sample an end of text or finish between two polls of a busy machine (CI once waited
  // 10 minutes for a used block that had come and gone).
  {
    GenerationRequest r;
    for (int32_t i = 0; i < 40; ++i) r.prompt.push_back(3 + (i * 37) % 300);
    r.max_tokens = 200;
    r.sampling.temperature = 0;
    // Shared with the callback: the engine calls it once more for the Finished event,
    // possibly after this block has ended.
    struct Gate {
      std::mutex m;
      std::condition_variable cv;
      int n_events = 0;
      bool released = false;
    };
    auto gate = std::make_shared<Gate>();
    Submitted a = s.scheduler().submit(r, [gate] {
      std::unique_lock<std::mutex> lock(gate->m);
      if (++gate->n_events == 3) gate->cv.notify_all();
      gate->cv.wait(lock, [&] { return gate->released || gate->n_events < 3; });
    });
    REQUIRE(a.status == SubmitStatus::Accepted);
    {
      std::unique_lock<std::mutex> lock(gate->m);
      REQUIRE(gate->cv.wait_for(lock, kHangGuard, [&] { return gate->n_events >= 3; }));
    }
    CHECK(gauges().at("hearth_kv_blocks_used") > 0);
    CHECK(gauges().at("hearth_running_sequences") == 1);
    a.handle->cancel();
    {
      std::lock_guard<std::mutex> lock(gate->m);
      gate->released = true;
    }
    gate->cv.notify_all();
    REQUIRE(eventually([&] { return gauges().at("hearth_running_sequences") == 0; }));
  }
  v = gauges();
  REQUIRE(v.at("hearth_kv_blocks_used") == 0);
  REQUIRE(v.at("hearth_kv_blocks_free") == total);

  call_json(s, "DELETE", "/api/cache", "", 200);
  v = gauges();
  REQUIRE(v.at("hearth_kv_blocks_cached") == 0);
  REQUIRE(v.at("hearth_kv_blocks_free") == total);
}

TEST_CASE("A chat prefix is the template cut where the next turn's content begins") {
  const std::vector<ChatMessage> system_only = {{"system", "Be brief."}};
  auto gemma = chat_prefix_segments(ChatFamily::Gemma, system_only);
  REQUIRE(std::holds_alternative<std::vector<ChatSegment>>(gemma));
  REQUIRE(join_segments(std::get<0>(gemma)) == "<bos><start_of_turn>user\nBe brief.\n\n");
  REQUIRE_FALSE(std::get<0>(gemma).back().markup);  // the system text is never parsed for special tokens

  auto chatml = chat_prefix_segments(ChatFamily::ChatML, system_only);
  REQUIRE(join_segments(std::get<0>(chatml)) == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n");
  auto llama = chat_prefix_segments(ChatFamily::Llama3, system_only);
  REQUIRE(join_segments(std::get<0>(llama)) ==
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\n");

  // After a user turn, the prefix ends where the model's answer begins: the generation prompt.
  const std::vector<ChatMessage> turn = {{"system", "Be brief."}, {"user", "Hi"}};
  auto after_user = chat_prefix_segments(ChatFamily::Gemma, turn);
  Result<std::vector<ChatSegment>> full = render_chat(ChatFamily::Gemma, turn, true);
  REQUIRE(full.ok());
  REQUIRE(join_segments(std::get<0>(after_user)) == join_segments(*full));

  // Every chat that continues the messages starts with the prefix.
  std::vector<ChatMessage> longer = turn;
  longer.push_back({"assistant", "Hello."});
  longer.push_back({"user", "Bye"});
  auto prefix = chat_prefix_segments(ChatFamily::Gemma, {turn[0], turn[1], longer[2]});
  const std::string rendered = join_segments(*render_chat(ChatFamily::Gemma, longer, true));
  REQUIRE(rendered.rfind(join_segments(std::get<0>(prefix)), 0) == 0);

  auto broken = chat_prefix_segments(ChatFamily::Gemma, {{"assistant", "first"}});
  REQUIRE(std::holds_alternative<ApiError>(broken));
  REQUIRE(std::get<ApiError>(broken).param == "messages");
}

TEST_CASE("Query parameters are found and percent-decoded") {
  REQUIRE(query_param("/api/cache?model=a%2Fb+c", "model") == "a/b c");
  REQUIRE(query_param("/api/cache?x=1&model=m&model=n", "model") == "m");
  REQUIRE(query_param("/api/cache?model", "model") == "");
  REQUIRE(query_param("/api/cache?model=%zz%", "model") == "%zz%");
  REQUIRE_FALSE(query_param("/api/cache", "model"));
  REQUIRE_FALSE(query_param("/api/cache?models=1", "model"));
}
