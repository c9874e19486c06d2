// What every backend's write, read and copy promise (backends/backend.h), checked the same
// way on each: bytes arrive where they were sent, device-side copies in one call all land,
// and a range outside a buffer (overflow included), a copy that overlaps itself or a buffer
// of another backend is an error that changes nothing a check could see. And the order of
// transfers and passes, for backends that queue writes (CUDA stages them on a copy stream).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backends/backend.h"

namespace hearth::test {

inline std::vector<uint8_t> read_all(Backend& be, const Buffer& b) {
  std::vector<uint8_t> v(b.bytes());
  REQUIRE(be.read(b, 0, v.data(), v.size()).ok());
  return v;
}

// `foreign`: a buffer of another backend, which be must refuse (may be null).
inline void check_transfer_contract(Backend& be, Buffer* foreign) {
  constexpr size_t kBytes = 1024;
  std::unique_ptr<Buffer> a = std::move(*be.alloc(kBytes, BufferKind::Activations));
  std::unique_ptr<Buffer> b = std::move(*be.alloc(kBytes, BufferKind::KvCache));
  std::vector<uint8_t> pa(kBytes), pb(kBytes, 0xee);
  for (size_t i = 0; i < kBytes; ++i) pa[i] = static_cast<uint8_t>(i * 7 + 3);
  REQUIRE(be.write(*a, 0, pa.data(), kBytes).ok());
  REQUIRE(be.write(*b, 0, pb.data(), kBytes).ok());
  CHECK(read_all(be, *a) == pa);

  // Partial writes and reads at an offset.
  const std::vector<uint8_t> five{1, 2, 3, 4, 5};
  REQUIRE(be.write(*b, 1019, five.data(), five.size()).ok());
  std::vector<uint8_t> got(5);
  REQUIRE(be.read(*b, 1019, got.data(), got.size()).ok());
  CHECK(got == five);
  std::copy(five.begin(), five.end(), pb.begin() + 1019);

  // Out of range, overflowing, zero-length.
  CHECK_FALSE(be.write(*a, 1020, five.data(), five.size()).ok());
  CHECK_FALSE(be.read(*a, kBytes + 1, got.data(), 0).ok());
  CHECK_FALSE(be.read(*a, std::numeric_limits<size_t>::max() - 1, got.data(), 4).ok());
  CHECK(be.write(*a, kBytes, five.data(), 0).ok());
  CHECK(read_all(be, *a) == pa);

  // Two copies in one call: a to b, and within a.
  const BufferCopy two[] = {{a.get(), 0, b.get(), 512, 256}, {a.get(), 256, a.get(), 768, 256}};
  REQUIRE(be.copy(two).ok());
  std::copy(pa.begin(), pa.begin() + 256, pb.begin() + 512);
  std::copy(pa.begin() + 256, pa.begin() + 512, pa.begin() + 768);
  CHECK(read_all(be, *a) == pa);
  CHECK(read_all(be, *b) == pb);

  // A bad copy anywhere in the list fails the call before any copy runs.
  const BufferCopy overlapping[] = {{a.get(), 0, b.get(), 0, 16}, {a.get(), 0, a.get(), 8, 16}};
  CHECK_FALSE(be.copy(overlapping).ok());
  const BufferCopy outside[] = {{a.get(), 0, b.get(), 0, 16}, {a.get(), 1000, b.get(), 0, 100}};
  CHECK_FALSE(be.copy(outside).ok());
  const BufferCopy unnamed[] = {{nullptr, 0, b.get(), 0, 16}};
  CHECK_FALSE(be.copy(unnamed).ok());
  CHECK(read_all(be, *b) == pb);
  CHECK(be.copy({}).ok());

  if (foreign != nullptr) {
    CHECK_FALSE(be.write(*foreign, 0, five.data(), five.size()).ok());
    CHECK_FALSE(be.read(*foreign, 0, got.data(), got.size()).ok());
    const BufferCopy cross[] = {{foreign, 0, b.get(), 0, 16}};
    CHECK_FALSE(be.copy(cross).ok());
    CHECK(read_all(be, *b) == pb);
  }
}

// Writes are ordered before whatever follows them, however a backend queues them: a
// restore's many small writes land in order and the later of two to the same bytes wins;
// a write larger than any staging memory lands whole; the caller may reuse its memory as
// soon as write returns; and a read, a copy or a pass right after a write sees it - a
// pass's operations on activations and on the KV cache alike, replay after replay.
inline void check_transfer_order(Backend& be) {
  std::mt19937 rng(7);
  const auto fill = [&](std::vector<uint8_t>& v) {
    for (uint8_t& x : v) x = static_cast<uint8_t>(rng());
  };

  // One write of 40 MiB, its source overwritten as soon as write returns.
  std::vector<uint8_t> big(size_t{40} << 20), expect;
  fill(big);
  expect = big;
  std::unique_ptr<Buffer> w = std::move(*be.alloc(big.size(), BufferKind::Weights));
  REQUIRE(be.write(*w, 0, big.data(), big.size()).ok());
  std::fill(big.begin(), big.end(), uint8_t{0});
  CHECK(read_all(be, *w) == expect);
  w.reset();

  // 3,000 writes of 1 byte to 8 KiB at random offsets of a 1 MiB KV buffer, overlapping,
  // from one source vector refilled after each.
  constexpr size_t kKv = size_t{1} << 20;
  std::unique_ptr<Buffer> kv = std::move(*be.alloc(kKv, BufferKind::KvCache));
  std::vector<uint8_t> model(kKv), src(8192);
  fill(model);
  REQUIRE(be.write(*kv, 0, model.data(), kKv).ok());
  for (int i = 0; i < 3000; ++i) {
    const size_t n = 1 + rng() % src.size(), at = rng() % (kKv - n + 1);
    fill(src);
    REQUIRE(be.write(*kv, at, src.data(), n).ok());
    std::copy(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n),
              model.begin() + static_cast<std::ptrdiff_t>(at));
  }
  CHECK(read_all(be, *kv) == model);

  // A copy right after a write copies what was written.
  std::unique_ptr<Buffer> act = std::move(*be.alloc(kKv, BufferKind::Activations));
  fill(src);
  REQUIRE(be.write(*kv, 4096, src.data(), src.size()).ok());
  const BufferCopy c[] = {{kv.get(), 4096, act.get(), 0, src.size()}};
  REQUIRE(be.copy(c).ok());
  std::vector<uint8_t> got(src.size());
  REQUIRE(be.read(*act, 0, got.data(), got.size()).ok());
  CHECK(got == src);

  // Passes of two Scale ops, one reading activations and one reading the KV cache, each
  // after fresh writes to both.
  constexpr int64_t kNe = 256, kRows = 4;
  const size_t stride = kNe * sizeof(float), half = stride * kRows;
  const auto view = [&](Buffer* b, size_t offset) { return Tensor{b, offset, DType::F32, kNe, kRows, stride}; };
  Graph g;
  for (const auto& [from, to] : {std::pair{view(act.get(), 0), view(act.get(), half)},
                                 std::pair{view(kv.get(), 0), view(act.get(), 2 * half)}}) {
    Op op(OpKind::Scale);
    op.src0 = from;
    op.dst = to;
    op.f0 = 2.0f;
    g.ops.push_back(op);
  }
  std::vector<float> a(kNe * kRows), k(kNe * kRows), out(kNe * kRows);
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(pass * 10000 + static_cast<int>(i));
      k[i] = -a[i];
    }
    REQUIRE(be.write(*act, 0, a.data(), half).ok());
    REQUIRE(be.write(*kv, 0, k.data(), half).ok());
    REQUIRE(be.execute(g).ok());
    REQUIRE(be.read(*act, half, out.data(), half).ok());
    for (size_t i = 0; i < a.size(); ++i) a[i] *= 2.0f;
    CHECK(out == a);
    REQUIRE(be.read(*act, 2 * half, out.data(), half).ok());
    for (size_t i = 0; i < k.size(); ++i) k[i] *= 2.0f;
    CHECK(out == k);
  }
}

}  // namespace hearth::test
