#include "engine/sampling/stop.h"

#include <algorithm>

namespace hearth {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, std::vector<int32_t> eog_tokens)
    : eog_tokens_(std::move(eog_tokens)) {
  for (std::string& s : stop_strings) {
    // Ill-formed stop strings could match inside a character of the sanitized text; they
    // can never match a whole one, so they are dropped.
    if (!s.empty() && sanitize_utf8(s) == s) stops_.push_back(std::move(s));
  }
  std::sort(eog_tokens_.begin(), eog_tokens_.end());
}

bool StopMatcher::is_eog(int32_t token) const {
  return std::binary_search(eog_tokens_.begin(), eog_tokens_.end(), token);
}

StopMatcher::Step StopMatcher::feed(std::string_view token_bytes) {
  if (stopped_) return {"", true};
  utf8_.append(token_bytes, &pending_);
  return scan();
}

StopMatcher::Step StopMatcher::feed_token(int32_t token, std::string_view token_bytes) {
  if (stopped_) return {"", true};
  if (!is_eog(token)) return feed(token_bytes);
  Step step{flush(), true};
  stopped_ = true;
  return step;
}

std::string StopMatcher::flush() {
  if (stopped_) return "";
  utf8_.finish(&pending_);
  Step step = scan();
  std::string text = std::move(step.text);
  text += pending_;  // what scan() held as a possible stop prefix: the stream has ended
  pending_.clear();
  return text;
}

StopMatcher::Step StopMatcher::scan() {
  // The earliest complete stop string wins. Every byte before the held suffix was already
  // ruled out, so a match can only start inside pending_.
  size_t first = std::string::npos;
  const std::string* match = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    if (at < first || (at == first && s.size() < match->size())) first = at, match = &s;
  }
  if (match != nullptr) {
    Step step{pending_.substr(0, first), true};
    pending_.clear();
    stopped_ = true;
    matched_ = *match;
    return step;
  }
  const size_t emit = pending_.size() - held_suffix_length();
  Step step{pending_.substr(0, emit), false};
  pending_.erase(0, emit);
  return step;
}

size_t StopMatcher::held_suffix_length() const {
  const std::string_view text = pending_;
  size_t best = 0;
  // Stop strings are valid UTF-8 and start with a lead byte, so the held suffix starts on a
  // character boundary of text and the emitted part stays valid UTF-8.
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

}  // namespace hearth
