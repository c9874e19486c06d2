// hearth cache stats|clear|warm: the daemon's prompt cache.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"

namespace hearth::cli {
namespace {

using Json = nlohmann::json;

// A member as a number (0 when absent or not a number: an older or newer daemon).
double num(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

long long count(const Json& object, const char* key) {
  return static_cast<long long>(num(object, key));
}

void print_summary(const Json& j) {
  const Json memory = j.value("memory", Json::object());
  const Json disk = j.value("disk", Json::object());
  std::printf("model:      %s\n", j.value("model", std::string("?")).c_str());
  if (const std::string kv = kv_summary(j); !kv.empty()) std::printf("kv:         %s\n", kv.c_str());
  const Json caller = j.value("caller", Json::object());
  if (!caller.empty()) {
    const Json uid = caller.value("uid", Json());
    const std::string who = uid.is_number() ? "uid " + std::to_string(uid.get<long long>()) : uid.dump();
    if (caller.value("admin", false)) {
      std::printf("entries:    every user's (you are %s; scope: %s)\n", who.c_str(),
                  caller.value("scope", std::string("?")).c_str());
    } else {
      std::printf("entries:    yours only (%s; scope: %s)\n", who.c_str(),
                  caller.value("scope", std::string("?")).c_str());
    }
  }
  std::printf("memory:     %lld blocks, %lld tokens, %s of %s\n", count(memory, "blocks"), count(memory, "tokens"),
              human_bytes(num(memory, "bytes")).c_str(), human_bytes(num(memory, "capacity_bytes")).c_str());
  std::printf("  hits:     %lld of %lld prompts (%.1f%%), %lld tokens; %lld evictions\n", count(memory, "hits"),
              count(memory, "lookups"), 100.0 * num(memory, "hit_rate"), count(memory, "hit_tokens"),
              count(memory, "evictions"));
  if (!disk.value("enabled", false)) {
    std::printf("disk:       off\n");
  } else {
    std::printf("disk:       %s\n", disk.value("dir", std::string()).c_str());
    std::printf("  entries:  %lld chunks, %s of a %s budget (this model: %lld chunks, %s)\n", count(disk, "entries"),
                human_bytes(num(disk, "bytes")).c_str(), human_bytes(num(disk, "budget_bytes")).c_str(),
                count(disk, "model_entries"), human_bytes(num(disk, "model_bytes")).c_str());
    std::printf("  hits:     %lld of %lld chunk loads (%.1f%%), %lld tokens, %s restored\n", count(disk, "hits"),
                count(disk, "hits") + count(disk, "misses"), 100.0 * num(disk, "hit_rate"), count(disk, "hit_tokens"),
                human_bytes(num(disk, "restored_bytes")).c_str());
    std::printf("  writes:   %lld chunks, %s; %lld dropped, %lld errors, %lld queued\n", count(disk, "written_chunks"),
                human_bytes(num(disk, "written_bytes")).c_str(), count(disk, "dropped_writes"),
                count(disk, "write_errors"), count(disk, "queue_depth"));
    std::printf("  evicted:  %lld chunks; %lld failed their checksum\n", count(disk, "evictions"),
                count(disk, "checksum_failures"));
    const double quota = num(disk, "user_max_bytes");
    std::printf("  shares:   %s a user (the budget over the users with entries)%s%s\n",
                human_bytes(num(disk, "share_bytes")).c_str(), quota > 0 ? ", quota " : "",
                quota > 0 ? human_bytes(quota).c_str() : "");
    const Json caller = j.value("caller", Json::object());
    if (caller.is_object() && caller.contains("disk_directory_bytes"))
      std::printf("  yours:    %s of every model's entries\n",
                  human_bytes(num(caller, "disk_directory_bytes")).c_str());
    if (!disk.value("writing", true)) {
      const Json reason = disk.value("stopped_reason", Json());
      std::printf("  writing:  stopped (%s)\n",
                  reason.is_string() ? reason.get<std::string>().c_str() : "no reason given");
    }
  }
  std::printf("prefilled:  %lld tokens (computed, not from the cache)\n", count(j, "prefilled_tokens"));
  const Json owners = j.value("owners", Json::array());
  if (owners.is_array() && !owners.empty()) {
    std::printf("by user:\n");
    for (const Json& o : owners) {
      const Json uid = o.value("uid", Json());
      const long long id = uid.is_number() ? uid.get<long long>() : -1;
      const std::string name = id == 0xfffffffeLL ? std::string("tcp") : "uid " + std::to_string(id);
      std::printf("  %-12s memory %lld tokens (%s), disk %lld chunks (%s; all models %s of a %s share)\n", name.c_str(),
                  count(o, "memory_tokens"), human_bytes(num(o, "memory_bytes")).c_str(), count(o, "disk_entries"),
                  human_bytes(num(o, "disk_bytes")).c_str(), human_bytes(num(o, "disk_directory_bytes")).c_str(),
                  human_bytes(num(disk, "share_bytes")).c_str());
    }
  }
}

int run_stats(const GlobalOptions& global, bool json) {
  Client client;
  if (!client.open(global)) return kExitError;
  char* text = nullptr;
  int rc = hearth_client_cache_stats(client.get(), &text);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  hearth_free(text);
  if (!j.is_object()) {
    std::fprintf(stderr, "hearth: the daemon's cache statistics are not a JSON object\n");
    return kExitError;
  }
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_summary(j);
  }
  return kExitOk;
}

int run_clear(const GlobalOptions& global, const std::string& model, long long uid) {
  Client client;
  if (!client.open(global)) return kExitError;
  const char* m = model.empty() ? nullptr : model.c_str();
  int rc = uid >= 0 ? hearth_client_cache_clear_uid(client.get(), m, static_cast<unsigned int>(uid))
                    : hearth_client_cache_clear(client.get(), m);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  const std::string whose = uid >= 0 ? "uid " + std::to_string(uid) + "'s" : "your";
  if (model.empty()) {
    std::printf("cleared %s prompt cache entries of every model (root: every user's)\n", whose.c_str());
  } else {
    std::printf("cleared %s prompt cache entries of %s\n", whose.c_str(), model.c_str());
  }
  return kExitOk;
}

// FILE's contents, or stdin's for "-"; false (with a message) when it cannot be read.
bool read_input(const std::string& file, std::string* out) {
  if (file == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return true;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "hearth: cannot read %s: %s\n", file.c_str(), std::strerror(errno));
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

int run_warm(const GlobalOptions& global, const CacheOptions& options) {
  std::string text;
  if (!read_input(options.file, &text)) return kExitError;
  Client client;
  if (!client.open(global)) return kExitError;
  hearth_warm_result r;
  hearth_warm_result_init(&r);
  int rc = hearth_client_cache_warm(client.get(), options.raw ? HEARTH_WARM_PROMPT : HEARTH_WARM_SYSTEM_PROMPT,
                                    text.c_str(), &r);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  std::printf("warmed %lld tokens: %lld cached (%lld memory, %lld disk), %lld prefilled, %lld chunks written\n",
              static_cast<long long>(r.tokens), static_cast<long long>(r.cached_memory_tokens + r.cached_disk_tokens),
              static_cast<long long>(r.cached_memory_tokens), static_cast<long long>(r.cached_disk_tokens),
              static_cast<long long>(r.prefilled_tokens), static_cast<long long>(r.chunks_written));
  std::printf("time: %.1f ms (cache restore %.1f ms of %s, prefill %.1f ms)\n", r.total_ms, r.cache_restore_ms,
              human_bytes(static_cast<double>(r.cache_restore_bytes)).c_str(), r.prefill_ms);
  return kExitOk;
}

}  // namespace

std::string kv_summary(const nlohmann::json& cache_stats) {
  const Json kv = cache_stats.value("kv", Json::object());
  if (!kv.is_object() || !kv.contains("type")) return "";  // an older daemon
  const Json per_token = kv.value("bytes_per_token", Json::object());
  std::string out =
      kv.value("type", std::string("?")) + ", " + human_bytes(num(per_token, "memory")) + " a token in memory, ";
  const auto disk = per_token.find("disk");
  out += disk != per_token.end() && disk->is_number() ? human_bytes(disk->get<double>()) + " on disk" : "no disk tier";
  return out;
}

void add_cache_command(CLI::App* app, CacheOptions* options) {
  CLI::App* cache = app->add_subcommand("cache", "the daemon's prompt cache: stats, clear, warm");
  cache->require_subcommand(1);
  CLI::App* stats = cache->add_subcommand("stats", "entries, bytes against the budget, hit rates and writes");
  stats->add_flag("--json", options->json, "print the daemon's statistics as JSON");
  stats->callback([options] { options->action = CacheOptions::Action::kStats; });
  CLI::App* clear =
      cache->add_subcommand("clear", "forget your cached prompt prefixes (every model's by default; root: everyone's)");
  clear->add_option("--model", options->model, "only this model's (the loaded one; see `hearth models`)");
  clear->add_option("--uid", options->uid, "only this user's entries (root or the daemon's user only)")
      ->check(CLI::NonNegativeNumber);
  clear->callback([options] { options->action = CacheOptions::Action::kClear; });
  CLI::App* warm = cache->add_subcommand(
      "warm", "prefill FILE's text into the cache without generating (by default a chat system prompt)");
  warm->add_option("file", options->file, "the text to warm; - reads stdin")->required();
  warm->add_flag("--raw", options->raw, "the text is a completion prompt, not a chat system prompt");
  warm->callback([options] { options->action = CacheOptions::Action::kWarm; });
}

int run_cache(const GlobalOptions& global, const CacheOptions& options) {
  switch (options.action) {
    case CacheOptions::Action::kStats:
      return run_stats(global, options.json);
    case CacheOptions::Action::kClear:
      return run_clear(global, options.model, options.uid);
    case CacheOptions::Action::kWarm:
      return run_warm(global, options);
    case CacheOptions::Action::kNone:
      break;
  }
  return kExitError;
}

}  // namespace hearth::cli
