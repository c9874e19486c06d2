#include "common/log.h"

#include <unistd.h>

#include <atomic>

namespace hearth {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
std::atomic<bool> g_syslog_prefix{false};
const char* const kNames[] = {"debug", "info", "warn", "error", "off"};
// sd-daemon.h's SD_DEBUG, SD_INFO, SD_WARNING, SD_ERR (syslog priorities 7, 6, 4, 3).
const char* const kSyslogPrefixes[] = {"<7>", "<6>", "<4>", "<3>", "<3>"};
}  // namespace

void set_log_level(LogLevel level) {
  g_level = static_cast<int>(level);
}
LogLevel log_level() {
  return static_cast<LogLevel>(g_level.load());
}
void set_log_syslog_prefix(bool on) {
  g_syslog_prefix = on;
}

bool parse_log_level(const std::string& s, LogLevel* out) {
  for (int i = 0; i <= 4; ++i) {
    if (s == kNames[i]) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void log_line(LogLevel level, const std::string& msg) {
  std::string line = g_syslog_prefix.load() ? kSyslogPrefixes[static_cast<int>(level)] : "";
  line += "hearth ";
  line += kNames[static_cast<int>(level)];
  line += ": ";
  line += msg;
  line += '\n';
  // One write() per line so lines from several threads never interleave.
  ssize_t rc = ::write(2, line.data(), line.size());
  (void)rc;
}

}  // namespace hearth
