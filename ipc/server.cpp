// Server: listeners, accept loops and lifecycle. The per-connection work lives in
// connection.cpp, the request -> answer logic in route_table.cpp and the handlers.
#include "ipc/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "ipc/connection.h"
#include "ipc/errors.h"
#include "ipc/socket_path.h"
#include "ipc/state.h"

namespace hearth::ipc {

namespace net = boost::asio;
using UnixAcceptor = net::local::stream_protocol::acceptor;
using TcpAcceptor = net::ip::tcp::acceptor;

namespace {

// If stop() finds connections that do not end (a bug), run() returns after this anyway.
constexpr std::chrono::seconds kStopGrace{2};
// After a failed accept (EMFILE, ENFILE, ENOBUFS), wait before trying again.
constexpr std::chrono::milliseconds kAcceptRetry{100};

}  // namespace

class Server::Impl {
 public:
  explicit Impl(ServerOptions options)
      : state_(std::move(options)),
        ioc_(std::max(1, state_.options.io_threads)),
        control_(net::make_strand(ioc_)),
        grace_timer_(control_),
        work_(net::make_work_guard(ioc_)) {
    state_.set_on_idle([this] { net::post(control_, [this] { grace_timer_.cancel(); }); });
  }

  ~Impl() {
    stop();
    state_.set_on_idle(nullptr);
    {
      std::lock_guard<std::mutex> lock(state_.gate->mutex);
      state_.gate->open = false;  // the engine thread posts no more wake-ups from here on
    }
  }

  Status listen_unix(const std::string& path, unsigned mode, const std::string& group) {
    if (path.empty()) return make_error("empty socket path");
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return make_error("socket path too long: " + path);
    int64_t gid = -1;
    if (!group.empty()) {
      Result<gid_t> g = lookup_group(group);
      if (!g.ok()) return g.error();
      gid = *g;
    }
    if (Status s = clear_stale_socket(path); !s.ok()) return s;
    auto acceptor = std::make_unique<UnixAcceptor>(control_);
    boost::system::error_code ec;
    acceptor->open(net::local::stream_protocol(), ec);
    if (!ec) acceptor->bind(net::local::stream_protocol::endpoint(path), ec);
    if (ec) return make_error("cannot bind " + path + ": " + ec.message());
    Result<FileId> id = file_id(path);
    if (!id.ok()) return id.error();
    // Permissions are set before listen(): nobody can connect in between.
    if (Status s = set_socket_permissions(path, mode, gid); !s.ok()) {
      unlink_if_same(path, *id);
      return s;
    }
    acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      unlink_if_same(path, *id);
      return make_error("cannot listen on " + path + ": " + ec.message());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    owned_paths_.push_back({path, *id});
    start_accepting(std::move(acceptor), false);
    LOG_INFO("ipc: listening on " + path);
    return {};
  }

  Status adopt_unix_fd(int fd) {
    if (Status s = check_listening_socket(fd, AF_UNIX); !s.ok()) return s;
    auto acceptor = std::make_unique<UnixAcceptor>(control_);
    boost::system::error_code ec;
    acceptor->assign(net::local::stream_protocol(), fd, ec);
    if (ec) return make_error("cannot adopt fd " + std::to_string(fd) + ": " + ec.message());
    std::lock_guard<std::mutex> lock(mutex_);
    start_accepting(std::move(acceptor), false);
    return {};
  }

  Status adopt_tcp_fd(int fd, bool allow_remote) {
    if (Status s = check_listening_socket(fd, 0); !s.ok()) return s;
    int family = 0;
    socklen_t len = sizeof family;
    ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len);
    auto acceptor = std::make_unique<TcpAcceptor>(control_);
    boost::system::error_code ec;
    acceptor->assign(family == AF_INET6 ? net::ip::tcp::v6() : net::ip::tcp::v4(), fd, ec);
    if (ec) return make_error("cannot adopt fd " + std::to_string(fd) + ": " + ec.message());
    std::lock_guard<std::mutex> lock(mutex_);
    start_accepting(std::move(acceptor), !allow_remote);
    return {};
  }

  Status listen_tcp(const std::string& host_port, bool allow_remote) {
    Result<HostPort> hp = parse_host_port(host_port);
    if (!hp.ok()) return hp.error();
    boost::system::error_code ec;
    const net::ip::address address = net::ip::make_address(hp->host, ec);
    if (ec) return make_error("'" + hp->host + "' is not an IP address (or localhost)");
    if (!allow_remote && !address.is_loopback()) {
      return make_error(hp->host + " is not a loopback address; remote listening needs allow_remote");
    }
    const net::ip::tcp::endpoint endpoint(address, hp->port);
    auto acceptor = std::make_unique<TcpAcceptor>(control_);
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) return make_error("cannot listen on " + host_port + ": " + ec.message());
    std::lock_guard<std::mutex> lock(mutex_);
    start_accepting(std::move(acceptor), !allow_remote);
    LOG_INFO("ipc: listening on tcp " + host_port);
    return {};
  }

  void set_host(std::shared_ptr<ModelHost> host) { state_.set_host(std::move(host)); }
  void set_puller(std::shared_ptr<ModelPuller> puller) { state_.set_puller(std::move(puller)); }
  void set_upstreams(std::shared_ptr<UpstreamForwarder> upstreams) { state_.set_upstreams(std::move(upstreams)); }

  void run() {
    std::vector<std::thread> threads;
    for (int i = 1; i < state_.options.io_threads; ++i)
      threads.emplace_back([this] {
        set_thread_name("hearth-io");
        run_io();
      });
    set_thread_name("hearth-io");  // the caller's thread serves too
    run_io();
    for (std::thread& t : threads) t.join();
  }

  void stop_accepting() {
    state_.accepting.store(false);
    unlink_owned_paths();
    net::post(control_, [this] { close_acceptors(); });
  }

  void stop() {
    state_.accepting.store(false);
    state_.stopping.store(true);
    unlink_owned_paths();
    net::post(control_, [this] {
      if (stop_started_) return;
      stop_started_ = true;
      close_acceptors();
      state_.close_all();
      work_.reset();
      grace_timer_.expires_after(kStopGrace);
      grace_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        LOG_WARN("ipc: connections did not close in time; stopping the event loop");
        ioc_.stop();
      });
      if (state_.open_connections.load() == 0) grace_timer_.cancel();
    });
  }

  int64_t open_connections() const { return state_.open_connections.load(); }
  int64_t idle_connections() const { return state_.idle_connections(); }

 private:
  void run_io() {
    for (;;) {
      try {
        ioc_.run();
        return;
      } catch (const std::exception& e) {
        LOG_ERROR(std::string("ipc: event loop: ") + e.what());
      }
    }
  }

  // Caller holds mutex_.
  template <class Acceptor>
  void start_accepting(std::unique_ptr<Acceptor> acceptor, bool check_host) {
    Acceptor* a = acceptor.get();
    add_acceptor(std::move(acceptor));
    net::co_spawn(control_, accept_loop(a, check_host), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        LOG_ERROR(std::string("ipc: accept loop ended: ") + x.what());
      }
    });
  }

  void add_acceptor(std::unique_ptr<UnixAcceptor> a) { unix_acceptors_.push_back(std::move(a)); }
  void add_acceptor(std::unique_ptr<TcpAcceptor> a) { tcp_acceptors_.push_back(std::move(a)); }

  // Runs on control_, like every use of the acceptors after they are listening.
  template <class Acceptor>
  net::awaitable<void> accept_loop(Acceptor* acceptor, bool check_host) {
    using Protocol = typename Acceptor::protocol_type;
    net::steady_timer retry(control_);
    for (;;) {
      typename Protocol::socket socket(net::make_strand(ioc_));
      boost::system::error_code ec;
      co_await acceptor->async_accept(socket, net::redirect_error(net::use_awaitable, ec));
      if (ec == net::error::operation_aborted || !acceptor->is_open() || !state_.accepting.load()) co_return;
      if (ec) {
        LOG_WARN("ipc: accept failed: " + ec.message());
        retry.expires_after(kAcceptRetry);
        co_await retry.async_wait(net::redirect_error(net::use_awaitable, ec));
        continue;
      }
      if (state_.open_connections.load() >= static_cast<int64_t>(state_.options.max_connections) &&
          !state_.close_longest_idle()) {
        refuse_busy(socket);
        continue;
      }
      start_connection<Protocol>(state_, std::move(socket), check_host);
    }
  }

  // Every place is taken by a connection that is serving a request: one 503 with
  // Retry-After, written without waiting (a new socket's send buffer holds it), then close.
  template <class Socket>
  void refuse_busy(Socket& socket) {
    static const std::string kResponse = [] {
      const std::string body =
          error_body(unavailable("too many connections are serving requests; retry shortly", "too_many_connections"));
      return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
             "Connection: close\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body;
    }();
    LOG_WARN("ipc: " + std::to_string(state_.options.max_connections) +
             " connections are all serving requests; a new one gets 503");
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    if (!ec) socket.send(net::buffer(kResponse), 0, ec);
    state_.responses.count(503);
    // What the client already sent is read and dropped: closing with unread bytes would
    // make TCP reset the connection, and the client could lose the 503 before reading it.
    std::array<char, 4096> sink;
    for (int i = 0; i < 16 && !ec; ++i) socket.receive(net::buffer(sink), 0, ec);
    socket.shutdown(net::socket_base::shutdown_send, ec);
    socket.close(ec);
  }

  void close_acceptors() {
    std::lock_guard<std::mutex> lock(mutex_);
    boost::system::error_code ec;
    for (auto& a : unix_acceptors_) a->close(ec);
    for (auto& a : tcp_acceptors_) a->close(ec);
  }

  void unlink_owned_paths() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const OwnedPath& p : owned_paths_) unlink_if_same(p.path, p.id);
    owned_paths_.clear();
  }

  struct OwnedPath {
    std::string path;
    FileId id;
  };

  ServerState state_;  // outlives ioc_: connections destroyed with it still use it
  net::io_context ioc_;
  net::strand<net::io_context::executor_type> control_;  // acceptors, stop
  net::steady_timer grace_timer_;
  net::executor_work_guard<net::io_context::executor_type> work_;  // run() serves until stop()
  bool stop_started_ = false;                                      // on control_

  std::mutex mutex_;  // the lists below
  std::vector<std::unique_ptr<UnixAcceptor>> unix_acceptors_;
  std::vector<std::unique_ptr<TcpAcceptor>> tcp_acceptors_;
  std::vector<OwnedPath> owned_paths_;  // unlinked by stop_accepting()
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Server::~Server() = default;

Status Server::listen_unix(const std::string& path, unsigned mode, const std::string& group) {
  return impl_->listen_unix(path, mode, group);
}
Status Server::adopt_unix_fd(int fd) {
  return impl_->adopt_unix_fd(fd);
}
Status Server::adopt_tcp_fd(int fd, bool allow_remote) {
  return impl_->adopt_tcp_fd(fd, allow_remote);
}
Status Server::listen_tcp(const std::string& host_port, bool allow_remote) {
  return impl_->listen_tcp(host_port, allow_remote);
}
void Server::set_host(std::shared_ptr<ModelHost> host) {
  impl_->set_host(std::move(host));
}
void Server::set_puller(std::shared_ptr<ModelPuller> puller) {
  impl_->set_puller(std::move(puller));
}
void Server::set_upstreams(std::shared_ptr<UpstreamForwarder> upstreams) {
  impl_->set_upstreams(std::move(upstreams));
}
void Server::run() {
  impl_->run();
}
void Server::stop_accepting() {
  impl_->stop_accepting();
}
void Server::stop() {
  impl_->stop();
}
int64_t Server::open_connections() const {
  return impl_->open_connections();
}

int64_t Server::idle_connections() const {
  return impl_->idle_connections();
}

}  // namespace hearth::ipc
