// hearth chat: an interactive multi-turn session. The whole history is re-sent each turn
// (the daemon's prompt cache makes that cheap) and saved (chat_log.h), so that
// `hearth chat --continue` can go on with it later. On a terminal, lines are read with
// libedit (editing, history); Ctrl-C cancels the answer being generated, or clears the line
// at the prompt. Without a terminal (a pipe), lines are read plainly. A thinking model's
// reasoning is shown as `hearth ask` shows it and is not kept in the history: the
// templates of thinking models drop it from earlier turns.
#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "chat_log.h"
#include "commands.h"

namespace hearth::cli {
namespace {

constexpr const char* kPrompt = "> ";
constexpr const char* kHelp =
    "type a message and press Enter; /reset forgets the conversation (the next turn starts a new saved "
    "one), /stats shows the last answer's stats, /exit (or Ctrl-D) quits; Ctrl-C stops an answer\n";

// Set by SIGINT at the prompt: libedit's read() then fails with EINTR and readline()
// returns NULL, which this flag tells apart from the end of input.
volatile sig_atomic_t g_prompt_interrupted = 0;

void on_idle_interrupt() {
  g_prompt_interrupted = 1;
}

// One line from the terminal with libedit (editing, history); Ctrl-C clears the line and
// prompts again. false at the end of input (Ctrl-D on an empty line).
bool read_line(std::string* line) {
  for (;;) {
    g_prompt_interrupted = 0;
    char* text = ::readline(kPrompt);
    if (text == nullptr) {
      if (g_prompt_interrupted) {
        std::fputs("^C\n", stdout);
        std::fflush(stdout);
        continue;
      }
      std::fputc('\n', stdout);
      return false;
    }
    *line = text;
    if (*text != '\0') ::add_history(text);
    std::free(text);
    return true;
  }
}

// The saved conversation to go on with (--continue) into *history; false (message printed)
// when it exists but cannot be read. No saved conversation: a note, and a new one starts.
bool load_last_conversation(const std::string& dir, std::vector<ChatTurn>* history, ChatLog* log) {
  const std::string path = dir.empty() ? "" : latest_chat_log(dir);
  if (path.empty()) {
    std::fprintf(stderr, "hearth: no saved conversation to continue%s; starting a new one\n",
                 dir.empty() ? " (neither XDG_STATE_HOME nor HOME is set)" : (" in " + dir).c_str());
    return true;
  }
  size_t skipped = 0;
  std::string error;
  if (!read_chat_log(path, history, &skipped, &error)) {
    std::fprintf(stderr, "hearth: cannot read the saved conversation %s: %s\n", path.c_str(), error.c_str());
    return false;
  }
  if (skipped > 0) std::fprintf(stderr, "hearth: warning: %s: skipped %zu unreadable lines\n", path.c_str(), skipped);
  log->continue_file(path);
  return true;
}

}  // namespace

int run_chat(const GlobalOptions& global, ChatOptions& chat_options) {
  GenerationOptions& options = chat_options.generation;
  if (chat_options.resume && !options.system.empty()) {
    std::fprintf(stderr, "hearth: --system cannot go with --continue: the conversation keeps its own\n");
    return kExitError;
  }
  const std::string log_dir = chat_log_dir();
  ChatLog log(log_dir, !chat_options.no_history);
  std::vector<ChatTurn> history;
  if (chat_options.resume && !load_last_conversation(log_dir, &history, &log)) return kExitError;
  if (!options.system.empty()) history.push_back({"system", options.system});

  Client client;
  if (!client.open(global)) return kExitError;
  hearth_client_set_timeout(client.get(), timeout_ms(options));
  // Fail early, with the hint, when there is no daemon.
  if (int rc = hearth_client_health(client.get()); rc == HEARTH_ERR_NO_DAEMON) return report_error(client.get(), rc);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive) {
    ::rl_catch_signals = 0;  // our SIGINT handler, not libedit's
    ::rl_initialize();
    ::using_history();
    std::printf("hearth chat on %s \xe2\x80\x94 /help for commands\n", hearth_client_socket_path(client.get()));
    if (!log.path().empty()) {
      std::printf("(continuing %s: %zu messages)\n", log.path().c_str(), history.size());
    }
  }
  install_interrupt_handler(client.get(), interactive ? on_idle_interrupt : nullptr);

  // /reset keeps the leading system message(s), and the next turn starts a new saved file
  // with them; `saved` counts the turns of history already in the current file.
  size_t n_fixed = 0;
  while (n_fixed < history.size() && history[n_fixed].role == "system") ++n_fixed;
  size_t saved = log.path().empty() ? 0 : history.size();
  hearth_request_options request = to_request_options(options);
  if (!options.hide_thinking) request.on_reasoning = stream_reasoning;
  hearth_stats last_stats;
  hearth_stats_init(&last_stats);
  bool have_stats = false;

  for (;;) {
    std::string line;
    if (interactive) {
      if (!read_line(&line)) break;
    } else if (!std::getline(std::cin, line)) {
      break;
    }
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/help") {
      std::fputs(kHelp, stdout);
      continue;
    }
    if (line == "/reset") {
      history.resize(n_fixed);
      log.start_new();
      saved = 0;
      std::puts("(conversation forgotten)");
      continue;
    }
    if (line == "/stats") {
      if (have_stats) {
        print_stats(last_stats);
      } else {
        std::fputs("(no answer yet)\n", stderr);
      }
      continue;
    }

    history.push_back({"user", line});
    std::vector<hearth_message> messages;
    for (const ChatTurn& t : history) messages.push_back({t.role.c_str(), t.content.c_str()});
    hearth_stats stats;
    hearth_stats_init(&stats);
    char* answer = nullptr;
    StreamOutput output;
    output.dim = isatty(STDOUT_FILENO) != 0;
    set_generating(true);
    int rc = hearth_client_chat(client.get(), messages.data(), messages.size(), &request, stream_text, &output, &answer,
                                &stats);
    set_generating(false);
    end_reasoning(&output);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (rc == HEARTH_OK) {
      history.push_back({"assistant", answer != nullptr ? answer : ""});
      log.append(std::vector<ChatTurn>(history.begin() + static_cast<std::ptrdiff_t>(saved), history.end()));
      saved = history.size();
      last_stats = stats;
      have_stats = true;
      if (options.stats) print_stats(stats);
    } else {
      history.pop_back();  // the turn did not happen; the user can ask again
      if (rc == HEARTH_ERR_CANCELLED) {
        std::fputs("(cancelled)\n", stderr);
      } else {
        report_error(client.get(), rc);
        if (rc == HEARTH_ERR_NO_DAEMON) return kExitNoDaemon;
      }
    }
    hearth_free(answer);
  }
  return kExitOk;
}

}  // namespace hearth::cli
