// Splits a thinking model's answer into its reasoning and its content. Qwen3 (and the models
// trained like it) opens its answer with a block "<think>\n...\n</think>\n\n" and writes the
// answer after it; the API surfaces give the block's text as reasoning (OpenAI-compatible
// servers' reasoning_content) and never as content.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hearth {

// Fed the answer's text in pieces of any size (a tag may arrive split anywhere, byte by byte):
//  - the block is recognised only at the start of the answer, after optional whitespace: an
//    answer that starts otherwise is all content, tags and all (a model quoting "<think>"
//    mid-answer is not reasoning);
//  - the reasoning is the text between the tags, whitespace trimmed at both ends (the
//    template writes '\n' inside each tag); the content is the text after the close, its
//    leading whitespace dropped (the template writes "\n\n" after it);
//  - `inside`: the prompt already opened the block (templates whose generation prompt ends
//    with "<think>\n"), so the answer starts as reasoning.
// Text that may still be a tag (a prefix of one), and whitespace that may still come right
// before the close, are held back; everything else comes out at once. finish(): held text is
// what it would have been had nothing followed: content before the block was decided,
// reasoning (trailing whitespace dropped) when the answer stopped inside it.
//
// Not thread-safe; one splitter per answer.
class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(bool inside = false, std::string open = "<think>", std::string close = "</think>");

  struct Piece {
    bool reasoning;  // else content
    std::string text;
  };
  std::vector<Piece> feed(std::string_view text);
  std::vector<Piece> finish();
  // Inside the block now: it was opened (or `inside`) and its close has not come.
  bool in_reasoning() const { return state_ == State::Reasoning; }
  // The start is decided: a block was opened, or the answer is content.
  bool past_start() const { return state_ != State::Start; }

 private:
  enum class State { Start, Reasoning, AfterClose, Content };
  void run(std::vector<Piece>& out);
  void scan_reasoning(std::vector<Piece>& out);
  static void emit(std::vector<Piece>& out, bool reasoning, std::string text);

  std::string open_, close_;
  State state_;
  bool reasoning_started_ = false;  // Reasoning: a non-whitespace byte came
  std::string buf_;                 // received, not yet emitted
};

}  // namespace hearth
