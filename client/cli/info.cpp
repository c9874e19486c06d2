// hearth status and hearth models.
#include <cstdio>

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

int run_models(const GlobalOptions& global) {
  Client client;
  if (!client.open(global)) return kExitError;
  hearth_model_info* models = nullptr;
  size_t n_models = 0;
  int rc = hearth_client_list_models(client.get(), &models, &n_models);
  if (rc != HEARTH_OK) return report_error(client.get(), rc);
  for (size_t i = 0; i < n_models; ++i) std::printf("%s\n", models[i].id);
  hearth_free(models);
  return kExitOk;
}

}  // namespace hearth::cli
