// A real hearth Server on a temporary Unix socket, serving a tiny synthetic Gemma 3 model
// through a real Scheduler, with run() on a thread of its own.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "engine/scheduler/scheduler.h"
#include "ipc/server.h"
#include "tests/test_util.h"

namespace hearth::test {

// A loopback TCP listener on a free port, for Server::adopt_tcp_fd; returns the fd and
// sets *port.
int loopback_listener(uint16_t* port);

// The model, backend and tokenizer, loaded once per test binary.
struct SyntheticEngine {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  ipc::ModelInfo info;
};
const SyntheticEngine& synthetic_engine();

struct TestServerOptions {
  ipc::ServerOptions server;
  SchedulerOptions scheduler;
  bool set_engine = true;  // false: the server stays "loading" (no host) until set_engine()
  TestServerOptions();
};

class TestServer {
 public:
  explicit TestServer(const TestServerOptions& options = TestServerOptions());
  ~TestServer();  // stop() and join

  const std::string& socket_path() const { return socket_path_; }
  std::string dir() const { return dir_.path().string(); }
  ipc::Server& server() { return *server_; }
  Scheduler& scheduler() { return *scheduler_; }
  const ipc::ModelInfo& model() const { return synthetic_engine().info; }
  void set_engine();

 private:
  TempDir dir_;
  std::string socket_path_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ipc::Server> server_;
  std::thread thread_;
};

}  // namespace hearth::test
