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
