// The models a daemon serves by name: which are loaded (GET /api/ps), and loading or
// unloading one before anyone asks (POST /api/load, /api/unload).
#include <nlohmann/json.hpp>
#include <string>

#include "handle.h"
#include "hearth/client.h"

using hearth::client::exchange_json;
using hearth::client::guarded;
using hearth::client::Outcome;

namespace {

int post_model(hearth_client* client, const char* target, const char* model, const char* keep_alive) {
  if (client == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    if (model == nullptr || *model == '\0') return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT, "model is empty");
    nlohmann::json body{{"model", model}};
    if (keep_alive != nullptr && *keep_alive != '\0') body["keep_alive"] = keep_alive;
    std::string answer;
    return exchange_json(client, "POST", target, body.dump(), &answer);
  });
}

}  // namespace

extern "C" {

int hearth_client_loaded_models(hearth_client* client, char** out_json) {
  return hearth::client::get_json_text(client, "/api/ps", out_json);
}

int hearth_client_load_model(hearth_client* client, const char* model, const char* keep_alive) {
  return post_model(client, "/api/load", model, keep_alive);
}

int hearth_client_unload_model(hearth_client* client, const char* model) {
  return post_model(client, "/api/unload", model, nullptr);
}

}  // extern "C"
