// A Backend that forwards every call to another one and fails the calls a test chooses:
// the Nth write, read, copy or execute from now on, or every one of a kind — the way
// storage::FileOps lets the cache tests fail the Nth file call. A failed transfer leaves
// garbage in its destination (as a transfer that broke halfway would), so a caller that
// used the destination anyway would give a wrong answer, not the right one by luck.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace hearth::test {

class FaultyBackend final : public Backend {
 public:
  enum Call { Write, Read, Copy, Execute, kCalls };

  explicit FaultyBackend(Backend& inner) : inner_(inner) {}

  // The nth call of this kind from now on (1: the next one) fails, once.
  void fail_nth(Call c, int n) { fail_at_[c] = calls_[c] + n; }
  // Every call of this kind fails while on.
  void fail_all(Call c, bool on) { fail_all_[c] = on; }
  void heal() {
    fail_at_.fill(0);
    fail_all_.fill(false);
  }
  int calls(Call c) const { return calls_[c]; }
  int failures() const { return failures_; }

  DeviceInfo info() const override { return inner_.info(); }
  Result<std::unique_ptr<Buffer>> alloc(size_t bytes, BufferKind kind) override { return inner_.alloc(bytes, kind); }
  Result<std::unique_ptr<Buffer>> upload_weights(const void* host, size_t bytes) override {
    return inner_.upload_weights(host, bytes);
  }
  const DeviceCaps& caps() const override { return inner_.caps(); }

  Status write(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    if (Status st = tick(Write, "write"); !st) {
      (void)inner_.write(dst, offset, garbage(bytes), bytes);
      return st;
    }
    return inner_.write(dst, offset, src, bytes);
  }
  Status read(const Buffer& src, size_t offset, void* dst, size_t bytes) override {
    if (Status st = tick(Read, "read"); !st) {
      std::memset(dst, kGarbage, bytes);
      return st;
    }
    return inner_.read(src, offset, dst, bytes);
  }
  Status copy(std::span<const BufferCopy> copies) override {
    if (Status st = tick(Copy, "copy"); !st) {
      for (const BufferCopy& c : copies) (void)inner_.write(*c.dst, c.dst_offset, garbage(c.bytes), c.bytes);
      return st;
    }
    return inner_.copy(copies);
  }
  Status execute(const Graph& graph) override {
    if (Status st = tick(Execute, "execute"); !st) return st;
    return inner_.execute(graph);
  }

 private:
  // 0x5a5a as f16 is about 203, as f32 about 1.5e16: attention over such keys or values
  // is visibly wrong.
  static constexpr int kGarbage = 0x5a;
  const void* garbage(size_t bytes) {
    garbage_.assign(bytes, static_cast<uint8_t>(kGarbage));
    return garbage_.data();
  }

  Status tick(Call c, const char* name) {
    ++calls_[c];
    if (!fail_all_[c] && calls_[c] != fail_at_[c]) return {};
    ++failures_;
    return make_error(std::string("injected fault: ") + name + " #" + std::to_string(calls_[c]) + " failed");
  }

  Backend& inner_;
  std::array<int, kCalls> calls_{};
  std::array<int, kCalls> fail_at_{};
  std::array<bool, kCalls> fail_all_{};
  int failures_ = 0;
  std::vector<uint8_t> garbage_;
};

}  // namespace hearth::test
