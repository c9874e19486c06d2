// Prompt-cache isolation between real Unix users (issue 22). A real hearthd, started by
// this (root) process, listens on a 0660 socket of group kSocketGroup; each request is sent
// by a forked child that has dropped to an unprivileged uid and gid, so the daemon learns
// who it is only from the kernel (SO_PEERCRED). Skipped when not run as root.
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "daemon_harness.h"

namespace {

using namespace hearth::test;
using json = nlohmann::json;

struct User {
  uid_t uid;
  gid_t gid;
};
constexpr gid_t kSocketGroup = 40000;
constexpr User kAlice{40001, 40000}, kBob{40002, 40000}, kCarol{40003, 40003};  // Carol: another group

// About 150 tokens on the synthetic tokenizer (a context of 256): many blocks of 16.
std::string memo(const std::string& partner) {
  std::string s = "Confidential memo for the board: the merger with " + partner + " closes on March 3.";
  for (int i = 0; i < 3; ++i) s += " Item " + std::to_string(i) + " stays between us and the auditors.";
  return s;
}

std::string completion(const std::string& prompt, const std::string& extra = "") {
  json j{{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  std::string body = j.dump();
  if (!extra.empty()) body.insert(body.size() - 1, "," + extra);
  return body;
}

// Sends one request as `u` from a forked child: setgroups (the socket's group), setresgid,
// setresuid, then the request. Returns the response the child read.
HttpResponse as_user(const User& u, const std::string& socket, const std::string& method, const std::string& target,
                     const std::string& body = "") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const gid_t groups[] = {kSocketGroup};
    if (::setgroups(1, groups) != 0 || ::setresgid(u.gid, u.gid, u.gid) != 0 || ::setresuid(u.uid, u.uid, u.uid) != 0 ||
        ::geteuid() != u.uid) {
      ::_exit(3);
    }
    const HttpResponse r = http_request(socket, method, target, body);
    const std::string out = std::to_string(r.status) + "\n" + r.body;
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) ::_exit(4);
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  HttpResponse r;
  const size_t nl = got.find('\n');
  r.status = std::atoi(got.substr(0, nl).c_str());
  r.body = nl == std::string::npos ? "" : got.substr(nl + 1);
  return r;
}

// A hearthd on the synthetic model whose socket users in kSocketGroup may reach.
struct SharedDaemon {
  TempDir dir;
  std::string model = write_synthetic_model(dir.path());
  std::string socket = dir.file("h.sock");
  std::string cache = dir.file("cache");
  std::string log = dir.file("stderr.log");
  SpawnOptions options;
  std::unique_ptr<Process> process;

  explicit SharedDaemon(std::vector<std::string> extra = {}) {
    ::chmod(dir.path().c_str(), 0711);  // the users pass through to the socket, and see nothing else
    options.args = {"--model",     model, "--socket",  socket, "--socket-group", std::to_string(kSocketGroup),
                    "--cache-dir", cache, "--threads", "1",    "--log-level",    "debug"};
    options.args.insert(options.args.end(), extra.begin(), extra.end());
    options.env = clean_env();
    options.stderr_path = log;
  }
  bool start() {
    process = std::make_unique<Process>(options);
    return wait_until([&] { return http_request(socket, "GET", "/health").status == 200 || !process->running(); }) &&
           process->running();
  }
  bool stop() {
    process->signal(SIGTERM);
    return process->wait_exit() == 0;
  }
  // Usage of a completion sent by u (status 200 required).
  json usage(const User& u, const std::string& body) {
    const HttpResponse r = as_user(u, socket, "POST", "/v1/completions", body);
    INFO(r.body << "\n" << read_file(log).substr(0, 4000));
    REQUIRE(r.status == 200);
    return json::parse(r.body).at("usage");
  }
  int cached(const User& u, const std::string& body) {
    return usage(u, body).at("prompt_tokens_details").at("cached_tokens").get<int>();
  }
  json stats_as(const User& u) {
    const HttpResponse r = as_user(u, socket, "GET", "/api/cache");
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
  json stats_as_root() {
    const HttpResponse r = http_request(socket, "GET", "/api/cache");
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
  // Waits for the disk writer to have written everything queued.
  bool disk_settled() {
    return wait_until([&] {
      const json d = stats_as_root().at("disk");
      return d.at("queue_depth") == 0 && d.at("written_chunks").get<int>() > 0;
    });
  }
};

#define SKIP_UNLESS_ROOT()                                                 \
  if (::geteuid() != 0) {                                                  \
    WARN("skipped: needs root to run clients as other users (setresuid)"); \
    return;                                                                \
  }

}  // namespace

TEST_CASE("Another user's prompt prefix is never served from the cache, the same user's repeat is",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  SharedDaemon d;
  REQUIRE(d.start());
  struct stat st {};
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == kSocketGroup);

  const std::string northwind = completion(memo("Northwind"));
  CHECK(d.cached(kAlice, northwind) == 0);
  const json bob = d.usage(kBob, northwind);
  CHECK(bob.at("prompt_tokens").get<int>() > 64);
  CHECK(bob.at("prompt_tokens_details").at("cached_tokens") == 0);  // Alice's prefix: not for Bob
  CHECK(d.cached(kBob, completion(memo("Contoso"))) > 0);           // his own first words now are
  const int alice_again = d.cached(kAlice, northwind);
  CHECK(alice_again >= bob.at("prompt_tokens").get<int>() - 16);

  // Each sees only their own entries; root sees everyone's, per uid. (The gauges are
  // published by the engine thread after a response is sent: wait for them to settle.)
  json a, all;
  auto views_agree = [&] {
    a = d.stats_as(kAlice);
    all = d.stats_as_root();
    int64_t owners_tokens = 0, alice_tokens = -1;
    for (const json& o : all.at("owners")) {
      owners_tokens += o.at("memory_tokens").get<int64_t>();
      if (o.at("uid") == kAlice.uid) alice_tokens = o.at("memory_tokens").get<int64_t>();
    }
    return alice_tokens == a.at("memory").at("tokens").get<int64_t>() &&
           owners_tokens == all.at("memory").at("tokens").get<int64_t>() && d.stats_as(kAlice) == a;
  };
  CHECK(wait_until(views_agree));
  INFO(a.dump() << "\n" << all.dump());
  CHECK(a.at("caller").at("uid") == kAlice.uid);
  CHECK(a.at("caller").at("admin") == false);
  CHECK_FALSE(a.contains("owners"));
  CHECK(all.at("caller").at("admin") == true);
  std::set<uint32_t> uids;
  for (const json& o : all.at("owners")) uids.insert(o.at("uid").get<uint32_t>());
  CHECK(uids == std::set<uint32_t>{kAlice.uid, kBob.uid});
  CHECK(a.at("memory").at("tokens").get<int64_t>() > 0);
  CHECK(a.at("memory").at("tokens").get<int64_t>() < all.at("memory").at("tokens").get<int64_t>());
  // The debug log names the uid, never the prompt.
  CHECK(read_file(d.log).find("uid 40001") != std::string::npos);
  CHECK(read_file(d.log).find("Northwind") == std::string::npos);
  CHECK(d.stop());
}

TEST_CASE("A user's DELETE /api/cache removes only their own entries, root may remove one uid's",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  SharedDaemon d;
  REQUIRE(d.start());
  const std::string prompt = completion(memo("Northwind"));
  CHECK(d.cached(kAlice, prompt) == 0);
  CHECK(d.cached(kBob, prompt) == 0);
  REQUIRE(d.disk_settled());

  const HttpResponse cleared = as_user(kBob, d.socket, "DELETE", "/api/cache");
  REQUIRE(cleared.status == 200);
  CHECK(json::parse(cleared.body).at("cleared_uid") == kBob.uid);
  const json bob = d.stats_as(kBob);
  CHECK(bob.at("memory").at("tokens") == 0);
  CHECK(bob.at("disk").at("entries") == 0);
  const json alice = d.stats_as(kAlice);
  CHECK(alice.at("memory").at("tokens").get<int>() > 0);
  CHECK(alice.at("disk").at("entries").get<int>() > 0);
  CHECK(d.cached(kAlice, prompt) > 0);  // Alice's entries survived Bob's DELETE

  // Bob may not name Alice; root may.
  CHECK(as_user(kBob, d.socket, "DELETE", "/api/cache?uid=40001").status == 403);
  CHECK(as_user(kAlice, d.socket, "DELETE", "/api/cache?uid=40001").status == 200);  // herself: fine
  CHECK(d.cached(kAlice, prompt) == 0);
  REQUIRE(d.disk_settled());
  REQUIRE(http_request(d.socket, "DELETE", "/api/cache?uid=40001").status == 200);
  CHECK(d.stats_as(kAlice).at("disk").at("entries") == 0);
  CHECK(d.stop());
}

TEST_CASE("With cache_scope = group, users of one primary group share entries and other groups do not",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  SharedDaemon d({"--cache-scope", "group"});
  REQUIRE(d.start());
  const std::string prompt = completion(memo("Northwind"));
  CHECK(d.cached(kAlice, prompt) == 0);
  CHECK(d.cached(kBob, prompt) > 0);     // same group as Alice
  CHECK(d.cached(kCarol, prompt) == 0);  // another group
  CHECK(d.stats_as(kCarol).at("caller").at("scope") == "group");
  CHECK(d.stop());
}

TEST_CASE("cache_salt separates one user's requests, and a bad salt is refused with a clear message",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  SharedDaemon d;
  REQUIRE(d.start());
  const std::string text = memo("Northwind");
  CHECK(d.cached(kAlice, completion(text, R"("cache_salt": "app-one")")) == 0);
  CHECK(d.cached(kAlice, completion(text, R"("cache_salt": "app-one")")) > 0);
  CHECK(d.cached(kAlice, completion(text, R"("cache_salt": "app-two")")) == 0);
  CHECK(d.cached(kAlice, completion(text)) == 0);
  CHECK(d.cached(kBob, completion(text, R"("cache_salt": "app-one")")) == 0);  // a salt never crosses users

  for (const std::string& bad : {std::string(R"("")"), "\"" + std::string(257, 'x') + "\"",
                                 std::string(R"("a\u0001b")"), std::string("12"), std::string(R"("caf\u00e9")")}) {
    INFO("cache_salt: " << bad.substr(0, 40));
    const HttpResponse r =
        as_user(kAlice, d.socket, "POST", "/v1/completions", completion(text, "\"cache_salt\": " + bad));
    REQUIRE(r.status == 400);
    const json e = json::parse(r.body).at("error");
    CHECK(e.at("param") == "cache_salt");
    CHECK(e.at("message").get<std::string>().find("cache_salt") != std::string::npos);
  }
  // Warming honours the salt too.
  const std::string letter = "Draft letter to Fabrikam about the delay. " + memo("Fabrikam");
  const HttpResponse warm = as_user(kAlice, d.socket, "POST", "/api/cache/warm",
                                    json{{"prompt", letter}, {"cache_salt", "app-three"}}.dump());
  REQUIRE(warm.status == 200);
  CHECK(d.cached(kAlice, completion(letter, R"("cache_salt": "app-three")")) > 0);
  CHECK(d.cached(kAlice, completion(letter)) <= 1);  // at most BOS, shared with her unsalted memo
  CHECK(d.stop());
}

TEST_CASE("After a restart the disk tier serves a prefix only within its scope, and keeps it private",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  SharedDaemon d;
  REQUIRE(d.start());
  const std::string prompt = completion(memo("Northwind"));
  const std::string salted = completion(memo("Northwind"), R"("cache_salt": "s1")");
  CHECK(d.cached(kAlice, prompt) == 0);
  CHECK(d.cached(kAlice, salted) == 0);
  // Stopped right after the answers, their chunks still queued: a clean stop writes them all
  // (storage's "close() writes a slow disk's whole queue" forces the slow case).
  REQUIRE(d.stop());

  REQUIRE(d.start());  // memory is empty now: only the disk can serve
  CHECK(d.cached(kBob, prompt) == 0);
  CHECK(d.cached(kAlice, completion(memo("Northwind"), R"("cache_salt": "s2")")) == 0);
  const json again = d.usage(kAlice, prompt);
  CHECK(again.at("prompt_tokens_details").at("cached_tokens").get<int>() > 0);
  CHECK(d.cached(kAlice, salted) > 0);
  // The index remembers the owner across the restart (read at open: nothing to wait for).
  const json root_view = d.stats_as_root();
  INFO(root_view.dump());
  bool alice_on_disk = false;
  for (const json& o : root_view.at("owners"))
    if (o.at("uid") == kAlice.uid) alice_on_disk = o.at("disk_entries").get<int>() > 0;
  CHECK(alice_on_disk);

  // At rest: the folder is the daemon's alone, and so is every file in it.
  struct stat st {};
  REQUIRE(::stat(d.cache.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d.cache)) {
    if (!e.is_regular_file()) continue;
    REQUIRE(::stat(e.path().c_str(), &st) == 0);
    INFO(e.path());
    CHECK((st.st_mode & 077) == 0);
    ++files;
  }
  CHECK(files > 1);
  CHECK(d.stop());
}

TEST_CASE("A user flooding the disk tier evicts their own prefixes: another user's warmed prefix survives",
          "[daemon][isolation]") {
  SKIP_UNLESS_ROOT();
  // First learn what one memo takes on disk, then give the directory room for about three.
  uint64_t memo_bytes = 0;
  {
    SharedDaemon probe;
    REQUIRE(probe.start());
    CHECK(probe.cached(kAlice, completion(memo("Probe"))) == 0);
    REQUIRE(probe.disk_settled());
    memo_bytes = probe.stats_as_root().at("disk").at("bytes").get<uint64_t>();
    REQUIRE(probe.stop());
  }
  REQUIRE(memo_bytes > 0);
  SharedDaemon d({"--cache-max-bytes", std::to_string(memo_bytes * 3)});
  REQUIRE(d.start());
  const std::string alice = completion(memo("Northwind"));
  CHECK(d.cached(kAlice, alice) == 0);
  REQUIRE(d.disk_settled());
  // Bob's eight memos, each newer than Alice's: under plain LRU hers would go first.
  for (int i = 0; i < 8; ++i) {
    d.usage(kBob, completion(std::to_string(i) + ". " + memo("Partner " + std::to_string(i))));
    REQUIRE(wait_until([&] { return d.stats_as_root().at("disk").at("queue_depth") == 0; }));
  }
  const json disk = d.stats_as_root().at("disk");
  INFO(d.stats_as_root().dump());
  CHECK(disk.at("evictions").get<int>() > 0);
  CHECK(disk.at("bytes").get<uint64_t>() <= memo_bytes * 3);
  CHECK(disk.at("share_bytes").get<uint64_t>() == memo_bytes * 3 / 2);
  const json bob_view = d.stats_as(kBob);
  CHECK(bob_view.at("caller").at("disk_directory_bytes").get<uint64_t>() > memo_bytes);
  REQUIRE(d.stop());

  REQUIRE(d.start());  // memory is empty: Alice's prefix can only come from disk
  CHECK(d.cached(kAlice, alice) > 0);
  CHECK(d.stop());
}
