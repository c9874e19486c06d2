// hearth status and hearth models.
#include <cstdio>
#include <string>

#include "commands.h"

namespace hearth::cli {

int run_status(const GlobalOptions& global) {
  Client client;
  if (!client.open(global)) return kExitError;
  std::printf("socket:  %s\n", hearth_client_socket_path(client.get()));
  std::printf("client:  libhearth-client %s\n", hearth_client_version());
  int rc = hearth_client_health(client.get());
  switch (rc) {
    case HEARTH_OK:
      std::printf("daemon:  ready\n");
      break;
    case HEARTH_ERR_UNAVAILABLE:
      std::printf("daemon:  not ready (%s)\n", hearth_client_last_error(client.get()));
      return kExitError;
    case HEARTH_ERR_NO_DAEMON:
      std::printf("daemon:  not running\n");
      return report_error(client.get(), rc);
    default:
      std::printf("daemon:  error\n");
      return report_error(client.get(), rc);
  }
  hearth_model_info* models = nullptr;
  size_t n_models = 0;
  rc = hearth_client_list_models(client.get(), &models, &n_models);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  for (size_t i = 0; i < n_models; ++i) std::printf("model:   %s\n", models[i].id);
  if (n_models == 0) std::printf("model:   (none)\n");
  hearth_free(models);
  // The KV cache's cost per token (an older daemon without it prints nothing).
  char* cache = nullptr;
  if (hearth_client_cache_stats(client.get(), &cache) == HEARTH_OK) {
    const nlohmann::json j = nlohmann::json::parse(cache, nullptr, /*allow_exceptions=*/false);
    hearth_free(cache);
    if (j.is_object())
      if (const std::string kv = kv_summary(j); !kv.empty()) std::printf("kv:      %s\n", kv.c_str());
  }
  return kExitOk;
}

namespace {

// "630M", "135M", "1.5B": a parameter count as model cards write it.
std::string parameter_count(double n) {
  char buf[32];
  if (n >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fM", n / 1e6);
  }
  return buf;
}

// hearth models against a daemon without GET /api/models: the ids it serves.
int list_served(Client& client) {
  hearth_model_info* models = nullptr;
  size_t n_models = 0;
  int rc = hearth_client_list_models(client.get(), &models, &n_models);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  for (size_t i = 0; i < n_models; ++i) std::printf("%s\n", models[i].id);
  hearth_free(models);
  return kExitOk;
}

// A model's "sampling_defaults" (GET /api/models): "temperature 0.7, top_k 20, top_p 0.8,
// repetition_penalty 1.05 (catalog)".
std::string sampling_text(const nlohmann::json& d) {
  std::string out;
  for (const char* k : {"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "penalty_last_n"}) {
    const auto v = d.find(k);
    if (v == d.end() || !v->is_number()) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %g", out.empty() ? "" : ", ", k, v->get<double>());
    out += buf;
  }
  if (const auto src = d.find("source"); src != d.end() && src->is_string())
    out += " (" + src->get<std::string>() + ")";
  return out;
}

void print_installed(const nlohmann::json& j) {
  const auto str = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string("-");
  };
  const auto num = [](const nlohmann::json& o, const char* k) { return o.value(k, 0.0); };
  std::printf("%-22s %9s  %-8s %-7s %6s %8s  %s\n", "ID", "SIZE", "ARCH", "QUANT", "PARAMS", "CONTEXT", "");
  for (const nlohmann::json& m : j.value("models", nlohmann::json::array())) {
    const bool available = m.value("available", false);
    std::string state = m.value("loaded", false) ? "loaded" : "";
    if (!available) state = "cannot be served: " + str(m, "error");
    std::printf(
        "%-22s %9s  %-8s %-7s %6s %8s  %s\n", str(m, "id").c_str(), human_bytes(num(m, "bytes")).c_str(),
        str(m, "architecture").c_str(), str(m, "quantization").c_str(),
        num(m, "parameters") > 0 ? parameter_count(num(m, "parameters")).c_str() : "-",
        num(m, "context_length") > 0 ? std::to_string(static_cast<long>(num(m, "context_length"))).c_str() : "-",
        state.c_str());
    if (const auto d = m.find("sampling_defaults"); d != m.end() && d->is_object() && !d->empty())
      std::printf("%22s sampling: %s\n", "", sampling_text(*d).c_str());
  }
  for (const nlohmann::json& m : j.value("upstream_models", nlohmann::json::array()))
    std::printf("%-22s served by upstream %s (%s)\n", str(m, "id").c_str(), str(m, "upstream").c_str(),
                str(m, "url").c_str());
  for (const nlohmann::json& c : j.value("catalog", nlohmann::json::array())) {
    if (c.value("installed", true)) continue;
    std::printf("not installed: %s (%s), %s: hearth-fetch-model %s\n", str(c, "name").c_str(),
                human_bytes(num(c, "bytes")).c_str(), str(c, "about").c_str(), str(c, "name").c_str());
  }
  if (j.contains("dir")) std::printf("models folder: %s\n", str(j, "dir").c_str());
}

}  // namespace

int run_models(const GlobalOptions& global, bool json) {
  Client client;
  if (!client.open(global)) return kExitError;
  char* text = nullptr;
  const int rc = hearth_client_installed_models(client.get(), &text);
  if (rc == HEARTH_ERR_BAD_REQUEST && hearth_client_http_status(client.get()) == 404 && !json)
    return list_served(client);  // a daemon older than /api/models
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  hearth_free(text);
  if (!j.is_object()) {
    std::fprintf(stderr, "hearth: the daemon's list of models is not a JSON object\n");
    return kExitError;
  }
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_installed(j);
  }
  return kExitOk;
}

}  // namespace hearth::cli
