// model_fingerprint(): XXH3-128 of the file's contents, remembered by path, size and mtime.
#include <catch2/catch.hpp>
#include <random>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "store_test_util.h"

using namespace hearth::storage;
using namespace hearth::storage::test;

namespace {

std::string reference_hex(const std::vector<uint8_t>& data) {
  const XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return buf;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

void set_mtime(const fs::path& p, long seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), times, 0) == 0);
}

}  // namespace

TEST_CASE("prompt cache: the fingerprint is XXH3-128 of the contents, remembered until the file changes", "[storage]") {
  TempDir tmp;
  const fs::path cache = tmp / "cache";
  const fs::path model = tmp / "model.gguf";
  auto data = random_bytes((size_t{9} << 20) + 123, 1);  // more than one 8 MiB read block
  write_bytes(model.string(), data);
  set_mtime(model, 1700000000);

  const uint64_t hashed0 = model_fingerprint_files_hashed();
  auto fp = model_fingerprint(cache, model);
  REQUIRE(fp);
  CHECK(*fp == reference_hex(data));
  CHECK(fp->size() == 32);
  CHECK(model_fingerprint_files_hashed() == hashed0 + 1);

  // Remembered: the same answer without reading the file again (also by a relative path).
  auto again = model_fingerprint(cache, model);
  REQUIRE(again);
  CHECK(*again == *fp);
  CHECK(model_fingerprint_files_hashed() == hashed0 + 1);

  // Same size, new contents and mtime: hashed again.
  data[12345] ^= 1;
  write_bytes(model.string(), data);
  set_mtime(model, 1700000100);
  auto changed = model_fingerprint(cache, model);
  REQUIRE(changed);
  CHECK(*changed != *fp);
  CHECK(*changed == reference_hex(data));
  CHECK(model_fingerprint_files_hashed() == hashed0 + 2);

  // The same contents elsewhere: the same fingerprint (it names contents, not paths).
  const fs::path copy = tmp / "copy.gguf";
  fs::copy_file(model, copy);
  auto copied = model_fingerprint(cache, copy);
  REQUIRE(copied);
  CHECK(*copied == *changed);

  // A store opened on the same directory afterwards is happy with the shared index.
  KvFormat f = small_format();
  f.model_fingerprint = *fp;
  auto s = open_store(cache, f);
  REQUIRE(s);
  REQUIRE(s->check_consistency());
}

TEST_CASE("prompt cache: an unusable cache directory still gives the fingerprint", "[storage]") {
  TempDir tmp;
  const fs::path model = tmp / "m.bin";
  const auto data = random_bytes(1000, 2);
  write_bytes(model.string(), data);
  write_bytes((tmp / "not-a-dir").string(), {1});
  auto fp = model_fingerprint(tmp / "not-a-dir" / "cache", model);
  REQUIRE(fp);
  CHECK(*fp == reference_hex(data));
  auto empty = model_fingerprint(tmp / "cache", tmp / "empty");
  CHECK_FALSE(empty);  // a missing model file is an error
  write_bytes((tmp / "empty").string(), {});
  auto zero = model_fingerprint(tmp / "cache", tmp / "empty");
  REQUIRE(zero);
  CHECK(*zero == reference_hex({}));
}
