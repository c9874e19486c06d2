// hearthd as a process: its command line, systemd integration (sd_notify, socket
// activation, journald prefixes), the socket file's life, and shutdown on SIGTERM while
// streams run. Each test starts a real hearthd on the synthetic gemma3 model in a
// temporary directory.
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "daemon_harness.h"

namespace {

using namespace hearth::test;
using namespace std::chrono_literals;

// A daemon on the synthetic model with its socket and log in a temporary directory.
struct Daemon {
  TempDir dir;
  std::string model = write_synthetic_model(dir.path());
  std::string socket = dir.file("h.sock");
  std::string log = dir.file("stderr.log");
  SpawnOptions options;
  std::unique_ptr<Process> process;

  explicit Daemon(std::vector<std::string> extra_args = {}) {
    options.args = {"--model", model, "--socket", socket, "--threads", "1", "--log-level", "debug"};
    options.args.insert(options.args.end(), extra_args.begin(), extra_args.end());
    options.env = clean_env();
    options.stderr_path = log;
  }
  void start() { process = std::make_unique<Process>(options); }
  bool healthy(const std::string& path = "") const {
    return http_request(path.empty() ? socket : path, "GET", "/health").status == 200;
  }
  bool start_and_wait_ready() {
    start();
    return wait_until([&] { return healthy() || !process->running(); }) && process->running();
  }
  std::string stderr_text() const { return read_file(log); }
};

std::string completion_body(int max_tokens, bool stream) {
  return std::string("{\"prompt\": \"hello world\", \"max_tokens\": ") + std::to_string(max_tokens) +
         ", \"temperature\": 0" + (stream ? ", \"stream\": true, \"stream_options\": {\"include_usage\": true}" : "") +
         "}";
}

// A --shutdown-grace (seconds) as long as the hang guard: the streams of the tests below end
// by finishing or by a second SIGTERM, never because a slow machine used the grace up.
const std::string kLongGrace = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kHangGuard).count());

// usage.completion_tokens of a finished stream's last chunk; -1 when absent.
int completion_tokens(const std::string& sse) {
  const std::string key = "\"completion_tokens\":";
  const size_t at = sse.rfind(key);
  return at == std::string::npos ? -1 : std::atoi(sse.c_str() + at + key.size());
}

}  // namespace

TEST_CASE("hearthd --version prints its version", "[daemon][process]") {
  RunResult r = run_hearthd({"--version"});
  CHECK(r.code == 0);
  CHECK(r.out == std::string("hearthd ") + HEARTH_VERSION + "\n");
}

TEST_CASE("hearthd --help lists the options and how to set them", "[daemon][process]") {
  RunResult r = run_hearthd({"--help"});
  CHECK(r.code == 0);
  for (const char* opt : {"--model",
                          "--socket",
                          "--socket-group",
                          "--backend",
                          "--threads",
                          "--ctx",
                          "--parallel",
                          "--prefill-chunk",
                          "--queue-max",
                          "--cache-dir",
                          "--cache-max-bytes",
                          "--no-disk-cache",
                          "--cache-user-max-bytes",
                          "--listen-tcp",
                          "--allow-remote",
                          "--log-level",
                          "--shutdown-grace",
                          "--listen-ollama",
                          "--kv-type",
                          "--config",
                          "--list-devices",
                          "--version",
                          "--vk-device",
                          "--cuda-device"})
    CHECK_THAT(r.out, Catch::Contains(opt));
  CHECK_THAT(r.out, Catch::Contains("HEARTH_"));
}

TEST_CASE("hearthd --list-devices lists the cpu and the backends not built in", "[daemon][process]") {
  RunResult r = run_hearthd({"--list-devices", "--threads", "1"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("cpu: ") && Catch::Contains("threads 1") && Catch::Contains("simd ") &&
                        Catch::Contains("memory "));
#ifndef HEARTH_VULKAN_BUILT  // hearthd_vulkan_test.cpp checks the Vulkan lines
  CHECK_THAT(r.out, Catch::Contains("vulkan: not built in"));
#endif
#ifdef HEARTH_CUDA_BUILT  // without a GPU the line says why (no driver, no device)
  CHECK_THAT(r.out, Catch::Contains("\ncuda"));
#else
  CHECK_THAT(r.out, Catch::Contains("cuda: not built in"));
#endif
}

TEST_CASE("configuration errors exit 2 with a message naming the option", "[daemon][process]") {
  TempDir dir;
  RunResult r = run_hearthd({"--threads", "many"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--threads") && Catch::Contains("not an integer"));
  // --backend cuda is a usage error where it cannot be served: not built in, or (built)
  // no driver or no device. On a machine with a usable CUDA device it is not checked here.
  const bool cuda_usable = run_hearthd({"--list-devices"}).out.find("; usable\n") != std::string::npos &&
                           run_hearthd({"--list-devices"}).out.find("\ncuda 0:") != std::string::npos;
  if (!cuda_usable) {
    r = run_hearthd({"--socket", dir.file("s"), "--backend", "cuda"});
    CHECK(r.code == 2);
#ifdef HEARTH_CUDA_BUILT
    CHECK_THAT(r.err, Catch::Contains("--backend cuda: "));
#else
    CHECK_THAT(r.err, Catch::Contains("cuda") && Catch::Contains("not built in"));
#endif
    // A device index changes nothing when there is no device to pick from.
    r = run_hearthd({"--socket", dir.file("s"), "--backend", "cuda", "--cuda-device", "5"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--backend cuda") || Catch::Contains("not built in"));
  } else {
    r = run_hearthd({"--socket", dir.file("s"), "--backend", "cuda", "--cuda-device", "99"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--cuda-device 99: no such CUDA device"));
  }
#ifndef HEARTH_VULKAN_BUILT
  r = run_hearthd({"--socket", dir.file("s"), "--backend", "vulkan"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("vulkan") && Catch::Contains("not built in"));
#endif
  r = run_hearthd({}, {{"HEARTH_PARALLEL", "-3"}});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("HEARTH_PARALLEL"));
}

TEST_CASE("without XDG_RUNTIME_DIR a user daemon asks for --socket", "[daemon][process]") {
  if (::geteuid() == 0) {
    WARN("running as root: the default socket is /run/hearth/hearth.sock; not checked");
    return;
  }
  RunResult r = run_hearthd({}, {{"XDG_RUNTIME_DIR", std::nullopt}});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("XDG_RUNTIME_DIR") && Catch::Contains("--socket"));
}

TEST_CASE("a model that cannot be loaded exits 1 and says why", "[daemon][process]") {
  TempDir dir;
  RunResult r = run_hearthd({"--model", dir.file("missing.gguf"), "--socket", dir.file("s.sock")});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("cannot load the model") && Catch::Contains("missing.gguf"));
}

TEST_CASE("a chat template hearth does not recognise stops the load, and the override lets it load",
          "[daemon][process]") {
  TempDir dir;
  const std::string model = write_synthetic_model(dir.path(), "inst.gguf",
                                                  "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
  RunResult r = run_hearthd({"--model", model, "--socket", dir.file("s.sock"), "--threads", "1"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("unsupported chat template") &&
                        Catch::Contains("--chat-template chatml|gemma|llama3|qwen3"));

  Daemon d({"--chat-template", "chatml"});
  d.model = model;
  d.options.args[1] = model;
  REQUIRE(d.start_and_wait_ready());
  CHECK_THAT(d.stderr_text(), Catch::Contains("chat template: chatml (--chat-template)"));
  auto reply = http_request(d.socket, "GET", "/v1/models", "", 5s);
  CHECK(reply.status == 200);
  CHECK_THAT(reply.body, Catch::Contains("\"chat_template\":\"chatml\""));
}

TEST_CASE("READY=1 comes with STATUS once the model is loaded and STOPPING=1 at SIGTERM", "[daemon][process]") {
  Daemon d;
  NotifySocket notify(d.dir.file("notify"));
  d.options.env["NOTIFY_SOCKET"] = notify.path();
  d.start();
  const std::string ready = notify.wait_for("READY=1");
  REQUIRE_FALSE(ready.empty());
  CHECK_THAT(ready, Catch::Contains("STATUS=serving synth-gemma3 on cpu"));
  // Readiness follows the load: the log already has it and /health says 200.
  CHECK_THAT(d.stderr_text(), Catch::Contains("model loaded"));
  CHECK(d.healthy());
  bool loading_before_ready = false;
  for (const std::string& m : notify.messages()) {
    if (m.find("STATUS=loading") != std::string::npos) loading_before_ready = true;
    if (m.find("READY=1") != std::string::npos) break;
  }
  CHECK(loading_before_ready);

  d.process->signal(SIGHUP);  // no reload: it keeps serving
  CHECK(wait_until([&] { return d.stderr_text().find("reload not supported") != std::string::npos; }));
  CHECK(d.healthy());

  d.process->signal(SIGTERM);
  CHECK_FALSE(notify.wait_for("STOPPING=1").empty());
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  CHECK_FALSE(std::filesystem::exists(d.socket));  // the server removed its socket file
}

TEST_CASE("with WATCHDOG_USEC set hearthd pings WATCHDOG=1", "[daemon][process]") {
  Daemon d;
  NotifySocket notify(d.dir.file("notify"));
  d.options.env["NOTIFY_SOCKET"] = notify.path();
  d.options.watchdog_usec = "100000";  // 100 ms: pings every 50 ms
  d.start();
  REQUIRE_FALSE(notify.wait_for("READY=1").empty());
  CHECK_FALSE(notify.wait_for("WATCHDOG=1").empty());
  CHECK_FALSE(notify.wait_for("WATCHDOG=1").empty());
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
}

TEST_CASE("socket activation: hearthd serves on the descriptor systemd passes", "[daemon][process]") {
  Daemon d;
  const std::string activated = d.dir.file("activated.sock");
  const int fd = make_listening_unix_socket(activated);
  REQUIRE(fd >= 0);
  d.options.activation_fd = fd;
  d.start();
  ::close(fd);
  REQUIRE(wait_until([&] { return d.healthy(activated) || !d.process->running(); }));
  HttpResponse r = http_request(activated, "POST", "/v1/completions", completion_body(4, false));
  CHECK(r.status == 200);
  CHECK_THAT(r.body, Catch::Contains("\"text_completion\"") && Catch::Contains("\"completion_tokens\""));
  CHECK_FALSE(std::filesystem::exists(d.socket));  // no socket of its own
  CHECK_THAT(d.stderr_text(), Catch::Contains("socket activation"));
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
}

TEST_CASE("a stale socket file left by a crash is replaced", "[daemon][process]") {
  Daemon d;
  {  // bound, never listening, closed: what a killed daemon leaves behind
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, d.socket.c_str(), sizeof(a.sun_path) - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    ::close(fd);
  }
  REQUIRE(std::filesystem::is_socket(d.socket));
  REQUIRE(d.start_and_wait_ready());
  struct stat st {};
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
}

TEST_CASE("a second hearthd on a live socket exits 1 and the first keeps serving", "[daemon][process]") {
  Daemon first;
  REQUIRE(first.start_and_wait_ready());
  RunResult second = run_hearthd({"--model", first.model, "--socket", first.socket, "--threads", "1"});
  CHECK(second.code == 1);
  CHECK_THAT(second.err, Catch::Contains("already listening") && Catch::Contains(first.socket));
  CHECK(first.healthy());
  HttpResponse r = http_request(first.socket, "POST", "/v1/completions", completion_body(2, false));
  CHECK(r.status == 200);
  first.process->signal(SIGTERM);
  CHECK(first.process->wait_exit() == std::optional<int>(0));
}

TEST_CASE("SIGTERM while 2 streams run: they finish within the grace period and hearthd exits 0", "[daemon][process]") {
  // Greedy decoding of the synthetic model never samples its end token for this prompt, so
  // each stream runs to max_tokens: 4000 (~1 s of decoding at AVX-512, far more under ASan),
  // so that they still run when the SIGTERM comes even if this thread is descheduled a while.
  Daemon d({"--shutdown-grace", kLongGrace, "--ctx", "4096"});
  REQUIRE(d.start_and_wait_ready());
  HttpStream a(d.socket, "POST", "/v1/completions", completion_body(4000, true));
  HttpStream b(d.socket, "POST", "/v1/completions", completion_body(4000, true));
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(a.read_until("data: {"));
  REQUIRE(b.read_until("data: {"));
  d.process->signal(SIGTERM);
  // New requests are refused (the socket file is gone) while the streams go on.
  CHECK(wait_until([&] { return !std::filesystem::exists(d.socket); }));
  CHECK(a.read_to_close());
  CHECK(b.read_to_close());
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  for (HttpStream* s : {&a, &b}) {
    const HttpResponse r = s->response();
    CHECK(r.status == 200);
    CHECK_THAT(r.body, Catch::EndsWith("data: [DONE]\n\n"));
    CHECK(completion_tokens(r.body) == 4000);  // complete, not cut short
  }
  CHECK_THAT(d.stderr_text(), Catch::Contains("SIGTERM: stopping; 2 requests in flight") && Catch::Contains("stopped"));
}

TEST_CASE("after the grace period running streams are cancelled and still end with [DONE]", "[daemon][process]") {
  Daemon d({"--shutdown-grace", "0", "--ctx", "4096"});
  REQUIRE(d.start_and_wait_ready());
  HttpStream a(d.socket, "POST", "/v1/completions", completion_body(4000, true));
  HttpStream b(d.socket, "POST", "/v1/completions", completion_body(4000, true));
  REQUIRE(a.read_until("data: {"));
  REQUIRE(b.read_until("data: {"));
  d.process->signal(SIGTERM);
  CHECK(a.read_to_close());
  CHECK(b.read_to_close());
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  for (HttpStream* s : {&a, &b}) {
    CHECK_THAT(s->response().body, Catch::EndsWith("data: [DONE]\n\n"));
    const int n = completion_tokens(s->response().body);
    CHECK(n > 0);
    CHECK(n < 4000);
  }
  CHECK_THAT(d.stderr_text(), Catch::Contains("grace period over: cancelling 2 requests"));
}

TEST_CASE("a second SIGTERM during the grace period cancels the streams at once", "[daemon][process]") {
  Daemon d({"--shutdown-grace", kLongGrace, "--ctx", "4096"});
  REQUIRE(d.start_and_wait_ready());
  HttpStream a(d.socket, "POST", "/v1/completions", completion_body(4000, true));
  REQUIRE(a.read_until("data: {"));
  d.process->signal(SIGTERM);
  REQUIRE(wait_until([&] { return d.stderr_text().find("SIGTERM: stopping") != std::string::npos; }));
  d.process->signal(SIGTERM);
  CHECK(a.read_to_close());
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  CHECK_THAT(a.response().body, Catch::EndsWith("data: [DONE]\n\n"));
  CHECK(completion_tokens(a.response().body) < 4000);
  CHECK_THAT(d.stderr_text(), Catch::Contains("SIGTERM again: cancelling 1 requests now"));
}

TEST_CASE("the --socket-group option gives the socket that group and mode 0660", "[daemon][process]") {
  const group* g = ::getgrgid(::getegid());
  REQUIRE(g != nullptr);
  Daemon d({"--socket-group", g->gr_name});
  REQUIRE(d.start_and_wait_ready());
  struct stat st {};
  REQUIRE(::stat(d.socket.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == ::getegid());
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
}

TEST_CASE("under journald log lines carry syslog priority prefixes", "[daemon][process]") {
  Daemon d;
  d.options.journal_stream = true;
  REQUIRE(d.start_and_wait_ready());
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  const std::string log = d.stderr_text();
  CHECK_THAT(log, Catch::StartsWith("<6>hearth info: ") || Catch::StartsWith("<7>hearth debug: "));
  CHECK_THAT(log, Catch::Contains("\n<6>hearth info: serving synth-gemma3 on cpu"));
  CHECK_THAT(log, Catch::Contains("\n<7>hearth debug: "));
}

TEST_CASE("without journald log lines have no priority prefix", "[daemon][process]") {
  Daemon d;
  d.options.env["JOURNAL_STREAM"] = "1:1";  // some other stream
  REQUIRE(d.start_and_wait_ready());
  d.process->signal(SIGTERM);
  CHECK(d.process->wait_exit() == std::optional<int>(0));
  const std::string log = d.stderr_text();
  CHECK_THAT(log, Catch::StartsWith("hearth "));
  CHECK_THAT(log, !Catch::Contains("<6>"));
}
