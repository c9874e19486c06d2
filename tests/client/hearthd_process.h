// A real hearthd (HEARTHD_PATH) as a child process on a temporary socket, for the client's
// end-to-end tests: started by the daemon tests' launcher (tests/daemon/daemon_harness.h,
// a clean environment), ready once GET /health answers 200 through the client library,
// stopped with SIGTERM (then SIGKILL) by the destructor. Its output goes to a log file
// that failures print.
#pragma once

#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hearth/client.h"
#include "tests/daemon/daemon_harness.h"

namespace hearth::test {

class HearthdProcess {
 public:
  // Starts hearthd --model model --socket <tmp>/h.sock --threads 2 --cache-dir <tmp>/cache
  // plus extra_args; ready() says whether /health reached 200 before hearthd exited or the
  // hang guard passed (log() then says which).
  HearthdProcess(const std::string& model, const std::vector<std::string>& extra_args,
                 std::chrono::milliseconds guard = kHangGuard)
      : socket_(dir_.file("h.sock")), log_(dir_.file("hearthd.log")) {
    SpawnOptions o;
    o.args = {"--model", model,         "--socket",         socket_,       "--threads",
              "2",       "--cache-dir", dir_.file("cache"), "--log-level", "info"};
    o.args.insert(o.args.end(), extra_args.begin(), extra_args.end());
    o.env = clean_env();
    o.stdout_path = o.stderr_path = log_;
    process_ = std::make_unique<Process>(o);
    hearth_client* client = nullptr;
    if (hearth_client_open(socket_.c_str(), &client) != HEARTH_OK) return;
    ready_ = wait_until([&] { return hearth_client_health(client) == HEARTH_OK || !process_->running(); }, guard) &&
             process_->running();
    if (!ready_ && process_->running()) {
      std::ofstream(log_, std::ios::app) << "\n[test harness] hang guard: /health did not answer 200 within "
                                         << guard.count() / 1000 << " s of starting hearthd\n";
    }
    hearth_client_close(client);
  }

  // SIGTERM, then SIGKILL (the Process's destructor) after 20 s. (Clean-up only: no test
  // checks how the daemon ended, so a slow exit fails nothing.)
  ~HearthdProcess() {
    process_->signal(SIGTERM);
    process_->wait_exit(std::chrono::seconds(20));
  }
  HearthdProcess(const HearthdProcess&) = delete;
  HearthdProcess& operator=(const HearthdProcess&) = delete;

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
  std::unique_ptr<Process> process_;
  bool ready_ = false;
};

}  // namespace hearth::test
