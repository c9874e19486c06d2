// An HTTP request as the routes read it and a response as they write it: plain values, no
// Beast (http_message.h converts both to and from the wire).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::ipc {

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // path, with the query string if any
  std::string host;    // the Host header ("" when absent)
  std::string body;
  std::optional<std::string> origin;  // the Origin header, when sent (browsers send it)
  std::string content_type;           // the Content-Type header ("" when absent)
  // Never from the wire: set when the connection answers a request again with an upstream's
  // local fallback model (StreamCall::reroute): the upstream's name and why it failed.
  std::string fallback_from;
  std::string fallback_reason;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;                                         // the Allow header of a 405
  std::vector<std::pair<std::string, std::string>> headers;  // more headers (CORS preflight)
};

// The value of name in target's query string, percent-decoded ('+' is a space); nullopt
// when absent. A malformed escape (%G1, a lone %) is kept as written.
std::optional<std::string> query_param(std::string_view target, std::string_view name);

}  // namespace hearth::ipc
