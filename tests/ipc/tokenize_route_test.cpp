// POST /api/tokenize answers what llama.cpp's /tokenize answers: special tokens parsed unless
// "parse_special" is false, no BOS unless "add_special". Checked through route() with the
// real tokenizers (skipped with a warning when a model is not installed); the expected ids
// are llama.cpp's, from tests/fixtures/bpe_tokenizer.json and the Gemma tokenizer tests.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "ipc/route_table.h"
#include "one_model_host.h"
#include "test_util.h"

using namespace hearth;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {

struct Loaded {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

// nullptr tok when the file is absent.
Loaded load_model(const std::string& path) {
  Loaded l;
  if (path.empty() || !std::filesystem::exists(path)) return l;
  auto f = gguf::File::open(path);
  REQUIRE(f.ok());
  l.file = std::move(*f);
  auto t = Tokenizer::from_gguf(*l.file);
  REQUIRE(t.ok());
  l.tok = std::move(*t);
  return l;
}

std::string models_dir() {
  if (const char* m = std::getenv("HEARTH_MODELS"); m && *m) return m;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/hearth/models";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/hearth/models";
  return {};
}

Ids tokenize_route(const Tokenizer& tok, const json& body) {
  auto engine = std::make_shared<ipc::EngineRef>();
  engine->tokenizer = &tok;
  test::OneModelHost host(engine);
  ipc::RouteContext ctx;
  ctx.host = &host;
  ipc::RouteResult r = ipc::route({"POST", "/api/tokenize", "", body.dump(), std::nullopt, "application/json"}, ctx);
  REQUIRE(std::holds_alternative<ipc::HttpResponse>(r));
  const auto& resp = std::get<ipc::HttpResponse>(r);
  INFO(resp.body);
  REQUIRE(resp.status == 200);
  return json::parse(resp.body).at("tokens").get<Ids>();
}

}  // namespace

TEST_CASE("/api/tokenize parses special tokens as llama.cpp's /tokenize, for a BPE chat model") {
  std::ifstream in(test::source_dir() + "/tests/fixtures/bpe_tokenizer.json");
  REQUIRE(in.good());
  const json fixture = json::parse(in);
  Loaded qwen = load_model(models_dir() + "/" + fixture["models"]["qwen2.5-coder-0.5b"]["file"].get<std::string>());
  if (!qwen.tok) {
    WARN("qwen2.5-coder-0.5b model not installed; test skipped");
    return;
  }
  int n = 0;
  for (const json& c : fixture["cases"]) {
    const std::string text = c["text"].get<std::string>();
    if (text.find("<|") == std::string::npos) continue;  // the texts with special tokens
    INFO(text);
    CHECK(tokenize_route(*qwen.tok, {{"content", text}}) == c["ids"]["qwen2.5-coder-0.5b"].get<Ids>());
    // As plain text, no special-token id appears.
    for (int32_t id : tokenize_route(*qwen.tok, {{"content", text}, {"parse_special", false}})) {
      CHECK_FALSE(qwen.tok->is_control(id));
    }
    ++n;
  }
  CHECK(n >= 3);
}

TEST_CASE("/api/tokenize on Gemma: the same defaults, the same ids as llama.cpp") {
  Loaded gemma = load_model(test::gemma_model_path());
  if (!gemma.tok) {
    WARN("default model not installed; test skipped");
    return;
  }
  // llama.cpp's ids (tests/tokenizer/tokenizer_test.cpp).
  CHECK(tokenize_route(*gemma.tok, {{"content", "<start_of_turn>"}}) == Ids{105});
  CHECK(tokenize_route(*gemma.tok, {{"content", "<start_of_turn>"}, {"parse_special", false}}) ==
        Ids{236820, 3041, 236779, 1340, 236779, 887, 236813});
  CHECK(tokenize_route(*gemma.tok, {{"content", "Hello world"}, {"add_special", true}}) == Ids{2, 9259, 1902});
}
