// The prompt cache part of the C API: GET/DELETE /api/cache and POST /api/cache/warm.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "handle.h"
#include "hearth/client.h"
#include "wire.h"

using hearth::client::exchange_json;
using hearth::client::get_json_text;
using hearth::client::guarded;
using hearth::client::Outcome;
namespace wire = hearth::client::wire;

namespace {

// Percent-encodes a query value (RFC 3986 unreserved characters stay as they are).
std::string query_escape(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// The oldest hearth_warm_result a caller may pass: up to and including tokens.
bool warm_result_usable(const hearth_warm_result* r) {
  return r == nullptr || r->struct_size >= offsetof(hearth_warm_result, tokens) + sizeof(r->tokens);
}

// Shared by both warm calls: prompt != NULL warms a completion prompt, else the messages.
int warm(hearth_client* client, const char* prompt, const hearth_message* messages, size_t n_messages,
         hearth_warm_result* out) {
  if (client == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    if (!warm_result_usable(out)) {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              "result.struct_size is too small: use hearth_warm_result_init");
    }
    std::string body;
    if (Outcome o = wire::warm_body(prompt, messages, n_messages, &body); !o.ok()) return o;
    const auto start = std::chrono::steady_clock::now();
    std::string answer;
    if (Outcome o = exchange_json(client, "POST", "/api/cache/warm", body, &answer); !o.ok()) return o;
    hearth_warm_result result;
    hearth_warm_result_init(&result);
    if (Outcome o = wire::parse_warm(answer, &result); !o.ok()) return o;
    result.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (out != nullptr) {
      const size_t size = out->struct_size;
      std::memcpy(static_cast<void*>(out), &result, std::min(size, sizeof result));
      out->struct_size = size;
    }
    return Outcome::success();
  });
}

// DELETE /api/cache [?model=M] [&uid=N].
int cache_clear(hearth_client* client, const char* model, const unsigned int* uid) {
  if (client == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  client->cancel.begin();
  client->http_status = 0;
  return guarded(client, [&]() -> Outcome {
    std::string target = "/api/cache";
    char sep = '?';
    if (model != nullptr && *model != '\0') {
      target += "?model=" + query_escape(model);
      sep = '&';
    }
    if (uid != nullptr) target += std::string(1, sep) + "uid=" + std::to_string(*uid);
    std::string body;
    return exchange_json(client, "DELETE", target.c_str(), "", &body);
  });
}

}  // namespace

extern "C" {

void hearth_warm_result_init(hearth_warm_result* result) {
  if (result == nullptr) return;
  std::memset(static_cast<void*>(result), 0, sizeof(*result));
  result->struct_size = sizeof(*result);
}

int hearth_client_cache_stats(hearth_client* client, char** out_json) {
  return get_json_text(client, "/api/cache", out_json);
}

int hearth_client_cache_clear(hearth_client* client, const char* model) {
  return cache_clear(client, model, nullptr);
}

int hearth_client_cache_clear_uid(hearth_client* client, const char* model, unsigned int uid) {
  return cache_clear(client, model, &uid);
}

int hearth_client_cache_warm(hearth_client* client, int kind, const char* text, hearth_warm_result* out) {
  if (client == nullptr) return HEARTH_ERR_INVALID_ARGUMENT;
  if (text == nullptr || (kind != HEARTH_WARM_SYSTEM_PROMPT && kind != HEARTH_WARM_PROMPT)) {
    client->http_status = 0;
    return guarded(client, [&] {
      return Outcome::failure(HEARTH_ERR_INVALID_ARGUMENT,
                              text == nullptr ? "text is NULL" : "kind is not a hearth_warm_kind");
    });
  }
  if (kind == HEARTH_WARM_PROMPT) return warm(client, text, nullptr, 0, out);
  const hearth_message system = {"system", text};
  return warm(client, nullptr, &system, 1, out);
}

int hearth_client_cache_warm_chat(hearth_client* client, const hearth_message* messages, size_t n_messages,
                                  hearth_warm_result* out) {
  return warm(client, nullptr, messages, n_messages, out);
}

}  // extern "C"
