#include "wire.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace hearth::client::wire {
namespace {

// Ordered: the caller's tools and schemas go out with their keys in the caller's order (the
// order of a schema's properties is the order the model writes them in).
using Json = nlohmann::ordered_json;

// Floats go out with the digits the caller wrote (0.7f as 0.7, not 0.699999988).
double clean(float f) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.7g", static_cast<double>(f));
  return std::strtod(text, nullptr);
}

Outcome add_sampling(const hearth_request_options& o, bool stream, Json& body) {
  for (float f : {o.temperature, o.top_p, o.min_p, o.presence_penalty, o.frequency_penalty, o.repetition_penalty}) {
    if (!std::isfinite(f)) return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "options: a number is not finite");
  }
  if (o.n_stop > 0 && o.stop == nullptr) return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "options: stop is NULL");
  if (o.model != nullptr && *o.model != '\0') body["model"] = o.model;
  if (o.max_tokens > 0) body["max_tokens"] = o.max_tokens;
  if (o.temperature >= 0) body["temperature"] = clean(o.temperature);
  if (o.top_p >= 0) body["top_p"] = clean(o.top_p);
  if (o.top_k >= 0) body["top_k"] = o.top_k;
  if (o.min_p >= 0) body["min_p"] = clean(o.min_p);
  if (o.has_seed) body["seed"] = o.seed;
  if (o.n_stop > 0) {
    Json stop = Json::array();
    for (size_t i = 0; i < o.n_stop; ++i) {
      if (o.stop[i] == nullptr) return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "options: a stop string is NULL");
      stop.push_back(o.stop[i]);
    }
    body["stop"] = std::move(stop);
  }
  if (o.presence_penalty != 0) body["presence_penalty"] = clean(o.presence_penalty);
  if (o.frequency_penalty != 0) body["frequency_penalty"] = clean(o.frequency_penalty);
  if (o.repetition_penalty != 1) body["repetition_penalty"] = clean(o.repetition_penalty);
  body["stream"] = stream;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return Outcome::success();
}

// JSON text the caller gave (options.tools, options.json_schema, ...), for `what` in the
// message.
Outcome parse_caller_json(const char* text, const std::string& what, Json* out) {
  try {
    *out = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, what + " is not JSON: " + e.what());
  }
  return Outcome::success();
}

// tools, tool_choice and parallel_tool_calls (chat only), and response_format.
Outcome add_format(const hearth_request_options& o, Route route, Json& body) {
  const bool has_choice = o.tool_choice != nullptr && *o.tool_choice != '\0';
  if (route != Route::kChat && (o.tools != nullptr || has_choice || o.parallel_tool_calls >= 0)) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                            "options: tools, tool_choice and parallel_tool_calls are for chats, not completions");
  }
  if (o.tools != nullptr) {
    Json tools;
    if (Outcome r = parse_caller_json(o.tools, "options.tools", &tools); !r.ok()) return r;
    if (!tools.is_array()) {
      return Outcome::failure(
          HEARTH_ERR_INVALID_ARGUMENT,
          R"(options.tools must be a JSON array of tools: [{"type": "function", "function": ...}])");
    }
    body["tools"] = std::move(tools);
  }
  if (has_choice) {
    const std::string_view choice = o.tool_choice;
    if (choice == "auto" || choice == "none" || choice == "required") {
      body["tool_choice"] = choice;
    } else if (choice.front() == '{') {
      Json object;
      if (Outcome r = parse_caller_json(o.tool_choice, "options.tool_choice", &object); !r.ok()) return r;
      body["tool_choice"] = std::move(object);
    } else {
      body["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice}}}};
    }
  }
  if (o.parallel_tool_calls >= 0) body["parallel_tool_calls"] = o.parallel_tool_calls > 0;

  if (o.json_schema != nullptr && o.response_format != HEARTH_FORMAT_JSON_SCHEMA) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                            "options.json_schema is set but response_format is not HEARTH_FORMAT_JSON_SCHEMA");
  }
  switch (o.response_format) {
    case HEARTH_FORMAT_TEXT:
      return Outcome::success();
    case HEARTH_FORMAT_JSON_OBJECT:
      body["response_format"] = {{"type", "json_object"}};
      return Outcome::success();
    case HEARTH_FORMAT_JSON_SCHEMA: {
      if (o.json_schema == nullptr) {
        return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                                "options: HEARTH_FORMAT_JSON_SCHEMA needs options.json_schema");
      }
      Json spec = {{"schema", nullptr}};
      if (Outcome r = parse_caller_json(o.json_schema, "options.json_schema", &spec["schema"]); !r.ok()) return r;
      if (o.json_schema_strict) spec["strict"] = true;
      body["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(spec)}};
      return Outcome::success();
    }
    default:
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              "options.response_format must be an enum hearth_response_format value, got " +
                                  std::to_string(o.response_format));
  }
}

// nlohmann_json throws type_error 316 on text that is not UTF-8; that is the caller's input.
Outcome dump(const Json& body, std::string* out) {
  try {
    *out = body.dump();
  } catch (const Json::type_error&) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "text is not valid UTF-8");
  }
  return Outcome::success();
}

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

void read_number(const Json& object, const char* key, double* out) {
  if (const Json* v = member(object, key); v && v->is_number()) *out = v->get<double>();
}
void read_count(const Json& object, const char* key, int64_t* out) {
  const Json* v = member(object, key);
  if (v == nullptr) return;
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9e18) *out = static_cast<int64_t>(d);
  }
}

// usage and timings, wherever they appear (the last chunk, the finish chunk, a response).
void read_stats(const Json& object, hearth_stats* stats) {
  if (const Json* usage = member(object, "usage")) {
    read_count(*usage, "prompt_tokens", &stats->prompt_tokens);
    read_count(*usage, "completion_tokens", &stats->completion_tokens);
    if (const Json* details = member(*usage, "prompt_tokens_details")) {
      read_count(*details, "cached_tokens", &stats->cached_tokens);
    }
  }
  if (const Json* t = member(object, "timings")) {
    read_number(*t, "ttft_ms", &stats->ttft_ms);
    read_number(*t, "prefill_ms", &stats->prefill_ms);
    read_number(*t, "decode_ms", &stats->decode_ms);
    read_number(*t, "prefill_tok_s", &stats->prefill_tok_s);
    read_number(*t, "decode_tok_s", &stats->decode_tok_s);
    read_number(*t, "prefill_gops", &stats->prefill_gops);
    read_number(*t, "decode_gb_s", &stats->decode_gb_s);
    read_number(*t, "queue_ms", &stats->queue_ms);
    read_number(*t, "cache_restore_ms", &stats->cache_restore_ms);
    read_count(*t, "cache_restore_bytes", &stats->cache_restore_bytes);
    read_count(*t, "prefilled_tokens", &stats->prefilled_tokens);
    read_count(*t, "draft_tokens", &stats->draft_tokens);
    read_count(*t, "accepted_tokens", &stats->accepted_tokens);
    if (const Json* cached = member(*t, "cached_tokens")) {
      read_count(*cached, "memory", &stats->cached_memory_tokens);
      read_count(*cached, "disk", &stats->cached_disk_tokens);
    }
    if (const Json* itl = member(*t, "itl_ms")) {
      read_number(*itl, "mean", &stats->itl_mean_ms);
      read_number(*itl, "p50", &stats->itl_p50_ms);
      read_number(*itl, "p95", &stats->itl_p95_ms);
      read_number(*itl, "max", &stats->itl_max_ms);
    }
  }
}

void set_finish_reason(std::string_view reason, hearth_stats* stats) {
  stats->finish_reason = finish_reason_code(reason);
  size_t n = std::min(reason.size(), sizeof(stats->finish_reason_text) - 1);
  std::memcpy(stats->finish_reason_text, reason.data(), n);
  stats->finish_reason_text[n] = '\0';
}

Outcome parse_json(std::string_view text, Json* out) {
  *out = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    std::string start(text.substr(0, 80));
    return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon sent invalid JSON: " + start);
  }
  return Outcome::success();
}

std::string error_message(const Json& object) {
  const Json* error = member(object, "error");
  if (error == nullptr) return {};
  if (error->is_string()) return error->get<std::string>();
  if (const Json* m = member(*error, "message"); m && m->is_string()) return m->get<std::string>();
  return error->dump();
}

const std::string* string_member(const Json& object, const char* key) {
  const Json* v = member(object, key);
  return v != nullptr && v->is_string() ? &v->get_ref<const std::string&>() : nullptr;
}

// A call's arguments: JSON text (OpenAI's form), or an object a lenient server sent as is.
void append_arguments(const Json& function, std::string* out) {
  const Json* args = member(function, "arguments");
  if (args == nullptr) return;
  if (args->is_string()) {
    out->append(args->get_ref<const std::string&>());
  } else {
    out->append(args->dump());
  }
}

// message.tool_calls of a whole answer: [{"id", "type", "function": {"name", "arguments"}}].
Outcome read_whole_calls(const Json& list, std::vector<ToolCall>* calls) {
  if (!list.is_array()) return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's tool_calls is not an array");
  for (const Json& c : list) {
    const Json* function = member(c, "function");
    const std::string* name = function != nullptr ? string_member(*function, "name") : nullptr;
    if (name == nullptr) return Outcome::failure(HEARTH_ERR_PROTOCOL, "a tool call of the daemon's has no name");
    ToolCall call;
    if (const std::string* id = string_member(c, "id")) call.id = *id;
    call.name = *name;
    append_arguments(*function, &call.arguments);
    calls->push_back(std::move(call));
  }
  return Outcome::success();
}

// delta.tool_calls of a stream chunk: [{"index", "id", "type", "function": {"name",
// "arguments"}}] opens call `index` (the next one); [{"index", "function": {"arguments"}}]
// appends to it.
Outcome read_call_pieces(const Json& list, std::vector<ToolCall>* calls) {
  if (!list.is_array()) return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's tool_calls is not an array");
  for (const Json& c : list) {
    const Json* index = member(c, "index");
    if (index == nullptr || !index->is_number_unsigned() || index->get<uint64_t>() > calls->size()) {
      return Outcome::failure(HEARTH_ERR_PROTOCOL, "a streamed tool call has no index, or not the next one");
    }
    const size_t i = index->get<size_t>();
    if (i == calls->size()) calls->emplace_back();
    ToolCall& call = (*calls)[i];
    if (const std::string* id = string_member(c, "id")) call.id = *id;
    if (const Json* function = member(c, "function")) {
      if (const std::string* name = string_member(*function, "name")) call.name += *name;
      append_arguments(*function, &call.arguments);
    }
  }
  return Outcome::success();
}

// The choice's text: delta.content (chat stream), message.content (chat response) or text;
// a chat's reasoning (reasoning_content beside content) and tool calls.
Outcome read_choice(const Json& object, Route route, bool stream, Answer* answer, hearth_stats* stats) {
  std::string* text = answer->text;
  std::vector<ToolCall>* calls = answer->calls;
  const Json* choices = member(object, "choices");
  if (choices == nullptr || !choices->is_array()) {
    return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's answer has no choices array");
  }
  if (choices->empty()) return Outcome::success();  // the usage-only chunk
  const Json& choice = choices->front();
  const Json* content = nullptr;
  if (route == Route::kCompletion) {
    content = member(choice, "text");
  } else if (const Json* m = member(choice, stream ? "delta" : "message")) {
    content = member(*m, "content");
    if (const Json* r = member(*m, "reasoning_content")) {
      if (!r->is_string()) return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's reasoning is not a string");
      if (answer->reasoning != nullptr) answer->reasoning->append(r->get_ref<const std::string&>());
    }
    if (const Json* list = member(*m, "tool_calls")) {
      Outcome o = stream ? read_call_pieces(*list, calls) : read_whole_calls(*list, calls);
      if (!o.ok()) return o;
    }
  }
  if (content != nullptr) {
    if (!content->is_string()) return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's text is not a string");
    text->append(content->get_ref<const std::string&>());
  }
  if (const Json* reason = member(choice, "finish_reason"); reason && reason->is_string()) {
    set_finish_reason(reason->get_ref<const std::string&>(), stats);
  }
  return Outcome::success();
}

}  // namespace

Outcome read_options(const hearth_request_options* in, hearth_request_options* out) {
  hearth_request_options_init(out);
  if (in == nullptr) return Outcome::success();
  if (in->struct_size < offsetof(hearth_request_options, model) + sizeof(in->model)) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                            "options.struct_size is too small: initialise with hearth_request_options_init");
  }
  size_t n = std::min(in->struct_size, sizeof(hearth_request_options));
  std::memcpy(static_cast<void*>(out), in, n);
  out->struct_size = sizeof(hearth_request_options);
  return Outcome::success();
}

namespace {

Outcome message_list(const hearth_message* messages, size_t n_messages, Json* list) {
  if (messages == nullptr || n_messages == 0) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "at least one message is needed");
  }
  *list = Json::array();
  for (size_t i = 0; i < n_messages; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              "message " + std::to_string(i) + " has a NULL role or content");
    }
    list->push_back({{"role", messages[i].role}, {"content", messages[i].content}});
  }
  return Outcome::success();
}

Outcome tool_call_list(const hearth_chat_message& m, const std::string& where, Json* out) {
  if (m.tool_calls == nullptr) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, where + " has n_tool_calls but tool_calls is NULL");
  }
  *out = Json::array();
  for (size_t k = 0; k < m.n_tool_calls; ++k) {
    const hearth_tool_call& c = m.tool_calls[k];
    if (c.id == nullptr || c.name == nullptr || c.arguments == nullptr) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              where + ", tool call " + std::to_string(k) + " has a NULL id, name or arguments");
    }
    out->push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return Outcome::success();
}

// Each element is read with the first one's struct_size as the stride (an older caller's
// smaller struct), and only the members that fit; the rest keep hearth_chat_message_init's.
Outcome chat_message_list(const hearth_chat_message* messages, size_t n_messages, Json* list) {
  if (messages == nullptr || n_messages == 0) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "at least one message is needed");
  }
  const size_t stride = messages[0].struct_size;
  if (stride < offsetof(hearth_chat_message, content) + sizeof(messages[0].content)) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                            "message 0: struct_size is too small: initialise with hearth_chat_message_init");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(messages);
  *list = Json::array();
  for (size_t i = 0; i < n_messages; ++i) {
    const std::string where = "message " + std::to_string(i);
    hearth_chat_message m;
    hearth_chat_message_init(&m);
    std::memcpy(static_cast<void*>(&m), bytes + i * stride, std::min(stride, sizeof(m)));
    if (m.struct_size != stride) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              where + ": struct_size differs from message 0's (initialise every one alike)");
    }
    if (m.role == nullptr) return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, where + " has a NULL role");
    const bool calls = m.n_tool_calls > 0;
    if (m.content == nullptr && !calls) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              where + " has a NULL content (only an assistant's tool calls may go without)");
    }
    Json message = {{"role", m.role}, {"content", m.content != nullptr ? Json(m.content) : Json(nullptr)}};
    if (calls) {
      if (Outcome o = tool_call_list(m, where, &message["tool_calls"]); !o.ok()) return o;
    }
    if (std::strcmp(m.role, "tool") == 0 && m.tool_call_id == nullptr) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              where + " (a tool result) has no tool_call_id: the id of the call it answers");
    }
    if (m.tool_call_id != nullptr) message["tool_call_id"] = m.tool_call_id;
    list->push_back(std::move(message));
  }
  return Outcome::success();
}

// thinking and thinking_budget_tokens (chats only): OpenAI's reasoning_effort "none" turns
// thinking off, llama-server's chat_template_kwargs turns it on (a level would mean nothing
// to a template that only has enable_thinking), thinking_budget_tokens bounds it.
Outcome add_thinking(const hearth_request_options& o, Json& body) {
  switch (o.thinking) {
    case HEARTH_THINKING_DEFAULT:
      break;
    case HEARTH_THINKING_OFF:
      body["reasoning_effort"] = "none";
      break;
    case HEARTH_THINKING_ON:
      body["chat_template_kwargs"] = {{"enable_thinking", true}};
      break;
    default:
      return Outcome::failure(
          HEARTH_ERR_INVALID_ARGUMENT,
          "options.thinking must be an enum hearth_thinking value, got " + std::to_string(o.thinking));
  }
  if (o.thinking_budget_tokens < 0) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "options.thinking_budget_tokens must be >= 0 (0: not sent)");
  }
  if (o.thinking_budget_tokens > 0) body["thinking_budget_tokens"] = o.thinking_budget_tokens;
  return Outcome::success();
}

Outcome chat_request(Json list, const hearth_request_options& options, bool stream, std::string* out) {
  Json body = {{"messages", std::move(list)}};
  if (Outcome o = add_sampling(options, stream, body); !o.ok()) return o;
  if (Outcome o = add_thinking(options, body); !o.ok()) return o;
  if (Outcome o = add_format(options, Route::kChat, body); !o.ok()) return o;
  return dump(body, out);
}

}  // namespace

Outcome chat_body(const hearth_message* messages, size_t n_messages, const hearth_request_options& options, bool stream,
                  std::string* out) {
  Json list;
  if (Outcome o = message_list(messages, n_messages, &list); !o.ok()) return o;
  return chat_request(std::move(list), options, stream, out);
}

Outcome chat_v2_body(const hearth_chat_message* messages, size_t n_messages, const hearth_request_options& options,
                     bool stream, std::string* out) {
  Json list;
  if (Outcome o = chat_message_list(messages, n_messages, &list); !o.ok()) return o;
  return chat_request(std::move(list), options, stream, out);
}

Outcome completion_body(const char* prompt, const hearth_request_options& options, bool stream, std::string* out) {
  if (prompt == nullptr) return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "prompt is NULL");
  if (options.thinking != HEARTH_THINKING_DEFAULT || options.thinking_budget_tokens != 0) {
    return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                            "options: thinking and thinking_budget_tokens are for chats, not completions");
  }
  Json body = {{"prompt", prompt}};
  if (Outcome o = add_sampling(options, stream, body); !o.ok()) return o;
  if (Outcome o = add_format(options, Route::kCompletion, body); !o.ok()) return o;
  return dump(body, out);
}

namespace {

// A stream chunk or a whole response: an error object, else the choice and the stats.
Outcome parse_answer(std::string_view data, Route route, bool stream, Answer* answer, hearth_stats* stats) {
  Json j;
  if (Outcome o = parse_json(data, &j); !o.ok()) return o;
  if (std::string m = error_message(j); !m.empty()) return Outcome::failure(HEARTH_ERR_SERVER, m);
  if (Outcome o = read_choice(j, route, stream, answer, stats); !o.ok()) return o;
  read_stats(j, stats);
  return Outcome::success();
}

}  // namespace

Outcome parse_chunk(std::string_view data, Route route, Answer* piece, hearth_stats* stats) {
  return parse_answer(data, route, /*stream=*/true, piece, stats);
}

Outcome parse_response(std::string_view body, Route route, Answer* whole, hearth_stats* stats) {
  return parse_answer(body, route, /*stream=*/false, whole, stats);
}

Outcome error_from_response(int status, std::string_view body) {
  int code = HEARTH_ERR_HTTP;
  switch (status) {
    case 429:
      code = HEARTH_ERR_BUSY;
      break;
    case 503:
      code = HEARTH_ERR_UNAVAILABLE;
      break;
    case 400:
    case 404:
    case 413:
    case 422:
      code = HEARTH_ERR_BAD_REQUEST;
      break;
    case 500:
      code = HEARTH_ERR_SERVER;
      break;
    default:
      break;
  }
  std::string message;
  Json object = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!object.is_discarded()) message = error_message(object);
  if (message.empty()) message = std::string(body.substr(0, 200));
  if (message.empty()) message = "no details";
  return Outcome::failure(code, message + " (HTTP " + std::to_string(status) + ")");
}

Outcome parse_models(std::string_view body, std::vector<Model>* out) {
  Json list;
  if (Outcome o = parse_json(body, &list); !o.ok()) return o;
  const Json* data = member(list, "data");
  if (data == nullptr || !data->is_array())
    return Outcome::failure(HEARTH_ERR_PROTOCOL, "/v1/models has no data array");
  for (const Json& entry : *data) {
    const Json* id = member(entry, "id");
    if (id == nullptr || !id->is_string())
      return Outcome::failure(HEARTH_ERR_PROTOCOL, "/v1/models: a model has no id");
    Model m;
    m.id = id->get<std::string>();
    if (const Json* owner = member(entry, "owned_by"); owner && owner->is_string())
      m.owned_by = owner->get<std::string>();
    read_count(entry, "created", &m.created);
    out->push_back(std::move(m));
  }
  return Outcome::success();
}

Outcome warm_body(const char* prompt, const hearth_message* messages, size_t n_messages, std::string* out) {
  Json body;
  if (prompt != nullptr) {
    body["prompt"] = prompt;
  } else {
    if (Outcome o = message_list(messages, n_messages, &body["messages"]); !o.ok()) return o;
  }
  return dump(body, out);
}

Outcome parse_warm(std::string_view body, hearth_warm_result* out) {
  Json j;
  if (Outcome o = parse_json(body, &j); !o.ok()) return o;
  const Json* tokens = member(j, "tokens");
  if (tokens == nullptr || !tokens->is_number_integer()) {
    return Outcome::failure(HEARTH_ERR_PROTOCOL, "the daemon's warm answer has no token count");
  }
  read_count(j, "tokens", &out->tokens);
  if (const Json* cached = member(j, "cached_tokens")) {
    read_count(*cached, "memory", &out->cached_memory_tokens);
    read_count(*cached, "disk", &out->cached_disk_tokens);
  }
  read_count(j, "prefilled_tokens", &out->prefilled_tokens);
  read_count(j, "chunks_written", &out->chunks_written);
  if (const Json* t = member(j, "timings")) {
    read_number(*t, "cache_restore_ms", &out->cache_restore_ms);
    read_count(*t, "cache_restore_bytes", &out->cache_restore_bytes);
    read_number(*t, "prefill_ms", &out->prefill_ms);
  }
  return Outcome::success();
}

int finish_reason_code(std::string_view reason) {
  if (reason.empty()) return HEARTH_FINISH_NONE;
  if (reason == "stop") return HEARTH_FINISH_STOP;
  if (reason == "length") return HEARTH_FINISH_LENGTH;
  if (reason == "tool_calls") return HEARTH_FINISH_TOOL_CALLS;
  return HEARTH_FINISH_OTHER;
}

}  // namespace hearth::client::wire
