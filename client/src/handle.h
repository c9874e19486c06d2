// What the C API's translation units share: the handle behind hearth_client*, the wrapper
// that turns an operation's Outcome (or exception) into a status code, and one JSON
// exchange with the daemon.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "cancel.h"
#include "hearth/client.h"
#include "outcome.h"
#include "transport.h"

struct hearth_client {
  std::string socket_path;
  std::string last_error;  // "" after a successful call
  int http_status = 0;     // of the last response; 0 when none arrived
  hearth::client::CancelState cancel;
  hearth::client::Transport transport;
};

namespace hearth::client {

// Runs f (returning an Outcome) and records its message on the handle; exceptions become
// HEARTH_ERR_NOMEM or HEARTH_ERR_INTERNAL.
template <class F>
int guarded(hearth_client* client, F&& f) {
  int code;
  const char* fallback = nullptr;
  try {
    client->last_error.clear();
    Outcome o = f();
    client->last_error = std::move(o.message);
    return o.code;
  } catch (const std::bad_alloc&) {
    code = HEARTH_ERR_NOMEM;
    fallback = "out of memory";
  } catch (const std::exception& e) {
    code = HEARTH_ERR_INTERNAL;
    fallback = e.what();
  } catch (...) {
    code = HEARTH_ERR_INTERNAL;
    fallback = "unknown exception";
  }
  try {
    client->last_error = fallback;
  } catch (...) {
    client->last_error.clear();
  }
  return code;
}

// One non-streamed exchange: method ("GET", "POST", "DELETE") on target with a JSON body
// ("" for none). *out receives the body of a 2xx response; other statuses give the mapped
// error (wire::error_from_response). Records the HTTP status on the handle.
Outcome exchange_json(hearth_client* client, const char* method, const char* target, const std::string& body,
                      std::string* out);

// A C API call that GETs target and hands its 2xx body to the caller as a malloc'ed,
// NUL-terminated text in *out_json (NULL on failure): hearth_client_cache_stats,
// hearth_client_installed_models.
int get_json_text(hearth_client* client, const char* target, char** out_json);

}  // namespace hearth::client
