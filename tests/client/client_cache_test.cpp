// The prompt cache calls of libhearth-client against a scripted fake daemon: the requests
// they send (method, target, body) and how answers and errors come back.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_daemon.h"
#include "hearth/client.h"

namespace {

using hearth::test::FakeDaemon;
using hearth::test::http_response;
using hearth::test::write_all;
using Json = nlohmann::json;

struct Handle {
  explicit Handle(const FakeDaemon& daemon) {
    REQUIRE(hearth_client_open(daemon.path().c_str(), &client) == HEARTH_OK);
  }
  ~Handle() { hearth_client_close(client); }
  hearth_client* client = nullptr;
};

const char* kStats =
    R"({"model":"m","fingerprint":"f","memory":{"blocks":2,"hits":1},"disk":{"enabled":true},"prefilled_tokens":7})";

const char* kWarm =
    R"({"object":"cache.warm","model":"m","tokens":40,"cached_tokens":{"memory":16,"disk":16},)"
    R"("prefilled_tokens":8,"chunks_written":1,"finish_reason":"warmed",)"
    R"("timings":{"cache_restore_ms":1.5,"cache_restore_bytes":294912,"prefill_ms":20.25,"queue_ms":0}})";

// Answers GET/DELETE /api/cache and POST /api/cache/warm like hearthd; anything else 404.
void cache_daemon(const FakeDaemon::Request& r, int fd) {
  if (r.head.rfind("GET /api/cache ", 0) == 0) {
    write_all(fd, http_response(200, "application/json", kStats));
  } else if (r.head.rfind("DELETE /api/cache?model=nope ", 0) == 0) {
    write_all(fd, http_response(404, "application/json",
                                R"({"error":{"message":"The model 'nope' does not exist","code":"model_not_found"}})"));
  } else if (r.head.rfind("DELETE /api/cache", 0) == 0) {
    write_all(fd, http_response(200, "application/json", R"({"cleared":"all"})"));
  } else if (r.head.rfind("POST /api/cache/warm ", 0) == 0) {
    write_all(fd, http_response(200, "application/json", kWarm));
  } else {
    write_all(fd, http_response(404, "application/json", R"({"error":{"message":"no route"}})"));
  }
}

}  // namespace

TEST_CASE("cache_stats hands back the daemon's JSON, freed with hearth_free", "[client]") {
  FakeDaemon daemon(cache_daemon);
  Handle h(daemon);
  char* json = nullptr;
  REQUIRE(hearth_client_cache_stats(h.client, &json) == HEARTH_OK);
  REQUIRE(json != nullptr);
  CHECK(std::string(json) == kStats);
  hearth_free(json);
  CHECK(daemon.requests().at(0).head.rfind("GET /api/cache HTTP/1.1", 0) == 0);
  CHECK(hearth_client_cache_stats(h.client, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_cache_stats(nullptr, &json) == HEARTH_ERR_INVALID_ARGUMENT);
}

TEST_CASE("installed_models GETs /api/models and hands back its JSON, and an older daemon answers 404", "[client]") {
  const std::string listing = R"({"models":[{"id":"m","loaded":true}],"catalog":[]})";
  FakeDaemon daemon([&](const FakeDaemon::Request& r, int fd) {
    if (r.head.rfind("GET /api/models ", 0) == 0) {
      write_all(fd, http_response(200, "application/json", listing));
    } else {
      cache_daemon(r, fd);
    }
  });
  Handle h(daemon);
  char* json = nullptr;
  REQUIRE(hearth_client_installed_models(h.client, &json) == HEARTH_OK);
  REQUIRE(json != nullptr);
  CHECK(std::string(json) == listing);
  hearth_free(json);
  CHECK(daemon.requests().at(0).head.rfind("GET /api/models HTTP/1.1", 0) == 0);
  CHECK(hearth_client_installed_models(h.client, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_installed_models(nullptr, &json) == HEARTH_ERR_INVALID_ARGUMENT);

  FakeDaemon old(cache_daemon);  // answers 404 to what it does not know
  Handle o(old);
  json = reinterpret_cast<char*>(1);
  CHECK(hearth_client_installed_models(o.client, &json) == HEARTH_ERR_BAD_REQUEST);
  CHECK(json == nullptr);
  CHECK(hearth_client_http_status(o.client) == 404);
}

TEST_CASE("cache_clear sends DELETE for every model, or ?model= escaped, and maps a 404", "[client]") {
  FakeDaemon daemon(cache_daemon);
  Handle h(daemon);
  REQUIRE(hearth_client_cache_clear(h.client, nullptr) == HEARTH_OK);
  REQUIRE(hearth_client_cache_clear(h.client, "") == HEARTH_OK);
  REQUIRE(hearth_client_cache_clear(h.client, "gemma 3/270m") == HEARTH_OK);
  CHECK(hearth_client_cache_clear(h.client, "nope") == HEARTH_ERR_BAD_REQUEST);
  CHECK(hearth_client_http_status(h.client) == 404);
  CHECK(std::string(hearth_client_last_error(h.client)).find("does not exist") != std::string::npos);
  const auto requests = daemon.requests();
  REQUIRE(requests.size() == 4);
  CHECK(requests[0].head.rfind("DELETE /api/cache HTTP/1.1", 0) == 0);
  CHECK(requests[1].head.rfind("DELETE /api/cache HTTP/1.1", 0) == 0);
  CHECK(requests[2].head.rfind("DELETE /api/cache?model=gemma%203%2F270m HTTP/1.1", 0) == 0);
  CHECK(requests[0].body.empty());
}

TEST_CASE("cache_warm sends a system prompt as messages or a prompt raw, and reads the counts", "[client]") {
  FakeDaemon daemon(cache_daemon);
  Handle h(daemon);
  hearth_warm_result r;
  hearth_warm_result_init(&r);
  REQUIRE(hearth_client_cache_warm(h.client, HEARTH_WARM_SYSTEM_PROMPT, "Be brief.", &r) == HEARTH_OK);
  CHECK(r.tokens == 40);
  CHECK(r.cached_memory_tokens == 16);
  CHECK(r.cached_disk_tokens == 16);
  CHECK(r.prefilled_tokens == 8);
  CHECK(r.chunks_written == 1);
  CHECK(r.cache_restore_ms == 1.5);
  CHECK(r.cache_restore_bytes == 294912);
  CHECK(r.prefill_ms == 20.25);
  CHECK(r.total_ms > 0);
  REQUIRE(hearth_client_cache_warm(h.client, HEARTH_WARM_PROMPT, "Once upon", nullptr) == HEARTH_OK);
  const hearth_message chat[] = {{"system", "S"}, {"user", "U"}};
  REQUIRE(hearth_client_cache_warm_chat(h.client, chat, 2, nullptr) == HEARTH_OK);
  const auto requests = daemon.requests();
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].head.rfind("POST /api/cache/warm HTTP/1.1", 0) == 0);
  CHECK(Json::parse(requests[0].body) == Json{{"messages", {{{"role", "system"}, {"content", "Be brief."}}}}});
  CHECK(Json::parse(requests[1].body) == Json{{"prompt", "Once upon"}});
  CHECK(Json::parse(requests[2].body)["messages"].size() == 2);

  CHECK(hearth_client_cache_warm(h.client, 7, "x", &r) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_cache_warm(h.client, HEARTH_WARM_PROMPT, nullptr, &r) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(std::string(hearth_client_last_error(h.client)) == "text is NULL");
  CHECK(hearth_client_cache_warm_chat(h.client, nullptr, 0, &r) == HEARTH_ERR_INVALID_ARGUMENT);
  hearth_warm_result uninitialised{};
  CHECK(hearth_client_cache_warm(h.client, HEARTH_WARM_PROMPT, "x", &uninitialised) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(daemon.requests().size() == 3);  // none of those reached the daemon
}

TEST_CASE("a warm result from an older, smaller header is filled only up to its struct_size", "[client]") {
  FakeDaemon daemon(cache_daemon);
  Handle h(daemon);
  hearth_warm_result r;
  std::memset(&r, 0xAB, sizeof r);
  r.struct_size = offsetof(hearth_warm_result, cached_disk_tokens);
  REQUIRE(hearth_client_cache_warm(h.client, HEARTH_WARM_PROMPT, "x", &r) == HEARTH_OK);
  CHECK(r.struct_size == offsetof(hearth_warm_result, cached_disk_tokens));
  CHECK(r.tokens == 40);
  CHECK(r.cached_memory_tokens == 16);
  int64_t untouched;
  std::memset(&untouched, 0xAB, sizeof untouched);
  CHECK(r.cached_disk_tokens == untouched);
}

TEST_CASE("generation stats carry the cache split from the daemon's timings", "[client]") {
  FakeDaemon daemon([](const FakeDaemon::Request&, int fd) {
    write_all(
        fd,
        http_response(
            200, "application/json",
            R"({"id":"x","object":"text_completion","created":1,"model":"m",)"
            R"("choices":[{"text":"hi","index":0,"finish_reason":"stop"}],)"
            R"("usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,)"
            R"("prompt_tokens_details":{"cached_tokens":32}},)"
            R"("timings":{"cache_restore_ms":2.5,"cache_restore_bytes":294912,"cached_tokens":{"memory":16,"disk":16},)"
            R"("prefilled_tokens":8}})"));
  });
  Handle h(daemon);
  hearth_stats s;
  hearth_stats_init(&s);
  REQUIRE(hearth_client_complete(h.client, "x", nullptr, nullptr, nullptr, nullptr, &s) == HEARTH_OK);
  CHECK(s.cached_tokens == 32);
  CHECK(s.cached_memory_tokens == 16);
  CHECK(s.cached_disk_tokens == 16);
  CHECK(s.prefilled_tokens == 8);
  CHECK(s.cache_restore_ms == 2.5);
  CHECK(s.cache_restore_bytes == 294912);
}
