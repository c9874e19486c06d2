// One HTTP/1.1 exchange as the server reads and writes it, without I/O: the request parser
// with the server's limits, the parsed message as the routes take it, what a request that
// cannot be read is answered with, and the response message of an HttpResponse. The
// connection (connection.cpp) runs these over the socket with deadlines; the fuzzer
// (tests/ipc/http_fuzz.cpp) feeds the same parser from memory, so that both see one parser
// configuration and one mapping of errors to answers.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipc/errors.h"
#include "ipc/http_types.h"
#include "ipc/identity.h"

namespace hearth::ipc {

inline constexpr size_t kHeaderLimitBytes = 16 * 1024;  // request line + headers
inline constexpr const char* kServerName = "hearth";    // the Server header of every answer

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;
using ResponseMessage = boost::beast::http::response<boost::beast::http::string_body>;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Sets a fresh parser's limits: headers up to kHeaderLimitBytes (larger: header_limit),
// the body up to body_limit_bytes, announced or chunked (larger: body_limit).
void set_request_limits(RequestParser& parser, size_t body_limit_bytes);

// A request read whole, as the connection acts on it.
struct ReadRequest {
  HttpRequest request;
  unsigned version = 11;    // 10 (HTTP/1.0) or 11
  bool keep_alive = false;  // what the client asked for (its version and Connection header)
  bool head = false;        // HEAD: answered like GET, without the body
};

// The parsed message, taken out of a parser that is done.
ReadRequest take_request(RequestParser& parser);

// What a request that could not be read whole (ec from reading its header or body) is
// answered with before the connection closes: 413 (the body is over body_limit_bytes),
// 431 (the headers are over kHeaderLimitBytes) or 400 "bad_http" (malformed). nullopt:
// nothing to answer, the connection just closes (a deadline passed, the client left or
// stopped mid-request).
std::optional<ApiError> read_error_answer(const boost::system::error_code& ec, size_t body_limit_bytes);

// The CORS headers every answer to `request` carries: cors_headers() for a browser Origin
// in the allowlist, on the TCP listener; none otherwise.
HeaderList answer_cors(const HttpRequest& request, const PeerIdentity& peer,
                       const std::vector<std::string>& allowed_origins);

// The message for r: its status, Server, Content-Type, Allow (405), r.headers (or `cors`
// when r has none), Connection as keep_alive says, and the body with its Content-Length.
// The answer to a HEAD keeps the Content-Length of the GET's answer and drops the body.
ResponseMessage response_message(const HttpResponse& r, unsigned version, bool keep_alive, bool head,
                                 const HeaderList& cors);

}  // namespace hearth::ipc
