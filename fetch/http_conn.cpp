#include "fetch/http_conn.h"

#include <sys/socket.h>

#include <cerrno>
#include <vector>

namespace hearth::fetch::detail {

int Connection::native_socket() {
  if (unix_stream) return unix_stream->socket().native_handle();
  if (tcp) return tcp->socket().native_handle();
  if (tls) return boost::beast::get_lowest_layer(*tls).socket().native_handle();
  return -1;
}

bool Connection::looks_alive() {
  const int fd = native_socket();
  if (fd < 0) return false;
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;  // the peer closed it
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
  // Bytes waiting: on plain HTTP an answer nobody asked for (the connection is out of step);
  // on TLS possibly a post-handshake message (a TLS 1.3 session ticket), which the next read
  // consumes. A close_notify there is caught as a stale connection and retried.
  return tls != nullptr;
}

// Never destroyed: at exit OpenSSL may already have cleaned up (its atexit handler can run
// before a static's destructor), and freeing a kept TLS connection then is a use after free.
// The process's end closes the descriptors.
ConnectionPool& ConnectionPool::instance() {
  static ConnectionPool* pool = new ConnectionPool;
  return *pool;
}

void ConnectionPool::prune_locked(Clock::time_point now) {
  for (auto it = idle_.begin(); it != idle_.end();) {
    auto& list = it->second;
    std::erase_if(list, [&](const std::unique_ptr<Connection>& c) { return c->idle_until <= now; });
    it = list.empty() ? idle_.erase(it) : std::next(it);
  }
}

std::unique_ptr<Connection> ConnectionPool::take(const std::string& key) {
  std::vector<std::unique_ptr<Connection>> dead;  // closed outside the lock
  std::unique_ptr<Connection> found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    prune_locked(Clock::now());
    auto it = idle_.find(key);
    while (it != idle_.end() && !it->second.empty() && !found) {
      std::unique_ptr<Connection> c = std::move(it->second.back());
      it->second.pop_back();
      if (c->looks_alive())
        found = std::move(c);
      else
        dead.push_back(std::move(c));
    }
    if (it != idle_.end() && it->second.empty()) idle_.erase(it);
  }
  if (found) found->reused = true;
  return found;
}

void ConnectionPool::put(const std::string& key, std::unique_ptr<Connection> c, size_t max_idle,
                         std::chrono::milliseconds idle_limit) {
  const Clock::time_point now = Clock::now();
  c->idle_until = now + idle_limit;
  std::lock_guard<std::mutex> lock(mutex_);
  prune_locked(now);
  size_t total = 0;
  for (const auto& [_, list] : idle_) total += list.size();
  auto& list = idle_[key];
  if (list.size() < max_idle && total < kMaxIdleTotal && idle_limit.count() > 0) list.push_back(std::move(c));
  if (list.empty()) idle_.erase(key);
}

void ConnectionPool::drop(const std::string& key) {
  std::deque<std::unique_ptr<Connection>> closing;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = idle_.find(key); it != idle_.end()) {
    closing.swap(it->second);
    idle_.erase(it);
  }
}

void ConnectionPool::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.clear();
}

size_t ConnectionPool::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const auto& [_, list] : idle_) total += list.size();
  return total;
}

}  // namespace hearth::fetch::detail
