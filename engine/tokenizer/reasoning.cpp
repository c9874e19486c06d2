#include "engine/tokenizer/reasoning.h"

#include <algorithm>

namespace hearth {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t leading_space(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_space(s[n])) ++n;
  return n;
}

// The length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool inside, std::string open, std::string close)
    : open_(std::move(open)), close_(std::move(close)), state_(inside ? State::Reasoning : State::Start) {}

void ReasoningSplitter::emit(std::vector<Piece>& out, bool reasoning, std::string text) {
  if (text.empty()) return;
  if (!out.empty() && out.back().reasoning == reasoning) {
    out.back().text += text;
    return;
  }
  out.push_back({reasoning, std::move(text)});
}

std::vector<ReasoningSplitter::Piece> ReasoningSplitter::feed(std::string_view text) {
  std::vector<Piece> out;
  if (state_ == State::Content) {
    emit(out, false, std::string(text));
    return out;
  }
  buf_ += text;
  run(out);
  return out;
}

void ReasoningSplitter::run(std::vector<Piece>& out) {
  if (state_ == State::Start) {
    const std::string_view rest = std::string_view(buf_).substr(leading_space(buf_));
    if (rest.size() < open_.size() && open_.compare(0, rest.size(), rest) == 0) return;  // maybe the tag
    if (rest.compare(0, open_.size(), open_) == 0) {
      buf_.erase(0, buf_.size() - rest.size() + open_.size());
      state_ = State::Reasoning;
    } else {
      state_ = State::Content;
      emit(out, false, std::move(buf_));
      buf_.clear();
      return;
    }
  }
  if (state_ == State::Reasoning) scan_reasoning(out);
  if (state_ == State::AfterClose) {
    buf_.erase(0, leading_space(buf_));
    if (buf_.empty()) return;
    state_ = State::Content;
    emit(out, false, std::move(buf_));
    buf_.clear();
  }
}

void ReasoningSplitter::scan_reasoning(std::vector<Piece>& out) {
  if (!reasoning_started_) {
    buf_.erase(0, leading_space(buf_));
    if (buf_.empty()) return;
    reasoning_started_ = true;
  }
  const size_t close = buf_.find(close_);
  std::string_view before = buf_;
  if (close != std::string::npos) before = before.substr(0, close);
  // Held back: a possible start of the close, and the whitespace right before it.
  size_t keep = close == std::string::npos ? partial_tag_suffix(before, close_) : 0;
  while (keep < before.size() && is_space(before[before.size() - keep - 1])) ++keep;
  emit(out, true, std::string(before.substr(0, before.size() - keep)));
  if (close == std::string::npos) {
    buf_.erase(0, before.size() - keep);
    return;
  }
  buf_.erase(0, close + close_.size());  // the whitespace before the close goes with it
  state_ = State::AfterClose;
}

std::vector<ReasoningSplitter::Piece> ReasoningSplitter::finish() {
  std::vector<Piece> out;
  if (state_ == State::Start) {
    emit(out, false, std::move(buf_));
  } else if (state_ == State::Reasoning) {
    size_t n = buf_.size();
    while (n > 0 && is_space(buf_[n - 1])) --n;
    buf_.resize(n);
    emit(out, true, std::move(buf_));
  }
  buf_.clear();
  state_ = State::Content;
  return out;
}

}  // namespace hearth
