#include "engine/tokenizer/tool_calls.h"

#include <utility>

namespace hearth {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string without_space(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (!is_space(c)) out += c;
  }
  return out;
}

std::vector<CallForm> hermes_forms(bool lenient) {
  std::vector<CallForm> forms{{"<tool_call>", "<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>"}};
  if (lenient) {
    // Most frequent first (counts in tool_calls.h). A fence or a bare object is ordinary
    // text too, for a coder model above all: no trigger.
    forms.push_back({"", "{\"name\": \"", "\", \"arguments\": ", "}"});
    forms.push_back({"", "```json\n{\n  \"name\": \"", "\",\n  \"arguments\": ", "\n}\n```"});
    forms.push_back({"", "```json\n{\"name\": \"", "\", \"arguments\": ", "}\n```"});
    forms.push_back({"", "{\n  \"name\": \"", "\",\n  \"arguments\": ", "\n}"});
    forms.push_back({"", "{\n    \"name\": \"", "\",\n    \"arguments\": ", "\n}"});
    forms.push_back({"", "{\n\"name\": \"", "\",\n\"arguments\": ", "\n}"});
  }
  return forms;
}

std::vector<CallForm> llama31_forms(bool lenient) {
  std::vector<CallForm> forms{{"", "{\"name\": \"", "\", \"parameters\": ", "}"}};
  if (lenient) forms.push_back({"", "{\"type\": \"function\", \"name\": \"", "\", \"parameters\": ", "}"});
  return forms;
}

}  // namespace

std::vector<CallForm> call_forms(const ChatTemplate& tmpl, bool lenient) {
  switch (tmpl.tool_syntax) {
    case ToolSyntax::None:
      return {};
    case ToolSyntax::Hermes:
      return hermes_forms(lenient);
    case ToolSyntax::Llama31:
      return llama31_forms(lenient);
  }
  return {};
}

ToolCallParser::ToolCallParser(std::vector<CallForm> forms, std::vector<std::string> names)
    : forms_(std::move(forms)), names_(std::move(names)) {
  for (size_t f = 0; f < forms_.size(); ++f) {
    for (size_t n = 0; n < names_.size(); ++n) {
      std::string text = forms_[f].open(names_[n]);
      if (!text.empty()) openings_.push_back({std::move(text), f, n});
    }
  }
  for (const Opening& o : openings_) first_byte_[static_cast<unsigned char>(o.text[0])] = true;
}

// What the text at the start of `s` (which runs to the end of what was received) can be.
ToolCallParser::Match ToolCallParser::match_at(std::string_view s) const {
  Match m;
  bool partial = false;
  for (size_t i = 0; i < openings_.size(); ++i) {
    const std::string& o = openings_[i].text;
    if (s.size() < o.size()) {
      partial = partial || o.compare(0, s.size(), s) == 0;
      continue;
    }
    if (s.compare(0, o.size(), o) != 0) continue;
    size_t q = o.size();
    while (q < s.size() && is_space(s[q])) ++q;
    if (q == s.size()) {
      partial = true;  // the arguments' '{' may still come
    } else if (s[q] == '{' && (m.kind != Match::Kind::Full || o.size() > openings_[m.opening].text.size())) {
      m = {Match::Kind::Full, i, q};
    }
  }
  if (partial) m.kind = Match::Kind::Partial;
  return m;
}

void ToolCallParser::emit_content(std::vector<Event>& out, size_t n) {
  if (n == 0) return;
  out.push_back({Event::Kind::Content, buf_.substr(0, n), "", -1});
  buf_.erase(0, n);
}

void ToolCallParser::end_call(std::vector<Event>& out, std::string why) {
  out.push_back({Event::Kind::CallEnd, std::move(why), name_, index_});
  state_ = State::Text;
}

// Text: everything before the earliest place an opening may start is content. At the end of
// generation nothing more comes, so a partial opening is no opening.
void ToolCallParser::scan_text(std::vector<Event>& out, bool at_end) {
  for (size_t p = 0; p < buf_.size(); ++p) {
    if (!first_byte_[static_cast<unsigned char>(buf_[p])]) continue;
    Match m = match_at(std::string_view(buf_).substr(p));
    if (m.kind == Match::Kind::None || (m.kind == Match::Kind::Partial && at_end)) continue;
    emit_content(out, p);
    if (m.kind == Match::Kind::Partial) return;
    const Opening& o = openings_[m.opening];
    name_ = names_[o.name];
    close_ = without_space(forms_[o.form].close);
    ++index_;
    out.push_back({Event::Kind::CallBegin, "", name_, index_});
    buf_.erase(0, m.brace);
    brackets_.clear();
    in_string_ = escaped_ = false;
    state_ = State::Arguments;
    return;
  }
  emit_content(out, buf_.size());
}

// Arguments: from the '{' to its matching '}', emitted as it comes.
void ToolCallParser::scan_arguments(std::vector<Event>& out) {
  size_t i = 0;
  bool done = false, broken = false;
  for (; i < buf_.size() && !done && !broken; ++i) {
    const char c = buf_[i];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      brackets_.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (brackets_.empty() || brackets_.back() != c) {
        broken = true;
        break;
      }
      brackets_.pop_back();
      done = brackets_.empty();
    }
  }
  if (i > 0) out.push_back({Event::Kind::CallArguments, buf_.substr(0, i), name_, index_});
  buf_.erase(0, i);
  if (broken) {
    end_call(out, "its arguments are not well-formed JSON: a bracket closes what it did not open");
  } else if (done) {
    state_ = State::Close;
    close_matched_ = close_scanned_ = 0;
  }
}

// Close: the form's close, whitespace aside. buf_ keeps the text since the arguments ended, so
// that a close that breaks off gives it back as content.
void ToolCallParser::scan_close(std::vector<Event>& out, bool at_end) {
  while (close_matched_ < close_.size() && close_scanned_ < buf_.size()) {
    const char c = buf_[close_scanned_];
    if (is_space(c)) {
      ++close_scanned_;
    } else if (c == close_[close_matched_]) {
      ++close_matched_;
      ++close_scanned_;
    } else {
      end_call(out, "");  // buf_ stays: it is text again
      return;
    }
  }
  if (close_matched_ == close_.size()) {
    buf_.erase(0, close_scanned_);
    end_call(out, "");
  } else if (at_end) {
    buf_.clear();  // the model stopped inside the close: the call is whole
    end_call(out, "");
  }
}

void ToolCallParser::run(std::vector<Event>& out, bool at_end) {
  while (true) {
    const State before = state_;
    const size_t size = buf_.size();
    switch (state_) {
      case State::Text:
        scan_text(out, at_end);
        break;
      case State::Arguments:
        scan_arguments(out);
        break;
      case State::Close:
        scan_close(out, at_end);
        break;
    }
    if (state_ == before && buf_.size() == size) return;
  }
}

std::vector<ToolCallParser::Event> ToolCallParser::feed(std::string_view text) {
  std::vector<Event> out;
  buf_.append(text);
  run(out, false);
  return out;
}

std::vector<ToolCallParser::Event> ToolCallParser::finish(bool cut_short) {
  std::vector<Event> out;
  if (cut_short && state_ == State::Text) buf_.clear();  // the start of a call the cut broke off
  run(out, true);
  if (state_ == State::Arguments) end_call(out, "generation ended inside its arguments: they are incomplete JSON");
  buf_.clear();
  return out;
}

}  // namespace hearth
