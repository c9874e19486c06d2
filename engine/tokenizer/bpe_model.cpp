// Byte-level BPE (tokenizer.ggml.model = "gpt2": Qwen 2.5, SmolLM2, Llama 3), reproducing
// llama.cpp's BPE tokenizer on each raw fragment:
//   1. pre-tokenize into words by the regexes of tokenizer.ggml.pre (bpe_pretokenizer.h);
//   2. each byte of a word is one symbol: the token whose text is the byte's character in
//      GPT-2's byte<->unicode table (printable bytes stand for themselves, the other 68 for
//      U+0100.. in byte order, so ' ' is 'Ġ' U+0120);
//   3. merge adjacent symbols by rank (tokenizer.ggml.merges, rank = index), lowest rank
//      first and, among equal ranks, the leftmost pair — until no adjacent pair is a merge.
// With ignore_merges (Llama 3) a word that is itself a token is that token.
#include <algorithm>
#include <array>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/bpe_pretokenizer.h"
#include "engine/tokenizer/vocab_model.h"

namespace hearth::tok {
namespace {

// GPT-2's bytes_to_unicode: byte -> code point.
std::array<uint32_t, 256> byte_to_codepoint() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cp[b] = printable ? b : next++;
  }
  return cp;
}

std::string utf8_of(uint32_t cp) {  // cp < 0x800 here
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Merge {
  int32_t rank;
  int32_t id;  // the merged token
};

// (left id, right id) -> Merge: open addressing with linear probing in a power-of-two table
// at most half full. The merge lookup is the encoder's innermost step; std::unordered_map
// spent ~30% of encoding time there (a modulo and a pointer chase per probe).
class PairTable {
 public:
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Slot{kEmpty, {}});
    mask_ = cap - 1;
  }
  // Keeps the first value of a repeated key. reserve() must have room for every key.
  void insert(uint64_t key, Merge m) {
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return;
      if (slots_[i].key == kEmpty) {
        slots_[i] = {key, m};
        return;
      }
    }
  }
  const Merge* find(uint64_t key) const {
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // ids are >= 0, so no pair has this key
  struct Slot {
    uint64_t key;
    Merge value;
  };
  static size_t hash(uint64_t k) {  // murmur3's 64-bit finalizer
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

class BpeModel final : public VocabModel {
 public:
  BpeModel(const Vocab& vocab, PreTokenizerSpec spec) : vocab_(vocab), spec_(std::move(spec)) {}

  Status load(const gguf::File& f) {
    auto pre = PreTokenizer::create(spec_.regexes);
    if (!pre.ok()) return pre.error();
    pre_ = std::move(*pre);

    const auto cps = byte_to_codepoint();
    std::fill(std::begin(byte_of_cp_), std::end(byte_of_cp_), -1);
    for (int b = 0; b < 256; ++b) {
      byte_char_[b] = utf8_of(cps[b]);
      byte_token_[b] = vocab_.find(byte_char_[b]);
      byte_of_cp_[cps[b]] = static_cast<int16_t>(b);
    }

    if (!f.has("tokenizer.ggml.merges")) {
      return make_error("tokenizer: a gpt2 (byte-level BPE) vocabulary needs tokenizer.ggml.merges");
    }
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return make_error("tokenizer: " + merges.error().message);
    merges_.reserve(merges->size());  // sized once, before any insert
    std::string joined;
    for (size_t rank = 0; rank < merges->size(); ++rank) {
      std::string_view m = (*merges)[rank];
      auto where = [&] { return "tokenizer: merge " + std::to_string(rank) + " '" + std::string(m) + "'"; };
      // As llama.cpp splits it: at the first space after the first byte.
      const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
      if (sp == std::string_view::npos || sp + 1 >= m.size()) {
        return make_error(where() + " is not two tokens separated by a space" +
                          " (tokenizer.ggml.merges is malformed or truncated)");
      }
      std::string_view left = m.substr(0, sp), right = m.substr(sp + 1);
      joined.assign(left).append(right);
      const int32_t l = vocab_.find(left), r = vocab_.find(right), merged = vocab_.find(joined);
      if (l < 0 || r < 0 || merged < 0) {
        const std::string missing(l < 0 ? left : r < 0 ? right : std::string_view(joined));
        return make_error(where() + " needs the token '" + missing +
                          "', which is not in the vocabulary (tokenizer.ggml.merges does not"
                          " belong to tokenizer.ggml.tokens, or is truncated)");
      }
      // A repeated pair keeps its first (lowest) rank, as in llama.cpp.
      merges_.insert(pair_key(l, r), Merge{static_cast<int32_t>(rank), merged});
    }
    return {};
  }

  void encode_raw(std::string_view text, bool /*after_special*/, std::vector<int32_t>& out) const override {
    std::string normalized;
    std::vector<size_t> ends;
    pre_->split(text, normalized, ends);
    Scratch s;
    size_t start = 0;
    for (size_t end : ends) {
      std::string_view word(normalized.data() + start, end - start);
      start = end;
      if (spec_.ignore_merges && word.size() > 1) {
        std::string mapped;
        for (unsigned char c : word) mapped += byte_char_[c];
        if (int32_t id = vocab_.find(mapped); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      merge_word(word, s, out);
    }
  }

  std::string normal_bytes(int32_t id) const override {
    const std::string& p = vocab_.pieces[static_cast<size_t>(id)];
    std::string out;
    out.reserve(p.size());
    for (size_t i = 0; i < p.size();) {
      const auto b = static_cast<uint8_t>(p[i]);
      // Every character of the table is 1 or 2 bytes of UTF-8 (U+0021..U+0143).
      if (b < 0x80 && byte_of_cp_[b] >= 0) {
        out += static_cast<char>(byte_of_cp_[b]);
        i += 1;
        continue;
      }
      if ((b & 0xE0) == 0xC0 && i + 1 < p.size()) {
        const uint32_t cp = ((b & 0x1Fu) << 6) | (p[i + 1] & 0x3F);
        if (cp < kTableSize && byte_of_cp_[cp] >= 0) {
          out += static_cast<char>(byte_of_cp_[cp]);
          i += 2;
          continue;
        }
      }
      out += p[i++];  // not from the table (a hand-added token): the text as written
    }
    return out;
  }

  bool default_add_bos() const override { return spec_.add_bos; }

 private:
  struct Symbol {
    int32_t id;    // token id; -1 for a byte whose character is not in the vocabulary
    int32_t prev;  // neighbours in the word, -1 at the ends
    int32_t next;
    uint8_t byte;  // the first byte (for ids of -1)
    bool alive;
  };
  struct Candidate {  // a mergeable adjacent pair, as it was when found
    int32_t rank, left, right, left_id, right_id, merged;
    bool operator<(const Candidate& o) const {  // heap order: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  struct Scratch {  // reused across the words of one fragment
    std::vector<Symbol> syms;
    std::vector<Candidate> heap;
  };
  static constexpr uint32_t kTableSize = 0x144;

  void push_pair(Scratch& s, int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return;
    const int32_t a = s.syms[left].id, b = s.syms[right].id;
    if (a < 0 || b < 0) return;
    const Merge* m = merges_.find(pair_key(a, b));
    if (!m) return;
    s.heap.push_back({m->rank, left, right, a, b, m->id});
    std::push_heap(s.heap.begin(), s.heap.end());
  }

  void merge_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const {
    const auto n = static_cast<int32_t>(word.size());
    if (n == 0) return;  // the pre-tokenizer makes no empty words; nothing to do if it did
    if (n == 1) {
      emit(static_cast<uint8_t>(word[0]), out);
      return;
    }
    s.syms.clear();
    s.heap.clear();
    for (int32_t i = 0; i < n; ++i) {
      const auto b = static_cast<uint8_t>(word[static_cast<size_t>(i)]);
      s.syms.push_back({byte_token_[b], i - 1, i + 1 < n ? i + 1 : -1, b, true});
    }
    for (int32_t i = 0; i + 1 < n; ++i) push_pair(s, i, i + 1);
    while (!s.heap.empty()) {
      std::pop_heap(s.heap.begin(), s.heap.end());
      const Candidate c = s.heap.back();
      s.heap.pop_back();
      Symbol& l = s.syms[c.left];
      Symbol& r = s.syms[c.right];
      // Stale when either side has merged since: then its id (or liveness) changed.
      if (!l.alive || !r.alive || l.id != c.left_id || r.id != c.right_id || l.next != c.right) {
        continue;
      }
      l.id = c.merged;
      r.alive = false;
      l.next = r.next;
      if (r.next >= 0) s.syms[r.next].prev = c.left;
      push_pair(s, l.prev, c.left);
      push_pair(s, c.left, l.next);
    }
    for (int32_t i = 0; i >= 0; i = s.syms[i].next) {
      if (s.syms[i].id >= 0) {
        out.push_back(s.syms[i].id);
      } else {
        emit(s.syms[i].byte, out);
      }
    }
  }

  // One byte as a token. Where the vocabulary lacks the byte's character, llama.cpp looks up
  // each byte of that character's UTF-8 as a one-byte token and drops what it cannot find.
  void emit(uint8_t b, std::vector<int32_t>& out) const {
    if (byte_token_[b] >= 0) {
      out.push_back(byte_token_[b]);
      return;
    }
    for (char c : byte_char_[b]) {
      if (int32_t id = vocab_.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
    }
  }

  const Vocab& vocab_;
  PreTokenizerSpec spec_;
  std::unique_ptr<PreTokenizer> pre_;
  PairTable merges_;                // (left id, right id) -> rank, merged id
  std::string byte_char_[256];      // byte -> its character's UTF-8
  int32_t byte_token_[256];         // byte -> id of that character, or -1
  int16_t byte_of_cp_[kTableSize];  // table code point -> byte, or -1
};

}  // namespace

Result<std::unique_ptr<VocabModel>> make_bpe_model(const gguf::File& f, const Vocab& vocab) {
  std::string pre;
  if (f.has("tokenizer.ggml.pre")) {
    auto p = f.get_string("tokenizer.ggml.pre");
    if (!p.ok()) return make_error("tokenizer: " + p.error().message);
    pre = *p;
  }
  auto spec = pre_tokenizer_spec(pre);
  if (!spec.ok()) return spec.error();
  auto model = std::make_unique<BpeModel>(vocab, std::move(*spec));
  if (Status s = model->load(f); !s.ok()) return s.error();
  return std::unique_ptr<VocabModel>(std::move(model));
}

}  // namespace hearth::tok
