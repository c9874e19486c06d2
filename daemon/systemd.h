// Thin wrappers over libsystemd's sd-daemon: readiness and status notifications, the
// watchdog, socket activation and journald detection. Every call is a no-op (or returns
// "nothing") when hearthd was not started by systemd, so the daemon runs the same way from
// a shell. libsystemd stays behind this header.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hearth::daemon {

// sd_notify to $NOTIFY_SOCKET. status, when not empty, is sent as STATUS=... in the same
// datagram. Thread-safe.
void notify_status(const std::string& status);
void notify_ready(const std::string& status);     // READY=1
void notify_stopping(const std::string& status);  // STOPPING=1
void notify_watchdog();                           // WATCHDOG=1

// Descriptors passed by socket activation ($LISTEN_FDS / $LISTEN_PID, which are unset
// afterwards so children do not inherit them), each classified.
struct ListenFd {
  enum class Kind { Unix, Tcp, Other };
  int fd = -1;
  Kind kind = Kind::Other;
};
std::vector<ListenFd> take_listen_fds();

// True when stderr is the journal stream systemd connected ($JOURNAL_STREAM = "dev:ino" of
// stderr), so log lines should carry syslog priority prefixes.
bool stderr_is_journal();

// Pings WATCHDOG=1 every half of the interval systemd asked for ($WATCHDOG_USEC, for this
// process), from its own thread, but only while alive() says the daemon is healthy; when
// alive() turns false systemd's watchdog eventually kills and restarts the service.
// start() does nothing when the watchdog is not enabled. alive() runs on the watchdog
// thread and must not block for long.
class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Returns whether the watchdog is enabled (and a thread was started).
  bool start(std::function<bool()> alive);
  void stop();
  std::chrono::microseconds interval() const { return interval_; }

 private:
  void loop();

  std::function<bool()> alive_;
  std::chrono::microseconds interval_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hearth::daemon
