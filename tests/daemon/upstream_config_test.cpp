// [[upstream]] tables of hearthd's config file (issue 45): what they hold, the errors that
// name the table and the key, and the API key file that must be private.
#include "daemon/upstream_config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "daemon/config.h"

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
