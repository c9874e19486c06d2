// Ollama's routes over a real socket and a real scheduler (the synthetic Gemma 3 model):
// /api/chat and /api/generate streamed as NDJSON and whole, the same greedy text either way,
// durations in nanoseconds, refusals in Ollama's error shape, and the TCP listener's gates
// answering Ollama's clients in it too.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::test;
using json = nlohmann::json;

const char* kChat = R"({"model":"synthetic-gemma3","messages":[{"role":"user","content":"Hello there"}],
                       "options":{"temperature":0,"num_predict":12}})";

// The NDJSON body's objects, each checked to end its own line.
std::vector<json> ndjson(const HttpReply& r) {
  REQUIRE(r.status == 200);
  REQUIRE(r.header("content-type") == "application/x-ndjson");
  REQUIRE(r.header("transfer-encoding") == "chunked");
  REQUIRE(!r.body.empty());
  REQUIRE(r.body.back() == '\n');
  std::vector<json> out;
  for (size_t at = 0; at < r.body.size();) {
    const size_t nl = r.body.find('\n', at);
    out.push_back(json::parse(r.body.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

void require_final(const json& j) {
  REQUIRE(j.at("done") == true);
  const std::string reason = j.at("done_reason");
  REQUIRE((reason == "stop" || reason == "length"));
  for (const char* k : {"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
                        "eval_duration"}) {
    INFO(k);
    REQUIRE(j.at(k).is_number_integer());
    REQUIRE(j[k].get<int64_t>() >= 0);
  }
  REQUIRE(j["prompt_eval_count"].get<int>() > 0);
  REQUIRE(j["eval_count"].get<int>() > 0);
  REQUIRE(j["eval_count"].get<int>() <= 12);
  // Nanoseconds: at least the engine's own milliseconds, a million times over.
  REQUIRE(j["total_duration"].get<int64_t>() >= j["prompt_eval_duration"].get<int64_t>());
  REQUIRE(j["total_duration"].get<double>() >= j.at("timings").at("ttft_ms").get<double>() * 1e6 * 0.99);
  REQUIRE(j["load_duration"] == 0);  // the model was loaded
}

}  // namespace

TEST_CASE("A streamed /api/chat is NDJSON whose pieces make the whole answer's greedy text") {
  TestServer s;
  json req = json::parse(kChat);
  req["stream"] = false;
  auto whole = http_call(s.socket_path(), "POST", "/api/chat", req.dump());
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  REQUIRE(whole->header("content-type") == "application/json");
  const json w = json::parse(whole->body);
  require_final(w);
  REQUIRE(w.at("model") == "synthetic-gemma3");
  REQUIRE(w.at("message").at("role") == "assistant");

  auto streamed = http_call(s.socket_path(), "POST", "/api/chat", kChat);  // stream: the default
  REQUIRE(streamed);
  const std::vector<json> lines = ndjson(*streamed);
  REQUIRE(lines.size() >= 2);
  std::string text;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    REQUIRE(lines[i].at("done") == false);
    REQUIRE(lines[i].at("model") == "synthetic-gemma3");
    REQUIRE(lines[i].at("created_at").get<std::string>().back() == 'Z');
    text += lines[i].at("message").at("content").get<std::string>();
  }
  require_final(lines.back());
  REQUIRE(lines.back()["message"]["content"] == "");
  REQUIRE(text == w["message"]["content"].get<std::string>());
  REQUIRE(lines.back()["eval_count"] == w["eval_count"]);
  REQUIRE(lines.back()["done_reason"] == w["done_reason"]);
}

TEST_CASE("/api/generate answers a prompt with the template, and a raw prompt as written") {
  TestServer s;
  auto r = http_call(
      s.socket_path(), "POST", "/api/generate",
      R"({"prompt":"Hello","system":"Be brief.","stream":false,"options":{"temperature":0,"num_predict":6}})");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  const json j = json::parse(r->body);
  REQUIRE(j.at("response").is_string());
  REQUIRE(j.at("model") == "synthetic-gemma3");  // no model named: the default, by its id
  REQUIRE(j.at("prompt_eval_count").get<int>() > 0);
  // Raw: the prompt's own tokens (BOS, special-token text as the tokenizer parses it), no template.
  const std::string prompt = "<start_of_turn>user\nHello<end_of_turn>\n";
  auto tokens = http_call(s.socket_path(), "POST", "/api/tokenize",
                          json{{"content", prompt}, {"add_special", true}, {"parse_special", true}}.dump());
  REQUIRE(tokens);
  auto raw = http_call(s.socket_path(), "POST", "/api/generate",
                       json{{"model", "synthetic-gemma3"},
                            {"prompt", prompt},
                            {"raw", true},
                            {"stream", false},
                            {"options", {{"num_predict", 6}}}}
                           .dump());
  REQUIRE(raw);
  REQUIRE(raw->status == 200);
  REQUIRE(json::parse(raw->body).at("prompt_eval_count") == json::parse(tokens->body).at("tokens").size());
}

TEST_CASE("think and tools are refused as Ollama refuses a model without the capability") {
  TestServer s;
  for (const char* extra : {R"({"think":true})", R"({"tools":[{"type":"function","function":{"name":"f"}}]})"}) {
    INFO(extra);
    json req = json::parse(kChat);
    req.update(json::parse(extra));
    auto r = http_call(s.socket_path(), "POST", "/api/chat", req.dump());
    REQUIRE(r);
    REQUIRE(r->status == 400);
    const json j = json::parse(r->body);
    REQUIRE(j.size() == 1);
    REQUIRE(j.at("error").get<std::string>().find("\"synthetic-gemma3\" does not support") == 0);
  }
  json off = json::parse(kChat);
  off["think"] = false;
  off["stream"] = false;
  auto ok = http_call(s.socket_path(), "POST", "/api/chat", off.dump());
  REQUIRE(ok);
  REQUIRE(ok->status == 200);
}

TEST_CASE("GET / and HEAD / say Ollama is running, as its clients probe") {
  TestServer s;
  auto get = http_call(s.socket_path(), "GET", "/");
  REQUIRE(get);
  REQUIRE(get->status == 200);
  REQUIRE(get->body == "Ollama is running");
  HttpConn c = HttpConn::unix_socket(s.socket_path());
  REQUIRE(c.send(http_request("HEAD", "/")));
  auto head = c.read_head();
  REQUIRE(head);
  REQUIRE(head->status == 200);
  REQUIRE(head->header("content-length") == "17");
}

TEST_CASE("On the TCP listener the Host and browser gates answer Ollama's routes in Ollama's shape") {
  TestServer s;
  uint16_t port = 0;
  REQUIRE(s.server().adopt_tcp_fd(loopback_listener(&port), false).ok());
  auto ask = [port](const std::string& raw) {
    HttpConn c = HttpConn::tcp(port);
    REQUIRE(c.send(raw));
    std::optional<HttpReply> r = c.read_reply();
    REQUIRE(r);
    return *r;
  };
  const HttpReply host = ask(http_request("GET", "/api/tags", "", "", "evil.com"));
  REQUIRE(host.status == 403);
  REQUIRE(json::parse(host.body).at("error").is_string());
  // curl -d sends application/x-www-form-urlencoded: a browser could too, without a preflight.
  const HttpReply form =
      ask("POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:11434\r\nContent-Type: application/x-www-form-urlencoded\r\n"
          "Content-Length: 2\r\n\r\n{}");
  REQUIRE(form.status == 415);
  REQUIRE(json::parse(form.body).at("error").get<std::string>().find("application/json") != std::string::npos);
  const HttpReply origin = ask(http_request("GET", "/api/tags", "", "Origin: http://evil.com\r\n", "localhost"));
  REQUIRE(origin.status == 403);
  REQUIRE(json::parse(origin.body).at("error").is_string());
  // The OpenAI routes keep OpenAI's object.
  const HttpReply openai = ask(http_request("GET", "/v1/models", "", "", "evil.com"));
  REQUIRE(json::parse(openai.body).at("error").at("message").is_string());
  const HttpReply ok = ask(http_request("GET", "/api/tags", "", "", "127.0.0.1:11434"));
  REQUIRE(ok.status == 200);
}
