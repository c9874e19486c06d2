#include "ipc/api/openai_request.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "ipc/api/openai_tools.h"
#include "ipc/identity.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr size_t kMaxStopStrings = 4;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxTopLogprobs = 20;

// Content of one message: a string, or an array of {"type": "text", "text": ...} parts (kept
// as parts for templates that render them, joined with newlines for the others; see
// message_from_parts).
bool read_content(FieldReader& r, const json& content, const std::string& param, ChatMessage* out) {
  if (content.is_string()) {
    out->content = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) return r.fail_type(param, "a string or an array of text parts", content);
  std::vector<std::string> parts;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return r.fail_type(p, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return r.fail(bad_request("'" + p + ".type' must be a string", p + ".type", "invalid_type"));
    if (type->get<std::string>() != "text") {
      return r.fail(
          bad_request("content parts of type '" + type->get<std::string>() + "' are not supported (text only)",
                      p + ".type", "unsupported_content"));
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      return r.fail(bad_request("'" + p + ".text' must be a string", p + ".text", "invalid_type"));
    }
    parts.push_back(text->get<std::string>());
  }
  *out = message_from_parts(std::move(out->role), std::move(parts));
  return true;
}

// A message's content and, by its role, its tool calls (assistant: content may then be null
// or absent) or the call it answers (tool: tool_call_id, and the function's name if given).
bool read_message_fields(FieldReader& r, const json& m, const std::string& p, ChatMessage* msg) {
  const auto calls = m.find("tool_calls");
  const bool has_calls = msg->role == "assistant" && calls != m.end() && !calls->is_null();
  if (has_calls && !read_tool_calls(r, *calls, p, &msg->tool_calls)) return false;
  if (msg->role == "tool") {
    const auto id = m.find("tool_call_id");
    if (id == m.end() || !id->is_string())
      return r.fail(bad_request("'" + p + ".tool_call_id' (a string) is required", p + ".tool_call_id",
                                "missing_required_parameter"));
    msg->tool_call_id = id->get<std::string>();
    if (const auto name = m.find("name"); name != m.end() && name->is_string()) msg->name = name->get<std::string>();
  }
  std::optional<std::string> reasoning;
  if (const auto rc = m.find("reasoning_content"); msg->role == "assistant" && rc != m.end() && !rc->is_null()) {
    if (!rc->is_string()) return r.fail_type(p + ".reasoning_content", "a string", *rc);
    reasoning = rc->get<std::string>();
  }
  const auto content = m.find("content");
  if (content == m.end() || content->is_null()) {
    msg->reasoning_content = std::move(reasoning);
    if (has_calls || msg->reasoning_content) return true;
    return r.fail(bad_request("'" + p + ".content' is required", p + ".content", "missing_required_parameter"));
  }
  if (!read_content(r, *content, p + ".content", msg)) return false;
  msg->reasoning_content = std::move(reasoning);
  return true;
}

// llama-server's chat_template_kwargs: what the template takes besides the messages. Of
// those, hearth's templates read enable_thinking (a boolean); others are ignored, as a Jinja
// template ignores variables it does not use.
void read_template_kwargs(FieldReader& r, ChatOptions* out) {
  const json* kwargs = r.get("chat_template_kwargs");
  if (kwargs == nullptr || kwargs->is_null()) return;
  if (!kwargs->is_object()) {
    r.fail_type("chat_template_kwargs", "an object", *kwargs);
    return;
  }
  if (const auto t = kwargs->find("enable_thinking"); t != kwargs->end()) {
    if (!t->is_boolean()) {
      r.fail_type("chat_template_kwargs.enable_thinking", "a boolean", *t);
      return;
    }
    out->enable_thinking = t->get<bool>();
  }
}

// OpenAI's reasoning_effort, as llama-server reads it for a template with only
// enable_thinking: "none" turns thinking off, any other level on (the template has no levels
// to give it); an unknown level is a 400, and so is one that contradicts
// chat_template_kwargs.enable_thinking. llama-server's thinking_budget_tokens bounds the
// reasoning in tokens (-1: no bound). Both only matter to a template that thinks.
void read_reasoning(FieldReader& r, ApiRequest* out) {
  static const char* const kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
  std::string effort;
  if (r.get("reasoning_effort") != nullptr && r.string("reasoning_effort", &effort)) {
    if (std::find_if(std::begin(kEfforts), std::end(kEfforts), [&](const char* e) { return effort == e; }) ==
        std::end(kEfforts)) {
      r.fail(bad_request("'reasoning_effort' must be none, minimal, low, medium, high or xhigh, got '" + effort + "'",
                         "reasoning_effort"));
      return;
    }
    const bool thinks = effort != "none";
    const json* kwargs = r.get("chat_template_kwargs");
    if (kwargs != nullptr && kwargs->is_object()) {
      const auto t = kwargs->find("enable_thinking");
      if (t != kwargs->end() && t->is_boolean() && t->get<bool>() != thinks) {
        r.fail(bad_request("'reasoning_effort' \"" + effort + "\" contradicts chat_template_kwargs.enable_thinking",
                           "reasoning_effort"));
        return;
      }
    }
    out->chat_options.enable_thinking = thinks;
  }
  int64_t budget = -1;
  if (r.integer("thinking_budget_tokens", -1, kMaxInt32, &budget)) out->reasoning_budget = static_cast<int32_t>(budget);
}

bool read_messages(FieldReader& r, std::vector<ChatMessage>* out) {
  const json* messages = r.get("messages");
  if (messages == nullptr)
    return r.fail(bad_request("'messages' is required", "messages", "missing_required_parameter"));
  if (!messages->is_array()) return r.fail_type("messages", "an array", *messages);
  if (messages->empty()) return r.fail(bad_request("'messages' must not be empty", "messages"));
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return r.fail_type(p, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return r.fail(bad_request("'" + p + ".role' must be a string", p + ".role", "invalid_type"));
    }
    ChatMessage msg;
    msg.role = role->get<std::string>();
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return r.fail(
          bad_request("'" + p + ".role' must be system, user, assistant or tool, got '" + msg.role + "'", p + ".role"));
    }
    if (!read_message_fields(r, m, p, &msg)) return false;
    out->push_back(std::move(msg));
  }
  return true;
}

bool read_prompt(FieldReader& r, std::string* out) {
  const json* prompt = r.get("prompt");
  if (prompt == nullptr) return r.fail(bad_request("'prompt' is required", "prompt", "missing_required_parameter"));
  if (prompt->is_string()) {
    *out = prompt->get<std::string>();
    return true;
  }
  // OpenAI also takes a batch of prompts; one of them is the same as a string.
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    *out = (*prompt)[0].get<std::string>();
    return true;
  }
  return r.fail_type("prompt", "a string", *prompt);
}

bool read_stop(FieldReader& r, std::vector<std::string>* out) {
  const json* stop = r.get("stop");
  if (stop == nullptr) return true;
  if (stop->is_string()) {
    if (!stop->get<std::string>().empty()) out->push_back(stop->get<std::string>());
    return true;
  }
  if (!stop->is_array()) return r.fail_type("stop", "a string or an array of strings", *stop);
  if (stop->size() > kMaxStopStrings) return r.fail(bad_request("'stop' takes at most 4 strings", "stop"));
  for (const json& s : *stop) {
    if (!s.is_string()) return r.fail_type("stop", "a string or an array of strings", s);
    if (!s.get<std::string>().empty()) out->push_back(s.get<std::string>());
  }
  return true;
}

// response_format: {"type": "text"}, {"type": "json_object"}, or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict", "description"}}.
bool read_response_format(FieldReader& r, ResponseFormat* out) {
  const json* rf = r.get("response_format");
  if (rf == nullptr) return true;
  if (!rf->is_object()) return r.fail_type("response_format", "an object", *rf);
  const auto type = rf->find("type");
  if (type == rf->end() || !type->is_string())
    return r.fail(bad_request("'response_format.type' must be a string", "response_format.type", "invalid_type"));
  const std::string& t = type->get_ref<const std::string&>();
  if (t == "text") return true;
  if (t == "json_object") {
    out->kind = ResponseFormat::Kind::JsonObject;
    return true;
  }
  if (t != "json_schema") {
    return r.fail(bad_request("'response_format.type' must be text, json_object or json_schema, got '" + t + "'",
                              "response_format.type"));
  }
  const auto spec = rf->find("json_schema");
  if (spec == rf->end() || !spec->is_object()) {
    return r.fail(bad_request("'response_format.json_schema' must be an object with the schema",
                              "response_format.json_schema", "invalid_type"));
  }
  FieldReader sr(*spec);
  std::string name;
  sr.string("name", &name);
  sr.boolean("strict", &out->strict);
  const json* schema = sr.get("schema");
  if (schema != nullptr && !schema->is_object() && !schema->is_boolean())
    sr.fail_type("schema", "an object (a JSON Schema)", *schema);
  if (sr.error()) {
    ApiError e = *sr.error();
    e.param = "response_format.json_schema." + e.param;
    return r.fail(std::move(e));
  }
  out->kind = ResponseFormat::Kind::JsonSchema;
  out->schema = schema != nullptr ? dump_json(*schema) : "{}";  // no schema: any JSON value
  return true;
}

// Chat: logprobs (a boolean) and top_logprobs (0..20, only with logprobs). Completions:
// logprobs, the number of alternatives (0..20; OpenAI allows 5). -1: none.
bool read_logprobs(FieldReader& r, Endpoint endpoint, int32_t* top) {
  int64_t n = 0;
  if (endpoint == Endpoint::Completions) {
    if (r.integer("logprobs", 0, kMaxTopLogprobs, &n)) *top = static_cast<int32_t>(n);
    return !r.error();
  }
  bool wanted = false;
  r.boolean("logprobs", &wanted);
  const bool has_top = r.integer("top_logprobs", 0, kMaxTopLogprobs, &n);
  if (r.error()) return false;
  if (has_top && !wanted) return r.fail(bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs"));
  if (wanted) *top = has_top ? static_cast<int32_t>(n) : 0;
  return true;
}

// The sampling fields and max_tokens; *given records the fields the request set.
void read_sampling(FieldReader& r, SamplingParams* sampling, uint32_t* given, int32_t* max_tokens) {
  int64_t v = 0;
  if (r.integer("max_tokens", 1, kMaxInt32, &v)) *max_tokens = static_cast<int32_t>(v);
  if (r.integer("max_completion_tokens", 1, kMaxInt32, &v)) *max_tokens = static_cast<int32_t>(v);
  if (r.number("temperature", 0, 2, false, &sampling->temperature)) *given |= kSetTemperature;
  if (r.number("top_p", 0, 1, false, &sampling->top_p)) {
    *given |= kSetTopP;
    if (sampling->top_p == 0.0f) {
      // top_p 0 keeps only the most likely token: greedy.
      sampling->temperature = 0.0f;
      sampling->top_p = 1.0f;
      *given |= kSetTemperature;
    }
  }
  if (r.integer("top_k", 0, kMaxInt32, &v)) {
    sampling->top_k = static_cast<int32_t>(v);
    *given |= kSetTopK;
  }
  if (r.number("min_p", 0, 1, false, &sampling->min_p)) *given |= kSetMinP;
  r.number("presence_penalty", -2, 2, false, &sampling->presence_penalty);
  r.number("frequency_penalty", -2, 2, false, &sampling->frequency_penalty);
  if (r.number("repetition_penalty", 0, 10, true, &sampling->repetition_penalty)) *given |= kSetRepetitionPenalty;
  if (const json* seed = r.get("seed")) {
    // Any 64-bit integer; negative ones wrap (-1 is kRandomSeed: a random seed, as in llama.cpp).
    if (seed->is_number_unsigned()) {
      sampling->seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer()) {
      sampling->seed = static_cast<uint64_t>(seed->get<int64_t>());
    } else {
      r.fail_type("seed", "an integer", *seed);
    }
  }
}

// cache_salt and keep_alive: how the request is served, not what it asks.
void read_serving(FieldReader& r, OpenAiRequest* req) {
  if (const json* salt = r.get("cache_salt")) {
    if (!salt->is_string()) {
      r.fail_type("cache_salt", "a string", *salt);
    } else if (std::optional<std::string> why = cache_salt_error(salt->get<std::string>())) {
      r.fail(bad_request(*why, "cache_salt"));
    } else {
      req->cache_salt = salt->get<std::string>();
    }
  }
  if (const json* keep = r.get("keep_alive")) {
    if (std::optional<ApiError> e = parse_keep_alive(*keep, &req->keep_alive)) r.fail(*e);
  }
  r.boolean("speculative", &req->speculative);  // hearth's own: false opts out of speculative decoding
}

// n, stream and stream_options, response_format, logprobs: the answer's shape.
void read_output(FieldReader& r, OpenAiRequest* req) {
  int64_t v = 0;
  if (r.integer("n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &v) && v != 1) {
    r.fail(bad_request("only n = 1 is supported", "n", "unsupported_value"));
  }
  r.boolean("stream", &req->stream);
  if (const json* so = r.get("stream_options")) {
    if (!so->is_object()) {
      r.fail_type("stream_options", "an object", *so);
    } else {
      FieldReader sr(*so);
      sr.boolean("include_usage", &req->include_usage);
      sr.boolean("continuous_usage_stats", &req->continuous_usage);
      if (sr.error()) {
        ApiError e = *sr.error();
        e.param = "stream_options." + e.param;
        r.fail(std::move(e));
      }
    }
  }
  read_response_format(r, &req->response_format);
  read_logprobs(r, req->endpoint, &req->top_logprobs);
}

}  // namespace

std::variant<OpenAiRequest, ApiError> parse_openai_request(Endpoint endpoint, const json& body,
                                                           const std::string& model_id,
                                                           const std::vector<std::string>& aliases) {
  OpenAiRequest req;
  req.endpoint = endpoint;
  req.chat = endpoint == Endpoint::Chat;
  // OpenAI's defaults, not llama.cpp's: no top-k or min-p unless the client or the model
  // (its own defaults, make_job()) asks.
  req.sampling.temperature = 1.0f;
  req.sampling.top_p = 1.0f;
  req.sampling.top_k = 0;
  req.sampling.min_p = 0.0f;
  FieldReader r(body);

  if (const json* model = r.get("model")) {
    if (!model->is_string()) {
      r.fail_type("model", "a string", *model);
    } else if (const std::string& name = model->get_ref<const std::string&>();
               name != model_id && std::find(aliases.begin(), aliases.end(), name) == aliases.end()) {
      return not_found(
          "The model '" + model->get<std::string>() + "' does not exist; this server has '" + model_id + "'",
          "model_not_found");
    }
  }
  if (endpoint == Endpoint::Chat) {
    read_tools(r, &req) && read_messages(r, &req.messages) && check_tool_messages(r, req.messages);
    read_template_kwargs(r, &req.chat_options);
    read_reasoning(r, &req);
  } else {
    read_prompt(r, &req.prompt);
  }
  read_sampling(r, &req.sampling, &req.sampling_given, &req.max_tokens);
  read_stop(r, &req.stop);
  read_serving(r, &req);
  read_output(r, &req);
  if (r.error()) return *r.error();
  if (Status s = req.sampling.validate(); !s.ok()) return bad_request(s.error().message);
  return req;
}

}  // namespace hearth::ipc
