// The chat models' byte-level BPE tokenizers against llama.cpp's ids.
// Golden data: tests/fixtures/bpe_tokenizer.json, made by tests/reference/make_bpe_fixtures.py
// (llama-cpp-python, special tokens parsed, no BOS), which records llama-cpp-python's version
// and each model file's sha256. Tests skip with a warning when a model is not installed.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/writer.h"
#include "engine/tokenizer/tokenizer.h"
#include "test_util.h"

using hearth::Tokenizer;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

namespace {

const json& fixture() {
  static json j = [] {
    std::ifstream in(hearth::test::source_dir() + "/tests/fixtures/bpe_tokenizer.json");
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return j;
}

// The installed file of a fixture model, or "".
std::string model_file(const std::string& name) {
  return hearth::test::installed_model_path(name);
}

// Loads a fixture model's tokenizer once; nullptr when the file is not installed.
const Tokenizer* model_tokenizer(const std::string& key) {
  struct Slot {
    std::unique_ptr<hearth::gguf::File> file;
    std::unique_ptr<Tokenizer> tok;
  };
  static std::map<std::string, Slot> slots;
  auto [it, fresh] = slots.try_emplace(key);
  if (fresh) {
    std::string path = model_file(fixture()["models"][key]["file"].get<std::string>());
    if (path.empty()) return nullptr;
    auto f = hearth::gguf::File::open(path);
    REQUIRE(f.ok());
    it->second.file = std::move(*f);
    auto t = Tokenizer::from_gguf(*it->second.file);
    INFO((t.ok() ? std::string() : t.error().message));
    REQUIRE(t.ok());
    it->second.tok = std::move(*t);
  }
  return it->second.tok.get();
}

// Qwen2.5's vocabulary and merges with another tokenizer.ggml.pre, written with our GGUF
// writer (the fixture script gives llama.cpp the same vocabulary); nullptr without the file.
const Tokenizer* variant_tokenizer(const std::string& pre) {
  struct Slot {
    std::vector<uint8_t> bytes;
    std::unique_ptr<hearth::gguf::File> file;
    std::unique_ptr<Tokenizer> tok;
  };
  static std::map<std::string, Slot> slots;
  auto [it, fresh] = slots.try_emplace(pre);
  if (fresh) {
    const std::string of = fixture()["variants"]["of"].get<std::string>();
    std::string path = model_file(fixture()["models"][of]["file"].get<std::string>());
    if (path.empty()) return nullptr;
    auto src = hearth::gguf::File::open(path);
    REQUIRE(src.ok());
    auto tokens = (*src)->get_string_array("tokenizer.ggml.tokens");
    auto types = (*src)->get_int_array("tokenizer.ggml.token_type");
    auto merges = (*src)->get_string_array("tokenizer.ggml.merges");
    REQUIRE((tokens.ok() && types.ok() && merges.ok()));
    hearth::gguf::Writer w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", {tokens->begin(), tokens->end()});
    w.set_i32_array("tokenizer.ggml.token_type", {types->begin(), types->end()});
    w.set_string_array("tokenizer.ggml.merges", {merges->begin(), merges->end()});
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
      w.set_u32(key, static_cast<uint32_t>(*(*src)->get_uint(key)));
    }
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    Slot& slot = it->second;
    slot.bytes = w.serialize();
    auto f = hearth::gguf::File::from_memory(slot.bytes.data(), slot.bytes.size());
    REQUIRE(f.ok());
    slot.file = std::move(*f);
    auto t = Tokenizer::from_gguf(*slot.file);
    INFO((t.ok() ? std::string() : t.error().message));
    REQUIRE(t.ok());
    slot.tok = std::move(*t);
  }
  return it->second.tok.get();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size();) {
    if (hex[i] == ' ') {
      ++i;
      continue;
    }
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

void check_model(const std::string& key, const Tokenizer* tok) {
  if (!tok) {
    WARN(key + " model not installed; test skipped");
    return;
  }
  int matched = 0, total = 0;
  for (const json& c : fixture()["cases"]) {
    const std::string text = c["text"].get<std::string>();
    INFO(c["name"].get<std::string>() << ": " << text);
    const Ids want = c["ids"][key].get<Ids>();
    const Ids got = tok->encode(text, /*add_bos=*/false, /*parse_special=*/true);
    CHECK(got == want);
    matched += got == want;
    ++total;
    // Without special tokens every text comes back byte for byte.
    CHECK(tok->decode(tok->encode(text, false, false)) == text);
  }
  for (const json& c : fixture()["invalid_utf8"]) {
    INFO(c["name"].get<std::string>());
    const Ids got = tok->encode(from_hex(c["hex"].get<std::string>()), false, true);
    CHECK(got == c["ids"][key].get<Ids>());
    matched += got == c["ids"][key].get<Ids>();
    ++total;
  }
  WARN(key << ": " << matched << " of " << total << " fixture texts give llama.cpp's ids");
}

}  // namespace

TEST_CASE("Qwen2.5's tokenizer (pre qwen2) gives llama.cpp's ids for the fixture corpus") {
  check_model("qwen2.5-coder-0.5b", model_tokenizer("qwen2.5-coder-0.5b"));
}

TEST_CASE("SmolLM2's tokenizer (pre smollm) gives llama.cpp's ids for the fixture corpus") {
  check_model("smollm2-135m", model_tokenizer("smollm2-135m"));
}

TEST_CASE("pre llama-bpe, gpt-2 and default on Qwen2.5's vocabulary give llama.cpp's ids") {
  for (const json& pre : fixture()["variants"]["pre"]) {
    const std::string p = pre.get<std::string>();
    INFO("pre " << p);
    check_model(fixture()["variants"]["of"].get<std::string>() + "+" + p, variant_tokenizer(p));
  }
}

TEST_CASE("the chat models' tokenizer metadata") {
  if (const Tokenizer* q = model_tokenizer("qwen2.5-coder-0.5b")) {
    CHECK(q->n_vocab() == 151936);
    CHECK_FALSE(q->add_bos());
    CHECK(q->encode("hi", true, false) == q->encode("hi", false, false));  // no BOS for Qwen
    CHECK(q->find_token("<|im_start|>") == 151644);
    CHECK(q->is_eog(151645));  // <|im_end|>
    CHECK(q->is_eog(151643));  // <|endoftext|>
    CHECK(q->token_bytes(151644).empty());
    CHECK(q->token_bytes(151657) == "<tool_call>");  // user-defined: as written
  } else {
    WARN("qwen2.5-coder-0.5b model not installed; checks skipped");
  }
  if (const Tokenizer* s = model_tokenizer("smollm2-135m")) {
    CHECK(s->n_vocab() == 49152);
    CHECK_FALSE(s->add_bos());  // no add_bos_token key; llama.cpp's smollm default
    CHECK(s->is_eog(2));        // <|im_end|>
  } else {
    WARN("smollm2-135m model not installed; checks skipped");
  }
}
