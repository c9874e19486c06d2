// hearth ps, hearth load NAME, hearth unload NAME: the models a daemon has loaded, and
// loading or unloading one by name (a daemon started without --model serves every model in
// its folder, each loaded on first use).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "common.h"
#include "hearth/client.h"

namespace hearth::cli {

namespace {

std::string duration_text(const nlohmann::json& seconds) {
  if (!seconds.is_number()) return "never";
  const double s = seconds.get<double>();
  if (s < 120) return std::to_string(static_cast<long>(s + 0.5)) + " s";
  if (s < 7200) return std::to_string(static_cast<long>(s / 60 + 0.5)) + " min";
  return std::to_string(static_cast<long>(s / 3600 + 0.5)) + " h";
}

}  // namespace

int run_ps(const GlobalOptions& global, bool json) {
  Client client;
  if (!client.open(global)) return kExitError;
  char* text = nullptr;
  const int rc = hearth_client_loaded_models(client.get(), &text);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  hearth_free(text);
  if (!j.is_object()) {
    std::fprintf(stderr, "hearth: the daemon's list of loaded models is not a JSON object\n");
    return kExitError;
  }
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%-28s %9s  %-4s %-7s %6s %8s  %-10s %s\n", "ID", "MEMORY", "IN", "BACKEND", "CTX", "REQUESTS", "IDLE",
              "UNLOADS IN");
  for (const nlohmann::json& m : j.value("models", nlohmann::json::array())) {
    const long in_flight = m.value("in_flight", 0L);
    const bool unloading = m.value("state", std::string()) == "unloading";  // writing its cache, freeing memory
    // Where its weights and KV pool are: the GPU's memory or RAM.
    const char* where = m.value("device_memory_bytes", 0.0) > 0 ? "GPU" : "RAM";
    std::printf("%-28s %9s  %-4s %-7s %6ld %8ld  %-10s %s\n", m.value("id", std::string("-")).c_str(),
                human_bytes(m.value("memory_bytes", 0.0)).c_str(), where, m.value("backend", std::string("-")).c_str(),
                m.value("n_ctx", 0L), in_flight, in_flight > 0 ? "serving" : duration_text(m["idle_s"]).c_str(),
                unloading ? "now (unloading)"
                          : duration_text(m.contains("expires_in_s") ? m["expires_in_s"] : nlohmann::json()).c_str());
  }
  return kExitOk;
}

int run_load(const GlobalOptions& global, const std::string& model, const std::string& keep_alive) {
  Client client;
  if (!client.open(global)) return kExitError;
  const int rc = hearth_client_load_model(client.get(), model.c_str(), keep_alive.c_str());
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  std::printf("loaded %s\n", model.c_str());
  return kExitOk;
}

int run_unload(const GlobalOptions& global, const std::string& model) {
  Client client;
  if (!client.open(global)) return kExitError;
  const int rc = hearth_client_unload_model(client.get(), model.c_str());
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  std::printf("unloading %s (once its requests have ended)\n", model.c_str());
  return kExitOk;
}

}  // namespace hearth::cli
