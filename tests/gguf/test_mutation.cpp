// Deterministic mutation fuzzing: random damage to a small valid file must give either a
// clean error or a File whose every tensor lies inside the file. Run it under ASan/UBSan
// (-DHEARTH_SANITIZE=ON) to catch out-of-bounds reads the checks below cannot see.
#include <catch2/catch.hpp>
#include <random>

#include "gguf_test_util.h"

using namespace hearth;
using namespace hearth::gguf;
using namespace hearth::gguf::test;

namespace {

// Reads everything a loaded File exposes, so getters are exercised on odd but accepted files.
void touch_everything(const File& f) {
  read_every_value(f);
  for (const std::string& k : f.keys()) REQUIRE(f.has(k));
}

}  // namespace

TEST_CASE("20000 random mutations of a valid file each load cleanly or fail with an error", "[gguf][fuzz]") {
  const std::vector<uint8_t> original = small_file();
  std::mt19937_64 rng(20240601);
  auto below = [&](uint64_t n) { return n == 0 ? 0 : rng() % n; };
  const uint64_t interesting[] = {
      0, 1,  0x7f, 0x80, 0xff, 0xffff, 0xffffffffull, 1ull << 31, 1ull << 32, 1ull << 60, ~0ull, 0x7fffffffffffffffull,
      5, 32, 4096};
  int n_ok = 0, n_err = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> b = original;
    int n_mutations = 1 + static_cast<int>(below(4));
    for (int m = 0; m < n_mutations; ++m) {
      switch (below(6)) {
        case 0:  // flip a bit
          if (!b.empty()) b[below(b.size())] ^= static_cast<uint8_t>(1u << below(8));
          break;
        case 1:  // random byte
          if (!b.empty()) b[below(b.size())] = static_cast<uint8_t>(rng());
          break;
        case 2: {  // interesting 1/2/4/8-byte value
          size_t width = size_t{1} << below(4);
          if (b.size() < width) break;
          uint64_t v = interesting[below(std::size(interesting))];
          std::memcpy(b.data() + below(b.size() - width + 1), &v, width);
          break;
        }
        case 3: {  // insert bytes
          size_t at = below(b.size() + 1);
          size_t n = 1 + below(16);
          std::vector<uint8_t> ins(n);
          for (auto& x : ins) x = static_cast<uint8_t>(rng());
          b.insert(b.begin() + static_cast<long>(at), ins.begin(), ins.end());
          break;
        }
        case 4:  // truncate
          b.resize(below(b.size() + 1));
          break;
        case 5: {  // erase a range
          if (b.empty()) break;
          size_t at = below(b.size());
          size_t n = 1 + below(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
          break;
        }
      }
    }
    auto r = File::from_memory(b.data(), b.size());
    if (!r.ok()) {
      ++n_err;
      if (r.error().message.find("byte") == std::string::npos) FAIL("no byte offset in: " << r.error().message);
      continue;
    }
    ++n_ok;
    const File& f = **r;
    for (const TensorInfo& t : f.tensors()) {
      if (!(t.data >= f.base() && t.n_bytes <= f.size() && t.data + t.n_bytes <= f.base() + f.size()))
        FAIL("iteration " << iter << ": tensor '" << t.name << "' lies outside the file");
    }
    touch_everything(f);
  }
  INFO(n_ok << " loaded, " << n_err << " rejected");
  CHECK(n_ok > 0);
  CHECK(n_err > 0);
}
