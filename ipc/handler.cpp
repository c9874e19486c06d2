#include "ipc/handler.h"

#include <nlohmann/json.hpp>

#include "engine/scheduler/scheduler.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

HttpResponse error_response(const ApiError& error) {
  HttpResponse r;
  r.status = error.status;
  r.body = error_body(error);
  return r;
}

HttpResponse json_response(int status, const nlohmann::json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(body);
  return r;
}

ApiError loading() {
  return unavailable("the model is still loading", "loading");
}

ApiError shutting_down() {
  return unavailable("the server is shutting down", "shutting_down");
}

HttpResponse submit_error_response(const Submitted& submitted) {
  switch (submitted.status) {
    case SubmitStatus::QueueFull:
      return error_response(
          queue_full(submitted.message.empty() ? "too many requests are waiting" : submitted.message));
    case SubmitStatus::ShuttingDown:
      return error_response(shutting_down());
    case SubmitStatus::Invalid:
      return error_response(bad_request(submitted.message));
    case SubmitStatus::Accepted:
      break;
  }
  return error_response(internal_error("unexpected submit status"));
}

}  // namespace hearth::ipc
