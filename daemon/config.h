// hearthd's configuration: one DaemonConfig filled from four sources, the later winning:
//   defaults < TOML config file (--config FILE, or $HEARTH_CONFIG) < HEARTH_* environment
//   variables < command-line flags.
// Every option has one name; the TOML key is that name with '-' -> '_' (socket_group), the
// environment variable is HEARTH_ plus the upper-cased key (HEARTH_SOCKET_GROUP). Values
// are validated the same way whatever their source, and an error names the key and the
// source ("environment variable HEARTH_THREADS: ...", "config file /x.toml: key 'ctx' ...").
//
// Loading is pure: it reads argv, the environment through a lookup function and the config
// file, and touches nothing else (paths that depend on the user, such as the default socket,
// are resolved by default_socket_path / default_cache_dir).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/log.h"
#include "common/result.h"
#include "daemon/upstream_config.h"

namespace hearth::daemon {

// What the command line asks for besides serving.
enum class Action { Serve, Help, Version, ListDevices };

struct DaemonConfig {
  Action action = Action::Serve;
  std::string help_text;  // Action::Help: what to print

  std::string config_file;               // the TOML file read, "" if none
  std::string model;                     // catalog name, file name in the models folder or path; "" = default
  std::vector<std::string> more_models;  // --model given again: served by name, loaded on first use
  std::string chat_template;             // "chatml", "gemma", "llama3"; "" = from the model's file
  std::string socket;                    // Unix socket path; "" = default_socket_path()
  std::string socket_group;              // "" = mode 0600; else the socket's group, mode 0660
  std::string backend = "auto";          // "auto", "cpu", "vulkan", "cuda"
  int32_t vk_device = -1;                // Vulkan device index (--list-devices); -1 = choose
  int32_t cuda_device = -1;              // CUDA device index (--list-devices); -1 = choose
  int32_t threads = 0;                   // CPU threads; 0 = one per physical core
  int32_t ctx = 4096;                    // tokens per sequence (prompt + generated)
  bool ctx_set = false;                  // ctx came from a source other than the default
  int32_t parallel = 4;                  // sequences running at once
  int32_t prefill_chunk = 128;           // prompt tokens per step at most; 0 = a whole prompt per step
  int32_t step_budget_ms = 100;          // target step duration next to decoding streams; 0 = off
  int32_t queue_max = 64;                // requests waiting for a free sequence
  std::string speculative = "ngram";     // speculative decoding: "ngram" or "off"
  std::string draft_model;               // drafts where n-gram lookup finds none; "" = none
  std::string cache_dir;                 // "" = default_cache_dir()
  int64_t cache_max_bytes = 0;           // bytes on disk for the prompt cache; 0 = min(4 GiB, 10% of free space)
  int64_t cache_user_max_bytes = 0;      // of those, one user's at most; 0 = fair shares only
  bool no_disk_cache = false;
  int64_t memory_budget = 0;                 // bytes the loaded models may use; 0 = 3/4 of RAM
  int64_t gpu_memory_budget = 0;             // bytes of a GPU's memory they may use; 0 = 9/10 of it
  std::string keep_alive = "5m";             // a model's stay after its last request (common/duration.h)
  std::string listen_tcp;                    // "HOST:PORT"; "" = no TCP listener
  std::string listen_ollama;                 // "HOST:PORT" of Ollama's clients' listener; "" = none
  bool allow_remote = false;                 // allow a non-loopback --listen-tcp or --listen-ollama host
  std::string cache_scope = "user";          // whose prompts share cache entries: "user", "group", "shared"
  std::vector<std::string> allowed_origins;  // browser origins the TCP listener serves (CORS); none by default
  LogLevel log_level = LogLevel::Info;
  int32_t shutdown_grace_s = 30;  // seconds in-flight requests get after SIGTERM
  int32_t write_timeout_s = 60;   // seconds a client may read nothing of a response before it is cut off
  DType kv_type = DType::F16;
  std::vector<UpstreamConfig>
      upstreams;  // the file's [[upstream]] tables, then the --upstream-* one (upstream_flags.h)
};

// Returns the value of an environment variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment (getenv).
EnvLookup process_env();

// args: argv without argv[0]. Errors (exit code 2 for the caller) name the option or key
// and where it came from; help, version and list-devices come back as an Action.
Result<DaemonConfig> load_config(const std::vector<std::string>& args, const EnvLookup& env);

// The socket path when --socket is not given: /run/hearth/hearth.sock for root (euid 0),
// else $XDG_RUNTIME_DIR/hearth/hearth.sock; an error asking for --socket when
// XDG_RUNTIME_DIR is unset or empty.
Result<std::string> default_socket_path(const EnvLookup& env, unsigned euid);

// The prompt cache directory when --cache-dir is not given: /var/cache/hearth for root,
// else $XDG_CACHE_HOME/hearth, else $HOME/.cache/hearth.
std::string default_cache_dir(const EnvLookup& env, unsigned euid);

}  // namespace hearth::daemon
