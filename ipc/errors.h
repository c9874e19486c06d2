// OpenAI's error object, {"error": {"message", "type", "param", "code"}}, and the HTTP
// status that goes with it. Every 4xx/5xx the server sends carries one of these.
#pragma once

#include <string>
#include <string_view>

#include "ipc/http_types.h"

namespace hearth::ipc {

struct HostError;

struct ApiError {
  int status = 400;  // HTTP status
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; "" -> null
  std::string code;   // machine-readable reason; "" -> null
};

// 400 invalid_request_error naming the field (param may be "").
ApiError bad_request(std::string message, std::string param = "", std::string code = "invalid_value");
ApiError not_found(std::string message, std::string code = "not_found");
ApiError method_not_allowed(std::string message);
ApiError payload_too_large(std::string message);
ApiError forbidden(std::string message);
ApiError queue_full(std::string message);
// 503: the model is not loaded yet ("loading") or the server is stopping ("shutting_down").
ApiError unavailable(std::string message, std::string code);
ApiError internal_error(std::string message);
// 507: a model that alone does not fit in the daemon's memory budget.
ApiError insufficient_memory(std::string message);

// 404 model_not_found for a name the host does not serve.
ApiError unknown_model(std::string_view name);

// The answer to a host's error (model_host.h): 404 model_not_found, 500 model_unavailable,
// 507 model_too_large, 503 memory_busy, 500 model_load_failed, 503 shutting_down.
ApiError host_error(const HostError& e);

// The error object each API's clients expect: OpenAI's (also hearth's own routes'),
// Ollama's {"error": message}, Anthropic's {"type": "error", "error": {"type", "message"}}.
enum class ErrorShape { OpenAi, Ollama, Anthropic };

// The JSON text of the error object.
std::string error_body(const ApiError& e, ErrorShape shape = ErrorShape::OpenAi);

// The response carrying it: its status, error_body.
HttpResponse error_response(const ApiError& error, ErrorShape shape = ErrorShape::OpenAi);

}  // namespace hearth::ipc
