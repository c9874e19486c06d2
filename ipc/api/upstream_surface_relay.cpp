#include "ipc/api/upstream_surface_relay.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "ipc/api/upstream_forward.h"
#include "ipc/errors.h"
#include "ipc/json_fields.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

// An answer that is not a stream (a whole one, an upstream's 4xx) is kept up to this many
// bytes; more is an error.
constexpr size_t kMaxWholeBytes = 64u << 20;

}  // namespace

SurfaceRelay::SurfaceRelay(std::string upstream, std::unique_ptr<ResponseWriter> writer, const StreamCall::Emit& emit,
                           Now now)
    : upstream_(std::move(upstream)),
      writer_(std::move(writer)),
      emit_(emit),
      now_(std::move(now)),
      sent_(now_()),
      first_byte_(sent_),
      reader_(upstream_, sent_) {}

bool SurfaceRelay::head(int status) {
  status_ = status;
  first_byte_ = now_();
  streaming_ = writer_->streamed() && status == 200;
  return true;
}

bool SurfaceRelay::data(const char* bytes, size_t n) {
  if (!streaming_) {
    if (whole_.size() + n > kMaxWholeBytes) return false;
    whole_.append(bytes, n);
    return true;
  }
  const Clock::time_point now = now_();
  for (const SseFramer::Event& ev : framer_.feed(std::string_view(bytes, n))) {
    if (!ev.data || ended_) continue;
    json chunk;
    if (*ev.data == "[DONE]") {
      write(reader_.done(now));
    } else if (!parse_json(*ev.data, &chunk)) {
      write(reader_.chunk(chunk, now));
    } else {
      write({});  // a chunk that is not JSON still opens the answer
    }
  }
  return !framer_.too_big();
}

HttpResponse SurfaceRelay::finish(std::string broken, bool cancelled) {
  if (framer_.too_big()) broken = "the upstream sent an event over 1 MiB";
  if (!streaming_) return whole(broken);
  if (!ended_ && reader_.finished() && broken.empty()) write(reader_.done(now_()));
  if (!ended_ && !cancelled) {
    const std::string why =
        "the upstream '" + upstream_ + "' broke off the answer" + (broken.empty() ? "" : ": " + broken);
    LOG_WARN(why);
    ApiEvent e;
    e.kind = ApiEvent::Kind::Error;
    e.error = ApiError{502, why, "upstream_error", "", "upstream_broken"};
    write({e});
  }
  return HttpResponse{200, writer_->content_type(), "", "", {}};
}

void SurfaceRelay::write(const std::vector<ApiEvent>& events) {
  std::string out;
  if (streaming_ && !opened_) {  // the first chunk was read: its usage, when it has one, counts the prompt
    opened_ = true;
    if (const std::optional<int32_t> n = reader_.prompt_tokens()) writer_->prompt_counted(*n);
    out = writer_->open();
  }
  for (const ApiEvent& ev : events) {
    if (ended_) break;
    out += writer_->write(ev);
    ended_ = ev.kind == ApiEvent::Kind::Done || ev.kind == ApiEvent::Kind::Error;
  }
  if (!out.empty()) emit_(std::move(out));
}

HttpResponse SurfaceRelay::whole(const std::string& broken) {
  const ErrorShape shape = writer_->error_shape();
  if (!broken.empty())
    return error_response(failure_error({502, "the upstream '" + upstream_ + "' broke off: " + broken}), shape);
  if (status_ != 200) return error_response(upstream_answer_error(status_, whole_, upstream_), shape);
  json body;
  if (parse_json(whole_, &body))
    return error_response(upstream_answer_error(502, "an answer that is not a JSON object", upstream_), shape);
  write(reader_.whole(body, first_byte_, now_()));
  return writer_->response();
}

}  // namespace hearth::ipc
