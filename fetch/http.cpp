#include "fetch/http.h"

#include <openssl/ssl.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "fetch/http_conn.h"

namespace hearth::fetch {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::ip::tcp;
using detail::Connection;
using detail::ConnectionPool;
using detail::TcpStream;
using detail::TlsStream;
using detail::UnixStream;

namespace {

constexpr int kMaxRedirects = 10;
constexpr size_t kChunkBytes = 256 * 1024;
const char* const kUserAgent = "hearth/0.5 (+pull)";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// One exchange on one connection: the header of the answer, then (unless it is a redirect)
// its body. Errors thrown by Asio become Error values in exchange().
struct Exchange {
  const Url& url;
  const HttpRequest& request;
  bool send_token;
  const OnHeaders* on_headers;  // null for a redirect hop's header check (never called)
  const OnBody& on_body;
  HttpResponse response;
  uint64_t body_bytes = 0;  // received so far
  HttpOutcome outcome;
  bool stale = false;     // the peer had closed the connection: no answer byte came
  bool reusable = false;  // the whole answer was read and the server keeps the connection
};

std::chrono::seconds connect_timeout(const HttpRequest& r) {
  return std::chrono::seconds(r.connect_timeout_s > 0 ? r.connect_timeout_s : r.timeout_s);
}

std::chrono::seconds first_byte_timeout(const HttpRequest& r) {
  return std::chrono::seconds(r.first_byte_timeout_s > 0 ? r.first_byte_timeout_s : r.timeout_s);
}

http::request<http::string_body> make_request(const Exchange& x) {
  http::request<http::string_body> req{http::string_to_verb(x.request.method), x.url.target, 11};
  const bool default_port = x.url.port == (x.url.scheme == "https" ? "443" : "80");
  req.set(http::field::host, default_port ? x.url.host : x.url.host + ":" + x.url.port);
  req.set(http::field::user_agent, kUserAgent);
  req.set(http::field::accept_encoding, "identity");
  if (x.send_token && !x.request.bearer_token.empty())
    req.set(http::field::authorization, "Bearer " + x.request.bearer_token);
  if (x.request.range_from > 0) req.set(http::field::range, "bytes=" + std::to_string(x.request.range_from) + "-");
  for (const auto& [name, value] : x.request.headers) req.set(name, value);
  if (!x.request.body.empty() || x.request.method != "GET") {
    if (!x.request.content_type.empty()) req.set(http::field::content_type, x.request.content_type);
    req.body() = x.request.body;
    req.prepare_payload();
  }
  return req;
}

void fill_response(Exchange& x, const http::response_parser<http::buffer_body>& parser) {
  const auto& msg = parser.get();
  x.response.status = static_cast<int>(msg.result_int());
  x.response.headers.clear();
  for (const auto& field : msg) {
    const auto name = field.name_string();
    const auto value = field.value();
    x.response.headers[lower(std::string_view(name.data(), name.size()))] = std::string(value.data(), value.size());
  }
  x.response.content_length = parser.content_length() ? static_cast<int64_t>(*parser.content_length()) : -1;
}

// Whether ec says that the peer had closed (or reset) the connection: on a kept connection
// before any answer byte, the server dropped it while it was idle.
bool peer_closed(const boost::system::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == http::error::end_of_stream ||
         ec == ssl::error::stream_truncated;
}

// Sending the request and reading the answer's header; a failure is thrown, after noting
// whether it was a closed connection with nothing of an answer read.
template <class Stream>
awaitable<void> ask(Stream& stream, Exchange& x, beast::flat_buffer& buffer,
                    http::response_parser<http::buffer_body>& parser) {
  auto& lowest = beast::get_lowest_layer(stream);
  boost::system::error_code ec;
  lowest.expires_after(connect_timeout(x.request));
  co_await http::async_write(stream, make_request(x), asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    x.stale = peer_closed(ec);
    throw boost::system::system_error(ec);
  }
  x.outcome.connected = true;
  lowest.expires_after(first_byte_timeout(x.request));
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    x.stale = peer_closed(ec) && buffer.size() == 0;
    throw boost::system::system_error(ec);
  }
  x.outcome.got_header = true;
}

// Sends the request and reads the answer on a connected stream (Unix, plain TCP or TLS).
template <class Stream>
awaitable<Status> talk(Stream& stream, Exchange& x) {
  auto& lowest = beast::get_lowest_layer(stream);
  const auto timeout = std::chrono::seconds(x.request.timeout_s);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // Not boost::none: Beast 1.74 compares a Content-Length with an empty limit as "over".
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  co_await ask(stream, x, buffer, parser);
  fill_response(x, parser);
  if (is_redirect(x.response.status) && x.request.method == "GET") co_return Status{};
  if (x.on_headers)
    if (Status s = (*x.on_headers)(x.response); !s) co_return s;
  std::vector<char> chunk(kChunkBytes);
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    lowest.expires_after(timeout);
    boost::system::error_code ec;
    co_await http::async_read_some(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::need_buffer) ec = {};
    const size_t got = chunk.size() - parser.get().body().size;
    if (got > 0) {
      x.body_bytes += got;
      if (Status s = x.on_body(chunk.data(), got); !s) co_return s;
    }
    if (ec) {
      x.outcome.timed_out = ec == beast::error::timeout;
      std::string total = x.response.content_length >= 0 ? " of " + std::to_string(x.response.content_length) : "";
      co_return make_error("the connection to " + x.url.host + " broke after " + std::to_string(x.body_bytes) + total +
                           " bytes of the body (" + ec.message() + ")");
    }
  }
  // Bytes past the answer would be an answer to nothing: such a connection is not kept.
  x.reusable = parser.keep_alive() && !parser.need_eof() && buffer.size() == 0;
  co_return Status{};
}

// The addresses of url's host. Not async_resolve on the connection's io_context: Asio keeps a
// resolver thread (and its descriptors) per io_context until it is destroyed, so each kept
// connection would hold one. A numeric host needs no lookup; a name is looked up here, on this
// thread, as blocking as the io_context's destruction joining that thread was before. Errors
// are thrown, as Asio's are.
std::vector<tcp::endpoint> resolve(const Url& url) {
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(url.host, ec);
  const unsigned long port = std::stoul(url.port);  // digits, at most 5 (parse_url)
  if (!ec && port <= 65535) return {tcp::endpoint(address, static_cast<uint16_t>(port))};
  asio::io_context lookup;
  tcp::resolver resolver(lookup);
  std::vector<tcp::endpoint> endpoints;
  for (const auto& entry : resolver.resolve(url.host, url.port)) endpoints.push_back(entry.endpoint());
  return endpoints;
}

// Opens conn to x's place (Unix socket, TCP, or TCP and TLS with the server verified).
awaitable<Status> connect(Exchange& x, Connection& conn) {
  auto executor = co_await asio::this_coro::executor;
  const auto timeout = connect_timeout(x.request);
  if (!x.request.unix_socket.empty()) {
    conn.unix_stream = std::make_unique<UnixStream>(executor);
    conn.unix_stream->expires_after(timeout);
    co_await conn.unix_stream->async_connect(asio::local::stream_protocol::endpoint(x.request.unix_socket),
                                             asio::use_awaitable);
    co_return Status{};
  }
  const std::vector<tcp::endpoint> endpoints = resolve(x.url);
  if (x.url.scheme == "http") {
    conn.tcp = std::make_unique<TcpStream>(executor);
    conn.tcp->expires_after(timeout);
    co_await conn.tcp->async_connect(endpoints, asio::use_awaitable);
    co_return Status{};
  }
  conn.tls_context = std::make_unique<ssl::context>(ssl::context::tls_client);
  ssl::context& ctx = *conn.tls_context;
  if (x.request.ca_file.empty()) {
    ctx.set_default_verify_paths();
  } else {
    boost::system::error_code ec;
    ctx.load_verify_file(x.request.ca_file, ec);
    if (ec) co_return make_error("cannot read the CA file " + x.request.ca_file + ": " + ec.message());
  }
  ctx.set_verify_mode(ssl::verify_peer);
  auto stream = std::make_unique<TlsStream>(executor, ctx);
  if (!SSL_set_tlsext_host_name(stream->native_handle(), x.url.host.c_str()))
    co_return make_error("cannot set the TLS server name for " + x.url.host);
  stream->set_verify_callback(ssl::host_name_verification(x.url.host));
  beast::get_lowest_layer(*stream).expires_after(timeout);
  co_await beast::get_lowest_layer(*stream).async_connect(endpoints, asio::use_awaitable);
  beast::get_lowest_layer(*stream).expires_after(timeout);
  co_await stream->async_handshake(ssl::stream_base::client, asio::use_awaitable);
  conn.tls = std::move(stream);
  co_return Status{};
}

awaitable<Status> run_exchange(Exchange& x, Connection& conn) {
  if (!conn.connected())
    if (Status s = co_await connect(x, conn); !s) co_return s;
  if (conn.unix_stream) co_return co_await talk(*conn.unix_stream, x);
  if (conn.tcp) co_return co_await talk(*conn.tcp, x);
  co_return co_await talk(*conn.tls, x);
}

// The cancel flag's watcher and the means to end it early once the exchange is over.
struct CancelWatch {
  const std::atomic<bool>& cancelled;
  asio::steady_timer timer;
  bool done = false;
};

// Ends the exchange once the cancel flag turns true: stops the io_context, so run() returns
// with the exchange still waiting (its connection is then closed, never kept).
awaitable<void> watch_cancel(CancelWatch& watch, asio::io_context& io) {
  while (!watch.done && !watch.cancelled.load()) {
    watch.timer.expires_after(std::chrono::milliseconds(50));
    boost::system::error_code ec;  // operation_aborted once the exchange is over
    co_await watch.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!watch.done) io.stop();
}

// Runs one exchange on conn's io_context, from this thread, until nothing is left pending on
// it (so a clean connection can be kept idle) or until it is cancelled.
Status exchange(Exchange& x, Connection& conn) {
  asio::io_context& io = conn.io;
  io.restart();
  std::optional<Status> result;
  std::optional<CancelWatch> watch;
  if (x.request.cancelled) watch.emplace(*x.request.cancelled, asio::steady_timer(io));
  const std::string what_url = x.request.method + " " + x.url.origin() + x.url.target;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        try {
          result = co_await run_exchange(x, conn);
        } catch (const boost::system::system_error& e) {
          x.outcome.timed_out = e.code() == beast::error::timeout;
          std::string what = x.outcome.timed_out ? "timed out" : e.code().message();
          result = make_error(what_url + ": " + what);
        } catch (const std::exception& e) {
          result = make_error(what_url + ": " + e.what());
        }
        if (watch) {
          watch->done = true;
          watch->timer.cancel();
        }
      },
      asio::detached);
  if (watch) asio::co_spawn(io, watch_cancel(*watch, io), asio::detached);
  io.run();
  if (!result) x.reusable = false;
  return result ? *result : make_error(what_url + ": cancelled");
}

// Where a kept connection may be used again: the same scheme, host, port, Unix socket and CA
// file (the bearer token is sent with each request, so it is no part of the key).
std::string place_key(const Url& url, const HttpRequest& r) {
  return url.scheme + "://" + url.host + ":" + url.port + "|unix:" + r.unix_socket + "|ca:" + r.ca_file;
}

// One exchange, on a kept connection to its place when the request allows and one is idle.
// A kept connection that the server had closed (no answer byte came) is replaced by a new
// one, once; a new connection's failure is never retried here (daemon/upstream.cpp decides).
Status exchange_kept(Exchange& x) {
  const HttpRequest& r = x.request;
  const bool keep = r.keep_alive_max > 0;
  const std::string key = keep ? place_key(x.url, r) : std::string();
  auto& pool = ConnectionPool::instance();
  std::unique_ptr<Connection> conn = keep ? pool.take(key) : nullptr;
  if (!conn) conn = std::make_unique<Connection>();
  Status s = exchange(x, *conn);
  if (!s && x.stale && conn->reused && !(r.cancelled && r.cancelled->load())) {
    pool.drop(key);  // the others went idle at the same server: likely closed as well
    conn = std::make_unique<Connection>();
    x.response = {};
    x.body_bytes = 0;
    x.outcome = {};
    x.stale = x.reusable = false;
    s = exchange(x, *conn);
    x.outcome.stale_retried = true;
  }
  x.outcome.reused = conn->reused;
  const bool cancelled = r.cancelled && r.cancelled->load();
  if (s && keep && x.reusable && !cancelled)
    pool.put(key, std::move(conn), static_cast<size_t>(r.keep_alive_max),
             std::chrono::milliseconds(r.keep_alive_idle_ms));
  return s;
}

}  // namespace

std::string Url::origin() const {
  const bool default_port = port == (scheme == "https" ? "443" : "80");
  return scheme + "://" + host + (default_port ? "" : ":" + port);
}

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

Result<Url> parse_url(std::string_view s) {
  Url u;
  const size_t sep = s.find("://");
  if (sep == std::string_view::npos) return make_error("'" + std::string(s) + "' is not an http(s) URL");
  u.scheme = lower(s.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https")
    return make_error("'" + std::string(s) + "': only http and https URLs can be fetched");
  std::string_view rest = s.substr(sep + 3);
  const size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view target = slash == std::string_view::npos ? "/" : rest.substr(slash);
  if (const size_t hash = target.find('#'); hash != std::string_view::npos) target = target.substr(0, hash);
  u.target = target.empty() || target[0] != '/' ? "/" + std::string(target) : std::string(target);
  if (authority.find('@') != std::string_view::npos)
    return make_error("'" + std::string(s) + "': user names in URLs are not supported (use HF_TOKEN)");
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos && authority.find(']') == std::string_view::npos) {
    u.host = std::string(authority.substr(0, colon));
    u.port = std::string(authority.substr(colon + 1));
    if (u.port.empty() || u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos)
      return make_error("'" + std::string(s) + "': bad port '" + u.port + "'");
  } else {
    u.host = std::string(authority);
    u.port = u.scheme == "https" ? "443" : "80";
  }
  if (u.host.empty()) return make_error("'" + std::string(s) + "' names no host");
  return u;
}

Result<Url> resolve_location(const Url& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos) return parse_url(location);
  if (location.substr(0, 2) == "//") return parse_url(base.scheme + ":" + std::string(location));
  Url u = base;
  if (!location.empty() && location[0] == '/') {
    u.target = std::string(location);
  } else {  // relative to the base path's folder
    const std::string path = base.target.substr(0, base.target.find('?'));
    u.target = path.substr(0, path.rfind('/') + 1) + std::string(location);
  }
  return u;
}

Result<HttpResponse> http_get(const HttpRequest& request, const OnHeaders& on_headers, const OnBody& on_body) {
  return http_request(request, on_headers, on_body);
}

Result<HttpResponse> http_request(const HttpRequest& request, const OnHeaders& on_headers, const OnBody& on_body,
                                  HttpOutcome* outcome) {
  Result<Url> url = parse_url(request.url);
  if (!url) return url.error();
  const std::string first_origin = url->origin();
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    Exchange x{*url, request, url->origin() == first_origin, &on_headers, on_body, {}, 0, {}, false, false};
    const Status s = exchange_kept(x);
    if (outcome) *outcome = x.outcome;
    if (!s) return s.error();
    x.response.url = url->origin() + url->target;
    if (!is_redirect(x.response.status) || request.method != "GET") return x.response;
    const std::string location = x.response.header("location");
    if (location.empty()) return make_error("a redirect from " + x.response.url + " without a Location");
    Result<Url> next = resolve_location(*url, location);
    if (!next) return make_error("a redirect from " + x.response.url + ": " + next.error().message);
    url = std::move(next);
  }
  return make_error("more than " + std::to_string(kMaxRedirects) + " redirects from " + request.url);
}

size_t idle_connections() {
  return ConnectionPool::instance().idle();
}

void close_idle_connections() {
  ConnectionPool::instance().clear();
}

Result<TextResponse> http_get_text(const HttpRequest& request, size_t max_bytes) {
  std::string body;
  Result<HttpResponse> r = http_get(
      request, [](const HttpResponse&) { return Status{}; },
      [&](const char* data, size_t n) -> Status {
        if (body.size() + n > max_bytes)
          return make_error("the answer of " + request.url + " is over " + std::to_string(max_bytes) + " bytes");
        body.append(data, n);
        return Status{};
      });
  if (!r) return r.error();
  return TextResponse{std::move(*r), std::move(body)};
}

}  // namespace hearth::fetch
