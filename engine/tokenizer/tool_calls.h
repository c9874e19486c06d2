// The ways a model writes a function call, and a streaming parser that splits generated text
// into content and calls. The grammar code (engine/sampling) builds its constraints from the
// same CallForm list, so the two agree byte for byte on what a call looks like.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/chat_template.h"

namespace hearth {

// One way a model writes a call: open_prefix + NAME + open_suffix + ARGUMENTS + close, where
// ARGUMENTS is one JSON object and NAME a function's name. `trigger` is the text that engages
// the form in free text (the grammar forces the rest of the opening from there): the model's
// own marker, a prefix of open_prefix (Hermes: "<tool_call>"); empty for forms that ordinary
// text also uses (a JSON object), which engage only on the whole opening open(name) of an
// offered function.
struct CallForm {
  std::string trigger;
  std::string open_prefix;
  std::string open_suffix;
  std::string close;
  std::string open(const std::string& name) const { return open_prefix + name + open_suffix; }
};

// The template's own form first; with `lenient`, also the forms small models write instead
// of their template's (for tool_choice "auto"). Empty for ToolSyntax::None.
//  Hermes:  <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>   (trigger <tool_call>)
//    lenient: what Qwen2.5-Coder-0.5B writes instead, given Qwen's own tool prompt. Of 132
//    answers (22 conversations, greedy and 5 sampled seeds; tests/reference/
//    survey_tool_call_forms.py), 99 called a function, none with <tool_call>:
//      57   {"name": "NAME", "arguments": ARGS}
//      17   ```json\n{\n  "name": "NAME",\n  "arguments": ARGS\n}\n```
//      13   ```json\n{"name": "NAME", "arguments": ARGS}\n```
//       6   {\n  "name": "NAME",\n  "arguments": ARGS\n}
//       3   {\n    "name": "NAME",\n    "arguments": ARGS\n}
//       3   {\n"name": "NAME",\n"arguments": ARGS\n}
//    (ARGS laid out as the rest; the parser does not mind, the grammar decides.)
//  Llama31: {"name": "NAME", "parameters": ARGS}
//    lenient: {"type": "function", "name": "NAME", "parameters": ARGS} (Llama 3.x models add
//    the type; llama.cpp's parser accepts it)
// The template's <|python_tag|> form is for Meta's builtin tools only, which hearth does not
// offer, and <|python_tag|> is a control token that never reaches generated text.
std::vector<CallForm> call_forms(const ChatTemplate& tmpl, bool lenient);

// Splits generated text, fed in pieces of any size, into content and calls.
//
// Openings: open(name) for every form and every offered name (a trigger, being a prefix of
// its form's openings, needs no rule of its own here). Text that may still become an
// opening (a prefix of one, or a whole one followed so far by whitespace only) is held back;
// everything before it is Content at once. An opening engages when it is complete and the
// first non-whitespace character after it is the '{' that starts the arguments: then comes
// CallBegin (name, index 0, 1, ... in order), CallArguments pieces from that '{' to its
// matching '}' (nesting, strings and escapes tracked), then `close` and CallEnd. Whitespace
// between the opening and '{' is dropped. Where two openings start at the same place, the
// parser waits while either may still complete and takes the longer; where they start at
// different places, the earlier wins. Content never holds an engaged call's text.
//
// close is matched whitespace-insensitively: its non-whitespace characters must come in order,
// with any whitespace (or none) around them, since models vary the newlines of markup they
// close; once the last one arrives, CallEnd. Text after a call is content again.
//
// Input that breaks a form (possible without a grammar) never loses text:
//  - an opening not followed by '{', or one that stops matching, is content (and is searched
//    again for openings from its next byte);
//  - brackets that do not match in the arguments ('{' closed by ']'): CallEnd with `text`
//    saying so, and the text from the bad bracket on is content;
//  - a close that breaks off (another non-whitespace character): CallEnd (name and arguments
//    are whole), and the text since the arguments ended is content.
// finish(): held text that is no call is Content; an engaged call whose arguments are not
// closed gets CallEnd with `text` saying it was cut off (its arguments are incomplete JSON:
// drop the call, or report it with finish_reason "length"); a call whose arguments are
// closed but whose close is partial ends normally.
//
// Not thread-safe; one parser per generated answer.
class ToolCallParser {
 public:
  ToolCallParser(std::vector<CallForm> forms, std::vector<std::string> names);  // names: the offered functions

  struct Event {
    enum class Kind { Content, CallBegin, CallArguments, CallEnd } kind;
    // Content: the text. CallArguments: a piece of the arguments' JSON. CallEnd: "" for a
    // whole call, else why it is broken. CallBegin: "".
    std::string text;
    std::string name;  // the call's function (call events); "" for Content
    int32_t index;     // the call's place in the answer, from 0 (call events); -1 for Content
  };

  std::vector<Event> feed(std::string_view text);  // Content: text that is surely not a call
  // End of generation: held-back text, an unfinished call. cut_short: generation stopped
  // before the model was done (max_tokens, the context): text held back as the possible
  // start of a call is dropped rather than shown as content (the call's opening, cut).
  std::vector<Event> finish(bool cut_short = false);

 private:
  enum class State { Text, Arguments, Close };
  struct Opening {
    std::string text;  // open(name)
    size_t form;       // index into forms_
    size_t name;       // index into names_
  };
  struct Match {
    enum class Kind { None, Partial, Full } kind = Kind::None;
    size_t opening = 0;  // Full: index into openings_
    size_t brace = 0;    // Full: offset of the arguments' '{' from the match's start
  };

  Match match_at(std::string_view s) const;
  void scan_text(std::vector<Event>& out, bool at_end);
  void scan_arguments(std::vector<Event>& out);
  void scan_close(std::vector<Event>& out, bool at_end);
  void run(std::vector<Event>& out, bool at_end);
  void emit_content(std::vector<Event>& out, size_t n);  // the first n bytes of buf_
  void end_call(std::vector<Event>& out, std::string why);

  std::vector<CallForm> forms_;
  std::vector<std::string> names_;
  std::vector<Opening> openings_;
  bool first_byte_[256] = {};  // some opening starts with this byte
  State state_ = State::Text;
  std::string buf_;  // received, not yet emitted (Text: held; Close: since the arguments ended)
  // The call under way.
  std::string name_;
  std::string close_;           // its form's close, whitespace removed
  int32_t index_ = -1;          // its index; the next call gets index_ + 1
  std::vector<char> brackets_;  // Arguments: the open '{' and '[' not yet closed
  bool in_string_ = false;
  bool escaped_ = false;
  size_t close_matched_ = 0;  // Close: characters of close_ seen
  size_t close_scanned_ = 0;  // Close: bytes of buf_ examined
};

}  // namespace hearth
