// A small HTTP(S) client for downloads (hearth pull, /api/pull): GET with redirects, an
// optional Range, the body streamed to a callback. Boost.Beast and OpenSSL stay behind this
// header. https verifies the server against the system's CA certificates (host name checked,
// SNI sent); plain http is for mirrors and tests on localhost.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace hearth::fetch {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;
  std::string port;            // "443" when the URL names none for https, "80" for http
  std::string target;          // path and query, "/" at least
  std::string origin() const;  // "https://host[:port]"
};

// Parses an absolute http(s) URL; an error names what is wrong with it.
Result<Url> parse_url(std::string_view url);
// The URL a Location header points to, relative to the URL it came from.
Result<Url> resolve_location(const Url& base, std::string_view location);

struct HttpRequest {
  std::string url;
  std::string bearer_token;  // sent as Authorization to the first URL's origin (scheme, host,
                             // port) only, never after a redirect elsewhere (the Hub's CDN)
  uint64_t range_from = 0;   // > 0: ask for the bytes from here on (Range: bytes=N-)
  int timeout_s = 60;        // for connecting and for every read
};

struct HttpResponse {
  int status = 0;
  std::string url;                                          // the URL that answered (after redirects)
  std::map<std::string, std::string> headers;               // names lower-case
  int64_t content_length = -1;                              // -1: not given
  std::string header(const std::string& lower_name) const;  // "" when absent
};

// Called once the final response's header is read; a non-ok Status stops before the body.
using OnHeaders = std::function<Status(const HttpResponse&)>;
// Called for each piece of the body, in order; a non-ok Status stops the download.
using OnBody = std::function<Status(const char* data, size_t n)>;

// GET, following up to 10 redirects (301, 302, 303, 307, 308). The body of the final answer,
// whatever its status, goes to on_body. An error when the connection fails, times out or is
// closed before the body ends (the message says how many bytes had come), or when a callback
// stops it.
Result<HttpResponse> http_get(const HttpRequest& request, const OnHeaders& on_headers, const OnBody& on_body);

// GET of a small document (an API answer): its status, and its body up to max_bytes (more is
// an error).
struct TextResponse {
  HttpResponse response;
  std::string body;
};
Result<TextResponse> http_get_text(const HttpRequest& request, size_t max_bytes);

}  // namespace hearth::fetch
