// The `hearth` subcommands: each registers its options on a CLI11 subcommand and runs.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common.h"

namespace hearth::cli {

// Options that ask and chat share.
struct GenerationOptions {
  std::string system;                  // --system: a system message first
  std::string model;                   // --model: model id; "" = the loaded one
  float temperature = -1;              // --temp; < 0: daemon default
  int32_t max_tokens = 0;              // --max-tokens; 0: daemon default
  int64_t seed = -1;                   // --seed; < 0: not sent
  bool stats = false;                  // --stats
  std::vector<std::string> stop;       // --stop (repeatable): stop strings
  float repeat_penalty = 1.0f;         // --repeat-penalty; 1: not sent
  double timeout_s = 0;                // --timeout: read timeout in seconds; 0: none
  bool hide_thinking = false;          // --hide-thinking: a thinking model's reasoning is not printed
  bool think = false;                  // --think: a thinking model thinks (default: the model's own)
  bool no_think = false;               // --no-think: it answers at once
  int32_t think_budget = 0;            // --think-budget N: the reasoning's bound in tokens; 0: none
  std::vector<const char*> stop_ptrs;  // filled by to_request_options; the request points into it
};
void add_generation_options(CLI::App* command, GenerationOptions* options);
// hearth_request_options for these options (it points into options, which must outlive it).
hearth_request_options to_request_options(GenerationOptions& options);
// --timeout as hearth_client_set_timeout's milliseconds.
int timeout_ms(const GenerationOptions& options);

struct AskOptions {
  GenerationOptions generation;
  std::vector<std::string> words;  // the question; empty: read stdin
  bool json = false;
  bool raw = false;              // --raw: the text is a completion prompt, no chat template
  std::string tools_file;        // --tools: a JSON file holding an OpenAI tools array
  std::string tool_choice;       // --tool-choice: auto, required, none or a tool's name
  std::string json_schema_file;  // --json-schema: a JSON file holding the schema the answer fits
  bool json_object = false;      // --json-object: the answer is a JSON object
};
void add_ask_command(CLI::App* app, AskOptions* options, CLI::App** command);
int run_ask(const GlobalOptions& global, AskOptions& options);

struct ChatOptions {
  GenerationOptions generation;
  bool resume = false;      // --continue: go on with the conversation saved last
  bool no_history = false;  // --no-history: save nothing
};
int run_chat(const GlobalOptions& global, ChatOptions& options);

// hearth cache stats [--json] | clear [--model ID] | warm [--raw] FILE
struct CacheOptions {
  enum class Action { kNone, kStats, kClear, kWarm };
  Action action = Action::kNone;
  bool json = false;   // stats --json
  std::string model;   // clear --model
  long long uid = -1;  // clear --uid (-1: the caller's own, or everyone's for root)
  std::string file;    // warm FILE ("-": stdin)
  bool raw = false;    // warm --raw: a completion prompt, not a chat system prompt
};
void add_cache_command(CLI::App* app, CacheOptions* options);
int run_cache(const GlobalOptions& global, const CacheOptions& options);
// "f16, 3.0 KiB a token in memory, 18.0 KiB on disk" from GET /api/cache's answer; "" when
// it has no "kv" member (an older daemon).
std::string kv_summary(const nlohmann::json& cache_stats);

// hearth bench [--model FILE] [--lengths ...] [--contexts ...] [--streams ...] [--json] [--plot FILE]
struct BenchOptions {
  std::string model;                // --model: start a private hearthd with it
  std::string hearthd = "hearthd";  // --hearthd: the daemon binary for --model
  std::vector<std::string> hearthd_args;
  std::vector<int64_t> lengths = {128, 512, 2048};    // TTFT table, prompt tokens
  std::vector<int64_t> contexts = {128, 1024, 3072};  // ITL table, prompt tokens
  std::vector<int64_t> streams = {1, 2, 4};
  int32_t tokens = 32;  // generated per answer (ITL, streams)
  bool json = false;
  bool reprobe = false;  // --reprobe: measure the machine's peaks again
  std::string plot;      // --plot FILE.svg
};
void add_bench_command(CLI::App* app, BenchOptions* options, CLI::App** command);
int run_bench(const GlobalOptions& global, const BenchOptions& options);

// hearth pull NAME | pull --list | rm NAME | show NAME: the models folder of this machine
// (pull.cpp), without a daemon.
struct PullOptions {
  std::string name;        // what to pull, delete or show
  bool list = false;       // pull --list
  std::string models_dir;  // --models-dir; "" = HEARTH_MODELS, else XDG_DATA_HOME/hearth/models
};
void add_pull_commands(CLI::App* app, PullOptions* options, CLI::App** pull, CLI::App** rm, CLI::App** show);
int run_pull(const PullOptions& options);
int run_rm(const PullOptions& options);
int run_show(const PullOptions& options);

int run_status(const GlobalOptions& global);
int run_models(const GlobalOptions& global, bool json);
// The loaded models (ps), and loading or unloading one by name (ps.cpp).
int run_ps(const GlobalOptions& global, bool json);
int run_load(const GlobalOptions& global, const std::string& model, const std::string& keep_alive);
int run_unload(const GlobalOptions& global, const std::string& model);

}  // namespace hearth::cli
