#include "engine/tokenizer/python_json.h"

#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

namespace hearth::tok {
namespace {

// Python's json encoder (py_encode_basestring): the quote, the backslash and the C0 controls.
void append_quoted(std::string& out, std::string_view s) {
  constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// Python's repr(float): the shortest digits that read back as `v` (what std::to_chars gives),
// fixed-point when the decimal exponent is in [-4, 16), else d.ddde+XX (two exponent digits
// at least); whole values in fixed point end in ".0".
std::string python_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // "-1.2345e+16"
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::atoi(std::string(sci.substr(e + 1)).c_str());
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += '.' + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    const int a = std::abs(exp);
    if (a < 10) out += '0';
    out += std::to_string(a);
  } else if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const size_t whole = static_cast<size_t>(exp) + 1;  // digits before the point
    if (digits.size() <= whole) {
      out += digits + std::string(whole - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, whole) + '.' + digits.substr(whole);
    }
  }
  return out;
}

// A nlohmann SAX consumer that writes each value as Python would. Containers are buffered
// until they close (a repeated key replaces its earlier value in place, as in a Python dict).
class PythonWriter {
 public:
  using json = nlohmann::json;
  explicit PythonWriter(int indent) : indent_(indent) {}

  bool null() { return value("null"); }
  bool boolean(bool b) { return value(b ? "true" : "false"); }
  bool number_integer(json::number_integer_t n) { return value(std::to_string(n)); }
  bool number_unsigned(json::number_unsigned_t n) { return value(std::to_string(n)); }
  bool number_float(json::number_float_t x, const json::string_t& lexeme) {
    // An integer too long for 64 bits arrives here as a double; Python keeps its digits.
    if (lexeme.find_first_of(".eE") == std::string::npos) return value(lexeme);
    return value(python_float(x));
  }
  bool string(json::string_t& s) {
    std::string q;
    append_quoted(q, s);
    return value(std::move(q));
  }
  bool binary(json::binary_t&) { return false; }
  bool start_object(std::size_t) { return open(true); }
  bool key(json::string_t& k) {
    stack_.back().key = k;
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open(false); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = ex.what();
    return false;
  }

  const std::string& error() const { return error_; }
  std::string& out() { return out_; }

 private:
  struct Frame {
    bool object;
    std::string key;                                // the key whose value comes next (objects)
    std::vector<std::string> keys;                  // quoted, in first-seen order (objects)
    std::vector<std::string> values;                // written
    std::unordered_map<std::string, size_t> index;  // key -> its place (objects)
  };

  bool open(bool object) {
    stack_.push_back(Frame{object, {}, {}, {}, {}});
    return true;
  }

  bool value(std::string text) {
    if (stack_.empty()) {
      out_ = std::move(text);
      return true;
    }
    Frame& f = stack_.back();
    if (f.object) {
      auto [it, fresh] = f.index.emplace(f.key, f.values.size());
      if (!fresh) {
        f.values[it->second] = std::move(text);
        return true;
      }
      std::string q;
      append_quoted(q, f.key);
      f.keys.push_back(std::move(q));
    }
    f.values.push_back(std::move(text));
    return true;
  }

  // Python's _iterencode_dict/_iterencode_list: a container at nesting level L puts its items
  // at (L + 1) * indent spaces and its closing bracket at L * indent.
  bool close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    const char open = f.object ? '{' : '[', close = f.object ? '}' : ']';
    std::string text(1, open);
    if (!f.values.empty()) {
      const size_t level = stack_.size();
      const std::string inner = indent_ < 0 ? "" : "\n" + std::string((level + 1) * indent_, ' ');
      const std::string sep = indent_ < 0 ? ", " : "," + inner;
      text += inner;
      for (size_t i = 0; i < f.values.size(); ++i) {
        if (i > 0) text += sep;
        if (f.object) text += f.keys[i] + ": ";
        text += f.values[i];
      }
      if (indent_ >= 0) text += "\n" + std::string(level * indent_, ' ');
    }
    text += close;
    return value(std::move(text));
  }

  int indent_;
  std::vector<Frame> stack_;
  std::string out_;
  std::string error_;
};

}  // namespace

Result<std::string> python_json_dumps(std::string_view json_text, int indent) {
  PythonWriter w(indent);
  if (!nlohmann::json::sax_parse(json_text, &w)) {
    return make_error("invalid JSON: " + w.error());
  }
  return std::move(w.out());
}

std::string python_json_string(std::string_view utf8) {
  std::string out;
  append_quoted(out, utf8);
  return out;
}

}  // namespace hearth::tok
