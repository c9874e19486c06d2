// A synthetic Qwen3 model behind a real server, with Qwen3's own chat template (the one in
// tests/fixtures/chat_templates.json, as a Qwen3 file carries it): the template is
// recognised, chat_template_kwargs.enable_thinking reaches the prompt, earlier reasoning is
// dropped from it, and the answers come back in every API's shape. (Random weights write no
// <think> block of their own: splitting one is reasoning_stream_test.cpp's.)
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "http_client.h"
#include "ipc/server.h"
#include "one_model_host.h"
#include "tests/test_util.h"
#include "tests/tools/synthetic_model.h"

using namespace hearth;
using json = nlohmann::json;

namespace {

std::string qwen3_template_source() {
  std::ifstream in(test::source_dir() + "/tests/fixtures/chat_templates.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const json doc = json::parse(ss.str());
  for (const json& m : doc.at("models"))
    if (m.at("name") == "qwen3") return m.at("chat_template").get<std::string>();
  FAIL("no qwen3 template in the fixture");
  return "";
}

// The model, a scheduler and a server on a socket in a temporary folder.
struct Qwen3Server {
  test::TempDir dir;
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ipc::ModelInfo info;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<ipc::Server> server;
  std::thread thread;
  std::string socket;

  Qwen3Server() : socket(dir.file("hearth.sock")) {
    test::SyntheticOptions o;
    o.arch = "qwen3";
    o.type = DType::Q8_0;
    o.chat_template = qwen3_template_source();
    bytes = std::move(*test::make_synthetic_model(o));
    file = std::move(*gguf::File::from_memory(bytes.data(), bytes.size()));
    backend = cpu::make_cpu_backend({1});
    model = std::move(*Model::load(file, *backend));
    tokenizer = std::move(*Tokenizer::from_gguf(*file));
    info.id = "synthetic-qwen3";
    info.path = dir.file("synthetic-qwen3.gguf");  // for /api/show, which reads the file
    std::ofstream(info.path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    info.arch = "qwen3";
    info.backend = "cpu";
    info.n_ctx = 512;
    info.chat_template = std::move(*chat_template_from_gguf(*file));
    SchedulerOptions so;
    so.n_ctx = 512;
    so.block_tokens = 16;
    scheduler = std::move(*Scheduler::create(*model, *backend, *tokenizer, so));
    ipc::ServerOptions srv;
    srv.header_timeout = srv.body_timeout = srv.idle_timeout = test::kHangGuard;
    server = std::make_unique<ipc::Server>(srv);
    REQUIRE(server->listen_unix(socket).ok());
    server->set_host(
        std::make_shared<test::OneModelHost>(ipc::make_engine_ref(scheduler.get(), tokenizer.get(), info)));
    thread = std::thread([this] { server->run(); });
  }
  ~Qwen3Server() {
    server->stop();
    thread.join();
  }

  json post(const std::string& path, const json& body) {
    test::HttpConn c = test::HttpConn::unix_socket(socket);
    REQUIRE(c.send(test::http_request("POST", path, body.dump())));
    auto reply = c.read_reply();
    REQUIRE(reply);
    INFO(reply->body);
    REQUIRE(reply->status == 200);
    return json::parse(reply->body);
  }

  // Tokens of the prompt hearth renders for these messages.
  size_t prompt_tokens(const std::vector<ChatMessage>& messages, bool thinking) {
    ChatOptions options;
    options.enable_thinking = thinking;
    auto segments = render_chat(info.chat_template, messages, true, {}, options);
    REQUIRE(segments.ok());
    return tokenizer->encode_segments(*segments).size();
  }
};

}  // namespace

TEST_CASE("a synthetic Qwen3 model serves chat with its own template, thinking on and off") {
  Qwen3Server s;
  REQUIRE(s.info.chat_template.family == ChatFamily::Qwen3);
  const json question = json::array({{{"role", "user"}, {"content", "What is 2+2?"}}});

  const json on = s.post("/v1/chat/completions", {{"messages", question}, {"max_tokens", 3}, {"temperature", 0}});
  const json off = s.post("/v1/chat/completions", {{"messages", question},
                                                   {"max_tokens", 3},
                                                   {"temperature", 0},
                                                   {"chat_template_kwargs", {{"enable_thinking", false}}}});
  const std::vector<ChatMessage> q{{"user", "What is 2+2?"}};
  CHECK(on.at("usage").at("prompt_tokens") == s.prompt_tokens(q, true));
  CHECK(off.at("usage").at("prompt_tokens") == s.prompt_tokens(q, false));
  CHECK(off.at("usage").at("prompt_tokens").get<size_t>() > on.at("usage").at("prompt_tokens").get<size_t>());
  CHECK(on.at("choices")[0].at("message").at("content").is_string());

  // A grammar that holds the answer from its first token leaves no room to think.
  const json format =
      s.post("/v1/chat/completions",
             {{"messages", question}, {"max_tokens", 2}, {"response_format", {{"type", "json_object"}}}});
  CHECK(format.at("usage").at("prompt_tokens") == s.prompt_tokens(q, false));

  // An earlier turn's reasoning, sent back either way, is not in the prompt.
  json history = question;
  history.push_back({{"role", "assistant"}, {"content", "4"}, {"reasoning_content", "Two and two make four."}});
  history.push_back({{"role", "user"}, {"content", "Times 3?"}});
  json inline_history = history;
  inline_history[1] = {{"role", "assistant"}, {"content", "<think>\nTwo and two make four.\n</think>\n\n4"}};
  const std::vector<ChatMessage> plain{{"user", "What is 2+2?"}, {"assistant", "4"}, {"user", "Times 3?"}};
  for (const json& h : {history, inline_history}) {
    const json r = s.post("/v1/chat/completions", {{"messages", h}, {"max_tokens", 2}});
    CHECK(r.at("usage").at("prompt_tokens") == s.prompt_tokens(plain, true));
  }

  // Ollama's think false is the template's enable_thinking false; Anthropic's thinking too.
  const json ollama = s.post(
      "/api/chat", {{"messages", question}, {"think", false}, {"stream", false}, {"options", {{"num_predict", 2}}}});
  CHECK(ollama.at("prompt_eval_count") == s.prompt_tokens(q, false));
  const json claude = s.post("/v1/messages", {{"model", "synthetic-qwen3"},
                                              {"messages", question},
                                              {"max_tokens", 2},
                                              {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}});
  CHECK(claude.at("usage").at("input_tokens").get<size_t>() +
            claude.at("usage").at("cache_read_input_tokens").get<size_t>() ==
        s.prompt_tokens(q, true));
}

TEST_CASE("Ollama's /api/show lists thinking among a Qwen3 model's capabilities") {
  Qwen3Server s;
  const json show = s.post("/api/show", {{"model", "synthetic-qwen3"}});
  CHECK(show.at("capabilities") == json::array({"completion", "tools", "thinking"}));
}
