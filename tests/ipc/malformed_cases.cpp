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
      {"stream_options",
       {R"("x")", "1", "[]", "true", R"({"include_usage":"yes"})", R"({"include_usage":1})",
        R"({"continuous_usage_stats":0})"}},
      {"model", {"5", "[]", "{}", "true"}},
  };
}

// Anthropic's fields with values of the wrong type, out of range, or asking for what hearth
// does not do (400). Each error message names the field.
std::vector<std::pair<std::string, std::vector<std::string>>> bad_anthropic_values() {
  return {
      {"max_tokens", {R"("5")", "true", "[]", "1.5", "0", "-1", "2147483648", "1e30"}},
      {"temperature", {R"("1")", "[]", "-0.1", "1.01", "2"}},
      {"top_p", {R"("1")", "{}", "-0.1", "1.5"}},
      {"top_k", {R"("5")", "1.5", "-1", "2147483648"}},
      {"stop_sequences",
       {R"("END")", "5", "{}", "[1]", "[null]", "[[]]",
        R"(["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"}},
      {"stream", {R"("yes")", "1", "[]"}},
      {"system",
       {"5", "true", "{}", "[5]", "[{}]", R"([{"type":"text"}])", R"([{"type":"text","text":5}])",
        R"([{"type":"image","source":{}}])"}},
      {"metadata", {"5", R"("u")", "[]", R"({"user_id":5})"}},
      {"thinking",
       {"true", R"("enabled")", "{}", R"({"type":5})", R"({"type":"enabled","budget_tokens":1024})",
        R"({"type":"adaptive"})", R"({"type":"sometimes"})"}},
      {"tools",
       {"5", "{}", "[5]", "[{}]", R"([{"name":"f"}])", R"([{"name":"f","input_schema":"{}"}])",
        R"([{"name":"","input_schema":{}}])", R"([{"name":"a b","input_schema":{}}])",
        R"([{"name":"f","input_schema":{},"description":5}])",
        R"([{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}])",
        R"([{"type":"web_search_20250305","name":"web_search"}])"}},
      {"tool_choice",
       {"5", R"("auto")", "{}", R"({"type":5})", R"({"type":"sometimes"})", R"({"type":"any"})", R"({"type":"tool"})",
        R"({"type":"auto","disable_parallel_tool_use":"yes"})"}},
      {"model", {"5", "[]", "{}", "true"}},
  };
}

// Anthropic's messages with a broken turn or block (400).
std::vector<std::string> bad_anthropic_messages() {
  return {
      R"("hi")",
      "[]",
      "{}",
      "5",
      "[1]",
      R"(["hi"])",
      "[{}]",
      R"([{"role":"user"}])",
      R"([{"role":"user","content":null}])",
      R"([{"content":"x"}])",
      R"([{"role":5,"content":"x"}])",
      R"([{"role":"system","content":"x"}])",
      R"([{"role":"tool","content":"x"}])",
      R"([{"role":"user","content":5}])",
      R"([{"role":"user","content":{}}])",
      R"([{"role":"user","content":[5]}])",
      R"([{"role":"user","content":["x"]}])",
      R"([{"role":"user","content":[{"text":"x"}]}])",
      R"([{"role":"user","content":[{"type":"text"}]}])",
      R"([{"role":"user","content":[{"type":"text","text":5}]}])",
      R"([{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}]}])",
      R"([{"role":"user","content":[{"type":"document","source":{}}]}])",
      R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}])",
      R"([{"role":"user","content":[{"type":"tool_result","content":"x"}]}])",
      R"([{"role":"user","content":"x"},{"role":"assistant","content":"The answer is"}])",
      R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]},{"role":"user","content":"y"}])",
      R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":5}]}])",
      R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}])",
      R"([{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{}}]}]}])"};
}

std::vector<MalformedCase> anthropic_json_cases() {
  std::vector<MalformedCase> cases;
  auto add = [&](const std::string& name, const char* path, const json& body, int status, const std::string& param) {
    cases.push_back({name, post(path, body.dump()), status, param, true});
  };
  for (const auto& [field, values] : bad_anthropic_values()) {
    for (const std::string& v : values) {
      json body = messages_base();
      body[field] = json::parse(v);
      add(std::string(kMessagesPath) + " " + field + "=" + v, kMessagesPath, body, 400, field);
    }
  }
  for (const std::string& m : bad_anthropic_messages()) {
    for (const char* path : {kMessagesPath, kCountTokensPath}) {
      json body = messages_base();
      body["messages"] = json::parse(m);
      add(std::string(path) + " messages=" + m, path, body, 400, "messages");
    }
  }
  json body = messages_base();
  body.erase("max_tokens");
  add("max_tokens missing", kMessagesPath, body, 400, "max_tokens");
  for (const char* path : {kMessagesPath, kCountTokensPath}) {
    body = messages_base();
    body.erase("messages");
    add(std::string(path) + " messages missing", path, body, 400, "messages");
    for (const char* model : {R"("nope")", R"("")", R"("claude-sonnet-4-5")", R"("SYNTHETIC-GEMMA3")"}) {
      body = messages_base();
      body["model"] = json::parse(model);
      add(std::string(path) + " model=" + model, path, body, 404, "");
    }
    body = messages_base();
    body["thinking"] = json::parse(R"({"type":"enabled","budget_tokens":2048})");
    add(std::string(path) + " thinking enabled", path, body, 400, "thinking");
  }
  return cases;
}

}  // namespace

json chat_base() {
  return json::parse(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
}
json completion_base() {
  return json::parse(R"({"prompt":"hi","max_tokens":3})");
}
json messages_base() {
  return json::parse(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
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
    json message = messages_base();
    message["messages"][0]["content"] = long_text + long_text;
    cases.push_back({"message prompt too long", post(kMessagesPath, message.dump()), 400, "", true});
  }
  for (MalformedCase& c : anthropic_json_cases()) cases.push_back(std::move(c));
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
  for (const char* path :
       {kChatPath, kCompletionsPath, "/api/tokenize", "/api/detokenize", kMessagesPath, kCountTokensPath}) {
    const bool anthropic = std::string_view(path).rfind(kMessagesPath, 0) == 0;
    for (const std::string& b : bad_json)
      cases.push_back({std::string(path) + " body " + b.substr(0, 20), post(path, b), 400, "", anthropic});
  }
  for (const std::string& u : bad_utf8) {
    cases.push_back(
        {"utf8 in content", post(kChatPath, R"({"messages":[{"role":"user","content":"a)" + u + R"("}]})"), 400, ""});
    cases.push_back({"utf8 in prompt", post(kCompletionsPath, R"({"prompt":")" + u + R"("})"), 400, ""});
    cases.push_back({"utf8 in tokenize", post("/api/tokenize", R"({"content":")" + u + R"("})"), 400, ""});
    cases.push_back({"utf8 in a key", post(kCompletionsPath, R"({"prompt":"a",")" + u + R"(":1})"), 400, ""});
    cases.push_back({"utf8 in a message",
                     post(kMessagesPath, R"({"max_tokens":3,"messages":[{"role":"user","content":"a)" + u + R"("}]})"),
                     400, "", true});
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
       std::vector<std::pair<std::string, std::string>>{{"GET", "/index.html"},
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
  for (const char* method : {"GET", "PUT", "DELETE", "PATCH"}) {
    for (const char* target : {kMessagesPath, kCountTokensPath}) {
      cases.push_back({std::string("wrong method ") + method + " " + target,
                       http_request(method, target, std::string(method) == "GET" ? "" : "{}"), 405, "", true});
    }
  }
  const std::string big(body_limit + 1, 'x');
  cases.push_back({"body one byte over the limit", post(kChatPath, big), 413, ""});
  cases.push_back({"body far over the limit", post(kCompletionsPath, std::string(body_limit * 6, 'x')), 413, ""});
  cases.push_back({"tokenize body over the limit", post("/api/tokenize", big), 413, ""});
  cases.push_back({"message body over the limit", post(kMessagesPath, big), 413, "", true});
  cases.push_back({"announced message length over the limit",
                   "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999999\r\n\r\n{}", 413, "",
                   true});
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

namespace {

// Ollama's top-level fields and options with values of the wrong type or out of range (400).
std::vector<std::pair<std::string, std::vector<std::string>>> ollama_bad_fields() {
  return {
      {"model", {"5", "[]", "{}", "true"}},
      {"stream", {R"("yes")", "1", "[]", "{}"}},
      {"keep_alive", {R"("soon")", "true", "[]", "{}", R"("5 minutes")", "1e300"}},
      {"format", {R"("yaml")", "5", "[]", "true"}},
      {"think", {R"("deep")", "1", "[]", "{}"}},
      {"logprobs", {R"("yes")", "1"}},
      {"top_logprobs", {"-1", "21", R"("3")", "1.5"}},
      {"truncate", {R"("x")", "0"}},
      {"shift", {"1", "[]"}},
      {"options", {R"("x")", "[]", "5", "true"}},
  };
}

std::vector<std::pair<std::string, std::vector<std::string>>> ollama_bad_options() {
  return {
      {"temperature", {R"("hot")", "-1", "101", "[]"}},
      {"top_p", {"-0.1", "1.5", R"("1")"}},
      {"min_p", {"2", "-1"}},
      {"top_k", {R"("5")", "1.5", "true"}},
      {"repeat_penalty", {"0", "-1", "11"}},
      {"repeat_last_n", {"-2", R"("x")"}},
      {"presence_penalty", {"3", "-2.5"}},
      {"frequency_penalty", {"-3"}},
      {"seed", {R"("1")", "1.5", "1e30"}},
      {"num_predict", {R"("5")", "1.5", "true"}},
      {"num_ctx", {R"("x")", "[]"}},
      {"stop",
       {"5", "[1]", R"(["a",2])", "{}",
        R"(["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"])"}},
  };
}

json ollama_chat_base() {
  return json::parse(R"({"model":"synthetic-gemma3","messages":[{"role":"user","content":"hi"}],"stream":false,
                         "options":{"num_predict":3}})");
}
json ollama_generate_base() {
  return json::parse(R"({"model":"synthetic-gemma3","prompt":"hi","stream":false,"options":{"num_predict":3}})");
}

MalformedCase ollama_case(std::string name, const std::string& method, const std::string& path, const std::string& body,
                          int status) {
  return {std::move(name), http_request(method, path, body), status, "", /*anthropic=*/false, /*ollama=*/true};
}

// /api/chat's messages and tools, and /api/generate's prompt fields.
void add_ollama_prompt_cases(std::vector<MalformedCase>* cases) {
  for (const char* m :
       {R"("hi")", "5", "{}", "[1]", R"(["hi"])", "[{}]", R"([{"content":"x"}])", R"([{"role":5,"content":"x"}])",
        R"([{"role":"robot","content":"x"}])", R"([{"role":"user","content":5}])", R"([{"role":"user","content":{}}])",
        R"([{"role":"user","content":"x","images":["aGk="]}])", R"([{"role":"user","content":"x","images":"aGk="}])",
        R"([{"role":"assistant","tool_calls":{}}])",
        R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}])",
        R"([{"role":"assistant","tool_calls":[{"function":{}}]}])", R"([{"role":"tool","content":"x"}])",
        R"([{"role":"user","content":"a"},{"role":"user","content":"b"}])",
        R"([{"role":"assistant","content":"a"}])"}) {
    json body = ollama_chat_base();
    body["messages"] = json::parse(m);
    cases->push_back(ollama_case(std::string("ollama messages=") + m, "POST", kOllamaChatPath, body.dump(), 400));
  }
  for (const char* t :
       {R"("x")", "{}", "[1]", R"([{"type":"retrieval"}])", R"([{"type":"function"}])",
        R"([{"type":"function","function":{"name":""}}])", R"([{"function":{"name":"f"}},{"function":{"name":"f"}}])",
        R"([{"type":"function","function":{"name":"f","parameters":"x"}}])",
        R"([{"type":"function","function":{"name":"get_weather"}}])"}) {
    json body = ollama_chat_base();
    body["tools"] = json::parse(t);
    cases->push_back(ollama_case(std::string("ollama tools=") + t, "POST", kOllamaChatPath, body.dump(), 400));
  }
  for (const char* g : {R"({"prompt":5})", R"({"prompt":["a"]})", R"({"system":5})", R"({"template":"{{ .Prompt }}"})",
                        R"({"suffix":"end"})", R"({"context":[1,2]})", R"({"context":"x"})", R"({"raw":"yes"})",
                        R"({"raw":true,"system":"s"})", R"({"images":["aGk="]})", R"({"images":5})"}) {
    json body = ollama_generate_base();
    body.update(json::parse(g));
    cases->push_back(ollama_case(std::string("ollama generate ") + g, "POST", kOllamaGeneratePath, body.dump(), 400));
  }
}

// Both generation routes: every field and option, unknown models, think, a prompt over the
// context, bodies that are not JSON objects.
void add_ollama_generation_cases(std::vector<MalformedCase>* cases) {
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "zq" + std::to_string(i % 10) + " ";
  for (const auto& [path, base] :
       {std::pair{kOllamaChatPath, ollama_chat_base()}, std::pair{kOllamaGeneratePath, ollama_generate_base()}}) {
    const std::string p = path;
    for (const auto& [field, values] : ollama_bad_fields()) {
      for (const std::string& v : values) {
        json body = base;
        body[field] = json::parse(v);
        cases->push_back(ollama_case(p + " " + field + "=" + v, "POST", p, body.dump(), 400));
      }
    }
    for (const auto& [option, values] : ollama_bad_options()) {
      for (const std::string& v : values) {
        json body = base;
        body["options"][option] = json::parse(v);
        cases->push_back(ollama_case(p + " options." + option + "=" + v, "POST", p, body.dump(), 400));
      }
    }
    for (const char* model : {"nope", "gpt-4o", "SYNTHETIC-GEMMA3"}) {
      json body = base;
      body["model"] = model;
      cases->push_back(ollama_case(p + " model=" + model, "POST", p, body.dump(), 404));
    }
    for (const char* think : {"true", R"("high")"}) {  // no hearth model thinks
      json body = base;
      body["think"] = json::parse(think);
      cases->push_back(ollama_case(p + " think=" + think, "POST", p, body.dump(), 400));
    }
    json too_long = base;
    if (p == kOllamaChatPath) {
      too_long["messages"][0]["content"] = long_text + long_text;
    } else {
      too_long["prompt"] = long_text + long_text;
    }
    cases->push_back(ollama_case(p + " prompt too long", "POST", p, too_long.dump(), 400));
    for (const char* b : {"", "{", "[]", "5", "null", R"("x")", R"({"a":1,})", R"({"a":"\ud800"})", "\xff"})
      cases->push_back(ollama_case(p + " body " + b, "POST", p, b, 400));
  }
}

}  // namespace

std::vector<MalformedCase> ollama_cases() {
  std::vector<MalformedCase> cases;
  add_ollama_generation_cases(&cases);
  add_ollama_prompt_cases(&cases);
  for (const char* b : {"{}", R"({"model":5})", R"({"name":[]})", R"({"model":""})", "[]", "{"})
    cases.push_back(ollama_case(std::string("ollama show ") + b, "POST", "/api/show", b, 400));
  cases.push_back(ollama_case("ollama show unknown", "POST", "/api/show", R"({"model":"nope"})", 404));
  for (const char* b : {"{}", R"({"model":5})", "[]"})
    cases.push_back(ollama_case(std::string("ollama pull ") + b, "POST", "/api/pull", b, 400));
  for (const char* b : {"{}", R"({"model":true})", "[]", "x"})
    cases.push_back(ollama_case(std::string("ollama delete ") + b, "DELETE", "/api/delete", b, 400));
  cases.push_back(ollama_case("ollama delete unknown", "DELETE", "/api/delete", R"({"model":"nope"})", 404));
  cases.push_back(ollama_case("ollama delete loaded", "DELETE", "/api/delete", R"({"model":"synthetic-gemma3"})", 409));
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{{"GET", kOllamaChatPath},
                                                                                       {"PUT", kOllamaGeneratePath},
                                                                                       {"POST", "/api/tags"},
                                                                                       {"GET", "/api/show"},
                                                                                       {"POST", "/api/ps"},
                                                                                       {"POST", "/api/delete"},
                                                                                       {"DELETE", "/api/version"},
                                                                                       {"POST", "/"},
                                                                                       {"GET", "/api/pull"},
                                                                                       {"GET", "/api/embed"}}) {
    cases.push_back(ollama_case("ollama wrong method " + method + " " + target, method, target,
                                method == "GET" || method == "DELETE" ? "" : "{}", 405));
  }
  return cases;
}

}  // namespace hearth::test
