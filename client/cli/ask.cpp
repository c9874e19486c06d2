// hearth ask: one question, the answer streamed to stdout (or one JSON object with --json);
// with --tools, the model's tool calls after it, one JSON line each.
#include <unistd.h>

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

using OrderedJson = nlohmann::ordered_json;

// The JSON text of a file named on the command line (--tools, --json-schema), parsed and
// written back compact with its keys in their order; false after printing why it cannot be
// (unreadable, not JSON, or not what `check` wants: check returns "" or what is wrong).
template <class Check>
bool read_json_file(const char* option, const std::string& path, Check check, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "hearth: %s %s: %s\n", option, path.c_str(), std::strerror(errno));
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  OrderedJson json;
  try {
    json = OrderedJson::parse(text.str());
  } catch (const OrderedJson::parse_error& e) {
    std::fprintf(stderr, "hearth: %s %s is not JSON: %s\n", option, path.c_str(), e.what());
    return false;
  }
  if (std::string why = check(json); !why.empty()) {
    std::fprintf(stderr, "hearth: %s %s: %s\n", option, path.c_str(), why.c_str());
    return false;
  }
  *out = json.dump();
  return true;
}

// An OpenAI tools array: [{"type": "function", "function": {"name": ..., ...}}, ...]. The
// daemon checks the rest (names, schemas) and says what is wrong.
std::string tools_problem(const OrderedJson& tools) {
  const char* shape = R"(an array of tools, [{"type": "function", "function": {"name", "description", "parameters"}}])";
  if (!tools.is_array()) return std::string("must hold ") + shape;
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string()) {
      return "tool " + std::to_string(i) +
             " is not {\"type\": \"function\", \"function\": {\"name\": ...}}; the file must hold " + shape;
    }
  }
  return "";
}

std::string schema_problem(const OrderedJson& schema) {
  return schema.is_object() || schema.is_boolean() ? "" : "must hold a JSON Schema (an object)";
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
        {"draft_tokens", s.draft_tokens},
        {"accepted_tokens", s.accepted_tokens},
        {"total_ms", s.total_ms}}},
  };
}

// {"id", "name", "arguments": {...}}: the arguments as the object they are, in the model's
// order (as text when a daemon sent something that is not JSON). Json: nlohmann::json, or
// ordered_json to keep the keys in that order.
template <class Json>
Json call_json(const hearth_tool_call& call) {
  Json args = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded()) args = call.arguments;
  Json out = Json::object();
  out["id"] = call.id;
  out["name"] = call.name;
  out["arguments"] = std::move(args);
  return out;
}

template <class Json>
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

void add_ask_command(CLI::App* app, AskOptions* options, CLI::App** command) {
  CLI::App* ask = app->add_subcommand(
      "ask",
      "ask one question; the answer streams to stdout (with --tools, each tool call the model makes follows as one "
      "JSON line: {\"id\", \"name\", \"arguments\": {...}})");
  *command = ask;
  ask->add_option("question", options->words, "the question (default: read from stdin)");
  add_generation_options(ask, &options->generation);
  ask->add_flag("--json", options->json, "print the answer and its stats as one JSON object instead of streaming");
  ask->add_flag("--raw", options->raw,
                "send the text as a completion prompt, without the chat template (base models answer "
                "documents better than turns)");
  ask->add_option("--tools", options->tools_file,
                  "offer the model the tools in FILE: an OpenAI tools array, [{\"type\": \"function\", "
                  "\"function\": {\"name\", \"description\", \"parameters\"}}]; its calls are printed, not run")
      ->type_name("FILE");
  ask->add_option("--tool-choice", options->tool_choice,
                  "with --tools: auto (the default: text or calls), required (one call or more), none (text "
                  "only), or a tool's name (a call of it)")
      ->type_name("CHOICE");
  ask->add_option("--json-schema", options->json_schema_file,
                  "the answer is JSON that fits the JSON Schema in FILE (decoded under a grammar)")
      ->type_name("FILE");
  ask->add_flag("--json-object", options->json_object, "the answer is a JSON object");
}

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
  const bool tools = !options.tools_file.empty();
  if (options.raw && tools) {
    std::fprintf(stderr, "hearth: --tools needs the chat template; it cannot go with --raw\n");
    return kExitError;
  }
  if (!options.tool_choice.empty() && !tools) {
    std::fprintf(stderr, "hearth: --tool-choice needs --tools\n");
    return kExitError;
  }
  if (options.json_object && !options.json_schema_file.empty()) {
    std::fprintf(stderr, "hearth: --json-object and --json-schema: give one (a schema says which object)\n");
    return kExitError;
  }
  std::string tools_json, schema_json;
  if (tools && !read_json_file("--tools", options.tools_file, tools_problem, &tools_json)) return kExitError;
  if (!options.json_schema_file.empty() &&
      !read_json_file("--json-schema", options.json_schema_file, schema_problem, &schema_json)) {
    return kExitError;
  }

  Client client;
  if (!client.open(global)) return kExitError;
  hearth_client_set_timeout(client.get(), timeout_ms(options.generation));
  std::vector<hearth_chat_message> messages;
  if (!options.generation.system.empty()) {
    messages.push_back({sizeof(hearth_chat_message), "system", options.generation.system.c_str(), nullptr, 0, nullptr});
  }
  messages.push_back({sizeof(hearth_chat_message), "user", question.c_str(), nullptr, 0, nullptr});
  hearth_request_options request = to_request_options(options.generation);
  if (tools) {
    request.tools = tools_json.c_str();
    if (!options.tool_choice.empty()) request.tool_choice = options.tool_choice.c_str();
  }
  if (options.json_object) request.response_format = HEARTH_FORMAT_JSON_OBJECT;
  if (!schema_json.empty()) {
    request.response_format = HEARTH_FORMAT_JSON_SCHEMA;
    request.json_schema = schema_json.c_str();
  }
  StreamOutput output;
  output.dim = isatty(STDOUT_FILENO) != 0 && !options.json;
  output.collect = options.json;
  const GenerationOptions& g = options.generation;
  if (!options.raw) {
    if (!g.hide_thinking) request.on_reasoning = stream_reasoning;
  } else if (g.think || g.no_think || g.think_budget > 0) {
    std::fprintf(stderr, "hearth: --think, --no-think and --think-budget need the chat template; not with --raw\n");
    return kExitError;
  }
  hearth_stats stats;
  hearth_stats_init(&stats);

  install_interrupt_handler(client.get(), nullptr);
  set_generating(true);
  char* text = nullptr;
  hearth_tool_call* calls = nullptr;
  size_t n_calls = 0;
  int rc;
  const hearth_text_callback on_text = options.json ? nullptr : stream_text;
  char** out_text = options.json ? &text : nullptr;
  if (options.raw) {
    rc = hearth_client_complete(client.get(), question.c_str(), &request, on_text, &output, out_text, &stats);
  } else {
    rc = hearth_client_chat_v2(client.get(), messages.data(), messages.size(), &request, on_text, &output, out_text,
                               &calls, &n_calls, &stats);
  }
  set_generating(false);
  end_reasoning(&output);  // an answer that was all reasoning (cut by max_tokens)
  const size_t written = output.written;

  if (rc != HEARTH_OK) {
    hearth_free(text);
    if (written > 0) std::fputc('\n', stdout);
    std::fflush(stdout);
    return report_error(client.get(), rc);
  }
  if (options.json) {
    nlohmann::json out = stats_json(stats);
    out["text"] = text != nullptr ? text : "";
    if (!output.reasoning.empty()) out["reasoning"] = output.reasoning;
    hearth_free(text);
    if (tools) {
      out["tool_calls"] = nlohmann::json::array();
      for (size_t i = 0; i < n_calls; ++i) out["tool_calls"].push_back(call_json<nlohmann::json>(calls[i]));
    }
    std::printf("%s\n", dump(out).c_str());
  } else {
    // The text's line, unless the model only called (stdout is then JSON lines alone).
    if (written > 0 || n_calls == 0) std::fputc('\n', stdout);
    for (size_t i = 0; i < n_calls; ++i) std::printf("%s\n", dump(call_json<OrderedJson>(calls[i])).c_str());
    std::fflush(stdout);
  }
  hearth_free(calls);
  if (options.generation.stats) print_stats(stats);
  return kExitOk;
}

}  // namespace hearth::cli
