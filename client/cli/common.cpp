#include "common.h"

#include <signal.h>

#include <atomic>
#include <cstdio>

#include "common/probe/peak_report.h"

namespace hearth::cli {
namespace {

std::atomic<hearth_client*> g_client{nullptr};
std::atomic<bool> g_generating{false};
void (*g_on_idle_interrupt)() = nullptr;

extern "C" void on_sigint(int) {
  if (g_generating.load()) {
    if (hearth_client* c = g_client.load()) hearth_client_cancel(c);
  } else if (g_on_idle_interrupt != nullptr) {
    g_on_idle_interrupt();
  } else {
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
  }
}

}  // namespace

bool Client::open(const GlobalOptions& options) {
  int rc = hearth_client_open(options.socket.empty() ? nullptr : options.socket.c_str(), &handle_);
  if (rc != HEARTH_OK) {
    std::fprintf(stderr, "hearth: cannot use socket %s: %s\n", options.socket.c_str(), hearth_strerror(rc));
    return false;
  }
  return true;
}

std::string no_daemon_message(const std::string& socket_path) {
  // The system service's socket lives under /run/hearth; anything else is a user's.
  bool system = socket_path.rfind("/run/hearth/", 0) == 0;
  return "no hearthd is listening on " + socket_path +
         " \xe2\x80\x94 start one with `hearthd --model NAME_OR_PATH` or `" +
         (system ? "sudo systemctl start hearthd.socket" : "systemctl --user start hearthd.socket") +
         "` (or point --socket or $HEARTH_SOCKET at a running one)";
}

int report_error(hearth_client* client, int rc) {
  if (rc == HEARTH_ERR_NO_DAEMON) {
    std::fprintf(stderr, "hearth: %s\n", no_daemon_message(hearth_client_socket_path(client)).c_str());
    return kExitNoDaemon;
  }
  const char* detail = hearth_client_last_error(client);
  if (rc == HEARTH_ERR_CANCELLED) {
    std::fprintf(stderr, "hearth: cancelled\n");
  } else if (*detail != '\0') {
    std::fprintf(stderr, "hearth: %s: %s\n", hearth_strerror(rc), detail);
  } else {
    std::fprintf(stderr, "hearth: %s\n", hearth_strerror(rc));
  }
  return rc == HEARTH_ERR_CANCELLED ? kExitCancelled : kExitError;
}

// 1536 -> "1.5 KiB"; bytes below 1 KiB as "512 B".
std::string human_bytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
  return text;
}

void print_stats(const hearth_stats& s) {
  std::fprintf(stderr,
               "--- stats\n"
               "prompt tokens  %lld (cached %lld: %lld memory, %lld disk; prefilled %lld)\n"
               "generated      %lld tokens (finish: %s)\n"
               "ttft           %.1f ms (queue %.1f ms, cache restore %.1f ms of %s, prefill %.1f ms)\n"
               "itl            mean %.2f ms, p50 %.2f ms, p95 %.2f ms, max %.2f ms\n",
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.cached_tokens),
               static_cast<long long>(s.cached_memory_tokens), static_cast<long long>(s.cached_disk_tokens),
               static_cast<long long>(s.prefilled_tokens), static_cast<long long>(s.completion_tokens),
               *s.finish_reason_text ? s.finish_reason_text : "-", s.ttft_ms, s.queue_ms, s.cache_restore_ms,
               human_bytes(static_cast<double>(s.cache_restore_bytes)).c_str(), s.prefill_ms, s.itl_mean_ms,
               s.itl_p50_ms, s.itl_p95_ms, s.itl_max_ms);
  // Against this machine's peaks (measured once, then read from the cache folder): the
  // daemon runs on this machine, since the socket is local.
  const probe::MachinePeaks peaks = machine_peaks(false);
  std::fprintf(stderr, "prefill        %.1f tok/s", s.prefill_tok_s);
  // Never over 100%: a figure above a peak says the peak is a lower bound (peak_report.h).
  const std::string again = "hearth bench --reprobe";
  if (s.prefill_gops > 0)
    std::fprintf(stderr, ", %s",
                 probe::against_peak(s.prefill_gops, peaks.int8_gops, "GOP/s", "int8 peak", again).c_str());
  std::fprintf(stderr, "\ndecode         %.1f tok/s", s.decode_tok_s);
  if (s.decode_gb_s > 0)
    std::fprintf(stderr, ", %s",
                 probe::against_peak(s.decode_gb_s, peaks.read_gb_s, "GB/s", "memory read peak", again, 2).c_str());
  std::fprintf(stderr, "\n");
  if (s.draft_tokens > 0)
    std::fprintf(stderr, "speculative    %lld of %lld drafted tokens accepted (%.0f%%)\n",
                 static_cast<long long>(s.accepted_tokens), static_cast<long long>(s.draft_tokens),
                 100.0 * static_cast<double>(s.accepted_tokens) / static_cast<double>(s.draft_tokens));
  std::fprintf(stderr, "total          %.1f ms (client side)\n", s.total_ms);
}

probe::MachinePeaks machine_peaks(bool reprobe) {
  return probe::machine_peaks(probe::default_probe_cache_dir(), 0, reprobe);
}

void install_interrupt_handler(hearth_client* client, void (*on_idle_interrupt)()) {
  g_client.store(client);
  g_on_idle_interrupt = on_idle_interrupt;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked poll() at the chat prompt wakes up
  ::sigaction(SIGINT, &sa, nullptr);
}

void set_generating(bool generating) {
  g_generating.store(generating);
}

void end_reasoning(StreamOutput* o) {
  if (!o->in_reasoning) return;
  std::fputs(o->dim ? "\x1b[0m\n...done thinking.\n\n" : "\n...done thinking.\n\n", stdout);
  o->in_reasoning = false;
}

int stream_reasoning(const char* piece, size_t len, void* user_data) {
  auto* o = static_cast<StreamOutput*>(user_data);
  if (o->collect) {
    o->reasoning.append(piece, len);
    return 0;
  }
  if (!o->in_reasoning) {
    std::fputs(o->dim ? "Thinking...\n\x1b[2m" : "Thinking...\n", stdout);
    o->in_reasoning = true;
  }
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

int stream_text(const char* piece, size_t len, void* user_data) {
  auto* o = static_cast<StreamOutput*>(user_data);
  end_reasoning(o);
  o->written += len;
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace hearth::cli
