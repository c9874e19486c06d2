#include "ipc/api/anthropic_request.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

std::string at(const std::string& param, size_t i) {
  return param + "[" + std::to_string(i) + "]";
}

// A message of text parts; one part alone is plain content, as a string is.
ChatMessage message_of(const std::string& role, std::vector<std::string> parts) {
  return parts.size() == 1 ? ChatMessage(role, std::move(parts[0])) : message_from_parts(role, std::move(parts));
}

// The chat messages of a conversation, turn by turn.
class Conversation {
 public:
  // A turn's text parts and (assistant) calls. It joins the message before when that is a
  // turn of the same role, as Anthropic combines consecutive turns of one role; nothing is
  // added for no parts and no calls (content []).
  void add(const std::string& role, std::vector<std::string> parts, std::vector<ToolCall> calls = {}) {
    if (parts.empty() && calls.empty()) return;
    for (const ToolCall& c : calls) call_names_[c.id] = c.name;
    if (!messages_.empty() && messages_.back().role == role) {
      ChatMessage& last = messages_.back();
      std::vector<std::string> all = last.parts;
      if (all.empty() && !last.content.empty()) all.push_back(last.content);
      all.insert(all.end(), std::make_move_iterator(parts.begin()), std::make_move_iterator(parts.end()));
      std::vector<ToolCall> all_calls = std::move(last.tool_calls);
      all_calls.insert(all_calls.end(), calls.begin(), calls.end());
      last = message_from_parts(role, std::move(all));
      last.tool_calls = std::move(all_calls);
      return;
    }
    ChatMessage m = message_of(role, std::move(parts));
    m.tool_calls = std::move(calls);
    messages_.push_back(std::move(m));
  }

  // A tool message answering the call `id`; false when no earlier assistant turn made it.
  // OpenAI's tool messages have no error flag, so an error says so in its text, where every
  // template shows it to the model.
  bool add_tool_result(const std::string& id, std::vector<std::string> parts, bool is_error) {
    const auto name = call_names_.find(id);
    if (name == call_names_.end()) return false;
    ChatMessage m = message_of("tool", std::move(parts));
    if (is_error) {
      m.content = m.content.empty() ? "Error" : "Error: " + m.content;
      if (!m.parts.empty()) m.parts[0] = "Error: " + m.parts[0];
    }
    m.tool_call_id = id;
    m.name = name->second;
    messages_.push_back(std::move(m));
    return true;
  }

  std::vector<ChatMessage> take() { return std::move(messages_); }

 private:
  std::vector<ChatMessage> messages_;
  std::map<std::string, std::string> call_names_;  // tool_use id -> the tool's name
};

// The "type" of the content block at param; nullopt (the error kept) when it has none.
std::optional<std::string> block_type(FieldReader& r, const json& block, const std::string& param) {
  if (!block.is_object()) {
    r.fail_type(param, "an object", block);
    return std::nullopt;
  }
  const auto type = block.find("type");
  if (type == block.end() || !type->is_string()) {
    r.fail(bad_request("'" + param + ".type' must be a string", param + ".type", "invalid_type"));
    return std::nullopt;
  }
  return type->get<std::string>();
}

// A block's required string field.
bool block_string(FieldReader& r, const json& block, const char* key, const std::string& param, std::string* out) {
  const auto it = block.find(key);
  if (it == block.end() || !it->is_string()) {
    return r.fail(bad_request("'" + param + "." + key + "' must be a string", param + "." + key, "invalid_type"));
  }
  *out = it->get<std::string>();
  return true;
}

bool unsupported_block(FieldReader& r, const std::string& type, const std::string& param) {
  const std::string why = type == "image" || type == "document"
                              ? std::string(type == "image" ? "is an image" : "is a document") +
                                    " block: not supported yet, the models hearth serves read text only"
                              : "is a '" + type + "' block, which is not supported here";
  return r.fail(bad_request("'" + param + "' " + why, param + ".type", "unsupported_content"));
}

// Blocks that must all be text (system, a tool_result's content); their other keys
// (cache_control, citations) are ignored.
bool read_text_blocks(FieldReader& r, const json& blocks, const std::string& param, std::vector<std::string>* parts) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string p = at(param, i);
    const std::optional<std::string> type = block_type(r, blocks[i], p);
    if (!type) return false;
    if (*type != "text") return unsupported_block(r, *type, p);
    std::string text;
    if (!block_string(r, blocks[i], "text", p, &text)) return false;
    parts->push_back(std::move(text));
  }
  return true;
}

bool read_tool_result(FieldReader& r, const json& block, const std::string& p, Conversation* c) {
  std::string id;
  if (!block_string(r, block, "tool_use_id", p, &id)) return false;
  std::vector<std::string> parts;
  if (const auto content = block.find("content"); content != block.end() && !content->is_null()) {
    if (content->is_string()) {
      parts.push_back(content->get<std::string>());
    } else if (!content->is_array()) {
      return r.fail_type(p + ".content", "a string or an array of text blocks", *content);
    } else if (!read_text_blocks(r, *content, p + ".content", &parts)) {
      return false;
    }
  }
  bool is_error = false;
  if (const auto e = block.find("is_error"); e != block.end() && !e->is_null()) {
    if (!e->is_boolean()) return r.fail_type(p + ".is_error", "a boolean", *e);
    is_error = e->get<bool>();
  }
  if (!c->add_tool_result(id, std::move(parts), is_error)) {
    return r.fail(bad_request(
        "'" + p + ".tool_use_id' is '" + id + "', which no tool_use block of an earlier assistant message has",
        p + ".tool_use_id"));
  }
  return true;
}

// A user turn: text blocks and tool_result blocks, in the order given (text between results
// stays between them).
bool read_user_turn(FieldReader& r, const json& content, const std::string& param, Conversation* c) {
  if (content.is_string()) {
    c->add("user", {content.get<std::string>()});
    return true;
  }
  if (!content.is_array()) return r.fail_type(param, "a string or an array of content blocks", content);
  std::vector<std::string> text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = at(param, i);
    const std::optional<std::string> type = block_type(r, content[i], p);
    if (!type) return false;
    if (*type == "text") {
      std::string t;
      if (!block_string(r, content[i], "text", p, &t)) return false;
      text.push_back(std::move(t));
    } else if (*type == "tool_result") {
      c->add("user", std::move(text));
      text.clear();
      if (!read_tool_result(r, content[i], p, c)) return false;
    } else {
      return unsupported_block(r, *type, p);
    }
  }
  c->add("user", std::move(text));
  return true;
}

// An assistant turn: its text and its calls (tool_use: id, name, input object). Thinking
// blocks from earlier turns are dropped: Anthropic's own models do not see them either
// past the turn they belong to, and no hearth model reads them.
bool read_assistant_turn(FieldReader& r, const json& content, const std::string& param, Conversation* c) {
  if (content.is_string()) {
    c->add("assistant", {content.get<std::string>()});
    return true;
  }
  if (!content.is_array()) return r.fail_type(param, "a string or an array of content blocks", content);
  std::vector<std::string> text;
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = at(param, i);
    const std::optional<std::string> type = block_type(r, content[i], p);
    if (!type) return false;
    if (*type == "text") {
      std::string t;
      if (!block_string(r, content[i], "text", p, &t)) return false;
      text.push_back(std::move(t));
    } else if (*type == "tool_use") {
      ToolCall call;
      if (!block_string(r, content[i], "id", p, &call.id) || !block_string(r, content[i], "name", p, &call.name))
        return false;
      const auto input = content[i].find("input");
      if (input == content[i].end() || !input->is_object()) {
        return r.fail(bad_request("'" + p + ".input' must be an object", p + ".input", "invalid_type"));
      }
      call.arguments = dump_json(*input);
      calls.push_back(std::move(call));
    } else if (*type != "thinking" && *type != "redacted_thinking") {
      return unsupported_block(r, *type, p);
    }
  }
  c->add("assistant", std::move(text), std::move(calls));
  return true;
}

bool read_system(FieldReader& r, Conversation* c) {
  const json* system = r.get("system");
  if (system == nullptr) return true;
  std::vector<std::string> parts;
  if (system->is_string()) {
    if (!system->get<std::string>().empty()) parts.push_back(system->get<std::string>());
  } else if (!system->is_array()) {
    return r.fail_type("system", "a string or an array of text blocks", *system);
  } else if (!read_text_blocks(r, *system, "system", &parts)) {
    return false;
  }
  c->add("system", std::move(parts));
  return true;
}

bool read_messages(FieldReader& r, Conversation* c) {
  const json* messages = r.get("messages");
  if (messages == nullptr)
    return r.fail(bad_request("'messages' is required", "messages", "missing_required_parameter"));
  if (!messages->is_array()) return r.fail_type("messages", "an array", *messages);
  if (messages->empty()) return r.fail(bad_request("'messages' must not be empty", "messages"));
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string p = at("messages", i);
    if (!m.is_object()) return r.fail_type(p, "an object", m);
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return r.fail(bad_request("'" + p + ".role' must be a string", p + ".role", "invalid_type"));
    }
    const std::string name = role->get<std::string>();
    if (name != "user" && name != "assistant") {
      return r.fail(bad_request("'" + p + ".role' must be user or assistant, got '" + name +
                                    "' (the system prompt is the top-level 'system')",
                                p + ".role"));
    }
    const auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      return r.fail(bad_request("'" + p + ".content' is required", p + ".content", "missing_required_parameter"));
    }
    if (!(name == "user" ? read_user_turn : read_assistant_turn)(r, *content, p + ".content", c)) return false;
    if (name == "assistant" && i + 1 == messages->size()) {
      return r.fail(bad_request("'" + p + "', the last message, is an assistant message: continuing it (a prefill) " +
                                    "is not supported yet; end with a user message",
                                p + ".role", "unsupported_value"));
    }
  }
  return true;
}

// Anthropic's rule for tool names: 1..128 letters, digits, '_' and '-'.
bool valid_tool_name(const std::string& name) {
  return !name.empty() && name.size() <= 128 && std::all_of(name.begin(), name.end(), [](unsigned char ch) {
    return std::isalnum(ch) || ch == '_' || ch == '-';
  });
}

bool read_tool(FieldReader& r, const json& t, const std::string& p, Tool* out) {
  if (!t.is_object()) return r.fail_type(p, "an object", t);
  if (const auto type = t.find("type"); type != t.end() && !type->is_null()) {
    if (!type->is_string()) return r.fail_type(p + ".type", "a string", *type);
    if (type->get<std::string>() != "custom") {
      return r.fail(bad_request("'" + p + "' is a server tool ('" + type->get<std::string>() +
                                    "'): hearth runs no tools itself; describe the tool with name, description "
                                    "and input_schema, and run it in the client",
                                p + ".type", "unsupported_value"));
    }
  }
  if (!block_string(r, t, "name", p, &out->name)) return false;
  if (!valid_tool_name(out->name)) {
    return r.fail(bad_request("'" + p + ".name' must be 1 to 128 letters, digits, '_' or '-'", p + ".name"));
  }
  if (const auto d = t.find("description"); d != t.end() && !d->is_null()) {
    if (!d->is_string()) return r.fail_type(p + ".description", "a string", *d);
    out->description = d->get<std::string>();
  }
  const auto schema = t.find("input_schema");
  if (schema == t.end() || !schema->is_object()) {
    return r.fail(bad_request("'" + p + ".input_schema' must be a JSON Schema object", p + ".input_schema",
                              schema == t.end() ? "missing_required_parameter" : "invalid_type"));
  }
  out->parameters = dump_json(*schema);
  if (const auto s = t.find("strict"); s != t.end() && !s->is_null()) {
    if (!s->is_boolean()) return r.fail_type(p + ".strict", "a boolean", *s);
    out->strict = s->get<bool>();
  }
  out->json = openai_tool_json(*out);
  return true;
}

bool read_tools(FieldReader& r, std::vector<Tool>* out) {
  const json* tools = r.get("tools");
  if (tools == nullptr) return true;
  if (!tools->is_array()) return r.fail_type("tools", "an array", *tools);
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string p = at("tools", i);
    Tool tool;
    if (!read_tool(r, (*tools)[i], p, &tool)) return false;
    if (!names.insert(tool.name).second) {
      return r.fail(bad_request("'" + p + ".name': two tools are named '" + tool.name + "'", p + ".name"));
    }
    out->push_back(std::move(tool));
  }
  return true;
}

// tool_choice: auto, any (-> Required), tool with a name (-> Named), none; and
// disable_parallel_tool_use.
bool read_tool_choice(FieldReader& r, ApiRequest* req) {
  const json* choice = r.get("tool_choice");
  if (choice == nullptr) return true;
  if (!choice->is_object()) return r.fail_type("tool_choice", "an object", *choice);
  std::string type;
  if (!block_string(r, *choice, "type", "tool_choice", &type)) return false;
  if (type == "auto") {
    req->tool_choice = ToolChoice::Auto;
  } else if (type == "any") {
    req->tool_choice = ToolChoice::Required;
  } else if (type == "none") {
    req->tool_choice = ToolChoice::None;
  } else if (type == "tool") {
    req->tool_choice = ToolChoice::Named;
    if (!block_string(r, *choice, "name", "tool_choice", &req->tool_choice_name)) return false;
    const bool known = std::any_of(req->tools.begin(), req->tools.end(),
                                   [&](const Tool& t) { return t.name == req->tool_choice_name; });
    if (!known) {
      return r.fail(bad_request("'tool_choice.name' is '" + req->tool_choice_name + "', which no tool in 'tools' has",
                                "tool_choice.name"));
    }
  } else {
    return r.fail(
        bad_request("'tool_choice.type' must be auto, any, tool or none, got '" + type + "'", "tool_choice.type"));
  }
  if ((type == "any" || type == "tool") && req->tools.empty()) {
    return r.fail(bad_request("'tool_choice' of type '" + type + "' needs 'tools'", "tool_choice"));
  }
  if (const auto d = choice->find("disable_parallel_tool_use"); d != choice->end() && !d->is_null()) {
    if (!d->is_boolean()) return r.fail_type("tool_choice.disable_parallel_tool_use", "a boolean", *d);
    req->parallel_tool_calls = !d->get<bool>();
  }
  return true;
}

bool read_stop_sequences(FieldReader& r, std::vector<std::string>* out) {
  const json* stops = r.get("stop_sequences");
  if (stops == nullptr) return true;
  if (!stops->is_array()) return r.fail_type("stop_sequences", "an array of strings", *stops);
  if (stops->size() > kMaxStopSequences) {
    return r.fail(bad_request("'stop_sequences' takes at most " + std::to_string(kMaxStopSequences) + " strings",
                              "stop_sequences"));
  }
  for (const json& s : *stops) {
    if (!s.is_string()) return r.fail_type("stop_sequences", "an array of strings", s);
    if (!s.get<std::string>().empty()) out->push_back(s.get<std::string>());
  }
  return true;
}

// thinking: as Anthropic's models, a model thinks only when asked (enabled or adaptive:
// the template's enable_thinking); absent or disabled, it answers at once. enabled requires
// budget_tokens, the reasoning's bound in tokens, which the engine enforces (as llama-server
// does, any positive count: Anthropic's own floor of 1024 is a price rule, not a format one).
// Whether the model can think at all is the route's to check.
bool read_thinking(FieldReader& r, ApiRequest* out) {
  out->chat_options.enable_thinking = false;
  const json* thinking = r.get("thinking");
  if (thinking == nullptr) return true;
  if (!thinking->is_object()) return r.fail_type("thinking", "an object", *thinking);
  std::string type;
  if (!block_string(r, *thinking, "type", "thinking", &type)) return false;
  if (type == "disabled") return true;
  if (type == "enabled" || type == "adaptive") {
    out->chat_options.enable_thinking = true;
    const auto budget = thinking->find("budget_tokens");
    if (budget == thinking->end() || budget->is_null()) {
      if (type == "adaptive") return true;
      return r.fail(bad_request("'thinking.budget_tokens' is required when thinking is enabled",
                                "thinking.budget_tokens", "missing_required_parameter"));
    }
    if (!budget->is_number_integer() || budget->get<int64_t>() < 1 || budget->get<int64_t>() > kMaxInt32)
      return r.fail(bad_request("'thinking.budget_tokens' must be a positive integer", "thinking.budget_tokens"));
    out->reasoning_budget = static_cast<int32_t>(budget->get<int64_t>());
    return true;
  }
  return r.fail(
      bad_request("'thinking.type' must be enabled, adaptive or disabled, got '" + type + "'", "thinking.type"));
}

// metadata: accepted, unused. user_id is Anthropic's abuse-tracking id; hearth's cache scope
// comes from the connection's peer (docs/security.md), never from a field a client sets.
bool read_metadata(FieldReader& r) {
  const json* metadata = r.get("metadata");
  if (metadata == nullptr) return true;
  if (!metadata->is_object()) return r.fail_type("metadata", "an object", *metadata);
  if (const auto id = metadata->find("user_id"); id != metadata->end() && !id->is_null() && !id->is_string())
    return r.fail_type("metadata.user_id", "a string", *id);
  return true;
}

// *given records the fields the request set (SamplingField bits).
void read_sampling(FieldReader& r, SamplingParams* s, uint32_t* given) {
  if (r.number("temperature", 0, 1, false, &s->temperature)) *given |= kSetTemperature;
  if (r.number("top_p", 0, 1, false, &s->top_p)) {
    *given |= kSetTopP;
    if (s->top_p == 0.0f) {
      // top_p 0 keeps only the most likely token: greedy.
      s->temperature = 0.0f;
      s->top_p = 1.0f;
      *given |= kSetTemperature;
    }
  }
  int64_t v = 0;
  if (r.integer("top_k", 0, kMaxInt32, &v)) {
    s->top_k = static_cast<int32_t>(v);
    *given |= kSetTopK;
  }
}

}  // namespace

std::string openai_tool_json(const Tool& tool) {
  nlohmann::ordered_json function;
  function["name"] = tool.name;
  if (!tool.description.empty()) function["description"] = tool.description;
  // Parsed from JSON hearth dumped itself: never discarded. Keys come sorted (the body was
  // parsed into a sorted object), not in the client's order.
  function["parameters"] = nlohmann::ordered_json::parse(tool.parameters, nullptr, /*allow_exceptions=*/false);
  nlohmann::ordered_json j;
  j["type"] = "function";
  j["function"] = std::move(function);
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::variant<ApiRequest, ApiError> parse_anthropic_request(const json& body, AnthropicPurpose purpose) {
  ApiRequest req;
  // Anthropic's defaults: temperature 1, no top_p, top_k or min_p unless asked for.
  req.sampling.temperature = 1.0f;
  req.sampling.top_p = 1.0f;
  req.sampling.top_k = 0;
  req.sampling.min_p = 0.0f;
  FieldReader r(body);
  if (const json* model = r.get("model"); model != nullptr && !model->is_string())
    r.fail_type("model", "a string", *model);
  read_tools(r, &req.tools);
  read_tool_choice(r, &req);
  Conversation conversation;
  if (read_system(r, &conversation)) read_messages(r, &conversation);
  req.messages = conversation.take();
  read_thinking(r, &req);
  if (purpose == AnthropicPurpose::Message) {
    int64_t v = 0;
    if (r.get("max_tokens") == nullptr) {
      r.fail(bad_request("'max_tokens' is required", "max_tokens", "missing_required_parameter"));
    } else if (r.integer("max_tokens", 1, kMaxInt32, &v)) {
      req.max_tokens = static_cast<int32_t>(v);
    }
    read_sampling(r, &req.sampling, &req.sampling_given);
    read_stop_sequences(r, &req.stop);
    read_metadata(r);
    r.boolean("stream", &req.stream);
  }
  if (r.error()) return *r.error();
  if (Status s = req.sampling.validate(); !s.ok()) return bad_request(s.error().message);
  return req;
}

}  // namespace hearth::ipc
