#include "fetch/gguf_head.h"

#include <catch2/catch.hpp>

#include "engine/gguf/writer.h"

using namespace hearth;
using namespace hearth::fetch;

namespace {

// A header with arrays and strings of every kind before general.architecture, as a
// converter that wrote the tokenizer first would.
std::vector<uint8_t> header_with_arch_late() {
  gguf::Writer w;
  w.set_string("general.name", "late");
  w.set_u32("x.u32", 7);
  w.set_f64("x.f64", 1.5);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bb", "", "dddd"});
  w.set_f32_array("tokenizer.ggml.scores", {1, 2, 3, 4});
  w.set_bool("x.bool", true);
  w.set_string("general.architecture", "qwen3moe");
  w.set_u64("after", 1);
  return w.serialize();
}

}  // namespace

TEST_CASE("the architecture is read from a prefix, and every shorter prefix asks for more", "[fetch]") {
  const std::vector<uint8_t> bytes = header_with_arch_late();
  size_t first_found = 0;
  for (size_t n = 0; n <= bytes.size(); ++n) {
    GgufHead h = read_gguf_head(bytes.data(), n);
    REQUIRE(h.state != GgufHead::State::kBad);
    if (h.state == GgufHead::State::kFound) {
      CHECK(h.arch == "qwen3moe");
      if (!first_found) first_found = n;
    } else {
      REQUIRE(first_found == 0);  // once found, every longer prefix finds it too
    }
  }
  REQUIRE(first_found > 0);
  CHECK(first_found < bytes.size());  // the bytes after the key are not needed
}

TEST_CASE("a damaged or foreign header is an error, not a wait", "[fetch]") {
  const std::string not_gguf = "<html>Access denied</html>";
  GgufHead h = read_gguf_head(reinterpret_cast<const uint8_t*>(not_gguf.data()), not_gguf.size());
  CHECK(h.state == GgufHead::State::kBad);
  CHECK(h.error.find("not a GGUF") != std::string::npos);

  std::vector<uint8_t> bytes = header_with_arch_late();
  bytes[4] = 9;  // version 9
  CHECK(read_gguf_head(bytes.data(), bytes.size()).state == GgufHead::State::kBad);

  // general.name's length (after magic, version, counts and the key) made huge.
  bytes = header_with_arch_late();
  const size_t name_len_at = 4 + 4 + 8 + 8 + 8 + std::string("general.name").size() + 4;
  bytes[name_len_at + 7] = 0x7f;
  GgufHead huge = read_gguf_head(bytes.data(), bytes.size());
  CHECK(huge.state == GgufHead::State::kBad);
  CHECK(huge.error.find("damaged") != std::string::npos);

  gguf::Writer w;
  w.set_string("general.name", "no arch");
  const std::vector<uint8_t> none = w.serialize();
  GgufHead missing = read_gguf_head(none.data(), none.size());
  CHECK(missing.state == GgufHead::State::kBad);
  CHECK(missing.error.find("no general.architecture") != std::string::npos);
}
