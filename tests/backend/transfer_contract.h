// What every backend's write, read and copy promise (backends/backend.h), checked the same
// way on each: bytes arrive where they were sent, device-side copies in one call all land,
// and a range outside a buffer (overflow included), a copy that overlaps itself or a buffer
// of another backend is an error that changes nothing a check could see.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <memory>
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

}  // namespace hearth::test
