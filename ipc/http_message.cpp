#include "ipc/http_message.h"

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

namespace hearth::ipc {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Errors that mean the client is gone, too slow, or stopped mid-request: nobody to answer.
bool is_quiet_read_error(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::operation_aborted ||
         ec == net::error::broken_pipe || ec == net::error::bad_descriptor;
}

}  // namespace

void set_request_limits(RequestParser& parser, size_t body_limit_bytes) {
  parser.header_limit(kHeaderLimitBytes);
  parser.body_limit(body_limit_bytes);
}

ReadRequest take_request(RequestParser& parser) {
  http::request<http::string_body> msg = parser.release();
  ReadRequest r;
  r.version = msg.version();
  r.keep_alive = msg.keep_alive();
  r.head = msg.method() == http::verb::head;
  r.request.method = std::string(msg.method_string());
  r.request.target = std::string(msg.target());
  r.request.host = std::string(msg[http::field::host]);
  if (msg.find(http::field::origin) != msg.end()) r.request.origin = std::string(msg[http::field::origin]);
  r.request.content_type = std::string(msg[http::field::content_type]);
  r.request.body = std::move(msg.body());
  return r;
}

std::optional<ApiError> read_error_answer(const beast::error_code& ec, size_t body_limit_bytes) {
  if (is_quiet_read_error(ec)) return std::nullopt;
  if (ec == http::error::body_limit) {
    return payload_too_large("the request body is larger than " + std::to_string(body_limit_bytes) + " bytes");
  }
  if (ec == http::error::header_limit) {
    ApiError error = bad_request("the request headers are larger than " + std::to_string(kHeaderLimitBytes) + " bytes");
    error.status = 431;
    return error;
  }
  return bad_request("malformed HTTP request: " + ec.message(), "", "bad_http");
}

HeaderList answer_cors(const HttpRequest& request, const PeerIdentity& peer,
                       const std::vector<std::string>& allowed_origins) {
  if (peer.tcp && request.origin && origin_allowed(*request.origin, allowed_origins)) {
    return cors_headers(*request.origin);
  }
  return {};
}

ResponseMessage response_message(const HttpResponse& r, unsigned version, bool keep_alive, bool head,
                                 const HeaderList& cors) {
  ResponseMessage res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, r.content_type);
  if (!r.allow.empty()) res.set(http::field::allow, r.allow);
  for (const auto& [name, value] : r.headers.empty() ? cors : r.headers) res.set(name, value);
  res.keep_alive(keep_alive);
  res.body() = r.body;
  // A 204 (the CORS preflight's answer) has no body and must not carry a Content-Length
  // (RFC 9110 8.6), which prepare_payload would set to 0.
  if (res.result() != http::status::no_content) res.prepare_payload();
  if (head) res.body().clear();  // Content-Length stays that of the GET answer
  return res;
}

}  // namespace hearth::ipc
