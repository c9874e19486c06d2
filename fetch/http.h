// A small HTTP(S) client for downloads (hearth pull, /api/pull) and for the engines hearthd
// forwards to (upstreams, daemon/upstream.h): GET with redirects, an optional Range, a POST
// with a JSON body, the answer's body streamed to a callback as it arrives. Boost.Beast and
// OpenSSL stay behind this header. https verifies the server against the system's CA
// certificates or a given CA file (host name checked, SNI sent); plain http is for mirrors,
// upstreams on a trusted network and tests on localhost; a Unix socket path replaces the
// TCP connection when given.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  std::string bearer_token;    // sent as Authorization to the first URL's origin (scheme, host,
                               // port) only, never after a redirect elsewhere (the Hub's CDN)
  uint64_t range_from = 0;     // > 0: ask for the bytes from here on (Range: bytes=N-)
  int timeout_s = 60;          // for connecting and for every read
  std::string method = "GET";  // "GET" follows redirects; others are sent once
  std::string body;            // sent when not empty
  std::string content_type;    // of body
  std::vector<std::pair<std::string, std::string>> headers;  // more fields to send
  int connect_timeout_s = 0;                                 // connecting, TLS and sending the request; 0: timeout_s
  int first_byte_timeout_s = 0;  // from the request sent to the answer's header; 0: timeout_s
  std::string ca_file;           // https: trust only the CAs in this PEM file ("": the system's)
  std::string unix_socket;       // connect to this Unix socket; url still names Host and target
  // Read between pieces of the answer (every 50 ms at most): once true, the exchange stops
  // with an error, even while it waits for the server. Null: never.
  const std::atomic<bool>* cancelled = nullptr;
  // Keep-alive (upstreams): > 0 keeps the connection after an exchange whose answer was read
  // whole (HTTP/1.1, no "Connection: close"), at most this many idle per place (scheme, host,
  // port, Unix socket, CA file), each for keep_alive_idle_ms, and sends the next request to the
  // same place on one of them. A kept connection the server closed meanwhile (no answer byte
  // came) is replaced by a new one once, silently. 0: a new connection for every exchange and
  // none kept (downloads: hearth pull).
  int keep_alive_max = 0;
  int keep_alive_idle_ms = 30000;  // under most servers' own idle limits (nginx 75 s); a shorter
                                   // one (uvicorn: 5 s) costs a stale retry, not an error
};

// How far one exchange got, for callers that retry: a failure before got_header may be
// retried on a new connection; timed_out says that the last wait ran out of time.
struct HttpOutcome {
  bool connected = false;   // TCP (and TLS) set up, request sent
  bool got_header = false;  // the answer's status line and header were read
  bool timed_out = false;
  bool reused = false;         // the (last) exchange ran on a kept connection
  bool stale_retried = false;  // a kept connection was found closed; it went again on a new one
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

// request.method on request.url (GET: as http_get); outcome (may be null) says how far it got.
Result<HttpResponse> http_request(const HttpRequest& request, const OnHeaders& on_headers, const OnBody& on_body,
                                  HttpOutcome* outcome = nullptr);

// Connections kept idle now, all places together; and closing them all (tests, shutdown).
size_t idle_connections();
void close_idle_connections();

// GET of a small document (an API answer): its status, and its body up to max_bytes (more is
// an error).
struct TextResponse {
  HttpResponse response;
  std::string body;
};
Result<TextResponse> http_get_text(const HttpRequest& request, size_t max_bytes);

}  // namespace hearth::fetch
