// hearth ask: one question, the answer streamed to stdout (or one JSON object with --json).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "commands.h"

namespace hearth::cli {
namespace {

// user_data: a size_t counting the bytes written.
int write_piece(const char* piece, size_t len, void* user_data) {
  *static_cast<size_t*>(user_data) += len;
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) {
    if (!text.empty()) text += ' ';
    text += w;
  }
  return text;
}

nlohmann::json stats_json(const hearth_stats& s) {
  return {
      {"finish_reason", s.finish_reason_text[0] ? nlohmann::json(s.finish_reason_text) : nlohmann::json()},
      {"usage",
       {{"prompt_tokens", s.prompt_tokens},
        {"completion_tokens", s.completion_tokens},
        {"total_tokens", s.prompt_tokens + s.completion_tokens},
        {"cached_tokens", s.cached_tokens}}},
      {"timings",
       {{"ttft_ms", s.ttft_ms},
        {"prefill_ms", s.prefill_ms},
        {"decode_ms", s.decode_ms},
        {"prefill_tok_s", s.prefill_tok_s},
        {"decode_tok_s", s.decode_tok_s},
        {"itl_ms", {{"mean", s.itl_mean_ms}, {"p50", s.itl_p50_ms}, {"p95", s.itl_p95_ms}, {"max", s.itl_max_ms}}},
        {"queue_ms", s.queue_ms},
        {"cache_restore_ms", s.cache_restore_ms},
        {"cache_restore_bytes", s.cache_restore_bytes},
        {"cached_tokens", {{"memory", s.cached_memory_tokens}, {"disk", s.cached_disk_tokens}}},
        {"prefilled_tokens", s.prefilled_tokens},
        {"total_ms", s.total_ms}}},
  };
}

}  // namespace

int run_ask(const GlobalOptions& global, AskOptions& options) {
  std::string question = join(options.words);
  if (question.empty()) {
    if (isatty(STDIN_FILENO)) std::fprintf(stderr, "hearth: reading the question from stdin (end with Ctrl-D)\n");
    question.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    while (!question.empty() && (question.back() == '\n' || question.back() == '\r')) question.pop_back();
  }
  if (question.empty()) {
    std::fprintf(stderr, "hearth: no question given\n");
    return kExitError;
  }

  if (options.raw && !options.generation.system.empty()) {
    std::fprintf(stderr, "hearth: --system needs the chat template; it cannot go with --raw\n");
    return kExitError;
  }
  Client client;
  if (!client.open(global)) return kExitError;
  hearth_client_set_timeout(client.get(), timeout_ms(options.generation));
  std::vector<hearth_message> messages;
  if (!options.generation.system.empty()) messages.push_back({"system", options.generation.system.c_str()});
  messages.push_back({"user", question.c_str()});
  hearth_request_options request = to_request_options(options.generation);
  hearth_stats stats;
  hearth_stats_init(&stats);

  install_interrupt_handler(client.get(), nullptr);
  set_generating(true);
  char* text = nullptr;
  size_t written = 0;
  int rc;
  const hearth_text_callback on_text = options.json ? nullptr : write_piece;
  char** out_text = options.json ? &text : nullptr;
  if (options.raw) {
    rc = hearth_client_complete(client.get(), question.c_str(), &request, on_text, &written, out_text, &stats);
  } else {
    rc = hearth_client_chat(client.get(), messages.data(), messages.size(), &request, on_text, &written, out_text,
                            &stats);
  }
  set_generating(false);

  if (rc != HEARTH_OK) {
    hearth_free(text);
    if (written > 0) std::fputc('\n', stdout);
    std::fflush(stdout);
    return report_error(client.get(), rc);
  }
  if (options.json) {
    nlohmann::json out = stats_json(stats);
    out["text"] = text != nullptr ? text : "";
    hearth_free(text);
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (options.generation.stats) print_stats(stats);
  return kExitOk;
}

}  // namespace hearth::cli
