// libhearth-client without a daemon: discovery, failing fast when nothing listens or trying
// again while the socket appears, status strings, versions, argument checks, and the header
// as C99.
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "header_c99.h"
#include "hearth/client.h"

// connect(2) for the whole test program, counting the calls: libhearth-client.so resolves
// connect through this definition (the executable comes first in symbol lookup) and it
// forwards to the next one (libc, or a sanitizer's interceptor). "At once" below means one
// connect and no retry, which no clock can tell apart on a busy machine.
static std::atomic<int> g_connect_calls{0};
extern "C" int connect(int fd, const sockaddr* address, socklen_t length) {
  using Connect = int (*)(int, const sockaddr*, socklen_t);
  static const Connect next = reinterpret_cast<Connect>(::dlsym(RTLD_NEXT, "connect"));
  ++g_connect_calls;
  return next(fd, address, length);
}

namespace {

using hearth::test::eventually;
using hearth::test::FakeRequest;
using hearth::test::TempDir;
using hearth::test::UnixListener;
using Clock = std::chrono::steady_clock;

// Sets (or unsets, with nullptr) an environment variable for the scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string chosen_path(const char* explicit_path) {
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(explicit_path, &client) == HEARTH_OK);
  std::string path = hearth_client_socket_path(client);
  hearth_client_close(client);
  return path;
}

void touch(const std::string& path) {
  std::ofstream(path).put('x');
}

// Every code the header defines, in order.
constexpr int kAllCodes[] = {
    HEARTH_OK,           HEARTH_ERR_INVALID_ARGUMENT, HEARTH_ERR_NOMEM,       HEARTH_ERR_NO_DAEMON,
    HEARTH_ERR_IO,       HEARTH_ERR_PROTOCOL,         HEARTH_ERR_HTTP,        HEARTH_ERR_CANCELLED,
    HEARTH_ERR_BUSY,     HEARTH_ERR_UNAVAILABLE,      HEARTH_ERR_BAD_REQUEST, HEARTH_ERR_SERVER,
    HEARTH_ERR_INTERNAL, HEARTH_ERR_TIMEOUT};

// Answers one health request on the next connection to listener (then waits for the client
// to close it); false when none came or it could not be read.
bool answer_health(UnixListener& listener) {
  const int fd = listener.accept();
  if (fd < 0) return false;
  FakeRequest r;
  const bool ok =
      hearth::test::read_http_request(fd, &r) &&
      hearth::test::write_all(fd, hearth::test::http_response(200, "application/json", R"({"status":"ok"})"));
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("discovery prefers the explicit path, then HEARTH_SOCKET, then XDG_RUNTIME_DIR, then /run/hearth",
          "[client]") {
  TempDir runtime;
  EnvGuard xdg("XDG_RUNTIME_DIR", runtime.path().c_str());
  std::string user_path = runtime.file("hearth/hearth.sock");

  {
    EnvGuard env("HEARTH_SOCKET", "/tmp/from-env.sock");
    CHECK(chosen_path("/tmp/explicit.sock") == "/tmp/explicit.sock");
    CHECK(chosen_path(nullptr) == "/tmp/from-env.sock");
    CHECK(chosen_path("") == "/tmp/from-env.sock");
  }
  EnvGuard no_env("HEARTH_SOCKET", nullptr);
  {
    EnvGuard empty("HEARTH_SOCKET", "");
    // An empty HEARTH_SOCKET counts as unset.
    CHECK(chosen_path(nullptr) != "");
  }
  // The user socket is chosen when it exists...
  std::filesystem::create_directories(runtime.file("hearth"));
  touch(user_path);
  CHECK(chosen_path(nullptr) == user_path);
  std::filesystem::remove(user_path);
  // ...and otherwise the system socket if it exists, else the user path (so errors name it).
  std::string fallback = std::filesystem::exists("/run/hearth/hearth.sock") ? "/run/hearth/hearth.sock" : user_path;
  CHECK(chosen_path(nullptr) == fallback);
  {
    EnvGuard no_xdg("XDG_RUNTIME_DIR", nullptr);
    CHECK(chosen_path(nullptr) == "/run/hearth/hearth.sock");
  }
}

TEST_CASE("open rejects a NULL out pointer and a path too long for a Unix socket", "[client]") {
  CHECK(hearth_client_open("/tmp/x.sock", nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  hearth_client* client = reinterpret_cast<hearth_client*>(1);
  CHECK(hearth_client_open(std::string(200, 'a').c_str(), &client) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(client == nullptr);
  hearth_client_close(nullptr);  // allowed
}

TEST_CASE("with the connect retry off, a missing socket file gives HEARTH_ERR_NO_DAEMON at once", "[client]") {
  TempDir dir;
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(dir.file("none.sock").c_str(), &client) == HEARTH_OK);
  REQUIRE(hearth_client_set_connect_retry(client, 0) == HEARTH_OK);
  // One connect attempt per call, no retry: the answer comes at once.
  const int connects_before = g_connect_calls;
  CHECK(hearth_client_health(client) == HEARTH_ERR_NO_DAEMON);
  hearth_message m{"user", "hi"};
  char* text = nullptr;
  CHECK(hearth_client_chat(client, &m, 1, nullptr, nullptr, nullptr, &text, nullptr) == HEARTH_ERR_NO_DAEMON);
  CHECK(text == nullptr);
  CHECK(std::string(hearth_client_last_error(client)).find("none.sock") != std::string::npos);
  CHECK(hearth_client_http_status(client) == 0);
  hearth_model_info* models = nullptr;
  size_t n = 7;
  CHECK(hearth_client_list_models(client, &models, &n) == HEARTH_ERR_NO_DAEMON);
  CHECK(models == nullptr);
  CHECK(n == 0);
  CHECK(g_connect_calls - connects_before == 3);
  hearth_client_close(client);
}

TEST_CASE("with the connect retry off, a socket nobody listens on gives HEARTH_ERR_NO_DAEMON at once", "[client]") {
  TempDir dir;
  std::string path = dir.file("stale.sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  ::close(fd);  // bound, never listened: the file stays, connect() is refused

  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(path.c_str(), &client) == HEARTH_OK);
  REQUIRE(hearth_client_set_connect_retry(client, 0) == HEARTH_OK);
  const int connects_before = g_connect_calls;
  hearth_stats stats;
  hearth_stats_init(&stats);
  CHECK(hearth_client_complete(client, "x", nullptr, nullptr, nullptr, nullptr, &stats) == HEARTH_ERR_NO_DAEMON);
  CHECK(g_connect_calls - connects_before == 1);  // refused: no retry
  CHECK(stats.completion_tokens == 0);

  // A plain file is not a daemon either.
  std::string file = dir.file("file");
  touch(file);
  hearth_client* client2 = nullptr;
  REQUIRE(hearth_client_open(file.c_str(), &client2) == HEARTH_OK);
  REQUIRE(hearth_client_set_connect_retry(client2, 0) == HEARTH_OK);
  CHECK(hearth_client_health(client2) == HEARTH_ERR_NO_DAEMON);
  hearth_client_close(client2);
  hearth_client_close(client);
}

TEST_CASE("by default a missing socket is tried again for HEARTH_CONNECT_RETRY_DEFAULT_MS, then NO_DAEMON",
          "[client]") {
  TempDir dir;
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(dir.file("none.sock").c_str(), &client) == HEARTH_OK);
  const int connects_before = g_connect_calls;
  const auto start = Clock::now();
  CHECK(hearth_client_health(client) == HEARTH_ERR_NO_DAEMON);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(HEARTH_CONNECT_RETRY_DEFAULT_MS));
  CHECK(g_connect_calls - connects_before > 1);
  CHECK(std::string(hearth_client_last_error(client)).find("tried") != std::string::npos);
  hearth_client_close(client);
}

TEST_CASE("a socket that appears 300 ms into a request is connected to by the retry", "[client]") {
  // The socket file appears 300 ms after the client's first attempt failed (counted, not
  // timed); the retry window is far longer than a busy machine needs for that.
  TempDir dir;
  UnixListener listener(dir.file("late.sock"), false);
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(listener.path().c_str(), &client) == HEARTH_OK);
  const int connects_before = g_connect_calls;
  std::atomic<bool> served{false};
  auto appear_later = [&] {
    if (!eventually([&] { return g_connect_calls - connects_before >= 1; })) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (listener.bind() && listener.listen()) served = answer_health(listener);
  };
  SECTION("with the retry: the request succeeds") {
    REQUIRE(hearth_client_set_connect_retry(client, 60000) == HEARTH_OK);
    std::thread daemon(appear_later);
    CHECK(hearth_client_health(client) == HEARTH_OK);
    daemon.join();
    CHECK(served);
    CHECK(g_connect_calls - connects_before > 1);
  }
  SECTION("without it: HEARTH_ERR_NO_DAEMON from the one attempt") {
    REQUIRE(hearth_client_set_connect_retry(client, 0) == HEARTH_OK);
    std::thread daemon([&] {
      if (!eventually([&] { return g_connect_calls - connects_before >= 1; })) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      listener.bind();
    });
    CHECK(hearth_client_health(client) == HEARTH_ERR_NO_DAEMON);
    CHECK(g_connect_calls - connects_before == 1);
    daemon.join();
  }
  hearth_client_close(client);
}

TEST_CASE("a socket refused while its daemon restarts is connected to once it listens again", "[client]") {
  // The file stays (bound, not listening: ECONNREFUSED) until 300 ms after the first attempt.
  TempDir dir;
  UnixListener listener(dir.file("restart.sock"), false);
  REQUIRE(listener.bind());
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(listener.path().c_str(), &client) == HEARTH_OK);
  REQUIRE(hearth_client_set_connect_retry(client, 60000) == HEARTH_OK);
  const int connects_before = g_connect_calls;
  std::atomic<bool> served{false};
  std::thread daemon([&] {
    if (!eventually([&] { return g_connect_calls - connects_before >= 1; })) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (listener.listen()) served = answer_health(listener);
  });
  CHECK(hearth_client_health(client) == HEARTH_OK);
  daemon.join();
  CHECK(served);
  CHECK(g_connect_calls - connects_before > 1);
  hearth_client_close(client);
}

TEST_CASE("hearth_client_cancel ends the wait for a missing socket promptly", "[client]") {
  // A minute of retry; the cancel comes once the client is retrying (a second attempt was
  // made). It must return long before the minute: 10 s is the loose bound.
  TempDir dir;
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(dir.file("none.sock").c_str(), &client) == HEARTH_OK);
  REQUIRE(hearth_client_set_connect_retry(client, 60000) == HEARTH_OK);
  const int connects_before = g_connect_calls;
  std::atomic<bool> retrying{false};
  Clock::time_point cancelled_at;
  std::thread canceller([&] {
    retrying = eventually([&] { return g_connect_calls - connects_before >= 2; });
    cancelled_at = Clock::now();
    hearth_client_cancel(client);
  });
  const auto start = Clock::now();
  CHECK(hearth_client_health(client) == HEARTH_ERR_CANCELLED);
  const auto returned_at = Clock::now();
  canceller.join();
  CHECK(retrying);
  CHECK(returned_at - start < std::chrono::seconds(10));
  CHECK(returned_at >= cancelled_at);
  hearth_client_close(client);
}

TEST_CASE("hearth_strerror names every code with a distinct static string", "[client]") {
  std::set<std::string> seen;
  for (int code : kAllCodes) {
    const char* text = hearth_strerror(code);
    REQUIRE(text != nullptr);
    CHECK(std::strlen(text) > 0);
    CHECK(std::string(text) != "unknown error");
    CHECK(hearth_strerror(code) == text);  // static: the same pointer every time
    seen.insert(text);
  }
  CHECK(seen.size() == std::size(kAllCodes));
  CHECK(std::string(hearth_strerror(-1)) == "unknown error");
  CHECK(std::string(hearth_strerror(9999)) == "unknown error");
}

TEST_CASE("version macros match hearth_client_version()", "[client]") {
  std::string expected = std::to_string(HEARTH_CLIENT_VERSION_MAJOR) + "." +
                         std::to_string(HEARTH_CLIENT_VERSION_MINOR) + "." +
                         std::to_string(HEARTH_CLIENT_VERSION_PATCH);
  CHECK(expected == HEARTH_CLIENT_VERSION);
  CHECK(expected == hearth_client_version());
  CHECK(HEARTH_CLIENT_VERSION_NUMBER ==
        ((HEARTH_CLIENT_VERSION_MAJOR << 16) | (HEARTH_CLIENT_VERSION_MINOR << 8) | HEARTH_CLIENT_VERSION_PATCH));
}

TEST_CASE("the header compiles and works as C99", "[client]") {
  CHECK(hearth_test_c99_version_major() == HEARTH_CLIENT_VERSION_MAJOR);
  CHECK(hearth_test_c99_version_minor() == HEARTH_CLIENT_VERSION_MINOR);
  CHECK(hearth_test_c99_version_patch() == HEARTH_CLIENT_VERSION_PATCH);
  CHECK(std::string(hearth_test_c99_version_string()) == hearth_client_version());
  CHECK(hearth_test_c99_defaults_ok() == 1);
  TempDir dir;
  CHECK(hearth_test_c99_ask_no_daemon(dir.file("none.sock").c_str()) == HEARTH_ERR_NO_DAEMON);
  CHECK(hearth_test_c99_cache_defaults_ok() == 1);
  CHECK(hearth_test_c99_cache_no_daemon(dir.file("none.sock").c_str()) == HEARTH_ERR_NO_DAEMON);
  CHECK(hearth_test_c99_tools_defaults_ok() == 1);
  CHECK(hearth_test_c99_reasoning_defaults_ok() == 1);
  CHECK(hearth_test_c99_tools_no_daemon(dir.file("none.sock").c_str()) == HEARTH_ERR_NO_DAEMON);
}

TEST_CASE("bad arguments are HEARTH_ERR_INVALID_ARGUMENT, not crashes", "[client]") {
  TempDir dir;
  hearth_client* client = nullptr;
  REQUIRE(hearth_client_open(dir.file("none.sock").c_str(), &client) == HEARTH_OK);
  hearth_message m{"user", "hi"};
  CHECK(hearth_client_chat(nullptr, &m, 1, nullptr, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_chat(client, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  hearth_message bad{"user", nullptr};
  CHECK(hearth_client_chat(client, &bad, 1, nullptr, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_complete(client, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  hearth_request_options uninitialised{};
  CHECK(hearth_client_complete(client, "x", &uninitialised, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(std::string(hearth_client_last_error(client)).find("hearth_request_options_init") != std::string::npos);
  hearth_stats stats{};
  CHECK(hearth_client_complete(client, "x", nullptr, nullptr, nullptr, nullptr, &stats) == HEARTH_ERR_INVALID_ARGUMENT);
  hearth_request_options o;
  hearth_request_options_init(&o);
  o.n_stop = 2;
  CHECK(hearth_client_complete(client, "x", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  hearth_request_options_init(&o);
  o.temperature = std::numeric_limits<float>::quiet_NaN();
  CHECK(hearth_client_complete(client, "x", &o, nullptr, nullptr, nullptr, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_complete(client, "\xff\xfe not UTF-8", nullptr, nullptr, nullptr, nullptr, nullptr) ==
        HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_health(nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_list_models(client, nullptr, nullptr) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_set_timeout(nullptr, 100) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_set_timeout(client, -1) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_set_timeout(client, 0) == HEARTH_OK);
  CHECK(hearth_client_set_connect_retry(nullptr, 100) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_set_connect_retry(client, -1) == HEARTH_ERR_INVALID_ARGUMENT);
  CHECK(hearth_client_set_connect_retry(client, 0) == HEARTH_OK);
  hearth_client_cancel(nullptr);  // allowed
  hearth_client_cancel(client);   // no request running: no effect
  CHECK(std::string(hearth_client_last_error(nullptr)).empty());
  CHECK(std::string(hearth_client_socket_path(nullptr)).empty());
  hearth_free(nullptr);
  hearth_client_close(client);
}
