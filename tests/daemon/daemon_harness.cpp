#include "daemon_harness.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/tools/synthetic_model.h"

namespace hearth::test {
namespace {

using Clock = std::chrono::steady_clock;

long long seconds(std::chrono::milliseconds d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

// The last `n` bytes of s, for messages.
std::string tail(const std::string& s, size_t n = 400) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  return a;
}

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a = unix_address(path);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(body.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0) break;
    pos = eol + 2;
    out += body.substr(pos, n);
    pos += n + 2;
  }
  return out;
}

std::string request_text(const std::string& method, const std::string& target, const std::string& body) {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return req + "\r\n" + body;
}

}  // namespace

std::string write_synthetic_model(const std::string& dir, const std::string& name, const std::string& chat_template,
                                  const std::string& arch) {
  SyntheticOptions o;
  o.arch = arch;
  o.chat_template = chat_template;
  Result<std::vector<uint8_t>> bytes = make_synthetic_model(o);
  if (!bytes.ok()) return "";
  const std::string path = dir + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  return f ? path : "";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds guard) {
  const Clock::time_point deadline = Clock::now() + guard;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) {
      UNSCOPED_INFO("hang guard: the condition waited for did not hold within " << seconds(guard) << " s");
      return false;
    }
    std::this_thread::sleep_for(10ms);
  }
}

std::string hearthd_path() {
  return HEARTHD_PATH;
}

std::map<std::string, std::optional<std::string>> clean_env() {
  std::map<std::string, std::optional<std::string>> env;
  for (const char* name : {"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM",
                           "WATCHDOG_USEC", "WATCHDOG_PID", "HEARTH_CONFIG"})
    env[name] = std::nullopt;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    // HEARTH_* options would change the daemon's behaviour (HEARTH_SIMD and HEARTH_MODELS are fine to keep).
    if (kv.rfind("HEARTH_", 0) == 0 && kv.rfind("HEARTH_SIMD=", 0) != 0) env[kv.substr(0, kv.find('='))] = std::nullopt;
  }
  return env;
}

namespace {

// Writes v in decimal into buf (at least 21 bytes), NUL-terminated: async-signal-safe,
// unlike std::to_string, for the child between fork and exec.
void write_decimal(char* buf, unsigned long long v) {
  char tmp[21];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (int k = 0; k < n; ++k) buf[k] = tmp[n - 1 - k];
  buf[n] = '\0';
}

// An environment entry NAME= whose value the child fills in after fork (its pid, its
// stderr's device and inode): room for two 20-digit numbers and a colon.
std::string fill_later(const std::string& name) {
  return name + "=" + std::string(42, '\0');
}

}  // namespace

// Everything the child needs is built here, before fork: the test processes have threads
// (streams, servers), so between fork and exec the child may only make async-signal-safe
// calls (no allocation, no setenv).
Process::Process(const SpawnOptions& o) {
  std::vector<std::string> args = o.args;
  args.insert(args.begin(), hearthd_path());
  std::map<std::string, std::optional<std::string>> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, value] : o.env) env[name] = value;
  std::vector<std::string> entries;
  for (const auto& [name, value] : env) {
    // Set below, from the options.
    const bool replaced = (o.activation_fd >= 0 && (name == "LISTEN_FDS" || name == "LISTEN_PID")) ||
                          (!o.watchdog_usec.empty() && (name == "WATCHDOG_USEC" || name == "WATCHDOG_PID")) ||
                          (o.journal_stream && name == "JOURNAL_STREAM");
    if (value && !replaced) entries.push_back(name + "=" + *value);
  }
  int listen_pid = -1, watchdog_pid = -1, journal = -1;  // entries the child completes
  if (o.activation_fd >= 0) {
    entries.push_back("LISTEN_FDS=1");
    listen_pid = static_cast<int>(entries.size());
    entries.push_back(fill_later("LISTEN_PID"));
  }
  if (!o.watchdog_usec.empty()) {
    entries.push_back("WATCHDOG_USEC=" + o.watchdog_usec);
    watchdog_pid = static_cast<int>(entries.size());
    entries.push_back(fill_later("WATCHDOG_PID"));
  }
  if (o.journal_stream) {
    journal = static_cast<int>(entries.size());
    entries.push_back(fill_later("JOURNAL_STREAM"));
  }
  std::vector<char*> envp, argv;
  for (std::string& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = o.stdout_path.empty() ? "/dev/null" : o.stdout_path;
  const std::string err = o.stderr_path.empty() ? "/dev/null" : o.stderr_path;

  pid_ = ::fork();
  if (pid_ != 0) return;
  auto redirect = [](const char* path, int target) {
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    if (fd != target) {
      ::dup2(fd, target);
      ::close(fd);
    }
  };
  redirect(out.c_str(), 1);
  redirect(err.c_str(), 2);
  if (o.activation_fd >= 0) {
    if (o.activation_fd == 3) {
      ::fcntl(3, F_SETFD, 0);
    } else {
      ::dup2(o.activation_fd, 3);
      ::close(o.activation_fd);
    }
  }
  // Each "NAME=" below is followed by the room fill_later left.
  for (int entry : {listen_pid, watchdog_pid}) {
    if (entry < 0) continue;
    char* e = envp[static_cast<size_t>(entry)];
    write_decimal(std::strchr(e, '=') + 1, static_cast<unsigned long long>(::getpid()));
  }
  if (journal >= 0) {
    struct stat st {};
    ::fstat(2, &st);
    char* v = std::strchr(envp[static_cast<size_t>(journal)], '=') + 1;
    write_decimal(v, static_cast<unsigned long long>(st.st_dev));
    char* colon = v + std::strlen(v);
    *colon = ':';
    write_decimal(colon + 1, static_cast<unsigned long long>(st.st_ino));
  }
  if (o.uid) {
    const gid_t gid = static_cast<gid_t>(*o.uid);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(*o.uid, *o.uid, *o.uid) != 0)
      _exit(126);
  }
  ::execve(argv[0], argv.data(), envp.data());
  _exit(127);
}

Process::~Process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

void Process::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

bool Process::running() {
  return !poll_exit().has_value();
}

std::optional<int> Process::poll_exit() {
  if (status_) return status_;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return status_;
}

std::optional<int> Process::wait_exit(std::chrono::milliseconds guard) {
  const Clock::time_point deadline = Clock::now() + guard;
  for (;;) {
    if (poll_exit()) return status_;
    if (Clock::now() >= deadline) {
      UNSCOPED_INFO("hang guard: hearthd (pid " << pid_ << ") was still running " << seconds(guard) << " s later");
      return std::nullopt;
    }
    std::this_thread::sleep_for(5ms);
  }
}

RunResult run_hearthd(const std::vector<std::string>& args,
                      const std::map<std::string, std::optional<std::string>>& env) {
  TempDir dir;
  SpawnOptions o;
  o.args = args;
  o.env = clean_env();
  for (const auto& [k, v] : env) o.env[k] = v;
  o.stdout_path = dir.file("out");
  o.stderr_path = dir.file("err");
  RunResult r;
  {
    Process p(o);
    r.code = p.wait_exit().value_or(-1);
  }
  r.out = read_file(o.stdout_path);
  r.err = read_file(o.stderr_path);
  return r;
}

HttpResponse parse_response(const std::string& raw) {
  HttpResponse r;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  r.headers = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  if (lower(r.headers).find("transfer-encoding: chunked") != std::string::npos) r.body = dechunk(r.body);
  return r;
}

HttpResponse http_request(const std::string& socket_path, const std::string& method, const std::string& target,
                          const std::string& body, std::chrono::milliseconds guard) {
  HttpStream s(socket_path, method, target, body);
  if (!s.ok()) return {};
  s.read_to_close(guard);
  return s.response();
}

HttpStream::HttpStream(const std::string& socket_path, const std::string& method, const std::string& target,
                       const std::string& body) {
  fd_ = connect_unix(socket_path);
  if (fd_ < 0) return;
  if (!write_all(fd_, request_text(method, target, body))) {
    ::close(fd_);
    fd_ = -1;
  }
}

HttpStream::~HttpStream() {
  if (fd_ >= 0) ::close(fd_);
}

bool HttpStream::read_some(std::chrono::milliseconds timeout) {
  if (fd_ < 0 || closed_) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
  if (n <= 0) {
    closed_ = true;
    return false;
  }
  raw_.append(buf, static_cast<size_t>(n));
  return true;
}

bool HttpStream::read_until(const std::string& needle, std::chrono::milliseconds guard) {
  const Clock::time_point deadline = Clock::now() + guard;
  while (raw_.find(needle) == std::string::npos) {
    if (closed_ || fd_ < 0) {
      UNSCOPED_INFO("the connection closed before \"" << needle << "\" came; received (" << raw_.size()
                                                      << " bytes): " << tail(raw_));
      return false;
    }
    if (Clock::now() >= deadline) {
      UNSCOPED_INFO("hang guard: \"" << needle << "\" did not come within " << seconds(guard) << " s; received ("
                                     << raw_.size() << " bytes): " << tail(raw_));
      return false;
    }
    read_some(std::chrono::milliseconds(remaining_ms(deadline)));
  }
  return true;
}

bool HttpStream::read_to_close(std::chrono::milliseconds guard) {
  const Clock::time_point deadline = Clock::now() + guard;
  while (!closed_ && fd_ >= 0 && Clock::now() < deadline) read_some(std::chrono::milliseconds(remaining_ms(deadline)));
  if (!closed_)
    UNSCOPED_INFO("hang guard: the server did not close the connection within "
                  << seconds(guard) << " s; received (" << raw_.size() << " bytes): " << tail(raw_));
  return closed_;
}

HttpResponse HttpStream::response() const {
  return parse_response(raw_);
}

NotifySocket::NotifySocket(const std::string& path) : path_(path) {
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = unix_address(path);
  if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
}

std::string NotifySocket::wait_for(const std::string& needle, std::chrono::milliseconds guard) {
  const Clock::time_point deadline = Clock::now() + guard;
  while (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
      std::string got;
      for (const std::string& m : messages_) got += "\n  " + m;
      UNSCOPED_INFO("hang guard: no notify message with \"" << needle << "\" within " << seconds(guard)
                                                            << " s; received:" << (got.empty() ? " none" : got));
      return "";
    }
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) continue;
    messages_.emplace_back(buf, static_cast<size_t>(n));
    if (messages_.back().find(needle) != std::string::npos) return messages_.back();
  }
  return "";
}

int make_listening_unix_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a = unix_address(path);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace hearth::test
