#include "daemon/systemd.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace hearth::daemon {
namespace {

void notify(std::string state, const std::string& status) {
  if (!status.empty()) {
    if (!state.empty()) state += '\n';
    // STATUS is one line: a newline would start a new assignment.
    std::string one_line = status;
    for (char& ch : one_line)
      if (ch == '\n') ch = ' ';
    state += "STATUS=" + one_line;
  }
  if (state.empty()) return;
  // unset_environment = 0: later notifications (STOPPING, WATCHDOG) still need NOTIFY_SOCKET.
  const int rc = sd_notify(0, state.c_str());
  if (rc < 0) LOG_DEBUG("sd_notify failed: error " + std::to_string(-rc));
}

}  // namespace

void notify_status(const std::string& status) {
  notify("", status);
}
void notify_ready(const std::string& status) {
  notify("READY=1", status);
}
void notify_stopping(const std::string& status) {
  notify("STOPPING=1", status);
}
void notify_watchdog() {
  notify("WATCHDOG=1", "");
}

std::vector<ListenFd> take_listen_fds() {
  std::vector<ListenFd> out;
  const int n = sd_listen_fds(1);  // 1: unset LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES
  if (n < 0) {
    LOG_WARN("socket activation: sd_listen_fds failed: error " + std::to_string(-n));
    return out;
  }
  for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; ++fd) {
    ListenFd l;
    l.fd = fd;
    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) > 0) {
      l.kind = ListenFd::Kind::Unix;
    } else if (sd_is_socket_inet(fd, 0, SOCK_STREAM, 1, 0) > 0) {
      l.kind = ListenFd::Kind::Tcp;
    }
    out.push_back(l);
  }
  return out;
}

bool stderr_is_journal() {
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr || *js == '\0') return false;
  struct stat st {};
  if (fstat(2, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev && static_cast<unsigned long long>(st.st_ino) == ino;
}

Watchdog::~Watchdog() {
  stop();
}

bool Watchdog::start(std::function<bool()> alive) {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return false;
  alive_ = std::move(alive);
  interval_ = std::chrono::microseconds(usec);
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
  LOG_INFO("systemd watchdog: pinging every " + std::to_string(usec / 2000) + " ms");
  return true;
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
  bool was_alive = true;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const bool ok = !alive_ || alive_();
    if (ok) notify_watchdog();
    if (!ok && was_alive) LOG_ERROR("the engine looks stuck: no longer pinging the systemd watchdog");
    was_alive = ok;
    lock.lock();
    cv_.wait_for(lock, interval_ / 2, [this] { return stop_; });
  }
}

}  // namespace hearth::daemon
