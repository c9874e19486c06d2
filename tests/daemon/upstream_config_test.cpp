// [[upstream]] tables of hearthd's config file (issue 45): what they hold, the errors that
// name the table and the key, and the API key file that must be private.
#include "daemon/upstream_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "daemon/config.h"
#include "daemon/upstream_flags.h"

namespace {

using namespace hearth;
using namespace hearth::daemon;

// A fresh temporary directory, removed with the object.
struct TempDir {
  std::filesystem::path dir;
  TempDir() {
    char tmpl[] = "/tmp/hearthd_upstream_test_XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const std::string path = (dir / name).string();
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
};

Result<DaemonConfig> load_toml(const TempDir& d, const std::string& text) {
  const std::string path = d.write("hearthd.toml", text);
  return load_config({"--config", path}, [](const std::string&) { return std::optional<std::string>(); });
}

std::string error_of(const Result<DaemonConfig>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("[[upstream]] tables are read with their defaults", "[daemon][config][upstream]") {
  TempDir d;
  Result<DaemonConfig> c = load_toml(d, R"(
threads = 2
[[upstream]]
name = "gpu-box"
url = "https://gpu.example:8000"
models = ["Qwen/Qwen3-32B", "meta/llama"]
model_prefix = "gpu/"
ca_file = "/etc/hearth/ca.pem"
first_byte_timeout = 30
max_concurrency = 8
fallback = "gemma3:270m"

[[upstream]]
name = "local-sglang"
url = "unix:/run/sglang.sock"
)");
  REQUIRE(c.ok());
  CHECK(c->threads == 2);
  REQUIRE(c->upstreams.size() == 2);
  const UpstreamConfig& a = c->upstreams[0];
  CHECK(a.name == "gpu-box");
  CHECK(a.url == "https://gpu.example:8000");
  CHECK(a.models == std::vector<std::string>{"Qwen/Qwen3-32B", "meta/llama"});
  CHECK(a.model_prefix == "gpu/");
  CHECK(a.ca_file == "/etc/hearth/ca.pem");
  CHECK(a.first_byte_timeout_s == 30);
  CHECK(a.connect_timeout_s == 10);
  CHECK(a.idle_timeout_s == 120);
  CHECK(a.max_concurrency == 8);
  CHECK(a.fallback == "gemma3:270m");
  const UpstreamConfig& b = c->upstreams[1];
  CHECK(b.url == "unix:/run/sglang.sock");
  CHECK(b.models.empty());  // discovered
  CHECK(b.max_concurrency == 16);
}

TEST_CASE("bad [[upstream]] tables are errors naming the table and the key", "[daemon][config][upstream]") {
  TempDir d;
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\n")), Catch::Contains("'url' is required"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\nurl = \"ftp://x\"\n")),
             Catch::Contains("[[upstream]] #1 (a): 'url'"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a b\"\nurl = \"http://x:1\"\n")),
             Catch::Contains("'name' must be"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\nurl = \"http://x:1\"\nmax_concurrency = 0\n")),
             Catch::Contains("'max_concurrency' = 0 is out of range"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\nurl = \"http://x:1\"\nmodels = \"m\"\n")),
             Catch::Contains("'models' must be an array"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\nurl = \"http://x:1\"\napi_key = \"sk-1\"\n")),
             Catch::Contains("'api_key' is not an upstream setting"));
  CHECK_THAT(error_of(load_toml(d, "[[upstream]]\nname = \"a\"\nurl = \"http://x:1\"\nca_file = \"/c.pem\"\n")),
             Catch::Contains("'ca_file' is for an https:// url"));
  CHECK_THAT(error_of(load_toml(d,
                                "[[upstream]]\nname = \"a\"\nurl = \"http://x:1\"\n"
                                "[[upstream]]\nname = \"a\"\nurl = \"http://y:1\"\n")),
             Catch::Contains("[[upstream]] #2: a second upstream named 'a'"));
  CHECK_THAT(error_of(load_toml(d, "upstream = 3\n")), Catch::Contains("must be [[upstream]] tables"));
}

TEST_CASE("upstream URLs are http, https or unix: sockets", "[daemon][config][upstream]") {
  CHECK(check_upstream_url("http://127.0.0.1:8000").ok());
  CHECK(check_upstream_url("https://gpu.example").ok());
  CHECK(check_upstream_url("unix:/run/x.sock").ok());
  CHECK_FALSE(check_upstream_url("unix:").ok());
  CHECK_FALSE(check_upstream_url("http://").ok());
  CHECK_FALSE(check_upstream_url("http://user:pw@host").ok());
  CHECK_FALSE(check_upstream_url("gpu.example:8000").ok());
}

TEST_CASE("an API key file is read trimmed, and refused when its group or others may read it",
          "[daemon][config][upstream]") {
  TempDir d;
  const std::string ok = d.write("ok.key", "  sk-secret-123\n", 0600);
  Result<std::string> key = read_api_key(ok);
  REQUIRE(key.ok());
  CHECK(*key == "sk-secret-123");
  CHECK(read_api_key(d.write("ro.key", "sk-ro\n", 0400)).ok());

  const std::string open = d.write("open.key", "sk-secret-456\n", 0644);
  Result<std::string> refused = read_api_key(open);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("mode 0644") && Catch::Contains("chmod 600"));
  CHECK_THAT(refused.error().message, !Catch::Contains("sk-secret"));  // never the key
  CHECK_FALSE(read_api_key(d.write("group.key", "k\n", 0640)).ok());
  CHECK_THAT(read_api_key(d.write("empty.key", " \n", 0600)).error().message, Catch::Contains("holds no key"));
  CHECK_THAT(read_api_key((d.dir / "missing.key").string()).error().message, Catch::Contains("missing.key"));
}

namespace {

// load_config with these arguments and variables (no others).
Result<DaemonConfig> load_with(const std::vector<std::string>& args, std::map<std::string, std::string> vars = {}) {
  return load_config(args, [vars](const std::string& name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::optional<std::string>() : std::optional<std::string>(it->second);
  });
}

}  // namespace

TEST_CASE("one upstream comes from --upstream-* flags named like the [[upstream]] keys", "[daemon][config][upstream]") {
  Result<DaemonConfig> c = load_with({"--upstream-url",
                                      "https://gpu.example:8000",
                                      "--upstream-name",
                                      "gpu-box",
                                      "--upstream-api-key-file",
                                      "/etc/hearth/gpu.key",
                                      "--upstream-models",
                                      "Qwen/Qwen3-32B, meta/llama",
                                      "--upstream-model-prefix",
                                      "gpu/",
                                      "--upstream-ca-file",
                                      "/etc/hearth/ca.pem",
                                      "--upstream-connect-timeout",
                                      "3",
                                      "--upstream-first-byte-timeout",
                                      "30",
                                      "--upstream-idle-timeout",
                                      "40",
                                      "--upstream-max-concurrency",
                                      "8",
                                      "--upstream-discover-interval",
                                      "60",
                                      "--upstream-fallback",
                                      "gemma3:270m"});
  REQUIRE(c.ok());
  REQUIRE(c->upstreams.size() == 1);
  const UpstreamConfig& u = c->upstreams[0];
  CHECK(u.name == "gpu-box");
  CHECK(u.url == "https://gpu.example:8000");
  CHECK(u.api_key_file == "/etc/hearth/gpu.key");
  CHECK(u.models == std::vector<std::string>{"Qwen/Qwen3-32B", "meta/llama"});
  CHECK(u.model_prefix == "gpu/");
  CHECK(u.ca_file == "/etc/hearth/ca.pem");
  CHECK(u.connect_timeout_s == 3);
  CHECK(u.first_byte_timeout_s == 30);
  CHECK(u.idle_timeout_s == 40);
  CHECK(u.max_concurrency == 8);
  CHECK(u.discover_interval_s == 60);
  CHECK(u.fallback == "gemma3:270m");
  // Nothing given: no upstream.
  REQUIRE(load_with({}).ok());
  CHECK(load_with({})->upstreams.empty());
}

TEST_CASE("the flags' upstream is named after the URL's host unless --upstream-name names it",
          "[daemon][config][upstream]") {
  Result<DaemonConfig> c = load_with({"--upstream-url", "http://127.0.0.1:8000/v1"});
  REQUIRE(c.ok());
  REQUIRE(c->upstreams.size() == 1);
  CHECK(c->upstreams[0].name == "127.0.0.1");
  CHECK(c->upstreams[0].models.empty());  // discovered, as a table without models
  CHECK(c->upstreams[0].max_concurrency == 16);
  CHECK(upstream_name_of_url("https://gpu.example") == "gpu.example");
  CHECK(upstream_name_of_url("https://[::1]:8443") == "1");
  CHECK(upstream_name_of_url("unix:/run/vllm/api.sock") == "api.sock");
  CHECK(upstream_name_of_url("http://h%20st:1") == "h-20st");
}

TEST_CASE("HEARTH_UPSTREAM_* variables give the upstream too, and a flag wins over its variable",
          "[daemon][config][upstream]") {
  const std::map<std::string, std::string> vars = {{"HEARTH_UPSTREAM_URL", "http://10.0.0.2:8000"},
                                                   {"HEARTH_UPSTREAM_NAME", "from-env"},
                                                   {"HEARTH_UPSTREAM_MODELS", "m1,m2"},
                                                   {"HEARTH_UPSTREAM_MAX_CONCURRENCY", "4"},
                                                   {"HEARTH_UPSTREAM_FALLBACK", ""}};  // empty: unset
  Result<DaemonConfig> env_only = load_with({}, vars);
  REQUIRE(env_only.ok());
  REQUIRE(env_only->upstreams.size() == 1);
  CHECK(env_only->upstreams[0].name == "from-env");
  CHECK(env_only->upstreams[0].url == "http://10.0.0.2:8000");
  CHECK(env_only->upstreams[0].models == std::vector<std::string>{"m1", "m2"});
  CHECK(env_only->upstreams[0].max_concurrency == 4);
  CHECK(env_only->upstreams[0].fallback.empty());

  Result<DaemonConfig> both = load_with({"--upstream-name", "from-flag", "--upstream-max-concurrency", "2"}, vars);
  REQUIRE(both.ok());
  REQUIRE(both->upstreams.size() == 1);
  CHECK(both->upstreams[0].name == "from-flag");
  CHECK(both->upstreams[0].max_concurrency == 2);
  CHECK(both->upstreams[0].url == "http://10.0.0.2:8000");  // the variable, where no flag is given
}

TEST_CASE("the flags' upstream is served after the file's tables, and may not take one's name",
          "[daemon][config][upstream]") {
  TempDir d;
  const std::string path = d.write("hearthd.toml", "[[upstream]]\nname = \"gpu\"\nurl = \"http://a:1\"\n");
  Result<DaemonConfig> c = load_with({"--config", path, "--upstream-url", "http://b:2"});
  REQUIRE(c.ok());
  REQUIRE(c->upstreams.size() == 2);
  CHECK(c->upstreams[0].name == "gpu");
  CHECK(c->upstreams[1].name == "b");
  const std::string clash =
      error_of(load_with({"--config", path, "--upstream-url", "http://b:2"}, {{"HEARTH_UPSTREAM_NAME", "gpu"}}));
  CHECK_THAT(clash, Catch::Contains("named 'gpu' like [[upstream]] #1 of config file " + path) &&
                        Catch::Contains("--upstream-name"));
}

TEST_CASE("bad upstream flags and variables are errors naming the flag or the variable", "[daemon][config][upstream]") {
  CHECK_THAT(error_of(load_with({"--upstream-name", "a"})),
             Catch::Contains("--upstream-url (or HEARTH_UPSTREAM_URL) is required") &&
                 Catch::Contains("given: option --upstream-name"));
  CHECK_THAT(error_of(load_with({"--upstream-url", "http://x:1", "--upstream-max-concurrency", "0"})),
             Catch::Contains("option --upstream-max-concurrency = 0 is out of range (1..4096)"));
  CHECK_THAT(error_of(load_with({"--upstream-url", "http://x:1"}, {{"HEARTH_UPSTREAM_IDLE_TIMEOUT", "soon"}})),
             Catch::Contains("environment variable HEARTH_UPSTREAM_IDLE_TIMEOUT: 'soon' is not an integer"));
  CHECK_THAT(error_of(load_with({"--upstream-url", "ftp://x"})),
             Catch::Contains("option --upstream-url: 'ftp://x' is not http://"));
  CHECK_THAT(error_of(load_with({"--upstream-url", "http://x:1", "--upstream-ca-file", "/c.pem"})),
             Catch::Contains("option --upstream-ca-file is for an https:// url"));
  CHECK_THAT(error_of(load_with({"--upstream-url", "http://x:1", "--upstream-name", "a b"})),
             Catch::Contains("option --upstream-name must be 1..64"));
  Result<DaemonConfig> no_models = load_with({"--upstream-url", "http://x:1", "--upstream-models", " , "});
  REQUIRE(no_models.ok());
  CHECK(no_models->upstreams[0].models.empty());  // none listed: discovered
}

TEST_CASE("an API key is never taken from a flag or a variable, and never echoed", "[daemon][config][upstream]") {
  const std::string flag = error_of(load_with({"--upstream-url", "http://x:1", "--upstream-api-key", "sk-secret-9"}));
  CHECK_THAT(flag, Catch::Contains("option --upstream-api-key") && Catch::Contains("--upstream-api-key-file"));
  CHECK_THAT(flag, !Catch::Contains("sk-secret-9"));
  const std::string var = error_of(load_with({}, {{"HEARTH_UPSTREAM_API_KEY", "sk-secret-9"}}));
  CHECK_THAT(var, Catch::Contains("environment variable HEARTH_UPSTREAM_API_KEY") && Catch::Contains("chmod 600"));
  CHECK_THAT(var, !Catch::Contains("sk-secret-9"));
}

TEST_CASE("--help lists the upstream options in a group of their own", "[daemon][config][upstream]") {
  Result<DaemonConfig> c = load_with({"--help"});
  REQUIRE(c.ok());
  CHECK_THAT(c->help_text, Catch::Contains("Upstream (one;") && Catch::Contains("--upstream-url URL") &&
                               Catch::Contains("--upstream-api-key-file FILE") &&
                               Catch::Contains("HEARTH_UPSTREAM_API_KEY_FILE"));
  CHECK_THAT(c->help_text, !Catch::Contains("--upstream-api-key "));  // hidden: refused
}
