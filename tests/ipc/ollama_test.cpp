// Ollama's adapter without sockets: /api/chat and /api/generate bodies parsed into the
// internal request, the answers written as NDJSON lines or one object with nanosecond
// durations, and the model routes (tags, show, ps, delete) through route() on a host whose
// models are files in a temporary folder.
#include "ipc/api/ollama.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model/installed.h"
#include "ipc/api/ollama_request.h"
#include "ipc/api/ollama_response.h"
#include "ipc/route_table.h"
#include "test_server.h"

namespace {

using namespace hearth;
using namespace hearth::ipc;
using json = nlohmann::json;

OllamaRequest parse_ok(OllamaEndpoint endpoint, const std::string& body) {
  INFO(body);
  auto parsed = parse_ollama_request(endpoint, json::parse(body));
  if (auto* e = std::get_if<ApiError>(&parsed)) FAIL(e->message);
  return std::get<OllamaRequest>(parsed);
}

ApiError parse_error(OllamaEndpoint endpoint, const std::string& body) {
  INFO(body);
  auto parsed = parse_ollama_request(endpoint, json::parse(body));
  REQUIRE(std::holds_alternative<ApiError>(parsed));
  return std::get<ApiError>(parsed);
}

constexpr auto kChat = OllamaEndpoint::Chat;
constexpr auto kGenerate = OllamaEndpoint::Generate;

ApiEvent text_event(std::string text) {
  ApiEvent ev;
  ev.text = std::move(text);
  return ev;
}

// A Done event with round timings (ms) to check the nanosecond arithmetic against.
ApiEvent done_event() {
  ApiEvent d;
  d.kind = ApiEvent::Kind::Done;
  d.finish_reason = "stop";
  d.usage.prompt_tokens = 26;
  d.usage.completion_tokens = 5;
  d.timings.queue_ms = 1;
  d.timings.cache_restore_ms = 2;
  d.timings.prefill_ms = 30;
  d.timings.ttft_ms = 34;  // queue 1 + restore 2 + prefill 30 + 1 ms to the first token
  d.timings.decode_ms = 40;
  return d;
}

std::vector<json> ndjson_lines(const std::string& wire) {
  std::vector<json> out;
  size_t at = 0;
  while (at < wire.size()) {
    const size_t nl = wire.find('\n', at);
    REQUIRE(nl != std::string::npos);  // every object ends its line
    out.push_back(json::parse(wire.substr(at, nl - at)));
    at = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("Absent fields take Ollama's defaults, and an answer streams unless stream is false") {
  const OllamaRequest r = parse_ok(kChat, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  CHECK(r.model == "m");
  CHECK(r.stream);
  CHECK(r.chat);
  CHECK_FALSE(r.load_only);
  CHECK(r.sampling.temperature == 0.8f);
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.top_p == 0.9f);
  CHECK(r.sampling.min_p == 0.0f);
  CHECK(r.sampling.repetition_penalty == 1.0f);
  CHECK(r.sampling.penalty_last_n == 64);
  CHECK(r.sampling.seed == kRandomSeed);
  CHECK(r.max_tokens == -1);
  CHECK(r.top_logprobs == -1);
  CHECK(r.response_format.kind == ResponseFormat::Kind::Text);
  CHECK_FALSE(parse_ok(kChat, R"({"messages":[],"stream":false})").stream);
  CHECK(parse_ok(kChat, R"({"messages":[],"stream":null})").stream);
}

TEST_CASE("options map onto hearth's sampling, options hearth lacks are ignored, bad values are 400") {
  const OllamaRequest r = parse_ok(kGenerate, R"({"prompt":"p","options":{
      "num_predict":12,"temperature":0.2,"top_k":7,"top_p":0.5,"min_p":0.1,"repeat_penalty":1.3,
      "repeat_last_n":-1,"presence_penalty":0.5,"frequency_penalty":-0.5,"seed":42,"stop":["a","","b"],
      "num_ctx":128,"num_keep":5,"typical_p":0.7,"num_gpu":1,"use_mmap":true,"mirostat":2,"invented":"x"}})");
  CHECK(r.max_tokens == 12);
  CHECK(r.sampling.temperature == 0.2f);
  CHECK(r.sampling.top_k == 7);
  CHECK(r.sampling.top_p == 0.5f);
  CHECK(r.sampling.min_p == 0.1f);
  CHECK(r.sampling.repetition_penalty == 1.3f);
  CHECK(r.sampling.penalty_last_n == -1);
  CHECK(r.sampling.presence_penalty == 0.5f);
  CHECK(r.sampling.frequency_penalty == -0.5f);
  CHECK(r.sampling.seed == 42u);
  CHECK(r.stop == std::vector<std::string>{"a", "b"});
  // -1 (Ollama's default), -2 (fill the context) and 0 all run until the context is full.
  for (const char* n : {"-1", "-2", "0"})
    CHECK(parse_ok(kGenerate, std::string(R"({"options":{"num_predict":)") + n + "}}").max_tokens == -1);
  CHECK(parse_ok(kGenerate, R"({"options":{"seed":-1}})").sampling.seed == kRandomSeed);
  CHECK(parse_ok(kGenerate, R"({"options":{"top_k":-5}})").sampling.top_k == 0);
  const OllamaRequest greedy = parse_ok(kGenerate, R"({"options":{"top_p":0}})");
  CHECK(greedy.sampling.temperature == 0.0f);
  CHECK(greedy.sampling.top_p == 1.0f);
  for (const char* bad :
       {R"({"temperature":"hot"})", R"({"temperature":-1})", R"({"top_p":1.5})", R"({"min_p":2})",
        R"({"repeat_penalty":0})", R"({"repeat_last_n":-2})", R"({"seed":1.5})", R"({"num_predict":"5"})",
        R"({"num_ctx":true})", R"({"stop":[1]})", R"({"stop":5})", R"({"presence_penalty":3})"}) {
    const ApiError e = parse_error(kGenerate, std::string(R"({"options":)") + bad + "}");
    CHECK(e.status == 400);
    CHECK(e.param.rfind("options.", 0) == 0);
    CHECK(e.message.rfind("options: ", 0) == 0);
  }
  CHECK(parse_error(kGenerate, R"({"options":[1]})").param == "options");
  CHECK(parse_error(kGenerate, R"({"options":{"stop":["1","2","3","4","5","6","7","8","9","10","11","12","13","14",
                                  "15","16","17"]}})")
            .param == "options.stop");
}

TEST_CASE("options.speculative: false opts out of speculative decoding, which is on by default") {
  CHECK(parse_ok(kChat, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})").speculative);
  CHECK_FALSE(parse_ok(kChat, R"({"model":"m","messages":[{"role":"user","content":"hi"}],)"
                              R"("options":{"speculative":false}})")
                  .speculative);
  CHECK(parse_error(kGenerate, R"({"model":"m","prompt":"x","options":{"speculative":"no"}})").param ==
        "options.speculative");
}

TEST_CASE("format \"json\" asks for a JSON object, an object for its schema, anything else is 400") {
  CHECK(parse_ok(kChat, R"({"format":"json"})").response_format.kind == ResponseFormat::Kind::JsonObject);
  const OllamaRequest s = parse_ok(kChat, R"({"format":{"type":"object","properties":{"age":{"type":"integer"}}}})");
  CHECK(s.response_format.kind == ResponseFormat::Kind::JsonSchema);
  CHECK(json::parse(s.response_format.schema) ==
        json::parse(R"({"type":"object","properties":{"age":{"type":"integer"}}})"));
  CHECK(parse_ok(kChat, R"({"format":""})").response_format.kind == ResponseFormat::Kind::Text);
  for (const char* bad : {R"("yaml")", "5", "[]", "true"}) {
    const ApiError e = parse_error(kChat, std::string(R"({"format":)") + bad + "}");
    CHECK(e.param == "format");
    CHECK(e.message.find("expected \"json\" or a JSON Schema object") != std::string::npos);
  }
}

TEST_CASE("Messages carry tool calls with object arguments and tool names, and tools are parsed with unique names") {
  const OllamaRequest r = parse_ok(kChat, R"({"messages":[
      {"role":"USER","content":"weather?"},
      {"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Oslo"}}}]},
      {"role":"tool","content":"11 C","tool_name":"get_weather"}],
    "tools":[{"type":"function","function":{"name":"get_weather","description":"d",
              "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]})");
  REQUIRE(r.messages.size() == 3);
  CHECK(r.messages[0].role == "user");  // Ollama lower-cases roles
  REQUIRE(r.messages[1].tool_calls.size() == 1);
  CHECK(r.messages[1].tool_calls[0].name == "get_weather");
  CHECK(json::parse(r.messages[1].tool_calls[0].arguments) == json{{"city", "Oslo"}});
  CHECK(r.messages[2].role == "tool");
  CHECK(r.messages[2].name == "get_weather");
  REQUIRE(r.tools.size() == 1);
  CHECK(r.tools[0].name == "get_weather");
  CHECK(r.tools[0].description == "d");
  CHECK(json::parse(r.tools[0].parameters)["properties"].contains("city"));
  CHECK(json::parse(r.tools[0].json)["type"] == "function");
  for (const char* bad :
       {R"({"messages":[{"role":"robot","content":"x"}]})", R"({"messages":[{"content":"x"}]})",
        R"({"messages":[{"role":"user","content":5}]})", R"({"messages":"hi"})",
        R"({"messages":[{"role":"user","content":"x","images":["aGk="]}]})",
        R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]})",
        R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":{}}}]}]})",
        R"({"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})",
        R"({"tools":[{"type":"retrieval"}]})", R"({"tools":{}})"}) {
    CHECK(parse_error(kChat, bad).status == 400);
  }
}

TEST_CASE("generate: system and prompt are two turns, raw is the prompt with its special tokens, the rest is 400") {
  const OllamaRequest r = parse_ok(kGenerate, R"({"prompt":"why?","system":"be brief","template":"","suffix":""})");
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[0].content == "be brief");
  CHECK(r.messages[1].role == "user");
  CHECK(r.messages[1].content == "why?");
  CHECK(r.chat);
  const OllamaRequest raw = parse_ok(kGenerate, R"({"prompt":"<|im_start|>user\nhi","raw":true,"context":[]})");
  CHECK_FALSE(raw.chat);
  CHECK(raw.prompt == "<|im_start|>user\nhi");
  CHECK(raw.parse_special);
  CHECK(parse_error(kGenerate, R"({"prompt":"p","template":"{{ .Prompt }}"})").param == "template");
  CHECK(parse_error(kGenerate, R"({"prompt":"p","suffix":"end"})").param == "suffix");
  CHECK(parse_error(kGenerate, R"({"prompt":"p","context":[1,2,3]})").param == "context");
  CHECK(parse_error(kGenerate, R"({"prompt":"p","raw":true,"system":"s"})").param == "system");
  CHECK(parse_error(kGenerate, R"({"prompt":"p","images":["aGk="]})").param == "images");
  CHECK(parse_error(kGenerate, R"({"prompt":5})").param == "prompt");
}

TEST_CASE("think, keep_alive and logprobs are read, and think levels count as thinking") {
  CHECK(parse_ok(kChat, R"({"think":false})").think == std::optional<bool>(false));
  CHECK_FALSE(parse_ok(kChat, R"({})").think.has_value());
  for (const char* t : {"true", R"("low")", R"("high")", R"("max")"})
    CHECK(parse_ok(kChat, std::string(R"({"think":)") + t + "}").think == std::optional<bool>(true));
  CHECK(parse_error(kChat, R"({"think":"deep"})").param == "think");
  CHECK(parse_error(kChat, R"({"think":1})").param == "think");
  const OllamaRequest k = parse_ok(kChat, R"({"keep_alive":"10m","logprobs":true,"top_logprobs":3})");
  REQUIRE(k.keep_alive);
  CHECK(k.keep_alive->duration == std::chrono::minutes(10));
  CHECK(k.top_logprobs == 3);
  CHECK(parse_ok(kChat, R"({"top_logprobs":3})").top_logprobs == -1);  // only with logprobs
  CHECK(parse_ok(kChat, R"({"logprobs":true})").top_logprobs == 0);
  CHECK(parse_error(kChat, R"({"top_logprobs":21})").param == "top_logprobs");
  CHECK(parse_error(kChat, R"({"keep_alive":"soon"})").param == "keep_alive");
}

TEST_CASE("Nothing to generate loads the model, and with keep_alive 0 the body does not load it at all") {
  CHECK(parse_ok(kGenerate, R"({"model":"m"})").load_only);
  CHECK(parse_ok(kGenerate, R"({"prompt":""})").load_only);
  CHECK(parse_ok(kChat, R"({"messages":[]})").load_only);
  CHECK_FALSE(parse_ok(kGenerate, R"({"prompt":"x"})").load_only);
  for (const char* b : {R"({"model":"m","keep_alive":0})", R"({"prompt":"","keep_alive":"0s"})",
                        R"({"messages":[],"keep_alive":0})", R"({"messages":null,"keep_alive":"0"})"}) {
    INFO(b);
    CHECK_FALSE(ollama_loads_model(json::parse(b)));
  }
  for (const char* b : {R"({"model":"m"})", R"({"prompt":"x","keep_alive":0})", R"({"keep_alive":"5m"})",
                        R"({"messages":[{"role":"user","content":"x"}],"keep_alive":0})", R"({"keep_alive":-1})",
                        R"({"keep_alive":"nonsense"})"}) {
    INFO(b);
    CHECK(ollama_loads_model(json::parse(b)));
  }
}

TEST_CASE("Durations are nanoseconds: the prompt's restore and prefill, then the first token and decode") {
  const OllamaDurations d =
      ollama_durations(done_event(), std::chrono::milliseconds(700), std::chrono::milliseconds(80));
  CHECK(d.load_ns == 700'000'000);
  CHECK(d.total_ns == 780'000'000);
  CHECK(d.prompt_eval_count == 26);
  CHECK(d.prompt_eval_ns == 32'000'000);  // restore 2 + prefill 30
  CHECK(d.eval_count == 5);
  CHECK(d.eval_ns == 41'000'000);  // 1 ms to the first token + 40 of decode
  CHECK(ollama_done_reason("stop") == "stop");
  CHECK(ollama_done_reason("length") == "length");
  CHECK(ollama_done_reason("cancelled") == "connection_closed");
}

TEST_CASE("Timestamps are RFC 3339 in UTC, the fraction without trailing zeros") {
  CHECK(rfc3339(std::chrono::seconds(0)) == "1970-01-01T00:00:00Z");
  CHECK(rfc3339(std::chrono::nanoseconds(1'700'000'000'123'456'789)) == "2023-11-14T22:13:20.123456789Z");
  CHECK(rfc3339(std::chrono::nanoseconds(1'700'000'000'500'000'000)) == "2023-11-14T22:13:20.5Z");
  const std::string now = rfc3339_now();
  CHECK(now.size() >= 20);
  CHECK(now.back() == 'Z');
  CHECK(now[10] == 'T');
}

TEST_CASE("A streamed chat is NDJSON: an object per piece and per tool call, then the done object") {
  OllamaMeta meta;
  meta.endpoint = kChat;
  meta.model = "qwen2.5-coder:0.5b";
  std::unique_ptr<ResponseWriter> w = ollama_writer(meta, true);
  CHECK(w->streamed());
  CHECK(w->content_type() == "application/x-ndjson");
  CHECK(w->error_shape() == ErrorShape::Ollama);
  std::string wire = w->open();
  wire += w->write(text_event("Hel"));
  wire += w->write(text_event("lo"));
  ApiEvent begin;
  begin.kind = ApiEvent::Kind::CallBegin;
  begin.call_id = "call_1";
  begin.call_name = "get_weather";
  wire += w->write(begin);
  ApiEvent args;
  args.kind = ApiEvent::Kind::CallArguments;
  args.text = R"({"city":)";
  wire += w->write(args);
  args.text = R"("Oslo"})";
  wire += w->write(args);
  ApiEvent end;
  end.kind = ApiEvent::Kind::CallEnd;
  wire += w->write(end);
  wire += w->write(done_event());
  const std::vector<json> lines = ndjson_lines(wire);
  REQUIRE(lines.size() == 4);
  for (const json& l : lines) {
    CHECK(l.at("model") == "qwen2.5-coder:0.5b");
    CHECK(l.at("created_at").get<std::string>().back() == 'Z');
    CHECK(l.at("message").at("role") == "assistant");
  }
  CHECK(lines[0]["message"]["content"] == "Hel");
  CHECK(lines[0]["done"] == false);
  CHECK(lines[1]["message"]["content"] == "lo");
  const json& call = lines[2]["message"].at("tool_calls").at(0);
  CHECK(call.at("id") == "call_1");
  CHECK(call.at("function").at("name") == "get_weather");
  CHECK(call["function"].at("arguments") == json{{"city", "Oslo"}});  // an object, not a string
  CHECK(call["function"].at("index") == 0);
  const json& fin = lines[3];
  CHECK(fin["done"] == true);
  CHECK(fin["done_reason"] == "stop");
  CHECK(fin["message"]["content"] == "");
  CHECK(fin.at("eval_count") == 5);
  CHECK(fin.at("prompt_eval_count") == 26);
  CHECK(fin.at("prompt_eval_duration") == 32'000'000);
  CHECK(fin.at("eval_duration") == 41'000'000);
  CHECK(fin.at("load_duration") == 0);
  CHECK(fin.at("total_duration").get<int64_t>() >= 0);
  CHECK(fin.at("timings").at("ttft_ms") == 34);
}

TEST_CASE("A whole generate answer is one object with the text, logprobs and durations") {
  OllamaMeta meta;
  meta.endpoint = kGenerate;
  meta.model = "m";
  meta.logprobs = true;
  meta.load_wait = std::chrono::milliseconds(5);
  std::unique_ptr<ResponseWriter> w = ollama_writer(meta, false);
  ApiEvent a = text_event("Hi");
  a.logprobs.push_back(TokenLogprob{7, "Hi", -0.5f, {{7, "Hi", -0.5f}, {8, "Ho", -1.5f}}});
  CHECK(w->write(a).empty());
  CHECK(w->write(text_event(" there")).empty());
  CHECK(w->write(done_event()).empty());
  const HttpResponse r = w->response();
  CHECK(r.status == 200);
  CHECK(r.content_type == "application/json");
  const json j = json::parse(r.body);
  CHECK(j.at("response") == "Hi there");
  CHECK(j.at("done") == true);
  CHECK(j.at("load_duration") == 5'000'000);
  CHECK(j.at("total_duration").get<int64_t>() >= 5'000'000);
  CHECK_FALSE(j.contains("message"));
  REQUIRE(j.at("logprobs").size() == 1);
  CHECK(j["logprobs"][0].at("token") == "Hi");
  CHECK(j["logprobs"][0].at("logprob") == -0.5);
  CHECK(j["logprobs"][0].at("top_logprobs").size() == 2);
}

TEST_CASE("An engine failure is an error line in a stream and an Ollama error response in a whole answer") {
  ApiEvent failed;
  failed.kind = ApiEvent::Kind::Error;
  failed.error = internal_error("the engine failed");
  std::unique_ptr<ResponseWriter> streamed = ollama_writer(OllamaMeta{}, true);
  CHECK(json::parse(streamed->write(failed)) == json{{"error", "the engine failed"}});
  std::unique_ptr<ResponseWriter> whole = ollama_writer(OllamaMeta{}, false);
  CHECK(whole->write(failed).empty());
  CHECK(whole->response().status == 500);
  CHECK(json::parse(whole->response().body) == json{{"error", "the engine failed"}});
}

TEST_CASE("A request with nothing to generate is answered by one done object saying load or unload") {
  const json chat = ollama_load_answer(kChat, "m", "unload");
  CHECK(chat.at("model") == "m");
  CHECK(chat.at("message") == json{{"role", "assistant"}, {"content", ""}});
  CHECK(chat.at("done") == true);
  CHECK(chat.at("done_reason") == "unload");
  const json gen = ollama_load_answer(kGenerate, "m", "load");
  CHECK(gen.at("response") == "");
  CHECK(gen.at("done_reason") == "load");
}

namespace {

// The synthetic engine, loaded (its file is not on disk), and every file given, not loaded,
// each served by its file name without ".gguf". load() of a file counts and fails: the tests
// see whether a request loaded its model.
class FolderHost final : public ModelHost {
 public:
  FolderHost(std::shared_ptr<const EngineRef> engine, std::vector<std::string> paths) : engine_(std::move(engine)) {
    for (const std::string& p : paths) {
      const InstalledModel m = inspect_model(p);
      HostedModel h;
      h.id = std::filesystem::path(p).stem().string();
      h.path = p;
      h.file_bytes = static_cast<uint64_t>(m.bytes);
      h.created = m.modified;
      h.arch = m.arch;
      h.quantization = m.quantization;
      h.available = m.usable;
      files_.push_back(h);
    }
  }
  std::optional<std::string> resolve(std::string_view name) const override {
    if (name.empty() || engine_->model.answers_to(name)) return engine_->model.id;
    for (const HostedModel& h : files_)
      if (h.id == name) return h.id;
    return std::nullopt;
  }
  std::shared_ptr<const EngineRef> loaded(const std::string& id) override {
    return id == engine_->model.id ? engine_ : nullptr;
  }
  Loaded load(const std::string& id) override {
    if (id == engine_->model.id) return engine_;
    ++loads;
    return HostError{HostError::Kind::LoadFailed, "this test host loads no file"};
  }
  bool unload(const std::string& id) override {
    unloaded.push_back(id);
    return false;
  }
  void request_ended(const std::string&, std::optional<KeepAlive>) override {}
  std::vector<HostedModel> models() const override {
    HostedModel e;
    e.id = engine_->model.id;
    e.path = engine_->model.path;
    e.arch = engine_->model.arch;
    e.loaded = true;
    e.backend = "cpu";
    e.memory_bytes = 1000;
    e.n_ctx = engine_->n_ctx;
    e.expires_in_s = 60;
    std::vector<HostedModel> out{e};
    out.insert(out.end(), files_.begin(), files_.end());
    return out;
  }
  bool servable() const override { return true; }

  int loads = 0;
  std::vector<std::string> unloaded;

 private:
  std::shared_ptr<const EngineRef> engine_;
  std::vector<HostedModel> files_;
};

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes, size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
}

// A models folder with tiny.gguf (the synthetic model) and cut.gguf (damaged), a file outside
// it, and the host serving them all.
struct Folder {
  test::TempDir dir{"hearth-ollama-models"}, elsewhere{"hearth-ollama-elsewhere"};
  std::string models_dir = dir.path().string();
  std::unique_ptr<FolderHost> host;
  Folder() {
    const std::vector<uint8_t>& bytes = test::synthetic_engine().bytes;
    write_file(dir.path() / "tiny.gguf", bytes, bytes.size());
    write_file(dir.path() / "cut.gguf", bytes, 64);
    write_file(elsewhere.path() / "outside.gguf", bytes, bytes.size());
    std::filesystem::create_symlink(elsewhere.path() / "outside.gguf", dir.path() / "link.gguf");
    const test::SyntheticEngine& e = test::synthetic_engine();
    auto engine = std::make_shared<EngineRef>();  // no scheduler: nothing here generates
    engine->tokenizer = e.tokenizer.get();
    engine->model = e.info;
    engine->n_ctx = e.info.n_ctx;
    host = std::make_unique<FolderHost>(
        std::move(engine),
        std::vector<std::string>{(dir.path() / "tiny.gguf").string(), (dir.path() / "cut.gguf").string(),
                                 (dir.path() / "link.gguf").string(), (elsewhere.path() / "outside.gguf").string()});
  }

  // The answer to one request over the Unix socket from uid (default: this process's own).
  HttpResponse call(const std::string& method, const std::string& target, const std::string& body = "",
                    std::optional<uint32_t> uid = std::nullopt, bool tcp = false) {
    HttpRequest req;
    req.method = method;
    req.target = target;
    req.host = "localhost";
    req.body = body;
    req.content_type = "application/json";
    RouteContext ctx;
    ctx.host = host.get();
    ctx.models_dir = &models_dir;
    if (tcp) {
      ctx.peer = tcp_peer();
    } else {
      ctx.peer.known = true;
      ctx.peer.uid = uid.value_or(::geteuid());
    }
    RouteResult r = route(req, ctx);
    REQUIRE(std::holds_alternative<HttpResponse>(r));
    return std::get<HttpResponse>(r);
  }
};

json body_of(const HttpResponse& r) {
  INFO(r.body);
  return json::parse(r.body);
}

// Every error on an Ollama route is {"error": "<message>"} and nothing else.
void require_ollama_error(const HttpResponse& r, int status) {
  INFO(r.body);
  CHECK(r.status == status);
  const json j = json::parse(r.body);
  REQUIRE(j.size() == 1);
  REQUIRE(j.at("error").is_string());
  CHECK_FALSE(j["error"].get<std::string>().empty());
}

}  // namespace

TEST_CASE("/api/tags lists the servable models with Ollama's details") {
  Folder f;
  const HttpResponse r = f.call("GET", "/api/tags");
  REQUIRE(r.status == 200);
  const json models = body_of(r).at("models");
  // tiny, link and outside; not the damaged file, not the engine whose file is not on disk.
  REQUIRE(models.size() == 3);
  const json& tiny = models[0];
  CHECK(tiny.at("name") == "tiny");
  CHECK(tiny.at("model") == "tiny");
  CHECK(tiny.at("size") == test::synthetic_engine().bytes.size());
  CHECK(tiny.at("digest").get<std::string>().size() == 16);
  CHECK(tiny.at("modified_at").get<std::string>().back() == 'Z');
  const json& d = tiny.at("details");
  CHECK(d.at("format") == "gguf");
  CHECK(d.at("family") == "gemma3");
  CHECK(d.at("families") == json::array({"gemma3"}));
  CHECK_FALSE(d.at("parameter_size").get<std::string>().empty());
  CHECK(d.contains("quantization_level"));
  CHECK(models[1].at("digest") != tiny["digest"]);  // another file (name, size, mtime)
}

TEST_CASE("/api/show describes a model from its file: details, model_info, template and capabilities") {
  Folder f;
  const HttpResponse r = f.call("POST", "/api/show", R"({"model":"tiny"})");
  REQUIRE(r.status == 200);
  const json j = body_of(r);
  CHECK(j.at("details").at("family") == "gemma3");
  const json& info = j.at("model_info");
  CHECK(info.at("general.architecture") == "gemma3");
  CHECK(info.at("general.parameter_count").get<int64_t>() > 0);
  CHECK(info.at("tokenizer.ggml.tokens") == json::array());  // arrays only when verbose
  CHECK(j.at("capabilities") == json::array({"completion"}));
  CHECK(j.at("template").get<std::string>().find("<start_of_turn>") != std::string::npos);
  CHECK(j.at("modelfile").get<std::string>().find("FROM " + (f.dir.path() / "tiny.gguf").string()) !=
        std::string::npos);
  CHECK(j.at("modified_at").get<std::string>().back() == 'Z');
  const json verbose = body_of(f.call("POST", "/api/show", R"({"name":"tiny","verbose":true})"));
  CHECK(verbose["model_info"]["tokenizer.ggml.tokens"].size() > 100);
  require_ollama_error(f.call("POST", "/api/show", R"({"model":"nope"})"), 404);
  require_ollama_error(f.call("POST", "/api/show", "{}"), 400);
  require_ollama_error(f.call("POST", "/api/show", R"({"model":5})"), 400);
}

TEST_CASE("/api/ps lists each loaded model with Ollama's fields and hearth's beside them") {
  Folder f;
  const json models = body_of(f.call("GET", "/api/ps")).at("models");
  REQUIRE(models.size() == 1);
  const json& m = models[0];
  CHECK(m.at("name") == "synthetic-gemma3");
  CHECK(m.at("model") == "synthetic-gemma3");
  CHECK(m.at("size") == 1000);
  CHECK(m.at("size_vram") == 0);
  CHECK(m.at("context_length") == 512);
  CHECK(m.at("details").at("format") == "gguf");
  CHECK(m.at("digest").is_string());
  CHECK(m.at("expires_at").get<std::string>().back() == 'Z');
  // hearth's own, as `hearth ps` and hearth_client_loaded_models read them.
  CHECK(m.at("id") == "synthetic-gemma3");
  CHECK(m.at("backend") == "cpu");
  CHECK(m.at("memory_bytes") == 1000);
  CHECK(m.at("n_ctx") == 512);
  CHECK(m.at("expires_in_s") == 60);
}

TEST_CASE("/api/delete removes a folder's file, for root or hearthd's own user over the Unix socket only") {
  Folder f;
  const auto tiny = f.dir.path() / "tiny.gguf";
  require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"tiny"})", std::nullopt, /*tcp=*/true), 403);
  if (::geteuid() != 0)
    require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"tiny"})", ::geteuid() + 1), 403);
  require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"synthetic-gemma3"})"), 409);  // loaded
  require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"outside"})"), 403);           // not in the folder
  CHECK(std::filesystem::exists(f.elsewhere.path() / "outside.gguf"));
  require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"nope"})"), 404);
  require_ollama_error(f.call("DELETE", "/api/delete", "{}"), 400);
  REQUIRE(std::filesystem::exists(tiny));
  const HttpResponse ok = f.call("DELETE", "/api/delete", R"({"model":"tiny"})");
  CHECK(ok.status == 200);
  CHECK_FALSE(std::filesystem::exists(tiny));
  require_ollama_error(f.call("DELETE", "/api/delete", R"({"model":"tiny"})"), 404);
  // A link in the folder is the folder's entry: the link goes, the file it points to stays.
  CHECK(f.call("DELETE", "/api/delete", R"({"model":"link"})").status == 200);
  CHECK_FALSE(std::filesystem::is_symlink(f.dir.path() / "link.gguf"));
  CHECK(std::filesystem::exists(f.elsewhere.path() / "outside.gguf"));
  // Gone from the listing too, though the host still knows the name.
  const json tags = body_of(f.call("GET", "/api/tags"));  // kept: a range-for over a temporary's member dangles
  for (const json& m : tags.at("models")) CHECK(m["name"] != "tiny");
}

TEST_CASE("An unload request does not load its model, a load request does") {
  Folder f;
  const HttpResponse unload = f.call("POST", "/api/generate", R"({"model":"tiny","keep_alive":0})");
  REQUIRE(unload.status == 200);
  CHECK(body_of(unload).at("done_reason") == "unload");
  CHECK(f.host->loads == 0);
  CHECK(f.host->unloaded == std::vector<std::string>{"tiny"});
  const HttpResponse chat_unload = f.call("POST", "/api/chat", R"({"model":"tiny","messages":[],"keep_alive":"0s"})");
  CHECK(body_of(chat_unload).at("message").at("content") == "");
  CHECK(f.host->loads == 0);
  // Loading: the host is asked (this one cannot, and says so in Ollama's shape).
  require_ollama_error(f.call("POST", "/api/generate", R"({"model":"tiny"})"), 500);
  CHECK(f.host->loads == 1);
  const json loaded = body_of(f.call("POST", "/api/generate", R"({"model":"synthetic-gemma3"})"));
  CHECK(loaded.at("done_reason") == "load");
  CHECK(loaded.at("model") == "synthetic-gemma3");
}

TEST_CASE("/, /api/version, /api/pull, /api/copy and the routes hearth lacks answer as Ollama's clients expect") {
  Folder f;
  const HttpResponse root = f.call("GET", "/");
  CHECK(root.status == 200);
  CHECK(root.body == "Ollama is running");
  CHECK(root.content_type.rfind("text/plain", 0) == 0);
  const json v = body_of(f.call("GET", "/api/version"));
  CHECK(v.at("version") == kOllamaApiVersion);
  CHECK(v.at("hearth").is_string());
  const HttpResponse pulled = f.call("POST", "/api/pull", R"({"model":"tiny"})");
  CHECK(pulled.status == 200);
  CHECK(pulled.content_type == "application/x-ndjson");
  CHECK(body_of(pulled) == json{{"status", "success"}});
  CHECK(f.call("POST", "/api/pull", R"({"model":"tiny","stream":false})").content_type == "application/json");
  require_ollama_error(f.call("POST", "/api/pull", R"({"model":"llama3.2"})"), 501);
  require_ollama_error(f.call("POST", "/api/copy", R"({"source":"tiny","destination":"t2"})"), 501);
  for (const char* path : {"/api/embed", "/api/embeddings", "/api/create", "/api/push"})
    require_ollama_error(f.call("POST", path, "{}"), 501);
}
