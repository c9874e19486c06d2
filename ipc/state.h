// What the Server and its connections share. No Asio here: connections register a
// `close` function that posts to their own executor.
//
// Thread-safety: every member may be used from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "ipc/metrics.h"
#include "ipc/model_host.h"
#include "ipc/model_puller.h"
#include "ipc/options.h"
#include "ipc/upstream.h"

namespace hearth::ipc {

// Lets the engine thread post wake-ups to connections only while the io_context lives:
// closed (under the mutex) before the Server destroys it.
struct PostGate {
  std::mutex mutex;
  bool open = true;
};

class ServerState {
 public:
  explicit ServerState(ServerOptions options) : options(std::move(options)) {}

  const ServerOptions options;
  ResponseCounters responses;
  std::atomic<bool> accepting{true};  // false after stop_accepting() or stop()
  std::atomic<bool> stopping{false};  // stop() was called
  std::atomic<int64_t> open_connections{0};
  const std::shared_ptr<PostGate> gate = std::make_shared<PostGate>();

  std::shared_ptr<ModelHost> host() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return host_;
  }
  void set_host(std::shared_ptr<ModelHost> host) {
    std::lock_guard<std::mutex> lock(mutex_);
    host_ = std::move(host);
  }
  std::shared_ptr<ModelPuller> puller() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return puller_;
  }
  void set_puller(std::shared_ptr<ModelPuller> puller) {
    std::lock_guard<std::mutex> lock(mutex_);
    puller_ = std::move(puller);
  }
  std::shared_ptr<UpstreamForwarder> upstreams() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return upstreams_;
  }
  void set_upstreams(std::shared_ptr<UpstreamForwarder> upstreams) {
    std::lock_guard<std::mutex> lock(mutex_);
    upstreams_ = std::move(upstreams);
  }

  // A connection opens: counted, and close (any thread; it must only post) is kept for
  // close_all(). Returns the id to pass to remove_connection.
  uint64_t add_connection(std::function<void()> close) {
    std::lock_guard<std::mutex> lock(mutex_);
    open_connections.fetch_add(1);
    closers_[++next_id_] = std::move(close);
    return next_id_;
  }

  // A connection waits for a request (idle: a keep-alive pause or a header not yet whole)
  // or is serving one. Only idle connections are given up when the limit is reached.
  void set_idle(uint64_t id, bool idle) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle) {
      idle_since_.erase(id);
    } else if (closers_.count(id)) {
      idle_since_.emplace(id, std::chrono::steady_clock::now());
    }
  }

  int64_t idle_connections() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(idle_since_.size());
  }

  // At the connection limit: closes the connection that has waited for a request longest,
  // so that a new client (a /health probe, a request) is served instead of refused while
  // idle or half-open connections fill every place. False when every connection is busy.
  bool close_longest_idle() {
    std::function<void()> close;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto oldest = idle_since_.end();
      for (auto it = idle_since_.begin(); it != idle_since_.end(); ++it)
        if (oldest == idle_since_.end() || it->second < oldest->second) oldest = it;
      if (oldest == idle_since_.end()) return false;
      close = closers_.at(oldest->first);
      idle_since_.erase(oldest);
    }
    close();
    return true;
  }

  // A connection ended. The last one to end after stop() calls on_idle.
  void remove_connection(uint64_t id) {
    std::function<void()> idle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closers_.erase(id);
      idle_since_.erase(id);
      if (open_connections.fetch_sub(1) == 1 && stopping.load()) idle = on_idle_;
    }
    if (idle) idle();
  }

  void close_all() {
    std::map<uint64_t, std::function<void()>> closers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closers = closers_;
    }
    for (auto& [id, close] : closers) close();
  }

  // Set by the Server before serving; cleared before its io_context goes away.
  void set_on_idle(std::function<void()> on_idle) {
    std::lock_guard<std::mutex> lock(mutex_);
    on_idle_ = std::move(on_idle);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<ModelHost> host_;
  std::shared_ptr<ModelPuller> puller_;
  std::shared_ptr<UpstreamForwarder> upstreams_;
  std::map<uint64_t, std::function<void()>> closers_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> idle_since_;  // connections waiting for a request
  uint64_t next_id_ = 0;
  std::function<void()> on_idle_;
};

}  // namespace hearth::ipc
