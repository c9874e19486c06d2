// hearth: the command line of hearthd, built only on libhearth-client's C API.
//   hearth [--socket PATH] ask|chat|status|models|ps|load|unload|cache|bench|pull|rm|show ...
#include <CLI/CLI.hpp>
#include <climits>
#include <cmath>
#include <cstdio>

#include "commands.h"

namespace hearth::cli {

void add_generation_options(CLI::App* command, GenerationOptions* options) {
  command->add_option("--system", options->system, "system message sent before the conversation");
  command->add_option("--model", options->model, "model id (see `hearth models`); default: the loaded one");
  command
      ->add_option("--temp", options->temperature,
                   "sampling temperature (0: greedy); default: the model's own (`hearth models` shows it)")
      ->check(CLI::Range(0.0f, 100.0f));
  command->add_option("--max-tokens", options->max_tokens, "tokens to generate at most; default: the daemon's")
      ->check(CLI::PositiveNumber);
  command->add_option("--seed", options->seed, "random seed for sampling")->check(CLI::NonNegativeNumber);
  command->add_flag("--stats", options->stats, "print TTFT, ITL, prefill/decode tok/s and cached tokens to stderr");
  command->add_option("--stop", options->stop, "stop generating at this string (repeatable; not printed)")
      ->allow_extra_args(false);  // one value per --stop: the question may follow
  command
      ->add_option("--repeat-penalty", options->repeat_penalty,
                   "repetition penalty (above 1 discourages repeats); default: the model's own")
      ->check(CLI::Range(0.01f, 10.0f));
  command
      ->add_option("--timeout", options->timeout_s,
                   "fail when the daemon sends nothing for SECONDS: before the answer starts and between two "
                   "pieces of it (an answer printed whole, as with --json, must be complete within it); "
                   "default 0: no limit")
      ->check(CLI::Range(0.0, 86400.0));
  command->add_flag("--hide-thinking,--hidethinking", options->hide_thinking,
                    "leave a thinking model's reasoning out (shown by default before the answer, between "
                    "\"Thinking...\" and \"...done thinking.\", dimmed on a terminal)");
  command->add_flag("--think", options->think, "let a thinking model think (default: the model's own)")
      ->excludes(
          command->add_flag("--no-think", options->no_think, "a thinking model answers at once, without reasoning"));
  command
      ->add_option("--think-budget", options->think_budget,
                   "tokens the reasoning may take; then the daemon closes it and the answer follows")
      ->check(CLI::PositiveNumber)
      ->type_name("N");
}

int timeout_ms(const GenerationOptions& options) {
  const double ms = std::ceil(options.timeout_s * 1000.0);
  return ms >= INT_MAX ? INT_MAX : static_cast<int>(ms);
}

hearth_request_options to_request_options(GenerationOptions& options) {
  hearth_request_options request;
  hearth_request_options_init(&request);
  request.model = options.model.empty() ? nullptr : options.model.c_str();
  request.temperature = options.temperature;
  request.max_tokens = options.max_tokens;
  request.repetition_penalty = options.repeat_penalty;
  options.stop_ptrs.clear();
  for (const std::string& s : options.stop) options.stop_ptrs.push_back(s.c_str());
  request.stop = options.stop_ptrs.empty() ? nullptr : options.stop_ptrs.data();
  request.n_stop = options.stop_ptrs.size();
  if (options.think || options.no_think) request.thinking = options.think ? HEARTH_THINKING_ON : HEARTH_THINKING_OFF;
  request.thinking_budget_tokens = options.think_budget;
  if (options.seed >= 0) {
    request.has_seed = 1;
    request.seed = static_cast<uint64_t>(options.seed);
  }
  return request;
}

}  // namespace hearth::cli

int main(int argc, char** argv) {
  using namespace hearth::cli;
  CLI::App app{"hearth: talk to hearthd, the offline assistant daemon"};
  app.footer(
      "Exit status: 0 success, 1 usage error or failed request, 2 no daemon listening on the socket, "
      "130 answer interrupted (Ctrl-C).\n"
      "The socket: --socket, else $HEARTH_SOCKET, else $XDG_RUNTIME_DIR/hearth/hearth.sock, else "
      "/run/hearth/hearth.sock.");
  app.set_version_flag("--version", std::string("hearth ") + HEARTH_CLIENT_VERSION + " (libhearth-client " +
                                        hearth_client_version() + ")");
  app.require_subcommand(1);
  app.fallthrough();

  GlobalOptions global;
  app.add_option("--socket", global.socket, "the daemon's Unix socket");

  AskOptions ask;
  CLI::App* ask_cmd = nullptr;
  add_ask_command(&app, &ask, &ask_cmd);

  ChatOptions chat;
  CLI::App* chat_cmd = app.add_subcommand(
      "chat",
      "interactive multi-turn chat (/reset, /stats, /exit); each conversation is saved under "
      "$XDG_STATE_HOME/hearth/chats/ (default ~/.local/state/hearth/chats/), one JSON line per message");
  add_generation_options(chat_cmd, &chat.generation);
  chat_cmd->add_flag("--continue,-c", chat.resume,
                     "go on with the conversation saved last (its messages are sent again, its system message "
                     "kept), appending the new turns to it");
  chat_cmd->add_flag("--no-history", chat.no_history, "do not save this conversation");

  CLI::App* status_cmd = app.add_subcommand("status", "socket path, daemon health, model and version");
  CLI::App* models_cmd = app.add_subcommand(
      "models",
      "the models installed where the daemon runs: size, architecture, quantization, which is loaded, "
      "and which of hearth's catalog are not installed");
  bool models_json = false;
  models_cmd->add_flag("--json", models_json, "print the daemon's answer (GET /api/models) as JSON");
  CLI::App* ps_cmd = app.add_subcommand("ps", "the models the daemon has loaded: memory, backend, idle time, expiry");
  bool ps_json = false;
  ps_cmd->add_flag("--json", ps_json, "print the daemon's answer (GET /api/ps) as JSON");
  std::string load_model, keep_alive, unload_model;
  CLI::App* load_cmd = app.add_subcommand("load", "load a model by name before anyone asks (see `hearth models`)");
  load_cmd->add_option("model", load_model, "the model's id or catalog name")->required();
  load_cmd->add_option("--keep-alive", keep_alive,
                       "how long it stays after its last request: 5m, 1h, -1 for ever (default: the daemon's)");
  CLI::App* unload_cmd = app.add_subcommand("unload", "unload a model once its running requests end");
  unload_cmd->add_option("model", unload_model, "the model's id or catalog name")->required();
  CacheOptions cache;
  add_cache_command(&app, &cache);
  PullOptions pull;
  CLI::App *pull_cmd = nullptr, *rm_cmd = nullptr, *show_cmd = nullptr;
  add_pull_commands(&app, &pull, &pull_cmd, &rm_cmd, &show_cmd);
  BenchOptions bench;
  CLI::App* bench_cmd = nullptr;
  add_bench_command(&app, &bench, &bench_cmd);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitError;
  }
  if (ask_cmd->parsed()) return run_ask(global, ask);
  if (chat_cmd->parsed()) return run_chat(global, chat);
  if (status_cmd->parsed()) return run_status(global);
  if (models_cmd->parsed()) return run_models(global, models_json);
  if (ps_cmd->parsed()) return run_ps(global, ps_json);
  if (load_cmd->parsed()) return run_load(global, load_model, keep_alive);
  if (unload_cmd->parsed()) return run_unload(global, unload_model);
  if (cache.action != CacheOptions::Action::kNone) return run_cache(global, cache);
  if (bench_cmd->parsed()) return run_bench(global, bench);
  if (pull_cmd->parsed()) return run_pull(pull);
  if (rm_cmd->parsed()) return run_rm(pull);
  if (show_cmd->parsed()) return run_show(pull);
  return kExitError;
}
