// The `hearth` CLI without hearthd: when no daemon is running every command says so, names
// the socket, says how to start one, and exits with 2; Ctrl-C against a scripted stream.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "fake_daemon.h"
#include "hearth/client.h"
#include "run_command.h"

using hearth::test::run_command;
using hearth::test::shell_quote;

TEST_CASE("every hearth command reports a missing daemon with a hint and exit code 2", "[client]") {
  hearth::test::TempDir dir;
  std::string socket = dir.file("bogus.sock");
  std::string cli = shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(socket) + " ";
  for (const char* command : {"ask hello", "status", "models", "chat", "cache stats", "cache clear", "cache warm -"}) {
    INFO(command);
    auto r = run_command(cli + command, "hi\n");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("no hearthd is listening on " + socket) != std::string::npos);
    CHECK(r.err.find("systemctl --user start hearthd.socket") != std::string::npos);
  }
  // HEARTH_SOCKET is honoured when --socket is absent.
  auto r = run_command("HEARTH_SOCKET=" + shell_quote(socket) + " " + shell_quote(HEARTH_CLI_PATH) + " models");
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(socket) != std::string::npos);
}

TEST_CASE("hearth --version prints the client version and usage errors exit with 1", "[client]") {
  auto r = run_command(shell_quote(HEARTH_CLI_PATH) + " --version");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find(HEARTH_CLIENT_VERSION) != std::string::npos);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH)).exit_code == 1);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " frobnicate").exit_code == 1);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " ask --max-tokens -3 hi").exit_code == 1);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " cache").exit_code == 1);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " cache warm").exit_code == 1);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " cache frob").exit_code == 1);
  auto missing = run_command(shell_quote(HEARTH_CLI_PATH) + " cache warm /nonexistent/prompt.txt");
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("cannot read /nonexistent/prompt.txt") != std::string::npos);
}

TEST_CASE("Ctrl-C during hearth ask cancels the stream, disconnects and exits with 130", "[client]") {
  std::atomic<bool> saw_disconnect{false};
  hearth::test::FakeDaemon daemon([&](const hearth::test::FakeDaemon::Request& request, int fd) {
    if (request.head.rfind("GET /health", 0) == 0) {  // the probe below
      hearth::test::write_all(fd, hearth::test::http_response(200, "application/json", R"({"status":"ok"})"));
      return;
    }
    hearth::test::write_all(fd,
                            hearth::test::sse_head() +
                                hearth::test::sse_event(R"({"choices":[{"index":0,"delta":{"content":"partial"}}]})"));
    saw_disconnect = hearth::test::wait_for_close(fd);  // the stream stalls, never ending on its own
  });
  // SIGINT once the CLI has printed the first piece (it flushes each piece), however long
  // that takes; then the CLI can only end because the interrupt cancelled the stream.
  hearth::test::TempDir dir;
  const std::string out = shell_quote(dir.file("out"));
  auto r =
      run_command("(" + shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) + " ask hello >" +
                  out + " & pid=$!; until grep -q partial " + out + " || ! kill -0 $pid 2>/dev/null; do sleep 0.01; " +
                  "done; kill -INT $pid; wait $pid; rc=$?; cat " + out + "; exit $rc)");
  CHECK(r.exit_code == 130);
  CHECK(r.out == "partial\n");
  CHECK(r.err.find("cancelled") != std::string::npos);
  hearth_client* probe = nullptr;  // the fake serves one connection at a time
  REQUIRE(hearth_client_open(daemon.path().c_str(), &probe) == HEARTH_OK);
  CHECK(hearth_client_health(probe) == HEARTH_OK);
  hearth_client_close(probe);
  INFO("saw_disconnect false: the CLI did not close the stalled stream before the hang guard");
  CHECK(saw_disconnect);
}
