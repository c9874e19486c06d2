// `hearth cache stats|clear|warm` and the cache calls of libhearth-client against a real
// hearthd serving the tiny synthetic model, with its disk cache in a temporary directory.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "hearth/client.h"
#include "hearthd_process.h"
#include "run_command.h"
#include "tests/tools/synthetic_model.h"

namespace {

using hearth::test::HearthdProcess;
using hearth::test::run_command;
using hearth::test::shell_quote;
using hearth::test::TempDir;

HearthdProcess& synthetic_daemon() {
  static TempDir model_dir;
  static std::string model = [] {
    hearth::test::SyntheticOptions o;
    o.arch = "gemma3";
    auto bytes = hearth::test::make_synthetic_model(o);
    REQUIRE(bytes.ok());
    std::string path = model_dir.file("synthetic.gguf");
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
    return path;
  }();
  static HearthdProcess daemon(model, {"--parallel", "2"});
  if (!daemon.ready()) FAIL("hearthd did not become ready; its log:\n" << daemon.log());
  return daemon;
}

std::string cli() {
  return shell_quote(HEARTH_CLI_PATH) + " --socket " + shell_quote(synthetic_daemon().socket_path()) + " ";
}

// "warmed N tokens: C cached (...), P prefilled, ..." -> {N, C, P}.
std::array<long, 3> warm_counts(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(R"(warmed (\d+) tokens: (\d+) cached .*, (\d+) prefilled)")));
  return {std::stol(m[1]), std::stol(m[2]), std::stol(m[3])};
}

const char* kSystem =
    "You are the help desk of a small library. Answer questions about opening hours, loans and "
    "renewals in one or two sentences, and point to the front desk for anything about fines.";

}  // namespace

TEST_CASE("hearth cache warm prefills a system prompt once, and again finds it cached", "[client][e2e]") {
  TempDir dir;
  const std::string file = dir.file("system.txt");
  std::ofstream(file) << kSystem;
  REQUIRE(run_command(cli() + "cache clear").exit_code == 0);

  auto first = run_command(cli() + "cache warm " + shell_quote(file));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const auto a = warm_counts(first.out);
  CHECK(a[0] > 16);
  CHECK(a[1] + a[2] == a[0]);
  CHECK(first.out.find("ms") != std::string::npos);

  // The same text from stdin: everything but the last partial block is served from memory.
  auto second = run_command(cli() + "cache warm -", kSystem);
  REQUIRE(second.exit_code == 0);
  const auto b = warm_counts(second.out);
  CHECK(b[0] == a[0]);
  CHECK(b[1] >= (a[0] - 1) / 16 * 16);

  // --raw warms a completion prompt: other tokens than the chat prefix.
  auto raw = run_command(cli() + "cache warm --raw -", kSystem);
  REQUIRE(raw.exit_code == 0);
  CHECK(warm_counts(raw.out)[0] != a[0]);

  // A chat that starts with the warmed system prompt has it cached.
  auto ask = run_command(cli() + "ask --stats --temp 0 --max-tokens 2 --system " + shell_quote(kSystem) + " hello");
  REQUIRE(ask.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(ask.err, m, std::regex(R"(cached (\d+))")));
  CHECK(std::stol(m[1]) >= a[0] / 16 * 16);
}

TEST_CASE("hearth cache stats summarises both tiers, --json gives the daemon's object", "[client][e2e]") {
  auto warm = run_command(cli() + "cache warm --raw -", "Once upon a time there was a lighthouse keeper.");
  REQUIRE(warm.exit_code == 0);
  auto stats = run_command(cli() + "cache stats");
  INFO(stats.out << stats.err);
  REQUIRE(stats.exit_code == 0);
  for (const char* line : {"model:", "kv:         f16, ", " on disk", "memory:", "hits:", "disk:", "prefilled:"}) {
    INFO(line);
    CHECK(stats.out.find(line) != std::string::npos);
  }
  auto json = run_command(cli() + "cache stats --json");
  REQUIRE(json.exit_code == 0);
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["model"] == "synthetic");
  CHECK(j["memory"]["lookups"].get<long>() >= 1);
  CHECK(j["disk"].contains("budget_bytes"));
  CHECK(j["prefilled_tokens"].get<long>() >= 1);
}

TEST_CASE("hearth cache clear empties the cache, for every model or the loaded one", "[client][e2e]") {
  REQUIRE(run_command(cli() + "cache warm -", kSystem).exit_code == 0);
  auto all = run_command(cli() + "cache clear");
  CHECK(all.exit_code == 0);
  CHECK(all.out.find("every model") != std::string::npos);
  // Nothing left to attach: warming again prefills everything.
  const auto again = warm_counts(run_command(cli() + "cache warm -", kSystem).out);
  CHECK(again[1] == 0);
  CHECK(again[2] == again[0]);

  auto one = run_command(cli() + "cache clear --model synthetic");
  CHECK(one.exit_code == 0);
  CHECK(one.out.find("synthetic") != std::string::npos);
  auto unknown = run_command(cli() + "cache clear --model nope");
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.err.find("does not exist") != std::string::npos);
}
