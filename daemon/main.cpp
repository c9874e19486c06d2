// hearthd: keeps a language model resident and serves it over a Unix socket.
// Exit codes: 0 clean shutdown (or --help/--version/--list-devices), 1 runtime failure
// (socket taken, model not loadable), 2 bad configuration.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "daemon/config.h"
#include "daemon/devices.h"
#include "daemon/lifecycle.h"
#include "daemon/serving.h"
#include "daemon/systemd.h"

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitConfig = 2;

int config_error(const std::string& msg) {
  std::fprintf(stderr, "hearthd: %s\n", msg.c_str());
  return kExitConfig;
}

// The default socket's directory: $XDG_RUNTIME_DIR/hearth (0700) or /run/hearth (0755)
// when missing. An explicit --socket's directory must exist already.
hearth::Status make_socket_dir(const std::string& socket, unsigned euid) {
  const std::string dir = std::filesystem::path(socket).parent_path().string();
  if (::mkdir(dir.c_str(), euid == 0 ? 0755 : 0700) != 0 && errno != EEXIST)
    return hearth::make_error("cannot create " + dir + ": " + std::strerror(errno));
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hearth;
  using namespace hearth::daemon;
  const EnvLookup env = process_env();
  Result<DaemonConfig> loaded = load_config(std::vector<std::string>(argv + 1, argv + argc), env);
  if (!loaded) return config_error(loaded.error().message);
  DaemonConfig cfg = std::move(*loaded);
  switch (cfg.action) {
    case Action::Help:
      std::fputs(cfg.help_text.c_str(), stdout);
      return 0;
    case Action::Version:
      std::printf("hearthd %s\n", HEARTH_VERSION);
      return 0;
    case Action::ListDevices:
      std::fputs(list_devices(cfg.threads).c_str(), stdout);
      return 0;
    case Action::Serve:
      break;
  }

  set_log_level(cfg.log_level);
  set_log_syslog_prefix(stderr_is_journal());
  if (Status st = check_backend_available(backend_choice(cfg)); !st) return config_error(st.error().message);
  const unsigned euid = ::geteuid();
  if (cfg.socket.empty()) {
    Result<std::string> path = default_socket_path(env, euid);
    // Socket activation (descriptors passed to this very process) needs no path of ours.
    const bool activated = env("LISTEN_FDS").has_value() && env("LISTEN_PID") == std::to_string(::getpid());
    if (path) {
      cfg.socket = *path;
      if (!activated) {
        if (Status st = make_socket_dir(cfg.socket, euid); !st) {
          LOG_ERROR(st.error().message);
          return kExitRuntime;
        }
      }
    } else if (!activated) {
      return config_error(path.error().message);
    }
  }
  if (cfg.cache_dir.empty()) cfg.cache_dir = default_cache_dir(env, euid);
  if (!cfg.config_file.empty()) LOG_INFO("config file " + cfg.config_file);

  // Before any thread exists, so every thread inherits the mask and only the lifecycle's
  // sigtimedwait takes these signals.
  const sigset_t signals = shutdown_signals();
  if (pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) {
    LOG_ERROR("cannot block signals");
    return kExitRuntime;
  }
  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error value, not a death
  return run_daemon(cfg);
}
