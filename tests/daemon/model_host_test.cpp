// hearthd serving several models by name (issue 16): a models folder with two synthetic
// models and a damaged file (and, in some cases, the default model, an unreadable file),
// no --model. Each model is loaded on first use, within the memory budget (RAM's, or the
// GPU's on Vulkan; the least recently used idle model unloaded first), unloaded after its
// keep-alive, and its prompt cache survives the unloading on disk.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "daemon_harness.h"
#include "tests/tools/synthetic_model.h"

namespace {

using namespace hearth::test;
using json = nlohmann::json;

// A hearthd on a models folder holding synth-a (gemma3), synth-b (llama) and broken (not GGUF).
struct Host {
  TempDir dir;
  std::string models = dir.file("models");
  std::string socket = dir.file("h.sock");
  std::string log = dir.file("stderr.log");
  std::unique_ptr<Process> process;
  std::optional<uid_t> uid;  // run hearthd as this user

  Host() {
    std::filesystem::create_directories(models);
    write_synthetic_model(models, "synth-a.gguf", "", "gemma3");
    write_synthetic_model(models, "synth-b.gguf",
                          "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
                          "llama");
    std::ofstream(models + "/broken.gguf") << "not a GGUF file";
  }
  bool start(std::vector<std::string> extra = {}) {
    SpawnOptions o;
    o.args = {"--socket", socket,        "--threads",       "1",           "--ctx", "256", "--parallel",
              "2",        "--cache-dir", dir.file("cache"), "--log-level", "debug"};
    o.args.insert(o.args.end(), extra.begin(), extra.end());
    o.env = clean_env();
    o.env["HEARTH_MODELS"] = models;
    o.stderr_path = log;
    o.uid = uid;
    process = std::make_unique<Process>(o);
    return wait_until([&] { return healthy() || !process->running(); }) && process->running();
  }
  bool healthy() const { return http_request(socket, "GET", "/health").status == 200; }
  json get(const std::string& target) const { return json::parse(http_request(socket, "GET", target).body); }
  // The loaded models as /api/ps lists them, by id.
  std::map<std::string, json> ps() const {
    std::map<std::string, json> out;
    const json ps = get("/api/ps");
    for (const json& m : ps["models"]) out[m["id"].get<std::string>()] = m;
    return out;
  }
  HttpResponse complete(const std::string& model, const std::string& extra = "") const {
    const std::string body = "{\"model\": \"" + model + "\", \"prompt\": \"" + prompt() +
                             "\", \"max_tokens\": 6, \"temperature\": 0" + extra + "}";
    return http_request(socket, "POST", "/v1/completions", body);
  }
  // Long enough for several cache blocks on the synthetic tokenizer.
  static std::string prompt() {
    std::string p;
    for (int i = 0; i < 4; ++i) p += "the quick brown fox jumps over the lazy dog ";
    return p;
  }
  std::string stderr_text() const { return read_file(log); }
};

json body_of(const HttpResponse& r) {
  return json::parse(r.body, nullptr, false);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("without --model, hearthd lists every model in its folder and loads each on first use", "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  const json list = h.get("/v1/models");
  std::map<std::string, json> by_id;
  for (const json& m : list.at("data")) by_id[m["id"].get<std::string>()] = m;
  REQUIRE(by_id.size() == 3);
  CHECK(by_id["synth-a"]["meta"]["available"] == true);
  CHECK(by_id["synth-a"]["meta"]["arch"] == "gemma3");
  CHECK(by_id["synth-b"]["meta"]["arch"] == "llama");
  CHECK(by_id["synth-b"]["meta"]["file_bytes"].get<int64_t>() > 0);
  CHECK(by_id["broken"]["meta"]["available"] == false);
  CHECK_FALSE(by_id["broken"]["meta"]["error"].get<std::string>().empty());
  // The first usable model (by id) is loaded at start; the other waits for a request.
  CHECK(by_id["synth-a"]["meta"]["loaded"] == true);
  CHECK(by_id["synth-b"]["meta"]["loaded"] == false);
  CHECK(h.ps().count("synth-b") == 0);

  for (const char* id : {"synth-a", "synth-b"}) {
    INFO(id);
    const HttpResponse r = h.complete(id);
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK(body_of(r)["model"] == id);
  }
  const std::map<std::string, json> loaded = h.ps();
  REQUIRE(loaded.count("synth-b") == 1);
  CHECK(loaded.at("synth-b")["memory_bytes"].get<uint64_t>() > 0);
  CHECK(loaded.at("synth-b")["backend"] == "cpu");
  // A model the folder does not have is a 404; one it cannot serve says why; the others serve on.
  const HttpResponse unknown = h.complete("no-such-model");
  CHECK(unknown.status == 404);
  CHECK(body_of(unknown)["error"]["code"] == "model_not_found");
  const HttpResponse broken = h.complete("broken");
  CHECK(broken.status == 500);
  CHECK(body_of(broken)["error"]["code"] == "model_unavailable");
  CHECK(h.complete("synth-b").status == 200);
  CHECK(h.get("/v1/models/synth-b")["meta"]["loaded"] == true);
  // /metrics: a hearth_model_* series per model, labelled.
  const std::string metrics = http_request(h.socket, "GET", "/metrics").body;
  CHECK(metrics.find("hearth_model_loaded{model=\"synth-b\"} 1\n") != std::string::npos);
  CHECK(metrics.find("hearth_model_loaded{model=\"broken\"} 0\n") != std::string::npos);
  CHECK(metrics.find("hearth_model_loads_total{model=\"synth-b\"} 1\n") != std::string::npos);
  CHECK(metrics.find("hearth_model_generated_tokens_total{model=\"synth-b\"} 12\n") != std::string::npos);
  CHECK(metrics.find("hearth_model_generated_tokens_total{model=\"broken\"}") == std::string::npos);
  CHECK(http_request(h.socket, "GET", "/v1/models/no-such-model").status == 404);
}

TEST_CASE("/api/tokenize and /api/detokenize use the model the body names, loading it first", "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  REQUIRE(h.ps().count("synth-b") == 0);
  const HttpResponse t = http_request(h.socket, "POST", "/api/tokenize", R"({"model": "synth-b", "content": "fox"})");
  INFO(t.body);
  REQUIRE(t.status == 200);
  CHECK_FALSE(body_of(t)["tokens"].empty());
  CHECK(h.ps().count("synth-b") == 1);
  const json ids = body_of(t)["tokens"];
  const HttpResponse d =
      http_request(h.socket, "POST", "/api/detokenize", json{{"model", "synth-b"}, {"tokens", ids}}.dump());
  REQUIRE(d.status == 200);
  CHECK(body_of(d)["content"].get<std::string>().find("fox") != std::string::npos);
  CHECK(http_request(h.socket, "POST", "/api/tokenize", R"({"model": "nope", "content": "fox"})").status == 404);
  CHECK(http_request(h.socket, "POST", "/api/tokenize", R"({"content": "fox"})").status == 200);  // the default
}

TEST_CASE("a model file hearthd cannot read is listed as unavailable with its reason, and the others serve",
          "[daemon][models]") {
  Host h;
  const std::string locked = h.models + "/locked.gguf";
  std::filesystem::copy_file(h.models + "/synth-b.gguf", locked);
  REQUIRE(::chmod(locked.c_str(), 0) == 0);
  if (::geteuid() == 0) {
    // Root reads any file: hearthd runs as nobody, owning everything in the folder but the
    // locked file (root's, mode 0).
    h.uid = 65534;
    for (const auto& e : std::filesystem::recursive_directory_iterator(h.dir.path()))
      if (e.path() != locked) REQUIRE(::chown(e.path().c_str(), *h.uid, *h.uid) == 0);
    REQUIRE(::chown(h.dir.path().c_str(), *h.uid, *h.uid) == 0);
  }
  REQUIRE(h.start());
  INFO(h.stderr_text());
  const json list = h.get("/v1/models");
  json entry;
  for (const json& m : list.at("data"))
    if (m["id"] == "locked") entry = m;
  REQUIRE(entry.is_object());
  CHECK(entry["meta"]["available"] == false);
  CHECK_THAT(entry["meta"]["error"].get<std::string>(), Catch::Contains("ermission denied"));
  const HttpResponse r = h.complete("locked");
  CHECK(r.status == 500);
  CHECK(body_of(r)["error"]["code"] == "model_unavailable");
  CHECK(h.complete("synth-b").status == 200);
}

TEST_CASE("eight concurrent first requests for a model load it once", "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  std::vector<int> status(8, 0);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) clients.emplace_back([&, i] { status[i] = h.complete("synth-b").status; });
  for (std::thread& t : clients) t.join();
  for (int s : status) CHECK(s == 200);
  const std::map<std::string, json> loaded = h.ps();
  REQUIRE(loaded.count("synth-b") == 1);
  CHECK(h.get("/v1/models")["data"].size() == 3);
  int loads = 0;
  const json ps = h.get("/api/ps");
  for (const json& m : ps["models"])
    if (m["id"] == "synth-b") loads = m["loads"].get<int>();
  CHECK(loads == 1);
}

TEST_CASE("keep_alive 0 unloads the model after its answer, and /api/load and /api/unload work by name",
          "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  REQUIRE(h.complete("synth-b", ", \"keep_alive\": 0").status == 200);
  CHECK(wait_until([&] { return h.ps().count("synth-b") == 0; }));
  CHECK(h.complete("synth-b", ", \"keep_alive\": \"soon\"").status == 400);

  const HttpResponse load = http_request(h.socket, "POST", "/api/load", R"({"model": "synth-b", "keep_alive": "1h"})");
  REQUIRE(load.status == 200);
  CHECK(body_of(load)["model"]["expires_in_s"].get<double>() > 3000);
  CHECK(h.ps().count("synth-b") == 1);
  const HttpResponse unload = http_request(h.socket, "POST", "/api/unload", R"({"model": "synth-b"})");
  REQUIRE(unload.status == 200);
  CHECK(body_of(unload)["was_loaded"] == true);
  CHECK(wait_until([&] { return h.ps().count("synth-b") == 0; }));
  CHECK(http_request(h.socket, "POST", "/api/load", R"({"model": "nope"})").status == 404);
  CHECK(http_request(h.socket, "POST", "/api/load", R"({})").status == 400);
}

TEST_CASE("an unloading model stays in /api/ps, as unloading, until its cache writes end and its memory is free",
          "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  for (int round = 0; round < 3; ++round) {
    // A fresh prompt each round, so the unload has chunks of it to write.
    const std::string body = R"({"model": "synth-b", "max_tokens": 4, "temperature": 0, "prompt": "round )" +
                             std::to_string(round) + " " + Host::prompt() + "\"}";
    REQUIRE(http_request(h.socket, "POST", "/v1/completions", body).status == 200);
    const size_t unloaded_before = count_of(h.stderr_text(), "unloaded synth-b (");
    REQUIRE(body_of(http_request(h.socket, "POST", "/api/unload", R"({"model": "synth-b"})"))["was_loaded"] == true);
    bool gone = false;
    REQUIRE(wait_until([&] {
      const std::map<std::string, json> ps = h.ps();
      const auto it = ps.find("synth-b");
      if (it != ps.end() && it->second["state"] == "unloading") {
        CHECK(it->second["memory_bytes"].get<uint64_t>() > 0);  // still held, still charged
        CHECK(it->second["expires_at"].is_string());            // Ollama's fields are there too
      }
      gone = it == ps.end();
      return gone;
    }));
    // Gone from the listing only once hearthd has logged the end of the unload.
    CHECK(count_of(h.stderr_text(), "unloaded synth-b (") == unloaded_before + 1);
  }
}

TEST_CASE("a budget that fits one model unloads the idle one for the other, and its cache hits survive",
          "[daemon][models]") {
  // Each model's size as the host charges it, from a daemon without a budget.
  uint64_t a = 0, b = 0;
  {
    Host probe;
    REQUIRE(probe.start());
    REQUIRE(probe.complete("synth-b").status == 200);
    const std::map<std::string, json> loaded = probe.ps();
    a = loaded.at("synth-a")["memory_bytes"].get<uint64_t>();
    b = loaded.at("synth-b")["memory_bytes"].get<uint64_t>();
  }
  REQUIRE(a > 0);
  REQUIRE(b > 0);
  Host h;
  const uint64_t budget = std::max(a, b) + std::min(a, b) / 2;  // either alone, never both
  REQUIRE(h.start({"--memory-budget", std::to_string(budget)}));
  const HttpResponse first = h.complete("synth-a");
  REQUIRE(first.status == 200);
  const HttpResponse second = h.complete("synth-b");
  REQUIRE(second.status == 200);
  std::map<std::string, json> loaded = h.ps();
  CHECK(loaded.count("synth-a") == 0);
  CHECK(loaded.count("synth-b") == 1);
  // synth-a again: loaded again, in synth-b's place, and its prompt comes from the disk cache.
  const HttpResponse again = h.complete("synth-a");
  INFO(h.stderr_text());
  REQUIRE(again.status == 200);
  CHECK(body_of(again)["choices"][0]["text"] == body_of(first)["choices"][0]["text"]);
  CHECK(body_of(again)["timings"]["cached_tokens"]["disk"].get<int>() > 0);
  loaded = h.ps();
  CHECK(loaded.count("synth-a") == 1);
  CHECK(loaded.count("synth-b") == 0);

  // A model that alone exceeds the budget is an error naming the sizes: 507 for a request,
  // or, for the model loaded at start (synth-a, the first by id), hearthd exits saying so.
  REQUIRE(a != b);
  Host tight;
  const std::vector<std::string> args = {"--memory-budget", std::to_string((a + b) / 2)};
  if (a > b) {
    CHECK_FALSE(tight.start(args));
    CHECK(tight.process->wait_exit() == 1);
    CHECK(tight.stderr_text().find("more than the memory budget") != std::string::npos);
  } else {
    REQUIRE(tight.start(args));
    const HttpResponse r = tight.complete("synth-b");
    CHECK(r.status == 507);
    CHECK(body_of(r)["error"]["message"].get<std::string>().find("MiB") != std::string::npos);
    CHECK(tight.complete("synth-a").status == 200);
  }
}

TEST_CASE("the prompt cache of each model: /api/cache by name, and a clear of every model's forgets them all",
          "[daemon][models]") {
  Host h;
  REQUIRE(h.start());
  for (const char* id : {"synth-a", "synth-b"}) {
    REQUIRE(h.complete(id).status == 200);
    const HttpResponse again = h.complete(id);
    REQUIRE(again.status == 200);
    CHECK(body_of(again)["timings"]["cached_tokens"]["memory"].get<int>() > 0);
  }
  CHECK(h.get("/api/cache?model=synth-b")["model"] == "synth-b");
  const json all = h.get("/api/cache");
  CHECK(all["model"] == "synth-a");  // no name: the default model, and every loaded model's in "models"
  std::vector<std::string> ids;
  for (const json& m : all.at("models")) ids.push_back(m.at("model").get<std::string>());
  CHECK(ids == std::vector<std::string>{"synth-a", "synth-b"});
  CHECK(http_request(h.socket, "GET", "/api/cache?model=no-such-model").status == 404);
  const HttpResponse cleared = http_request(h.socket, "DELETE", "/api/cache");
  REQUIRE(cleared.status == 200);
  CHECK(body_of(cleared)["cleared"] == "all");
  for (const char* id : {"synth-a", "synth-b"}) {
    INFO(id);
    const json t = body_of(h.complete(id))["timings"]["cached_tokens"];
    INFO(h.stderr_text());
    CHECK(t["memory"].get<int>() == 0);
    CHECK(t["disk"].get<int>() == 0);
  }
  const HttpResponse one = http_request(h.socket, "DELETE", "/api/cache?model=synth-b");
  REQUIRE(one.status == 200);
  CHECK(body_of(one)["model"] == "synth-b");
  CHECK(body_of(one)["cleared"] == "model");
}

TEST_CASE("a hearthd given --model several times serves those models only, the first loaded at start",
          "[daemon][models]") {
  Host h;
  REQUIRE(h.start({"--model", h.models + "/synth-b.gguf", "--model", h.models + "/synth-a.gguf"}));
  // HEARTH_MODELS is set, but with --model only the models given are served.
  const json list = h.get("/v1/models");
  std::map<std::string, bool> loaded;
  for (const json& m : list.at("data")) loaded[m["id"].get<std::string>()] = m["meta"]["loaded"].get<bool>();
  CHECK(loaded == std::map<std::string, bool>{{"synth-a", false}, {"synth-b", true}});
  CHECK(h.complete("synth-a").status == 200);
  CHECK(h.complete("broken").status == 404);

  Host bad;
  CHECK_FALSE(bad.start({"--model", bad.models + "/synth-a.gguf", "--model", bad.models + "/missing.gguf"}));
  CHECK(bad.process->wait_exit() == 1);
  CHECK(bad.stderr_text().find("missing.gguf") != std::string::npos);
}

TEST_CASE("a draft model's weights and KV are charged to the memory budget with the model it drafts for",
          "[daemon][models]") {
  // synth-b alone, then with a draft model of its vocabulary (another file of the same
  // synthetic llama, outside the models folder so that it is not served itself).
  Host plain;
  const std::vector<std::string> args = {"--model", plain.models + "/synth-b.gguf"};
  REQUIRE(plain.start(args));
  const uint64_t alone = plain.ps().at("synth-b")["memory_bytes"].get<uint64_t>();
  Host with;
  const std::string draft = write_synthetic_model(with.dir.file(""), "draft.gguf", "", "llama");
  const uint64_t draft_file = std::filesystem::file_size(draft);
  std::vector<std::string> drafted = {"--model", with.models + "/synth-b.gguf", "--draft-model", draft};
  REQUIRE(with.start(drafted));
  INFO(with.stderr_text());
  REQUIRE(with.stderr_text().find("draft model: ") != std::string::npos);
  const uint64_t charged = with.ps().at("synth-b")["memory_bytes"].get<uint64_t>();
  // Its weights, and KV for --parallel 2 contexts of --ctx 256 + 7 tokens (> 0).
  CHECK(charged > alone + draft_file);
  // A budget that holds synth-b alone but not with its draft model: hearthd does not start.
  Host tight;
  const std::string budget = std::to_string(alone + draft_file / 2);
  drafted.insert(drafted.end(), {"--memory-budget", budget});
  drafted[1] = tight.models + "/synth-b.gguf";
  drafted[3] = write_synthetic_model(tight.dir.file(""), "draft.gguf", "", "llama");
  CHECK_FALSE(tight.start(drafted));
  CHECK(tight.process->wait_exit() == 1);
  CHECK(tight.stderr_text().find("more than the memory budget") != std::string::npos);
  Host fits;
  REQUIRE(fits.start({"--model", fits.models + "/synth-b.gguf", "--memory-budget", budget}));
}

TEST_CASE("models on a GPU count against --gpu-memory-budget, not RAM's", "[daemon][models][vulkan]") {
  if (run_hearthd({"--list-devices", "--threads", "1"}).out.find("; usable") == std::string::npos) {
    WARN("no usable Vulkan device; test skipped");
    return;
  }
  const std::vector<std::string> vulkan = {"--backend", "vulkan"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), vulkan.begin(), vulkan.end());
    return more;
  };
  // Each model's size on the device, from a daemon with the default budgets.
  uint64_t a = 0, b = 0;
  {
    Host probe;
    REQUIRE(probe.start(vulkan));
    REQUIRE(probe.complete("synth-b").status == 200);
    const std::map<std::string, json> loaded = probe.ps();
    for (const char* id : {"synth-a", "synth-b"}) {
      INFO(id << ": " << loaded.at(id).dump());
      CHECK(loaded.at(id)["backend"] == "vulkan");
      CHECK_FALSE(loaded.at(id)["device"].get<std::string>().empty());
      CHECK(loaded.at(id)["device_memory_bytes"] == loaded.at(id)["memory_bytes"]);
    }
    a = loaded.at("synth-a")["device_memory_bytes"].get<uint64_t>();
    b = loaded.at("synth-b")["device_memory_bytes"].get<uint64_t>();
    CHECK_THAT(probe.stderr_text(), Catch::Contains("MiB of RAM, ") && Catch::Contains("MiB of vulkan: "));
  }
  REQUIRE(a > 0);
  REQUIRE(b > 0);
  const std::string one = std::to_string(std::max(a, b) + std::min(a, b) / 2);  // either alone, never both

  // A RAM budget that fits one model: both stay loaded, their memory is the GPU's.
  Host ram;
  REQUIRE(ram.start(with({"--memory-budget", one})));
  REQUIRE(ram.complete("synth-b").status == 200);
  CHECK(ram.ps().size() == 2);

  // A GPU budget that fits one: the idle one goes for the other, and comes back with its cache.
  Host gpu;
  REQUIRE(gpu.start(with({"--gpu-memory-budget", one})));
  const HttpResponse first = gpu.complete("synth-a");
  REQUIRE(first.status == 200);
  REQUIRE(gpu.complete("synth-b").status == 200);
  CHECK(gpu.ps().count("synth-a") == 0);
  const HttpResponse again = gpu.complete("synth-a");
  INFO(gpu.stderr_text());
  REQUIRE(again.status == 200);
  CHECK(body_of(again)["choices"][0]["text"] == body_of(first)["choices"][0]["text"]);
  CHECK(body_of(again)["timings"]["cached_tokens"]["disk"].get<int>() > 0);
  CHECK(gpu.ps().count("synth-b") == 0);

  // A model alone over the GPU's budget: 507 naming it, or hearthd exits when it is the start model.
  Host tight;
  const std::vector<std::string> args = with({"--gpu-memory-budget", std::to_string((a + b) / 2)});
  if (a > b) {
    CHECK_FALSE(tight.start(args));
    CHECK(tight.process->wait_exit() == 1);
    CHECK_THAT(tight.stderr_text(), Catch::Contains("GPU memory budget"));
  } else {
    REQUIRE(tight.start(args));
    const HttpResponse r = tight.complete("synth-b");
    CHECK(r.status == 507);
    CHECK_THAT(body_of(r)["error"]["message"].get<std::string>(), Catch::Contains("--gpu-memory-budget"));
    CHECK(tight.complete("synth-a").status == 200);
  }
}

TEST_CASE(
    "the default model beside the synthetic ones: all listed, each answers by name, the other unloaded to make room",
    "[daemon][models]") {
  const std::string gemma = gemma_model_path();
  if (gemma.empty()) {
    WARN("the default model is not installed (scripts/fetch-model gemma3:270m); test skipped");
    return;
  }
  Host h;
  std::filesystem::create_symlink(gemma, h.models + "/gemma-3-270m-q4_k_m.gguf");
  REQUIRE(h.start());
  const json list = h.get("/v1/models");
  std::map<std::string, json> by_id;
  for (const json& m : list.at("data")) by_id[m["id"].get<std::string>()] = m;
  REQUIRE(by_id.count("gemma3:270m") == 1);
  const json& meta = by_id["gemma3:270m"]["meta"];
  CHECK(meta["aliases"] == json::array({"gemma-3-270m-q4_k_m"}));  // the id is the catalog's name
  CHECK(meta["arch"] == "gemma3");
  CHECK(meta["quantization"] == "Q4_K_M");
  CHECK(meta["loaded"] == true);  // the first by id: loaded at start
  // Each answers by name (the default model by its file's name too).
  for (const char* name : {"synth-b", "gemma3:270m", "gemma-3-270m-q4_k_m", "synth-a"}) {
    INFO(name);
    const HttpResponse r = h.complete(name);
    INFO(r.body);
    REQUIRE(r.status == 200);
    CHECK_FALSE(body_of(r)["choices"][0]["text"].get<std::string>().empty());
  }
  CHECK(h.ps().size() == 3);
  // A budget that holds the default model and not another beside it: asking for synth-b
  // unloads the idle default model, and asking for it again loads it again.
  const uint64_t gemma_bytes = h.ps().at("gemma3:270m")["memory_bytes"].get<uint64_t>();
  Host tight;
  std::filesystem::create_symlink(gemma, tight.models + "/gemma-3-270m-q4_k_m.gguf");
  REQUIRE(tight.start({"--memory-budget", std::to_string(gemma_bytes + 1024 * 1024)}));
  const HttpResponse first = tight.complete("gemma3:270m");
  REQUIRE(first.status == 200);
  REQUIRE(tight.complete("synth-b").status == 200);
  CHECK(tight.ps().count("gemma3:270m") == 0);
  const HttpResponse again = tight.complete("gemma3:270m");
  REQUIRE(again.status == 200);
  CHECK(body_of(again)["choices"][0]["text"] == body_of(first)["choices"][0]["text"]);
  CHECK(tight.ps().count("gemma3:270m") == 1);
}

TEST_CASE("each model reports its own sampling defaults: its file's general.sampling keys", "[daemon][models]") {
  Host h;
  SyntheticOptions o;
  o.arch = "gemma3";  // its architecture implies its chat template
  o.extra_f32 = {{"general.sampling.temp", 0.6f}, {"general.sampling.top_p", 0.95f}};
  o.extra_i32 = {{"general.sampling.top_k", 20}};
  hearth::Result<std::vector<uint8_t>> bytes = make_synthetic_model(o);
  REQUIRE(bytes.ok());
  std::ofstream(h.models + "/synth-s.gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  REQUIRE(h.start());

  const json expected{{"source", "gguf"}, {"temperature", 0.6}, {"top_k", 20}, {"top_p", 0.95}};
  CHECK(h.get("/v1/models/synth-s")["meta"]["sampling_defaults"] == expected);
  CHECK(h.get("/v1/models/synth-a")["meta"]["sampling_defaults"] == json::object());  // none: the API's
  bool listed = false;
  const json installed = h.get("/api/models");
  for (const json& m : installed["models"]) {
    if (m["id"] != "synth-s") continue;
    listed = true;
    CHECK(m["sampling_defaults"] == expected);
  }
  CHECK(listed);
  // Loaded, it reports the same, and hearthd's log says which defaults it samples with.
  REQUIRE(h.complete("synth-s").status == 200);
  CHECK(h.get("/v1/models/synth-s")["meta"]["loaded"] == true);
  CHECK(h.get("/v1/models/synth-s")["meta"]["sampling_defaults"] == expected);
  CHECK(h.stderr_text().find("sampling defaults: temperature 0.6, top_k 20, top_p 0.95 (gguf)") != std::string::npos);
}
