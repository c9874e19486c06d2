#include "daemon/config.h"

#include <toml++/toml.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <map>
#include <variant>

#include "common/duration.h"
#include "common/split.h"
#include "daemon/upstream_flags.h"
#include "daemon/upstream_toml.h"

namespace hearth::daemon {
namespace {

// How an option's value is written and checked.
enum class Kind {
  String,  // any string
  Choice,  // one of Spec::choices
  Int,     // an integer in [Spec::min, Spec::max]
  Flag,    // a boolean; on the command line a flag without a value
  Listen,  // HOST:PORT, or a boolean: true (on the command line the flag alone) = Spec::fallback
};

// A value as a source hands it over: TOML gives typed values, the environment and the
// command line give strings (converted by parse_text).
using Value = std::variant<std::string, int64_t, bool>;

struct Spec {
  const char* name;  // the flag without "--"; the TOML key and the variable derive from it
  Kind kind;
  const char* help;
  int64_t min = 0, max = 0;          // Int
  std::vector<std::string> choices;  // Choice
  void (*set)(DaemonConfig& c, const Value& v) = nullptr;
  const char* fallback = "";  // Listen: the address of `true`
};

// Ollama's own address: its clients (and OLLAMA_HOST's default) look for it there.
constexpr const char* kOllamaAddress = "127.0.0.1:11434";

const std::string& str(const Value& v) {
  return std::get<std::string>(v);
}

int32_t i32(const Value& v) {
  return static_cast<int32_t>(std::get<int64_t>(v));
}

const std::vector<Spec>& specs() {
  using C = DaemonConfig;
  // clang-format off
  static const std::vector<Spec> kSpecs = {
      {"model", Kind::String,
       "a catalog name (qwen2.5-coder:0.5b, smollm2:135m, gemma3:270m), the name a model was pulled by "
       "(qwen3:8b, hf.co/ORG/REPO:QUANT: hearth pull), a file name in the models folder, or a path; repeatable: the first is loaded at start, the others on their first request (default: every "
       "model in the models folder, qwen2.5-coder:0.5b loaded at start)",
       0, 0, {}, [](C& c, const Value& v) {
         // Repeated on the command line, the values come joined by newlines.
         std::vector<std::string> all;
         std::string rest = str(v);
         for (size_t nl; (nl = rest.find('\n')) != std::string::npos; rest.erase(0, nl + 1))
           all.push_back(rest.substr(0, nl));
         all.push_back(rest);
         c.model = all.front();
         c.more_models.assign(all.begin() + 1, all.end());
       }},
      {"chat-template", Kind::Choice,
       "turn format for chat requests when the model's own template is not one hearth recognises "
       "(default: read from the model)",
       0, 0, {"chatml", "gemma", "llama3", "qwen3"}, [](C& c, const Value& v) { c.chat_template = str(v); }},
      {"socket", Kind::String,
       "Unix socket path (default: $XDG_RUNTIME_DIR/hearth/hearth.sock; as root /run/hearth/hearth.sock)",
       0, 0, {}, [](C& c, const Value& v) { c.socket = str(v); }},
      {"socket-group", Kind::String, "give the socket this group and mode 0660 (default: mode 0600)",
       0, 0, {}, [](C& c, const Value& v) { c.socket_group = str(v); }},
      {"backend", Kind::Choice, "compute backend (default auto)",
       0, 0, {"auto", "cpu", "vulkan", "cuda"}, [](C& c, const Value& v) { c.backend = str(v); }},
      {"vk-device", Kind::Int, "Vulkan device index from --list-devices (default -1: the first usable one)",
       -1, 1 << 16, {}, [](C& c, const Value& v) { c.vk_device = i32(v); }},
      {"cuda-device", Kind::Int,
       "CUDA device index from --list-devices (default -1: the usable one with the most memory)",
       -1, 1 << 16, {}, [](C& c, const Value& v) { c.cuda_device = i32(v); }},
      {"threads", Kind::Int, "CPU threads (0 = one per physical core)",
       0, 1024, {}, [](C& c, const Value& v) { c.threads = i32(v); }},
      {"ctx", Kind::Int,
       "tokens per sequence, prompt and answer (default 4096, or the model's training context when smaller)",
       16, 1 << 24, {}, [](C& c, const Value& v) { c.ctx = i32(v); c.ctx_set = true; }},
      {"parallel", Kind::Int, "sequences generated at once (default 4)",
       1, 256, {}, [](C& c, const Value& v) { c.parallel = i32(v); }},
      {"prefill-chunk", Kind::Int,
       "prompt tokens per step at most, all sequences together (default 128; 0 = a whole prompt at once)",
       0, 1 << 24, {}, [](C& c, const Value& v) { c.prefill_chunk = i32(v); }},
      {"step-budget-ms", Kind::Int,
       "target duration of a step that carries streams' tokens: the prompt tokens read beside them are sized "
       "to fit, from costs measured while running (default 100; 0 = always --prefill-chunk tokens)",
       0, 60000, {}, [](C& c, const Value& v) { c.step_budget_ms = i32(v); }},
      {"speculative", Kind::Choice,
       "speculative decoding: streams carry drafts copied from their own prompt and answer (n-gram lookup), "
       "verified in one pass; the answers are the same bits either way (default ngram; off = one token a step)",
       0, 0, {"ngram", "off"}, [](C& c, const Value& v) { c.speculative = str(v); }},
      {"draft-model", Kind::String,
       "a smaller model with the same tokenizer (catalog name, file name in the models folder or path) that "
       "drafts for streams where the n-gram lookup finds nothing; loaded beside each model it fits, unless "
       "--speculative is off (default: none)",
       0, 0, {}, [](C& c, const Value& v) { c.draft_model = str(v); }},
      {"queue-max", Kind::Int, "requests waiting for a free sequence; more get 429 (default 64)",
       0, 1 << 20, {}, [](C& c, const Value& v) { c.queue_max = i32(v); }},
      {"cache-dir", Kind::String,
       "prompt cache directory (default: $XDG_CACHE_HOME/hearth; as root /var/cache/hearth)",
       0, 0, {}, [](C& c, const Value& v) { c.cache_dir = str(v); }},
      {"cache-max-bytes", Kind::Int, "bytes the prompt cache may use on disk (default 0: the smaller of 4 GiB and 10% of the free space)",
       0, INT64_MAX, {}, [](C& c, const Value& v) { c.cache_max_bytes = std::get<int64_t>(v); }},
      {"cache-user-max-bytes", Kind::Int,
       "bytes of the prompt cache on disk one user's prompts may take, all models together (default 0: no quota; "
       "each user's share is then the budget divided among the users with entries, and past the budget the "
       "user furthest over their share loses entries first)",
       0, INT64_MAX, {}, [](C& c, const Value& v) { c.cache_user_max_bytes = std::get<int64_t>(v); }},
      {"memory-budget", Kind::Int,
       "bytes of RAM the loaded models may use together, weights and KV (default 0: three quarters of the "
       "machine's RAM); the least recently used idle model is unloaded to make room for another",
       0, INT64_MAX, {}, [](C& c, const Value& v) { c.memory_budget = std::get<int64_t>(v); }},
      {"gpu-memory-budget", Kind::Int,
       "bytes of the GPU's memory the models loaded on it may use together, weights and KV (default 0: nine "
       "tenths of the device's memory); models on a GPU count here, not in --memory-budget",
       0, INT64_MAX, {}, [](C& c, const Value& v) { c.gpu_memory_budget = std::get<int64_t>(v); }},
      {"keep-alive", Kind::String,
       "how long a model stays loaded after its last request (default 5m; a request's keep_alive overrides it; "
       "-1: for ever; the model loaded at start stays for ever)",
       0, 0, {}, [](C& c, const Value& v) { c.keep_alive = str(v); }},
      {"no-disk-cache", Kind::Flag, "keep the prompt cache in memory only",
       0, 0, {}, [](C& c, const Value& v) { c.no_disk_cache = std::get<bool>(v); }},
      {"listen-tcp", Kind::String, "also serve HTTP on HOST:PORT (loopback only unless --allow-remote)",
       0, 0, {}, [](C& c, const Value& v) { c.listen_tcp = str(v); }},
      {"listen-ollama", Kind::Listen,
       "also serve HTTP on HOST:PORT for Ollama's clients (default when given without one: 127.0.0.1:11434; "
       "the same rules as --listen-tcp)",
       0, 0, {}, [](C& c, const Value& v) { c.listen_ollama = str(v); }, kOllamaAddress},
      {"allow-remote", Kind::Flag, "allow a non-loopback --listen-tcp or --listen-ollama address",
       0, 0, {}, [](C& c, const Value& v) { c.allow_remote = std::get<bool>(v); }},
      {"cache-scope", Kind::Choice,
       "whose requests share prompt-cache entries: each user's own (default), a group's (the client's primary "
       "group), or everyone's (shared: only for a single-user kiosk)",
       0, 0, {"user", "group", "shared"}, [](C& c, const Value& v) { c.cache_scope = str(v); }},
      {"allowed-origins", Kind::String,
       "comma-separated browser origins (http://host:port) the TCP listener serves, with CORS headers; "
       "requests from any other Origin get 403 (default: none)",
       0, 0, {}, [](C& c, const Value& v) { c.allowed_origins = split_list(str(v)); }},
      {"log-level", Kind::Choice, "log level (default info)",
       0, 0, {"debug", "info", "warn", "error"}, [](C& c, const Value& v) { parse_log_level(str(v), &c.log_level); }},
      {"shutdown-grace", Kind::Int, "seconds in-flight requests get to finish after SIGTERM (default 30)",
       0, 86400, {}, [](C& c, const Value& v) { c.shutdown_grace_s = i32(v); }},
      {"write-timeout", Kind::Int,
       "seconds a client may read nothing of a response (its socket buffer full) before the connection is "
       "closed and its request cancelled, freeing the sequence (default 60)",
       1, 86400, {}, [](C& c, const Value& v) { c.write_timeout_s = i32(v); }},
      {"kv-type", Kind::Choice,
       "KV cache element type (default f16); q8_0 halves the KV memory and the prompt cache's disk and "
       "restore bytes at a small cost in accuracy",
       0, 0, {"f16", "f32", "q8_0"}, [](C& c, const Value& v) {
         c.kv_type = str(v) == "f32" ? DType::F32 : str(v) == "q8_0" ? DType::Q8_0 : DType::F16;
       }},
  };
  // clang-format on
  return kSpecs;
}

std::string toml_key(const std::string& name) {
  std::string k = name;
  for (char& ch : k)
    if (ch == '-') ch = '_';
  return k;
}

std::string env_name(const std::string& name) {
  std::string k = "HEARTH_";
  for (char ch : name) k += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return k;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// 1/0, true/false, yes/no, on/off (any case); nullopt for anything else.
std::optional<bool> boolean_text(const std::string& text) {
  std::string t;
  for (char ch : text) t += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

// HOST:PORT with PORT in 1..65535 (the host is checked when the listener binds).
bool is_host_port(const std::string& hp) {
  const size_t colon = hp.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= hp.size()) return false;
  int64_t port = 0;
  const char* end = hp.data() + hp.size();
  auto [p, ec] = std::from_chars(hp.data() + colon + 1, end, port);
  return ec == std::errc() && p == end && port >= 1 && port <= 65535;
}

// A string from the environment or the command line, as the option's kind wants it.
Result<Value> parse_text(const Spec& s, const std::string& text, const std::string& source) {
  switch (s.kind) {
    case Kind::String:
    case Kind::Choice:
      return Value{text};
    case Kind::Listen:
      if (text.empty()) return Value{true};  // the flag without a value
      if (std::optional<bool> b = boolean_text(text)) return Value{*b};
      return Value{text};
    case Kind::Int: {
      int64_t n = 0;
      const char* end = text.data() + text.size();
      auto [p, ec] = std::from_chars(text.data(), end, n);
      if (text.empty() || ec != std::errc() || p != end)
        return make_error(source + ": '" + text + "' is not an integer" +
                          (ec == std::errc::result_out_of_range ? " in range" : ""));
      return Value{n};
    }
    case Kind::Flag: {
      if (std::optional<bool> b = boolean_text(text)) return Value{*b};
      return make_error(source + ": '" + text + "' is not a boolean (use 1/0, true/false, yes/no, on/off)");
    }
  }
  return make_error(source + ": unsupported option kind");
}

// Checks a typed value against the option's kind and range, then stores it.
Status apply(const Spec& s, const Value& v, const std::string& source, DaemonConfig* cfg) {
  switch (s.kind) {
    case Kind::String:
    case Kind::Choice:
      if (!std::holds_alternative<std::string>(v)) return make_error(source + " must be a string");
      if (s.kind == Kind::Choice) {
        bool ok = false;
        for (const std::string& c : s.choices) ok = ok || c == str(v);
        if (!ok) return make_error(source + ": '" + str(v) + "' is not one of " + join(s.choices, ", "));
      }
      if (std::string(s.name) == "keep-alive" && !parse_duration(str(v))) {
        return make_error(source + ": '" + str(v) +
                          "' is not a duration (\"5m\", \"1h30m\", \"300\" seconds, \"-1\" for ever)");
      }
      if (std::string(s.name) == "listen-tcp" && !str(v).empty() && !is_host_port(str(v)))
        return make_error(source + ": '" + str(v) + "' is not HOST:PORT (PORT 1..65535)");
      break;
    case Kind::Listen:
      if (const bool* on = std::get_if<bool>(&v)) {
        s.set(*cfg, Value{std::string(*on ? s.fallback : "")});
        return {};
      }
      if (!std::holds_alternative<std::string>(v) || !is_host_port(str(v)))
        return make_error(source + ": " + (std::holds_alternative<std::string>(v) ? "'" + str(v) + "'" : "the value") +
                          " is not HOST:PORT (PORT 1..65535) or a boolean (true: " + s.fallback + ")");
      break;
    case Kind::Int: {
      if (!std::holds_alternative<int64_t>(v)) return make_error(source + " must be an integer");
      const int64_t n = std::get<int64_t>(v);
      if (n < s.min || n > s.max)
        return make_error(source + ": " + std::to_string(n) + " is out of range (" + std::to_string(s.min) + ".." +
                          std::to_string(s.max) + ")");
      break;
    }
    case Kind::Flag:
      if (!std::holds_alternative<bool>(v)) return make_error(source + " must be a boolean (true or false)");
      break;
  }
  s.set(*cfg, v);
  return {};
}

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    default:
      return "a date or time";
  }
}

const char* kind_wants(Kind k) {
  switch (k) {
    case Kind::String:
    case Kind::Choice:
      return "a string";
    case Kind::Int:
      return "an integer";
    case Kind::Flag:
      return "a boolean";
    case Kind::Listen:
      return "a string (HOST:PORT) or a boolean";
  }
  return "?";
}

// [[upstream]] tables: each parsed (upstream_toml.h), their names unique.
Status apply_upstreams(const std::string& path, const toml::node& node, DaemonConfig* cfg) {
  const toml::array* tables = node.as_array();
  if (tables == nullptr) return make_error("config file " + path + ": 'upstream' must be [[upstream]] tables");
  for (const toml::node& t : *tables) {
    const std::string source = "config file " + path + ": [[upstream]] #" + std::to_string(cfg->upstreams.size() + 1);
    if (!t.is_table()) return make_error(source + " must be a table");
    Result<UpstreamConfig> u = parse_upstream(*t.as_table(), source);
    if (!u) return u.error();
    for (const UpstreamConfig& other : cfg->upstreams)
      if (other.name == u->name) return make_error(source + ": a second upstream named '" + u->name + "'");
    cfg->upstreams.push_back(std::move(*u));
  }
  return {};
}

Status apply_toml_file(const std::string& path, DaemonConfig* cfg) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const toml::source_region& where = e.source();
    return make_error("config file " + path + ": line " + std::to_string(where.begin.line) + ", column " +
                      std::to_string(where.begin.column) + ": " + std::string(e.description()));
  } catch (const std::exception& e) {
    return make_error("config file " + path + ": " + e.what());
  }
  for (const auto& [key_node, node] : table) {
    const std::string key(key_node.str());
    if (key == "upstream") {
      if (Status st = apply_upstreams(path, node, cfg); !st) return st;
      continue;
    }
    const Spec* spec = nullptr;
    for (const Spec& s : specs())
      if (toml_key(s.name) == key) spec = &s;
    const std::string source = "config file " + path + ": key '" + key + "'";
    if (spec == nullptr) return make_error(source + " is not a hearthd option");
    Value v;
    if (const auto* s = node.as_string()) {
      v = s->get();
    } else if (const auto* i = node.as_integer()) {
      v = i->get();
    } else if (const auto* b = node.as_boolean()) {
      v = b->get();
    } else {
      return make_error(source + " must be " + kind_wants(spec->kind) + ", not " + toml_type_name(node));
    }
    const bool type_ok =
        (spec->kind == Kind::Int && std::holds_alternative<int64_t>(v)) ||
        (spec->kind == Kind::Flag && std::holds_alternative<bool>(v)) || spec->kind == Kind::Listen ||
        ((spec->kind == Kind::String || spec->kind == Kind::Choice) && std::holds_alternative<std::string>(v));
    if (!type_ok) return make_error(source + " must be " + kind_wants(spec->kind) + ", not " + toml_type_name(node));
    Status st = apply(*spec, v, source, cfg);
    if (!st) return st;
  }
  return {};
}

// The placeholder --help shows for an option's value.
std::string value_name(const Spec& s) {
  if (s.kind == Kind::Choice) return join(s.choices, "|");
  if (s.kind == Kind::Listen) return "[HOST:PORT]";
  static const std::vector<std::pair<std::string, std::string>> kNames = {
      {"model", "PATH|NAME"},      {"draft-model", "PATH|NAME"},   {"socket", "PATH"},
      {"socket-group", "GROUP"},   {"cache-dir", "DIR"},           {"cache-max-bytes", "BYTES"},
      {"memory-budget", "BYTES"},  {"gpu-memory-budget", "BYTES"}, {"keep-alive", "DURATION"},
      {"listen-tcp", "HOST:PORT"}, {"shutdown-grace", "SECONDS"}};
  for (const auto& [name, value] : kNames)
    if (name == s.name) return value;
  return s.kind == Kind::Int ? "N" : "TEXT";
}

std::string help_footer() {
  return "Every option can also be set in the TOML file given with --config (key: the option name with '-' -> '_',\n"
         "e.g. socket_group = \"hearth\") or as an environment variable (HEARTH_ + the key in upper case, e.g.\n"
         "HEARTH_SOCKET_GROUP). Flags win over the environment, which wins over the file.\n"
         "The --upstream-* options describe one upstream as an [[upstream]] table of the file does (key: the\n"
         "option name without 'upstream-', e.g. api_key_file; variable: HEARTH_UPSTREAM_API_KEY_FILE); it is served\n"
         "beside the file's tables, under a name none of them has.\n";
}

constexpr const char* kUpstreamGroup = "Upstream (one; more as [[upstream]] tables in the config file)";
constexpr const char* kNoKey =
    ": an API key is never read from the command line or the environment, which other users may read; put it in a "
    "file only you can read (chmod 600) and give --upstream-api-key-file FILE";

// The --upstream-* options as registered: a text each, and --upstream-api-key, hidden and refused.
struct UpstreamOptions {
  std::vector<std::string> texts;
  std::vector<CLI::Option*> opts;
  std::string refused_key;
  CLI::Option* api_key = nullptr;
};

void add_upstream_options(CLI::App& app, UpstreamOptions* u) {
  const std::vector<UpstreamFlag>& flags = upstream_flags();
  u->texts.resize(flags.size());
  for (size_t i = 0; i < flags.size(); ++i)
    u->opts.push_back(app.add_option(upstream_flag_name(flags[i].key), u->texts[i], flags[i].help)
                          ->type_name(flags[i].value_name)
                          ->group(kUpstreamGroup));
  u->api_key = app.add_option("--upstream-api-key", u->refused_key)->group("");
}

// The upstream of the --upstream-* flags and HEARTH_UPSTREAM_* variables (a flag wins over its
// variable; an empty value counts as unset), added after the file's [[upstream]] tables.
Status apply_flag_upstream(const UpstreamOptions& u, const EnvLookup& env, DaemonConfig* cfg) {
  if (u.api_key->count() > 0) return make_error(std::string("option --upstream-api-key") + kNoKey);
  if (std::optional<std::string> k = env("HEARTH_UPSTREAM_API_KEY"); k && !k->empty())
    return make_error(std::string("environment variable HEARTH_UPSTREAM_API_KEY") + kNoKey);
  std::map<std::string, UpstreamText> texts;
  const std::vector<UpstreamFlag>& flags = upstream_flags();
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string key = flags[i].key, var = upstream_env_name(key);
    if (u.opts[i]->count() > 0) {
      texts[key] = {u.texts[i], "option " + upstream_flag_name(key)};
    } else if (std::optional<std::string> e = env(var)) {
      texts[key] = {*e, "environment variable " + var};
    }
    if (texts.count(key) != 0 && texts[key].text.empty()) texts.erase(key);
  }
  Result<std::optional<UpstreamConfig>> up = upstream_from_texts(texts);
  if (!up) return up.error();
  if (!*up) return {};
  for (size_t i = 0; i < cfg->upstreams.size(); ++i) {
    if (cfg->upstreams[i].name != (*up)->name) continue;
    return make_error("the upstream of the flags and environment is named '" + (*up)->name + "' like [[upstream]] #" +
                      std::to_string(i + 1) + " of config file " + cfg->config_file +
                      ": give it another name (--upstream-name)");
  }
  cfg->upstreams.push_back(std::move(**up));
  return {};
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<DaemonConfig> load_config(const std::vector<std::string>& args, const EnvLookup& env) {
  DaemonConfig cfg;
  CLI::App app{"hearthd: keeps a language model resident and serves it over a Unix socket", "hearthd"};
  app.footer(help_footer());
  app.get_formatter()->column_width(34);

  // Every value option is read as text and converted by parse_text, so the command line,
  // the environment and the file share one set of checks and error messages.
  std::vector<std::string> texts(specs().size());
  std::vector<CLI::Option*> opts(specs().size());
  std::vector<bool> flags(specs().size(), false);
  std::string config_file;
  bool version = false, list_devices = false;
  app.add_option("--config", config_file, "TOML config file (default: $HEARTH_CONFIG)")->type_name("FILE");
  for (size_t i = 0; i < specs().size(); ++i) {
    const Spec& s = specs()[i];
    const std::string flag = std::string("--") + s.name;
    if (s.kind == Kind::Flag) {
      opts[i] = app.add_flag_callback(
          flag, [&flags, i] { flags[i] = true; }, s.help);
    } else {
      opts[i] = app.add_option(flag, texts[i], s.help)->type_name(value_name(s));
      if (std::string(s.name) == "model") opts[i]->multi_option_policy(CLI::MultiOptionPolicy::Join);
      if (s.kind == Kind::Listen) opts[i]->expected(0, 1);
    }
  }
  UpstreamOptions upstream;
  add_upstream_options(app, &upstream);
  app.add_flag("--list-devices", list_devices, "print the compute devices this build can use, then exit");
  app.add_flag("--version", version, "print the version, then exit");

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a vector back to front
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    cfg.action = Action::Help;
    cfg.help_text = app.help();
    return cfg;
  } catch (const CLI::ParseError& e) {
    return make_error(std::string("command line: ") + e.what());
  }
  if (version) {
    cfg.action = Action::Version;
    return cfg;
  }

  // 1. The config file.
  if (config_file.empty()) {
    if (std::optional<std::string> e = env("HEARTH_CONFIG"); e && !e->empty()) config_file = *e;
  }
  if (!config_file.empty()) {
    Status st = apply_toml_file(config_file, &cfg);
    if (!st) return st.error();
    cfg.config_file = config_file;
  }
  // 2. The environment (an empty variable counts as unset).
  for (const Spec& s : specs()) {
    const std::string name = env_name(s.name);
    std::optional<std::string> text = env(name);
    if (!text || text->empty()) continue;
    const std::string source = "environment variable " + name;
    Result<Value> v = parse_text(s, *text, source);
    if (!v) return v.error();
    Status st = apply(s, *v, source, &cfg);
    if (!st) return st.error();
  }
  // 3. The command line.
  for (size_t i = 0; i < specs().size(); ++i) {
    const Spec& s = specs()[i];
    if (opts[i]->count() == 0) continue;
    const std::string source = std::string("option --") + s.name;
    Result<Value> v = s.kind == Kind::Flag ? Result<Value>(Value{flags[i]}) : parse_text(s, texts[i], source);
    if (!v) return v.error();
    Status st = apply(s, *v, source, &cfg);
    if (!st) return st.error();
  }
  // 4. One upstream from flags and variables, beside the file's.
  if (Status st = apply_flag_upstream(upstream, env, &cfg); !st) return st.error();
  if (list_devices) cfg.action = Action::ListDevices;
  return cfg;
}

Result<std::string> default_socket_path(const EnvLookup& env, unsigned euid) {
  if (euid == 0) return std::string("/run/hearth/hearth.sock");
  std::optional<std::string> runtime = env("XDG_RUNTIME_DIR");
  if (!runtime || runtime->empty())
    return make_error("XDG_RUNTIME_DIR is not set, so there is no default socket path; give one with --socket PATH");
  return *runtime + "/hearth/hearth.sock";
}

std::string default_cache_dir(const EnvLookup& env, unsigned euid) {
  if (euid == 0) return "/var/cache/hearth";
  if (std::optional<std::string> x = env("XDG_CACHE_HOME"); x && !x->empty()) return *x + "/hearth";
  std::optional<std::string> home = env("HOME");
  return (home && !home->empty() ? *home : std::string(".")) + "/.cache/hearth";
}

}  // namespace hearth::daemon
