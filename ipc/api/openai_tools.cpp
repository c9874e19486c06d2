#include "ipc/api/openai_tools.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// OpenAI's rule for function names.
bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

bool read_tool(FieldReader& r, const json& tool, const std::string& p, ToolRules rules, Tool* out) {
  if (!tool.is_object()) return r.fail_type(p, "an object", tool);
  const auto type = tool.find("type");
  const bool untyped = type == tool.end() || type->is_null();
  if ((untyped && !rules.type_optional) || (!untyped && *type != "function"))
    return r.fail(bad_request("'" + p + ".type' must be \"function\" (the only kind of tool hearth offers)",
                              p + ".type", "unsupported_value"));
  const auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object())
    return r.fail_type(p + ".function", "an object", fn == tool.end() ? json() : *fn);
  FieldReader fr(*fn);
  fr.string("name", &out->name);
  fr.string("description", &out->description);
  fr.boolean("strict", &out->strict);
  if (fr.error()) {
    ApiError e = *fr.error();
    e.param = p + ".function." + e.param;
    return r.fail(std::move(e));
  }
  if (rules.openai_names ? !valid_name(out->name) : out->name.empty())
    return r.fail(bad_request("'" + p + ".function.name' must be " +
                                  (rules.openai_names ? "1 to 64 letters, digits, '_' or '-'" : "a non-empty string") +
                                  ", got '" + out->name + "'",
                              p + ".function.name"));
  const json* params = fr.get("parameters");
  if (params != nullptr && (!params->is_object() || (params->contains("type") && (*params)["type"] != "object"))) {
    return r.fail(
        bad_request("'" + p + ".function.parameters' must be a JSON Schema of an object", p + ".function.parameters"));
  }
  out->parameters = params != nullptr ? dump_json(*params) : R"({"type": "object", "properties": {}})";
  out->json = dump_json(tool);
  return true;
}

bool read_tool_choice(FieldReader& r, ApiRequest* out) {
  const json* choice = r.get("tool_choice");
  out->tool_choice = out->tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  if (choice == nullptr) return true;
  if (choice->is_string()) {
    const std::string& c = choice->get_ref<const std::string&>();
    if (c == "none") {
      out->tool_choice = ToolChoice::None;
      return true;
    }
    if (c != "auto" && c != "required")
      return r.fail(
          bad_request("'tool_choice' must be none, auto, required or a function, got '" + c + "'", "tool_choice"));
    if (out->tools.empty()) return r.fail(bad_request("'tool_choice' " + c + " needs 'tools'", "tool_choice"));
    out->tool_choice = c == "auto" ? ToolChoice::Auto : ToolChoice::Required;
    return true;
  }
  const json* name = nullptr;
  if (choice->is_object() && choice->value("type", json()) == "function" && choice->contains("function") &&
      (*choice)["function"].is_object())
    name = &(*choice)["function"]["name"];
  if (name == nullptr || !name->is_string())
    return r.fail(bad_request(R"('tool_choice' must be a string or {"type": "function", "function": {"name": ...}})",
                              "tool_choice", "invalid_type"));
  const std::string& n = name->get_ref<const std::string&>();
  if (std::none_of(out->tools.begin(), out->tools.end(), [&](const Tool& t) { return t.name == n; }))
    return r.fail(bad_request("'tool_choice' names '" + n + "', which is not in 'tools'", "tool_choice"));
  out->tool_choice = ToolChoice::Named;
  out->tool_choice_name = n;
  return true;
}

}  // namespace

bool read_tools(FieldReader& r, ApiRequest* out) {
  for (const char* legacy : {"functions", "function_call"}) {
    if (r.get(legacy) != nullptr)
      return r.fail(bad_request(
          std::string("'") + legacy + "' is OpenAI's deprecated form: send 'tools' (and " + "'tool_choice') instead",
          legacy, "unsupported_parameter"));
  }
  if (!read_function_tools(r, ToolRules{}, &out->tools)) return false;
  r.boolean("parallel_tool_calls", &out->parallel_tool_calls);
  return read_tool_choice(r, out) && !r.error();
}

bool read_function_tools(FieldReader& r, ToolRules rules, std::vector<Tool>* out) {
  const json* tools = r.get("tools");
  if (tools == nullptr) return true;
  if (!tools->is_array()) return r.fail_type("tools", "an array", *tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    Tool t;
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!read_tool(r, (*tools)[i], p, rules, &t)) return false;
    if (!names.insert(t.name).second)
      return r.fail(bad_request("two tools are named '" + t.name + "': names must be unique", p + ".function.name"));
    out->push_back(std::move(t));
  }
  return true;
}

bool read_tool_calls(FieldReader& r, const json& calls, const std::string& param, std::vector<ToolCall>* out) {
  const std::string p = param + ".tool_calls";
  if (!calls.is_array()) return r.fail_type(p, "an array", calls);
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const std::string pc = p + "[" + std::to_string(i) + "]";
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return r.fail(bad_request(
          "'" + pc + "' must be {\"id\", \"type\": \"function\", \"function\": {\"name\", " + "\"arguments\"}}", pc,
          "invalid_type"));
    ToolCall call;
    const json& fn = c["function"];
    if (!c.contains("id") || !c["id"].is_string() || c["id"].get_ref<const std::string&>().empty())
      return r.fail(bad_request("'" + pc + ".id' must be a non-empty string", pc + ".id", "invalid_type"));
    if (!fn.contains("name") || !fn["name"].is_string())
      return r.fail(bad_request("'" + pc + ".function.name' must be a string", pc + ".function.name", "invalid_type"));
    if (!fn.contains("arguments") || !fn["arguments"].is_string())
      return r.fail(bad_request("'" + pc + ".function.arguments' must be a string (a JSON object)",
                                pc + ".function.arguments", "invalid_type"));
    call.id = c["id"].get<std::string>();
    call.name = fn["name"].get<std::string>();
    call.arguments = fn["arguments"].get<std::string>();
    const json args = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object())
      return r.fail(
          bad_request("'" + pc + ".function.arguments' must be a JSON object, as text", pc + ".function.arguments"));
    out->push_back(std::move(call));
  }
  return true;
}

bool check_tool_messages(FieldReader& r, const std::vector<ChatMessage>& messages) {
  std::set<std::string> ids;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    for (const ToolCall& c : m.tool_calls) {
      if (!ids.insert(c.id).second)
        return r.fail(
            bad_request("the tool call id '" + c.id + "' is given twice", "messages[" + std::to_string(i) + "]"));
    }
    if (m.role == "tool" && !ids.count(m.tool_call_id)) {
      return r.fail(bad_request("'messages[" + std::to_string(i) + "].tool_call_id' ('" + m.tool_call_id +
                                    "') answers no tool call of an earlier assistant message",
                                "messages[" + std::to_string(i) + "].tool_call_id"));
    }
  }
  return true;
}

}  // namespace hearth::ipc
