// libFuzzer entry point for the GGUF reader (HEARTH_FUZZ; scripts/fuzz builds and runs it):
// any bytes either fail to load with an error or give a File whose every value can be read
// and whose every tensor lies inside the file.
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./gguf_fuzz writes small valid files (gguf_test_util.h's
// small_file, GGUF versions 2 and 3, and one with every value type) into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/gguf/gguf.h"
#include "fuzz_seeds.h"
#include "gguf_test_util.h"

namespace {

void write_seeds(const std::string& dir) {
  using namespace hearth::gguf;
  std::filesystem::create_directories(dir);
  Writer every = test::small_writer();
  every.set_u8("k.u8", 200);
  every.set_i8("k.i8", -100);
  every.set_u16("k.u16", 60000);
  every.set_i16("k.i16", -30000);
  every.set_u64("k.u64", 1ull << 40);
  every.set_i64("k.i64", -(1ll << 40));
  every.set_f64("k.f64", 0.5);
  every.set_f32_array("k.f32s", {1.5f, -2.0f});
  every.set_u32_array("k.u32s", {7, 8, 9});
  const std::pair<const char*, std::vector<uint8_t>> seeds[] = {
      {"small-v3", test::small_file(3)}, {"small-v2", test::small_file(2)}, {"every-type", every.serialize()}};
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "gguf_fuzz: cannot write %s/%s\n", dir.c_str(), name);
      std::exit(1);
    }
  }
  std::fprintf(stderr, "gguf_fuzz: wrote 3 seeds to %s\n", dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth::gguf;
  auto r = File::from_memory(data, size);
  if (!r.ok()) return 0;
  const File& f = **r;
  hearth::gguf::test::read_every_value(f);
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : f.tensors()) {
    if (t.data < f.base() || t.data + t.n_bytes > f.base() + f.size()) __builtin_trap();
    if (t.n_bytes == 0) continue;
    sink = sink ^ t.data[0] ^ t.data[t.n_bytes - 1];
  }
  return 0;
}
