#include "test_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <stdexcept>

#include "backends/cpu/cpu_backend.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "one_model_host.h"
#include "tests/test_util.h"
#include "tests/tools/synthetic_model.h"

namespace hearth::test {

int loopback_listener(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

namespace {

template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

}  // namespace

const SyntheticEngine& synthetic_engine() {
  static const SyntheticEngine engine = [] {
    SyntheticEngine e;
    SyntheticOptions o;
    o.arch = "gemma3";
    o.type = DType::Q8_0;
    e.bytes = must(make_synthetic_model(o), "synthetic model");
    e.file = must(gguf::File::from_memory(e.bytes.data(), e.bytes.size()), "gguf");
    e.backend = cpu::make_cpu_backend({1});
    e.model = must(Model::load(e.file, *e.backend), "model");
    e.tokenizer = must(Tokenizer::from_gguf(*e.file), "tokenizer");
    e.info.id = "synthetic-gemma3";
    e.info.path = "/nonexistent/synthetic-gemma3.gguf";
    e.info.arch = "gemma3";
    e.info.backend = "cpu";
    e.info.n_ctx = 512;
    e.info.created = 1700000000;
    e.info.chat_template = must(chat_template_from_gguf(*e.file), "chat template");
    return e;
  }();
  return engine;
}

TestServerOptions::TestServerOptions() {
  server.body_limit_bytes = 16 * 1024;
  // Hang guards, not the product's timeouts: a test's connection is never closed because the
  // test (or the server) was descheduled between accept and the request on a busy machine.
  // Tests of the timeouts themselves set short ones.
  server.header_timeout = kHangGuard;
  server.body_timeout = kHangGuard;
  server.idle_timeout = kHangGuard;
  scheduler.n_parallel = 2;
  scheduler.n_ctx = 512;
  scheduler.prefill_chunk = 64;
  scheduler.queue_max = 8;
  scheduler.block_tokens = 16;
}

TestServer::TestServer(const TestServerOptions& options) : socket_path_(dir_.file("hearth.sock")) {
  const SyntheticEngine& e = synthetic_engine();
  scheduler_ = must(Scheduler::create(*e.model, *e.backend, *e.tokenizer, options.scheduler), "scheduler");
  server_ = std::make_unique<ipc::Server>(options.server);
  if (Status s = server_->listen_unix(socket_path_); !s.ok()) throw std::runtime_error(s.error().message);
  if (options.set_engine) set_engine();
  thread_ = std::thread([this] { server_->run(); });
}

void TestServer::set_engine() {
  const SyntheticEngine& e = synthetic_engine();
  server_->set_host(std::make_shared<OneModelHost>(ipc::make_engine_ref(scheduler_.get(), e.tokenizer.get(), e.info)));
}

TestServer::~TestServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
  scheduler_.reset();
}

}  // namespace hearth::test
