// Cancellation of the request running on a handle, from any thread or a signal handler.
//
// The thread running a request registers its connected socket's descriptor; cancel() marks
// the request cancelled and shutdown(2)s that descriptor, so the blocking read or write
// returns at once. Only lock-free atomics and shutdown(2) are used, so cancel() is
// async-signal-safe. When the request ends, the running thread unregisters the descriptor
// and waits until no cancel() is between loading the descriptor and shutting it down, so a
// cancel can never shut down a descriptor number the process has reused for something else,
// nor the kept-alive connection of a later request. A cancel that loaded the descriptor just
// before it was withdrawn may still have shut it down: requested() is then true, and the
// connection must be closed rather than kept. Waits that have no descriptor yet (the connect
// retry's) poll requested().
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <thread>

namespace hearth::client {

class CancelState {
 public:
  static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);

  // Any thread, any time (also inside a signal handler).
  void cancel() noexcept {
    requested_.store(true);
    in_cancel_.fetch_add(1);
    int fd = fd_.load();
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
    in_cancel_.fetch_sub(1);
  }

  // The requesting thread: at the start of each request (a cancel before it has no effect).
  void begin() noexcept { requested_.store(false); }
  bool requested() const noexcept { return requested_.load(); }

  // The requesting thread: the connected socket, and its withdrawal when the request ends.
  void register_fd(int fd) noexcept { fd_.store(fd); }
  void unregister_fd() noexcept {
    fd_.store(-1);
    while (in_cancel_.load() != 0) std::this_thread::yield();
  }

 private:
  std::atomic<bool> requested_{false};
  std::atomic<int> fd_{-1};
  std::atomic<int> in_cancel_{0};
};

}  // namespace hearth::client
