#include "ipc/errors.h"

#include <nlohmann/json.hpp>

#include "ipc/model_host.h"

namespace hearth::ipc {

namespace {

ApiError make(int status, std::string message, std::string type, std::string param, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

}  // namespace

ApiError bad_request(std::string message, std::string param, std::string code) {
  return make(400, std::move(message), "invalid_request_error", std::move(param), std::move(code));
}

ApiError not_found(std::string message, std::string code) {
  return make(404, std::move(message), "invalid_request_error", "", std::move(code));
}

ApiError method_not_allowed(std::string message) {
  return make(405, std::move(message), "invalid_request_error", "", "method_not_allowed");
}

ApiError payload_too_large(std::string message) {
  return make(413, std::move(message), "invalid_request_error", "", "request_too_large");
}

ApiError forbidden(std::string message) {
  return make(403, std::move(message), "permission_error", "", "forbidden_host");
}

ApiError queue_full(std::string message) {
  return make(429, std::move(message), "rate_limit_error", "", "queue_full");
}

ApiError unavailable(std::string message, std::string code) {
  return make(503, std::move(message), "server_error", "", std::move(code));
}

ApiError insufficient_memory(std::string message) {
  return make(507, std::move(message), "server_error", "", "model_too_large");
}

ApiError internal_error(std::string message) {
  return make(500, std::move(message), "server_error", "", "engine_error");
}

ApiError unknown_model(std::string_view name) {
  return not_found("The model '" + std::string(name) + "' does not exist; GET /v1/models lists the models served",
                   "model_not_found");
}

ApiError host_error(const HostError& e) {
  switch (e.kind) {
    case HostError::Kind::UnknownModel:
      return not_found(e.message, "model_not_found");
    case HostError::Kind::Unservable:
      return make(500, e.message, "server_error", "", "model_unavailable");
    case HostError::Kind::TooLarge:
      return insufficient_memory(e.message);
    case HostError::Kind::MemoryBusy:
      return unavailable(e.message, "memory_busy");
    case HostError::Kind::ShuttingDown:
      return unavailable(e.message, "shutting_down");
    case HostError::Kind::LoadFailed:
      break;
  }
  return make(500, e.message, "server_error", "", "model_load_failed");
}

HttpResponse error_response(const ApiError& error, ErrorShape shape) {
  HttpResponse r;
  r.status = error.status;
  r.body = error_body(error, shape);
  return r;
}

namespace {

// Anthropic's error types by status (its API reference, "Errors"): the statuses it lists,
// invalid_request_error for any other 4xx and api_error for any other 5xx. hearth's 503s
// (loading, memory busy, shutting down) are not Anthropic's 529 "overloaded_error": they are
// api_error, and the status tells clients to retry.
const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

}  // namespace

std::string error_body(const ApiError& e, ErrorShape shape) {
  nlohmann::ordered_json j;
  if (shape == ErrorShape::Ollama) {
    j["error"] = e.message;
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  if (shape == ErrorShape::Anthropic) {
    j["type"] = "error";
    j["error"]["type"] = anthropic_error_type(e.status);
    j["error"]["message"] = e.message;
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  j["error"]["message"] = e.message;
  j["error"]["type"] = e.type;
  j["error"]["param"] = e.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param);
  j["error"]["code"] = e.code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code);
  // Messages may quote client input: never let a stray byte turn into an exception.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace hearth::ipc
