// A real hearthd (HEARTHD_PATH) as a child process on a temporary socket, for the client's
// end-to-end tests: started with fork/exec, ready once GET /health answers 200 through the
// client library, stopped with SIGTERM (then SIGKILL) by the destructor. Its output goes to
// a log file that failures print.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_daemon.h"  // TempDir
#include "hearth/client.h"

namespace hearth::test {

class HearthdProcess {
 public:
  // Starts hearthd --model model --socket <tmp>/h.sock --threads 2 --cache-dir <tmp>/cache
  // plus extra_args; ready() says whether /health reached 200 before hearthd exited or the
  // hang guard passed (log() then says which).
  HearthdProcess(const std::string& model, const std::vector<std::string>& extra_args,
                 std::chrono::milliseconds guard = kHangGuard) {
    socket_ = dir_.file("h.sock");
    log_ = dir_.file("hearthd.log");
    std::vector<std::string> args = {
        HEARTHD_PATH,           "--model",     model, "--socket", socket_, "--threads", "2", "--cache-dir",
        dir_.file("cache"), "--log-level", "info"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec (the test process has threads).
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      ::execv(HEARTHD_PATH, argv.data());
      ::_exit(127);
    }
    hearth_client* client = nullptr;
    if (hearth_client_open(socket_.c_str(), &client) != HEARTH_OK) return;
    auto deadline = std::chrono::steady_clock::now() + guard;
    while (std::chrono::steady_clock::now() < deadline) {
      if (hearth_client_health(client) == HEARTH_OK) {
        ready_ = true;
        break;
      }
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;  // exited: the log says why
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!ready_ && pid_ > 0) {
      std::ofstream(log_, std::ios::app) << "\n[test harness] hang guard: /health did not answer 200 within "
                                         << guard.count() / 1000 << " s of starting hearthd\n";
    }
    hearth_client_close(client);
  }

  ~HearthdProcess() { stop(); }
  HearthdProcess(const HearthdProcess&) = delete;
  HearthdProcess& operator=(const HearthdProcess&) = delete;

  // SIGTERM, then SIGKILL after 20 s. Returns the exit status as waitpid reports it. (Clean-up
  // only: no test checks how the daemon ended, so a slow exit fails nothing.)
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 400; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  bool ready() const { return ready_; }
  const std::string& socket_path() const { return socket_; }
  std::string dir() const { return dir_.path().string(); }
  std::string log() const {
    std::ifstream f(log_);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

 private:
  TempDir dir_;
  std::string socket_;
  std::string log_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace hearth::test
