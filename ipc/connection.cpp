#include "ipc/connection.h"

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "common/log.h"
#include "common/thread_name.h"
#include "engine/scheduler/scheduler.h"
#include "ipc/http_message.h"
#include "ipc/identity.h"
#include "ipc/route_table.h"

namespace hearth::ipc {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr size_t kFirstReadBytes = 4096;
// After an error that leaves the request unread, read and drop up to this much (for up to
// kDrainTime) before closing, so that the client sees the response rather than a reset.
constexpr size_t kDrainBytes = 1 << 20;
constexpr std::chrono::milliseconds kDrainTime{500};

inline auto redirect(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

template <class Protocol>
class Connection : public std::enable_shared_from_this<Connection<Protocol>> {
 public:
  using Stream = beast::basic_stream<Protocol>;

  // How the engine thread reaches a connection: its executor while armed. Disarmed (under
  // the mutex) when the generation or the connection ends, so that no executor — and so no
  // reference into the io_context — outlives the connection inside a RequestHandle.
  struct Waker {
    std::mutex mutex;
    std::optional<net::any_io_executor> executor;
    std::weak_ptr<Connection> connection;
  };

  Connection(ServerState& state, typename Protocol::socket socket, bool check_host)
      : state_(state),
        stream_(std::move(socket)),
        wake_(stream_.get_executor()),
        check_host_(check_host),
        accepted_(std::chrono::steady_clock::now()) {
    if constexpr (std::is_same_v<Protocol, net::ip::tcp>) {
      peer_ = tcp_peer();
    } else {
      peer_ = unix_peer(stream_.socket().native_handle());
    }
  }

  ~Connection() {
    disarm_waker();
    if (call_thread_.joinable()) call_thread_.join();
    if (handle_) handle_->cancel();
    if (id_ != 0) state_.remove_connection(id_);
  }

  void start() {
    std::weak_ptr<Connection> weak = this->shared_from_this();
    auto ex = stream_.get_executor();
    id_ = state_.add_connection([weak, ex] {
      net::post(ex, [weak] {
        if (auto self = weak.lock()) self->force_close();
      });
    });
    net::co_spawn(ex, serve(this->shared_from_this()), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        LOG_DEBUG(std::string("ipc: connection ended by an exception: ") + x.what());
      } catch (...) {
        LOG_DEBUG("ipc: connection ended by an unknown exception");
      }
    });
  }

 private:
  static net::awaitable<void> serve(std::shared_ptr<Connection> self) {
    try {
      co_await self->serve_requests();
    } catch (const std::exception& e) {
      LOG_DEBUG(std::string("ipc: connection failed: ") + e.what());
    }
    beast::error_code ec;
    self->stream_.socket().close(ec);
  }

  // Called on the connection's strand by Server::stop().
  void force_close() {
    closing_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(net::socket_base::shutdown_both, ec);
    stream_.close();
    wake_.cancel();
  }

  std::chrono::milliseconds write_timeout() const { return state_.options.write_timeout; }

  // Whether a write went out. One that timed out means the client read nothing for
  // write_timeout (a full socket buffer): basic_stream has closed the socket, the caller
  // gives the connection up and cancels its generation.
  bool wrote(const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
      state_.responses.count_write_timeout();
      LOG_INFO("ipc: " + peer_name(peer_) + " read nothing for " + std::to_string(write_timeout().count()) +
               " ms; closing the connection" + (handle_ ? " and cancelling its request" : ""));
    }
    return !ec;
  }

  net::awaitable<void> serve_requests() {
    const ServerOptions& opt = state_.options;
    bool first = true;
    while (!closing_) {
      RequestParser parser;
      set_request_limits(parser, opt.body_limit_bytes);
      beast::error_code ec;
      // A new connection has header_timeout from accept for its whole header; between
      // keep-alive requests the client has idle_timeout to start the next one. Until the
      // header is whole the connection is idle: the first to go at the connection limit.
      state_.set_idle(id_, true);
      if (buffer_.size() == 0) {
        if (first) {
          stream_.expires_at(accepted_ + opt.header_timeout);
        } else {
          stream_.expires_after(opt.idle_timeout);
        }
        const size_t n = co_await stream_.async_read_some(buffer_.prepare(kFirstReadBytes), redirect(ec));
        if (ec) co_return;
        buffer_.commit(n);
      }
      if (first) {
        stream_.expires_at(accepted_ + opt.header_timeout);
      } else {
        stream_.expires_after(opt.header_timeout);
      }
      co_await http::async_read_header(stream_, buffer_, parser, redirect(ec));
      if (ec) {
        co_await answer_read_error(ec, read_error_shape(parser));
        co_return;
      }
      state_.set_idle(id_, false);
      if (!parser.is_done()) {
        if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
          static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          stream_.expires_after(write_timeout());
          co_await net::async_write(stream_, net::buffer(kContinue), redirect(ec));
          if (!wrote(ec)) co_return;
        }
        stream_.expires_after(opt.body_timeout);
        co_await http::async_read(stream_, buffer_, parser, redirect(ec));
        if (ec) {
          co_await answer_read_error(ec, read_error_shape(parser));
          co_return;
        }
      }
      stream_.expires_never();

      ReadRequest read = take_request(parser);
      const HttpRequest& request = read.request;
      const unsigned version = read.version;
      bool keep_alive = read.keep_alive && state_.accepting.load();
      head_only_ = read.head;
      // A browser's allowed origin gets CORS headers on whatever is answered.
      cors_ = answer_cors(request, peer_, opt.allowed_origins);

      const RouteContext ctx = route_context();
      std::optional<RouteResult> routed = co_await answer(request, ctx);
      if (!routed) break;
      bool go_on = co_await respond(std::move(*routed), version, keep_alive);
      if (go_on && reroute_) {
        // An upstream model's local fallback answers instead (StreamCall::reroute); once.
        const HttpRequest again = std::move(*reroute_);
        reroute_.reset();
        routed = co_await answer(again, ctx);
        if (!routed) break;
        go_on = co_await respond(std::move(*routed), version, keep_alive);
        reroute_.reset();
      }
      if (!go_on) break;
      first = false;
    }
    co_await close_gracefully(false);
  }

  // Sends a route's answer; whether the connection may serve another request.
  net::awaitable<bool> respond(RouteResult result, unsigned version, bool keep_alive) {
    if (auto* response = std::get_if<HttpResponse>(&result))
      co_return co_await write_response(*response, version, keep_alive) && keep_alive;
    if (auto* call = std::get_if<EngineCall>(&result))
      co_return co_await run_engine_call(std::move(*call), version, keep_alive);
    if (auto* stream_call = std::get_if<StreamCall>(&result))
      co_return co_await run_stream_call(std::move(*stream_call), version, keep_alive);
    co_return co_await run_generation(std::get<GenerationJob>(std::move(result)), version, keep_alive);
  }

  // The error object of the API the request's path belongs to, once its request line is read
  // (the target is empty until then).
  static ErrorShape read_error_shape(const RequestParser& parser) {
    const auto target = parser.get().target();
    return error_shape_of_target(std::string_view(target.data(), target.size()));
  }

  // The request could not be read whole: answer what can be answered, then close.
  net::awaitable<void> answer_read_error(const beast::error_code& ec, ErrorShape shape) {
    if (closing_) co_return;
    const std::optional<ApiError> error = read_error_answer(ec, state_.options.body_limit_bytes);
    if (!error) {
      LOG_DEBUG("ipc: closing connection: " + ec.message());
      co_await close_gracefully(false);
      co_return;
    }
    head_only_ = false;
    co_await write_response(error_response(*error, shape), 11, false);
    co_await close_gracefully(true);
  }

  net::awaitable<bool> write_response(const HttpResponse& r, unsigned version, bool keep_alive) {
    ResponseMessage res = response_message(r, version, keep_alive, head_only_, cors_);
    state_.responses.count(r.status);
    beast::error_code ec;
    stream_.expires_after(write_timeout());
    co_await http::async_write(stream_, res, redirect(ec));
    co_return wrote(ec);
  }

  net::awaitable<bool> write_stream_head(const std::string& content_type, unsigned version, bool keep_alive,
                                         bool chunked) {
    http::response<http::empty_body> res{http::status::ok, version};
    res.set(http::field::server, kServerName);
    res.set(http::field::content_type, content_type);
    res.set(http::field::cache_control, "no-cache");
    for (const auto& [name, value] : cors_) res.set(name, value);
    res.keep_alive(keep_alive);
    if (chunked) res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    state_.responses.count(200);
    beast::error_code ec;
    stream_.expires_after(write_timeout());
    co_await http::async_write_header(stream_, sr, redirect(ec));
    co_return wrote(ec);
  }

  net::awaitable<bool> write_stream_data(const std::string& data, bool chunked) {
    beast::error_code ec;
    stream_.expires_after(write_timeout());
    if (chunked) {
      co_await net::async_write(stream_, http::make_chunk(net::buffer(data)), redirect(ec));
    } else {
      co_await net::async_write(stream_, net::buffer(data), redirect(ec));
    }
    co_return wrote(ec);
  }

  net::awaitable<bool> write_last_chunk() {
    beast::error_code ec;
    stream_.expires_after(write_timeout());
    co_await net::async_write(stream_, http::make_chunk_last(), redirect(ec));
    co_return wrote(ec);
  }

  // A function another thread calls to wake this connection's wait on wake_: it posts,
  // never blocks. The engine may keep it (inside a RequestHandle) after the connection and
  // even the io_context are gone, so it holds no executor of its own: it reaches this
  // strand through a Waker that the connection disarms when it ends.
  std::function<void()> arm_waker() {
    disarm_waker();
    waker_ = std::make_shared<Waker>();
    waker_->executor = stream_.get_executor();
    waker_->connection = this->shared_from_this();
    return [gate = state_.gate, waker = waker_] {
      std::lock_guard<std::mutex> gate_lock(gate->mutex);
      std::lock_guard<std::mutex> lock(waker->mutex);
      if (!gate->open || !waker->executor) return;
      net::post(*waker->executor, [weak = waker->connection] {
        if (auto self = weak.lock()) self->wake_.cancel();
      });
    };
  }

  // Runs run() on a thread of its own (it may wait for the engine thread, or load a
  // model), waits for it without blocking the io thread, and returns what it returned;
  // nullopt when the connection is closing meanwhile. The wait does not end early on
  // stop(): an engine call is bounded by one engine step, a load by reading one file.
  template <class T>
  net::awaitable<std::optional<T>> on_call_thread(std::function<T()> run, std::function<T(std::string)> on_error) {
    struct CallResult {
      std::mutex mutex;
      std::optional<T> value;
    };
    auto outcome = std::make_shared<CallResult>();
    std::function<void()> wake = arm_waker();
    call_thread_ = std::thread([run = std::move(run), on_error = std::move(on_error), outcome, wake] {
      set_thread_name("hearth-call");
      std::optional<T> r;
      try {
        r = run();
      } catch (const std::exception& e) {
        r = on_error(e.what());
      } catch (...) {
        r = on_error("the engine call failed");
      }
      {
        std::lock_guard<std::mutex> lock(outcome->mutex);
        outcome->value = std::move(r);
      }
      wake();
    });
    std::optional<T> value;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(outcome->mutex);
        value = std::move(outcome->value);
      }
      if (value) break;
      // As in run_generation: the wake-up posted after the check lands while we wait.
      beast::error_code ec;
      wake_.expires_at(net::steady_timer::time_point::max());
      co_await wake_.async_wait(redirect(ec));
    }
    call_thread_.join();
    disarm_waker();
    if (closing_) co_return std::nullopt;
    co_return value;
  }

  net::awaitable<bool> run_engine_call(EngineCall call, unsigned version, bool keep_alive) {
    // Named, not temporaries: GCC 12 mishandles temporaries that outlive a co_await.
    std::function<HttpResponse()> run = [run = std::move(call.run), engine = std::move(call.engine)] { return run(); };
    std::function<HttpResponse(std::string)> on_error = [](std::string what) {
      return error_response(internal_error(std::move(what)));
    };
    std::optional<HttpResponse> response = co_await on_call_thread<HttpResponse>(std::move(run), std::move(on_error));
    if (!response) co_return false;
    co_return co_await write_response(*response, version, keep_alive) && keep_alive;
  }

  // What a StreamCall's thread and this connection share.
  struct StreamShared {
    std::mutex mutex;
    std::string pending;                 // emitted, not yet written
    std::optional<HttpResponse> result;  // what run returned, once it has
    std::atomic<bool> cancelled{false};
  };

  // Runs a StreamCall's run on the call thread, writing what it emits as it comes (streamed)
  // or what it returns. The client's hang-up (watched as during a generation), a failed write
  // or stop() sets its cancelled flag; the coroutine still waits for run to return, without
  // blocking the io thread, so no thread outlives the connection's request.
  net::awaitable<bool> run_stream_call(StreamCall call, unsigned version, bool keep_alive) {
    auto shared = std::make_shared<StreamShared>();
    std::function<void()> wake = arm_waker();
    call_thread_ = std::thread([run = std::move(call.run), shared, wake] {
      set_thread_name("hearth-stream");
      const StreamCall::Emit emit = [&shared, &wake](std::string piece) {
        {
          std::lock_guard<std::mutex> lock(shared->mutex);
          shared->pending += piece;
        }
        wake();
      };
      HttpResponse r;
      try {
        r = run(emit, shared->cancelled);
      } catch (const std::exception& e) {
        r = error_response(internal_error(e.what()), ErrorShape::Ollama);
      }
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->result = std::move(r);
      }
      wake();
    });
    stream_cancel_ = shared;
    start_watch();
    const bool chunked = version >= 11;  // HTTP/1.0: streamed raw to the close
    if (call.stream && !chunked) keep_alive = false;
    bool head_sent = call.stream && !call.defer_head;
    bool ok = !head_sent || co_await write_stream_head(call.content_type, version, keep_alive, chunked);
    std::optional<HttpResponse> result;
    for (;;) {
      if (!ok || client_gone_ || closing_) shared->cancelled = true;
      std::string out;
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        out.swap(shared->pending);
        result = std::move(shared->result);
      }
      if (out.empty() && !result) {
        // As in run_generation: nothing ran between the take and this wait, so a wake-up
        // posted after the take lands while we wait. (One posted while a write below was
        // under way found no wait to cancel: hence a take again after every write.)
        beast::error_code ec;
        wake_.expires_at(net::steady_timer::time_point::max());
        co_await wake_.async_wait(redirect(ec));
        continue;
      }
      if (call.stream && ok && !out.empty() && !head_sent) {
        head_sent = true;
        ok = co_await write_stream_head(call.content_type, version, keep_alive, chunked);
      }
      if (call.stream && ok && !out.empty()) ok = co_await write_stream_data(out, chunked);
      if (result) break;
    }
    stop_watch();
    call_thread_.join();
    disarm_waker();
    stream_cancel_.reset();
    if (!ok || client_gone_ || closing_) co_return false;
    if (!head_sent && call.reroute && *call.reroute) {
      reroute_ = std::move(**call.reroute);
      co_return true;
    }
    if (!head_sent) co_return co_await write_response(*result, version, keep_alive) && keep_alive;
    if (!result->body.empty() && !co_await write_stream_data(result->body, chunked)) co_return false;
    co_return (!chunked || co_await write_last_chunk()) && keep_alive;
  }

  RouteContext route_context() const {
    const ServerOptions& opt = state_.options;
    RouteContext ctx;
    ctx.host = state_.host().get();
    ctx.accepting = state_.accepting.load();
    ctx.check_host = check_host_;
    ctx.peer = peer_;
    ctx.scope_mode = opt.cache_scope;
    ctx.allowed_origins = &opt.allowed_origins;
    ctx.counters = &state_.responses;
    ctx.open_connections = state_.open_connections.load();
    ctx.models_dir = &opt.models_dir;
    ctx.puller = state_.puller();
    ctx.upstreams = state_.upstreams();
    return ctx;
  }

  // The request's route (route_table.h), its model resolved — loaded first on the call
  // thread when it is not (other requests for it wait for the same load) — and its handler's
  // answer. nullopt when the connection closes meanwhile.
  net::awaitable<std::optional<RouteResult>> answer(const HttpRequest& request, const RouteContext& ctx) {
    std::variant<HttpResponse, Dispatch> dispatched = dispatch(request, ctx);
    if (auto* r = std::get_if<HttpResponse>(&dispatched)) co_return RouteResult{std::move(*r)};
    const Dispatch& d = std::get<Dispatch>(dispatched);
    std::shared_ptr<const EngineRef> engine;
    std::chrono::nanoseconds load_wait{0};
    if (d.model) {
      engine = ctx.host->loaded(*d.model);
      if (!engine && d.load) {
        const auto t0 = std::chrono::steady_clock::now();
        // Named, not temporaries: GCC 12 mishandles temporaries that outlive a co_await.
        std::function<ModelHost::Loaded()> load = [host = ctx.host, id = *d.model] { return host->load(id); };
        std::function<ModelHost::Loaded(std::string)> on_error = [](std::string what) -> ModelHost::Loaded {
          return HostError{HostError::Kind::LoadFailed, std::move(what)};
        };
        std::optional<ModelHost::Loaded> loaded =
            co_await on_call_thread<ModelHost::Loaded>(std::move(load), std::move(on_error));
        if (!loaded) co_return std::nullopt;
        if (auto* e = std::get_if<HostError>(&*loaded))
          co_return RouteResult{error_response(host_error(*e), d.route->errors)};
        engine = std::get<std::shared_ptr<const EngineRef>>(std::move(*loaded));
        load_wait = std::chrono::steady_clock::now() - t0;
      }
    }
    co_return run_route(d, request, ctx, std::move(engine), load_wait);
  }

  // Submits the job and relays its events through the job's writer: written as they come
  // (a streamed answer) or one response at the end. Returns whether the connection may serve
  // another request.
  net::awaitable<bool> run_generation(GenerationJob job, unsigned version, bool keep_alive) {
    LOG_DEBUG("ipc: " + job.log_id + " from " + peer_name(peer_));
    if (job.prepare) {
      // Named, not temporaries: GCC 12 mishandles temporaries that outlive a co_await.
      std::function<std::optional<ApiError>()> prepare = [&job] { return job.prepare(job.request); };
      std::function<std::optional<ApiError>(std::string)> on_error = [](std::string what) -> std::optional<ApiError> {
        return internal_error(std::move(what));
      };
      std::optional<std::optional<ApiError>> prepared =
          co_await on_call_thread<std::optional<ApiError>>(std::move(prepare), std::move(on_error));
      if (!prepared) co_return false;
      if (*prepared) {
        ended_on_host(job);
        co_return co_await write_response(error_response(**prepared, job.writer->error_shape()), version, keep_alive) &&
            keep_alive;
      }
    }
    auto on_event = arm_waker();  // on the engine thread: posts, never blocks
    Submitted submitted = job.engine->scheduler->submit(std::move(job.request), std::move(on_event));
    if (submitted.status != SubmitStatus::Accepted) {
      ended_on_host(job);
      const HttpResponse refused = submit_error_response(submitted, job.writer->error_shape());
      co_return co_await write_response(refused, version, keep_alive) && keep_alive;
    }
    handle_ = std::move(submitted.handle);
    start_watch();

    ResponseWriter& writer = *job.writer;
    const bool stream = writer.streamed();
    // HTTP/1.0 has no chunked encoding: stream raw and close at the end.
    const bool chunked = version >= 11;
    if (stream && !chunked) keep_alive = false;
    bool ok = true;
    if (stream) {
      ok = co_await write_stream_head(writer.content_type(), version, keep_alive, chunked);
      if (const std::string opening = writer.open(); ok && !opening.empty()) {
        ok = co_await write_stream_data(opening, chunked);
      }
    }
    bool done = false;
    while (ok && !done && !client_gone_ && !closing_) {
      std::vector<RequestEvent> taken = handle_->take_events();
      if (taken.empty()) {
        // Nothing ran between take_events and this wait: a wake-up posted after the take
        // lands while we wait.
        beast::error_code ec;
        wake_.expires_at(net::steady_timer::time_point::max());
        co_await wake_.async_wait(redirect(ec));
        continue;
      }
      std::string out;
      for (RequestEvent& taken_event : taken) {
        for (const ApiEvent& ev : job.events.feed(std::move(taken_event))) {
          if (done) break;
          if (ev.kind == ApiEvent::Kind::Error) LOG_WARN("ipc: generation failed: " + ev.error.message);
          out += writer.write(ev);
          done = ev.kind == ApiEvent::Kind::Done || ev.kind == ApiEvent::Kind::Error;
        }
      }
      if (stream && !out.empty()) ok = co_await write_stream_data(out, chunked);
    }
    stop_watch();
    if (!done) handle_->cancel();  // the client left, a write failed, or stop()
    handle_.reset();
    disarm_waker();
    ended_on_host(job);
    if (!ok || !done || closing_) co_return false;
    if (stream) co_return (!chunked || co_await write_last_chunk()) && keep_alive;
    co_return co_await write_response(writer.response(), version, keep_alive) && keep_alive;
  }

  // Tells the host a request on its model ended (its keep-alive starts), after letting go
  // of the engine, so that an unload it allows can happen at once.
  void ended_on_host(GenerationJob& job) {
    ModelHost* host = state_.host().get();
    if (host == nullptr || !job.engine) return;
    const std::string id = job.engine->model.id;
    job.engine.reset();
    host->request_ended(id, job.keep_alive);
  }

  void disarm_waker() {
    if (!waker_) return;
    std::lock_guard<std::mutex> lock(waker_->mutex);
    waker_->executor.reset();
    waker_.reset();
  }

  // While a request generates, a pending readiness wait on the socket tells a client that
  // hung up (EOF or error) — even during a long prefill when nothing is written.
  void start_watch() {
    watching_ = true;
    ++watch_epoch_;
    client_gone_ = false;
    arm_watch();
  }

  void arm_watch() {
    std::weak_ptr<Connection> weak = this->shared_from_this();
    const uint64_t epoch = watch_epoch_;
    stream_.socket().async_wait(net::socket_base::wait_read, [weak, epoch](const beast::error_code& ec) {
      auto self = weak.lock();
      if (!self || !self->watching_ || self->watch_epoch_ != epoch) return;
      self->on_readable(ec);
    });
  }

  void on_readable(const beast::error_code& ec) {
    if (ec == net::error::operation_aborted) return;
    if (!ec) {
      char c;
      const ssize_t n = ::recv(stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) {
        // A pipelined request arrives: it stays buffered for later, and a hang-up can no
        // longer be seen from here.
        watching_ = false;
        return;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        arm_watch();
        return;
      }
    }
    LOG_DEBUG("ipc: client left during generation; cancelling");
    watching_ = false;
    client_gone_ = true;
    if (handle_) handle_->cancel();
    if (stream_cancel_) stream_cancel_->cancelled = true;
    wake_.cancel();
  }

  void stop_watch() {
    if (!watching_) return;
    watching_ = false;
    beast::error_code ec;
    stream_.socket().cancel(ec);  // only the readiness wait is pending now
  }

  net::awaitable<void> close_gracefully(bool drain) {
    beast::error_code ec;
    stream_.socket().shutdown(net::socket_base::shutdown_send, ec);
    if (drain && !ec && !closing_) {
      stream_.expires_after(kDrainTime);
      std::array<char, 16384> sink;
      size_t total = 0;
      while (total < kDrainBytes) {
        const size_t n = co_await stream_.async_read_some(net::buffer(sink), redirect(ec));
        if (ec) break;
        total += n;
      }
    }
    stream_.close();
  }

  ServerState& state_;
  Stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer wake_;  // a generation waits on it; engine events and hang-ups cancel it
  const bool check_host_;
  PeerIdentity peer_;  // who is connected (SO_PEERCRED), or the TCP identity
  HeaderList cors_;    // CORS headers for the current request
  const std::chrono::steady_clock::time_point accepted_;
  uint64_t id_ = 0;
  std::shared_ptr<RequestHandle> handle_;        // the generation running now, if any
  std::shared_ptr<Waker> waker_;                 // its wake-up path, disarmed when it ends
  std::shared_ptr<StreamShared> stream_cancel_;  // the StreamCall running now, if any
  std::thread call_thread_;                      // runs an EngineCall; joined before the next request
  std::optional<HttpRequest> reroute_;           // a StreamCall's request to answer instead
  bool closing_ = false;                         // stop() closed us
  bool head_only_ = false;                       // the request being answered is a HEAD
  bool watching_ = false;
  bool client_gone_ = false;
  uint64_t watch_epoch_ = 0;
};

}  // namespace

template <class Protocol>
void start_connection(ServerState& state, typename Protocol::socket socket, bool check_host) {
  std::make_shared<Connection<Protocol>>(state, std::move(socket), check_host)->start();
}

template void start_connection<net::ip::tcp>(ServerState&, net::ip::tcp::socket, bool);
template void start_connection<net::local::stream_protocol>(ServerState&, net::local::stream_protocol::socket, bool);

}  // namespace hearth::ipc
