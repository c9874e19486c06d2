#include "malformed_cases.h"

#include <utility>

#include "http_client.h"

namespace hearth::test {

using json = nlohmann::json;

namespace {

std::string post(const std::string& path, const std::string& body) {
  return http_request("POST", path, body);
}

// Every field hearth reads, with values of the wrong type or out of range (400).
std::vector<std::pair<std::string, std::vector<std::string>>> bad_field_values() {
  const std::vector<std::string> not_number = {R"("1")", "true", "[]", "{}", "[0.5]"};
  const std::vector<std::string> not_int = {R"("5")", "true", "[]", "{}", "1.5"};
  auto plus = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  return {
      {"temperature", plus(not_number, {"-0.1", "2.01", "1e300", "-1e300"})},
      {"top_p", plus(not_number, {"-0.1", "1.5", "1e300"})},
      {"min_p", plus(not_number, {"-0.01", "1.01"})},
      {"presence_penalty", plus(not_number, {"-2.5", "2.5", "1e308"})},
      {"frequency_penalty", plus(not_number, {"-3", "3"})},
      {"repetition_penalty", plus(not_number, {"0", "-1", "10.5", "1e100"})},
      {"max_tokens", plus(not_int, {"0", "-1", "-9223372036854775808", "2147483648", "1e30", "18446744073709551615"})},
      {"max_completion_tokens", plus(not_int, {"0", "-5", "99999999999"})},
      {"top_k", plus(not_int, {"-1", "2147483648", "1e30"})},
      {"seed", {R"("1")", "true", "[]", "{}", "1.5", "1e30"}},
      {"n", {"2", "0", "-1", R"("1")", "1.5", "100", "true", "1e30"}},
      {"stop", {"5", "true", "{}", "[1]", R"(["a",2])", R"(["a","b","c","d","e"])", "[[]]", "[null]"}},
      {"stream", {R"("yes")", "1", "0", "[]", "{}"}},
      {"stream_options", {R"("x")", "1", "[]", "true", R"({"include_usage":"yes"})", R"({"include_usage":1})"}},
      {"model", {"5", "[]", "{}", "true"}},
  };
}

}  // namespace

json chat_base() {
  return json::parse(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
}
json completion_base() {
  return json::parse(R"({"prompt":"hi","max_tokens":3})");
}

std::vector<MalformedCase> json_level_cases() {
  std::vector<MalformedCase> cases;
  for (const auto& [path, base] : {std::pair{kChatPath, chat_base()}, std::pair{kCompletionsPath, completion_base()}}) {
    for (const auto& [field, values] : bad_field_values()) {
      for (const std::string& v : values) {
        json body = base;
        body[field] = json::parse(v);
        cases.push_back({std::string(path) + " " + field + "=" + v, post(path, body.dump()), 400, field});
      }
    }
    for (const char* model : {R"("nope")", R"("")", R"("SYNTHETIC-GEMMA3")", R"("gpt-4o")"}) {
      json body = base;
      body["model"] = json::parse(model);
      cases.push_back({std::string(path) + " model=" + model, post(path, body.dump()), 404, ""});
    }
  }
  // messages (chat only).
  for (const char* m : {R"("hi")",
                        "[]",
                        "{}",
                        "5",
                        "[1]",
                        R"(["hi"])",
                        "[{}]",
                        R"([{"role":"user"}])",
                        R"([{"content":"x"}])",
                        R"([{"role":5,"content":"x"}])",
                        R"([{"role":"robot","content":"x"}])",
                        R"([{"role":"tool","content":"x"}])",
                        R"([{"role":"user","content":5}])",
                        R"([{"role":"user","content":null}])",
                        R"([{"role":"user","content":{}}])",
                        R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}])",
                        R"([{"role":"user","content":[{"type":"text"}]}])",
                        R"([{"role":"user","content":[{"type":"text","text":5}]}])",
                        R"([{"role":"user","content":[5]}])",
                        R"([{"role":"user","content":["x"]}])",
                        R"([{"role":"user","content":[{"text":"x"}]}])",
                        R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])",
                        R"([{"role":"assistant","content":"a"}])",
                        R"([{"role":"user","content":"a"},{"role":"system","content":"b"}])"}) {
    json body = chat_base();
    body["messages"] = json::parse(m);
    cases.push_back({std::string("messages=") + m, post(kChatPath, body.dump()), 400, "messages"});
  }
  {
    json body = chat_base();
    body.erase("messages");
    cases.push_back({"messages missing", post(kChatPath, body.dump()), 400, "messages"});
    body = chat_base();
    body["messages"] = nullptr;
    cases.push_back({"messages null", post(kChatPath, body.dump()), 400, "messages"});
  }
  // prompt (completions only).
  for (const char* p : {"5", "[]", "[1,2]", "{}", "true", R"(["a","b"])", "[[1]]", "null"}) {
    json body = completion_base();
    body["prompt"] = json::parse(p);
    cases.push_back({std::string("prompt=") + p, post(kCompletionsPath, body.dump()), 400, "prompt"});
  }
  {
    json body = completion_base();
    body.erase("prompt");
    cases.push_back({"prompt missing", post(kCompletionsPath, body.dump()), 400, "prompt"});
  }
  // Prompts longer than the context (512 tokens in the test server).
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "zq" + std::to_string(i % 10) + " ";
  {
    json body = completion_base();
    body["prompt"] = long_text + long_text;
    cases.push_back({"prompt too long", post(kCompletionsPath, body.dump()), 400, "prompt"});
    json chat = chat_base();
    chat["messages"][0]["content"] = long_text + long_text;
    cases.push_back({"chat prompt too long", post(kChatPath, chat.dump()), 400, "messages"});
  }
  return cases;
}

std::vector<MalformedCase> body_syntax_cases() {
  std::vector<MalformedCase> cases;
  std::string deep(5000, '[');
  deep += std::string(5000, ']');
  const std::vector<std::string> bad_json = {
      "",
      "{",
      "}",
      R"({"messages":)",
      "nul",
      "[1,2",
      "{'a':1}",
      R"({"a":1,})",
      R"({"a" 1})",
      "NaN",
      R"({"temperature":NaN})",
      R"({"temperature":Infinity})",
      R"({"max_tokens":1e999})",
      R"("just a string")",
      "[]",
      "5",
      "null",
      "true",
      R"({"a":"\x"})",
      R"({"a":"\ud800"})",
      R"({"a":1}{"b":2})",
      std::string("\0", 1),
      deep,
      R"({"prompt":"abc)",
  };
  const std::vector<std::string> bad_utf8 = {"\xff",    "\xc3\x28", "\xe2\x82", "\xed\xa0\x80", "\xf8\x88\x80\x80\x80",
                                             "\xc0\xaf"};
  for (const char* path : {kChatPath, kCompletionsPath, "/api/tokenize", "/api/detokenize"}) {
    for (const std::string& b : bad_json)
      cases.push_back({std::string(path) + " body " + b.substr(0, 20), post(path, b), 400, ""});
  }
  for (const std::string& u : bad_utf8) {
    cases.push_back(
        {"utf8 in content", post(kChatPath, R"({"messages":[{"role":"user","content":"a)" + u + R"("}]})"), 400, ""});
    cases.push_back({"utf8 in prompt", post(kCompletionsPath, R"({"prompt":")" + u + R"("})"), 400, ""});
    cases.push_back({"utf8 in tokenize", post("/api/tokenize", R"({"content":")" + u + R"("})"), 400, ""});
    cases.push_back({"utf8 in a key", post(kCompletionsPath, R"({"prompt":"a",")" + u + R"(":1})"), 400, ""});
  }
  // tokenize / detokenize fields.
  for (const char* b : {R"({"content":5})", R"({"content":null})", "{}", R"({"content":"x","add_special":"yes"})",
                        R"({"content":"x","parse_special":1})", R"({"content":["x"]})"}) {
    cases.push_back({std::string("tokenize ") + b, post("/api/tokenize", b), 400, ""});
  }
  for (const char* b : {R"({"tokens":"1"})", R"({"tokens":[1.5]})", R"({"tokens":["1"]})", R"({"tokens":[-1]})",
                        R"({"tokens":[320]})", R"({"tokens":[true]})", R"({"tokens":null})", "{}",
                        R"({"tokens":[[1]]})", R"({"tokens":[1e40]})", R"({"tokens":[18446744073709551615]})"}) {
    cases.push_back({std::string("detokenize ") + b, post("/api/detokenize", b), 400, "tokens"});
  }
  return cases;
}

std::vector<MalformedCase> http_level_cases(size_t body_limit) {
  std::vector<MalformedCase> cases;
  for (const auto& [method, target] :
       std::vector<std::pair<std::string, std::string>>{{"GET", "/"},
                                                        {"GET", "/v1"},
                                                        {"GET", "/v1/chat"},
                                                        {"POST", "/v1/chat/completions/x"},
                                                        {"GET", "/api"},
                                                        {"POST", "/api/tokenize/"},
                                                        {"GET", "/healthz"},
                                                        {"GET", "/v2/models"},
                                                        {"DELETE", "/v1/foo"},
                                                        {"GET", "/metrics/x"},
                                                        {"GET", "/../etc/passwd"},
                                                        {"GET", "//v1/models"},
                                                        {"POST", "/api/cache/clear"},
                                                        {"GET", "/V1/MODELS"}}) {
    cases.push_back({"unknown route " + method + " " + target,
                     http_request(method, target, method == "POST" ? "{}" : ""), 404, ""});
  }
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{{"GET", kChatPath},
                                                                                       {"PUT", kChatPath},
                                                                                       {"DELETE", kCompletionsPath},
                                                                                       {"GET", kCompletionsPath},
                                                                                       {"POST", "/v1/models"},
                                                                                       {"POST", "/health"},
                                                                                       {"DELETE", "/metrics"},
                                                                                       {"GET", "/api/tokenize"},
                                                                                       {"GET", "/api/detokenize"},
                                                                                       {"PATCH", "/health"},
                                                                                       {"OPTIONS", kChatPath}}) {
    cases.push_back({"wrong method " + method + " " + target,
                     http_request(method, target, method == "GET" || method == "DELETE" ? "" : "{}"), 405, ""});
  }
  const std::string big(body_limit + 1, 'x');
  cases.push_back({"body one byte over the limit", post(kChatPath, big), 413, ""});
  cases.push_back({"body far over the limit", post(kCompletionsPath, std::string(body_limit * 6, 'x')), 413, ""});
  cases.push_back({"tokenize body over the limit", post("/api/tokenize", big), 413, ""});
  cases.push_back({"announced length over the limit",
                   "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999\r\n\r\n{}",
                   413, ""});
  {
    std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 8; ++i) chunked += "1000\r\n" + std::string(0x1000, 'y') + "\r\n";
    chunked += "0\r\n\r\n";
    cases.push_back({"chunked body over the limit", chunked, 413, ""});
  }
  cases.push_back({"garbage request line", "GARBAGE\r\n\r\n", 400, ""});
  cases.push_back({"bad protocol", "GET /health HTTPS/1.1\r\nHost: localhost\r\n\r\n", 400, ""});
  cases.push_back({"bad content length",
                   "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n", 400, ""});
  cases.push_back(
      {"two content lengths",
       "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400,
       ""});
  cases.push_back({"bad chunk size",
                   "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
                   ""});
  cases.push_back(
      {"header line without colon", "GET /health HTTP/1.1\r\nHost: localhost\r\nNoColonHere\r\n\r\n", 400, ""});
  cases.push_back({"space in header name", "GET /health HTTP/1.1\r\nHo st: localhost\r\n\r\n", 400, ""});
  cases.push_back({"headers over the limit",
                   "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n", 431,
                   ""});
  return cases;
}

}  // namespace hearth::test
