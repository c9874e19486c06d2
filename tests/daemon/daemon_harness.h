// Test helpers that drive a real hearthd process: a temporary directory, a synthetic model
// file, spawning hearthd with a chosen environment (optionally with a socket-activation
// descriptor and a NOTIFY_SOCKET), a raw HTTP/1.1 client over a Unix socket, and a
// datagram socket that receives sd_notify messages.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace hearth::test {

using namespace std::chrono_literals;

// Every wait below defaults to kHangGuard (tests/test_util.h): minutes, a guard against a
// hang and not a performance bound. When a wait expires it adds a message saying what it
// waited for (and what it got) to the failing check that follows (Catch's UNSCOPED_INFO).

// Writes a synthetic model (tests/tools/synthetic_model.h; gemma3 unless arch says) to
// dir/name; returns its path. chat_template: written as tokenizer.chat_template when not empty.
std::string write_synthetic_model(const std::string& dir, const std::string& name = "synth-gemma3.gguf",
                                  const std::string& chat_template = "", const std::string& arch = "gemma3");

std::string read_file(const std::string& path);

// Polls pred every 10 ms until it is true or `guard` passes; returns the last result.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds guard = kHangGuard);

struct SpawnOptions {
  std::vector<std::string> args;                          // after argv[0]
  std::map<std::string, std::optional<std::string>> env;  // set (value) or unset (nullopt) in the child
  std::string stdout_path;                                // "" = /dev/null
  std::string stderr_path;                                // "" = /dev/null
  int activation_fd = -1;                                 // >= 0: becomes fd 3 with LISTEN_FDS=1, LISTEN_PID=<child>
  bool journal_stream = false;                            // JOURNAL_STREAM = dev:ino of the child's stderr
  std::string watchdog_usec;                              // not empty: WATCHDOG_USEC = this, WATCHDOG_PID = <child>
  std::optional<uid_t> uid;  // run as this uid (its gid the same, no supplementary groups); needs root
};

// A hearthd child process; killed (SIGKILL) and reaped on destruction if still running.
class Process {
 public:
  explicit Process(const SpawnOptions& options);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig);
  // The exit code (or 128 + signal) once the process ended, nullopt when still running
  // after `guard`.
  std::optional<int> wait_exit(std::chrono::milliseconds guard = kHangGuard);
  bool running();

 private:
  std::optional<int> poll_exit();  // without waiting
  pid_t pid_ = -1;
  std::optional<int> status_;
};

// Runs hearthd to completion (for --version and friends); returns the exit code, with
// stdout and stderr captured.
struct RunResult {
  int code = -1;
  std::string out, err;
};
RunResult run_hearthd(const std::vector<std::string>& args,
                      const std::map<std::string, std::optional<std::string>>& env = {});

// The environment entries every test daemon gets: no inherited systemd or HEARTH_*
// variables that would change its behaviour.
std::map<std::string, std::optional<std::string>> clean_env();

// The path of the hearthd binary under test.
std::string hearthd_path();

struct HttpResponse {
  int status = 0;  // 0: no response (connect failed or the connection closed early)
  std::string headers;
  std::string body;  // de-chunked when Transfer-Encoding is chunked
};

// One HTTP/1.1 request over a Unix socket with "Connection: close"; reads until the server
// closes (or `guard` passes).
HttpResponse http_request(const std::string& socket_path, const std::string& method, const std::string& target,
                          const std::string& body = "", std::chrono::milliseconds guard = kHangGuard);

// A request whose response is read incrementally (streams).
class HttpStream {
 public:
  // Connects and sends the request; ok() false when that failed.
  HttpStream(const std::string& socket_path, const std::string& method, const std::string& target,
             const std::string& body);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;
  bool ok() const { return fd_ >= 0; }
  // Reads until the raw bytes received so far contain needle (true), the server closes or
  // `guard` passes (false).
  bool read_until(const std::string& needle, std::chrono::milliseconds guard = kHangGuard);
  // Reads until the server closes the connection (true) or `guard` passes (false).
  bool read_to_close(std::chrono::milliseconds guard = kHangGuard);
  const std::string& raw() const { return raw_; }
  HttpResponse response() const;  // parsed from raw()

 private:
  bool read_some(std::chrono::milliseconds timeout);  // false on close or timeout
  int fd_ = -1;
  bool closed_ = false;
  std::string raw_;
};

HttpResponse parse_response(const std::string& raw);

// A bound Unix datagram socket standing in for systemd's $NOTIFY_SOCKET.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path);
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  const std::string& path() const { return path_; }
  // Receives datagrams until one contains needle (returned), or "" after `guard`. Every
  // datagram received is also kept in messages().
  std::string wait_for(const std::string& needle, std::chrono::milliseconds guard = kHangGuard);
  const std::vector<std::string>& messages() const { return messages_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<std::string> messages_;
};

// A listening Unix stream socket at path, as systemd's .socket unit would create it.
int make_listening_unix_socket(const std::string& path);

}  // namespace hearth::test
