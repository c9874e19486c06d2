// libFuzzer entry point for the call parser and tojson (HEARTH_FUZZ; scripts/fuzz builds and
// runs it). Input: byte 0 picks the call forms, byte 1 how the text is cut, the rest is
// generated text. For any input:
//  - feeding the text whole and cut into pieces gives the same events (pieces joined);
//  - events are well formed: content outside calls, each call CallBegin, CallArguments...,
//    CallEnd with one index, indexes 0, 1, ... in order, no more bytes out than in;
//  - python_json_dumps of the text either fails or gives JSON that dumps to itself.
// Seeds: HEARTH_FUZZ_WRITE_SEEDS=DIR ./tool_calls_fuzz writes a few answers into DIR and exits.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/tokenizer/python_json.h"
#include "engine/tokenizer/tool_calls.h"
#include "fuzz_seeds.h"

namespace {

using Event = hearth::ToolCallParser::Event;
using Kind = Event::Kind;

const std::vector<std::string> kNames{"get_weather", "get", "search"};

std::vector<hearth::CallForm> forms_for(uint8_t pick) {
  hearth::ChatTemplate t((pick & 1) ? hearth::ChatFamily::Llama3 : hearth::ChatFamily::ChatML);
  t.tool_syntax = (pick & 1) ? hearth::ToolSyntax::Llama31 : hearth::ToolSyntax::Hermes;
  return hearth::call_forms(t, (pick & 2) != 0);
}

// The events with neighbouring Content pieces, and one call's CallArguments pieces, joined.
std::vector<Event> parse(const std::vector<hearth::CallForm>& forms, std::string_view text, size_t step) {
  hearth::ToolCallParser p(forms, kNames);
  std::vector<Event> out;
  auto take = [&out](std::vector<Event> events) {
    for (Event& e : events) {
      const bool joins =
          !out.empty() && out.back().kind == e.kind && (e.kind == Kind::Content || e.kind == Kind::CallArguments);
      if (joins) {
        out.back().text += e.text;
      } else {
        out.push_back(std::move(e));
      }
    }
  };
  for (size_t at = 0; at < text.size(); at += step) take(p.feed(text.substr(at, step)));
  take(p.finish());
  return out;
}

void check_well_formed(const std::vector<Event>& events, size_t n_bytes) {
  int32_t next = 0;
  bool in_call = false;
  size_t bytes = 0;
  for (const Event& e : events) {
    switch (e.kind) {
      case Kind::Content:
        if (in_call || e.index != -1 || e.text.empty()) __builtin_trap();
        bytes += e.text.size();
        break;
      case Kind::CallBegin:
        if (in_call || e.index != next || e.name.empty()) __builtin_trap();
        in_call = true;
        break;
      case Kind::CallArguments:
        if (!in_call || e.index != next || e.text.empty()) __builtin_trap();
        bytes += e.text.size();
        break;
      case Kind::CallEnd:
        if (!in_call || e.index != next) __builtin_trap();
        in_call = false;
        ++next;
        break;
    }
  }
  if (in_call || bytes > n_bytes) __builtin_trap();
}

bool same(const std::vector<Event>& a, const std::vector<Event>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].text != b[i].text || a[i].name != b[i].name || a[i].index != b[i].index) {
      return false;
    }
  }
  return true;
}

void write_seeds(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::pair<const char*, std::string> seeds[] = {
      {"hermes", std::string("\x00\x03", 2) +
                     "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a } \\\" {\"}}\n"
                     "</tool_call>\n<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>"},
      {"lenient", std::string("\x02\x01", 2) +
                      "```json\n{\n  \"name\": \"search\",\n  \"arguments\": {\n    \"q\": [1, 2.5e-3]\n  }\n}\n```\n"
                      "{\"name\": \"get\", \"arguments\": {\"x\": [}}"},
      {"llama", std::string("\x03\x05", 2) +
                    "{\"type\": \"function\", \"name\": \"search\", \"parameters\": {\"q\": \"\\u00e9\"}} tail"},
  };
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << bytes;
    if (!out) {
      std::fprintf(stderr, "tool_calls_fuzz: cannot write %s/%s\n", dir.c_str(), name);
      std::exit(1);
    }
  }
  std::fprintf(stderr, "tool_calls_fuzz: wrote 3 seeds to %s\n", dir.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hearth::test::write_seeds_if_asked(write_seeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto forms = forms_for(data[0]);
  const size_t step = 1 + data[1] % 11;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const std::vector<Event> whole = parse(forms, text, text.size() + 1);
  check_well_formed(whole, text.size());
  if (!same(whole, parse(forms, text, step))) __builtin_trap();

  auto once = hearth::tok::python_json_dumps(text, data[1] % 3 == 0 ? 2 : -1);
  if (once.ok()) {
    auto twice = hearth::tok::python_json_dumps(*once, data[1] % 3 == 0 ? 2 : -1);
    if (!twice.ok() || *twice != *once) __builtin_trap();
  }
  return 0;
}
