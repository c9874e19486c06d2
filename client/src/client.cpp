// The C API (hearth/client.h) on top of Transport (HTTP over the Unix socket), SseParser and
// the wire format. Every exported function catches everything: no exception crosses the C
// boundary.
#include "hearth/client.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cancel.h"
#include "discovery.h"
#include "handle.h"
#include "outcome.h"
#include "sse.h"
#include "transport.h"
#include "wire.h"

using hearth::client::CancelState;
using hearth::client::exchange_json;
using hearth::client::guarded;
using hearth::client::HttpRequest;
using hearth::client::Outcome;
using hearth::client::ResponseSink;
using hearth::client::SseParser;
using hearth::client::Transport;
namespace wire = hearth::client::wire;

namespace {

// Non-streamed bodies (responses, errors, model lists) larger than this are a protocol error.
constexpr size_t kMaxBodyBytes = 64u << 20;

// Collects a whole response body.
class BodySink : public ResponseSink {
 public:
  Outcome on_head(int status, const std::string&) override {
    status_ = status;
    return Outcome::success();
  }
  Outcome on_body(const char* data, size_t size) override {
    if (body_.size() + size > kMaxBodyBytes) return Outcome::failure(HEARTH_ERR_PROTOCOL, "response body too large");
    body_.append(data, size);
    return Outcome::success();
  }
  Outcome on_end() override { return Outcome::success(); }

  int status() const { return status_; }
  const std::string& body() const { return body_; }

 private:
  int status_ = 0;
  std::string body_;
};

// Receives a generation response: a stream of server-sent events (each piece of text goes
// to the callback at once) or, for non-streamed requests and error statuses, a JSON body.
class GenerationSink : public ResponseSink {
 public:
  GenerationSink(wire::Route route, bool stream, hearth_text_callback on_text, hearth_text_callback on_reasoning,
                 void* user_data, bool keep_text, hearth_stats* stats)
      : route_(route),
        stream_(stream),
        on_text_(on_text),
        on_reasoning_(on_reasoning),
        user_data_(user_data),
        keep_text_(keep_text),
        stats_(stats),
        sse_([this](std::string_view data) { return on_event(data); }) {}

  Outcome on_head(int status, const std::string& content_type) override {
    status_ = status;
    if (status / 100 != 2) {
      mode_ = Mode::kError;
    } else if (stream_ && content_type.rfind("text/event-stream", 0) == 0) {
      mode_ = Mode::kEvents;
    } else {
      mode_ = Mode::kWhole;  // also a daemon that answers a stream request with plain JSON
    }
    return Outcome::success();
  }

  Outcome on_body(const char* data, size_t size) override {
    if (mode_ == Mode::kEvents) return sse_.feed(data, size);
    if (body_.size() + size > kMaxBodyBytes) return Outcome::failure(HEARTH_ERR_PROTOCOL, "response body too large");
    body_.append(data, size);
    return Outcome::success();
  }

  Outcome on_end() override {
    switch (mode_) {
      case Mode::kError:
        return wire::error_from_response(status_, body_);
      case Mode::kWhole: {
        std::string text, reasoning;
        wire::Answer whole{&text, &calls_, on_reasoning_ != nullptr ? &reasoning : nullptr};
        if (Outcome o = wire::parse_response(body_, route_, &whole, stats_); !o.ok()) return o;
        if (Outcome o = deliver_reasoning(reasoning); !o.ok()) return o;
        return deliver(text);
      }
      case Mode::kEvents:
        if (Outcome o = sse_.finish(); !o.ok()) return o;
        if (!done_) return Outcome::failure(HEARTH_ERR_PROTOCOL, "the stream ended without data: [DONE]");
        return Outcome::success();
    }
    return Outcome::success();
  }

  int status() const { return status_; }
  std::string& text() { return text_; }
  const std::vector<wire::ToolCall>& calls() const { return calls_; }

 private:
  enum class Mode { kError, kWhole, kEvents };

  Outcome on_event(std::string_view data) {
    if (done_) return Outcome::success();  // nothing follows [DONE]
    if (data == "[DONE]") {
      done_ = true;
      return Outcome::success();
    }
    piece_.clear();
    reasoning_.clear();
    wire::Answer piece{&piece_, &calls_, on_reasoning_ != nullptr ? &reasoning_ : nullptr};
    if (Outcome o = wire::parse_chunk(data, route_, &piece, stats_); !o.ok()) return o;
    if (Outcome o = deliver_reasoning(reasoning_); !o.ok()) return o;
    return deliver(piece_);
  }

  // Reasoning goes to its own callback, never into the answer's text.
  Outcome deliver_reasoning(const std::string& piece) {
    if (piece.empty() || on_reasoning_ == nullptr) return Outcome::success();
    if (on_reasoning_(piece.data(), piece.size(), user_data_) != 0) {
      return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled by the reasoning callback");
    }
    return Outcome::success();
  }

  Outcome deliver(const std::string& piece) {
    if (piece.empty()) return Outcome::success();
    if (keep_text_) text_ += piece;
    if (on_text_ != nullptr && on_text_(piece.data(), piece.size(), user_data_) != 0) {
      return Outcome::failure(HEARTH_ERR_CANCELLED, "cancelled by the text callback");
    }
    return Outcome::success();
  }

  wire::Route route_;
  bool stream_;
  hearth_text_callback on_text_;
  hearth_text_callback on_reasoning_;
  void* user_data_;
  bool keep_text_;
  hearth_stats* stats_;
  SseParser sse_;
  Mode mode_ = Mode::kError;
  int status_ = 0;
  bool done_ = false;
  std::string body_;
  std::string piece_;
  std::string reasoning_;
  std::string text_;
  std::vector<wire::ToolCall> calls_;  // as far as the answer has told them
};

bool stats_usable(const hearth_stats* stats) {
  return stats == nullptr || stats->struct_size >= offsetof(hearth_stats, completion_tokens);
}

// Copies what fits in the caller's struct_size (the caller's struct may be older and smaller).
void copy_stats(const hearth_stats& from, hearth_stats* to) {
  if (to == nullptr) return;
  size_t size = to->struct_size;
  std::memcpy(static_cast<void*>(to), &from, std::min(size, sizeof(hearth_stats)));
  to->struct_size = size;
}

// The calls as one malloc'ed block: the array, then every string it points to (one
// hearth_free releases it all, as hearth_client_list_models' block).
Outcome copy_calls(const std::vector<wire::ToolCall>& calls, hearth_tool_call** out) {
  *out = nullptr;
  if (calls.empty()) return Outcome::success();
  size_t bytes = calls.size() * sizeof(hearth_tool_call);
  for (const wire::ToolCall& c : calls) bytes += c.id.size() + c.name.size() + c.arguments.size() + 3;
  auto* block = static_cast<hearth_tool_call*>(std::malloc(bytes));
  if (block == nullptr) return Outcome::failure(HEARTH_ERR_NOMEM, "out of memory");
  char* strings = reinterpret_cast<char*>(block + calls.size());
  auto copy_string = [&strings](const std::string& s) {
    char* at = strings;
    std::memcpy(at, s.c_str(), s.size() + 1);
    strings += s.size() + 1;
    return at;
  };
  for (size_t i = 0; i < calls.size(); ++i) {
    block[i].id = copy_string(calls[i].id);
    block[i].name = copy_string(calls[i].name);
    block[i].arguments = copy_string(calls[i].arguments);
  }
  *out = block;
  return Outcome::success();
}

// Where a generation's answer goes: any of them may be NULL.
struct AnswerOut {
  char** text = nullptr;
  hearth_tool_call** calls = nullptr;
  size_t* n_calls = nullptr;
  hearth_stats* stats = nullptr;
};

// Shared by chat and completion: one POST, streamed when on_text is set.
Outcome generate(hearth_client* client, wire::Route route, const std::string& body, bool stream,
                 hearth_text_callback on_text, hearth_text_callback on_reasoning, void* user_data,
                 const AnswerOut& out) {
  hearth_stats stats;
  hearth_stats_init(&stats);
  GenerationSink sink(route, stream, on_text, on_reasoning, user_data, out.text != nullptr, &stats);
  HttpRequest request;
  request.method = "POST";
  request.target = route == wire::Route::kChat ? "/v1/chat/completions" : "/v1/completions";
  request.body = body;
  request.expect_stream = stream;

  auto start = std::chrono::steady_clock::now();
  Outcome o = client->transport.exchange(client->socket_path, client->cancel, request, sink);
  stats.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  client->http_status = sink.status();
  copy_stats(stats, out.stats);
  if (!o.ok()) return o;
  if (out.calls != nullptr) {
    if (Outcome c = copy_calls(sink.calls(), out.calls); !c.ok()) return c;
    *out.n_calls = sink.calls().size();
  }
  if (out.text != nullptr) {
    std::string& text = sink.text();
    char* copy = static_cast<char*>(std::malloc(text.size() + 1));
    if (copy == nullptr) {
      if (out.calls != nullptr) {
        std::free(*out.calls);
        *out.calls = nullptr;
        *out.n_calls = 0;
      }
      return Outcome::failure(HEARTH_ERR_NOMEM, "out of memory");
    }
    std::memcpy(copy, text.data(), text.size());
    copy[text.size()] = '\0';
    *out.text = copy;
  }
  return Outcome::success();
}

// What chat and completion share: argument checks, options, then the request; only the
// body differs. build_body(options, stream, &body) -> Outcome.
template <class BuildBody>
int generation_call(hearth_client* client, wire::Route route, const hearth_request_options* options,
                    hearth_text_callback on_text, void* user_data, const AnswerOut& out, BuildBody build_body) {
  if (out.text != nullptr) *out.text = nullptr;
  if (out.calls != nullptr) *out.calls = nullptr;
  if (out.n_calls != nullptr) *out.n_calls = 0;
  if (client == nullptr || (out.calls == nullptr) != (out.n_calls == nullptr)) return HEARTH_ERR_INVALID_ARGUMENT;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    if (!stats_usable(out.stats)) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "stats.struct_size is too small: use hearth_stats_init");
    }
    hearth_request_options o;
    if (Outcome r = wire::read_options(options, &o); !r.ok()) return r;
    const bool stream = on_text != nullptr;
    std::string body;
    if (Outcome r = build_body(o, stream, &body); !r.ok()) return r;
    return generate(client, route, body, stream, on_text, route == wire::Route::kChat ? o.on_reasoning : nullptr,
                    user_data, out);
  });
}

}  // namespace

namespace hearth::client {

Outcome exchange_json(hearth_client* client, const char* method, const char* target, const std::string& body,
                      std::string* out) {
  BodySink sink;
  HttpRequest request;
  request.method = method;
  request.target = target;
  request.body = body;
  Outcome o = client->transport.exchange(client->socket_path, client->cancel, request, sink);
  client->http_status = sink.status();
  if (!o.ok()) return o;
  if (sink.status() / 100 != 2) return wire::error_from_response(sink.status(), sink.body());
  *out = sink.body();
  return Outcome::success();
}

int get_json_text(hearth_client* client, const char* target, char** out_json) {
  if (client == nullptr || out_json == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  *out_json = nullptr;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    std::string body;
    if (Outcome o = exchange_json(client, "GET", target, "", &body); !o.ok()) return o;
    char* copy = static_cast<char*>(std::malloc(body.size() + 1));
    if (copy == nullptr) return Outcome::failure(HEARTH_ERR_NOMEM, "out of memory");
    std::memcpy(copy, body.c_str(), body.size() + 1);
    *out_json = copy;
    return Outcome::success();
  });
}

}  // namespace hearth::client

extern "C" {

const char* hearth_strerror(int code) {
  switch (code) {
    case HEARTH_OK:
      return "success";
    case HEARTH_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case HEARTH_ERR_NOMEM:
      return "out of memory";
    case HEARTH_ERR_NO_DAEMON:
      return "no daemon is listening on the socket";
    case HEARTH_ERR_IO:
      return "connection to the daemon failed";
    case HEARTH_ERR_PROTOCOL:
      return "unexpected answer from the daemon (protocol error)";
    case HEARTH_ERR_HTTP:
      return "the daemon answered with an HTTP error";
    case HEARTH_ERR_CANCELLED:
      return "cancelled";
    case HEARTH_ERR_BUSY:
      return "the daemon is busy (queue full); try again later";
    case HEARTH_ERR_UNAVAILABLE:
      return "the daemon is not ready (loading its model or shutting down)";
    case HEARTH_ERR_BAD_REQUEST:
      return "the daemon rejected the request";
    case HEARTH_ERR_SERVER:
      return "the daemon failed to complete the request";
    case HEARTH_ERR_INTERNAL:
      return "internal error in libhearth-client";
    case HEARTH_ERR_TIMEOUT:
      return "the daemon did not answer in time (read timeout)";
    default:
      return "unknown error";
  }
}

const char* hearth_client_version(void) {
  return HEARTH_CLIENT_VERSION;
}

void hearth_free(void* ptr) {
  std::free(ptr);
}

void hearth_request_options_init_sized(hearth_request_options* options, size_t struct_size) {
  if (options == nullptr || struct_size < sizeof(options->struct_size)) return;
  hearth_request_options defaults;
  std::memset(static_cast<void*>(&defaults), 0, sizeof(defaults));
  defaults.temperature = -1;
  defaults.top_p = -1;
  defaults.top_k = -1;
  defaults.min_p = -1;
  defaults.repetition_penalty = 1;
  defaults.parallel_tool_calls = -1;
  defaults.response_format = HEARTH_FORMAT_TEXT;
  // The caller's bytes, whatever their number: zero (a later header's members default to
  // zero too), then the defaults of the members this version knows.
  std::memset(static_cast<void*>(options), 0, struct_size);
  std::memcpy(static_cast<void*>(options), &defaults, std::min(struct_size, sizeof(defaults)));
  options->struct_size = struct_size;
}

// The exported function of 0.1-0.3 (the header's name is now a macro): the struct as it was.
static_assert(offsetof(hearth_request_options, tools) == 80, "sizeof(hearth_request_options) in 0.3 (x86-64, arm64)");
void(hearth_request_options_init)(hearth_request_options* options) {
  hearth_request_options_init_sized(options, offsetof(hearth_request_options, tools));
}

void hearth_chat_message_init(hearth_chat_message* message) {
  if (message == nullptr) return;
  std::memset(static_cast<void*>(message), 0, sizeof(*message));
  message->struct_size = sizeof(*message);
}

void hearth_stats_init_sized(hearth_stats* stats, size_t struct_size) {
  if (stats == nullptr || struct_size < sizeof(stats->struct_size)) return;
  std::memset(static_cast<void*>(stats), 0, struct_size);
  stats->struct_size = struct_size;
}

// The exported function of 0.1-0.5 (the header's name is now a macro): the struct as it was.
static_assert(offsetof(hearth_stats, draft_tokens) == 216, "sizeof(hearth_stats) in 0.5 (x86-64, arm64)");
void(hearth_stats_init)(hearth_stats* stats) {
  hearth_stats_init_sized(stats, offsetof(hearth_stats, draft_tokens));
}

int hearth_client_open(const char* socket_path, hearth_client** out) {
  if (out == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  try {
    auto client = std::make_unique<hearth_client>();
    client->socket_path = socket_path != nullptr && *socket_path != '\0' ? std::string(socket_path)
                                                                         : hearth::client::discover_socket_path();
    if (client->socket_path.size() > hearth::client::max_socket_path_bytes()) return HEARTH_ERR_INVALID_ARGUMENT;
    *out = client.release();
    return HEARTH_OK;
  } catch (const std::bad_alloc&) {
    return HEARTH_ERR_NOMEM;
  } catch (...) {
    return HEARTH_ERR_INTERNAL;
  }
}

void hearth_client_close(hearth_client* client) {
  delete client;
}

const char* hearth_client_socket_path(const hearth_client* client) {
  return client != nullptr ? client->socket_path.c_str() : "";
}

const char* hearth_client_last_error(const hearth_client* client) {
  return client != nullptr ? client->last_error.c_str() : "";
}

int hearth_client_http_status(const hearth_client* client) {
  return client != nullptr ? client->http_status : 0;
}

void hearth_client_cancel(hearth_client* client) {
  if (client != nullptr) client->cancel.cancel();
}

int hearth_client_set_timeout(hearth_client* client, int timeout_ms) {
  if (client == nullptr || timeout_ms < 0) return HEARTH_ERR_INVALID_ARGUMENT;
  client->transport.set_timeout_ms(timeout_ms);
  return HEARTH_OK;
}

int hearth_client_set_connect_retry(hearth_client* client, int retry_ms) {
  if (client == nullptr || retry_ms < 0) return HEARTH_ERR_INVALID_ARGUMENT;
  client->transport.set_connect_retry_ms(retry_ms);
  return HEARTH_OK;
}

int hearth_client_chat(hearth_client* client, const hearth_message* messages, size_t n_messages,
                       const hearth_request_options* options, hearth_text_callback on_text, void* user_data,
                       char** out_text, hearth_stats* out_stats) {
  return generation_call(client, wire::Route::kChat, options, on_text, user_data,
                         {out_text, nullptr, nullptr, out_stats},
                         [&](const hearth_request_options& o, bool stream, std::string* body) {
                           if (o.tools != nullptr) {
                             return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                                                     "hearth_client_chat cannot return tool calls: send tools "
                                                     "with hearth_client_chat_v2");
                           }
                           return wire::chat_body(messages, n_messages, o, stream, body);
                         });
}

int hearth_client_chat_v2(hearth_client* client, const hearth_chat_message* messages, size_t n_messages,
                          const hearth_request_options* options, hearth_text_callback on_text, void* user_data,
                          char** out_text, hearth_tool_call** out_calls, size_t* out_n_calls, hearth_stats* out_stats) {
  return generation_call(client, wire::Route::kChat, options, on_text, user_data,
                         {out_text, out_calls, out_n_calls, out_stats},
                         [&](const hearth_request_options& o, bool stream, std::string* body) {
                           return wire::chat_v2_body(messages, n_messages, o, stream, body);
                         });
}

int hearth_client_complete(hearth_client* client, const char* prompt, const hearth_request_options* options,
                           hearth_text_callback on_text, void* user_data, char** out_text, hearth_stats* out_stats) {
  return generation_call(client, wire::Route::kCompletion, options, on_text, user_data,
                         {out_text, nullptr, nullptr, out_stats},
                         [&](const hearth_request_options& o, bool stream, std::string* body) {
                           return wire::completion_body(prompt, o, stream, body);
                         });
}

int hearth_client_installed_models(hearth_client* client, char** out_json) {
  return hearth::client::get_json_text(client, "/api/models", out_json);
}

int hearth_client_list_models(hearth_client* client, hearth_model_info** out_models, size_t* out_count) {
  if (client == nullptr || out_models == nullptr || out_count == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  *out_models = nullptr;
  *out_count = 0;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    std::string body;
    if (Outcome o = exchange_json(client, "GET", "/v1/models", "", &body); !o.ok()) return o;
    std::vector<wire::Model> models;
    if (Outcome o = wire::parse_models(body, &models); !o.ok()) return o;
    if (models.empty()) return Outcome::success();
    // One block: the array, then every string it points to.
    size_t bytes = models.size() * sizeof(hearth_model_info);
    for (const wire::Model& m : models) bytes += m.id.size() + 1 + m.owned_by.size() + 1;
    auto* block = static_cast<hearth_model_info*>(std::malloc(bytes));
    if (block == nullptr) return Outcome::failure(HEARTH_ERR_NOMEM, "out of memory");
    char* strings = reinterpret_cast<char*>(block + models.size());
    auto copy_string = [&strings](const std::string& s) {
      char* at = strings;
      std::memcpy(at, s.c_str(), s.size() + 1);
      strings += s.size() + 1;
      return at;
    };
    for (size_t i = 0; i < models.size(); ++i) {
      block[i].id = copy_string(models[i].id);
      block[i].owned_by = copy_string(models[i].owned_by);
      block[i].created = models[i].created;
    }
    *out_models = block;
    *out_count = models.size();
    return Outcome::success();
  });
}

int hearth_client_health(hearth_client* client) {
  if (client == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    std::string body;
    return exchange_json(client, "GET", "/health", "", &body);
  });
}

}  // extern "C"
