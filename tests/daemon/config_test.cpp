// hearthd's configuration: flags > HEARTH_* environment > TOML file > defaults, one set of
// checks for every source, and errors that name the key and where it came from.
#include "daemon/config.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/duration.h"

namespace {

using namespace hearth;
using namespace hearth::daemon;

struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup lookup() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

// A TOML file in a fresh temporary directory, removed with the object.
struct TomlFile {
  std::filesystem::path dir;
  std::string path;
  explicit TomlFile(const std::string& text) {
    char tmpl[] = "/tmp/hearthd_config_test_XXXXXX";
    dir = ::mkdtemp(tmpl);
    path = (dir / "hearthd.toml").string();
    std::ofstream(path) << text;
  }
  ~TomlFile() { std::filesystem::remove_all(dir); }
};

Result<DaemonConfig> load(std::vector<std::string> args, const Env& env = {}) {
  return load_config(args, env.lookup());
}

std::string error_of(const Result<DaemonConfig>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("defaults apply when no source sets an option", "[daemon][config]") {
  Result<DaemonConfig> r = load({});
  REQUIRE(r.ok());
  CHECK(r->action == Action::Serve);
  CHECK(r->model.empty());
  CHECK(r->chat_template.empty());  // the model's own
  CHECK(r->socket.empty());
  CHECK(r->backend == "auto");
  CHECK(r->threads == 0);
  CHECK(r->ctx == 4096);
  CHECK_FALSE(r->ctx_set);
  CHECK(r->parallel == 4);
  CHECK(r->prefill_chunk == 128);
  CHECK(r->step_budget_ms == 100);
  CHECK(r->speculative == "ngram");
  CHECK(r->draft_model.empty());
  CHECK(r->queue_max == 64);
  CHECK(r->cache_max_bytes == 0);  // automatic: min(4 GiB, 10% of free space)
  CHECK_FALSE(r->no_disk_cache);
  CHECK(r->listen_tcp.empty());
  CHECK_FALSE(r->allow_remote);
  CHECK(r->log_level == LogLevel::Info);
  CHECK(r->shutdown_grace_s == 30);
  CHECK(r->write_timeout_s == 60);
  CHECK(r->kv_type == DType::F16);
}

TEST_CASE("every option can be given as a flag", "[daemon][config]") {
  Result<DaemonConfig> r = load({"--model",
                                 "m.gguf",
                                 "--socket",
                                 "/tmp/s.sock",
                                 "--socket-group",
                                 "hearth",
                                 "--backend",
                                 "cpu",
                                 "--threads",
                                 "3",
                                 "--ctx",
                                 "1024",
                                 "--parallel",
                                 "2",
                                 "--prefill-chunk",
                                 "0",
                                 "--step-budget-ms",
                                 "40",
                                 "--speculative",
                                 "off",
                                 "--draft-model",
                                 "d.gguf",
                                 "--queue-max",
                                 "5",
                                 "--cache-dir",
                                 "/tmp/c",
                                 "--cache-max-bytes",
                                 "4294967296",
                                 "--cache-user-max-bytes",
                                 "1073741824",
                                 "--no-disk-cache",
                                 "--listen-tcp",
                                 "127.0.0.1:8080",
                                 "--allow-remote",
                                 "--log-level",
                                 "debug",
                                 "--shutdown-grace",
                                 "7",
                                 "--write-timeout",
                                 "9",
                                 "--kv-type",
                                 "f32"});
  REQUIRE(r.ok());
  CHECK(r->model == "m.gguf");
  CHECK(r->socket == "/tmp/s.sock");
  CHECK(r->socket_group == "hearth");
  CHECK(r->backend == "cpu");
  CHECK(r->threads == 3);
  CHECK(r->ctx == 1024);
  CHECK(r->ctx_set);
  CHECK(r->parallel == 2);
  CHECK(r->prefill_chunk == 0);
  CHECK(r->step_budget_ms == 40);
  CHECK(r->speculative == "off");
  CHECK(r->draft_model == "d.gguf");
  CHECK(r->queue_max == 5);
  CHECK(r->cache_dir == "/tmp/c");
  CHECK(r->cache_max_bytes == 4294967296);
  CHECK(r->cache_user_max_bytes == 1073741824);
  CHECK(r->no_disk_cache);
  CHECK(r->listen_tcp == "127.0.0.1:8080");
  CHECK(r->allow_remote);
  CHECK(r->log_level == LogLevel::Debug);
  CHECK(r->shutdown_grace_s == 7);
  CHECK(r->write_timeout_s == 9);
  CHECK(r->kv_type == DType::F32);
}

TEST_CASE("the KV type q8_0 comes from --kv-type and from kv_type in the config file", "[daemon][config]") {
  CHECK(load({"--kv-type", "q8_0"})->kv_type == DType::Q8_0);
  TomlFile f("kv_type = \"q8_0\"\n");
  CHECK(load({"--config", f.path})->kv_type == DType::Q8_0);
  CHECK_FALSE(load({"--kv-type", "q4_0"}).ok());
}

TEST_CASE(
    "The flag --listen-ollama alone serves Ollama's address, and a value, a boolean or listen_ollama say otherwise",
    "[daemon][config]") {
  CHECK(load({})->listen_ollama.empty());
  CHECK(load({"--listen-ollama"})->listen_ollama == "127.0.0.1:11434");
  Result<DaemonConfig> r = load({"--listen-ollama", "--threads", "2"});
  REQUIRE(r.ok());
  CHECK(r->listen_ollama == "127.0.0.1:11434");
  CHECK(r->threads == 2);
  CHECK(load({"--threads", "2", "--listen-ollama"})->listen_ollama == "127.0.0.1:11434");
  CHECK(load({"--listen-ollama", "127.0.0.1:5000"})->listen_ollama == "127.0.0.1:5000");
  CHECK(load({"--listen-ollama=[::1]:7"})->listen_ollama == "[::1]:7");
  Env env;
  for (const auto& [value, want] : std::vector<std::pair<std::string, std::string>>{
           {"1", "127.0.0.1:11434"}, {"on", "127.0.0.1:11434"}, {"off", ""}, {"127.0.0.1:9", "127.0.0.1:9"}}) {
    INFO(value);
    env.vars["HEARTH_LISTEN_OLLAMA"] = value;
    CHECK(load({}, env)->listen_ollama == want);
  }
  TomlFile on("listen_ollama = true\n"), off("listen_ollama = false\n"), at("listen_ollama = \"127.0.0.1:9\"\n");
  CHECK(load({"--config", on.path})->listen_ollama == "127.0.0.1:11434");
  CHECK(load({"--config", off.path})->listen_ollama.empty());
  CHECK(load({"--config", at.path})->listen_ollama == "127.0.0.1:9");
  CHECK(load({"--config", on.path, "--listen-ollama", "127.0.0.1:8"})->listen_ollama == "127.0.0.1:8");
  CHECK_THAT(error_of(load({"--listen-ollama", "localhost"})),
             Catch::Contains("--listen-ollama") && Catch::Contains("HOST:PORT"));
  TomlFile number("listen_ollama = 11434\n");
  CHECK_THAT(error_of(load({"--config", number.path})), Catch::Contains("listen_ollama"));
}

TEST_CASE("the chat template override comes from a flag, HEARTH_CHAT_TEMPLATE or chat_template", "[daemon][config]") {
  CHECK(load({"--chat-template", "llama3"})->chat_template == "llama3");
  Env env;
  env.vars["HEARTH_CHAT_TEMPLATE"] = "gemma";
  CHECK(load({}, env)->chat_template == "gemma");
  TomlFile f("chat_template = \"chatml\"\n");
  CHECK(load({"--config", f.path})->chat_template == "chatml");
  CHECK(load({"--config", f.path}, env)->chat_template == "gemma");
  const std::string e = error_of(load({"--chat-template", "mistral"}));
  CHECK(e.find("chat-template") != std::string::npos);
  CHECK(e.find("chatml") != std::string::npos);
}

TEST_CASE("flags win over the environment which wins over the file which wins over defaults", "[daemon][config]") {
  TomlFile f(
      "threads = 3\n"
      "parallel = 5\n"
      "queue_max = 9\n"
      "socket_group = \"hearth\"\n"
      "cache_max_bytes = 4294967296\n"
      "no_disk_cache = true\n"
      "draft_model = \"file-draft.gguf\"\n");
  Env env;
  env.vars = {{"HEARTH_CONFIG", f.path},
              {"HEARTH_THREADS", "6"},
              {"HEARTH_PARALLEL", "7"},
              {"HEARTH_DRAFT_MODEL", "env-draft.gguf"}};
  Result<DaemonConfig> r = load({"--threads", "8"}, env);
  REQUIRE(r.ok());
  CHECK(r->config_file == f.path);
  CHECK(r->threads == 8);    // flag > env > file
  CHECK(r->parallel == 7);   // env > file
  CHECK(r->queue_max == 9);  // file > default
  CHECK(r->socket_group == "hearth");
  CHECK(r->cache_max_bytes == 4294967296);
  CHECK(r->no_disk_cache);
  CHECK(r->draft_model == "env-draft.gguf");  // env > file
  CHECK(r->ctx == 4096);                      // default
}

TEST_CASE("the --config flag wins over HEARTH_CONFIG", "[daemon][config]") {
  TomlFile a("threads = 2\n"), b("threads = 4\n");
  Env env;
  env.vars = {{"HEARTH_CONFIG", a.path}};
  Result<DaemonConfig> r = load({"--config", b.path}, env);
  REQUIRE(r.ok());
  CHECK(r->threads == 4);
}

TEST_CASE("environment variables are HEARTH_ plus the upper-case key", "[daemon][config]") {
  Env env;
  env.vars = {{"HEARTH_MODEL", "gemma"},           {"HEARTH_SOCKET", "/tmp/x.sock"},
              {"HEARTH_SOCKET_GROUP", "users"},    {"HEARTH_PREFILL_CHUNK", "64"},
              {"HEARTH_ALLOW_REMOTE", "yes"},      {"HEARTH_LOG_LEVEL", "warn"},
              {"HEARTH_KV_TYPE", "f32"},           {"HEARTH_SHUTDOWN_GRACE", "0"},
              {"HEARTH_LISTEN_TCP", "[::1]:9000"}, {"HEARTH_SIMD", "not an option: ignored"}};
  Result<DaemonConfig> r = load({}, env);
  REQUIRE(r.ok());
  CHECK(r->model == "gemma");
  CHECK(r->socket == "/tmp/x.sock");
  CHECK(r->socket_group == "users");
  CHECK(r->prefill_chunk == 64);
  CHECK(r->allow_remote);
  CHECK(r->log_level == LogLevel::Warn);
  CHECK(r->kv_type == DType::F32);
  CHECK(r->shutdown_grace_s == 0);
  CHECK(r->listen_tcp == "[::1]:9000");
}

TEST_CASE("an empty environment variable counts as unset", "[daemon][config]") {
  Env env;
  env.vars = {{"HEARTH_THREADS", ""}};
  Result<DaemonConfig> r = load({}, env);
  REQUIRE(r.ok());
  CHECK(r->threads == 0);
}

TEST_CASE("bad environment values name the variable", "[daemon][config]") {
  Env env;
  SECTION("not an integer") {
    env.vars = {{"HEARTH_THREADS", "four"}};
    const std::string e = error_of(load({}, env));
    CHECK_THAT(e, Catch::Contains("environment variable HEARTH_THREADS") && Catch::Contains("not an integer"));
  }
  SECTION("out of range") {
    env.vars = {{"HEARTH_PARALLEL", "0"}};
    const std::string e = error_of(load({}, env));
    CHECK_THAT(e, Catch::Contains("HEARTH_PARALLEL") && Catch::Contains("out of range"));
  }
  SECTION("not a boolean") {
    env.vars = {{"HEARTH_NO_DISK_CACHE", "maybe"}};
    CHECK_THAT(error_of(load({}, env)), Catch::Contains("HEARTH_NO_DISK_CACHE") && Catch::Contains("boolean"));
  }
  SECTION("not a choice") {
    env.vars = {{"HEARTH_BACKEND", "metal"}};
    CHECK_THAT(error_of(load({}, env)),
               Catch::Contains("HEARTH_BACKEND") && Catch::Contains("auto, cpu, vulkan, cuda"));
  }
}

TEST_CASE("the memory budget and the keep-alive come from any source, and a keep-alive must be a duration",
          "[daemon][config]") {
  const Result<DaemonConfig> d = load({});
  CHECK(d->memory_budget == 0);
  CHECK(d->keep_alive == "5m");
  CHECK(load({"--memory-budget", "1073741824"})->memory_budget == 1073741824);
  CHECK(load({"--keep-alive", "1h30m"})->keep_alive == "1h30m");
  Env env;
  env.vars = {{"HEARTH_KEEP_ALIVE", "-1"}};
  CHECK(load({}, env)->keep_alive == "-1");
  TomlFile f("keep_alive = \"30s\"\nmemory_budget = 4096\n");
  CHECK(load({"--config", f.path})->keep_alive == "30s");
  CHECK(load({"--config", f.path})->memory_budget == 4096);
  CHECK_THAT(error_of(load({"--keep-alive", "soon"})), Catch::Contains("--keep-alive") && Catch::Contains("duration"));
  CHECK_THAT(error_of(load({"--memory-budget", "-5"})), Catch::Contains("--memory-budget"));
  CHECK(d->gpu_memory_budget == 0);
  CHECK(load({"--gpu-memory-budget", "2147483648"})->gpu_memory_budget == 2147483648);
  env.vars = {{"HEARTH_GPU_MEMORY_BUDGET", "1048576"}};
  CHECK(load({}, env)->gpu_memory_budget == 1048576);
  TomlFile g("gpu_memory_budget = 8192\n");
  CHECK(load({"--config", g.path})->gpu_memory_budget == 8192);
  CHECK_THAT(error_of(load({"--gpu-memory-budget", "-1"})), Catch::Contains("--gpu-memory-budget"));
}

TEST_CASE("the --model option is repeatable: the first is the start model, the others are served too",
          "[daemon][config]") {
  const Result<DaemonConfig> one = load({"--model", "a.gguf"});
  CHECK(one->model == "a.gguf");
  CHECK(one->more_models.empty());
  const Result<DaemonConfig> three = load({"--model", "a.gguf", "--model", "smollm2:135m", "--model", "/x/c.gguf"});
  CHECK(three->model == "a.gguf");
  CHECK(three->more_models == std::vector<std::string>{"smollm2:135m", "/x/c.gguf"});
}

TEST_CASE("durations read as Ollama's keep_alive: units, bare seconds, negative for ever", "[daemon][config]") {
  using std::chrono::milliseconds;
  CHECK(hearth::parse_duration("5m") == milliseconds(300000));
  CHECK(hearth::parse_duration("1h30m") == milliseconds(5400000));
  CHECK(hearth::parse_duration("250ms") == milliseconds(250));
  CHECK(hearth::parse_duration("1.5s") == milliseconds(1500));
  CHECK(hearth::parse_duration("300") == milliseconds(300000));
  CHECK(hearth::parse_duration("0") == milliseconds(0));
  CHECK(hearth::parse_duration("-1") == milliseconds(-1000));
  CHECK(hearth::parse_duration("-1m") == milliseconds(-60000));
  for (const char* bad : {"", "-", "m", "5x", "5 m", "1.2.3s", "5m3", "3m5", "1e3", "9999999999999999h", "s5"}) {
    INFO(bad);
    CHECK_FALSE(hearth::parse_duration(bad));
  }
}

TEST_CASE("bad flags are errors naming the option", "[daemon][config]") {
  CHECK_THAT(error_of(load({"--threads", "-1"})), Catch::Contains("--threads") && Catch::Contains("out of range"));
  CHECK_THAT(error_of(load({"--ctx", "12x"})), Catch::Contains("--ctx") && Catch::Contains("not an integer"));
  CHECK_THAT(error_of(load({"--log-level", "loud"})), Catch::Contains("--log-level"));
  CHECK_THAT(error_of(load({"--kv-type", "q4_0"})), Catch::Contains("--kv-type"));
  CHECK_THAT(error_of(load({"--listen-tcp", "localhost"})),
             Catch::Contains("--listen-tcp") && Catch::Contains("HOST:PORT"));
  CHECK_THAT(error_of(load({"--listen-tcp", "127.0.0.1:70000"})), Catch::Contains("HOST:PORT"));
  CHECK_THAT(error_of(load({"--no-such-option"})), Catch::Contains("command line"));
  CHECK_THAT(error_of(load({"stray"})), Catch::Contains("command line"));
}

TEST_CASE("bad TOML files are errors naming the file and the key", "[daemon][config]") {
  SECTION("unknown key") {
    TomlFile f("threads = 2\nthreds = 3\n");
    const std::string e = error_of(load({"--config", f.path}));
    CHECK_THAT(e, Catch::Contains(f.path) && Catch::Contains("'threds'") && Catch::Contains("not a hearthd option"));
  }
  SECTION("option names with '-' are not keys") {
    TomlFile f("socket-group = \"x\"\n");
    CHECK_THAT(error_of(load({"--config", f.path})), Catch::Contains("'socket-group'"));
  }
  SECTION("wrong type: string for an integer") {
    TomlFile f("threads = \"2\"\n");
    const std::string e = error_of(load({"--config", f.path}));
    CHECK_THAT(e, Catch::Contains("'threads'") && Catch::Contains("must be an integer, not a string"));
  }
  SECTION("wrong type: integer for a boolean") {
    TomlFile f("no_disk_cache = 1\n");
    CHECK_THAT(error_of(load({"--config", f.path})),
               Catch::Contains("'no_disk_cache'") && Catch::Contains("must be a boolean"));
  }
  SECTION("wrong type: float and table") {
    TomlFile f("ctx = 1.5\n");
    CHECK_THAT(error_of(load({"--config", f.path})), Catch::Contains("'ctx'") && Catch::Contains("a float"));
    TomlFile g("[model]\npath = \"x\"\n");
    CHECK_THAT(error_of(load({"--config", g.path})), Catch::Contains("'model'") && Catch::Contains("a table"));
  }
  SECTION("out of range") {
    TomlFile f("shutdown_grace = -5\n");
    CHECK_THAT(error_of(load({"--config", f.path})),
               Catch::Contains("'shutdown_grace'") && Catch::Contains("out of range"));
  }
  SECTION("not a choice") {
    TomlFile f("kv_type = \"bf16\"\n");
    CHECK_THAT(error_of(load({"--config", f.path})), Catch::Contains("'kv_type'") && Catch::Contains("f16, f32"));
  }
  SECTION("syntax error") {
    TomlFile f("threads = = 2\n");
    CHECK_THAT(error_of(load({"--config", f.path})), Catch::Contains(f.path) && Catch::Contains("line 1"));
  }
  SECTION("missing file") {
    CHECK_THAT(error_of(load({"--config", "/nonexistent/hearthd.toml"})), Catch::Contains("/nonexistent/hearthd.toml"));
  }
}

TEST_CASE("a bad file value is an error even when a flag overrides it", "[daemon][config]") {
  TomlFile f("threads = \"many\"\n");
  CHECK_THAT(error_of(load({"--config", f.path, "--threads", "2"})), Catch::Contains("'threads'"));
}

TEST_CASE("help, version and list-devices are actions", "[daemon][config]") {
  Result<DaemonConfig> h = load({"--help"});
  REQUIRE(h.ok());
  CHECK(h->action == Action::Help);
  CHECK_THAT(h->help_text, Catch::Contains("--socket-group") && Catch::Contains("HEARTH_"));
  Result<DaemonConfig> v = load({"--version"});
  REQUIRE(v.ok());
  CHECK(v->action == Action::Version);
  Result<DaemonConfig> d = load({"--list-devices", "--threads", "1"});
  REQUIRE(d.ok());
  CHECK(d->action == Action::ListDevices);
  CHECK(d->threads == 1);
}

TEST_CASE("default socket path: root, XDG_RUNTIME_DIR, or an error asking for --socket", "[daemon][config]") {
  Env env;
  env.vars = {{"XDG_RUNTIME_DIR", "/run/user/1000"}};
  CHECK(*default_socket_path(env.lookup(), 0) == "/run/hearth/hearth.sock");
  CHECK(*default_socket_path(env.lookup(), 1000) == "/run/user/1000/hearth/hearth.sock");
  Env none;
  Result<std::string> r = default_socket_path(none.lookup(), 1000);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("XDG_RUNTIME_DIR") && Catch::Contains("--socket"));
}

TEST_CASE("default cache dir: root, XDG_CACHE_HOME, then HOME", "[daemon][config]") {
  Env env;
  env.vars = {{"XDG_CACHE_HOME", "/c"}, {"HOME", "/home/u"}};
  CHECK(default_cache_dir(env.lookup(), 0) == "/var/cache/hearth");
  CHECK(default_cache_dir(env.lookup(), 1000) == "/c/hearth");
  env.vars.erase("XDG_CACHE_HOME");
  CHECK(default_cache_dir(env.lookup(), 1000) == "/home/u/.cache/hearth");
}

TEST_CASE("the Vulkan device index (vk-device) comes from any source", "[daemon][config]") {
  Result<DaemonConfig> r = load({});
  REQUIRE(r.ok());
  CHECK(r->vk_device == -1);  // the backend chooses
  r = load({"--backend", "vulkan", "--vk-device", "1"});
  REQUIRE(r.ok());
  CHECK(r->backend == "vulkan");
  CHECK(r->vk_device == 1);
  Env env;
  env.vars["HEARTH_VK_DEVICE"] = "2";
  r = load({}, env);
  REQUIRE(r.ok());
  CHECK(r->vk_device == 2);
  TomlFile file("vk_device = 3\n");
  r = load({"--config", file.path});
  REQUIRE(r.ok());
  CHECK(r->vk_device == 3);
  CHECK_THAT(error_of(load({"--vk-device", "-2"})), Catch::Contains("--vk-device") && Catch::Contains("out of range"));
  CHECK_THAT(error_of(load({"--vk-device", "gpu"})),
             Catch::Contains("--vk-device") && Catch::Contains("not an integer"));
}

TEST_CASE("the CUDA device index (cuda-device) comes from any source", "[daemon][config]") {
  Result<DaemonConfig> r = load({});
  REQUIRE(r.ok());
  CHECK(r->cuda_device == -1);  // the backend chooses
  r = load({"--backend", "cuda", "--cuda-device", "1"});
  REQUIRE(r.ok());
  CHECK(r->backend == "cuda");
  CHECK(r->cuda_device == 1);
  CHECK(r->vk_device == -1);
  Env env;
  env.vars["HEARTH_CUDA_DEVICE"] = "2";
  r = load({}, env);
  REQUIRE(r.ok());
  CHECK(r->cuda_device == 2);
  TomlFile file("cuda_device = 3\n");
  r = load({"--config", file.path});
  REQUIRE(r.ok());
  CHECK(r->cuda_device == 3);
  CHECK_THAT(error_of(load({"--cuda-device", "-2"})),
             Catch::Contains("--cuda-device") && Catch::Contains("out of range"));
  CHECK_THAT(error_of(load({"--cuda-device", "gpu"})),
             Catch::Contains("--cuda-device") && Catch::Contains("not an integer"));
}

TEST_CASE("cache_scope is user by default and takes group or shared, allowed_origins is a list", "[daemon][config]") {
  auto d = load({});
  REQUIRE(d);
  CHECK(d->cache_scope == "user");
  CHECK(d->allowed_origins.empty());
  auto r = load({"--cache-scope", "group", "--allowed-origins", " http://localhost:5173 ,,https://app.example"});
  REQUIRE(r);
  CHECK(r->cache_scope == "group");
  CHECK(r->allowed_origins == std::vector<std::string>{"http://localhost:5173", "https://app.example"});
  CHECK_THAT(error_of(load({"--cache-scope", "everyone"})), Catch::Contains("--cache-scope"));
}
