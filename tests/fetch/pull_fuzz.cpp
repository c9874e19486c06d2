// libFuzzer entry point for what `hearth pull` reads from outside before it trusts a byte
// (HEARTH_FUZZ; scripts/fuzz builds and runs it). Byte 0 picks the parser, the rest is its input:
//  0: the Hub's tree listing, then the choice of a model in it for a few names: files
//     chosen are files of the listing, parts in order;
//  1: a GGUF header read from a file's first bytes: a prefix never finds another
//     architecture than the whole, and once found, every longer prefix finds the same;
//  2: the layout of a whole GGUF header: ranges inside the input, in order, not overlapping;
//  3: a model name (hf.co/..., URLs): parsed or refused, never both a file and a quantization.
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./pull_fuzz writes a few inputs into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/writer.h"
#include "fetch/gguf_head.h"
#include "fetch/hub.h"
#include "fuzz_seeds.h"

namespace {

using namespace hearth::fetch;

void check(bool ok) {
  if (!ok) std::abort();
}

void listing(std::string_view text) {
  auto files = parse_tree_listing(text);
  if (!files) return;
  for (const char* n : {"hf.co/o/r", "hf.co/o/r:Q8_0", "hf.co/o/r:q4_k_m", "hf.co/o/r/a/b.gguf"}) {
    auto name = parse_hub_name(n);
    check(name.ok());
    auto model = choose_model(*name, *files);
    if (!model) continue;
    for (const HubFile& part : model->files) {
      bool listed = false;
      for (const HubFile& f : *files) listed = listed || f.path == part.path;
      check(listed);
    }
  }
}

void head(const uint8_t* data, size_t n) {
  const GgufHead whole = read_gguf_head(data, n);
  for (size_t k : {n / 4, n / 2, n - n / 8}) {
    const GgufHead part = read_gguf_head(data, k);
    if (part.state == GgufHead::State::kFound) {
      check(whole.state == GgufHead::State::kFound && whole.arch == part.arch);
    }
    if (whole.state == GgufHead::State::kNeedMore) check(part.state != GgufHead::State::kFound);
  }
}

void layout(const uint8_t* data, size_t n) {
  auto l = gguf_layout(data, n);
  if (!l) return;
  size_t at = 0;
  for (const auto* ranges : {&l->kvs, &l->tensors}) {
    for (const GgufLayout::Range& r : *ranges) {
      check(r.begin >= at && r.begin <= r.end && r.end <= n);
      at = r.end;
    }
  }
}

void name(std::string_view text) {
  auto h = parse_hub_name(text);
  if (!h) return;
  check(!h->repo.empty());
  check(h->file.empty() || !h->quant_given);
  (void)quant_of(text);
}

void write_seeds(const std::filesystem::path& dir) {
  auto put = [&](const std::string& file, uint8_t pick, const std::string& body) {
    std::ofstream(dir / file, std::ios::binary) << static_cast<char>(pick) << body;
  };
  put("listing", 0,
      R"([{"type":"directory","path":"a"},{"type":"file","path":"m-Q8_0.gguf","size":10,)"
      R"("lfs":{"oid":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","size":10}},)"
      R"({"type":"file","path":"m-Q4_K_M-00001-of-00002.gguf","size":5},{"type":"file","path":"m-Q4_K_M-00002-of-00002.gguf","size":5}])");
  hearth::gguf::Writer w;
  w.set_string("general.name", "seed");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  w.set_string("general.architecture", "qwen2");
  const std::vector<uint8_t> bytes = w.serialize();
  const std::string header(bytes.begin(), bytes.end());
  put("head", 1, header);
  put("layout", 2, header);
  put("name", 3, "hf.co/Qwen/Qwen3-8B-GGUF:Q4_K_M");
  put("url", 3, "https://huggingface.co/o/r/resolve/main/x/y-Q8_0.gguf");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  const std::string_view text(reinterpret_cast<const char*>(body), n);
  switch (data[0] % 4) {
    case 0:
      listing(text);
      break;
    case 1:
      head(body, n);
      break;
    case 2:
      layout(body, n);
      break;
    default:
      name(text);
      break;
  }
  return 0;
}
