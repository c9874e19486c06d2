#include "engine/tokenizer/special_split.h"

#include <algorithm>

namespace hearth::tok {

SpecialSplitter::SpecialSplitter(std::vector<Special> specials) : specials_(std::move(specials)) {
  std::erase_if(specials_, [](const Special& s) { return s.text.empty(); });
  std::sort(specials_.begin(), specials_.end(), [](const Special& a, const Special& b) {
    if (a.text.size() != b.text.size()) return a.text.size() > b.text.size();
    return a.id < b.id;
  });
  for (size_t i = 0; i < specials_.size(); ++i) {
    const std::string& t = specials_[i].text;
    by_text_.emplace(std::string_view(t), i);
    if (std::find(lengths_.begin(), lengths_.end(), t.size()) == lengths_.end()) {
      lengths_.push_back(t.size());
    }
    first_byte_[static_cast<uint8_t>(t[0])] = true;
  }
}

std::vector<Fragment> SpecialSplitter::split(std::string_view text, bool parse_special,
                                             const std::vector<uint8_t>& markup) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({0, text.size(), -1});

  // Which special tokens occur at all (a token absent from the whole text cannot split any
  // fragment), so the llama.cpp loop below runs over a handful instead of thousands.
  std::vector<uint8_t> present(specials_.size(), 0);
  bool any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
    for (size_t len : lengths_) {
      if (len > text.size() - i) continue;
      auto it = by_text_.find(text.substr(i, len));
      if (it != by_text_.end()) present[it->second] = 1, any = true;
    }
  }
  if (!any) return frags;

  // Prefix count of non-markup bytes: a control match [p, p+n) is allowed iff none inside.
  std::vector<uint32_t> plain;
  if (!markup.empty()) {
    plain.assign(text.size() + 1, 0);
    for (size_t i = 0; i < text.size(); ++i) plain[i + 1] = plain[i] + (markup[i] ? 0 : 1);
  }
  auto control_ok = [&](size_t p, size_t n) {
    if (markup.empty()) return parse_special;
    return plain[p + n] == plain[p];
  };

  std::vector<Fragment> next;
  for (size_t si = 0; si < specials_.size(); ++si) {
    if (!present[si]) continue;
    const Special& sp = specials_[si];
    if (sp.control && markup.empty() && !parse_special) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0 || f.length < sp.text.size()) {
        next.push_back(f);
        continue;
      }
      std::string_view raw = text.substr(f.offset, f.length);
      size_t start = 0;   // start of the pending raw remainder, relative to raw
      size_t cursor = 0;  // where the next search begins
      while (cursor < raw.size()) {
        size_t m = raw.find(sp.text, cursor);
        if (m == std::string_view::npos) break;
        if (sp.control && !control_ok(f.offset + m, sp.text.size())) {
          cursor = m + 1;
          continue;
        }
        if (m > start) next.push_back({f.offset + start, m - start, -1});
        next.push_back({f.offset + m, sp.text.size(), sp.id});
        start = cursor = m + sp.text.size();
      }
      if (start < raw.size()) next.push_back({f.offset + start, raw.size() - start, -1});
    }
    frags.swap(next);
  }
  return frags;
}

}  // namespace hearth::tok
