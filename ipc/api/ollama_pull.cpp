#include "ipc/api/ollama_pull.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "ipc/errors.h"

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

std::string ndjson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

std::optional<std::string> OllamaPullLines::line(const PullProgress& p, Clock::time_point now) {
  switch (p.kind) {
    case PullProgress::Kind::Resolving:
      return ndjson({{"status", "pulling manifest"}});
    case PullProgress::Kind::Verifying:
      return ndjson({{"status", "verifying sha256 digest"}});
    case PullProgress::Kind::Message:
      return ndjson({{"status", p.text}});
    case PullProgress::Kind::Downloading:
      break;
  }
  const auto it = last_.find(p.file);
  const bool first = it == last_.end(), last = p.completed >= p.total;
  if (!first && !last && now - it->second < kMinInterval) return std::nullopt;
  last_[p.file] = now;
  // Ollama names a layer by the first 12 hex digits of its digest.
  json j{{"status", "pulling " + (p.sha256.empty() ? p.file : p.sha256.substr(0, 12))}};
  if (!p.sha256.empty()) j["digest"] = "sha256:" + p.sha256;
  j["total"] = p.total;
  j["completed"] = p.completed;
  return ndjson(j);
}

std::string OllamaPullLines::success() {
  return ndjson({{"status", "success"}});
}

std::string OllamaPullLines::error(const std::string& message) {
  return ndjson({{"error", message}});
}

StreamCall ollama_pull_call(std::shared_ptr<ModelPuller> puller, std::string name, bool stream) {
  StreamCall call;
  call.stream = stream;
  call.run = [puller = std::move(puller), name = std::move(name), stream](const StreamCall::Emit& emit,
                                                                          const std::atomic<bool>& cancelled) {
    OllamaPullLines lines;
    auto on_progress = [&](const PullProgress& p) {
      if (!stream) return;
      if (std::optional<std::string> l = lines.line(p, OllamaPullLines::Clock::now())) emit(std::move(*l));
    };
    Result<std::string> pulled = puller->pull(name, on_progress, cancelled);
    HttpResponse r;
    if (pulled) {
      r.body = stream ? OllamaPullLines::success() : json{{"status", "success"}}.dump();
      return r;
    }
    if (!stream) return error_response(internal_error(pulled.error().message), ErrorShape::Ollama);
    r.body = OllamaPullLines::error(pulled.error().message);
    return r;
  };
  return call;
}

}  // namespace hearth::ipc
