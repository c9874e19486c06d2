// Minimal leveled logging to stderr. Thread-safe (one write per line).
#pragma once

#include <cstdio>
#include <string>

namespace hearth {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
bool parse_log_level(const std::string& s, LogLevel* out);
void log_line(LogLevel level, const std::string& msg);
// When on, every line starts with its syslog priority ("<7>" debug, "<6>" info,
// "<4>" warn, "<3>" error), as journald reads them from a service's stderr. Off by default.
void set_log_syslog_prefix(bool on);

}  // namespace hearth

#define HEARTH_LOG(level, msg)                                                \
  do {                                                                        \
    if ((level) >= ::hearth::log_level()) ::hearth::log_line((level), (msg)); \
  } while (0)
#define LOG_DEBUG(msg) HEARTH_LOG(::hearth::LogLevel::Debug, msg)
#define LOG_INFO(msg) HEARTH_LOG(::hearth::LogLevel::Info, msg)
#define LOG_WARN(msg) HEARTH_LOG(::hearth::LogLevel::Warn, msg)
#define LOG_ERROR(msg) HEARTH_LOG(::hearth::LogLevel::Error, msg)
