// What the `hearth` subcommands share: the handle, errors and exit codes, stats output,
// and the SIGINT -> hearth_client_cancel wiring.
#pragma once

#include <string>

#include "common/probe/machine_probe.h"
#include "hearth/client.h"

namespace hearth::cli {

// Exit codes of every subcommand (documented in `hearth --help`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;        // bad usage, or the request failed
inline constexpr int kExitNoDaemon = 2;     // nothing listens on the socket
inline constexpr int kExitCancelled = 130;  // Ctrl-C during `hearth ask` (128 + SIGINT)

struct GlobalOptions {
  std::string socket;  // --socket; "" = discover
};

// Owns a hearth_client for the life of a subcommand.
class Client {
 public:
  Client() = default;
  ~Client() { hearth_client_close(handle_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Prints the error and returns false when the handle cannot be made.
  bool open(const GlobalOptions& options);
  hearth_client* get() const { return handle_; }

 private:
  hearth_client* handle_ = nullptr;
};

// Prints what went wrong (for HEARTH_ERR_NO_DAEMON: how to start a daemon) to stderr and
// returns the exit code for rc.
int report_error(hearth_client* client, int rc);

// The "how to start one" hint for a socket path.
std::string no_daemon_message(const std::string& socket_path);

// TTFT, ITL, prefill and decode rates, token counts (with cached tokens) to stderr, and the
// achieved prefill GOP/s and decode GB/s as shares of this machine's peaks.
void print_stats(const hearth_stats& stats);

// 1536 -> "1.5 KiB"; bytes below 1 KiB as "512 B".
std::string human_bytes(double bytes);

// This machine's int8 and memory-read peaks on every CPU: measured the first time (about a
// second) and then read from the cache folder; reprobe measures again.
probe::MachinePeaks machine_peaks(bool reprobe);

// Installs a SIGINT handler that cancels the request running on client (through the
// async-signal-safe hearth_client_cancel) while `generating` is set, and otherwise calls
// on_idle_interrupt, which must itself be async-signal-safe. nullptr: SIGINT is left alone
// while idle (the default action ends the process).
void install_interrupt_handler(hearth_client* client, void (*on_idle_interrupt)());
void set_generating(bool generating);

// What ask and chat write while an answer streams. A thinking model's reasoning comes first,
// shown as Ollama's CLI shows it: "Thinking...", the reasoning, "...done thinking." and a
// blank line, then the answer; on a terminal the reasoning is dimmed. With collect, the
// reasoning is kept (for ask --json) instead of printed.
struct StreamOutput {
  size_t written = 0;  // bytes of the answer's text
  bool dim = false;    // stdout is a terminal
  bool collect = false;
  bool in_reasoning = false;  // "Thinking..." is out, "...done thinking." not yet
  std::string reasoning;      // collect: the whole reasoning
};
// hearth_text_callbacks; user_data: a StreamOutput.
int stream_reasoning(const char* piece, size_t len, void* user_data);
int stream_text(const char* piece, size_t len, void* user_data);
// Closes the reasoning if it is open (an answer that was all reasoning ends with it).
void end_reasoning(StreamOutput* o);

}  // namespace hearth::cli
