// POST /api/pull's lines as Ollama writes them (ipc/api/ollama_pull.h), and its StreamCall
// over a puller that plays a download. The route on a real daemon against a Hub imitation:
// tests/cli/api_pull_test.py.
#include "ipc/api/ollama_pull.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using hearth::Result;
using hearth::ipc::HttpResponse;
using hearth::ipc::ModelPuller;
using hearth::ipc::OllamaPullLines;
using hearth::ipc::PullProgress;
using hearth::ipc::StreamCall;
using json = nlohmann::ordered_json;

namespace {

const std::string kSha = "3f2a4b5c6d7e8f90112233445566778899aabbccddeeff00112233445566778";

PullProgress downloading(uint64_t completed, uint64_t total = 1000) {
  return {PullProgress::Kind::Downloading, "m-Q4_K_M.gguf", kSha, completed, total, ""};
}

json parsed(const std::string& line) {
  REQUIRE(!line.empty());
  REQUIRE(line.back() == '\n');
  return json::parse(line);
}

// Plays a download of 1000 bytes in 10 pieces; fails when asked to, or when cancelled.
class PlayedPuller final : public ModelPuller {
 public:
  std::string fail_with;
  Result<std::string> pull(const std::string& name, const std::function<void(const PullProgress&)>& on_progress,
                           const std::atomic<bool>& cancelled) override {
    names.push_back(name);
    on_progress({PullProgress::Kind::Resolving, "", "", 0, 0, ""});
    for (uint64_t done = 100; done <= 1000; done += 100) {
      if (cancelled) return hearth::make_error("the pull was cancelled");
      on_progress(downloading(done));
    }
    on_progress({PullProgress::Kind::Verifying, "m-Q4_K_M.gguf", kSha, 1000, 1000, ""});
    if (!fail_with.empty()) return hearth::make_error(fail_with);
    return std::string("/models/m-Q4_K_M.gguf");
  }
  std::vector<std::string> names;
};

std::vector<json> run(const StreamCall& call, HttpResponse* final_response, bool cancel = false) {
  std::vector<json> lines;
  std::atomic<bool> cancelled{cancel};
  *final_response = call.run([&](std::string piece) { lines.push_back(parsed(piece)); }, cancelled);
  return lines;
}

}  // namespace

TEST_CASE("pull progress becomes Ollama's lines: manifest, the file's bytes by digest, verifying") {
  OllamaPullLines lines;
  const auto t0 = OllamaPullLines::Clock::now();
  CHECK(parsed(*lines.line({PullProgress::Kind::Resolving, "", "", 0, 0, ""}, t0)) ==
        json{{"status", "pulling manifest"}});
  CHECK(parsed(*lines.line(downloading(10), t0)) ==
        json{{"status", "pulling 3f2a4b5c6d7e"}, {"digest", "sha256:" + kSha}, {"total", 1000}, {"completed", 10}});
  CHECK(parsed(*lines.line({PullProgress::Kind::Verifying, "m", kSha, 0, 0, ""}, t0)) ==
        json{{"status", "verifying sha256 digest"}});
  CHECK(parsed(*lines.line({PullProgress::Kind::Message, "m", "", 0, 0, "resuming m from byte 10"}, t0)) ==
        json{{"status", "resuming m from byte 10"}});
  CHECK(parsed(OllamaPullLines::success()) == json{{"status", "success"}});
  CHECK(parsed(OllamaPullLines::error("no \"room\"")) == json{{"error", "no \"room\""}});
}

TEST_CASE("download lines are thinned to one per 100 ms, but a file's first and last always come") {
  OllamaPullLines lines;
  const auto t0 = OllamaPullLines::Clock::now();
  const auto ms = [&](int n) { return t0 + std::chrono::milliseconds(n); };
  CHECK(lines.line(downloading(1), ms(0)));         // the first
  CHECK_FALSE(lines.line(downloading(2), ms(50)));  // too soon
  CHECK(lines.line(downloading(3), ms(100)));
  CHECK_FALSE(lines.line(downloading(4), ms(150)));
  CHECK(lines.line(downloading(1000), ms(160)));  // the last: completed == total
  PullProgress other = downloading(1);
  other.file = "other.gguf";
  CHECK(lines.line(other, ms(161)));  // another file's first
}

TEST_CASE("a streamed pull emits its lines as it goes and ends with success, or with an error line") {
  auto puller = std::make_shared<PlayedPuller>();
  StreamCall call = hearth::ipc::ollama_pull_call(puller, "hf.co/org/m:Q4_K_M", true);
  CHECK(call.stream);
  CHECK(call.content_type == "application/x-ndjson");
  HttpResponse final_response;
  std::vector<json> lines = run(call, &final_response);
  CHECK(puller->names == std::vector<std::string>{"hf.co/org/m:Q4_K_M"});
  REQUIRE(lines.size() >= 4);
  CHECK(lines.front() == json{{"status", "pulling manifest"}});
  CHECK(lines[1]["completed"] == 100);                  // the file's first piece
  CHECK(lines[lines.size() - 2]["completed"] == 1000);  // and its last
  CHECK(lines.back() == json{{"status", "verifying sha256 digest"}});
  CHECK(parsed(final_response.body) == json{{"status", "success"}});

  puller->fail_with = "no space left";
  lines = run(call, &final_response);
  CHECK(parsed(final_response.body) == json{{"error", "no space left"}});

  lines = run(call, &final_response, /*cancel=*/true);  // the client hung up
  CHECK(parsed(final_response.body) == json{{"error", "the pull was cancelled"}});
}

TEST_CASE("a pull with stream false answers one object: success, or a 500 with Ollama's error") {
  auto puller = std::make_shared<PlayedPuller>();
  StreamCall call = hearth::ipc::ollama_pull_call(puller, "m", false);
  CHECK_FALSE(call.stream);
  HttpResponse final_response;
  CHECK(run(call, &final_response).empty());
  CHECK(final_response.status == 200);
  CHECK(json::parse(final_response.body) == json{{"status", "success"}});
  puller->fail_with = "the Hub refused it";
  run(call, &final_response);
  CHECK(final_response.status == 500);
  CHECK(json::parse(final_response.body) == json{{"error", "the Hub refused it"}});
}
