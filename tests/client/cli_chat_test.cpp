// `hearth chat` keeps each conversation in a JSON-lines file under $XDG_STATE_HOME/hearth/
// chats (else ~/.local/state/hearth/chats) and `--continue` goes on with the last one;
// `--timeout` on ask and chat. The CLI runs as a child process against a scripted daemon.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fake_daemon.h"
#include "run_command.h"

namespace {

namespace fs = std::filesystem;
using hearth::test::FakeDaemon;
using hearth::test::run_command;
using hearth::test::shell_quote;
using hearth::test::TempDir;
using Json = nlohmann::json;

// Answers /health, and each chat request with a stream "answer N" (N counts the chats).
class ChatDaemon {
 public:
  ChatDaemon()
      : daemon_([this](const FakeDaemon::Request& r, int fd) {
          using namespace hearth::test;
          if (r.head.rfind("GET /health", 0) == 0) {
            write_all(fd, http_response(200, "application/json", R"({"status":"ok"})"));
            return;
          }
          const std::string text = "answer " + std::to_string(++chats_);
          write_all(fd, sse_head() +
                            sse_event(R"({"choices":[{"index":0,"delta":{"content":")" + text +
                                      R"("},"finish_reason":null}]})") +
                            http_chunk("data: [DONE]\n\n") + last_chunk());
        }) {}
  const std::string& path() const { return daemon_.path(); }
  // The messages of the last chat request.
  Json last_messages() const {
    auto requests = daemon_.requests();
    for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
      if (it->head.rfind("POST /v1/chat/completions", 0) == 0) return Json::parse(it->body)["messages"];
    }
    return Json();
  }

 private:
  std::atomic<int> chats_{0};
  FakeDaemon daemon_;
};

// `hearth --socket S chat ARGS` with env (NAME=value ...) and stdin input.
hearth::test::CommandResult chat(const ChatDaemon& daemon, const std::string& env, const std::string& args,
                                 const std::string& input) {
  return run_command(
      "env " + env + " " + shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) + " chat " + args,
      input);
}

std::vector<std::string> conversation_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".jsonl") files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A conversation file as a JSON array of its lines.
Json read_conversation(const std::string& path) {
  Json lines = Json::array();
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  return lines;
}

Json msg(const char* role, const char* content) {
  return {{"role", role}, {"content", content}};
}

}  // namespace

TEST_CASE("hearth chat saves the conversation under XDG_STATE_HOME and --continue goes on with it", "[client]") {
  ChatDaemon daemon;
  TempDir state;
  const std::string env = "XDG_STATE_HOME=" + shell_quote(state.path().string());
  const std::string chats = state.file("hearth/chats");

  auto first = chat(daemon, env, "--system 'Be brief.'", "hello\n");
  CHECK(first.exit_code == 0);
  CHECK(first.out == "answer 1\n");
  auto files = conversation_files(chats);
  REQUIRE(files.size() == 1);
  CHECK(read_conversation(files[0]) ==
        Json::array({msg("system", "Be brief."), msg("user", "hello"), msg("assistant", "answer 1")}));
  CHECK((fs::status(files[0]).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));

  // --continue: the saved turns go first, and the new ones are appended to the same file.
  auto second = chat(daemon, env, "--continue", "again\n");
  CHECK(second.exit_code == 0);
  CHECK(second.out == "answer 2\n");
  CHECK(daemon.last_messages() == Json::array({msg("system", "Be brief."), msg("user", "hello"),
                                               msg("assistant", "answer 1"), msg("user", "again")}));
  REQUIRE(conversation_files(chats) == files);
  CHECK(read_conversation(files[0]).size() == 5);

  // A new chat is a new file; /reset starts another, keeping the system message.
  auto third = chat(daemon, env, "--system 'Be kind.'", "one\n/reset\ntwo\n");
  CHECK(third.exit_code == 0);
  CHECK(daemon.last_messages() == Json::array({msg("system", "Be kind."), msg("user", "two")}));
  REQUIRE(conversation_files(chats).size() == 3);

  // --continue takes the conversation written last: the one after /reset.
  auto fourth = chat(daemon, env, "-c", "three\n");
  CHECK(fourth.exit_code == 0);
  CHECK(daemon.last_messages() == Json::array({msg("system", "Be kind."), msg("user", "two"),
                                               msg("assistant", "answer 4"), msg("user", "three")}));
  CHECK(conversation_files(chats).size() == 3);
}

TEST_CASE("hearth chat saves under ~/.local/state without XDG_STATE_HOME, and not at all with --no-history",
          "[client]") {
  ChatDaemon daemon;
  TempDir home;
  const std::string env = "-u XDG_STATE_HOME HOME=" + shell_quote(home.path().string());
  CHECK(chat(daemon, env, "--no-history", "hello\n").exit_code == 0);
  CHECK_FALSE(fs::exists(home.file(".local/state/hearth")));
  CHECK(chat(daemon, env, "", "hello\n").exit_code == 0);
  CHECK(conversation_files(home.file(".local/state/hearth/chats")).size() == 1);
}

TEST_CASE("hearth chat goes on when its conversation cannot be saved, with one warning", "[client]") {
  ChatDaemon daemon;
  TempDir dir;
  std::ofstream(dir.file("a-file")) << "not a folder";
  // Under a plain file no folder can be made (ENOTDIR, also for root).
  const std::string env = "XDG_STATE_HOME=" + shell_quote(dir.file("a-file/state"));
  auto r = chat(daemon, env, "", "hello\nagain\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "answer 1\nanswer 2\n");
  const std::string warning = "warning: cannot save the conversation";
  const size_t at = r.err.find(warning);
  CHECK(at != std::string::npos);
  CHECK(r.err.find(warning, at + 1) == std::string::npos);  // once
  // Continuing from there finds nothing, says so, and starts a new conversation.
  auto resumed = chat(daemon, env, "--continue", "third\n");
  CHECK(resumed.exit_code == 0);
  CHECK(resumed.err.find("no saved conversation to continue") != std::string::npos);
  CHECK(daemon.last_messages() == Json::array({msg("user", "third")}));
}

TEST_CASE("hearth chat --continue skips a line cut short and refuses --system", "[client]") {
  ChatDaemon daemon;
  TempDir state;
  const std::string env = "XDG_STATE_HOME=" + shell_quote(state.path().string());
  REQUIRE(chat(daemon, env, "", "hello\n").exit_code == 0);
  auto files = conversation_files(state.file("hearth/chats"));
  REQUIRE(files.size() == 1);
  std::ofstream(files[0], std::ios::app) << R"({"role":"user","cont)";  // a crash mid-write
  auto r = chat(daemon, env, "--continue", "next\n");
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("skipped 1 unreadable lines") != std::string::npos);
  CHECK(daemon.last_messages() ==
        Json::array({msg("user", "hello"), msg("assistant", "answer 1"), msg("user", "next")}));
  CHECK(chat(daemon, env, "--continue --system x", "").exit_code == 1);
}

TEST_CASE("hearth ask --timeout fails with a clear error when the daemon sends nothing", "[client]") {
  std::atomic<bool> closed{false};
  FakeDaemon daemon([&](const FakeDaemon::Request&, int fd) { closed = hearth::test::wait_for_close(fd); });
  auto r = run_command(shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(daemon.path()) +
                       " ask --timeout 0.2 hello");
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("did not answer in time") != std::string::npos);
  CHECK(r.err.find("nothing for 200 ms") != std::string::npos);
  CHECK(run_command(shell_quote(HEARTH_CLI_PATH) + " ask --timeout -1 hello").exit_code == 1);
}
