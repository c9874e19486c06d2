// Ollama's model routes: what is installed (GET /api/tags), one model's description (POST
// /api/show), what is loaded (GET /api/ps), the version, and pull, delete and copy as far as
// hearth has them.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/catalog.h"
#include "engine/model/installed.h"
#include "ipc/api/hearth.h"
#include "ipc/api/ollama.h"
#include "ipc/api/ollama_pull.h"
#include "ipc/api/ollama_response.h"
#include "ipc/json_fields.h"

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

namespace hearth::ipc {

using json = nlohmann::ordered_json;

namespace {

constexpr ErrorShape kShape = ErrorShape::Ollama;

HttpResponse fail(const ApiError& e) {
  return error_response(e, kShape);
}

ApiError status_error(int status, std::string message, std::string code) {
  ApiError e = bad_request(std::move(message), "", std::move(code));
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  return e;
}

ApiError model_not_found(const std::string& name) {
  return not_found("model '" + name + "' not found; GET /api/tags lists the installed models", "model_not_found");
}

// A parameter count as Ollama writes it: "135M", "494.03M", "7.6B", "1K".
std::string parameter_size(int64_t n) {
  char buf[32];
  const double v = static_cast<double>(n);
  if (n >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, v / 1e9 == std::floor(v / 1e9) ? "%.0fB" : "%.1fB", v / 1e9);
  } else if (n >= 1'000'000) {
    std::snprintf(buf, sizeof buf, v / 1e6 == std::floor(v / 1e6) ? "%.0fM" : "%.2fM", v / 1e6);
  } else if (n >= 1'000) {
    std::snprintf(buf, sizeof buf, "%.0fK", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  }
  return buf;
}

// The catalog's sha256 of a catalog file of the catalog's size (hearth-fetch-model checked
// it); any other file gets 16 hex digits of FNV-1a over its name, size and mtime: an identity
// that changes when the file does, not a hash of its content (that would read the whole file).
std::string model_digest(const InstalledModel& m) {
  if (const CatalogModel* c = find_catalog_model(m.catalog_name); c != nullptr && c->bytes == m.bytes) return c->sha256;
  const std::string key = m.file + '\0' + std::to_string(m.bytes) + '\0' + std::to_string(m.modified);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

json details_json(const InstalledModel& m) {
  return json{{"parent_model", ""},
              {"format", "gguf"},
              {"family", m.arch},
              {"families", json::array({m.arch})},
              {"parameter_size", m.parameters > 0 ? parameter_size(m.parameters) : ""},
              {"quantization_level", m.quantization}};
}

std::string unix_time(int64_t seconds) {
  return rfc3339(std::chrono::seconds(seconds));
}

// The name a body gives: "model", or "name" (Ollama's older field).
std::variant<std::string, ApiError> body_model(const json& body) {
  for (const char* key : {"model", "name"}) {
    const auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_string()) return bad_request(std::string("'") + key + "' must be a string", key, "invalid_type");
    if (!it->get_ref<const std::string&>().empty()) return it->get<std::string>();
  }
  return bad_request("'model' (the name of a model) is required", "model", "missing_required_parameter");
}

// The host's model a body names, or the error to answer.
std::variant<HostedModel, ApiError> named_hosted(const ModelHost& host, const json& body) {
  std::variant<std::string, ApiError> name = body_model(body);
  if (auto* e = std::get_if<ApiError>(&name)) return *e;
  const std::string& n = std::get<std::string>(name);
  if (const std::optional<std::string> id = host.resolve(n)) {
    for (const HostedModel& m : host.models())
      if (m.id == *id) return m;
  }
  return model_not_found(n);
}

// The turn format hearth renders (chat_template.h render_chat), written as an Ollama template
// of one turn for the clients that read it; hearth itself never executes it. A ChatML
// model's default system prompt is the template's else branch.
std::string go_template(const ChatTemplate& t) {
  switch (t.family) {
    case ChatFamily::ChatML:
    case ChatFamily::Qwen3: {  // Qwen3: no default system prompt; the reasoning is the model's
      std::string s = "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n";
      if (!t.default_system.empty()) s += "{{ else }}<|im_start|>system\n" + t.default_system + "<|im_end|>\n";
      return s +
             "{{ end }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n{{ .Response }}<|im_end|>\n";
    }
    case ChatFamily::Gemma:
      return "<bos><start_of_turn>user\n{{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}<end_of_turn>\n"
             "<start_of_turn>model\n{{ .Response }}<end_of_turn>\n";
    case ChatFamily::Llama3:
      return "<|begin_of_text|>{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>"
             "{{ end }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>";
  }
  return "";
}

// An array of the file's metadata, or [] unless verbose (vocabularies run to megabytes).
json metadata_array(const gguf::File& f, const std::string& key, bool verbose) {
  json out = json::array();
  if (!verbose) return out;
  const std::optional<gguf::ValueType> elem = f.array_elem_type(key);
  if (elem == gguf::ValueType::STRING) {
    if (auto v = f.get_string_array(key)) out = *v;
  } else if (elem == gguf::ValueType::F32 || elem == gguf::ValueType::F64) {
    if (auto v = f.get_f32_array(key)) out = *v;
  } else if (auto v = f.get_int_array(key)) {
    out = *v;
  }
  return out;
}

// Ollama's model_info: the GGUF file's metadata, key by key, and general.parameter_count
// (the tensors' elements) when the file does not say it.
json model_info_json(const gguf::File& f, bool verbose, int64_t parameters) {
  json info = json::object();
  for (const std::string& key : f.keys()) {
    const std::optional<gguf::ValueType> t = f.type_of(key);
    if (!t) continue;
    switch (*t) {
      case gguf::ValueType::STRING:
        if (auto v = f.get_string(key)) info[key] = std::string(*v);
        break;
      case gguf::ValueType::BOOL:
        if (auto v = f.get_bool(key)) info[key] = *v;
        break;
      case gguf::ValueType::F32:
      case gguf::ValueType::F64:
        if (auto v = f.get_float(key)) info[key] = *v;
        break;
      case gguf::ValueType::ARRAY:
        info[key] = metadata_array(f, key, verbose);
        break;
      case gguf::ValueType::U64:
        if (auto v = f.get_uint(key)) info[key] = *v;
        break;
      default:
        if (auto v = f.get_int(key)) info[key] = *v;
        break;
    }
  }
  if (!info.contains("general.parameter_count") && parameters > 0) info["general.parameter_count"] = parameters;
  return info;
}

}  // namespace

RouteResult ollama_tags(const Call& call) {
  json models = json::array();
  for (const HostedModel& h : call.ctx.host->models()) {
    if (!h.available) continue;
    const InstalledModel m = inspect_model(h.path);
    if (!m.usable) continue;  // deleted or damaged since the daemon listed it
    models.push_back({{"name", h.id},
                      {"model", h.id},
                      {"modified_at", unix_time(m.modified)},
                      {"size", m.bytes},
                      {"digest", model_digest(m)},
                      {"details", details_json(m)}});
  }
  // Models served by an upstream: no file here, so no size or digest; "remote_host" (as
  // Ollama's own remote models) says where they run.
  if (call.ctx.upstreams) {
    for (const UpstreamModel& m : call.ctx.upstreams->models())
      models.push_back({{"name", m.id},
                        {"model", m.id},
                        {"modified_at", unix_time(0)},
                        {"size", 0},
                        {"digest", ""},
                        {"remote_model", m.remote_id},
                        {"remote_host", m.url},
                        {"upstream", m.upstream},
                        {"details", json::object()}});
  }
  return json_response(200, json{{"models", std::move(models)}});
}

RouteResult ollama_ps(const Call& call) {
  json models = json::array();
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  for (const HostedModel& h : call.ctx.host->models()) {
    if (!h.loaded && !h.unloading) continue;  // an unloading model is listed until its memory is free
    const InstalledModel m = inspect_model(h.path);
    json j = loaded_model_json(h);
    j["name"] = h.id;
    j["model"] = h.id;
    j["size"] = h.memory_bytes;
    j["size_vram"] = h.device_memory_bytes;
    j["digest"] = model_digest(m);
    j["details"] = details_json(m);
    // A model kept loaded for ever expires at the end of RFC 3339's years.
    j["expires_at"] = h.expires_in_s ? rfc3339(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           now + std::chrono::duration<double>(*h.expires_in_s)))
                                     : "9999-12-31T23:59:59Z";
    j["context_length"] = h.n_ctx;
    models.push_back(std::move(j));
  }
  return json_response(200, json{{"models", std::move(models)}});
}

RouteResult ollama_show(const Call& call) {
  std::variant<HostedModel, ApiError> named = named_hosted(*call.ctx.host, call.body);
  if (auto* e = std::get_if<ApiError>(&named)) return fail(*e);
  const HostedModel& h = std::get<HostedModel>(named);
  bool verbose = false;
  if (const auto it = call.body.find("verbose"); it != call.body.end() && it->is_boolean()) verbose = it->get<bool>();
  Result<std::unique_ptr<gguf::File>> file = gguf::File::open(h.path);
  if (!file) return fail(model_not_found(h.id + " (" + file.error().message + ")"));
  const InstalledModel m = inspect_model(h.path, **file);
  // The template the model is served with: its engine's when loaded (a --chat-template
  // override included), else what its file says.
  const std::shared_ptr<const EngineRef> engine = h.loaded ? call.ctx.host->loaded(h.id) : nullptr;
  std::optional<ChatTemplate> tmpl;
  if (engine) {
    tmpl = engine->model.chat_template;
  } else if (Result<ChatTemplate> t = chat_template_from_gguf(**file)) {
    tmpl = *t;
  }
  json caps = json::array({"completion"});
  if (tmpl && ollama_model_calls_tools(*tmpl)) caps.push_back("tools");
  if (tmpl && chat_family_thinks(tmpl->family)) caps.push_back("thinking");  // as Ollama lists it
  const std::string go = tmpl ? go_template(*tmpl) : "";
  std::string parameters, modelfile = "# Modelfile of a hearth model\nFROM " + h.path + "\n";
  if (!go.empty()) modelfile += "TEMPLATE \"\"\"" + go + "\"\"\"\n";
  if (engine) {
    parameters = "num_ctx " + std::to_string(engine->n_ctx);
    modelfile += "PARAMETER " + parameters + "\n";
  }
  json j{{"modelfile", modelfile},
         {"parameters", parameters},
         {"template", go},
         {"details", details_json(m)},
         {"model_info", model_info_json(**file, verbose, m.parameters)},
         {"capabilities", std::move(caps)},
         {"modified_at", unix_time(m.modified)}};
  if (auto license = (*file)->get_string("general.license")) j["license"] = std::string(*license);
  return json_response(200, j);
}

// Deletes the model's file: only over the Unix socket, for root or the user hearthd runs as
// (the TCP listener cannot tell who asks; another user of a shared daemon must not remove what
// everyone is served), only a file in the models folder, and not while it is loaded.
RouteResult ollama_delete(const Call& call) {
  const PeerIdentity& peer = call.ctx.peer;
  if (peer.tcp) {
    return fail(status_error(403, "deleting a model needs hearth's Unix socket: the TCP listener cannot tell who asks",
                             "forbidden"));
  }
  if (!is_cache_admin(peer)) {
    return fail(status_error(
        403, "only root or the user hearthd runs as may delete models (" + peer_name(peer) + " asked)", "forbidden"));
  }
  std::variant<HostedModel, ApiError> named = named_hosted(*call.ctx.host, call.body);
  if (auto* e = std::get_if<ApiError>(&named)) return fail(*e);
  const HostedModel& h = std::get<HostedModel>(named);
  if (h.loaded) {
    return fail(status_error(409,
                             "the model '" + h.id + "' is loaded: unload it first (keep_alive 0, or POST /api/unload)",
                             "model_loaded"));
  }
  // The folder's entry (a link to a file elsewhere is an entry too: the link goes, not the file).
  namespace fs = std::filesystem;
  std::error_code ec1, ec2, ec3;
  const fs::path dir = call.ctx.models_dir ? fs::canonical(*call.ctx.models_dir, ec1) : fs::path();
  const fs::path file = fs::absolute(h.path, ec2).lexically_normal();
  const fs::path parent = fs::canonical(file.parent_path(), ec3);
  if (dir.empty() || ec1 || ec2 || ec3 || parent != dir) {
    return fail(status_error(
        403, "the model '" + h.id + "' is not in the models folder; hearth deletes only files there", "forbidden"));
  }
  if (::unlink(file.c_str()) != 0) {
    const int err = errno;
    if (err == ENOENT) return fail(model_not_found(h.id));
    const bool denied = err == EACCES || err == EPERM || err == EROFS;
    return fail(status_error(denied ? 403 : 500, "cannot delete " + file.string() + ": " + std::strerror(err),
                             denied ? "forbidden" : "delete_failed"));
  }
  return json_response(200, json{{"model", h.id}, {"deleted", file.filename().string()}});
}

RouteResult ollama_version(const Call&) {
  return json_response(200, json{{"version", kOllamaApiVersion}, {"hearth", HEARTH_VERSION}});
}

RouteResult ollama_root(const Call&) {
  HttpResponse r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = "Ollama is running";
  return r;
}

RouteResult ollama_not_implemented(const Call& call) {
  std::string path = call.request.target.substr(0, call.request.target.find('?'));
  return fail(status_error(501, call.request.method + " " + path + " is not supported by hearth", "not_implemented"));
}

RouteResult ollama_pull(const Call& call) {
  std::variant<std::string, ApiError> name = body_model(call.body);
  if (auto* e = std::get_if<ApiError>(&name)) return fail(*e);
  const std::string& n = std::get<std::string>(name);
  bool stream = true;
  if (const auto it = call.body.find("stream"); it != call.body.end() && !it->is_null()) {
    if (!it->is_boolean()) return fail(bad_request("'stream' must be a boolean", "stream", "invalid_type"));
    stream = it->get<bool>();
  }
  if (call.ctx.host->resolve(n)) {
    // Installed already: nothing to download, as Ollama answers a pull that finds the model
    // current. A stream (the default) is one NDJSON line.
    HttpResponse r = json_response(200, json{{"status", "success"}});
    if (stream) {
      r.content_type = "application/x-ndjson";
      r.body += "\n";
    }
    return r;
  }
  if (call.ctx.puller) return ollama_pull_call(call.ctx.puller, n, stream);
  // A server without a downloader (hearthd always has one).
  std::string how = "download it on the daemon's machine with: hearth pull " + n +
                    " (a catalog name, hf.co/ORG/REPO:QUANT or a Hub URL; hearth pull --list shows the catalog)";
  if (find_catalog_model(n) != nullptr) how = "install it with: hearth-fetch-model " + n;
  return fail(status_error(501, "this server does not download models; " + how, "not_implemented"));
}

RouteResult ollama_copy(const Call&) {
  return fail(status_error(501,
                           "hearth names models by their files and cannot copy one: copy or link the file in the "
                           "models folder under another name (hearthd lists the folder when it starts)",
                           "not_implemented"));
}

}  // namespace hearth::ipc
