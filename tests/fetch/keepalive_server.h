// A small HTTP/1.1 server for the keep-alive tests of fetch/http.h: on 127.0.0.1 (plain or
// TLS with a self-signed certificate made here) or on a Unix socket, one coroutine per
// connection on its own thread. It counts the connections it accepts and can be told to answer
// with "Connection: close", to close idle connections, or to drop requests unanswered.
//   GET /small    "hello" with a Content-Length
//   GET /chunked  the same body, chunked
//   GET /big      1 MiB with a Content-Length
//   GET /stall    half of a 10-byte body, then nothing for 5 s
#pragma once

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace keepalive_test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A self-signed certificate for IP 127.0.0.1 (its own CA) and its key, both PEM.
struct TestCert {
  std::string cert_pem, key_pem;
};

inline std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string s(data, static_cast<size_t>(n));
  BIO_free(bio);
  return s;
}

inline void add_ext(X509* x, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

inline TestCert make_cert() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("hearth test"), -1, -1,
                             0);
  X509_set_issuer_name(x, name);
  add_ext(x, NID_basic_constraints, "critical,CA:TRUE");
  add_ext(x, NID_subject_alt_name, "IP:127.0.0.1");
  X509_sign(x, key, EVP_sha256());
  BIO* cert_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_bio, x);
  BIO* key_bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  X509_free(x);
  EVP_PKEY_free(key);
  return {bio_text(cert_bio), bio_text(key_bio)};
}

struct Settings {
  std::atomic<int> accepted{0};          // connections accepted
  std::atomic<int> answered{0};          // answers begun
  std::atomic<bool> close_after{false};  // answer with Connection: close, then close
  std::atomic<bool> drop_reused{false};  // a second request on a connection: closed unanswered
  std::atomic<bool> drop_all{false};     // every request: closed unanswered
};

inline http::response<http::string_body> answer(const http::request<http::string_body>& req, bool close) {
  http::response<http::string_body> res{http::status::ok, 11};
  res.set(http::field::content_type, "text/plain");
  res.keep_alive(!close);
  const std::string target(req.target());
  res.body() = target == "/big" ? std::string(1 << 20, 'x') : "hello";
  if (target == "/chunked")
    res.chunked(true);
  else
    res.prepare_payload();
  return res;
}

template <class Stream>
asio::awaitable<void> serve(Stream& stream, Settings& s) {
  beast::flat_buffer buffer;
  for (int n = 0;; ++n) {
    http::request<http::string_body> req;
    boost::system::error_code ec;
    co_await http::async_read(stream, buffer, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || s.drop_all || (n > 0 && s.drop_reused)) co_return;
    const bool close = s.close_after.load();
    if (req.target() == "/stall") {
      const std::string half = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
      co_await asio::async_write(stream, asio::buffer(half), asio::redirect_error(asio::use_awaitable, ec));
      asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::seconds(5));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      co_return;
    }
    ++s.answered;  // before the write: the client may read the answer before this thread runs on
    co_await http::async_write(stream, answer(req, close), asio::redirect_error(asio::use_awaitable, ec));
    if (ec || close) co_return;
  }
}

// Protocol: asio::ip::tcp or asio::local::stream_protocol; tls only with tcp.
template <class Protocol>
class Server {
 public:
  using Socket = typename Protocol::socket;
  Server(typename Protocol::endpoint at, bool tls = false) : acceptor_(io_, at), tls_(tls) {
    if (tls) {
      cert_ = make_cert();
      ctx_.use_certificate_chain(asio::buffer(cert_.cert_pem));
      ctx_.use_private_key(asio::buffer(cert_.key_pem), asio::ssl::context::pem);
    }
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Server() {
    io_.stop();
    thread_.join();
  }
  typename Protocol::endpoint endpoint() const { return acceptor_.local_endpoint(); }
  const std::string& cert_pem() const { return cert_.cert_pem; }
  Settings settings;

  // Closes every connection the server holds (an idle-timeout on the server's side).
  void close_all() {
    std::atomic<bool> done{false};
    asio::post(io_, [&] {
      for (auto& w : open_)
        if (auto s = w.lock()) s->close();
      done = true;
    });
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto socket = std::make_shared<Socket>(co_await acceptor_.async_accept(asio::use_awaitable));
      ++settings.accepted;
      open_.push_back(socket);
      asio::co_spawn(io_, session(socket), asio::detached);
    }
  }
  asio::awaitable<void> session(std::shared_ptr<Socket> socket) {
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      if (tls_) {
        asio::ssl::stream<Socket&> stream(*socket, ctx_);
        boost::system::error_code ec;
        co_await stream.async_handshake(asio::ssl::stream_base::server, asio::redirect_error(asio::use_awaitable, ec));
        if (!ec) co_await serve(stream, settings);
        co_return;
      }
    }
    co_await serve(*socket, settings);
  }

  asio::io_context io_;
  typename Protocol::acceptor acceptor_;
  bool tls_;
  asio::ssl::context ctx_{asio::ssl::context::tls_server};
  TestCert cert_;
  std::vector<std::weak_ptr<Socket>> open_;
  std::thread thread_;
};

}  // namespace keepalive_test
